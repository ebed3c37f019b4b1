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
        return S7BoardPlatform("xc7a200t-sbg484-1", _io, "clk100", 100e6, toolchain=toolchain)

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
