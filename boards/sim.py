#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The simulated board: Verilator, with the Ethernet PHY modelled at GMII level.

The `ethdaq_gmii` simulation module (gateware/simmodules/, derived from LiteX's `gmii_ethernet`)
drives the GMII pins with preamble, SFD and FCS and checks them on transmit; it bridges frames
to a Linux tap interface, taking them from the tap no faster than the wire carries them, with
the inter-frame gap (gateware/simphy.py). It clocks GMII from sys_clk, so the simulated sys
clock is the 125 MHz GMII clock.
"""

from migen import *

from litex.gen import *

from litex.build.generic_platform import Pins, Subsignal
from litex.build.sim import SimPlatform
from litex.build.sim.config import SimConfig

from ethdaq.gateware.simphy import SIM_MODULES, TAP_MODULE, SimPHY

_io = [
    ("sys_clk", 0, Pins(1)),
    ("sys_rst", 0, Pins(1)),
    ("serial", 0,
        Subsignal("source_valid", Pins(1)),
        Subsignal("source_ready", Pins(1)),
        Subsignal("source_data",  Pins(8)),
        Subsignal("sink_valid",   Pins(1)),
        Subsignal("sink_ready",   Pins(1)),
        Subsignal("sink_data",    Pins(8)),
    ),
    ("gmii_eth", 0,
        Subsignal("rx_data", Pins(8)),
        Subsignal("rx_dv",   Pins(1)),
        Subsignal("rx_er",   Pins(1)),
        Subsignal("tx_data", Pins(8)),
        Subsignal("tx_en",   Pins(1)),
        Subsignal("tx_er",   Pins(1)),
    ),
    # Testbench pins of the PTP clock (DAQSoC with_ptp_testbench; bench/ptp2.py): its time (ground
    # truth) and the oscillator error to model, signed, 2^-F ns per cycle.
    ("ptp_time_ns",   0, Pins(64)),
    ("ptp_osc_error", 0, Pins(32)),
]


class _CRG(LiteXModule):
    """soft_rst (the watchdog's, boards/crg.py) resets the whole design: sys and the GMII model's
    eth_rx and eth_tx, which run on sys_clk and have no reset of their own. A power-on reset holds
    them in reset for the first cycle, as PLL lock does on the FPGA boards (boards/crg.py):
    nothing drives the simulation's sys_rst, and a core whose registers have no initial value (a
    CPU's fetch state, say) starts only from its reset."""
    def __init__(self, platform):
        self.soft_rst = Signal()
        self.cd_sys   = ClockDomain()

        # # #

        rst = Signal()
        por = Signal(reset=1, reset_less=True)
        self.sync += por.eq(0)
        self.comb += [
            rst.eq(por | platform.request("sys_rst") | self.soft_rst),
            self.cd_sys.clk.eq(platform.request("sys_clk")),
            self.cd_sys.rst.eq(rst),
            ResetSignal("eth_rx").eq(rst),
            ResetSignal("eth_tx").eq(rst),
        ]


class Board:
    name         = "sim"
    description  = "Simulated board (Verilator), GMII PHY model bridged to a Linux tap"
    fpga         = "Verilator"
    phy          = "GMII model"
    link         = "1G"
    toolchains   = ["verilator"]
    sys_clk_freq = 125e6  # The GMII model clocks eth_rx/eth_tx from sys_clk.
    uart_name    = "sim"
    eth_dw       = 8
    # Jumbo datagrams, up to what the tap module passes to Linux: it drops frames of more than
    # 9000 bytes with FCS (as LiteX's ETH_LEN), i.e. UDP payloads above 8954. bench/ measures 8972 at the pins.
    max_payload  = 8954
    is_sim       = True
    # PTP intervals (log2 s of simulated time): the simulation runs about 1000x slower than real
    # time, so ptp4l's defaults (1 s Sync, 2 s Announce) would take many minutes per message.
    ptp_log_sync      = -7
    ptp_log_announce  = -7
    ptp_log_delay_req = -7
    ptp_status_log    = -6
    # DHCP lease seconds per simulated second (--dhcp): a lease second is 1 ms of simulated time,
    # about a second of wall-clock time at the simulation's speed (hardware boards: 1).
    dhcp_time_scale   = 1000
    ptp_phy      = "gmii"  # gateware/tsu.py PHY_FPGA_LATENCY_CYCLES: timestamp corrections
    # The simulation runs ~250x slower than real time while Linux answers ARP at once, so the
    # data path's ARP timeouts are scaled down (hardware boards use 100 ms x 3, then every 1 s)
    # for an unanswered destination to be reported within seconds of wall-clock time.
    arp_timeout        = 0.5e-3
    arp_retry_interval = 5e-3
    # Watchdog timeout in simulated seconds (hardware boards: 1 s): short, so that a firmware that
    # stops feeding it resets within seconds of wall-clock time and the tests see it.
    watchdog_timeout   = 10e-3
    # How often the firmware looks at the PHY's link, in simulated seconds (hardware boards:
    # 100 ms); the simulated cable is read every ~1 ms (gateware/simphy.py). Not shorter: the
    # VexRiscv "minimal" (no caches) takes thousands of cycles to clock 16 MDIO bits, and a look
    # reads BMSR twice (10 such steps): at 2 ms the control requests' mean latency rose by half
    # (bench/ctllatency.py: IDENTIFY 19,979 -> 30,018 cycles).
    phy_poll_interval  = 10e-3
    # Simulation modules of our own, built beside LiteX's (soc/build.py): the tap's wire.
    sim_modules  = SIM_MODULES

    @staticmethod
    def platform(toolchain=None):
        return SimPlatform("SIM", _io)

    @staticmethod
    def crg(platform, sys_clk_freq):
        return _CRG(platform)

    @staticmethod
    def ethphy(platform):
        # LiteX's GMII model behind a cable tests can unplug, with a clause 22 PHY on MDIO.
        return SimPHY(platform, platform.request("gmii_eth"))

    @staticmethod
    def sim_config(sys_clk_freq, tap, host_ip):
        config = SimConfig()
        config.add_clocker("sys_clk", freq_hz=int(sys_clk_freq))
        config.add_module("serial2console", "serial")
        config.add_module(TAP_MODULE, "gmii_eth", args={"interface": tap, "ip": host_ip})
        return config
