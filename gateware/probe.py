#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Latency probe: per-class latency statistics, in clock cycles, measured on every frame.

For each class c, `start[c]` pulses when a frame is handed over and `end[c]` when it has arrived
(for example: a datagram offered to the transmit path, and its first preamble byte at the PHY),
at least one cycle later.
Starts and ends pair up in order: each start's cycle stamp waits in its class's small FIFO, and
each end takes the oldest one. An end with no start waiting, or a start with the FIFO full, is
counted in `unpaired` and never recorded as a latency. A result the statistics pipeline could not
take is counted in `overflows`: more than `queue` results waiting (it takes one per two cycles), or
two ends of one class in consecutive cycles while a third class's result was queueing. Frames are
tens of cycles apart, so neither happens on an Ethernet path.

Four ways of pairing, chosen per class (`modes`):
- "fifo": as above. A start that has waited 2^(STAMP_BITS-1) cycles (67 ms at 125 MHz) is
  dropped and counted in `unpaired`, so a frame lost on its way (one that never ends) cannot
  pair its start with the next frame's end.
- "latest": one start stamp, overwritten by each start; an end pairs with it and uses it up. For
  starts that many frames give and only some end (the last byte of every received frame, of
  which only some go to the fast-track sink), when an end always comes before the next start.
- "single": like "latest", for starts of frames that should each end, one at a time (a
  datagram's last byte on the wire, then its arrival at the control mailbox through LiteEth's
  layers, which may drop it without telling). A start while another is still waiting makes the
  pairing ambiguous: the next end is counted in `unpaired` instead of recorded, and the pairing
  starts afresh. Never a wrong latency; a lost frame costs one unrecorded one. `held` and
  `held_stamp` show the waiting start when it is unambiguous, for a consumer that carries it on
  (the mailbox keeps it with the datagram for the "stamp" class).
- "stamp": an end brings its start's stamp with it (`end_stamp`, `end_stamped`).

