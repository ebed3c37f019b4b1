#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Time-triggered transmission: a frame launched when the PTP clock reaches a given time, once
or periodically, in the highest transmit class.

    sys (PTP clock)                             eth_tx
    fire time F ≤ clock? ── toggle ── 2 flops ─► guard: `hold` for G cycles ─► the frame, from
    then F += period                             (lower classes start nothing)   block RAM, to the
                                                                                 scheduler's input 0

The firmware writes the complete wire frame into the launcher's buffer (preamble, SFD, header,
payload, FCS: the bytes the PHY is to send) and arms it with a fire time, a period and a count.
Everything between the fire decision and the first preamble byte on the pins is a fixed number of
cycles (`LATENCY_CYCLES` here, plus the transmit path's, `TXPath.launch_cycles`) plus the guard G,
so the firmware arms the launcher at T - (latency + G) cycles to have the frame's first byte on
the pins at T. In simulation the PTP clock and eth_tx share a clock and the launch error is the
clock's own granularity, under one cycle. On hardware whose sys clock is not eth_tx's, the
two-flop crossing adds up to one eth_tx cycle, and deciding in sys adds up to one sys period
(not measured: no board here).

Guard band: for the G cycles before the launch, `hold` stops the transmit scheduler from starting
frames of lower classes, so the line is free when the launch comes. A frame already on the wire
runs to its end, so G must cover the longest lower-class frame plus the inter-frame gap:
G = wire bytes (preamble to FCS) + 11 cycles at 8 bits per cycle (`guard_cycles()`).

Nothing is ever sent late. A launch whose time has passed before its turn (armed too late, or a
period shorter than the comparison's two cycles) and a launch that finds the line busy (guard too
short, or the previous launch still running) are both dropped and counted.
"""

from migen import *
from migen.genlib.cdc import MultiReg

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage, CSRField

from liteeth.common import eth_phy_description, eth_interpacket_gap

from ethdaq.gateware.csr import CSRConfig
from ethdaq.gateware.eventcounters import count_pulses

NS_PER_S = 10**9

# From the sys cycle in which the clock's published time first reaches the fire time to the cycle
# the guard starts in eth_tx (`hold` high), with sys and eth_tx on one clock: compare register (1),
# decision and toggle (1), two synchroniser flops (2). The frame's first byte is offered to the
# scheduler G + 1 cycles after `hold` rises.
LATENCY_CYCLES = 4 + 1


def guard_cycles(frame_bytes, preamble=8, fcs=4, dw=8):
    """Guard band (eth_tx cycles) that lets a lower-class frame of `frame_bytes` (Ethernet header
    and payload, no preamble or FCS), started the cycle before `hold` took effect, end with its
    inter-frame gap before the launch."""
    wire = preamble + frame_bytes + fcs
    return -(-wire // (dw // 8)) + eth_interpacket_gap - 1


class Launcher(LiteXModule):
    """clock: the PTPClock (in sys). depth: buffer bytes (one frame, preamble to FCS).

    `source` (cd_tx): the launched frames, complete wire bytes, for the transmit scheduler's
    highest-priority input. `hold` (cd_tx): while high, the scheduler must not start a frame
    from any other input (FrameScheduler.hold)."""
    def __init__(self, clock, depth=2048, cd_tx="eth_tx"):
        aw = bits_for(depth - 1)
        self.depth  = depth
        self.source = stream.Endpoint(eth_phy_description(8))
        self.hold   = Signal()
        # Per-launch pulses (cd_tx: sent, busy; sys: past), for counters and latency probes.
        self.ev_sent   = Signal()
        self.ev_busy   = Signal()
        self.ev_past   = Signal()

        self._frame_addr = CSRStorage(aw, description="Buffer write address (bytes); frame_data writes continue from here.")
        self._frame_data = CSR(8)
        self._frame_data.description = "Write: one byte of the wire frame into the buffer at the write address, which then advances."
        self._length   = CSRConfig(aw + 1, description="Wire frame length in bytes, preamble to FCS (1 to depth).")
        self._time_sec = CSRConfig(48, description="First fire time, seconds (PTP clock).")
        self._time_ns  = CSRConfig(30, description="First fire time, nanoseconds (< 10^9).")
        self._period   = CSRConfig(30, description="Period in ns (< 10^9); 0: launch once.")
        self._count    = CSRConfig(32, description="Launches in all (0: until stopped); with period 0, one.")
        self._guard    = CSRConfig(16, description="Guard band, eth_tx cycles (>= 1): lower classes start no frame for this long before each launch.")
        self._control  = CSR(2)
        self._control.description = "Write bit 0: arm (from time_sec/time_ns); bit 1: stop."
        self._status   = CSRStatus(fields=[
            CSRField("armed",   size=1, description="Launches are pending."),
            CSRField("sending", size=1, description="A launch is in its guard band or on the line: do not write the buffer."),
        ])
        self._sent        = CSRStatus(32, description="Frames launched (their first byte went to the line on time).")
        self._missed_past = CSRStatus(32, description="Launches skipped: their time had passed when their turn came (armed too late, or too short a period).")
        self._missed_busy = CSRStatus(32, description="Launches skipped: the line was not free at the launch cycle (guard band too short) or the previous launch was still running.")

        # # #

        rport = self._add_buffer(depth, aw, cd_tx)
        toggle = self._add_fire_decisions(clock)
        self._add_launch(rport, toggle, aw, cd_tx)
        self._add_counters(cd_tx)

    def _add_buffer(self, depth, aw, cd_tx):
        """The frame buffer, written by the CPU (sys), read in cd_tx: its read port."""
        mem = Memory(8, depth)
        wport = mem.get_port(write_capable=True)
        rport = mem.get_port(clock_domain=cd_tx)
        self.specials += mem, wport, rport
        waddr = Signal(aw)
        self.sync += [
            If(self._frame_addr.re,
                waddr.eq(self._frame_addr.storage)
            ).Elif(self._frame_data.re,
                waddr.eq(waddr + 1)
            )
        ]
        self.comb += [
            wport.adr.eq(waddr),
            wport.dat_w.eq(self._frame_data.r),
            wport.we.eq(self._frame_data.re),
        ]
        return rport

    def _add_fire_decisions(self, clock):
        """Fire decisions (sys): `toggle` changes at each launch's fire time."""
        # The clock's (sec, ns) compared with the fire time as one 78-bit
        # number (ns < 10^9 in both, so the order is the time order). The comparison is
        # registered; `stale` skips the cycle after the fire time changes, whose result still
        # refers to the old one. `below` must have been seen before a launch fires: a fire time
        # already past when its turn comes is skipped and counted, never launched late.
        fire_sec = Signal(48)
        fire_ns  = Signal(30)
        left     = Signal(32)
        forever  = Signal()
        armed    = Signal()
        stale    = Signal()
        seen     = Signal()
        below    = Signal()
        toggle   = Signal()
        self.sync += below.eq(Cat(clock.ns, clock.sec) < Cat(fire_ns, fire_sec))
        ns_sum = Signal(31)
        self.comb += ns_sum.eq(fire_ns + self._period.storage)
        last_launch = Signal()
        self.comb += last_launch.eq((self._period.storage == 0) | (~forever & (left == 1)))
        self.sync += [
            self.ev_past.eq(0),
            If(self._control.re & self._control.r[1],
                armed.eq(0),
            ).Elif(self._control.re & self._control.r[0],
                armed.eq(1),
                stale.eq(1),
                seen.eq(0),
                fire_sec.eq(self._time_sec.storage),
                fire_ns.eq(self._time_ns.storage),
                left.eq(self._count.storage),
                forever.eq(self._count.storage == 0),
            ).Elif(armed,
                If(stale,
                    stale.eq(0),
                ).Elif(below,
                    seen.eq(1),
                ).Else(
                    If(seen,
                        toggle.eq(~toggle),
                    ).Else(
                        self.ev_past.eq(1),
                    ),
                    seen.eq(0),
                    stale.eq(1),
                    left.eq(left - 1),
                    If(last_launch, armed.eq(0)),
                    If(ns_sum >= NS_PER_S,
                        fire_ns.eq(ns_sum - NS_PER_S),
                        fire_sec.eq(fire_sec + 1),
                    ).Else(
                        fire_ns.eq(ns_sum),
                    )
                )
            )
        ]
        self.comb += self._status.fields.armed.eq(armed)
        return toggle

    def _add_launch(self, rport, toggle, aw, cd_tx):
        """The launch (cd_tx): the guard band, then the frame from the buffer."""
        source = self.source
        # Launch (cd_tx): guard band, then the frame from the buffer. The byte offered is always
        # mem[index]: the read address runs one ahead of `index` when a byte is taken.
        sync_tx = getattr(self.sync, cd_tx)
        toggle_tx = Signal()
        toggle_d  = Signal()
        guard     = Signal(16)
        length    = Signal(aw + 1)
        self.specials += [
            MultiReg(toggle, toggle_tx, cd_tx),
            MultiReg(self._guard.storage, guard, cd_tx),
            MultiReg(self._length.storage, length, cd_tx),
        ]
        self.fire = fire_tx = Signal()   # cd_tx: the fire decision has crossed (latency probes).
        sync_tx += toggle_d.eq(toggle_tx)
        self.comb += fire_tx.eq(toggle_tx ^ toggle_d)

        countdown = Signal(16)
        index     = Signal(aw + 1)
        started   = Signal()
        take      = Signal()
        self.comb += [
            take.eq(source.valid & source.ready),
            rport.adr.eq(Mux(take, index + 1, index)),
            source.data.eq(rport.dat_r),
            source.last.eq(index == (length - 1)),
            source.last_be.eq(source.last),
        ]
        self.fsm = fsm = ClockDomainsRenamer(cd_tx)(FSM(reset_state="IDLE"))
        fsm.act("IDLE",
            NextValue(index, 0),
            NextValue(started, 0),
            NextValue(countdown, guard),
            If(fire_tx,
                # `hold` in this cycle already: the scheduler's choice is registered, so no lower
                # frame can start from the next cycle on.
                self.hold.eq(1),
                NextState("GUARD"),
            )
        )
        fsm.act("GUARD",
            self.hold.eq(1),
            self.ev_busy.eq(fire_tx),
            NextValue(countdown, countdown - 1),
            If(countdown <= 1,
                NextState("SEND"),
            )
        )
        fsm.act("SEND",
            self.hold.eq(1),
            self.ev_busy.eq(fire_tx),
            source.valid.eq(1),
            If(~started & ~source.ready,
                # The line is not free in the launch cycle: drop the launch rather than send late.
                source.valid.eq(0),
                self.ev_busy.eq(1),
                NextState("IDLE"),
            ).Elif(take,
                NextValue(started, 1),
                NextValue(index, index + 1),
                If(~started, self.ev_sent.eq(1)),
                If(source.last, NextState("IDLE")),
            )
        )

        sending = Signal()
        self.specials += MultiReg(~fsm.ongoing("IDLE"), sending, "sys")
        self.comb += self._status.fields.sending.eq(sending)

    def _add_counters(self, cd_tx):
        """Counters (sys) of launches sent and missed."""
        count_pulses(self, cd_tx, ((self.ev_sent, self._sent), (self.ev_busy, self._missed_busy)))
        self.sync += If(self.ev_past, self._missed_past.status.eq(self._missed_past.status + 1))
