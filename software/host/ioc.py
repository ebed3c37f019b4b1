#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""EPICS IOC of boards (`ethdaq ioc`): each board's IDENTIFY, STATUS, STREAMS, PTP_STATUS, RX_STATS
and CONFIG_GET as process variables, asked over the control protocol every --interval seconds
(boardmetrics.poll, as `ethdaq exporter` asks them), and its run and settings as PVs to write,
each write one request of the control protocol. pythonSoftIOC (EPICS base from epicscorelibs)
serves them over Channel Access and pvAccess. docs/epics.md has the table of PVs.

    PREFIX[NAME:]AREA:VALUE        e.g. LAB:DAQ1:RUN:CTRL, LAB:DAQ1:S0:DATAGRAMS

- A board that does not answer a poll: every read PV of it keeps its value with severity INVALID
  and status COMM, COMM:UP goes to 0 (a MAJOR alarm) and COMM:MSG says why.
- A value the board's build does not have (a receive counter, a stream past its channels):
  INVALID with status UDF.
- A front-end's registers (a build with --frontend; `--csr` gives its csr.json): FE:NAME for
  each, read with REG_READ every poll; a writable one is also a setpoint, FE:NAME, with its
  readback FE:NAME_RBV, and a put is one REG_WRITE (software/host/csrmap.py). Registers of
  up to 64 bits are 64-bit integer PVs, wider ones hexadecimal strings ("0x..."); a 64-bit value
  of 2**63 or more does not fit a signed PV and is INVALID with status UDF.
- A write is sent while the put is processed (a put with callback, `caput -c`, returns after the
  board answered). A write the board refuses (another host controls it, a value out of its range),
  or that gets no answer, is not taken: the PV returns to its previous value with severity MAJOR
  and status WRITE (COMM when unanswered), CTL:MSG carries the board's reason with the same alarm,
  and CTL:WRITE_ERRORS counts it. An accepted write clears both alarms.

softioc is imported only when the IOC runs: `ethdaq` builds its parser from this module.
"""

import argparse
import ipaddress
import re
import sys
import threading
import time
from dataclasses import dataclass, field

from ethdaq.host import argtypes, csrmap
from ethdaq.host.boardmetrics import PTP_COUNTERS, STATUS_COUNTERS
from ethdaq.wire import protocol

HELP = "EPICS IOC of boards: their counters and state as PVs, run start/stop and settings to write"
EPILOG = """\
examples:
  ethdaq ioc --board 192.168.1.50 --prefix LAB:DAQ1:
  ethdaq ioc --board 192.168.1.50=A --board 192.168.1.51:7001=B --prefix LAB:DAQ: --interval 2
  caget LAB:DAQ1:RUN:RUNNING LAB:DAQ1:S0:DATAGRAM_RATE; caput -c LAB:DAQ1:RUN:CTRL Start
