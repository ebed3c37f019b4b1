"""Block RAM with a registered output (gateware/bram.py).

- The default lowering in Migen simulation against a Python model: random writes and reads with
  random stalls of each read register, in one clock domain and across two.
- BlockRAMFIFO cycle for cycle against what it replaces in the frame gate: LiteX's buffered
  SyncFIFO with a register after its source.
- The ECP5 lowering: DP16KD instances with the output register, the data width per block for
  the depth, address bits where yosys' brams_map_16kd.v puts them, the data tiled across blocks;
  the ECP5 platform applies it, the simulation platform and Migen's simulator do not.
- yosys and nextpnr take the DP16KD instances (synth_ecp5, place and route of a small design);
  bench/bram_timing.py measures the clock-to-data against an inferred Memory.
"""

import random
import re
from pathlib import Path

import pytest
from migen import *
from migen.fhdl.specials import Instance
from migen.fhdl.structure import _Assign, _Slice
from migen.fhdl.tools import lower_specials
from migen.sim import passive, run_simulation

from litex.gen import LiteXContext, LiteXModule
from litex.gen.fhdl.verilog import convert
from litex.soc.interconnect import stream

from ethdaq.gateware.bram import BlockRAM, BlockRAMFIFO, ecp5_dp16kd_geometry, ecp5_special_overrides


@pytest.fixture(autouse=True)
def _no_soc_in_context():
    """LiteX's Verilog export heads its output with the hierarchy of LiteXContext.top, the last
    SoC created in the process, not of the module it converts: after a board build in the same
    session (test_build_ecp5) that header lists DP16KDs of that SoC. The tests here convert
    small designs of their own; they see only those."""
    saved, LiteXContext.top = LiteXContext.top, None
    yield
    LiteXContext.top = saved


REPO = Path(__file__).resolve().parents[2]


# Default lowering against a model ------------------------------------------------------------------

def _ram_sim(width, depth, cycles, seed, clocks, with_dp16kd=True):
    """Random writes (domain "wr") and reads (domain "rd") with random enables. The writer keeps
    to addresses in the lower half once the upper half is written, the reader reads the upper
    half then, so no address is read while it may be written (undefined across clocks)."""
    dut = BlockRAM(width, depth, cd_write="wr", cd_read="rd", with_ce=True, with_dp16kd=with_dp16kd)
    rng = random.Random(seed)
    mem = [0]*depth
    upper_done = [False]
    half = depth // 2
    checked = [0]

    @passive
    def writer():
        # The upper half first, then random writes to the lower half.
        for a in range(half, depth):
            v = rng.getrandbits(width)
            yield dut.we.eq(1); yield dut.wadr.eq(a); yield dut.wdata.eq(v)
            yield
            mem[a] = v
        upper_done[0] = True
        while True:
            we = rng.random() < 0.6
            a, v = rng.randrange(half), rng.getrandbits(width)
            yield dut.we.eq(we); yield dut.wadr.eq(a); yield dut.wdata.eq(v)
            yield
            if we:
                mem[a] = v

    def reader():
        stage, out = None, 0   # Model: the read stage, the output register.
        while not upper_done[0]:
            yield
        for _ in range(3):     # The last writes land (the writer may run on a faster clock).
            yield
        for _ in range(cycles):
            a = rng.randrange(half, depth)
            rce, oce = rng.random() < 0.7, rng.random() < 0.7
            yield dut.radr.eq(a); yield dut.read_ce.eq(rce); yield dut.out_ce.eq(oce)
            yield
            # Migen's simulator: what a generator reads after a `yield` is from before that
            # clock edge, so the model's output of the previous edge.
            if out is not None:
                assert (yield dut.rdata) == out
                checked[0] += 1
            if oce:
                out = stage
            if rce:
                stage = mem[a]

    run_simulation(dut, {"wr": writer(), "rd": reader()}, clocks=clocks)
    return checked[0]


def test_default_lowering_reads_in_two_cycles_with_stalls_in_one_domain():
    assert _ram_sim(9, 64, 2000, seed=1, clocks={"wr": 10, "rd": 10}) > 1000


def test_default_lowering_reads_in_two_cycles_with_stalls_across_two_domains():
    assert _ram_sim(18, 128, 2000, seed=2, clocks={"wr": 7, "rd": 10}) > 1000
    assert _ram_sim(5, 32, 2000, seed=3, clocks={"wr": 13, "rd": 6}) > 1000


def test_a_ram_left_to_yosys_reads_the_same_way():
    """with_dp16kd=False: the same two-stage read, cycle for cycle (only the ECP5 lowering differs)."""
    assert _ram_sim(36, 64, 2000, seed=4, clocks={"wr": 7, "rd": 10}, with_dp16kd=False) > 1000


