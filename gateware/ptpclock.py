#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The PTP time-of-day clock and its registers.

    PTPClock        seconds (48) + nanoseconds (30) + fraction, rate-adjustable, step and slew;
                    `time_ns` (64) for the streamer; PPS and a periodic output aligned to the second.
    PTPClockCSR     the firmware's registers for a PTPClock (sys), crossing to the clock's domain.
    TimeCapture     the clock's time for a request made in another domain (a timestamp).

Time arithmetic is in units of 2^-F ns (F = `frac_bits`). Each cycle the clock advances by its
increment `base_inc + adj`; `base_inc` is the period the gateware is built with (the nominal
period, or an off-nominal one when `ppm_error` models a wrong oscillator in simulation) and `adj`
is the firmware's signed rate adjustment. See docs/ptp.md for the register map, the firmware's
formulas and the clock-domain crossing.
"""

from fractions import Fraction

from migen import *
from migen.genlib.cdc import BusSynchronizer, MultiReg, PulseSynchronizer

from litex.gen import *

from litex.soc.interconnect.csr import CSRField, CSRStatus

from ethdaq.gateware.compare import below
from ethdaq.gateware.csr import CSRConfig

# Constants ----------------------------------------------------------------------------------------

NS_PER_S = 10**9

ADJ_BITS = 32  # Signed rate adjustment, 2^-F ns per cycle.

# Fixed latency of a PTPClock command or input change, in cycles of the clock's domain: a change
# in cycle `a` first shows in the published time (sec/ns/time_ns) of cycle `a + latency`.
ADJ_LATENCY = 6    # adj: published(a+6) - published(a+5) is the first increment at the new rate.
ADD_LATENCY = 6    # add: published(a+6) - published(a+5) = increment + offset.
SET_LATENCY = 54   # set: published(a+54) is the set time (48-cycle multiply for time_ns first).

# Cycles between the SFD cycle and the clock-domain cycle that captures it (request toggle register
# + two-flop synchroniser); the capture reads the clock's published time this many cycles old.
CAPTURE_DELAY = 3

# Helpers ------------------------------------------------------------------------------------------

def period_ns(clk_freq):
    """Exact clock period in ns (a Fraction: 60 MHz is 50/3 ns)."""
    return Fraction(NS_PER_S) / Fraction(clk_freq)


def frac_bits_for(clk_freq, ppb=Fraction(1, 100)):
    """Fewest fraction bits F for which one adjustment LSB (2^-F ns per cycle) is at most `ppb`
    parts per billion of the rate (8 ns: 34 bits, 0.0073 ppb; 16.67 ns: 33 bits, 0.0070 ppb)."""
    p = period_ns(clk_freq)
    f = 0
    while Fraction(1, 2**f) > p*Fraction(ppb)/NS_PER_S:
        f += 1
    return f


def nominal_increment(clk_freq, frac_bits):
    """The period the firmware believes in, in 2^-F ns (rounded when not exact, e.g. 60 MHz: the
    rounding error, below 0.01 ppb, is an oscillator error like any other for the servo)."""
    return round(period_ns(clk_freq) * 2**frac_bits)


def modelled_increment(clk_freq, frac_bits, ppm_error=0.0):
    """Increment of a clock whose oscillator runs `ppm_error` ppm fast (negative: slow).

    Simulation gives every board the same clock, each cycle being one nominal period of true
    time. A fast oscillator ticks 1 + ppm_error*1e-6 times per nominal period, each tick advancing
    the clock by the nominal period; at the time-of-day level that is the same as advancing by
    nominal_period * (1 + ppm_error*1e-6) every (true) cycle, which is what the gateware does. So
    with adj = 0, after N cycles (true time N*period) the clock has advanced by
    N*modelled_increment*2^-F ns. The timestamp grid stays the true cycle.
    """
    ppm = Fraction(str(ppm_error))  # The decimal the user wrote, not its binary approximation.
    return round(period_ns(clk_freq) * (1 + ppm/10**6) * 2**frac_bits)


def ppb_to_adj(ppb, clk_freq, frac_bits):
    """Rate adjustment (ppb of the nominal rate; positive: run faster) → adj register value
    (2^-F ns per cycle): round(ppb * 1e-9 * nominal_increment)."""
    return round(Fraction(str(ppb)) / NS_PER_S * nominal_increment(clk_freq, frac_bits))


def adj_per_ppb_q16(clk_freq, frac_bits):
    """adj LSBs per ppb, Q16 fixed point, for the firmware: adj = (ppb * this) >> 16."""
    return round(Fraction(nominal_increment(clk_freq, frac_bits), NS_PER_S) * 2**16)


# PTP Clock ----------------------------------------------------------------------------------------

class PTPClock(LiteXModule):
    """Time of day (seconds, nanoseconds, fraction) in one clock domain ("sys"; rename with
    ClockDomainsRenamer). No CSRs: PTPClockCSR is the firmware's interface.

    Parameters
    ----------
    clk_freq : nominal frequency of the clock domain, Hz.
    frac_bits : fraction bits F (default: fewest for 0.01 ppb per adjustment LSB, frac_bits_for).
    ppm_error : models an oscillator off by this many ppm (simulation; see modelled_increment).
    with_osc_error : adds the input `osc_error` (signed 32-bit, 2^-F ns per cycle) to every
          increment: an oscillator error a testbench chooses at run time (simulation; the
          two-board bench sets it to modelled_increment(ppm) - nominal_inc).

    Inputs (clock domain)
    ---------------------
    adj : signed 32-bit rate adjustment in 2^-F ns per cycle, added to every increment (level;
          takes effect ADJ_LATENCY cycles after it changes).
    set_stb, set_sec, set_ns : set the time (set_ns < 10^9, else rejected); published SET_LATENCY
          cycles later. Ignored (rejected) while a set is in progress (`busy`).
    add_stb, add_ns : add a signed offset, |add_ns| < 10^9 (else rejected), in a single cycle
          (ADD_LATENCY): no published value is ever half-stepped.
    pps_width : ns of PPS high time after each second boundary (0: one cycle).
    period, width : periodic output, ns (period 0: off; width 0: one-cycle pulses).
    synced : passed through to `synced_o` for consumers in this domain (the firmware sets it).

    Outputs (clock domain, registered, mutually consistent in every cycle)
    ---------------------------------------------------------------------
    sec (48), ns (30, < 10^9), frac (F), time_ns (64) == (sec*10^9 + ns) mod 2^64 (exact for the
          next 584 years of TAI; 48-bit seconds go further),
    time_ns_next : the value time_ns has in the next cycle (for a consumer that registers the
          time in the cycles before an event instead of choosing between it and a register).
    pps : high in the cycle in which ns wraps (a new second starts) and while ns < pps_width.
    periodic : high while (ns mod period) < width, period counted from each second boundary, and
          for the cycle in which a period starts; after a step (set or add) or a change of
          `period`, low until the next second boundary (the phase is realigned there).
    busy : a set is in progress.  rejected : one-cycle pulse for a rejected set/add (registered:
          1 cycle after add_stb, 2 after set_stb).
    stepped : high in the first published cycle that shows an accepted set or add.
    """
    def __init__(self, clk_freq, frac_bits=None, ppm_error=0.0, with_osc_error=False):
        if clk_freq <= 0:
            raise ValueError(f"clk_freq must be positive (Hz), not {clk_freq!r}")
        minimum = frac_bits_for(clk_freq)
        if frac_bits is None:
            frac_bits = minimum
        if not isinstance(frac_bits, int) or not (minimum <= frac_bits <= 48):
            raise ValueError(f"frac_bits must be an int in {minimum}..48 (one adjustment LSB <= 0.01 ppb "
                             f"at {clk_freq/1e6:g} MHz), not {frac_bits!r}")
        F = frac_bits
        self.clk_freq    = clk_freq
        self.frac_bits   = F
        self.ppm_error   = ppm_error
        self.nominal_inc = nominal_increment(clk_freq, F)
        self.base_inc    = modelled_increment(clk_freq, F, ppm_error)
        if self.base_inc < 2**ADJ_BITS or self.base_inc >= NS_PER_S << F:
            raise ValueError(f"ppm_error must leave a positive period below 1 s, not {ppm_error!r}")

        self.adj       = Signal((ADJ_BITS, True))
        self.osc_error = Signal((ADJ_BITS, True))  # Only used with_osc_error.
        self.set_stb   = Signal()
        self.set_sec   = Signal(48)
        self.set_ns    = Signal(30)
        self.add_stb   = Signal()
        self.add_ns    = Signal((32, True))
        self.pps_width = Signal(30)
        self.period    = Signal(30)
        self.width     = Signal(30)
        self.synced    = Signal()

        self.sec      = Signal(48)
        self.ns       = Signal(30)
        self.frac     = Signal(F)
        self.time_ns  = Signal(64)
        self.time_ns_next = Signal(64)
        self.pps      = Signal()
        self.periodic = Signal()
        self.synced_o = Signal()
        self.busy     = Signal()
        self.rejected = Signal()
        self.stepped  = Signal()

        # # #

        self._history = []  # Delayed copies of (sec, ns), for timestamp captures (see delayed()).
        ba_int, ba_frac = self._add_rate(with_osc_error)
        inc_t, inc_n, sw, step_b, add_ok = self._add_increment(ba_int)
        s_sec, s_ns, s_acc, apply = self._add_set_command(add_ok)
        nanoseconds = self._add_nanoseconds(ba_frac, inc_t, inc_n, sw, step_b, s_ns, s_acc, apply)
        raw = self._add_raw_time(s_sec, *nanoseconds)
        self._add_published(*raw)

    def _add_rate(self, with_osc_error):
        """Stage A: the increment of every cycle, base + adj, registered."""
        F = self.frac_bits
        # base + adj (quasi-static: the firmware changes adj rarely). Always positive,
        # since base_inc >= 2^32 > |adj|.
        # Reset values are those of adj = 0, so the clock runs right from the first cycle.
        ba_bits = bits_for(self.base_inc + 2**ADJ_BITS) + with_osc_error
        ba = Signal(ba_bits, reset=self.base_inc)
        self.sync += ba.eq(self.base_inc + self.adj + (self.osc_error if with_osc_error else 0))
        return ba[F:], ba[:F]   # Integer ns, fraction.

    def _add_increment(self, ba_int):
        """Stage B: this cycle's increment, with an offset (add) for one cycle."""
        F = self.frac_bits
        base_int = self.base_inc >> F
        # An offset (add) joins the increment for one cycle, in two forms:
        # as it is for time_ns and the phase (inc_t), and normalised to (-10^9, 0] for the
        # nanoseconds (inc_n) with the second it carries (sw), so that stage U's nanoseconds wrap
        # by at most one second either way. Both are registered with the command, so every sum
        # below has two operands and a carry-in.
        pend   = Signal()
        add_ok = Signal()
        add_t  = Signal((32, True))
        add_n  = Signal((32, True))
        add_s  = Signal()
        self.comb += add_ok.eq((self.add_ns > -NS_PER_S) & (self.add_ns < NS_PER_S))
        self.sync += [
            pend.eq(self.add_stb & add_ok),
            If(self.add_stb,
                add_t.eq(self.add_ns),
                add_n.eq(self.add_ns + Mux(self.add_ns > 0, -NS_PER_S, 0)),
                add_s.eq(self.add_ns > 0),
            ),
        ]
        inc_t  = Signal((34, True), reset=base_int)
        inc_n  = Signal((34, True), reset=base_int)
        sw     = Signal()
        step_b = Signal()
        self.sync += [
            step_b.eq(pend),
            inc_t.eq(ba_int + Mux(pend, add_t, 0)),
            inc_n.eq(ba_int + Mux(pend, add_n, 0)),
            sw.eq(pend & add_s),
        ]
        return inc_t, inc_n, sw, step_b, add_ok

    def _add_set_command(self, add_ok):
        """A set: sec*10^9 for time_ns, then the load (`apply`); rejections."""
        # time_ns needs sec*10^9, made by a 48-cycle shift-and-add (a set is rare;
        # a parallel 48x30 multiply would not meet timing at 125 MHz on ECP5).
        s_sec   = Signal(48)
        s_ns    = Signal(30)
        s_shift = Signal(48)
        s_acc   = Signal(64)
        s_count = Signal(max=49)
        apply   = Signal()
        set_ok  = Signal()
        # The command is registered first, so that its range check is not in series with the rest.
        set_r     = Signal()
        set_sec_r = Signal(48)
        set_ns_r  = Signal(30)
        set_ns_ok = Signal()
        self.sync += [
            set_r.eq(self.set_stb),
            set_sec_r.eq(self.set_sec),
            set_ns_r.eq(self.set_ns),
            set_ns_ok.eq(below(self.set_ns, NS_PER_S)),
            self.rejected.eq((set_r & ~set_ok) | (self.add_stb & ~add_ok)),
        ]
        self.comb += set_ok.eq(~self.busy & set_ns_ok)
        # `apply` (the cycle the set is loaded, s_count == 0) from a register: it fans out to
        # every time register's reset/enable.
        self.sync += apply.eq(self.busy & (s_count == 1))
        self.sync += [
            If(set_r & set_ok,
                self.busy.eq(1),
                s_sec.eq(set_sec_r),
                s_shift.eq(set_sec_r),
                s_ns.eq(set_ns_r),
                s_acc.eq(0),
                s_count.eq(48),
            ).Elif(self.busy,
                If(s_count != 0,
                    s_acc.eq((s_acc << 1) + Mux(s_shift[47], NS_PER_S, 0)),
                    s_shift.eq(s_shift << 1),
                    s_count.eq(s_count - 1),
                ).Else(
                    self.busy.eq(0),
                )
            )
        ]
        return s_sec, s_ns, s_acc, apply

    def _add_nanoseconds(self, ba_frac, inc_t, inc_n, sw, step_b, s_ns, s_acc, apply):
        """Stage U: the nanoseconds, the fraction and time_ns of the next transition."""
        F = self.frac_bits
        base_int = self.base_inc >> F
        # Nanoseconds normalised to [0, 10^9) in one step, x = ns + increment + carry,
        # wrapped by one second up (x >= 10^9) or down (x < 0, only after a negative offset);
        # `w` is the seconds this transition moves (the wrap and the offset's second, -1..2), for
        # stage R's seconds. time_ns is the same sum without the wrap, 64 bits. Two carry chains
        # in series (x, then x - 10^9): at the ECP5 boards' 60 MHz not a critical path
        # (docs/boards/README.md); at the Xilinx boards' 100 and 125 MHz untested here (no Vivado).
        # The fraction runs one cycle ahead (fa = next ufrac), so that its carry into the ns, c,
        # is a register: it enters every sum below as a carry-in. ba_frac is the fraction of the
        # increment the integer parts (inc_t, inc_n, registered from ba) will hold next cycle.
        uns   = Signal(30)
        w     = Signal((3, True))
        ufrac = Signal(F)
        utns  = Signal(64)
        ustep = Signal()
        uset  = Signal()
        uinc  = Signal((34, True), reset=base_int)  # ns advanced in this transition, without c,
        uc    = Signal()                            # and c: for the periodic output's phase.
        fa   = Signal(F, reset=self.base_inc & (2**F - 1))
        c    = Signal()
        fsum = Signal(F + 1)
        x    = Signal((33, True))
        xm   = Signal((33, True))
        xp   = Signal((33, True))
        self.comb += [
            fsum.eq(fa + ba_frac),
            x.eq(uns + inc_n + c),
            xm.eq(x - NS_PER_S),
            xp.eq(x + NS_PER_S),
        ]
        self.sync += [
            fa.eq(fsum[:F]),
            c.eq(fsum[F]),
            ufrac.eq(fa),
            utns.eq(utns + inc_t + c),
            uinc.eq(inc_t),
            uc.eq(c),
            ustep.eq(step_b),
            uset.eq(0),
            If(x[-1],
                uns.eq(xp), w.eq(sw - 1),
            ).Elif(~xm[-1],
                uns.eq(xm), w.eq(sw + 1),
            ).Else(
                uns.eq(x), w.eq(sw),
            ),
            If(apply,
                uns.eq(s_ns),
                w.eq(0),
                ufrac.eq(0),
                fa.eq(ba_frac),     # = 0 + the next cycle's fraction increment,
                c.eq(0),            # which has no carry out of a zero fraction.
                utns.eq(s_acc + s_ns),
                ustep.eq(1),
                uset.eq(1),
            ),
        ]
        return uns, w, ufrac, utns, ustep, uset, uinc, uc

    def _add_raw_time(self, s_sec, uns, w, ufrac, utns, ustep, uset, uinc, uc):
        """Stage R: the seconds follow the nanoseconds' wraps."""
        F = self.frac_bits
        base_int = self.base_inc >> F
        # Stage R (raw time): the seconds follow the nanoseconds' wraps (a set loads them).
        sec   = Signal(48)
        ns    = Signal(30)
        frac  = Signal(F)
        tns   = Signal(64)
        fwd   = Signal()  # This value came from a forward second wrap.
        step  = Signal()  # This value came from a step (add or set).
        delta = Signal((34, True), reset=base_int)
        dc    = Signal()
        P       = Signal(30)             # Active period of the periodic output.
        delta_p = Signal((35, True))     # delta - P, so the phase update below is one adder deep.
        self.sync += [
            If(uset,
                sec.eq(s_sec),
            ).Else(
                sec.eq(sec + w),
            ),
            ns.eq(uns),
            fwd.eq(w == 1),       # (A set's transition has w = 0.)
            frac.eq(ufrac),
            tns.eq(utns),
            step.eq(ustep),
            delta.eq(uinc),
            dc.eq(uc),
            delta_p.eq(uinc - P),
        ]
        return sec, ns, frac, tns, fwd, step, delta, dc, P, delta_p

    def _add_published(self, sec, ns, frac, tns, fwd, step, delta, dc, P, delta_p):
        """Stages D and O: the periodic output's phase, then the published registers."""
        F = self.frac_bits
        # Stage D: one cycle behind R. The periodic output's phase (ns mod period) is tracked here
        # from R's registered delta, so every output below is a register of registers.
        sec_d  = Signal(48)
        ns_d   = Signal(30)
        frac_d = Signal(F)
        tns_d  = Signal(64)
        fwd_d  = Signal()
        step_d = Signal()
        self.sync += [sec_d.eq(sec), ns_d.eq(ns), frac_d.eq(frac), tns_d.eq(tns), fwd_d.eq(fwd), step_d.eq(step)]

        ph      = Signal(30)   # ns_d mod P, valid while `aligned`.
        start   = Signal()     # ns_d is the first cycle of a period.
        aligned = Signal()
        pa = Signal((36, True))
        pb = Signal((36, True))
        self.comb += [
            pa.eq(ph + delta + dc),
            pb.eq(ph + delta_p + dc),   # (P changes clear `aligned` until the next second, so a
                                   # delta_p computed with the old P is never used.)
        ]
        self.sync += [
            P.eq(self.period),
            start.eq(0),
            If(fwd & ~step,
                # ns is small right after a wrap: it is the phase if below one period.
                ph.eq(ns),
                start.eq(1),
                aligned.eq((P != 0) & (ns < P)),
            ).Elif(step,
                aligned.eq(0),
            ).Elif(~pb[-1],
                ph.eq(pb),
                start.eq(1),
            ).Else(
                ph.eq(pa),
            ),
            # A new period length realigns at the next second.
            If(self.period != P, aligned.eq(0)),
        ]

        # Stage O (published).
        self.comb += self.time_ns_next.eq(tns_d)
        self.sync += [
            self.sec.eq(sec_d),
            self.ns.eq(ns_d),
            self.frac.eq(frac_d),
            self.time_ns.eq(tns_d),
            self.pps.eq(fwd_d | (ns_d < self.pps_width)),
            self.periodic.eq(aligned & (start | (ph < self.width))),
            self.synced_o.eq(self.synced),
            self.stepped.eq(step_d),
        ]

    def delayed(self, n):
        """(sec, ns) as published n cycles ago (n >= 0), shared by all captures that ask."""
        while len(self._history) < n:
            prev = self._history[-1] if self._history else (self.sec, self.ns)
            d = (Signal(48, name=f"sec_h{len(self._history) + 1}"), Signal(30, name=f"ns_h{len(self._history) + 1}"))
            self.sync += [d[0].eq(prev[0]), d[1].eq(prev[1])]
            self._history.append(d)
        return (self.sec, self.ns) if n == 0 else self._history[n - 1]

    def constants(self, prefix="PTP_"):
        """Facts the firmware needs, for SoC constants (generated header). Rate adjustment from
        ppb: adj = (ppb * ADJ_PER_PPB_Q16) >> 16; from ppb in Q16 (like Linux's scaled_ppm):
        adj = (scaled_ppb * ADJ_PER_PPB_Q16) >> 32 (64-bit intermediate)."""
        return {
            prefix + "FRAC_BITS":       self.frac_bits,
            prefix + "NOMINAL_INC_HI":  self.nominal_inc >> 32,
            prefix + "NOMINAL_INC_LO":  self.nominal_inc & 0xffffffff,
            prefix + "ADJ_PER_PPB_Q16": adj_per_ppb_q16(self.clk_freq, self.frac_bits),
            prefix + "SET_LATENCY":     SET_LATENCY,
        }

