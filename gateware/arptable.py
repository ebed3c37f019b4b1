#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""ARP table: LiteEth's, with its two cache entries in registers and its events taken in any state.

LiteEthARPTable (liteeth/core/arp.py) answers the IPv4 transmitter's lookups (`request` →
`response`), asks the network for a missing MAC (`source` → LiteEth's ARP transmitter), caches
the answer (`sink` ← LiteEth's ARP receiver) and answers ARP requests for the board's address.
Its cache (LiteEthARPCache) is a distributed RAM of at least two 81-bit entries searched one by
one with a multiplexer and a comparator behind the RAM's read port, and the table moves the
MAC through two more multiplexers: on the colorlight_i5 about 530 LUT4 eq. (bench/resources.py).
Here the two entries are registers, compared with the lookup's address at once:

    lookup ip ──► ip0 == ? ─┐                   entry `ans`'s MAC ──► response
                  ip1 == ? ─┴─► hit ──► response
    ARP reply ──► ip == pending lookup's ? ──► entry `upd` ◄─ (ip, mac); upd alternates
    ARP request ─► (ip, mac) held ──► reply sent ──► source

The behaviour is LiteEth's: 2 entries, replaced in turn; a lookup that misses sends an ARP
request for its address, again every 100 ms, and fails after 8 unanswered requests; only the
answer to the pending request is cached; the cache is cleared once it has seen no lookup and no
ARP frame for 1 s. Two differences: a lookup that matches the second entry is answered with its
MAC (LiteEth's cache answers from the first entry: a read address it leaves at 0), and an ARP
frame that arrives while the table sends another or answers a lookup is still taken (LiteEth's
table drops it, and the sender has to ask again): an answer at any time, a request for the
board's address unless one is being answered (the one being sent keeps its addresses).

`arp_tables()` builds LiteEth's ARP with it: LiteEthARP creates its table by the module's name
LiteEthARPTable, which the context manager points here while it is open.
"""

from contextlib import contextmanager

from migen import *

from litex.gen import *
from litex.gen.genlib.misc import WaitTimer

from litex.soc.interconnect import stream

import liteeth.core.arp as liteeth_arp
from liteeth.common import arp_table_request_layout, arp_table_response_layout

# LiteEth's: requests before a lookup fails, and their spacing; the cache's idle clear.
MAX_REQUESTS     = 8
REQUEST_INTERVAL = 100e-3
CLEAR_IDLE       = 1.0


class ARPTable(LiteXModule):
    """LiteEthARPTable's interface (`sink` from the ARP receiver, `source` to the ARP
    transmitter, `request`/`response` for the IPv4 transmitter) and behaviour, with the
    differences the module docstring names. `entries` is LiteEth's argument; the cache has 2."""
    def __init__(self, clk_freq, entries=1, max_requests=MAX_REQUESTS):
        if entries > 2:
            raise ValueError(f"ARPTable caches 2 entries, not {entries!r}")
        # From the ARP receiver (one-cycle pulses); to the ARP transmitter (held until the frame
        # has gone); the lookup (the next hop's IPv4 address) and its MAC, or failed.
        self.sink     = sink     = stream.Endpoint(liteeth_arp._arp_table_layout)
        self.source   = source   = stream.Endpoint(liteeth_arp._arp_table_layout)
        self.request  = request  = stream.Endpoint(arp_table_request_layout)
        self.response = response = stream.Endpoint(arp_table_response_layout)

        # # #

        # Data-Path: the entries, the pending lookup and the held ARP request.
        ip   = [Signal(32, name=f"ip{i}") for i in range(2)]
        mac  = [Signal(48, name=f"mac{i}") for i in range(2)]
        live = [Signal(name=f"live{i}") for i in range(2)]  # The entry holds an answer.
        upd  = Signal()                      # The entry the next answer replaces.
        ans  = Signal()                      # The entry `response` shows.
        hit  = [Signal(name=f"hit{i}") for i in range(2)]
        self.comb += [hit[i].eq(live[i] & (ip[i] == request.ip_address)) for i in range(2)]
        self.comb += response.mac_address.eq(Mux(ans, mac[1], mac[0]))

        pending  = Signal()                  # A lookup waits for an answer to `req_ip`.
        req_ip   = Signal(32)
        answered = Signal()                  # `response` is due (a hit, an answer, or failed).
        rep_due  = Signal()                  # An ARP request for the board's address awaits its reply.
        rep_ip, rep_mac = Signal(32), Signal(48)
        # The ARP transmitter reads the MAC only for a reply (a request's target is broadcast).
        self.comb += source.mac_address.eq(rep_mac)
        due      = Signal()                  # The request interval has passed without an answer.
        sent     = Signal(max=max_requests + 1)  # Requests sent for the pending lookup.

        rx_reply   = sink.valid & sink.reply
        rx_request = sink.valid & sink.request
        answer     = rx_reply & pending & (sink.ip_address == req_ip)

        # Control-Path. A register written both by the statements below and by the state machine
        # is never written by both in one cycle; the cache's clear and an answer can meet, and
        # the answer, written after the clear, is kept.
        self.fsm = fsm = FSM(reset_state="IDLE")

        # The cache is cleared after CLEAR_IDLE without a lookup or an ARP frame.
        self.clear_timer = clear_timer = WaitTimer(CLEAR_IDLE*clk_freq)
        self.comb += clear_timer.wait.eq(fsm.ongoing("IDLE") & ~request.valid & ~sink.valid)
        self.sync += If(clear_timer.done, live[0].eq(0), live[1].eq(0))

        # ARP frames, taken in any state: the answer to the pending lookup goes into entry
        # `upd`; a request for the board's address is held for its reply (unless one is being
        # sent: its addresses stay as they are until it has gone).
        self.sync += [
            If(answer,
                If(upd,
                    ip[1].eq(sink.ip_address), mac[1].eq(sink.mac_address), live[1].eq(1),
                ).Else(
                    ip[0].eq(sink.ip_address), mac[0].eq(sink.mac_address), live[0].eq(1),
                ),
                ans.eq(upd),
                upd.eq(~upd),
                pending.eq(0),
                answered.eq(1),
            ),
            If(rx_request & ~fsm.ongoing("SEND_REPLY"),
                rep_due.eq(1),
                rep_ip.eq(sink.ip_address),
                rep_mac.eq(sink.mac_address),
            ),
        ]

        # Retries: a request interval after each request while the lookup waits.
        self.request_timer = request_timer = WaitTimer(REQUEST_INTERVAL*clk_freq)
        self.comb += request_timer.wait.eq(pending & ~due)
        self.sync += If(request_timer.done & ~due, due.eq(1))  # `done` lasts a cycle into `due`.

        fsm.act("IDLE",
            If(rep_due,
                NextState("SEND_REPLY")
            ).Elif(answered,
                NextState("PRESENT_RESPONSE")
            ).Elif(due,
                NextValue(due, 0),
                If(pending & ~answer,
                    If(sent == max_requests,
                        NextValue(pending, 0),
                        NextValue(response.failed, 1),
                        NextState("PRESENT_RESPONSE")
                    ).Else(
                        NextState("SEND_REQUEST")
                    )
                )
            ).Elif(request.valid & ~pending,
                request.ready.eq(1),
                If(hit[0] | hit[1],
                    NextValue(ans, hit[1]),
                    NextState("PRESENT_RESPONSE")
                ).Else(
                    NextValue(pending, 1),
                    NextValue(req_ip, request.ip_address),
                    NextValue(sent, 0),
                    NextState("SEND_REQUEST")
                )
            )
        )
        _send(fsm, "SEND_REPLY",   source, source.reply,   rep_ip, NextValue(rep_due, 0))
        _send(fsm, "SEND_REQUEST", source, source.request, req_ip, NextValue(sent, sent + 1))
        fsm.act("PRESENT_RESPONSE",
            response.valid.eq(1),
            If(response.ready,
                NextValue(answered, 0),
                NextValue(response.failed, 0),
                NextState("IDLE")
            )
        )


def _send(fsm, state, source, kind, ip, done):
    # An ARP frame of `kind` (source.reply or source.request) about `ip`, offered in `state`
    # until the transmitter has sent it; then `done`.
    fsm.act(state,
        source.valid.eq(1),
        kind.eq(1),
        source.ip_address.eq(ip),
        If(source.ready,
            done,
            NextState("IDLE")
        )
    )


@contextmanager
def arp_tables():
    """While open, LiteEth's ARP (LiteEthARP) builds an ARPTable as its table."""
    if liteeth_arp.LiteEthARPTable is not _LITEETH_TABLE:
        raise ValueError(f"arp_tables: liteeth.core.arp.LiteEthARPTable is {liteeth_arp.LiteEthARPTable!r}, "
                         "not LiteEth's; LiteEth no longer builds its ARP table this way")
    try:
        liteeth_arp.LiteEthARPTable = ARPTable
        yield
    finally:
        liteeth_arp.LiteEthARPTable = _LITEETH_TABLE


_LITEETH_TABLE = liteeth_arp.LiteEthARPTable
