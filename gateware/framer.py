#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Canned-header framing: UDP datagrams and ARP requests straight to Ethernet frames.

LiteEth's UDP → IP → ARP-table → MAC chain adds about 20 cycles before the first byte of a
datagram reaches the MAC, and its IP TX blocks on an unanswered ARP request. The data path does
not need any of that: the destination is fixed for a run, so the 42 bytes of Ethernet, IPv4 and
UDP header are a template with three per-datagram fields (lengths, identification, checksum).
`UDPFramer` emits that template in front of the payload with no added cycle; `ARPRequester`
emits the who-has frame the resolver (gateware/resolver.py) asks for. Both produce frames without
preamble and FCS (eth_phy_description), for LiteEth's CRC and preamble inserters.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description, eth_udp_user_description

ETH_HEADER_LEN  = 14
IP_HEADER_LEN   = 20
UDP_HEADER_LEN  = 8
FRAME_HEADER_LEN = ETH_HEADER_LEN + IP_HEADER_LEN + UDP_HEADER_LEN  # 42

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_ARP  = 0x0806
IP_PROTO_UDP   = 17
IP_FLAGS_DF    = 0x4000  # Don't fragment: datagrams are sized to the path MTU by configuration.


def field_byte_parts(fields):
    """[(value, size_bytes), ...] → per byte, network byte order: an int (a constant byte), or
    (key, 8-bit expression), the key the same for the same byte of the same value. Signals
    narrower than their field are zero-extended."""
    out = []
    for value, size in fields:
        key = id(value)
        if not isinstance(value, int) and len(value) < 8*size:
            value = Cat(value, Replicate(0, 8*size - len(value)))
        for i in range(size):
            shift = 8*(size - 1 - i)
            out.append((value >> shift) & 0xff if isinstance(value, int) else ((key, shift), value[shift:shift + 8]))
    return out


def field_bytes(fields):
    """[(value, size_bytes), ...] → list of 8-bit expressions, network byte order. Signals
    narrower than their field are zero-extended."""
    # Constants are 8 bits wide, so the bytes can be Cat-ed into words.
    return [C(b, 8) if isinstance(b, int) else b[1] for b in field_byte_parts(fields)]


