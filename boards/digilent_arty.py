#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Digilent Arty A7-35T: Xilinx Artix-7 XC7A35TICSG324-1L, TI DP83848J PHY on MII (100 Mb/s).

Pins from litex-boards (platforms/digilent_arty.py). Untested on hardware by this project: no
board and no Vivado here. Vivado builds it; Yosys' synth_xilinx checks the design and estimates
resources in CI.
"""

from migen import *

from litex.build.generic_platform import IOStandard, Pins, Subsignal

from liteeth.phy.mii import LiteEthPHYMII

from ethdaq.boards import xdc
from ethdaq.boards.crg import S7CRG
from ethdaq.boards.platform import S7BoardPlatform

_io = [
    ("clk100",      0, Pins("E3"), IOStandard("LVCMOS33")),
    ("cpu_reset_n", 0, Pins("C2"), IOStandard("LVCMOS33")),
    # The FT2232H's second channel (USB J10, /dev/ttyUSB1).
    ("serial", 0,
        Subsignal("tx", Pins("D10")),
        Subsignal("rx", Pins("A9")),
        IOStandard("LVCMOS33")
    ),
    # PTP pulse per second and periodic output on Pmod JA pins 1 and 2.
    ("ptp_pps",      0, Pins("G13"), IOStandard("LVCMOS33")),
    ("ptp_periodic", 0, Pins("B11"), IOStandard("LVCMOS33")),
    # MII Ethernet (DP83848J); the PHY's 25 MHz reference comes from the FPGA.
    ("eth_ref_clk", 0, Pins("G18"), IOStandard("LVCMOS33")),
    ("eth_clocks", 0,
        Subsignal("tx", Pins("H16")),
        Subsignal("rx", Pins("F15")),
        IOStandard("LVCMOS33"),
    ),
    ("eth", 0,
        Subsignal("rst_n",   Pins("C16")),
        Subsignal("mdio",    Pins("K13")),
        Subsignal("mdc",     Pins("F16")),
        Subsignal("rx_dv",   Pins("G16")),
        Subsignal("rx_er",   Pins("C17")),
        Subsignal("rx_data", Pins("D18 E17 E18 G17")),
        Subsignal("tx_en",   Pins("H15")),
        Subsignal("tx_data", Pins("H14 J14 J13 H17")),
        Subsignal("col",     Pins("D17")),
        Subsignal("crs",     Pins("G14")),
        IOStandard("LVCMOS33"),
    ),
]


class Board:
    name         = "digilent_arty"
    description  = "Digilent Arty A7-35T, Artix-7 35T, TI DP83848J (MII, 100 Mb/s)"
    fpga         = "XC7A35TICSG324-1L"
    phy          = "MII (DP83848J)"
    link         = "100M"
    toolchains   = ["vivado", "yosys"]  # yosys: synth_xilinx check and resource estimate only.
    sys_clk_freq = 100e6
    uart_name    = "serial"
    eth_dw       = 8
    max_payload  = 1472
    is_sim       = False
    ptp_phy      = "mii"
    constrains_eth_clocks = True  # boards/xdc.py
    loader       = ["--board", "arty_a7_35t"]  # The on-board FT2232H (USB J10).

    @staticmethod
    def platform(toolchain="vivado"):
        return S7BoardPlatform("xc7a35ticsg324-1L", _io, "clk100", 100e6, toolchain=toolchain)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return S7CRG(platform, sys_clk_freq, rst_name="cpu_reset_n", rst_active_low=True,
            eth_ref_clk_name="eth_ref_clk")

    @staticmethod
    def ethphy(platform):
        clock_pads = platform.request("eth_clocks", 0)
        pads       = platform.request("eth", 0)
        xdc.mii(platform, clock_pads, pads)
        return LiteEthPHYMII(clock_pads=clock_pads, pads=pads)
