#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Migen's simulator with its statement lists compiled to Python functions.

Migen's simulator (migen.sim.core) interprets the design: every clock edge it walks the syntax
tree of every synchronous statement, then of the whole combinational list, again and again until
no signal changes, asking each node its type and width. The simulations of ethdaq's cores spend
almost all their time there. ``CompiledSimulator`` keeps Migen's simulator as it is (its clocks,
its generators, its VCD writer, its evaluator for what generators ask) and replaces only that
walk: each domain's synchronous list and the combinational list become one Python function each,
generated once from the same statements, in which a signal read is a list index, an assignment
a masked store, an ``If`` an ``if``.

The generated code does what Migen's ``Evaluator.execute`` does, node for node: reads see the
values committed before the pass (and, inside an assignment to a slice, the value already
assigned in this pass), assignments go to the same pending-modifications dictionary and are
committed by Migen's own ``commit_changed``, values are truncated and sign-extended only where
Migen does it, ``Case`` takes the first matching key. A combinational pass is repeated until
nothing changes, as in Migen. The one step left out: after a falling edge with no rising edge,
when the combinational logic reads no clock, Migen runs a combinational pass that cannot change
anything; here the clock's new value is committed without it.

A domain whose clock is another domain's (``cd.clk.eq(ClockSignal(source))``, as a domain with a
reset of its own on the same clock has) is ticked with its source: Migen's simulator clocks only
the domains it is given (``AliasClockSimulator``, under both simulators).

test/gateware/test_migensim.py runs designs under both simulators and compares every signal in every
cycle. ``install()`` makes ``migen.sim.run_simulation`` use this simulator (the test suite does,
unless ETHDAQ_MIGEN_SIM=interpreted).
"""

import os

import migen.sim.core as migen_sim
from migen.fhdl.bitcontainer import value_bits_sign
from migen.fhdl.specials import _MemoryLocation
from migen.fhdl.structure import (Constant, Signal, ClockSignal, ResetSignal, Cat, Replicate, If, Case,
                                  _Operator, _Slice, _Part, _ArrayProxy, _Assign)

__all__ = ["AliasClockSimulator", "CompiledSimulator", "MigenSimulator", "clock_aliases", "install", "uninstall"]

# Python's parser limits the nesting of parentheses; deeper expressions go through locals.
_MAX_DEPTH = 40
# A Case or an array assignment with more alternatives than this is dispatched by a binary tree
# of comparisons (the compiler recurses once per `elif`).
_MAX_CHAIN = 64

_BINARY = {"+": "+", "-": "-", "*": "*", ">>>": ">>", "<<<": "<<", "&": "&", "^": "^", "|": "|",
           "<": "<", "<=": "<=", "==": "==", "!=": "!=", ">": ">", ">=": ">="}


def _mask(nbits):
    return (1 << nbits) - 1


def _truncated(expr, nbits, signed):
    """`expr` cut to nbits, two's complement when signed (migen.sim.core._truncate)."""
    if signed:
        half = 1 << (nbits - 1)
        return f"((({expr}) + {half}) & {_mask(nbits)}) - {half}"
    return f"({expr}) & {_mask(nbits)}"


