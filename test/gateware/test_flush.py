"""The streamer's idle flush (gateware/daqchannel.py DAQChannel), in Migen simulation.

Bursts of samples with random (exponential) gaps, from Python's own random generator rather
than the detector emulator, are driven into the channels; every sample's admission cycle is
recorded and every datagram's last cycle at the streamer's UDP output. Checked: every sample
arrives, in order, within the flush time plus the datagram's own transfer (and, with several
channels, the datagrams queued ahead of it); a datagram closed by the flush is never empty and
says so (FLAG_FLUSH); one that fills first leaves full; sequence numbers, timestamps and drop
counts stay exact; flush 0 keeps a partial datagram until the stop."""

import random

import pytest
from migen import Module, passive, run_simulation

from ethdaq.gateware.streamer import DAQStreamer
from ethdaq.gateware.timebase import Timebase
from ethdaq.wire import daqformat

F_ = daqformat


class DUT(Module):
    def __init__(self, nchannels=1, dw=8, max_payload=256):
        self.submodules.timebase = Timebase(clk_freq=125e6)
        self.submodules.streamer = DAQStreamer(nchannels=nchannels, sample_width=16, buffer_bytes=512,
                                               max_payload=max_payload, timestamp=self.timebase.ns, dw=dw,
                                               with_stream_counters=False)


def pulse(sig):
    yield sig.eq(1)
    yield
    yield sig.eq(0)


class Source:
    """Drives one channel's sink: `pattern` is a list of idle gaps (cycles) before each sample;
    samples are 0, 1, 2, ...; records the cycle each sample is accepted."""
    def __init__(self, sink, pattern, clock):
        self.sink, self.pattern, self.clock = sink, pattern, clock
        self.accepted = []

    def run(self):
        # The channel takes a sample in every cycle of a run (it accepts it, or drops and counts
        # it, which the checks below would see): each is presented for one cycle.
        for value, gap in enumerate(self.pattern):
            for _ in range(gap):
                yield
            yield self.sink.valid.eq(1)
            yield self.sink.data.eq(value & 0xffff)
            self.accepted.append(self.clock[0])
            yield
            yield self.sink.valid.eq(0)


class Capture:
    """Datagrams at the streamer's UDP output (any dw), with the cycle of their last word."""
    def __init__(self, source, nb, clock):
        self.source, self.nb, self.clock = source, nb, clock
        self.datagrams = []   # (bytes, last cycle)

    @passive
    def run(self):
        src, cur = self.source, []
        yield src.ready.eq(1)
        while True:
            yield
            if (yield src.valid):
                data = yield src.data
                n = self.nb
                if (yield src.last) and self.nb > 1:
                    n = (yield src.last_be).bit_length()
                cur += list(data.to_bytes(self.nb, "little")[:n])
                if (yield src.last):
                    self.datagrams.append((bytes(cur), self.clock[0]))
                    cur = []