(docs/epics.md: the PVs, and how to point a Channel Access or pvAccess client at the IOC)"""

# The records' DESC holds 40 characters; Channel Access carries 7 of EGU (MAX_UNITS_SIZE).
DESC_MAX, EGU_MAX = 40, 7
PV_NAME_MAX = 60               # EPICS base's longest record name.
LONG_STRING = 256              # Characters of the long-string PVs (identity, messages).

# A PV: its name after the prefix, record kind (int: int64in, float: ai, bool: bi, enum: mbbi,
# str: stringin, text: a long string; a setpoint's the matching output record, longout for int;
# int64: int64in and int64out), unit, description, for enums and booleans the state names, PREC
# for floats, and for a setpoint what a put does (write()); a front-end register's PVs carry it.
@dataclass(frozen=True)
class Pv:
    name:  str
    kind:  str
    egu:   str = ""
    desc:  str = ""
    states: tuple = ()
    prec:  int = 0
    write: str = ""            # A setpoint's action (`Writes`), "" for a read PV.
    register: csrmap.Register = None


PTP_STATE_NAMES  = tuple(protocol.PTP_STATES.get(i, "NONE") for i in range(max(protocol.PTP_STATES) + 1))
SERVO_NAMES      = tuple(protocol.SERVO_STATES[i] for i in range(len(protocol.SERVO_STATES)))
ROLE_NAMES       = tuple(protocol.PTP_ROLES[i] for i in range(len(protocol.PTP_ROLES)))
EMULATOR_NAMES   = tuple(sorted(protocol.EMULATOR_MODES, key=protocol.EMULATOR_MODES.get))
STATUS_UNITS = {"ctl_requests": "reqs", "ctl_refused": "reqs", "ctl_replayed": "reqs",
                "port_rx_dropped": "dgrams", "port_tx_dropped": "dgrams", "arp_timeouts": "reqs",
                "arp_refused": "frames", "rx_fcs_errors": "frames", "rx_preamble_errors": "frames",
                "link_losses": "losses", "watchdog_resets": "resets", "dst_mac_changes": "changes"}
STATUS_DESCS = {"ctl_requests": "control requests answered", "ctl_refused": "control requests refused or dropped",
                "ctl_replayed": "requests answered from the reply cache",
                "port_rx_dropped": "CPU-port datagrams dropped (rx)",
                "port_tx_dropped": "CPU-port datagrams dropped (tx)",
                "arp_timeouts": "destination ARP requests unanswered",
                "arp_refused": "ARP claims of the destination refused",
                "rx_fcs_errors": "received frames with a bad FCS",
                "rx_preamble_errors": "received frames with a bad preamble",
                "link_losses": "link losses since boot", "watchdog_resets": "watchdog resets since power-on",
                "dst_mac_changes": "destination MAC replaced by ARP"}
PTP_DESCS = {"steps": "clock steps", "announce_timeouts": "Announce receipt timeouts",
             "delay_resp_missing": "Delay_Req without Delay_Resp", "tx_ts_missing": "event messages without TX stamp",
             "rx_ts_missing": "event messages without RX stamp", "faults": "clock faults"}


def board_pvs():
    """Every PV of one board, in the order docs/epics.md lists them."""
    pvs = [
        Pv("ID:BOARD", "str", desc="board name (IDENTIFY)"),
        Pv("ID:BUILD", "text", desc="build id: the sources' git revision"),
        Pv("ID:FIRMWARE", "text", desc="SoC and firmware identifier"),
        Pv("ID:MAC", "str", desc="the board's MAC address"),
        Pv("ID:CHANNELS", "int", "chans", "stream channels of the build"),
        Pv("ID:SAMPLE_BITS", "int", "bit", "bits per sample"),
        Pv("COMM:UP", "bool", desc="the newest poll was answered", states=("No", "Yes")),
        Pv("COMM:FAILS", "int", "polls", "polls unanswered or refused"),
        Pv("COMM:MSG", "text", desc="why the newest poll failed"),
        Pv("STAT:UPTIME", "float", "s", "time since the board's last reset", prec=3),
        Pv("STAT:BOOTS", "int", "boots", "resets since power-on"),
        Pv("RUN:RUNNING", "bool", desc="a run is streaming", states=("Stopped", "Running")),
        Pv("RUN:NUMBER", "int", desc="the current or last run"),
        Pv("RUN:DATAGRAMS", "int", "dgrams", "DAQ datagrams sent since reset"),
        Pv("RUN:DATAGRAM_RATE", "float", "dgram/s", "datagrams sent per second", prec=1),
        Pv("RUN:DROPPED", "int", "samples", "samples dropped by the board this run"),
        Pv("LINK:UP", "bool", desc="the PHY reports link", states=("Down", "Up")),
        Pv("LINK:SPEED", "int", "Mb/s", "link speed (0: unknown)"),
        *(Pv(f"STAT:{name.upper()}", "int", STATUS_UNITS[name], STATUS_DESCS[name]) for name in STATUS_COUNTERS),
        Pv("CTL:CONTROLLER", "str", desc="the controller's IPv4 (empty: none)"),
        Pv("CTL:LEASE", "float", "s", "the controller's lease left", prec=1),
    ]
    for i in range(protocol.MAX_STREAMS):
        pvs += [Pv(f"S{i}:DATAGRAMS", "int", "dgrams", f"stream {i}: datagrams this run"),
                Pv(f"S{i}:BYTES", "int", "B", f"stream {i}: UDP payload bytes this run"),
                Pv(f"S{i}:DROPPED", "int", "samples", f"stream {i}: samples dropped this run"),
                Pv(f"S{i}:DATAGRAM_RATE", "float", "dgram/s", f"stream {i}: datagrams per second", prec=1),
                Pv(f"S{i}:BYTE_RATE", "float", "B/s", f"stream {i}: payload bytes per second", prec=0)]
    pvs += [Pv(f"RX:{name.upper()}", "int", "frames", f"received frames: {name}") for _, name, _ in protocol.RX_COUNTERS]
    pvs += [
        Pv("PTP:STATE", "enum", desc="PTP port state", states=PTP_STATE_NAMES),
        Pv("PTP:SERVO", "enum", desc="PTP servo state", states=SERVO_NAMES),
        Pv("PTP:OFFSET", "float", "ns", "offset from the master", prec=0),
        Pv("PTP:DELAY", "float", "ns", "mean path delay to the master", prec=0),
        Pv("PTP:FREQ", "float", "ppb", "servo frequency adjustment", prec=3),
        *(Pv(f"PTP:{name.upper()}", "int", "events", PTP_DESCS[name]) for name in PTP_COUNTERS),
        Pv("CFG:PAYLOAD_RBV", "int", "B", "UDP payload per datagram"),
        Pv("CFG:ENABLE_RBV", "int", desc="channel enable mask"),
        Pv("CFG:DST_IP_RBV", "str", desc="stream destination (empty: starter)"),
        Pv("CFG:DST_PORT_RBV", "int", desc="stream destination UDP port"),
        Pv("EMU:MODE_RBV", "enum", desc="emulator mode", states=EMULATOR_NAMES),
        Pv("EMU:RATE_RBV", "float", "smp/cyc", "emulator samples per cycle per channel", prec=6),
        Pv("PTP:ROLE_RBV", "enum", desc="PTP role", states=ROLE_NAMES),
        # Setpoints: a put is one request to the board.
        Pv("RUN:CTRL", "bool", desc="start (1) or stop (0) a run", states=("Stop", "Start"), write="run"),
        Pv("CFG:PAYLOAD", "int", "B", "UDP payload per datagram", write="payload"),
        Pv("CFG:ENABLE", "int", desc="channel enable mask", write="enable"),
        Pv("CFG:DST_IP", "str", desc="stream destination (empty: starter)", write="dst_ip"),
        Pv("CFG:DST_PORT", "int", desc="stream destination UDP port", write="dst_port"),
        Pv("EMU:MODE", "enum", desc="emulator mode", states=EMULATOR_NAMES, write="emulator_mode"),
        Pv("EMU:RATE", "float", "smp/cyc", "emulator samples per cycle per channel", prec=6,
           write="emulator_rate"),
        Pv("PTP:ROLE", "enum", desc="PTP role", states=ROLE_NAMES, write="ptp_role"),
        Pv("CTL:CLAIM", "bool", desc="claim (1) or release (0) the board", states=("Release", "Claim"),
           write="claim"),
        Pv("CTL:MSG", "text", desc="the newest write's outcome"),
        Pv("CTL:WRITE_ERRORS", "int", "writes", "writes refused or unanswered"),
    ]
    return pvs


def frontend_pvs(registers):
    """The PVs of a front-end's registers ({name: csrmap.Register}, from its csr.json): FE:NAME
    reads a read-only one; a writable one is the setpoint FE:NAME with readback FE:NAME_RBV."""
    pvs = []
    for reg in registers.values():
        kind = "int64" if reg.words <= 2 else "text"
        desc = f"front-end register {reg.name}"[:DESC_MAX]
        if reg.writable:
            pvs.append(Pv(register_pv(reg), kind, desc=desc, write="register", register=reg))
        pvs.append(Pv(register_read_pv(reg), kind, desc=desc, register=reg))
    return pvs


def register_pv(reg):
    """The name of a front-end register's PV (its setpoint's, when it has one)."""
    return f"FE:{reg.name.upper()}"


def register_read_pv(reg):
    """The name of the PV a poll sets for a front-end register: FE:NAME, or a setpoint's FE:NAME_RBV."""
    return register_pv(reg) + ("_RBV" if reg.writable else "")


