"""Helpers for test_ptp_interop.py: the simulated board's PTP stack against linuxptp's ptp4l on
the simulation's tap, with tcpdump + tshark as an independent decoder.

Time runs at two rates here: ptp4l and tshark live in wall-clock time, the board in simulated
time, about 1000x slower (~1.5 ms of simulated time per wall second, less when the machine is
busy). Intervals on each side are chosen so that the other side sees messages at sane rates in
its own time (see the constants of test_ptp_interop.py).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO, ethdaq_cmd

TAP       = "ethdaq0"
BOARD_IP  = "192.168.1.50"     # the build's defaults (DEFAULT_IP, DEFAULT_MAC)
HOST_IP   = "192.168.1.100"
BOARD_MAC = "10:e2:d5:00:00:00"
BOARD_CLOCK = "10e2d5fffe000000"   # EUI-64 of the MAC: 10e2d5 ff fe 000000
PTP_MCAST = "224.0.1.129"
PTP_L2_MCAST = "01:1b:19:00:00:00"

TOOLS = ("ptp4l", "tshark", "tcpdump", "verilator")

# messageType (IEEE 1588-2008 Table 19)
SYNC, DELAY_REQ, FOLLOW_UP, DELAY_RESP, ANNOUNCE = 0x0, 0x1, 0x8, 0x9, 0xB
TYPE_NAMES = {SYNC: "Sync", DELAY_REQ: "Delay_Req", FOLLOW_UP: "Follow_Up", DELAY_RESP: "Delay_Resp",
              ANNOUNCE: "Announce"}
EVENT_PORT, GENERAL_PORT = 319, 320

# The status line's drop counters for messages that fail the header checks (malformed, foreign
# version, type/length inconsistent): none of ptp4l's may land there.
MALFORMED_DROPS = ("drop_short", "drop_version", "drop_type", "drop_type_length", "drop_length")


def missing_tools():
    return [t for t in TOOLS if shutil.which(t) is None]


def clock_id(text):
    """A clock identity as 16 lower-case hex digits, from ptp4l's 'aabbcc.fffe.ddeeff', the
    board's 'aabbccfffeddeeff' or tshark's '0xaabbccfffeddeeff'."""
    text = text.strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    text = text.replace(".", "")
    assert re.fullmatch(r"[0-9a-f]{16}", text), f"not a clock identity: {text!r}"
    return text


# --- building and running ---------------------------------------------------------------------

def build_board(name, *options, board="sim"):
    """The simulated board (`board`: sim, or sim10g) built by the CLI in its own process, as a
    user would, into build/test-ptp-<name>; returns its gateware directory. Reused when nothing
    changed (the Verilator compile is skipped when its sources are the same)."""
    out = REPO / "build" / f"test-ptp-{name}"
    r = subprocess.run(ethdaq_cmd("build", "--board", board, "--output-dir", str(out), *options),
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout + r.stderr
    gateware = out / "gateware"
    from ethdaq.boards import get_board
    from ethdaq.soc import build
    build.write_sim_config(get_board(board), gateware, tap=TAP, host_ip=HOST_IP)
    return gateware


def eui64_clock(mac):
    """The clock identity ptp4l (and the board) derive from a MAC: OUI, ff fe, the rest."""
    b = mac.lower().split(":")
    return "".join(b[:3]) + "fffe" + "".join(b[3:])


def tap_clock(netns):
    """ptp4l's clock identity on the tap: from the tap's MAC, which the simulator chooses."""
    r = subprocess.run(["ip", "netns", "exec", netns, "cat", f"/sys/class/net/{TAP}/address"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return eui64_clock(r.stdout.strip())


def netns_exists(name):
    return name in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


class Background:
    """A program running inside the namespace; its output lines (stdout and stderr) are
    collected in `lines` and written to `log`. stop() ends it and its process group."""

    def __init__(self, netns, cmd, log):
        self.cmd = cmd
        self.lines = []
        self._cond = threading.Condition()
        self._log = open(log, "w")
        # `ip netns exec` enters the namespace and execs the program: same pid, own group.
        self.proc = subprocess.Popen(["ip", "netns", "exec", netns, *cmd], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", start_new_session=True)
        self._thread = threading.Thread(target=self._reader, daemon=True)
        self._thread.start()

    def _reader(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self._log.write(line + "\n")
            self._log.flush()
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern, timeout):
        """The first match of `pattern` (a regex) in the output, waiting up to `timeout` s;
        None on timeout or if the program exited without printing it."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    m = rx.search(line)
                    if m:
                        return m
                if self.proc.poll() is not None and not self._thread.is_alive():
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(min(left, 0.5))

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self._thread.join(timeout=10)
        self._log.close()
        return self.proc.returncode


