#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Block RAM with a registered output, and a stream FIFO on it.

Yosys maps every inferred block RAM of the ECP5 to DP16KD with REGMODE="NOREG": the read data
then comes straight from the RAM array, 5.8 ns after the clock on a LFE5U-25F-6, and with any
logic after it a read does not fit a 137.5 MHz cycle. DP16KD has an output register
(REGMODE="OUTREG") that takes the array's read data in the next cycle and leaves the RAM a
short clock-to-data later, for one more cycle of read latency. Yosys cannot infer it, so
`BlockRAM` gives it: a simple dual-port RAM whose read takes two cycles (a synchronous read,
then an output register), the same on every FPGA and in simulation, and on the ECP5 made of
DP16KD primitives with that register.

How it is lowered, the LiteX way (as AsyncResetSynchronizer or the DDR primitives): `BlockRAM`
holds two specials, the array (`_BlockRAMArray`, a Migen Memory) and its read stage
(`_BlockRAMRead`: output register, signals of both ports). By default the array stays a Memory
(Migen's simulator turns it into registers before it lowers specials, LiteX's Verilog export
writes it as a Verilog array that Verilator runs and Vivado or yosys infer) and the read stage
lowers to a register after the Memory's read port. `ecp5_special_overrides` (registered on
boards/platform.py's ECP5BoardPlatform; pass it to a Verilog conversion without a platform)
lowers the array to nothing and the read stage to DP16KD instances that hold the array and the
register. The two are one RAM: give both overrides or neither.

DP16KD wiring, checked by reading (no DP16KD simulation model exists: yosys' cells_sim_ecp5.v
declares DP16KD a blackbox, and nextpnr has none): port names against the DP16KD module in
yosys' share/lattice/cells_sim_ecp5.v (cells_bb_ecp5.v has no DP16KD), every connection against
how yosys itself wires DP16KD in share/lattice/brams_map_16kd.v (and Lattice TN1264):

- DATA_WIDTH 1/2/4/9/18, the narrowest whose 16 kbit holds `depth` words: the word address on
  AD[13:k] with k = 0/1/2/3/4, low address bits 0 (brams_map_16kd.v passes yosys' 14-bit
  address with the low bits zero; x18 alone puts the write port's byte enables on AD[1:0]:
  both set to 1 on the write port, 0 on the read port where they mean nothing); data on
  DI[w-1:0]/DO[w-1:0] (brams_map_16kd.v: `DIA = PORT_A_WR_DATA`, zero-extended);
- write port A: CLKA, WEA = write enable, CEA = 1, OCEA = 1, RSTA = 0, CSA = 0;
- read port B: CLKB, WEB = 0, CEB = the read's clock enable (array into the read stage),
  OCEB = the output register's clock enable, RSTB = 0, CSB = 0, REGMODE_B = "OUTREG";
- CSDECODE "0b000", RESETMODE/ASYNC_RESET_RELEASE "SYNC", WRITEMODE "NORMAL", GSR "AUTO" and
  CLKxMUX as brams_map_16kd.v sets them. test/gateware/test_bram.py checks the lowered instances'
  parameters and address and data wiring, and that yosys and nextpnr take them.
