#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The simulated 10G board: Verilator, with the Ethernet PHY modelled at XGMII level.

The PHY is gateware/xgmiiphy.py's (ethdaq's XGMII transmitter, LiteEth's XGMII receiver) on the
64-bit XGMII pins, clocked at 156.25 MHz by a clock of its own; sys runs at 125 MHz, as on the
simulated 1G board, and LiteEth's datapath is 64 bits wide in sys (eth_dw=64). The `ethdaq_xgmii`
simulation module (gateware/simmodules/) bridges the pins to a Linux tap: it checks /S/, preamble,
SFD and FCS of what the board sends and puts what Linux sends on the pins with the standard gap,
no faster than 10 Gb/s.

Not modelled here, unlike the 1G board: a PHY chip on MDIO, the cable, the frame injector and the
pin probes.
"""

from migen import *

from litex.gen import *

from litex.build.generic_platform import Pins, Subsignal
from litex.build.sim import SimPlatform
from litex.build.sim.config import SimConfig

from ethdaq.boards import sim
from ethdaq.gateware.simphy import SIM_MODULES_10G, XGMII_TAP_MODULE
from ethdaq.gateware.xgmiiphy import XGMII_CLK_FREQ, XGMIIPHY

# The 1G board's clock, reset and console; a clock for the PHY and the XGMII pins.
_io = [io for io in sim._io if io[0] in ("sys_clk", "sys_rst", "serial")] + [
    ("eth_clk", 0, Pins(1)),
    ("xgmii_eth", 0,
        Subsignal("rx_data", Pins(64)),
        Subsignal("rx_ctl",  Pins(8)),
        Subsignal("tx_data", Pins(64)),
        Subsignal("tx_ctl",  Pins(8)),
    ),
]


class Board(sim.Board):
    name         = "sim10g"
    description  = "Simulated 10G board (Verilator), XGMII PHY model bridged to a Linux tap"
    phy          = "XGMII model"
    link         = "10G"
    eth_dw       = 64
    phy_dw       = 64
    ptp_phy      = "xgmii"   # gateware/tsu.py PHY_FPGA_LATENCY_CYCLES
    eth_clk_freq = XGMII_CLK_FREQ
    sim_modules  = SIM_MODULES_10G

    @staticmethod
    def platform(toolchain=None):
        return SimPlatform("SIM", _io)

    @staticmethod
    def crg(platform, sys_clk_freq):
        # sim's: soft_rst resets sys and the PHY's eth_rx and eth_tx (clocked by eth_clk).
        return sim._CRG(platform)

    @staticmethod
    def ethphy(platform):
        return XGMIIPHY(platform.request("xgmii_eth"), platform.request("eth_clk"))

    @classmethod
    def sim_config(cls, sys_clk_freq, tap, host_ip):
        config = SimConfig()
        config.add_clocker("sys_clk", freq_hz=int(sys_clk_freq))
        config.add_clocker("eth_clk", freq_hz=int(cls.eth_clk_freq))
        config.add_module("serial2console", "serial")
        config.add_module(XGMII_TAP_MODULE, "xgmii_eth", clocks="eth_clk", args={"interface": tap, "ip": host_ip})
        return config
