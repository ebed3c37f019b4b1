#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Xilinx KCU116: Kintex UltraScale+ XCKU5P-2FFVB676E, 10GBASE-R on an SFP28 cage's GTY.

Pins from litex-boards (platforms/xilinx_kcu116.py, and its target's choice of cage and
reference clock); the cages and the GTY reference clock are described in the board's user guide
(UG1239). Untested on hardware by this project: no board and no Vivado here. Vivado builds it;
Yosys' synth_xilinx (-family xcup) checks the design and estimates resources in CI.

The PHY is gateware/uspgty10g.py: LiteEth's GTY transceiver (usp_gty_10g_baser) with ethdaq's
10GBASE-R PCS (gateware/baser.py) and XGMII transmitter; LiteEth's datapath is 64 bits wide in sys
(eth_dw=64). The SFP module needs a 10GBASE-R optic or a direct-attach cable; the cage's 25G rate
is not used. User LED 0 shows the PCS's block lock (a 10G signal received); the SFP module's
own status pins (LOS, presence) are not read.
"""

from migen import *

from litex.build.generic_platform import IOStandard, Pins, Subsignal

from ethdaq.boards.crg import USPCRG
from ethdaq.boards.platform import USPBoardPlatform
from ethdaq.gateware.uspgty10g import USPGTY10GPHY

_io = [
    # 125 MHz system clock (LVDS).
    ("clk125", 0,
        Subsignal("p", Pins("G12"), IOStandard("LVDS_25")),
        Subsignal("n", Pins("F12"), IOStandard("LVDS_25"))
    ),
    ("cpu_reset", 0, Pins("B9"), IOStandard("LVCMOS33")),
    ("user_led", 0, Pins("C9"),  IOStandard("LVCMOS33")),
    ("user_led", 1, Pins("D9"),  IOStandard("LVCMOS33")),
    ("user_led", 2, Pins("E10"), IOStandard("LVCMOS33")),
    ("user_led", 3, Pins("E11"), IOStandard("LVCMOS33")),
    ("user_led", 4, Pins("F9"),  IOStandard("LVCMOS33")),
    ("user_led", 5, Pins("F10"), IOStandard("LVCMOS33")),
    ("user_led", 6, Pins("G9"),  IOStandard("LVCMOS33")),
    ("user_led", 7, Pins("G10"), IOStandard("LVCMOS33")),
    # The CP2108 USB-UART's first port (micro-USB).
    ("serial", 0,
        Subsignal("tx", Pins("W13")),
        Subsignal("rx", Pins("W12")),
        IOStandard("LVCMOS33")
    ),
    # The GTY quad's reference clock (USER_MGT_CLK, MGTREFCLK pins: no I/O standard), 156.25 MHz.
    ("sfp_refclk", 0,
        Subsignal("p", Pins("M7")),
        Subsignal("n", Pins("M6"))
    ),
    # The SFP28 cage litex-boards' target uses for Ethernet (its sfp 1): GTY lane and the
    # module's transmitter enable (high: transmitting).
    ("sfp", 0,
        Subsignal("txp", Pins("L5")),
        Subsignal("txn", Pins("L4")),
        Subsignal("rxp", Pins("K2")),
        Subsignal("rxn", Pins("K1"))
    ),
    ("sfp_tx_disable_n", 0, Pins("AA14"), IOStandard("LVCMOS33")),
    # PTP pulse per second and periodic output on Pmod 0, pins 1 and 2.
    ("ptp_pps",      0, Pins("A14"), IOStandard("LVCMOS33")),
    ("ptp_periodic", 0, Pins("B15"), IOStandard("LVCMOS33")),
]


# Expansion connectors (for front-ends' pins, docs/frontends.md), from litex-boards
# (platforms/xilinx_kcu116.py, _connectors): the FMC HPC connector's user I/O (LA00 to LA22, the
# mezzanine clock CLK0_M2C and PG_M2C; its transceiver lanes and clocks are left out: transceivers,
# not general I/O) and the two Pmod headers (LVCMOS33). pmod0's first two pins are the SoC's PTP
# outputs. Untested on hardware by this project.
_connectors = [
    ("HPC", {
        "LA00_P_CC": "AD20",  "LA00_N_CC": "AE20",  "LA01_P_CC": "AC19",  "LA01_N_CC": "AD19",
        "LA02_P": "Y17",      "LA02_N": "AA17",     "LA03_P": "AB17",     "LA03_N": "AC17",
        "LA04_P": "AA20",     "LA04_N": "AB20",     "LA05_P": "AA19",     "LA05_N": "AB19",
        "LA06_P": "Y20",      "LA06_N": "Y21",      "LA07_P": "AD16",     "LA07_N": "AE16",
        "LA08_P": "AE17",     "LA08_N": "AF17",     "LA09_P": "AC18",     "LA09_N": "AD18",
        "LA10_P": "AF18",     "LA10_N": "AF19",     "LA11_P": "Y18",      "LA11_N": "AA18",
        "LA12_P": "AC22",     "LA12_N": "AC23",     "LA13_P": "AD23",     "LA13_N": "AE23",
        "LA14_P": "AE22",     "LA14_N": "AF22",     "LA15_P": "AB24",     "LA15_N": "AC24",
        "LA16_P": "AD24",     "LA16_N": "AD25",     "LA17_P_CC": "AD21",  "LA17_N_CC": "AE21",
        "LA18_P_CC": "AA22",  "LA18_N_CC": "AB22",  "LA19_P": "AC26",     "LA19_N": "AD26",
        "LA20_P": "AF24",     "LA20_N": "AF25",     "LA21_P": "AB25",     "LA21_N": "AB26",
        "LA22_P": "AE25",     "LA22_N": "AE26",     "CLK0_M2C_P": "AB21",  "CLK0_M2C_N": "AC21",
        "PG_M2C": "H13",
    }),
    ("pmod0", "A14 B15 A12 A13 B12 C12 C13 C14"),
    ("pmod1", "D13 D14 E12 E13 F13 F14 J14 J15"),
]


class Board:
    name         = "xilinx_kcu116"
    description  = "Xilinx KCU116, Kintex UltraScale+ KU5P, 10GBASE-R on SFP28 (GTY)"
    fpga         = "XCKU5P-2FFVB676E"
    phy          = "10GBASE-R (GTY, SFP28)"
    link         = "10G"
    toolchains   = ["vivado", "yosys"]  # yosys: synth_xilinx check and resource estimate only.
    sys_clk_freq = 125e6
    sys_clk_fixed = True  # The GTY's reset sequencer (LiteEth) is built for this sys clock.
    uart_name    = "serial"
    eth_dw       = 64
    phy_dw       = 64
    max_payload  = 8972  # Jumbo datagrams: the XCKU5P has the block RAM for them.
    is_sim       = False
    # The timestamps' PHY corrections are the XGMII pins' (gateware/tsu.py): the PCS's and the
    # transceiver's latency (gearbox, serialiser) is not in them yet.
    ptp_phy      = "xgmii"
    constrains_eth_clocks = True  # USPGTY10GPHY.add_constraints
    # openFPGALoader (Debian's) does not know the XCKU5P: `ethdaq load` says to use Vivado's
    # hardware manager (the board's USB-JTAG).
    loader       = None

    @staticmethod
    def platform(toolchain="vivado"):
        return USPBoardPlatform("xcku5p-ffvb676-2-e", _io, "clk125", 125e6, toolchain=toolchain, commands=[
            # LiteEth's GTY set-up trips this DRC (litex-boards' KCU116 target does the same).
            "set_property SEVERITY {{Warning}} [get_drc_checks REQP-1753]",
        ], connectors=_connectors)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return USPCRG(platform, sys_clk_freq, rst_name="cpu_reset", speedgrade=-2)

    @staticmethod
    def ethphy(platform):
        phy = USPGTY10GPHY(platform.request("sfp_refclk"), platform.request("sfp"),
                           sys_clk_freq=Board.sys_clk_freq)
        phy.add_constraints(platform)
        phy.comb += [
            platform.request("sfp_tx_disable_n").eq(1),
            platform.request("user_led", 0).eq(phy.rx_lock),
        ]
        return phy
