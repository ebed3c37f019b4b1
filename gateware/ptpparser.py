#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""PTP messages recognised on a PHY-side byte stream: Ethernet (EtherType 0x88F7) or IPv4/UDP
ports 319/320, one optional VLAN tag; the fields a timestamp record keeps (record_layout).
PTPParser finds the SFD, so the timestamper takes the time in its exact cycle, and reports
the message's fields one cycle after the frame's end."""

from types import SimpleNamespace

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description, eth_preamble

from ethdaq.gateware.compare import below

# Constants ----------------------------------------------------------------------------------------

PTP_ETHERTYPE      = 0x88F7
ETHERTYPE_IPV4     = 0x0800
ETHERTYPE_VLAN     = 0x8100
IP_PROTO_UDP       = 17
PTP_EVENT_PORT     = 319
PTP_GENERAL_PORT   = 320
PTP_VERSION        = 2
PTP_HEADER_LEN     = 34

# Destination classes recorded with each timestamp (`dst` field).
DST_OTHER   = 0  # Anything else (e.g. unicast to us): the timestamper does not filter on address.
DST_PRIMARY = 1  # 224.0.1.129 / 01-1B-19-00-00-00: PTP primary multicast.
DST_PDELAY  = 2  # 224.0.0.107 / 01-80-C2-00-00-0E: PTP peer-delay multicast.
PTP_IPV4_PRIMARY = 0xE0000181  # 224.0.1.129
PTP_IPV4_PDELAY  = 0xE000006B  # 224.0.0.107
PTP_MAC_PRIMARY  = 0x011B19000000
PTP_MAC_PDELAY   = 0x0180C200000E

ETH_SFD      = 0xD5
ETH_PREAMBLE = 0x55

# The 16-bit fields that steer PTPParser (EtherTypes, UDP ports).
STEERING = (ETHERTYPE_VLAN, PTP_ETHERTYPE, ETHERTYPE_IPV4, PTP_EVENT_PORT, PTP_GENERAL_PORT)


# Records ------------------------------------------------------------------------------------------

def record_layout(dw=8):
    """A timestamp record's fields; at dw=64 (XGMII) also the lane of the frame's /S/."""
    return [
        ("sec",      48),
        ("ns",       30),
        ("msg_type",  4),
        ("seq",      16),
        ("domain",    8),
        ("source",   32),  # sourcePortIdentity bytes 6..9: clockIdentity's last two, portNumber.
        ("udp",       1),  # 1: IPv4/UDP; 0: Ethernet (EtherType 0x88F7).
        ("vlan",      1),
        ("dst",       2),  # DST_*: which PTP address the frame was sent to.
    ] + ([("start_lane", 3)] if dw == 64 else [])


def _position_flags(cnt, ihl_m1):
    """Position flags, set with `cnt` from its current value: at[k] is cnt == k; `hdr_end`: the
    IPv4 header's last byte, (IHL - 1)*4 + 3 (options skipped). Returns them and the statements
    that step them to the next byte (`count()`) or start a header at byte `value`
    (`restart(value)`)."""
    at = {k: Signal(name=f"at_{k}") for k in (0, 1, 3, 4, 5, 6, 7, 9, 13, 19, 31, PTP_HEADER_LEN - 1)}
    hdr_end = Signal()
    def count():
        return [NextValue(cnt, cnt + 1),
                *[NextValue(a, (cnt == k - 1) if k else 0) for k, a in at.items()],
                NextValue(hdr_end, (cnt[2:] == ihl_m1) & (cnt[:2] == 2))]
    def restart(value):
        return [NextValue(cnt, value),
                *[NextValue(a, int(k == value)) for k, a in at.items()],
                NextValue(hdr_end, 0)]
    return at, hdr_end, count, restart


# Parser -------------------------------------------------------------------------------------------

class PTPParser(LiteXModule):
    """Byte-wise (dw=8) PHY-side frame parser, in one domain: `sfd` pulses in the SFD beat (the
    first beat without preamble); one cycle after the frame's last beat `done` pulses with the
    record fields if the frame was a PTP message (version 2, header complete).

    Two stages. The first, at the tap, finds the SFD (so the time is taken in its exact cycle)
    and registers the byte with its compares against the constants the parser looks for. The
    second walks the headers one beat later, on those registered flags and on registered
    position flags (`at[k]`: this is byte k of the current header), so a state's next value is a
    few flip-flops in an AND-OR, not a byte compare, a counter compare and the state logic in
    series (about 9 LUT levels, more than the eth clock's 8 ns on an ECP5-6)."""
    def __init__(self, with_preamble=True):
        self.sink   = sink = stream.Endpoint(eth_phy_description(8))
        self.sfd    = Signal()
        self.done   = Signal()
        self.fields = fields = Record([(n, w) for n, w in record_layout() if n not in ("sec", "ns")])

        # # #

        beat1, last1, start1, b1, t = self._add_stage1(with_preamble)
        r = self._add_record(beat1, b1)
        self._add_walk(beat1, last1, start1, b1, t, r, with_preamble)

    def _add_stage1(self, with_preamble):
        """Stage 1, at the tap: `sfd`, and the byte registered with its compares against the
        constants the parser looks for. Returns the registered beat, last, start (`sfd`) and byte,
        and the compares' flags by name (`byte_is[v]`: the byte was v; `word_is(v)`: the 16-bit
        field ending at it is v)."""
        sink = self.sink
        beat = Signal()
        b    = sink.data
        self.comb += beat.eq(sink.valid & sink.ready)

        # Between frames (and in the preamble) `in_frame` is low. With a preamble, the first
        # byte that is not a preamble byte ends it: the SFD starts a frame, anything else makes
        # the rest of the frame ignored (the second stage only starts on `sfd`).
        in_frame = Signal()
        if with_preamble:
            self.comb += self.sfd.eq(beat & ~in_frame & (b == ETH_SFD))
            self.sync += If(beat,
                If(sink.last, in_frame.eq(0)).Elif(b != ETH_PREAMBLE, in_frame.eq(1)))
        else:
            self.comb += self.sfd.eq(beat & ~in_frame)
            self.sync += If(beat, in_frame.eq(~sink.last))

        beat1  = Signal()
        last1  = Signal()
        start1 = Signal()
        b1     = Signal(8)
        self.sync += [beat1.eq(beat), last1.eq(sink.last), start1.eq(self.sfd), b1.eq(b)]

        def flag(name, expr):
            f = Signal(name=name)
            self.sync += f.eq(expr)
            return f
        # The 16-bit fields that steer the parser (EtherTypes, UDP ports) are compared in
        # halves: the high byte's flag is kept for the next beat (`hi_was`), the low byte's is
        # used in its own beat.
        values   = {v >> 8 for v in STEERING} | {v & 0xff for v in STEERING} | {0, IP_PROTO_UDP}
        byte_is  = {v: flag(f"byte_is_{v:02x}", b == v) for v in sorted(values)}
        # Version 4 and IHL < 5.
        bad_ihl  = flag("bad_ipv4_start", (b[4:] != 4) | below(b[:4], 5))
        frag_hi  = flag("frag_hi", b[:6] != 0)   # MF flag, offset bits 12..8.
        bad_vers = flag("bad_ptp_version", b[:4] != PTP_VERSION)
        hi_was = {h: Signal(name=f"hi_was_{h:02x}") for h in sorted({v >> 8 for v in STEERING})}
        self.sync += If(beat1, *[flag.eq(byte_is[h]) for h, flag in hi_was.items()])
        def word_is(value):
            """The big-endian 16-bit field ending at this byte is `value`."""
            return hi_was[value >> 8] & byte_is[value & 0xff]
        t = SimpleNamespace(byte_is=byte_is, word_is=word_is, bad_ihl=bad_ihl, frag_hi=frag_hi, bad_vers=bad_vers)
        return beat1, last1, start1, b1, t

    def _add_record(self, beat1, b1):
        """Stage 2's registers for the record's fields, and the record (`fields`) from them.
        Returns them by name, with the byte history (`hist`: the bytes before b1)."""
        fields   = self.fields
        hist     = Signal(40)  # The bytes before b1 (the previous in hist[:8]).
        mac_pri  = Signal()    # Destination MAC matches.
        mac_pd   = Signal()
        ip_pri   = Signal()
        ip_pd    = Signal()
        is_udp   = Signal()
        msg_type = Signal(4)
        seq      = Signal(16)
        domain   = Signal(8)
        source   = Signal(32)
        vlan     = Signal()
        self.comb += [
            fields.msg_type.eq(msg_type),
            fields.seq.eq(seq),
            fields.domain.eq(domain),
            fields.source.eq(source),
            fields.udp.eq(is_udp),
            fields.vlan.eq(vlan),
            fields.dst.eq(Mux(is_udp,
                Mux(ip_pri, DST_PRIMARY, Mux(ip_pd, DST_PDELAY, DST_OTHER)),
                Mux(mac_pri, DST_PRIMARY, Mux(mac_pd, DST_PDELAY, DST_OTHER)))),
        ]
        self.sync += If(beat1, hist.eq(Cat(b1, hist[:-8])))
        return SimpleNamespace(hist=hist, mac_pri=mac_pri, mac_pd=mac_pd, ip_pri=ip_pri, ip_pd=ip_pd,
            is_udp=is_udp, msg_type=msg_type, seq=seq, domain=domain, source=source, vlan=vlan)

    def _add_walk(self, beat1, last1, start1, b1, t, r, with_preamble):
        """Stage 2, one beat after the tap: the headers walked on stage 1's registered flags and
        on registered position flags, into the record's registers `r`; `done` at the end."""
        byte_is, hist = t.byte_is, r.hist
        cnt      = Signal(6)   # Byte within the current header (an IPv4 header's last is 59).
        ihl_m1   = Signal(4)
        # The PTP destinations are compared whole at their last byte, not byte by byte against a
        # table indexed by `cnt` (a multiplexer in the state machine's path).
        w32 = Cat(b1, hist[:24])
        w48 = Cat(b1, hist)
        at, hdr_end, count, restart = _position_flags(cnt, ihl_m1)
        word_is = t.word_is

        def ether_type(allow_vlan):
            """Dispatch on the EtherType ending at this byte."""
            return [
                *restart(0),
                If(word_is(ETHERTYPE_VLAN) & allow_vlan,
                    NextValue(r.vlan, 1), NextState("VLAN"),
                ).Elif(word_is(PTP_ETHERTYPE),
                    NextValue(r.is_udp, 0), NextState("PTP"),
                ).Elif(word_is(ETHERTYPE_IPV4),
                    NextState("IPV4"),
                ).Else(
                    NextState("DROP"),
                )
            ]

        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",  # Until stage 1 found a frame's start.
            If(start1,
                NextValue(r.mac_pri, 1), NextValue(r.mac_pd, 1), NextValue(r.ip_pri, 0), NextValue(r.ip_pd, 0),
                NextValue(r.vlan, 0), NextValue(r.is_udp, 0),
                # With a preamble, b1 is the SFD; without, it is the destination MAC's first byte.
                *restart(0 if with_preamble else 1),
                NextState("ETH"),
            )
        )
        fsm.act("ETH",  # Destination MAC (0..5), source MAC, EtherType (12..13).
            If(beat1,
                *count(),
                If(at[5],
                    NextValue(r.mac_pri, w48 == PTP_MAC_PRIMARY),
                    NextValue(r.mac_pd,  w48 == PTP_MAC_PDELAY),
                ),
                If(at[13], *ether_type(allow_vlan=1)),
            )
        )
        fsm.act("VLAN",  # TCI (2 bytes), then the EtherType; one tag only.
            If(beat1,
                *count(),
                If(at[3], *ether_type(allow_vlan=0)),
            )
        )
        fsm.act("IPV4",
            If(beat1,
                *count(),
                # Version 4, header 5..15 words; first and only fragment; protocol UDP.
                If(at[0],
                    NextValue(ihl_m1, b1[:4] - 1),
                    If(t.bad_ihl, NextState("DROP")),
                ),
                If(at[6] & t.frag_hi, NextState("DROP")),
                If(at[7] & ~byte_is[0], NextState("DROP")),   # Offset bits 7..0.
                If(at[9] & ~byte_is[IP_PROTO_UDP], NextState("DROP")),
                If(at[19],
                    NextValue(r.ip_pri, w32 == PTP_IPV4_PRIMARY),
                    NextValue(r.ip_pd,  w32 == PTP_IPV4_PDELAY),
                ),
                If(hdr_end, *restart(0), NextState("UDP")),
            )
        )
        fsm.act("UDP",
            If(beat1,
                *count(),
                If(at[3] & ~word_is(PTP_EVENT_PORT) & ~word_is(PTP_GENERAL_PORT), NextState("DROP")),
                If(at[7], NextValue(r.is_udp, 1), *restart(0), NextState("PTP")),
            )
        )
        fsm.act("PTP",
            If(beat1,
                *count(),
                If(at[0], NextValue(r.msg_type, b1[:4])),
                If(at[1] & t.bad_vers, NextState("DROP")),
                If(at[4], NextValue(r.domain, b1)),
                # Bytes 24..29 shifted in: the last four are 26..29 (no `>=`/`<` carry chains).
                If((cnt[3:] == 3) & ~(cnt[2] & cnt[1]), NextValue(r.source, Cat(b1, r.source[:24]))),
                If(at[31], NextValue(r.seq, Cat(b1, hist[:8]))),
                If(at[PTP_HEADER_LEN - 1], NextState("DONE")),
            )
        )
        fsm.act("DONE")
        fsm.act("DROP")
        # Whatever the state, the last beat ends the frame (after the state's own actions, so this
        # NextState wins); only a complete PTP header makes a record.
        for state in list(fsm.actions):
            fsm.act(state, If(beat1 & last1,
                self.done.eq(fsm.ongoing("DONE")),
                NextState("IDLE"),
            ))




