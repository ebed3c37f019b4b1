#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""DAQ streamer: detector channels framed into UDP datagrams (header: ethdaq.wire.daqformat).

Each channel collects samples into its own buffer and only starts a datagram when the buffer
can hold a whole one, so every datagram holds consecutive samples and is complete before it is
sent: the link never sees a datagram pause half-way (store-and-forward, by construction).
When the link cannot keep up, samples arriving while there is no room are dropped before
framing, counted (cumulative `dropped` in every header) and the next datagram carries
FLAG_OVERFLOW; a channel configured for back-pressure stalls its detector instead.
A round-robin arbiter sends complete datagrams, one at a time, as UDP user datagrams
(eth_udp_user_description) for the canned-header framer (gateware/framer.py).

The channel is gateware/daqchannel.py, the arbiter and serializer gateware/serializer.py; this
module holds the streamer: run control, settings, destination, status, and their clock crossings.
Its parts are module-level functions of the streamer rather than methods: Migen names a signal
after the Python frames above its creation, and a method's frame would add a level to the names
in the generated Verilog. The signals whose names the CSRs' or the submodules' share (run,
running, gap, stale, sent, active) are created in the constructor, where their place in the
names' hierarchy is; the parts only drive them. The drop pulses are named "sample_width"
explicitly, the name the generated Verilog has for them (Migen's tracer names a closure
variable's signal after its neighbour in the code object on Python 3.11).

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

from ethdaq.gateware.compare import above, below
from ethdaq.gateware.csr import CSRConfig
from ethdaq.gateware.daqchannel import DAQChannel
from ethdaq.gateware.resolver import ARPResolver
from ethdaq.gateware.serializer import Serializer
from ethdaq.gateware.streamstats import StreamCounters
from ethdaq.wire import daqformat, protocol

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
        # A datagram's sample count never exceeds the build's largest (the payload setting is
        # clamped to it): the channels' counts and descriptors are that wide (10 bits at 1472).
        count_bits = max(bits_for(max_samples_build), 2)
        if buffer_samples < max_samples_build:
            raise ValueError(f"buffer_bytes must hold one {max_payload}-byte datagram, not {buffer_bytes!r}")
        self.nchannels    = nchannels
        self.sample_width = sample_width
        self.sinks  = [stream.Endpoint([("data", sample_width)]) for _ in range(nchannels)]
        if dw not in (8, 64):
            raise ValueError(f"dw must be 8 (1G) or 64 (10G), not {dw!r}")
        self.source = stream.Endpoint(eth_udp_user_description(dw))
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
        self._next_hop     = CSRConfig(32, description="The address whose MAC the stream goes to: the destination on-link, else the gateway (0: the destination; set while stopped, before dst_ip).")
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

        # Control-Path (sys): run control and channels.
        running = Signal()
        self.run = run = Signal(32)  # The current run number (sys).
        max_samples = Signal(count_bits)
        _add_run_control(self, running, run, max_samples, sample_bytes, max_payload, max_samples_build)
        _add_channels(self, nchannels, sample_width, buffer_samples, cd_tx, dw, flush_bits, timestamp_next, ts_flags,
                      running, run, max_samples)

        # Destination MAC (sys), handed to cd_tx with the other settings the transmit side reads.
        self.resolver = resolver = ARPResolver(clk_freq, timeout=arp_timeout, retry_interval=arp_retry_interval,
                                               refresh=arp_refresh)
        active = Signal()
        dst_ip, dst_port, gap = Signal(32), Signal(16), Signal(32)
        _add_destination(self, resolver, active, running, dst_ip, dst_port, gap, same, cd_tx)

        # Data-Path (cd_tx): arbiter + serializer.
        self.serializer = ClockDomainsRenamer(cd_tx)(Serializer(self.channels, sample_width, src_port, dw,
                                                                 with_sent=not with_stream_counters))
        stale = Signal(32)
        sent  = Signal(64)
        _add_serializer_links(self, run, dst_ip, dst_port, gap, stale, sent, same, cd_tx, with_stream_counters)
        self.underrun = self.serializer.underrun  # Must stay 0: checked by the tests.

        # Status (sys).
        if with_stream_counters:
            _add_stream_counters(self, nchannels, cd_tx)
        _add_status(self, nchannels, with_stream_counters, running, run, stale, sent)

# Streamer parts -----------------------------------------------------------------------------------

def _add_run_control(st, running, run, max_samples, sample_bytes, max_payload, max_samples_build):
    # Run control (sys): a run starts and stops at the control register's pulses; the samples per
    # datagram follow the payload setting.
    start   = st._control.fields.start
    stop    = st._control.fields.stop
    st.sync += [
        If(start, running.eq(1), run.eq(run + 1)),
        If(stop, running.eq(0)),
        # Out-of-range payload sizes are clamped, so a datagram always holds 1..max samples.
        If(below(st._payload.storage, daqformat.HEADER_LEN + sample_bytes),
            max_samples.eq(1)
        ).Elif(above(st._payload.storage, max_payload),
            max_samples.eq(max_samples_build)
        ).Else(
            max_samples.eq((st._payload.storage - daqformat.HEADER_LEN) >> log2_int(sample_bytes))
        ),
    ]


def _add_channels(st, nchannels, sample_width, buffer_samples, cd_tx, dw, flush_bits, timestamp_next, ts_flags,
                  running, run, max_samples):
    # Channels: one per detector input, driven by the run control and the per-channel settings.
    start = st._control.fields.start
    stop  = st._control.fields.stop
    st.channels = []
    for i in range(nchannels):
        ch = DAQChannel(i, sample_width, buffer_samples, cd_tx=cd_tx, dw=dw, flush_bits=flush_bits,
                        track_time=timestamp_next is not None, count_bits=len(max_samples))
        st.add_module(f"ch{i}", ch)
        st.channels.append(ch)
        st.comb += [
            st.sinks[i].connect(ch.sink),
            ch.enable.eq(st._enable.storage[i]),
            ch.backpressure.eq(st._backpressure.storage[i]),
            ch.flush.eq(st._flush.storage),
            ch.running.eq(running),
            ch.start.eq(start),
            ch.stop.eq(stop),
            ch.max_samples.eq(max_samples),
            ch.timestamp.eq(st.timestamp),
            ch.timestamp_next.eq(timestamp_next if timestamp_next is not None else 0),
            ch.ts_flags.eq(ts_flags),
            ch.run.eq(run),
        ]


def _add_destination(st, resolver, active, running, dst_ip, dst_port, gap, same, cd_tx):
    # The resolver's settings and ARP observations (sys), and the settings the transmit side reads,
    # handed to cd_tx.
    # Resolve once a destination is set (by the firmware, before a run) or a run starts, not
    # for the reset default: no ARP broadcasts from an idle board.
    st.sync += If(st._dst_ip.re | st._control.fields.start, active.eq(1))
    # The resolver asks for the next hop: the gateway for a destination outside the subnet,
    # whose IP header still names the destination (the firmware decides: protocol/route.h).
    hop, hop_tx = Signal(32), Signal(32)
    st.comb += hop.eq(Mux(st._next_hop.storage != 0, st._next_hop.storage, st._dst_ip.storage))
    st.comb += [
        resolver.active.eq(active),
        resolver.running.eq(running),
        resolver.ip.eq(hop),
        resolver.mode.eq(st._mac_mode.storage),
        resolver.fixed_mac.eq(st._dst_mac.storage),
        resolver.resolve.eq(st._control.fields.resolve),
        resolver.arp_valid.eq(st.arp_valid),
        resolver.arp_reply.eq(st.arp_reply),
        resolver.arp_ip.eq(st.arp_ip),
        resolver.arp_mac.eq(st.arp_mac),
    ]
    # Settings the transmit side reads: written while stopped, so a plain synchroniser is
    # enough for the addresses; the MAC/valid pair can change while streaming (the answer to
    # a refresh) and crosses as one word.
    if same:
        st.comb += [
            dst_ip.eq(st._dst_ip.storage), dst_port.eq(st._dst_port.storage), gap.eq(st._gap.storage),
            hop_tx.eq(hop),
            Cat(st.dst_mac, st.dst_valid).eq(Cat(resolver.mac, resolver.valid)),
            st.arp_request.eq(resolver.request),
        ]
    else:
        st.specials += [
            MultiReg(st._dst_ip.storage,   dst_ip,   cd_tx),
            MultiReg(hop,                  hop_tx,   cd_tx),
            MultiReg(st._dst_port.storage, dst_port, cd_tx),
            MultiReg(st._gap.storage,      gap,      cd_tx),
        ]
        st.mac_sync = BusSynchronizer(49, "sys", cd_tx)
        st.req_sync = PulseSynchronizer("sys", cd_tx)
        st.comb += [
            st.mac_sync.i.eq(Cat(resolver.mac, resolver.valid)),
            Cat(st.dst_mac, st.dst_valid).eq(st.mac_sync.o),
            st.req_sync.i.eq(resolver.request),
            st.arp_request.eq(st.req_sync.o),
        ]
    st.comb += st.arp_target.eq(hop_tx)


def _add_serializer_links(st, run, dst_ip, dst_port, gap, stale, sent, same, cd_tx, with_stream_counters):
    # The serializer's output, its settings, and its counters handed back to sys.
    st.comb += [
        st.serializer.source.connect(st.source),
        st.serializer.dst_ip.eq(dst_ip),
        st.serializer.dst_port.eq(dst_port),
        st.serializer.gap.eq(gap),
    ]
    if same:
        st.comb += [st.serializer.run.eq(run), stale.eq(st.serializer.stale), sent.eq(st.serializer.sent)]
    else:
        st.run_sync   = BusSynchronizer(32, "sys", cd_tx)
        st.stale_sync = BusSynchronizer(32, cd_tx, "sys")
        st.comb += [
            st.run_sync.i.eq(run), st.serializer.run.eq(st.run_sync.o),
            st.stale_sync.i.eq(st.serializer.stale), stale.eq(st.stale_sync.o),
        ]
        if not with_stream_counters:
            st.sent_sync = BusSynchronizer(64, cd_tx, "sys")
            st.comb += [st.sent_sync.i.eq(st.serializer.sent), sent.eq(st.sent_sync.o)]


def _add_stream_counters(st, nchannels, cd_tx):
    # Per-stream counters: what each stream sent, and dropped (gateware/streamstats.py).
    st.counters = StreamCounters(nchannels, [ch.dropped for ch in st.channels], cd=cd_tx)
    st.comb += [
        st.counters.event.eq(st.serializer.sent_event),
        st.counters.channel.eq(st.serializer.sel),
        st.counters.nbytes.eq(st.serializer.source.length),
    ]


def _add_status(st, nchannels, with_stream_counters, running, run, stale, sent):
    # Status (sys). Without per-stream counters, the total of dropped samples is kept by one
    # counter (summing the channels' 64-bit counters took three 64-bit adders), fed by the
    # channels' drop pulses registered (admission and a 64-bit adder in one cycle were the sys
    # critical path).
    resolver = st.resolver
    if not with_stream_counters:
        start       = st._control.fields.start
        dropped_sum = Signal(64)
        drops       = Signal(nchannels, name="sample_width")
        start_d     = Signal()
        st.sync += [
            drops.eq(Cat(*[ch.drop & ~start for ch in st.channels])),
            start_d.eq(start),
            If(start_d,
                dropped_sum.eq(0),
            ).Else(
                dropped_sum.eq(dropped_sum + reduce(add, [drops[i] for i in range(nchannels)])),
            ),
        ]
        st.comb += [
            st._datagrams.status.eq(sent),
            st._drop_count.status.eq(dropped_sum),
        ]
    st.comb += [
        st._status.fields.running.eq(running),
        st._status.fields.busy.eq(reduce(lambda a, b: a | b, [ch.queued for ch in st.channels])),
        st._status.fields.dst_valid.eq(resolver.valid),
        st._status.fields.unreachable.eq(resolver.unreachable),
        st._run.status.eq(run),
        st._arp_timeouts.status.eq(resolver.timeouts),
        st._dst_mac_status.status.eq(resolver.mac),
        st._stale.status.eq(stale),
        st._dst_mac_changes.status.eq(resolver.changes),
        st._arp_refused.status.eq(resolver.refused),
    ]