def register_value(reg, value):
    """A register's value as its PV shows it: an int up to 64 bits, a hexadecimal string wider;
    None for a 64-bit value a signed PV cannot hold."""
    if reg.words > 2:
        return f"0x{value:0{8 * reg.words}x}"
    return value if value < 1 << 63 else None


def read_registers(client, registers):
    """Every register's value (REG_READ each), as register_value() shows it: {read PV name: value}."""
    out = {}
    for reg in registers.values():
        value = register_value(reg, reg.from_words(client.reg_read(reg.offset, reg.words)))
        out[register_read_pv(reg)] = value
    return out


# Values ---------------------------------------------------------------------------------------------

def rate(before, after, seconds):
    """Per second from a counter's two readings `seconds` apart; a counter that went down (a new
    run's) counts from 0. None without an earlier reading or time between them."""
    if before is None or after is None or seconds <= 0:
        return None
    return (after - before if after >= before else after) / seconds


def values(poll, earlier=None, seconds=0.0):
    """{PV name: value} of one answered poll (boardmetrics.poll with settings), rates against the
    `earlier` one `seconds` before. None: the board's build does not have that value. Enums are
    their state's index; COMM and CTL PVs are the IOC's own and not here."""
    st, ptp, cfg, info = poll["status"], poll["ptp"], poll["config"], poll["info"]
    prev = earlier or {}
    v = {
        "ID:BOARD": info["board_name"], "ID:BUILD": info["build_id"], "ID:FIRMWARE": info["ident"],
        "ID:MAC": info["mac"], "ID:CHANNELS": int(info["channels"]), "ID:SAMPLE_BITS": int(info["sample_bits"]),
        "STAT:UPTIME": st["uptime_ms"] / 1000, "STAT:BOOTS": st["boots"],
        "RUN:RUNNING": int(bool(st["running"])), "RUN:NUMBER": st["run"], "RUN:DATAGRAMS": st["datagrams"],
        "RUN:DATAGRAM_RATE": rate(prev.get("status", {}).get("datagrams"), st["datagrams"], seconds),
        "RUN:DROPPED": st["dropped"], "LINK:UP": int(poll["link_up"]), "LINK:SPEED": st["link_speed"],
        "CTL:CONTROLLER": str(ipaddress.IPv4Address(st["controller_ip"])) if st["controller_ip"] else "",
        "CTL:LEASE": st["lease_ms"] / 1000 if st["controller_ip"] else 0.0,
        "PTP:STATE": _index(PTP_STATE_NAMES, ptp["state"]), "PTP:SERVO": _index(SERVO_NAMES, ptp["servo"]),
        "PTP:OFFSET": float(ptp["offset_ns"]), "PTP:DELAY": float(ptp["delay_ns"]), "PTP:FREQ": ptp["freq_ppb"],
        "CFG:PAYLOAD_RBV": cfg["payload"], "CFG:ENABLE_RBV": cfg["enable"],
        "CFG:DST_IP_RBV": str(ipaddress.IPv4Address(cfg["dst_ip"])) if cfg["dst_ip"] else "",
        "CFG:DST_PORT_RBV": cfg["dst_port"], "EMU:MODE_RBV": cfg["emulator_mode"],
        "EMU:RATE_RBV": protocol.emulator_rate_fraction(cfg["emulator_rate"]), "PTP:ROLE_RBV": cfg["ptp_role"],
    }
    v.update({f"STAT:{name.upper()}": st[name] for name in STATUS_COUNTERS})
    v.update({f"PTP:{name.upper()}": ptp[name] for name in PTP_COUNTERS})
    v.update({f"RX:{name.upper()}": poll["rx"].get(name) for _, name, _ in protocol.RX_COUNTERS})
    v.update(poll.get("registers", {}))
    streams = {s[0]: s for s in poll["streams"]}
    earlier_streams = {s[0]: s for s in prev.get("streams", [])}
    for i in range(protocol.MAX_STREAMS):
        s, e = streams.get(i), earlier_streams.get(i)
        v[f"S{i}:DATAGRAMS"], v[f"S{i}:BYTES"], v[f"S{i}:DROPPED"] = s[1:] if s else (None, None, None)
        v[f"S{i}:DATAGRAM_RATE"] = rate(e and e[1], s and s[1], seconds)
        v[f"S{i}:BYTE_RATE"] = rate(e and e[2], s and s[2], seconds)
    return v


