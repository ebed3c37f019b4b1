#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Transmit scheduler: strict priority between frame sources, switching only between frames.

Sits in front of the PHY (after preamble/FCS insertion), so a frame, once started, always goes
out whole and unpaused: the next source is chosen only when the previous frame's last byte has
been accepted. Input 0 has the highest priority. The inter-frame gap is inserted after the
scheduler, so it holds between frames of different sources too.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description


class FrameScheduler(LiteXModule):
    def __init__(self, n, dw=8):
        self.sinks  = sinks  = [stream.Endpoint(eth_phy_description(dw)) for _ in range(n)]
        self.source = source = stream.Endpoint(eth_phy_description(dw))
        self.frames = [Signal(32) for _ in range(n)]  # Frames sent per input.

        # # #

        busy  = Signal()             # A frame is on its way: `grant` holds until its last byte.
        grant = Signal(max=max(n, 2))
        pick  = Signal(max=max(n, 2))
        for i in reversed(range(n)):  # Lowest index wins.
            self.comb += If(sinks[i].valid, pick.eq(i))
        sel = Signal(max=max(n, 2))
        # Between frames the choice is combinational, so an idle link adds no cycle.
        self.comb += sel.eq(Mux(busy, grant, pick))
        self.comb += Case(sel, {i: sinks[i].connect(source) for i in range(n)})
        self.sync += [
            If(source.valid & source.ready,
                If(source.last,
                    busy.eq(0),
                ).Else(
                    busy.eq(1),
                    grant.eq(sel),
                )
            )
        ]
        for i in range(n):
            self.sync += If(sinks[i].valid & sinks[i].ready & sinks[i].last, self.frames[i].eq(self.frames[i] + 1))