class _Compiler:
    """Python source for statement lists of one simulation; `function` compiles one list."""

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self.objects = {}      # names the generated code refers to: duid tables, fallback statements
        self.signals = set()   # every signal the code reads or writes
        self.reads_clock = False
        self._n = 0

    def _name(self, prefix):
        self._n += 1
        return f"_{prefix}{self._n}"

    def _object(self, prefix, obj):
        name = self._name(prefix)
        self.objects[name] = obj
        return name

    def function(self, statements):
        lines = []
        self._statements(statements, lines, "    ")
        source = "def _pass(sv=sv, m=m, _min=min):\n" + ("\n".join(lines) if lines else "    pass") + "\n"
        ev = self.evaluator
        namespace = {"sv": ev.signal_values, "m": ev.modifications, **self.objects}
        exec(compile(source, "<ethdaq.migensim>", "exec"), namespace)
        for s in self.signals:
            # Migen keeps None for "still at reset"; the generated code reads the list directly.
            if ev.signal_values[s.duid] is None:
                ev.signal_values[s.duid] = s.reset.value
        return namespace["_pass"]

    # Statements ------------------------------------------------------------------------------

    def _statements(self, statements, lines, indent):
        for s in statements:
            if isinstance(s, _Assign):
                value = self._expr(s.r, False, lines, indent)
                self._assign(s.l, value, lines, indent)
            elif isinstance(s, If):
                cond = self._expr(s.cond, False, lines, indent)
                lines.append(f"{indent}if ({cond}) & {_mask(len(s.cond))}:")
                self._block(s.t, lines, indent + "    ")
                if s.f:
                    lines.append(f"{indent}else:")
                    self._block(s.f, lines, indent + "    ")
            elif isinstance(s, Case):
                self._case(s, lines, indent)
            elif isinstance(s, (list, tuple)):
                self._statements(s, lines, indent)
            else:
                # Display and anything else: Migen's evaluator, on the same modifications.
                name = self._object("stmt", [s])
                ev = self._object("ev", self.evaluator)
                lines.append(f"{indent}{ev}.execute({name})")

    def _block(self, statements, lines, indent):
        start = len(lines)
        self._statements(statements, lines, indent)
        if len(lines) == start:
            lines.append(f"{indent}pass")

    def _case(self, s, lines, indent):
        nbits, signed = value_bits_sign(s.test)
        test = self._name("t")
        lines.append(f"{indent}{test} = {_truncated(self._expr(s.test, False, lines, indent), nbits, signed)}")
        keys = [(k.value, body) for k, body in s.cases.items() if isinstance(k, Constant)]
        default = s.cases.get("default")
        if len(keys) <= _MAX_CHAIN:
            first = True
            for value, body in keys:
                lines.append(f"{indent}{'if' if first else 'elif'} {test} == {value}:")
                self._block(body, lines, indent + "    ")
                first = False
            if default is not None:
                if first:
                    self._statements(default, lines, indent)
                else:
                    lines.append(f"{indent}else:")
                    self._block(default, lines, indent + "    ")
            return
        # Many keys: the first key with the value wins, as in Migen's loop.
        index = {}
        for i, (value, _) in enumerate(keys):
            index.setdefault(value, i)
        table = self._object("case", index)
        i = self._name("i")
        lines.append(f"{indent}{i} = {table}.get({test}, -1)")
        if default is not None:
            lines.append(f"{indent}if {i} < 0:")
            self._block(default, lines, indent + "    ")
            lines.append(f"{indent}else:")
            indent += "    "
        self._dispatch(i, len(keys), lambda k, lines, indent: self._block(keys[k][1], lines, indent), lines, indent)

    def _dispatch(self, i, n, emit, lines, indent, lo=0, hi=None):
        """The code `emit(k, lines, indent)` writes, run for the k that local `i` holds (0 <= k
        < n), in a tree of comparisons of depth log2(n)."""
        hi = n if hi is None else hi
        if hi - lo <= 8:
            for k in range(lo, hi):
                lines.append(f"{indent}{'if' if k == lo else 'elif'} {i} == {k}:")
                start = len(lines)
                emit(k, lines, indent + "    ")
                if len(lines) == start:
                    lines.append(f"{indent}    pass")
            return
        mid = (lo + hi)//2
        lines.append(f"{indent}if {i} < {mid}:")
        self._dispatch(i, n, emit, lines, indent + "    ", lo, mid)
        lines.append(f"{indent}else:")
        self._dispatch(i, n, emit, lines, indent + "    ", mid, hi)

    # Assignments -----------------------------------------------------------------------------

    def _local(self, expr, lines, indent, prefix="v"):
        """`expr` evaluated once, into a local: its name."""
        if expr.isidentifier():
            return expr
        name = self._name(prefix)
        lines.append(f"{indent}{name} = {expr}")
        return name

    def _assign(self, node, value, lines, indent):
        if isinstance(node, Signal):
            assert not node.variable
            self.signals.add(node)
            lines.append(f"{indent}m[{node.duid}] = {_truncated(value, node.nbits, node.signed)}")
        elif isinstance(node, Cat):
            value = self._local(value, lines, indent)
            shift = 0
            for element in node.l:
                nbits = len(element)
                self._assign(element, f"({value} >> {shift}) & {_mask(nbits)}" if shift else
                             f"{value} & {_mask(nbits)}", lines, indent)
                shift += nbits
        elif isinstance(node, _Slice):
            width = node.stop - node.start
            full = self._local(self._expr(node.value, True, lines, indent), lines, indent, "f")
            keep = ~(_mask(width) << node.start)
            self._assign(node.value, f"({full} & ({keep})) | ((({value}) & {_mask(width)}) << {node.start})",
                         lines, indent)
        elif isinstance(node, _Part):
            full = self._local(self._expr(node.value, True, lines, indent), lines, indent, "f")
            offset = self._local(self._expr(node.offset, True, lines, indent), lines, indent, "o")
            width = _mask(node.width)
            self._assign(node.value, f"({full} & ~({width} << {offset})) | ((({value}) & {width}) << {offset})",
                         lines, indent)
        elif isinstance(node, _ArrayProxy):
            value = self._local(value, lines, indent)
            key = self._key(node, False, lines, indent)
            self._assign_choice(node.choices, key, value, lines, indent)
        elif isinstance(node, _MemoryLocation):
            array = self.evaluator.replaced_memories[node.memory]
            self.signals.update(array)
            first = array[0]
            assert all(s.nbits == first.nbits and s.signed == first.signed for s in array)
            table = self._object("mem", [s.duid for s in array])
            index = self._expr(node.index, False, lines, indent)
            lines.append(f"{indent}m[{table}[{index}]] = {_truncated(value, first.nbits, first.signed)}")
        else:
            raise NotImplementedError(f"assignment to {node!r}")

    def _assign_choice(self, choices, key, value, lines, indent):
        signals = all(isinstance(c, Signal) for c in choices)
        if signals and len({(c.nbits, c.signed) for c in choices}) == 1:
            self.signals.update(choices)
            table = self._object("arr", [c.duid for c in choices])
            lines.append(f"{indent}m[{table}[{key}]] = {_truncated(value, choices[0].nbits, choices[0].signed)}")
            return
        self._dispatch(key, len(choices), lambda k, lines, indent: self._assign(choices[k], value, lines, indent),
                       lines, indent)

    # Expressions -----------------------------------------------------------------------------

    def _expr(self, node, postcommit, lines, indent, depth=0):
        if depth > _MAX_DEPTH:
            return self._local(self._expr(node, postcommit, lines, indent), lines, indent)
        sub = lambda n: self._expr(n, postcommit, lines, indent, depth + 1)
        if isinstance(node, Constant):
            return f"({node.value})" if node.value < 0 else str(node.value)
        if isinstance(node, Signal):
            self.signals.add(node)
            return f"m.get({node.duid}, sv[{node.duid}])" if postcommit else f"sv[{node.duid}]"
        if isinstance(node, _Operator):
            op, ops = node.op, node.operands
            a = sub(ops[0])
            if op == "~":
                return f"(~{a})"
            if op == "-" and len(ops) == 1:
                return f"(-{a})"
            if op == "m":
                return f"({sub(ops[1])} if {a} else {sub(ops[2])})"
            if op not in _BINARY:
                raise NotImplementedError(op)
            return f"({a} {_BINARY[op]} {sub(ops[1])})"
        if isinstance(node, _Slice):
            v = sub(node.value)
            width = _mask(node.stop - node.start)
            return f"(({v} >> {node.start}) & {width})" if node.start else f"({v} & {width})"
        if isinstance(node, _Part):
            return f"(({sub(node.value)} >> {sub(node.offset)}) & {_mask(node.width)})"
        if isinstance(node, Cat):
            parts, shift = [], 0
            for element in node.l:
                nbits = len(element)
                part = f"({sub(element)} & {_mask(nbits)})"
                parts.append(f"({part} << {shift})" if shift else part)
                shift += nbits
            return "(" + " | ".join(parts) + ")" if parts else "0"
        if isinstance(node, Replicate):
            nbits = len(node.v)
            factor = sum(1 << i*nbits for i in range(node.n))
            return f"(({sub(node.v)} & {_mask(nbits)}) * {factor})"
        if isinstance(node, _ArrayProxy):
            return self._choice(node, postcommit, lines, indent)
        if isinstance(node, _MemoryLocation):
            array = self.evaluator.replaced_memories[node.memory]
            self.signals.update(array)
            table = self._object("mem", [s.duid for s in array])
            index = self._local(f"{table}[{sub(node.index)}]", lines, indent, "d")
            return f"m.get({index}, sv[{index}])" if postcommit else f"sv[{index}]"
        if isinstance(node, ClockSignal):
            self.reads_clock = True
            return sub(self.evaluator.clock_domains[node.cd].clk)
        if isinstance(node, ResetSignal):
            rst = self.evaluator.clock_domains[node.cd].rst
            if rst is None:
                if node.allow_reset_less:
                    return "0"
                raise ValueError(f"Attempted to get reset signal of resetless domain '{node.cd}'")
            return sub(rst)
        raise NotImplementedError(node)

    def _choice(self, node, postcommit, lines, indent):
        """An array read: only the chosen alternative is evaluated, as in Migen."""
        choices = node.choices
        key = self._key(node, postcommit, lines, indent)
        if all(isinstance(c, Signal) for c in choices):
            self.signals.update(choices)
            table = self._object("arr", [c.duid for c in choices])
            if not postcommit:
                return f"sv[{table}[{key}]]"
            duid = self._local(f"{table}[{key}]", lines, indent, "d")
            return f"m.get({duid}, sv[{duid}])"
        result = self._name("c")

        def emit(k, lines, indent):
            value = self._expr(choices[k], postcommit, lines, indent)
            lines.append(f"{indent}{result} = {value}")
        self._dispatch(key, len(choices), emit, lines, indent)
        return result

    def _key(self, node, postcommit, lines, indent):
        """The index an array access takes: its key, at most the last choice; a negative key
        counts from the end, as Python's list lookup in Migen's evaluator does."""
        n = len(node.choices)
        key = self._local(f"_min({n - 1}, {self._expr(node.key, postcommit, lines, indent)})", lines, indent, "k")
        if value_bits_sign(node.key)[1]:
            lines.append(f"{indent}if {key} < 0: {key} += {n}")
        return key


