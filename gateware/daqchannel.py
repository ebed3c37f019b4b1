#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""DAQ channel: one detector input's admission, sample buffer and per-datagram descriptors.

A channel collects samples into its own buffer and only starts a datagram when the buffer can
hold a whole one; it hands each complete datagram to the serializer (gateware/serializer.py) as
buffer words and one descriptor (`descriptor_layout`), through clock-crossing FIFOs: the write
side runs in `sys`, the read side in the transmit clock domain.

The channel's parts (room, admission, packing, descriptor, idle flush, the closing sample ahead,
the datagram's state) are module-level functions of the channel rather than methods: Migen names a
signal after the Python frames above its creation, and a method's frame would add a level to the
names in the generated Verilog. The packing word is named "wire" explicitly, the name the
generated Verilog has for it (Migen's tracer names a closure variable's signal after its neighbour
in the code object on Python 3.11).
"""

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream

from ethdaq.gateware.cdcfifo import LevelFIFO
from ethdaq.gateware.compare import above, at_most, below
from ethdaq.wire import daqformat

# Helpers ------------------------------------------------------------------------------------------

def reverse_bytes(signal):
    n = len(signal)//8
    return Cat(*[signal[8*(n - 1 - i):8*(n - i)] for i in range(n)])


# Flag bits a descriptor carries: the defined ones (the header's other flag bits are 0).
DESC_FLAG_BITS = max(daqformat.FLAGS.values()).bit_length()
# Low bits of the run number a descriptor carries: enough to tell a datagram of an earlier run
# (up to 2**7 - 1 runs back) from one of the serializer's run or of a run it has not seen yet;
# the serializer rebuilds the full number for the header from its own (gateware/serializer.py).
RUN_TAG_BITS = 8


def descriptor_layout(count_bits=16):
    """What a channel hands the serializer per datagram, through a clock-crossing FIFO of
    distributed RAM (the FIFOs of 4 channels are about 150 DPR16X4 on ECP5): no sequence number
    (the serializer counts datagrams per channel itself, from 0 at FLAG_FIRST), only the defined
    flag bits, a sample count as wide as the build's largest datagram needs (`count_bits`; the
    header's field is 16 bits, the count's upper bits 0), and the run number's low RUN_TAG_BITS."""
    return [("timestamp", 64), ("dropped", 64), ("count", count_bits), ("flags", DESC_FLAG_BITS),
            ("run_tag", RUN_TAG_BITS)]

# Channel ------------------------------------------------------------------------------------------

