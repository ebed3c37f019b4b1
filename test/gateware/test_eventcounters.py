"""EventCounters (gateware/eventcounters.py): 32-bit counters of sys events, each kept in a RAM
from the low bits of the core's own counter. Against a plain Python count of the same events:
sources that rise every cycle, in bursts and never; counts read through the CSR window while
they rise (never ahead of the true count, never behind by more than one round) and exact once
they stop; counts from 0 after reset, whatever the sources held; and the low bits really are all
it reads (a source's upper bits may hold anything)."""

import random

import pytest

from migen.fhdl.verilog import convert
from migen import If, Module, Signal, run_simulation

from ethdaq.gateware.eventcounters import EventCounters


class Dut(Module):
    def __init__(self, n, width=32):
        self.counters = [Signal(width, name=f"src{i}") for i in range(n)]
        self.inc      = [Signal(name=f"inc{i}") for i in range(n)]
        self.sync += [If(inc, c.eq(c + 1)) for inc, c in zip(self.inc, self.counters)]
        self.submodules.ev = EventCounters([(f"e{i}", c) for i, c in enumerate(self.counters)])


def read(dut, i):
    yield dut.ev._select.storage.eq(i)
    yield
    yield
    return (yield dut.ev._count.status)


def run(n, patterns, cycles, reads=(), start=None):
    """Drive source i by patterns[i](cycle) -> 0/1 for `cycles`; read counts at cycles in
    `reads` (each a (cycle, i)); then idle and read every count. Returns (true counts, reads
    [(i, value, true count before, true count after)], final counts)."""
    dut   = Dut(n)
    true  = [0]*n
    got   = []
    final = []

    def gen():
        if start is not None:   # Sources that hold something before the counts start.
            for c, v in zip(dut.counters, start):
                yield c.eq(v)
        pending = sorted(reads)
        for t in range(cycles):
            for i in range(n):
                b = patterns[i](t)
                yield dut.inc[i].eq(b)
            yield
            for i in range(n):
                true[i] += (yield dut.inc[i])
            while pending and pending[0][0] <= t:
                _, i = pending.pop(0)
                before = true[i]
                yield dut.ev._select.storage.eq(i)
                for _ in range(2):      # The read's two cycles move the sources on too.
                    yield
                    for j in range(n):
                        true[j] += (yield dut.inc[j])
                v = yield dut.ev._count.status
                got.append((i, v, before, true[i]))
        for i in range(n):
            yield dut.inc[i].eq(0)
        yield
        for _ in range(2*n + 4):
            yield
        for i in range(n):
            final.append((yield from read(dut, i)))

    run_simulation(dut, gen())
    return true, got, final, dut


@pytest.mark.parametrize("n", [1, 3, 11, 16])
def test_counts_match_the_events_exactly(n):
    rng = random.Random(n)
    # From the second round on (the first takes the sources' bits as they are: see the next test).
    quiet = n + 1
    bursts = [set(t for t in range(rng.randrange(400)) if rng.random() < 0.6) for _ in range(n)]
    patterns = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            patterns.append(lambda t: 1)                          # Every cycle.
        elif kind == 1:
            patterns.append(lambda t, b=bursts[i]: int(t in b))  # Bursts.
        elif kind == 2:
            patterns.append(lambda t: 0)                          # Never.
        else:
            patterns.append(lambda t, r=random.Random(i): int(r.random() < 0.3))
    patterns = [lambda t, p=p: p(t) if t >= quiet else 0 for p in patterns]
    reads = [(rng.randrange(50, 600), rng.randrange(n)) for _ in range(20)]
    true, got, final, dut = run(n, patterns, 700, reads)
    assert final == true
    rounds = n + 3   # A read's value is at most one round of visits, and the read itself, old.
    for i, v, before, after in got:
        assert v <= after, f"event {i}: read {v}, ahead of the {after} counted"
        assert v >= before - rounds, f"event {i}: read {v}, more than a round behind {before}"


def test_counts_start_at_zero_whatever_the_sources_held():
    start = [0xFFFFFFF7, 12345, 5]
    true, got, final, dut = run(3, [lambda t: 1, lambda t: int(t % 3 == 0), lambda t: 0], 100, start=start)
    # The sources' values before the counts started are not counted; events after the first
    # round are (the first round takes the sources' bits as they are: its cycles' events are not).
    n = 3
    for i in range(n):
        assert true[i] - (n + 1) <= final[i] <= true[i]
    assert final[2] == 0


def test_only_the_low_bits_of_a_source_are_read():
    a, b, c = Signal(32, name="a"), Signal(32, name="b"), Signal(32, name="c")
    dut = EventCounters([("a", a), ("b", b), ("c", c)])
    text = str(convert(dut, ios={a, b, c, dut._select.storage, dut._count.status}))
    # Three sources need two bits each (2**2 > 3): no wider slice of a source is read.
    assert "a[1:0]" in text and "a[31" not in text and "a[2]" not in text


def test_bad_sources_are_refused():
    with pytest.raises(ValueError, match="at least one"):
        EventCounters([])
    with pytest.raises(ValueError, match="must differ"):
        EventCounters([("a", Signal(8)), ("a", Signal(8))])
