#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Whole frames across clock domains: a frame that finds no room is dropped whole and counted.

    sink (cd_write, never stalls) ──► block RAM (`depth` entries) ──► source (cd_read)
          │                              ▲
          └ wr: the next entry;          └ the reader sees entries up to `pub`, which follows
            start: the frame's first       `start` one entry a cycle (a gray count that moves
            (all before it: whole frames)  by one, so it crosses through two flip-flops)

A PHY's receiver does not wait: LiteEth's XGMII receiver hands a word over in every cycle of a
frame whether or not it is taken. Behind it, a slower reader (sys at 125 MHz takes 8 Gb/s of a
10 Gb/s line) leaves words behind, and in a burst the crossing fills. LiteEth's crossing (an
AsyncFIFO) then loses the words that find it full, and the frames they belonged to go on with
holes, counted as bad FCS. Here the writer keeps the start of the frame it is writing: a word
that finds the RAM full takes the write pointer back there and the rest of the frame is dropped,
so the reader only ever sees whole frames (store and forward: a frame is shown once its last
word is in). The drop is counted once per frame, at its last word: `long` when the frame alone
has more words than the RAM holds (it could never fit), `full` otherwise.

The write side's view of the read pointer is a few cycles late (never optimistic), so a frame
may be dropped while the last few entries are already free again. The reader is shown an entry
at least two of its cycles after the registered write that stores it, which holds for a reader
up to about twice as fast as the writer (the 10G receive side's is slower).

FrameCrossingCounters counts the drops in sys, for the firmware (RX_STATS: `rx_full` for want
of room, `oversize` for the frames longer than the crossing).
"""

from migen import *
from migen.genlib.cdc import GrayCounter, MultiReg

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus

from ethdaq.gateware.bram import BlockRAM
from ethdaq.gateware.cdcfifo import AheadGrayCounter, GrayDecoder2, entry_bits, read_in_two_stages
from ethdaq.gateware.eventcounters import count_pulses


class FrameCrossing(LiteXModule):
    """`depth` entries (a power of two) of `layout` (with first/last), written in `cd_write`,
    read in `cd_read`. `full`, `long` (cd_write): one cycle per dropped frame, at its last word."""
    def __init__(self, layout, depth, cd_write, cd_read):
        self.sink   = sink   = stream.Endpoint(layout)
        self.source = source = stream.Endpoint(layout)
        self.full   = Signal()
        self.long   = Signal()

        # # #

        bits    = log2_int(depth)   # Raises for a depth that is not a power of two.
        sync_w  = getattr(self.sync, cd_write)

        # Pointers: written (wr), whole frames (start), shown to the reader (pub), read (consume).
        wr      = Signal(bits + 1)
        start   = Signal(bits + 1)
        self.pub = pub = ClockDomainsRenamer(cd_write)(GrayCounter(bits + 1))
        self.consume = consume = ClockDomainsRenamer(cd_read)(AheadGrayCounter(bits + 1))
        pub_r   = Signal(bits + 1)
        rd_w    = Signal(bits + 1)
        for sig in (pub.q, consume.q):
            sig.attr.add("no_retiming")
        self.specials += [
            MultiReg(pub.q, pub_r, cd_read),
            MultiReg(consume.q, rd_w, cd_write),
        ]
        self.decoder = decoder = ClockDomainsRenamer(cd_write)(GrayDecoder2(bits + 1))
        rd_bin_w = Signal(bits + 1)    # The read pointer as the writer sees it (a few cycles late).
        self.comb += [
            decoder.i.eq(rd_w),
            rd_bin_w.eq(decoder.o),
            pub.ce.eq(pub.q_binary != start),
            consume.other.eq(pub_r),
        ]

        # Write side: every word is taken; one that finds the RAM full drops its frame, counted
        # at the frame's last word, as `long` if the frame had more words than the RAM holds.
        drop    = Signal()                 # The rest of a dropped frame is passing.
        before  = Signal(max=depth + 2)    # The frame's words before this one (stops at depth + 1).
        is_full = Signal()
        write   = Signal()
        self.comb += [
            sink.ready.eq(1),
            is_full.eq((wr - rd_bin_w)[:bits + 1] == depth),
            write.eq(sink.valid & ~drop & ~is_full),
        ]
        sync_w += [
            self.full.eq(0),
            self.long.eq(0),
            If(sink.valid,
                If(sink.last,
                    before.eq(0),
                ).Elif(before != depth + 1,
                    before.eq(before + 1),
                ),
                If(drop | is_full,
                    wr.eq(start),
                    drop.eq(~sink.last),
                    If(sink.last,
                        If(before >= depth, self.long.eq(1)).Else(self.full.eq(1)),
                    ),
                ).Else(
                    wr.eq(wr + 1),
                    If(sink.last, start.eq(wr + 1)),
                ),
            ),
        ]

        # Storage: the payload, its parameters and first/last, in a block RAM (gateware/bram.py)
        # read in two stages as LevelFIFO's buffered read side (an entry is readable while the
        # reader's pointer is behind `pub`).
        # The write is registered, so the RAM's enable and address are flip-flops.
        payload, out = entry_bits(sink), entry_bits(source)
        self.ram = ram = BlockRAM(len(payload), depth, cd_write=cd_write, cd_read=cd_read, with_ce=True)
        sync_w += [ram.wadr.eq(wr[:bits]), ram.wdata.eq(payload), ram.we.eq(write)]
        self.comb += [
            consume.ce.eq(read_in_two_stages(self, ram, source, consume.differs, cd_read)),
            ram.radr.eq(consume.q_binary[:bits]),
            out.eq(ram.rdata),
        ]


class FrameCrossingCounters(LiteXModule):
    """A FrameCrossing's drops as CSRs (sys), from its per-frame pulses in `cd` (one a frame: far
    slower than the synchroniser)."""
    def __init__(self, crossing, cd):
        self._dropped_full = CSRStatus(32, description="Received frames dropped whole at the receive crossing: no room.")
        self._dropped_long = CSRStatus(32, description="Received frames dropped whole at the receive crossing: longer than it holds.")

        # # #

        count_pulses(self, cd, ((crossing.full, self._dropped_full), (crossing.long, self._dropped_long)))