def wait_console(session, predicate, timeout):
    """The first console line of the simulation for which predicate(line) is true (a regex
    match object or any true value), polling; None on timeout or if the simulation exited."""
    deadline = time.monotonic() + timeout
    seen = 0
    while True:
        lines = session.lines[:]  # appended to by SimSession's reader thread
        for line in lines[seen:]:
            r = predicate(line)
            if r:
                return r
        seen = len(lines)
        if session.proc.poll() is not None or time.monotonic() > deadline:
            return None
        time.sleep(0.2)


def board_status(netns):
    """The board's control-port STATUS (ethdaq ctl status): port_rx_dropped counts datagrams the
    CPU's UDP mailbox (shared by the control port and PTP's 319/320) had no room for; or
    None if the board does not answer (the tests that need it say so)."""
    import json
    r = subprocess.run(["ip", "netns", "exec", netns, *ethdaq_cmd("ctl", "status", "--ip", BOARD_IP, "--json")],
                       capture_output=True, text=True, timeout=120)
    return json.loads(r.stdout) if r.returncode == 0 else None


# --- ptp4l --------------------------------------------------------------------------------------

def write_ptp4l_config(path, **options):
    """A ptp4l configuration file: [global] with `options` (key=value). free_running is always
    set: with software timestamping ptp4l's clock is CLOCK_REALTIME, which network namespaces
    do not separate, and a ptp4l slave would otherwise step the machine's clock to the board's
    time (1970)."""
    options = {"free_running": 1, "time_stamping": "software", "delay_mechanism": "E2E", **options}
    path.write_text("[global]\n" + "".join(f"{k} {v}\n" for k, v in options.items()))
    return path


# ptp4l lines that mean it rejected or missed something (format strings of linuxptp 3.1).
PTP4L_COMPLAINTS = re.compile(r"bad message|ignoring message|without timestamp|dropping|bogus|failed|"
                              r"\bFAULTY\b|FAULT_DETECTED|rogue|timed out|missing|unexpected", re.IGNORECASE)


def ptp4l_complaints(lines):
    return [line for line in lines if PTP4L_COMPLAINTS.search(line) and " item " not in line]


# Re-sends each Announce of the board once, at once, to ptp4l on the same host only (TTL 0:
# looped back, never on the tap). See test_ptp_interop.py, test (b): ptp4l qualifies a foreign
# master only with two Announces within 4 of its *advertised* intervals of wall-clock time, which
# a board running 1000x slower than real time can never meet by itself.
ANNOUNCE_REPEATER = r"""
import socket, struct, sys
board, host, group, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", port))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton(host))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(host))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
print("repeating", flush=True)
while True:
    data, (src, _) = s.recvfrom(2048)
    if src == board and len(data) >= 34 and data[0] & 0x0f == 0x0b:
        s.sendto(data, (group, port))
        print("repeated Announce", struct.unpack_from(">H", data, 30)[0], flush=True)
"""


def start_announce_repeater(netns, log):
    return Background(netns, [sys.executable, "-u", "-c", ANNOUNCE_REPEATER, BOARD_IP, HOST_IP, PTP_MCAST,
                              str(GENERAL_PORT)], log)


# --- the board's console --------------------------------------------------------------------------

STATUS_LINE = re.compile(r"^ptp: (state=\S+ .*)$")


def parse_status(line):
    """The board's full status line ("ptp: state=... key=value ...") as a dict, else None."""
    m = STATUS_LINE.match(line.strip())  # the console starts lines with "\r"
    if not m:
        return None
    return dict(item.split("=", 1) for item in m.group(1).split())


def statuses(lines):
    return [s for s in map(parse_status, lines) if s]


def transitions(lines):
    """The board's port state changes, as (from, to) in order."""
    return [tuple(m.groups()) for m in (re.match(r"^ptp: state (\S+) -> (\S+)$", line.strip()) for line in lines)
            if m]