# The read PVs a poll sets (the others are the IOC's own, and the setpoints).
POLLED = tuple(pv.name for pv in board_pvs()
               if not pv.write and not pv.name.startswith(("COMM:", "CTL:MSG", "CTL:WRITE")))


def _index(names, name):
    """The index of a state's name; None for one this host does not know."""
    return names.index(name) if name in names else None


# Writes ---------------------------------------------------------------------------------------------

class WriteRefused(Exception):
    """A write that did not take: its one-line reason; `comm` when the board did not answer."""

    def __init__(self, text, comm=False):
        super().__init__(text)
        self.comm = comm


def config_value(action, value):
    """A setpoint's value as CONFIG_SET takes it, checked against the protocol's range (the board
    checks its own, narrower, one): ValueError naming the field otherwise."""
    if action == "dst_ip":
        text = str(value).strip()
        if text in ("", "0", "0.0.0.0"):
            return 0
        try:
            return int(ipaddress.IPv4Address(text))
        except ValueError:
            raise ValueError(f"dst_ip must be an IPv4 address (empty: the host that starts the run), "
                             f"not {text!r}") from None
    if action == "emulator_rate":
        return protocol.emulator_rate_fixed(value)
    return protocol.check_field(action, int(value))


def write(client, action, value, register=None):
    """One setpoint's put as its request to the board (`client` a ControlClient; `register` the
    csrmap.Register of a front-end register's): the outcome as text; WriteRefused when the board
    refuses it, does not answer or the value cannot be sent."""
    from ethdaq.host.ctl import ControlRefused, ControlTimeout
    try:
        if action == "run":
            return _start(client) if value else _stop(client)
        if action == "claim":
            if not value:
                client.release()
                return "released"
            granted, holder, left = client.claim()
            if not granted:
                raise WriteRefused(f"the board is held by {ipaddress.IPv4Address(holder)} for another "
                                   f"{left / 1000:.1f} s")
            return f"claimed for {left / 1000:.0f} s"
        if action == "register":
            return _write_register(client, register, value)
        client.config_set(**{action: config_value(action, value)})
        return f"{action} set (CONFIG_SET)"
    except ControlRefused as e:
        raise WriteRefused(str(e)) from None
    except ControlTimeout as e:
        raise WriteRefused(str(e), comm=True) from None
    except ValueError as e:
        raise WriteRefused(str(e)) from None


