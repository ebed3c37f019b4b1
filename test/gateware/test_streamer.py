"""DAQ streamer (gateware/streamer.py: its channels in daqchannel.py, the serializer, streamstats'
counters, the timebase) fed by the detector emulator, in Migen simulation. Datagrams are decoded with ethdaq.wire.daqformat and checked against invariants that break if
a sample is lost silently, duplicated, reordered or truncated."""

import pytest
from migen import Module, passive, run_simulation

from ethdaq.gateware.emulator import MODE_COUNTER, MODE_PULSE, add_emulators
from ethdaq.gateware.streamer import DAQStreamer
from ethdaq.gateware.timebase import Timebase
from ethdaq.wire import daqformat


class DUT(Module):
    def __init__(self, nchannels=2, sample_width=16, max_payload=256, buffer_bytes=512, cd_tx="sys"):
        self.submodules.timebase = Timebase(clk_freq=125e6)
        self.submodules.streamer = DAQStreamer(nchannels=nchannels, sample_width=sample_width,
            buffer_bytes=buffer_bytes, max_payload=max_payload, src_port=5001, timestamp=self.timebase.ns,
            cd_tx=cd_tx)
        self.emulators = add_emulators(self, self.streamer, with_counters=True)


def write(csr, value):
    yield csr.storage.eq(value)
    yield csr.re.eq(1)
    yield
    yield csr.re.eq(0)


# Standalone (no CSR bank), a CSRStorage's field signals are ours to drive.
def start(dut):
    yield from pulse(dut.streamer._control.fields.start)


def stop(dut):
    yield from pulse(dut.streamer._control.fields.stop)


def pulse(field):
    yield field.eq(1)
    yield
    yield field.eq(0)


class Capture:
    """Collects datagrams from the streamer's UDP source and checks valid never drops inside one."""
    def __init__(self, dut, ready=lambda cycle: True, poke=None):
        """poke(datagrams, current bytes): a generator run once per cycle, after the capture."""
        self.dut, self.ready, self.poke = dut, ready, poke
        self.datagrams = []
        self.params = []
        self.gaps_inside = 0
        self.underrun = None
        self.spans = []   # (first, last) cycle of each datagram.
        self.quiet = 0    # Cycles since the source was last valid.

    @passive
    def run(self):
        src = self.dut.streamer.source
        cur, inside, cycle = [], False, 0
        while True:
            r = self.ready(cycle)
            yield src.ready.eq(r)
            yield
            cycle += 1
            valid = yield src.valid
            self.quiet = 0 if valid else self.quiet + 1
            if inside and not valid:
                self.gaps_inside += 1
            if valid and r:
                if not inside:
                    first = cycle
                cur.append((yield src.data))
                inside = True
                if (yield src.last):
                    self.datagrams.append(bytes(cur))
                    self.spans.append((first, cycle))
                    self.params.append(dict(length=(yield src.length), dst_port=(yield src.dst_port),
                                            src_port=(yield src.src_port), ip=(yield src.ip_address)))
                    cur, inside = [], False
            if self.poke is not None:
                yield from self.poke(self.datagrams, cur)


# After a stop, the streamer is drained once its source has been quiet this long: far longer
# than a stop takes to close, cross and start sending the last datagrams (tens of cycles), far
# shorter than the 3000-cycle limit. A drain cut short leaves a stream without its FLAG_LAST
# datagram, or counters that disagree with the capture, and the tests fail.
QUIET = 300
DRAIN_LIMIT = 3000


def drain(capture):
    """Wait (sys cycles) until the capture has seen the source quiet for QUIET cycles."""
    for _ in range(DRAIN_LIMIT):
        yield
        if capture.quiet >= QUIET:
            return