# --- the capture ----------------------------------------------------------------------------------

CAPTURE_FIELDS = [
    "frame.number", "frame.time_epoch", "eth.src", "eth.dst", "eth.type", "ip.src", "ip.dst", "ip.ttl",
    "ip.checksum.status", "udp.srcport", "udp.dstport", "udp.checksum.status",
    "ptp.v2.versionptp", "ptp.v2.messagetype", "ptp.v2.messagelength", "ptp.v2.domainnumber",
    "ptp.v2.flags.twostep", "ptp.v2.clockidentity", "ptp.v2.sourceportid", "ptp.v2.sequenceid",
    "ptp.v2.controlfield", "ptp.v2.logmessageperiod", "ptp.v2.dr.requestingsourceportidentity",
    "ptp.v2.dr.requestingsourceportid", "ptp.v2.an.grandmasterclockidentity",
    "ptp.v2.an.grandmasterclockclass", "ptp.v2.an.priority1", "ptp.v2.an.localstepsremoved",
    "ptp.v2.sdr.origintimestamp.seconds", "ptp.v2.fu.preciseorigintimestamp.seconds",
    "ptp.v2.fu.preciseorigintimestamp.nanoseconds", "ptp.v2.dr.receivetimestamp.seconds",
    "_ws.malformed", "_ws.expert.severity",
]


def tshark(args, tmp, timeout=120, check=True):
    # HOME elsewhere: no user preferences or plugins change the decoding.
    r = subprocess.run(["tshark", *args], capture_output=True, text=True, timeout=timeout,
                       env={"HOME": str(tmp), "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert r.returncode == 0 or not check, r.stderr
    return r.stdout


def decode_ptp(pcap, tmp, check=True):
    """Every frame tshark decodes as PTP, as a Frame: a dict of CAPTURE_FIELDS (names without
    the 'ptp.v2.' prefix), checksums verified. check=False: of a capture still being written
    (its last packet may be cut)."""
    out = tshark(["-r", str(pcap), "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
                  "-Y", "ptp", "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,",
                  *[a for f in CAPTURE_FIELDS for a in ("-e", f)]], tmp, check=check)
    rows = []
    for line in out.splitlines():
        values = line.split("|")
        assert len(values) == len(CAPTURE_FIELDS), line
        rows.append(Frame({f.replace("ptp.v2.", ""): v for f, v in zip(CAPTURE_FIELDS, values)}))
    return rows


def wait_capture(pcap, tmp, predicate, timeout):
    """Poll a running capture (tcpdump -U writes each packet at once) until predicate(frames) is
    true; the frames then, or None on timeout."""
    deadline = time.monotonic() + timeout
    peek = tmp / "peek.pcap"
    while True:
        shutil.copyfile(pcap, peek)
        frames = decode_ptp(peek, tmp, check=False)
        if predicate(frames):
            return frames
        if time.monotonic() > deadline:
            return None
        time.sleep(2)


def flagged_frames(pcap, tmp):
    """PTP frames that tshark marks malformed or with an expert info of severity error (bad
    checksums included)."""
    out = tshark(["-r", str(pcap), "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
                  "-Y", "ptp && (_ws.malformed || _ws.expert.severity >= \"error\")", "-T", "fields",
                  "-e", "frame.number", "-e", "frame.protocols", "-e", "_ws.expert.message"], tmp)
    return [line for line in out.splitlines() if line.strip()]


class Frame(dict):
    @property
    def type(self):
        return int(self["messagetype"], 0)

    @property
    def seq(self):
        return int(self["sequenceid"])

    @property
    def clock(self):
        return clock_id(self["clockidentity"])

    @property
    def name(self):
        return TYPE_NAMES.get(self.type, hex(self.type))


@dataclass
class Run:
    """What one board-vs-ptp4l run left behind, for the tests to judge."""
    console:  list = field(default_factory=list)
    ptp4l:    list = field(default_factory=list)
    frames:   list = field(default_factory=list)
    flagged:  list = field(default_factory=list)
    ptp4l_clock: str = None
    pcap:     Path = None
    ptp4l_exit: int = None
    board_status: dict = None   # ethdaq ctl status at the end of the run
    milestones: dict = field(default_factory=dict)  # name -> seconds after ptp4l started, or None
    transport: str = "udp"
