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
A round-robin arbiter sends complete datagrams, one at a time, as UDP user datagrams
(eth_udp_user_description) for the canned-header framer (gateware/framer.py).

Clock domains: the detector side (channels' inputs, CSRs, admission) runs in `sys`; the
arbiter and serializer run in `cd_tx`, the PHY's transmit clock, so a datagram reaches the wire
without crossing a clock domain on the way. The channel buffers are the crossing.
"""

from functools import reduce
from operator import add

from migen import *

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import *

from migen.genlib.cdc import BusSynchronizer, MultiReg, PulseSynchronizer

from liteeth.common import eth_udp_user_description

from ethdaq.gateware.cdcfifo import LevelFIFO
from ethdaq.gateware.csr import CSRConfig
from ethdaq.gateware.framer import field_bytes
from ethdaq.gateware.resolver import ARPResolver, MODE_ARP, MODE_FIXED
from ethdaq.gateware.streamstats import StreamCounters
from ethdaq.host import daqformat

# Helpers ------------------------------------------------------------------------------------------

def reverse_bytes(signal):
    n = len(signal)//8
    return Cat(*[signal[8*(n - 1 - i):8*(n - i)] for i in range(n)])


def header_bytes(fields):
    """The header as a list of 8-bit Migen expressions, in wire order, from a dict of field
    name -> value (Signal or int). Offsets and sizes come from daqformat.FIELDS."""
    out = field_bytes([(fields.get(f.name, 0), f.size) for f in daqformat.FIELDS])
    assert len(out) == daqformat.HEADER_LEN
    return out


# Flag bits a descriptor carries: the defined ones (the header's other flag bits are 0).
DESC_FLAG_BITS = max(daqformat.FLAGS.values()).bit_length()


def descriptor_layout():
    """What a channel hands the serializer per datagram, through a clock-crossing FIFO of
    distributed RAM (the FIFOs of 4 channels are about 180 DPR16X4 on ECP5): no sequence number
    (the serializer counts datagrams per channel itself, from 0 at FLAG_FIRST) and only the
    defined flag bits."""
    return [("timestamp", 64), ("dropped", 64), ("count", 16), ("flags", DESC_FLAG_BITS), ("run", 32)]

# Channel ------------------------------------------------------------------------------------------

class DAQChannel(LiteXModule):
    """One detector input: admission, sample buffer and per-datagram descriptors.

    Control inputs (driven by DAQStreamer): enable, running, start (pulse), stop (pulse),
    max_samples (samples per datagram), backpressure, timestamp, run.
    """
    def __init__(self, stream_id, sample_width, buffer_samples, descriptors=8, cd_tx="sys", dw=8):
        # With a data path at least as wide as a sample, samples are packed on the way in into
        # words of `dw` bits in wire order (first sample in the lowest lanes, each sample's bytes
        # MSB first), so the transmit side moves one word per cycle; otherwise the buffer holds
        # samples and the serializer splits them into bytes.
        packed = dw >= sample_width
        spw    = dw//sample_width if packed else 1        # Samples per buffer word.
        width  = dw if packed else sample_width
        words  = buffer_samples//spw
        self.packed, self.spw, self.word_width = packed, spw, width
        self.sink   = sink   = stream.Endpoint([("data", sample_width)])
        self.source = source = stream.Endpoint([("data", width)])  # Words of the head datagram (cd_tx).
        self.desc   = desc   = stream.Endpoint(descriptor_layout())      # Head datagram's descriptor (cd_tx).

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
        self.drop         = Signal()    # A sample is dropped in this cycle.
        self.queued       = Signal()    # Datagrams closed and not yet sent.

        # # #

        self.stream_id = stream_id
        self.fifo  = fifo  = LevelFIFO([("data", width)], words, "sys", cd_tx)
        self.descs = descs = LevelFIFO(descriptor_layout(), descriptors, "sys", cd_tx)
        self.comb += [
            fifo.source.connect(source),
            descs.source.connect(desc),
            self.queued.eq(descs.level != 0),
        ]

        # Data-Path.
        in_packet = Signal()
        count     = Signal(16)
        ts_first  = Signal(64)
        overflow  = Signal()
        first     = Signal()
        stopping  = Signal()
        room      = Signal()
        free      = Signal(max=words + 2)
        need      = Signal(16)
        close     = Signal()
        close_last = Signal()

        self.comb += [
            free.eq(words - fifo.level),
            need.eq((self.max_samples + spw - 1) >> log2_int(spw)),  # Words of a full datagram.
            room.eq((free >= need) & descs.sink.ready),
        ]

        accept = Signal()
        drop   = self.drop
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
            close.eq(accept & (count + 1 >= self.max_samples)),
        ]
        if not packed:
            self.comb += [fifo.sink.valid.eq(accept), fifo.sink.data.eq(sink.data)]
        else:
            # Fill slot `slot` of `acc`; push when the word is full or the datagram ends (a
            # partial last word; the serializer knows its length from the sample count).
            acc  = Signal(dw)
            slot = Signal(max=max(spw, 2))
            word = Signal(dw)
            wire = reverse_bytes(sink.data)
            self.comb += [
                word.eq(acc),
                If(accept, Case(slot, {k: word[k*sample_width:(k + 1)*sample_width].eq(wire) for k in range(spw)})),
                fifo.sink.data.eq(word),
                fifo.sink.valid.eq((accept & ((slot == spw - 1) | close)) | (close_last & (slot != 0))),
            ]
            self.sync += [
                If(fifo.sink.valid | self.start,
                    acc.eq(0),
                    slot.eq(0),
                ).Elif(accept,
                    acc.eq(word),
                    slot.eq(slot + 1),
                )
            ]

        # Descriptor written when a datagram is complete (or at stop, with FLAG_LAST).
        flags = Signal(16)
        self.comb += [
            flags.eq(self.ts_flags |
                Mux(overflow, daqformat.FLAG_OVERFLOW, 0) |
                Mux(first, daqformat.FLAG_FIRST, 0) |
                Mux(close_last, daqformat.FLAG_LAST, 0)),
            descs.sink.timestamp.eq(Mux(in_packet, ts_first, self.timestamp)),
            descs.sink.dropped.eq(self.dropped),
            descs.sink.count.eq(Mux(close_last, count, count + 1)),
            descs.sink.flags.eq(flags[:DESC_FLAG_BITS]),
            descs.sink.run.eq(self.run),
            descs.sink.valid.eq(close | close_last),
        ]
        self.comb += close_last.eq(stopping & descs.sink.ready)

        self.sync += [
            If(self.start,
                self.dropped.eq(0),
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
                    overflow.eq(0),
                    first.eq(0),
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
    """N channels of `sample_width`-bit samples → DAQ datagrams as UDP user datagrams, `dw` bits
    (8 for 1G, 64 for 10G) per cycle of the transmit clock.

    Parameters
    ----------
    nchannels : int
        Number of detector inputs (stream ids 0..nchannels-1).
    sample_width : int
        Bits per sample: 8, 16, 32 or 64.
    buffer_bytes : int or None
        Buffer per channel; must hold at least one largest datagram's samples. Default: the
        power of two that holds one `max_payload` datagram.
    timestamp : Signal(64) or None
        Time of day in ns (sys domain), sampled at each datagram's first sample.
    cd_tx : str
        Clock domain of `source` and the destination outputs (the PHY's transmit clock).
    clk_freq : float
        sys clock frequency (ARP timeouts).
    arp_timeout, arp_retry_interval : float
        Seconds to wait for each of 3 ARP answers, then between requests to a silent destination.

    Outputs in `cd_tx`, for gateware/txpath.py: `source` (UDP payload, ip_address, ports,
    length), `dst_mac`/`dst_valid` (where to send; datagrams wait while not valid),
    `arp_request`/`arp_target` (send a who-has). Input in sys: `arp_valid`/`arp_ip`/`arp_mac`,
    one cycle per ARP frame received for us (LiteEth's ARP RX), for the resolver.
    """
    def __init__(self, nchannels=4, sample_width=16, buffer_bytes=None, timestamp=None, ts_flags=0,
                 src_port=5000, max_payload=8972, cd_tx="sys", clk_freq=125e6,
                 arp_timeout=0.1, arp_retry_interval=1.0, dw=8, with_stream_counters=True):
        if nchannels < 1:
            raise ValueError(f"nchannels must be >= 1, not {nchannels!r}")
        if sample_width not in (8, 16, 32, 64):
            raise ValueError(f"sample_width must be 8, 16, 32 or 64, not {sample_width!r}")
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
        if dw not in (8, 64):
            raise ValueError(f"dw must be 8 (1G) or 64 (10G), not {dw!r}")
        self.source = source = stream.Endpoint(eth_udp_user_description(dw))
        self.dst_mac     = Signal(48)
        self.dst_valid   = Signal()
        self.arp_request = Signal()
        self.arp_target  = Signal(32)
        self.arp_valid   = Signal()
        self.arp_ip      = Signal(32)
        self.arp_mac     = Signal(48)

        self._control     = CSRConfig(fields=[
            CSRField("start", size=1, pulse=True, description="Write 1: start a run (sequence numbers restart at 0)."),
            CSRField("stop",  size=1, pulse=True, description="Write 1: stop; each enabled channel sends its partial datagram flagged LAST."),
            CSRField("resolve", size=1, pulse=True, description="Write 1: forget the destination MAC and resolve it again by ARP."),
        ])
        self._enable       = CSRConfig(nchannels, reset=2**nchannels - 1, description="Per-channel enable.")
        self._backpressure = CSRConfig(nchannels, description="Per-channel: stall the detector instead of dropping.")
        self._payload      = CSRConfig(16, reset=1472, description="UDP payload bytes per datagram (header included), 64..max_payload.")
        self._dst_ip       = CSRConfig(32, reset=0xC0A80164, description="Destination IPv4 address (set while stopped).")
        self._dst_port     = CSRConfig(16, reset=5000, description="Destination UDP port (set while stopped).")
        self._dst_mac      = CSRConfig(48, description="Destination MAC when mac_mode is fixed.")
        self._mac_mode     = CSRConfig(1, description="0: resolve the destination MAC by ARP (broadcast and multicast IPs by rule); 1: use dst_mac.")
        self._gap          = CSRConfig(32, description="Rate limit: idle cycles (of the PHY clock) after each datagram (0: line rate).")
        self._status       = CSRStatus(fields=[
            CSRField("running",     size=1),
            CSRField("busy",        size=1, description="Datagrams still waiting to be sent."),
            CSRField("dst_valid",   size=1, description="The destination MAC is known (fixed, by rule or resolved)."),
            CSRField("unreachable", size=1, description="The destination did not answer ARP (datagrams wait; the resolver keeps asking)."),
        ])
        self._run          = CSRStatus(32, description="Current run number.")
        self._datagrams    = CSRStatus(64, description="Datagrams sent since reset.")
        self._drop_count   = CSRStatus(64, description="Sum over channels of samples dropped this run.")
        self._arp_timeouts = CSRStatus(32, description="ARP requests for the destination that got no answer.")
        self._dst_mac_status = CSRStatus(48, description="Destination MAC in use.")
        self._stale        = CSRStatus(32, description="Datagrams of an earlier run discarded unsent (their destination never answered ARP).")

        # # #

        self.timestamp = timestamp if timestamp is not None else Signal(64)
        same = cd_tx == "sys"

        # Run control (sys).
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

        # Channels.
        self.channels = []
        for i in range(nchannels):
            ch = DAQChannel(i, sample_width, buffer_samples, cd_tx=cd_tx, dw=dw)
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

        # Destination MAC (sys), handed to cd_tx.
        self.resolver = resolver = ARPResolver(clk_freq, timeout=arp_timeout, retry_interval=arp_retry_interval)
        # Resolve once a destination is set (by the firmware, before a run) or a run starts, not
        # for the reset default: no ARP broadcasts from an idle board.
        active = Signal()
        self.sync += If(self._dst_ip.re | start, active.eq(1))
        self.comb += [
            resolver.active.eq(active),
            resolver.ip.eq(self._dst_ip.storage),
            resolver.mode.eq(self._mac_mode.storage),
            resolver.fixed_mac.eq(self._dst_mac.storage),
            resolver.resolve.eq(self._control.fields.resolve),
            resolver.arp_valid.eq(self.arp_valid),
            resolver.arp_ip.eq(self.arp_ip),
            resolver.arp_mac.eq(self.arp_mac),
        ]
        # Settings the transmit side reads: written while stopped, so a plain synchroniser is
        # enough for the addresses; the MAC/valid pair can change while streaming (a refreshed
        # ARP entry) and crosses as one word.
        dst_ip, dst_port, gap = Signal(32), Signal(16), Signal(32)
        if same:
            self.comb += [
                dst_ip.eq(self._dst_ip.storage), dst_port.eq(self._dst_port.storage), gap.eq(self._gap.storage),
                Cat(self.dst_mac, self.dst_valid).eq(Cat(resolver.mac, resolver.valid)),
                self.arp_request.eq(resolver.request),
            ]
        else:
            self.specials += [
                MultiReg(self._dst_ip.storage,   dst_ip,   cd_tx),
                MultiReg(self._dst_port.storage, dst_port, cd_tx),
                MultiReg(self._gap.storage,      gap,      cd_tx),
            ]
            self.mac_sync = BusSynchronizer(49, "sys", cd_tx)
            self.req_sync = PulseSynchronizer("sys", cd_tx)
            self.comb += [
                self.mac_sync.i.eq(Cat(resolver.mac, resolver.valid)),
                Cat(self.dst_mac, self.dst_valid).eq(self.mac_sync.o),
                self.req_sync.i.eq(resolver.request),
                self.arp_request.eq(self.req_sync.o),
            ]
        self.comb += self.arp_target.eq(dst_ip)

        # Arbiter + serializer (cd_tx).
        self.serializer = ClockDomainsRenamer(cd_tx)(_Serializer(self.channels, sample_width, src_port, dw))
        self.comb += [
            self.serializer.source.connect(source),
            self.serializer.dst_ip.eq(dst_ip),
            self.serializer.dst_port.eq(dst_port),
            self.serializer.gap.eq(gap),
        ]
        stale = Signal(32)
        sent  = Signal(64)
        if same:
            self.comb += [self.serializer.run.eq(run), stale.eq(self.serializer.stale), sent.eq(self.serializer.sent)]
        else:
            self.run_sync   = BusSynchronizer(32, "sys", cd_tx)
            self.stale_sync = BusSynchronizer(32, cd_tx, "sys")
            self.sent_sync  = BusSynchronizer(64, cd_tx, "sys")
            self.comb += [
                self.run_sync.i.eq(run), self.serializer.run.eq(self.run_sync.o),
                self.stale_sync.i.eq(self.serializer.stale), stale.eq(self.stale_sync.o),
                self.sent_sync.i.eq(self.serializer.sent), sent.eq(self.sent_sync.o),
            ]
        self.underrun = self.serializer.underrun  # Must stay 0: checked by the tests.

        # Per-stream counters: what each stream sent, and dropped (gateware/streamstats.py).
        if with_stream_counters:
            self.counters = StreamCounters(nchannels, [ch.dropped for ch in self.channels], cd=cd_tx)
            self.comb += [
                self.counters.event.eq(self.serializer.sent_event),
                self.counters.channel.eq(self.serializer.sel),
                self.counters.nbytes.eq(self.serializer.source.length),
            ]

        # Status (sys). The total of dropped samples is kept by one counter (summing the
        # channels' 64-bit counters took three 64-bit adders), fed by the channels' drop pulses
        # registered (admission and a 64-bit adder in one cycle were the sys critical path).
        dropped_sum = Signal(64)
        drops       = Signal(nchannels)
        start_d     = Signal()
        self.sync += [
            drops.eq(Cat(*[ch.drop & ~start for ch in self.channels])),
            start_d.eq(start),
            If(start_d,
                dropped_sum.eq(0),
            ).Else(
                dropped_sum.eq(dropped_sum + reduce(add, [drops[i] for i in range(nchannels)])),
            ),
        ]
        self.comb += [
            self._status.fields.running.eq(running),
            self._status.fields.busy.eq(reduce(lambda a, b: a | b, [ch.queued for ch in self.channels])),
            self._status.fields.dst_valid.eq(resolver.valid),
            self._status.fields.unreachable.eq(resolver.unreachable),
            self._run.status.eq(run),
            self._datagrams.status.eq(sent),
            self._drop_count.status.eq(dropped_sum),
            self._arp_timeouts.status.eq(resolver.timeouts),
            self._dst_mac_status.status.eq(resolver.mac),
            self._stale.status.eq(stale),
        ]


class _Serializer(LiteXModule):
    """Round-robin over channels with a complete datagram: its DAQ header, then its samples (MSB
    first), `dw` bits per cycle. Runs in one domain with the channels' read sides."""
    def __init__(self, channels, sample_width, src_port, dw=8):
        nchannels    = len(channels)
        sample_bytes = sample_width//8
        packed       = channels[0].packed
        spw          = channels[0].spw
        nb           = dw//8
        assert daqformat.HEADER_LEN % nb == 0
        self.source   = source = stream.Endpoint(eth_udp_user_description(dw))
        self.dst_ip   = Signal(32)
        self.dst_port = Signal(16)
        self.gap      = Signal(32)
        self.run      = Signal(32)  # Current run: datagrams of earlier runs are discarded, counted.
        self.underrun = Signal(32)
        self.stale    = Signal(32)
        self.sent     = Signal(64)  # Datagrams sent (not those discarded as stale).
        self.sent_event = Signal()  # A datagram of channel `sel` with `source.length` bytes went out.
        self.sel      = Signal(max=max(nchannels, 2))

        # # #

        # Each channel's head word is registered (a full-throughput buffer with registered valid
        # and ready: its RAM output and read pointer then meet registers, not the byte mux and
        # the FSM). Descriptors are not: the one being sent is copied into `desc` when its channel
        # is chosen and its FIFO entry is released (a registered pop) at once, so one register
        # serves all channels (a buffer per channel cost 2048 flip-flops and 1000 LUTs at 4).
        heads = []
        for i, ch in enumerate(channels):
            w = stream.Buffer([("data", ch.word_width)], pipe_valid=True, pipe_ready=True)
            setattr(self, f"word_reg{i}", w)
            self.comb += ch.source.connect(w.sink)
            heads.append((ch.desc, w.source))
        sel      = self.sel
        desc     = Record(descriptor_layout() + [("seq", 64)])
        samples  = stream.Endpoint([("data", channels[0].word_width)])
        self.comb += [
            Case(sel, {i: w.connect(samples, omit={"ready"}) for i, (d, w) in enumerate(heads)}),
        ]
        hb = header_bytes(dict(
            magic=daqformat.MAGIC, version=daqformat.VERSION, header_len=daqformat.HEADER_LEN,
            stream_id=sel, flags=desc.flags, seq=desc.seq, timestamp=desc.timestamp,
            dropped=desc.dropped, sample_count=desc.count, sample_bits=sample_width, run=desc.run))
        hwords   = daqformat.HEADER_LEN//nb
        header   = Array([Cat(*hb[i*nb:(i + 1)*nb]) for i in range(hwords)])  # Lane 0 first on the wire.
        hcount   = Signal(max=hwords)
        # Units of the sample phase: buffer words when packed, else bytes of one sample.
        bcount   = Signal(max=max(sample_bytes, 2))
        scount   = Signal(16)
        pop_samp = Signal()
        nwords   = Signal(16)   # Buffer entries (words or samples) of this datagram.
        self.comb += [
            Case(sel, {i: w.ready.eq(pop_samp) for i, (d, w) in enumerate(heads)}),
            source.src_port.eq(src_port),
            source.dst_port.eq(self.dst_port),
            source.ip_address.eq(self.dst_ip),
            source.length.eq(daqformat.HEADER_LEN + (desc.count << log2_int(sample_bytes))),
            nwords.eq((desc.count + spw - 1) >> log2_int(spw)),
        ]
        full_be = 1 << (nb - 1)  # LiteEth's last_be: one-hot at the last valid byte lane.

        gap_count = Signal(32)
        self.fsm = fsm = FSM(reset_state="SELECT")
        # Choosing a channel copies its head descriptor into `desc` and pops it in the next cycle
        # (registered: the FSM does not reach into the FIFO's read pointer and RAM address); while
        # that pop is in flight the channel's old head must not count as pending.
        load     = Signal()
        load_sel = Signal(max=max(nchannels, 2))
        pop_r    = Signal()
        pop_ch   = Signal(max=max(nchannels, 2))
        self.sync += [
            If(load, Case(load_sel, {i: [getattr(desc, name).eq(getattr(d, name)) for name, _ in descriptor_layout()]
                                     for i, (d, w) in enumerate(heads)})),
            pop_r.eq(load),
            pop_ch.eq(load_sel),
        ]
        # Sequence numbers, per channel: 0 at FLAG_FIRST, else the channel's previous one + 1 (every
        # descriptor passes here in order, discarded ones too). Ready one cycle after the rest of
        # `desc` (whose flags are loaded by then): the header's seq field starts at byte 8, in the
        # second cycle at the earliest.
        assert next(f.offset for f in daqformat.FIELDS if f.name == "seq") >= dw//8
        seqs     = Array(Signal(64, name=f"seq{i}") for i in range(nchannels))
        seq_prev = Signal(64)
        seq_next = Signal(64)
        self.comb += seq_next.eq(Mux(desc.flags & daqformat.FLAG_FIRST != 0, 0, seq_prev + 1))
        self.sync += [
            If(load, seq_prev.eq(seqs[load_sel])),
            If(pop_r,
                desc.seq.eq(seq_next),
                seqs[pop_ch].eq(seq_next),
            ),
        ]
        self.comb += Case(pop_ch, {i: d.ready.eq(pop_r) for i, (d, w) in enumerate(heads)})
        pending = Signal(nchannels)
        self.comb += pending.eq(Cat(*[d.valid for d, w in heads]) & ~Mux(pop_r, 1 << pop_ch, 0))
        # Round robin: the next channel after `sel` with a complete datagram.
        nxt = Signal(max=max(nchannels, 2))
        self.comb += nxt.eq(sel)
        for k in reversed(range(1, nchannels + 1)):
            cases = {}
            for s in range(nchannels):
                cases[s] = If(pending[(s + k) % nchannels], nxt.eq((s + k) % nchannels))
            self.comb += Case(sel, cases)
        # The next channel other than `sel`, so the next datagram can follow the current one's
        # last word without an idle cycle (which the 64-bit path would otherwise show on the wire).
        others   = Signal(nchannels)
        nxt_other = Signal(max=max(nchannels, 2))
        self.comb += [others.eq(pending & ~(1 << sel)), nxt_other.eq(sel)]
        for k in reversed(range(1, nchannels)):
            self.comb += Case(sel, {s: If(pending[(s + k) % nchannels], nxt_other.eq((s + k) % nchannels))
                                    for s in range(nchannels)})
        # The choices, registered: they drive the load of `desc` (about 250 flip-flops) and were
        # on the transmit clock's critical path. One cycle old is exact where they are used: a
        # channel stays pending until popped, pops start only at a load, and SELECT and finish()
        # are never within two cycles of a load (a header takes at least 5 cycles; DISCARD takes
        # one), by which time the pop is in `pending`. A channel that just became pending waits
        # one more cycle.
        any_r, others_r = Signal(), Signal()
        nxt_r, nxt_other_r = Signal.like(nxt), Signal.like(nxt_other)
        self.sync += [
            any_r.eq(pending != 0),
            others_r.eq(others != 0),
            nxt_r.eq(nxt),
            nxt_other_r.eq(nxt_other),
        ]

        def finish():
            """On the datagram's last word: count it and go on."""
            return [
                NextValue(self.sent, self.sent + 1),
                self.sent_event.eq(1),
                If(self.gap != 0,
                    NextValue(gap_count, self.gap),
                    NextState("GAP")
                ).Elif(others_r,
                    load.eq(1),
                    load_sel.eq(nxt_other_r),
                    NextValue(sel, nxt_other_r),
                    NextValue(hcount, 0),
                    NextValue(bcount, 0),
                    NextValue(scount, 0),
                    NextState("HEADER")
                ).Else(
                    NextState("SELECT")
                )
            ]
        fsm.act("SELECT",
            If(any_r,
                load.eq(1),
                load_sel.eq(nxt_r),
                NextValue(sel, nxt_r),
                NextValue(hcount, 0),
                NextValue(bcount, 0),
                NextValue(scount, 0),
                NextState("HEADER")
            )
        )
        # A datagram of an earlier run can only still be here if its destination never answered
        # ARP; it must not go to the next run's destination. "Earlier" modulo 2**32 (run - desc.run
        # in 1..2**31-1), so a run number that has not crossed from sys yet cannot make a new
        # datagram look stale. Registered (it was on the transmit clock's critical path): taken
        # from the head descriptor when it is loaded, then re-evaluated every cycle from `desc`,
        # so a datagram waiting for its destination's MAC turns stale when a new run starts.
        def is_stale(run):
            age = (self.run - run)[:32]
            return (age != 0) & ~age[31]
        stale = Signal()
        self.sync += [
            If(load,
                stale.eq(Array(is_stale(d.run) for d, w in heads)[load_sel])
            ).Else(
                stale.eq(is_stale(desc.run))
            )
        ]
        fsm.act("HEADER",
            If(stale & (hcount == 0),
                NextState("DISCARD")
            ),
            source.valid.eq(~(stale & (hcount == 0))),
            source.data.eq(header[hcount]),
            source.last.eq((hcount == hwords - 1) & (desc.count == 0)),
            source.last_be.eq(Mux(source.last, full_be, 0)),
            If(source.ready,
                NextValue(hcount, hcount + 1),
                If(hcount == hwords - 1,
                    If(desc.count == 0,
                        *finish()
                    ).Else(
                        NextState("SAMPLES")
                    )
                )
            )
        )
        self.sync += If(fsm.ongoing("SAMPLES") & ~samples.valid, self.underrun.eq(self.underrun + 1))
        if packed:
            # One buffer word per cycle; the last one holds the remaining 1..spw samples.
            last_word = Signal()
            last_be   = Signal(nb)
            tail      = Signal(max=max(spw, 2))  # Samples in the last word, minus one.
            nwords_m1 = Signal(16)  # Registered: desc is stable for the whole HEADER phase.
            self.sync += nwords_m1.eq(nwords - 1)
            self.comb += [
                last_word.eq(scount == nwords_m1),
                tail.eq((desc.count - 1)[:len(tail)] if spw > 1 else 0),
                Case(tail, {k: last_be.eq(1 << ((k + 1)*sample_bytes - 1)) for k in range(spw)}),
            ]
            fsm.act("SAMPLES",
                source.valid.eq(1),  # The whole datagram is in the buffer: valid never drops here.
                source.data.eq(samples.data),
                source.last.eq(last_word),
                source.last_be.eq(Mux(last_word, last_be, 0)),
                If(source.ready,
                    pop_samp.eq(1),
                    NextValue(scount, scount + 1),
                    If(last_word,
                        *finish()
                    )
                )
            )
        else:
            # One byte per cycle, MSB first; a sample is popped after its last byte.
            sample_b  = Array([samples.data[8*(sample_bytes - 1 - i):8*(sample_bytes - i)] for i in range(sample_bytes)])
            last_byte = Signal()
            count_m1 = Signal(16)  # Registered: desc is stable for the whole HEADER phase.
            self.sync += count_m1.eq(desc.count - 1)
            self.comb += last_byte.eq((scount == count_m1) & (bcount == sample_bytes - 1))
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
                            *finish()
                        )
                    ).Else(
                        NextValue(bcount, bcount + 1)
                    )
                )
            )
        fsm.act("DISCARD",
            If(scount == nwords,
                NextValue(self.stale, self.stale + 1),
                NextState("SELECT")
            ).Elif(samples.valid,
                pop_samp.eq(1),
                NextValue(scount, scount + 1)
            )
        )
        fsm.act("GAP",
            NextValue(gap_count, gap_count - 1),
            If(gap_count <= 1,
                NextState("SELECT")
            )
        )
