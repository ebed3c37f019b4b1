#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Digilent Nexys Video: Xilinx Artix-7 XC7A200T-1SBG484C, Realtek RTL8211E-VL RGMII PHY.

Pins from litex-boards (platforms/digilent_nexys_video.py) and Digilent's master XDC (Pmod JA).
Untested on hardware by this project: no board and no Vivado here. Vivado builds it; Yosys'
synth_xilinx checks the design and estimates resources in CI.
"""

from migen import *

from litex.build.generic_platform import IOStandard, Pins, Subsignal

from liteeth.phy.s7rgmii import LiteEthPHYRGMII

from ethdaq.boards import xdc
from ethdaq.boards.crg import S7CRG
from ethdaq.boards.platform import S7BoardPlatform

_io = [
    ("clk100",    0, Pins("R4"), IOStandard("LVCMOS33")),
    ("cpu_reset_n", 0, Pins("G4"), IOStandard("LVCMOS15")),
    # The FT232R USB-UART (J13, "UART").
    ("serial", 0,
        Subsignal("tx", Pins("AA19")),
        Subsignal("rx", Pins("V18")),
        IOStandard("LVCMOS33"),
    ),
    # PTP pulse per second and periodic output on Pmod JA pins 1 and 2.
    ("ptp_pps",      0, Pins("AB22"), IOStandard("LVCMOS33")),
    ("ptp_periodic", 0, Pins("AB21"), IOStandard("LVCMOS33")),
    # RGMII Ethernet (RTL8211E-VL).
    ("eth_clocks", 0,
        Subsignal("tx", Pins("AA14")),
        Subsignal("rx", Pins("V13")),
        IOStandard("LVCMOS25")
    ),
    ("eth", 0,
        Subsignal("rst_n",   Pins("U7"), IOStandard("LVCMOS33")),
        Subsignal("mdio",    Pins("Y16")),
        Subsignal("mdc",     Pins("AA16")),
        Subsignal("rx_ctl",  Pins("W10")),
        Subsignal("rx_data", Pins("AB16 AA15 AB15 AB11")),
        Subsignal("tx_ctl",  Pins("V10")),
        Subsignal("tx_data", Pins("Y12 W12 W11 Y11")),
        IOStandard("LVCMOS25")
    ),
]

# Expansion connectors (for front-ends' pins, docs/frontends.md), from litex-boards
# (platforms/digilent_nexys_video.py, _connectors): the Pmod headers JA to JC (pins 0 to 3 are Pmod
# pins 1 to 4, pins 4 to 7 are Pmod pins 7 to 10; 3.3 V: LVCMOS33) and the FMC LPC connector's user
# I/O (LA00 to LA33 and the two mezzanine clocks; its transceiver lane and clock are left out:
# transceivers, not general I/O). The FMC's I/O voltage is VADJ, which this SoC does not set: the
# I/O standard must match the board's VADJ. Untested on hardware by this project.
_connectors = [
    ("pmoda", "AB22 AB21 AB20 AB18 Y21 AA21 AA20 AA18"),  # Pins 0 and 1: the PTP outputs (above).
    ("pmodb", "V9 V8 V7 W7 W9 Y9 Y8 Y7"),
    ("pmodc", "Y6 AA6 AA8 AB8 R6 T6 AB7 AB6"),
    ("LPC", {
        "CLK0_M2C_P": "J19", "CLK0_M2C_N": "H19", "CLK1_M2C_P": "C18", "CLK1_M2C_N": "C19",
        "LA00_CC_P":  "K18", "LA00_CC_N":  "K19", "LA01_CC_P":  "J20", "LA01_CC_N":  "J21",
        "LA02_P":     "M18", "LA02_N":     "L18", "LA03_P":     "N18", "LA03_N":     "N19",
        "LA04_P":     "N20", "LA04_N":     "M20", "LA05_P":     "M21", "LA05_N":     "L21",
        "LA06_P":     "N22", "LA06_N":     "M22", "LA07_P":     "M13", "LA07_N":     "L13",
        "LA08_P":     "M15", "LA08_N":     "M16", "LA09_P":     "H20", "LA09_N":     "G20",
        "LA10_P":     "K21", "LA10_N":     "K22", "LA11_P":     "L14", "LA11_N":     "L15",
        "LA12_P":     "L19", "LA12_N":     "L20", "LA13_P":     "K17", "LA13_N":     "J17",
        "LA14_P":     "J22", "LA14_N":     "H22", "LA15_P":     "L16", "LA15_N":     "K16",
        "LA16_P":     "G17", "LA16_N":     "G18", "LA17_CC_P":  "B17", "LA17_CC_N":  "B18",
        "LA18_CC_P":  "D17", "LA18_CC_N":  "C17", "LA19_P":     "A18", "LA19_N":     "A19",
        "LA20_P":     "F19", "LA20_N":     "F20", "LA21_P":     "E19", "LA21_N":     "D19",
        "LA22_P":     "E21", "LA22_N":     "D21", "LA23_P":     "B21", "LA23_N":     "A21",
        "LA24_P":     "B15", "LA24_N":     "B16", "LA25_P":     "F16", "LA25_N":     "E17",
        "LA26_P":     "F18", "LA26_N":     "E18", "LA27_P":     "B20", "LA27_N":     "A20",
        "LA28_P":     "C13", "LA28_N":     "B13", "LA29_P":     "C14", "LA29_N":     "C15",
        "LA30_P":     "A13", "LA30_N":     "A14", "LA31_P":     "E13", "LA31_N":     "E14",
        "LA32_P":     "A15", "LA32_N":     "A16", "LA33_P":     "F13", "LA33_N":     "F14",
    }),
]


class Board:
    name         = "digilent_nexys_video"
    description  = "Digilent Nexys Video, Artix-7 200T, Realtek RTL8211E-VL"
    fpga         = "XC7A200T-1SBG484C"
    phy          = "RGMII (RTL8211E)"
    link         = "1G"
    toolchains   = ["vivado", "yosys"]  # yosys: synth_xilinx check and resource estimate only.
    sys_clk_freq = 100e6
    uart_name    = "serial"
    eth_dw       = 8
    max_payload  = 8972  # Jumbo datagrams: the XC7A200T has the block RAM for them.
    is_sim       = False
    ptp_phy      = "s7rgmii"
    constrains_eth_clocks = True  # boards/xdc.py
    loader       = ["--board", "nexysVideo"]  # The on-board Digilent USB-JTAG (J12, "PROG").

    @staticmethod
    def platform(toolchain="vivado"):
        return S7BoardPlatform("xc7a200t-sbg484-1", _io, "clk100", 100e6, toolchain=toolchain,
                               connectors=_connectors)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return S7CRG(platform, sys_clk_freq, rst_name="cpu_reset_n", rst_active_low=True,
            with_idelay=True)

    @staticmethod
    def ethphy(platform):
        # RGMII delays as LiteEth's defaults (litex-boards' Nexys Video target): the FPGA delays
        # the received data by 2 ns (IDELAYE2) and TXC by 90 degrees (PLL phase); the PHY by none.
        clock_pads = platform.request("eth_clocks", 0)
        pads       = platform.request("eth", 0)
        xdc.rgmii(platform, clock_pads, pads)
        return LiteEthPHYRGMII(clock_pads=clock_pads, pads=pads, tx_delay=2e-9, rx_delay=2e-9)
