#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Store-and-forward clock-domain crossing for 8-bit Ethernet frames.

LiteEth's MAC with an 8-bit core (eth_dw = 8, `with_sys_datapath=False`) moves its frames from
sys into eth_tx through a 32-entry FIFO that passes bytes on as soon as they arrive. The PHY
takes a byte every eth_tx cycle (125 MHz at 1 Gb/s) and the core gives one per sys cycle: on the
ECP5 boards sys runs at 60 MHz, so the FIFO empties a few bytes into every frame and the
preamble inserter, which copies `valid` through, drops TX_EN in the middle of it. The receiver
sees a runt and a fragment, each with a bad FCS: on those boards every frame the CPU and
LiteEth send (control replies, PTP messages, ARP and ICMP answers) would be lost at 1 Gb/s.
The simulated board cannot show it (its sys clock is the 125 MHz GMII clock); LiteEth issue 219
reports it on hardware. test/gateware/test_framefifo.py shows it with LiteEth's own MAC core at half the
PHY's clock.

`FrameFIFO` lets a frame out only once all of it is in: the write side counts the frames whose
last byte has been written (a gray counter, crossed by two flip-flops), the read side the frames
it has sent; the read side starts a frame when the first count is ahead. A frame then leaves at
the PHY's rate without a gap, whatever the two clocks are.

A frame longer than the FIFO could never be wholly in it: the write side then counts it as
complete when it fills `depth - 2` entries (`oversize` pulses once), so nothing waits forever;
such a frame is sent as it arrives (with the old gaps when sys is slower). LiteEth's frames are
at most its 1530-byte MTU and the default depth is 2048.

Entries are the byte and its `last` flag (9 bits: one 2048 x 9 DP16KD on the ECP5, through
gateware/cdcfifo.py's LevelFIFO with its registered block RAM read side). For 8-bit streams
`last_be` is `last`; `error` is not carried (LiteEth's transmit stack never sets it, and its
RGMII PHYs have no TX_ER).
"""

from migen import *
from migen.genlib.cdc import MultiReg, GrayCounter

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description

from ethdaq.gateware.cdcfifo import AheadGrayCounter, LevelFIFO


class FrameFIFO(LiteXModule):
    """`depth` bytes (a power of two); sink in `cd_write`, source in `cd_read`, both 8-bit
    eth_phy_description streams. `oversize` (cd_write): pulses when a frame fills the FIFO
    before its end (sent as it comes)."""
    def __init__(self, depth=2048, cd_write="sys", cd_read="eth_tx", with_dp16kd=True):
        self.sink     = sink   = stream.Endpoint(eth_phy_description(8))
        self.source   = source = stream.Endpoint(eth_phy_description(8))
        self.oversize = Signal()

        # # #

        bits = log2_int(depth)
        if depth < 16:
            raise ValueError(f"FrameFIFO: depth must be at least 16, not {depth}")
        self.fifo = fifo = LevelFIFO([("data", 8), ("end", 1)], depth, cd_write=cd_write, cd_read=cd_read,
            buffered=True, framing=False, with_dp16kd=with_dp16kd)
        sync_w = getattr(self.sync, cd_write)
        sync_r = getattr(self.sync, cd_read)

        # Write side: the bytes, and one release per frame: at its end, or when it has filled
        # the FIFO (depth - 2 entries: the buffered read side holds two more once it runs).
        wrote   = Signal()
        length  = Signal(bits)
        early   = Signal()   # This frame was released before its end.
        release = Signal()
        self.comb += [
            fifo.sink.valid.eq(sink.valid),
            sink.ready.eq(fifo.sink.ready),
            fifo.sink.data.eq(sink.data),
            fifo.sink.end.eq(sink.last),
            wrote.eq(sink.valid & sink.ready),
            self.oversize.eq(wrote & ~sink.last & ~early & (length == depth - 3)),
            release.eq(wrote & ((sink.last & ~early) | self.oversize)),
        ]
        sync_w += If(wrote,
            If(sink.last,
                length.eq(0),
                early.eq(0),
            ).Else(
                length.eq(length + 1),
                If(self.oversize, early.eq(1)),
            )
        )
        # The release count moves two cycles after the write that ends the frame, so the read
        # side never sees it before the FIFO's write pointer: a released frame is wholly readable.
        release_d = Signal(2)
        released  = ClockDomainsRenamer(cd_write)(GrayCounter(bits + 1))
        self.submodules += released
        sync_w += release_d.eq(Cat(release, release_d[0]))
        self.comb += released.ce.eq(release_d[1])
        released.q.attr.add("no_retiming")
        released_r = Signal(bits + 1)
        self.specials += MultiReg(released.q, released_r, cd_read)

        # Read side: frames sent (counted at their last byte), and whether another is released
        # (AheadGrayCounter: from registered comparisons, as LevelFIFO's `readable`).
        sent     = ClockDomainsRenamer(cd_read)(AheadGrayCounter(bits + 1))
        self.submodules += sent
        in_frame = Signal()
        open_    = Signal()
        self.comb += [
            sent.other.eq(released_r),
            sent.ce.eq(source.valid & source.ready & source.last),
            open_.eq(in_frame | sent.differs),
            source.valid.eq(fifo.source.valid & open_),
            fifo.source.ready.eq(source.ready & open_),
            source.data.eq(fifo.source.data),
            source.last.eq(fifo.source.end),
            source.last_be.eq(fifo.source.end),
            source.first.eq(~in_frame),
        ]
        sync_r += If(source.valid & source.ready, in_frame.eq(~source.last))
