"""RegisteredBuffer: every word through once, in order, at full rate, under random back-pressure
and gaps; `sink.ready` a function of its own registers only, never of `source.ready` in the same
cycle (the property it exists for, which LiteX's stream.Buffer does not have)."""

import random

from migen import *
from migen.fhdl.tools import list_signals, list_targets

from litex.soc.interconnect import stream

from ethdaq.gateware.regbuffer import RegisteredBuffer

LAYOUT = [("data", 16)]


def run(valid_p, ready_p, n=400, seed=1):
    rng = random.Random(seed)
    dut = RegisteredBuffer(LAYOUT)
    sent, got = list(range(1, n + 1)), []

    def producer():
        i = 0
        while i < n:
            v = rng.random() < valid_p
            yield dut.sink.valid.eq(v)
            yield dut.sink.data.eq(sent[i])
            yield
            if v and (yield dut.sink.ready):
                i += 1
        yield dut.sink.valid.eq(0)

    def consumer():
        for _ in range(20 * n):
            r = rng.random() < ready_p
            yield dut.source.ready.eq(r)
            yield
            if r and (yield dut.source.valid):
                got.append((yield dut.source.data))
            if len(got) == n:
                return

    run_simulation(dut, [producer(), consumer()])
    return sent, got


def test_every_word_once_in_order_under_back_pressure():
    for valid_p, ready_p in ((1.0, 1.0), (0.7, 0.4), (0.3, 0.9), (1.0, 0.5)):
        sent, got = run(valid_p, ready_p, seed=int(10 * valid_p + ready_p * 100))
        assert got == sent, (valid_p, ready_p)


def test_full_rate_without_back_pressure():
    dut = RegisteredBuffer(LAYOUT)
    out = []

    def bench():
        yield dut.source.ready.eq(1)
        yield dut.sink.valid.eq(1)
        for i in range(1, 101):
            yield dut.sink.data.eq(i)
            yield
            assert (yield dut.sink.ready)
            if (yield dut.source.valid):
                out.append((yield dut.source.data))
        yield dut.sink.valid.eq(0)
        for _ in range(3):
            yield
            if (yield dut.source.valid):
                out.append((yield dut.source.data))
    run_simulation(dut, bench())
    assert out == list(range(1, 101))   # One word a cycle, one cycle of latency.


def test_sink_ready_is_a_register_and_litex_buffer_s_is_not():
    ours = RegisteredBuffer(LAYOUT)
    frag = ours.get_fragment()
    regs = set().union(*(list_targets(s) for s in frag.sync["sys"]))
    comb = {t: s for s in frag.comb for t in list_targets(s)}
    inputs = _cone(ours.sink.ready, comb)
    assert len(inputs) == 1 and inputs <= regs, inputs   # One register (inverted), nothing else.
    litex = stream.Buffer(LAYOUT, pipe_valid=True, pipe_ready=True)
    frag = litex.get_fragment()
    regs = set().union(*(list_targets(s) for s in frag.sync["sys"]))
    comb = {t: s for s in frag.comb for t in list_targets(s)}
    assert len(_cone(litex.sink.ready, comb) & regs) == 2   # valid and valid_d: a LUT, not a register.


def _cone(signal, comb):
    """The registers and inputs `signal` depends on through combinational statements."""
    seen, todo, leaves = set(), [signal], set()
    while todo:
        s = todo.pop()
        if s in seen:
            continue
        seen.add(s)
        if s in comb:
            todo += [x for x in list_signals(comb[s]) if x is not s]
        else:
            leaves.add(s)
    return leaves
