#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Destination MAC for the data path: fixed, derived (broadcast, IPv4 multicast) or resolved by ARP.

LiteEth's IP TX resolves per datagram and blocks for its whole ARP timeout when nobody answers,
which stalls every other user of the stack (the control port included). The data path instead
resolves its one destination here, ahead of time, and the framer holds datagrams until `valid`:
an unanswered destination fills the channel buffers (samples dropped, counted and flagged like
any overload) and raises `unreachable`, while control traffic flows on.

ARP replies are taken from LiteEth's ARP receiver (only frames whose target is our IP reach it);
any ARP frame from the destination (reply or its own request to us) refreshes the MAC.
"""

from migen import *

from litex.gen import *

MODE_ARP   = 0
MODE_FIXED = 1


class ARPResolver(LiteXModule):
    """Inputs: `active`, `ip` (destination), `mode` (MODE_ARP/MODE_FIXED), `fixed_mac`, `resolve` (pulse:
    forget and resolve again), and the snoop port `arp_valid`/`arp_ip`/`arp_mac` (one cycle per
    received ARP frame addressed to us). Outputs: `mac`, `valid`, `unreachable` (no answer after
    `tries` requests), `request` (pulse: send a who-has for `ip`), counters `requests`, `timeouts`.
    """
    def __init__(self, clk_freq, timeout=0.1, tries=3, retry_interval=1.0):
        self.active      = Signal()  # Send requests only when a destination is in use.
        self.ip          = Signal(32)
        self.mode        = Signal()
        self.fixed_mac   = Signal(48)
        self.resolve     = Signal()
        self.arp_valid   = Signal()
        self.arp_ip      = Signal(32)
        self.arp_mac     = Signal(48)

        self.mac         = Signal(48)
        self.valid       = Signal()
        self.unreachable = Signal()
        self.request     = Signal()
        self.requests    = Signal(32)
        self.timeouts    = Signal(32)

        # # #

        # Destinations with a MAC by rule rather than by ARP.
        broadcast = Signal()
        multicast = Signal()
        self.comb += [
            broadcast.eq(self.ip == 0xffffffff),
            multicast.eq(self.ip[28:32] == 0xe),  # 224.0.0.0/4 → 01:00:5e + low 23 bits (RFC 1112).
        ]

        learned      = Signal(48)
        learned_ok   = Signal()
        ip_seen      = Signal(32)
        timer        = Signal(max=int(clk_freq*max(timeout, retry_interval)) + 1)
        attempts     = Signal(max=tries + 1)
        self.comb += [
            If(self.mode == MODE_FIXED,
                self.mac.eq(self.fixed_mac),
                self.valid.eq(1),
            ).Elif(broadcast,
                self.mac.eq(0xffffffffffff),
                self.valid.eq(1),
            ).Elif(multicast,
                self.mac.eq(Cat(self.ip[0:23], C(0, 1), C(0x01005e, 24))),
                self.valid.eq(1),
            ).Else(
                self.mac.eq(learned),
                self.valid.eq(learned_ok),
            )
        ]
        need_arp = Signal()
        self.comb += need_arp.eq(self.active & (self.mode == MODE_ARP) & ~broadcast & ~multicast)

        self.sync += [
            self.request.eq(0),  # A one-cycle pulse when set below.
            # A new destination (or an explicit resolve) forgets what was learned.
            ip_seen.eq(self.ip),
            If(self.resolve | (self.ip != ip_seen),
                learned_ok.eq(0),
                self.unreachable.eq(0),
                attempts.eq(0),
                timer.eq(0),
            ).Elif(self.arp_valid & (self.arp_ip == self.ip),
                learned.eq(self.arp_mac),
                learned_ok.eq(1),
                self.unreachable.eq(0),
            ).Elif(need_arp & ~learned_ok,
                If(timer == 0,
                    # Ask now; then wait `timeout` (while trying) or `retry_interval` (after).
                    self.request.eq(1),
                    self.requests.eq(self.requests + 1),
                    If(attempts < tries,
                        timer.eq(int(clk_freq*timeout)),
                    ).Else(
                        timer.eq(int(clk_freq*retry_interval)),
                    ),
                ).Else(
                    timer.eq(timer - 1),
                    If(timer == 1,
                        self.timeouts.eq(self.timeouts + 1),
                        If(attempts < tries, attempts.eq(attempts + 1)),
                        If(attempts >= tries - 1, self.unreachable.eq(1)),
                    ),
                ),
            ),
        ]