def run_streamer(dut, setup, cycles, capture, tx_period=None):
    """tx_period: run the transmit side in its own clock domain `eth_tx` with this period (sys: 10)."""
    def control():
        yield from setup()
        yield from start(dut)
        for _ in range(cycles):
            yield
        yield from stop(dut)
        capture.quiet = 0
        yield from drain(capture)
        capture.underrun = yield dut.streamer.underrun
        # Per-stream counters (gateware/streamstats.py), one stream at a time as the firmware reads.
        counters = dut.streamer.counters
        capture.streams = {}
        for i in range(dut.streamer.nchannels):
            yield counters._select.storage.eq(i)
            for _ in range(10):  # Into the transmit domain and back (the firmware waits too).
                yield
            capture.streams[i] = dict(datagrams=(yield counters._datagrams.status),
                                      bytes=(yield counters._bytes.status),
                                      dropped=(yield counters._dropped.status))
        # STATUS's totals, summed over the streams as the firmware does.
        capture.status = dict(datagrams=sum(c["datagrams"] for c in capture.streams.values()),
                              dropped=sum(c["dropped"] for c in capture.streams.values()))
    if tx_period is None:
        run_simulation(dut, [control(), capture.run()])
    else:
        run_simulation(dut, {"sys": control(), "eth_tx": capture.run()},
                       clocks={"sys": 10, "eth_tx": tx_period})
    assert capture.underrun == 0, "the serializer ran out of samples inside a datagram"


def per_stream(datagrams):
    streams = {}
    for d in datagrams:
        h = daqformat.unpack_header(d)  # Raises on a wrong length: nothing truncated.
        streams.setdefault(h.stream_id, []).append((h, daqformat.samples(d, h)))
    return streams


def check_stream_invariants(stream):
    """Sequence continuity; counter samples consecutive except exactly where `dropped` says."""
    for k, (h, s) in enumerate(stream):
        assert h.seq == k
        assert s == list(range(s[0], s[0] + len(s))) if s else True
        assert bool(h.flags & daqformat.FLAG_FIRST) == (k == 0)
    for (h0, s0), (h1, s1) in zip(stream, stream[1:]):
        lost = h1.dropped - h0.dropped
        assert lost >= 0
        assert bool(h1.flags & daqformat.FLAG_OVERFLOW) == (lost > 0)
        if s0 and s1:
            assert (s1[0] - s0[-1] - 1) % 2**16 == lost % 2**16, "samples lost without being counted"
        assert h1.timestamp > h0.timestamp
    assert stream[-1][0].flags & daqformat.FLAG_LAST


def test_headers_byte_exact_and_sequences_continuous_below_line_rate():
    dut = DUT()
    cap = Capture(dut)

    def setup():
        yield from write(dut.streamer._payload, 128)      # 44 samples of 16 bits.
        yield from write(dut.streamer._dst_port, 6000)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 // 8)       # 2 ch x 2 B / 8 cycles: half the link.

    run_streamer(dut, setup, 2500, cap)
    streams = per_stream(cap.datagrams)
    assert sorted(streams) == [0, 1]
    for sid, stream in streams.items():
        assert len(stream) >= 5
        check_stream_invariants(stream)
        assert all(h.dropped == 0 and h.run == 1 for h, _ in stream)
        assert all(h.sample_count == 44 for h, _ in stream[:-1])
        for h, s in stream:
            # Byte-exact against the Python packer (the shared definition).
            packed = daqformat.pack_header(sid, h.seq, h.timestamp, h.sample_count, 16, h.flags, h.dropped, h.run)
            assert packed == daqformat.pack_header(*[getattr(h, f) for f in
                ("stream_id", "seq", "timestamp", "sample_count", "sample_bits", "flags", "dropped", "run")])
    for d, p in zip(cap.datagrams, cap.params):
        assert p["length"] == len(d) and p["dst_port"] == 6000 and p["src_port"] == 5001
        h = daqformat.unpack_header(d)
        assert d[:daqformat.HEADER_LEN] == daqformat.pack_header(h.stream_id, h.seq, h.timestamp,
            h.sample_count, 16, h.flags, h.dropped, h.run)
    assert cap.gaps_inside == 0


@pytest.mark.parametrize("sample_width, payload, cycles", [(8, 128, 3000), (32, 128, 3000), (64, 128, 3000),
                                                       (8, daqformat.HEADER_LEN + 300, 4000)])
