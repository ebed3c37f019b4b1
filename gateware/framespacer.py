#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Frame spacer: at least `cycles` idle cycles after each frame's last beat, so a module that
needs time between frames gets it even when frames come back to back.

    sink ──► FrameSpacer ──► source     (after a beat with `last`: `cycles` cycles of ready = valid = 0)

LiteEth 2024.12's 64-bit FCS checker (LiteEthMACCRC32Checker) needs it. When a frame's last word
holds data as well as the FCS (5 to 8 bytes), the checker sends that word from its FIFO in a state
of its own (COPY_LAST) and then resets the FIFO (RESET); in both states it takes a word from its
sink, which the reset then discards without the CRC having seen it. The next frame loses its first
word, fails its FCS, and its error comes out on a word that is not its last. Behind LiteEth's
receive crossing into a slower sys clock (10G at 156.25 MHz into 125 MHz) frames leave the
crossing back to back, with only the preamble word's cycle between them, and that happens.

The spacer costs `cycles` cycles a frame on the sys side of the crossing, which has them while it
is not full (docs/liteeth-notes.md). Data and flags pass unchanged, combinationally.
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream


class FrameSpacer(LiteXModule):
    def __init__(self, layout, cycles=2):
        self.sink   = sink   = stream.Endpoint(layout)
        self.source = source = stream.Endpoint(layout)

        # # #

        wait = Signal(max=cycles + 1)   # Idle cycles still owed after the last frame's end.
        self.comb += [
            sink.connect(source, omit={"valid", "ready"}),
            source.valid.eq(sink.valid & (wait == 0)),
            sink.ready.eq(source.ready & (wait == 0)),
        ]
        self.sync += [
            If(wait != 0,
                wait.eq(wait - 1),
            ).Elif(source.valid & source.ready & source.last,
                wait.eq(cycles),
            ),
        ]