def clock_aliases(fragment):
    """{domain: source domain} for each domain whose clock is assigned combinationally from
    another's (``cd.clk.eq(ClockSignal(source))``): a domain of its own on the same clock, such as
    one with a reset of its own."""
    clocks = {cd.clk: cd.name for cd in fragment.clock_domains}
    aliases = {}
    for statement in fragment.comb:
        if isinstance(statement, _Assign) and isinstance(statement.l, Signal) and statement.l in clocks:
            source = statement.r
            if isinstance(source, ClockSignal):
                aliases[clocks[statement.l]] = source.cd
            elif isinstance(source, Signal) and source in clocks:
                aliases[clocks[source]] = clocks[statement.l]
    return aliases


class AliasClockSimulator(migen_sim.Simulator):
    """migen.sim.Simulator that ticks a domain whose clock is another domain's clock with that
    domain. Migen's simulator ticks only the domains its `clocks` name and drives each clock
    itself; an alias's clock is then given its source's period and phase, and the assignment
    (the simulator drives that clock now) is taken out of the combinational list."""

    def __init__(self, fragment_or_module, generators, clocks={"sys": 10}, **kwargs):
        fragment = fragment_or_module
        if not isinstance(fragment, migen_sim._Fragment):
            fragment = fragment_or_module.get_fragment()
        clocks = clocks if isinstance(clocks, dict) else {"sys": clocks}
        aliases = {cd: source for cd, source in clock_aliases(fragment).items() if cd not in clocks}
        clocks = dict(clocks)
        while aliases:
            ready = {cd: source for cd, source in aliases.items() if source in clocks}
            if not ready:
                raise ValueError(f"clock domains {sorted(aliases)} take their clocks from domains the "
                                 f"simulation does not clock ({sorted(set(aliases.values()))})")
            for cd, source in ready.items():
                clocks[cd] = clocks[source]
                del aliases[cd]
        driven = {cd.clk for cd in fragment.clock_domains if cd.name in clocks}
        fragment.comb = [s for s in fragment.comb
                         if not (isinstance(s, _Assign) and isinstance(s.l, Signal) and s.l in driven)]
        super().__init__(fragment, generators, clocks, **kwargs)