def mux_tree(words, sel):
    """words[sel] as a balanced tree of 2:1 multiplexers, one select bit per level (an Array
    index became a priority chain four LUTs deep in front of the multiplexer on ECP5)."""
    level, bit = list(words), 0
    while len(level) > 1:
        level = [Mux(sel[bit], level[i + 1], level[i]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
        bit += 1
    return level[0]


# UDP Framer ---------------------------------------------------------------------------------------

class UDPFramer(LiteXModule):
    """UDP datagrams (eth_udp_user_description: ip_address, src/dst port, length = UDP payload
    bytes) → Ethernet II / IPv4 / UDP frames to `dst_mac`.

    A frame starts only while `mac_valid` is high (the destination is known); once started it
    runs to its end. The lengths and the IPv4 checksum are computed, in registered steps, while
    the first 16 header bytes go out, so they cost no cycle. UDP checksum 0 (none), as IPv4 allows.
    """
    def __init__(self, mac_address, ip_address, dw=8, ttl=64):
        if dw not in (8, 64):
            raise ValueError(f"UDPFramer: dw must be 8 or 64, not {dw!r}")
        self.sink      = sink   = stream.Endpoint(eth_udp_user_description(dw))
        self.source    = source = stream.Endpoint(eth_phy_description(dw))
        self.dst_mac   = Signal(48)
        self.mac_valid = Signal()
        self.frames    = Signal(32)  # Frames sent (also the IPv4 identification of the next one).

        # # #

        ident     = self.frames[:16]
        ip_len    = Signal(16)
        udp_len   = Signal(16)
        checksum  = Signal(16)
        # The lengths are registered from sink.length (stable while sink.valid), so the FIFO
        # read behind the sink does not feed the header mux and the checksum in one cycle: they
        # are right from the frame's second cycle on, and first needed at byte 16 (word 2).
        # One constant each: `length + 8 + 20` is two adders in series in Yosys (it does not
        # fold constants across additions), a path long enough to limit the eth clock on ECP5.
        self.sync += [
            udp_len.eq(sink.length + UDP_HEADER_LEN),
            ip_len.eq(sink.length + (UDP_HEADER_LEN + IP_HEADER_LEN)),
        ]

        # The destination address and ports, registered: constant for a run (the streamer's
        # settings), so a register is as good as the sink, and it keeps the buffer in front out
        # of the header multiplexer's and the checksum's paths.
        dst_ip, src_port, dst_port = Signal(32), Signal(16), Signal(16)
        dst_sum = Signal(17)  # The destination's two checksum words, summed beside the register.
        self.sync += [
            dst_ip.eq(sink.ip_address), src_port.eq(sink.src_port), dst_port.eq(sink.dst_port),
            dst_sum.eq(sink.ip_address[16:32] + sink.ip_address[0:16]),
        ]

        # IPv4 header checksum: the words that do not change between datagrams are summed in a
        # register ahead of time, the length is added one cycle later, and the folded,
        # complemented sum is registered once more: right from the frame's fourth cycle on, and
        # first needed at header byte 24 (word 3). The constant words and the source address's
        # (a setting) are summed in a register of their own, and the destination's beside
        # dst_ip, so `base` adds three operands: all six in one sum would be three carry chains
        # in series from the source address's register (7 LUT levels), too long for the eth
        # clock on ECP5.
        src_ip = ip_address
        static = 0x4500 + IP_FLAGS_DF + ((ttl << 8) | IP_PROTO_UDP)
        if isinstance(src_ip, int):
            fixed = static + (src_ip >> 16) + (src_ip & 0xffff)
        else:
            fixed = Signal(18)
            self.sync += fixed.eq(static + src_ip[16:32] + src_ip[0:16])
        base = Signal(20)
        total = Signal(21)
        self.sync += [
            base.eq(fixed + dst_sum + ident),
            total.eq(base + ip_len),
        ]
        fold1 = Signal(17)
        fold2 = Signal(16)
        self.comb += [
            fold1.eq(total[:16] + total[16:]),
            fold2.eq(fold1[:16] + fold1[16]),
        ]
        self.sync += checksum.eq(~fold2)

        header = field_bytes([
            (self.dst_mac, 6), (mac_address, 6), (ETHERTYPE_IPV4, 2),
            (0x45, 1), (0, 1), (ip_len, 2), (ident, 2), (IP_FLAGS_DF, 2), (ttl, 1), (IP_PROTO_UDP, 1),
            (checksum, 2), (src_ip, 4), (dst_ip, 4),
            (src_port, 2), (dst_port, 2), (udp_len, 2), (0, 2),
        ])
        assert len(header) == FRAME_HEADER_LEN
        if dw == 64:
            self._wide(header)
            return
        # The header byte on the output is a register, fetched when the previous one goes out
        # (no multiplexer between the header and the buffer behind). Bytes 0-7 come from an
        # 8-way multiplexer, byte 0 (the destination MAC's first byte) refreshed while the frame
        # waits; bytes 8-41 from a shift register, loaded when byte 6 is fetched (the frame's 6th
        # cycle at the earliest, when the lengths and the checksum are right) and shifted as they
        # are fetched: a 42-way multiplexer was five LUTs deep. The shift register loads and
        # shifts a cycle after the fetch that asks for it, on registered enables, and a fetch
        # while a shift is owed takes the byte after: its 272 clock enables hang on flip-flops,
        # not on `ready`.
        assert FRAME_HEADER_LEN > 8
        count   = Signal(max=FRAME_HEADER_LEN + 1)  # Header bytes sent.
        hnext   = Signal(max=FRAME_HEADER_LEN + 1, reset=1)  # count + 1
        hdr     = Signal(reset=1)  # count < FRAME_HEADER_LEN
        first   = Signal(reset=1)  # count == 0
        hhi     = Signal()         # hnext >= 8
        h6      = Signal()         # hnext == 6
        hsr_en  = Signal()         # h6 | hhi: the shift register loads or shifts at go_h.
        hbyte   = Signal(8)        # header[count]
        hsr     = Signal(8*(FRAME_HEADER_LEN - 8))
        hsr_ld  = Signal()         # Byte 6 went out last cycle: load now.
        owed    = Signal()         # hsr[:8] went out last cycle: shift now.
        hsr_ce  = Signal()         # hsr_ld | owed, as its own flip-flop.
        started = Signal()
        mac_valid = Signal()  # Delayed with byte 0, which is fetched from dst_mac a cycle ahead.
        self.sync += mac_valid.eq(self.mac_valid)
        go_h = Signal()  # A header byte goes out.
        go_e = Signal()  # The frame's last byte goes out.
        fend = Signal()
        self.comb += [
            started.eq(~first | mac_valid),
            go_h.eq(hdr & sink.valid & started & source.ready),
            go_e.eq(~hdr & sink.valid & sink.last & source.ready),
            If(hdr,
                source.valid.eq(sink.valid & started),
                source.data.eq(hbyte),
            ).Else(
                sink.connect(source, keep={"valid", "ready", "data", "last", "last_be"}),
            )
        ]
        self.sync += [
            If(go_h,
                count.eq(count + 1),
                hnext.eq(hnext + 1),
                first.eq(0),
                hdr.eq(count != FRAME_HEADER_LEN - 1),
                hhi.eq(hhi | (hnext == 7)),
                h6.eq(hnext == 5),
                hsr_en.eq(hhi | (hnext == 7) | (hnext == 5)),
            ).Elif(go_e,
                count.eq(0),
                hnext.eq(1),
                first.eq(1),
                hdr.eq(1),
                hhi.eq(0),
                hsr_en.eq(0),
            ),
            If(go_h,
                hbyte.eq(Mux(hhi, Mux(owed, hsr[8:16], hsr[:8]), mux_tree(header[:8], hnext[:3]))),
            ).Elif(go_e | first,
                hbyte.eq(header[0]),
            ),
            hsr_ld.eq(go_h & h6),
            owed.eq(go_h & hhi),
            hsr_ce.eq(go_h & hsr_en),
            If(hsr_ce,
                hsr.eq(Mux(hsr_ld, Cat(*header[8:]), hsr[8:])),
            ),
            # Counted a cycle after the frame's end (the next frame's identification and checksum
            # are needed from its 6th byte on).
            fend.eq(go_e),
            If(fend, self.frames.eq(self.frames + 1)),
        ]

    def _wide(self, header):
        """64-bit lanes: 42 header bytes are 5 words and 2 bytes, so the payload is shifted by 2
        lanes: each output word is 2 bytes carried from the previous payload word (or the header's
        last 2) and the first 6 of the current one. A last payload word with 7 or 8 bytes needs
        one more output word (TAIL)."""
        sink, source = self.sink, self.source
        words = Array([Cat(*header[8*i:8*i + 8]) for i in range(5)])
        carry = Signal(16)                        # Lanes 6-7 of the previous payload word.
        count = Signal(max=6)                     # Header words sent (5: payload phase).
        nbytes = Signal(4)                        # Valid bytes in the last payload word (1..8).
        self.comb += Case(sink.last_be, {1 << k: nbytes.eq(k + 1) for k in range(8)} | {"default": nbytes.eq(8)})
        tail_bytes = Signal(4)
        started = Signal()
        self.comb += started.eq((count != 0) | self.mac_valid)
        self.fsm = fsm = FSM(reset_state="HEADER")
        fsm.act("HEADER",
            source.valid.eq(sink.valid & started),
            source.data.eq(words[count]),
            If(source.valid & source.ready,
                NextValue(count, count + 1),
                If(count == 4,
                    NextValue(carry, Cat(header[40], header[41])),
                    NextState("BODY")
                )
            )
        )
        fsm.act("BODY",
            source.valid.eq(sink.valid),
            source.data.eq(Cat(carry, sink.data[:48])),
            If(sink.last & (nbytes <= 6),
                source.last.eq(1),
                Case(nbytes, {n: source.last_be.eq(1 << (n + 1)) for n in range(1, 7)}),
            ),
            sink.ready.eq(source.ready),
            If(sink.valid & source.ready,
                NextValue(carry, sink.data[48:64]),
                If(sink.last,
                    If(nbytes <= 6,
                        NextValue(count, 0),
                        NextValue(self.frames, self.frames + 1),
                        NextState("HEADER")
                    ).Else(
                        NextValue(tail_bytes, nbytes),
                        NextState("TAIL")
                    )
                )
            )
        )
        fsm.act("TAIL",
            source.valid.eq(1),
            source.data.eq(carry),
            source.last.eq(1),
            source.last_be.eq(Mux(tail_bytes == 8, 0b10, 0b01)),
            If(source.ready,
                NextValue(count, 0),
                NextValue(self.frames, self.frames + 1),
                NextState("HEADER")
            )
        )

# ARP Requester ------------------------------------------------------------------------------------

class ARPRequester(LiteXModule):
    """Broadcast an ARP who-has `target_ip` (padded to the 60-byte minimum frame) once per
    `request` pulse (requests arriving while one waits are merged), and an ARP announcement (RFC
    5227: who-has our own address, from it) once per `announce` pulse, first if both wait.
    `ip_address` and `mac_address` may be Signals (gateware/netaddr.py), held while a frame goes
    out. `announced` is high for the cycle an announcement's last byte is accepted."""
    def __init__(self, mac_address, ip_address, dw=8):
        assert dw in (8, 64)
        self.source    = source = stream.Endpoint(eth_phy_description(dw))
        self.request   = Signal()
        self.target_ip = Signal(32)
        self.announce  = Signal()
        self.announced = Signal()
        self.sent      = Signal(32)

        # # #

        pending          = Signal()
        announce_pending = Signal()
        busy             = Signal()
        announcing       = Signal()  # Chosen when the frame starts; held to its end.
        def fields(target):
            return [
                (0xffffffffffff, 6), (mac_address, 6), (ETHERTYPE_ARP, 2),
                (1, 2), (ETHERTYPE_IPV4, 2), (6, 1), (4, 1), (1, 2),  # Ethernet/IPv4, who-has.
                (mac_address, 6), (ip_address, 4), (0, 6), (target, 4),
            ]
        nb     = dw//8
        nwords = (60 + nb - 1)//nb
        # The word on the output is a register, fetched when the previous one goes out (the
        # first while idle).
        nxt     = Signal(max=nwords + 1, reset=1)   # The position of the word after `data` (1..nwords).
        data    = Signal(dw)
        last_lane = (60 - 1) % nb
        self.comb += [
            source.valid.eq(busy),
            source.data.eq(data),
            source.last.eq(nxt == nwords),
            source.last_be.eq(Mux(source.last, 1 << last_lane, 0)),
            self.announced.eq(source.valid & source.ready & source.last & announcing),
        ]
        restart = Signal()   # The first word is fetched: while idle, and as a frame's last goes out.
        advance = Signal()   # The word at `nxt` is fetched.
        self.comb += [
            restart.eq(~busy | (source.ready & source.last)),
            advance.eq(source.ready & ~restart),
        ]
        if dw == 8:
            first, fetch = self._byte_fetch(fields(ip_address), fields(self.target_ip), announcing, nxt,
                                            restart, advance)
        else:
            frame  = field_bytes(fields(Mux(announcing, ip_address, self.target_ip)))
            frame += [C(0, 8)]*(nwords*nb - len(frame))  # Padding to the 60-byte minimum frame.
            frame  = [Cat(*frame[i*nb:(i + 1)*nb]) for i in range(nwords)]
            first, fetch = frame[0], mux_tree(frame, nxt)
        self.sync += [
            If(restart,
                data.eq(first),
                nxt.eq(1),
            ).Elif(advance,
                data.eq(fetch),
                nxt.eq(nxt + 1),
            ),
        ]
        self.sync += [
            # A pending flag clears when its frame starts, so a pulse during the frame is kept.
            If(~busy,
                If(announce_pending,
                    busy.eq(1),
                    announcing.eq(1),
                    announce_pending.eq(0),
                ).Elif(pending,
                    busy.eq(1),
                    announcing.eq(0),
                    pending.eq(0),
                )
            ),
            If(source.valid & source.ready & source.last,
                busy.eq(0),
                self.sent.eq(self.sent + 1),
            ),
            If(self.request,  pending.eq(1)),
            If(self.announce, announce_pending.eq(1)),
        ]

    def _byte_fetch(self, announcement, request, announcing, nxt, restart, advance):
        """At 8 bits: the frame's first byte, and the byte at position `nxt` from registers that
        describe that position (`is_var`, `const`, `idx`), set a fetch ahead: a constant byte, or
        one of the address bytes (the board's MAC and IP, the target IP) by index. The byte then
        comes from a 14-way multiplexer on a register, not from a 60-way one on `nxt` (6 to 7 LUT
        levels on ECP5, eth's worst path in a third of the colorlight_i5's placements)."""
        srcs, plans = {}, []   # srcs: key -> (index, byte)
        for fields in (announcement, request):
            plan = []
            for part in field_byte_parts(fields):
                if isinstance(part, int):
                    plan.append((False, part, 0))
                else:
                    key, byte = part
                    srcs.setdefault(key, (len(srcs), byte))
                    plan.append((True, 0, srcs[key][0]))
            plans.append(plan + [(False, 0, 0)]*(60 - len(plan)))
        assert not plans[0][0][0] and plans[0][0] == plans[1][0]
        is_var = Signal(reset=plans[1][1][0])
        const  = Signal(8, reset=plans[1][1][1])
        idx    = Signal(max=max(len(srcs), 2), reset=plans[1][1][2])

        def describe(pos):   # The registers for position `pos`, by the frame being sent.
            (va, ca, ia), (vr, cr, ir) = plans[0][pos], plans[1][pos]
            return [is_var.eq(Mux(announcing, va, vr)), const.eq(Mux(announcing, ca, cr)),
                    idx.eq(Mux(announcing, ia, ir))]
        self.sync += If(restart, *describe(1)).Elif(advance, Case(nxt, {p: describe(p + 1) for p in range(1, 59)}))
        byte = mux_tree([v for _, v in sorted(srcs.values(), key=lambda e: e[0])], idx)
        return C(plans[0][0][1], 8), Mux(is_var, byte, const)
