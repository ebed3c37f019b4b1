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

Per class: count, sum (the mean is sum / count), min, max, and a histogram of NBINS bins: bin 0
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

from migen import *
from migen.genlib.cdc import MultiReg, PulseSynchronizer
from migen.genlib.fifo import SyncFIFO

from litex.gen import *

from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage

NBINS        = 16
LAT_BITS     = 16
STAMP_BITS   = 24   # Start stamps: latencies up to 2^24 cycles are told apart from saturated ones.
COUNT_BITS   = 32
SUM_BITS     = 48


def bin_of(latency, lat_bits=LAT_BITS):
    """The histogram bin of a latency in cycles (the gateware's rule, for tests and the host)."""
    latency = min(latency, 2**lat_bits - 1)
    return min(max(latency.bit_length() - 1, 0), NBINS - 1)


class LatencyProbe(LiteXModule):
    """nclasses classes; `inflight`: starts that may wait for their end per class."""
    def __init__(self, nclasses, inflight=4, queue=8, cd="sys", lat_bits=LAT_BITS):
        cw = bits_for(max(nclasses - 1, 1))
        self.nclasses = nclasses
        self.start = Signal(nclasses)
        self.end   = Signal(nclasses)

        self._select    = CSRStorage(cw, description="Class the other registers show.")
        self._count     = CSRStatus(COUNT_BITS, description="Latencies recorded.")
        self._sum       = CSRStatus(SUM_BITS, description="Their sum, cycles.")
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
        now = Signal(STAMP_BITS)
        sync += now.eq(now + 1)

        # Pairing: one FIFO of start stamps per class; each end computes its latency.
        results = SyncFIFO(cw + lat_bits, queue)
        results = ClockDomainsRenamer(cd)(results)
        self.submodules += results
        ev_unpaired = Signal()
        ev_overflow = Signal()
        done = []
        lat  = []
        unpaired = []
        for c in range(nclasses):
            fifo = ClockDomainsRenamer(cd)(SyncFIFO(STAMP_BITS, inflight))
            self.submodules += fifo
            d = Signal(STAMP_BITS)
            l = Signal(lat_bits)
            v = Signal()
            u = Signal()
            self.comb += [
                fifo.din.eq(now),
                fifo.we.eq(self.start[c]),
                fifo.re.eq(self.end[c]),
                d.eq(now - fifo.dout),
                l.eq(Mux(d >= 2**lat_bits, 2**lat_bits - 1, d[:lat_bits])),
                v.eq(self.end[c] & fifo.readable),
                # Migen's SyncFIFO drops a write when full, even with a read in the same cycle.
                u.eq((self.end[c] & ~fifo.readable) | (self.start[c] & ~fifo.writable)),
            ]
            done.append(v)
            lat.append(l)
            unpaired.append(u)
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
        self.comb += [
            lost.eq(Cat(*[held_v[c] & done[c] for c in range(nclasses)]) != 0),
            ev_unpaired.eq(Cat(*unpaired) != 0),
        ]

        # Statistics RAMs. A: count, sum, min, max per class. B: the histogram, class * NBINS + bin.
        wa = COUNT_BITS + SUM_BITS + 2*lat_bits
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
        c_max   = cur_a[COUNT_BITS + SUM_BITS + lat_bits:]
        shown_a = Signal(wa)
        shown_b = Signal(COUNT_BITS)
        self.fsm = fsm = ClockDomainsRenamer(cd)(FSM(reset_state="CLEAR"))
        fsm.act("CLEAR",
            results.re.eq(1),                     # Drop what was queued: it belongs to before.
            ev_overflow.eq(results.readable),
            pa.adr.eq(walk[:len(pa.adr)]),
            pa.dat_w.eq(Cat(C(0, COUNT_BITS), C(0, SUM_BITS), C((2**lat_bits - 1), lat_bits), C(0, lat_bits))),
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
                NextValue(r_bin, bin_c),
                NextState("UPDATE"),
            )
        )
        fsm.act("UPDATE",
            pa.adr.eq(r_class),
            pb.adr.eq(Cat(r_bin, r_class)),
            pa.dat_w.eq(Cat((c_count + 1)[:COUNT_BITS], (c_sum + r_lat)[:SUM_BITS],
                            Mux(r_lat < c_min, r_lat, c_min), Mux(r_lat > c_max, r_lat, c_max))),
            pa.we.eq(1),
            pb.dat_w.eq((pb.dat_r + 1)[:COUNT_BITS]),
            pb.we.eq(1),
            NextState("POP"),
        )
        # The histogram's address is class * NBINS + bin: NBINS is a power of two.
        assert NBINS & (NBINS - 1) == 0

        # Event counters (sys), cleared with the statistics.
        for ev, csr in ((ev_unpaired, self._unpaired), (ev_overflow | lost, self._overflows)):
            ps = PulseSynchronizer(cd, "sys")
            self.submodules += ps
            self.comb += ps.i.eq(ev)
            self.sync += If(self._clear.re, csr.status.eq(0)).Elif(ps.o, csr.status.eq(csr.status + 1))

        self.comb += [
            self._count.status.eq(shown_a[:COUNT_BITS]),
            self._sum.status.eq(shown_a[COUNT_BITS:COUNT_BITS + SUM_BITS]),
            self._min.status.eq(shown_a[COUNT_BITS + SUM_BITS:COUNT_BITS + SUM_BITS + lat_bits]),
            self._max.status.eq(shown_a[COUNT_BITS + SUM_BITS + lat_bits:]),
            self._bin_count.status.eq(shown_b),
        ]
