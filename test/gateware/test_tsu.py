"""PTP timestamp unit (gateware/tsu.py) in Migen simulation.

PTPClock is checked cycle by cycle against a naive reference model (an integer count of 2^-F ns
advanced per cycle, with the documented command latencies) and against exact Fraction arithmetic;
PTPTimestamper against frames encoded by scapy (its PTPv2 layer), fed byte-wise with preamble and
SFD as LiteEth's PHY-side stream carries them, and the same frames 8 bytes a beat (dw=64, the
preamble column as LiteEth's XGMII receiver hands it on: PTPParser64), with the same records. At
64 bits the timestamps are checked at the XGMII pins too: through LiteEth's XGMII receiver and
ethdaq's XGMII transmitter, /S/ in lane 0 and lane 4, each record plus its corrections is the
clock's time at the frame's timestamp point on the pins."""

import collections
import random
from fractions import Fraction

import pytest
from migen import *
from scapy.contrib.ptp_v2 import PTP
from scapy.layers.inet import IP, UDP, IPOption_Router_Alert
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from liteeth.common import eth_phy_description

from ethdaq.gateware import ptpclock, tsu
from ethdaq.gateware.ptpclock import (PTPClock, PTPClockCSR, NS_PER_S, ADD_LATENCY, ADJ_LATENCY, SET_LATENCY)
from ethdaq.gateware.ptpparser import DST_OTHER, DST_PRIMARY, DST_PDELAY
from ethdaq.gateware.tsu import PTPTimestamper, XGMIIStartLane, tap

from stream_helpers import PREAMBLE, wire

CLK = 125e6
F   = 34

# Reference model ----------------------------------------------------------------------------------

class ClockModel:
    """The published time of a PTPClock, naively: `total` counts 2^-F ns and advances by
    base + adj every cycle; commands act after their documented latencies. Outputs follow the
    documented definitions of pps and periodic."""
    def __init__(self, clock, total, adj=0, pps_width=0, period=0, width=0):
        self.F, self.base = clock.frac_bits, clock.base_inc
        self.total = total
        self.pps_width, self.period, self.width = pps_width, period, width
        self.adj_at = {}                   # cycle → adj value from that cycle on
        self.adj = adj
        self.adds, self.sets = {}, {}      # cycle → command
        self.aligned = False
        self.prev = None

    def ns_total(self):
        return self.total >> self.F

    def outputs(self):
        sec, ns = divmod(self.ns_total(), NS_PER_S)
        return dict(sec=sec, ns=ns, frac=self.total & (2**self.F - 1), time_ns=self.ns_total(),
                    pps=int(self.pps), periodic=int(self.periodic))

    def step(self, t):
        """Advance from published cycle t to t+1."""
        before = self.ns_total()
        kind = "normal"
        if t + 1 - ADJ_LATENCY in self.adj_at:
            self.adj = self.adj_at[t + 1 - ADJ_LATENCY]
        if t + 1 - SET_LATENCY in self.sets:
            sec, ns = self.sets[t + 1 - SET_LATENCY]
            self.total = (sec*NS_PER_S + ns) << self.F
            kind = "set"
        else:
            self.total += self.base + self.adj
            if t + 1 - ADD_LATENCY in self.adds:
                self.total += self.adds[t + 1 - ADD_LATENCY] << self.F
                kind = "add"
        after = self.ns_total()
        s0, n0 = divmod(before, NS_PER_S)
        s1, n1 = divmod(after, NS_PER_S)
        fwd = kind != "set" and s1 == s0 + 1
        self.pps = fwd or n1 < self.pps_width
        P = self.period
        start = False
        if kind == "normal" and fwd:
            self.aligned = P != 0 and n1 < P
            start = True
        elif kind != "normal":
            self.aligned = False
        elif P:
            start = n1 // P > n0 // P
        self.periodic = self.aligned and (start or n1 % P < self.width)


# Migen applies a generator's writes at the next clock edge: after `yield`, reads show the
# registers of the cycle in which the values written before that `yield` are the logic's inputs.
# So "cycle t" below is always: write inputs, yield, read.

def read_clock(clock):
    return dict(sec=(yield clock.sec), ns=(yield clock.ns), frac=(yield clock.frac),
                time_ns=(yield clock.time_ns), pps=(yield clock.pps), periodic=(yield clock.periodic))


def total_of(o):
    return ((o["sec"]*NS_PER_S + o["ns"]) << F) + o["frac"]


def run(dut, gens, clocks=None, **kw):
    run_simulation(dut, gens, clocks=clocks or {"sys": 8}, **kw)

# PTPClock: increments ------------------------------------------------------------------------------

@pytest.mark.parametrize("adj", [123456789, -987654321])
def test_time_advances_by_exactly_the_increment_every_cycle(adj):
    """25000 cycles with a nonzero (odd, large) adjustment: every published value equals the
    exact rational T0 + n*(period + adj*2^-F) ns, fraction included, and time_ns agrees."""
    dut = PTPClock(CLK)
    assert (dut.frac_bits, dut.nominal_inc, dut.base_inc) == (F, 8 << F, 8 << F)
    step = Fraction(dut.base_inc + adj, 2**F)
    bad = []

    def gen():
        yield dut.adj.eq(adj)
        for _ in range(ADJ_LATENCY + 1):
            yield
        t0 = Fraction(total_of((yield from read_clock(dut))), 2**F)
        for n in range(1, 25000):
            yield
            o = yield from read_clock(dut)
            exact = t0 + n*step
            if (Fraction(total_of(o), 2**F) != exact or o["time_ns"] != o["sec"]*NS_PER_S + o["ns"]) and len(bad) < 5:
                bad.append((n, o, exact))

    run(dut, gen())
    assert not bad


def test_non_integer_period_60mhz_accumulates_its_fraction_exactly():
    """16.67 ns: 33 fraction bits, the increment rounded to the nearest 2^-33 ns; the clock
    advances by exactly that every cycle, and drifts from true time by at most the rounding."""
    dut = PTPClock(60e6)
    assert dut.frac_bits == 33 and dut.nominal_inc == round(Fraction(50, 3) * 2**33)
    Fb = dut.frac_bits
    seen = []

    def gen():
        for _ in range(4):
            yield
        for n in range(3000):
            seen.append(((yield dut.sec)*NS_PER_S + (yield dut.ns))*2**Fb + (yield dut.frac))
            yield

    run(dut, gen())
    assert all(b - a == dut.base_inc for a, b in zip(seen, seen[1:]))
    drift = Fraction(seen[-1] - seen[0], 2**Fb) - (len(seen) - 1)*Fraction(50, 3)
    assert abs(drift) <= (len(seen) - 1)*Fraction(1, 2**(Fb + 1))