class DAQChannel(LiteXModule):
    """One detector input: admission, sample buffer and per-datagram descriptors.

    Control inputs (driven by DAQStreamer): enable, running, start (pulse), stop (pulse),
    max_samples (samples per datagram, 1 .. 2**count_bits - 1), backpressure, flush, timestamp,
    run; with `track_time`, also timestamp_next (the value `timestamp` has in the next cycle).

    A datagram closes when it is full, at stop (FLAG_LAST), or when its channel has been idle:
    with `flush` = F (non-zero), a datagram that holds samples closes F + 1 cycles after its
    last sample with what it has (FLAG_FLUSH), taking a sample that arrives in that very cycle
    with it. The timer restarts at every accepted sample, so samples at most F cycles apart
    never split a datagram, and a flushed datagram is never empty.

    A datagram is admitted at its first sample only if the sample buffer has room for all its
    words and the descriptor FIFO a slot. The decision comes from registers: compared in the
    cycle before, exact for this channel's own writes, with the transmit side's reading seen a
    cycle later than the buffers' `level` shows it (so a channel may drop, or stall, a cycle
    longer when its buffer is full). The datagram's closing sample is known a cycle ahead too
    (`last`). max_samples must be static while running (it is: the streamer's payload setting is
    written while stopped), and takes two cycles to apply.
    """
    def __init__(self, stream_id, sample_width, buffer_samples, descriptors=8, cd_tx="sys", dw=8, flush_bits=28,
                 track_time=False, count_bits=16):
        # With a data path at least as wide as a sample, samples are packed on the way in into
        # words of `dw` bits in wire order (first sample in the lowest lanes, each sample's bytes
        # MSB first), so the transmit side moves one word per cycle; otherwise the buffer holds
        # samples and the serializer splits them into bytes.
        packed = dw >= sample_width
        spw    = dw//sample_width if packed else 1        # Samples per buffer word.
        width  = dw if packed else sample_width
        words  = buffer_samples//spw
        self.packed, self.spw, self.word_width = packed, spw, width
        self.sink   = stream.Endpoint([("data", sample_width)])
        self.source = source = stream.Endpoint([("data", width)])  # Words of the head datagram (cd_tx).
        self.desc   = desc   = stream.Endpoint(descriptor_layout(count_bits))  # Head datagram's descriptor (cd_tx).

        self.enable       = Signal()
        self.running      = Signal()
        self.start        = Signal()
        self.stop         = Signal()
        self.max_samples  = Signal(count_bits)
        self.backpressure = Signal()
        self.flush        = Signal(flush_bits)  # Idle cycles (minus one) before a partial datagram closes; 0: never.
        self.timestamp    = Signal(64)
        self.timestamp_next = Signal(64)  # With track_time: `timestamp` one cycle ahead.
        self.ts_flags     = Signal(16)
        self.run          = Signal(32)

        self.dropped      = Signal(64)  # Cumulative since run start (status).
        self.drop         = Signal()    # A sample is dropped in this cycle.
        self.queued       = Signal()    # Datagrams closed and not yet sent.

        # # #

        self.stream_id = stream_id
        self.fifo  = fifo  = LevelFIFO([("data", width)], words, "sys", cd_tx, buffered=True, framing=False)
        self.descs = descs = LevelFIFO(descriptor_layout(count_bits), descriptors, "sys", cd_tx, framing=False)
        self.comb += [
            fifo.source.connect(source),
            descs.source.connect(desc),
            self.queued.eq(descs.level != 0),
        ]

        # Data-Path: the open datagram's state, which the parts below share.
        in_packet = Signal()
        count     = Signal(count_bits)
        ts_first  = Signal(64)
        overflow  = Signal()
        first     = Signal()
        stopping  = Signal()
        room      = Signal()
        close     = Signal()
        close_last = Signal()
        close_flush = Signal()  # The idle flush closes the datagram without a sample this cycle.
        flush_due = Signal()    # The datagram has been idle for its flush time.
        last      = Signal()    # The next accepted sample closes the datagram (count + 1 >= max_samples).

        _add_room(self, fifo, descs, words, spw, descriptors, room)
        _add_admission(self, in_packet, room, stopping, last, flush_due, close, close_flush)
        _add_packing(self, fifo, sample_width, dw, packed, spw, close, close_last, close_flush)
        _add_descriptor(self, descs, track_time, in_packet, count, ts_first, overflow, first, stopping,
                        close, close_last, close_flush, flush_due, last)
        _add_idle_flush(self, flush_bits, in_packet, flush_due, close_flush, close_last)
        _add_last_ahead(self, count, last, close, close_last, close_flush)

        # Control-Path.
        _add_datagram_state(self, track_time, in_packet, count, ts_first, overflow, first, stopping,
                            close, close_last, close_flush)
        self.stopping = stopping

# Channel parts ------------------------------------------------------------------------------------

