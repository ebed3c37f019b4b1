#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""LiteEth's packetizers at 8 bits, each header byte read from its field in place of a shift register.

LiteEth's Packetizer (liteeth/packet.py) copies the whole header into a shift register as its
first byte goes out and shifts it a byte per cycle: one flip-flop and one LUT per header bit. At
8 bits the sink holds the packet's first beat, and with it every header field, until the header
has gone out (its `ready` is low meanwhile, and a stream keeps a beat's payload until it is
taken), so the byte can be read from the fields themselves:

    sink (header fields + first data byte, held) ──► byte mux [idx] ──┐
                                                                      ├──► source
    sink.data (after the header) ─────────────────────────────────────┘

Constant header bytes (versions, lengths, types) fold into the multiplexer, and no header bit
needs a flip-flop. The colorlight_i5's four (MAC, ARP, IPv4, UDP) took about 590 LUT4 and 520
flip-flops as shift registers (bench/resources.py). The stream is LiteEth's cycle for cycle: the
same `valid`, `ready`, `data`, `last`, `last_be` and `error` in every cycle (test_packetizer runs
both side by side).

`byte_packetizers()` builds LiteEth's cores with it: LiteEth's packetizer classes (MAC, ARP,
IPv4, UDP, ICMP) call `Packetizer.__init__` by their module's name for it, which the context
manager points here while it is open. At other widths it builds LiteEth's own.
"""

import importlib
from contextlib import contextmanager

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.packet import Packetizer as LiteEthPacketizer

from ethdaq.gateware.framer import mux_tree

# LiteEth modules whose packetizer classes name `Packetizer` (liteeth.packet's) in their __init__.
LITEETH_PACKETIZER_USERS = ("liteeth.mac.common", "liteeth.core.arp", "liteeth.core.ip",
                            "liteeth.core.udp", "liteeth.core.icmp")


class BytePacketizer(LiteXModule):
    """LiteEth's Packetizer's interface and behaviour (sink with the header's fields, source
    without; `header`, the encoded header, for LiteEth's IPv4 checksum), built without a shift
    register at 8 bits; LiteEth's Packetizer at any other width."""
    def __init__(self, sink_description, source_description, header):
        if dict((f[0], f[1]) for f in sink_description.payload_layout)["data"] != 8:
            LiteEthPacketizer.__init__(self, sink_description, source_description, header)
            return
        self.sink   = sink   = stream.Endpoint(sink_description)
        self.source = source = stream.Endpoint(source_description)
        self.header = Signal(header.length*8)

        # # #

        n      = header.length
        idx    = Signal(max=max(n, 2))  # The header byte going out.
        copy   = Signal()               # The header is out: the sink's bytes follow.
        hbytes = [self.header[8*i:8*(i + 1)] for i in range(n)]  # Wire order.

        # Data-Path.
        self.comb += [
            header.encode(sink, self.header),
            If(copy,
                source.data.eq(sink.data),
            ).Else(
                source.data.eq(mux_tree(hbytes, idx)),
            ),
            source.last.eq(copy & sink.last),
        ]
        if hasattr(source, "last_be"):
            self.comb += source.last_be.eq(copy & sink.last)  # LiteEth's at 8 bits: `last`.
        if hasattr(sink, "error") and hasattr(source, "error"):
            self.comb += source.error.eq(sink.error)

        # Control-Path.
        self.comb += [
            source.valid.eq(sink.valid),
            sink.ready.eq(Mux(copy, source.ready, ~sink.valid)),
        ]
        self.sync += [
            If(source.valid & source.ready,
                If(copy,
                    If(sink.last, copy.eq(0)),
                ).Elif(idx == n - 1,
                    idx.eq(0),
                    copy.eq(1),
                ).Else(
                    idx.eq(idx + 1),
                ),
            ),
        ]


@contextmanager
def byte_packetizers():
    """While open, LiteEth's MAC, ARP, IPv4, UDP and ICMP packetizers built are BytePacketizers."""
    modules = [importlib.import_module(name) for name in LITEETH_PACKETIZER_USERS]
    for m in modules:
        if m.Packetizer is not LiteEthPacketizer:
            raise ValueError(f"byte_packetizers: {m.__name__}.Packetizer is {m.Packetizer!r}, not LiteEth's "
                             "Packetizer; LiteEth no longer builds its packetizers this way")
    try:
        for m in modules:
            m.Packetizer = BytePacketizer
        yield
    finally:
        for m in modules:
            m.Packetizer = LiteEthPacketizer
