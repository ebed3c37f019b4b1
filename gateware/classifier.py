#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Receive classifier: a small rule table matched against every received frame, in the PHY's
receive clock, right after LiteEth's FCS checker.

    PHY ─► preamble ─► FCS checker ─► RXClassifier ─► (LiteEth: padding, CDC, ARP/IP/UDP, CPU)
                                           └─► fasttrack (eth_rx): rule, UDP source, payload

A rule matches on any of EtherType, IP protocol, UDP destination port and IPv4 source address
(each one used or not), in frames addressed to the board (its MAC, or a group address). The
first enabled rule that matches decides:

- ACTION_CPU: the frame goes on to LiteEth as if there were no rule (counted).
- ACTION_FASTTRACK: the UDP payload's first `payload_bytes` bytes go to `fasttrack` at the
  frame's last byte, once the FCS has been checked: `fasttrack.valid` is high for one cycle one
  clock after the last byte leaves the FCS checker, and never for a frame with a bad FCS, a
  fragment, or a UDP length that the frame does not hold. The frame is also flagged `error`
  towards LiteEth, which then does not hand it to the CPU.
- ACTION_DROP: the frame is flagged `error` towards LiteEth and goes nowhere else.

Frames no rule matches pass untouched. Counters per rule (in sys): frames matched and taken,
and frames matched but refused (bad FCS, fragment, truncated UDP), and frames no rule matched.

