#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Great Scott Gadgets ButterStick r1.0: ECP5-5G LFE5UM5G-85F-8BG381C, Microchip KSZ9031RNX
RGMII PHY.

Pins from litex-boards (platforms/gsd_butterstick.py). Untested on hardware by this project: we
have no board here; bitstreams are built and timed only. The board has no UART: the console and
the PTP outputs go to SYZYGY port 0, whose I/O voltage is set on the board (docs/boards/).
"""

from migen import *

from litex.build.generic_platform import IOStandard, Misc, Pins, Subsignal

from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII

from ethdaq.boards.crg import ECP5CRG
from ethdaq.boards.platform import ECP5BoardPlatform

_io = [
    ("clk30",     0, Pins("B12"), IOStandard("LVCMOS33")),
    ("user_btn_n", 0, Pins("U16"), IOStandard("SSTL135_I")),
    # SYZYGY0 S0 (console TX), S1 (console RX), S2 (PTP pulse per second), S3 (PTP periodic).
    ("serial", 0,
        Subsignal("tx", Pins("G2")),
        Subsignal("rx", Pins("J3")),
        IOStandard("LVCMOS33")
    ),
    ("ptp_pps",      0, Pins("F1"), IOStandard("LVCMOS33")),
    ("ptp_periodic", 0, Pins("K3"), IOStandard("LVCMOS33")),
    # RGMII Ethernet (KSZ9031RNX).
    ("eth_clocks", 0,
        Subsignal("tx", Pins("E15")),
        Subsignal("rx", Pins("D11")),
        IOStandard("LVCMOS33"),
        Misc("SLEWRATE=FAST"),
    ),
    ("eth", 0,
        Subsignal("rst_n",   Pins("B20")),
        Subsignal("mdio",    Pins("D16")),
        Subsignal("mdc",     Pins("A19")),
        Subsignal("rx_data", Pins("A16 C17 B17 A17")),
        Subsignal("tx_ctl",  Pins("D15")),
        Subsignal("rx_ctl",  Pins("B18")),
        Subsignal("tx_data", Pins("C15 B16 A18 B19")),
        IOStandard("LVCMOS33"),
        Misc("SLEWRATE=FAST")
    ),
]


class Board:
    name         = "gsd_butterstick"
    description  = "GSG ButterStick r1.0, ECP5-85F, Microchip KSZ9031RNX"
    fpga         = "LFE5UM5G-85F-8BG381C"
    phy          = "RGMII (KSZ9031RNX)"
    link         = "1G"
    toolchains   = ["trellis"]
    sys_clk_freq = 60e6
    uart_name    = "serial"
    eth_dw       = 8
    max_payload  = 1472
    is_sim       = False
    ptp_phy      = "ecp5rgmii"
    # The ButterStick's USB DFU bootloader (VID:PID 1209:5af1, alternate setting 0, as in
    # litex-boards' DFU programmer for this board). Unverified here: no board.
    loader       = ["--dfu", "--vid", "0x1209", "--pid", "0x5af1", "--altsetting", "0"]

    @staticmethod
    def platform(toolchain="trellis"):
        return ECP5BoardPlatform("LFE5UM5G-85F-8BG381C", _io, "clk30", 30e6, toolchain=toolchain)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return ECP5CRG(platform, sys_clk_freq, rst_n_name="user_btn_n")

    @staticmethod
    def ethphy(platform):
        # RGMII delays: the KSZ9031RNX delays RXC itself (its power-on 1.2 ns skew setting, which
        # litex-boards' ButterStick target relies on); the FPGA delays TXC by 2 ns (DELAYG).
        return LiteEthPHYRGMII(
            clock_pads = platform.request("eth_clocks", 0),
            pads       = platform.request("eth", 0),
            tx_delay   = 2e-9,
            rx_delay   = 0e-9,
        )