class PTPParser64(LiteXModule):
    """PTPParser for 64-bit (XGMII, 10 Gb/s) PHY-side streams: the same frames recognised and
    the same fields, 8 bytes a beat. `sfd` pulses in the beat that holds the SFD: LiteEth's XGMII
    receiver hands the preamble column (/S/ moved to lane 0, six preamble bytes, the SFD) on as
    one beat; without a preamble (a transmitter's sink), in the frame's first beat. `done` pulses
    one cycle after the frame's last beat with the record fields, if the frame was a PTP message
    (version 2) holding its 34-byte header and at least one byte more, as PTPParser's does.

    The frame's first 128 bytes (enough for a PTP header behind a VLAN tag, a 60-byte IPv4 header
    and UDP: 120) are held as they arrive, and the headers are read from them in the cycle after
    the last beat: shifted past the VLAN tag, then past the IPv4 header by its length. Built for
    the simulated 10G board (the shifts of 1024 bits have not been placed on an FPGA).

    A parser of its own rather than a 64-to-8 width converter in front of PTPParser: the
    converter would give one byte a cycle from 8 a beat, fall behind by 7 cycles in every 8 of a
    frame (up to 120 header bytes to read, a minimum frame every 10.5 cycles at 10 Gb/s), and
    need a FIFO that overflows under back-to-back frames; the SFD beat is found here at the tap,
    so the time stays that beat's."""
    HEADER_BEATS = 16

    def __init__(self, with_preamble=True):
        self.sink   = sink = stream.Endpoint(eth_phy_description(64))
        self.sfd    = Signal()
        self.done   = Signal()
        self.fields = fields = Record([(n, w) for n, w in record_layout() if n not in ("sec", "ns")])

        # # #

        beat = Signal()
        self.comb += beat.eq(sink.valid & sink.ready)

        # The SFD: a frame's first beat, the preamble column if there is one. A frame whose first
        # beat is anything else is ignored to its end.
        in_frame = Signal()
        if with_preamble:
            self.comb += self.sfd.eq(beat & ~in_frame & (sink.data == eth_preamble))
        else:
            self.comb += self.sfd.eq(beat & ~in_frame)
        self.sync += If(beat, in_frame.eq(~sink.last))

        # The frame's beats after the SFD (from it, without a preamble): the first 16 held, the
        # length counted (saturating) to its end.
        taking = Signal()
        body   = Signal()
        j      = Signal(13)
        hdr    = Signal(64*self.HEADER_BEATS)
        tail   = Signal(4)                          # Bytes in the last beat (last_be one-hot).
        length = Signal(17)                         # The frame's bytes, at its end.
        ended  = Signal()                           # The frame's last beat was last cycle.
        if with_preamble:
            self.comb += body.eq(beat & taking)
            self.sync += If(self.sfd & ~sink.last, taking.eq(1))
        else:
            self.comb += body.eq(beat & (taking | self.sfd))
            self.sync += If(self.sfd & ~sink.last, taking.eq(1))
        self.comb += [
            tail.eq(8),
            *[If(sink.last_be[i], tail.eq(i + 1)) for i in range(8)],
        ]
        self.sync += [
            ended.eq(body & sink.last),
            If(body,
                Case(j, {k: hdr[64*k:64*(k + 1)].eq(sink.data) for k in range(self.HEADER_BEATS)}),
                If(j != 2**len(j) - 1, j.eq(j + 1)),
                If(sink.last, length.eq(Cat(Constant(0, 3), j) + tail)),
            ),
            If(beat & sink.last, taking.eq(0), j.eq(0)),
        ]

        # The headers, from the held bytes (valid in the cycle after the last beat).
        def byte(v, i):
            return v[8*i:8*(i + 1)]

        def field(v, i, n):   # The big-endian n-byte field at byte i of v.
            return Cat(*[byte(v, i + n - 1 - k) for k in range(n)])

        vlan = Signal()
        eth  = Signal(len(hdr))       # The frame without its VLAN tag (the EtherType at 12).
        ip   = Signal(len(hdr) - 8*14)   # What follows the EtherType: IPv4, or PTP over Ethernet.
        ihl  = Signal(4)
        udp  = Signal(len(ip))        # What follows the IPv4 header.
        self.comb += [
            vlan.eq(field(hdr, 12, 2) == ETHERTYPE_VLAN),
            eth.eq(Mux(vlan, Cat(hdr[:8*12], hdr[8*16:]), hdr)),
            ip.eq(eth[8*14:]),
            ihl.eq(byte(ip, 0)[:4]),
            udp.eq(ip >> Cat(Constant(0, 5), ihl)),
        ]
        ethertype = field(eth, 12, 2)
        is_l2   = Signal()
        is_udp  = Signal()
        ptp     = Signal(len(ip))
        start   = Signal(8)           # The PTP header's first byte in the frame.
        self.comb += [
            is_l2.eq(ethertype == PTP_ETHERTYPE),
            is_udp.eq((ethertype == ETHERTYPE_IPV4) &
                (byte(ip, 0)[4:] == 4) & (ihl >= 5) &                       # Version 4, 5..15 words.
                (byte(ip, 6)[:6] == 0) & (byte(ip, 7) == 0) &               # No fragment.
                (byte(ip, 9) == IP_PROTO_UDP) &
                ((field(udp, 2, 2) == PTP_EVENT_PORT) | (field(udp, 2, 2) == PTP_GENERAL_PORT))),
            ptp.eq(Mux(is_l2, ip, udp[64:])),
            start.eq(14 + 4*vlan + Mux(is_l2, 0, Cat(Constant(0, 2), ihl) + 8)),
        ]
        ip_dst  = field(ip, 16, 4)
        mac_dst = field(hdr, 0, 6)
        self.comb += [
            self.done.eq(ended & (is_l2 | is_udp) & (byte(ptp, 1)[:4] == PTP_VERSION) &
                         (length > start + PTP_HEADER_LEN)),
            fields.msg_type.eq(byte(ptp, 0)[:4]),
            fields.seq.eq(field(ptp, 30, 2)),
            fields.domain.eq(byte(ptp, 4)),
            fields.source.eq(field(ptp, 26, 4)),
            fields.udp.eq(is_udp),
            fields.vlan.eq(vlan),
            fields.dst.eq(Mux(is_udp,
                Mux(ip_dst == PTP_IPV4_PRIMARY, DST_PRIMARY, Mux(ip_dst == PTP_IPV4_PDELAY, DST_PDELAY, DST_OTHER)),
                Mux(mac_dst == PTP_MAC_PRIMARY, DST_PRIMARY, Mux(mac_dst == PTP_MAC_PDELAY, DST_PDELAY, DST_OTHER)))),
        ]