def test_read_and_write_in_one_domain_with_a_plain_sequence():
    """Latency pinned: radr in cycle t, rdata in t+2; each register holds while disabled."""
    dut = BlockRAM(8, 16, with_ce=True)
    seen = []

    def gen():
        for a in range(16):
            yield dut.we.eq(1); yield dut.wadr.eq(a); yield dut.wdata.eq(0x10 + a)
            yield
        yield dut.we.eq(0)
        yield dut.read_ce.eq(1); yield dut.out_ce.eq(1)
        for a in (3, 4, 5, 6):
            yield dut.radr.eq(a)
            yield
            seen.append((yield dut.rdata))
        yield dut.read_ce.eq(0); yield dut.out_ce.eq(0)   # Both hold (whatever the address).
        yield dut.radr.eq(9)
        for _ in range(3):
            yield
            seen.append((yield dut.rdata))
        yield dut.out_ce.eq(1)                            # The read stage (6) moves out.
        yield
        seen.append((yield dut.rdata))
        yield
        seen.append((yield dut.rdata))

    run_simulation(dut, gen())
    # rdata after the edge ending cycle t: the word addressed in cycle t-1.
    # What a generator reads after a `yield` is from before that clock edge: the word addressed
    # two yields earlier.
    assert seen == [0, 0, 0x13, 0x14, 0x15, 0x15, 0x15, 0x15, 0x16]


# FIFO against LiteX's buffered SyncFIFO and a register ---------------------------------------------

class _Reference(Module):
    """What the frame gate had: stream.SyncFIFO(buffered=True) and a register after its source."""
    def __init__(self, layout, depth):
        self.submodules.fifo = fifo = stream.SyncFIFO(layout, depth, buffered=True)
        self.sink   = fifo.sink
        self.source = source = stream.Endpoint(layout)
        self.level  = fifo.level
        take = Signal()
        self.comb += [take.eq(~source.valid | source.ready), fifo.source.ready.eq(take)]
        self.sync += If(take,
            source.valid.eq(fifo.source.valid),
            source.data.eq(fifo.source.data),
            source.last.eq(fifo.source.last),
        )


@pytest.mark.parametrize("depth,wp,rp,seed", [(16, 0.9, 0.3, 1), (16, 0.3, 0.9, 2), (64, 0.7, 0.7, 3),
                                              (8, 0.8, 0.5, 4), (2, 0.6, 0.6, 5)])
def test_fifo_is_cycle_for_cycle_the_buffered_syncfifo_and_a_register(depth, wp, rp, seed):
    class Top(Module):
        def __init__(self):
            self.submodules.ref = _Reference([("data", 8)], depth)
            self.submodules.dut = BlockRAMFIFO([("data", 8)], depth)
    top = Top()
    rng = random.Random(seed)
    counts = {"in": 0, "out": 0}

    def gen():
        for cycle in range(3000):
            v, d, l, r = rng.random() < wp, rng.getrandbits(8), rng.random() < 0.2, rng.random() < rp
            for f in (top.ref, top.dut):
                yield f.sink.valid.eq(v); yield f.sink.data.eq(d); yield f.sink.last.eq(l)
                yield f.source.ready.eq(r)
            yield
            a, b = [], []
            for f, s in ((top.ref, a), (top.dut, b)):
                for x in (f.sink.ready, f.source.valid, f.level):
                    s.append((yield x))
                if (yield f.source.valid):
                    s.append((yield f.source.data))
                    s.append((yield f.source.last))
            assert a == b, (cycle, a, b)
            counts["in"]  += v and a[0]
            counts["out"] += r and a[1]

    run_simulation(top, gen())
    assert counts["in"] > 500 and counts["out"] > 500


# ECP5 lowering --------------------------------------------------------------------------------------

def _lowered_instances(width, depth, cd_write="sys", cd_read="sys"):
    ram = BlockRAM(width, depth, cd_write=cd_write, cd_read=cd_read, with_ce=True)
    f, lowered = lower_specials(ecp5_special_overrides, ram.get_fragment())
    assert not any(isinstance(s, Memory) for s in f.specials)   # The array went into the DP16KDs.
    insts = [s for s in f.specials if isinstance(s, Instance)]
    return ram, f, insts


def _pins(inst):
    params = {i.name: i.value for i in inst.items if isinstance(i, Instance.Parameter)}
    ins    = {i.name: i.expr  for i in inst.items if isinstance(i, Instance.Input)}
    outs   = {i.name: i.expr  for i in inst.items if isinstance(i, Instance.Output)}
    return params, ins, outs


