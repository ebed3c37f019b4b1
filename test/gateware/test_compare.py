"""Comparisons with a constant as gates (gateware/compare.py), against Python's comparisons for
every value of the signal, with constants inside, at and beyond its range."""

import operator

import pytest

from migen import Module, Signal, run_simulation

from ethdaq.gateware.compare import above, at_least, at_most, below

CASES = [(6, range(-2, 70)), (11, (0, 1, 2, 7, 8, 1023, 1024, 1480, 2047, 2048, 5000))]


@pytest.mark.parametrize("gates, op", [(at_most, operator.le), (below, operator.lt), (above, operator.gt),
                                       (at_least, operator.ge)])
@pytest.mark.parametrize("width, constants", CASES)
def test_gates_are_the_comparison(gates, op, width, constants):
    x = Signal(width)
    m, outs = Module(), []
    for k in constants:
        out = Signal()
        m.comb += out.eq(gates(x, k))
        outs.append((k, out))
    got = {k: [] for k in constants}

    def gen():
        for v in range(2**width):
            yield x.eq(v)
            yield
            for k, out in outs:
                got[k].append((yield out))
    run_simulation(m, gen())
    for k in constants:
        assert got[k] == [int(op(v, k)) for v in range(2**width)], k
