#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Transmit scheduler: strict priority between frame sources, switching only between frames.

Sits in front of the PHY (after preamble/FCS insertion), so a frame, once started, always goes
out whole and unpaused: the next source is chosen only when the previous frame's last byte has
been accepted. Input 0 has the highest priority. The inter-frame gap is inserted after the
scheduler, so it holds between frames of different sources too.

The choice between frames is made from the inputs' `valid` of the previous cycle (a register):
the data and `ready` paths through the scheduler then depend on registers only, not on which
inputs are valid now, which was the eth_tx critical path on ECP5 (the ARP requester's valid →
priority → grant → the streamer's buffers, 12.8 ns). With no input valid the choice stays where
it was, so the source that sent last starts its next frame at once, as before; switching to
another source costs one cycle (rare: LiteEth's ARP/ICMP/control frames between data).

`hold` (for the time-triggered launcher, gateware/launcher.py): while high, the choice between
frames is input 0, whatever else is valid. The choice is registered, so a frame of another input
can still start in the cycle `hold` rises, never after; a frame already started runs to its end.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description


class FrameScheduler(LiteXModule):
    """n inputs, input 0 first. `idle_choice`: the input chosen at reset, before any frame (the
    busiest one, so that its first frame pays no switch cycle either)."""
    def __init__(self, n, dw=8, idle_choice=0):
        self.sinks  = sinks  = [stream.Endpoint(eth_phy_description(dw)) for _ in range(n)]
        self.source = source = stream.Endpoint(eth_phy_description(dw))
        self.frames = [Signal(32) for _ in range(n)]  # Frames sent per input.
        self.hold   = Signal()
        self.started      = Signal()                   # A frame's first byte leaves, this cycle...
        self.started_from = Signal(max=max(n, 2))      # ... from this input (latency probes).

        # # #

        inframe = Signal()            # A frame is on its way: `grant` holds until its last byte.
        grant   = Signal(max=max(n, 2))
        pick    = Signal(max=max(n, 2))  # Highest-priority valid input, now (else the last choice).
        pick_r  = Signal(max=max(n, 2), reset=idle_choice)  # ... one cycle ago: the choice between frames.
        self.comb += pick.eq(pick_r)
        for i in reversed(range(n)):  # Lowest index wins.
            self.comb += If(sinks[i].valid, pick.eq(i))
        self.comb += If(self.hold, pick.eq(0))
        self.sync += pick_r.eq(pick)
        # The input connected, Mux(inframe, grant, pick_r), is itself a register: computed from
        # the next values of the three, so the multiplexers' select lines come straight from a
        # flip-flop (it fans out to every data, valid and ready line).
        sel       = Signal(max=max(n, 2), reset=idle_choice)
        inframe_n = Signal()
        grant_n   = Signal(max=max(n, 2))
        self.comb += Case(sel, {i: sinks[i].connect(source) for i in range(n)})
        self.comb += [
            self.started.eq(source.valid & source.ready & ~inframe),
            self.started_from.eq(sel),
            inframe_n.eq(inframe),
            grant_n.eq(grant),
            If(source.valid & source.ready,
                If(source.last,
                    inframe_n.eq(0),
                ).Else(
                    inframe_n.eq(1),
                    grant_n.eq(sel),
                )
            ),
        ]
        self.sync += [
            inframe.eq(inframe_n),
            grant.eq(grant_n),
            sel.eq(Mux(inframe_n, grant_n, pick)),
        ]
        # Frames counted a cycle after their last byte: each 32-bit counter's enable is then a
        # register, not the end of the ready chain through the grant.
        ends = Signal(n)
        self.sync += ends.eq(Cat(*[s.valid & s.ready & s.last for s in sinks]))
        for i in range(n):
            self.sync += If(ends[i], self.frames[i].eq(self.frames[i] + 1))