def test_adj_takes_effect_after_its_documented_latency():
    dut = PTPClock(CLK)
    vals = []

    def gen():
        for _ in range(8):
            yield
        yield dut.adj.eq(-5)
        yield                                          # Cycle a: adj = -5 at the input.
        for t in range(12):
            vals.append(total_of((yield from read_clock(dut))))   # published(a + t)
            yield

    run(dut, gen())
    steps = [b - a for a, b in zip(vals, vals[1:])]    # steps[t] = published(a+t+1) - published(a+t)
    first_new = ADJ_LATENCY - 1
    assert steps[:first_new] == [8 << F]*first_new
    assert steps[first_new:] == [(8 << F) - 5]*(len(steps) - first_new)


# PTPClock: reference model over steps, wraps, PPS and the periodic output --------------------------

def model_run(dut, script, cycles, pps_width=0, period=0, width=0):
    """Drive `script` (cycle → list of (signal, value) and command tuples) and compare every
    published cycle with ClockModel; returns the list of observed outputs."""
    mismatches, seen = [], []

    def gen():
        yield dut.pps_width.eq(pps_width)
        yield dut.period.eq(period)
        yield dut.width.eq(width)
        for _ in range(8):
            yield
        model = ClockModel(dut, total_of((yield from read_clock(dut))), pps_width=pps_width, period=period, width=width)
        model.pps = model.periodic = False
        for t in range(cycles):
            o = yield from read_clock(dut)             # Cycle t.
            seen.append(o)
            if t:
                expect = model.outputs()
                if o != expect and len(mismatches) < 5:
                    mismatches.append((t, o, expect))
            for action in script.get(t, []):          # Inputs of cycle t + 1.
                kind, *args = action
                if kind == "adj":
                    yield dut.adj.eq(args[0])
                    model.adj_at[t + 1] = args[0]
                elif kind == "add":
                    yield dut.add_ns.eq(args[0])
                    yield dut.add_stb.eq(1)
                    model.adds[t + 1] = args[0]
                elif kind == "set":
                    yield dut.set_sec.eq(args[0])
                    yield dut.set_ns.eq(args[1])
                    yield dut.set_stb.eq(1)
                    model.sets[t + 1] = (args[0], args[1])
            yield
            yield dut.add_stb.eq(0)
            yield dut.set_stb.eq(0)
            model.step(t)

    run(dut, gen())
    assert not mismatches
    return seen


def test_steps_wraps_pps_and_periodic_match_the_reference_model_every_cycle():
    """Set near a second boundary, wrap, add offsets forwards and backwards across the second,
    change the rate (down to an increment of 7.x ns) — sec, ns, frac, time_ns, pps and the periodic
    output (1 µs period, 300 ns high) agree with the model in every cycle."""
    dut = PTPClock(CLK)
    script = {
        10:   [("set", 5, NS_PER_S - 3_000)],       # Published at 63, wraps at ~438: aligned.
        100:  [("adj", 2**30 + 12345)],             # +0.0625 ns/cycle.
        700:  [("add", 12_345)],                    # Forward step: periodic off until the next second.
        800:  [("add", 999_983_700)],               # To ~1 µs before the next second: wraps at ~930.
        1200: [("adj", -(2**31) + 777)],            # Increment 7.875 ns: integer part 7.
        1300: [("add", -400_000)],                  # Back, within the second.
        1400: [("set", 7, 2_000)],                  # Just after a second: no wrap, periodic off.
        1600: [("add", -4_000)],                    # Back across the second, wraps again at ~1712.
        2100: [("adj", 0)],
    }
    seen = model_run(dut, script, 2600, pps_width=100, period=1_000, width=300)
    # The run covered what it claims to.
    periodic = [o["periodic"] for o in seen]
    assert any(periodic[450:700]) and any(periodic[960:1200]) and any(periodic[1750:])
    assert not any(periodic[710:900]) and not any(periodic[1460:1700])
    assert sum(o["pps"] and not p["pps"] for p, o in zip(seen, seen[1:])) >= 3
    assert {o["sec"] for o in seen} >= {5, 6, 7}
    assert all(o["time_ns"] == o["sec"]*NS_PER_S + o["ns"] for o in seen)


def test_offsets_at_the_ends_of_their_range_on_and_around_a_wrap_match_the_model():
    """An offset of +-(10^9 - 1) ns landing in each cycle from 8 before to 8 after a second's
    wrap: the nanoseconds wrap by one second either way in the same step as the offset, or by two
    (an offset near +10^9 in the very cycle the increment wraps), and sec, ns, frac, time_ns and
    pps agree with the model in every cycle."""
    dut = PTPClock(CLK)
    script, t = {}, 10
    for k in range(17):
        for sign in (1, -1):
            script[t] = [("set", 100 + 4*k + (sign < 0), NS_PER_S - 100)]   # Published at t + 54,
            # wrapping 13 cycles later (100 ns at 8 ns a cycle): the offset lands k - 8 around it.
            script[t + SET_LATENCY + 13 - ADD_LATENCY + k - 8] = [("add", sign*(NS_PER_S - 1))]
            t += 100
    seen = model_run(dut, script, t + 60, pps_width=0)
    sets = {a + 1 + SET_LATENCY for a, actions in script.items() if actions[0][0] == "set"}
    jumps = collections.Counter(b["sec"] - a["sec"] for n, (a, b) in enumerate(zip(seen, seen[1:]), 1)
                                if n not in sets)
    assert set(jumps) == {-1, 0, 1, 2} and jumps[2] >= 1, jumps


