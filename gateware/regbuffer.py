#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A stream buffer whose every handshake output is a flip-flop: `sink.ready` on one side,
`source.valid` and the payload on the other.

    sink ──► PipeReady ──► PipeValid ──► source
     ▲ ready: a register      valid, payload: registers

LiteX's `stream.Buffer(pipe_valid=True, pipe_ready=True)` chains the same two stages the other way
round (PipeValid first), so its `sink.ready` is `~valid | ~valid_d`: a LUT of two registers, and
the producer's logic behind `ready` starts one LUT level later than it could. Here `sink.ready` is
PipeReady's register alone (inverted), so a producer whose state machine is a function of `ready`
(the streamer's serializer) has that much more of the cycle. Latency one cycle, full rate, as
LiteX's buffer.
"""

from litex.gen import *

from litex.soc.interconnect import stream


class RegisteredBuffer(LiteXModule):
    def __init__(self, layout):
        self.sink   = stream.Endpoint(layout)
        self.source = stream.Endpoint(layout)

        # # #

        self.pipe_ready = stream.PipeReady(layout)   # sink.ready from a register.
        self.pipe_valid = stream.PipeValid(layout)   # source.valid and payload from registers.
        self.pipeline   = stream.Pipeline(self.sink, self.pipe_ready, self.pipe_valid, self.source)
