#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""DAQSoC: the one SoC every board uses.

VexRiscv CPU running the C firmware from ROM, LiteEth hardware UDP/IP stack (ARP, ICMP, UDP) for
the data path, and a CPU UDP port on that same stack for the firmware's control port.
"""

import ipaddress
from pathlib import Path

from migen import ClockDomainsRenamer, ClockSignal, Instance, Mux

from litex.build.generic_platform import ConstraintError
from litex.build.lattice import LatticeECP5Platform
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.core import LiteEthUDPIPCore

from ethdaq.boards import BOARDS
from ethdaq.soc.gitrev import git_hash
from ethdaq.gateware.bustimeout import use_registered_timeout
from ethdaq.gateware.cpuport import CPUMACPort, CPUUDPPort, connect_udp_ports
from ethdaq.gateware.emulator import add_emulators
from ethdaq.gateware.globalreset import promote_resets
from ethdaq.gateware.ipchecksum import replace_ip_checksums
from ethdaq.gateware.frontend import FrontendContext, declared_rates, instantiate as instantiate_frontend
from ethdaq.gateware.classifier import FastTrackSink, RXClassifier, insert_classifier
from ethdaq.gateware.framegate import FrameGate, FrameGateCounters
from ethdaq.gateware.macpipeline import (insert_ip_rx_buffer, insert_tx_buffer, replace_rx_crc, replace_tx_cdc,
                                         replace_tx_framing)
from ethdaq.gateware.macstats import MACErrors
from ethdaq.gateware.rxaudit import RXAudit, insert_rx_audit
from ethdaq.gateware.netaddr import NetAddress
from ethdaq.gateware.probe import DAQProbes, MAILBOX_CLASSES, RX_CLASSES, STAMP_BITS as PROBE_STAMP_BITS, TX_CLASSES
from ethdaq.gateware.streamer import DAQStreamer
from ethdaq.gateware.streamstats import COUNTER_BITS
from ethdaq.gateware.ptpclock import PTPClock, PTPClockCSR
from ethdaq.gateware.ptpparser import PTP_ETHERTYPE, PTP_IPV4_PDELAY, PTP_IPV4_PRIMARY
from ethdaq.gateware.tsu import PHY_FPGA_LATENCY_CYCLES, TX_TAP_CYCLES, PTPTimestamper, phy_corrections_ns, tap_phy
from ethdaq.gateware.launcher import LATENCY_CYCLES as LAUNCHER_LATENCY_CYCLES, Launcher, guard_cycles
from ethdaq.gateware.txpath import TXPath, connect_streamer
from ethdaq.gateware.watchdog import Watchdog
from ethdaq.host import daqformat, protocol

# Helpers ------------------------------------------------------------------------------------------

DEFAULT_IP       = "192.168.1.50"
DEFAULT_MAC      = "10:e2:d5:00:00:00"
DEFAULT_CTL_PORT = 7000
DEFAULT_DATA_PORT = 5000


def parse_ip(text):
    """'192.168.1.50' -> int; raises ValueError with a clear message."""
    try:
        return int(ipaddress.IPv4Address(text))
    except (ipaddress.AddressValueError, ValueError):
        raise ValueError(f"IP address must be dotted IPv4 like 192.168.1.50, not {text!r}") from None


def parse_netmask(text):
    """'255.255.255.0', '/24' or '24' -> the mask as an int; ValueError with a clear message."""
    text = str(text).strip()
    try:
        prefix = text.removeprefix("/")
        if prefix.isdigit():
            return int(ipaddress.IPv4Network(f"0.0.0.0/{prefix}").netmask)
        return int(ipaddress.IPv4Network(f"0.0.0.0/{text}").netmask)
    except ValueError:
        raise ValueError(f"netmask must be a prefix length 0..32 like 24 (or /24) or a mask like 255.255.255.0, "
                         f"not {text!r}") from None


def classful_netmask(ip):
    """The netmask of `ip`'s class (A /8, B /16, C /24): what a board assumes when the build gives
    none, as ifconfig does; right for the usual 192.168.x.0/24 lab network. ValueError for class
    D and E (multicast and reserved: no board address)."""
    first = ip >> 24
    if first < 128:
        return 0xFF000000
    if first < 192:
        return 0xFFFF0000
    if first < 224:
        return 0xFFFFFF00
    raise ValueError(f"a board's IP address must be unicast, not {ipaddress.IPv4Address(ip)}")


def parse_mac(text):
    """'10:e2:d5:00:00:00' -> int; raises ValueError with a clear message."""
    value = int.from_bytes(protocol.parse_mac(text), "big")
    if value >> 40 & 1:
        raise ValueError(f"MAC address must be unicast (bit 0 of the first byte clear), not {text!r}")
    return value


def parse_allow(networks):
    """--ctl-allow: "192.168.1.0/24,10.0.0.7" (or a list of such) -> [(net, mask)], at most
    protocol.MAX_ALLOW; ValueError naming the bad entry."""
    from ethdaq.host.protocol import MAX_ALLOW
    if isinstance(networks, str):
        networks = [n for n in networks.split(",") if n.strip()]
    out = []
    for text in networks:
        try:
            net = ipaddress.IPv4Network(str(text).strip())
        except ValueError as e:
            raise ValueError(f"{str(text).strip()!r} is not an IPv4 address or network "
                             f"like 192.168.1.0/24 ({e})") from None
        out.append((int(net.network_address), int(net.netmask)))
    if len(out) > MAX_ALLOW:
        raise ValueError(f"--ctl-allow takes at most {MAX_ALLOW} networks, not {len(out)}")
    return out


LINK_MBPS = {"1G": 1000, "100M": 100, "10G": 10000}  # Board.link

# Every clock must meet timing with this margin (10 %: 137.5 MHz for a 125 MHz PHY clock);
# boards the open toolchain builds are constrained at the nominal frequency times 1 + margin.
TIMING_MARGIN = 0.10

DEFAULT_ETHERBONE_PORT = 1234  # LiteX's (litex_server --udp)

ETHERBONE_WARNING = ("WARNING: this build has Etherbone on udp/{port}: anyone who can reach the board can read "
                     "and write its whole bus (every CSR, the firmware's memory), past the control protocol's "
                     "controller, allow-list and key. For debugging on a private link only.")


def check_etherbone_port(port, ctl_port, data_port=DEFAULT_DATA_PORT):
    used = {ctl_port: "the control port", data_port: "the DAQ data stream", 319: "PTP", 320: "PTP"}
    if not (0 < port < 65536) or port in used:
        raise ValueError(f"Etherbone port must be in 1..65535 and free, not {port!r}"
                         + (f" (used by {used[port]})" if port in used else ""))


def check_ports(ctl_port, data_port=DEFAULT_DATA_PORT):
    """The hardware UDP stack dispatches by local port: each of ours must be distinct."""
    if not (0 < ctl_port < 65536):
        raise ValueError(f"control port must be in 1..65535, not {ctl_port!r}")
    if ctl_port == data_port:
        raise ValueError(f"control port {ctl_port} is already in use by the DAQ data stream; choose another --ctl-port")
    if ctl_port in PTP_UDP_PORTS:
        raise ValueError(f"control port {ctl_port} is reserved for PTP (319 event, 320 general); choose another --ctl-port")

# PTP configuration: build-time defaults of the firmware's PTP port (docs/ptp-firmware.md).
PTP_ROLES      = {"auto": 0, "master": 1, "slave": 2}   # enum ptp_role
PTP_TRANSPORTS = {"udp": 0, "l2": 1}                    # enum ptp_transport
PTP_UDP_PORTS  = (319, 320)
PTP_IP_GROUPS  = (PTP_IPV4_PRIMARY, PTP_IPV4_PDELAY)   # The IPv4 groups PTP over UDP is sent to.
PTP_TX_MAX     = 64    # Largest message the firmware sends: Announce (64 bytes).


CLASSIFIER_RULES = protocol.MAX_RULES   # The control protocol carries this many (RULES).


def check_fasttrack_ports(ports, ctl_port, data_port, eth_dw):
    """Build-time fast-track rules (UDP destination ports): ValueError naming the problem."""
    if eth_dw != 8:
        raise ValueError(f"the receive classifier needs eth_dw=8 for now, not {eth_dw!r}")
    if len(ports) > CLASSIFIER_RULES:
        raise ValueError(f"at most {CLASSIFIER_RULES} fast-track ports (the classifier's rules), not {len(ports)}")
    taken = {ctl_port: "the control port", data_port: "the data port", 319: "PTP", 320: "PTP"}
    for p in ports:
        if not (isinstance(p, int) and 0 < p < 65536):
            raise ValueError(f"fast-track port must be 1..65535, not {p!r}")
        if p in taken:
            raise ValueError(f"fast-track port {p} is {taken[p]}'s")
    if len(set(ports)) != len(ports):
        raise ValueError(f"fast-track ports must be distinct, not {list(ports)!r}")


# The UDP port the simulated board's launch probe (--pin-probe) watches on the transmit pins.
LAUNCH_PROBE_PORT = 9100

# Time-triggered launcher: one frame of up to this many wire bytes (preamble to FCS; one DP16KD).
LAUNCHER_DEPTH = 2048


def launcher_lead_cycles(ptp_phy):
    """eth_tx cycles from the launcher's fire decision to the first preamble byte on the PHY's
    pins, without the guard band (gateware/launcher.py)."""
    return LAUNCHER_LATENCY_CYCLES + TXPath.launch_cycles + PHY_FPGA_LATENCY_CYCLES[ptp_phy][0]


def check_ptp(role, transport, log_intervals):
    if role not in PTP_ROLES:
        raise ValueError(f"PTP role must be one of {', '.join(PTP_ROLES)}, not {role!r}")
    if transport not in PTP_TRANSPORTS:
        raise ValueError(f"PTP transport must be one of {', '.join(PTP_TRANSPORTS)}, not {transport!r}")
    for name, value in log_intervals.items():
        if not (isinstance(value, int) and -10 <= value <= 6):
            raise ValueError(f"PTP {name} must be a log2 interval in seconds from -10 to 6, not {value!r}")

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

    def __init__(self, board, toolchain=None,
        sys_clk_freq = None,
        ip_address   = DEFAULT_IP,
        netmask      = None,
        mac_address  = DEFAULT_MAC,
        ctl_port     = DEFAULT_CTL_PORT,
        ctl_allow    = (),
        ctl_key      = None,
        eth_dw       = None,
        build_id     = None,
        data_port    = DEFAULT_DATA_PORT,
        with_streamer = True,
        nchannels    = 4,
        sample_width = 16,
        max_payload  = None,
        ptp_role      = "auto",
        ptp_transport = "udp",
        ptp_domain    = 0,
        ptp_log_sync      = None,
        ptp_log_announce  = None,
        ptp_log_delay_req = None,
        ptp_status_log    = None,
        ptp_status_full   = False,
        with_ptp_testbench = False,
        with_pin_probe     = False,
        with_classifier    = False,
        with_rx_audit      = None,
        fasttrack_ports    = (),
        with_launcher      = False,
        with_probes        = False,
        with_etherbone     = False,
        frontend           = None,
        etherbone_port     = DEFAULT_ETHERBONE_PORT,
        **kwargs):
        self.board        = board
        self.timing_margin = 0.0   # The clocks' constraints are nominal unless set below.
        sys_clk_freq      = int(sys_clk_freq or board.sys_clk_freq)
        eth_dw            = eth_dw or board.eth_dw
        self.ip_address   = parse_ip(ip_address)   if isinstance(ip_address,  str) else ip_address
        self.mac_address  = parse_mac(mac_address) if isinstance(mac_address, str) else mac_address
        # The subnet's mask: which directed broadcast the board takes (gateware/rxaudit.py).
        netmask = classful_netmask(self.ip_address) if netmask is None else netmask
        self.netmask      = parse_netmask(netmask) if isinstance(netmask, str) else netmask
        self.ctl_port     = ctl_port
        self.ctl_allow    = parse_allow(ctl_allow)
        from ethdaq.host.protocol import KEY_MAX, KEY_MIN
        if ctl_key is not None and not (isinstance(ctl_key, bytes) and KEY_MIN <= len(ctl_key) <= KEY_MAX):
            raise ValueError(f"ctl_key must be {KEY_MIN} to {KEY_MAX} bytes")
        self.ctl_key      = ctl_key
        self.build_id     = build_id or git_hash()
        check_ports(ctl_port, data_port if with_streamer else None)
        if with_etherbone:
            check_etherbone_port(etherbone_port, ctl_port, data_port)
        max_payload = max_payload or board.max_payload
        # PTP intervals: the board's (the simulated board runs about 1000x slower than real
        # time), else ptp4l's defaults.
        ptp_log_sync      = getattr(board, "ptp_log_sync",      0) if ptp_log_sync      is None else ptp_log_sync
        ptp_log_announce  = getattr(board, "ptp_log_announce",  1) if ptp_log_announce  is None else ptp_log_announce
        ptp_log_delay_req = getattr(board, "ptp_log_delay_req", 0) if ptp_log_delay_req is None else ptp_log_delay_req
        ptp_status_log    = getattr(board, "ptp_status_log",    0) if ptp_status_log    is None else ptp_status_log
        check_ptp(ptp_role, ptp_transport, {"sync interval": ptp_log_sync,
            "announce interval": ptp_log_announce, "delay request interval": ptp_log_delay_req,
            "status interval": ptp_status_log})
        if not (0 <= ptp_domain <= 255):
            raise ValueError(f"PTP domain must be 0..255, not {ptp_domain!r}")
        if with_pin_probe and not board.is_sim:
            raise ValueError(f"with_pin_probe reports from the simulated board's pins; {board.name} is real hardware")
        if with_ptp_testbench and not board.is_sim:
            raise ValueError(f"with_ptp_testbench models a board in simulation; {board.name} is real hardware")

        platform = board.platform(toolchain) if toolchain else board.platform()
        self.crg = board.crg(platform, sys_clk_freq)

        options = f"ip={ipaddress.IPv4Address(self.ip_address)} ctl={ctl_port} eth_dw={eth_dw} sys={sys_clk_freq/1e6:g}MHz"
        if with_etherbone:
            options += f" ETHERBONE=udp/{etherbone_port}"
        kwargs.setdefault("cpu_type",             "vexriscv")
        kwargs.setdefault("cpu_variant",          "minimal")
        kwargs.setdefault("integrated_rom_size",  0x10000)
        kwargs.setdefault("integrated_sram_size", 0x4000)
        kwargs.setdefault("uart_name",            board.uart_name)
        # No timer: the firmware's PTP service keeps its monotonic time from the PTP clock.
        kwargs.setdefault("with_timer",           False)
        SoCCore.__init__(self, platform, sys_clk_freq,
            # No build date: the same sources give the same bitstream, and the git hash says which.
            ident         = f"ethdaq {board.name} {self.build_id} {options}",
            ident_version = False,
            **kwargs)
        # The bus timeout answers from a flip-flop, not from its counter's compare: that compare
        # fed the CPU's data bus acknowledge, the start of sys's critical path on the 25F-6 boards.
        use_registered_timeout(self.bus)

        # Watchdog and reboot (the control protocol's REBOOT): a soft reset of every domain, the
        # clocks running; why and how often it happened survive it (gateware/watchdog.py).
        self.watchdog = Watchdog(int(getattr(board, "watchdog_timeout", 1.0) * sys_clk_freq))
        self.comb += self.crg.soft_rst.eq(self.watchdog.reset)

        # Ethernet: LiteEth's hardware UDP/IP stack (ARP, ICMP, the CPU's control port) and, beside
        # its MAC, the data path's canned-header transmit path (gateware/txpath.py).
        # The board's addresses are the build's until the control protocol changes them
        # (gateware/netaddr.py): LiteEth's MAC filter, ARP and IP layers take them as signals.
        self.ethphy  = board.ethphy(platform)
        # ECP5: the domains' resets on global lines (gateware/globalreset.py); nextpnr routed each
        # through the fabric to thousands of flip-flops.
        self.global_resets = []
        if isinstance(platform, LatticeECP5Platform):
            for crg in (self.crg, getattr(self.ethphy, "crg", None)):
                if crg is not None:
                    self.global_resets += promote_resets(crg)
        fasttrack_ports = tuple(fasttrack_ports)
        with_classifier = with_classifier or bool(fasttrack_ports)
        if with_classifier:
            check_fasttrack_ports(fasttrack_ports, ctl_port, data_port if with_streamer else None, eth_dw)
        # The receive audit (gateware/rxaudit.py) reads LiteEth's 8-bit receive datapath: every
        # 1 Gb/s build has it; the 10 Gb/s ones (64-bit) do not yet.
        if with_rx_audit is None:
            with_rx_audit = (eth_dw == 8)
        if with_rx_audit and eth_dw != 8:
            raise ValueError(f"the receive audit needs eth_dw=8 for now, not {eth_dw!r}")
        self.netaddr = NetAddress(self.ip_address, self.mac_address, cd_tx="eth_tx",
                                  cd_rx="eth_rx" if (with_classifier or with_rx_audit) else None)
        # PTP hardware clock (sys): before the transmit path, whose time-triggered launcher reads it.
        self.ptp    = PTPClockCSR(PTPClock(sys_clk_freq, with_osc_error=with_ptp_testbench))
        # Time-triggered transmission (gateware/launcher.py): the highest transmit class.
        launcher = None
        if with_launcher:
            if self.ethphy.dw != 8:
                raise ValueError(f"the time-triggered launcher needs an 8-bit PHY for now, not {self.ethphy.dw}-bit")
            self.launcher = launcher = Launcher(self.ptp.clock, depth=LAUNCHER_DEPTH)
        self.txpath  = TXPath(self.ethphy, self.netaddr.mac_tx, self.netaddr.ip_tx, launcher=launcher)
        if with_launcher:
            # Fire time = launch time - lead: from the fire decision to the first preamble byte on
            # the PHY's pins, in eth_tx cycles (plus the guard band the firmware chooses).
            lead = launcher_lead_cycles(board.ptp_phy)
            self.add_constant("ETHDAQ_LAUNCHER_DEPTH",       LAUNCHER_DEPTH)
            self.add_constant("ETHDAQ_LAUNCHER_LEAD_CYCLES", lead)
            self.add_constant("ETHDAQ_LAUNCHER_CYCLE_PS",    round(1e12 / getattr(self.ethphy, "tx_clk_freq", 125e6)))
            # Default guard band: the longest frame anything else here sends (LiteEth's, up to the
            # 1500-byte MTU: a 1472-byte ping's answer; a DAQ datagram of the largest payload).
            longest = max(1514, 42 + max_payload if with_streamer else 0)
            self.add_constant("ETHDAQ_LAUNCHER_GUARD",       guard_cycles(longest))
        self.comb += [
            self.txpath.announce.eq(self.netaddr.announce),
            self.netaddr.announced.eq(self.txpath.announced),
        ]
        self.ethcore = LiteEthUDPIPCore(
            phy         = self.txpath.mac_phy,
            mac_address = self.netaddr.mac,
            ip_address  = self.netaddr.ip,
            clk_freq    = sys_clk_freq,
            dw          = eth_dw,
            with_sys_datapath = (eth_dw != 8),
            # LiteEth's default 128-byte echo buffer silently drops pings with more than 128
            # bytes of payload; 2048 answers every ping up to the 1500-byte MTU.
            icmp_fifo_depth = 2048,
        )
        # LiteEth's receive path is combinational in `ready` from the ICMP/UDP layers back into
        # the MAC's clock-crossing FIFO (its AsyncFIFOBuffered reads on ready in the same cycle):
        # on ECP5 that chain was the sys clock's critical path (17 ns). A buffer with registered
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
        if eth_dw == 8:   # LiteEth's transmit ready chain, cut after its crossing (gateware/macpipeline.py).
            self.eth_tx_buffer = insert_tx_buffer(self.ethcore.mac.core)
            self.eth_tx_cdc    = replace_tx_cdc(self.ethcore.mac.core)
            # Its padding, FCS and preamble inserters, in one registered stage (gateware/mactx.py).
            self.eth_tx_framing = replace_tx_framing(self.ethcore.mac.core)
            # Its FCS checker, judging from the CRC register (gateware/fcschecker.py).
            self.eth_rx_fcs    = replace_rx_crc(self.ethcore.mac.core)
        # Receive classifier (off by default: the small ECP5 boards have little room left,
        # docs/liteeth-notes.md): rules matched right after the FCS checker and a fast-track sink
        # without the CPU. The receive audit before it judges and counts every frame;
        # the frame gate behind them lets only whole frames that both passed on to LiteEth.
        if with_classifier:
            self.classifier = RXClassifier(nrules=CLASSIFIER_RULES, payload_bytes=16)
            insert_classifier(self.ethcore.mac.core, self.classifier)
        if with_rx_audit:
            # Fast-track ports are not among them: a frame to one is the classifier's only while a
            # rule takes it (rules change at run time); the audit asks the classifier (`claimed`).
            udp_ports = (ctl_port, *(PTP_UDP_PORTS if ptp_transport == "udp" else ()),
                         *((etherbone_port,) if with_etherbone else ()))
            self.rx_audit = RXAudit(max_frame=1514, udp_ports=udp_ports,
                ethertypes=(PTP_ETHERTYPE,) if ptp_transport == "l2" else (),
                ip_groups=PTP_IP_GROUPS if ptp_transport == "udp" else (),
                netmask=self.netmask, ctl_port=ctl_port)
            self.comb += [self.rx_audit.mac.eq(self.netaddr.mac_rx), self.rx_audit.ip.eq(self.netaddr.ip_rx)]
            insert_rx_audit(self.ethcore.mac.core, self.rx_audit)
            self.add_constant("ETHDAQ_RX_AUDIT")
        if with_classifier or with_rx_audit:
            self.rx_gate    = ClockDomainsRenamer("eth_rx")(FrameGate())
            last = self.classifier if with_classifier else self.rx_audit
            rx_pipeline.insert(rx_pipeline.index(last) + 1, self.rx_gate)
            # Without the classifier (whose RULES report them) the audit's counts say why frames
            # were flagged: the gate counts only its own drops for want of room.
            self.rx_gate_counters = FrameGateCounters(self.rx_gate, cd="eth_rx",
                with_error=with_classifier, with_oversize=with_classifier)
        if with_classifier:
            self.fasttrack = FastTrackSink(self.classifier.fasttrack, cd_rx="eth_rx")
            if with_rx_audit:
                self.comb += self.rx_audit.claimed.eq(self.classifier.takes)
            self.comb += self.classifier.mac.eq(self.netaddr.mac_rx)
            self.add_constant("ETHDAQ_CLASSIFIER_RULES", CLASSIFIER_RULES)
            for i, port in enumerate(fasttrack_ports):
                self.add_constant(f"ETHDAQ_FASTTRACK_PORT_{i}", port)
        if not board.is_sim:
            eth_rx_clk = getattr(self.ethphy, "crg", self.ethphy).cd_eth_rx.clk
            eth_tx_clk = getattr(self.ethphy, "crg", self.ethphy).cd_eth_tx.clk
            # Xilinx boards constrain the PHY's clock pins themselves (boards/xdc.py: the I/O
            # delays refer to them; Vivado derives the clocks behind the buffers and PLLs).
            if not getattr(board, "constrains_eth_clocks", False):
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
                platform.add_platform_command('FREQUENCY NET "{clk}" ' + f"{k*sys_clk_freq/1e6:.3f} MHz;",
                                              clk=self.crg.cd_sys.clk)
                self.add_constant("ETHDAQ_TIMING_MARGIN_PCT", round(100*TIMING_MARGIN))
            platform.add_false_path_constraints(self.crg.cd_sys.clk, eth_rx_clk, eth_tx_clk)

        if with_pin_probe:
            # The control port's frames at the GMII pins, in cycles, on the console
            # (bench/ctllatency.py).
            pads = platform.lookup_request("gmii_eth")
            platform.add_source(str(Path(__file__).resolve().parent.parent / "gateware" / "verilog" /
                                    "ethdaq_gmii_probe.v"))
            self.specials += Instance("ethdaq_gmii_probe", p_PORT=ctl_port, i_clk=ClockSignal("sys"),
                i_rx_dv=pads.rx_dv, i_rx_data=pads.rx_data, i_tx_en=pads.tx_en, i_tx_data=pads.tx_data)
            if with_launcher:
                # Launched frames (UDP to LAUNCH_PROBE_PORT) at the pins, with the PTP clock's time
                # (test_network.py).
                platform.add_source(str(Path(__file__).resolve().parent.parent / "gateware" / "verilog" /
                                        "ethdaq_launch_probe.v"))
                self.specials += Instance("ethdaq_launch_probe", p_PORT=LAUNCH_PROBE_PORT, i_clk=ClockSignal("sys"),
                    i_tx_en=pads.tx_en, i_tx_data=pads.tx_data, i_sec=self.ptp.clock.sec, i_ns=self.ptp.clock.ns)
            if with_classifier:
                # The fast-track sink's deliveries against the pins (test_network.py).
                platform.add_source(str(Path(__file__).resolve().parent.parent / "gateware" / "verilog" /
                                        "ethdaq_fasttrack_probe.v"))
                ft = self.classifier.fasttrack
                self.specials += Instance("ethdaq_fasttrack_probe", i_clk=ClockSignal("sys"),
                    i_rx_dv=pads.rx_dv, i_valid=ft.valid, i_rule=ft.rule, i_length=ft.length,
                    i_payload=ft.payload[:64])

        # Raw bus access over UDP, for debugging only (build option --with-etherbone; LiteX's
        # litex_server --udp talks to it). Without it the DAQ SoC has no way onto its bus from the
        # network but the firmware's control protocol.
        if with_etherbone:
            from liteeth.frontend.etherbone import LiteEthEtherbone
            self.etherbone = LiteEthEtherbone(self.ethcore.udp, etherbone_port, cd="sys")
            self.bus.add_master(name="etherbone", master=self.etherbone.wishbone.bus)
            self.add_constant("ETHDAQ_ETHERBONE_PORT", etherbone_port)
            self.logger.warning(ETHERBONE_WARNING.format(port=etherbone_port))

        # CPU control port on the hardware UDP stack.
        # With PTP over UDP the same mailbox serves PTP's ports 319 (event) and 320 (general): one
        # buffer instead of three saves about 2000 LUTs, which the colorlight_i5 does not have.
        self.ctlport = CPUUDPPort(udp_port=ctl_port, rx_datagrams=8,
            extra_ports=PTP_UDP_PORTS if ptp_transport == "udp" else (),
            probe_stamp_bits=PROBE_STAMP_BITS if with_probes and with_classifier else 0)
        self.comb += connect_udp_ports(self.ethcore.udp.crossbar, self.ctlport)

        # PTP hardware clock (sys) and timestamps of PTP event messages where the PHY's streams
        # meet the MAC: what the PHY accepts on transmit (after the gap inserter), what it
        # delivers on receive (gateware/tsu.py, docs/ptp.md).
        # 512 records: the depth at which the record FIFOs (144 bits) go to block RAM (4 DP16KD
        # each on ECP5) instead of 72 DPR16X4 of distributed RAM, which the ECP5-25F's LUTs
        # cannot spare.
        # sys faster than the PHY (100 Mb/s: 25 MHz): the record FIFOs' reader must not outrun
        # their registered writes (gateware/cdcfifo.py reader_faster).
        phy_freq = min(getattr(self.ethphy, "tx_clk_freq", sys_clk_freq), getattr(self.ethphy, "rx_clk_freq", sys_clk_freq))
        self.ptp_tx = PTPTimestamper(self.ptp.clock, cd="eth_tx", cd_clock="sys", depth=512,
                                     sys_faster=sys_clk_freq > phy_freq)
        self.ptp_rx = PTPTimestamper(self.ptp.clock, cd="eth_rx", cd_clock="sys", depth=512,
                                     sys_faster=sys_clk_freq > phy_freq)
        # The TX tap is registered; the cycle it lags is taken out of the TX correction.
        tap_phy(self, self.ethphy, self.ptp_tx, self.ptp_rx)
        for name, value in self.ptp.clock.constants().items():
            self.add_constant(name, value)
        ptp_tx_ns, ptp_rx_ns = phy_corrections_ns(board.ptp_phy, tx_tap_cycles=TX_TAP_CYCLES)
        self.add_constant("PTP_TX_CORRECTION_NS", ptp_tx_ns)
        self.add_constant("PTP_RX_CORRECTION_NS", ptp_rx_ns)

        # PTP messages to and from the firmware: UDP ports 319 (event) and 320 (general) on the
        # control port's mailbox (above; the IP layer accepts the multicast 224.0.1.129 and sends
        # to it without ARP), or a CPU port for EtherType 0x88F7. Chosen at build time.
        if ptp_transport == "udp":
            self.add_constant("ETHDAQ_PTP_UDP")
        else:
            # LiteEth's MAC crossbar does not convert widths (get_port(dw=8) on a wider MAC
            # connects mismatched streams without an error).
            if eth_dw != 8:
                raise ValueError(f"PTP over Ethernet (l2) needs eth_dw=8 for now, not {eth_dw!r}; use ptp_transport='udp'")
            self.ptp_l2 = CPUMACPort(ethernet_type=PTP_ETHERTYPE, mac_address=self.netaddr.mac,
                rx_depth=256, rx_frames=4, rx_max=128, tx_depth=PTP_TX_MAX)
            l2_port = self.ethcore.mac.crossbar.get_port(PTP_ETHERTYPE, dw=8)
            self.comb += [
                l2_port.source.connect(self.ptp_l2.sink),
                self.ptp_l2.source.connect(l2_port.sink),
            ]
            self.add_constant("ETHDAQ_PTP_L2")
        self.add_constant("ETHDAQ_PTP_TX_MAX",        PTP_TX_MAX)
        self.add_constant("ETHDAQ_PTP_ROLE",          PTP_ROLES[ptp_role])
        self.add_constant("ETHDAQ_PTP_TRANSPORT",     PTP_TRANSPORTS[ptp_transport])
        self.add_constant("ETHDAQ_PTP_DOMAIN",        ptp_domain)
        self.add_constant("ETHDAQ_PTP_LOG_SYNC",      ptp_log_sync)
        self.add_constant("ETHDAQ_PTP_LOG_ANNOUNCE",  ptp_log_announce)
        self.add_constant("ETHDAQ_PTP_LOG_DELAY_REQ", ptp_log_delay_req)
        self.add_constant("ETHDAQ_PTP_STATUS_LOG",    ptp_status_log)
        # The console's periodic PTP line (every 2^ptp_status_log s): short (state, servo, offset,
        # path delay, frequency), or followed by the full line with every counter.
        self.add_constant("ETHDAQ_PTP_STATUS_FULL",   int(bool(ptp_status_full)))
        # Pulse-per-second and the periodic output, where the board has pins for them.
        for name in ("pps", "periodic"):
            try:
                pin = platform.request(f"ptp_{name}")
            except ConstraintError:
                continue
            self.comb += pin.eq(getattr(self.ptp.clock, name))
        if with_ptp_testbench:
            # For the two-board simulation (bench/ptp2.py): the clock's time at pins the
            # testbench reads in the same cycle on both boards (ground truth), and the oscillator
            # error it models (ptpclock.PTPClock with_osc_error).
            self.comb += [
                platform.request("ptp_time_ns").eq(self.ptp.clock.time_ns),
                self.ptp.clock.osc_error.eq(platform.request("ptp_osc_error")),
            ]

        # DAQ streamer fed by one detector emulator per channel; its datagrams leave from
        # data_port through the transmit path, not through LiteEth's UDP/IP layers. Timestamps
        # are the PTP clock's time, flagged TS_PTP while the firmware reports it synchronised.
        # A user's front-end (gateware/frontend.py) drives the channels instead of the emulators;
        # the streamer gets as many channels as it drives.
        if frontend is not None:
            if not with_streamer:
                raise ValueError("a front-end needs the streamer: it drives the stream channels")
            ctx = FrontendContext(frontend.path, platform, board, sample_width=sample_width,
                                  max_channels=protocol.MAX_STREAMS, sys_clk_freq=sys_clk_freq,
                                  time_ns=self.ptp.clock.time_ns, boards=BOARDS)
            self.frontend, frontend_sources = instantiate_frontend(frontend, ctx)
            nchannels = len(frontend_sources)
            # Each channel's declared worst-case samples/s, for IDENTIFY (the host's link budget).
            for i, rate in enumerate(declared_rates(self.frontend, ctx, nchannels)):
                if rate:
                    self.add_constant(f"ETHDAQ_MAX_RATE_{i}", rate)
            # The bytes its registers take from its CSR base (32-bit words, in order): the
            # firmware lets REG_READ and REG_WRITE reach these and nothing else.
            dw, csrs = self.csr.data_width, getattr(self.frontend, "get_csrs", list)()
            self.add_constant("ETHDAQ_FRONTEND_CSR_BYTES", 4*sum((c.size + dw - 1)//dw for c in csrs))
        if with_streamer:
            if not (1 <= nchannels <= protocol.MAX_STREAMS):
                raise ValueError(f"the streamer takes 1 to {protocol.MAX_STREAMS} channels (the control protocol's "
                                 f"channel mask is 8 bits), not {nchannels!r}")
            if eth_dw != 8:
                raise ValueError(f"the streamer supports eth_dw=8 for now, not {eth_dw!r}")
            self.streamer = DAQStreamer(nchannels=nchannels, sample_width=sample_width,
                timestamp=self.ptp.clock.time_ns, timestamp_next=self.ptp.clock.time_ns_next, ts_flags=Mux(self.ptp.synced, daqformat.FLAG_TS_PTP, 0),
                src_port=data_port, max_payload=max_payload,
                cd_tx="eth_tx", clk_freq=sys_clk_freq,
                arp_timeout=getattr(board, "arp_timeout", 0.1),
                arp_retry_interval=getattr(board, "arp_retry_interval", 1.0),
                arp_refresh=getattr(board, "arp_refresh", 30.0))
            if frontend is None:
                add_emulators(self, self.streamer)
            else:
                self.comb += [src.connect(sink) for src, sink in zip(frontend_sources, self.streamer.sinks)]
            self.add_constant("ETHDAQ_STREAM_COUNTER_BITS", COUNTER_BITS)
            connect_streamer(self, self.streamer, self.txpath, self.ethcore)

        # Latency probes (gateware/probe.py): every frame of each transmit class from
        # handed over to its first preamble byte on the pins, and from the last byte on the pins
        # to the fast-track sink. Off by default: two small statistics RAMs per probe, which the
        # colorlight_i5 has no LUTs for yet.
        if with_probes:
            if self.ethphy.dw != 8:
                raise ValueError(f"the latency probes need an 8-bit PHY for now, not {self.ethphy.dw}-bit")
            self.probes = DAQProbes(self.txpath, self.ethphy, self.ctlport.source, sorted(self.ctlport.udp_ports),
                                    PHY_FPGA_LATENCY_CYCLES[board.ptp_phy], launcher=launcher,
                                    fasttrack=self.classifier.fasttrack if with_classifier else None,
                                    passed_udp=self.classifier.passed_udp if with_classifier else None,
                                    mailbox=self.ctlport if with_classifier else None)
            self.add_constant("ETHDAQ_PROBE_TX_CLASSES", len(TX_CLASSES))
            self.add_constant("ETHDAQ_PROBE_RX_CLASSES", len(RX_CLASSES))
            self.add_constant("ETHDAQ_PROBE_CYCLE_PS", round(1e12 / getattr(self.ethphy, "tx_clk_freq", 125e6)))
            if with_classifier:
                # The receive classes need the classifier: it marks the frames they follow.
                self.add_constant("ETHDAQ_PROBE_FASTTRACK")
                self.add_constant("ETHDAQ_PROBE_MAILBOX_CLASSES", len(MAILBOX_CLASSES))

        # Facts the firmware prints and reports (generated into soc.h).
        self.add_constant("ETHDAQ_BOARD",    board.name)
        self.add_constant("ETHDAQ_BUILD_ID", self.build_id)
        self.add_constant("ETHDAQ_IP",       self.ip_address)
        self.add_constant("ETHDAQ_NETMASK",  self.netmask)
        self.add_constant("ETHDAQ_MAC_HI",   self.mac_address >> 32)
        self.add_constant("ETHDAQ_MAC_LO",   self.mac_address & 0xffffffff)
        self.add_constant("ETHDAQ_CTL_PORT", ctl_port)
        for i, (net, mask) in enumerate(self.ctl_allow):
            self.add_constant(f"ETHDAQ_CTL_ALLOW_{i}_NET",  net)
            self.add_constant(f"ETHDAQ_CTL_ALLOW_{i}_MASK", mask)
        self.add_constant("ETHDAQ_ETH_DW",   eth_dw)
        self.add_constant("ETHDAQ_NCHANNELS",   nchannels if with_streamer else 0)
        self.add_constant("ETHDAQ_SAMPLE_BITS", sample_width)
        self.add_constant("ETHDAQ_MAX_PAYLOAD", max_payload)
        self.add_constant("ETHDAQ_DATA_PORT",   data_port)
        # PHY management (firmware services/phy.c): the speed this build's PHY interface runs at
        # (a link negotiated at another speed passes no frames: the firmware warns), and how often
        # the firmware looks at the link.
        self.add_constant("ETHDAQ_LINK_MBPS",   LINK_MBPS[board.link])
        self.add_constant("ETHDAQ_PHY_POLL_MS", max(1, round(getattr(board, "phy_poll_interval", 0.1) * 1e3)))
        # A board whose MDIO bus has several PHYs names ours; otherwise the firmware scans for it.
        if getattr(board, "phy_address", None) is not None:
            self.add_constant("ETHDAQ_PHY_ADDRESS", board.phy_address)
