#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Receive audit: every frame the MAC passes on is checked before LiteEth's layers see it,
counted once by cause, and flagged for the frame gate to drop if it is not one the board can use.

    PHY ─► preamble ─► FCS checker ─► RXAudit ─► (classifier) ─► FrameGate ─► LiteEth ARP/IP/UDP

LiteEth's receive layers trust what they are given. Reading their code (and test/test_rxaudit.py
and test_network.py show the cases): the IP layer takes any destination address (its
`with_broadcast`, on by default in LiteEthUDPIPCore, ORs the address check away) and no layer
looks at the destination MAC, so a ping to another host is answered; the IP layer never looks at
the fragment fields, so every piece of a fragmented datagram goes to UDP as one; a UDP length
under 8 wraps the payload length; a zero-length datagram brings a byte of Ethernet padding with
it; nothing is counted. The audit decides for them, with the frame's own bytes, and counts what it refused.

Each frame is counted once (`protocol.RX_COUNTERS`, codes 0x00-0x1F), under the first check it
fails, in this order: a receive error the PHY signalled (`error` on a byte before the last: RX_ER,
from a PHY that reports it, as the simulated board's does; LiteEth's drop it), bad FCS (the MAC's
flag on the last byte), runt (under 60 bytes before the FCS), oversize
(over `max_frame`), then as the header arrives: destination MAC, EtherType, ARP's fixed fields and
target, IPv4 version and header length, options, header checksum, total length, fragment,
destination address, protocol, ICMP type, UDP length (under 8, or not the IPv4 payload's), empty
UDP, UDP port; except that an IPv4 total length past the frame's end (truncated), known only at
its end, comes before the ICMP and UDP checks. A frame that passes is counted as rx_ok, and so is
one to another UDP port that a drop or fast-track rule of the classifier behind takes (`claimed`;
the rule counts it).

The output is the input one cycle later (the PHY does not wait: `sink.ready` is 1), with `error`
set on the last byte of every frame not counted as rx_ok; the frame gate behind it drops those
whole. Counting happens in sys: one event per frame, its cause held in the receive domain until
the next frame's end (at least 20 byte times), so it is stable when the event's pulse has
crossed. The counts live in a block RAM, as in gateware/streamstats.py: read, then written back
incremented (two cycles; frames come at least 8 sys cycles apart at 1 Gb/s with sys at 50 MHz).
Writing `select` copies that cause's count to `count` (48 bits, never torn by a frame being
counted as it is read).
"""

from functools import reduce
from operator import or_

from migen import *
from migen.genlib.cdc import PulseSynchronizer

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus, CSRStorage

from liteeth.common import eth_phy_description

from ethdaq.gateware.tsu import ETHERTYPE_IPV4, IP_PROTO_UDP
from ethdaq.host.protocol import RX_AUDIT_CAUSES

CAUSE = {name: i for i, name in enumerate(RX_AUDIT_CAUSES)}
COUNTER_BITS = 48   # 2**48 frames: 5 years of minimum-size frames at 1 Gb/s.

ETHERTYPE_ARP  = 0x0806
IP_PROTO_ICMP  = 1
ICMP_ECHO_REQUEST = 8
MIN_FRAME      = 60       # Bytes before the FCS (64 with it).


class RXAudit(LiteXModule):
    def __init__(self, max_frame=1514, udp_ports=(), ethertypes=(), ip_groups=(), cd_rx="eth_rx"):
        if not (MIN_FRAME <= max_frame <= 16000):
            raise ValueError(f"max_frame must be {MIN_FRAME}..16000 bytes, not {max_frame!r}")
        udp_ports  = tuple(udp_ports)
        ethertypes = tuple(ethertypes)
        if not udp_ports or any(not (0 < p < 65536) for p in udp_ports):
            raise ValueError(f"udp_ports must be one or more UDP ports 1..65535, not {udp_ports!r}")
        if any(not (0x600 <= t < 65536) or t in (ETHERTYPE_IPV4, ETHERTYPE_ARP) for t in ethertypes):
            raise ValueError(f"ethertypes are the EtherTypes besides IPv4 and ARP the board takes, not {ethertypes!r}")
        if any(ip >> 28 != 0xE for ip in ip_groups):
            raise ValueError(f"ip_groups must be IPv4 multicast addresses (224/4), not {ip_groups!r}")
        self.sink   = sink   = stream.Endpoint(eth_phy_description(8))   # cd_rx, from the FCS checker.
        self.source = source = stream.Endpoint(eth_phy_description(8))   # cd_rx, on to the gate.
        self.mac    = Signal(48)                                         # cd_rx: the board's MAC...
        self.ip     = Signal(32)                                         # ...and IPv4 address.
        # cd_rx, from the receive classifier behind (gateware/classifier.py `takes`): one of its
        # drop or fast-track rules matched this frame, so a UDP port nothing else listens on is
        # the rule's, not a fault. Read at the frame's last byte.
        self.claimed = Signal()

        self._select = CSRStorage(bits_for(len(CAUSE) - 1), description="Cause whose count `count` shows (protocol.RX_COUNTERS' code); writing it takes the count.")
        self._count  = CSRStatus(COUNTER_BITS, description="Frames counted under cause `select`, since power-up, as they were when `select` was written.")

        # # #

        sync_rx = getattr(self.sync, cd_rx)
        beat = Signal()
        b    = sink.data
        self.comb += [
            sink.ready.eq(1),
            beat.eq(sink.valid),
        ]

        # Byte offset in the frame (saturating), and the 16 and 32-bit big-endian fields that end
        # at this byte.
        n   = Signal(max=max(max_frame + 2, 64))
        n_max = 2**len(n) - 1
        sr  = Signal(24)
        w16 = Signal(16)
        w32 = Signal(32)
        self.comb += [w16.eq(Cat(b, sr[:8])), w32.eq(Cat(b, sr))]
        sync_rx += If(beat,
            sr.eq(Cat(b, sr[:16])),
            If(n != n_max, n.eq(n + 1)),
            If(sink.last, n.eq(0)),
        )

        # What the header has said so far.
        bad       = Signal(max=len(CAUSE))   # The first failed check's cause (link, ARP, IPv4); 0 (rx_ok): none yet.
        bad_l4    = Signal(max=len(CAUSE))   # The same for ICMP and UDP: judged after a truncated IPv4 datagram.
        group     = Signal()
        mac_eq    = Signal()
        is_ipv4   = Signal()
        is_arp    = Signal()
        is_udp    = Signal()
        is_icmp   = Signal()
        ip_total  = Signal(16)
        fragment  = Signal()
        proto     = Signal(8)
        udp_port  = Signal(16)
        csum      = Signal(17)               # Ones'-complement sum of the IPv4 header's words.
        er_seen   = Signal()                 # `error` on a byte before the last: the PHY's RX_ER.
        mac_b     = Array(self.mac[8*(5 - i):8*(6 - i)] for i in range(6))

        def fail(cause):
            return If(bad == 0, bad.eq(CAUSE[cause]))

        def fail_l4(cause):
            return If(bad_l4 == 0, bad_l4.eq(CAUSE[cause]))

        def one_of(value, values):
            return reduce(or_, [value == v for v in values], Constant(0, 1))

        csum_next = Signal(17)
        csum_ok   = Signal()   # The folded sum is 0xFFFF (no adder for the fold).
        self.comb += [
            csum_next.eq(csum[:16] + csum[16] + w16),
            csum_ok.eq(Mux(csum_next[16], csum_next[:16] == 0xFFFE, csum_next[:16] == 0xFFFF)),
        ]
        ip_ok_dst = Signal()
        self.comb += ip_ok_dst.eq((w32 == self.ip) | (w32 == 0xFFFFFFFF) | one_of(w32, ip_groups))
        arp_fixed = {15: 1, 17: ETHERTYPE_IPV4}   # htype (Ethernet), ptype (IPv4): 16-bit fields.
        sync_rx += If(beat,
            # Ethernet header.
            If(n == 0, group.eq(b[0]), mac_eq.eq(b == mac_b[0])),
            If((n > 0) & (n < 6) & (b != mac_b[n[:3]]), mac_eq.eq(0)),
            If((n == 6) & ~group & ~mac_eq, fail("not_ours")),
            If(n == 13,
                If(w16 == ETHERTYPE_IPV4, is_ipv4.eq(1)
                ).Elif(w16 == ETHERTYPE_ARP, is_arp.eq(1)
                ).Elif(~one_of(w16, ethertypes), fail("ethertype")),
            ),
            # ARP (RFC 826) for IPv4 over Ethernet: request or reply, to the board's address.
            If(is_arp,
                *[If((n == k) & (w16 != v), fail("arp_malformed")) for k, v in arp_fixed.items()],
                If((n == 18) & (b != 6), fail("arp_malformed")),
                If((n == 19) & (b != 4), fail("arp_malformed")),
                If((n == 21) & (w16 != 1) & (w16 != 2), fail("arp_malformed")),
                If((n == 41) & (w32 != self.ip), fail("not_ours")),
            ),
            # IPv4: version and header length at its first byte; the rest judged at its last
            # (byte 33), once the checksum covers the header the fields came from.
            If(is_ipv4,
                If(n == 14,
                    If((b[4:] != 4) | (b[:4] < 5), fail("ip_version")
                    ).Elif(b[:4] != 5, fail("ip_options")),
                ),
                If((n == 15), csum.eq(w16)),
                If((n > 15) & (n < 34) & n[0], csum.eq(csum_next)),
                If(n == 17, ip_total.eq(w16)),
                If(n == 21, fragment.eq(w16[13] | (w16[:13] != 0))),
                If(n == 23, proto.eq(b)),
                If(n == 33,
                    If(~csum_ok, fail("ip_checksum")
                    ).Elif(ip_total < 20, fail("ip_length")
                    ).Elif(fragment, fail("ip_fragment")
                    ).Elif(~ip_ok_dst, fail("not_ours")
                    ).Elif(proto == IP_PROTO_UDP, is_udp.eq(1)
                    ).Elif(proto == IP_PROTO_ICMP, is_icmp.eq(1)
                    ).Else(fail("ip_protocol")),
                ),
            ),
            If(is_icmp & (n == 34) & (b != ICMP_ECHO_REQUEST), fail_l4("icmp_type")),
            If(is_udp,
                If(n == 37, udp_port.eq(w16)),
                If(n == 39,
                    If((w16 < 8) | (w16 != ip_total - 20), fail_l4("udp_length")
                    ).Elif(w16 == 8, fail_l4("udp_empty")
                    ).Elif(~one_of(udp_port, udp_ports), fail_l4("udp_port")),
                ),
            ),
            If(sink.error & ~sink.last, er_seen.eq(1)),
            If(sink.last,
                er_seen.eq(0), bad.eq(0), bad_l4.eq(0), group.eq(0), mac_eq.eq(0), is_ipv4.eq(0), is_arp.eq(0), is_udp.eq(0),
                is_icmp.eq(0), fragment.eq(0),
            ),
        )

        # The verdict, at the last byte: the frame holds n + 1 bytes (saturating) before the FCS.
        cause  = Signal(max=len(CAUSE))
        self.comb += [
            If(er_seen, cause.eq(CAUSE["phy_error"])
            ).Elif(sink.error, cause.eq(CAUSE["fcs"])
            ).Elif(n < MIN_FRAME - 1, cause.eq(CAUSE["runt"])
            ).Elif(n > max_frame - 1, cause.eq(CAUSE["oversize"])
            ).Elif(bad != 0, cause.eq(bad)
            ).Elif(is_ipv4 & (ip_total + 13 > n), cause.eq(CAUSE["ip_length"])
            ).Elif((bad_l4 != 0) & ~((bad_l4 == CAUSE["udp_port"]) & self.claimed), cause.eq(bad_l4)
            ).Else(cause.eq(CAUSE["rx_ok"])),
        ]

        # Out, one cycle later, flagged.
        held  = Signal(max=len(CAUSE))   # The last frame's cause (cd_rx), till the next one ends.
        ended = Signal()
        sync_rx += [
            source.valid.eq(beat),
            source.data.eq(b),
            source.last.eq(sink.last),
            source.last_be.eq(sink.last_be),
            source.error.eq(sink.error | (sink.last & (cause != CAUSE["rx_ok"]))),
            ended.eq(beat & sink.last),
            If(beat & sink.last, held.eq(cause)),
        ]

        # Counters (sys).
        self.event = event = PulseSynchronizer(cd_rx, "sys")
        self.comb += event.i.eq(ended)
        # 512 deep though only len(CAUSE) are used: Yosys then maps it to block RAM (two DP16KD on
        # ECP5), not 24 DPR16X4 of distributed RAM, which cost the colorlight_i5 about 130 LUT4.
        mem = Memory(COUNTER_BITS, 512, init=[0]*512)
        self.specials += mem
        port = mem.get_port(write_capable=True)
        self.specials += port
        inc      = Signal()   # The read for an increment was issued last cycle: write it back.
        which    = Signal(max=len(CAUSE))
        read_sel = Signal()   # Last cycle's read was of `select`'s count.
        want     = Signal()   # `select` was written: take its count at the next clean read.
        self.comb += [
            port.adr.eq(Mux(inc, which, Mux(event.o, held, self._select.storage))),
            port.we.eq(inc),
            port.dat_w.eq(port.dat_r + 1),
        ]
        self.sync += [
            inc.eq(event.o),
            If(event.o, which.eq(held)),
            read_sel.eq(~inc & ~event.o),
            If(self._select.re, want.eq(1)),
            If(want & read_sel & ~self._select.re,
                want.eq(0),
                self._count.status.eq(port.dat_r),
            ),
        ]


def insert_after_fcs_checker(mac_core, module, who):
    """Put `module` into LiteEth's MAC core receive pipeline right after its FCS checker (in the
    receive clock: LiteEth's 8-bit datapath, with_sys_datapath False), before anything already
    there. Before the core is finalized."""
    from liteeth.mac.crc import LiteEthMACCRC32Checker
    pipeline = mac_core.rx_datapath.pipeline
    crcs = [i for i, m in enumerate(pipeline) if isinstance(m, LiteEthMACCRC32Checker)]
    if len(crcs) != 1:
        raise ValueError(f"{who} needs LiteEth's MAC core with its FCS checker (with_preamble_crc=True)")
    if len(pipeline[crcs[0]].source.data) != 8:
        raise ValueError(f"{who} needs the MAC's 8-bit receive datapath (eth_dw=8)")
    pipeline.insert(crcs[0] + 1, module)


def insert_rx_audit(mac_core, audit):
    """`audit` right after LiteEth's FCS checker, in front of the receive classifier if it is
    there (insert it after the classifier)."""
    insert_after_fcs_checker(mac_core, audit, "RXAudit")
