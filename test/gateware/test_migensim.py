"""The compiled Migen simulator (ethdaq/migensim.py) against Migen's own: the same design and
the same stimulus under both, every signal compared after every clock edge.

The designs: one written to use every construct the compiler translates (signed arithmetic,
slices and parts on both sides of an assignment, Cat targets, arrays read and written, memories
with synchronous and asynchronous ports, a Case with a default and one with more keys than an
`elif` chain takes, Replicate, multiplexers, comparisons, the clock and reset as values, two
clock domains), LiteX's asynchronous FIFO between two clocks, and the DAQ streamer with its
emulators (the largest design the suite simulates)."""

import random

from migen import *
from migen.fhdl.tools import list_signals
from migen.genlib.fifo import AsyncFIFO
from ethdaq.migensim import AliasClockSimulator, CompiledSimulator, MigenSimulator


def recording(base):
    """`base` that keeps every signal's value after each clock edge."""
    class Recording(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            signals = set(list_signals(self.fragment))
            for cd in self.fragment.clock_domains:
                signals |= {s for s in (cd.clk, cd.rst) if s is not None}
            for array in self.evaluator.replaced_memories.values():
                signals |= set(array)
            self.recorded = sorted(signals, key=lambda s: s.duid)
            self.trace = []

        def _commit_and_comb_propagate(self, *args, **kwargs):
            super()._commit_and_comb_propagate(*args, **kwargs)
            values = self.evaluator.signal_values
            self.trace.append(tuple(s.reset.value if values[s.duid] is None else values[s.duid]
                                    for s in self.recorded))
    return Recording


def both(make, stimulus, clocks={"sys": 10}):
    """Run a fresh design from `make()` under each simulator with `stimulus(design)` (a dict of
    generators per domain); both traces, and the names of the signals recorded."""
    traces = []
    for base in (MigenSimulator, CompiledSimulator):
        design = make()
        with recording(base)(design, stimulus(design), clocks=clocks) as sim:
            sim.run()
        traces.append(sim.trace)
        names = [s.backtrace[-1][0] if s.backtrace else repr(s) for s in sim.recorded]
    return traces, names


def assert_same(traces, names):
    interpreted, compiled = traces
    assert len(interpreted) == len(compiled) > 0
    for edge, (a, b) in enumerate(zip(interpreted, compiled)):
        if a != b:
            differ = [(names[i], x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]
            raise AssertionError(f"after edge {edge}: (signal, Migen's, compiled) {differ[:10]}")


class Constructs(Module):
    def __init__(self):
        self.a = a = Signal(8)
        self.b = b = Signal((8, True))
        self.sel = sel = Signal(3)
        self.wide = wide = Signal(70)
        # Combinational: every operator, slices, parts, Cat and Replicate as values.
        self.sum = Signal((10, True))
        self.prod = Signal(16)
        self.flags = Signal(8)
        self.mux = Signal(8)
        self.cat = Signal(24)
        self.part = Signal(4)
        self.rep = Signal(12)
        self.neg = Signal((9, True))
        self.clk_seen = Signal()
        self.comb += [
            self.sum.eq(a + b - (b >> 2)),
            self.prod.eq(a * sel),
            self.flags.eq(Cat(a < b, a <= 7, a == b, a != 3, b > -5, b >= 0, ~a[0], a[7] ^ b[7])),
            self.mux.eq(Mux(sel[0], a, b)),
            self.cat.eq(Cat(a[2:6], b, wide[60:70], sel)),
            self.part.eq(wide.part(sel, 4)),
            self.rep.eq(Replicate(sel, 4)),
            self.neg.eq(-b | (a << 1)),
            self.clk_seen.eq(ClockSignal() ^ ResetSignal() ^ ResetSignal("slow")),
        ]
        # Arrays: read with an expression key, written at a key; choices of two widths.
        self.regs = regs = Array(Signal(8, name=f"reg{i}") for i in range(5))
        self.mixed = mixed = Array([Signal(4), Signal((6, True)), Signal(8)])
        self.picked = Signal(8)
        self.picked_mixed = Signal((8, True))
        self.picked_signed = Signal(8)   # a signed key below zero counts from the end, as in Python
        self.signed_key = Signal((3, True))
        self.comb += self.signed_key.eq(b[5:8])
        self.comb += [self.picked.eq(regs[sel + 1]), self.picked_mixed.eq(mixed[sel[:2]] + 1),
                      self.picked_signed.eq(Array([a + 1, b, sel, a ^ 0x55])[self.signed_key])]
        self.sync += [regs[sel].eq(regs[sel] + a), mixed[sel[:2]].eq(b)]
        # Assignments to slices, parts and Cat, some to the same signal in one pass.
        self.packed = Signal(16)
        self.low = Signal(5)
        self.high = Signal(7)
        self.sync += [
            self.packed[0:4].eq(a),
            self.packed[8:16].eq(b),
            self.packed.part(sel, 3).eq(a[5:8]),
            Cat(self.low, self.high).eq(Cat(b, a)),
            wide.eq(Cat(wide[1:], wide[0] ^ a[0] ^ wide[5])),
        ]
        # A Case with a default, and one with more keys than an elif chain takes.
        self.small = Signal(8)
        self.big = Signal(16)
        self.sync += Case(sel, {0: self.small.eq(a), 1: self.small.eq(b), 5: [], "default": self.small.eq(0xa5)})
        self.sync += Case(a, {k: self.big.eq(k*k + b) for k in range(0, 200, 2)} | {"default": self.big.eq(a)})
        # A memory: a synchronous and an asynchronous read port, a write port with enable.
        self.specials.mem = mem = Memory(12, 16, init=[i*3 for i in range(16)])
        w, rs, ra = mem.get_port(write_capable=True), mem.get_port(), mem.get_port(async_read=True)
        self.specials += w, rs, ra
        self.mem_out = Signal(12)
        self.mem_async = Signal(12)
        self.comb += [w.adr.eq(a[:4]), w.dat_w.eq(Cat(b, sel)), w.we.eq(a[4]),
                      rs.adr.eq(sel), ra.adr.eq(a[3:7]), self.mem_async.eq(ra.dat_r)]
        self.sync += self.mem_out.eq(rs.dat_r)
        # An FSM, and a second clock domain.
        self.submodules.fsm = fsm = FSM()
        self.count = Signal(4)
        fsm.act("IDLE", If(a[0], NextState("RUN")))
        fsm.act("RUN", NextValue(self.count, self.count + 1), If(self.count == 9, NextState("IDLE")))
        self.clock_domains.cd_sys = ClockDomain()
        self.clock_domains.cd_slow = ClockDomain()
        self.slow = Signal(8)
        self.sync.slow += self.slow.eq(self.slow + self.sum[:8])


def random_inputs(signals, cycles, seed):
    def gen():
        rng = random.Random(seed)
        for _ in range(cycles):
            for s in signals:
                v = rng.getrandbits(len(s))
                yield s.eq(v - (1 << len(s)) if s.signed and v >> (len(s) - 1) else v)
            yield
    return gen()


def reset_pulse(rst, cycles=2):
    yield rst.eq(1)
    for _ in range(cycles):
        yield
    yield rst.eq(0)


def test_every_construct_gives_the_same_values_in_every_cycle():
    def stimulus(d):
        return {"sys": [random_inputs([d.a, d.b, d.sel], 400, 1), reset_pulse(d.cd_sys.rst)],
                "slow": [reset_pulse(d.cd_slow.rst)]}
    traces, names = both(Constructs, stimulus, clocks={"sys": 10, "slow": 14})
    assert_same(traces, names)
    # The stimulus reached the design, its registers and both Case defaults.
    assert len(set(traces[0])) > 300
    for name in ("small", "big", "packed", "slow", "mem_out", "reg2", "low", "count", "picked_signed"):
        column = {t[i] for t in traces[0] for i, n in enumerate(names) if n == name}
        assert len(column) > 3, (name, column)


def test_an_asynchronous_fifo_between_two_clocks_matches():
    class Top(Module):
        def __init__(self):
            self.submodules.fifo = ClockDomainsRenamer({"write": "sys", "read": "rd"})(AsyncFIFO(16, 8))
            self.clock_domains.cd_rd = ClockDomain()

    def stimulus(t):
        f = t.fifo

        def writer():
            rng = random.Random(3)
            for i in range(300):
                yield f.din.eq(i)
                yield f.we.eq(rng.random() < 0.6)
                yield

        def reader():
            rng = random.Random(4)
            for _ in range(250):
                yield f.re.eq(rng.random() < 0.5)
                yield
        return {"sys": writer(), "rd": reader()}
    traces, names = both(Top, stimulus, clocks={"sys": 10, "rd": 16})
    assert_same(traces, names)


def test_a_domain_on_another_domains_clock_ticks_with_it():
    """A domain whose clock is sys's and whose reset is a register (as the PTP parsers' is) runs
    as the same logic written in sys with that reset as an If does under Migen's own simulator."""
    class Aliased(Module):
        def __init__(self):
            self.clear, self.count = Signal(), Signal(8)
            self.clock_domains.cd_local = ClockDomain()
            clear_q = Signal(reset_less=True)
            self.sync += clear_q.eq(self.clear)
            self.comb += [self.cd_local.clk.eq(ClockSignal("sys")), self.cd_local.rst.eq(clear_q)]
            self.sync.local += self.count.eq(self.count + 3)

    class Reference(Module):
        def __init__(self):
            self.clear, self.count = Signal(), Signal(8)
            clear_q = Signal(reset_less=True)
            self.sync += [clear_q.eq(self.clear), self.count.eq(self.count + 3), If(clear_q, self.count.eq(0))]

    def counts(design, base):
        seen = []

        def gen():
            rng = random.Random(5)
            for _ in range(200):
                yield design.clear.eq(rng.random() < 0.1)
                yield
                seen.append((yield design.count))
        with base(design, gen(), clocks={"sys": 10}) as sim:
            sim.run()
        return seen

    expected = counts(Reference(), MigenSimulator)
    assert len(set(expected)) > 20 and expected.count(0) > 5
    assert counts(Aliased(), AliasClockSimulator) == expected
    assert counts(Aliased(), CompiledSimulator) == expected


def test_the_streamer_and_its_emulators_match():
    from test_streamer import DUT, write, start, stop
    from ethdaq.gateware.emulator import MODE_COUNTER

    def stimulus(dut):
        def control():
            yield from write(dut.streamer._payload, 64)
            for emu in dut.emulators:
                yield from write(emu._mode, MODE_COUNTER)
                yield from write(emu._rate, 2**31)
            yield from start(dut)
            for _ in range(500):
                yield
            yield from stop(dut)
            for _ in range(200):
                yield

        @passive
        def sink():
            rng = random.Random(5)
            while True:
                yield dut.streamer.source.ready.eq(rng.random() < 0.8)
                yield
        return {"sys": [control(), sink()]}
    traces, names = both(DUT, stimulus)
    assert_same(traces, names)
    assert len(set(traces[0])) > 500


def test_the_suite_runs_on_the_compiled_simulator(pytestconfig):
    """test/conftest.py installs it (ETHDAQ_MIGEN_SIM=interpreted keeps Migen's own)."""
    import os
    import migen.sim.core
    expected = MigenSimulator if os.environ.get("ETHDAQ_MIGEN_SIM") == "interpreted" else CompiledSimulator
    assert migen.sim.core.Simulator is expected
