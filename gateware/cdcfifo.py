#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Stream FIFO whose write side knows how full it is, across clock domains.

The streamer admits a datagram only when its buffer has room for all of it, so the writer
(detector clock) must know the buffer's level while the reader (PHY clock) empties it. Migen's
AsyncFIFO only says "writable"; this one is the same gray-pointer design and also decodes the
synchronised read pointer on the write side: `level` is exact in one domain and, across domains,
never lower than the true level (the reader's progress arrives a few cycles late), so admission
is safe. `sink.ready` is registered: exact for the writer's own writes, the reader's progress
seen a cycle later than in `level` (never optimistic).
"""

from functools import reduce
from operator import xor

from migen import *
from migen.genlib.cdc import MultiReg, GrayCounter

from litex.gen import *

from litex.soc.interconnect import stream

from ethdaq.gateware.bram import BlockRAM
from ethdaq.gateware.compare import below


class AheadGrayCounter(LiteXModule):
    """A counter (binary `q_binary` and gray `q`, registers; counts at `ce`) whose successor is
    kept in registers too, for the read side of a crossing: `differs` says whether `other` (a
    gray count of the same width, from the other side's flip-flops, which can only move away
    from this one) differs from the count, as a choice between the count's and its successor's
    comparisons with `other` made in the cycle before, picked by whether that cycle counted. No
    path runs from `ce` through a compare into `differs`."""
    def __init__(self, width):
        self.ce       = Signal()
        self.q_binary = Signal(width)
        self.q        = Signal(width)
        self.other    = Signal(width)
        self.differs  = Signal()

        # # #

        nxt_bin  = Signal(width, reset=1)
        nxt_gray = Signal(width, reset=1)
        inc      = Signal(width)
        neq0     = Signal()   # The count differed from `other`, in the cycle before.
        neq1     = Signal()   # Its successor did.
        took     = Signal()   # The cycle before counted.
        self.comb += [
            inc.eq(nxt_bin + 1),
            self.differs.eq(Mux(took, neq0 & neq1, neq0)),
        ]
        self.sync += [
            If(self.ce,
                self.q_binary.eq(nxt_bin),
                self.q.eq(nxt_gray),
                nxt_bin.eq(inc),
                nxt_gray.eq(inc ^ inc[1:]),
            ),
            neq0.eq(self.q != self.other),
            neq1.eq(nxt_gray != self.other),
            took.eq(self.ce),
        ]


class GrayDecoder2(LiteXModule):
    """Gray code `i` to binary `o` in two registered stages (`o` two cycles after `i`), one LUT4
    level each: first each bit's XOR with the bits above it within its group of four, and each
    group's parity; then each bit's group result with the parities of the groups above.

    Migen's GrayDecoder (`o[k] = o[k+1] ^ i[k]`, one register) is the same function, and Yosys'
    abc9 maps it as written: one LUT per bit in series (9 for a 10-bit pointer, 8.4 ns of the
    colorlight_i5's eth clock, whose period is 7.27 ns), because the design's longest path is
    elsewhere and the chain is the smallest mapping (docs/liteeth-notes.md). With a register
    between the two stages no mapping can be deeper than two LUTs (stage two has one input per
    group: four groups, 16 bits, fit one LUT4)."""
    def __init__(self, width):
        self.i = Signal(width)
        self.o = Signal(width)

        # # #

        groups = [list(range(lo, min(lo + 4, width))) for lo in range(0, width, 4)]
        within = Signal(width)    # i[k] ^ ... ^ i[top of k's group]; at a group's bottom, its parity.
        for bits in groups:
            for k in bits:
                self.sync += within[k].eq(reduce(xor, [self.i[j] for j in bits if j >= k]))
        for g, bits in enumerate(groups):
            above = [within[groups[h][0]] for h in range(g + 1, len(groups))]
            for k in bits:
                self.sync += self.o[k].eq(reduce(xor, [within[k]] + above))


def entry_bits(ep, framing=True):
    """What a FIFO entry stores of endpoint `ep`: its payload and parameters, and first/last if
    `framing`, as one value (read and written whole)."""
    parts = [ep.payload.raw_bits(), ep.param.raw_bits()] + ([ep.first, ep.last] if framing else [])
    return Cat(*[p for p in parts if len(p)])  # An empty Cat makes invalid Verilog.


def read_in_two_stages(module, ram, source, readable, cd):
    """The read side of a block RAM `ram` (gateware/bram.py, with_ce) shown on the stream `source`,
    in `module`, clock domain `cd`: stage a, the RAM's read stage, loads at `take` (the entry at the
    read address is `readable`, and stage a is empty or moves on); stage b, its output register,
    loads at `oce` (empty or read). Each stage has its own enable, so the pipeline runs at full
    throughput and stalls without loss. Returns `take`: the read address moves on with it."""
    take    = Signal()
    oce     = Signal()
    valid_a = Signal()
    valid_b = Signal()
    module.comb += [
        oce.eq(~valid_b | source.ready),
        take.eq(readable & (~valid_a | oce)),
        ram.read_ce.eq(take),
        ram.out_ce.eq(oce),
        source.valid.eq(valid_b),
    ]
    sync = getattr(module.sync, cd)
    sync += [
        If(take,
            valid_a.eq(1)
        ).Elif(oce,
            valid_a.eq(0)
        ),
        If(oce, valid_b.eq(valid_a)),
    ]
    return take


class LevelFIFO(LiteXModule):
    """`depth` entries (a power of two) of `layout`; sink in `cd_write`, source in `cd_read`.

    `level` (cd_write): entries written and not yet known to be read.
    `sink.ready` (cd_write): `level` < `depth`, from registers: decided in the cycle before from
    that cycle's level, with one more entry required if that cycle wrote one. Exact for writes,
    the reader's progress counted a cycle later than in `level` (conservative); no carry chain
    between `level` and the write pointer's enable.
    `consumed` (cd_write): entries known to be read since reset (wraps at 2*depth).

    Two read sides:

    - `buffered=False` (small FIFOs, distributed RAM): the entry at the read pointer is read
      asynchronously (first-word fall-through) and shown from the cycle after the writer's
      pointer is seen to have passed it (`readable` is registered).
    - `buffered=True` (block RAM): the RAM's read is a two-stage pipeline, the RAM's own output
      latch and an output register (on ECP5, the block RAM's output register: without it its
      clock-to-out alone is 5.8 ns, most of a 137.5 MHz cycle, see docs/results.md). Each stage
      has its own enable, so the pipeline runs at full throughput and stalls without loss. The
      read address is a register and `readable` a one-LUT function of registers, so no path runs from
      `source.ready` or the other side's pointer into the RAM's address. An entry is shown two
      cycles later than with `buffered=False`. Entries in the two stages no longer count in
      `level` (they have left the RAM), so two more entries fit.

    `reader_faster=True` (buffered, two clocks): the reader is shown the write pointer of the
    entries already in the RAM, one write cycle after `produce` moves. The buffered write is
    registered, so it lands a write cycle after the pointer moves, while the reader reads the
    entry three of its own cycles after it sees the pointer move (two synchroniser flip-flops,
    the registered `readable`). A reader about three times as fast or more reads the entry
    before it is there (Migen: whole at 24 ns against 8, all zeros at 30 and at 40 ns against 8:
    the PTP records of a 100 Mb/s board, test/gateware/test_cdcfifo.py). Off, the netlist is what it was
    for the boards whose reader is slower or at most about twice as fast (the ECP5 boards' sys
    into eth_tx: 60 into 125 MHz).

    `framing=False`: `first`/`last` are not stored (always 0 at the source); for users that do
    not use them, it saves their RAM bits (an 18-bit entry would take twice the ECP5 block RAMs of
    a 16-bit one, and a multiplexer behind them).

    The buffered RAM is gateware/bram.py's BlockRAM: DP16KD blocks with their output register on
    ECP5 builds (the platform lowers it), a Memory and a fabric register elsewhere; both behave
    the same, cycle for cycle. `with_dp16kd=False`: a Memory and a fabric register on the ECP5
    too (wide entries in half the block RAMs, for a slow read clock; see BlockRAM).
    """
    def __init__(self, layout, depth, cd_write="sys", cd_read="sys", buffered=False, framing=True, with_dp16kd=True,
                 reader_faster=False):
        self.sink   = sink   = stream.Endpoint(layout)
        self.source = source = stream.Endpoint(layout)
        self.level    = Signal(max=depth + 1)
        self.consumed = Signal(log2_int(depth) + 1)

        # # #

        bits = log2_int(depth)  # Raises for a depth that is not a power of two.
        same = cd_write == cd_read
        produce = ClockDomainsRenamer(cd_write)(GrayCounter(bits + 1))
        self.submodules += produce

        # Read pointer: binary and gray (registers) and the read enable `take`.
        rd_bin  = Signal(bits + 1)
        rd_gray = Signal(bits + 1)
        take    = Signal()
        # The pointer's successor is kept in registers too, so `readable` is a choice between two
        # registered comparisons with the writer's pointer (AheadGrayCounter): no path runs from
        # that pointer through a comparison and `take` into the read pointer (on the streamer's
        # descriptor FIFO, 7 LUT levels, the colorlight_i5's eth critical path with one seed).
        consume = ClockDomainsRenamer(cd_read)(AheadGrayCounter(bits + 1))
        self.submodules += consume
        self.comb += [
            rd_bin.eq(consume.q_binary),
            rd_gray.eq(consume.q),
            consume.ce.eq(take),
        ]

        # Pointers seen from the other side (two flip-flops when the clocks differ).
        produce_r = Signal(bits + 1)
        consume_w = Signal(bits + 1)
        if same:
            self.comb += [produce_r.eq(produce.q), consume_w.eq(rd_gray)]
        else:
            crossed = produce.q
            if buffered and reader_faster:
                crossed = Signal(bits + 1)
                sync_crossed = getattr(self.sync, cd_write)
                sync_crossed += crossed.eq(produce.q)  # Updated with the RAM's registered write.
            crossed.attr.add("no_retiming")
            rd_gray.attr.add("no_retiming")
            self.specials += [
                MultiReg(crossed, produce_r, cd_read),
                MultiReg(rd_gray, consume_w, cd_write),
            ]
        self.comb += consume.other.eq(produce_r)
        consume_w_bin = Signal(bits + 1)
        if same:
            self.comb += consume_w_bin.eq(rd_bin)
        else:
            decoder = ClockDomainsRenamer(cd_write)(GrayDecoder2(bits + 1))
            self.submodules += decoder
            # The decoder's two registers: two more cycles of pessimism, never optimism.
            self.comb += [decoder.i.eq(consume_w), consume_w_bin.eq(decoder.o)]

        # `writable`: the level can only have grown by this cycle's write since it was compared,
        # so the comparison with one entry to spare is exact when it wrote, the plain one when not.
        writable = Signal()
        lt0      = Signal(reset=1)              # level < depth (in the cycle before).
        lt1      = Signal(reset=int(depth > 1)) # level < depth - 1.
        wrote    = Signal()
        sync_write = getattr(self.sync, cd_write)
        self.comb += [
            self.level.eq((produce.q_binary - consume_w_bin)[:bits + 1]),
            self.consumed.eq(consume_w_bin),
            writable.eq(Mux(wrote, lt1, lt0)),
            produce.ce.eq(sink.valid & writable),
            sink.ready.eq(writable),
        ]
        sync_write += [
            lt0.eq(below(self.level, depth)),
            lt1.eq(below(self.level, depth - 1)),
            wrote.eq(produce.ce),
        ]

        # Storage: whole endpoint payload (data fields, and first/last if `framing`) per entry.
        payload, out = entry_bits(sink, framing), entry_bits(source, framing)
        if buffered:
            # `readable`: the RAM holds an entry at the read pointer, from the comparisons of the
            # last cycle's pointer and the next one with the other side's pointer then (which can
            # only have moved on since), chosen by whether the last cycle took an entry.
            readable = Signal()
            self.comb += readable.eq(consume.differs)
            # The write is registered (one cycle late: the reader sees the entry two or more
            # cycles after `produce` moves): the block RAM's write enable and address then come
            # from flip-flops, not from the writer's admission logic. The RAM (gateware/bram.py)
            # is the two stages: its read stage loads at `take`, its output register at `oce`
            # (on ECP5, DP16KD's output register).
            self.ram = ram = BlockRAM(len(payload), depth, cd_write=cd_write, cd_read=cd_read, with_ce=True,
                with_dp16kd=with_dp16kd)
            sync_write += [ram.wadr.eq(produce.q_binary[:bits]), ram.wdata.eq(payload), ram.we.eq(produce.ce)]
            self.comb += [
                take.eq(read_in_two_stages(self, ram, source, readable, cd_read)),
                ram.radr.eq(rd_bin[:bits]),
                out.eq(ram.rdata),
            ]
        else:
            readable = Signal()
            storage = Memory(len(payload), depth)
            wrport  = storage.get_port(write_capable=True, clock_domain=cd_write)
            rdport  = storage.get_port(async_read=True)
            self.specials += storage, wrport, rdport
            self.comb += [
                wrport.adr.eq(produce.q_binary[:bits]),
                wrport.dat_w.eq(payload),
                wrport.we.eq(produce.ce),
                readable.eq(consume.differs),
                take.eq(source.ready & readable),
                rdport.adr.eq(rd_bin[:bits]),
                out.eq(rdport.dat_r),
                source.valid.eq(readable),
            ]
