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

# Expansion connectors (for front-ends' pins, docs/frontends.md): the three SYZYGY ports, from
# litex-boards (platforms/gsd_butterstick.py, _connectors_r1_0). Single-ended pins S0 to S31 (S0
# to S9 on the transceiver port SYZYGY2), the same FPGA pins again by their differential pair
# names (D0P, D0N...), and the clock pairs; SYZYGY2's transceiver lanes and reference clock are
# left out (transceivers, not general I/O). Each port's I/O voltage is set on the board
# (docs/boards/): the I/O standard must match it. SYZYGY0 S0 to S3 are the console and the PTP
# outputs (above). Untested on hardware by this project.
_connectors = [
    ("SYZYGY0", {
        # Single ended
        "S0":  "G2", "S1":  "J3", "S2":  "F1", "S3":  "K3",
        "S4":  "J4", "S5":  "K2", "S6":  "J5", "S7":  "J1",
        "S8":  "N2", "S9":  "L3", "S10": "M1", "S11": "L2",
        "S12": "N3", "S13": "N4", "S14": "M3", "S15": "P5",
        "S16": "H1", "S17": "K5", "S18": "K4", "S19": "K1",
        "S20": "L4", "S21": "L1", "S22": "L5", "S23": "M4",
        "S24": "N1", "S25": "N5", "S26": "P3", "S27": "P4",
        "S28": "H2", "S29": "P1", "S30": "G1", "S31": "P2",
        # Differential
        "D0P": "G2", "D0N": "F1", "D1P": "J3", "D1N": "K3",
        "D2P": "J4", "D2N": "J5", "D3P": "K2", "D3N": "J1",
        "D4P": "N2", "D4N": "M1", "D5P": "L3", "D5N": "L2",
        "D6P": "N3", "D6N": "M3", "D7P": "N4", "D7N": "P5",
        # Clocks
        "P2C_CLKP": "H2", "P2C_CLKN": "G1", "C2P_CLKP": "P1", "C2P_CLKN": "P2",
    }),
    ("SYZYGY1", {
        # Single ended
        "S0":  "E4", "S1":  "A4", "S2":  "D5", "S3":  "A5",
        "S4":  "C4", "S5":  "B2", "S6":  "B4", "S7":  "C2",
        "S8":  "A2", "S9":  "C1", "S10": "B1", "S11": "D1",
        "S12": "F4", "S13": "D2", "S14": "E3", "S15": "E1",
        "S16": "B5", "S17": "E5", "S18": "F5", "S19": "C5",
        "S20": "B3", "S21": "A3", "S22": "D3", "S23": "C3",
        "S24": "H5", "S25": "G5", "S26": "H3", "S27": "H4",
        "S28": "G3", "S29": "F2", "S30": "F3", "S31": "E2",
        # Differential
        "D0P": "E4", "D0N": "D5", "D1P": "A4", "D1N": "A5",
        "D2P": "C4", "D2N": "B4", "D3P": "B2", "D3N": "C2",
        "D4P": "A2", "D4N": "B1", "D5P": "C1", "D5N": "D1",
        "D6P": "F4", "D6N": "E3", "D7P": "D2", "D7N": "E1",
        # Clocks
        "P2C_CLKP": "F2", "P2C_CLKN": "E2", "C2P_CLKP": "G3", "C2P_CLKN": "F3",
    }),
    ("SYZYGY2", {
        # Single ended
        "S0": "C11", "S1": "B11", "S2": "D6",  "S3": "D7", "S4": "E6",
        "S5": "E7",  "S6": "D8",  "S7": "E8",  "S8": "E10", "S9": "D10",
        # Clocks
        "P2C_CLKP": "A10", "P2C_CLKN": "A11", "C2P_CLKP": "A9", "C2P_CLKN": "B10",
    }),
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
        return ECP5BoardPlatform("LFE5UM5G-85F-8BG381C", _io, "clk30", 30e6, toolchain=toolchain,
                                 connectors=_connectors)

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