"""

from migen import *
from migen.fhdl.specials import Special, Memory

from litex.gen import *

from litex.soc.interconnect import stream

__all__ = ["BlockRAM", "BlockRAMFIFO", "ecp5_special_overrides", "ecp5_dp16kd_geometry"]


# RAM ----------------------------------------------------------------------------------------------

class BlockRAM(LiteXModule):
    """Simple dual-port RAM of `depth` words of `width` bits: write port in `cd_write`, read port in
    `cd_read` (the same domain or another one).

    Write: `wdata` to `wadr` where `we` is set, at the clock edge.
    Read: `radr` presented in cycle t gives `rdata` in cycle t+2, as two registers: the read
    stage takes the array's word at `radr` at the edge ending a cycle where `read_ce` is set, the
    output register (`rdata`) takes the read stage at the edge ending a cycle where `out_ce` is
    set; each holds while its enable is clear. A FIFO needs the two apart: its output holds while
    the consumer stalls, and meanwhile the next word may already come into the read stage
    (`read_ce = ~stage_valid | out_ce`), so the FIFO loses no cycle when the consumer resumes.
    Without `with_ce` both are always set.

    A read of an address in the cycle it is written (from the same or the other clock) gives
    an undefined word: DP16KD does not define it across ports, so do not rely on the Memory's
    behaviour either. Contents start at 0; the output register is not reset.

    `with_dp16kd=False` keeps the same two-stage read everywhere but leaves the array to Yosys on
    the ECP5 (its output register then in the fabric): Yosys packs wide words into 36-bit
    PDPW16KD, twice as dense as the DP16KD this module builds (at most 18 bits wide), and the
    array's read data comes straight from it, 5.8 ns after the read clock. For read sides whose
    clock has that time to spare (a 142-bit record FIFO read in sys: 4 block RAMs, not 8).
    """
    def __init__(self, width, depth, cd_write="sys", cd_read="sys", with_ce=False, with_dp16kd=True):
        if depth < 2:
            raise ValueError(f"depth must be at least 2, not {depth!r}")
        self.width, self.depth = width, depth
        self.we      = Signal()
        self.wadr    = Signal(max=depth)
        self.wdata   = Signal(width)
        self.radr    = Signal(max=depth)
        self.read_ce = Signal()
        self.out_ce  = Signal()
        self.rdata   = Signal(width, reset_less=True)

        # # #

        if not with_ce:
            self.comb += [self.read_ce.eq(1), self.out_ce.eq(1)]

        # Not an attribute: LiteX's AutoCSR would take a Memory attribute for a CSR-mapped memory
        # and give it a third port (the CPU's), which no block RAM has.
        array = (_BlockRAMArray if with_dp16kd else _InferredBlockRAMArray)(width, depth)
        self.specials += array
        wport = array.get_port(write_capable=True, clock_domain=cd_write)
        # Read-first: the read stage is a data register (LiteX writes other sync reads as an
        # address register, whose data would change when the word is written while it holds).
        rport = array.get_port(has_re=True, mode=READ_FIRST, clock_domain=cd_read)
        self.specials += wport, rport
        self.comb += [
            wport.adr.eq(self.wadr),
            wport.dat_w.eq(self.wdata),
            wport.we.eq(self.we),
            rport.adr.eq(self.radr),
            rport.re.eq(self.read_ce),
        ]
        self.specials.read = (_BlockRAMRead if with_dp16kd else _InferredBlockRAMRead)(self, rport.dat_r, cd_write, cd_read)


class _BlockRAMArray(Memory):
    """BlockRAM's array: a Memory (Migen's simulator and LiteX's Verilog export take it as one),
    of its own class so that a platform can lower it with the read stage."""


class _BlockRAMRead(Special):
    """BlockRAM's read stage: what the default lowering registers (the array's read port data
    into `rdata`) and what a platform's lowering needs to build the whole RAM."""
    def __init__(self, ram, array_rdata, cd_write, cd_read):
        Special.__init__(self)
        self.width, self.depth = ram.width, ram.depth
        # Domain names for the lowerings (LiteX's export has replaced ClockSignals by then).
        self.cd_write    = cd_write
        self.cd_read     = cd_read
        self.clk_w       = ClockSignal(cd_write)
        self.clk_r       = ClockSignal(cd_read)
        self.we          = ram.we
        self.wadr        = ram.wadr
        self.wdata       = ram.wdata
        self.radr        = ram.radr
        self.read_ce     = ram.read_ce
        self.out_ce      = ram.out_ce
        self.rdata       = ram.rdata
        self.array_rdata = array_rdata

    def iter_expressions(self):
        for attr in ("clk_w", "clk_r", "we", "wadr", "wdata", "radr", "read_ce", "out_ce",
                     "array_rdata"):
            yield self, attr, SPECIAL_INPUT
        yield self, "rdata", SPECIAL_OUTPUT

    def rename_clock_domain(self, old, new):
        Special.rename_clock_domain(self, old, new)
        self.cd_write = new if self.cd_write == old else self.cd_write
        self.cd_read  = new if self.cd_read  == old else self.cd_read

    @staticmethod
    def lower(dr):
        return ClockDomainsRenamer(dr.cd_read)(_BlockRAMOutputRegister(dr))


