#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Colorlight i5 (v7.0): Lattice ECP5 LFE5U-25F-6BG381C, two Broadcom B50612D RGMII PHYs.

Pins from litex-boards (platforms/colorlight_i5.py, documented by @smunaut and @wuxx). Untested
on hardware by this project: we have no board here; bitstreams are built and timed only.
"""

from migen import *

from litex.gen import *

from litex.build.generic_platform import IOStandard, Misc, Pins, Subsignal

from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII

from ethdaq.boards.crg import ECP5CRG
from ethdaq.boards.platform import ECP5BoardPlatform

_io = [
    ("clk25",       0, Pins("P3"),  IOStandard("LVCMOS33")),
    ("user_led_n",  0, Pins("U16"), IOStandard("LVCMOS33")),
    ("cpu_reset_n", 0, Pins("K18"), IOStandard("LVCMOS33"), Misc("PULLMODE=UP")),
    # PTP pulse per second and the programmable periodic output (gateware/ptpclock.py) on the
    # extension board's PMOD P3 (litex-boards' "pmode" connector: C17 B18 B20 F20 A18 A19 B19
    # D20), pins 1 and 2.
    ("ptp_pps",      0, Pins("C17"), IOStandard("LVCMOS33")),
    ("ptp_periodic", 0, Pins("B18"), IOStandard("LVCMOS33")),
    ("serial", 0,
        Subsignal("tx", Pins("J17")),
        Subsignal("rx", Pins("H18")),
        IOStandard("LVCMOS33")
    ),
    # RGMII Ethernet (B50612D). PHY 0 is the connector labelled ETH1 on the board.
    ("eth_clocks", 0,
        Subsignal("tx", Pins("G1")),
        Subsignal("rx", Pins("H2")),
        IOStandard("LVCMOS33")
    ),
    ("eth", 0,
        Subsignal("rst_n",   Pins("P4")),
        Subsignal("mdio",    Pins("P5")),
        Subsignal("mdc",     Pins("N5")),
        Subsignal("rx_ctl",  Pins("P2")),
        Subsignal("rx_data", Pins("K2 L1 N1 P1")),
        Subsignal("tx_ctl",  Pins("K1")),
        Subsignal("tx_data", Pins("G2 H1 J1 J3")),
        IOStandard("LVCMOS33")
    ),
]

# Expansion connectors (for front-ends' pins, docs/frontends.md), from litex-boards
# (platforms/colorlight_i5.py, _connectors_v7_0, after @wuxx's extension board schematic
# i5_v6.0-extboard.pdf and pinout i5_extboard_v1.2_pinout.png). The extension board's two PMOD
# headers; pins 0 to 3 are PMOD pins 1 to 4, pins 4 to 7 are PMOD pins 7 to 10. 3.3 V banks:
# LVCMOS33. Untested on hardware by this project.
_connectors = [
    ("pmode", "C17 B18 B20 F20 A18 A19 B19 D20"),  # P3; pins 0 and 1 are the PTP outputs (above).
    ("pmodf", "D1  C1  C2  E3  E2  D2  B1  A3"),
]


class Board:
    name         = "colorlight_i5"
    description  = "Colorlight i5 v7.0, ECP5-25F, 2x Broadcom B50612D"
    fpga         = "LFE5U-25F-6BG381C"
    phy          = "RGMII (B50612D)"
    link         = "1G"
    toolchains   = ["trellis"]  # Yosys + nextpnr-ecp5 + ecppack (from the yowasp packages).
    sys_clk_freq = 60e6
    uart_name    = "serial"
    eth_dw       = 8
    max_payload  = 1472  # Streamer buffers fit the ECP5-25F's block RAM with 1500-byte MTU datagrams.
    is_sim       = False
    ptp_phy      = "ecp5rgmii"  # gateware/tsu.py PHY_FPGA_LATENCY_CYCLES: timestamp corrections
    loader       = ["--cable", "dirtyJtag"]  # openFPGALoader: the common i5 extension board's debugger.

    @staticmethod
    def platform(toolchain="trellis"):
        return ECP5BoardPlatform("LFE5U-25F-6BG381C", _io, "clk25", 25e6, toolchain=toolchain, connectors=_connectors)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return ECP5CRG(platform, sys_clk_freq, rst_n_name="cpu_reset_n")

    @staticmethod
    def ethphy(platform):
        # RGMII delays: the B50612D delays TXC by 2 ns itself (its power-on default; litex-boards'
        # colorlight_i5 target, tested by users, also adds none), the FPGA delays the received
        # data by 2 ns (ECP5 DELAYG). A second 2 ns on transmit would put TXC on the data edges.
        return LiteEthPHYRGMII(
            clock_pads = platform.request("eth_clocks", 0),
            pads       = platform.request("eth", 0),
            tx_delay   = 0e-9,
            rx_delay   = 2e-9,
        )
