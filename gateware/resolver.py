#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Destination MAC for the data path: fixed, derived (broadcast, IPv4 multicast) or resolved by ARP.

LiteEth's IP TX resolves per datagram and blocks for its whole ARP timeout when nobody answers,
which stalls every other user of the stack (the control port included). The data path instead
resolves its one destination here, ahead of time, and the framer holds datagrams until `valid`:
an unanswered destination fills the channel buffers (samples dropped, counted and flagged like
any overload) and raises `unreachable`, while control traffic flows on.

Where the stream goes changes only by the resolver's own asking. It takes an ARP reply from the
destination's IP only as the answer to its own request, sent and not yet answered or timed out
(`timeout`); the first such answer closes the request. Every other ARP frame claiming that IP (an
unsolicited reply, a request, a second answer) changes nothing and, when it names another MAC
than the one in use, is counted in `refused`. Gratuitous ARP (target: the claimed IP, not ours)
never gets here: the receive audit and LiteEth's ARP receiver drop frames for another target.

Refresh: once resolved, the MAC holds and is asked for again every `refresh` seconds during a
run (default 30 s, the middle of the 15-45 s a Linux host trusts a neighbour before checking it
again; one that falls due while stopped is asked at the next run's start). Until an answer
arrives the old MAC stays in use; an answer with another MAC moves the stream and counts in
`changes`; a refresh that gets no answer after `tries` requests keeps the old MAC and asks again
a refresh later (the timeouts are counted). Each request opens a window of `timeout` in which a
reply racing the real one could win: a change is counted, and a fixed MAC (MODE_FIXED) is for
networks where that matters. An explicit `resolve`, or a new `ip`, forgets the MAC and resolves
again.
"""

from migen import *

from litex.gen import *

MODE_ARP   = 0
MODE_FIXED = 1


class ARPResolver(LiteXModule):
    """Inputs: `active`, `running` (refresh only during a run), `ip` (destination), `mode`
    (MODE_ARP/MODE_FIXED), `fixed_mac`, `resolve` (pulse: forget and resolve again), and the snoop
    port `arp_valid`/`arp_reply`/`arp_ip`/`arp_mac` (one cycle per received ARP request or reply
    addressed to us; `arp_reply`: it is a reply; sender's IP and MAC). Outputs: `mac`, `valid`,
    `unreachable` (no answer after `tries` requests), `request` (pulse: send a who-has for `ip`),
    counters `requests`, `timeouts`, `changes` (the MAC in use replaced by another), `refused`.
    """
    def __init__(self, clk_freq, timeout=0.1, tries=3, retry_interval=1.0, refresh=30.0):
        self.active      = Signal()  # Send requests only when a destination is in use.
        self.running     = Signal()
        self.ip          = Signal(32)
        self.mode        = Signal()
        self.fixed_mac   = Signal(48)
        self.resolve     = Signal()
        self.arp_valid   = Signal()
        self.arp_reply   = Signal()
        self.arp_ip      = Signal(32)
        self.arp_mac     = Signal(48)

        self.mac         = Signal(48)
        self.valid       = Signal()
        self.unreachable = Signal()
        self.request     = Signal()
        self.requests    = Signal(32)
        self.timeouts    = Signal(32)
        self.changes     = Signal(32)
        self.refused     = Signal(32)

        # # #

        timeout_cycles = max(int(clk_freq*timeout), 2)
        retry_cycles   = max(int(clk_freq*(retry_interval - timeout)), 0)  # Requests retry_interval apart.
        refresh_cycles = max(int(clk_freq*refresh), 1)

        # Destinations with a MAC by rule rather than by ARP.
        broadcast = Signal()
        multicast = Signal()
        self.comb += [
            broadcast.eq(self.ip == 0xffffffff),
            multicast.eq(self.ip[28:32] == 0xe),  # 224.0.0.0/4 → 01:00:5e + low 23 bits (RFC 1112).
        ]

        learned    = Signal(48)
        learned_ok = Signal()
        ip_seen    = Signal(32)
        pending    = Signal()  # Our request is out, unanswered, within its timeout: the only time a reply counts.
        timer      = Signal(max=max(timeout_cycles, retry_cycles, refresh_cycles) + 1)
        attempts   = Signal(max=tries + 1)
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
        ask      = Signal()
        self.comb += [
            need_arp.eq(self.active & (self.mode == MODE_ARP) & ~broadcast & ~multicast),
            # Resolve whenever the MAC is unknown; refresh a known one only during a run.
            ask.eq(need_arp & (~learned_ok | self.running)),
        ]

        # The snooped frame, registered with its comparisons (LiteEth's ARP receiver presents one
        # frame at most every third cycle, so `learned` has settled before the next is compared).
        claim    = Signal()  # An ARP frame whose sender claims the destination's IP.
        reply    = Signal()
        same     = Signal()  # ... with the MAC in use.
        claim_mac = Signal(48)
        take     = Signal()
        self.sync += [
            claim.eq(self.arp_valid & (self.arp_ip == self.ip)),
            reply.eq(self.arp_reply),
            same.eq(self.arp_mac == learned),
            claim_mac.eq(self.arp_mac),
        ]
        self.comb += take.eq(claim & reply & pending)

        self.sync += [
            self.request.eq(0),  # A one-cycle pulse when set below.
            # A new destination (or an explicit resolve) forgets what was learned.
            ip_seen.eq(self.ip),
            If(self.resolve | (self.ip != ip_seen),
                learned_ok.eq(0),
                self.unreachable.eq(0),
                pending.eq(0),
                attempts.eq(0),
                timer.eq(0),
            ).Elif(take,
                # The answer to our request: use it until the next refresh.
                learned.eq(claim_mac),
                learned_ok.eq(1),
                If(learned_ok & ~same, self.changes.eq(self.changes + 1)),
                self.unreachable.eq(0),
                pending.eq(0),
                attempts.eq(0),
                timer.eq(refresh_cycles),
            ).Elif(pending,
                timer.eq(timer - 1),
                If(timer == 1,
                    # No answer in time: later replies are not taken.
                    pending.eq(0),
                    self.timeouts.eq(self.timeouts + 1),
                    If(attempts < tries - 1,
                        attempts.eq(attempts + 1),  # Ask again at once.
                    ).Elif(learned_ok,
                        attempts.eq(0),  # Keep the MAC in use; ask again a refresh later.
                        timer.eq(refresh_cycles),
                    ).Else(
                        attempts.eq(tries),
                        self.unreachable.eq(1),
                        timer.eq(retry_cycles),
                    ),
                ),
            ).Elif(timer != 0,
                timer.eq(timer - 1),
            ).Elif(ask,
                self.request.eq(1),
                self.requests.eq(self.requests + 1),
                pending.eq(1),
                timer.eq(timeout_cycles),
            ),
            # Claims not taken that would have moved the stream (a repeat of the MAC in use would not).
            If(claim & ~take & need_arp & ~(learned_ok & same),
                self.refused.eq(self.refused + 1),
            ),
        ]
