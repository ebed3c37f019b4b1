#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A two-entry stream buffer with a flip-flop on each of its outputs.

LiteX's `stream.Buffer(pipe_valid=True, pipe_ready=True)` puts its PipeValid at the sink and its
PipeReady at the source. Each of its outputs is then a LUT: `sink.ready` is PipeValid's
`~valid | ready` of PipeReady's flip-flop, `source.valid` and the payload PipeReady's choice
between its skid register and PipeValid's. In the full SoC on the colorlight_i5 (88 % of the
LUTs) those LUTs were the first level of eth's critical paths: the framer's input buffer's ready
into the streamer's state machine (5 levels, c3d5953 + 3 commits, seed 1), the MAC's transmit
buffer's valid into MACTransmitter (6 levels, c3d5953, seed 3).

The same two stages the other way round, PipeReady at the sink and PipeValid at the source,
give `sink.ready` = PipeReady's flip-flop and `source.valid`/payload = PipeValid's: both sides
see registers, and the two LUTs are between the stages. Same capacity (two entries), latency
(one cycle) and full rate.
"""

from litex.gen import *

from litex.soc.interconnect import stream


class SkidBuffer(LiteXModule):
    def __init__(self, layout):
        self.sink   = sink   = stream.Endpoint(layout)
        self.source = source = stream.Endpoint(layout)

        # # #

        self.pipe_ready = stream.PipeReady(layout)
        self.pipe_valid = stream.PipeValid(layout)
        self.pipeline   = stream.Pipeline(sink, self.pipe_ready, self.pipe_valid, source)
