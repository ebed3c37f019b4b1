#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Xilinx KC705: Kintex-7 XC7K325T-2FFG900C, Marvell 88E1111 PHY on GMII.

Pins from litex-boards (platforms/xilinx_kc705.py). Untested on hardware by this project: no
board and no Vivado here. Vivado builds it; Yosys' synth_xilinx checks the design and estimates
resources in CI. 1000BASE-X on the SFP cage is not offered (it needs a transceiver PHY this
project has not simulated).
"""

from migen import *

from litex.build.generic_platform import IOStandard, Pins, Subsignal

from liteeth.phy.gmii import LiteEthPHYGMII

from ethdaq.boards import xdc
from ethdaq.boards.crg import S7CRG
from ethdaq.boards.platform import S7BoardPlatform

_io = [
    ("clk200", 0,
        Subsignal("p", Pins("AD12"), IOStandard("LVDS")),
        Subsignal("n", Pins("AD11"), IOStandard("LVDS"))
    ),
    ("cpu_reset", 0, Pins("AB7"), IOStandard("LVCMOS15")),
    # The CP2103 USB-UART (J6).
    ("serial", 0,
        Subsignal("tx",  Pins("K24")),
        Subsignal("rx",  Pins("M19")),
        IOStandard("LVCMOS25")
    ),
    # PTP pulse per second and periodic output on the user SMA GPIO pair (J13 P, J14 N).
    ("ptp_pps",      0, Pins("Y23"), IOStandard("LVCMOS25")),
    ("ptp_periodic", 0, Pins("Y24"), IOStandard("LVCMOS25")),
    # GMII Ethernet (88E1111), jumpers J29/J30/J64 in their GMII positions (docs/boards/).
    ("eth_clocks", 0,
        Subsignal("tx",  Pins("M28")),
        Subsignal("gtx", Pins("K30")),
        Subsignal("rx",  Pins("U27")),
        IOStandard("LVCMOS25")
    ),
    ("eth", 0,
        Subsignal("rst_n",   Pins("L20")),
        Subsignal("mdio",    Pins("J21")),
        Subsignal("mdc",     Pins("R23")),
        Subsignal("rx_dv",   Pins("R28")),
        Subsignal("rx_er",   Pins("V26")),
        Subsignal("rx_data", Pins("U30 U25 T25 U28 R19 T27 T26 T28")),
        Subsignal("tx_en",   Pins("M27")),
        Subsignal("tx_er",   Pins("N29")),
        Subsignal("tx_data", Pins("N27 N25 M29 L28 J26 K26 L30 J28")),
        IOStandard("LVCMOS25")
    ),
]


class Board:
    name         = "xilinx_kc705"
    description  = "Xilinx KC705, Kintex-7 325T, Marvell 88E1111 (GMII)"
    fpga         = "XC7K325T-2FFG900C"
    phy          = "GMII (88E1111)"
    link         = "1G"
    toolchains   = ["vivado", "yosys"]  # yosys: synth_xilinx check and resource estimate only.
    sys_clk_freq = 125e6
    uart_name    = "serial"
    eth_dw       = 8
    max_payload  = 8972  # Jumbo datagrams: the XC7K325T has the block RAM for them.
    is_sim       = False
    ptp_phy      = "gmii"
    constrains_eth_clocks = True  # boards/xdc.py
    loader       = ["--board", "kc705"]  # The on-board Digilent USB-JTAG module (U59, micro-USB J2).

    @staticmethod
    def platform(toolchain="vivado"):
        return S7BoardPlatform("xc7k325t-ffg900-2", _io, "clk200", 200e6, toolchain=toolchain, commands=[
            "set_property CFGBVS VCCO [current_design]",
            "set_property CONFIG_VOLTAGE 2.5 [current_design]",
        ])

    @staticmethod
    def crg(platform, sys_clk_freq):
        return S7CRG(platform, sys_clk_freq, rst_name="cpu_reset", speedgrade=-2)

    @staticmethod
    def ethphy(platform):
        clock_pads = platform.request("eth_clocks", 0)
        pads       = platform.request("eth", 0)
        xdc.gmii(platform, clock_pads, pads)
        return LiteEthPHYGMII(clock_pads=clock_pads, pads=pads)