def test_every_sample_width_gets_the_same_headers(sample_width, payload, cycles):
    """The header path serves every sample width (8-bit samples are packed one per byte, wider
    ones sent a byte at a time): header fields, sequences and samples, modulo the width. With
    300 8-bit samples a datagram, the 16-bit sample count has both bytes non-zero."""
    big = payload > 256
    dut = DUT(sample_width=sample_width, max_payload=512 if big else 256, buffer_bytes=1024 if big else 512)
    cap = Capture(dut)
    per = (payload - daqformat.HEADER_LEN)//(sample_width//8)   # 128 bytes: 44 samples of 16 bits.

    def setup():
        yield from write(dut.streamer._payload, payload)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**33//sample_width)   # 2 channels at half the link.

    run_streamer(dut, setup, cycles, cap)
    streams = per_stream(cap.datagrams)
    assert sorted(streams) == [0, 1]
    for sid, stream in streams.items():
        assert len(stream) >= 3
        expect = stream[0][1][0]
        for k, (h, s) in enumerate(stream):
            assert (h.stream_id, h.seq, h.sample_bits, h.run, h.dropped) == (sid, k, sample_width, 1, 0)
            assert bool(h.flags & daqformat.FLAG_FIRST) == (k == 0)
            assert h.sample_count == len(s) and (h.sample_count == per or k == len(stream) - 1)
            assert s == [(expect + i) % 2**sample_width for i in range(len(s))]
            expect += len(s)
        ts = [h.timestamp for h, _ in stream]
        assert ts[0] > 0 and ts == sorted(set(ts))
        assert stream[-1][0].flags & daqformat.FLAG_LAST
    assert cap.gaps_inside == 0


def test_sequence_numbers_carry_across_32_bits():
    """The serializer's 64-bit sequence increment is split over two cycles at bit 32: once
    channel 0's first datagram is out, its number is set (as a run of 2**32 datagrams would)
    to 2**32 - 2 while channel 1's datagram goes out, and its next ones must be numbered
    2**32 - 1, 2**32, 2**32 + 1, ... (a lost carry gives 0 or 2**32 - 1 again)."""
    dut = DUT()
    poked = []

    def poke(datagrams, cur):
        # While a datagram of channel 1 goes out (stream id: header bytes 4..5), channel 0's
        # next one is not yet loaded (round robin), so its number is not in flight.
        if not poked and any(daqformat.unpack_header(d).stream_id == 0 for d in datagrams) \
                and len(cur) >= 6 and cur[4:6] == [0, 1]:
            yield dut.streamer.serializer.seqs[0].eq(2**32 - 2)
            poked.append(len(datagrams))
    cap = Capture(dut, poke=poke)

    def setup():
        yield from write(dut.streamer._payload, 128)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 // 8)

    run_streamer(dut, setup, 2000, cap)
    assert poked
    streams = per_stream(cap.datagrams)
    seqs = [h.seq for h, _ in streams[0]]
    assert len(seqs) >= 4
    assert seqs == [0] + [2**32 - 1 + k for k in range(len(seqs) - 1)]
    assert [h.seq for h, _ in streams[1]] == list(range(len(streams[1])))


def test_overload_drops_whole_samples_before_framing_counted_and_flagged():
    dut = DUT()
    cap = Capture(dut)

    def setup():
        yield from write(dut.streamer._payload, 128)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 - 1)        # One sample per cycle per channel: 4x the link.

    run_streamer(dut, setup, 2500, cap)
    streams = per_stream(cap.datagrams)
    total_dropped = 0
    for sid, stream in streams.items():
        check_stream_invariants(stream)
        assert stream[-1][0].dropped > 0
        assert any(h.flags & daqformat.FLAG_OVERFLOW for h, _ in stream)
        total_dropped += stream[-1][0].dropped
    assert cap.gaps_inside == 0
    # The status totals agree with the datagrams (sent since reset; dropped this run).
    assert cap.status == dict(datagrams=len(cap.datagrams), dropped=total_dropped)
    check_stream_counters(cap)


