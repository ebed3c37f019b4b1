#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""DAQ streamer: detector channels framed into UDP datagrams (header: ethdaq.host.daqformat).

Each channel collects samples into its own buffer and only starts a datagram when the buffer
can hold a whole one, so every datagram holds consecutive samples and is complete before it is
sent: the link never sees a datagram pause half-way (store-and-forward, by construction).
When the link cannot keep up, samples arriving while there is no room are dropped before
framing, counted (cumulative `dropped` in every header) and the next datagram carries
FLAG_OVERFLOW; a channel configured for back-pressure stalls its detector instead.
A round-robin arbiter sends complete datagrams, one at a time, to a LiteEth UDP user port.
"""

from functools import reduce

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import *

from liteeth.common import eth_udp_user_description

from ethdaq.host import daqformat

# Helpers ------------------------------------------------------------------------------------------

def reverse_bytes(signal):
    n = len(signal)//8
    return Cat(*[signal[8*(n - 1 - i):8*(n - i)] for i in range(n)])


def header_bytes(fields):
    """The header as a list of 8-bit Migen expressions, in wire order, from a dict of field
    name -> value (Signal or int). Offsets and sizes come from daqformat.FIELDS."""
    out = []
    for f in daqformat.FIELDS:
        value = fields.get(f.name, 0)
        if not isinstance(value, int) and len(value) < 8*f.size:
            value = Cat(value, Replicate(0, 8*f.size - len(value)))  # Zero-extend to the field.
        for i in range(f.size):
            shift = 8*(f.size - 1 - i)
            out.append((value >> shift) & 0xff if isinstance(value, int) else value[shift:shift + 8])
    assert len(out) == daqformat.HEADER_LEN
    return out


def descriptor_layout():
    return [("seq", 64), ("timestamp", 64), ("dropped", 64), ("count", 16), ("flags", 16), ("run", 32)]

# Channel ------------------------------------------------------------------------------------------

class DAQChannel(LiteXModule):
    """One detector input: admission, sample buffer and per-datagram descriptors.

    Control inputs (driven by DAQStreamer): enable, running, start (pulse), stop (pulse),
    max_samples (samples per datagram), backpressure, timestamp, run.
    """
    def __init__(self, stream_id, sample_width, buffer_samples, descriptors=8):
        self.sink   = sink   = stream.Endpoint([("data", sample_width)])
        self.source = source = stream.Endpoint([("data", sample_width)])  # Samples of the head datagram.
        self.desc   = desc   = stream.Endpoint(descriptor_layout())      # Head datagram's descriptor.

        self.enable       = Signal()
        self.running      = Signal()
        self.start        = Signal()
        self.stop         = Signal()
        self.max_samples  = Signal(16)
        self.backpressure = Signal()
        self.timestamp    = Signal(64)
        self.ts_flags     = Signal(16)
        self.run          = Signal(32)

        self.dropped      = Signal(64)  # Cumulative since run start (status).
        self.datagrams    = Signal(64)  # Datagrams closed since run start (status).

        # # #

        self.stream_id = stream_id
        self.fifo  = fifo  = stream.SyncFIFO([("data", sample_width)], depth=buffer_samples, buffered=True)
        self.descs = descs = stream.SyncFIFO(descriptor_layout(), depth=descriptors)
        self.comb += [
            fifo.source.connect(source),
            descs.source.connect(desc),
        ]

        # Data-Path.
        in_packet = Signal()
        count     = Signal(16)
        ts_first  = Signal(64)
        seq       = Signal(64)
        overflow  = Signal()
        first     = Signal()
        stopping  = Signal()
        room      = Signal()
        free      = Signal(max=buffer_samples + 2)
        close     = Signal()
        close_last = Signal()

        self.comb += [
            free.eq(buffer_samples - fifo.level),
            room.eq((free >= self.max_samples) & descs.sink.ready),
            fifo.sink.data.eq(sink.data),
        ]

        accept = Signal()
        drop   = Signal()
        self.comb += [
            If(self.running & self.enable & ~stopping,
                If(in_packet | room,
                    sink.ready.eq(1),
                    accept.eq(sink.valid),
                ).Elif(self.backpressure,
                    sink.ready.eq(0),
                ).Else(
                    sink.ready.eq(1),
                    drop.eq(sink.valid),
                )
            ).Else(
                # Not running: the detector is not stalled and its samples are not part of a run.
                sink.ready.eq(1),
            ),
            fifo.sink.valid.eq(accept),
            close.eq(accept & (count + 1 >= self.max_samples)),
        ]

        # Descriptor written when a datagram is complete (or at stop, with FLAG_LAST).
        flags = Signal(16)
        self.comb += [
            flags.eq(self.ts_flags |
                Mux(overflow, daqformat.FLAG_OVERFLOW, 0) |
                Mux(first, daqformat.FLAG_FIRST, 0) |
                Mux(close_last, daqformat.FLAG_LAST, 0)),
            descs.sink.seq.eq(seq),
            descs.sink.timestamp.eq(Mux(in_packet, ts_first, self.timestamp)),
            descs.sink.dropped.eq(self.dropped),
            descs.sink.count.eq(Mux(close_last, count, count + 1)),
            descs.sink.flags.eq(flags),
            descs.sink.run.eq(self.run),
            descs.sink.valid.eq(close | close_last),
        ]
        self.comb += close_last.eq(stopping & descs.sink.ready)

        self.sync += [
            If(self.start,
                seq.eq(0),
                self.dropped.eq(0),
                self.datagrams.eq(0),
                overflow.eq(0),
                first.eq(1),
                in_packet.eq(0),
                count.eq(0),
            ).Else(
                If(drop,
                    self.dropped.eq(self.dropped + 1),
                    overflow.eq(1),
                ),
                If(accept,
                    If(~in_packet,
                        ts_first.eq(self.timestamp),
                    ),
                    in_packet.eq(1),
                    count.eq(count + 1),
                ),
                If(close | close_last,
                    in_packet.eq(0),
                    count.eq(0),
                    seq.eq(seq + 1),
                    overflow.eq(0),
                    first.eq(0),
                    self.datagrams.eq(self.datagrams + 1),
                ),
                If(self.stop & self.enable & self.running,
                    stopping.eq(1)
                ),
                If(close_last,
                    stopping.eq(0)
                ),
            )
        ]
        self.stopping = stopping

# Streamer -----------------------------------------------------------------------------------------

class DAQStreamer(LiteXModule):
    """N channels of `sample_width`-bit samples → DAQ datagrams on a LiteEth UDP user port (dw=8).

    Parameters
    ----------
    nchannels : int
        Number of detector inputs (stream ids 0..nchannels-1).
    sample_width : int
        Bits per sample, a multiple of 8.
    buffer_bytes : int or None
        Buffer per channel; must hold at least one largest datagram's samples. Default: the
        power of two that holds one `max_payload` datagram.
    timestamp : Signal(64) or None
        Time of day in ns, sampled at each datagram's first sample.
    """
    def __init__(self, nchannels=4, sample_width=16, buffer_bytes=None, timestamp=None, ts_flags=0,
                 src_port=5000, max_payload=8972):
        if nchannels < 1:
            raise ValueError(f"nchannels must be >= 1, not {nchannels!r}")
        if sample_width % 8 or sample_width <= 0:
            raise ValueError(f"sample_width must be a positive multiple of 8, not {sample_width!r}")
        sample_bytes   = sample_width//8
        if buffer_bytes is None:
            buffer_bytes = 1 << (max_payload - 1).bit_length()
        buffer_samples = buffer_bytes//sample_bytes
        max_samples_build = (max_payload - daqformat.HEADER_LEN)//sample_bytes
        if buffer_samples < max_samples_build:
            raise ValueError(f"buffer_bytes must hold one {max_payload}-byte datagram, not {buffer_bytes!r}")
        self.nchannels    = nchannels
        self.sample_width = sample_width
        self.sinks  = [stream.Endpoint([("data", sample_width)]) for _ in range(nchannels)]
        self.source = source = stream.Endpoint(eth_udp_user_description(8))

        self._control     = CSRStorage(fields=[
            CSRField("start", size=1, pulse=True, description="Write 1: start a run (sequence numbers restart at 0)."),
            CSRField("stop",  size=1, pulse=True, description="Write 1: stop; each enabled channel sends its partial datagram flagged LAST."),
        ])
        self._enable       = CSRStorage(nchannels, reset=2**nchannels - 1, description="Per-channel enable.")
        self._backpressure = CSRStorage(nchannels, description="Per-channel: stall the detector instead of dropping.")
        self._payload      = CSRStorage(16, reset=1472, description="UDP payload bytes per datagram (header included), 64..max_payload.")
        self._dst_ip       = CSRStorage(32, reset=0xC0A80164, description="Destination IPv4 address.")
        self._dst_port     = CSRStorage(16, reset=5000, description="Destination UDP port.")
        self._gap          = CSRStorage(32, description="Rate limit: idle cycles after each datagram (0: line rate).")
        self._status       = CSRStatus(fields=[
            CSRField("running", size=1),
            CSRField("busy",    size=1, description="Datagrams still waiting to be sent."),
        ])
        self._run          = CSRStatus(32, description="Current run number.")
        self._datagrams    = CSRStatus(64, description="Datagrams sent since reset.")
        self._drop_count   = CSRStatus(64, description="Sum over channels of samples dropped this run.")
        self._unreachable  = CSRStatus(32, description="IP datagrams the UDP/IP stack dropped because the destination did not answer ARP.")
        self.unreachable   = Signal()  # Pulse from LiteEth's IP TX (target_unreachable).

        # # #

        self.timestamp = timestamp if timestamp is not None else Signal(64)

        # Run control.
        running = Signal()
        run     = Signal(32)
        start   = self._control.fields.start
        stop    = self._control.fields.stop
        max_samples = Signal(16)
        self.sync += [
            If(start, running.eq(1), run.eq(run + 1)),
            If(stop, running.eq(0)),
            # Out-of-range payload sizes are clamped, so a datagram always holds 1..max samples.
            If(self._payload.storage < daqformat.HEADER_LEN + sample_bytes,
                max_samples.eq(1)
            ).Elif(self._payload.storage > max_payload,
                max_samples.eq(max_samples_build)
            ).Else(
                max_samples.eq((self._payload.storage - daqformat.HEADER_LEN) >> log2_int(sample_bytes))
            ),
        ]
        if sample_bytes & (sample_bytes - 1):
            raise ValueError(f"sample_width must be 8, 16, 32 or 64 (power-of-two bytes), not {sample_width!r}")

        # Channels.
        self.channels = []
        for i in range(nchannels):
            ch = DAQChannel(i, sample_width, buffer_samples)
            self.add_module(f"ch{i}", ch)
            self.channels.append(ch)
            self.comb += [
                self.sinks[i].connect(ch.sink),
                ch.enable.eq(self._enable.storage[i]),
                ch.backpressure.eq(self._backpressure.storage[i]),
                ch.running.eq(running),
                ch.start.eq(start),
                ch.stop.eq(stop),
                ch.max_samples.eq(max_samples),
                ch.timestamp.eq(self.timestamp),
                ch.ts_flags.eq(ts_flags),
                ch.run.eq(run),
            ]

        # Arbiter + serializer: header bytes, then samples MSB first.
        sel      = Signal(max=max(nchannels, 2))
        desc     = stream.Endpoint(descriptor_layout())
        samples  = stream.Endpoint([("data", sample_width)])
        self.comb += [
            Case(sel, {i: [ch.desc.connect(desc, omit={"ready"}), ch.source.connect(samples, omit={"ready"})]
                       for i, ch in enumerate(self.channels)}),
        ]
        header = Array(header_bytes(dict(
            magic=daqformat.MAGIC, version=daqformat.VERSION, header_len=daqformat.HEADER_LEN,
            stream_id=sel, flags=desc.flags, seq=desc.seq, timestamp=desc.timestamp,
            dropped=desc.dropped, sample_count=desc.count, sample_bits=sample_width, run=desc.run)))
        hcount   = Signal(max=daqformat.HEADER_LEN)
        bcount   = Signal(max=max(sample_bytes, 2))
        scount   = Signal(16)
        sample_b = Array([samples.data[8*(sample_bytes - 1 - i):8*(sample_bytes - i)] for i in range(sample_bytes)])
        pop_desc = Signal()
        pop_samp = Signal()
        self.comb += [
            Case(sel, {i: [ch.desc.ready.eq(pop_desc), ch.source.ready.eq(pop_samp)]
                       for i, ch in enumerate(self.channels)}),
            source.src_port.eq(src_port),
            source.dst_port.eq(self._dst_port.storage),
            source.ip_address.eq(self._dst_ip.storage),
            source.length.eq(daqformat.HEADER_LEN + (desc.count << log2_int(sample_bytes))),
        ]

        gap_count = Signal(32)
        datagrams = Signal(64)
        self.fsm = fsm = FSM(reset_state="SELECT")
        pending = Signal(nchannels)
        self.comb += pending.eq(Cat(*[ch.desc.valid for ch in self.channels]))
        # Round robin: the next channel after `sel` with a complete datagram.
        nxt = Signal(max=max(nchannels, 2))
        self.comb += nxt.eq(sel)
        for k in reversed(range(1, nchannels + 1)):
            cases = {}
            for s in range(nchannels):
                cases[s] = If(pending[(s + k) % nchannels], nxt.eq((s + k) % nchannels))
            self.comb += Case(sel, cases)
        fsm.act("SELECT",
            If(pending != 0,
                NextValue(sel, nxt),
                NextValue(hcount, 0),
                NextValue(bcount, 0),
                NextValue(scount, 0),
                NextState("HEADER")
            )
        )
        fsm.act("HEADER",
            source.valid.eq(1),
            source.data.eq(header[hcount]),
            source.last.eq((hcount == daqformat.HEADER_LEN - 1) & (desc.count == 0)),
            source.last_be.eq(source.last),
            If(source.ready,
                NextValue(hcount, hcount + 1),
                If(hcount == daqformat.HEADER_LEN - 1,
                    If(desc.count == 0,
                        NextState("DONE")
                    ).Else(
                        NextState("SAMPLES")
                    )
                )
            )
        )
        last_byte = Signal()
        self.comb += last_byte.eq((scount == desc.count - 1) & (bcount == sample_bytes - 1))
        underrun = Signal(32)
        self.sync += If(fsm.ongoing("SAMPLES") & ~samples.valid, underrun.eq(underrun + 1))
        self.underrun = underrun  # Must stay 0: checked by the tests.
        fsm.act("SAMPLES",
            source.valid.eq(1),  # The whole datagram is in the buffer: valid never drops here.
            source.data.eq(sample_b[bcount]),
            source.last.eq(last_byte),
            source.last_be.eq(last_byte),
            If(source.ready,
                If(bcount == sample_bytes - 1,
                    NextValue(bcount, 0),
                    NextValue(scount, scount + 1),
                    pop_samp.eq(1),
                    If(last_byte,
                        NextState("DONE")
                    )
                ).Else(
                    NextValue(bcount, bcount + 1)
                )
            )
        )
        fsm.act("DONE",
            pop_desc.eq(1),
            NextValue(datagrams, datagrams + 1),
            NextValue(gap_count, self._gap.storage),
            If(self._gap.storage != 0,
                NextState("GAP")
            ).Else(
                NextState("SELECT")
            )
        )
        fsm.act("GAP",
            NextValue(gap_count, gap_count - 1),
            If(gap_count <= 1,
                NextState("SELECT")
            )
        )

        dropped_sum = Signal(64)
        self.comb += dropped_sum.eq(reduce(lambda a, b: a + b, [ch.dropped for ch in self.channels]))
        unreachable = Signal(32)
        self.sync += If(self.unreachable, unreachable.eq(unreachable + 1))
        self.comb += self._unreachable.status.eq(unreachable)
        self.comb += [
            self._status.fields.running.eq(running),
            self._status.fields.busy.eq((pending != 0) | ~fsm.ongoing("SELECT")),
            self._run.status.eq(run),
            self._datagrams.status.eq(datagrams),
            self._drop_count.status.eq(dropped_sum),
        ]
