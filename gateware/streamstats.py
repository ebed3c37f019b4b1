#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Per-stream counters: datagrams and UDP payload bytes each stream has sent, and the samples it
dropped this run, for the control protocol's STREAMS (the firmware counts a run from its start).

The serializer sends one datagram at a time, so one pipelined adder pair serves every stream, and
the totals live in one small distributed RAM: a sent datagram's stream and length are registered,
its stream's totals read, then written back incremented (three cycles; a datagram takes at least
five). The same read port serves the CPU between datagrams: the stream it selects is read into a
register in the transmit domain, which sys reads without a handshake, so a read can catch it
being written; the firmware reads until two reads agree. On the colorlight_i5, which has about
4,000 LUTs left, registers with per-stream adders and read multiplexers cost 820 LUT4
equivalents (yosys synth_ecp5 of this module alone, 4 streams; a carry cell counts as 2 LUT4, a
16x4 RAM as 4); this way 340 alone, and in the full SoC +447 LUT4, +47 carry cells and +24 RAMs
(about 640). The dropped-samples multiplexer is registered: combinational, it cost 2,800 LUT4 more
in the full SoC (docs/liteeth-notes.md).
"""

from migen import *
from migen.genlib.cdc import MultiReg

from litex.gen import *

from litex.soc.interconnect.csr import *

COUNTER_BITS = 48  # 2**48 bytes: 26 days at 1 Gb/s; 2**48 datagrams: far more.


class StreamCounters(LiteXModule):
    """`event` (in `cd`, one cycle): a datagram of stream `channel` with `nbytes` of UDP payload
    went out. `dropped`: each stream's dropped-samples counter (sys)."""
    def __init__(self, nchannels, dropped, cd="sys"):
        self.event   = Signal()
        self.channel = Signal(max=max(nchannels, 2))
        self.nbytes  = Signal(16)

        self._select    = CSRStorage(len(self.channel), description="Stream the other CSRs show.")
        self._datagrams = CSRStatus(COUNTER_BITS, description="Datagrams the selected stream has sent since power-on.")
        self._bytes     = CSRStatus(COUNTER_BITS, description="UDP payload bytes (DAQ header included) it has sent since power-on.")
        self._dropped   = CSRStatus(COUNTER_BITS, description="Samples it dropped this run.")

        # # #

        sync = getattr(self.sync, cd)
        # Each entry: bytes (high), datagrams (low). A RAM: no reset, and no init file (Verilator
        # benches run where it is not; the FPGA's RAMs start at 0 anyway). The firmware counts a
        # run from its start, modulo 2**COUNTER_BITS, so the start value does not matter.
        # Not an attribute: LiteX would export it as a CSR memory.
        depth = max(nchannels, 2)  # Migen needs an address bit.
        mem  = Memory(2*COUNTER_BITS, depth)
        port = mem.get_port(write_capable=True, async_read=True, clock_domain=cd)
        self.specials += mem, port

        select = Signal.like(self.channel)
        self.specials += MultiReg(self._select.storage, select, cd)

        ev_valid, ev_channel, ev_bytes = Signal(), Signal.like(self.channel), Signal(16)
        rd_valid, rd_bytes = Signal(), Signal(16)
        cur = Signal(2*COUNTER_BITS)
        shown = Signal(2*COUNTER_BITS)
        sync += [
            ev_valid.eq(self.event),
            If(self.event, ev_channel.eq(self.channel), ev_bytes.eq(self.nbytes)),
            rd_valid.eq(ev_valid),
            rd_bytes.eq(ev_bytes),
            cur.eq(port.dat_r),
            If(~ev_valid & ~rd_valid, shown.eq(port.dat_r)),
        ]
        self.comb += [
            # Read the event's stream while counting it, else the CPU's.
            port.adr.eq(Mux(ev_valid | rd_valid, ev_channel, select)),
            port.we.eq(rd_valid),
            port.dat_w.eq(Cat((cur[:COUNTER_BITS] + 1)[:COUNTER_BITS], (cur[COUNTER_BITS:] + rd_bytes)[:COUNTER_BITS])),
        ]

        # Read (sys).
        self.comb += [
            self._datagrams.status.eq(shown[:COUNTER_BITS]),
            self._bytes.status.eq(shown[COUNTER_BITS:]),
        ]
        # Registered: a CSR read takes several cycles anyway.
        self.sync += self._dropped.status.eq(Array(d[:COUNTER_BITS] for d in dropped)[self._select.storage])