def _bit(e):
    """(signal, bit) of a one-bit pin expression, or its constant value."""
    if isinstance(e, Constant):
        return e.value
    if isinstance(e, Signal):
        assert len(e) == 1
        return (e, 0)
    assert e.stop - e.start == 1, e
    return (e.value, e.start)


def test_fifo_depth_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        BlockRAMFIFO([("data", 8)], 5)


@pytest.mark.parametrize("width,depth,dw,blocks", [
    (9, 2048, 9, 1), (8, 1024, 18, 1), (36, 1000, 18, 2), (10, 2048, 9, 2), (1, 16384, 1, 1),
    (3, 4096, 4, 1), (5, 8192, 2, 3), (18, 512, 18, 1)])
def test_ecp5_lowering_wires_dp16kd_with_the_output_register(width, depth, dw, blocks):
    assert ecp5_dp16kd_geometry(width, depth)[::2] == (dw, blocks)
    ram, f, insts = _lowered_instances(width, depth)
    assert len(insts) == blocks and all(i.of == "DP16KD" for i in insts)
    k = {1: 0, 2: 1, 4: 2, 9: 3, 18: 4}[dw]
    abits = len(ram.wadr)
    data_bits = set()
    for inst in insts:
        params, ins, outs = _pins(inst)
        assert params["DATA_WIDTH_A"] == dw and params["DATA_WIDTH_B"] == dw
        assert params["REGMODE_B"] == "OUTREG" and params["REGMODE_A"] == "NOREG"
        assert params["CSDECODE_A"] == params["CSDECODE_B"] == "0b000"
        assert params["RESETMODE"] == "SYNC"
        # Every DP16KD input is driven (cells_sim_ecp5.v's port list), no output but DOB.
        names = ([f"{p}{i}" for p in ("DIA", "DIB") for i in range(18)]
                 + [f"{p}{i}" for p in ("ADA", "ADB") for i in range(14)]
                 + [f"{p}{x}" for x in "AB" for p in ("CE", "OCE", "CLK", "WE", "RST")]
                 + [f"CS{x}{i}" for x in "AB" for i in range(3)])
        assert sorted(ins) == sorted(names)
        assert sorted(outs) == sorted(f"DOB{i}" for i in range(18))
        # Control: write port A, read port B.
        assert _bit(ins["WEA"]) == (ram.we, 0) and _bit(ins["WEB"]) == 0
        assert _bit(ins["CEA"]) == 1 and _bit(ins["OCEA"]) == 1
        assert _bit(ins["CEB"]) == (ram.read_ce, 0) and _bit(ins["OCEB"]) == (ram.out_ce, 0)
        assert _bit(ins["RSTA"]) == 0 and _bit(ins["RSTB"]) == 0
        assert all(_bit(ins[f"CS{x}{i}"]) == 0 for x in "AB" for i in range(3))
        # Addresses: the word address on AD[13:k]; below it 0, but for x18's write byte enables.
        for i in range(14):
            a, b = _bit(ins[f"ADA{i}"]), _bit(ins[f"ADB{i}"])
            if i < k:
                assert a == (1 if dw == 18 and i < 2 else 0) and b == 0, i
            elif i - k < abits:
                assert a == (ram.wadr, i - k) and b == (ram.radr, i - k), i
            else:
                assert a == 0 and b == 0, i
        # Data: DI[w-1:0] from a slice of wdata, the rest 0; DOB into the same slice of rdata.
        lo = None
        for i in range(18):
            d = _bit(ins[f"DIA{i}"])
            assert _bit(ins[f"DIB{i}"]) == 0
            if d != 0:
                assert i < dw and d[0] is ram.wdata
                lo = d[1] - i if lo is None else lo
                assert d[1] == lo + i
                data_bits.add(d[1])
    assert data_bits == set(range(width))


def test_ecp5_lowering_reads_back_what_was_written_in_the_right_bits():
    """The DOB pins of each block drive the slice of rdata whose wdata bits went into its DIA."""
    ram, f, insts = _lowered_instances(20, 1024)   # Two x18 blocks: bits 0-17 and 18-19.
    dob = {}
    for inst in insts:
        params, ins, outs = _pins(inst)
        lo = _bit(ins["DIA0"])[1]
        dob[lo] = outs["DOB0"]
    # rdata[lo + i] is assigned from that block's DOB bus bit i.
    assigns = {}
    for stmt in f.comb:
        if isinstance(stmt, _Assign) and isinstance(stmt.l, _Slice) and stmt.l.value is ram.rdata:
            assigns[stmt.l.start] = stmt.r
    for lo, pin in dob.items():
        bus = _bit(pin)[0]
        assert assigns[lo].value is bus and assigns[lo].start == 0


