#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Colorlight 5A-75B v8.0: Lattice ECP5 LFE5U-25F-6BG256C, two Realtek RTL8211FD RGMII PHYs.

Pins from litex-boards (platforms/colorlight_5a_75b.py, revision 8.0). Untested on hardware by
this project: we have no board here; bitstreams are built and timed only. The board has no JTAG
header (pads J27 on the edge) and no USB: load through an external JTAG adapter (docs/boards/).
"""

from migen import *

from litex.build.generic_platform import IOStandard, Pins, Subsignal

from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII

from ethdaq.boards.crg import ECP5CRG
from ethdaq.boards.platform import ECP5BoardPlatform

_io = [
    ("clk25", 0, Pins("P6"), IOStandard("LVCMOS33")),
    # The console shares the only LED (TX) and the only button (RX), as in litex-boards.
    ("serial", 0,
        Subsignal("tx", Pins("T6")),
        Subsignal("rx", Pins("R7")),
        IOStandard("LVCMOS33")
    ),
    # PTP pulse per second and periodic output on HUB75 connector J1, pins 1 and 2 (outputs
    # through the board's 74HC245 buffers).
    ("ptp_pps",      0, Pins("C4"), IOStandard("LVCMOS33")),
    ("ptp_periodic", 0, Pins("D4"), IOStandard("LVCMOS33")),
    # RGMII Ethernet (RTL8211FD). PHY 0 is the port next to the power connector. No reset pin.
    ("eth_clocks", 0,
        Subsignal("tx", Pins("L1")),
        Subsignal("rx", Pins("J1")),
        IOStandard("LVCMOS33")
    ),
    ("eth", 0,
        Subsignal("mdio",    Pins("T4")),
        Subsignal("mdc",     Pins("R5")),
        Subsignal("rx_ctl",  Pins("J2")),
        Subsignal("rx_data", Pins("K2 J3 K1 K3")),
        Subsignal("tx_ctl",  Pins("L2")),
        Subsignal("tx_data", Pins("M2 M1 P1 R1")),
        IOStandard("LVCMOS33")
    ),
]

# Expansion connectors (for front-ends' pins, docs/frontends.md): the eight HUB75 ports J1 to J8,
# from litex-boards (platforms/colorlight_5a_75b.py, _connectors_v8_0, after chubby75's
# 5a-75b/hardware_V8.0.md; amaranth-boards' colorlight_5a_75b_r8 lists the same pins). Pins 0 to
# 15 are HUB75 pins 1 to 16; "-" is ground. Every pin is an output through the board's 74HC245
# buffers (5 V): inputs need the buffers bypassed. Pins 7 to 14 (the panel's address, clock,
# latch and enable lines) are the same FPGA pins on every port: each can be asked for once, on
# any port. LVCMOS33. Untested on hardware by this project.
_connectors = [
    ("j1", "C4  D4  E4  - D3  F5  E3  N4 N5 N3 P3 P4 M3 N1 M4 -"),  # Pins 0 and 1: PTP outputs (above).
    ("j2", "F1  F2  G2  - G1  H2  H3  N4 N5 N3 P3 P4 M3 N1 M4 -"),
    ("j3", "B1  C2  C1  - D1  E2  E1  N4 N5 N3 P3 P4 M3 N1 M4 -"),
    ("j4", "P5  R3  P2  - R2  T2  N6  N4 N5 N3 P3 P4 M3 N1 M4 -"),
    ("j5", "T13 R12 R13 - R14 T14 P12 N4 N5 N3 P3 P4 M3 N1 M4 -"),
    ("j6", "R15 T15 P13 - P14 N14 H15 N4 N5 N3 P3 P4 M3 N1 M4 -"),
    ("j7", "G16 H14 G15 - F15 F16 E16 N4 N5 N3 P3 P4 M3 N1 M4 -"),
    ("j8", "D16 E15 C16 - B16 C15 B15 N4 N5 N3 P3 P4 M3 N1 M4 -"),
]


class Board:
    name         = "colorlight_5a_75b"
    description  = "Colorlight 5A-75B v8.0, ECP5-25F, 2x Realtek RTL8211FD"
    fpga         = "LFE5U-25F-6BG256C"
    phy          = "RGMII (RTL8211FD)"
    link         = "1G"
    toolchains   = ["trellis"]
    sys_clk_freq = 60e6
    uart_name    = "serial"
    eth_dw       = 8
    max_payload  = 1472  # As colorlight_i5: the same ECP5-25F block RAM.
    is_sim       = False
    ptp_phy      = "ecp5rgmii"
    loader       = ["--cable", "ft232"]  # Any openFPGALoader JTAG cable wired to J27; --cable overrides.

    @staticmethod
    def platform(toolchain="trellis"):
        return ECP5BoardPlatform("LFE5U-25F-6BG256C", _io, "clk25", 25e6, toolchain=toolchain, connectors=_connectors)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return ECP5CRG(platform, sys_clk_freq)

    @staticmethod
    def ethphy(platform):
        # RGMII delays: the RTL8211FD on this board is strapped to delay TXC by 2 ns itself
        # (litex-boards' 5A-75x target also adds none); the FPGA delays the received data 2 ns.
        return LiteEthPHYRGMII(
            clock_pads = platform.request("eth_clocks", 0),
            pads       = platform.request("eth", 0),
            tx_delay   = 0e-9,
            rx_delay   = 2e-9,
        )
