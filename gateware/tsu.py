#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""PTP hardware timestamp unit: frames timestamped at the PHY, for the firmware's PTP stack.

    PTPTimestamper  passive tap on a PHY-side stream: time at the SFD (ethdaq.gateware.ptpclock's
                    TimeCapture), PTP message recognised in hardware (ethdaq.gateware.ptpparser),
                    one record (time, messageType, sequenceId, ...) per PTP frame into a FIFO the
                    firmware reads.
    tap, tap_phy    how the SoC taps a PHY's streams for the timestamper.
    PHY latencies   the fixed cycles between the tap and the FPGA's pins (phy_corrections_ns).

The clock itself is ethdaq.gateware.ptpclock. See docs/ptp.md for the register map and the PHY
latencies.
"""

from migen import *
from migen.genlib.cdc import PulseSynchronizer

from litex.gen import *

from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRField, CSRStatus

from liteeth.common import eth_phy_description

from ethdaq.gateware.cdcfifo import LevelFIFO
from ethdaq.gateware.ptpclock import TimeCapture
from ethdaq.gateware.ptpparser import PTPParser, PTPParser64, record_layout

XGMII_START = 0xFB   # The XGMII start control character /S/.

# PHY latencies ------------------------------------------------------------------------------------

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
    # 10 Gb/s XGMII, 64 bits a cycle at 156.25 MHz; the SFD beat is the column of the start
    # character /S/, which may be in lane 0 or lane 4 (XGMII_LANE4_NS). TX: ethdaq's
    # XGMIITransmitter (gateware/xgmiitx.py) chooses the /S/ column in the cycle it takes the
    # frame's first word and registers it onto the pins: 1. RX: LiteEth's LiteEthPHYXGMIIRX, its
    # bus register behind the (combinational) lane aligner: 1 for /S/ in lane 0.
    "xgmii":      (1, 1),
}
# PHY clock period and the time from the SFD beat's start to the timestamp point, in ns, where
# not 1 Gb/s with one byte per 8 ns cycle.
PHY_TIMING_NS = {
    "mii":   (40, 80),    # 100 Mb/s: a nibble per 40 ns cycle.
    "xgmii": (6.4, 6.4),  # 10 Gb/s: the point is lane 0 of the column after /S/'s (8 bytes of 0.8 ns).
}
# XGMII: what a start in lane 4 adds to the (tx, rx) corrections, in ns. TX: its /S/ is 4 byte
# times later in the same column. RX: LiteEth's aligner holds the column's lower half for a cycle
# (6.4 ns late on the stream) while the /S/ was 4 byte times (3.2 ns) later on the pins than a
# lane-0 start: the record carries the lane (`lane`, 0 or 4) and the firmware adds this.
XGMII_LANE4_NS = (3.2, -3.2)
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


# PTP Timestamper ----------------------------------------------------------------------------------

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


class XGMIIStartLane(LiteXModule):
    """The lane of the last XGMII start character /S/ on a set of XGMII pins (`ctl`, `data`, one
    64-bit column a cycle): `lane4` is 1 if it was lane 4, from the column that holds it
    (combinational in that column, held after it), for PTPTimestamper(dw=64).lane4."""
    def __init__(self, ctl, data):
        self.lane4 = Signal()

        # # #

        start0 = ctl[0] & (data[:8] == XGMII_START)
        start4 = ctl[4] & (data[32:40] == XGMII_START)
        held   = Signal()
        self.sync += If(start0 | start4, held.eq(start4))
        self.comb += self.lane4.eq(Mux(start0 | start4, start4, held))


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


class PTPTimestamper(LiteXModule):
    """Timestamp PTP frames on a PHY-side stream (tap it with `tap()`), for the firmware.

    Parameters
    ----------
    clock : the PTPClock (running in `cd_clock`).
    dw : PHY data width: 8 (GMII/RGMII/MII) or 64 (XGMII: ptpparser.PTPParser64, and `lane4`).
    with_preamble : the stream carries preamble + SFD (LiteEth PHYs with with_preamble_crc; at 64
        bits LiteEth's XGMII receiver, whose first beat is the preamble column); the time is taken
        in the SFD beat. Without, in the first beat (at 8 bits the first byte after the SFD, one
        byte time later: compensate in the firmware; at 64 bits a transmitter's sink, whose first
        word is taken with its /S/ column).
    cd : domain of the tapped stream (eth_tx or eth_rx); cd_clock : the clock's domain.
    depth : records held for the firmware (power of two, >= 4; two more when `cd` is not sys).
    sys_faster : sys runs faster than `cd` (a 100 Mb/s PHY's 25 MHz): the record FIFO's reader
        is then shown only records already in its RAM (gateware/cdcfifo.py reader_faster).

    The firmware (sys) sees the head record while `status.pending`, and writes `pop` to drop it.
    Records lost because the FIFO was full are counted in `overflows`.

    At dw=64 `lane4` (in `cd`) says, in the SFD beat, that the frame's /S/ was in lane 4 of its
    XGMII column (XGMIIStartLane on the pins); the record keeps it (`start_lane`: 0 or 4), for the
    firmware's lane correction (XGMII_LANE4_NS).
    """
    def __init__(self, clock, dw=8, with_preamble=True, cd="sys", cd_clock="sys", depth=8, sys_faster=False):
        if dw not in (8, 64):
            raise ValueError(f"PTPTimestamper: dw must be 8 (GMII/RGMII/MII) or 64 (XGMII), not {dw!r}")
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
        self.lane4 = Signal()   # dw=64, in `cd`: the frame's /S/ was in lane 4 (read in the SFD beat).
        if dw == 64:
            self._start_lane = CSRStatus(3, description="Lane of the head record's XGMII start character /S/: 0 or 4.")

        # # #

        if cd == "sys":
            self.parser = parser = (PTPParser if dw == 8 else PTPParser64)(with_preamble)
        else:
            # The parser's state machine is one-hot on the ECP5, and Yosys' recoding folds a sync
            # reset into its next-state LUTs: its reset comes from a flip-flop beside it (a domain
            # of its own on the same clock), not from the domain's global reset line, whose route
            # out of the clock buffer costs eth 4 ns (docs/liteeth-notes.md).
            local     = ClockDomain(f"{cd}_ptpparser")
            rst_local = Signal(reset_less=True)
            sync = getattr(self.sync, cd)
            sync += rst_local.eq(ResetSignal(cd, allow_reset_less=True))
            self.clock_domains += local
            self.comb += [local.clk.eq(ClockSignal(cd)), local.rst.eq(rst_local)]
            self.parser = parser = ClockDomainsRenamer(local.name)((PTPParser if dw == 8 else PTPParser64)(with_preamble))
        self.capture = capture = TimeCapture(clock, cd, cd_clock)
        self.comb += [
            sink.connect(parser.sink, omit={"ready"}),  # Observed, never driven.
            parser.sink.ready.eq(sink.ready),
            capture.request.eq(parser.sfd),
        ]

        # Record FIFO, written in `cd` at the end of a PTP frame, read by the firmware in sys.
        layout = record_layout(dw)
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
            *[getattr(fifo.sink, n).eq(getattr(parser.fields, n)) for n, _ in layout if n not in ("sec", "ns", "start_lane")],
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
        if dw == 64:
            # The lane, from the SFD beat to the record (the next SFD comes after this frame's
            # record is written, at the earliest in the same cycle).
            start_lane = Signal(3)
            sync += If(parser.sfd, start_lane.eq(Mux(self.lane4, 4, 0)))
            self.comb += [
                fifo.sink.start_lane.eq(start_lane),
                self._start_lane.status.eq(head.start_lane),
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