An end may say that it comes late (`end_age[c]`: cycles since the instant it marks, for a frame
recognised by its header bytes a few cycles after its first byte), and so may a start
(`start_age[c]`). `offsets[c]` (cycles, build
time) is added to every latency of class c: the fixed pipeline between where an event is seen
and the pins (the PHY's registers).

Per class: count, sum (the mean is sum / count), sum of squares (the standard deviation), min,
max, and a histogram of NBINS bins: bin 0
holds latencies of 0 or 1 cycle, bin k latencies in [2^k, 2^(k+1)), the last bin everything from
2^(NBINS-1) on. Latencies are counted to 2^LAT_BITS - 1 and saturate there (and land in the last
bin).

Storage: one small RAM for count, sum, min and max, one for the histogram, both read and written
back by one pipeline: two cycles per result. The same read ports serve the CPU between results
(`select`): the selected class's words are copied into a register in `cd`, which sys reads without
a handshake, so a read can catch them being written; the firmware reads until two reads agree
(as gateware/streamstats.py). At reset, and on `clear`, a walk over both RAMs empties them
(nclasses * NBINS cycles); results meanwhile are dropped and counted in `overflows`.
"""

from functools import reduce
from operator import or_

from migen import *
from migen.genlib.cdc import MultiReg, PulseSynchronizer
from migen.genlib.fifo import SyncFIFO

from litex.gen import *

from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage

from ethdaq.gateware.eventcounters import count_pulses

NBINS        = 16
LAT_BITS     = 16
STAMP_BITS   = 24   # Start stamps: latencies up to 2^24 cycles are told apart from saturated ones.
COUNT_BITS   = 32
SUM_BITS     = 48
SUMSQ_BITS   = 64   # Sum of squared latencies: the standard deviation, exactly.


def bin_of(latency, lat_bits=LAT_BITS):
    """The histogram bin of a latency in cycles (the gateware's rule, for tests and the host)."""
    latency = min(latency, 2**lat_bits - 1)
    return min(max(latency.bit_length() - 1, 0), NBINS - 1)


class LatencyProbe(LiteXModule):
    """nclasses classes; `inflight`: starts that may wait for their end per class ("fifo" mode);
    `modes`: "fifo", "latest", "single" or "stamp" per class (the module's docstring); `offsets`:
    cycles added to each class's latencies."""
    def __init__(self, nclasses, inflight=4, queue=8, cd="sys", lat_bits=LAT_BITS, modes=None, offsets=None,
                 age_bits=8, stamp_bits=STAMP_BITS):
        cw = bits_for(max(nclasses - 1, 1))
        modes   = list(modes or ["fifo"] * nclasses)
        offsets = list(offsets or [0] * nclasses)
        if len(modes) != nclasses or any(m not in ("fifo", "latest", "single", "stamp") for m in modes):
            raise ValueError(f"modes must be 'fifo', 'latest', 'single' or 'stamp' for each of {nclasses} "
                             f"classes, not {modes!r}")
        if len(offsets) != nclasses or any(not (0 <= o < 256) for o in offsets):
            raise ValueError(f"offsets must be 0..255 cycles for each of {nclasses} classes, not {offsets!r}")
        self.nclasses = nclasses
        self.start = Signal(nclasses)
        self.end   = Signal(nclasses)
        self.end_age = [Signal(age_bits, name=f"end_age{c}") for c in range(nclasses)]
        self.start_age = [Signal(age_bits, name=f"start_age{c}") for c in range(nclasses)]
        self.held        = [Signal(name=f"held{c}") for c in range(nclasses)]              # "single"
        self.held_stamp  = [Signal(stamp_bits, name=f"held_stamp{c}") for c in range(nclasses)]
        self.end_stamp   = [Signal(stamp_bits, name=f"end_stamp{c}") for c in range(nclasses)]  # "stamp"
        self.end_stamped = [Signal(name=f"end_stamped{c}") for c in range(nclasses)]

        self._select    = CSRStorage(cw, description="Class the other registers show.")
        self._count     = CSRStatus(COUNT_BITS, description="Latencies recorded.")
        self._sum       = CSRStatus(SUM_BITS, description="Their sum, cycles.")
        self._sumsq     = CSRStatus(SUMSQ_BITS, description="The sum of their squares, cycles^2 (the standard deviation).")
        self._min       = CSRStatus(lat_bits, description="Smallest, cycles (all ones before any).")
        self._max       = CSRStatus(lat_bits, description="Largest, cycles.")
        self._bin       = CSRStorage(bits_for(NBINS - 1), description="Histogram bin `bin_count` shows.")
        self._bin_count = CSRStatus(COUNT_BITS, description="Latencies of the selected class in the selected bin.")
        self._unpaired  = CSRStatus(32, description="Ends without a start, and starts with no room to wait (all classes).")
        self._overflows = CSRStatus(32, description="Latencies not recorded: the statistics pipeline was full or clearing.")
        self._clear     = CSR()
        self._clear.description = "Write: empty every class's statistics (and the counters above)."

        # # #

        sync = getattr(self.sync, cd)
        assert stamp_bits > lat_bits
        now = Signal(stamp_bits)
        sync += now.eq(now + 1)

        results = SyncFIFO(cw + lat_bits, queue)
        results = ClockDomainsRenamer(cd)(results)
        self.submodules += results
        ev_unpaired = Signal()
        ev_overflow = Signal()
        done, lat, unpaired = self._add_pairing(cd, now, modes, offsets, inflight, lat_bits, stamp_bits)
        lost = self._add_result_queue(cd, results, done, lat, lat_bits)
        self.comb += ev_unpaired.eq(Cat(*unpaired) != 0)
        self._add_statistics(cd, results, ev_overflow, lat_bits)

        # Event counters (sys), cleared with the statistics.
        count_pulses(self, cd, ((ev_unpaired, self._unpaired), (ev_overflow | lost, self._overflows)), clear=self._clear.re)

    def _add_pairing(self, cd, now, modes, offsets, inflight, lat_bits, stamp_bits):
        """One FIFO of start stamps per class ("fifo"), or one held stamp, or the end's own;
        each end computes its latency: per class (done, latency, unpaired)."""
        sync = getattr(self.sync, cd)
        nclasses = self.nclasses
        done = []
        lat  = []
        unpaired = []
        for c in range(nclasses):
            d = Signal(stamp_bits)
            l = Signal(lat_bits)
            v = Signal()
            u = Signal()
            # The instant the end marks, and the fixed pipeline to the pins.
            end_at   = Signal(stamp_bits)
            start_at = Signal(stamp_bits)
            self.comb += [
                end_at.eq(now - self.end_age[c] + offsets[c]),
                start_at.eq(now - self.start_age[c]),
                l.eq(Mux(d >= 2**lat_bits, 2**lat_bits - 1, d[:lat_bits])),
            ]
            if modes[c] == "fifo":
                fifo = ClockDomainsRenamer(cd)(SyncFIFO(stamp_bits, inflight))
                self.submodules += fifo
                expired = Signal()
                self.comb += [
                    expired.eq(fifo.readable & (now - fifo.dout)[stamp_bits - 1]),
                    fifo.din.eq(start_at),
                    fifo.we.eq(self.start[c]),
                    fifo.re.eq(self.end[c] | expired),
                    d.eq(end_at - fifo.dout),
                    v.eq(self.end[c] & fifo.readable & ~expired),
                    # Migen's SyncFIFO drops a write when full, even with a read in the same cycle.
                    u.eq((self.end[c] & ~(fifo.readable & ~expired)) | expired | (self.start[c] & ~fifo.writable)),
                ]
            elif modes[c] == "stamp":
                self.comb += [
                    d.eq(end_at - self.end_stamp[c]),
                    v.eq(self.end[c] & self.end_stamped[c]),
                    u.eq(self.end[c] & ~self.end_stamped[c]),
                ]
            else:
                stamp  = Signal(stamp_bits)
                stamped = Signal()
                ambiguous = Signal()
                sync += [
                    If(self.end[c], stamped.eq(0), ambiguous.eq(0)),
                    If(self.start[c], stamp.eq(start_at), stamped.eq(1)),
                ]
                if modes[c] == "single":
                    sync += If(self.start[c] & stamped & ~self.end[c], ambiguous.eq(1))
                self.comb += [
                    self.held[c].eq(stamped & ~ambiguous),
                    self.held_stamp[c].eq(stamp),
                    d.eq(end_at - stamp),
                    v.eq(self.end[c] & stamped & ~ambiguous),
                    u.eq(self.end[c] & ~(stamped & ~ambiguous)),
                ]
            done.append(v)
            lat.append(l)
            unpaired.append(u)
        return done, lat, unpaired

    def _add_result_queue(self, cd, results, done, lat, lat_bits):
        """At most one result per cycle enters the queue; returns `lost`: a result that found a
        held one of its class still waiting."""
        sync = getattr(self.sync, cd)
        nclasses = self.nclasses
        # At most one result per cycle enters the queue: the lowest class wins; the others are
        # held one cycle in a register each (ends of one class are at least a frame apart).
        held_v = [Signal() for _ in range(nclasses)]
        held_l = [Signal(lat_bits) for _ in range(nclasses)]
        want_v = [Signal() for _ in range(nclasses)]
        want_l = [Signal(lat_bits) for _ in range(nclasses)]
        for c in range(nclasses):
            self.comb += [
                want_v[c].eq(held_v[c] | done[c]),
                want_l[c].eq(Mux(held_v[c], held_l[c], lat[c])),
            ]
        grant = Signal(max=max(nclasses, 2))
        any_want = Signal()
        self.comb += any_want.eq(Cat(*want_v) != 0)
        for c in reversed(range(nclasses)):
            self.comb += If(want_v[c], grant.eq(c))
        self.comb += [
            results.din.eq(Cat(Array(want_l)[grant], grant)),
            results.we.eq(any_want),
        ]
        lost = Signal()   # A result that found a held one of its class still waiting.
        for c in range(nclasses):
            taken = Signal()
            self.comb += taken.eq(any_want & results.writable & (grant == c))
            sync += [
                If(want_v[c] & ~taken,
                    held_v[c].eq(1),
                    held_l[c].eq(want_l[c]),
                ).Else(
                    held_v[c].eq(0),
                )
            ]
        self.comb += lost.eq(Cat(*[held_v[c] & done[c] for c in range(nclasses)]) != 0)
        return lost

    def _add_statistics(self, cd, results, ev_overflow, lat_bits):
        """The statistics RAMs, the pipeline that updates them and the CPU's view of them."""
        nclasses = self.nclasses
        cw = len(self._select.storage)
        # Statistics RAMs. A: count, sum, min, max per class. B: the histogram, class * NBINS + bin.
        wa = COUNT_BITS + SUM_BITS + 2*lat_bits + SUMSQ_BITS
        mem_a = Memory(wa, max(nclasses, 2))
        mem_b = Memory(COUNT_BITS, max(nclasses, 2) * NBINS)
        pa = mem_a.get_port(write_capable=True, async_read=True, clock_domain=cd)
        pb = mem_b.get_port(write_capable=True, async_read=True, clock_domain=cd)
        self.specials += mem_a, mem_b, pa, pb

        sel_class = Signal(cw)
        sel_bin   = Signal(bits_for(NBINS - 1))
        self.specials += [
            MultiReg(self._select.storage, sel_class, cd),
            MultiReg(self._bin.storage, sel_bin, cd),
        ]
        clear_ps = PulseSynchronizer("sys", cd)
        self.submodules += clear_ps
        self.comb += clear_ps.i.eq(self._clear.re)

        # Pipeline: POP registers a result; UPDATE reads both RAMs (asynchronously) and writes
        # them back in the same cycle. CLEAR walks the RAMs.
        r_class = Signal(cw)
        r_lat   = Signal(lat_bits)
        r_bin   = Signal(bits_for(NBINS - 1))
        bin_c   = Signal(bits_for(NBINS - 1))
        res_l   = Signal(lat_bits)
        self.comb += res_l.eq(results.dout[:lat_bits])
        self.comb += bin_c.eq(0)
        for k in range(1, NBINS):
            self.comb += If(res_l >= 2**k, bin_c.eq(k))
        walk = Signal(bits_for(max(nclasses, 2) * NBINS))
        cur_a = Signal(wa)
        self.comb += cur_a.eq(pa.dat_r)
        c_count = cur_a[:COUNT_BITS]
        c_sum   = cur_a[COUNT_BITS:COUNT_BITS + SUM_BITS]
        c_min   = cur_a[COUNT_BITS + SUM_BITS:COUNT_BITS + SUM_BITS + lat_bits]
        c_max   = cur_a[COUNT_BITS + SUM_BITS + lat_bits:COUNT_BITS + SUM_BITS + 2*lat_bits]
        c_sumsq = cur_a[COUNT_BITS + SUM_BITS + 2*lat_bits:]
        r_sq    = Signal(2*lat_bits)
        shown_a = Signal(wa)
        shown_b = Signal(COUNT_BITS)
        self.fsm = fsm = ClockDomainsRenamer(cd)(FSM(reset_state="CLEAR"))
        fsm.act("CLEAR",
            results.re.eq(1),                     # Drop what was queued: it belongs to before.
            ev_overflow.eq(results.readable),
            pa.adr.eq(walk[:len(pa.adr)]),
            pa.dat_w.eq(Cat(C(0, COUNT_BITS), C(0, SUM_BITS), C((2**lat_bits - 1), lat_bits), C(0, lat_bits),
                            C(0, SUMSQ_BITS))),
            pa.we.eq(walk < max(nclasses, 2)),
            pb.adr.eq(walk),
            pb.dat_w.eq(0),
            pb.we.eq(1),
            NextValue(walk, walk + 1),
            If(walk == max(nclasses, 2) * NBINS - 1,
                NextValue(walk, 0),
                NextState("POP"),
            )
        )
        fsm.act("POP",
            pa.adr.eq(sel_class),
            pb.adr.eq(Cat(sel_bin, sel_class)),
            NextValue(shown_a, pa.dat_r),
            NextValue(shown_b, pb.dat_r),
            If(clear_ps.o,
                NextState("CLEAR"),
            ).Elif(results.readable,
                results.re.eq(1),
                NextValue(r_class, results.dout[lat_bits:]),
                NextValue(r_lat, res_l),
                # The square is registered here, the multiplier's only path (a DSP on ECP5).
                NextValue(r_sq, res_l * res_l),
                NextValue(r_bin, bin_c),
                NextState("UPDATE"),
            )
        )
        fsm.act("UPDATE",
            pa.adr.eq(r_class),
            pb.adr.eq(Cat(r_bin, r_class)),
            pa.dat_w.eq(Cat((c_count + 1)[:COUNT_BITS], (c_sum + r_lat)[:SUM_BITS],
                            Mux(r_lat < c_min, r_lat, c_min), Mux(r_lat > c_max, r_lat, c_max),
                            (c_sumsq + r_sq)[:SUMSQ_BITS])),
            pa.we.eq(1),
            pb.dat_w.eq((pb.dat_r + 1)[:COUNT_BITS]),
            pb.we.eq(1),
            NextState("POP"),
        )
        # The histogram's address is class * NBINS + bin: NBINS is a power of two.
        assert NBINS & (NBINS - 1) == 0

        self.comb += [
            self._count.status.eq(shown_a[:COUNT_BITS]),
            self._sum.status.eq(shown_a[COUNT_BITS:COUNT_BITS + SUM_BITS]),
            self._min.status.eq(shown_a[COUNT_BITS + SUM_BITS:COUNT_BITS + SUM_BITS + lat_bits]),
            self._max.status.eq(shown_a[COUNT_BITS + SUM_BITS + lat_bits:COUNT_BITS + SUM_BITS + 2*lat_bits]),
            self._sumsq.status.eq(shown_a[COUNT_BITS + SUM_BITS + 2*lat_bits:]),
            self._bin_count.status.eq(shown_b),
        ]


# The DAQ SoC's probes ------------------------------------------------------------------------------

# Transmit: from the data handed over to the first preamble byte on the pins.
#   launch: the launcher's fire decision (in eth_tx) to its frame (lead + guard band: constant);
#   cpu:    the control mailbox offering a datagram to LiteEth's UDP port (control answers, PTP over
#           UDP) to that datagram's frame;
#   bulk:   a DAQ datagram offered to the transmit path to its frame.
# Receive: from the last byte (FCS) on the pins to the data at its consumer.
#   fasttrack: the classifier's fast-track sink (gateware/classifier.py).
TX_CLASSES = ("launch", "cpu", "bulk")
RX_CLASSES = ("fasttrack",)
# Receive through LiteEth to the control mailbox (UDP to the control port, PTP's 319 and 320),
# counted in sys: from the last byte on the pins to
#   udp: the datagram's header at LiteEth's UDP port (the mailbox's input);
#   cpu: the firmware's first read of the mailbox's rx_ready that finds it (its main loop polls).
MAILBOX_CLASSES = ("udp", "cpu")
# A PulseSynchronizer from sys to eth_tx: its output pulses 3 cycles after its input when both
# domains run on one clock (the simulated board); on hardware 2 to 3 eth_tx cycles plus the
# phase between the clocks.
SYNC_CYCLES = 3


class TXFrameTap(LiteXModule):
    """Which transmit class each frame at the PHY's sink belongs to (8 bits a cycle, preamble and
    SFD included, as every frame source here hands them over): an `end` pulse per class and
    `age`, the cycles since the frame's first byte there.

    - launch: a frame the scheduler took from `launch_input`; at its first byte.
    - cpu: from `mac_input`, IPv4 without options, UDP, source port one of `cpu_ports`; at byte 43
      (the source port's last byte, counting the preamble's first as 0).
    - bulk: from `bulk_input`, IPv4 (not the ARP requester's frames); at byte 21 (the EtherType's).
    """
    def __init__(self, sink, scheduler, mac_input, bulk_input, cpu_ports, launch_input=None):
        self.end = Signal(len(TX_CLASSES))
        self.age = Signal(8)

        # # #

        beat    = Signal()
        first   = Signal()
        inframe = Signal()
        self.comb += [
            beat.eq(sink.valid & sink.ready),
            first.eq(beat & ~inframe),
        ]
        # The scheduler's input for the frame now starting at the PHY's sink: the scheduler starts
        # a frame a few registers before it gets here, and the next one only after its last byte.
        tag = Signal.like(scheduler.started_from)
        cls = Signal.like(scheduler.started_from)
        self.sync += If(scheduler.started, tag.eq(scheduler.started_from))
        n  = Signal(6)     # Byte index in the frame (saturates at 63).
        t  = Signal(8)     # Cycles since the frame's first byte (saturates).
        hi = Signal(8)
        ok_cpu  = Signal()
        self.sync += [
            If(beat,
                inframe.eq(~sink.last),
                If(n != 63, n.eq(n + 1)),
                hi.eq(sink.data),
            ),
            If(beat & sink.last, n.eq(0)),
            If(first,
                cls.eq(tag),
                t.eq(1),
            ).Elif(inframe & (t != 255),
                t.eq(t + 1),
            ),
        ]
        self.comb += self.age.eq(Mux(first, 0, t))
        word = Cat(sink.data, hi)
        port_ok = Signal()
        self.comb += port_ok.eq(reduce(or_, [word == p for p in cpu_ports]) if cpu_ports else 0)
        self.sync += [
            If(first, ok_cpu.eq(tag == mac_input)),
            If(beat & (((n == 21) & (word != 0x0800)) | ((n == 22) & (sink.data != 0x45)) |
                       ((n == 31) & (sink.data != 17))),
                ok_cpu.eq(0),
            ),
        ]
        if launch_input is not None:
            self.comb += If(first & (tag == launch_input), self.end[TX_CLASSES.index("launch")].eq(1))
        self.comb += [
            If(beat & (n == 43) & ok_cpu & port_ok, self.end[TX_CLASSES.index("cpu")].eq(1)),
            If(beat & (n == 21) & (cls == bulk_input) & (word == 0x0800), self.end[TX_CLASSES.index("bulk")].eq(1)),
        ]


def _datagram_offers(module, ep, cd):
    """A pulse in the first cycle each datagram is offered (`valid`) on stream endpoint `ep` (in cd),
    whether or not it is taken then. Not the first beat taken: LiteEth's packetizers send their
    headers (and so the preamble reaches the pins) before they take a payload byte."""
    pending = Signal()   # This datagram's offer is marked; cleared when its last beat is taken.
    start   = Signal()
    sync = getattr(module.sync, cd)
    sync += If(ep.valid & ep.ready & ep.last, pending.eq(0)).Elif(ep.valid, pending.eq(1))
    module.comb += start.eq(ep.valid & ~pending)
    return start


class DAQProbes(LiteXModule):
    """The latency probes of the DAQ SoC, always on: `tx` (LatencyProbe in eth_tx, TX_CLASSES),
    `rx` (in eth_rx, RX_CLASSES) and, with the classifier, `mailbox` (in sys, MAILBOX_CLASSES: to
    LiteEth's UDP port and to the CPU). Latencies refer to the FPGA's pins: the PHY's fixed
    registers (`phy_cycles`: tx, rx) are added. `cpu_source`: the control mailbox's stream into
    LiteEth's UDP port (sys), `cpu_ports` its source ports; `fasttrack`: the classifier's sink
    record (eth_rx), or None."""
    def __init__(self, txpath, phy, cpu_source, cpu_ports, phy_cycles, launcher=None, fasttrack=None,
                 passed_udp=None, mailbox=None):
        tx_off, rx_off = phy_cycles
        if txpath is not None:
            self.tx = LatencyProbe(len(TX_CLASSES), cd="eth_tx", modes=["latest", "fifo", "fifo"],
                                   offsets=[tx_off, tx_off + SYNC_CYCLES, tx_off])
        self.rx = LatencyProbe(len(RX_CLASSES), cd="eth_rx", modes=["latest"], offsets=[rx_off])
        if passed_udp is not None and mailbox is not None:
            self.mailbox = LatencyProbe(len(MAILBOX_CLASSES), cd="sys", modes=["single", "stamp"],
                                        offsets=[rx_off + SYNC_CYCLES] * 2)

        # # #

        if txpath is not None:
            self._add_tx(txpath, phy, cpu_source, cpu_ports, launcher)
        if passed_udp is not None and mailbox is not None:
            self._add_mailbox(phy, passed_udp, mailbox, cpu_ports)

        # Receive: the last byte of every frame the PHY delivers is a start; only those that
        # reach a consumer end ("latest": each end pairs with the newest start).
        last = Signal()
        self.comb += last.eq(phy.source.valid & phy.source.last)
        if fasttrack is not None:
            self.comb += [
                self.rx.start[RX_CLASSES.index("fasttrack")].eq(last),
                self.rx.end[RX_CLASSES.index("fasttrack")].eq(fasttrack.valid),
            ]

    def _add_mailbox(self, phy, passed_udp, mailbox, cpu_ports):
        # eth_rx: each datagram for the mailbox, as the classifier passes it on, and how many
        # cycles after its last byte left the PHY (the FCS checker's and classifier's pipeline).
        since = Signal(8)
        age   = Signal(8)
        self.sync.eth_rx += [
            If(phy.source.valid & phy.source.last, since.eq(1)).Elif(since != 255, since.eq(since + 1)),
            If(passed_udp.valid, age.eq(since)),
        ]
        ours = Signal()
        self.comb += ours.eq(passed_udp.valid & reduce(or_, [passed_udp.dst_port == p for p in cpu_ports]))
        # Into sys: `age` is held until the next frame's end, tens of cycles after the pulse crossed.
        arrive = PulseSynchronizer("eth_rx", "sys")
        self.submodules += arrive
        age_sys = Signal(8)
        self.specials += MultiReg(age, age_sys, "sys")
        udp, cpu = MAILBOX_CLASSES.index("udp"), MAILBOX_CLASSES.index("cpu")
        m = self.mailbox
        self.comb += [
            arrive.i.eq(ours),
            m.start[udp].eq(arrive.o),
            m.start_age[udp].eq(age_sys),
            m.end[udp].eq(mailbox.probe_arrived),
            mailbox.probe_stamp.eq(m.held_stamp[udp]),
            mailbox.probe_stamped.eq(m.held[udp]),
            m.end[cpu].eq(mailbox.probe_seen),
            m.end_stamp[cpu].eq(mailbox.probe_seen_stamp),
            m.end_stamped[cpu].eq(mailbox.probe_seen_stamped),
        ]

    def _add_tx(self, txpath, phy, cpu_source, cpu_ports, launcher):
        ninputs   = len(txpath.scheduler.sinks)
        launch_in = 0 if launcher is not None else None
        self.tap = tap = ClockDomainsRenamer("eth_tx")(TXFrameTap(phy.sink, txpath.scheduler,
            mac_input=ninputs - 2, bulk_input=ninputs - 1, cpu_ports=cpu_ports, launch_input=launch_in))
        cpu_sync = PulseSynchronizer("sys", "eth_tx")
        self.submodules += cpu_sync
        self.comb += cpu_sync.i.eq(_datagram_offers(self, cpu_source, "sys"))
        starts = {
            "launch": launcher.fire if launcher is not None else 0,
            "cpu":    cpu_sync.o,
            "bulk":   _datagram_offers(self, txpath.data, "eth_tx"),
        }
        self.comb += [self.tx.start[i].eq(starts[c]) for i, c in enumerate(TX_CLASSES)]
        self.comb += self.tx.end.eq(tap.end)
        self.comb += [self.tx.end_age[i].eq(tap.age) for i in range(len(TX_CLASSES))]
