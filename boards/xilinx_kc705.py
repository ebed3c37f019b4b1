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

# Expansion connectors (for front-ends' pins, docs/frontends.md), from litex-boards
# (platforms/xilinx_kc705.py, _connectors): the FMC HPC and LPC connectors' user I/O (LA00 to LA33,
# HPC also HA00 to HA23, the mezzanine clocks, PG_M2C and PRSNT_M2C_B); their transceiver lanes and
# clocks are left out (transceivers, not general I/O). The FMC I/O voltage is VADJ, 2.5 V as the
# board is delivered: LVCMOS25. Untested on hardware by this project.
_connectors = [
    ("HPC", {
        "CLK0_M2C_P":  "D27",  "CLK0_M2C_N":  "C27",  "CLK1_M2C_P":  "D17",  "CLK1_M2C_N":  "D18",
        "LA00_CC_P":   "C25",  "LA00_CC_N":   "B25",  "LA01_CC_P":   "D26",  "LA01_CC_N":   "C26",
        "LA02_P":      "H24",  "LA02_N":      "H25",  "LA03_P":      "H26",  "LA03_N":      "H27",
        "LA04_P":      "G28",  "LA04_N":      "F28",  "LA05_P":      "G29",  "LA05_N":      "F30",
        "LA06_P":      "H30",  "LA06_N":      "G30",  "LA07_P":      "E28",  "LA07_N":      "D28",
        "LA08_P":      "E29",  "LA08_N":      "E30",  "LA09_P":      "B30",  "LA09_N":      "A30",
        "LA10_P":      "D29",  "LA10_N":      "C30",  "LA11_P":      "G27",  "LA11_N":      "F27",
        "LA12_P":      "C29",  "LA12_N":      "B29",  "LA13_P":      "A25",  "LA13_N":      "A26",
        "LA14_P":      "B28",  "LA14_N":      "A28",  "LA15_P":      "C24",  "LA15_N":      "B24",
        "LA16_P":      "B27",  "LA16_N":      "A27",  "LA17_CC_P":   "F20",  "LA17_CC_N":   "E20",
        "LA18_CC_P":   "F21",  "LA18_CC_N":   "E21",  "LA19_P":      "G18",  "LA19_N":      "F18",
        "LA20_P":      "E19",  "LA20_N":      "D19",  "LA21_P":      "A20",  "LA21_N":      "A21",
        "LA22_P":      "C20",  "LA22_N":      "B20",  "LA23_P":      "B22",  "LA23_N":      "A22",
        "LA24_P":      "A16",  "LA24_N":      "A17",  "LA25_P":      "G17",  "LA25_N":      "F17",
        "LA26_P":      "B18",  "LA26_N":      "A18",  "LA27_P":      "C19",  "LA27_N":      "B19",
        "LA28_P":      "D16",  "LA28_N":      "C16",  "LA29_P":      "C17",  "LA29_N":      "B17",
        "LA30_P":      "D22",  "LA30_N":      "C22",  "LA31_P":      "G22",  "LA31_N":      "F22",
        "LA32_P":      "D21",  "LA32_N":      "C21",  "LA33_P":      "H21",  "LA33_N":      "H22",
        "HA00_CC_P":   "D12",  "HA00_CC_N":   "D13",  "HA01_CC_P":   "H14",  "HA01_CC_N":   "G14",
        "HA02_P":      "D11",  "HA02_N":      "C11",  "HA03_P":      "C12",  "HA03_N":      "B12",
        "HA04_P":      "F11",  "HA04_N":      "E11",  "HA05_P":      "F15",  "HA05_N":      "E16",
        "HA06_P":      "D14",  "HA06_N":      "C14",  "HA07_P":      "B14",  "HA07_N":      "A15",
        "HA08_P":      "E14",  "HA08_N":      "E15",  "HA09_P":      "F12",  "HA09_N":      "E13",
        "HA10_P":      "A11",  "HA10_N":      "A12",  "HA11_P":      "B13",  "HA11_N":      "A13",
        "HA12_P":      "C15",  "HA12_N":      "B15",  "HA13_P":      "L16",  "HA13_N":      "K16",
        "HA14_P":      "J16",  "HA14_N":      "H16",  "HA15_P":      "H15",  "HA15_N":      "G15",
        "HA16_P":      "L15",  "HA16_N":      "K15",  "HA17_CC_P":   "G13",  "HA17_CC_N":   "F13",
        "HA18_P":      "K14",  "HA18_N":      "J14",  "HA19_P":      "H11",  "HA19_N":      "H12",
        "HA20_P":      "K13",  "HA20_N":      "J13",  "HA21_P":      "J11",  "HA21_N":      "J12",
        "HA22_P":      "L11",  "HA22_N":      "K11",  "HA23_P":      "L12",  "HA23_N":      "L13",
        "PG_M2C":      "J29",  "PRSNT_M2C_B": "M20",
    }),
    ("LPC", {
        "CLK0_M2C_P":  "AF22", "CLK0_M2C_N":  "AG23", "CLK1_M2C_P":  "AG29", "CLK1_M2C_N":  "AH29",
        "LA00_CC_P":   "AD23", "LA00_CC_N":   "AE24", "LA01_CC_P":   "AE23", "LA01_CC_N":   "AF23",
        "LA02_P":      "AF20", "LA02_N":      "AF21", "LA03_P":      "AG20", "LA03_N":      "AH20",
        "LA04_P":      "AH21", "LA04_N":      "AJ21", "LA05_P":      "AG22", "LA05_N":      "AH22",
        "LA06_P":      "AK20", "LA06_N":      "AK21", "LA07_P":      "AG25", "LA07_N":      "AH25",
        "LA08_P":      "AJ22", "LA08_N":      "AJ23", "LA09_P":      "AK23", "LA09_N":      "AK24",
        "LA10_P":      "AJ24", "LA10_N":      "AK25", "LA11_P":      "AE25", "LA11_N":      "AF25",
        "LA12_P":      "AA20", "LA12_N":      "AB20", "LA13_P":      "AB24", "LA13_N":      "AC25",
        "LA14_P":      "AD21", "LA14_N":      "AE21", "LA15_P":      "AC24", "LA15_N":      "AD24",
        "LA16_P":      "AC22", "LA16_N":      "AD22", "LA17_CC_P":   "AB27", "LA17_CC_N":   "AC27",
        "LA18_CC_P":   "AD27", "LA18_CC_N":   "AD28", "LA19_P":      "AJ26", "LA19_N":      "AK26",
        "LA20_P":      "AF26", "LA20_N":      "AF27", "LA21_P":      "AG27", "LA21_N":      "AG28",
        "LA22_P":      "AJ27", "LA22_N":      "AK28", "LA23_P":      "AH26", "LA23_N":      "AH27",
        "LA24_P":      "AG30", "LA24_N":      "AH30", "LA25_P":      "AC26", "LA25_N":      "AD26",
        "LA26_P":      "AK29", "LA26_N":      "AK30", "LA27_P":      "AJ28", "LA27_N":      "AJ29",
        "LA28_P":      "AE30", "LA28_N":      "AF30", "LA29_P":      "AE28", "LA29_N":      "AF28",
        "LA30_P":      "AB29", "LA30_N":      "AB30", "LA31_P":      "AD29", "LA31_N":      "AE29",
        "LA32_P":      "Y30",  "LA32_N":      "AA30", "LA33_P":      "AC29", "LA33_N":      "AC30",
    }),
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
        ], connectors=_connectors)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return S7CRG(platform, sys_clk_freq, rst_name="cpu_reset", speedgrade=-2)

    @staticmethod
    def ethphy(platform):
        clock_pads = platform.request("eth_clocks", 0)
        pads       = platform.request("eth", 0)
        xdc.gmii(platform, clock_pads, pads)
        return LiteEthPHYGMII(clock_pads=clock_pads, pads=pads)