class CompiledSimulator(AliasClockSimulator):
    """migen.sim.Simulator, with the synchronous and combinational passes compiled."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        compiler = _Compiler(self.evaluator)
        self._comb = compiler.function(self.fragment.comb)
        self._sync = {cd: compiler.function(statements) for cd, statements in self.fragment.sync.items()}
        self._comb_reads_clock = compiler.reads_clock

    def _commit_and_comb_propagate(self, rising=True):
        ev = self.evaluator
        if type(self.vcd) is migen_sim.DummyVCDWriter:
            if not rising and not self._comb_reads_clock:
                ev.commit_changed()
                return
            modified = ev.commit_changed()
            while modified:
                self._comb()
                modified = ev.commit_changed()
            return
        all_modified = modified = ev.commit_set()
        while modified:
            self._comb()
            modified = ev.commit_set()
            all_modified |= modified
        for duid in all_modified:
            self.vcd.set(self._duid2sig[duid], ev.signal_values[duid])

    def run(self):
        ev, domains = self.evaluator, self.fragment.clock_domains
        self._comb()
        self._commit_and_comb_propagate()
        while True:
            dt, rising, falling = self.time.tick()
            self.vcd.delay(dt)
            for cd in rising:
                ev.assign(domains[cd].clk, 1)
                if cd in self._sync:
                    self._sync[cd]()
                if cd in self.generators:
                    self._process_generators(cd)
            for cd in falling:
                ev.assign(domains[cd].clk, 0)
            self._commit_and_comb_propagate(rising=bool(rising))
            if not self._continue_simulation():
                break


# Migen's own, whatever install() does later.
MigenSimulator = migen_sim.Simulator


def install():
    """Make migen.sim.run_simulation (which looks its Simulator up at each call) compile; with
    ETHDAQ_MIGEN_SIM=interpreted, Migen's interpreter, with clock aliases ticked."""
    if os.environ.get("ETHDAQ_MIGEN_SIM", "compiled") != "interpreted":
        migen_sim.Simulator = CompiledSimulator
    else:
        migen_sim.Simulator = AliasClockSimulator


def uninstall():
    migen_sim.Simulator = MigenSimulator