# Time capture across domains ----------------------------------------------------------------------

class TimeCapture(LiteXModule):
    """Capture the clock's time for a request made in `cd`, delivered back in `cd`.

    A request toggles a register in `cd`; the clock's domain sees it through a two-flop
    synchroniser and, CAPTURE_DELAY cycles after the request cycle, holds the time published
    CAPTURE_DELAY cycles earlier, i.e. in the request cycle itself when both domains share a clock
    (simulation; PHYs whose eth_tx is eth_rx's clock, with the PTP clock in that domain). The held
    value is stable before the acknowledge toggle goes back through two flops into `cd`, where it
    is copied (`done` pulses with it). Round trip: about 4 cycles of each domain; a request while
    `busy` is ignored (`missed` pulses)."""
    def __init__(self, clock, cd="sys", cd_clock="sys"):
        self.request = Signal()
        self.done    = Signal()
        self.busy    = Signal()
        self.missed  = Signal()
        self.sec     = Signal(48)
        self.ns      = Signal(30)

        # # #

        sync_r = getattr(self.sync, cd)
        sync_c = getattr(self.sync, cd_clock)
        req   = Signal(reset_less=True)
        req_c = Signal()
        req_d = Signal(reset_less=True)
        ack   = Signal(reset_less=True)
        ack_r = Signal()
        ack_d = Signal(reset_less=True)
        held_sec = Signal(48, reset_less=True)
        held_ns  = Signal(30, reset_less=True)
        sec_h, ns_h = clock.delayed(CAPTURE_DELAY)

        self.comb += self.missed.eq(self.request & self.busy)
        sync_r += If(self.request & ~self.busy, req.eq(~req), self.busy.eq(1))
        self.specials += MultiReg(req, req_c, cd_clock)
        sync_c += [
            req_d.eq(req_c),
            If(req_c ^ req_d,
                held_sec.eq(sec_h),
                held_ns.eq(ns_h),
                ack.eq(~ack),
            )
        ]
        self.specials += MultiReg(ack, ack_r, cd)
        sync_r += [
            ack_d.eq(ack_r),
            self.done.eq(0),
            If(ack_r ^ ack_d,
                self.sec.eq(held_sec),
                self.ns.eq(held_ns),
                self.done.eq(1),
                self.busy.eq(0),
            )
        ]

