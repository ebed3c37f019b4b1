"""LatencyProbe (gateware/probe.py), in Migen simulation: the bench drives start and end events
per class at cycles it chooses, keeps its own list of latencies, and compares every statistic the
probe reports through its CSRs (count, sum, min, max, each histogram bin) with its own; events of
several classes in the same cycle, ends without starts, too many starts waiting, saturation and
clearing."""

import random

from migen import *
from migen.sim import passive, run_simulation

from ethdaq.gateware.probe import LAT_BITS, NBINS, LatencyProbe, bin_of


def read_class(dut, c):
    yield dut._select.storage.eq(c)
    for _ in range(6):   # MultiReg, then the POP state copies the words.
        yield
    out = {"count": (yield dut._count.status), "sum": (yield dut._sum.status), "sumsq": (yield dut._sumsq.status),
           "min": (yield dut._min.status), "max": (yield dut._max.status), "bins": []}
    for b in range(NBINS):
        yield dut._bin.storage.eq(b)
        for _ in range(6):
            yield
        out["bins"].append((yield dut._bin_count.status))
    return out


def expected(lats, lat_bits=LAT_BITS):
    lats = [min(l, 2**lat_bits - 1) for l in lats]
    bins = [0] * NBINS
    for l in lats:
        bins[bin_of(l, lat_bits)] += 1
    return {"count": len(lats), "sum": sum(lats), "sumsq": sum(l * l for l in lats),
            "min": min(lats) if lats else 2**lat_bits - 1,
            "max": max(lats) if lats else 0, "bins": bins}


def schedule(nclasses, frames, rng, max_lat=1000):
    """Per class, non-overlapping (start, end) pairs, a few in flight at once; {cycle: [(kind, class)]}."""
    events, lats = {}, {c: [] for c in range(nclasses)}
    for c in range(nclasses):
        t = rng.randrange(50, 200)
        pending = []
        for _ in range(frames):
            lat = rng.choice([1, 2, 3, rng.randrange(4, 64), rng.randrange(64, max_lat)])
            start = t
            end = max(start + lat, pending[-1] + 2 if pending else 0)   # Ends of a class: two cycles apart at least.
            pending.append(end)
            events.setdefault(start, []).append(("start", c))
            events.setdefault(end, []).append(("end", c))
            lats[c].append(end - start)
            t = start + rng.randrange(1, 40) if rng.random() < 0.5 else end + rng.randrange(1, 300)
            pending = [e for e in pending if e > t]
            while len(pending) >= 3:       # Keep within the probe's 4 waiting starts.
                t = pending.pop(0) + 1
    # Then ends of every class in the same cycles: the probe's queue takes one result a cycle.
    t = max(events) + 100
    for k in range(3):
        for c in range(nclasses):
            lat = rng.randrange(1, 90)
            events.setdefault(t - lat, []).append(("start", c))
            events.setdefault(t, []).append(("end", c))
            lats[c].append(lat)
        t += 100
    return events, lats


def drive(dut, events, last):
    for cycle in range(last + 1):
        s = e = 0
        for kind, c in events.get(cycle, []):
            if kind == "start":
                s |= 1 << c
            else:
                e |= 1 << c
        yield dut.start.eq(s)
        yield dut.end.eq(e)
        yield
    yield dut.start.eq(0)
    yield dut.end.eq(0)


def test_statistics_agree_with_the_benchs_own_cycle_counts():
    rng = random.Random(5)
    n = 4
    dut = LatencyProbe(n)
    events, lats = schedule(n, 25, rng)
    last = max(events)
    got = {}

    def bench():
        for _ in range(n * NBINS + 10):   # The clearing walk after reset.
            yield
        yield from drive(dut, events, last)
        for _ in range(40):
            yield
        for c in range(n):
            got[c] = yield from read_class(dut, c)
        got["unpaired"] = yield dut._unpaired.status
        got["overflows"] = yield dut._overflows.status

    run_simulation(dut, bench())
    # Same-cycle events of different classes happened (the test exercises the queue).
    assert any(len({c for k, c in ev if k == "end"}) > 1 for ev in events.values())
    assert (got["unpaired"], got["overflows"]) == (0, 0)
    for c in range(n):
        assert got[c] == expected(lats[c]), c


def test_unpaired_events_are_counted_not_recorded_and_long_latencies_saturate():
    # Latencies of 10 bits here (16 on the board) keep the saturation case short.
    dut = LatencyProbe(2, inflight=2, lat_bits=10)
    got = {}

    def pulse(sig, c):
        yield sig.eq(1 << c)
        yield
        yield sig.eq(0)

    def bench():
        for _ in range(2 * NBINS + 10):
            yield
        yield from pulse(dut.end, 0)            # An end with nothing waiting.
        for _ in range(3):                      # Three starts, room for two.
            yield from pulse(dut.start, 1)
        yield
        yield from pulse(dut.end, 1)
        yield from pulse(dut.end, 1)
        yield from pulse(dut.start, 0)          # A latency beyond 2^10 - 1 cycles.
        for _ in range(2**10 + 100):
            yield
        yield from pulse(dut.end, 0)
        for _ in range(20):
            yield
        got[0] = yield from read_class(dut, 0)
        got[1] = yield from read_class(dut, 1)
        got["unpaired"] = yield dut._unpaired.status
        # Clearing empties everything.
        yield dut._clear.re.eq(1)
        yield
        yield dut._clear.re.eq(0)
        for _ in range(2 * NBINS + 20):
            yield
        got["cleared"] = yield from read_class(dut, 1)
        got["unpaired_after"] = yield dut._unpaired.status

    run_simulation(dut, bench())
    assert got[0] == expected([2**10 + 200], lat_bits=10)   # Saturated: 1023, in the last bin.
    assert got[0]["bins"][bin_of(2**10 - 1, 10)] == 1 and got[0]["max"] == 2**10 - 1
    assert got[1]["count"] == 2
    assert got["unpaired"] == 2                       # The lone end and the third start.
    assert got["cleared"] == expected([], lat_bits=10) and got["unpaired_after"] == 0


