#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Receive audit: every frame the MAC passes on is checked before LiteEth's layers see it,
counted once by cause, and flagged for the frame gate to drop if it is not one the board can use.

    PHY ─► preamble ─► FCS checker ─► RXAudit ─► (classifier) ─► FrameGate ─► LiteEth ARP/IP/UDP

LiteEth's receive layers trust what they are given. Reading their code (and test/gateware/test_rxaudit.py
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
UDP, UDP port, a control request to a broadcast address that is not IDENTIFY; except that an IPv4
total length past the frame's end (truncated), known only at its end, comes before the ICMP and
UDP checks. A frame that passes is counted as rx_ok, and so is
one to another UDP port that a drop or fast-track rule of the classifier behind takes (`claimed`;
the rule counts it).

Broadcast: the board takes the limited broadcast 255.255.255.255 and its subnet's directed
broadcast (its address with the host bits set, from `netmask`; RFC 1122 3.2.1.3 asks a host to
recognise both), so discovery works whichever a host sends to. A /31 or /32 subnet has none
(RFC 3021). On the control port (`ctl_port`) a broadcast is answered only if it is IDENTIFY: a
request that reads or changes a board is meant for one board, and one datagram to a broadcast
address would otherwise reach every board on the subnet (counted as broadcast).

The output is the input two cycles later (the PHY does not wait: `sink.ready` is 1), with `error`
set on the last byte of every frame not counted as rx_ok; the frame gate behind it drops those
whole. Inside, the input is registered and the checks are pipelined (registered position flags,
fields compared a byte before they are judged, each cause a flag before it is encoded), so no
cycle holds more than a few LUT levels: the receive clock has to run at 137.5 MHz on the
colorlight_i5's ECP5 (bench/ecp5_rxtiming.py). Counting happens in sys: one event per frame, its cause held in the receive domain until
the next frame's end (at least 20 byte times), so it is stable when the event's pulse has
crossed. The counts live in a block RAM, as in gateware/streamstats.py: read, then written back
incremented (two cycles; frames come at least 8 sys cycles apart at 1 Gb/s with sys at 50 MHz).
Writing `select` copies that cause's count to `count` (48 bits, never torn by a frame being
counted as it is read).

dw=64 (10G: LiteEth's 64-bit MAC datapath, in sys with with_sys_datapath; 8 bytes a beat, byte i
of the frame in lane i % 8 of beat i // 8, `last_be` one-hot on the last byte, `error` a bit a
byte) gives the same verdicts and counts for the same frames. The header's first 48 bytes (every
check's, up to the control message type at byte 45) are held whole and judged in two registered
stages, the fields against the constants, then the first failed cause in the order above; the
length, the FCS flag and a truncated datagram at the last beat. A frame that is not a runt has
at least two beats after its sixth, so the cause is there in time, and the output is the input
two cycles later as at 8 bits. An `error` on a byte of the last beat counts as a bad FCS (the
beat is judged as one). The 64-bit checks are built for the simulated 10G board: their one-cycle
compares of a 48-byte header have not been placed on an FPGA.
"""

from functools import partial, reduce
from operator import add, or_
from types import SimpleNamespace

from migen import *
from migen.genlib.cdc import PulseSynchronizer

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus, CSRStorage

from liteeth.common import eth_phy_description

from ethdaq.gateware.compare import above, below
from ethdaq.gateware.ptpparser import ETHERTYPE_IPV4, IP_PROTO_UDP
from ethdaq.wire.protocol import MSG_IDENTIFY, RX_AUDIT_CAUSES

CAUSE = {name: i for i, name in enumerate(RX_AUDIT_CAUSES)}
COUNTER_BITS = 48   # 2**48 frames: 5 years of minimum-size frames at 1 Gb/s.

ETHERTYPE_ARP  = 0x0806
IP_PROTO_ICMP  = 1
ICMP_ECHO_REQUEST = 8
MIN_FRAME      = 60       # Bytes before the FCS (64 with it).
CTL_TYPE_BYTE  = 42 + 3   # The control header's message type (after magic u16, version u8): UDP payload byte 3.
HEADER_BYTES   = 48       # dw=64: the header bytes the checks read (0..45), in whole beats.


def hdr_byte(hdr, i):
    """Byte i of a header held whole (byte 0 in the lowest bits)."""
    return hdr[8*i:8*(i + 1)]


def hdr_field(hdr, i, n):
    """The big-endian n-byte field at byte i of a header held whole."""
    return Cat(*[hdr_byte(hdr, i + n - 1 - j) for j in range(n)])


def one_of(value, values):
    """`value` is one of `values` (none: never)."""
    return reduce(or_, [value == v for v in values], Constant(0, 1))


class _ByteFlags:
    """dw=8: the flags the checks read in place of compares, registered with the byte they are
    about, so a check has a flag in its cone, not an 8-bit compare behind `b`'s fanout (ARP's
    fixed fields with the compares inline are six LUT levels, over eth's 7.27 ns on the
    colorlight_i5). Made as the checks ask for them; `statements()` registers them all."""
    def __init__(self, n, data):
        self.n, self.data = n, data   # The sink's byte count, and its byte (stage A's input).
        self.flags     = []           # Position flags, registered with each byte the sink gives.
        self.positions = {}
        self.b_flags   = {}
        self.hi_is, self.hi_flags = {}, []

    def at_n(self, name, cond):
        """`cond` on the byte count, for the byte in stage A."""
        flag = Signal(name=name)
        self.flags.append(flag.eq(cond))
        return flag

    def at(self, k):
        """The byte in stage A is the frame's byte k."""
        if k not in self.positions:
            self.positions[k] = self.at_n(f"at{k}", self.n == k)
        return self.positions[k]

    def b_has(self, name, f):
        """f(b) for the byte in stage A, compared as it enters and registered with it."""
        if name not in self.b_flags:
            self.b_flags[name] = (Signal(name=f"b_{name}"), f(self.data))
        return self.b_flags[name][0]

    def b_is(self, value):
        return self.b_has(f"is_{value:02x}", lambda d: d == value)

    def w16_is(self, value):
        """w16 against a constant, in halves: the high byte's flag kept from when it was in stage
        A (hi_is[h] is sr[:8] == h), so a check ANDs two flags."""
        h = value >> 8
        if h not in self.hi_is:
            self.hi_is[h] = Signal(name=f"hi_is_{h:02x}")
            self.hi_flags.append(self.hi_is[h].eq(self.b_is(h)))
        return self.hi_is[h] & self.b_is(value & 0xff)

    def statements(self, valid, beat):
        """The flags' registers (sync_rx), once every check has asked for its flags."""
        return [If(valid, *self.flags), If(beat, *self.hi_flags),
                [flag.eq(cond) for flag, cond in self.b_flags.values()]]