def _write_register(client, reg, value):
    """REG_WRITE of `value` (an int, or a string of a number in any base Python reads) to `reg`."""
    if isinstance(value, str):
        try:
            value = int(value.strip(), 0)
        except ValueError:
            raise ValueError(f"{reg.name} takes a number (e.g. 1500 or 0x5dc), not {value!r}") from None
    back = reg.from_words(client.reg_write(reg.offset, reg.to_words(int(value))))
    return f"{reg.name} written (REG_WRITE), reads back {back}"


def _start(client):
    """STREAM_START with the board's settings (CONFIG_GET), as `ethdaq ctl start` without options."""
    cfg = client.config()
    fields = {name: getattr(cfg, name) for name in protocol.STREAM_START_FIELDS}
    fields["dst_mac"] = None if fields["dst_mac"] == bytes(6) else protocol.format_mac(fields["dst_mac"])
    run, dst = client.stream_start(**fields)
    return f"run {run} started: datagrams of {cfg.payload} bytes to {ipaddress.IPv4Address(dst)}:{cfg.dst_port}"


def _stop(client):
    return f"run {client.stream_stop()} stopped"


# Command line ---------------------------------------------------------------------------------------

@dataclass
class Board:
    """One --board: its address, control port, and the part of its PV names after the prefix."""
    ip:   str
    port: int = 7000
    name: str = ""
    registers: dict = field(default_factory=dict)          # Its front-end's, from --csr: {name: csrmap.Register}.


PV_CHARS = re.compile(r"[A-Za-z0-9_:.;<>\[\]{}-]*")


def board_arg(text):
    """--board ADDR[:PORT][=NAME] as a Board (argparse type)."""
    where, _, name = text.partition("=")
    addr, _, port = where.partition(":")
    try:
        ipaddress.IPv4Address(addr)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--board must be ADDR[:PORT][=NAME] with ADDR an IPv4 address, "
                                         f"not {text!r}") from None
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise argparse.ArgumentTypeError(f"--board's port must be 1 to 65535, not {port!r}")
    if "=" in text and not (name and PV_CHARS.fullmatch(name)):
        raise argparse.ArgumentTypeError(f"--board's NAME must be letters, digits and _-:.;<>[]{{}}, not {name!r}")
    return Board(addr, int(port) if port else 7000, f"{name}:" if name else "")