dw=64 (10G: LiteEth's 64-bit MAC datapath, 8 bytes a beat, `last_be` one-hot on the last byte)
takes the same fields from the beats that hold them (the UDP header starts in lane 2 or 6, as the
IPv4 header's length puts it) and makes the same decisions; its rule match follows the fields in
the same cycle rather than a cycle later, since with IP options the UDP port can be in the beat
before the last. Built for the simulated 10G board, not placed on an FPGA.

The rule table is written from sys one rule at a time: the rule's fields into staging registers,
then `rule_write`; the receive side takes the whole rule at once through a synchroniser (like
gateware/netaddr.py), so a frame never sees half a rule.

`fasttrack.payload` holds payload byte 0 in its lowest 8 bits; bytes at and beyond `length` are
left from earlier frames (at dw=64, or the frame's padding and FCS). It stays as it is for at least 20 byte times after `valid` (the next
frame's inter-frame gap and preamble), so a consumer in eth_rx takes it in the valid cycle or
the few after it.
"""

from migen import *
from migen.genlib.cdc import MultiReg, PulseSynchronizer

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRField, CSRStatus, CSRStorage

from liteeth.common import eth_phy_description

ACTION_CPU       = 0
ACTION_FASTTRACK = 1
ACTION_DROP      = 2

ETHERTYPE_IPV4 = 0x0800
IP_PROTO_UDP   = 17


def fasttrack_layout(nrules, payload_bytes):
    return [
        ("valid",    1),
        ("rule",     bits_for(nrules - 1)),
        ("src_ip",   32),
        ("src_port", 16),
        ("length",   16),   # UDP payload bytes of the datagram (payload holds the first ones).
        ("payload",  8*payload_bytes),
    ]


class RXClassifier(LiteXModule):
    def __init__(self, nrules=4, payload_bytes=16, dw=8, cd_rx="eth_rx"):
        if dw not in (8, 64):
            raise ValueError(f"dw must be 8 (1G) or 64 (10G), not {dw!r}")
        if not (1 <= nrules <= 16):
            raise ValueError(f"nrules must be 1..16, not {nrules!r}")
        if not (1 <= payload_bytes <= 64):
            raise ValueError(f"payload_bytes must be 1..64, not {payload_bytes!r}")
        self.sink      = sink   = stream.Endpoint(eth_phy_description(dw))  # cd_rx, from the FCS checker.
        self.source    = source = stream.Endpoint(eth_phy_description(dw))  # cd_rx, to LiteEth.
        self.mac       = Signal(48)                                         # cd_rx: the board's MAC.
        self.fasttrack = Record(fasttrack_layout(nrules, payload_bytes))    # cd_rx.
        # cd_rx, for the latency probes (gateware/probe.py): `valid` one cycle after the last byte
        # of a good frame to us that goes on to LiteEth and holds a whole UDP datagram (as
        # fasttrack.valid for the fast-tracked ones); `dst_port` its destination port, held until
        # the next frame's end.
        self.passed_udp = Record([("valid", 1), ("dst_port", 16)])
        # cd_rx, for the receive audit in front (gateware/rxaudit.py): a drop or fast-track rule
        # matches the frame passing; settled from its UDP header's end to its last byte.
        self.takes = Signal()

        self._rule_select = CSRStorage(bits_for(nrules - 1), description="Rule that rule_write writes, and whose counters the counter registers show.")
        self._rule_control = CSRStorage(fields=[
            CSRField("enable",      size=1, description="The rule takes part."),
            CSRField("action",      size=2, description="0 CPU (counted only), 1 fast-track, 2 drop."),
            CSRField("match_type",  size=1, description="Match the EtherType."),
            CSRField("match_proto", size=1, description="Match the IPv4 protocol (IPv4 frames only)."),
            CSRField("match_port",  size=1, description="Match the UDP destination port (UDP in unfragmented IPv4 only)."),
            CSRField("match_src",   size=1, description="Match the IPv4 source address."),
        ])
        self._rule_ethertype = CSRStorage(16)
        self._rule_proto     = CSRStorage(8)
        self._rule_port      = CSRStorage(16)
        self._rule_src_ip    = CSRStorage(32)
        self._rule_write     = CSR()   # Write: the staged rule becomes rule `rule_select`.
        self._rule_pending   = CSRStatus(description="1 until the receive side has taken the last rule_write.")
        self._matched   = CSRStatus(32, description="Frames rule `rule_select` matched and acted on.")
        self._refused   = CSRStatus(32, description="Frames rule `rule_select` matched but refused: bad FCS, or (fast-track) a fragment or a UDP length the frame does not hold.")
        self._unmatched = CSRStatus(32, description="Frames no rule matched (passed on).")

        # # #

        sync_rx = getattr(self.sync, cd_rx)
        rules = self._add_rule_table(nrules, cd_rx)

        # Pass-through; the error flag on the last byte carries the drop decision to LiteEth.
        drop = Signal()
        self.comb += [
            sink.connect(source),
            If(sink.last & drop, source.error.eq(2**len(source.error) - 1)),
        ]

        # Parser (cd_rx): the header fields of the frame passing, each with a flag saying the
        # frame had it.
        beat = Signal()
        self.comb += beat.eq(sink.valid & sink.ready)
        if dw == 8:
            f = self._parse_bytes(sink, beat, sync_rx, payload_bytes, cd_rx)
        else:
            f = self._parse_words(sink, beat, sync_rx, payload_bytes)
            f["payload"] = [f["payload"]]

        # Rule matching, registered at 8 bits: the fields it reads settle at least a few bytes
        # before the frame's last byte (a frame holds at least the UDP length and checksum after
        # the port). At 64 bits the port may be in the beat before the last (IP options), so the
        # match follows the fields in the same cycle.
        first, action, any_match = self._add_match(rules, f, sync_rx if dw == 8 else self.comb)
        # The last byte: is the datagram whole (UDP length within what arrived)?
        whole = Signal()
        self.comb += whole.eq(f["whole"])
        error = sink.error if dw == 8 else (sink.error != 0)   # A bit a byte at dw=64.
        last_good = Signal()
        self.comb += [
            last_good.eq(beat & sink.last & ~error),
            drop.eq(any_match & (action != ACTION_CPU)),
            self.takes.eq(drop),
        ]

        ft = self.fasttrack
        length = Signal(16)
        self.comb += [
            length.eq(f["udp_len"] - 8),
            ft.payload.eq(Cat(*f["payload"])),
        ]
        sync_rx += [
            self.passed_udp.valid.eq(last_good & f["mac_ok"] & ~drop & whole),
            If(beat & sink.last, self.passed_udp.dst_port.eq(f["dst_port"])),
            ft.valid.eq(last_good & any_match & (action == ACTION_FASTTRACK) & whole),
            If(beat & sink.last,
                ft.rule.eq(first),
                ft.src_ip.eq(f["src_ip"]),
                ft.src_port.eq(f["src_port"]),
                ft.length.eq(length),
            ),
        ]

        # Counters (sys).
        refused = Signal()
        self.comb += refused.eq(error | ((action == ACTION_FASTTRACK) & ~whole))
        self._add_counters(nrules, beat & sink.last, first, any_match, refused, cd_rx)

    def _add_rule_table(self, nrules, cd_rx):
        """The rule table (cd_rx), written through a toggle synchroniser from the staged CSRs, so
        a frame never sees half a rule. Returns the rules."""
        sync_rx = getattr(self.sync, cd_rx)
        rules = [Record([("enable", 1), ("action", 2), ("match_type", 1), ("match_proto", 1),
                         ("match_port", 1), ("match_src", 1), ("ethertype", 16), ("proto", 8),
                         ("port", 16), ("src_ip", 32)]) for _ in range(nrules)]
        toggle, toggle_rx, seen_rx, done_rx, done = Signal(), Signal(), Signal(), Signal(), Signal()
        self.sync += If(self._rule_write.re, toggle.eq(~toggle))
        self.specials += MultiReg(toggle, toggle_rx, cd_rx)
        ctl = self._rule_control.fields
        sync_rx += If(toggle_rx != seen_rx,
            seen_rx.eq(toggle_rx),
            done_rx.eq(toggle_rx),
            Case(self._rule_select.storage, {i: [
                r.enable.eq(ctl.enable), r.action.eq(ctl.action), r.match_type.eq(ctl.match_type),
                r.match_proto.eq(ctl.match_proto), r.match_port.eq(ctl.match_port), r.match_src.eq(ctl.match_src),
                r.ethertype.eq(self._rule_ethertype.storage), r.proto.eq(self._rule_proto.storage),
                r.port.eq(self._rule_port.storage), r.src_ip.eq(self._rule_src_ip.storage),
            ] for i, r in enumerate(rules)}),
        )
        self.specials += MultiReg(done_rx, done)
        self.comb += self._rule_pending.status.eq(done != toggle)
        return rules

    def _parse_bytes(self, sink, beat, sync_rx, payload_bytes, cd_rx):
        """dw=8: the header fields of the frame passing, by a state machine a byte a beat, each with
        a flag saying the frame had it. Returns the fields by name, as _parse_words does, with
        `whole` (at the last byte: the datagram is whole, its UDP length within what arrived)."""
        b = sink.data
        cnt       = Signal(8)
        hi        = Signal(8)
        word      = Cat(b, hi)   # Big-endian 16-bit field ending at this byte.
        group     = Signal()     # Destination: a group (multicast, broadcast) address...
        mac_eq    = Signal()     # ...or ours.
        mac_ok    = Signal()
        self.comb += mac_ok.eq(group | mac_eq)
        ethertype = Signal(16)
        has_type  = Signal()
        proto     = Signal(8)
        src_ip    = Signal(32)
        is_ipv4   = Signal()
        fragment  = Signal()
        ihl_m1    = Signal(4)
        src_port  = Signal(16)
        dst_port  = Signal(16)
        udp_len   = Signal(16)
        has_port  = Signal()     # The UDP header's first 4 bytes arrived (IPv4, not a fragment).
        has_len   = Signal()
        received  = Signal(16)   # UDP bytes received so far (header included).
        payload   = [Signal(8, name=f"payload{i}") for i in range(payload_bytes)]
        mac_b     = Array(self.mac[8*(5 - i):8*(6 - i)] for i in range(6))

        sync_rx += If(beat, hi.eq(b))
        parse = ClockDomainsRenamer(cd_rx)(FSM(reset_state="ETH"))
        self.parse = parse
        parse.act("ETH",  # Destination MAC (0..5), source MAC, EtherType (12..13).
            If(beat,
                NextValue(cnt, cnt + 1),
                If(cnt == 0, NextValue(group, b[0]), NextValue(mac_eq, b == mac_b[0])),
                If((cnt > 0) & (cnt < 6) & (b != mac_b[cnt[:3]]), NextValue(mac_eq, 0)),
                If(cnt == 13,
                    NextValue(ethertype, word), NextValue(has_type, 1), NextValue(cnt, 0),
                    If(word == ETHERTYPE_IPV4, NextState("IPV4")).Else(NextState("REST")),
                ),
            )
        )
        parse.act("IPV4",
            If(beat,
                NextValue(cnt, cnt + 1),
                If(cnt == 0,
                    NextValue(ihl_m1, b[:4] - 1),
                    If((b[4:] != 4) | (b[:4] < 5), NextState("REST")),
                ),
                If(cnt == 6, NextValue(fragment, b[:6] != 0)),          # MF flag, offset bits 12..8.
                If((cnt == 7) & (b != 0), NextValue(fragment, 1)),      # Offset bits 7..0.
                If(cnt == 9, NextValue(proto, b)),
                If((cnt >= 12) & (cnt < 16), NextValue(src_ip, Cat(b, src_ip[:24]))),
                If(cnt == 15, NextValue(is_ipv4, 1)),
                # Last header byte: (IHL - 1)*4 + 3. Options are skipped.
                If((cnt[2:] == ihl_m1) & (cnt[:2] == 3) & (cnt >= 19),
                    NextValue(cnt, 0),
                    If((proto == IP_PROTO_UDP) & ~fragment, NextState("UDP")).Else(NextState("REST")),
                ),
            )
        )
        payload_index = Signal(max=payload_bytes + 1)
        parse.act("UDP",
            If(beat,
                NextValue(cnt, cnt + 1),
                NextValue(received, received + 1),
                If(cnt == 1, NextValue(src_port, word)),
                If(cnt == 3, NextValue(dst_port, word), NextValue(has_port, 1)),
                If(cnt == 5, NextValue(udp_len, word), NextValue(has_len, 1)),
                If(cnt == 7, NextValue(payload_index, 0), NextState("PAYLOAD")),
            )
        )
        parse.act("PAYLOAD",
            If(beat,
                NextValue(received, received + 1),
                If(payload_index != payload_bytes,
                    Case(payload_index, {i: NextValue(payload[i], b) for i in range(payload_bytes)}),
                    NextValue(payload_index, payload_index + 1),
                ),
            )
        )
        parse.act("REST")
        # Whatever the state, the last beat ends the frame (after the state's own actions), and
        # the next beat starts one.
        for state in list(parse.actions):
            parse.act(state, If(beat & sink.last,
                NextValue(cnt, 0), NextValue(group, 0), NextValue(mac_eq, 0), NextValue(has_type, 0), NextValue(is_ipv4, 0),
                NextValue(fragment, 0), NextValue(has_port, 0), NextValue(has_len, 0), NextValue(received, 0),
                NextState("ETH"),
            ))
        # `received` counts the UDP bytes before the last one.
        whole = (has_len & (udp_len >= 8) & (received + 1 >= udp_len) & parse.ongoing("PAYLOAD") |
                 (has_len & (udp_len == 8) & parse.ongoing("UDP")))
        return dict(mac_ok=mac_ok, ethertype=ethertype, has_type=has_type, proto=proto, src_ip=src_ip,
            is_ipv4=is_ipv4, src_port=src_port, dst_port=dst_port, udp_len=udp_len, has_port=has_port,
            has_len=has_len, payload=payload, whole=whole)

    def _add_match(self, rules, f, matching):
        """Rule matching on the parsed fields `f`, into `matching` (sync_rx or comb). Returns the
        lowest-numbered matching rule, its action, and whether any rule matched."""
        nrules = len(rules)
        match = Signal(nrules)
        matching += [match[i].eq(r.enable & f["mac_ok"] &
            (~r.match_type  | (f["has_type"] & (f["ethertype"] == r.ethertype))) &
            (~r.match_proto | (f["is_ipv4"] & (f["proto"] == r.proto))) &
            (~r.match_src   | (f["is_ipv4"] & (f["src_ip"] == r.src_ip))) &
            (~r.match_port  | (f["has_port"] & (f["dst_port"] == r.port)))) for i, r in enumerate(rules)]
        first  = Signal(max=max(nrules, 2))
        action = Signal(2)
        any_match = Signal()
        self.comb += [
            any_match.eq(match != 0),
            # The lowest-numbered matching rule decides.
            *[If(match[i], first.eq(i), action.eq(rules[i].action)) for i in reversed(range(nrules))],
        ]
        return first, action, any_match

    def _add_counters(self, nrules, ends, first, any_match, refused, cd_rx):
        """Counters (sys) of frames matched, refused and unmatched: one event per frame (`ends`),
        its kind and rule held until the next frame's end (at least 64 byte times), so they are
        stable when the event's pulse has crossed."""
        sync_rx = getattr(self.sync, cd_rx)
        ev_kind, ev_rule = Signal(2), Signal(len(self._rule_select.storage))
        self.event = event = PulseSynchronizer(cd_rx, "sys")
        self.comb += event.i.eq(ends)
        sync_rx += If(ends,
            ev_rule.eq(first),
            ev_kind.eq(Mux(any_match, Mux(refused, 2, 1), 0)),   # 0 unmatched, 1 taken, 2 refused.
        )
        matched   = Array(Signal(32, name=f"matched{i}") for i in range(nrules))
        refusedc  = Array(Signal(32, name=f"refused{i}") for i in range(nrules))
        unmatched = Signal(32)
        self.sync += If(event.o,
            Case(ev_kind, {
                0: unmatched.eq(unmatched + 1),
                1: matched[ev_rule].eq(matched[ev_rule] + 1),
                2: refusedc[ev_rule].eq(refusedc[ev_rule] + 1),
            }),
        )
        self.comb += [
            self._matched.status.eq(matched[self._rule_select.storage]),
            self._refused.status.eq(refusedc[self._rule_select.storage]),
            self._unmatched.status.eq(unmatched),
        ]

    def _parse_words(self, sink, beat, sync_rx, payload_bytes):
        """dw=64: the fields the 8-bit parser finds, from 8-byte beats (byte i of the frame in
        lane i % 8 of beat i // 8). The UDP header starts at byte 14 + 4*IHL, lane 2 or 6 of its
        beat: its fields are taken from the beats that hold them, the payload realigned from two
        beats (the last one's own at the frame's end). Returns the fields by name."""
        d    = sink.data
        last = beat & sink.last
        f    = {name: Signal(width, name=name) for name, width in [
            ("group", 1), ("mac_eq", 1), ("ethertype", 16), ("has_type", 1), ("proto", 8), ("src_ip", 32),
            ("is_ipv4", 1), ("src_port", 16), ("dst_port", 16), ("udp_len", 16), ("has_port", 1), ("has_len", 1),
            ("payload", 64*((payload_bytes + 7)//8))]}

        def lanes(first, n):   # The big-endian n-byte field in lanes first.. of this beat.
            return Cat(*[d[8*(first + n - 1 - j):8*(first + n - j)] for j in range(n)])

        nb       = Signal(13)   # This beat's index in the frame (saturating: 65528 bytes).
        ip_hdr   = Signal()     # EtherType IPv4, version 4, header length 5..15 words.
        fragment = Signal()
        udp_at   = Signal(7)    # The UDP header's first byte: 14 + 4*IHL.
        prev     = Signal(64)   # The beat before this one.
        udp      = Signal()     # An unfragmented IPv4 UDP datagram: its header and payload are parsed.
        ub       = Signal(4)    # The beat the UDP header starts in...
        lane6    = Signal()     # ...at lane 6 (else lane 2).
        self.comb += [
            udp.eq(ip_hdr & (f["proto"] == IP_PROTO_UDP) & ~fragment),
            ub.eq(udp_at[3:]),
            lane6.eq(udp_at[2]),
        ]
        window  = Signal(64)    # The 8 bytes from the UDP header's lane of the previous beat on.
        partial = Signal(64)    # ...and those of this beat (at the frame's end).
        self.comb += [
            window.eq(Mux(lane6, Cat(prev[48:], d[:48]), Cat(prev[16:], d[:16]))),
            partial.eq(Mux(lane6, d[48:], d[16:])),
        ]
        mac_b = [self.mac[8*(5 - i):8*(6 - i)] for i in range(6)]
        payload_words = len(f["payload"])//64
        sync_rx += If(beat,
            prev.eq(d),
            If(nb != 2**len(nb) - 1, nb.eq(nb + 1)),
            If(nb == 0,   # Destination MAC (0..5).
                f["group"].eq(d[0]),
                f["mac_eq"].eq(Cat(*[d[8*i:8*(i + 1)] for i in range(6)]) == Cat(*mac_b)),
            ),
            If(nb == 1,   # EtherType (12..13), the IPv4 header's first byte (14).
                f["ethertype"].eq(lanes(4, 2)), f["has_type"].eq(1),
                ip_hdr.eq((lanes(4, 2) == ETHERTYPE_IPV4) & (d[52:56] == 4) & (d[48:52] >= 5)),
                udp_at.eq(14 + 4*d[48:52]),
            ),
            If(nb == 2,   # Flags and fragment offset (20..21), protocol (23).
                fragment.eq((d[32:38] != 0) | (d[40:48] != 0)),
                f["proto"].eq(d[56:64]),
            ),
            If((nb == 3) & ip_hdr,   # Source address (26..29).
                f["src_ip"].eq(lanes(2, 4)), f["is_ipv4"].eq(1),
            ),
            If(udp & (nb == ub) & ~lane6,
                f["src_port"].eq(lanes(2, 2)), f["dst_port"].eq(lanes(4, 2)), f["udp_len"].eq(lanes(6, 2)),
                f["has_port"].eq(1), f["has_len"].eq(1),
            ),
            If(udp & (nb == ub) & lane6, f["src_port"].eq(lanes(6, 2))),
            If(udp & (nb == ub + 1) & lane6,
                f["dst_port"].eq(lanes(0, 2)), f["udp_len"].eq(lanes(2, 2)),
                f["has_port"].eq(1), f["has_len"].eq(1),
            ),
            *[If(udp & (nb == ub + 2 + w), f["payload"][64*w:64*(w + 1)].eq(window)) for w in range(payload_words)],
            *[If(udp & sink.last & (nb == ub + 1 + w), f["payload"][64*w:64*(w + 1)].eq(partial))
              for w in range(payload_words)],
            If(sink.last,
                nb.eq(0), f["group"].eq(0), f["mac_eq"].eq(0), f["has_type"].eq(0), f["is_ipv4"].eq(0),
                ip_hdr.eq(0), fragment.eq(0), f["has_port"].eq(0), f["has_len"].eq(0),
            ),
        )
        # At the last beat: the datagram is whole if the frame holds its UDP length.
        tail   = Signal(4)
        length = Signal(17)
        f["whole"] = Signal(name="whole_words")
        self.comb += [
            tail.eq(8),
            *[If(sink.last_be[i], tail.eq(i + 1)) for i in range(8)],
            length.eq(Cat(Constant(0, 3), nb) + tail),
            f["whole"].eq(f["has_len"] & (f["udp_len"] >= 8) & (length >= udp_at + f["udp_len"])),
        ]
        f["mac_ok"] = f["group"] | f["mac_eq"]
        return f


def insert_classifier(mac_core, classifier):
    """Put `classifier` into LiteEth's MAC core receive pipeline right after its FCS checker (in
    the receive clock: LiteEth's 8-bit datapath, with_sys_datapath False). Before the core is
    finalized."""
    from ethdaq.gateware.rxaudit import insert_after_fcs_checker
    insert_after_fcs_checker(mac_core, classifier, "RXClassifier")


class FastTrackSink(LiteXModule):
    """The SoC's fast-track consumer, for the firmware and tests: counts deliveries and keeps the
    last one's rule, UDP source, length and first 8 payload bytes, in CSRs (sys). A detector
    design takes `fasttrack` (cd_rx) straight from the classifier instead, with no CPU."""
    def __init__(self, fasttrack, cd_rx="eth_rx"):
        self._count   = CSRStatus(32, description="Fast-track datagrams delivered.")
        self._rule    = CSRStatus(len(fasttrack.rule), description="The last one's rule.")
        self._src_ip  = CSRStatus(32, description="The last one's IPv4 source.")
        self._length  = CSRStatus(16, description="The last one's UDP payload length.")
        self._payload = CSRStatus(64, description="The last one's first 8 payload bytes (byte 0 in bits 7..0).")

        # # #

        # Held in cd_rx from the delivery to the next (at least a frame apart), so stable when the
        # delivery's pulse has crossed.
        held = Record([("rule", len(fasttrack.rule)), ("src_ip", 32), ("length", 16), ("payload", 64)])
        self.delivered = delivered = PulseSynchronizer(cd_rx, "sys")
        self.comb += delivered.i.eq(fasttrack.valid)
        sync_rx = getattr(self.sync, cd_rx)
        sync_rx += If(fasttrack.valid,
            held.rule.eq(fasttrack.rule),
            held.src_ip.eq(fasttrack.src_ip),
            held.length.eq(fasttrack.length),
            held.payload.eq(fasttrack.payload[:64]),
        )
        self.sync += If(delivered.o,
            self._count.status.eq(self._count.status + 1),
            self._rule.status.eq(held.rule),
            self._src_ip.status.eq(held.src_ip),
            self._length.status.eq(held.length),
            self._payload.status.eq(held.payload),
        )
