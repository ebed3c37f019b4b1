#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""PTP hardware timestamp unit: the time-of-day clock, its outputs, and frame timestamping.

    PTPClock        seconds (48) + nanoseconds (30) + fraction, rate-adjustable, step and slew;
                    `time_ns` (64) for the streamer; PPS and a periodic output aligned to the second.
    PTPClockCSR     the firmware's registers for a PTPClock (sys), crossing to the clock's domain.
    PTPTimestamper  passive tap on a PHY-side stream: time at the SFD, PTP message recognised in
                    hardware (Ethernet 0x88F7 or IPv4/UDP 319/320, one optional VLAN tag), one
                    record (time, messageType, sequenceId, ...) per PTP frame into a FIFO the
                    firmware reads.

Time arithmetic is in units of 2^-F ns (F = `frac_bits`). Each cycle the clock advances by its
increment `base_inc + adj`; `base_inc` is the period the gateware is built with (the nominal
period, or an off-nominal one when `ppm_error` models a wrong oscillator in simulation) and `adj`
is the firmware's signed rate adjustment. See docs/ptp.md for the register map, the firmware's
formulas, the clock-domain crossing and the PHY latencies.
"""

from fractions import Fraction

from migen import *
from migen.genlib.cdc import BusSynchronizer, MultiReg, PulseSynchronizer

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRField, CSRStatus

from liteeth.common import eth_phy_description

from ethdaq.gateware.cdcfifo import LevelFIFO
from ethdaq.gateware.csr import CSRConfig

# Constants ----------------------------------------------------------------------------------------

NS_PER_S = 10**9

PTP_ETHERTYPE      = 0x88F7
ETHERTYPE_IPV4     = 0x0800
ETHERTYPE_VLAN     = 0x8100
IP_PROTO_UDP       = 17
PTP_EVENT_PORT     = 319
PTP_GENERAL_PORT   = 320
PTP_VERSION        = 2
PTP_HEADER_LEN     = 34

# Destination classes recorded with each timestamp (`dst` field).
DST_OTHER   = 0  # Anything else (e.g. unicast to us): the timestamper does not filter on address.
DST_PRIMARY = 1  # 224.0.1.129 / 01-1B-19-00-00-00: PTP primary multicast.
DST_PDELAY  = 2  # 224.0.0.107 / 01-80-C2-00-00-0E: PTP peer-delay multicast.
PTP_IPV4_PRIMARY = 0xE0000181  # 224.0.1.129
PTP_IPV4_PDELAY  = 0xE000006B  # 224.0.0.107
PTP_MAC_PRIMARY  = 0x011B19000000
PTP_MAC_PDELAY   = 0x0180C200000E

ETH_SFD      = 0xD5
ETH_PREAMBLE = 0x55

ADJ_BITS = 32  # Signed rate adjustment, 2^-F ns per cycle.

# Fixed latency of a PTPClock command or input change, in cycles of the clock's domain: a change
# in cycle `a` first shows in the published time (sec/ns/time_ns) of cycle `a + latency`.
ADJ_LATENCY = 6    # adj: published(a+6) - published(a+5) is the first increment at the new rate.
ADD_LATENCY = 6    # add: published(a+6) - published(a+5) = increment + offset.
SET_LATENCY = 54   # set: published(a+54) is the set time (48-cycle multiply for time_ns first).

# Cycles between the SFD cycle and the clock-domain cycle that captures it (request toggle register
# + two-flop synchroniser); the capture reads the clock's published time this many cycles old.
CAPTURE_DELAY = 3

# Fixed latencies of LiteEth's PHYs between the PHY-side stream (where the timestamp is taken) and
# the PHY chip's MII (GMII/RGMII) pins, in PHY clock cycles; counted in docs/ptp.md. The external
# PHY chip's own latency is not included (not measured: hardware-not-measured).
PHY_FPGA_LATENCY_CYCLES = {
    # name: (tx cycles: stream → pins, rx cycles: pins → stream), counted from LiteEth 2024.12's
    # code and the I/O primitives' documented behaviour; not measured on hardware.
    "gmii":       (1, 1),  # LiteEthPHYGMIITX/RX (also the sim board's GMII model): one register each way.
    "ecp5rgmii":  (1, 3),  # ODDRX1F; IDDRX1F, rx_data_reg, source register.
    "s7rgmii":    (1, 2),  # ODDR SAME_EDGE; IDDR SAME_EDGE_PIPELINED, source register.
    # LiteEthPHYMII at 25 MHz: TX hands the SFD byte over in the cycle its second nibble leaves the
    # 8-to-4 converter, so its first nibble is already at the (registered) pins: 0. RX: the pin
    # register, then the 4-to-8 converter's output register after the second nibble: 3.
    # Checked against LiteEth's MII code (test_tsu) and in the transmit path at 100 Mb/s (test_mii).
    "mii":        (0, 3),
}
# PHY clock period and byte time in ns, where not 1 Gb/s with one byte per 8 ns cycle.
PHY_TIMING_NS = {
    "mii": (40, 80),  # 100 Mb/s: a nibble per 40 ns cycle.
}
GIGABIT_BYTE_NS = 8  # One byte time at 1 Gb/s: the 1588 timestamp point is the bit after the SFD.


def phy_corrections_ns(phy_name, tx_tap_cycles=0):
    """(tx, rx) corrections in ns the firmware adds to raw TX and RX timestamps to get the IEEE 1588
    message timestamp point (first bit after the SFD) at the FPGA's MII pins. tx_tap_cycles: PHY
    clock cycles by which the TX timestamper's tap lags the PHY's sink (a registered tap). The
    external PHY chip's latency is not included: add its datasheet value (TX: add, RX: subtract)."""
    if phy_name not in PHY_FPGA_LATENCY_CYCLES:
        raise ValueError(f"phy_name must be one of {sorted(PHY_FPGA_LATENCY_CYCLES)}, not {phy_name!r}")
    tx, rx = PHY_FPGA_LATENCY_CYCLES[phy_name]
    period_ns, byte_ns = PHY_TIMING_NS.get(phy_name, (8, GIGABIT_BYTE_NS))
    # TX: the SFD reaches the pins tx cycles after the PHY's sink, tx - tx_tap_cycles after the
    # tap; the timestamp point is one byte later.
    # RX: the SFD was at the pins rx cycles before the tap; the timestamp point is one byte later.
    return (tx - tx_tap_cycles)*period_ns + byte_ns, byte_ns - rx*period_ns

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

        # Stage A: base + adj (quasi-static: the firmware changes adj rarely). Always positive,
        # since base_inc >= 2^32 > |adj|.
        # Reset values are those of adj = 0, so the clock runs right from the first cycle.
        base_int = self.base_inc >> F
        ba_bits = bits_for(self.base_inc + 2**ADJ_BITS) + with_osc_error
        ba = Signal(ba_bits, reset=self.base_inc)
        self.sync += ba.eq(self.base_inc + self.adj + (self.osc_error if with_osc_error else 0))
        ba_int  = ba[F:]
        ba_frac = ba[:F]

        # Stage B: this cycle's increment. An offset (add) joins it for one cycle, in two forms:
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

        # Set command: time_ns needs sec*10^9, made by a 48-cycle shift-and-add (a set is rare;
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
            set_ns_ok.eq(self.set_ns < NS_PER_S),
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

        # Stage U: nanoseconds normalised to [0, 10^9) in one step, x = ns + increment + carry,
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