def prefix_arg(text):
    if not PV_CHARS.fullmatch(text):
        raise argparse.ArgumentTypeError(f"--prefix must be letters, digits and _-:.;<>[]{{}}, not {text!r}")
    return text


def add_arguments(p):
    p.add_argument("--board", type=board_arg, action="append", required=True, metavar="ADDR[:PORT][=NAME]",
                   help="a board's IPv4 address and control port (default 7000); repeat for more. Its PVs are "
                        "named PREFIX, then NAME:, then the PV's own name (e.g. LAB:DAQ1:A:RUN:CTRL); one board "
                        "without NAME has none (LAB:DAQ1:RUN:CTRL), several are B1:, B2:, ... in order")
    p.add_argument("--prefix", type=prefix_arg, required=True, metavar="PREFIX",
                   help="the start of every PV name, as given (end it with a colon: LAB:DAQ1:)")
    p.add_argument("--interval", type=argtypes.positive("--interval"), default=1.0, metavar="S",
                   help="seconds between polls of each board (default 1)")
    p.add_argument("--timeout", type=argtypes.positive("--timeout"), default=1.0, metavar="S",
                   help="seconds per try of each request (3 tries)")
    p.add_argument("--key-file", "--key", dest="key_file", metavar="FILE",
                   help="the boards' shared key (hex): sign every request")
    p.add_argument("--csr", action="append", default=[], metavar="[NAME=]FILE",
                   help="the csr.json of a board's build with --frontend (OUTPUT_DIR/csr.json): its front-end's "
                        "registers become PVs FE:REGISTER. NAME= gives it to the board of that NAME only; without, "
                        "to every board no other --csr names")


def assign_csr(boards, csrs):
    """Each --csr [NAME=]FILE's registers to its board (after check_boards named them): IocError
    for a NAME no board has, two for one board, or a file that is not a front-end build's csr.json."""
    by_name = {b.name.rstrip(":"): b for b in boards}
    named, default = {}, None
    for text in csrs:
        name, eq, path = text.partition("=")
        if not eq:
            if default is not None:
                raise IocError(f"--csr {text}: a second --csr without NAME= (give the others NAME=FILE)")
            default = text
        elif name not in by_name:
            raise IocError(f"--csr {text}: no --board is named {name!r} (the boards: "
                           f"{', '.join(n or '(unnamed)' for n in by_name)})")
        elif name in named:
            raise IocError(f"--csr {text}: a second --csr for the board {name}")
        else:
            named[name] = path
    loaded = {}
    for b in boards:
        path = named.get(b.name.rstrip(":"), default)
        if path is not None:
            if path not in loaded:
                try:
                    loaded[path] = csrmap.frontend_registers(path)
                except ValueError as e:
                    raise IocError(f"--csr: {e}") from None
            b.registers = loaded[path]


class IocError(Exception):
    """The IOC cannot start, as one line."""


def check_boards(boards, prefix):
    """Name the unnamed boards when there are several; refuse duplicate names and names too long."""
    if len(boards) > 1:
        for i, b in enumerate(boards, 1):
            b.name = b.name or f"B{i}:"
    names = [b.name for b in boards]
    for name in names:
        if names.count(name) > 1:
            raise IocError(f"two boards are named {name.rstrip(':') or '(none)'}: give each --board its own =NAME")
    for b in boards:
        full = prefix + b.name
        longest = max(len(p.name) for p in board_pvs() + frontend_pvs(b.registers))
        if len(full) + longest > PV_NAME_MAX:
            raise IocError(f"PV names of {b.ip} would be up to {len(full) + longest} characters, EPICS takes "
                           f"{PV_NAME_MAX}: shorten --prefix or the board's NAME")


def read_key(path):
    try:
        return protocol.read_key_file(path)
    except ValueError as e:
        raise IocError(str(e)) from None


def main(args, err=sys.stderr):
    """`ethdaq ioc`: the exit status; a one-line error for what stops it from starting."""
    try:
        key = read_key(args.key_file) if args.key_file else None
        check_boards(args.board, args.prefix)
        assign_csr(args.board, args.csr)
        check_boards(args.board, args.prefix)   # Again with the front-ends' PV names.
        return serve(args.board, args.prefix, interval=args.interval, timeout=args.timeout, key=key, err=err)
    except IocError as e:
        err.write(f"Error: {e}\n")
        return 2


