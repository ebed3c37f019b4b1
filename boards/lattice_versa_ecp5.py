#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Lattice ECP5 Versa (LFE5UM5G-45F-VERSA-EVN): ECP5-5G LFE5UM5G-45F-8BG381C, two Marvell
88E1512 RGMII PHYs.

Pins from litex-boards (platforms/lattice_versa_ecp5.py). Untested on hardware by this project:
we have no board here; bitstreams are built and timed only.
"""

from migen import *

from litex.build.generic_platform import IOStandard, Pins, Subsignal

from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII

from ethdaq.boards.crg import ECP5CRG
from ethdaq.boards.platform import ECP5BoardPlatform

_io = [
    ("clk100", 0, Pins("P3"), IOStandard("LVDS")),
    ("rst_n",  0, Pins("T1"), IOStandard("LVCMOS33")),
    # The FT2232H's second channel (USB, /dev/ttyUSB1).
    ("serial", 0,
        Subsignal("rx", Pins("C11"), IOStandard("LVCMOS33")),
        Subsignal("tx", Pins("A11"), IOStandard("LVCMOS33")),
    ),
    # RGMII Ethernet (88E1512), the connector labelled J5 ("PHY 0").
    ("eth_clocks", 0,
        Subsignal("tx", Pins("P19")),
        Subsignal("rx", Pins("L20")),
        IOStandard("LVCMOS25")
    ),
    ("eth", 0,
        Subsignal("rst_n",   Pins("U17")),
        Subsignal("mdio",    Pins("U18")),
        Subsignal("mdc",     Pins("T18")),
        Subsignal("rx_ctl",  Pins("U19")),
        Subsignal("rx_data", Pins("T20 U20 T19 R18")),
        Subsignal("tx_ctl",  Pins("R20")),
        Subsignal("tx_data", Pins("N19 N20 P18 P20")),
        IOStandard("LVCMOS25")
    ),
]

# Expansion connectors (for front-ends' pins, docs/frontends.md): header X3, from litex-boards
# (platforms/lattice_versa_ecp5.py, _connectors, where pin n is header pin n and "None" is power,
# ground or no connection; the EXPCON_IO29 to IO45 lines, pins 4 to 20). The Versa's other
# expansion headers are not in litex-boards' file and not here. LVCMOS33, as litex-boards'
# ECP5-hat extension on this header. Untested on hardware by this project.
_connectors = [
    ("X3",
        "None",  # (no pin 0)
        "None",  #  1 GND
        "None",  #  2 N/C
        "None",  #  3 +2V5
        "B19",   #  4 EXPCON_IO29
        "B12",   #  5 EXPCON_IO30
        "B9",    #  6 EXPCON_IO31
        "E6",    #  7 EXPCON_IO32
        "D6",    #  8 EXPCON_IO33
        "E7",    #  9 EXPCON_IO34
        "D7",    # 10 EXPCON_IO35
        "B11",   # 11 EXPCON_IO36
        "B6",    # 12 EXPCON_IO37
        "E9",    # 13 EXPCON_IO38
        "D9",    # 14 EXPCON_IO39
        "B8",    # 15 EXPCON_IO40
        "C8",    # 16 EXPCON_IO41
        "D8",    # 17 EXPCON_IO42
        "E8",    # 18 EXPCON_IO43
        "C7",    # 19 EXPCON_IO44
        "C6",    # 20 EXPCON_IO45
        *["None"]*20,  # 21 to 40: power, ground and the expansion clocks.
    ),
]


class Board:
    name         = "lattice_versa_ecp5"
    description  = "Lattice ECP5-5G Versa, ECP5-45F, 2x Marvell 88E1512"
    fpga         = "LFE5UM5G-45F-8BG381C"
    phy          = "RGMII (88E1512)"
    link         = "1G"
    toolchains   = ["trellis"]
    sys_clk_freq = 60e6
    uart_name    = "serial"
    eth_dw       = 8
    max_payload  = 1472
    is_sim       = False
    ptp_phy      = "ecp5rgmii"
    loader       = ["--cable", "ft2232"]  # The board's FT2232H (USB J2), channel A is JTAG.

    @staticmethod
    def platform(toolchain="trellis"):
        return ECP5BoardPlatform("LFE5UM5G-45F-8BG381C", _io, "clk100", 100e6, toolchain=toolchain,
                                 connectors=_connectors)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return ECP5CRG(platform, sys_clk_freq, rst_n_name="rst_n")

    @staticmethod
    def ethphy(platform):
        # RGMII delays: both in the 88E1512 (its RGMII-ID mode, as litex-boards' Versa target
        # assumes); the FPGA adds none.
        return LiteEthPHYRGMII(
            clock_pads = platform.request("eth_clocks", 0),
            pads       = platform.request("eth", 0),
            tx_delay   = 0e-9,
            rx_delay   = 0e-9,
        )