def test_latest_mode_end_ages_offsets_and_expired_starts():
    """Class 0, "latest": starts at every frame, ends for some: each end pairs with the newest
    start. Class 1, "fifo" with an offset of 3 cycles and ends that come 5 cycles late (end_age):
    the latencies are end - 5 + 3 - start. Class 2: a start that never ends expires after
    2^(stamp_bits-1) cycles, counted, and the next start-end pair is recorded right."""
    dut = LatencyProbe(3, modes=["latest", "fifo", "fifo"], offsets=[0, 3, 0], stamp_bits=14, lat_bits=12)
    got = {}

    def at(cycle, start=0, end=0, age=0):
        while (yield now) < cycle:
            yield
        yield dut.start.eq(start)
        yield dut.end.eq(end)
        yield dut.end_age[1].eq(age)
        yield
        yield dut.start.eq(0)
        yield dut.end.eq(0)

    now = Signal(32)
    dut.sync += now.eq(now + 1)

    def bench():
        t = 3 * NBINS + 10
        # Class 0: starts at t, t+100, t+200; ends at t+110 (pairs with t+100) and t+203; an
        # end at t+250 finds its start used up (unpaired).
        yield from at(t, start=1)
        yield from at(t + 100, start=1)
        yield from at(t + 110, end=1)
        yield from at(t + 200, start=1)
        yield from at(t + 203, end=1)
        yield from at(t + 250, end=1)
        # Class 1: start t+300, end seen at t+340 marking t+335: 335 - 300 + 3 = 38.
        yield from at(t + 300, start=2)
        yield from at(t + 340, end=2, age=5)
        # Class 2: a lost frame's start at t+400, never ended; it expires 2^13 cycles later.
        yield from at(t + 400, start=4)
        yield from at(t + 400 + 2**13 + 50, start=4)
        yield from at(t + 400 + 2**13 + 70, end=4)
        for _ in range(20):
            yield
        for c in range(3):
            got[c] = yield from read_class(dut, c)
        got["unpaired"] = yield dut._unpaired.status

    run_simulation(dut, bench())
    assert got[0] == expected([10, 3], lat_bits=12)
    assert got[1] == expected([38], lat_bits=12)
    assert got[2] == expected([20], lat_bits=12)
    assert got["unpaired"] == 2          # Class 0's third end and class 2's expired start.


def test_modes_and_offsets_are_checked():
    import pytest
    with pytest.raises(ValueError, match="modes"):
        LatencyProbe(2, modes=["fifo", "lifo"])
    with pytest.raises(ValueError, match="offsets"):
        LatencyProbe(2, offsets=[0, 300])


def test_single_mode_refuses_ambiguous_pairs_and_stamp_mode_takes_its_start_along():
    """Class 0, "single" with a start age of 2: a start, its end (recorded; `held` shows the stamp
    while it waits); two starts before an end (a frame lost on the way): that end and nothing
    else is refused, and the next pair is recorded. Class 1, "stamp": ends bring the stamp that
    class 0 held (as the mailbox carries it with the datagram)."""
    dut = LatencyProbe(2, modes=["single", "stamp"], offsets=[1, 1])
    now = Signal(32)
    dut.sync += now.eq(now + 1)
    got, carried = {}, []

    def at(cycle, **pulses):
        while (yield now) < cycle:
            yield
        for name, c in pulses.items():
            if name == "held":
                carried.append(((yield dut.held[0]), (yield dut.held_stamp[0])))
                continue
            if name in ("start", "end"):
                yield getattr(dut, name)[c].eq(1)
        if "stamp_end" in pulses:
            ok, stamp = carried[pulses["stamp_end"]]
            yield dut.end_stamped[1].eq(ok)
            yield dut.end_stamp[1].eq(stamp)
            yield dut.end[1].eq(1)
        yield dut.start_age[0].eq(2)
        yield
        yield dut.start.eq(0)
        yield dut.end.eq(0)

    def bench():
        t = 2 * NBINS + 10
        yield from at(t, start=0)                 # Stamped t - 2.
        yield from at(t + 30, held=0, end=0)      # 30 + 2 + 1 = 33.
        yield from at(t + 100, start=0)           # This frame is lost...
        yield from at(t + 200, start=0)           # ... so this start finds one waiting.
        yield from at(t + 230, held=0, end=0)     # Not held (ambiguous): refused.
        yield from at(t + 300, start=0)
        yield from at(t + 340, held=0, end=0)     # 40 + 2 + 1 = 43.
        yield from at(t + 500, stamp_end=0)       # The first datagram, seen 500 - (-2) + 1 = 503.
        yield from at(t + 600, stamp_end=1)       # The ambiguous one: no stamp, refused.
        yield from at(t + 700, stamp_end=2)       # 700 - 300 + 2 + 1 = 403.
        for _ in range(20):
            yield
        got[0] = yield from read_class(dut, 0)
        got[1] = yield from read_class(dut, 1)
        got["unpaired"] = yield dut._unpaired.status

    run_simulation(dut, bench())
    assert [ok for ok, _ in carried] == [1, 0, 1]
    assert got[0] == expected([33, 43])
    assert got[1] == expected([503, 403])
    assert got["unpaired"] == 2