class _TimeCapture(LiteXModule):
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
            self.capture = capture = _TimeCapture(clock, "sys", cd_clock)
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

# PTP Timestamper ----------------------------------------------------------------------------------

def record_layout():
    return [
        ("sec",      48),
        ("ns",       30),
        ("msg_type",  4),
        ("seq",      16),
        ("domain",    8),
        ("source",   32),  # sourcePortIdentity bytes 6..9: clockIdentity's last two, portNumber.
        ("udp",       1),  # 1: IPv4/UDP; 0: Ethernet (EtherType 0x88F7).
        ("vlan",      1),
        ("dst",       2),  # DST_*: which PTP address the frame was sent to.
    ]


def tap(endpoint, sink, ignore_ready=False):
    """Statements that make `sink` (a PTPTimestamper's) observe `endpoint` without driving it.
    With ignore_ready, every valid cycle is a byte: LiteEth's PHY RX sources do not honour ready
    (the bytes are on the wire whether or not they are taken). As comb statements the tap is
    exact; as sync statements (a registered tap, off the endpoint's timing path) it lags one
    cycle, which phy_corrections_ns(tx_tap_cycles=1) takes out."""
    return [
        sink.valid.eq(endpoint.valid),
        sink.ready.eq(1 if ignore_ready else endpoint.ready),
        sink.data.eq(endpoint.data),
        sink.last.eq(endpoint.last),
        sink.last_be.eq(endpoint.last_be),
    ]