def simulate(nchannels, patterns, flush, payload=80, dw=8, tail=4000, max_payload=256):
    dut = DUT(nchannels, dw, max_payload)
    s = dut.streamer
    clock = [0]
    sources = [Source(s.sinks[i], patterns[i], clock) for i in range(nchannels)]
    cap = Capture(s.source, dw//8, clock)
    end = [0]

    @passive
    def tick():
        while True:
            yield
            clock[0] += 1

    def control():
        yield s._payload.storage.eq(payload)
        yield s._flush.storage.eq(flush)
        yield s._mac_mode.storage.eq(1)  # A fixed destination MAC: no ARP in this test.
        for _ in range(4):
            yield
        yield from pulse(s._control.fields.start)
        total = max(sum(p) + len(p) for p in patterns)
        for _ in range(total + tail):
            yield
        end[0] = clock[0]
        yield from pulse(s._control.fields.stop)
        for _ in range(600):
            yield
        assert (yield s.underrun) == 0

    gens = [control(), tick(), cap.run()]

    def delayed(src):
        for _ in range(8):  # After the start.
            yield
        yield from src.run()
    gens += [delayed(src) for src in sources]
    run_simulation(dut, gens)
    return sources, cap.datagrams, end[0]


def decode(datagrams):
    """Per stream: [(header, samples, last cycle)]."""
    out = {}
    for data, cycle in datagrams:
        h = F_.unpack_header(data)
        out.setdefault(h.stream_id, []).append((h, F_.samples(data, h), cycle))
    return out


def bursts(rng, nbursts, mean_gap, lengths, spacing=1):
    """Gaps before each sample: bursts of a length drawn from `lengths`, samples `spacing`
    cycles apart, separated by exponential gaps of mean `mean_gap` cycles."""
    pattern = []
    for _ in range(nbursts):
        pattern.append(int(rng.expovariate(1/mean_gap)))
        pattern += [spacing - 1]*(rng.choice(lengths) - 1)
    return pattern


PAYLOAD = 80                      # 20 samples a datagram: bursts fill some, not others.
MAX_SAMPLES = (PAYLOAD - 40)//2
# From a datagram's closing (its descriptor written) to its first word at the streamer's output:
# the channel FIFOs' crossing, the serializer's choice and the header's first fetch.
PIPELINE = 8
BACK_TO_BACK = 2   # Cycles between one datagram's last word and the next one's first, at most.


def check_stream(stream, n_samples, flush_cycles):
    """Every sample once, in order; sequence, FIRST, LAST, FLUSH and sizes consistent."""
    assert stream[-1][0].dropped == 0, "the test's sources must stay within the link"
    values = [v for _, s, _ in stream for v in s]
    assert values == [k & 0xffff for k in range(n_samples)], "samples lost, duplicated or reordered"
    for k, (h, s, cycle) in enumerate(stream):
        assert h.seq == k and h.dropped == 0 and not h.flags & F_.FLAG_OVERFLOW
        assert bool(h.flags & F_.FLAG_FIRST) == (k == 0)
        if h.flags & F_.FLAG_LAST:
            assert k == len(stream) - 1
            continue
        # Before the stop every datagram left full, or by the idle flush with its samples.
        assert len(s) >= 1, "a flushed datagram must never be empty"
        assert bool(h.flags & F_.FLAG_FLUSH) == (len(s) < MAX_SAMPLES)
        assert flush_cycles or len(s) == MAX_SAMPLES
    assert stream[-1][0].flags & F_.FLAG_LAST
    for (h0, _, _), (h1, _, _) in zip(stream, stream[1:]):
        assert h1.timestamp >= h0.timestamp


def closing_delays(stream, accepted, nb):
    """Per datagram before the stop: (cycles from its last sample's admission to its first word
    out, cycles from the previous datagram's last word to its first, flags)."""
    out, k, prev_end = [], 0, None
    for h, s, cycle in stream:
        if h.flags & F_.FLAG_LAST:
            break
        k += len(s)
        start = cycle - (40 + 2*len(s) + nb - 1)//nb + 1
        out.append((start - accepted[k - 1], None if prev_end is None else start - prev_end, h.flags))
        prev_end = cycle
    assert k == len(accepted), "every sample leaves before the stop"
    return out


def check_flush_bound(delays, flush):
    """A flushed datagram starts within flush + 1 + PIPELINE cycles of its last sample, unless
    the stream's previous datagram was still going out: then right after it (its wire time)."""
    flushed = [(d, q) for d, q, f in delays if f & F_.FLAG_FLUSH]
    for d, q in flushed:
        assert d >= flush + 1, "a flushed datagram waits the flush time, no less"
        assert d <= flush + 1 + PIPELINE or (q is not None and q <= BACK_TO_BACK), \
            f"a burst's last sample waited {d} cycles, {q} after the datagram before"
    return flushed


@pytest.mark.parametrize("dw", [8, 64])
def test_bursts_leave_within_the_flush_time(dw):
    """One channel, Poisson bursts of 1 to 50 samples: each burst's datagram leaves at most
    flush + 1 cycles after its last sample, plus the fixed pipeline and its own words; nothing
    waits for the next burst or the stop."""
    flush, nb = 40, dw//8
    rng = random.Random(35)
    pattern = bursts(rng, 30, 150, [1, 2, 3, 5, 8, 19, 20, 21, 50], spacing=3)
    sources, datagrams, stopped = simulate(1, [pattern], flush, payload=PAYLOAD, dw=dw, tail=4*flush)
    stream = decode(datagrams)[0]
    check_stream(stream, len(pattern), flush)
    flushed = check_flush_bound(closing_delays(stream, sources[0].accepted, nb), flush)
    assert len(flushed) >= 20, "most bursts end in a flushed datagram"


def test_flush_with_several_channels_waits_only_for_the_wire():
    """Four channels bursting independently: a flushed datagram may queue behind others, but
    between its flush time and its first word the output is busy with other datagrams (no idle
    cycles beyond the fixed pipeline and the gaps between datagrams)."""
    flush, n = 40, 4
    rng = random.Random(7)
    patterns = [bursts(rng, 10, 300, [1, 4, 10, 20, 30], spacing=8) for _ in range(n)]
    sources, datagrams, stopped = simulate(n, patterns, flush, payload=PAYLOAD, tail=4*flush)
    streams = decode(datagrams)
    spans = []
    for data, cycle in datagrams:
        spans.append((cycle - len(data) + 1, cycle))
    checked = 0
    for i in range(n):
        check_stream(streams[i], len(patterns[i]), flush)
        for (d, q, f), (h, s, cycle) in zip(closing_delays(streams[i], sources[i].accepted, 1), streams[i]):
            if not f & F_.FLAG_FLUSH:
                continue
            start = cycle - (40 + 2*len(s)) + 1
            due = start - d + flush + 1
            busy = [(max(a, due), min(b + 1, start)) for a, b in spans if b >= due and a < start]
            idle = (start - due) - sum(b - a for a, b in busy)
            assert idle <= PIPELINE + BACK_TO_BACK*len(busy), \
                f"stream {i}: {idle} idle cycles between its flush time and its first word"
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("spacing", [3, 20, 40])
def test_flush_never_splits_a_datagram_that_is_still_filling(spacing):
    """Samples at most the flush time apart (from one every 3 cycles, the 8-bit path's line rate
    at this payload, to one every `flush` cycles) fill whole datagrams: none leaves flushed
    before the stream goes idle."""
    flush = 40
    pattern = [0] + [spacing - 1]*(3*MAX_SAMPLES + 7 - 1)
    sources, datagrams, stopped = simulate(1, [pattern], flush, payload=PAYLOAD, tail=4*flush)
    stream = decode(datagrams)[0]
    sizes = [len(s) for h, s, _ in stream]
    flags = [h.flags for h, s, _ in stream]
    assert sizes[:3] == [MAX_SAMPLES]*3 and not any(f & F_.FLAG_FLUSH for f in flags[:3])
    # The 7 samples after the last full datagram leave by the flush, before the stop.
    assert sizes[3] == 7 and flags[3] & F_.FLAG_FLUSH
    assert flags[4] & F_.FLAG_LAST and sizes[4] == 0
    check_stream(stream, len(pattern), flush)


@pytest.mark.parametrize("gap", [38, 39, 40, 41])
def test_a_sample_arriving_as_the_flush_falls_due_is_neither_lost_nor_alone(gap):
    """Samples about the flush time apart (gap idle cycles between them): whether the datagram
    closes with the sample, before it, or not at all, every sample arrives once and every
    datagram before the stop holds samples. Samples at most `flush` cycles apart never flush;
    flush + 1 apart, each arrives as the flush falls due and closes the datagram with it."""
    flush = 40
    pattern = [0] + [gap]*12
    sources, datagrams, stopped = simulate(1, [pattern], flush, payload=PAYLOAD, tail=4*flush)
    stream = decode(datagrams)[0]
    check_stream(stream, len(pattern), flush)
    sizes = [len(s) for h, s, _ in stream[:-1]]
    if gap + 1 <= flush:
        assert sizes == [len(pattern)]
    elif gap + 1 == flush + 1:
        assert sizes == [2]*6 + [1]
    else:
        assert sizes == [1]*len(pattern)


def test_flush_off_keeps_the_partial_datagram_until_the_stop():
    pattern = [0]*10
    sources, datagrams, stopped = simulate(1, [pattern], 0, payload=PAYLOAD, tail=2000)
    stream = decode(datagrams)[0]
    assert len(stream) == 1 and len(stream[0][1]) == 10
    assert stream[0][0].flags & F_.FLAG_LAST and not stream[0][0].flags & F_.FLAG_FLUSH
    assert stream[0][2] > stopped, "with flush 0 the datagram leaves only at the stop"
