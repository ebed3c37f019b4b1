#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""DAQSoC: the one SoC every board uses.

VexRiscv CPU running the C firmware from ROM, LiteEth hardware UDP/IP stack (ARP, ICMP, UDP) for
the data path, and a CPU UDP port on that same stack for the firmware's control port.

The SoC takes its options as one SoCConfig (soc/socconfig.py), checked there, and is assembled
in steps, as LiteX SoCs are: each `add_*` method adds one part, in the order the parts depend on
each other (and in which their signals and CSRs are named: the generated Verilog and the CSR map
follow it). The constants the firmware is compiled with (soc.h) are all added in one place,
add_firmware_constants.
"""

import ipaddress
from pathlib import Path

from migen import ClockDomainsRenamer, ClockSignal, If, Instance, Mux, Signal

from litex.build.generic_platform import ConstraintError
from litex.build.lattice import LatticeECP5Platform
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description, icmp_protocol
from liteeth.core import LiteEthUDPIPCore

from ethdaq.boards import BOARDS
from ethdaq.gateware.bustimeout import use_registered_timeout
from ethdaq.gateware.cpuport import CPUMACPort, CPUUDPPort, MACPortConverter, connect_udp_ports
from ethdaq.gateware.emulator import add_emulators
from ethdaq.gateware.eventcounters import EventCounters
from ethdaq.gateware.globalreset import promote_resets
from ethdaq.gateware.ipchecksum import replace_ip_checksums
from ethdaq.gateware.frontend import FrontendContext, declared_events, declared_rates, instantiate as instantiate_frontend
from ethdaq.gateware.classifier import FastTrackSink, RXClassifier, insert_classifier
from ethdaq.gateware.framegate import FrameGate, FrameGateCounters
from ethdaq.gateware.framecrossing import FrameCrossingCounters
from ethdaq.gateware.macpipeline import (drop_tx_framing, insert_ip_rx_buffer, insert_tx_buffer, replace_rx_cdc,
                                         replace_rx_crc, replace_tx_cdc, replace_tx_framing, space_rx_crc)
from ethdaq.gateware.macstats import MACErrors
from ethdaq.gateware.rxaudit import RXAudit, insert_rx_audit
from ethdaq.gateware.packetizer import byte_packetizers
from ethdaq.gateware.arptable import arp_tables
from ethdaq.gateware.icmpecho import ICMPEcho
from ethdaq.gateware.netaddr import NetAddress, route_ip_tx
from ethdaq.gateware.probe import DAQProbes, MAILBOX_CLASSES, RX_CLASSES, STAMP_BITS as PROBE_STAMP_BITS, TX_CLASSES
from ethdaq.gateware.streamer import DAQStreamer
from ethdaq.gateware.streamstats import COUNTER_BITS
from ethdaq.gateware.ptpclock import PTPClock, PTPClockCSR
from ethdaq.gateware.ptpparser import PTP_ETHERTYPE, PTP_IPV4_PDELAY, PTP_IPV4_PRIMARY
from ethdaq.gateware.tsu import (PHY_FPGA_LATENCY_CYCLES, TX_TAP_CYCLES, XGMII_LANE4_NS, PTPTimestamper,
                                 phy_corrections_ns, tap_phy)
from ethdaq.gateware.launcher import LATENCY_CYCLES as LAUNCHER_LATENCY_CYCLES, Launcher, guard_cycles
from ethdaq.gateware.txpath import TXPath, connect_streamer
from ethdaq.gateware.watchdog import Watchdog
from ethdaq.soc.socconfig import (CLASSIFIER_RULES, DHCP_CLIENT_PORT, ETHERBONE_WARNING, PTP_ROLES, PTP_TRANSPORTS,
                                  PTP_UDP_PORTS, SoCConfig, parse_allow)
from ethdaq.wire import daqformat, protocol

# Helpers ------------------------------------------------------------------------------------------

LINK_MBPS = {"1G": 1000, "100M": 100, "10G": 10000}  # Board.link

# Every clock must meet timing with this margin (10 %: 137.5 MHz for a 125 MHz PHY clock);
# boards the open toolchain builds are constrained at the nominal frequency times 1 + margin.
TIMING_MARGIN = 0.10

PTP_IP_GROUPS  = (PTP_IPV4_PRIMARY, PTP_IPV4_PDELAY)   # The IPv4 groups PTP over UDP is sent to.
PTP_TX_MAX     = 64    # Largest message the firmware sends: Announce (64 bytes).

# The UDP port the simulated board's launch probe (--pin-probe) watches on the transmit pins.
LAUNCH_PROBE_PORT = 9100

# Words of a 64-bit PHY's receive crossing into sys (add_ethernet_core): whole frames, so a
# burst of 1514-byte frames (191 words, a fifth of each left behind at 125 into 156.25 MHz) has
# room for several before one is dropped.
RX_CDC_WORDS_64 = 1024

# Time-triggered launcher: one frame of up to this many wire bytes (preamble to FCS; one DP16KD).
LAUNCHER_DEPTH = 2048


def mac_rx_domain(eth_dw):
    """The clock domain of LiteEth's MAC receive datapath behind its FCS checker, where the receive
    audit, classifier and frame gate go: the PHY's receive clock at 8 bits, sys at wider ones
    (LiteEthUDPIPCore with_sys_datapath, as add_ethernet_core builds it)."""
    return "eth_rx" if eth_dw == 8 else "sys"


def launcher_lead_cycles(ptp_phy):
    """eth_tx cycles from the launcher's fire decision to the first preamble byte on the PHY's
    pins, without the guard band (gateware/launcher.py)."""
    return LAUNCHER_LATENCY_CYCLES + TXPath.launch_cycles + PHY_FPGA_LATENCY_CYCLES[ptp_phy][0]


def verilog_source(name):
    """One of our Verilog modules (gateware/verilog/)."""
    return str(Path(__file__).resolve().parent.parent / "gateware" / "verilog" / name)

# DAQSoC -------------------------------------------------------------------------------------------

class DAQSoC(SoCCore):
    def check_bios_requirements(self):
        # There is no BIOS (our firmware boots from ROM, soc/build.py), and the firmware needs no
        # timer0; LiteX would refuse a SoC without one.
        if "rom" not in self.bus.regions or "sram" not in self.bus.regions:
            raise ValueError("the firmware needs the integrated ROM and SRAM")

    def add_csr_bridge(self, name="csr", origin=None, register=False):
        # LiteX registers the Wishbone-to-CSR bridge only in SoCs with SDRAM. Unregistered, the
        # CSR banks' address decode and every CSR's write enable hang combinationally off the
        # CPU's bus command through the arbiter and the decoder: sys's critical path on the
        # colorlight_i5 (the instruction bus's PC → a streamer CSR's clock enable, 9 LUT levels,
        # 12.6 ns of routing to CSRs all over the chip). Registered, an access takes a cycle
        # more; the firmware's CSR accesses are not on any path that counts cycles.
        SoCCore.add_csr_bridge(self, name=name, origin=origin, register=True)

    def __init__(soc, board, config=None, toolchain=None, **kwargs):
        """`board`: a board class (boards/); `config`: the build's options (SoCConfig(), its
        defaults, when None), checked and completed with the board's values here; `kwargs`:
        LiteX's SoCCore options."""
        # The first argument is not called `self` on purpose. Migen names each signal after the
        # frames that created it (migen/fhdl/tracer.py trace_back), and a frame with a `self` adds
        # a level to the name; this one has none, so what the add_* steps create is named as if
        # this constructor had created it itself, and the Verilog's names stay those of the parts.
        soc.board = board
        # (Not `config`: LiteX's SoC keeps its CONFIG_ constants there.)
        soc.soc_config = (config or SoCConfig()).resolve(board)
        soc.timing_margin = 0.0   # The clocks' constraints are nominal unless add_timing_constraints says otherwise.
        # The parts, in the order they depend on each other.
        soc.add_soc_core(toolchain, **kwargs)
        soc.add_watchdog()
        soc.add_ethernet_phy()
        soc.add_tx_path()
        soc.add_ethernet_core()
        soc.add_rx_chain()
        soc.add_timing_constraints()
        soc.add_pin_probes()
        soc.add_etherbone()
        soc.add_control_port()
        soc.add_ptp()
        soc.add_streamer()
        soc.add_probes()
        soc.add_event_counters()
        soc.add_firmware_constants()

    def add_soc_core(self, toolchain=None, **kwargs):
        # The board's platform and clocks, and LiteX's SoC: CPU, ROM, SRAM, UART, identifier.
        config, board = self.soc_config, self.board
        sys_clk_freq = config.sys_clk_freq
        platform = board.platform(toolchain) if toolchain else board.platform()
        self.crg = board.crg(platform, sys_clk_freq)

        options = (f"ip={ipaddress.IPv4Address(config.ip_address)} ctl={config.ctl_port} eth_dw={config.eth_dw} "
                   f"sys={sys_clk_freq/1e6:g}MHz")
        if config.with_dhcp:
            options += " dhcp"
        if config.with_etherbone:
            options += f" ETHERBONE=udp/{config.etherbone_port}"
        kwargs.setdefault("cpu_type",             "vexriscv")
        kwargs.setdefault("cpu_variant",          "minimal")
        kwargs.setdefault("integrated_rom_size",  0x10000)
        kwargs.setdefault("integrated_sram_size", 0x4000)
        kwargs.setdefault("uart_name",            board.uart_name)
        # No timer: the firmware's PTP service keeps its monotonic time from the PTP clock.
        kwargs.setdefault("with_timer",           False)
        # LiteX's SoC controller without its reset and scratch word (the watchdog resets and
        # reboots: add_watchdog); its bus errors are counted among the event counters.
        kwargs.setdefault("with_ctrl",            False)
        SoCCore.__init__(self, platform, sys_clk_freq,
            # No build date: the same sources give the same bitstream, and the git hash says which.
            ident         = f"ethdaq {board.name} {config.build_id} {options}",
            ident_version = False,
            **kwargs)
        self.add_controller("ctrl", with_reset=False, with_scratch=False, with_errors=True)
        # The bus timeout answers from a flip-flop, not from its counter's compare: that compare
        # fed the CPU's data bus acknowledge, the start of sys's critical path on the 25F-6 boards.
        use_registered_timeout(self.bus)

    def add_watchdog(self):
        # Watchdog and reboot (the control protocol's REBOOT): a soft reset of every domain, the
        # clocks running; why and how often it happened survive it (gateware/watchdog.py).
        self.watchdog = Watchdog(int(getattr(self.board, "watchdog_timeout", 1.0) * self.sys_clk_freq))
        self.comb += self.crg.soft_rst.eq(self.watchdog.reset)

    def add_ethernet_phy(self):
        # Ethernet: LiteEth's hardware UDP/IP stack (ARP, ICMP, the CPU's control port) and, beside
        # its MAC, the data path's canned-header transmit path (gateware/txpath.py).
        self.ethphy  = self.board.ethphy(self.platform)
        # ECP5: the domains' resets on global lines (gateware/globalreset.py); nextpnr routed each
        # through the fabric to thousands of flip-flops.
        self.global_resets = []
        if isinstance(self.platform, LatticeECP5Platform):
            for crg in (self.crg, getattr(self.ethphy, "crg", None)):
                if crg is not None:
                    self.global_resets += promote_resets(crg)

    def add_tx_path(self):
        config = self.soc_config
        # The board's addresses are the build's until the control protocol changes them
        # (gateware/netaddr.py): LiteEth's MAC filter, ARP and IP layers take them as signals.
        self.netaddr = NetAddress(config.ip_address, config.mac_address, netmask=config.netmask,
                                  gateway=config.gateway, cd_tx="eth_tx",
                                  cd_rx=mac_rx_domain(config.eth_dw) if (config.with_classifier or config.with_rx_audit) else None)
        # PTP hardware clock (sys): before the transmit path, whose time-triggered launcher reads it.
        self.ptp    = PTPClockCSR(PTPClock(self.sys_clk_freq, with_osc_error=config.with_ptp_testbench))
        # Time-triggered transmission (gateware/launcher.py): the highest transmit class.
        launcher = None
        if config.with_launcher:
            if self.ethphy.dw != 8:
                raise ValueError(f"the time-triggered launcher needs an 8-bit PHY for now, not {self.ethphy.dw}-bit")
            self.launcher = launcher = Launcher(self.ptp.clock, depth=LAUNCHER_DEPTH)
        self.txpath  = TXPath(self.ethphy, self.netaddr.mac_tx, self.netaddr.ip_tx, launcher=launcher)
        self.comb += [
            self.txpath.announce.eq(self.netaddr.announce),
            self.netaddr.announced.eq(self.txpath.announced),
        ]

    def add_ethernet_core(self):
        eth_dw = self.soc_config.eth_dw
        # At 8 bits its MAC, ARP, IPv4 and UDP headers are sent from their fields, without
        # LiteEth's shift registers (gateware/packetizer.py); its ARP table keeps its two
        # entries in registers (gateware/arptable.py).
        with byte_packetizers(), arp_tables():
            self.ethcore = LiteEthUDPIPCore(
                phy         = self.txpath.mac_phy,
                mac_address = self.netaddr.mac,
                ip_address  = self.netaddr.ip,
                clk_freq    = self.sys_clk_freq,
                dw          = eth_dw,
                with_sys_datapath = (eth_dw != 8),
                # At 8 bits pings are answered by ethdaq's ICMPEcho (below). LiteEth's default
                # 128-byte echo buffer silently drops pings with more than 128 bytes of payload;
                # 2048 answers every ping up to the 1500-byte MTU.
                with_icmp       = (eth_dw != 8),
                icmp_fifo_depth = 2048,
            )
        if eth_dw == 8:
            # Pings answered from one block RAM of whole messages (gateware/icmpecho.py).
            self.icmp_echo = ICMPEcho(depth=2048)
            port = self.ethcore.ip.crossbar.get_port(icmp_protocol, eth_dw)
            self.comb += [self.icmp_echo.source.connect(port.sink), port.source.connect(self.icmp_echo.sink)]
        if getattr(self.ethphy, "tx_framing", False):
            # The PHY makes the preamble and FCS (gateware/xgmiiphy.py).
            drop_tx_framing(self.ethcore.mac.core)
        if eth_dw == 64:
            # A 64-bit PHY's frames cross into sys (125 MHz on the 10G boards) slower than the PHY
            # delivers them (156.25 MHz), and its receiver does not wait: the crossing takes whole
            # frames and drops, counted, those that find no room (gateware/framecrossing.py).
            self.eth_rx_crossing = replace_rx_cdc(self.ethcore.mac.core, RX_CDC_WORDS_64)
            self.eth_rx_crossing_counters = FrameCrossingCounters(self.eth_rx_crossing, "eth_rx")
            # Frames leave the receive crossing back to back; LiteEth's 64-bit FCS checker needs
            # two cycles between them (gateware/framespacer.py).
            self.eth_rx_spacer = space_rx_crc(self.ethcore.mac.core, mac_rx_domain(eth_dw))
        # LiteEth's receive path is combinational in `ready` from the ICMP/UDP layers back into
        # the MAC's clock-crossing FIFO (its AsyncFIFOBuffered reads on ready in the same cycle):
        # on ECP5 that chain alone is a 17 ns sys path. A buffer with registered
        # valid and ready at the MAC core's output, the first element in sys, cuts it there.
        # The MAC's receive error counts, which LiteEth builds but does not export.
        self.eth_errors = MACErrors(self.ethcore.mac.core)
        rx_pipeline = self.ethcore.mac.core.rx_datapath.pipeline
        self.eth_rx_buffer = stream.Buffer(eth_phy_description(eth_dw), pipe_valid=True, pipe_ready=True)
        rx_pipeline.insert(len(rx_pipeline) - 1, self.eth_rx_buffer)
        # The rest of that chain, from LiteEth's UDP/ICMP layers to the MAC, cut at its middle.
        self.eth_ip_rx_buffer, cut = insert_ip_rx_buffer(self.ethcore.ip)
        self.comb += cut
        # Its IPv4 header checksums, one adder each instead of a pipeline (gateware/ipchecksum.py).
        replace_ip_checksums(self.ethcore.ip)
        # Off-subnet destinations of the CPU's datagrams go to the gateway's MAC (gateware/netaddr.py).
        route_ip_tx(self.ethcore.ip.tx, self.ethcore.arp.table, self.netaddr.ip, self.netaddr.netmask,
                    self.netaddr.gateway)
        if eth_dw == 8:   # LiteEth's transmit ready chain, cut after its crossing (gateware/macpipeline.py).
            self.eth_tx_buffer = insert_tx_buffer(self.ethcore.mac.core)
            self.eth_tx_cdc    = replace_tx_cdc(self.ethcore.mac.core)
            # Its padding, FCS and preamble inserters, in one registered stage (gateware/mactx.py).
            self.eth_tx_framing = replace_tx_framing(self.ethcore.mac.core)
            # Its FCS checker, judging from the CRC register (gateware/fcschecker.py).
            self.eth_rx_fcs    = replace_rx_crc(self.ethcore.mac.core)

    def add_rx_chain(self):
        # Receive classifier (off by default: the small ECP5 boards have little room left,
        # docs/liteeth-notes.md): rules matched right after the FCS checker and a fast-track sink
        # without the CPU. The receive audit before it judges and counts every frame;
        # the frame gate behind them lets only whole frames that both passed on to LiteEth.
        config = self.soc_config
        rx_pipeline = self.ethcore.mac.core.rx_datapath.pipeline
        cd_rx, dw = mac_rx_domain(config.eth_dw), config.eth_dw
        if config.with_classifier:
            self.classifier = RXClassifier(nrules=CLASSIFIER_RULES, payload_bytes=16, dw=dw, cd_rx=cd_rx)
            insert_classifier(self.ethcore.mac.core, self.classifier)
        if config.with_rx_audit:
            # Fast-track ports are not among them: a frame to one is the classifier's only while a
            # rule takes it (rules change at run time); the audit asks the classifier (`claimed`).
            udp = config.ptp_transport == "udp"
            udp_ports = (config.ctl_port, *(PTP_UDP_PORTS if udp else ()),
                         *((DHCP_CLIENT_PORT,) if config.with_dhcp else ()),
                         *((config.etherbone_port,) if config.with_etherbone else ()))
            self.rx_audit = RXAudit(dw=dw, cd_rx=cd_rx, max_frame=1514, udp_ports=udp_ports,
                ethertypes=(PTP_ETHERTYPE,) if not udp else (),
                ip_groups=PTP_IP_GROUPS if udp else (),
                netmask=config.netmask, ctl_port=config.ctl_port)
            self.comb += [self.rx_audit.mac.eq(self.netaddr.mac_rx), self.rx_audit.ip.eq(self.netaddr.ip_rx)]
            insert_rx_audit(self.ethcore.mac.core, self.rx_audit)
        if config.with_classifier or config.with_rx_audit:
            self.rx_gate    = ClockDomainsRenamer(cd_rx)(FrameGate(dw=dw))
            last = self.classifier if config.with_classifier else self.rx_audit
            rx_pipeline.insert(rx_pipeline.index(last) + 1, self.rx_gate)
            # Without the classifier (whose RULES report them) the audit's counts say why frames
            # were flagged: the gate counts only its own drops for want of room.
            self.rx_gate_counters = FrameGateCounters(self.rx_gate, cd=cd_rx,
                with_error=config.with_classifier, with_oversize=config.with_classifier)
        if config.with_classifier:
            self.fasttrack = FastTrackSink(self.classifier.fasttrack, cd_rx=cd_rx)
            if config.with_rx_audit:
                self.comb += self.rx_audit.claimed.eq(self.classifier.takes)
            self.comb += self.classifier.mac.eq(self.netaddr.mac_rx)

    def add_timing_constraints(self):
        if self.board.is_sim:
            return
        platform = self.platform
        eth_rx_clk = getattr(self.ethphy, "crg", self.ethphy).cd_eth_rx.clk
        eth_tx_clk = getattr(self.ethphy, "crg", self.ethphy).cd_eth_tx.clk
        # Xilinx boards constrain the PHY's clock pins themselves (boards/xdc.py: the I/O
        # delays refer to them; Vivado derives the clocks behind the buffers and PLLs).
        if not getattr(self.board, "constrains_eth_clocks", False):
            # The open toolchain is asked for the margin, not the nominal frequency: nextpnr's
            # placer and router weigh each path by its slack against the constraint, so a
            # clock constrained at its nominal frequency stops improving as soon as it
            # passes, and sys (60 MHz) would not be worked on at all while it had 1 %.
            # build.py's summary reports against the nominal frequency (TIMING_MARGIN).
            self.timing_margin = TIMING_MARGIN
            k = 1 + TIMING_MARGIN
            platform.add_period_constraint(eth_rx_clk, 1e9/(k*self.ethphy.rx_clk_freq))
            platform.add_period_constraint(eth_tx_clk, 1e9/(k*self.ethphy.tx_clk_freq))
            # sys comes out of the PLL: nextpnr would derive its 60 MHz from the oscillator's
            # constraint; one on the net itself (not a port, as LiteX writes) takes precedence.
            platform.add_platform_command('FREQUENCY NET "{clk}" ' + f"{k*self.sys_clk_freq/1e6:.3f} MHz;",
                                          clk=self.crg.cd_sys.clk)
        platform.add_false_path_constraints(self.crg.cd_sys.clk, eth_rx_clk, eth_tx_clk)

    def add_pin_probes(self):
        config, platform = self.soc_config, self.platform
        if not config.with_pin_probe:
            return
        # The control port's frames at the GMII pins, in cycles, on the console
        # (bench/ctllatency.py).
        pads = platform.lookup_request("gmii_eth")
        platform.add_source(verilog_source("ethdaq_gmii_probe.v"))
        self.specials += Instance("ethdaq_gmii_probe", p_PORT=config.ctl_port, i_clk=ClockSignal("sys"),
            i_rx_dv=pads.rx_dv, i_rx_data=pads.rx_data, i_tx_en=pads.tx_en, i_tx_data=pads.tx_data)
        if config.with_launcher:
            # Launched frames (UDP to LAUNCH_PROBE_PORT) at the pins, with the PTP clock's time
            # (test_network.py).
            platform.add_source(verilog_source("ethdaq_launch_probe.v"))
            self.specials += Instance("ethdaq_launch_probe", p_PORT=LAUNCH_PROBE_PORT, i_clk=ClockSignal("sys"),
                i_tx_en=pads.tx_en, i_tx_data=pads.tx_data, i_sec=self.ptp.clock.sec, i_ns=self.ptp.clock.ns)
        if config.with_classifier:
            # The fast-track sink's deliveries against the pins (test_network.py).
            platform.add_source(verilog_source("ethdaq_fasttrack_probe.v"))
            ft = self.classifier.fasttrack
            self.specials += Instance("ethdaq_fasttrack_probe", i_clk=ClockSignal("sys"),
                i_rx_dv=pads.rx_dv, i_valid=ft.valid, i_rule=ft.rule, i_length=ft.length,
                i_payload=ft.payload[:64])

    def add_etherbone(self):
        # Raw bus access over UDP, for debugging only (build option --with-etherbone; LiteX's
        # litex_server --udp talks to it). Without it the DAQ SoC has no way onto its bus from the
        # network but the firmware's control protocol.
        if not self.soc_config.with_etherbone:
            return
        from liteeth.frontend.etherbone import LiteEthEtherbone
        self.etherbone = LiteEthEtherbone(self.ethcore.udp, self.soc_config.etherbone_port, cd="sys")
        self.bus.add_master(name="etherbone", master=self.etherbone.wishbone.bus)
        self.logger.warning(ETHERBONE_WARNING.format(port=self.soc_config.etherbone_port))

    def add_control_port(self):
        # CPU control port on the hardware UDP stack.
        # With PTP over UDP the same mailbox serves PTP's ports 319 (event) and 320 (general): one
        # buffer instead of three saves about 2000 LUTs, which the colorlight_i5 does not have.
        config = self.soc_config
        # Without the counters the firmware does not read (the drop counters stay).
        self.ctlport = CPUUDPPort(udp_port=config.ctl_port, rx_datagrams=8, with_counters=False,
            extra_ports=(*(PTP_UDP_PORTS if config.ptp_transport == "udp" else ()),
                         *((DHCP_CLIENT_PORT,) if config.with_dhcp else ())),
            probe_stamp_bits=PROBE_STAMP_BITS if config.with_probes and config.with_classifier else 0)
        self.comb += connect_udp_ports(self.ethcore.udp.crossbar, self.ctlport)

    def add_ptp(self):
        config, platform, sys_clk_freq = self.soc_config, self.platform, self.sys_clk_freq
        # PTP hardware clock (sys) and timestamps of PTP event messages where the PHY's streams
        # meet the MAC: what the PHY accepts on transmit (after the gap inserter), what it
        # delivers on receive (gateware/tsu.py, docs/ptp.md).
        # 512 records: the depth at which the record FIFOs (144 bits) go to block RAM (4 DP16KD
        # each on ECP5) instead of 72 DPR16X4 of distributed RAM, which the ECP5-25F's LUTs
        # cannot spare.
        # sys faster than the PHY (100 Mb/s: 25 MHz): the record FIFOs' reader must not outrun
        # their registered writes (gateware/cdcfifo.py reader_faster).
        phy_freq = min(getattr(self.ethphy, "tx_clk_freq", sys_clk_freq), getattr(self.ethphy, "rx_clk_freq", sys_clk_freq))
        # At 64 bits (XGMII) the units parse 64-bit words and keep the lane of each frame's /S/;
        # what the PHY's transmitter takes has no preamble when it makes it itself.
        dw = self.ethphy.dw
        self.ptp_tx = PTPTimestamper(self.ptp.clock, dw=dw, cd="eth_tx", cd_clock="sys", depth=512,
                                     with_preamble=not getattr(self.ethphy, "tx_framing", False),
                                     sys_faster=sys_clk_freq > phy_freq)
        self.ptp_rx = PTPTimestamper(self.ptp.clock, dw=dw, cd="eth_rx", cd_clock="sys", depth=512,
                                     sys_faster=sys_clk_freq > phy_freq)
        # The TX tap is registered; the cycle it lags is taken out of the TX correction.
        tap_phy(self, self.ethphy, self.ptp_tx, self.ptp_rx)
        if dw == 64:
            self.comb += [self.ptp_tx.lane4.eq(self.ethphy.tx_lane4), self.ptp_rx.lane4.eq(self.ethphy.rx_lane4)]

        # PTP messages to and from the firmware: UDP ports 319 (event) and 320 (general) on the
        # control port's mailbox (add_control_port; the IP layer accepts the multicast
        # 224.0.1.129 and sends to it without ARP), or a CPU port for EtherType 0x88F7. Chosen at
        # build time.
        if config.ptp_transport == "l2":
            self.ptp_l2 = CPUMACPort(ethernet_type=PTP_ETHERTYPE, mac_address=self.netaddr.mac,
                rx_depth=256, rx_frames=4, rx_max=128, tx_depth=PTP_TX_MAX)
            l2_port = self.ethcore.mac.crossbar.get_port(PTP_ETHERTYPE, dw=config.eth_dw)
            if config.eth_dw != 8:   # The crossbar does not convert widths (gateware/cpuport.py).
                self.ptp_l2_converter = conv = MACPortConverter(config.eth_dw)
                self.comb += [l2_port.source.connect(conv.wide_sink), conv.wide_source.connect(l2_port.sink)]
                l2_port = conv
            self.comb += [
                l2_port.source.connect(self.ptp_l2.sink),
                self.ptp_l2.source.connect(l2_port.sink),
            ]
        # Pulse-per-second and the periodic output, where the board has pins for them.
        for name in ("pps", "periodic"):
            try:
                pin = platform.request(f"ptp_{name}")
            except ConstraintError:
                continue
            self.comb += pin.eq(getattr(self.ptp.clock, name))
        if config.with_ptp_testbench:
            # For the two-board simulation (bench/ptp2.py): the clock's time at pins the
            # testbench reads in the same cycle on both boards (ground truth), and the oscillator
            # error it models (ptpclock.PTPClock with_osc_error).
            self.comb += [
                platform.request("ptp_time_ns").eq(self.ptp.clock.time_ns),
                self.ptp.clock.osc_error.eq(platform.request("ptp_osc_error")),
            ]

    def add_streamer(self):
        # DAQ streamer fed by one detector emulator per channel; its datagrams leave from
        # data_port through the transmit path, not through LiteEth's UDP/IP layers. Timestamps
        # are the PTP clock's time, flagged TS_PTP while the firmware reports it synchronised.
        # A user's front-end (gateware/frontend.py) drives the channels instead of the emulators;
        # the streamer gets as many channels as it drives.
        config, board = self.soc_config, self.board
        if not config.with_streamer:
            return
        nchannels = config.nchannels
        if config.frontend is not None:
            ctx = FrontendContext(config.frontend.path, self.platform, board, sample_width=config.sample_width,
                                  max_channels=protocol.MAX_STREAMS, sys_clk_freq=self.sys_clk_freq,
                                  time_ns=self.ptp.clock.time_ns, boards=BOARDS)
            self.frontend, frontend_sources = instantiate_frontend(config.frontend, ctx)
            nchannels = len(frontend_sources)
            # Each channel's declared worst-case samples/s, for IDENTIFY (the host's link budget).
            self.frontend_rates = declared_rates(self.frontend, ctx, nchannels)
            # Each channel's event layout (0: samples), for IDENTIFY (the host's ev44 publishing).
            self.frontend_events = declared_events(self.frontend, ctx, nchannels)
        self.streamer = DAQStreamer(nchannels=nchannels, sample_width=config.sample_width,
            timestamp=self.ptp.clock.time_ns, timestamp_next=self.ptp.clock.time_ns_next, ts_flags=Mux(self.ptp.synced, daqformat.FLAG_TS_PTP, 0),
            src_port=config.data_port, max_payload=config.max_payload,
            cd_tx="eth_tx", clk_freq=self.sys_clk_freq, dw=self.ethphy.dw,
            arp_timeout=getattr(board, "arp_timeout", 0.1),
            arp_retry_interval=getattr(board, "arp_retry_interval", 1.0),
            arp_refresh=getattr(board, "arp_refresh", 30.0))
        if config.frontend is None:
            add_emulators(self, self.streamer)
        else:
            self.comb += [src.connect(sink) for src, sink in zip(frontend_sources, self.streamer.sinks)]
        connect_streamer(self, self.streamer, self.txpath, self.ethcore)

    def add_probes(self):
        # Latency probes (gateware/probe.py): every frame of each transmit class from
        # handed over to its first preamble byte on the pins, and from the last byte on the pins
        # to the fast-track sink. Off by default: two small statistics RAMs per probe, which the
        # colorlight_i5 has no LUTs for yet.
        config = self.soc_config
        if not config.with_probes:
            return
        if self.ethphy.dw != 8:
            raise ValueError(f"the latency probes need an 8-bit PHY for now, not {self.ethphy.dw}-bit")
        self.probes = DAQProbes(self.txpath, self.ethphy, self.ctlport.source, sorted(self.ctlport.udp_ports),
                                PHY_FPGA_LATENCY_CYCLES[self.board.ptp_phy], launcher=getattr(self, "launcher", None),
                                fasttrack=self.classifier.fasttrack if config.with_classifier else None,
                                passed_udp=self.classifier.passed_udp if config.with_classifier else None,
                                mailbox=self.ctlport if config.with_classifier else None)

    def add_event_counters(self):
        # The drop and error counts the firmware reports, in one RAM behind one CSR window
        # (gateware/eventcounters.py): each core's counter stays, of it only the low bits are
        # read, and its own CSR is not built. Each event's index is the firmware's EVENT_<NAME>.
        taken = [(self.eth_errors, "_fcs_errors", "eth_fcs_errors"),
                 (self.eth_errors, "_preamble_errors", "eth_preamble_errors"),
                 (self.ctlport, "_rx_dropped", "ctlport_rx_dropped"),
                 (self.ctlport, "_tx_dropped", "ctlport_tx_dropped"),
                 (self.ptp_rx, "_overflows", "ptp_rx_overflows"),
                 (self.ptp_tx, "_overflows", "ptp_tx_overflows")]
        if hasattr(self, "eth_rx_crossing_counters"):
            taken += [(self.eth_rx_crossing_counters, f"_dropped_{why}", f"rx_crossing_dropped_{why}")
                      for why in ("full", "long")]
        if hasattr(self, "rx_gate_counters"):
            taken += [(self.rx_gate_counters, f"_dropped_{why}", f"rx_gate_dropped_{why}")
                      for why in ("full", "error", "oversize") if hasattr(self.rx_gate_counters, f"_dropped_{why}")]
        if hasattr(self, "streamer"):
            taken += [(self.streamer, "_arp_timeouts", "streamer_arp_timeouts"),
                      (self.streamer, "_stale", "streamer_stale"),
                      (self.streamer, "_dst_mac_changes", "streamer_dst_mac_changes"),
                      (self.streamer, "_arp_refused", "streamer_arp_refused")]
        # The CPU bus's timeouts (LiteX drives ctrl.bus_error): counted here, not by the
        # controller's own CSR (a saturating counter whose compare keeps all 32 bits).
        bus_errors = Signal(32)
        self.sync += If(self.ctrl.bus_error, bus_errors.eq(bus_errors + 1))
        self.ctrl.autocsr_exclude = {"_bus_errors"}
        sources = [("bus_errors", bus_errors)]
        for module, attr, name in taken:
            module.autocsr_exclude = set(getattr(module, "autocsr_exclude", ())) | {attr}
            sources.append((name, getattr(module, attr).status))
        self.events = EventCounters(sources)
        for i, name in enumerate(self.events.names):
            self.add_constant(f"EVENT_{name.upper()}", i)

    def add_firmware_constants(self):
        """What the firmware is compiled with (LiteX writes them into soc.h and csr.json): the
        options of this build and the facts of the gateware it runs on, each part's in the order
        the parts are added."""
        tx_cycle_ps = round(1e12 / getattr(self.ethphy, "tx_clk_freq", 125e6))
        self._launcher_and_receive_constants(tx_cycle_ps)
        self._ptp_constants()
        self._data_path_constants(tx_cycle_ps)
        self._board_constants()

    def _launcher_and_receive_constants(self, tx_cycle_ps):
        config, board = self.soc_config, self.board
        add = self.add_constant
        # Time-triggered launcher (add_tx_path). Fire time = launch time - lead: from the fire
        # decision to the first preamble byte on the PHY's pins, in eth_tx cycles (plus the guard
        # band the firmware chooses).
        if config.with_launcher:
            add("ETHDAQ_LAUNCHER_DEPTH",       LAUNCHER_DEPTH)
            add("ETHDAQ_LAUNCHER_LEAD_CYCLES", launcher_lead_cycles(board.ptp_phy))
            add("ETHDAQ_LAUNCHER_CYCLE_PS",    tx_cycle_ps)
            # Default guard band: the longest frame anything else here sends (LiteEth's, up to the
            # 1500-byte MTU: a 1472-byte ping's answer; a DAQ datagram of the largest payload).
            longest = max(1514, 42 + config.max_payload if config.with_streamer else 0)
            add("ETHDAQ_LAUNCHER_GUARD",       guard_cycles(longest))

        # Receive path (add_rx_chain).
        if config.with_rx_audit:
            add("ETHDAQ_RX_AUDIT")
        if config.with_classifier:
            add("ETHDAQ_CLASSIFIER_RULES", CLASSIFIER_RULES)
            for i, port in enumerate(config.fasttrack_ports):
                add(f"ETHDAQ_FASTTRACK_PORT_{i}", port)
        if self.timing_margin:
            add("ETHDAQ_TIMING_MARGIN_PCT", round(100*self.timing_margin))
        if config.with_etherbone:
            add("ETHDAQ_ETHERBONE_PORT", config.etherbone_port)

    def _ptp_constants(self):
        config, board = self.soc_config, self.board
        add = self.add_constant
        # PTP (add_ptp): the clock's increments, the timestamps' corrections for the PHY, and the
        # firmware's PTP port.
        for name, value in self.ptp.clock.constants().items():
            add(name, value)
        # In ps: XGMII's are fractions of a ns (the firmware rounds each sum once, ptp_hwts.h).
        ptp_tx_ns, ptp_rx_ns = phy_corrections_ns(board.ptp_phy, tx_tap_cycles=TX_TAP_CYCLES)
        add("PTP_TX_CORRECTION_PS", round(1000*ptp_tx_ns))
        add("PTP_RX_CORRECTION_PS", round(1000*ptp_rx_ns))
        if self.ethphy.dw == 64:
            # What a start in lane 4 adds (the records' start_lane).
            add("PTP_TX_LANE4_PS", round(1000*XGMII_LANE4_NS[0]))
            add("PTP_RX_LANE4_PS", round(1000*XGMII_LANE4_NS[1]))
        add("ETHDAQ_PTP_UDP" if config.ptp_transport == "udp" else "ETHDAQ_PTP_L2")
        add("ETHDAQ_PTP_TX_MAX",        PTP_TX_MAX)
        add("ETHDAQ_PTP_ROLE",          PTP_ROLES[config.ptp_role])
        add("ETHDAQ_PTP_TRANSPORT",     PTP_TRANSPORTS[config.ptp_transport])
        add("ETHDAQ_PTP_DOMAIN",        config.ptp_domain)
        add("ETHDAQ_PTP_LOG_SYNC",      config.ptp_log_sync)
        add("ETHDAQ_PTP_LOG_ANNOUNCE",  config.ptp_log_announce)
        add("ETHDAQ_PTP_LOG_DELAY_REQ", config.ptp_log_delay_req)
        add("ETHDAQ_PTP_STATUS_LOG",    config.ptp_status_log)
        # The console's periodic PTP line (every 2^ptp_status_log s): short (state, servo, offset,
        # path delay, frequency), or followed by the full line with every counter.
        add("ETHDAQ_PTP_STATUS_FULL",   int(bool(config.ptp_status_full)))

    def _data_path_constants(self, tx_cycle_ps):
        config = self.soc_config
        add = self.add_constant
        # Data path (add_streamer).
        if config.frontend is not None:
            # Each channel's declared worst-case samples/s, for IDENTIFY (the host's link budget).
            for i, rate in enumerate(self.frontend_rates):
                if rate:
                    add(f"ETHDAQ_MAX_RATE_{i}", rate)
            # Each event channel's id bits: IDENTIFY sends the layouts when there is one.
            if any(self.frontend_events):
                add("ETHDAQ_EVENT_CHANNELS")
                for i, bits in enumerate(self.frontend_events):
                    if bits:
                        add(f"ETHDAQ_EVENT_ID_BITS_{i}", bits)
            # The bytes its registers take from its CSR base (32-bit words, in order): the
            # firmware lets REG_READ and REG_WRITE reach these and nothing else.
            dw, csrs = self.csr.data_width, getattr(self.frontend, "get_csrs", list)()
            add("ETHDAQ_FRONTEND_CSR_BYTES", 4*sum((c.size + dw - 1)//dw for c in csrs))
        if config.with_streamer:
            add("ETHDAQ_STREAM_COUNTER_BITS", COUNTER_BITS)

        # Latency probes (add_probes).
        if config.with_probes:
            add("ETHDAQ_PROBE_TX_CLASSES", len(TX_CLASSES))
            add("ETHDAQ_PROBE_RX_CLASSES", len(RX_CLASSES))
            add("ETHDAQ_PROBE_CYCLE_PS",   tx_cycle_ps)
            if config.with_classifier:
                # The receive classes need the classifier: it marks the frames they follow.
                add("ETHDAQ_PROBE_FASTTRACK")
                add("ETHDAQ_PROBE_MAILBOX_CLASSES", len(MAILBOX_CLASSES))

    def _board_constants(self):
        config, board = self.soc_config, self.board
        add = self.add_constant
        # Facts the firmware prints and reports.
        add("ETHDAQ_BOARD",    board.name)
        add("ETHDAQ_BUILD_ID", config.build_id)
        add("ETHDAQ_IP",       config.ip_address)
        add("ETHDAQ_NETMASK",  config.netmask)
        add("ETHDAQ_GATEWAY",  config.gateway)
        if config.with_dhcp:   # The DHCP client (services/dhcpsvc.c), ETHDAQ_IP its fallback.
            add("ETHDAQ_DHCP")
            add("ETHDAQ_DHCP_TIME_SCALE", config.dhcp_time_scale)
        add("ETHDAQ_MAC_HI",   config.mac_address >> 32)
        add("ETHDAQ_MAC_LO",   config.mac_address & 0xffffffff)
        add("ETHDAQ_CTL_PORT", config.ctl_port)
        for i, (net, mask) in enumerate(parse_allow(config.ctl_allow)):
            add(f"ETHDAQ_CTL_ALLOW_{i}_NET",  net)
            add(f"ETHDAQ_CTL_ALLOW_{i}_MASK", mask)
        add("ETHDAQ_ETH_DW",      config.eth_dw)
        add("ETHDAQ_NCHANNELS",   self.streamer.nchannels if config.with_streamer else 0)
        add("ETHDAQ_SAMPLE_BITS", config.sample_width)
        add("ETHDAQ_MAX_PAYLOAD", config.max_payload)
        add("ETHDAQ_DATA_PORT",   config.data_port)
        # PHY management (firmware services/phy.c): the speed this build's PHY interface runs at
        # (a link negotiated at another speed passes no frames: the firmware warns), and how often
        # the firmware looks at the link.
        add("ETHDAQ_LINK_MBPS",   LINK_MBPS[board.link])
        add("ETHDAQ_PHY_POLL_MS", max(1, round(getattr(board, "phy_poll_interval", 0.1) * 1e3)))
        # A board whose MDIO bus has several PHYs names ours; otherwise the firmware scans for it.
        if getattr(board, "phy_address", None) is not None:
            add("ETHDAQ_PHY_ADDRESS", board.phy_address)
