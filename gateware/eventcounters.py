#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Event counters: the SoC's counts of rare events (frames and datagrams dropped, receive errors,
ARP timeouts) in one small RAM, read by the CPU through one window (`select`, then `count`).

    sources (sys counters, their low k bits)      RAM (n x 32)            CPU
    src0[:k] ──┐                               ┌───────────────┐
    src1[:k] ──┼─ round robin r ─ cur - seen ─►│ mem[r] += d   │── mem[select] ─► count
    ...     ───┘   (one a cycle)               └───────────────┘

Each source is a counter the core keeps anyway (in sys, rising by at most one a cycle). Only its
low k bits are read here, so synthesis keeps k of its flip-flops and carry bits instead of 32,
and the CSR bus reads one 32-bit word instead of one per counter: a counter as a CSRStatus of its
own costs about 58 LUT4 equivalents on the ECP5 (32 flip-flops, 16 carry cells, the CSR read
multiplexer's share), here about 10 and the shared RAM. Every source is visited once in n cycles
and 2**k > n, so it cannot advance by 2**k between visits: the difference of its low bits since
the last visit is exact, and the totals are exact.

The counts start at 0 at reset: in the first round each source's low bits are taken as seen and
its count set to 0. A count is read from the RAM as it was at the source's last visit, at most n
cycles old.
"""

from migen import *
from migen.genlib.cdc import PulseSynchronizer

from litex.gen import *

from litex.soc.interconnect.csr import *

COUNT_BITS = 32


def count_pulses(module, cd, pulses, clear=None):
    """In `module`: for each (pulse, csr) of `pulses`, the pulses of `pulse` (one cycle in clock
    domain `cd`, far rarer than the synchroniser's few cycles) counted in `csr.status` (sys),
    zeroed while `clear` (sys), if given."""
    for pulse, csr in pulses:
        ps = PulseSynchronizer(cd, "sys")
        module.submodules += ps
        module.comb += ps.i.eq(pulse)
        if clear is None:
            module.sync += If(ps.o, csr.status.eq(csr.status + 1))
        else:
            module.sync += If(clear, csr.status.eq(0)).Elif(ps.o, csr.status.eq(csr.status + 1))


class EventCounters(LiteXModule):
    """`sources`: [(name, signal), ...], each a counter in sys that rises by at most one a cycle;
    event i's count is read with `select` = i (the firmware's EVENT_<NAME> constant)."""
    def __init__(self, sources):
        if not sources:
            raise ValueError("EventCounters needs at least one source")
        names = [name for name, _ in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"EventCounters: source names must differ, not {names!r}")
        n         = len(sources)
        k         = bits_for(n)     # 2**k > n.
        self.names = names

        self._select = CSRStorage(bits_for(max(n - 1, 1)), description="Event whose count `count` shows (EVENT_<NAME> of the SoC's constants).")
        self._count  = CSRStatus(COUNT_BITS, description="Events counted under `select` since reset (as at the event's last visit, at most as many cycles old as there are events).")

        # # #

        # Not an attribute: LiteX would export it as a CSR memory.
        mem   = Memory(COUNT_BITS, max(n, 2))
        rmw   = mem.get_port(write_capable=True, async_read=True)
        cpu   = mem.get_port(async_read=True)
        self.specials += mem, rmw, cpu

        r      = Signal(max=max(n, 2))
        first  = Signal(reset=1)    # The first round after reset: take the sources' bits as seen.
        cur    = Array(Signal(k, name=f"cur{i}") for i in range(n))
        seen   = Array(Signal(k, name=f"seen{i}") for i in range(n))
        delta  = Signal(k)
        self.comb += [
            [cur[i].eq(sig[:k]) for i, (_, sig) in enumerate(sources)],
            delta.eq(cur[r] - seen[r]),
            rmw.adr.eq(r),
            rmw.we.eq(1),
            rmw.dat_w.eq(Mux(first, 0, rmw.dat_r + delta)),
            cpu.adr.eq(self._select.storage),
        ]
        self.sync += [
            seen[r].eq(cur[r]),
            If(r == n - 1,
                r.eq(0),
                first.eq(0),
            ).Else(
                r.eq(r + 1),
            ),
            self._count.status.eq(cpu.dat_r),
        ]