# PTP Clock CSRs -----------------------------------------------------------------------------------

class PTPClockCSR(LiteXModule):
    """The firmware's registers (sys) for `clock`, which runs in `cd_clock` (and is made a
    submodule here). `synced` and `time_ns` (when cd_clock is sys) are for the streamer."""
    def __init__(self, clock, cd_clock="sys"):
        self.clock = clock
        self.synced = Signal()  # sys

        self._control = CSRConfig(fields=[
            CSRField("latch", size=1, pulse=True, description="Write 1: snapshot the time into latched_seconds/latched_nanoseconds."),
            CSRField("set",   size=1, pulse=True, description="Write 1: set the time to set_seconds/set_nanoseconds."),
            CSRField("add",   size=1, pulse=True, description="Write 1: add offset (signed ns) to the time, in one cycle."),
        ])
        self._status = CSRStatus(fields=[
            CSRField("busy",     size=1, description="A set or add is not yet in the time (issue one at a time, wait for 0)."),
            CSRField("latching", size=1, description="The latch is not yet complete (only when the clock is not in sys)."),
        ])
        self._adj             = CSRConfig(ADJ_BITS, description="Signed rate adjustment, 2^-PTP_FRAC_BITS ns per cycle: adj = (ppb * PTP_ADJ_PER_PPB_Q16) >> 16.")
        self._set_seconds     = CSRConfig(48, atomic_write=True, description="Seconds for control.set.")
        self._set_nanoseconds = CSRConfig(30, description="Nanoseconds for control.set (< 10^9).")
        self._offset          = CSRConfig(32, description="Signed ns for control.add, |offset| < 10^9.")
        self._latched_seconds     = CSRStatus(48, description="Seconds at the last control.latch.")
        self._latched_nanoseconds = CSRStatus(30, description="Nanoseconds at the last control.latch.")
        self._pps_width = CSRConfig(30, description="PPS high time after each second, ns (0: one cycle).")
        self._period    = CSRConfig(30, description="Periodic output period, ns, counted from each second (0: off). Takes effect at the next second.")
        self._width     = CSRConfig(30, description="Periodic output high time, ns (0: one cycle per period).")
        self._synced    = CSRConfig(1, description="1: the servo is locked; DAQ timestamps are flagged PTP.")
        self._rejected  = CSRStatus(16, description="Set/add commands rejected (value out of range, or set while busy).")

        # # #

        self.comb += self.synced.eq(self._synced.storage)
        rejected = Signal()  # sys
        done     = Signal()  # sys: a set/add is published, or was rejected.

        control = self._control.fields
        if cd_clock == "sys":
            self.comb += [
                clock.adj.eq(self._adj.storage),
                clock.set_stb.eq(control.set),
                clock.set_sec.eq(self._set_seconds.storage),
                clock.set_ns.eq(self._set_nanoseconds.storage),
                clock.add_stb.eq(control.add),
                clock.add_ns.eq(self._offset.storage),
                clock.pps_width.eq(self._pps_width.storage),
                clock.period.eq(self._period.storage),
                clock.width.eq(self._width.storage),
                clock.synced.eq(self._synced.storage),
                rejected.eq(clock.rejected),
                done.eq(clock.stepped | clock.rejected),
            ]
            self.sync += If(control.latch,
                self._latched_seconds.status.eq(clock.sec),
                self._latched_nanoseconds.status.eq(clock.ns),
            )
        else:
            # Everything the firmware writes crosses as one coherent word; commands are toggle
            # bits in it, so a command always arrives with the values written before it.
            set_t = Signal()
            add_t = Signal()
            self.sync += [
                If(control.set, set_t.eq(~set_t)),
                If(control.add, add_t.eq(~add_t)),
            ]
            word = Cat(self._adj.storage, self._set_seconds.storage, self._set_nanoseconds.storage,
                self._offset.storage, self._pps_width.storage, self._period.storage,
                self._width.storage, self._synced.storage, set_t, add_t)
            self.bus = bus = BusSynchronizer(len(word), "sys", cd_clock)
            fields = Record([("adj", ADJ_BITS), ("set_sec", 48), ("set_ns", 30), ("add_ns", 32),
                ("pps_width", 30), ("period", 30), ("width", 30), ("synced", 1), ("set_t", 1), ("add_t", 1)])
            set_d = Signal()
            add_d = Signal()
            sync_c = getattr(self.sync, cd_clock)
            sync_c += [set_d.eq(fields.set_t), add_d.eq(fields.add_t)]
            self.comb += [
                bus.i.eq(word),
                fields.raw_bits().eq(bus.o),
                clock.adj.eq(fields.adj),
                clock.set_stb.eq(fields.set_t ^ set_d),
                clock.set_sec.eq(fields.set_sec),
                clock.set_ns.eq(fields.set_ns),
                clock.add_stb.eq(fields.add_t ^ add_d),
                clock.add_ns.eq(fields.add_ns),
                clock.pps_width.eq(fields.pps_width),
                clock.period.eq(fields.period),
                clock.width.eq(fields.width),
                clock.synced.eq(fields.synced),
            ]
            self.rejected_sync = PulseSynchronizer(cd_clock, "sys")
            self.done_sync     = PulseSynchronizer(cd_clock, "sys")
            self.comb += [
                self.rejected_sync.i.eq(clock.rejected),
                rejected.eq(self.rejected_sync.o),
                self.done_sync.i.eq(clock.stepped | clock.rejected),
                done.eq(self.done_sync.o),
            ]
            self.capture = capture = TimeCapture(clock, "sys", cd_clock)
            self.comb += [
                capture.request.eq(control.latch),
                self._status.fields.latching.eq(capture.busy),
            ]
            self.sync += If(capture.done,
                self._latched_seconds.status.eq(capture.sec),
                self._latched_nanoseconds.status.eq(capture.ns),
            )
        self.sync += If(rejected, self._rejected.status.eq(self._rejected.status + 1))
        # busy from the command's write until it shows in the time (whatever the crossing).
        busy = self._status.fields.busy
        self.sync += If(control.set | control.add, busy.eq(1)).Elif(done, busy.eq(0))