def check_stream_counters(cap):
    """Each stream's counters agree with what the capture received of it: datagrams, UDP payload
    bytes, and the dropped samples its last header reports."""
    streams = per_stream(cap.datagrams)
    by_stream = {}
    for d in cap.datagrams:
        by_stream.setdefault(daqformat.unpack_header(d).stream_id, []).append(len(d))
    assert sorted(cap.streams) == sorted(streams)
    for sid, stream in streams.items():
        assert cap.streams[sid] == dict(datagrams=len(stream), bytes=sum(by_stream[sid]),
                                        dropped=stream[-1][0].dropped), sid


def test_backpressure_channel_stalls_detector_and_loses_nothing():
    dut = DUT()
    cap = Capture(dut)
    stalls = []

    def setup():
        yield from write(dut.streamer._payload, 128)
        yield from write(dut.streamer._backpressure, 0b01)   # Channel 0 back-pressures, 1 drops.
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 - 1)

    def control():
        yield from setup()
        yield from start(dut)
        for _ in range(2500):
            yield
        stalls.append((yield dut.emulators[0]._stall.status))
        yield from stop(dut)
        cap.quiet = 0
        yield from drain(cap)
    run_simulation(dut, [control(), cap.run()])
    streams = per_stream(cap.datagrams)
    check_stream_invariants(streams[0])
    check_stream_invariants(streams[1])
    assert all(h.dropped == 0 for h, _ in streams[0])
    assert streams[1][-1][0].dropped > 0
    assert stalls[0] > 0