# The IOC -------------------------------------------------------------------------------------------

class BoardPvs:
    """One board's records: a thread polls it every interval and sets the read PVs; a put to a
    setpoint sends its request from the thread that processes the put (the IOC's server's)."""

    def __init__(self, board, timeout, key):
        from ethdaq.host.ctl import ControlClient
        self.board, self.timeout, self.key = board, timeout, key
        self.poll, self.polled_at, self.values, self.error = None, None, {}, "not polled yet"
        self.fails = self.write_errors = 0
        self.pvs = board_pvs() + frontend_pvs(board.registers)
        self.polled = POLLED + tuple(pv.name for pv in self.pvs if pv.register and not pv.write)
        self.records = {}
        self.wake = threading.Event()          # A write, or the end: poll now.
        self.stopping = False
        self._writer = ControlClient(board.ip, board.port, timeout=timeout, key=key)
        self._write_lock = threading.Lock()

    def poll_once(self):
        """Ask the board (boardmetrics.poll); the values, or why there are none, for publish()."""
        from ethdaq.host import boardmetrics
        from ethdaq.host.ctl import ControlClient, ControlRefused, ControlTimeout
        try:
            with ControlClient(self.board.ip, self.board.port, timeout=self.timeout, key=self.key) as client:
                poll = boardmetrics.poll(client, settings=True)
                if poll["capabilities"] & protocol.CAP_FRONTEND:
                    poll["registers"] = read_registers(client, self.board.registers)
        except (ControlTimeout, ControlRefused, protocol.ProtocolError) as e:
            self.fails += 1
            self.error = str(e)
            return
        now = time.monotonic()
        self.values = values(poll, self.poll, now - self.polled_at if self.poll else 0.0)
        self.poll, self.polled_at, self.error = poll, now, ""

    def make_records(self, builder, prefix):
        """Every PV of the board (before iocInit); setpoints start at the board's settings when the
        first poll was answered."""
        start = self._setpoints_now()
        for pv in self.pvs:
            name = prefix + self.board.name + pv.name
            self.records[pv.name] = _record(builder, name, pv, start.get(pv.name),
                                            (lambda dev, value, pv=pv: self._put(dev, pv, value)) if pv.write else None)
        self.records["CTL:MSG"].set("")
        self.records["CTL:WRITE_ERRORS"].set(0)

    def _setpoints_now(self):
        if not self.poll:
            return {}
        v = self.values
        return {**{register_pv(r): v.get(register_read_pv(r)) for r in self.board.registers.values() if r.writable},
                "RUN:CTRL": v["RUN:RUNNING"], "CFG:PAYLOAD": v["CFG:PAYLOAD_RBV"], "CFG:ENABLE": v["CFG:ENABLE_RBV"],
                "CFG:DST_IP": v["CFG:DST_IP_RBV"], "CFG:DST_PORT": v["CFG:DST_PORT_RBV"],
                "EMU:MODE": v["EMU:MODE_RBV"], "EMU:RATE": v["EMU:RATE_RBV"], "PTP:ROLE": v["PTP:ROLE_RBV"],
                "CTL:CLAIM": 0}

    def publish(self):
        """The newest poll into the read PVs: its values, or with the last ones INVALID (COMM) when
        it was not answered; a value the build lacks INVALID (UDF)."""
        from softioc import alarm
        for name in self.polled:
            rec, value = self.records[name], self.values.get(name)
            if self.error:
                rec.set(rec.get(), severity=alarm.INVALID_ALARM, alarm=alarm.COMM_ALARM)
            elif value is None:
                rec.set(rec.get(), severity=alarm.INVALID_ALARM, alarm=alarm.UDF_ALARM)
            else:
                rec.set(value)
        self.records["COMM:UP"].set(0 if self.error else 1)
        self.records["COMM:FAILS"].set(self.fails)
        self.records["COMM:MSG"].set(self.error)

    def run(self, interval):
        """The poll loop (a thread's): until stop()."""
        while not self.stopping:
            self.poll_once()
            self.publish()
            self.wake.wait(interval)
            self.wake.clear()

    def stop(self):
        self.stopping = True
        self.wake.set()

    def _put(self, dev, pv, value):
        """softioc's validate of a setpoint: send the write; False (the put is not taken) when it
        was refused or not answered, with the record's alarm raised (softioc keeps none for a
        refused put), CTL:MSG saying why and CTL:WRITE_ERRORS counting it."""
        from softioc import alarm
        shown = pv.states[value] if pv.states and 0 <= value < len(pv.states) else value   # A state by its name.
        with self._write_lock:
            try:
                text = write(self._writer, pv.write, value, pv.register)
            except WriteRefused as e:
                self.write_errors += 1
                status = alarm.COMM_ALARM if e.comm else alarm.WRITE_ALARM
                dev.process_severity(dev._record, alarm.MAJOR_ALARM, status)
                self.records["CTL:MSG"].set(_text(f"{pv.name} {shown}: {e}"), severity=alarm.MAJOR_ALARM, alarm=status)
                self.records["CTL:WRITE_ERRORS"].set(self.write_errors)
                return False
        self.records["CTL:MSG"].set(_text(f"{pv.name} {shown}: {text}"))
        self.wake.set()
        return True


