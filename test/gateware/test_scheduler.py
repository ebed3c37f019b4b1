"""FrameScheduler (gateware/scheduler.py), in Migen simulation: frames pass whole and in order,
never interleaved; strict priority at frame boundaries; back-to-back frames of one source keep
the line busy with no idle cycle."""

import random

import pytest
from migen import *

from ethdaq.gateware.scheduler import FrameScheduler


def source(ep, frames, gaps, rng, log):
    """Feed frames (lists of bytes) on endpoint ep, with random idle gaps between frames."""
    for frame in frames:
        for _ in range(gaps(rng)):
            yield
        for i, byte in enumerate(frame):
            yield ep.valid.eq(1)
            yield ep.data.eq(byte)
            yield ep.last.eq(i == len(frame) - 1)
            yield
            while not (yield ep.ready):
                yield
        yield ep.valid.eq(0)
        log.append(frame)


def sink(ep, out, ready, rng, cycles):
    current = []
    for cycle in range(cycles):
        r = ready(rng)
        yield ep.ready.eq(r)
        yield
        if (yield ep.valid) and r:
            current.append(((yield ep.data), cycle))
            if (yield ep.last):
                out.append(current)
                current = []


def frames_for(tag, count, rng, maxlen=20):
    # First byte says which input a frame came from, second its number.
    return [[tag, k] + [rng.randrange(256) for _ in range(rng.randrange(0, maxlen))] for k in range(count)]


@pytest.mark.parametrize("seed", range(4))
def test_frames_whole_in_order_never_interleaved(seed):
    rng = random.Random(seed)
    n = 3
    dut = FrameScheduler(n)
    inputs = [frames_for(i, 12, rng) for i in range(n)]
    out, logs = [], [[] for _ in range(n)]
    gens = [source(dut.sinks[i], inputs[i], lambda r: r.randrange(0, 30), random.Random(seed*10 + i), logs[i])
            for i in range(n)]
    gens.append(sink(dut.source, out, lambda r: r.random() < 0.7, random.Random(seed + 100), 6000))
    run_simulation(dut, gens)
    got = [[b for b, _ in f] for f in out]
    for i in range(n):
        assert [f for f in got if f[0] == i] == inputs[i]   # Every frame, whole, in order.
    assert len(got) == sum(len(x) for x in inputs)


def test_strict_priority_at_frame_boundaries_and_no_gap_between_back_to_back_frames():
    dut = FrameScheduler(2)
    low  = [[1, k] + [0xAA]*30 for k in range(3)]   # Input 1: three long frames, back to back.
    high = [[0, 0, 0x55, 0x55]]                     # Input 0: arrives during input 1's first frame.
    out, logs = [], [[], []]

    def late_high():
        for _ in range(10):
            yield
        yield from source(dut.sinks[0], high, lambda r: 0, None, logs[0])

    gens = [source(dut.sinks[1], low, lambda r: 0, None, logs[1]), late_high(),
            sink(dut.source, out, lambda r: True, None, 400)]
    run_simulation(dut, gens)
    order = [(f[0][0], f[1][0]) for f in out]
    # Input 0 goes out right after the frame it arrived during, before input 1's waiting frames.
    assert order == [(1, 0), (0, 0), (1, 1), (1, 2)]
    # Input 1's second and third frames are back to back: no idle cycle between them.
    assert out[3][0][1] == out[2][-1][1] + 1
    # The first frame comes from input 1 while the choice is still input 0 (its reset value):
    # switching costs one cycle.
    assert out[0][0][1] == 1


def test_the_source_that_sent_last_starts_again_without_a_switch_cycle():
    dut = FrameScheduler(2, idle_choice=1)
    frames = [[1, k, 0x11, 0x22] for k in range(3)]
    out, log = [], []
    # Idle gaps between the frames: the choice stays on input 1, so each frame starts the cycle
    # it is offered (the data path's latency does not depend on what came before).
    gens = [source(dut.sinks[1], frames, lambda r: 5, None, log), sink(dut.source, out, lambda r: True, None, 100)]
    run_simulation(dut, gens)
    starts = [f[0][1] for f in out]
    assert [[b for b, _ in f] for f in out] == frames
    assert starts == [5, 5 + 4 + 5, 5 + 2*(4 + 5)]


def test_frame_counters():
    dut = FrameScheduler(2)
    rng = random.Random(7)
    inputs = [frames_for(i, 5, rng) for i in range(2)]
    out, logs = [], [[], []]
    counts = {}

    def read():
        for _ in range(1500):
            yield
        counts["frames"] = []
        for f in dut.frames:
            counts["frames"].append((yield f))

    gens = [source(dut.sinks[i], inputs[i], lambda r: r.randrange(0, 5), random.Random(i), logs[i]) for i in range(2)]
    gens += [sink(dut.source, out, lambda r: True, None, 1400), read()]
    run_simulation(dut, gens)
    assert counts["frames"] == [5, 5]