def test_downstream_backpressure_never_pauses_a_datagram_once_started():
    dut = DUT(nchannels=1)
    cap = Capture(dut, ready=lambda cycle: (cycle // 7) % 3 != 0)  # Stack not always ready.

    def setup():
        yield from write(dut.streamer._payload, 100)
        yield from write(dut.emulators[0]._mode, MODE_COUNTER)
        yield from write(dut.emulators[0]._rate, 2**32 // 4)

    run_streamer(dut, setup, 2500, cap)
    check_stream_invariants(per_stream(cap.datagrams)[0])
    # The serializer holds valid through a datagram; only `ready` from the stack may pause it.
    assert cap.gaps_inside == 0


def test_stop_flushes_partial_datagram_flagged_last_and_pulse_mode_runs():
    dut = DUT(nchannels=1)
    cap = Capture(dut)

    def setup():
        yield from write(dut.streamer._payload, 256)
        yield from write(dut.emulators[0]._mode, MODE_PULSE)
        yield from write(dut.emulators[0]._rate, 2**32 // 50)  # 2 % of cycles on average.

    run_streamer(dut, setup, 3000, cap)
    stream = per_stream(cap.datagrams)[0]
    last_h, last_s = stream[-1]
    assert last_h.flags & daqformat.FLAG_LAST
    assert last_h.sample_count < 108
    n = sum(h.sample_count for h, _ in stream)
    assert 20 <= n <= 110  # About 60 pulses expected in 3000 cycles at 2 %.


@pytest.mark.parametrize("before", [0, 0xFE, 0xFFFFFFFE])
def test_datagrams_of_an_earlier_run_are_discarded_counted_and_never_sent(before):
    """Run 1's datagrams wait (the stack is not ready, as when the destination never answers
    ARP); run 2 starts: every run-1 datagram is discarded and counted, even the one already
    waiting at the serializer's output, and run 2 starts cleanly at sequence 0, its headers
    with its run number. Runs 1 and 2 are the run numbers after `before`: also across the
    descriptors' run tag's wrap (0xFF, 0x100) and the run number's own (0xFFFFFFFF, 0)."""
    run1, run2 = (before + 1) % 2**32, (before + 2) % 2**32
    dut = DUT()
    gate = {"open": False}
    cap = Capture(dut, ready=lambda cycle: gate["open"])
    closed = []
    out = {}

    @passive
    def count_closed():
        while True:
            yield
            for ch in dut.streamer.channels:
                if (yield ch.descs.sink.valid) and (yield ch.descs.sink.ready):
                    closed.append((yield dut.streamer.run))

    def control():
        yield dut.streamer.run.eq(before)
        yield from write(dut.streamer._payload, 128)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 // 8)
        yield from start(dut)
        for _ in range(2000):
            yield
        yield from stop(dut)
        for _ in range(200):
            yield
        out["waiting"] = (yield dut.streamer.source.valid)  # One is already at the output.
        yield from start(dut)
        for _ in range(50):
            yield
        gate["open"] = True
        for _ in range(2000):
            yield
        yield from stop(dut)
        cap.quiet = 0
        yield from drain(cap)
        out["stale"] = (yield dut.streamer.serializer.stale)
        out["stream_datagrams"] = []
        for i in range(2):
            yield dut.streamer.counters._select.storage.eq(i)
            for _ in range(10):
                yield
            out["stream_datagrams"].append((yield dut.streamer.counters._datagrams.status))

    run_simulation(dut, [control(), cap.run(), count_closed()])
    stale = sum(1 for run in closed if run == run1)
    assert out["waiting"] == 1 and stale > 4
    assert out["stale"] == stale
    assert len(cap.datagrams) == sum(1 for run in closed if run == run2)
    streams = per_stream(cap.datagrams)
    assert len(streams) == 2
    for stream in streams.values():
        assert all(h.run == run2 for h, _ in stream)
        check_stream_invariants(stream)
    # Discarded datagrams are not counted as sent, per stream either.
    assert sum(out["stream_datagrams"]) == len(cap.datagrams)


@pytest.mark.parametrize("kwargs, message", [
    (dict(sample_width=12), "sample_width must be 8, 16, 32 or 64, not 12"),
    (dict(sample_width=24), "sample_width must be 8, 16, 32 or 64, not 24"),
    (dict(buffer_bytes=1024, max_payload=8972), "buffer_bytes must hold one 8972-byte datagram, not 1024"),
    (dict(nchannels=0), "nchannels must be >= 1, not 0"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError) as e:
        DAQStreamer(**kwargs)
    assert str(e.value) == message


@pytest.mark.parametrize("tx_period", [7, 13])
def test_channel_buffers_cross_to_a_faster_or_slower_transmit_clock(tx_period):
    """The serializer in the PHY's clock (eth_tx), the channels in sys: across the gray-pointer
    buffers, nothing is lost, duplicated or reordered, and the serializer never runs dry inside a
    datagram (the descriptor crosses no earlier than its samples)."""
    dut = DUT(cd_tx="eth_tx")
    cap = Capture(dut)

    def setup():
        yield from write(dut.streamer._payload, 128)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 // 3)  # Overload at 13 (slower tx): drops counted.

    run_streamer(dut, setup, 1500, cap, tx_period=tx_period)
    streams = per_stream(cap.datagrams)
    assert sorted(streams) == [0, 1]
    assert cap.gaps_inside == 0
    for stream in streams.values():
        assert len(stream) >= 5
        check_stream_invariants(stream)
    check_stream_counters(cap)  # Counted in eth_tx, read from sys.


def test_a_new_runs_datagram_before_its_run_number_crosses_carries_its_own_run():
    """Transmit side in eth_tx, one sample a datagram, two runs back to back: the new run's
    first descriptors reach the serializer before the run number does (their age is negative,
    which the test sees happen), and go out at once with their own run in the header."""
    dut = DUT(cd_tx="eth_tx", max_payload=daqformat.HEADER_LEN + 2)
    cap = Capture(dut)
    ahead = []

    @passive
    def watch_ages():
        ser = dut.streamer.serializer
        while True:
            yield
            for age, ch in zip(ser.ages, dut.streamer.channels):
                if (yield ch.desc.valid) and (yield age) >= 0x80:
                    ahead.append((yield age))

    def control():
        yield dut.streamer.run.eq(0xFE)
        yield from write(dut.streamer._payload, daqformat.HEADER_LEN + 2)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 - 1)
        for _ in range(2):
            yield from start(dut)
            for _ in range(400):
                yield
            yield from stop(dut)
            for _ in range(3):
                yield
        cap.quiet = 0
        yield from drain(cap)

    run_simulation(dut, {"sys": control(), "eth_tx": [cap.run(), watch_ages()]}, clocks={"sys": 10, "eth_tx": 7})
    assert ahead, "no descriptor reached the serializer ahead of its run number"
    for stream in per_stream(cap.datagrams).values():
        firsts = [i for i, (h, _) in enumerate(stream) if h.flags & daqformat.FLAG_FIRST]
        assert len(firsts) == 2 and firsts[0] == 0
        assert [h.run for h, _ in stream] == [0xFF] * firsts[1] + [0x100] * (len(stream) - firsts[1])


@pytest.mark.parametrize("gap", [0, 1, 2, 3, 7])
def test_rate_limit_gap_separates_datagrams_by_exactly_its_cycles(gap):
    """The `gap` setting (idle cycles after each datagram) with samples always waiting: every
    pair of datagrams is `gap` + 1 cycles apart (the cycle that enters the gap counts too), and
    back to back at 0. gap 1 and 2 are the serializer's `gap_le1` and `gap_count <= 2` ends."""
    dut = DUT()
    cap = Capture(dut)

    def setup():
        yield from write(dut.streamer._payload, 32)
        yield from write(dut.streamer._gap, gap)
        for emu in dut.emulators:
            yield from write(emu._mode, MODE_COUNTER)
            yield from write(emu._rate, 2**32 - 1)

    run_streamer(dut, setup, 1500, cap)
    assert len(cap.spans) > 10
    idle = {b[0] - a[1] - 1 for a, b in zip(cap.spans, cap.spans[1:])}
    assert idle == {gap + 1 if gap else 0}


class TrackingDUT(Module):
    """DUT's streamer given the time base's next value too (timestamp_next, as the SoC gives the
    PTP clock's), or not."""
    def __init__(self, track):
        self.submodules.timebase = Timebase(clk_freq=125e6)
        self.submodules.streamer = DAQStreamer(nchannels=2, sample_width=16, buffer_bytes=512, max_payload=256,
            src_port=5001, timestamp=self.timebase.ns, timestamp_next=self.timebase.ns_next if track else None)
        self.emulators = add_emulators(self, self.streamer, with_counters=True)


@pytest.mark.parametrize("samples, flush", [(1, 0), (5, 12)])
def test_timestamp_next_gives_the_same_datagrams(samples, flush):
    """With timestamp_next the channels keep the first sample's time without choosing between
    the time and a register: every datagram must be the same, byte for byte, as without it:
    one-sample datagrams (opened and closed in one cycle), datagrams closed full, by the idle
    flush, and empty or partial ones at the stop, from sparse random pulses."""
    out = {}
    for track in (False, True):
        dut = TrackingDUT(track)
        cap = Capture(dut)

        def setup():
            yield from write(dut.streamer._payload, daqformat.HEADER_LEN + 2*samples)
            yield from write(dut.streamer._flush, flush)
            for k, emu in enumerate(dut.emulators):
                yield from write(emu._mode, MODE_PULSE)
                yield from write(emu._rate, 2**32 // (6 + 5*k))

        run_streamer(dut, setup, 1500, cap)
        out[track] = cap.datagrams
    streams = per_stream(out[True])
    assert len(streams) == 2 and all(len(s) >= 10 for s in streams.values())
    # Full ones, flushed or partial ones (samples > 1), and an empty one at the stop, perhaps.
    counts = {h.sample_count for s in streams.values() for h, _ in s} - {0}
    assert (counts == {samples}) if samples == 1 else ({samples} < counts), counts
    for s in streams.values():
        for (h0, _), (h1, _) in zip(s, s[1:]):
            assert h1.timestamp > h0.timestamp
    assert out[True] == out[False]
