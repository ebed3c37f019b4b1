#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""FCS checker for 8-bit MAC receive datapaths: LiteEth's, with its verdict from a register.

LiteEth's LiteEthMACCRC32Checker judges a frame in the cycle its last byte arrives: its `error`
is `crc_next != 0xc704dd7b`, the CRC *after* that byte (two LUT levels of XOR from the CRC
register and the byte) compared with a constant (three more), and-ed with `valid & last`; it
drives both the last byte's `error` and the pulse its error counter synchronizes. In the
colorlight_i5's full SoC on the LFE5U-25F-6 that was eth_rx's critical path (10 LUT levels,
10.56 ns, 7.92 ns of it routing), and out of context it was still the worst eth path once it ended
at a register instead of a clock enable (8.19 ns).

This checker takes the last byte in, holds its output for two cycles and judges the CRC register
itself, which then covers the whole frame: the compare starts at a flip-flop and ends at one
(`bad`), and the last byte's `error` and the error pulse come from registers. The frame comes out
two cycles later than LiteEth's; its bytes are the same, and so are the flags:

- `source.error` on a byte is its own `error` or that of the byte four later (LiteEth gives only
  the later one, so RX_ER on a frame's first four bytes was lost); on the last byte, also the FCS
  verdict. Every byte is whole at 8 bits, so the FCS is checked whatever `last_be` says (LiteEth
  checks only when the PHY sets `last_be`, and LiteEth's own 8-bit PHYs leave it at 0).
- A frame of four bytes or fewer has no payload: nothing comes out, and the pulse counts it when
  its CRC is bad, as LiteEth's does.

Like LiteEth's, it holds `sink.ready` low while it waits on `source.ready`, and for the two cycles
after each frame's last byte (LiteEth: one), which the preamble and the inter-frame gap cover.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.crc import LiteEthMACCRC32, LiteEthMACCRCEngine


class FCSChecker(LiteXModule):
    def __init__(self):
        self.sink   = sink   = stream.Endpoint(eth_phy_description(8))
        self.source = source = stream.Endpoint(eth_phy_description(8))
        self.error  = Signal()   # One-cycle pulse per frame with a bad FCS, from a register.

        # # #

        # The input through a register, as LiteEth buffers its checker's sink.
        self.sink_buffer = sink_buffer = stream.Buffer(eth_phy_description(8), pipe_valid=True)
        self.comb += sink.connect(sink_buffer.sink)
        din = sink_buffer.source

        # CRC-32 over every byte taken in, FCS included.
        self.engine = engine = LiteEthMACCRCEngine(data_width=8, width=32, polynom=LiteEthMACCRC32.polynom)
        crc = Signal(32, reset=LiteEthMACCRC32.init)
        self.comb += [engine.data.eq(din.data), engine.crc_prev.eq(crc)]

        # The last four bytes taken in (the FCS, once the last has come); [0] is the oldest.
        sr_data  = [Signal(8, name=f"sr_data{i}") for i in range(4)]
        sr_error = [Signal(name=f"sr_error{i}") for i in range(4)]
        sr_first = [Signal(name=f"sr_first{i}") for i in range(4)]
        held     = Signal(max=5)   # Bytes in the shift register.
        full     = Signal()        # held == 4, as a register.

        # After the last byte: `closing` for a cycle (the CRC register takes the last byte, then is
        # compared into `bad`), then `ending` until the last byte has gone out.
        closing  = Signal()
        ending   = Signal()
        bad      = Signal()
        fcs_er   = Signal()        # RX_ER on the frame's last byte (the FCS's last).

        take = Signal()
        out  = Signal()
        done = Signal()
        self.comb += [
            take.eq(din.valid & din.ready),
            out.eq(source.valid & source.ready),
            # Payload bytes go out once four are held: the byte coming in might be the FCS's last.
            din.ready.eq(~closing & ~ending & (~full | din.last | source.ready)),
            source.valid.eq(full & (ending | (din.valid & ~din.last & ~closing))),
            source.data.eq(sr_data[0]),
            source.first.eq(sr_first[0]),
            source.last.eq(ending),
            source.last_be.eq(ending),
            If(ending,
                source.error.eq(sr_error[0] | fcs_er | bad),
            ).Else(
                source.error.eq(sr_error[0] | din.error),
            ),
            done.eq(ending & (~full | source.ready)),
        ]

        # Control path.
        first_next = Signal(reset=1)   # The next byte taken in starts a frame.
        self.sync += [
            closing.eq(0),
            self.error.eq(0),
            If(take,
                crc.eq(engine.crc_next),
                first_next.eq(din.last),
                If(din.last,
                    closing.eq(1),
                    fcs_er.eq(din.error),
                ).Else(
                    # Full: the oldest goes out as this one comes in (`din.ready` waited for it).
                    If(full,
                        *[sr_data[i].eq(sr_data[i + 1]) for i in range(3)],
                        *[sr_error[i].eq(sr_error[i + 1]) for i in range(3)],
                        *[sr_first[i].eq(sr_first[i + 1]) for i in range(3)],
                    ),
                    # Where the new byte goes: the top of a full register, or the next free slot.
                    *[If((full & (i == 3)) | (~full & (held == i)),
                        sr_data[i].eq(din.data), sr_error[i].eq(din.error), sr_first[i].eq(first_next))
                      for i in range(4)],
                    If(~full,
                        held.eq(held + 1),
                        full.eq(held == 3),
                    ),
                ),
            ),
            If(closing,
                bad.eq(crc != LiteEthMACCRC32.check),
                ending.eq(1),
            ),
            If(done,
                ending.eq(0),
                held.eq(0),
                full.eq(0),
                crc.eq(LiteEthMACCRC32.init),
                self.error.eq(bad),
            ),
        ]
