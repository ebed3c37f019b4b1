#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""SoCConfig: every build option of the DAQ SoC in one object, and the one place they are checked.

`ethdaq build` and `ethdaq sim` make one from their options and check it against the board before
anything is built (SoCConfig.resolve); DAQSoC takes it and resolves it again, so a configuration
made in Python (bench/, test/) meets the same checks and the same one-line messages. Plain Python,
no gateware: the CLI imports it without Migen.
"""

import dataclasses
import ipaddress
from dataclasses import dataclass

from ethdaq.soc.gitrev import git_hash
from ethdaq.wire import protocol

# Defaults -----------------------------------------------------------------------------------------

DEFAULT_IP        = "192.168.1.50"
DEFAULT_MAC       = "10:e2:d5:00:00:00"
DEFAULT_CTL_PORT  = 7000
DEFAULT_DATA_PORT = 5000
DEFAULT_ETHERBONE_PORT = 1234  # LiteX's (litex_server --udp)

# PTP configuration: build-time defaults of the firmware's PTP port (docs/ptp-firmware.md).
PTP_ROLES      = {"auto": 0, "master": 1, "slave": 2}   # enum ptp_role
PTP_TRANSPORTS = {"udp": 0, "l2": 1}                    # enum ptp_transport
PTP_UDP_PORTS  = (319, 320)
DHCP_CLIENT_PORT = 68   # The DHCP client's port (--dhcp), served by the control mailbox.

CLASSIFIER_RULES = protocol.MAX_RULES   # The control protocol carries this many (RULES).

ETHERBONE_WARNING = ("WARNING: this build has Etherbone on udp/{port}: anyone who can reach the board can read "
                     "and write its whole bus (every CSR, the firmware's memory), past the control protocol's "
                     "controller, allow-list and key. For debugging on a private link only.")

# Addresses ----------------------------------------------------------------------------------------

def parse_ip(text):
    """'192.168.1.50' -> int; raises ValueError with a clear message."""
    try:
        return int(ipaddress.IPv4Address(text))
    except (ipaddress.AddressValueError, ValueError):
        raise ValueError(f"IP address must be dotted IPv4 like 192.168.1.50, not {text!r}") from None


def parse_netmask(text):
    """'255.255.255.0', '/24' or '24' -> the mask as an int (protocol.parse_netmask)."""
    return protocol.parse_netmask(text)


def parse_gateway(text):
    """'192.168.1.254' -> int, '' or 'none' -> 0 (no gateway); ValueError with a clear message."""
    text = str(text).strip()
    if text.lower() in ("", "none"):
        return 0
    try:
        return int(ipaddress.IPv4Address(text))
    except ValueError:
        raise ValueError(f"gateway must be dotted IPv4 like 192.168.1.254 (or none), not {text!r}") from None


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
    if len(out) > protocol.MAX_ALLOW:
        raise ValueError(f"--ctl-allow takes at most {protocol.MAX_ALLOW} networks, not {len(out)}")
    return out

# Ports --------------------------------------------------------------------------------------------

def check_ports(ctl_port, data_port=DEFAULT_DATA_PORT):
    """The hardware UDP stack dispatches by local port: each of ours must be distinct."""
    if not (0 < ctl_port < 65536):
        raise ValueError(f"control port must be in 1..65535, not {ctl_port!r}")
    if ctl_port == data_port:
        raise ValueError(f"control port {ctl_port} is already in use by the DAQ data stream; choose another --ctl-port")
    if ctl_port in PTP_UDP_PORTS:
        raise ValueError(f"control port {ctl_port} is reserved for PTP (319 event, 320 general); choose another --ctl-port")


def check_etherbone_port(port, ctl_port, data_port=DEFAULT_DATA_PORT):
    used = {ctl_port: "the control port", data_port: "the DAQ data stream", 319: "PTP", 320: "PTP"}
    if not (0 < port < 65536) or port in used:
        raise ValueError(f"Etherbone port must be in 1..65535 and free, not {port!r}"
                         + (f" (used by {used[port]})" if port in used else ""))


def check_fasttrack_ports(ports, ctl_port, data_port):
    """Build-time fast-track rules (UDP destination ports): ValueError naming the problem."""
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


def check_ptp(role, transport, log_intervals):
    if role not in PTP_ROLES:
        raise ValueError(f"PTP role must be one of {', '.join(PTP_ROLES)}, not {role!r}")
    if transport not in PTP_TRANSPORTS:
        raise ValueError(f"PTP transport must be one of {', '.join(PTP_TRANSPORTS)}, not {transport!r}")
    for name, value in log_intervals.items():
        if not (isinstance(value, int) and -10 <= value <= 6):
            raise ValueError(f"PTP {name} must be a log2 interval in seconds from -10 to 6, not {value!r}")

# SoCConfig ----------------------------------------------------------------------------------------

@dataclass
class SoCConfig:
    """The DAQ SoC's build options. None means the board's value (its class attribute of the same
    name, boards/), or what the comment says."""
    # Clocks and datapath.
    sys_clk_freq : float = None    # Hz; the simulated board's is fixed (its GMII clock).
    eth_dw       : int   = None    # LiteEth's datapath width in bits.
    build_id     : str   = None    # The build's name in the SoC's identifier; None: the git revision.

    # Addresses (text, or the integers they parse to).
    ip_address   : str   = DEFAULT_IP
    netmask      : str   = None    # Prefix length or mask; None: the address's class (classful_netmask).
    gateway      : str   = 0       # Default gateway, a host of the subnet; 0 or "none": none (all on-link).
    mac_address  : str   = DEFAULT_MAC
    with_dhcp    : bool  = False   # DHCP client in the firmware; ip_address is its fallback.
    dhcp_time_scale : int = None   # Lease seconds per board second; None: the board's (1 on hardware).

    # Control port (docs/protocol.md).
    ctl_port     : int   = DEFAULT_CTL_PORT
    ctl_allow    : tuple = ()      # Networks that may control the board ("NET[,NET...]" or a list).
    ctl_key      : bytes = None    # Shared key for requests that change the board.

    # DAQ data path: streamer, its channels and their source.
    with_streamer : bool = True
    data_port     : int  = DEFAULT_DATA_PORT
    nchannels     : int  = 4       # With a front-end, the channels it drives.
    sample_width  : int  = 16
    max_payload   : int  = None
    frontend      : object = None  # A front-end factory (gateware/frontend.py load()); None: emulators.

    # PTP (docs/ptp-firmware.md); intervals as log2 seconds.
    ptp_role          : str  = "auto"
    ptp_transport     : str  = "udp"
    ptp_domain        : int  = 0
    ptp_log_sync      : int  = None
    ptp_log_announce  : int  = None
    ptp_log_delay_req : int  = None
    ptp_status_log    : int  = None
    ptp_status_full   : bool = False

    # Real-time services and the receive path (docs/realtime.md).
    with_classifier   : bool  = False
    fasttrack_ports   : tuple = ()     # Implies the classifier.
    with_rx_audit     : bool  = None   # None: where the datapath is 8 bits.
    with_launcher     : bool  = False
    with_probes       : bool  = False

    # Debugging and simulation.
    with_etherbone     : bool = False
    etherbone_port     : int  = DEFAULT_ETHERBONE_PORT
    with_pin_probe     : bool = False  # Simulated board only.
    with_ptp_testbench : bool = False  # Simulated board only (bench/ptp2.py).

    def resolve(self, board):
        """This configuration on `board`: a copy with the board's values where this one has None,
        the addresses as integers and the classifier on when fast-track ports are given. Raises
        ValueError with a one-line message for anything the build would refuse."""
        if board.is_sim and self.sys_clk_freq not in (None, board.sys_clk_freq):
            raise ValueError("the simulated board's sys clock is fixed at 125 MHz (it is the GMII clock)")
        if getattr(board, "sys_clk_fixed", False) and self.sys_clk_freq not in (None, board.sys_clk_freq):
            raise ValueError(f"{board.name}'s sys clock is fixed at {board.sys_clk_freq/1e6:g} MHz (its transceiver's "
                             f"reset sequencer counts in it), not {self.sys_clk_freq/1e6:g} MHz")
        ip_address  = parse_ip(self.ip_address)   if isinstance(self.ip_address,  str) else self.ip_address
        mac_address = parse_mac(self.mac_address) if isinstance(self.mac_address, str) else self.mac_address
        # The subnet's mask: which directed broadcast the board takes (gateware/rxaudit.py).
        netmask = classful_netmask(ip_address) if self.netmask is None else self.netmask
        netmask = parse_netmask(netmask) if isinstance(netmask, str) else netmask
        # The default gateway (0: none, every destination on-link): what streams and answers to
        # addresses outside the subnet are sent to (gateware/netaddr.py, firmware protocol/route.h).
        gateway = parse_gateway(self.gateway) if isinstance(self.gateway, str) else (self.gateway or 0)
        eth_dw  = self.eth_dw or board.eth_dw
        fasttrack_ports = tuple(self.fasttrack_ports)
        # PTP intervals: the board's (the simulated board runs about 1000x slower than real
        # time), else ptp4l's defaults.
        def board_or(name, default):
            value = getattr(self, name)
            return getattr(board, name, default) if value is None else value
        config = dataclasses.replace(self,
            sys_clk_freq      = int(self.sys_clk_freq or board.sys_clk_freq),
            eth_dw            = eth_dw,
            build_id          = self.build_id or git_hash(),
            ip_address        = ip_address,
            netmask           = netmask,
            gateway           = gateway,
            mac_address       = mac_address,
            max_payload       = self.max_payload or board.max_payload,
            ptp_log_sync      = board_or("ptp_log_sync",      0),
            ptp_log_announce  = board_or("ptp_log_announce",  1),
            ptp_log_delay_req = board_or("ptp_log_delay_req", 0),
            ptp_status_log    = board_or("ptp_status_log",    0),
            dhcp_time_scale   = board_or("dhcp_time_scale", 1),
            with_classifier   = self.with_classifier or bool(fasttrack_ports),
            fasttrack_ports   = fasttrack_ports,
            # The receive audit (gateware/rxaudit.py), at 8 or 64 bits: every build has it.
            with_rx_audit     = True if self.with_rx_audit is None else self.with_rx_audit)
        config._check(board)
        return config

    def _check(self, board):
        """The checks of resolve(), on a resolved configuration."""
        # LiteEth's MAC converts the PHY's words to a datapath as wide or wider, never narrower.
        phy_dw = getattr(board, "phy_dw", 8)
        if self.eth_dw not in (8, 16, 32, 64) or self.eth_dw < phy_dw:
            raise ValueError(f"eth_dw must be 8, 16, 32 or 64 and at least the PHY's width on {board.name} "
                             f"({phy_dw} bits), not {self.eth_dw!r}")
        if not protocol.gateway_valid(self.ip_address, self.netmask, self.gateway):
            net = ipaddress.IPv4Network((self.ip_address, bin(self.netmask).count("1")), strict=False)
            raise ValueError(f"gateway must be a host of the board's subnet {net} other than the board "
                             f"({ipaddress.IPv4Address(self.ip_address)}), not {ipaddress.IPv4Address(self.gateway)}")
        parse_allow(self.ctl_allow)
        if self.ctl_key is not None and not (isinstance(self.ctl_key, bytes) and
                                             protocol.KEY_MIN <= len(self.ctl_key) <= protocol.KEY_MAX):
            raise ValueError(f"ctl_key must be {protocol.KEY_MIN} to {protocol.KEY_MAX} bytes")
        data_port = self.data_port if self.with_streamer else None
        check_ports(self.ctl_port, data_port)
        if self.with_etherbone:
            check_etherbone_port(self.etherbone_port, self.ctl_port, self.data_port)
        check_ptp(self.ptp_role, self.ptp_transport, {"sync interval": self.ptp_log_sync,
            "announce interval": self.ptp_log_announce, "delay request interval": self.ptp_log_delay_req,
            "status interval": self.ptp_status_log})
        if not (0 <= self.ptp_domain <= 255):
            raise ValueError(f"PTP domain must be 0..255, not {self.ptp_domain!r}")
        if not (isinstance(self.dhcp_time_scale, int) and 1 <= self.dhcp_time_scale <= 100000):
            raise ValueError(f"DHCP time scale must be an integer 1..100000, not {self.dhcp_time_scale!r}")
        if self.dhcp_time_scale != getattr(board, "dhcp_time_scale", 1) and not board.is_sim:
            raise ValueError(f"--dhcp-time-scale shortens leases on the simulated board; {board.name} is real hardware")
        if self.with_dhcp:
            for name, port in (("control", self.ctl_port), ("data", data_port),
                               ("Etherbone", self.etherbone_port if self.with_etherbone else None)):
                if port == DHCP_CLIENT_PORT:
                    raise ValueError(f"{name} port {port} is the DHCP client's (--dhcp)")
        if self.with_pin_probe and not board.is_sim:
            raise ValueError(f"--pin-probe reports from the simulated board's pins; {board.name} is real hardware")
        if self.with_pin_probe and getattr(board, "phy_dw", 8) != 8:
            raise ValueError(f"--pin-probe watches GMII pins; {board.name}'s PHY is {board.phy_dw}-bit")
        if self.with_ptp_testbench and not board.is_sim:
            raise ValueError(f"with_ptp_testbench models a board in simulation; {board.name} is real hardware")
        if self.with_launcher and phy_dw != 8:
            raise ValueError(f"the time-triggered launcher needs an 8-bit PHY for now; {board.name}'s is {phy_dw}-bit")
        if self.with_probes and phy_dw != 8:
            raise ValueError(f"the latency probes need an 8-bit PHY for now; {board.name}'s is {phy_dw}-bit")
        if self.with_classifier:
            check_fasttrack_ports(self.fasttrack_ports, self.ctl_port, data_port)
        # The latency probes time the classifier's fast-track deliveries in the PHY's receive
        # clock, where the 8-bit MAC datapath puts the classifier (a wider one is in sys).
        if self.with_probes and self.with_classifier and self.eth_dw != 8:
            raise ValueError(f"the latency probes with the receive classifier need eth_dw=8 for now, not {self.eth_dw!r}")
        if self.frontend is not None and not self.with_streamer:
            raise ValueError("a front-end needs the streamer: it drives the stream channels")
        if self.with_streamer:
            # A front-end's channel count is checked where it is instantiated (gateware/frontend.py).
            if self.frontend is None and not (1 <= self.nchannels <= protocol.MAX_STREAMS):
                raise ValueError(f"the streamer takes 1 to {protocol.MAX_STREAMS} channels (the control protocol's "
                                 f"channel mask is 8 bits), not {self.nchannels!r}")
