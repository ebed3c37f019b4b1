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
from ethdaq.gateware.framer import field_bytes, mux_tree
from ethdaq.gateware.resolver import ARPResolver, MODE_ARP, MODE_FIXED
from ethdaq.gateware.streamstats import StreamCounters
from ethdaq.host import daqformat, protocol

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
    max_samples (samples per datagram), backpressure, flush, timestamp, run; with `track_time`,
    also timestamp_next (the value `timestamp` has in the next cycle).

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
                 track_time=False):
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
        self.descs = descs = LevelFIFO(descriptor_layout(), descriptors, "sys", cd_tx, framing=False)
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
        close     = Signal()
        close_last = Signal()
        close_flush = Signal()  # The idle flush closes the datagram without a sample this cycle.
        flush_due = Signal()    # The datagram has been idle for its flush time.
        last      = Signal()    # The next accepted sample closes the datagram (count + 1 >= max_samples).

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
        self.comb += need.eq((self.max_samples + spw - 1) >> log2_int(spw))
        self.sync += [
            lim.eq(words - need),
            big.eq(need > words),
            f0.eq(~big & (fifo.level <= lim)),
            f1.eq(~big & (fifo.level < lim)),
            d0.eq(descs.level < descriptors),
            d1.eq(descs.level < descriptors - 1),
            f_wrote.eq(fifo.sink.valid),
            d_wrote.eq(descs.sink.valid),
        ]
        self.comb += room.eq(Mux(f_wrote, f1, f0) & Mux(d_wrote, d1, d0))

        accept = self.accept = Signal()  # A sample joins the datagram in this cycle.
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
            close.eq(accept & (last | flush_due)),
            close_flush.eq(flush_due & in_packet & ~accept & ~stopping),
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
                fifo.sink.valid.eq((accept & ((slot == spw - 1) | close)) | ((close_last | close_flush) & (slot != 0))),
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

        # Descriptor written when a datagram is complete, idle for the flush time (FLAG_FLUSH,
        # unless its last sample also filled it) or at stop (FLAG_LAST).
        flags = Signal(16)
        self.comb += [
            flags.eq(self.ts_flags |
                Mux(overflow, daqformat.FLAG_OVERFLOW, 0) |
                Mux(first, daqformat.FLAG_FIRST, 0) |
                Mux(close_last, daqformat.FLAG_LAST, 0) |
                Mux(close_flush | (accept & flush_due & ~last), daqformat.FLAG_FLUSH, 0)),
            descs.sink.timestamp.eq(Mux(in_packet, ts_first, self.timestamp) if not track_time else ts_first),
            descs.sink.dropped.eq(self.dropped),
            descs.sink.count.eq(Mux(close_last | close_flush, count, count + 1)),
            descs.sink.flags.eq(flags[:DESC_FLAG_BITS]),
            descs.sink.run.eq(self.run),
            descs.sink.valid.eq(close | close_last | close_flush),
        ]
        self.comb += close_last.eq(stopping & descs.sink.ready)

        # Idle flush: `timer` is loaded with `flush` at every accepted sample and counts down;
        # `flush_due` is its end, registered (no carry chain or wide compare before admission),
        # F + 1 cycles after the last sample. Only a datagram that holds samples and is not
        # closing now can become due, so a due flush always has something to send.
        timer = Signal(flush_bits)
        self.sync += [
            If(accept,
                timer.eq(self.flush),
            ).Elif(timer != 0,
                timer.eq(timer - 1),
            ),
            flush_due.eq(in_packet & ~accept & (timer == 1) & ~close_flush & ~close_last & ~self.start),
        ]

        # `last` for the next cycle, from its count (so `close` is one gate after `accept`); it
        # follows a change of max_samples within a cycle while no sample is accepted. Both tests,
        # count + 2 >= max_samples and count + 1 >= max_samples, read one difference
        # rem = max_samples - count (18 bits, two's complement): rem <= 2 and rem <= 1, one carry
        # chain and a few gates instead of two adders and two comparisons.
        rem     = Signal(18)
        rem_hi0 = Signal()  # rem[2:17] == 0
        self.comb += [
            rem.eq(self.max_samples - count),
            rem_hi0.eq(rem[2:17] == 0),
        ]
        self.sync += [
            If(self.start | close | close_last | close_flush,
                last.eq(self.max_samples <= 1),
            ).Elif(accept,
                last.eq(rem[17] | (rem_hi0 & ~(rem[1] & rem[0]))),
            ).Else(
                last.eq(rem[17] | (rem_hi0 & ~rem[1])),
            )
        ]

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
                If(self.stop & self.enable & self.running,
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
            self.sync += If(self.start | close | close_last | close_flush | (~in_packet & ~accept),
                ts_first.eq(self.timestamp_next),
            )
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
    timestamp_next : Signal(64) or None
        The value `timestamp` has in the next cycle, where its source has it (the PTP clock's
        time_ns_next): the same timestamps for 64 LUTs fewer per channel on the ECP5.
    cd_tx : str
        Clock domain of `source` and the destination outputs (the PHY's transmit clock).
    clk_freq : float
        sys clock frequency (ARP timeouts, the idle flush's range: up to 1 s).
    arp_timeout, arp_retry_interval : float
        Seconds to wait for each of 3 ARP answers, then between requests to a silent destination.
    arp_refresh : float
        Seconds between the resolver's refreshes of a resolved MAC during a run.

    Outputs in `cd_tx`, for gateware/txpath.py: `source` (UDP payload, ip_address, ports,
    length), `dst_mac`/`dst_valid` (where to send; datagrams wait while not valid),
    `arp_request`/`arp_target` (send a who-has). Input in sys: `arp_valid`/`arp_reply`/`arp_ip`/
    `arp_mac`, one cycle per ARP request or reply received for us (LiteEth's ARP RX), for the
    resolver (gateware/resolver.py: it takes only the answer to its own request).
    """
    def __init__(self, nchannels=4, sample_width=16, buffer_bytes=None, timestamp=None, timestamp_next=None, ts_flags=0,
                 src_port=5000, max_payload=8972, cd_tx="sys", clk_freq=125e6,
                 arp_timeout=0.1, arp_retry_interval=1.0, arp_refresh=30.0, dw=8, with_stream_counters=True):
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
        self.arp_reply   = Signal()
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
        # The idle flush bounds how long a quiet channel's samples wait; up to 1 s of sys cycles.
        flush_bits = max(int(clk_freq), 2).bit_length()
        self._flush        = CSRConfig(flush_bits, reset=int(clk_freq*protocol.FLUSH_DEFAULT_NS/1e9) - 1,
            description="Idle flush: a partial datagram closes this many sys cycles plus one after its channel's last sample (FLAG_FLUSH; 0: only when full or at stop).")
        self._status       = CSRStatus(fields=[
            CSRField("running",     size=1),
            CSRField("busy",        size=1, description="Datagrams still waiting to be sent."),
            CSRField("dst_valid",   size=1, description="The destination MAC is known (fixed, by rule or resolved)."),
            CSRField("unreachable", size=1, description="The destination did not answer ARP (datagrams wait; the resolver keeps asking)."),
        ])
        self._run          = CSRStatus(32, description="Current run number.")
        # The totals over all streams, where no per-stream counters give them (the firmware sums
        # those: the same numbers, without a second set of 64-bit counters and their crossings).
        if not with_stream_counters:
            self._datagrams  = CSRStatus(64, description="Datagrams sent since reset.")
            self._drop_count = CSRStatus(64, description="Sum over channels of samples dropped this run.")
        self._arp_timeouts = CSRStatus(32, description="ARP requests for the destination that got no answer.")
        self._dst_mac_status = CSRStatus(48, description="Destination MAC in use.")
        self._stale        = CSRStatus(32, description="Datagrams of an earlier run discarded unsent (their destination never answered ARP).")
        self._dst_mac_changes = CSRStatus(32, description="Times an answer to the resolver's refresh moved the stream to another MAC.")
        self._arp_refused  = CSRStatus(32, description="ARP frames claiming the destination's IP with another MAC, not taken (not the answer to our request).")

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
            ch = DAQChannel(i, sample_width, buffer_samples, cd_tx=cd_tx, dw=dw, flush_bits=flush_bits,
                            track_time=timestamp_next is not None)
            self.add_module(f"ch{i}", ch)
            self.channels.append(ch)
            self.comb += [
                self.sinks[i].connect(ch.sink),
                ch.enable.eq(self._enable.storage[i]),
                ch.backpressure.eq(self._backpressure.storage[i]),
                ch.flush.eq(self._flush.storage),
                ch.running.eq(running),
                ch.start.eq(start),
                ch.stop.eq(stop),
                ch.max_samples.eq(max_samples),
                ch.timestamp.eq(self.timestamp),
                ch.timestamp_next.eq(timestamp_next if timestamp_next is not None else 0),
                ch.ts_flags.eq(ts_flags),
                ch.run.eq(run),
            ]

        # Destination MAC (sys), handed to cd_tx.
        self.resolver = resolver = ARPResolver(clk_freq, timeout=arp_timeout, retry_interval=arp_retry_interval,
                                               refresh=arp_refresh)
        # Resolve once a destination is set (by the firmware, before a run) or a run starts, not
        # for the reset default: no ARP broadcasts from an idle board.
        active = Signal()
        self.sync += If(self._dst_ip.re | start, active.eq(1))
        self.comb += [
            resolver.active.eq(active),
            resolver.running.eq(running),
            resolver.ip.eq(self._dst_ip.storage),
            resolver.mode.eq(self._mac_mode.storage),
            resolver.fixed_mac.eq(self._dst_mac.storage),
            resolver.resolve.eq(self._control.fields.resolve),
            resolver.arp_valid.eq(self.arp_valid),
            resolver.arp_reply.eq(self.arp_reply),
            resolver.arp_ip.eq(self.arp_ip),
            resolver.arp_mac.eq(self.arp_mac),
        ]
        # Settings the transmit side reads: written while stopped, so a plain synchroniser is
        # enough for the addresses; the MAC/valid pair can change while streaming (the answer to
        # a refresh) and crosses as one word.
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
        self.serializer = ClockDomainsRenamer(cd_tx)(_Serializer(self.channels, sample_width, src_port, dw,
                                                                 with_sent=not with_stream_counters))
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
            self.comb += [
                self.run_sync.i.eq(run), self.serializer.run.eq(self.run_sync.o),
                self.stale_sync.i.eq(self.serializer.stale), stale.eq(self.stale_sync.o),
            ]
            if not with_stream_counters:
                self.sent_sync = BusSynchronizer(64, cd_tx, "sys")
                self.comb += [self.sent_sync.i.eq(self.serializer.sent), sent.eq(self.sent_sync.o)]
        self.underrun = self.serializer.underrun  # Must stay 0: checked by the tests.

        # Per-stream counters: what each stream sent, and dropped (gateware/streamstats.py).
        if with_stream_counters:
            self.counters = StreamCounters(nchannels, [ch.dropped for ch in self.channels], cd=cd_tx)
            self.comb += [
                self.counters.event.eq(self.serializer.sent_event),
                self.counters.channel.eq(self.serializer.sel),
                self.counters.nbytes.eq(self.serializer.source.length),
            ]

        # Status (sys). Without per-stream counters, the total of dropped samples is kept by one
        # counter (summing the channels' 64-bit counters took three 64-bit adders), fed by the
        # channels' drop pulses registered (admission and a 64-bit adder in one cycle were the sys
        # critical path).
        if not with_stream_counters:
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
                self._datagrams.status.eq(sent),
                self._drop_count.status.eq(dropped_sum),
            ]
        self.comb += [
            self._status.fields.running.eq(running),
            self._status.fields.busy.eq(reduce(lambda a, b: a | b, [ch.queued for ch in self.channels])),
            self._status.fields.dst_valid.eq(resolver.valid),
            self._status.fields.unreachable.eq(resolver.unreachable),
            self._run.status.eq(run),
            self._arp_timeouts.status.eq(resolver.timeouts),
            self._dst_mac_status.status.eq(resolver.mac),
            self._stale.status.eq(stale),
            self._dst_mac_changes.status.eq(resolver.changes),
            self._arp_refused.status.eq(resolver.refused),
        ]


class _Serializer(LiteXModule):
    """Round-robin over channels with a complete datagram: its DAQ header, then its samples (MSB
    first), `dw` bits per cycle. Runs in one domain with the channels' read sides.

    Built for the ECP5 transmit clock (docs/results.md, "ECP5 timing of the transmit path"): what
    the state machine decides on (last header word, last sample, next channel, stale datagram,
    rate-limit gap) is a register set a cycle or more ahead, not a comparison in the same cycle.
    `source` wants a registered `ready` (TXPath's data_buf)."""
    def __init__(self, channels, sample_width, src_port, dw=8, with_sent=True):
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
        self.sent     = Signal(64)  # Datagrams sent (not those discarded as stale), if `with_sent`.
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
        assert hwords >= 5  # The registers derived from `desc` below are right from the header's 4th cycle on.
        header   = [Cat(*hb[i*nb:(i + 1)*nb]) for i in range(hwords)]  # Lane 0 first on the wire.
        self.comb += [
            source.src_port.eq(src_port),
            source.dst_port.eq(self.dst_port),
            source.ip_address.eq(self.dst_ip),
        ]
        full_be = 1 << (nb - 1)  # LiteEth's last_be: one-hot at the last valid byte lane.

        # Control signals of the state machine (combinational, from registers).
        load     = Signal()  # Copy the head descriptor of channel `load_sel` into `desc`.
        load_sel = Signal(max=max(nchannels, 2))
        h_adv    = Signal()  # A header word goes out.
        w_init   = Signal()  # Start counting the datagram's buffer entries (SAMPLES, DISCARD).
        pop_arm  = Signal(nchannels)  # Per channel: a sample word going out now pops its head buffer.
        d_pop    = Signal()           # DISCARD pops the head buffer of channel `sel`.
        # Narrow per-channel pop enables: a registered "armed" and the (registered) ready of
        # data_buf, so the head buffers' enables are not at the end of the state machine's logic.
        self.comb += [w.ready.eq((pop_arm[i] & source.ready) | (d_pop & (sel == i))) for i, (d, w) in enumerate(heads)]

        # Choosing a channel pops its head descriptor in the next cycle (registered: the FSM does
        # not reach into the FIFO's read pointer); while that pop is in flight the channel's old
        # head must not count as pending. The head stays on the FIFO's output until the pop, so
        # at 8 bits, where the header's first desc-dependent byte (flags) goes out at the 8th
        # cycle, `desc` (about 250 flip-flops) is copied in that cycle, by the registered pop
        # rather than by `load` (a wide fan-out at the end of the FSM's logic); at 64 bits the
        # first word holds the flags, so it is copied at `load`. The payload length is needed
        # from the first word on: its sample count is copied at `load`.
        late     = nb == 1
        pop_r    = Signal()
        pop_ch   = Signal(max=max(nchannels, 2))
        pop_rr   = Signal()
        pop_ch_r = Signal(max=max(nchannels, 2))
        load_d   = Signal()  # First cycle of a datagram's header.
        load_dd  = Signal()
        count_l  = Signal(16)
        d_load, d_sel = (pop_r, pop_ch) if late else (load, load_sel)
        self.sync += [
            If(load,
                sel.eq(load_sel),
                count_l.eq(Array(d.count for d, w in heads)[load_sel]),
            ),
            If(d_load,
                Case(d_sel, {i: [getattr(desc, name).eq(getattr(d, name)) for name, _ in descriptor_layout()
                                 if not (late and name == "count")]
                             for i, (d, w) in enumerate(heads)}),
                # At 8 bits the count is count_l's: the same head's, copied at `load` (its entry
                # stays on the FIFO's output until this pop), without a second multiplexer.
                desc.count.eq(count_l) if late else [],
            ),
            pop_r.eq(load),
            pop_ch.eq(load_sel),
            pop_rr.eq(pop_r),
            pop_ch_r.eq(pop_ch),
            load_d.eq(load),
            load_dd.eq(load_d),
        ]
        self.comb += source.length.eq(daqformat.HEADER_LEN + (count_l << log2_int(sample_bytes)))
        # Sequence numbers, per channel: 0 at FLAG_FIRST, else the channel's previous one + 1 (every
        # descriptor passes here in order, discarded ones too). Ready one cycle after the rest of
        # `desc` (whose flags are loaded by then): the header's seq field starts at byte 8, in the
        # second cycle at the earliest (the 8th at 8 bits).
        assert next(f.offset for f in daqformat.FIELDS if f.name == "seq") >= (8 if late else dw//8)
        s_load, s_sel, commit, commit_ch = (pop_r, pop_ch, pop_rr, pop_ch_r) if late else (load, load_sel, pop_r, pop_ch)
        # The 64-bit increment is split at bit 32 over the two cycles: the low half's (with its
        # carry) as the channel's number is loaded, the high half's at the commit. In one cycle
        # it would be a 64-bit carry chain, about 3 of the eth clock's 8 ns on an ECP5.
        self.seqs = seqs = Array(Signal(64, name=f"seq{i}") for i in range(nchannels))
        seq_lo   = Signal(33)  # The low half + 1, and its carry.
        seq_hi   = Signal(32)
        seq_next = Signal(64)
        self.comb += seq_next.eq(Mux(desc.flags & daqformat.FLAG_FIRST != 0, 0,
                                     Cat(seq_lo[:32], seq_hi + seq_lo[32])))
        self.sync += [
            If(s_load, seq_lo.eq(seqs[s_sel][:32] + 1), seq_hi.eq(seqs[s_sel][32:])),
            If(commit,
                desc.seq.eq(seq_next),
                seqs[commit_ch].eq(seq_next),
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
        # are never within two cycles of a load (a header takes at least 5 cycles; DISCARD at least
        # three), by which time the pop is in `pending`. A channel that just became pending waits
        # one more cycle.
        any_r = Signal()
        nxt_r, nxt_other_r = Signal.like(nxt), Signal.like(nxt_other)
        self.sync += [
            any_r.eq(pending != 0),
            nxt_r.eq(nxt),
            nxt_other_r.eq(nxt_other),
        ]

        # A datagram of an earlier run can only still be here if its destination never answered
        # ARP; it must not go to the next run's destination. "Earlier" modulo 2**32 (run - desc.run
        # in 1..2**31-1), so a run number that has not crossed from sys yet cannot make a new
        # datagram look stale. Computed in two registered steps (age, then the test) for every
        # channel's head descriptor, so it is ready in a datagram's first header cycle (the head
        # was shown at least a cycle before its load, and stays until the pop after it); then
        # re-evaluated from `desc` (from the header's fourth cycle on), so a datagram waiting at
        # the first header word for its destination's MAC turns stale when a new run starts.
        def is_stale(age):
            return (age != 0) & ~age[31]
        ages    = [Signal(32, name=f"age{i}") for i in range(nchannels)]
        stale_h = Signal(nchannels)
        age_d   = Signal(32)
        stale   = Signal()
        self.sync += [
            [a.eq(self.run - d.run) for a, (d, w) in zip(ages, heads)],
            stale_h.eq(Cat(*[is_stale(a) for a in ages])),
            age_d.eq(self.run - desc.run),
        ]
        stale_now = Signal()
        self.comb += stale_now.eq(Mux(load_d, Array(stale_h[i] for i in range(nchannels))[sel], stale))
        self.sync += If(load_d, stale.eq(stale_now)).Elif(~load_dd, stale.eq(is_stale(age_d)))

        # Registers derived from `desc`, right from the third cycle of the header (`desc` is copied
        # by the pop at 8 bits); used from the header's last word, and in DISCARD's third cycle.
        beat_shift = 0 if packed else log2_int(sample_bytes)  # Output words per buffer entry: 2**beat_shift.
        nwords_r = Signal(16)  # Buffer entries (words or samples) of this datagram.
        nw_zero  = Signal()    # ... 0
        nw_one   = Signal()    # ... 1
        nbeats_r = Signal(16 + beat_shift)  # Output words of its samples.
        nb_one   = Signal()                 # ... 1
        self.sync += [
            nwords_r.eq((desc.count + spw - 1) >> log2_int(spw)),
            nw_zero.eq(desc.count == 0),
            nw_one.eq((desc.count != 0) & ((desc.count - 1)[log2_int(spw):16] == 0)),
            nbeats_r.eq(nwords_r << beat_shift),
            nb_one.eq(nw_one if beat_shift == 0 else 0),
        ]

        # States, one flip-flop each, and the registered decisions. Every condition below is a
        # small function of registers and of `source.ready` (registered in data_buf).
        s_select  = Signal(reset=1)
        s_header  = Signal()
        s_samples = Signal()
        s_discard = Signal()
        s_gap     = Signal()

        # At 8 bits, the header byte on the output is a register, fetched when the previous one
        # goes out (no multiplexer between the header and data_buf). Bytes 0-7 (constants, the
        # stream id and the flags) come from an 8-way multiplexer; bytes 8-39 (seq and every
        # later field) from a shift register, loaded once `desc` and seq are complete (the
        # header's 3rd cycle) and shifted as they are fetched (from the 8th cycle on): a 40-way
        # multiplexer was five LUTs deep. The shift register shifts a cycle after the fetch, on
        # a registered enable (`owed`), and a fetch while a shift is owed takes the byte after:
        # its 256 clock enables hang on a flip-flop, not on `ready` (7.7 ns on the LFE5U-25F-6).
        if nb == 1:
            seq_at = next(f.offset for f in daqformat.FIELDS if f.name == "seq")
            assert isinstance(hb[0], Constant) and seq_at == 8
            hidx    = Signal(max=hwords + 1)
            hhi     = Signal()  # hidx >= 8
            hword   = Signal(8)
            hsr     = Signal(8*(hwords - 8))
            hsr_ld  = Signal()
            owed    = Signal()  # hsr[:8] went out last cycle: shift now.
            self.sync += [
                hsr_ld.eq(pop_rr),  # `desc` since the cycle before, seq since this one.
                owed.eq(h_adv & hhi),
                If(load,
                    hword.eq(hb[0]),
                    hidx.eq(1),
                    hhi.eq(0),
                ).Elif(h_adv,
                    hword.eq(Mux(hhi, Mux(owed, hsr[8:16], hsr[:8]), mux_tree(header[:8], hidx[:3]))),
                    hidx.eq(hidx + 1),
                    hhi.eq(hhi | (hidx == 7)),
                ),
                If(hsr_ld,
                    hsr.eq(Cat(*hb[8:])),
                ).Elif(owed,
                    hsr.eq(hsr[8:]),
                ),
            ]
            hdata = hword

        # Header: position, first word, last word, last word of a datagram without samples.
        hcount = Signal(max=hwords)
        hfirst = Signal()
        hlast  = Signal()
        h_fin  = Signal()
        # Samples: output words left (the current one included), and "this is the last".
        bleft  = Signal(len(nbeats_r))
        s_fin  = Signal()
        # DISCARD: buffer entries left, "this is the last", "all popped"; its first two cycles;
        # then a pop every other cycle, counted in the cycle after it from a registered "taken"
        # (the selected head buffer's valid then drives one flip-flop, not the counters).
        wleft  = Signal(16)
        wlast  = Signal()
        wdone  = Signal()
        dinit  = Signal()
        dinit2 = Signal()
        d_phase = Signal()
        d_took  = Signal()
        # After the datagram: rate-limit gap, next channel at once, or SELECT (from the same cycle's
        # `gap` and `pending`, so exactly one is set).
        f_gap, f_next, f_sel = Signal(), Signal(), Signal()
        self.sync += [
            f_gap.eq(self.gap != 0),
            f_next.eq((others != 0) & (self.gap == 0)),
            f_sel.eq((others == 0) & (self.gap == 0)),
        ]
        gap_count = Signal(32)
        g_last    = Signal()  # gap_count <= 1: the gap's last cycle.
        gap_le1   = Signal()
        underrun_r = Signal()

        ready      = source.ready
        first_word = Signal()
        stale_drop = Signal()
        fin        = Signal()   # The datagram's last word goes out.
        s_beat     = Signal()   # A sample word goes out.
        s_init     = Signal()   # The header's last word goes out, samples follow.
        d_end      = Signal()
        g_start    = Signal()
        g_end      = Signal()
        if packed:
            blast = C(1)
        else:
            # One byte per cycle, MSB first; a sample is popped after its last byte.
            bcount = Signal(max=max(sample_bytes, 2))
            blast  = Signal()
            self.comb += blast.eq(bcount == sample_bytes - 1)  # At most 2 bits.
            self.sync += If(s_beat, If(blast, bcount.eq(0)).Else(bcount.eq(bcount + 1)))
        # In SAMPLES next cycle, at a sample's last byte: the next cycle's pop_arm (`sel` does
        # not change while in SAMPLES, and a load leaves it).
        s_samples_n = Signal()
        blast_n     = Signal()
        self.comb += [
            s_samples_n.eq(s_init | (s_samples & ~(ready & s_fin))),
            blast_n.eq(1 if packed else Mux(s_beat, Mux(blast, sample_bytes == 1, bcount == sample_bytes - 2), blast)),
        ]
        self.sync += pop_arm.eq(Mux(s_samples_n & blast_n, 1 << sel, 0))
        self.comb += [
            first_word.eq(s_header & hfirst),
            stale_drop.eq(first_word & stale_now),
            # Not gated by stale_drop (valid is): a stale datagram's header state is dropped with it.
            h_adv.eq(s_header & ready),
            s_beat.eq(s_samples & ready),
            fin.eq(ready & ((s_header & h_fin) | (s_samples & s_fin))),
            s_init.eq(h_adv & hlast & ~h_fin),
            load.eq((s_select & any_r) | (fin & f_next)),
            load_sel.eq(Mux(s_select, nxt_r, nxt_other_r)),
            d_end.eq(s_discard & d_phase & wdone),
            d_pop.eq(s_discard & d_phase & ~wdone),
            w_init.eq(s_discard & dinit2),
            g_start.eq(fin & f_gap),
            g_end.eq(s_gap & g_last),
            self.sent_event.eq(fin),
        ]
        self.sync += [
            s_select.eq((s_select & ~any_r) | (fin & f_sel) | d_end | g_end),
            s_header.eq(load | (s_header & ~stale_drop & ~(ready & hlast))),
            s_samples.eq(s_samples_n),
            s_discard.eq(stale_drop | (s_discard & ~d_end)),
            s_gap.eq(g_start | (s_gap & ~g_last)),
            dinit.eq(stale_drop),
            dinit2.eq(dinit),
            d_took.eq(d_pop & samples.valid),
            If(w_init, d_phase.eq(1)).Elif(s_discard & ~dinit, d_phase.eq(~d_phase)).Else(d_phase.eq(0)),
            If(load,
                hcount.eq(0),
                hfirst.eq(1),
                hlast.eq(0),
                h_fin.eq(0),
            ).Elif(h_adv,
                hcount.eq(hcount + 1),
                hfirst.eq(0),
                hlast.eq(hcount == hwords - 2),
                h_fin.eq((hcount == hwords - 2) & nw_zero),
            ),
            If(s_init,
                bleft.eq(nbeats_r),
                s_fin.eq(nb_one),
            ).Elif(s_beat,
                bleft.eq(bleft - 1),
                s_fin.eq(bleft == 2),
            ),
            If(w_init,
                wleft.eq(nwords_r),
                wlast.eq(nw_one),
                wdone.eq(nw_zero),
            ).Elif(d_took,
                wleft.eq(wleft - 1),
                wlast.eq(wleft == 2),
                wdone.eq(wlast),
            ),
            If(d_end, self.stale.eq(self.stale + 1)),
            # Loaded while not in GAP (the setting is static), so that `fin` does not fan out
            # to its 32 enables. Its `<= 1` is compared a cycle ahead (gap_le1, as f_gap): the
            # setting's synchroniser, a 32-bit carry chain and g_last's choice in one cycle were
            # eth's critical path of the colorlight_i5 (8.32 ns).
            gap_le1.eq(self.gap <= 1),
            If(~s_gap,
                gap_count.eq(self.gap),
                g_last.eq(gap_le1),
            ).Else(
                gap_count.eq(gap_count - 1),
                g_last.eq(gap_count <= 2),
            ),
            # Counted a cycle late: the selected head buffer's valid feeds one flip-flop, not the
            # counter's 32 enables.
            underrun_r.eq(s_samples & ~samples.valid),
            If(underrun_r, self.underrun.eq(self.underrun + 1)),
        ]
        # Datagrams sent: counted a cycle after the event (the 64-bit counter's enable is a register).
        if with_sent:
            sent_r = Signal()
            self.sync += [sent_r.eq(self.sent_event), If(sent_r, self.sent.eq(self.sent + 1))]

        # Output: header words, then sample words (the whole datagram is in the buffer, so valid
        # never drops in SAMPLES).
        self.comb += [
            source.valid.eq((s_header & ~stale_drop) | s_samples),
            source.last.eq((s_header & h_fin) | (s_samples & s_fin)),
        ]
        if packed:
            # One buffer word per cycle; the last one holds the remaining 1..spw samples.
            last_be   = Signal(nb)
            tail      = Signal(max=max(spw, 2))  # Samples in the last word, minus one.
            self.comb += [
                tail.eq((desc.count - 1)[:len(tail)] if spw > 1 else 0),
                Case(tail, {k: last_be.eq(1 << ((k + 1)*sample_bytes - 1)) for k in range(spw)}),
                source.data.eq(Mux(s_samples, samples.data, mux_tree(header, hcount))),
                source.last_be.eq(Mux(s_header & h_fin, full_be, 0) | Mux(s_samples & s_fin, last_be, 0)),
            ]
        else:
            sample_b = Array([samples.data[8*(sample_bytes - 1 - i):8*(sample_bytes - i)] for i in range(sample_bytes)])
            self.comb += [
                source.data.eq(Mux(s_samples, sample_b[bcount], hdata)),
                source.last_be.eq(source.last),
            ]
