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

# Expansion connectors (for front-ends' pins, docs/frontends.md), from litex-boards
# (platforms/digilent_arty.py, _connectors): the Pmod headers JA to JD (pins 0 to 3 are Pmod pins
# 1 to 4, pins 4 to 7 are Pmod pins 7 to 10; JB and JC are the high-speed ones, without series
# resistors) and the Arduino/chipKIT shield headers as digital I/O (the analogue header's pins
# as ck_a0 to ck_a5). All 3.3 V: LVCMOS33. Untested on hardware by this project.
_connectors = [
    ("pmoda", "G13 B11 A11 D12 D13 B18 A18 K16"),  # Pins 0 and 1: the PTP outputs (above).
    ("pmodb", "E15 E16 D15 C15 J17 J18 K15 J15"),
    ("pmodc", "U12 V12 V10 V11 U14 V14 T13 U13"),
    ("pmodd", "D4 D3 F4 F3 E2 D2 H2 G2"),
    ("ck_io", {
        "ck_ioa": "M17",
        # Outer digital header
        "ck_io0":  "V15", "ck_io1":  "U16", "ck_io2":  "P14", "ck_io3":  "T11",
        "ck_io4":  "R12", "ck_io5":  "T14", "ck_io6":  "T15", "ck_io7":  "T16",
        "ck_io8":  "N15", "ck_io9":  "M16", "ck_io10": "V17", "ck_io11": "U18",
        "ck_io12": "R17", "ck_io13": "P17",
        # Inner digital header
        "ck_io26": "U11", "ck_io27": "V16", "ck_io28": "M13", "ck_io29": "R10",
        "ck_io30": "R11", "ck_io31": "R13", "ck_io32": "R15", "ck_io33": "P15",
        "ck_io34": "R16", "ck_io35": "N16", "ck_io36": "N14", "ck_io37": "U17",
        "ck_io38": "T18", "ck_io39": "R18", "ck_io40": "P18", "ck_io41": "N17",
        # Outer analogue header as digital I/O
        "ck_a0": "F5", "ck_a1": "D8", "ck_a2": "C7", "ck_a3": "E7", "ck_a4": "D7", "ck_a5": "D5",
        # Inner analogue header as digital I/O
        "ck_io20": "B7", "ck_io21": "B6", "ck_io22": "E6", "ck_io23": "E5", "ck_io24": "A4", "ck_io25": "A3",
    }),
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
        return S7BoardPlatform("xc7a35ticsg324-1L", _io, "clk100", 100e6, toolchain=toolchain,
                               connectors=_connectors)

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
