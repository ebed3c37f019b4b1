#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Stream FIFO whose write side knows how full it is, across clock domains.

The streamer admits a datagram only when its buffer has room for all of it, so the writer
(detector clock) must know the buffer's level while the reader (PHY clock) empties it. Migen's
AsyncFIFO only says "writable"; this one is the same gray-pointer design and also decodes the
synchronised read pointer on the write side: `level` is exact in one domain and, across domains,
never lower than the true level (the reader's progress arrives a few cycles late), so admission
is safe.
"""

from migen import *
from migen.genlib.cdc import MultiReg, GrayCounter, GrayDecoder

from litex.gen import *

from litex.soc.interconnect import stream


class LevelFIFO(LiteXModule):
    """`depth` entries (a power of two) of `layout`; sink in `cd_write`, source in `cd_read`.

    `level` (cd_write): entries written and not yet known to be read.
    `consumed` (cd_write): entries known to be read since reset (wraps at 2*depth).
    """
    def __init__(self, layout, depth, cd_write="sys", cd_read="sys"):
        self.sink   = sink   = stream.Endpoint(layout)
        self.source = source = stream.Endpoint(layout)
        self.level    = Signal(max=depth + 1)
        self.consumed = Signal(log2_int(depth) + 1)

        # # #

        bits = log2_int(depth)  # Raises for a depth that is not a power of two.
        same = cd_write == cd_read
        produce = ClockDomainsRenamer(cd_write)(GrayCounter(bits + 1))
        consume = ClockDomainsRenamer(cd_read)(GrayCounter(bits + 1))
        self.submodules += produce, consume

        # Pointers seen from the other side (two flip-flops when the clocks differ).
        produce_r = Signal(bits + 1)
        consume_w = Signal(bits + 1)
        if same:
            self.comb += [produce_r.eq(produce.q), consume_w.eq(consume.q)]
        else:
            produce.q.attr.add("no_retiming")
            consume.q.attr.add("no_retiming")
            self.specials += [
                MultiReg(produce.q, produce_r, cd_read),
                MultiReg(consume.q, consume_w, cd_write),
            ]
        consume_w_bin = Signal(bits + 1)
        if same:
            self.comb += consume_w_bin.eq(consume.q_binary)
        else:
            decoder = ClockDomainsRenamer(cd_write)(GrayDecoder(bits + 1))
            self.submodules += decoder
            # The decoder is registered: one more cycle of pessimism, never optimism.
            self.comb += [decoder.i.eq(consume_w), consume_w_bin.eq(decoder.o)]

        writable = Signal()
        readable = Signal()
        self.comb += [
            self.level.eq((produce.q_binary - consume_w_bin)[:bits + 1]),
            self.consumed.eq(consume_w_bin),
            writable.eq(self.level < depth),
            readable.eq(consume.q != produce_r),
            produce.ce.eq(sink.valid & writable),
            consume.ce.eq(source.ready & readable),
            sink.ready.eq(writable),
            source.valid.eq(readable),
        ]

        # Storage: whole endpoint payload (data fields, first/last) per entry.
        def fields(ep):
            parts = [ep.payload.raw_bits(), ep.param.raw_bits(), ep.first, ep.last]
            return Cat(*[p for p in parts if len(p)])  # An empty Cat makes invalid Verilog.
        payload, out = fields(sink), fields(source)
        storage = Memory(len(payload), depth)
        wrport  = storage.get_port(write_capable=True, clock_domain=cd_write)
        rdport  = storage.get_port(clock_domain=cd_read)
        self.specials += storage, wrport, rdport
        self.comb += [
            wrport.adr.eq(produce.q_binary[:bits]),
            wrport.dat_w.eq(payload),
            wrport.we.eq(produce.ce),
            # Synchronous read of the entry the pointer will point at: data is ready with `readable`.
            rdport.adr.eq(consume.q_next_binary[:bits]),
            out.eq(rdport.dat_r),
        ]