# The SoC's TX tap is registered (tap_phy): it lags the PHY's sink by this many cycles, which
# phy_corrections_ns(tx_tap_cycles=TX_TAP_CYCLES) takes out.
TX_TAP_CYCLES = 1


def tap_phy(module, phy, ptp_tx, ptp_rx, cd_tx="eth_tx"):
    """Tap `phy`'s streams for the timestamp units as the SoC does: what the PHY accepts on
    transmit (after the gap inserter), registered (combinational, it put the PTP parser at the
    end of the frame scheduler's grant → PHY sink path, eth_tx's critical path on ECP5, 11.7
    ns); what it delivers on receive, exactly, every valid beat a byte: LiteEth's GMII and RGMII
    receivers ignore ready. Its MII receiver honours it (docs/liteeth-notes.md); the receive
    chain behind it does not stall, so on MII too a valid beat is a byte."""
    sync_tx = getattr(module.sync, cd_tx)
    sync_tx += tap(phy.sink, ptp_tx.sink)
    module.comb += tap(phy.source, ptp_rx.sink, ignore_ready=True)


class _PTPParser(LiteXModule):
    """Byte-wise (dw=8) PHY-side frame parser, in one domain: `sfd` pulses in the SFD beat (the
    first beat without preamble); one cycle after the frame's last beat `done` pulses with the
    record fields if the frame was a PTP message (version 2, header complete).

    Two stages. The first, at the tap, finds the SFD (so the time is taken in its exact cycle)
    and registers the byte with its compares against the constants the parser looks for. The
    second walks the headers one beat later, on those registered flags and on registered
    position flags (`at[k]`: this is byte k of the current header), so a state's next value is a
    few flip-flops in an AND-OR, not a byte compare, a counter compare and the state logic in
    series (about 9 LUT levels, more than the eth clock's 8 ns on an ECP5-6)."""
    def __init__(self, with_preamble=True):
        self.sink   = sink = stream.Endpoint(eth_phy_description(8))
        self.sfd    = Signal()
        self.done   = Signal()
        self.fields = fields = Record([(n, w) for n, w in record_layout() if n not in ("sec", "ns")])

        # # #

        # Stage 1: the SFD, and the byte's compares -------------------------------------------
        beat = Signal()
        b    = sink.data
        self.comb += beat.eq(sink.valid & sink.ready)

        # Between frames (and in the preamble) `in_frame` is low. With a preamble, the first
        # byte that is not a preamble byte ends it: the SFD starts a frame, anything else makes
        # the rest of the frame ignored (the second stage only starts on `sfd`).
        in_frame = Signal()
        if with_preamble:
            self.comb += self.sfd.eq(beat & ~in_frame & (b == ETH_SFD))
            self.sync += If(beat,
                If(sink.last, in_frame.eq(0)).Elif(b != ETH_PREAMBLE, in_frame.eq(1)))
        else:
            self.comb += self.sfd.eq(beat & ~in_frame)
            self.sync += If(beat, in_frame.eq(~sink.last))

        beat1  = Signal()
        last1  = Signal()
        start1 = Signal()
        b1     = Signal(8)
        self.sync += [beat1.eq(beat), last1.eq(sink.last), start1.eq(self.sfd), b1.eq(b)]

        def flag(name, expr):
            f = Signal(name=name)
            self.sync += f.eq(expr)
            return f
        # The 16-bit fields that steer the parser (EtherTypes, UDP ports) are compared in
        # halves: the high byte's flag is kept for the next beat (`hi_was`), the low byte's is
        # used in its own beat.
        steering = (ETHERTYPE_VLAN, PTP_ETHERTYPE, ETHERTYPE_IPV4, PTP_EVENT_PORT, PTP_GENERAL_PORT)
        values   = {v >> 8 for v in steering} | {v & 0xff for v in steering} | {0, IP_PROTO_UDP}
        byte_is  = {v: flag(f"byte_is_{v:02x}", b == v) for v in sorted(values)}
        # Version 4 and IHL < 5, spelled out (a `<` is a carry chain).
        bad_ihl  = flag("bad_ipv4_start", (b[4:] != 4) | (~b[3] & ~(b[2] & (b[1] | b[0]))))
        frag_hi  = flag("frag_hi", b[:6] != 0)   # MF flag, offset bits 12..8.
        bad_vers = flag("bad_ptp_version", b[:4] != PTP_VERSION)

        # Stage 2: the headers, one beat later ------------------------------------------------
        cnt      = Signal(6)   # Byte within the current header (an IPv4 header's last is 59).
        hist     = Signal(40)  # The bytes before b1 (the previous in hist[:8]).
        hi       = hist[:8]
        ihl_m1   = Signal(4)
        mac_pri  = Signal()    # Destination MAC matches.
        mac_pd   = Signal()
        ip_pri   = Signal()
        ip_pd    = Signal()
        is_udp   = Signal()
        msg_type = Signal(4)
        seq      = Signal(16)
        domain   = Signal(8)
        source   = Signal(32)
        vlan     = Signal()
        self.comb += [
            fields.msg_type.eq(msg_type),
            fields.seq.eq(seq),
            fields.domain.eq(domain),
            fields.source.eq(source),
            fields.udp.eq(is_udp),
            fields.vlan.eq(vlan),
            fields.dst.eq(Mux(is_udp,
                Mux(ip_pri, DST_PRIMARY, Mux(ip_pd, DST_PDELAY, DST_OTHER)),
                Mux(mac_pri, DST_PRIMARY, Mux(mac_pd, DST_PDELAY, DST_OTHER)))),
        ]
        self.sync += If(beat1, hist.eq(Cat(b1, hist[:-8])))
        # The PTP destinations are compared whole at their last byte, not byte by byte against a
        # table indexed by `cnt` (a multiplexer in the state machine's path).
        w32 = Cat(b1, hist[:24])
        w48 = Cat(b1, hist)
        hi_was = {h: Signal(name=f"hi_was_{h:02x}") for h in sorted({v >> 8 for v in steering})}
        self.sync += If(beat1, *[flag.eq(byte_is[h]) for h, flag in hi_was.items()])
        def word_is(value):
            """The big-endian 16-bit field ending at this byte is `value`."""
            return hi_was[value >> 8] & byte_is[value & 0xff]

        # Position flags, set with `cnt` from its current value: at[k] is cnt == k.
        at = {k: Signal(name=f"at_{k}") for k in (0, 1, 3, 4, 5, 6, 7, 9, 13, 19, 31, PTP_HEADER_LEN - 1)}
        hdr_end = Signal()  # The IPv4 header's last byte: (IHL - 1)*4 + 3 (options skipped).
        def count():
            return [NextValue(cnt, cnt + 1),
                    *[NextValue(a, (cnt == k - 1) if k else 0) for k, a in at.items()],
                    NextValue(hdr_end, (cnt[2:] == ihl_m1) & (cnt[:2] == 2))]
        def restart(value):
            return [NextValue(cnt, value),
                    *[NextValue(a, int(k == value)) for k, a in at.items()],
                    NextValue(hdr_end, 0)]

        def ether_type(allow_vlan):
            """Dispatch on the EtherType ending at this byte."""
            return [
                *restart(0),
                If(word_is(ETHERTYPE_VLAN) & allow_vlan,
                    NextValue(vlan, 1), NextState("VLAN"),
                ).Elif(word_is(PTP_ETHERTYPE),
                    NextValue(is_udp, 0), NextState("PTP"),
                ).Elif(word_is(ETHERTYPE_IPV4),
                    NextState("IPV4"),
                ).Else(
                    NextState("DROP"),
                )
            ]

        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",  # Until stage 1 found a frame's start.
            If(start1,
                NextValue(mac_pri, 1), NextValue(mac_pd, 1), NextValue(ip_pri, 0), NextValue(ip_pd, 0),
                NextValue(vlan, 0), NextValue(is_udp, 0),
                # With a preamble, b1 is the SFD; without, it is the destination MAC's first byte.
                *restart(0 if with_preamble else 1),
                NextState("ETH"),
            )
        )
        fsm.act("ETH",  # Destination MAC (0..5), source MAC, EtherType (12..13).
            If(beat1,
                *count(),
                If(at[5],
                    NextValue(mac_pri, w48 == PTP_MAC_PRIMARY),
                    NextValue(mac_pd,  w48 == PTP_MAC_PDELAY),
                ),
                If(at[13], *ether_type(allow_vlan=1)),
            )
        )
        fsm.act("VLAN",  # TCI (2 bytes), then the EtherType; one tag only.
            If(beat1,
                *count(),
                If(at[3], *ether_type(allow_vlan=0)),
            )
        )
        fsm.act("IPV4",
            If(beat1,
                *count(),
                # Version 4, header 5..15 words; first and only fragment; protocol UDP.
                If(at[0],
                    NextValue(ihl_m1, b1[:4] - 1),
                    If(bad_ihl, NextState("DROP")),
                ),
                If(at[6] & frag_hi, NextState("DROP")),
                If(at[7] & ~byte_is[0], NextState("DROP")),   # Offset bits 7..0.
                If(at[9] & ~byte_is[IP_PROTO_UDP], NextState("DROP")),
                If(at[19],
                    NextValue(ip_pri, w32 == PTP_IPV4_PRIMARY),
                    NextValue(ip_pd,  w32 == PTP_IPV4_PDELAY),
                ),
                If(hdr_end, *restart(0), NextState("UDP")),
            )
        )
        fsm.act("UDP",
            If(beat1,
                *count(),
                If(at[3] & ~word_is(PTP_EVENT_PORT) & ~word_is(PTP_GENERAL_PORT), NextState("DROP")),
                If(at[7], NextValue(is_udp, 1), *restart(0), NextState("PTP")),
            )
        )
        fsm.act("PTP",
            If(beat1,
                *count(),
                If(at[0], NextValue(msg_type, b1[:4])),
                If(at[1] & bad_vers, NextState("DROP")),
                If(at[4], NextValue(domain, b1)),
                # Bytes 24..29 shifted in: the last four are 26..29 (no `>=`/`<` carry chains).
                If((cnt[3:] == 3) & ~(cnt[2] & cnt[1]), NextValue(source, Cat(b1, source[:24]))),
                If(at[31], NextValue(seq, Cat(b1, hi))),
                If(at[PTP_HEADER_LEN - 1], NextState("DONE")),
            )
        )
        fsm.act("DONE")
        fsm.act("DROP")
        # Whatever the state, the last beat ends the frame (after the state's own actions, so this
        # NextState wins); only a complete PTP header makes a record.
        for state in list(fsm.actions):
            fsm.act(state, If(beat1 & last1,
                self.done.eq(fsm.ongoing("DONE")),
                NextState("IDLE"),
            ))


