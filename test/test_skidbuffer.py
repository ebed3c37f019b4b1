"""gateware/skidbuffer.py: every word through once, in order, at full rate, under random valid and
ready; and each output a flip-flop (LiteX's Buffer with the same two stages has a LUT of two on
each, which is what SkidBuffer is for)."""

import random

import pytest
from migen import Signal, run_simulation
from migen.fhdl.structure import _Assign, If, Case
from migen.fhdl.tools import list_signals, list_targets

from litex.soc.interconnect import stream

from ethdaq.gateware.skidbuffer import SkidBuffer

LAYOUT = [("data", 8)]


def run(dut, words, p_valid, p_ready, seed):
    rng = random.Random(seed)
    out, cycles = [], [0]

    def source():
        for w in words:
            while rng.random() >= p_valid:
                yield dut.sink.valid.eq(0)
                yield
            yield dut.sink.valid.eq(1)
            yield dut.sink.data.eq(w)
            yield dut.sink.last.eq(w == words[-1])
            yield
            while not (yield dut.sink.ready):
                yield
        yield dut.sink.valid.eq(0)

    def sink():
        while len(out) < len(words):
            r = rng.random() < p_ready
            yield dut.source.ready.eq(r)
            yield
            cycles[0] += 1
            if r and (yield dut.source.valid):
                out.append((yield dut.source.data))
            assert cycles[0] < 100*len(words) + 100, "stalled"

    run_simulation(dut, [source(), sink()])
    return out, cycles[0]


@pytest.mark.parametrize("p_valid,p_ready", [(1.0, 1.0), (0.5, 1.0), (1.0, 0.3), (0.7, 0.6)])
def test_every_word_once_in_order(p_valid, p_ready):
    words = [random.Random(p_valid + p_ready).randrange(256) for _ in range(300)]
    for seed in range(3):
        out, _ = run(SkidBuffer(LAYOUT), words, p_valid, p_ready, seed)
        assert out == words


def test_full_rate():
    words = list(range(200))
    out, cycles = run(SkidBuffer(LAYOUT), words, 1.0, 1.0, 0)
    assert out == words and cycles <= len(words) + 3


def registers_behind(dut, signal):
    """The flip-flops `signal` is a combinational function of (through every comb statement)."""
    frag = dut.get_fragment()
    sync = set()
    for stmts in frag.sync.values():
        for s in stmts:
            sync |= list_targets(s)
    deps = {}
    for s in frag.comb:
        for t in list_targets(s):
            deps.setdefault(t, set()).update(list_signals(s) - {t})
    seen, todo, regs = set(), [signal], set()
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        if x in sync:
            regs.add(x)
        todo.extend(deps.get(x, ()))
    return regs, seen


@pytest.mark.parametrize("name", ["sink.ready", "source.valid", "source.data"])
def test_each_output_is_one_flip_flop(name):
    def output(dut):
        end, field = name.split(".")
        return getattr(getattr(dut, end), field)
    skid = SkidBuffer(LAYOUT)
    regs, seen = registers_behind(skid, output(skid))
    assert len(regs) == 1, regs
    assert not {skid.sink.valid, skid.source.ready} & seen
    # LiteX's Buffer with the same stages: a function of two registers.
    litex = stream.Buffer(LAYOUT, pipe_valid=True, pipe_ready=True)
    regs, _ = registers_behind(litex, output(litex))
    assert len(regs) >= 2