class _BlockRAMOutputRegister(Module):
    def __init__(self, dr):
        self.sync += If(dr.out_ce, dr.rdata.eq(dr.array_rdata))


# Subclasses, so that ecp5_special_overrides (looked up by exact class) leaves them to the default
# lowering: a Memory for Yosys to map, and a fabric output register.
class _InferredBlockRAMArray(_BlockRAMArray):
    pass


class _InferredBlockRAMRead(_BlockRAMRead):
    pass


# ECP5 ---------------------------------------------------------------------------------------------

# DP16KD data widths, and the low address bits each leaves unused (16 kbit in all, x9 and x18
# with parity bits).
_DP16KD_WIDTHS = ((1, 0), (2, 1), (4, 2), (9, 3), (18, 4))


def ecp5_dp16kd_geometry(width, depth):
    """(data width per DP16KD, low address bits unused, number of DP16KDs) for a RAM of `depth`
    words of `width` bits in one row of DP16KDs side by side."""
    for w, k in reversed(_DP16KD_WIDTHS):
        if depth <= 1 << (14 - k):
            return w, k, -(-width // w)
    raise ValueError(f"BlockRAM on the ECP5: {depth} words do not fit one row of DP16KD "
                     f"(at most 16384, as 16384 x 1); split the RAM")


class _ECP5BlockRAMArray:
    @staticmethod
    def lower(dr):
        return Module()   # The array is in the DP16KDs of the read stage's lowering.


class _ECP5BlockRAMRead:
    @staticmethod
    def lower(dr):
        return _ECP5BlockRAM(dr)


class _ECP5BlockRAM(Module):
    def __init__(self, dr):
        w, k, n = ecp5_dp16kd_geometry(dr.width, dr.depth)
        # Pins bit by bit (Instance pins take a Signal's bit or a constant; no Cat slices).
        def bit(s, i):
            return s[i] if i < len(s) else 0
        # x18 writes by bytes: AD[1:0] of the write port are its byte enables (both bytes).
        wlow = [1, 1, 0, 0] if w == 18 else [0]*k
        for b in range(n):
            lo, hi = b*w, min((b + 1)*w, dr.width)
            do = Signal(18)
            ports = dict(
                p_DATA_WIDTH_A = w,
                p_DATA_WIDTH_B = w,
                p_REGMODE_A    = "NOREG",
                p_REGMODE_B    = "OUTREG",
                p_RESETMODE    = "SYNC",
                p_ASYNC_RESET_RELEASE = "SYNC",
                p_CSDECODE_A   = "0b000",
                p_CSDECODE_B   = "0b000",
                p_WRITEMODE_A  = "NORMAL",
                p_WRITEMODE_B  = "NORMAL",
                p_CLKAMUX      = "CLKA",
                p_CLKBMUX      = "CLKB",
                p_GSR          = "AUTO",
                # Write port.
                i_CLKA = dr.clk_w,
                i_WEA  = dr.we,
                i_CEA  = 1,
                i_OCEA = 1,
                i_RSTA = 0,
                # Read port: CEB moves the array's word into the read stage, OCEB the read stage
                # into the output register.
                i_CLKB = dr.clk_r,
                i_WEB  = 0,
                i_CEB  = dr.read_ce,
                i_OCEB = dr.out_ce,
                i_RSTB = 0,
            )
            for i in range(3):
                ports[f"i_CSA{i}"] = 0
                ports[f"i_CSB{i}"] = 0
            for i in range(14):
                ports[f"i_ADA{i}"] = wlow[i] if i < k else bit(dr.wadr, i - k)
                ports[f"i_ADB{i}"] = 0       if i < k else bit(dr.radr, i - k)
            for i in range(18):
                ports[f"i_DIA{i}"] = bit(dr.wdata, lo + i) if lo + i < hi else 0
                ports[f"i_DIB{i}"] = 0
                ports[f"o_DOB{i}"] = do[i]
            self.specials += Instance("DP16KD", **ports)
            self.comb += dr.rdata[lo:hi].eq(do[:hi - lo])


ecp5_special_overrides = {
    _BlockRAMArray: _ECP5BlockRAMArray,
    _BlockRAMRead:  _ECP5BlockRAMRead,
}


# FIFO ---------------------------------------------------------------------------------------------

class BlockRAMFIFO(LiteXModule):
    """Stream FIFO of `depth` words on a BlockRAM, in one clock domain: its source is the RAM's
    output register, so nothing but that flip-flop is between the RAM array and the consumer.

    Stores the payload, the parameters and `last` (not `first`: `source.first` stays 0).
    Cycle for cycle as LiteX's `stream.SyncFIFO(layout, depth, buffered=True)` with a register
    after its source (as `take = ~valid | ready`): a word written in cycle t is at the source in
    cycle t+3 at the earliest, and `level` counts the words in the array and the read stage,
    not the one at the source (as the buffered FIFO's level does not count the register after
    it); at most `depth` + 2 words are inside. `depth` is a power of two.

    `with_ready=False`: `sink.ready` is 1 and every `valid` word is written, for a writer that
    keeps the room itself from `level` (the frame gate): the RAM's write enable is then the
    writer's flip-flops' logic, without the full comparison of the pointers (a carry chain).
    A write to a full FIFO would overwrite its oldest word; the writer must not make one.
    """
    def __init__(self, layout, depth, with_ready=True):
        if depth < 2 or depth & (depth - 1):
            raise ValueError(f"BlockRAMFIFO: depth must be a power of two (its pointers wrap), not {depth!r}")
        self.sink   = sink   = stream.Endpoint(layout)
        self.source = source = stream.Endpoint(layout)
        self.level  = Signal(max=depth + 2)
        self.full   = Signal()   # The array holds `depth` words.
        self.depth  = depth

        # # #

        # (No empty records in a Cat: Verilog has no empty concatenation.)
        fields = Cat(*[x for x in (sink.payload.raw_bits(), sink.param.raw_bits(), sink.last) if len(x)])
        out    = Cat(*[x for x in (source.payload.raw_bits(), source.param.raw_bits(), source.last) if len(x)])
        self.ram = ram = BlockRAM(len(fields), depth, with_ce=True)

        # Pointers with one bit more than the address: empty and full are comparisons of
        # flip-flops, and the consumer's `ready` (through `read`) reaches only the read pointer's
        # clock enable. A word counter updated from `read` put the consumer's `ready` chain in
        # front of its carry chain (the frame gate's, eth_rx's critical path in the colorlight_i5's
        # full SoC: 12 logic levels, 8.8 ns).
        bits  = log2_int(depth, need_pow2=False)
        wptr  = Signal(bits + 1)
        rptr  = Signal(bits + 1)
        count = Signal(bits + 1)         # Words in the array.
        empty = Signal()
        write = Signal()
        read  = Signal()                 # A word leaves the array for the read stage.
        stage_valid = Signal()           # The read stage holds a word.
        self.comb += [
            empty.eq(wptr == rptr),
            count.eq(wptr - rptr),
            self.full.eq((wptr[:bits] == rptr[:bits]) & (wptr[bits] != rptr[bits])),
            sink.ready.eq(~self.full if with_ready else 1),
            write.eq(sink.valid & sink.ready),
            ram.we.eq(write),
            ram.wadr.eq(wptr[:bits]),
            ram.wdata.eq(fields),
            # The output register moves when it is empty or taken, the read stage when it is
            # empty or moves on: as the buffered FIFO's stage and the register after it.
            ram.out_ce.eq(~source.valid | source.ready),
            ram.read_ce.eq(~stage_valid | ram.out_ce),
            read.eq(ram.read_ce & ~empty),
            ram.radr.eq(rptr[:bits]),
            out.eq(ram.rdata),
            self.level.eq(count + stage_valid),
        ]
        self.sync += [
            If(write, wptr.eq(wptr + 1)),
            If(read,  rptr.eq(rptr + 1)),
            If(ram.read_ce, stage_valid.eq(~empty)),
            If(ram.out_ce, source.valid.eq(stage_valid)),
        ]
