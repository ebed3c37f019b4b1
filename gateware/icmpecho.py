#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""ICMP echo (ping) responder on LiteEth's IPv4 crossbar, 8 bits a cycle, one block RAM.

    IPv4 crossbar (protocol 1) ─► sink ─► admission ─► message RAM (whole messages) ─► source ─► IPv4 crossbar
                                              │  at its last byte:               ▲ type 0, the
                                              └► (address, length, checksum) ────┘ checksum from the FIFO

An echo request's message is stored as it arrives, and its reply is the same bytes with the type
0 and the checksum adjusted for that one change (RFC 1624: + 0x0800, end-around carry, as
LiteEth's LiteEthICMPEcho computes it). LiteEth's ICMP (LiteEthICMP) unpacks the 8-byte header
into registers, keeps each message's 114 bits of header fields and IPv4 parameters in a FIFO
and packs the header again, 475 LUT4 equivalents and 2 DP16KD on the colorlight_i5; here the
header stays in the message RAM and only the bytes the reply changes are replaced on the way out.

- A message is taken only whole: admitted at its first byte when the RAM has room for the
  longest message and the parameter FIFO a slot (the crossbar waits until then, as LiteEth's
  buffer makes it wait); bytes after its length (Ethernet padding) are dropped; a message whose
  frame ends before its length is given back, never answered.
- Only echo requests (type 8) of 8 bytes or more, up to `max_message`, are answered;
  other ICMP messages are consumed and dropped, as LiteEth's ICMP does.
- The reply keeps the request's length (trailing padding is not echoed) and goes to its sender.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_ipv4_user_description, icmp_protocol, icmp_type_ping_request

from ethdaq.gateware.compare import at_least, at_most

ICMP_HEADER_LEN = 8


def echo_reply_checksum(request_checksum):
    """The reply's checksum from the request's: type 8 becomes 0 in the message's first 16-bit
    word, so the one's-complement checksum grows by 0x0800 with end-around carry (LiteEth's
    formula). Works on Migen values and on ints."""
    if isinstance(request_checksum, int):
        return (request_checksum + 0x0800 + (request_checksum >= 0xF800)) & 0xFFFF
    return (request_checksum + 0x0800 + at_least(request_checksum, 0xF800))[:16]


class ICMPEcho(LiteXModule):
    """Answers pings. `sink`/`source`: a LiteEthIPV4UserPort's (ip.crossbar.get_port(
    icmp_protocol)), 8 bits. `depth` bytes of message RAM (a power of two), `max_message` the
    longest message answered (1480: a ping at the 1500-byte MTU), `messages` replies waiting at
    most."""
    def __init__(self, depth=2048, max_message=1480, messages=16):
        if depth & (depth - 1) or depth < 64:
            raise ValueError(f"ICMPEcho: depth must be a power of two >= 64, not {depth!r}")
        if not ICMP_HEADER_LEN <= max_message <= depth - 2:
            raise ValueError(f"ICMPEcho: max_message must be {ICMP_HEADER_LEN} to depth - 2 = {depth - 2}, not {max_message!r}")
        self.sink   = sink   = stream.Endpoint(eth_ipv4_user_description(8))
        self.source = source = stream.Endpoint(eth_ipv4_user_description(8))

        # # #

        abits = log2_int(depth)
        mem = Memory(8, depth)
        wr  = mem.get_port(write_capable=True)
        rd  = mem.get_port()   # Registered address: the block RAM's own.
        self.specials += mem, wr, rd
        self.params = params = stream.SyncFIFO([("ip_address", 32), ("length", abits), ("checksum", 16)], messages)

        # Pointers one bit wider than an address, so that full and empty differ.
        wp = Signal(abits + 1)   # Next byte of the message being taken.
        cp = Signal(abits + 1)   # End of the whole messages (wp outside a message).
        rp = Signal(abits + 1)   # Byte on the RAM's output.

        _add_admission(self, sink, params, wr, wp, cp, rp, depth, max_message, abits)
        _add_reply(self, source, params, rd, rp, abits)


def _add_admission(echo, sink, params, wr, wp, cp, rp, depth, max_message, abits):
    # Write side: IDLE at a message's first byte, TAKE its bytes, SKIP the rest of its frame.
    # A message is admitted while the RAM holds at most depth - 1 - max_message bytes, so any
    # message fits; `used` is registered, at most a byte old (wp moves a byte a cycle, rp only
    # frees room), hence the byte to spare.
    take, skip = Signal(), Signal()
    left  = Signal(abits)    # Bytes of the message still to take, counted from its length.
    index = Signal(3)        # Position in the message, saturating at 4 (after the checksum).
    hi, lo = Signal(8), Signal(8)
    used  = Signal(abits + 1)
    room  = Signal()
    first = ~take & ~skip
    # The length's bounds as gates, not carry chains: `sink.ready` depends on them, and behind it
    # the IPv4 crossbar and its input buffer's enables (with a chain: 15.9 ns, sys's worst path
    # in a colorlight_i5 placement).
    echo_request = (sink.data == icmp_type_ping_request) & (sink.length[log2_int(ICMP_HEADER_LEN):] != 0) & \
        at_most(sink.length, max_message)
    admit = Signal()
    done  = Signal()         # The message's last byte is written now.
    echo.comb += [
        admit.eq(first & sink.valid & echo_request & room & params.sink.ready),
        done.eq(take & sink.valid & (left == 2)),
        sink.ready.eq(take | skip | (first & ~(echo_request & sink.valid & ~admit))),
        wr.adr.eq(wp[:abits]),
        wr.dat_w.eq(sink.data),
        wr.we.eq(admit | (take & sink.valid)),
        params.sink.valid.eq(done),
        params.sink.ip_address.eq(sink.ip_address),
        params.sink.length.eq(sink.length),
        params.sink.checksum.eq(echo_reply_checksum(Cat(lo, hi))),
    ]
    echo.sync += [
        used.eq(wp - rp),
        room.eq(at_most(used, depth - 2 - max_message)),
        If(wr.we, wp.eq(wp + 1)),
        If(admit,
            left.eq(sink.length),
            index.eq(1),
        ).Elif(take & sink.valid,
            left.eq(left - 1),
            If(index != 4, index.eq(index + 1)),
            If(index == 2, hi.eq(sink.data)),
            If(index == 3, lo.eq(sink.data)),
        ),
        If(done,
            cp.eq(wp + 1),
            take.eq(0),
            skip.eq(~sink.last),
        ).Elif(take & sink.valid & sink.last,
            # The frame ended before the message did: give its bytes back.
            wp.eq(cp),
            take.eq(0),
        ).Elif(admit,
            take.eq(~sink.last),
            If(sink.last, wp.eq(cp)),
        ).Elif(first & sink.valid & ~echo_request,
            skip.eq(~sink.last),
        ).Elif(skip & sink.valid & sink.last,
            skip.eq(0),
        ),
    ]


def _add_reply(echo, source, params, rd, rp, abits):
    # Read side: a message's parameters wait at the FIFO's output; `loaded` a cycle later (the
    # RAM's read of its first byte), then one byte a cycle; the FIFO entry is popped with the
    # last byte.
    loaded = Signal()
    left   = Signal(abits)   # Bytes of the reply still to send, the current one included.
    index  = Signal(3)       # Position in the message, saturating at 4 (after the checksum).
    advance = Signal()
    csum = params.source.checksum
    echo.comb += [
        advance.eq(source.valid & source.ready),
        rd.adr.eq(Mux(advance, rp + 1, rp)[:abits]),
        source.valid.eq(loaded),
        source.last.eq(left == 1),
        source.last_be.eq(left == 1),
        source.protocol.eq(icmp_protocol),
        source.ip_address.eq(params.source.ip_address),
        source.length.eq(params.source.length),
        Case(index, {
            0: source.data.eq(0),            # Type 0: echo reply.
            2: source.data.eq(csum[8:16]),
            3: source.data.eq(csum[0:8]),
            "default": source.data.eq(rd.dat_r),
        }),
        params.source.ready.eq(advance & (left == 1)),
    ]
    echo.sync += [
        If(advance, rp.eq(rp + 1)),
        If(~loaded,
            loaded.eq(params.source.valid),
            left.eq(params.source.length),
            index.eq(0),
        ).Elif(advance,
            left.eq(left - 1),
            If(index != 4, index.eq(index + 1)),
            If(left == 1, loaded.eq(0)),
        ),
    ]