def _add_room(ch, fifo, descs, words, spw, descriptors, room):
    # Admission: `room` (both buffers can take a whole datagram) is decided a cycle ahead, from
    # registers, so no carry chain lies between the buffers' levels and `sink.ready`/`accept`.
    # The comparisons are made with the last cycle's levels, twice: as needed, and with one
    # entry to spare; the levels can only have grown by that cycle's writes (at most one word
    # and one descriptor), so the spare one is used where it wrote: exact for this channel's
    # writes; the reader's progress counts a cycle later than the level shows it.
    # `lim` = words - need (words of a full datagram), from max_samples (static during a run).
    need  = Signal(17)
    lim   = Signal(max=words + 1)
    big   = Signal()            # need > words: never room.
    f0, f1 = Signal(), Signal()  # fifo.level <= lim, < lim.
    d0, d1 = Signal(), Signal()  # descs.level < descriptors, < descriptors - 1.
    f_wrote, d_wrote = Signal(), Signal()
    ch.comb += need.eq((ch.max_samples + spw - 1) >> log2_int(spw))
    ch.sync += [
        lim.eq(words - need),
        big.eq(above(need, words)),
        f0.eq(~big & (fifo.level <= lim)),
        f1.eq(~big & (fifo.level < lim)),
        d0.eq(below(descs.level, descriptors)),
        d1.eq(below(descs.level, descriptors - 1)),
        f_wrote.eq(fifo.sink.valid),
        d_wrote.eq(descs.sink.valid),
    ]
    ch.comb += room.eq(Mux(f_wrote, f1, f0) & Mux(d_wrote, d1, d0))


def _add_admission(ch, in_packet, room, stopping, last, flush_due, close, close_flush):
    # Each sample is accepted (it joins the datagram), dropped, or stalls the detector; a datagram
    # closes on its last sample or when its idle flush is due.
    sink   = ch.sink
    accept = ch.accept = Signal()  # A sample joins the datagram in this cycle.
    drop   = ch.drop
    ch.comb += [
        If(ch.running & ch.enable & ~stopping,
            If(in_packet | room,
                sink.ready.eq(1),
                accept.eq(sink.valid),
            ).Elif(ch.backpressure,
                sink.ready.eq(0),
            ).Else(
                sink.ready.eq(1),
                drop.eq(sink.valid),
            )
        ).Else(
            # Not running: the detector is not stalled and its samples are not part of a run.
            sink.ready.eq(1),
        ),
        close.eq(accept & (last | flush_due)),
        close_flush.eq(flush_due & in_packet & ~accept & ~stopping),
    ]


def _add_packing(ch, fifo, sample_width, dw, packed, spw, close, close_last, close_flush):
    # Samples into the buffer: as they come, or packed into words of `dw` bits (see DAQChannel).
    sink   = ch.sink
    accept = ch.accept
    if not packed:
        ch.comb += [fifo.sink.valid.eq(accept), fifo.sink.data.eq(sink.data)]
    else:
        # Fill slot `slot` of `acc`; push when the word is full or the datagram ends (a
        # partial last word; the serializer knows its length from the sample count).
        acc  = Signal(dw)
        slot = Signal(max=max(spw, 2))
        word = Signal(dw, name="wire")
        wire = reverse_bytes(sink.data)
        ch.comb += [
            word.eq(acc),
            If(accept, Case(slot, {k: word[k*sample_width:(k + 1)*sample_width].eq(wire) for k in range(spw)})),
            fifo.sink.data.eq(word),
            fifo.sink.valid.eq((accept & ((slot == spw - 1) | close)) | ((close_last | close_flush) & (slot != 0))),
        ]
        ch.sync += [
            If(fifo.sink.valid | ch.start,
                acc.eq(0),
                slot.eq(0),
            ).Elif(accept,
                acc.eq(word),
                slot.eq(slot + 1),
            )
        ]


def _add_descriptor(ch, descs, track_time, in_packet, count, ts_first, overflow, first, stopping,
                    close, close_last, close_flush, flush_due, last):
    # Descriptor written when a datagram is complete, idle for the flush time (FLAG_FLUSH,
    # unless its last sample also filled it) or at stop (FLAG_LAST).
    accept = ch.accept
    flags = Signal(16)
    ch.comb += [
        flags.eq(ch.ts_flags |
            Mux(overflow, daqformat.FLAG_OVERFLOW, 0) |
            Mux(first, daqformat.FLAG_FIRST, 0) |
            Mux(close_last, daqformat.FLAG_LAST, 0) |
            Mux(close_flush | (accept & flush_due & ~last), daqformat.FLAG_FLUSH, 0)),
        descs.sink.timestamp.eq(Mux(in_packet, ts_first, ch.timestamp) if not track_time else ts_first),
        descs.sink.dropped.eq(ch.dropped),
        descs.sink.count.eq(Mux(close_last | close_flush, count, count + 1)),
        descs.sink.flags.eq(flags[:DESC_FLAG_BITS]),
        descs.sink.run_tag.eq(ch.run[:RUN_TAG_BITS]),
        descs.sink.valid.eq(close | close_last | close_flush),
    ]
    ch.comb += close_last.eq(stopping & descs.sink.ready)