def test_ecp5_lowering_refuses_a_ram_deeper_than_one_row():
    with pytest.raises(ValueError, match="one row of DP16KD"):
        _lowered_instances(1, 16385)


def test_ecp5_lowering_clocks_each_port_from_its_domain_after_renaming():
    ram = ClockDomainsRenamer({"sys": "eth_rx", "other": "eth_tx"})(
        BlockRAM(9, 2048, cd_write="other", cd_read="sys"))
    frag = ram.get_fragment()
    f, _ = lower_specials(ecp5_special_overrides, frag)
    inst, = [s for s in f.specials if isinstance(s, Instance)]
    params, ins, outs = _pins(inst)
    assert ins["CLKA"].cd == "eth_tx" and ins["CLKB"].cd == "eth_rx"


class _Top(Module):
    def __init__(self, **kw):
        self.clock_domains.cd_sys = ClockDomain()
        self.submodules.ram = ram = BlockRAM(9, 2048, **kw)
        self.ios = {ram.we, ram.wadr, ram.wdata, ram.radr, ram.rdata, self.cd_sys.clk, self.cd_sys.rst}


def test_the_array_is_not_a_memory_for_the_cpu_bus():
    """A Memory attribute of a LiteXModule is what LiteX's AutoCSR maps onto the CPU's bus (with
    a third port): the RAM and the FIFO on it keep theirs out of sight, and the exported array
    has exactly the RAM's two ports."""
    class _Host(LiteXModule):
        def __init__(self):
            self.ram  = BlockRAM(9, 2048)
            self.fifo = BlockRAMFIFO([("data", 8)], 512)
    assert _Host().get_memories() == []
    top = _Top()
    v = str(convert(top, ios=top.ios, name="top").main_source)
    ports = re.findall(r"^// Port \d+ \| Read: \w+ +\| Write: (\S+)", v, re.M)
    assert sorted(ports) == ["----", "Sync"], ports     # one write port, one read port


def test_verilog_export_by_default_is_a_memory_and_a_register():
    top = _Top()
    v = str(convert(top, ios=top.ios, name="top").main_source)
    assert "DP16KD" not in v
    assert re.search(r"reg \[8:0\] \w+\[0:2047\];", v)


def test_simulation_platform_uses_the_default_lowering():
    from litex.build.sim.common import sim_special_overrides
    top = _Top()
    v = str(convert(top, ios=top.ios, name="top", special_overrides=sim_special_overrides).main_source)
    assert "DP16KD" not in v and re.search(r"reg \[8:0\] \w+\[0:2047\];", v)


def test_ecp5_platform_lowers_to_dp16kd_with_the_output_register():
    from ethdaq.boards.colorlight_i5 import Board
    platform = Board.platform()
    top = _Top()
    clk = platform.request(platform.default_clk_name)
    top.comb += top.cd_sys.clk.eq(clk)
    v = str(platform.get_verilog(top, name="top").main_source)
    assert v.count("DP16KD #(") == 1 and '.REGMODE_B           ("OUTREG")' in v
    assert not re.search(r"reg \[8:0\] \w+\[0:2047\];", v)


def test_ecp5_platform_leaves_a_ram_without_dp16kd_to_yosys():
    """with_dp16kd=False: no DP16KD instance, the array a Verilog memory (Yosys maps it), the
    output register in the fabric."""
    from ethdaq.boards.colorlight_i5 import Board
    platform = Board.platform()
    top = _Top(with_dp16kd=False)
    clk = platform.request(platform.default_clk_name)
    top.comb += top.cd_sys.clk.eq(clk)
    v = str(platform.get_verilog(top, name="top").main_source)
    assert "DP16KD" not in v and re.search(r"reg \[8:0\] \w+\[0:2047\];", v)


# yosys and nextpnr --------------------------------------------------------------------------------

def test_yosys_and_nextpnr_take_the_dp16kd_instances():
    """A 2048 x 9 BlockRAM between registers: synth_ecp5 keeps one DP16KD with OUTREG, nextpnr
    places and routes it, and the RAM's clock-to-data is the output register's (bench/bram_timing.py
    prints it against an inferred Memory)."""
    from bench.bram_timing import build
    r = build(REPO / "build" / "test_bram", "blockram", seed=1)
    assert r["dp16kd"] == 1
    assert r["regmode_b"] == ["OUTREG"]
    assert r["clk_to_data"] < 3.0, r