class PTPTimestamper(LiteXModule):
    """Timestamp PTP frames on a PHY-side stream (tap it with `tap()`), for the firmware.

    Parameters
    ----------
    clock : the PTPClock (running in `cd_clock`).
    dw : PHY data width; 8 (GMII/RGMII) only for now.
    with_preamble : the stream carries preamble + SFD (LiteEth PHYs with with_preamble_crc); the
        time is taken in the SFD beat. Without, in the first beat (the first byte after the SFD,
        one byte time later: compensate in the firmware).
    cd : domain of the tapped stream (eth_tx or eth_rx); cd_clock : the clock's domain.
    depth : records held for the firmware (power of two, >= 4; two more when `cd` is not sys).
    sys_faster : sys runs faster than `cd` (a 100 Mb/s PHY's 25 MHz): the record FIFO's reader
        is then shown only records already in its RAM (gateware/cdcfifo.py reader_faster).

    The firmware (sys) sees the head record while `status.pending`, and writes `pop` to drop it.
    Records lost because the FIFO was full are counted in `overflows`.
    """
    def __init__(self, clock, dw=8, with_preamble=True, cd="sys", cd_clock="sys", depth=8, sys_faster=False):
        if dw != 8:
            raise ValueError(f"PTPTimestamper: dw must be 8 (GMII/RGMII), not {dw!r} "
                             "(the 64-bit XGMII stream is not parsed yet)")
        if depth < 4 or depth & (depth - 1):
            raise ValueError(f"PTPTimestamper: depth must be a power of two >= 4, not {depth!r}")
        self.sink = sink = stream.Endpoint(eth_phy_description(dw))

        self._status = CSRStatus(fields=[
            CSRField("pending", size=1, description="A record is waiting: read it, then write pop."),
        ])
        self._seconds     = CSRStatus(48, description="Seconds of the head record's timestamp.")
        self._nanoseconds = CSRStatus(30, description="Nanoseconds of the head record's timestamp.")
        self._info = CSRStatus(fields=[
            CSRField("message_type", size=4, offset=0,  description="PTP messageType (0 Sync, 1 Delay_Req, 8 Follow_Up, 9 Delay_Resp, 11 Announce, ...)."),
            CSRField("udp",          size=1, offset=4,  description="1: PTP over IPv4/UDP (port 319 or 320); 0: over Ethernet (0x88F7)."),
            CSRField("vlan",         size=1, offset=5,  description="The frame had an 802.1Q tag."),
            CSRField("dst",          size=2, offset=6,  description="Destination: 0 other (unicast), 1 primary multicast, 2 peer-delay multicast."),
            CSRField("domain",       size=8, offset=8,  description="PTP domainNumber."),
            CSRField("sequence_id",  size=16, offset=16, description="PTP sequenceId."),
        ])
        self._source    = CSRStatus(32, description="sourcePortIdentity bytes 6..9 (clockIdentity's last two bytes, portNumber).")
        self._pop       = CSR()
        self._overflows = CSRStatus(32, description="Records lost: FIFO full when the frame ended (or, never at dw=8, no time captured for it).")

        # # #

        self.parser  = parser  = ClockDomainsRenamer(cd)(_PTPParser(with_preamble))
        self.capture = capture = _TimeCapture(clock, cd, cd_clock)
        self.comb += [
            sink.connect(parser.sink, omit={"ready"}),  # Observed, never driven.
            parser.sink.ready.eq(sink.ready),
            capture.request.eq(parser.sfd),
        ]

        # Record FIFO, written in `cd` at the end of a PTP frame, read by the firmware in sys.
        layout = record_layout()
        if cd == "sys":
            self.fifo = fifo = stream.SyncFIFO(layout, depth)
        else:
            # gateware/cdcfifo.py's LevelFIFO, not Migen's AsyncFIFO: its `sink.ready` is a register.
            # AsyncFIFO's `writable` (a compare of the gray pointers) and the write ran into the
            # write pointer's increment: 7 LUT levels, 9.97 ns, eth's critical path of the full
            # SoC on an LFE5U-45F-6. Its RAM is left to Yosys (36-bit block RAMs, read in sys
            # without the output register: 4 DP16KD for 512 records, as AsyncFIFO's). Two more
            # records fit (the read side's two stages).
            self.fifo = fifo = LevelFIFO(layout, depth, cd_write=cd, cd_read="sys", buffered=True,
                framing=False, with_dp16kd=False, reader_faster=sys_faster)
        # The time of this frame is back from the capture long before its end (>= 34 header
        # bytes after the SFD vs. a round trip of a few cycles), and the next SFD is at least a
        # preamble away: `have` is the "this frame's time arrived" flag. Should an SFD come while
        # a capture is still under way (not at dw=8), its frame has no time: counted as lost.
        have = Signal()
        mine = Signal()  # This frame's SFD started a capture.
        sync = getattr(self.sync, cd)
        sync += [
            If(parser.sfd,
                have.eq(0),
                mine.eq(~capture.busy),
            ).Elif(capture.done & mine,
                have.eq(1),
            )
        ]
        lost = Signal()
        self.comb += [
            fifo.sink.valid.eq(parser.done & have),
            fifo.sink.sec.eq(capture.sec),
            fifo.sink.ns.eq(capture.ns),
            *[getattr(fifo.sink, n).eq(getattr(parser.fields, n)) for n, _ in layout if n not in ("sec", "ns")],
            lost.eq(parser.done & ~(have & fifo.sink.ready)),
        ]

        head = fifo.source
        self.comb += [
            self._status.fields.pending.eq(head.valid),
            self._seconds.status.eq(head.sec),
            self._nanoseconds.status.eq(head.ns),
            self._info.fields.message_type.eq(head.msg_type),
            self._info.fields.udp.eq(head.udp),
            self._info.fields.vlan.eq(head.vlan),
            self._info.fields.dst.eq(head.dst),
            self._info.fields.domain.eq(head.domain),
            self._info.fields.sequence_id.eq(head.seq),
            self._source.status.eq(head.source),
            head.ready.eq(self._pop.re),
        ]

        # Lost records, counted in sys (one event per frame at most: far slower than the
        # synchroniser's toggle).
        if cd == "sys":
            lost_sys = lost
        else:
            self.lost_sync = PulseSynchronizer(cd, "sys")
            self.comb += self.lost_sync.i.eq(lost)
            lost_sys = self.lost_sync.o
        self.sync += If(lost_sys, self._overflows.status.eq(self._overflows.status + 1))
