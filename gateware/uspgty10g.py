#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""10GBASE-R Ethernet PHY on an UltraScale+ GTY transceiver (an SFP+/SFP28 cage), for DAQSoC.

    TXPath ─► XGMIIPHY (gateware/xgmiiphy.py) ─► XGMII ─► BaseRPCS (gateware/baser.py)
                                                              │ 64-bit words + 2-bit sync headers
    GTYQuadPLL (liteiclink) ─► USP_GTY_10G_BASER (LiteEth: GTYE4_CHANNEL, its 64b/66b gearbox, ◄─┘
                               resets, BUFG_GT clocks) ─► txp/txn, rxp/rxn

LiteEth 2024.12's usp_gty_10g_baser is the transceiver only (words and sync headers, no
encoding or scrambling): the PCS is ethdaq's. The line runs at 10.3125 Gb/s from a 156.25 MHz
reference clock on the quad's MGTREFCLK pins (QPLL); eth_tx is the transceiver's TXOUTCLK
(156.25 MHz) and eth_rx its recovered RXOUTCLK, both through BUFG_GT. The PHY's register-facing
attributes are XGMIIPHY's (the transmitter makes preamble, padding and FCS and keeps the gap).

Untested on hardware: no board and no Vivado here; the PCS is checked in simulation
(test/gateware/test_baser.py), the transceiver's configuration is LiteEth's.
"""

from migen import *

from litex.gen import *

from liteiclink.serdes.gty_ultrascale import GTYQuadPLL

from liteeth.phy.usp_gty_10g_baser import USP_GTY_10G_BASER

from ethdaq.gateware.baser import BaseRPCS
from ethdaq.gateware.xgmiiphy import XGMII_CLK_FREQ, XGMIIPHY

REFCLK_FREQ = 156.25e6
LINERATE    = 10.3125e9

# Widths of the GTYE4_CHANNEL outputs LiteEth ties to a constant (UG578); the others are 1 bit.
_GTY_OUTPUT_WIDTHS = {"RXCTRL0": 16, "RXCTRL1": 16}


def _open_constant_outputs(gty_params):
    """LiteEth 2024.12's usp_gty_10g_baser connects some of the GTYE4_CHANNEL's outputs
    (TXPHINITDONE, RXCTRL0, RXCTRL1) to the constant 0, which Yosys refuses ("Output port ... is
    connected to constants"): each gets an unused signal of its width instead. `gty_params`: the
    transceiver's Instance parameters, before its do_finalize makes the Instance."""
    for key, value in gty_params.items():
        if key.startswith("o_") and isinstance(value, (int, Constant)):
            port = key[2:]
            gty_params[key] = Signal(_GTY_OUTPUT_WIDTHS.get(port, 1), name=f"gty_{port.lower()}")


class _XGMIISignals:
    """The XGMII between XGMIIPHY and the PCS (the pins of the simulated board)."""
    def __init__(self):
        self.tx_data = Signal(64)
        self.tx_ctl  = Signal(8)
        self.rx_data = Signal(64)
        self.rx_ctl  = Signal(8)


class USPGTY10GPHY(XGMIIPHY):
    """`refclk_pads` (p, n: the quad's MGTREFCLK pins), `data_pads` (txp, txn, rxp, rxn).
    `rx_lock`: the PCS's block lock (eth_rx); `tx_bad_blocks`, `rx_bad_blocks`: its counts."""
    def __init__(self, refclk_pads, data_pads, sys_clk_freq, tx_polarity=0, rx_polarity=0):
        xgmii = _XGMIISignals()
        XGMIIPHY.__init__(self, xgmii)   # eth_tx and eth_rx: the transceiver's (self.pma).

        # # #

        self._refclk_p = refclk_pads.p
        refclk = Signal()
        self.specials += Instance("IBUFDS_GTE4",
            p_REFCLK_HROW_CK_SEL = 0,
            i_I   = refclk_pads.p,
            i_IB  = refclk_pads.n,
            i_CEB = 0,
            o_O   = refclk,
        )
        self.qpll = GTYQuadPLL(refclk, REFCLK_FREQ, LINERATE)
        self.pma  = USP_GTY_10G_BASER(self.qpll, data_pads, sys_clk_freq,
                                      tx_polarity=tx_polarity, rx_polarity=rx_polarity)
        _open_constant_outputs(self.pma.gty_params)
        self.pcs  = BaseRPCS(xgmii)
        self.rx_lock       = self.pcs.rx_lock
        self.tx_bad_blocks = self.pcs.tx_bad_blocks
        self.rx_bad_blocks = self.pcs.rx_bad_blocks
        self.comb += [
            self.pma.tx_data.eq(self.pcs.tx_payload),
            self.pma.tx_header.eq(self.pcs.tx_header),
            self.pcs.rx_payload.eq(self.pma.rx_data),
            self.pcs.rx_header.eq(self.pma.rx_header),
            self.pma.rx_slip.eq(self.pcs.rx_slip),
        ]

    @property
    def crg(self):
        # DAQSoC finds the PHY's clock domains here (add_timing_constraints).
        return self.pma

    def add_constraints(self, platform):
        """The reference clock's period on its pins and the transceiver's output clocks (Vivado
        derives the BUFG_GT clocks behind them)."""
        platform.add_period_constraint(self._refclk_p, 1e9/REFCLK_FREQ)
        platform.add_period_constraint(self.pma.txoutclk, 1e9/XGMII_CLK_FREQ)
        platform.add_period_constraint(self.pma.rxoutclk, 1e9/XGMII_CLK_FREQ)
