"""FrameCrossing (gateware/framecrossing.py) in Migen simulation, two clocks: a writer that never
waits (a word a cycle, frames back to back, as a PHY's receiver hands them over) into a slower
reader, so the crossing fills. What comes out is whole frames, in order, each exactly as it went
in; every other frame is counted once, as `long` if it had more words than the crossing holds
and as `full` otherwise; and nothing is dropped while there is room."""

import random

import pytest
from migen import Module, passive, run_simulation

from liteeth.common import eth_phy_description

from ethdaq.gateware.framecrossing import FrameCrossing

DEPTH = 32


class DUT(Module):
    def __init__(self):
        self.submodules.crossing = FrameCrossing(eth_phy_description(64), DEPTH, "w", "sys")


def frames_of(rng, count, longest):
    """`count` frames of 1 to `longest` words: (data, last_be, error) per word."""
    out = []
    for _ in range(count):
        n = rng.randint(1, longest)
        out.append([(rng.getrandbits(64), 1 << rng.randrange(8) if k == n - 1 else 0, rng.getrandbits(8))
                    for k in range(n)])
    return out


def write(sink, frames, gaps, rng, drain):
    for frame in frames:
        for k, (data, last_be, error) in enumerate(frame):
            yield sink.valid.eq(1)
            yield sink.data.eq(data)
            yield sink.last_be.eq(last_be)
            yield sink.error.eq(error)
            yield sink.last.eq(k == len(frame) - 1)
            yield
        yield sink.valid.eq(0)
        for _ in range(gaps(rng)):
            yield
    yield sink.valid.eq(0)
    for _ in range(drain):    # The reader empties the crossing.
        yield


@passive
def count(dut, counts):
    while True:
        yield
        counts["full"] += (yield dut.crossing.full)
        counts["long"] += (yield dut.crossing.long)


@passive
def read(source, out, ready, rng):
    cur = []
    while True:
        take = int(rng.random() < ready)
        yield source.ready.eq(take)
        yield
        if take and (yield source.valid):
            cur.append(((yield source.data), (yield source.last_be), (yield source.error)))
            if (yield source.last):
                out.append(cur)
                cur = []


def run(frames, ready, gaps, seed, drain=500):
    dut = DUT()
    out, counts = [], {"full": 0, "long": 0}
    rng = random.Random(seed)
    run_simulation(dut, {"w": [write(dut.crossing.sink, frames, gaps, rng, drain), count(dut, counts)],
                         "sys": [read(dut.crossing.source, out, ready, random.Random(seed + 1))]},
                   clocks={"w": 4, "sys": 5})
    return out, counts


def assert_whole_frames_in_order(frames, out):
    """`out` is `frames` with some left out: whole, unchanged, in order."""
    it = iter(frames)
    for f in out:
        assert any(f == g for g in it), "a frame came out that did not go in whole, or out of order"


@pytest.mark.parametrize("ready", [1.0, 0.5])
def test_a_burst_leaves_whole_frames_and_counts_each_dropped_one_once(ready):
    rng = random.Random(7)
    frames = frames_of(rng, 300, DEPTH + 8)
    out, counts = run(frames, ready, gaps=lambda r: 0, seed=int(ready * 10))
    assert_whole_frames_in_order(frames, out)
    longer = sum(1 for f in frames if len(f) > DEPTH)
    assert counts["long"] == longer and longer > 10
    assert counts["full"] > 20 and len(out) > 50       # The burst overfills; much still gets through.
    assert len(out) + counts["full"] + counts["long"] == len(frames)


def test_nothing_is_dropped_while_the_reader_keeps_up():
    rng = random.Random(3)
    frames = frames_of(rng, 200, DEPTH)
    out, counts = run(frames, 1.0, gaps=lambda r: 2 * 8, seed=5)   # Gaps: the reader catches up.
    assert out == frames and counts == {"full": 0, "long": 0}