def _check_params(dw, max_frame, udp_ports, ethertypes, ip_groups, netmask, ctl_port):
    """RXAudit's parameters, checked: a ValueError that says which is wrong. Returns the UDP
    ports and EtherTypes as tuples and the host bits of the subnet's directed broadcast (all ones
    for /31 and /32: the limited broadcast only)."""
    if dw not in (8, 64):
        raise ValueError(f"dw must be 8 (1G) or 64 (10G), not {dw!r}")
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
    host_bits = ~netmask & 0xFFFFFFFF
    if not (0 <= netmask < 2**32) or host_bits & (host_bits + 1):
        raise ValueError(f"netmask must be a 32-bit IPv4 netmask (ones, then zeros), not {netmask!r}")
    if ctl_port is not None and ctl_port not in udp_ports:
        raise ValueError(f"ctl_port must be one of udp_ports {udp_ports!r}, not {ctl_port!r}")
    if host_bits < 3:
        host_bits = 0xFFFFFFFF   # /31 and /32: no directed broadcast (RFC 3021), the limited one only.
    return udp_ports, ethertypes, host_bits


class RXAudit(LiteXModule):
    def __init__(self, dw=8, max_frame=1514, udp_ports=(), ethertypes=(), ip_groups=(), netmask=0xFFFFFFFF,
                 ctl_port=None, cd_rx="eth_rx"):
        udp_ports, ethertypes, host_bits = _check_params(dw, max_frame, udp_ports, ethertypes, ip_groups, netmask, ctl_port)
        self.dw        = dw
        self.udp_ports = udp_ports   # The UDP ports passed to the stack (the others are dropped, counted).
        self.sink   = sink   = stream.Endpoint(eth_phy_description(dw))  # cd_rx, from the FCS checker.
        self.source = source = stream.Endpoint(eth_phy_description(dw))  # cd_rx, on to the gate.
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
        self.comb += sink.ready.eq(1)

        checks = self._word_checks if dw == 64 else self._byte_checks
        beat, data, last, last_be, error, end, verdict = checks(sink, sync_rx,
            max_frame=max_frame, udp_ports=udp_ports, ethertypes=ethertypes, ip_groups=ip_groups,
            ctl_port=ctl_port, host_bits=host_bits)
        held, ended = self._add_output(sync_rx, beat, data, last, last_be, error, end, verdict)
        self._add_counters(held, ended, cd_rx)

    def _add_output(self, sync_rx, beat, data, last, last_be, error, end, verdict):
        """The input out two cycles after it came in, `error` set on the last byte of a frame not
        counted as rx_ok. Returns the last frame's cause (`held`) and the pulse of its end (`ended`)."""
        source = self.source
        held  = Signal(max=len(CAUSE))   # The last frame's cause (cd_rx), till the next one ends.
        ended = Signal()
        sync_rx += [
            source.valid.eq(beat),
            source.data.eq(data),
            source.last.eq(last),
            source.last_be.eq(last_be),
            source.error.eq(error | every_byte(last & (verdict != CAUSE["rx_ok"]), len(error))),
            ended.eq(end),
            If(end, held.eq(verdict)),
        ]
        return held, ended

    def _add_counters(self, held, ended, cd_rx):
        """The counts by cause (sys), in a block RAM: one event per frame, its cause `held`."""
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

    def _byte_checks(self, sink, sync_rx, max_frame, udp_ports, ethertypes, ip_groups, ctl_port, host_bits):
        """dw=8: the input registered with flags of its position and compares (stage A), the
        header's fields captured, each check judged at its byte (stage B). Returns stage A's beat,
        byte, last, last_be and error, the frame's end, and the verdict at its last byte."""
        a = self._byte_stage_a(sink, sync_rx, max_frame)
        h = self._byte_fields(sink, sync_rx, a, udp_ports, ip_groups, ctl_port, host_bits)
        verdict = self._byte_verdict(sink, sync_rx, a, h, ethertypes)
        return a.beat, a.b, a.last, a.last_be, a.error, a.end, verdict

    def _byte_stage_a(self, sink, sync_rx, max_frame):
        """dw=8, stage A: the input registered, with the flags of its position in the frame and
        of its compares (`_ByteFlags`), and the 16 and 32-bit fields that end at it."""
        # The input, registered (stage A): nothing of LiteEth's FCS checker (its FIFO's read, its
        # CRC compare) shares a cycle with the checks. `n` counts the sink's bytes (saturating);
        # what depends on the position only is registered with the byte, so the byte in stage A
        # comes with flags saying where it is.
        n     = Signal(max=max(max_frame + 2, 64))
        n_max = 2**len(n) - 1
        sync_rx += If(sink.valid,
            If(n != n_max, n.eq(n + 1)),
            If(sink.last, n.eq(0)),
        )
        beat  = Signal()
        b     = Signal(8)
        last  = Signal()
        error = Signal()
        last_be = Signal()
        sync_rx += [
            beat.eq(sink.valid),
            b.eq(sink.data),
            last.eq(sink.last),
            last_be.eq(sink.last_be),
            error.eq(sink.error),
        ]
        end = Signal()
        self.comb += end.eq(beat & last)

        bf = _ByteFlags(n, sink.data)
        at_n = bf.at_n
        runt     = at_n("runt",     below(n, MIN_FRAME - 1))   # The frame holds n + 1 bytes before the FCS.
        oversize = at_n("oversize", above(n, max_frame - 1))
        mac_rest = at_n("mac_rest", (n != 0) & below(n, 6))
        csum_add = at_n("csum_add", above(n, 15) & below(n, 34) & n[0])

        # The 16 and 32-bit big-endian fields that end at the byte in stage A.
        sr  = Signal(24)
        w16 = Signal(16)
        w32 = Signal(32)
        self.comb += [w16.eq(Cat(b, sr[:8])), w32.eq(Cat(b, sr))]
        sync_rx += If(beat, sr.eq(Cat(b, sr[:16])))

        return SimpleNamespace(n=n, beat=beat, b=b, last=last, error=error, last_be=last_be, end=end, bf=bf,
            runt=runt, oversize=oversize, mac_rest=mac_rest, csum_add=csum_add, w16=w16, w32=w32)

    def _byte_fields(self, sink, sync_rx, a, udp_ports, ip_groups, ctl_port, host_bits):
        """dw=8: the header's fields and flags, captured as their bytes pass stage A, for the
        checks judged later. Returns them by name."""
        n, beat, b, w16, w32, csum_add = a.n, a.beat, a.b, a.w16, a.w32, a.csum_add
        at, b_is = a.bf.at, a.bf.b_is
        # Fields and flags captured from the header for the checks judged later.
        csum      = Signal(17)               # Ones'-complement sum of the IPv4 header's words.
        csum_next = Signal(17)
        csum_fold = Signal()                 # The folded sum is 0xFFFF (no adder for the fold).
        csum_ok   = Signal()                 # ...registered at byte 34.
        ip_udp    = Signal(16)               # IPv4 total length - 20: what the UDP length must be.
        ip_end    = Signal(17)               # IPv4 total length + 13: the last byte's offset must reach it.
        ip_short  = Signal()                 # Total length under 20.
        fragment  = Signal()
        proto_udp = Signal()
        proto_icmp = Signal()
        eq_ip     = Signal()                 # w32 one byte ago was the board's address...
        eq_dst    = Signal()                 # ...or one it takes (the PTP groups)...
        eq_bcast  = Signal()                 # ...or a broadcast (limited, or the subnet's directed).
        dst_ok    = Signal()
        bcast     = Signal()                 # The datagram's destination is a broadcast.
        to_ctl    = Signal()                 # ...and its UDP port the control port.
        bcast_ip  = Signal(32)               # The subnet's directed broadcast: registered, `ip` changes rarely.
        icmp_bad  = Signal()
        port_ok   = Signal()
        udp_lt8   = Signal()
        udp_eq8   = Signal()
        udp_diff  = Signal()
        truncated = Signal()                 # The IPv4 datagram ends past the byte in stage A.
        self.comb += [
            csum_next.eq(csum[:16] + csum[16] + w16),
            csum_fold.eq(Mux(csum[16], csum[:16] == 0xFFFE, csum[:16] == 0xFFFF)),
        ]
        sync_rx += [
            bcast_ip.eq(self.ip | host_bits),
            If(sink.valid, truncated.eq(ip_end > n)),
            If(beat,
                eq_ip.eq(w32 == self.ip),
                eq_dst.eq(one_of(w32, ip_groups)),
                eq_bcast.eq((w32 == 0xFFFFFFFF) | (w32 == bcast_ip)),
                If(at(15), csum.eq(w16)),
                If(csum_add, csum.eq(csum_next)),
                If(at(17),
                    ip_udp.eq(w16 - 20),
                    ip_end.eq(w16 + 13),
                    ip_short.eq(w16 < 20),
                ),
                If(at(21), fragment.eq(w16[13] | (w16[:13] != 0))),
                If(at(23), proto_udp.eq(b_is(IP_PROTO_UDP)), proto_icmp.eq(b_is(IP_PROTO_ICMP))),
                If(at(34),   # The sum and the destination address of bytes 14..33.
                    csum_ok.eq(csum_fold),
                    dst_ok.eq(eq_ip | eq_dst | eq_bcast),
                    bcast.eq(eq_bcast),
                    icmp_bad.eq(~b_is(ICMP_ECHO_REQUEST)),
                ),
                If(at(37),
                    port_ok.eq(one_of(w16, udp_ports)),
                    to_ctl.eq(one_of(w16, () if ctl_port is None else (ctl_port,))),
                ),
                If(at(39),
                    udp_lt8.eq(below(w16, 8)),
                    udp_eq8.eq(w16 == 8),
                    udp_diff.eq(w16 != ip_udp),
                ),
            ),
        ]
        return SimpleNamespace(csum_ok=csum_ok, ip_udp=ip_udp, ip_short=ip_short, fragment=fragment,
            proto_udp=proto_udp, proto_icmp=proto_icmp, eq_ip=eq_ip, dst_ok=dst_ok, bcast=bcast, to_ctl=to_ctl,
            icmp_bad=icmp_bad, port_ok=port_ok, udp_lt8=udp_lt8, udp_eq8=udp_eq8, udp_diff=udp_diff, truncated=truncated)

    def _byte_verdict(self, sink, sync_rx, a, h, ethertypes):
        """dw=8, stage B: each check judged at its byte, the first failed cause kept till the
        frame's end, and the verdict at its last byte."""
        n, beat, b, last, error, end, w16 = a.n, a.beat, a.b, a.last, a.error, a.end, a.w16
        at, b_has, b_is, w16_is = a.bf.at, a.bf.b_has, a.bf.b_is, a.bf.w16_is
        # The checks (stage B). Each one that fails at the byte in stage A gives its cause in
        # `code` (ICMP and UDP: `code_l4`), registered; at most one per byte, so the causes are
        # ORed, not prioritised. Applied in the next cycle: the first failed check's cause stays
        # in `bad` (`bad_l4`) until the frame's end. Where a check needs a field that ends at the
        # byte it is judged on, the field is compared into a flag first and judged a byte later
        # (IPv4 at byte 35, not 33; ICMP at 36; UDP at 40; ARP's target at 42): still long before
        # the last byte of a frame that is not a runt (59), and a runt is counted as one whatever
        # its header said.
        bad       = Signal(max=len(CAUSE))   # The first failed check's cause (link, ARP, IPv4); 0 (rx_ok): none yet.
        bad_l4    = Signal(max=len(CAUSE))   # The same for ICMP and UDP: judged after a truncated IPv4 datagram.
        code      = Signal(max=len(CAUSE))
        code_l4   = Signal(max=len(CAUSE))
        group     = Signal()
        mac_eq    = Signal()
        mac_next  = Signal(8)                # The board's MAC byte the byte in stage A is compared with.
        is_ipv4   = Signal()
        is_arp    = Signal()
        is_udp    = Signal()
        is_icmp   = Signal()
        er_seen   = Signal()                 # `error` on a byte before the last: the PHY's RX_ER.
        mac_b     = Array(self.mac[8*(5 - i):8*(6 - i)] for i in range(6))
        sync_rx += If(sink.valid, mac_next.eq(mac_b[n[:3]]))

        # The checks, by cause: each is high in the cycle after the byte that fails it, and the
        # failed causes are encoded into `code` a cycle later (no `~x` alone as a Mux's select
        # anywhere here: Migen's simulator takes ~1 as true).
        ip_ok = Signal()
        self.comb += ip_ok.eq(h.csum_ok & ~h.ip_short & ~h.fragment & h.dst_ok)
        version4 = b_has("version4", lambda d: d[4:] == 4)   # IPv4's first byte: version...
        ihl_lt5  = b_has("ihl_lt5",  lambda d: below(d[:4], 5))    # ...and header length in words.
        ihl_gt5  = b_has("ihl_gt5",  lambda d: above(d[:4], 5))
        checks = {
            "not_ours": (at(6) & ~group & ~mac_eq) |
                        (is_arp & at(42) & ~h.eq_ip) |                     # ARP's target (38..41).
                        (is_ipv4 & at(35) & h.csum_ok & ~h.ip_short & ~h.fragment & ~h.dst_ok),
            "ethertype": at(13) & ~reduce(or_, [w16_is(t) for t in (ETHERTYPE_IPV4, ETHERTYPE_ARP) + ethertypes]),
            # ARP (RFC 826) for IPv4 over Ethernet: request or reply.
            "arp_malformed": is_arp & ((at(15) & ~w16_is(1)) |              # htype: Ethernet.
                                       (at(17) & ~w16_is(ETHERTYPE_IPV4)) | # ptype: IPv4.
                                       (at(18) & ~b_is(6)) |                # hlen: 6.
                                       (at(19) & ~b_is(4)) |                # plen: 4.
                                       (at(21) & ~w16_is(1) & ~w16_is(2))),
            # IPv4: version and header length at its first byte; the rest once the checksum
            # covers the header the fields came from.
            "ip_version":  is_ipv4 & at(14) & (~version4 | ihl_lt5),
            "ip_options":  is_ipv4 & at(14) & version4 & ihl_gt5,
            "ip_checksum": is_ipv4 & at(35) & ~h.csum_ok,
            "ip_length":   is_ipv4 & at(35) & h.csum_ok & h.ip_short,
            "ip_fragment": is_ipv4 & at(35) & h.csum_ok & ~h.ip_short & h.fragment,
            "ip_protocol": is_ipv4 & at(35) & ip_ok & ~h.proto_udp & ~h.proto_icmp,
        }
        checks_l4 = {
            "icmp_type":  is_icmp & at(36) & h.icmp_bad,
            "udp_length": is_udp & at(40) & (h.udp_lt8 | h.udp_diff),
            "udp_empty":  is_udp & at(40) & ~h.udp_lt8 & ~h.udp_diff & h.udp_eq8,
            "udp_port":   is_udp & at(40) & ~h.udp_lt8 & ~h.udp_diff & ~h.udp_eq8 & ~h.port_ok,
            "broadcast": is_udp & at(CTL_TYPE_BYTE) & h.bcast & h.to_ctl & ~b_is(MSG_IDENTIFY),
        }
        failed    = {c: Signal(name=f"failed_{c}") for c in checks}
        failed_l4 = {c: Signal(name=f"failed_{c}") for c in checks_l4}
        sync_rx += [
            *[failed[c].eq(beat & ~last & cond) for c, cond in checks.items()],
            *[failed_l4[c].eq(beat & ~last & cond) for c, cond in checks_l4.items()],
            # At most one cause a cycle (the checks are at different bytes, or exclusive): ORed,
            # not prioritised. None survives the frame's last byte.
            code.eq(Mux(end, 0, reduce(or_, [Mux(f, CAUSE[c], 0) for c, f in failed.items()]))),
            code_l4.eq(Mux(end, 0, reduce(or_, [Mux(f, CAUSE[c], 0) for c, f in failed_l4.items()]))),
        ]
        sync_rx += [
            If(bad == 0, bad.eq(code)),
            If(bad_l4 == 0, bad_l4.eq(code_l4)),
            If(beat,
                If(at(0), group.eq(b[0]), mac_eq.eq(b == mac_next)),
                If(a.mac_rest & (b != mac_next), mac_eq.eq(0)),
                If(at(13), is_ipv4.eq(w16_is(ETHERTYPE_IPV4)), is_arp.eq(w16_is(ETHERTYPE_ARP))),
                If(is_ipv4 & at(35), is_udp.eq(ip_ok & h.proto_udp), is_icmp.eq(ip_ok & h.proto_icmp)),
                If(error & ~last, er_seen.eq(1)),
            ),
            If(end,
                er_seen.eq(0), bad.eq(0), bad_l4.eq(0), group.eq(0), mac_eq.eq(0), is_ipv4.eq(0), is_arp.eq(0),
                is_udp.eq(0), is_icmp.eq(0),
            ),
        ]

        sync_rx += a.bf.statements(sink.valid, beat)

        # The verdict, at the last byte.
        verdict = Signal(max=len(CAUSE))
        self.comb += [verdict_of(verdict, er_seen, error, a.runt, a.oversize, bad, is_ipv4 & h.truncated, bad_l4, self.claimed)]
        return verdict

    def _word_checks(self, sink, sync_rx, max_frame, udp_ports, ethertypes, ip_groups, ctl_port, host_bits):
        """dw=64: the header's first 48 bytes (six beats, enough for every check) held whole and
        judged at once, two cycles after its last beat, in time for the earliest last beat of a
        frame that is not a runt (beat 7). Returns what _byte_checks does, for 8-byte beats."""
        beat, d, last, last_be, error, end, k, hdr, length = self._word_stage_a(sink, sync_rx, max_frame)
        # The header's flags (stage H1), by name.
        h = self._word_fields(sync_rx, beat, k, hdr, udp_ports, ethertypes, ip_groups, ctl_port, host_bits)

        # Stage H2: the first failed check's cause, in the order the 8-bit checks meet them
        # (their bytes: the MAC 6, EtherType 13, ARP 15..21 then its target 42, IPv4 14 then 35;
        # ICMP 36, UDP 40, the control type 45), registered.
        bad    = Signal(max=len(CAUSE))
        bad_l4 = Signal(max=len(CAUSE))
        ip_ok  = h.csum_ok & ~h.ip_short & ~h.fragment & h.dst_ok
        is_udp, is_icmp = h.is_ipv4 & ip_ok & h.proto_udp, h.is_ipv4 & ip_ok & h.proto_icmp

        def first(target, checks):
            chain = If(checks[0][1], target.eq(CAUSE[checks[0][0]]))
            for c, cond in checks[1:]:
                chain = chain.Elif(cond, target.eq(CAUSE[c]))
            return chain.Else(target.eq(0))

        sync_rx += [
            first(bad, [
                ("not_ours",      ~h.mac_ok),
                ("ethertype",     ~h.et_ok),
                ("arp_malformed", h.is_arp & ~h.arp_ok),
                ("not_ours",      h.is_arp & ~h.arp_ours),
                ("ip_version",    h.is_ipv4 & ~h.version_ok),
                ("ip_options",    h.is_ipv4 & h.options),
                ("ip_checksum",   h.is_ipv4 & ~h.csum_ok),
                ("ip_length",     h.is_ipv4 & h.ip_short),
                ("ip_fragment",   h.is_ipv4 & h.fragment),
                ("not_ours",      h.is_ipv4 & ~h.dst_ok),
                ("ip_protocol",   h.is_ipv4 & ~h.proto_udp & ~h.proto_icmp),
            ]),
            first(bad_l4, [
                ("icmp_type",  is_icmp & h.icmp_bad),
                ("udp_length", is_udp & (h.udp_lt8 | h.udp_diff)),
                ("udp_empty",  is_udp & h.udp_eq8),
                ("udp_port",   is_udp & ~h.port_ok),
                ("broadcast",  is_udp & h.bcast & h.to_ctl & ~h.identify),
            ]),
        ]

        # At the last beat: a receive error the PHY signalled on an earlier beat, the length's
        # checks, an IPv4 datagram that runs past the frame's end.
        er_seen   = Signal()
        runt      = Signal()
        oversize  = Signal()
        truncated = Signal()
        sync_rx += [
            If(beat & ~last & (error != 0), er_seen.eq(1)),
            If(end, er_seen.eq(0)),
        ]
        self.comb += [
            runt.eq(length < MIN_FRAME),
            oversize.eq(length > max_frame),
            truncated.eq(h.is_ipv4 & (h.total + 14 > length)),
        ]
        verdict = Signal(max=len(CAUSE))
        self.comb += verdict_of(verdict, er_seen, error != 0, runt, oversize, bad, truncated, bad_l4, self.claimed)
        return beat, d, last, last_be, error, end, verdict

    def _word_stage_a(self, sink, sync_rx, max_frame):
        """dw=64, stage A: the input registered, with its beat's index in the frame; the header's
        first 48 bytes as they arrive; the frame's length at its last beat."""
        nb     = Signal(max=max((max_frame + 2)//8 + 2, 16))   # Saturating.
        nb_max = 2**len(nb) - 1
        sync_rx += If(sink.valid,
            If(nb != nb_max, nb.eq(nb + 1)),
            If(sink.last, nb.eq(0)),
        )
        beat    = Signal()
        d       = Signal(64)
        last    = Signal()
        last_be = Signal(8)
        error   = Signal(8)
        k       = Signal.like(nb)   # Stage A's beat index.
        sync_rx += [
            beat.eq(sink.valid),
            d.eq(sink.data),
            last.eq(sink.last),
            last_be.eq(sink.last_be),
            error.eq(sink.error),
            If(sink.valid, k.eq(nb)),
        ]
        end = Signal()
        self.comb += end.eq(beat & last)

        # The header, bytes 0..47, captured beat by beat with stage A.
        hdr = Signal(8*HEADER_BYTES)
        sync_rx += If(sink.valid, Case(nb, {j: hdr[64*j:64*(j + 1)].eq(sink.data) for j in range(HEADER_BYTES//8)}))

        # The frame's length at its last beat: `last_be` is one-hot on the last valid byte.
        tail   = Signal(4)
        length = Signal(len(nb) + 3)
        self.comb += [
            tail.eq(8),
            *[If(last_be[i], tail.eq(i + 1)) for i in range(8)],
            length.eq(Cat(Constant(0, 3), k) + tail),
        ]
        return beat, d, last, last_be, error, end, k, hdr, length

    def _word_fields(self, sync_rx, beat, k, hdr, udp_ports, ethertypes, ip_groups, ctl_port, host_bits):
        """dw=64, stage H1: the header's fields against what the board takes, registered in the
        cycle the header is whole (its sixth beat in stage A). Returns the flags by name."""
        whole = Signal()
        self.comb += whole.eq(beat & (k == HEADER_BYTES//8 - 1))

        h1, flags = [], SimpleNamespace()

        def held(expr, width=1, name=None):
            s = Signal(width, name=name)
            h1.append(s.eq(expr))
            setattr(flags, name, s)
            return s

        byte, field = partial(hdr_byte, hdr), partial(hdr_field, hdr)
        et, dst, udp_len = field(12, 2), field(30, 4), field(38, 2)
        csum_sum  = Signal(20)   # The IPv4 header's ten words, added (ones' complement: folded twice).
        csum_f1   = Signal(17)
        csum_f2   = Signal(16)
        ip_udp    = Signal(16)   # IPv4 total length - 20: what the UDP length must be.
        bcast_ip  = Signal(32)   # The subnet's directed broadcast: registered, `ip` changes rarely.
        self.comb += [
            csum_sum.eq(reduce(add, [field(14 + 2*i, 2) for i in range(10)])),
            csum_f1.eq(csum_sum[:16] + csum_sum[16:]),
            csum_f2.eq(csum_f1[:16] + csum_f1[16]),
            ip_udp.eq(field(16, 2) - 20),
        ]
        sync_rx += bcast_ip.eq(self.ip | host_bits)
        eq_bcast   = (dst == 0xFFFFFFFF) | (dst == bcast_ip)
        mac_ok     = held(byte(0)[0] | (field(0, 6) == self.mac), name="mac_ok")
        et_ok      = held(one_of(et, (ETHERTYPE_IPV4, ETHERTYPE_ARP) + ethertypes), name="et_ok")
        is_ipv4    = held(et == ETHERTYPE_IPV4, name="is_ipv4")
        is_arp     = held(et == ETHERTYPE_ARP, name="is_arp")
        arp_ok     = held((field(14, 2) == 1) & (field(16, 2) == ETHERTYPE_IPV4) & (byte(18) == 6) &
                          (byte(19) == 4) & ((field(20, 2) == 1) | (field(20, 2) == 2)), name="arp_ok")
        arp_ours   = held(field(38, 4) == self.ip, name="arp_ours")
        version_ok = held((byte(14)[4:] == 4) & (byte(14)[:4] >= 5), name="version_ok")
        options    = held(byte(14)[:4] > 5, name="options")
        csum_ok    = held(csum_f2 == 0xFFFF, name="csum_ok")
        total      = held(field(16, 2), 16, name="total")
        ip_short   = held(field(16, 2) < 20, name="ip_short")
        fragment   = held(byte(20)[5] | (field(20, 2)[:13] != 0), name="fragment")
        dst_ok     = held((dst == self.ip) | one_of(dst, ip_groups) | eq_bcast, name="dst_ok")
        bcast      = held(eq_bcast, name="bcast")
        proto_udp  = held(byte(23) == IP_PROTO_UDP, name="proto_udp")
        proto_icmp = held(byte(23) == IP_PROTO_ICMP, name="proto_icmp")
        icmp_bad   = held(byte(34) != ICMP_ECHO_REQUEST, name="icmp_bad")
        port_ok    = held(one_of(field(36, 2), udp_ports), name="port_ok")
        to_ctl     = held(one_of(field(36, 2), () if ctl_port is None else (ctl_port,)), name="to_ctl")
        udp_lt8    = held(udp_len < 8, name="udp_lt8")
        udp_eq8    = held(udp_len == 8, name="udp_eq8")
        udp_diff   = held(udp_len != ip_udp, name="udp_diff")
        identify   = held(byte(CTL_TYPE_BYTE) == MSG_IDENTIFY, name="identify")
        sync_rx += If(whole, *h1)
        return flags


def verdict_of(verdict, er_seen, fcs, runt, oversize, bad, truncated, bad_l4, claimed):
    """`verdict` at a frame's last beat: the first cause its checks found, in the order of the
    module's docstring (`bad`: link, ARP and IPv4; `truncated`: an IPv4 datagram past the frame's
    end; `bad_l4`: ICMP and UDP, where a port a classifier rule `claimed` is no fault)."""
    return If(er_seen, verdict.eq(CAUSE["phy_error"])
        ).Elif(fcs, verdict.eq(CAUSE["fcs"])
        ).Elif(runt, verdict.eq(CAUSE["runt"])
        ).Elif(oversize, verdict.eq(CAUSE["oversize"])
        ).Elif(bad != 0, verdict.eq(bad)
        ).Elif(truncated, verdict.eq(CAUSE["ip_length"])
        ).Elif((bad_l4 != 0) & ~((bad_l4 == CAUSE["udp_port"]) & claimed), verdict.eq(bad_l4)
        ).Else(verdict.eq(CAUSE["rx_ok"]))


def every_byte(flag, nbytes):
    """`flag` for each byte of a beat (LiteEth's `error` has a bit per byte)."""
    return flag if nbytes == 1 else Replicate(flag, nbytes)

def insert_after_fcs_checker(mac_core, module, who):
    """Put `module` into LiteEth's MAC core receive pipeline right after its FCS checker, before
    anything already there; LiteEth's checker or gateware/fcschecker.py's in its place. The
    module's width must be the checker's: 8 bits in the receive clock (LiteEth's 8-bit datapath,
    with_sys_datapath False), 64 bits in sys with the 64-bit datapath (with_sys_datapath True) or
    in the receive clock (False, a 64-bit PHY). Before the core is finalized."""
    from liteeth.mac.crc import LiteEthMACCRC32Checker
    from ethdaq.gateware.fcschecker import FCSChecker
    pipeline = mac_core.rx_datapath.pipeline
    crcs = [i for i, m in enumerate(pipeline) if isinstance(m, (LiteEthMACCRC32Checker, FCSChecker))]
    if len(crcs) != 1:
        raise ValueError(f"{who} needs LiteEth's MAC core with its FCS checker (with_preamble_crc=True)")
    dw, mac_dw = len(module.sink.data), len(pipeline[crcs[0]].source.data)
    if mac_dw != dw:
        raise ValueError(f"{who} is {dw}-bit and needs the MAC's {dw}-bit receive datapath, not {mac_dw}-bit (eth_dw={dw})")
    pipeline.insert(crcs[0] + 1, module)


def insert_rx_audit(mac_core, audit):
    """`audit` right after LiteEth's FCS checker, in front of the receive classifier if it is
    there (insert it after the classifier)."""
    insert_after_fcs_checker(mac_core, audit, "RXAudit")