def _add_idle_flush(ch, flush_bits, in_packet, flush_due, close_flush, close_last):
    # Idle flush: `timer` is loaded with `flush` at every accepted sample and counts down;
    # `flush_due` is its end, registered (no carry chain or wide compare before admission),
    # F + 1 cycles after the last sample. Only a datagram that holds samples and is not
    # closing now can become due, so a due flush always has something to send.
    accept = ch.accept
    timer = Signal(flush_bits)
    ch.sync += [
        If(accept,
            timer.eq(ch.flush),
        ).Elif(timer != 0,
            timer.eq(timer - 1),
        ),
        flush_due.eq(in_packet & ~accept & (timer == 1) & ~close_flush & ~close_last & ~ch.start),
    ]


def _add_last_ahead(ch, count, last, close, close_last, close_flush):
    # `last` for the next cycle, from its count (so `close` is one gate after `accept`); it
    # follows a change of max_samples within a cycle while no sample is accepted. Both tests,
    # count + 2 >= max_samples and count + 1 >= max_samples, read one difference
    # rem = max_samples - count (two bits wider than count, two's complement): rem <= 2 and
    # rem <= 1, one carry chain and a few gates instead of two adders and two comparisons.
    cb      = len(count)
    rem     = Signal(cb + 2)
    rem_hi0 = Signal()  # rem[2:cb + 1] == 0
    ch.comb += [
        rem.eq(ch.max_samples - count),
        rem_hi0.eq(rem[2:cb + 1] == 0),
    ]
    ch.sync += [
        If(ch.start | close | close_last | close_flush,
            last.eq(at_most(ch.max_samples, 1)),
        ).Elif(ch.accept,
            last.eq(rem[cb + 1] | (rem_hi0 & ~(rem[1] & rem[0]))),
        ).Else(
            last.eq(rem[cb + 1] | (rem_hi0 & ~rem[1])),
        )
    ]


def _add_datagram_state(ch, track_time, in_packet, count, ts_first, overflow, first, stopping,
                        close, close_last, close_flush):
    # The open datagram's state and the run's drop count: reset at start, advanced by each
    # accepted or dropped sample, cleared when the datagram closes; stop closes it (FLAG_LAST).
    accept = ch.accept
    drop   = ch.drop
    ch.sync += [
        If(ch.start,
            ch.dropped.eq(0),
            overflow.eq(0),
            first.eq(1),
            in_packet.eq(0),
            count.eq(0),
        ).Else(
            If(drop,
                ch.dropped.eq(ch.dropped + 1),
                overflow.eq(1),
            ),
            If(accept,
                If(~in_packet,
                    ts_first.eq(ch.timestamp),
                ) if not track_time else [],
                in_packet.eq(1),
                count.eq(count + 1),
            ),
            If(close | close_last | close_flush,
                in_packet.eq(0),
                count.eq(0),
                overflow.eq(0),
                first.eq(0),
            ),
            If(ch.stop & ch.enable & ch.running,
                stopping.eq(1)
            ),
            If(close_last,
                stopping.eq(0)
            ),
        )
    ]
    # With track_time, `ts_first` follows the time in every cycle after which no datagram is
    # open, so it equals `timestamp` whenever a datagram opens (and closes at once): the
    # descriptor takes it as it is, without a 64-bit multiplexer per channel.
    if track_time:
        ch.sync += If(ch.start | close | close_last | close_flush | (~in_packet & ~accept),
            ts_first.eq(ch.timestamp_next),
        )