def test_pps_is_exactly_the_wrap_cycle_and_periodic_edges_land_on_multiples_of_the_period():
    """Explicit expectations (not only the model): with width 0 both outputs are one-cycle
    pulses; the PPS in the first cycle of each second; the periodic output (1001 ns, not a
    multiple of the clock period) in the first cycle whose ns reaches k*1001, counted from the
    second, and not after a step until the next second."""
    dut = PTPClock(CLK)
    seen = []

    def gen():
        yield dut.period.eq(1001)
        for _ in range(4):
            yield
        yield dut.set_sec.eq(41)
        yield dut.set_ns.eq(NS_PER_S - 5_000)
        yield dut.set_stb.eq(1)
        yield
        yield dut.set_stb.eq(0)
        for t in range(1800):
            if t == 1200:   # Step forward to 1 µs before the next second.
                yield dut.add_ns.eq(NS_PER_S - 1_000 - (yield dut.ns) - ADD_LATENCY*8)
                yield dut.add_stb.eq(1)
            seen.append(((yield dut.sec), (yield dut.ns), (yield dut.pps), (yield dut.periodic)))
            yield
            yield dut.add_stb.eq(0)

    run(dut, gen())
    pps = [i for i, s in enumerate(seen) if s[2]]
    assert [(seen[i][0], seen[i - 1][0]) for i in pps] == [(42, 41), (43, 42)]
    assert all(seen[i][1] < 8 for i in pps)
    for i in range(1, len(seen)):
        (s0, n0, _, _), (s1, n1, _, per) = seen[i - 1], seen[i]
        if s1 == 41 or (s1 == 42 and i > 1200):      # After the set / after the step: not yet aligned.
            assert not per, i
        elif s1 == s0:
            assert per == (n1 // 1001 > n0 // 1001), (i, n0, n1)
        else:
            assert per, i  # Each second starts a period.
    assert sum(s[3] for s in seen) >= 8   # Pulses in both aligned stretches.


def test_set_is_atomic_and_published_after_its_latency():
    dut = PTPClock(CLK)
    seen, busy = [], []

    def gen():
        for _ in range(20):
            yield
        yield dut.set_sec.eq(0x123456789ABC)
        yield dut.set_ns.eq(999_999_992)
        yield dut.set_stb.eq(1)
        yield                                          # Cycle a: set_stb.
        yield dut.set_stb.eq(0)
        for t in range(SET_LATENCY + 3):
            seen.append((yield from read_clock(dut)))  # published(a + t)
            busy.append((yield dut.busy))
            yield

    run(dut, gen())
    for o in seen:   # Never torn; time_ns is modulo 2^64 (584 years), seconds are 48-bit.
        assert o["time_ns"] == (o["sec"]*NS_PER_S + o["ns"]) % 2**64
    assert busy == [int(2 <= t <= 50) for t in range(SET_LATENCY + 3)]   # 48-cycle multiply, then apply.
    assert seen[SET_LATENCY - 1]["sec"] == 0
    assert (seen[SET_LATENCY]["sec"], seen[SET_LATENCY]["ns"], seen[SET_LATENCY]["frac"]) == (0x123456789ABC, 999_999_992, 0)
    assert (seen[SET_LATENCY + 1]["sec"], seen[SET_LATENCY + 1]["ns"]) == (0x123456789ABC + 1, 0)


def test_out_of_range_commands_are_rejected():
    dut = PTPClock(CLK)
    pulses, after = [], {}

    def command(stb, **values):
        for name, v in values.items():
            yield getattr(dut, name).eq(v)
        yield stb.eq(1)
        yield
        yield stb.eq(0)
        for _ in range(3):
            pulses.append((yield dut.rejected))
            yield

    def gen():
        for value in (NS_PER_S, -NS_PER_S, 2**31 - 1):
            yield from command(dut.add_stb, add_ns=value)
        yield from command(dut.set_stb, set_sec=3, set_ns=NS_PER_S)
        yield from command(dut.add_stb, add_ns=NS_PER_S - 1)         # Accepted (not counted).
        yield from command(dut.set_stb, set_sec=3, set_ns=0)          # Accepted...
        yield from command(dut.set_stb, set_sec=4, set_ns=0)          # ...so this one is while busy.
        for _ in range(SET_LATENCY):
            yield
        after.update((yield from read_clock(dut)))

    run(dut, gen())
    per_command = [sum(pulses[i:i + 3]) for i in range(0, len(pulses), 3)]
    assert per_command == [1, 1, 1, 1, 0, 0, 1]
    assert after["sec"] == 3 and after["ns"] < 200


def test_ppm_error_models_an_oscillator_that_the_rate_adjustment_corrects():
    """+100 ppm: the clock gains 100 ns per ms of true time (cycles*8 ns); the firmware's
    correction of -100 ppm (ppb_to_adj) brings it back to true time within the LSB rounding."""
    fast = PTPClock(CLK, ppm_error=100)
    slow = PTPClock(CLK, ppm_error=-100.0)
    assert fast.base_inc == round(Fraction(8) * (1 + Fraction(1, 10_000)) * 2**F)
    assert slow.base_inc == round(Fraction(8) * (1 - Fraction(1, 10_000)) * 2**F)
    assert fast.nominal_inc == slow.nominal_inc == 8 << F
    adj = ptpclock.ppb_to_adj(-100_000, CLK, F)
    assert adj == -round(8e-4 * 2**F)
    # The firmware's integer formula gives the same value within one LSB per 70 ppm.
    q16 = ptpclock.adj_per_ppb_q16(CLK, F)
    assert q16 == round(Fraction(8 << F, NS_PER_S) * 2**16)
    assert abs(((-100_000 * q16) >> 16) - adj) <= 2
    N = 5000
    elapsed = {}

    def gen(clock, name, adj):
        yield clock.adj.eq(adj)
        for _ in range(ADJ_LATENCY + 1):
            yield
        t0 = total_of((yield from read_clock(clock)))
        for _ in range(N):
            yield
        elapsed[name] = Fraction(total_of((yield from read_clock(clock))) - t0, 2**F)

    class Two(Module):
        def __init__(self):
            self.submodules.fast, self.submodules.fix, self.submodules.slow = fast, PTPClock(CLK, ppm_error=100), slow
    two = Two()
    run(two, [gen(two.fast, "fast", 0), gen(two.fix, "fix", adj), gen(two.slow, "slow", 0)])
    true = N * 8
    assert elapsed["fast"] == Fraction(N * fast.base_inc, 2**F) and abs(elapsed["fast"] - true*(1 + Fraction(1, 10**4))) < Fraction(1, 10**6)
    assert abs(elapsed["slow"] - true*(1 - Fraction(1, 10**4))) < Fraction(1, 10**6)
    assert abs(elapsed["fix"] - true) < Fraction(N, 2**F) + Fraction(true, 10**8)  # 0.01 ppm residual at most.


def test_parameter_errors_say_what_was_expected():
    with pytest.raises(ValueError, match=r"^frac_bits must be an int in 34\.\.48 \(one adjustment LSB <= 0\.01 ppb at 125 MHz\), not 32$"):
        PTPClock(CLK, frac_bits=32)
    with pytest.raises(ValueError, match=r"^PTPTimestamper: dw must be 8 \(GMII/RGMII/MII\) or 64 \(XGMII\), not 32$"):
        PTPTimestamper(PTPClock(CLK), dw=32)
    with pytest.raises(ValueError, match=r"^PTPTimestamper: depth must be a power of two >= 4, not 6$"):
        PTPTimestamper(PTPClock(CLK), depth=6)
    assert ptpclock.frac_bits_for(125e6) == 34 and ptpclock.frac_bits_for(60e6) == 33
    # One adjustment LSB is at most 0.01 ppb of the rate.
    assert Fraction(1, 2**34) / 8 <= Fraction(1, 10**11) < Fraction(1, 2**33) / 8

# PTPClockCSR ---------------------------------------------------------------------------------------

# Standalone (no CSR bank) a CSRStorage's own logic is not simulated: we write `storage` and
# drive the pulse fields, which is what the bank's logic would do.
def write(csr, value):
    yield csr.storage.eq(value)
    yield


def pulse(field):
    yield field.eq(1)
    yield
    yield field.eq(0)


@pytest.mark.parametrize("cd_clock", ["sys", "ptp"])
def test_csr_latch_set_add_and_adj_in_the_same_and_another_domain(cd_clock):
    """Through the registers: with the clock in sys, the latch holds the time of the write cycle;
    with the clock in its own domain (same period here) commands and the latch cross over."""
    clock = PTPClock(CLK) if cd_clock == "sys" else ClockDomainsRenamer(cd_clock)(PTPClock(CLK))
    dut = PTPClockCSR(clock, cd_clock)
    got = {}

    def latch():
        yield dut._control.fields.latch.eq(1)
        yield
        now = (yield clock.sec), (yield clock.ns)    # The cycle of the latch pulse.
        yield dut._control.fields.latch.eq(0)
        yield
        while (yield dut._status.fields.latching):
            yield
        yield
        return now, ((yield dut._latched_seconds.status), (yield dut._latched_nanoseconds.status))

    def gen():
        for _ in range(10):
            yield
        got["latch0"] = yield from latch()
        yield from write(dut._set_seconds, 1_700_000_000)
        yield from write(dut._set_nanoseconds, 999_999_000)
        yield from pulse(dut._control.fields.set)
        yield
        while (yield dut._status.fields.busy):
            yield
        for _ in range(10):
            yield
        got["after_set"] = (yield clock.sec), (yield clock.ns)
        before = (yield clock.time_ns)
        yield from write(dut._offset, -500_000_000 & 0xffffffff)
        yield from pulse(dut._control.fields.add)
        for _ in range(58):
            yield
        got["after_add"] = (yield clock.sec), (yield clock.ns), (yield clock.time_ns) - before   # 60 cycles later.
        yield from write(dut._adj, ptpclock.ppb_to_adj(1e6, CLK, F) & 0xffffffff)   # +1000 ppm
        for _ in range(40):
            yield
        a = (yield clock.time_ns)
        for _ in range(1000):
            yield
        got["rate"] = (yield clock.time_ns) - a
        yield from write(dut._offset, NS_PER_S)   # Out of range.
        yield from pulse(dut._control.fields.add)
        for _ in range(30):
            yield
        got["rejected"] = (yield dut._rejected.status)
        got["latch1"] = yield from latch()
        yield from write(dut._synced, 1)
        got["synced"] = (yield dut.synced)

    clocks = {"sys": 8} if cd_clock == "sys" else {"sys": 8, cd_clock: 8}
    run(dut, gen(), clocks=clocks)
    for key in ("latch0", "latch1"):
        (now_s, now_ns), (lat_s, lat_ns) = got[key]
        assert (lat_s, lat_ns) == (now_s, now_ns)   # Across domains, compensated (same clock here).
    sec, ns = got["after_set"]
    assert sec == 1_700_000_000 and 999_999_000 < ns < 999_999_400
    sec, ns, elapsed = got["after_add"]
    assert sec == 1_700_000_000 and elapsed == 60*8 - 500_000_000
    assert got["rate"] == 8*1000 + 8 or got["rate"] == 8*1000 + 7   # 1000 cycles at 8.008 ns.
    assert got["rejected"] == 1 and got["synced"] == 1

# PTPTimestamper -------------------------------------------------------------------------------------

CLOCK_ID = 0x0011223344556677
OUR_MAC  = "10:e2:d5:00:00:00"


def ptp(msg_type, seq, domain=0, port=1, version=2):
    return PTP(messageType=msg_type, sequenceId=seq, domainNumber=domain, version=version,
               clockIdentity=CLOCK_ID, portNumber=port)


def ptp_udp(msg_type, seq, dst="224.0.1.129", dport=None, vlan=None, options=None, mac="01:00:5e:00:01:81", **kw):
    dport = dport or (319 if msg_type < 8 else 320)
    ip = IP(src="192.168.1.2", dst=dst, options=options) if options else IP(src="192.168.1.2", dst=dst)
    l3 = ip/UDP(sport=dport, dport=dport)/ptp(msg_type, seq, **kw)
    eth = Ether(src="02:00:00:00:00:02", dst=mac)
    return wire(eth/Dot1Q(vlan=vlan)/l3 if vlan is not None else eth/l3)


def ptp_l2(msg_type, seq, dst="01:1b:19:00:00:00", vlan=None, **kw):
    eth = Ether(src="02:00:00:00:00:02", dst=dst)
    if vlan is not None:
        return wire(eth/Dot1Q(vlan=vlan, type=0x88F7)/ptp(msg_type, seq, **kw))
    return wire(Ether(src="02:00:00:00:00:02", dst=dst, type=0x88F7)/ptp(msg_type, seq, **kw))


@pytest.fixture(params=[8, 64])
def dw(request):
    return request.param


class Bench(LiteXModule):
    """A PTPClock and a PTPTimestamper observing `ep` (a PHY-side endpoint) through tap()."""
    def __init__(self, cd="sys", cd_clock="sys", ignore_ready=False, dw=8, **kw):
        self.clock = PTPClock(CLK) if cd_clock == "sys" else ClockDomainsRenamer(cd_clock)(PTPClock(CLK))
        self.ts    = PTPTimestamper(self.clock, cd=cd, cd_clock=cd_clock, dw=dw, **kw)
        self.ep    = stream.Endpoint(eth_phy_description(dw))
        self.comb += tap(self.ep, self.ts.sink, ignore_ready=ignore_ready)


def beats(frame, dw):
    """PHY-side bytes as beats of dw bits: (data, last_be), last_be one-hot on the last byte (at
    8 bits 0, as LiteEth's 8-bit PHYs leave it); the first 8 bytes, preamble and SFD, are one
    beat at 64 bits, as LiteEth's XGMII receiver hands them on."""
    n = dw//8
    for i in range(0, len(frame), n):
        chunk = frame[i:i + n]
        last_be = 1 << (len(chunk) - 1) if dw > 8 and i + n >= len(frame) else 0
        yield int.from_bytes(chunk + bytes(n - len(chunk)), "little"), last_be


class Feeder:
    """Sends PHY-side byte streams into the bench's endpoint, with idle cycles between frames,
    optional valid gaps (receive) or ready stalls (transmit), and notes the clock's published
    time in each frame's SFD beat."""
    def __init__(self, bench, frames, idle=12, valid_gaps=0.0, ready_stalls=0.0, seed=1):
        self.bench, self.frames, self.idle = bench, frames, idle
        self.valid_gaps, self.ready_stalls = valid_gaps, ready_stalls
        self.rng = random.Random(seed)
        self.sfd_times = []
        self.done = False

    def run(self):
        ep, clock = self.bench.ep, self.bench.clock
        dw = len(ep.data)
        for frame in self.frames:
            sfd = frame.find(0xD5) if frame[:1] == b"\x55" else 0   # -1: no SFD.
            if dw == 64 and sfd > 0:
                sfd = 0 if frame[:8] == PREAMBLE else -1            # The preamble column, or none.
            words = list(beats(frame, dw))
            for i, (word, last_be) in enumerate(words):
                while i and self.rng.random() < self.valid_gaps:
                    yield ep.valid.eq(0)
                    yield
                yield ep.valid.eq(1)
                yield ep.data.eq(word)
                yield ep.last.eq(i == len(words) - 1)
                yield ep.last_be.eq(last_be)
                while True:
                    ready = int(self.rng.random() >= self.ready_stalls)
                    yield ep.ready.eq(ready)
                    yield
                    if ready:
                        if i == sfd:   # The SFD beat's cycle.
                            self.sfd_times.append(((yield clock.sec), (yield clock.ns)))
                        break
            yield ep.valid.eq(0)
            yield ep.last.eq(0)
            for _ in range(self.idle):
                yield
        for _ in range(30):
            yield
        self.done = True


def reader(ts, records, stop, pop=True):
    """The firmware: read the head record while pending, then pop it."""
    while not stop():
        if pop and (yield ts._status.fields.pending):
            f = ts._info.fields
            records.append(dict(
                sec=(yield ts._seconds.status), ns=(yield ts._nanoseconds.status),
                msg_type=(yield f.message_type), seq=(yield f.sequence_id), udp=(yield f.udp),
                vlan=(yield f.vlan), dst=(yield f.dst), domain=(yield f.domain), source=(yield ts._source.status)))
            if hasattr(ts, "_start_lane"):
                records[-1]["lane"] = yield ts._start_lane.status
            yield ts._pop.re.eq(1)
            yield
            yield ts._pop.re.eq(0)
        yield


def simulate(frames, cd="sys", cd_clock="sys", clocks=None, pop=True, bench_kw={}, dw=8, **feed):
    bench = Bench(cd=cd, cd_clock=cd_clock, dw=dw, **bench_kw)
    feeder = Feeder(bench, frames, **feed)
    records = []
    gens = {"sys": [reader(bench.ts, records, lambda: feeder.done, pop)]}
    gens.setdefault(cd, []).append(feeder.run())
    clocks = clocks or {d: 8 for d in {"sys", cd, cd_clock}}
    run_simulation(bench, gens, clocks=clocks)
    return bench, feeder, records


MESSAGES = [(0, "Sync"), (1, "Delay_Req"), (8, "Follow_Up"), (9, "Delay_Resp"), (11, "Announce")]


@pytest.mark.parametrize("transport", ["udp", "l2"])
def test_each_message_type_is_timestamped_at_its_sfd_cycle(transport, dw):
    make = ptp_udp if transport == "udp" else ptp_l2
    frames = [make(t, 1000 + 17*k, domain=k, port=0x0100 + k) for k, (t, _) in enumerate(MESSAGES)]
    bench, feeder, records = simulate(frames, dw=dw)
    assert len(records) == len(MESSAGES) == len(feeder.sfd_times)
    for k, (rec, (t, name), (sec, ns)) in enumerate(zip(records, MESSAGES, feeder.sfd_times)):
        assert (rec["sec"], rec["ns"]) == (sec, ns), name
        assert (rec["msg_type"], rec["seq"], rec["domain"]) == (t, 1000 + 17*k, k), name
        assert rec["udp"] == (transport == "udp") and rec["vlan"] == 0 and rec["dst"] == DST_PRIMARY
        assert rec["source"] == ((CLOCK_ID & 0xffff) << 16) | (0x0100 + k)


@pytest.mark.parametrize("transport", ["udp", "l2"])
def test_vlan_tagged_frames_and_destination_classes(transport, dw):
    if transport == "udp":
        frames = [
            ptp_udp(0, 1, vlan=7),
            ptp_udp(1, 2, dst="192.168.1.50", mac=OUR_MAC),               # Unicast to us.
            ptp_udp(2, 3, dst="224.0.0.107", mac="01:00:5e:00:00:6b"),    # Pdelay_Req.
            ptp_udp(0, 4, options=[IPOption_Router_Alert()]),             # IHL 6: options skipped.
        ]
    else:
        frames = [
            ptp_l2(0, 1, vlan=7),
            ptp_l2(1, 2, dst=OUR_MAC),
            ptp_l2(2, 3, dst="01:80:c2:00:00:0e"),
            ptp_l2(0, 4, dst="01:1b:19:00:00:01"),                        # Close, but not it.
        ]
    assert IP(frames[-1][8 + 14:]).ihl == 6 or transport == "l2"
    bench, feeder, records = simulate(frames, dw=dw)
    assert [(r["seq"], r["vlan"], r["dst"]) for r in records] == [
        (1, 1, DST_PRIMARY), (2, 0, DST_OTHER), (3, 0, DST_PDELAY), (4, 0, DST_PRIMARY if transport == "udp" else DST_OTHER)]
    assert [(r["sec"], r["ns"]) for r in records] == feeder.sfd_times


def test_non_ptp_frames_make_no_record(dw):
    eth = Ether(src="02:00:00:00:00:02", dst="01:00:5e:00:01:81")
    short = PREAMBLE + bytes(Ether(dst="01:1b:19:00:00:00", type=0x88F7)/ptp(0, 9))[:14 + 20]
    frames = [
        wire(Ether(dst="ff:ff:ff:ff:ff:ff")/ARP(pdst="192.168.1.50")),
        wire(eth/IP(dst="224.0.1.129")/UDP(sport=319, dport=5000)/ptp(0, 1)),            # Other port.
        wire(eth/IP(dst="224.0.1.129", options=[IPOption_Router_Alert()])/UDP(dport=5000)/ptp(0, 2)),
        wire(eth/IP(dst="224.0.1.129", proto=6)/UDP(sport=319, dport=319)/ptp(0, 3)),    # Not UDP.
        wire(eth/IP(dst="224.0.1.129", flags="MF")/UDP(sport=319, dport=319)/ptp(0, 4)), # A fragment.
        wire(eth/IP(dst="224.0.1.129", frag=100)/UDP(sport=319, dport=319)/ptp(0, 5)),
        ptp_udp(0, 6, version=1),                                                         # PTPv1.
        wire(Ether(dst="01:1b:19:00:00:00")/Dot1Q(vlan=1)/Dot1Q(vlan=2, type=0x88F7)/ptp(0, 7)),  # Two tags.
        wire(Ether(dst="01:1b:19:00:00:00", type=0x86DD)/ptp(0, 8)),                      # IPv6 type.
        short,                                                                            # Ends in the header.
        bytes([0x55]*7 + [0x5D]) + bytes(Ether(dst="01:1b:19:00:00:00", type=0x88F7)/ptp(0, 10)),  # No SFD.
        ptp_udp(0, 11),                                                                   # The control.
    ]
    # IHL below 5 (a malformed header): dropped. With IHL 4 the 16-byte header would end before
    # the destination address, which here reads as UDP ports 319, followed by four bytes and a
    # PTP header: taken as PTP over UDP if the IHL were not checked.
    frames[-1:-1] = [wire(eth/IP(dst="1.63.1.63", ihl=ihl)/UDP(sport=319, dport=319)/ptp(0, 20 + ihl))
                     for ihl in (0, 1)]
    frames[-1:-1] = [wire(eth/IP(dst="1.63.1.63", ihl=4, proto=17)/Raw(bytes(4) + bytes(ptp(0, 24))))]
    bench, feeder, records = simulate(frames, dw=dw)
    assert [r["seq"] for r in records] == [11]
    assert (records[0]["sec"], records[0]["ns"]) == feeder.sfd_times[-1]


def test_receive_valid_gaps_and_transmit_ready_stalls_keep_the_exact_sfd_cycle(dw):
    frames = [ptp_udp(0, s) if s % 2 else ptp_l2(1, s) for s in range(8)]
    for kw in (dict(valid_gaps=0.3, seed=3), dict(ready_stalls=0.3, seed=4)):
        bench, feeder, records = simulate(frames, dw=dw, **kw)
        assert [r["seq"] for r in records] == list(range(8))
        assert [(r["sec"], r["ns"]) for r in records] == feeder.sfd_times


def test_stream_without_preamble_is_timestamped_at_its_first_byte(dw):
    """PHYs without preamble on their stream (with_preamble_crc False): the first beat is the
    SFD's stand-in (docs/ptp.md: one byte time after the SFD; at 64 bits a transmitter's sink,
    whose first word goes with its /S/ column)."""
    frames = [ptp_udp(0, 31)[8:], ptp_l2(9, 32)[8:], ptp_udp(1, 33, dst="192.168.1.50", mac=OUR_MAC)[8:]]
    bench, feeder, records = simulate(frames, bench_kw=dict(with_preamble=False), dw=dw)
    assert [(r["seq"], r["dst"]) for r in records] == [(31, DST_PRIMARY), (32, DST_PRIMARY), (33, DST_OTHER)]
    assert [(r["sec"], r["ns"]) for r in records] == feeder.sfd_times


def test_receive_tap_ignores_ready():
    """LiteEth's PHY RX sources do not honour ready: tapped with ignore_ready, a byte is a byte
    even while the consumer holds ready low."""
    frames = [ptp_udp(0, 21), ptp_udp(0, 22)]
    bench = Bench(ignore_ready=True)
    feeder = Feeder(bench, frames)
    records = []

    def feed():
        ep = bench.ep
        for frame in frames:
            for i, byte in enumerate(frame):
                yield ep.valid.eq(1)
                yield ep.data.eq(byte)
                yield ep.last.eq(i == len(frame) - 1)
                yield
                if byte == 0xD5 and i == 7:
                    feeder.sfd_times.append(((yield bench.clock.sec), (yield bench.clock.ns)))
            yield ep.valid.eq(0)
            for _ in range(12):
                yield
        for _ in range(30):
            yield
        feeder.done = True

    run_simulation(bench, [feed(), reader(bench.ts, records, lambda: feeder.done)])
    assert [r["seq"] for r in records] == [21, 22]
    assert [(r["sec"], r["ns"]) for r in records] == feeder.sfd_times


@pytest.mark.parametrize("cd, kept", [("sys", 4), ("eth_rx", 6)])
def test_back_to_back_frames_and_fifo_overflow_is_counted(cd, kept):
    """`kept`: a 4-deep FIFO keeps four records in one clock domain; across domains (LevelFIFO,
    its block RAM read through two stages) six."""
    frames = [ptp_udp(0, s) if s % 2 else ptp_l2(8, s) for s in range(9)]
    # Back to back (no idle cycle between frames), read as they come: all nine, at both widths
    # (at 64 bits the next frame's SFD beat is in the cycle its predecessor's record is written).
    for dw in (8, 64):
        bench, feeder, records = simulate(frames, cd=cd, idle=0, dw=dw)
        assert [r["seq"] for r in records] == list(range(9)), dw
        assert [(r["sec"], r["ns"]) for r in records] == feeder.sfd_times, dw

    # The firmware busy elsewhere during the burst: the FIFO keeps the first records, the others
    # are counted, then it drains.
    bench = Bench(cd=cd, depth=4)
    feeder = Feeder(bench, frames, idle=0)
    records, result = [], {}

    def firmware():
        while not feeder.done:
            yield
        result["overflows"] = (yield bench.ts._overflows.status)
        budget = iter(range(40))
        yield from reader(bench.ts, records, lambda: next(budget, None) is None)

    gens = [feeder.run(), firmware()] if cd == "sys" else {"sys": [firmware()], cd: [feeder.run()]}
    run_simulation(bench, gens, clocks={"sys": 8, cd: 8})
    assert result["overflows"] == len(frames) - kept
    assert [r["seq"] for r in records] == list(range(kept))
    assert [(r["sec"], r["ns"]) for r in records] == feeder.sfd_times[:kept]


@pytest.mark.parametrize("cd, cd_clock", [("eth_rx", "sys"), ("eth_tx", "eth_tx"), ("eth_rx", "eth_tx")])
def test_timestamps_cross_clock_domains_exactly_when_the_clocks_coincide(cd, cd_clock):
    frames = [ptp_udp(0, 1), ptp_l2(1, 2, vlan=3), ptp_udp(9, 3)]
    bench, feeder, records = simulate(frames, cd=cd, cd_clock=cd_clock, valid_gaps=0.1)
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert [(r["sec"], r["ns"]) for r in records] == feeder.sfd_times


@pytest.mark.parametrize("phase", [1, 3, 5, 7])
def test_asynchronous_phase_is_within_one_cycle(phase):
    """Tap domain shifted against the clock's: the captured time is the clock's value within one
    clock cycle of the SFD cycle (docs/ptp.md: ±1 cycle with unrelated clocks). Migen's simulator
    does not model sub-cycle timing between domains (here: a constant -8 ns for every nonzero
    phase), so this bounds the error rather than predicting it."""
    frames = [ptp_udp(0, s) for s in range(3)]
    bench, feeder, records = simulate(frames, cd="eth_rx", cd_clock="sys",
                                      clocks={"sys": 8, "eth_rx": (8, phase)})
    assert len(records) == 3
    for r, (sec, ns) in zip(records, feeder.sfd_times):
        assert abs((r["sec"]*NS_PER_S + r["ns"]) - (sec*NS_PER_S + ns)) <= 8


def test_phy_corrections():
    assert tsu.phy_corrections_ns("gmii") == (16, 0)
    assert tsu.phy_corrections_ns("ecp5rgmii") == (16, -16)
    assert tsu.phy_corrections_ns("mii") == (80, -40)
    # A registered TX tap sees the SFD one PHY cycle late: that cycle comes off the TX correction.
    assert tsu.phy_corrections_ns("ecp5rgmii", tx_tap_cycles=1) == (8, -16)
    assert tsu.phy_corrections_ns("mii", tx_tap_cycles=1) == (40, -40)
    # XGMII: the SFD beat is /S/'s column; the point is lane 0 of the next (6.4 ns later).
    assert tsu.phy_corrections_ns("xgmii", tx_tap_cycles=1) == (6.4, 0)
    with pytest.raises(ValueError, match=r"^phy_name must be one of \['ecp5rgmii', 'gmii', 'mii', 's7rgmii', 'xgmii'\], not 'sgmii'$"):
        tsu.phy_corrections_ns("sgmii")


# The corrections' cycle counts, checked against LiteEth's own PHY code where it is plain logic
# (the RGMII PHYs are DDR primitives Migen cannot simulate; counted in docs/ptp.md).

_PREAMBLE_SFD = list(PREAMBLE)
_PAYLOAD      = [0x01, 0x23, 0x45, 0x67]


def _nibbles(octets):
    return [n for b in octets for n in (b & 0xf, b >> 4)]


def _phy_pads(width):
    return Record([("tx_en", 1), ("tx_er", 1), ("tx_data", width),
                   ("rx_dv", 1), ("rx_er", 1), ("rx_data", width)])


@pytest.mark.parametrize("phy", ["gmii", "mii"])
def test_phy_tx_latency_matches_liteeth(phy):
    """Tap at the PHY's sink (the SFD byte's handshake) to the IEEE 1588 timestamp point (the first
    symbol after the SFD) at the pins: the TX correction."""
    from liteeth.phy.gmii import LiteEthPHYGMIITX
    from liteeth.phy.mii import LiteEthPHYMIITX
    width = 8 if phy == "gmii" else 4
    pads  = _phy_pads(width)
    dut   = (LiteEthPHYGMIITX if phy == "gmii" else LiteEthPHYMIITX)(pads)
    frame = _PREAMBLE_SFD + _PAYLOAD
    symbols = frame if width == 8 else _nibbles(frame)
    after_sfd = symbols[len(_PREAMBLE_SFD)*(8//width)]
    seen = {"tap": None, "pins": []}

    def source():
        for i, byte in enumerate(frame):
            yield dut.sink.valid.eq(1)
            yield dut.sink.data.eq(byte)
            yield dut.sink.last.eq(i == len(frame) - 1)
            while True:
                yield
                if (yield dut.sink.ready):
                    break
        yield dut.sink.valid.eq(0)

    def monitor():
        for cycle in range(60):
            if (yield dut.sink.valid) and (yield dut.sink.ready) and (yield dut.sink.data) == 0xD5:
                seen["tap"] = cycle
            if (yield pads.tx_en):
                seen["pins"].append((cycle, (yield pads.tx_data)))
            yield

    run_simulation(dut, [source(), monitor()])
    assert [s for _, s in seen["pins"]] == symbols
    pin_cycle = seen["pins"][len(_PREAMBLE_SFD)*(8//width)][0]
    assert seen["pins"][len(_PREAMBLE_SFD)*(8//width)][1] == after_sfd
    period_ns, _ = tsu.PHY_TIMING_NS.get(phy, (8, 8))
    assert (pin_cycle - seen["tap"])*period_ns == tsu.phy_corrections_ns(phy)[0]


@pytest.mark.parametrize("phy", ["gmii", "mii"])
def test_phy_rx_latency_matches_liteeth(phy):
    """The first symbol after the SFD at the pins to the tap at the PHY's source (the SFD byte):
    the RX correction (negative: the tap comes after the timestamp point)."""
    from liteeth.phy.gmii import LiteEthPHYGMIIRX
    from liteeth.phy.mii import LiteEthPHYMIIRX
    width = 8 if phy == "gmii" else 4
    pads  = _phy_pads(width)
    dut   = (LiteEthPHYGMIIRX if phy == "gmii" else LiteEthPHYMIIRX)(pads)
    frame = _PREAMBLE_SFD + _PAYLOAD
    symbols = frame if width == 8 else _nibbles(frame)
    seen = {"tap": None, "bytes": []}

    def pins():
        # Each yield is one clock cycle. Migen commits a generator's writes at the clock edge: a
        # value written in cycle n is on the pins during cycle n + 1 (as monitor() reads them).
        cycle = 0
        for _ in range(3):
            yield
            cycle += 1
        for i, s in enumerate(symbols):
            yield pads.rx_dv.eq(1)
            yield pads.rx_data.eq(s)
            if i == len(_PREAMBLE_SFD)*(8//width):
                seen["pin"] = cycle + 1
            yield
            cycle += 1
        yield pads.rx_dv.eq(0)

    def monitor():
        yield dut.source.ready.eq(1)  # The MAC always accepts what the PHY receives.
        for cycle in range(60):
            if (yield dut.source.valid) and (yield dut.source.ready):
                data = (yield dut.source.data)
                seen["bytes"].append(data)
                if data == 0xD5 and seen["tap"] is None:
                    seen["tap"] = cycle
            yield

    run_simulation(dut, [pins(), monitor()])
    assert seen["bytes"][:len(frame)] == frame
    period_ns, _ = tsu.PHY_TIMING_NS.get(phy, (8, 8))
    assert (seen["pin"] - seen["tap"])*period_ns == tsu.phy_corrections_ns(phy)[1]


# XGMII: timestamps at the pins ---------------------------------------------------------------------

XGMII_CLK = 156.25e6   # One 64-bit column, 8 byte times of 0.8 ns, per 6.4 ns cycle.


class XGMIIBench(LiteXModule):
    """One clock: a PTPClock and a PTPTimestamper(dw=64) tapped as the SoC taps a PHY (tap_phy):
    receive, LiteEth's XGMII receiver's source, combinationally, ignoring ready; transmit,
    ethdaq's XGMII transmitter's sink, registered. The lane from XGMIIStartLane on the pins
    (`ctl`, `data`)."""
    def __init__(self, direction):
        from liteeth.phy.xgmii import LiteEthPHYXGMIIRX
        from ethdaq.gateware.xgmiitx import XGMIITransmitter
        self.clock = PTPClock(XGMII_CLK)
        if direction == "rx":
            pads = Record([("rx_ctl", 8), ("rx_data", 64)])
            self.ctl, self.data = pads.rx_ctl, pads.rx_data
            self.ts  = PTPTimestamper(self.clock, dw=64)
            self.phy = LiteEthPHYXGMIIRX(pads, 64)
            self.comb += tap(self.phy.source, self.ts.sink, ignore_ready=True)
        else:
            pads = Record([("tx_ctl", 8), ("tx_data", 64)])
            self.ctl, self.data = pads.tx_ctl, pads.tx_data
            self.ts  = PTPTimestamper(self.clock, dw=64, with_preamble=False)
            self.phy = XGMIITransmitter(pads)
            self.sync += tap(self.phy.sink, self.ts.sink)
        self.lane = XGMIIStartLane(self.ctl, self.data)
        self.comb += self.ts.lane4.eq(self.lane.lane4)


def xgmii_starts(bench, starts, stop):
    """Notes each /S/ on the bench's pins: (lane, the clock's time in ns in that column's cycle)."""
    while not stop():
        ctl, data = (yield bench.ctl), (yield bench.data)
        for lane in (0, 4):
            if ctl >> lane & 1 and (data >> 8*lane) & 0xFF == 0xFB:
                starts.append((lane, (yield bench.clock.sec)*NS_PER_S + (yield bench.clock.ns)))
        yield


def check_at_the_pins(records, starts, direction):
    """Each record plus the PHY's correction (and the lane's) is the clock's time at the frame's
    timestamp point on the pins: lane 0 of the column after /S/'s, i.e. 8 + lane byte times of
    0.8 ns after the start of /S/'s column; within the 1 ns the published times are floored to."""
    tx, rx = tsu.phy_corrections_ns("xgmii", tx_tap_cycles=tsu.TX_TAP_CYCLES)
    corr, lane4 = (tx, tsu.XGMII_LANE4_NS[0]) if direction == "tx" else (rx, tsu.XGMII_LANE4_NS[1])
    assert [r["lane"] for r in records] == [lane for lane, _ in starts]
    for r, (lane, pin_ns) in zip(records, starts):
        stamped = r["sec"]*NS_PER_S + r["ns"] + corr + (lane4 if lane == 4 else 0)
        assert abs(stamped - (pin_ns + (8 + lane)*0.8)) < 1, (r, lane, pin_ns)


def test_xgmii_receive_timestamps_at_the_start_character_with_its_lane():
    """PTP frames on the XGMII RX pins with /S/ in lane 0 and lane 4 (which LiteEth's aligner
    moves to lane 0 a cycle later), gaps of 12 to 19 bytes."""
    frames = [ptp_udp(0, s) if s % 2 else ptp_l2(1, s, vlan=s) for s in range(8)]
    bench, records, starts, state = XGMIIBench("rx"), [], [], {"done": False}

    def pins():
        chars = [(1, 0x07)]*8*16   # The clock's published time runs from the first cycles on.
        for n, f in enumerate(frames):
            chars += [(1, 0xFB)] + [(0, b) for b in f[1:]] + [(1, 0xFD)] + [(1, 0x07)]*11
            chars += [(1, 0x07)]*(((4 if n % 2 == 0 else 0) - len(chars)) % 8)   # Next /S/: lane 4, 0, 4...
        chars += [(1, 0x07)]*(-len(chars) % 8 + 64)
        for c in range(0, len(chars), 8):
            col = chars[c:c + 8]
            yield bench.ctl.eq(sum(k << i for i, (k, _) in enumerate(col)))
            yield bench.data.eq(sum(b << 8*i for i, (_, b) in enumerate(col)))
            yield
        state["done"] = True

    run_simulation(bench, [pins(), xgmii_starts(bench, starts, lambda: state["done"]),
                           reader(bench.ts, records, lambda: state["done"])])
    assert [r["seq"] for r in records] == list(range(8))
    assert sorted({lane for lane, _ in starts}) == [0, 4]
    check_at_the_pins(records, starts, "rx")


def test_xgmii_transmit_timestamps_at_the_start_character_with_its_lane():
    """PTP frames of several lengths back to back into ethdaq's XGMII transmitter, whose deficit
    idle count puts their /S/ in lane 0 or lane 4."""
    frames = [bytes(Ether(src="02:00:00:00:00:02", dst="01:1b:19:00:00:00", type=0x88F7)/ptp(0, s)/Raw(bytes(s)))
              for s in range(10)]
    bench, records, starts, state = XGMIIBench("tx"), [], [], {"done": False}

    def source():
        sink = bench.phy.sink
        for _ in range(16):   # The clock's published time runs from the first cycles on.
            yield
        for f in frames:
            words = list(beats(f, 64))
            for i, (word, last_be) in enumerate(words):
                yield sink.valid.eq(1)
                yield sink.data.eq(word)
                yield sink.last.eq(i == len(words) - 1)
                yield sink.last_be.eq(last_be)
                yield
                while not (yield sink.ready):
                    yield
        yield sink.valid.eq(0)
        for _ in range(64):
            yield
        state["done"] = True

    run_simulation(bench, [source(), xgmii_starts(bench, starts, lambda: state["done"]),
                           reader(bench.ts, records, lambda: state["done"])])
    assert [r["seq"] for r in records] == list(range(10))
    assert sorted({lane for lane, _ in starts}) == [0, 4]
    check_at_the_pins(records, starts, "tx")
