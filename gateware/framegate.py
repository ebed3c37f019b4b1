#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Frame gate: whole frames or nothing, in front of LiteEth's receive layers.

LiteEth's MAC flags a frame with a bad FCS (`error` on its last byte) but hands it on: its ARP,
IP, ICMP and UDP layers do not look at the flag, so a corrupted ping is answered and a corrupted
ARP request is answered too (test/gateware/test_framegate.py pins the ping). And, reading its code (not
yet shown in a test), its receive path trusts `ready` where the PHY does not wait: when the
clock-crossing FIFO behind the MAC is full, bytes would vanish from the middle of a frame
without a flag.

The gate stores each frame as it arrives, at line rate (its sink is always ready), and lets it
out only once its last byte has come and it is good:

- a frame flagged `error` (bad FCS, or the receive classifier's drop and fast-track actions) is
  discarded whole (`ev_error`);
- a frame that finds less than `max_frame` bytes of room, or no frame slot, when its first byte
  comes is discarded whole (`ev_full`): nothing is lost from the middle of a frame;
- a frame longer than `max_frame` bytes is discarded whole (`ev_oversize`).

Everything else goes out unchanged, in order, at the pace of the source's `ready`. A frame waits
in the gate for its own length (store and forward): 0.5 us for a 64-byte frame at 1 Gb/s.

dw=64 (LiteEth's 64-bit MAC datapath: 8 bytes a beat, `last_be` kept with each beat, `error` a bit
a byte) stores beats instead of bytes, `depth` and `max_frame` still in bytes (`max_frame` a
multiple of 8).
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus

from liteeth.common import eth_phy_description

from ethdaq.gateware.bram import BlockRAMFIFO
from ethdaq.gateware.compare import at_least, below
from ethdaq.gateware.eventcounters import count_pulses
from ethdaq.gateware.regbuffer import RegisteredBuffer


class FrameGate(LiteXModule):
    def __init__(self, depth=2048, max_frame=1536, frames=64, dw=8):
        if dw not in (8, 64):
            raise ValueError(f"dw must be 8 (1G) or 64 (10G), not {dw!r}")
        if depth & (depth - 1) or depth < 64:
            raise ValueError(f"depth must be a power of two of at least 64 bytes, not {depth!r}")
        if not (60 <= max_frame <= depth):
            raise ValueError(f"max_frame must be 60..depth ({depth}) bytes, not {max_frame!r}")
        if max_frame % (dw//8):
            raise ValueError(f"max_frame must be a multiple of {dw//8} bytes at dw={dw}, not {max_frame!r}")
        self.sink   = sink   = stream.Endpoint(eth_phy_description(dw))
        self.source = source = stream.Endpoint(eth_phy_description(dw))
        # One cycle per frame dropped, by class (FrameGateCounters counts them, in sys).
        self.ev_error    = Signal()
        self.ev_full     = Signal()
        self.ev_oversize = Signal()

        # # #

        # Bytes (data and last) and one verdict per stored frame (1: drop it).
        if dw == 8:
            self.data_fifo = data_fifo = BlockRAMFIFO([("data", 8)], depth, with_ready=False)
        else:   # Beats, with their last_be; depth and max_frame from here on in beats.
            self.data_fifo = data_fifo = BlockRAMFIFO([("data", dw), ("last_be", dw//8)], depth//(dw//8), with_ready=False)
            depth, max_frame = depth//(dw//8), max_frame//(dw//8)
        # The verdict comes out of a register (buffered), and the gate's output goes through a
        # buffer with registered valid and ready: the data FIFO's read enable is then one LUT from
        # flip-flops. Read straight from the verdict's distributed RAM and from the next stage's
        # `ready`, it was thirteen logic levels with its level counter's carry chain (10.8 ns, the
        # eth_rx critical path of a full SoC on an LFE5U-45F-6, docs/boards/README.md).
        self.verdict_fifo = verdict_fifo = stream.SyncFIFO([("drop", 1)], frames, buffered=True)
        self.out_buffer   = out_buffer   = RegisteredBuffer(eth_phy_description(dw))
        error = sink.error if dw == 8 else (sink.error != 0)   # At dw=64: a bit a byte.

        beat     = Signal()
        first    = Signal(reset=1)   # The next byte starts a frame.
        storing  = Signal()          # This frame is being stored.
        count    = Signal(max=max_frame + 1)
        at_max   = Signal()          # count == max_frame - 1.
        oversize = Signal()          # Cut at max_frame bytes: dropped at its end.
        overflow = Signal()          # Cut where the buffer filled: dropped at its end.
        room     = Signal()
        full     = Signal()
        cut      = Signal()
        admit    = Signal()          # This byte is stored.
        full_drop = Signal()         # At the last byte: the frame found no room.
        # A frame starts with two free bytes and a verdict slot; while it is stored, the byte that
        # leaves one free byte (or reaches max_frame) ends it in the buffer, so a frame always has
        # its end there and the rest of it is never stored. `room` and `full` are registered, and
        # so is the level they compare (a subtraction of the FIFO's pointers): two cycles late,
        # two bytes on the safe side, since the level moves by at most one a cycle. So the data
        # FIFO never fills, and it writes every admitted byte without a full check of its own.
        level = Signal.like(data_fifo.level)
        self.sync += [
            level.eq(data_fifo.level),
            room.eq(below(level, depth - 4) & below(verdict_fifo.level, frames - 1)),
            full.eq(at_least(level, depth - 5)),
        ]
        self.comb += [
            sink.ready.eq(1),        # The PHY does not wait.
            beat.eq(sink.valid),
            admit.eq(beat & Mux(first, room, storing)),
            cut.eq(admit & ~sink.last & (at_max | full)),
            data_fifo.sink.valid.eq(admit),
            data_fifo.sink.data.eq(sink.data),
            data_fifo.sink.last.eq(sink.last | cut),
            *([] if dw == 8 else [data_fifo.sink.last_be.eq(sink.last_be)]),
            verdict_fifo.sink.valid.eq(beat & sink.last & Mux(first, room, storing | oversize | overflow)),
            verdict_fifo.sink.drop.eq(error | oversize | overflow),
        ]
        self.sync += If(beat,
            If(first, storing.eq(room)),
            If(admit, count.eq(count + 1), at_max.eq(count == max_frame - 2)),
            If(cut,
                storing.eq(0),
                If(at_max, oversize.eq(1)).Else(overflow.eq(1)),
            ),
            first.eq(0),
            If(sink.last,
                first.eq(1),
                storing.eq(0),
                count.eq(0),
                at_max.eq(0),
                oversize.eq(0),
                overflow.eq(0),
            ),
        )
        end = Signal()
        self.comb += [
            end.eq(beat & sink.last),
            full_drop.eq(~Mux(first, room, storing | oversize | overflow) | overflow),
        ]
        self.sync += [
            self.ev_full.eq(end & full_drop),
            self.ev_oversize.eq(end & ~full_drop & oversize),
            self.ev_error.eq(end & ~full_drop & ~oversize & error),
        ]

        # Out: a frame whose verdict has come; a dropped one is read out unseen. The bytes come
        # from the block RAM's output register (BlockRAMFIFO, gateware/bram.py): the RAM's read
        # itself is slow (5.8 ns from clock to data on the ECP5 without that register), after the
        # register only the consumer's logic follows.
        data = data_fifo.source
        drop = verdict_fifo.source.drop
        out  = out_buffer.sink
        self.comb += [
            out.valid.eq(data.valid & verdict_fifo.source.valid & ~drop),
            out.data.eq(data.data),
            out.last.eq(data.last),
            out.last_be.eq(data.last if dw == 8 else data.last_be),
            data.ready.eq(verdict_fifo.source.valid & (drop | out.ready)),
            verdict_fifo.source.ready.eq(data.valid & data.ready & data.last),
            out_buffer.source.connect(source),
        ]


class FrameGateCounters(LiteXModule):
    """The gate's drops by class as CSRs (sys), counted from its per-frame pulses in `cd`. Without
    `with_error` and `with_oversize` only the drops for want of room are counted: the receive audit
    in front (gateware/rxaudit.py) counts the frames it flags, by cause, and the oversize ones."""
    def __init__(self, gate, cd="eth_rx", with_error=True, with_oversize=True):
        if with_error:
            self._dropped_error    = CSRStatus(32, description="Received frames dropped whole: bad FCS, the receive audit's or the classifier's flag.")
        self._dropped_full         = CSRStatus(32, description="Received frames dropped whole: the gate's buffer had no room.")
        if with_oversize:
            self._dropped_oversize = CSRStatus(32, description="Received frames dropped whole: longer than the gate's max_frame.")

        # # #

        events = [(gate.ev_full, self._dropped_full)]
        if with_error:
            events.append((gate.ev_error, self._dropped_error))
        if with_oversize:
            events.append((gate.ev_oversize, self._dropped_oversize))
        count_pulses(self, cd, events)
