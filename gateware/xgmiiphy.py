#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""10G Ethernet PHY at the 64-bit XGMII pins, for DAQSoC: ethdaq's transmitter, LiteEth's receiver.

    TXPath ─► XGMIITransmitter (gateware/xgmiitx.py) ─► tx_data/tx_ctl    eth_tx, 156.25 MHz
    LiteEthPHYXGMIIRX ◄─ rx_data/rx_ctl                                    eth_rx, 156.25 MHz

Transmit: the transmitter makes the preamble, padding and FCS itself and keeps the gap (deficit
idle count), from frames without preamble and FCS whose words come without a gap. The PHY says so
to the rest of the SoC: `tx_framing` (LiteEth's MAC must not insert preamble and FCS: DAQSoC takes
its inserters out, gateware/macpipeline.py drop_tx_framing), `tx_gapless` (TXPath stores LiteEth's
frames whole before they reach it), `registered_outputs` (no register in front of it) and
`integrated_ifg_inserter`.

Receive: LiteEth's XGMII receiver (its lane aligner takes /S/ in lane 0 or 4): the preamble column
first and the FCS last, as LiteEth's MAC checks them (`with_preamble_crc`).

`tx_lane4` and `rx_lane4` (gateware/tsu.py XGMIIStartLane on the pins) say in which lane the
frame's /S/ was, for the PTP timestamp units. Both directions are clocked by `clk` (a 156.25 MHz
clock: the simulated board's); without `clk` the eth_tx and eth_rx domains are made elsewhere (a
transceiver's transmit and recovered receive clocks: gateware/uspgty10g.py).
"""

from migen import *

from litex.gen import *

from liteeth.phy.xgmii import LiteEthPHYXGMIIRX

from ethdaq.gateware.tsu import XGMIIStartLane
from ethdaq.gateware.xgmiitx import XGMIITransmitter

XGMII_CLK_FREQ = 156.25e6   # One 64-bit column a cycle: 10 Gb/s.


class XGMIIPHY(LiteXModule):
    dw                      = 64
    tx_clk_freq             = XGMII_CLK_FREQ
    rx_clk_freq             = XGMII_CLK_FREQ
    with_preamble_crc       = True   # Receive: the stream carries the preamble column and the FCS.
    with_padding            = True
    integrated_ifg_inserter = True   # The transmitter keeps the gap.
    registered_outputs      = True   # Its pins come from its own flip-flops.
    tx_framing              = True   # The transmitter makes preamble, padding and FCS.
    tx_gapless              = True   # A frame's words must come without a gap.

    def __init__(self, pads, clk=None):
        if clk is not None:
            self.cd_eth_tx = ClockDomain()
            self.cd_eth_rx = ClockDomain()
        self.tx_lane4  = Signal()
        self.rx_lane4  = Signal()

        # # #

        if clk is not None:
            self.comb += [self.cd_eth_tx.clk.eq(clk), self.cd_eth_rx.clk.eq(clk)]
        self.tx = ClockDomainsRenamer("eth_tx")(XGMIITransmitter(pads))
        self.rx = ClockDomainsRenamer("eth_rx")(LiteEthPHYXGMIIRX(pads, self.dw))
        self.sink, self.source = self.tx.sink, self.rx.source
        self.tx_start = ClockDomainsRenamer("eth_tx")(XGMIIStartLane(pads.tx_ctl, pads.tx_data))
        self.rx_start = ClockDomainsRenamer("eth_rx")(XGMIIStartLane(pads.rx_ctl, pads.rx_data))
        self.comb += [self.tx_lane4.eq(self.tx_start.lane4), self.rx_lane4.eq(self.rx_start.lane4)]
