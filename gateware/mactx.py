#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Ethernet frame transmitter for 8-bit PHYs: padding, FCS and preamble in one registered stage.

LiteEth's MAC sends a frame through three modules, each a state machine passing `ready`
combinationally to the one before: the padding inserter (a 16-bit counter compared with 59),
the FCS inserter (behind a buffer with registered `valid` only) and the preamble inserter. In the
colorlight_i5's full SoC that chain runs from the FCS inserter's buffer through its byte counter
and the transmit buffer's `ready` into the padding counter's carry chain: 9 LUT levels, 9.2 ns
for eth's 7.27 ns period (nextpnr, build id ci).

`MACTransmitter` does the same to a frame in one module: the output (`source.valid`, `data`,
`last`) comes from registers, and `sink.ready` is the data state and the output register's own
room (two flip-flops and `source.ready`). It emits seven 0x55 and 0xD5, the frame's bytes,
zeros up to 60 bytes (`with_padding`), and the FCS; the CRC register shifts out the FCS, so no
multiplexer chooses its bytes. A frame of n bytes takes 8 + max(n, 60) + 4 cycles, frames back to
back (LiteEth's FCS and preamble inserters each spend a cycle in IDLE before a frame, and its MAC
core puts a buffer between them); a frame whose bytes stop coming before its end
is sent with the gap, as LiteEth's modules send it (`sink` should be a store-and-forward FIFO:
gateware/framefifo.py).
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.crc import LiteEthMACCRCEngine

PREAMBLE_BYTES = 7      # 0x55, then the start frame delimiter 0xD5.
MIN_FRAME      = 60     # Bytes before the FCS (64 with it).


class MACTransmitter(LiteXModule):
    def __init__(self, with_padding=True):
        self.sink   = sink   = stream.Endpoint(eth_phy_description(8))
        self.source = source = stream.Endpoint(eth_phy_description(8))

        # # #

        # States, one flip-flop each.
        idle  = Signal(reset=1)
        pre   = Signal()
        data  = Signal()
        pad   = Signal()
        fcs   = Signal()
        count = Signal(3)      # Preamble bytes sent / FCS bytes sent.
        sfd   = Signal()       # The next preamble byte is the delimiter.
        fcs_last = Signal()    # The next FCS byte is the frame's last.
        length = Signal(6)     # Frame bytes sent, up to MIN_FRAME - 1.
        long   = Signal(reset=int(not with_padding))   # The next byte is at least the 60th.
        at_59th = Signal()     # length == MIN_FRAME - 2: the next byte taken is the 59th.

        # The output register takes a byte when it is empty or its byte is taken.
        load = Signal()
        self.comb += [
            load.eq(~source.valid | source.ready),
            sink.ready.eq(data & load),
        ]
        take_data = Signal()
        take_pad  = Signal()
        self.comb += [
            take_data.eq(data & load & sink.valid),
            take_pad.eq(pad & load),
        ]

        # CRC-32 of the frame's bytes and padding; in the FCS state it shifts out a byte a cycle.
        # A byte is folded into `crc` in the cycle after it is taken, from a register (`pend`,
        # `pdat`): the CRC's 32 next-state functions (three LUT levels each) then start at
        # flip-flops, not at the upstream FIFO's output and `sink.valid`, and its enable is a
        # flip-flop. The FCS's first byte comes from `crc_full`, which folds the last byte in
        # when it is still pending.
        crc      = Signal(32, reset=2**32 - 1)
        pend     = Signal()      # pdat is a frame byte not yet in `crc`.
        pdat     = Signal(8)
        crc_full = Signal(32)
        engine   = LiteEthMACCRCEngine(data_width=8, width=32, polynom=0x04c11db7)
        self.submodules += engine
        self.comb += [
            engine.data.eq(pdat),
            engine.crc_prev.eq(crc),
            crc_full.eq(Mux(pend, engine.crc_next, crc)),
        ]
        fcs_byte = Signal(8)
        self.comb += fcs_byte.eq(~crc_full[24:32][::-1])

        self.sync += [
            If(load,
                source.valid.eq(0),
                If(idle & sink.valid,
                    source.valid.eq(1), source.data.eq(0x55), source.last.eq(0), source.error.eq(0),
                ),
                If(pre,
                    source.valid.eq(1), source.data.eq(Mux(sfd, 0xd5, 0x55)),
                ),
                If(take_data,
                    source.valid.eq(1), source.data.eq(sink.data), source.error.eq(sink.error),
                ),
                If(take_pad,
                    source.valid.eq(1), source.data.eq(0), source.error.eq(0),
                ),
                If(fcs,
                    source.valid.eq(1), source.data.eq(fcs_byte), source.error.eq(0),
                    source.last.eq(fcs_last),
                ),
            ),
            # State.
            If(load,
                If(idle & sink.valid,
                    idle.eq(0), pre.eq(1),
                ),
                If(pre & sfd,
                    pre.eq(0), data.eq(1),
                ),
                If((take_data & sink.last) | take_pad,
                    data.eq(0),
                    pad.eq(~long),
                    fcs.eq(long),
                ),
                If(fcs & fcs_last,
                    fcs.eq(0), idle.eq(1),
                ),
            ),
            # The CRC: the pending byte folded in, or (FCS) shifted out a byte.
            pend.eq(take_data | take_pad),
            pdat.eq(Mux(take_data, sink.data, 0)),
            If(idle,
                crc.eq(2**32 - 1),
            ).Elif(load & fcs,
                crc.eq(Cat(Replicate(0, 8), crc_full[:24])),
            ).Elif(pend,
                crc.eq(engine.crc_next),
            ),
            # Counters.
            If(idle,
                count.eq(0), sfd.eq(0), fcs_last.eq(0), length.eq(0), long.eq(int(not with_padding)),
                at_59th.eq(0),
            ),
            If(load & idle & sink.valid,
                count.eq(1),
            ),
            If(load & pre,
                count.eq(count + 1),
                sfd.eq(count == PREAMBLE_BYTES - 1),
            ),
            # `long` from a flag registered a byte ahead, not from the compare of `length`:
            # behind the take, the compare is 6 LUT levels, a path as long as the eth clock's
            # critical one on the colorlight_i5.
            If(take_data | take_pad,
                length.eq(length + 1),
                at_59th.eq(length == MIN_FRAME - 3),
                If(at_59th, long.eq(1)),
                count.eq(0),
            ),
            If(load & fcs,
                count.eq(count + 1),
                fcs_last.eq(count == 2),
            ),
        ]
        self.comb += source.last_be.eq(source.last)