def _text(text):
    """A long-string PV's value: what fits."""
    return text if len(text) < LONG_STRING else text[:LONG_STRING - 4] + "..."


def _record(builder, name, pv, initial, validate):
    """The softioc record of `pv` named `name`: a setpoint with `validate` (and `initial` value
    when known), else a read PV."""
    fields = dict(DESC=pv.desc)
    if pv.egu:
        fields["EGU"] = pv.egu
    if pv.kind == "float":
        fields["PREC"] = pv.prec
    if pv.kind == "bool":
        fields.update(ZNAM=pv.states[0], ONAM=pv.states[1])
        if pv.name == "COMM:UP":
            fields["ZSV"] = "MAJOR"
    if validate is not None:
        fields.update(validate=validate, always_update=True)
        if initial is not None:
            fields["initial_value"] = initial
        make = {"int": builder.longOut, "int64": builder.int64Out, "float": builder.aOut, "bool": builder.boolOut,
                "str": builder.stringOut, "enum": builder.mbbOut, "text": builder.longStringOut}[pv.kind]
    else:
        make = {"int": builder.int64In, "int64": builder.int64In, "float": builder.aIn, "bool": builder.boolIn,
                "str": builder.stringIn, "enum": builder.mbbIn, "text": builder.longStringIn}[pv.kind]
    if pv.kind == "text":
        fields["length"] = LONG_STRING
    return make(name, *pv.states, **fields) if pv.kind == "enum" else make(name, **fields)


def serve(boards, prefix, interval=1.0, timeout=1.0, key=None, err=sys.stderr):
    """Serve the PVs of `boards` (each polled every `interval` s) until SIGINT or SIGTERM; 0. A
    signal during the start (the first polls wait for boards that do not answer) stops it once
    the IOC is up."""
    import signal
    stop = threading.Event()
    old = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    pvs, threads = [], []
    try:
        from softioc import asyncio_dispatcher, builder, softioc   # About a second: EPICS base loads.
        dispatcher = asyncio_dispatcher.AsyncioDispatcher()
        pvs = [BoardPvs(b, timeout, key) for b in boards]
        for b in pvs:
            b.poll_once()      # The setpoints start at the board's settings when it answers.
            if b.board.registers and b.poll and not b.poll["capabilities"] & protocol.CAP_FRONTEND:
                raise IocError(f"--csr: the board at {b.board.ip} has no front-end (its build {b.poll['info']['build_id']} "
                               "was made without --frontend)")
            b.make_records(builder, prefix)
        builder.LoadDatabase()
        softioc.iocInit(dispatcher)
        threads = [threading.Thread(target=b.run, args=(interval,), name=f"poll {b.board.ip}", daemon=True)
                   for b in pvs]
        for t in threads:
            t.start()
        count = sum(len(b.records) for b in pvs)
        err.write(f"serving {count} PVs of {', '.join(f'{b.ip}:{b.port} as {prefix}{b.name}' for b in boards)} "
                  f"over Channel Access and pvAccess, a poll every {interval:g} s; Ctrl-C stops\n")
        err.flush()
        stop.wait()
    finally:
        for b in pvs:
            b.stop()
        for t in threads:
            t.join()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return 0
