"""The simulated board on a tap inside a private network namespace, against real Linux programs:
ping, arping, UDP sockets, tcpdump + tshark as independent decoders."""

import contextlib
import ipaddress
import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import REPO, ethdaq_cmd, requires_root
from ethdaq.boards import get_board
from ethdaq.soc import build, sim
from ethdaq.soc.gitrev import git_hash
from ethdaq.wire import daqformat, protocol

pytestmark = [requires_root, pytest.mark.network]

NETNS    = "ethdaq-test"
TAP      = "ethdaq0"
BOARD_IP = "192.168.77.50"
HOST_IP  = "192.168.77.1"
GATEWAY  = "192.168.77.254"  # The router to other subnets (test_network_gateway.py): none answers here.
MAC      = "10:e2:d5:00:00:77"
CTL_PORT = 7001
FASTTRACK_PORT = 9000
CLK_NS = 8   # The simulated board's GMII clock, 125 MHz.


@pytest.fixture(scope="module")
def board():
    # Built by the CLI in its own process, as a user would: LiteX's generated names depend on
    # what else the process has elaborated, so an in-process build could differ from the CLI's.
    # With the receive classifier and frame gate (--fasttrack-port), so every test here also
    # runs through them, and with the latency probes (--with-probes). Its console's periodic PTP
    # line has the full status line after it (--ptp-status-full).
    r = subprocess.run(ethdaq_cmd("build", "--board", "sim", "--ip", BOARD_IP, "--netmask", "24", "--gateway", GATEWAY,
                                  "--mac", MAC, "--ctl-port",
                                  str(CTL_PORT), "--pin-probe", "--fasttrack-port", str(FASTTRACK_PORT),
                                  "--with-probes", "--ptp-status-full", "--output-dir", str(REPO / "build" / "test-sim")),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    # The tap name and host address are run-time settings of the simulation modules.
    build.write_sim_config(get_board("sim"), REPO / "build" / "test-sim" / "gateware", tap=TAP, host_ip=HOST_IP)
    session = sim.SimSession(REPO / "build" / "test-sim" / "gateware", netns=NETNS, echo=False,
                             log=REPO / "build" / "test-sim" / "console-fixture.log")
    with session:
        wait_console(session, "ethdaq ready", timeout=180)
        yield session
    assert NETNS not in sim.list_netns()


def console_text(session):
    """The board's console as one text, without the pin probe's lines (--pin-probe), which the
    simulator prints at once and so can land inside a line the firmware is still printing."""
    return re.sub(r"\r?probe: (?:rx-end|tx-start) \d+\n|\r?probe: launch \d+ time \d+ \d+\n", "", "\n".join(session.lines) + "\n")


def wait_console(session, text, timeout):
    """Wait until the console shows `text`, read as console_text reads it: the pin probe's lines,
    printed at once by the simulator, can split a line the firmware is still printing."""
    deadline = time.monotonic() + timeout
    while text not in console_text(session):
        if session.proc.poll() is not None:
            raise sim.SimError(f"simulation exited (code {session.proc.returncode}) before printing {text!r}")
        if time.monotonic() > deadline:
            raise sim.SimError(f"simulation did not print {text!r} within {timeout:g} s")
        time.sleep(0.1)


class Capture:
    """tcpdump on the tap while the block runs. In immediate mode each packet reaches tcpdump as
    it arrives (not in blocks flushed once a second), and on leaving the block it waits until the
    file has stopped growing: SIGTERM loses what tcpdump has not yet read, so stopping it at once
    can cut the capture's last packets."""

    def __init__(self, pcap, expr, count=None, netns=NETNS, tap=TAP):
        self.pcap, self.expr, self.count = pcap, expr, count
        self.netns, self.tap = netns, tap

    def __enter__(self):
        cmd = ["ip", "netns", "exec", self.netns, "tcpdump", "-i", self.tap, "--immediate-mode", "-U", "-n"]
        cmd += ["-c", str(self.count)] if self.count else []
        self.proc = subprocess.Popen(cmd + ["-w", str(self.pcap), self.expr], stderr=subprocess.PIPE, text=True)
        self.proc.stderr.readline()  # "listening on ...": capturing.
        return self

    def wait(self, timeout):
        """With a count: wait until tcpdump has captured that many and exited."""
        self.proc.wait(timeout=timeout)

    def __exit__(self, *exc):
        size, quiet = -1, 0
        deadline = time.monotonic() + 10
        while self.proc.poll() is None and quiet < 3 and time.monotonic() < deadline:
            now = self.pcap.stat().st_size if self.pcap.exists() else 0
            quiet, size = (quiet + 1 if now == size else 0), now
            time.sleep(0.2)
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=10)


def ns_python(session, code, timeout=60):
    r = session.ns_run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_firmware_prints_banner_with_board_build_and_addresses(board):
    console = console_text(board)
    assert "ethdaq firmware" in console
    assert "board    : sim" in console
    assert f"build    : {git_hash()}" in console
    assert f"ip       : {BOARD_IP}/24" in console
    assert f"gateway  : {GATEWAY}" in console
    assert f"mac      : {MAC}" in console
    assert f"control  : udp/{CTL_PORT}" in console


def test_linux_ping_gets_every_reply(board):
    r = board.ns_run(["ping", "-c", "5", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert "5 packets transmitted, 5 received, 0% packet loss" in r.stdout


def test_ping_with_full_mtu_payload_is_answered(board):
    # Upstream LiteEth's 128-byte ICMP echo buffer drops these silently; DAQSoC sizes it for the MTU.
    r = board.ns_run(["ping", "-c", "2", "-s", "1472", "-M", "do", "-W", "5", BOARD_IP],
                     capture_output=True, text=True, timeout=60)
    assert "2 packets transmitted, 2 received, 0% packet loss" in r.stdout, r.stdout


def test_arping_gets_replies_from_board_mac(board):
    r = board.ns_run(["arping", "-c", "3", "-w", "10", "-I", TAP, BOARD_IP], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count(f"from {MAC}") == 3


def test_identify_round_trip_over_udp(board):
    r = board.ns_run(ethdaq_cmd("ctl", "identify", "--ip", BOARD_IP, "--port", str(CTL_PORT), "--json"),
                     capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ident = json.loads(r.stdout)
    assert ident["board"] == "sim"
    assert ident["build_id"] == git_hash()
    assert ident["ip"] == BOARD_IP and ident["mac"] == MAC and ident["ctl_port"] == CTL_PORT
    assert ident["ident"].startswith(f"ethdaq sim {git_hash()}")
    # No key, no allow-list in this build.
    assert ident["capabilities"] == ["streamer", "ptp", "address change", "latency probes", "receive rules"]


def test_malformed_and_wrong_version_datagrams_do_not_break_the_control_port(board):
    # Garbage gets no answer; a wrong version gets an error response; identify still works after.
    out = ns_python(board, f"""
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
addr = ({BOARD_IP!r}, {CTL_PORT})
for junk in (b"x", b"\\x00" * 64, bytes(range(256)) * 5):
    s.sendto(junk, addr)
try:
    print("garbage-answered", s.recvfrom(2048)[0].hex())
except socket.timeout:
    print("garbage-ignored")
s.sendto(struct.pack(">HBBI", {protocol.MAGIC}, 9, 1, 77), addr)
print("version", s.recvfrom(2048)[0].hex())
s.sendto(struct.pack(">HBBI", {protocol.MAGIC}, 1, 1, 78), addr)
print("identify", s.recvfrom(2048)[0].hex())
""")
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines() if " " in line)
    assert "garbage-ignored" in out
    assert protocol.parse_response(bytes.fromhex(lines["version"]), expect_seq=77) == \
        (protocol.MSG_ERROR_RSP, 77, protocol.ERR_BAD_VERSION)
    msg_type, _, ident = protocol.parse_response(bytes.fromhex(lines["identify"]), expect_seq=78)
    assert msg_type == protocol.MSG_IDENTIFY_RSP and ident.board == "sim"


def test_frames_on_the_wire_decode_cleanly_in_tshark(board, tmp_path):
    """tcpdump captures on the tap; tshark (an independent decoder) checks IP and ICMP checksums
    of everything the board sent and decodes the identify response as UDP from the control port."""
    pcap = tmp_path / "board.pcap"
    with Capture(pcap, f"ether src {MAC}"):
        board.ns_run(["ping", "-c", "3", "-W", "5", BOARD_IP], capture_output=True, timeout=60)
        board.ns_run(ethdaq_cmd("ctl", "identify", "--ip", BOARD_IP, "--port", str(CTL_PORT)),
                     capture_output=True, timeout=60)
    r = subprocess.run(["tshark", "-r", str(pcap), "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
                        "-T", "fields", "-E", "separator=,", "-e", "frame.protocols", "-e", "ip.checksum.status",
                        "-e", "icmp.checksum.status", "-e", "udp.srcport", "-e", "udp.length"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [line.split(",") for line in r.stdout.strip().splitlines()]
    icmp = [row for row in rows if "icmp" in row[0]]
    # The board's PTP port (master after its announce timeout) may send on 319/320 meanwhile.
    ptp  = [row for row in rows if "udp" in row[0] and row[3] in ("319", "320")]
    udp  = [row for row in rows if "udp" in row[0] and row not in ptp]
    assert len(icmp) == 3 and all(row[1] == "1" and row[2] == "1" for row in icmp), rows  # 1 = Good.
    assert len(udp) >= 1 and all(row[1] == "1" and row[3] == str(CTL_PORT) for row in udp), rows
    assert all(row[1] == "1" and "ptp" in row[0] for row in ptp), rows


def test_sim_command_stops_cleanly_on_sigterm_and_removes_its_namespace():
    """`ethdaq sim` as a user runs it; SIGTERM (like Ctrl-C) must stop the simulation and remove
    the namespace it created."""
    ns = "ethdaq-sigterm"
    binary = REPO / "build" / "test-sim" / "gateware" / "obj_dir" / "Vsim"
    built = binary.stat().st_mtime_ns
    proc = subprocess.Popen(ethdaq_cmd("sim", "--netns", ns, "--tap", TAP, "--ip", BOARD_IP, "--host-ip", HOST_IP,
                                       "--netmask", "24", "--gateway", GATEWAY, "--mac", MAC, "--ctl-port", str(CTL_PORT), "--pin-probe",
                                       "--fasttrack-port", str(FASTTRACK_PORT), "--with-probes", "--ptp-status-full",
                                       "--output-dir", str(REPO / "build" / "test-sim")),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "ethdaq ready" in line or time.monotonic() > deadline:
                break
        assert any("ethdaq ready" in line for line in seen), "".join(seen)
        assert ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        proc.terminate()
        rest = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    assert f"namespace '{ns}' removed" in rest
    # Same design: the Verilator binary was reused, not rebuilt (generation dates are ignored).
    assert binary.stat().st_mtime_ns == built
    assert ns not in sim.list_netns()


STREAM_CHECK = """
import json, sys
from ethdaq.host.ctl import ControlClient
from ethdaq.host.receiver import Receiver
from ethdaq.wire import daqformat

board, ctl_port, rate, count = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
last = {}
problems = []
flags = {"first": 0, "last": 0, "overflow": 0}
received = {}  # stream -> [datagrams, UDP payload bytes, dropped its last header reports]

def check(h, payload):
    n = h.sample_bits // 8
    r = received.setdefault(h.stream_id, [0, 0, 0])
    r[0] += 1
    r[1] += daqformat.HEADER_LEN + h.sample_count * n
    r[2] = h.dropped
    s = [int.from_bytes(payload[i*n:(i+1)*n], "big") for i in range(h.sample_count)]
    prev = last.get(h.stream_id)
    if h.flags & daqformat.FLAG_FIRST: flags["first"] += 1
    if h.flags & daqformat.FLAG_LAST: flags["last"] += 1
    if h.flags & daqformat.FLAG_OVERFLOW: flags["overflow"] += 1
    if s and s != [(s[0] + i) % 65536 for i in range(len(s))]:
        problems.append(f"stream {h.stream_id} seq {h.seq}: samples not consecutive")
    if prev is not None and s and prev[1] is not None:
        lost = h.dropped - prev[0]
        if (s[0] - prev[1] - 1) % 65536 != lost % 65536:
            problems.append(f"stream {h.stream_id} seq {h.seq}: {lost} dropped reported, samples disagree")
    last[h.stream_id] = (h.dropped, s[-1] if s else (prev[1] if prev else None))

with Receiver(port=5000) as rx, ControlClient(board, ctl_port) as ctl:
    ctl.emulator("counter", min(int(rate * 2**32), 2**32 - 1))
    run, dst = ctl.stream_start(dst_port=5000, payload=1472)
    stats = rx.run(max_datagrams=count, idle_timeout=30, on_datagram=check)
    ctl.stream_stop()
    stats = rx.run(idle_timeout=3, on_datagram=check)
    status = ctl.status()
    streams = ctl.streams()
print(json.dumps(dict(run=run, problems=problems, flags=flags,
    received={str(k): v for k, v in sorted(received.items())}, counters_run=streams.run,
    counters={str(c.stream): [c.datagrams, c.bytes, c.dropped] for c in streams.streams},
    datagrams=stats.datagrams, malformed=stats.malformed_total, kernel=stats.kernel_dropped,
    missing=stats.missing, board_dropped=sum(s.board_dropped for s in stats.streams.values()),
    streams=sorted(stats.streams), status_datagrams=status.datagrams, status_dropped=status.dropped)))
"""


def run_stream(board, rate, count):
    out = ns_python_args(board, STREAM_CHECK, [BOARD_IP, str(CTL_PORT), str(rate), str(count)], timeout=240)
    return json.loads(out.strip().splitlines()[-1])


def ns_python_args(session, code, args, timeout=60):
    r = session.ns_run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_streaming_below_line_rate_arrives_complete_and_in_order(board):
    res = run_stream(board, rate=0.02, count=60)
    assert res["problems"] == []
    assert res["streams"] == [0, 1, 2, 3]
    assert res["missing"] == 0 and res["malformed"] == 0 and res["kernel"] == 0
    assert res["board_dropped"] == 0 and res["flags"]["overflow"] == 0
    assert res["flags"]["first"] == 4 and res["flags"]["last"] == 4
    # Everything the board says it sent arrived (the board counts since reset, runs included).
    assert res["status_dropped"] == 0
    # Stream by stream, this run: what the board counted sending is what arrived.
    assert res["counters_run"] == res["run"] and res["counters"] == res["received"]


def test_streaming_above_line_rate_drops_are_counted_never_silent(board):
    # Four channels at one 16-bit sample per cycle each: 8x what the 1 Gb/s link carries.
    res = run_stream(board, rate=1.0, count=60)
    assert res["problems"] == []  # Every gap in the counter samples is exactly the reported drops.
    assert res["missing"] == 0 and res["malformed"] == 0 and res["kernel"] == 0
    assert res["board_dropped"] > 0 and res["flags"]["overflow"] > 0
    assert res["status_dropped"] == res["board_dropped"]
    assert res["counters_run"] == res["run"] and res["counters"] == res["received"]


RECV_DURING_A_RUN = """
import json, subprocess, sys
ctl, recv, where = json.loads(sys.argv[1])
rx = subprocess.Popen(recv + ["--port", "5000", "--count", "240", "--progress", "off"], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
first = rx.stderr.readline()   # "receiving on UDP ...": bound before the run starts.
start = subprocess.run(ctl + ["start"] + where, capture_output=True, text=True)
out, err = rx.communicate(timeout=170)
subprocess.run(ctl + ["stop"] + where, capture_output=True)
print(json.dumps([start.returncode, start.stderr, rx.returncode, out, first + err]))
"""


def test_recv_of_a_stream_past_the_link_counts_the_boards_drops_as_lost_and_exits_3(board):
    """The emulator at a quarter sample per cycle on four channels, twice what the link carries:
    `ethdaq ctl emulator` and `ctl start` warn with the arithmetic (the board's clock from
    IDENTIFY), and `ethdaq recv` counts what the board dropped as lost and exits 3."""
    r = ctl(board, "emulator", "--mode", "counter", "--rate", "0.25")
    arithmetic = "4 channels x 2 bytes x 0.25 samples/cycle x 125 MHz = 250.0 MB/s of samples"
    assert r.returncode == 0 and arithmetic in r.stderr, r.stdout + r.stderr
    try:
        where = ["--ip", BOARD_IP, "--port", str(CTL_PORT)]
        out = ns_python_args(board, RECV_DURING_A_RUN, [json.dumps([ethdaq_cmd("ctl"), ethdaq_cmd("recv"), where])],
                             timeout=240)
        start_rc, start_err, rc, recv_out, recv_err = json.loads(out.strip().splitlines()[-1])
    finally:
        ctl(board, "emulator", "--mode", "off")
    assert start_rc == 0 and arithmetic in start_err, start_err
    assert rc == 3, recv_out + recv_err
    lost = re.search(r"lost on the board (\d+) samples \((\d+) datagrams flagged OVERFLOW\)", recv_out)
    assert lost and int(lost.group(1)) > 0 and int(lost.group(2)) > 0, recv_out
    assert "this run lost data" in recv_err


# bench/hostile.py's frames, as the tap carries them (no FCS), from Linux into the board: every
# kind but bad_fcs (a tap frame has no FCS to spoil: the simulated PHY adds a good one).
INJECT = """
import json, random, socket, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from bench.hostile import KINDS, Network, frames, strip_fcs
tap, board_mac, board_ip, host_ip, ctl_port, per_kind = sys.argv[2:8]
link = json.loads(subprocess.run(["ip", "-j", "link", "show", tap], capture_output=True, text=True, check=True).stdout)
net = Network(board_mac=board_mac, board_ip=board_ip, host_mac=link[0]["address"], host_ip=host_ip,
              ctl_port=int(ctl_port))
rng = random.Random(11)
burst = [strip_fcs(f) for kind in KINDS if kind != "bad_fcs" for f in frames(kind, net, rng, int(per_kind))]
rng.shuffle(burst)
# Oversize and jumbo frames go out whole: the tap's MTU (ours, in our namespace) is raised.
subprocess.run(["ip", "link", "set", "dev", tap, "mtu", "9100"], check=True)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((tap, 0))
sent, first = 0, time.time()
for f in burst:
    s.send(f)
    sent += 1
    time.sleep(0.05)   # Spread over the run.
print(sent, first, time.time())
"""


def test_hostile_traffic_during_a_stream_loses_and_corrupts_nothing(board):
    """Every kind of bench/hostile.py's frames, shuffled, into the board while
    it streams below line rate. The stream arrives complete and in order, with nothing dropped;
    the board answers ping and the control port after."""
    before = rules_now(board)["unmatched"]
    t0 = time.time()
    inject = subprocess.Popen(["ip", "netns", "exec", NETNS, sys.executable, "-c", INJECT, str(REPO), TAP, MAC,
                               BOARD_IP, HOST_IP, str(CTL_PORT), "6"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        res = run_stream(board, rate=0.02, count=60)
        t1 = time.time()
        out, err = inject.communicate(timeout=300)
    finally:
        if inject.poll() is None:
            inject.kill()
    assert inject.returncode == 0, err
    sent, first, last = out.split()
    assert int(sent) > 100 and float(first) < t1 and float(last) > t0  # The injection overlapped the run.
    # They reached the board: its classifier saw them (frames no rule matches; the MAC drops runts).
    assert rules_now(board)["unmatched"] - before > int(sent) // 2
    assert res["problems"] == [] and res["streams"] == [0, 1, 2, 3]
    assert res["missing"] == 0 and res["malformed"] == 0 and res["board_dropped"] == 0
    assert res["flags"]["overflow"] == 0 and res["counters_run"] == res["run"] and res["counters"] == res["received"]
    r = board.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "3 packets transmitted, 3 received" in r.stdout, r.stdout
    r = ctl(board, "identify")
    assert r.returncode == 0 and "sim" in r.stdout, r.stdout + r.stderr


def ctl(board, *args, timeout=60):
    return board.ns_run(ethdaq_cmd("ctl", *args, "--ip", BOARD_IP, "--port", str(CTL_PORT)),
                        capture_output=True, text=True, timeout=timeout)


def status(board):
    r = ctl(board, "status", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_unanswered_destination_is_reported_and_control_keeps_working(board):
    """Nobody has 192.168.77.99: the start is answered, the user is told, the run counts the
    samples it cannot send, and ping and control go on (LiteEth's own IP TX would block on it)."""
    assert ctl(board, "emulator", "--mode", "counter", "--rate", "0.01").returncode == 0
    r = ctl(board, "start", "--dst-ip", "192.168.77.99", "--dst-port", "5000", "--payload", "256")
    try:
        assert r.returncode == 1, r.stdout + r.stderr
        assert "192.168.77.99 does not answer ARP" in r.stderr
        st = status(board)
        assert st["running"] == 1
        assert st["dst_flags"] & protocol.DST_UNREACHABLE and not st["dst_flags"] & protocol.DST_VALID
        assert st["arp_timeouts"] >= 3
        ping = board.ns_run(["ping", "-c", "3", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
        assert " 0% packet loss" in ping.stdout, ping.stdout
        # The detector keeps running into full buffers: every sample that cannot go is counted.
        first = st["dropped"]
        deadline = time.monotonic() + 30
        while status(board)["dropped"] <= first and time.monotonic() < deadline:
            time.sleep(0.5)
        assert status(board)["dropped"] > first
    finally:
        assert ctl(board, "stop").returncode == 0
    # The run's datagrams are still queued for 192.168.77.99; the next run discards (and counts)
    # them rather than sending them to its own destination.
    stale = status(board)["stale"]
    r = ctl(board, "start", "--dst-port", "5000", "--payload", "256")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ctl(board, "stop").returncode == 0
    assert status(board)["stale"] > stale


def test_fixed_destination_mac_is_used_without_arp(board, tmp_path):
    """--dst-mac skips ARP: the frames carry exactly that MAC (tcpdump captures promiscuously)."""
    fake = "02:00:5e:00:00:99"
    pcap = tmp_path / "fixed.pcap"
    try:
        with Capture(pcap, "udp port 5000", count=3) as cap:
            assert ctl(board, "emulator", "--mode", "counter", "--rate", "0.01").returncode == 0
            r = ctl(board, "start", "--dst-port", "5000", "--payload", "256", "--dst-mac", fake)
            assert r.returncode == 0, r.stdout + r.stderr
            assert f"destination MAC {fake}" in r.stdout
            cap.wait(timeout=120)
    finally:
        ctl(board, "stop")
    r = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "eth.dst", "-e", "udp.dstport"],
                       capture_output=True, text=True, timeout=60)
    rows = [line.split("\t") for line in r.stdout.strip().splitlines()]
    assert len(rows) == 3 and all(row == [fake, "5000"] for row in rows), rows
    st = status(board)
    assert st["dst_mac"] == fake and st["dst_flags"] & protocol.DST_VALID


# Mid-run, another MAC claims the stream destination's IP in every way ARP allows, paced by the
# datagrams that arrive (none of it timed by the wall clock): an unsolicited reply to the board,
# the same broadcast, a request to the board, and gratuitous ARP (an RFC 5227 announcement and a
# broadcast reply, both for the claimed IP itself).
SPOOF_DURING_RUN = """
import json, socket, sys, time
from scapy.all import ARP, Ether, sendp
from ethdaq.host.ctl import ControlClient
tap, board_mac, board_ip, ctl_port, host_ip, evil, rounds = sys.argv[1:8]
bcast = "ff:ff:ff:ff:ff:ff"
frames = [
    Ether(src=evil, dst=board_mac) / ARP(op=2, hwsrc=evil, psrc=host_ip, hwdst=board_mac, pdst=board_ip),
    Ether(src=evil, dst=bcast) / ARP(op=2, hwsrc=evil, psrc=host_ip, hwdst=bcast, pdst=board_ip),
    Ether(src=evil, dst=bcast) / ARP(op=1, hwsrc=evil, psrc=host_ip, pdst=board_ip),
    Ether(src=evil, dst=bcast) / ARP(op=1, hwsrc=evil, psrc=host_ip, pdst=host_ip),
    Ether(src=evil, dst=bcast) / ARP(op=2, hwsrc=evil, psrc=host_ip, hwdst=bcast, pdst=host_ip),
]
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind((host_ip, 5000))
rx.settimeout(60)
got, stalled, spoofs, queued = 0, False, 0, 0
def receive(n):
    global got, stalled
    if stalled:
        return
    try:
        for _ in range(n):
            rx.recv(9000)
            got += 1
    except socket.timeout:
        stalled = True
with ControlClient(board_ip, int(ctl_port)) as ctl:
    ctl.emulator("counter", int(0.002 * 2**32))
    ctl.stream_start(dst_port=5000, payload=256, enable=0x1)
    try:
        receive(10)
        for _ in range(int(rounds)):
            for f in frames:
                sendp(f, iface=tap, verbose=False)
                spoofs += 1
                receive(2)
        # Datagrams queued before the last spoofed frame are not the stream going on past it:
        # drop them, then take 20 that left the board after it.
        time.sleep(0.05)
        rx.setblocking(False)
        try:
            while True:
                rx.recv(9000)
                queued += 1
        except BlockingIOError:
            pass
        rx.settimeout(60)
        receive(20)
    finally:
        ctl.stream_stop()
print(json.dumps(dict(got=got, stalled=stalled, spoofs=spoofs, queued=queued)))
"""


def test_arp_claiming_the_destination_never_moves_the_stream_and_is_counted(board, tmp_path):
    """Only the answer to the board's own ARP request sets where the stream goes: spoofed replies,
    requests and gratuitous ARP from another MAC mid-run send not one datagram to that MAC
    (tcpdump captures promiscuously, tshark decodes); STATUS counts each claim that reached the
    data path's resolver as refused, the receive audit the gratuitous ones (their target is not
    the board: not_ours), and the destination MAC never changed."""
    evil, rounds = "02:66:66:66:66:66", 3
    host = tap_mac(board)
    before, rx_before = status(board), rx_stats(board)
    pcap = tmp_path / "spoof.pcap"
    with Capture(pcap, "arp or udp dst port 5000"):
        out = ns_python_args(board, SPOOF_DURING_RUN, [TAP, MAC, BOARD_IP, str(CTL_PORT), HOST_IP, evil, str(rounds)],
                             timeout=600)
    res = json.loads(out.strip().splitlines()[-1])
    after, rx_after = status(board), rx_stats(board)
    r = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "eth.src", "-e", "eth.dst",
                        "-e", "arp.opcode", "-e", "udp.dstport"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines() if line]
    spoofs = [i for i, row in enumerate(rows) if row[0] == evil]
    data = [(i, row[1]) for i, row in enumerate(rows) if row[0] == MAC and row[3] == "5000"]
    elsewhere = [dst for _, dst in data if dst != host]
    assert elsewhere == [], f"{len(elsewhere)} of {len(data)} datagrams left for {sorted(set(elsewhere))}"
    # Every spoofed frame went out during the run, and the stream went on past the last one.
    assert len(spoofs) == res["spoofs"] == 5 * rounds
    assert sum(1 for i, _ in data if i > spoofs[-1]) >= 20 and not res["stalled"], res
    assert res["got"] == 10 + 2 * 5 * rounds + 20
    # Counted: the unsolicited replies (unicast and broadcast) and the requests as refused; the
    # gratuitous ARP (target: the claimed IP) never reaches the resolver, the audit drops it.
    assert after["arp_refused"] - before["arp_refused"] == 3 * rounds
    assert after["dst_mac_changes"] == before["dst_mac_changes"]
    assert rx_after["not_ours"] - rx_before["not_ours"] >= 2 * rounds
    assert after["dst_mac"] == host and after["dst_flags"] & protocol.DST_VALID
    text = ctl(board, "status").stdout
    assert re.search(rf"^arp_refused\s+{after['arp_refused']}$", text, re.M), text
    assert re.search(rf"^dst_mac_changes\s+{after['dst_mac_changes']}$", text, re.M), text


SECOND_IP = "192.168.77.2"  # Another host on the tap's network: a second address in the namespace.


def test_only_the_controller_changes_the_board_and_retransmissions_run_once(board):
    """The real firmware: the first host to claim holds the board; another address is refused
    with a status; a request sent twice with the same seq is answered twice and run once."""
    board.ns_run(["ip", "addr", "add", f"{SECOND_IP}/24", "dev", TAP], check=True)
    code = f"""
import json, socket
from ethdaq.host.ctl import ControlClient, ControlRefused
from ethdaq.wire import daqformat, protocol
out = {{}}
with ControlClient({BOARD_IP!r}, {CTL_PORT}, bind={HOST_IP!r}) as me, \\
        ControlClient({BOARD_IP!r}, {CTL_PORT}, bind={SECOND_IP!r}) as other:
    out["claim"] = me.claim(30)
    try:
        other.emulator("counter", 1 << 20)
    except ControlRefused as e:
        out["other_emulator"] = e.code
    out["other_claim"] = other.claim()
    before = me.status()
    # The same EMULATOR request, same seq, twice: as if the first answer had been lost.
    req = protocol.emulator_request(12345, protocol.EMULATOR_MODES["counter"], 1 << 20)
    answers = []
    for _ in range(2):
        me.sock.sendto(req, me.addr)
        answers.append(me.sock.recvfrom(2048)[0])
    out["same_answers"] = answers[0] == answers[1]
    after = me.status()
    out["replayed"] = after.ctl_replayed - before.ctl_replayed
    out["status_controller"] = after.controller_ip
    me.release()
    out["other_claim_after_release"] = other.claim()
    other.release()
print(json.dumps(out))
"""
    try:
        r = board.ns_run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
    finally:
        board.ns_run(["ip", "addr", "del", f"{SECOND_IP}/24", "dev", TAP])
    host, second = int(ipaddress.IPv4Address(HOST_IP)), int(ipaddress.IPv4Address(SECOND_IP))
    assert out["claim"][:2] == [True, host] and 0 < out["claim"][2] <= 30000
    assert out["other_emulator"] == protocol.ERR_NOT_CONTROLLER
    assert out["other_claim"][:2] == [False, host]
    assert out["same_answers"] and out["replayed"] == 1 and out["status_controller"] == host
    assert out["other_claim_after_release"][:2] == [True, second]


def test_the_boards_refusal_names_the_field_the_value_and_its_range(board):
    """Requests past the board's limits, built by hand so the host's own range checks do not stop
    them first: the real firmware refuses each with the field, the value and the range it takes
    there (payload to its IDENTIFY max_payload, the channel mask to its channels), and the host
    says so."""
    code = f"""
import json
from ethdaq.host.ctl import ControlClient, ControlRefused
from ethdaq.wire import protocol as P
out = {{}}
with ControlClient({BOARD_IP!r}, {CTL_PORT}) as ctl:
    ident = ctl.identify()
    out["ident"] = [ident.max_payload, ident.nchannels]
    start = lambda **f: (lambda seq: P.pack_header(P.MSG_STREAM_START, seq) + P.STREAM_START.pack(
        *dict(dict(dst_ip=0, dst_port=5000, payload=1472, enable=1, backpressure=0, gap=0, dst_mac=bytes(6),
                   flush=0), **f).values()))
    emulator = lambda seq: P.pack_header(P.MSG_EMULATOR, seq) + P.EMULATOR.pack(P.field_range("emulator_mode")[1] + 1, 1, 1)
    config = lambda seq: P.pack_header(P.MSG_CONFIG_SET, seq) + P.CONFIG_SET.pack(
        1 << P.CONFIG_FIELDS.index("ptp_log_sync"), 0, bytes(6), 0, 0, 0, 0, 0, 0, bytes(6), 0, 0, 0, 0, 0, 0, 0,
        P.PTP_LOG_MAX + 1, 0, 0, 0, 0, 0, 0)
    for name, fn in [("payload", start(payload=ident.max_payload + 1)), ("enable", start(enable=1 << ident.nchannels)),
                     ("emulator", emulator), ("config", config)]:
        msg_type, _, body = ctl.request(fn)
        out[name] = [msg_type, str(ControlRefused(body))]
    ctl.release()
print(json.dumps(out))
"""
    out = json.loads(ns_python(board, code))
    max_payload, nchannels = out["ident"]
    prefix = "board refused the request: "
    assert out["payload"] == [protocol.MSG_ERROR_RSP, f"{prefix}payload {max_payload + 1} out of range 64..{max_payload}"]
    assert out["enable"] == [protocol.MSG_ERROR_RSP,
                             f"{prefix}enable 0x{1 << nchannels:x} out of range 0x1..0x{(1 << nchannels) - 1:x}"]
    assert out["emulator"] == [protocol.MSG_ERROR_RSP, f"{prefix}emulator_mode 4 out of range 0..3"]
    assert out["config"] == [protocol.MSG_ERROR_RSP, f"{prefix}ptp_log_sync 7 out of range -10..6"]


def test_ptp_status_over_the_control_protocol(board):
    """`ethdaq ctl ptp`: the firmware's PTP port as the protocol carries it. Alone on the link the
    board's clock becomes master (after the Announce receipt timeout)."""
    deadline = time.monotonic() + 60
    while True:
        r = ctl(board, "ptp", "--json")
        assert r.returncode == 0, r.stderr
        p = json.loads(r.stdout)
        if p["state"] == "MASTER" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert p["state"] == "MASTER" and p["role"] == "auto" and p["transport"] == "udp4"
    eui64 = MAC.replace(":", "")[:6] + "fffe" + MAC.replace(":", "")[6:]
    assert p["clock_identity"] == p["gm_identity"] == eui64 and p["steps_removed"] == 0
    assert p["hw_rx_overflows"] == p["hw_tx_overflows"] == p["faults"] == 0


PTP_SHORT = re.compile(r"^ptp: (\w+) (UNLOCKED|JUMP|LOCKED) offset=-?\d+ delay=-?\d+ freq=-?\d+\.\d{3} ppb$")


def test_the_console_shows_each_ptp_state_change_in_full_and_a_short_periodic_line(board):
    """Each change of the PTP port's state: `ptp: state A -> B`, then the full status line (every
    counter). Periodically the short line (state, servo, offset, path delay, frequency); this
    board is built --ptp-status-full, so the full line follows it too. No line announces a change
    to the same state."""
    deadline = time.monotonic() + 120
    while True:
        # The PTP lines alone (the firmware prints each pair at once; the simulator's fast-track
        # probe lines, printed at once too, can land between or inside them).
        text = re.sub(r"\r?probe: fasttrack [^\n]*\n", "", console_text(board))
        lines = [line.strip() for line in text.splitlines() if line.strip().startswith("ptp")]
        changes = [i for i, line in enumerate(lines) if re.fullmatch(r"ptp: state \S+ -> \S+", line)]
        short = [i for i, line in enumerate(lines) if PTP_SHORT.match(line)]
        if (changes and len([i for i in short if i > changes[0]]) >= 3) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert changes and len(short) >= 3, "\n".join(line for line in lines if line.startswith("ptp"))

    def full_state(i):
        m = re.match(r"ptp: state=(\S+) .*\bsteps=\d+ .*\bconsole_dropped=\d+$", lines[i]) if i < len(lines) else None
        return m and m.group(1)
    for i in changes:
        before, after = re.fullmatch(r"ptp: state (\S+) -> (\S+)", lines[i]).groups()
        assert before != after and full_state(i + 1) == after, lines[i:i + 2]
    for i in short[:-1]:   # The last one's full line may still be on its way.
        assert full_state(i + 1) == PTP_SHORT.match(lines[i]).group(1), lines[i:i + 2]
    assert all(len(lines[i]) < 100 for i in short)


def test_each_request_gets_one_reply_at_the_pins_within_10_ms(board):
    """bench/ctllatency.py's measurement on this board (built with --pin-probe): each IDENTIFY and
    STATUS crosses the GMII pins once and its reply once, in that order; the reply starts within
    10 ms of simulated time of the request's last byte (typically 0.15 to 0.2 ms; up to 3 ms when
    the firmware prints a PTP state change: docs/protocol.md has the figures)."""
    sys.path.insert(0, str(REPO))
    from bench.ctllatency import measure
    res = measure(board, BOARD_IP, CTL_PORT, count=3)
    for kind in ("identify", "status"):
        assert len(res[kind]) == 3 and all(0 < c < 1_250_000 for c in res[kind]), (kind, res[kind])


def test_config_get_set_and_a_start_that_uses_the_boards_settings(board):
    """`ethdaq ctl config` shows the build's settings; `config set` changes them; `ethdaq ctl start`
    without stream options starts the run with them (datagrams of the set size to the set port);
    a PTP setting restarts the PTP port with it."""
    # The tests before this one leave the emulator as they set it: the settings show what was set
    # last, as the fraction typed.
    r = ctl(board, "emulator", "--mode", "off", "--rate", str(protocol.EMULATOR_RATE_DEFAULT))
    assert r.returncode == 0, r.stderr
    r = ctl(board, "config", "--json")
    assert r.returncode == 0, r.stderr
    boot = json.loads(r.stdout)
    assert (boot["ip"], boot["mac"], boot["dst_port"], boot["payload"], boot["enable"]) == (BOARD_IP, MAC, 5000, 1472, 15)
    assert (boot["ptp_role"], boot["ptp_transport"], boot["ptp_log_sync"]) == ("auto", "udp4", -7)
    assert (boot["emulator_mode"], boot["emulator_rate"]) == ("off", protocol.EMULATOR_RATE_DEFAULT)
    r = ctl(board, "config", "set", "payload=512", "dst_port=5003", "enable=0x3", "ptp_log_sync=-6",
            "ptp_priority1=100", "emulator_rate=0.02", "--json")
    assert r.returncode == 0, r.stderr
    changed = json.loads(r.stdout)
    assert (changed["payload"], changed["dst_port"], changed["enable"], changed["ptp_log_sync"]) == (512, 5003, 3, -6)
    assert changed["emulator_rate"] == 0.02
    r = ctl(board, "config", "set", "payload=9999")
    assert r.returncode == 2 and "payload must be from 64 to 8954 on this board" in r.stderr, r.stderr
    code = f"""
import json, socket, subprocess
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", 5003))
rx.settimeout(30)
ctl = {ethdaq_cmd("ctl")!r}
where = ["--ip", {BOARD_IP!r}, "--port", "{CTL_PORT}"]
for cmd in (["emulator", "--mode", "counter", "--rate", "0.02"], ["start"]):
    subprocess.run(ctl + cmd + where, check=True, capture_output=True)
sizes = [len(rx.recvfrom(65536)[0]) for _ in range(8)]
subprocess.run(ctl + ["stop"] + where, check=True, capture_output=True)
print(json.dumps(sizes))
"""
    sizes = json.loads(ns_python(board, code, timeout=180).strip().splitlines()[-1])
    assert sizes == [512] * 8  # All before the stop: full datagrams of the set size.
    console = console_text(board)
    assert "delay_req 2^-7 s, priority 100/128" in console and "sync 2^-6 s" in console
    r = ctl(board, "config", "set", "payload=1472", "dst_port=5000", "enable=0xf", "ptp_log_sync=-7",
            "ptp_priority1=128")
    assert r.returncode == 0, r.stderr


def test_a_burst_leaves_by_the_flush_time_not_at_the_stop(board):
    """A stream that goes quiet (the emulator switched off mid-run) sends each channel's partial
    datagram after the run's flush time (`ethdaq ctl start --flush`), flagged FLUSH, long before
    the stop; nothing is lost or repeated, and the stop's LAST datagrams are then empty. The
    flush setting is in `ethdaq ctl config`, set by `config set flush=`, range-checked."""
    r = ctl(board, "config", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["flush"] == "1ms"
    r = ctl(board, "config", "set", "flush=2s")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "flush must be 0 (off) or 1us to 1s" in r.stderr
    r = ctl(board, "config", "set", "flush=250us", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["flush"] == "250us", r.stderr
    code = f"""
import json, socket, subprocess, time
from ethdaq.wire import daqformat
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", 5000))
rx.settimeout(60)
ctl = {ethdaq_cmd("ctl")!r}
where = ["--ip", {BOARD_IP!r}, "--port", "{CTL_PORT}"]
def run(*cmd):
    subprocess.run(ctl + list(cmd) + where, check=True, capture_output=True)
def get():
    data = rx.recvfrom(65536)[0]
    h = daqformat.unpack_header(data)
    s = daqformat.samples(data, h)
    return dict(stream=h.stream_id, seq=h.seq, flags=h.flags, count=h.sample_count, dropped=h.dropped,
                first=s[0] if s else None, last=s[-1] if s else None)
run("emulator", "--mode", "counter", "--rate", "0.002")
run("start", "--flush", "100us")
got = [get()]
run("emulator", "--mode", "off")
flushed = set()
while len(flushed) < 4:
    d = get()
    got.append(d)
    if d["flags"] & daqformat.FLAG_FLUSH:
        flushed.add(d["stream"])
got.append("stop")
run("stop")
rx.settimeout(3)
try:
    while True:
        got.append(get())
except socket.timeout:
    pass
print(json.dumps(got))
"""
    try:
        got = json.loads(ns_python(board, code, timeout=300).strip().splitlines()[-1])
    except BaseException:
        ctl(board, "stop")   # A run left going would make the next tests' starts refused as busy.
        raise
    r = ctl(board, "config", "set", "flush=1ms")
    assert r.returncode == 0, r.stderr
    stop = got.index("stop")
    before, after = got[:stop], got[stop + 1:]
    streams = {}
    for d in before + after:
        streams.setdefault(d["stream"], []).append(d)
    assert sorted(streams) == [0, 1, 2, 3]
    full = (1472 - 40)//2
    for i, ds in streams.items():
        assert [d["seq"] for d in ds] == list(range(len(ds))), f"stream {i}: sequence gap"
        assert all(d["dropped"] == 0 for d in ds)
        samples = [d for d in ds if d["count"]]
        for a, b in zip(samples, samples[1:]):
            assert b["first"] == (a["last"] + 1) % 65536, f"stream {i}: samples lost between datagrams"
        flushed = [d for d in ds if d["flags"] & daqformat.FLAG_FLUSH]
        assert len(flushed) == 1 and flushed[0] in before, f"stream {i}: its burst did not leave before the stop"
        assert 1 <= flushed[0]["count"] < full
        assert all(d["count"] == full for d in ds if d is not flushed[0] and not d["flags"] & daqformat.FLAG_LAST)
        last = [d for d in after if d["stream"] == i]
        assert len(last) == 1 and last[0]["flags"] & daqformat.FLAG_LAST and last[0]["count"] == 0


FASTTRACK_LINE = re.compile(r"probe: fasttrack (\d+) rx-end (\d+) rule (\d+) length (\d+) payload ([0-9a-f]{16})")


def send_fasttrack(board, payloads, gap):
    """Send `payloads` from Linux to the fast-track port, `gap` seconds apart; the testbench
    probe's record of each delivery: (cycle, rx-end cycle, rule, length, payload hex), as strings.
    The simulator prints the probe's lines at once, so they can land inside a line the firmware is
    still printing (console_text): they are searched for anywhere."""
    marks = len(board.lines)
    ns_python(board, f"""
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for p in {payloads!r}:
    s.sendto(p, ({BOARD_IP!r}, {FASTTRACK_PORT}))
    time.sleep({gap})
""")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [m.groups() for l in board.lines[marks:] for m in FASTTRACK_LINE.finditer(l)]
        if len(found) >= len(payloads):
            break
        time.sleep(0.2)
    assert len(found) == len(payloads), found
    return found


def test_fasttrack_datagrams_reach_the_hardware_sink_within_150_ns_of_the_pins(board):
    """Datagrams from Linux to the fast-track port: the classifier's sink has each one's payload
    within 150 ns of the frame's last byte on the GMII pins, both counted by the testbench's own
    probe (gateware/verilog/ethdaq_fasttrack_probe.v); other traffic is unaffected."""
    assert f"fast-track: udp/{FASTTRACK_PORT} -> hardware sink (rule 0), never the CPU" in console_text(board)
    payloads = [bytes([0xA0 + i]) + b"trigger" for i in range(3)] + [bytes(range(256)) * 4]
    got = send_fasttrack(board, payloads, gap=0.2)
    assert [(int(rule), int(n), bytes.fromhex(hx)[:min(int(n), 8)]) for _, _, rule, n, hx in got] == \
        [(0, len(p), p[:8]) for p in payloads]
    # rx-end is the cycle after the last FCS byte on the pins.
    latencies_ns = [(int(at) - int(end) + 1) * CLK_NS for at, end, *_ in got]
    assert all(0 < ns <= 150 for ns in latencies_ns), latencies_ns
    r = board.ns_run(["ping", "-c", "2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "2 packets transmitted, 2 received" in r.stdout, r.stdout


def probe_report(board):
    r = ctl(board, "probe", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_latency_probes_agree_with_the_testbench_and_with_what_was_sent(board):
    """The hardware latency probes, read through the control protocol (PROBE), against counts
    taken elsewhere: each fast-track datagram's latency as the testbench's pin probe counts it
    (ethdaq_fasttrack_probe.v: its own cycle counter on the GMII pins and the sink), exactly;
    the bulk DAQ datagrams of a run as the streamer's counters and the Linux receiver count them;
    the control answers, at least one per request answered."""
    replayed = status(board)["ctl_replayed"]
    r = ctl(board, "probe", "clear")
    assert r.returncode == 0 and "cleared" in r.stdout, r.stdout + r.stderr
    marks = len(board.lines)
    payloads = [bytes([0xB0 + i]) * (1 + 40 * i) for i in range(5)]
    bench = [int(at) - int(end) + 1 for at, end, *_ in send_fasttrack(board, payloads, gap=0.1)]
    res = run_stream(board, rate=0.02, count=40)
    assert res["missing"] == 0 and res["problems"] == []
    report = probe_report(board)
    ft = report["classes"]["rx_fasttrack"]
    assert (ft["count"], ft["sum"], ft["sumsq"], ft["min"], ft["max"]) == (
        len(bench), sum(bench), sum(b * b for b in bench), min(bench), max(bench))
    assert sum(ft["bins"]) == len(bench)
    bulk = report["classes"]["tx_bulk"]
    sent = sum(c[0] for c in res["counters"].values())
    assert bulk["count"] == sent == res["datagrams"], (bulk, res["counters"])
    assert 0 < bulk["min"] <= bulk["max"] < 2000
    cpu = report["classes"]["tx_cpu"]
    # The stream's requests (emulator, start, stop, status, streams) were answered since the clear.
    # From offered to LiteEth's UDP port to the pins takes tens of cycles (more when LiteEth has to
    # ask ARP first): a pairing off by one frame would read as the time between answers.
    assert cpu["count"] >= 5 and 0 < cpu["min"] < 100 and cpu["min"] <= cpu["max"]
    assert "tx_launch" not in report["classes"]   # No launcher in this build.
    # Receive through LiteEth to the control mailbox: every request since the clear (the stream's
    # five, then this read's IDENTIFY and PROBE) at LiteEth's UDP port, then seen by the firmware,
    # which answered each after that: the CPU class ends before the answer's first byte on the
    # pins (the testbench's gmii probe). A retransmission of the clear itself (the client's 2 s
    # timeout, reached when the machine is loaded) can reach the port before the clear and the
    # firmware after it: the board counts it as replayed, and it is the only way the classes differ.
    udp, cpu_rx = report["classes"]["rx_udp"], report["classes"]["rx_cpu"]
    replayed = status(board)["ctl_replayed"] - replayed
    assert udp["count"] >= 7 and udp["count"] <= cpu_rx["count"] <= udp["count"] + replayed, (udp, cpu_rx, replayed)
    assert 0 < udp["min"] <= udp["max"] < 1000
    assert udp["min"] < cpu_rx["min"] <= cpu_rx["max"]
    pins = [int(m.group(1)) for l in board.lines[marks:] for m in re.finditer(r"probe: (?:rx-end|tx-start) (\d+)", l)]
    kinds = [m.group(1) for l in board.lines[marks:] for m in re.finditer(r"probe: (rx-end|tx-start) \d+", l)]
    replies = [pins[i + 1] - pins[i] + 1 for i in range(len(pins) - 1) if kinds[i:i + 2] == ["rx-end", "tx-start"]]
    assert len(replies) >= 5 and cpu_rx["max"] < max(replies), (cpu_rx, replies)
    assert report["tx_overflows"] == report["rx_overflows"] == 0
    assert report["tx_unpaired"] == report["rx_unpaired"] == 0
    r = ctl(board, "probe")
    assert r.returncode == 0 and "rx_fasttrack" in r.stdout and "histogram" in r.stdout, r.stdout + r.stderr
    print(f"testbench fast-track latencies (cycles): {bench}\n{r.stdout}")


def rules_now(board):
    r = ctl(board, "rules", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_receive_rules_are_set_and_counted_through_the_control_protocol(board):
    """RULES shows the build's fast-track rule and every rule's counters; RULE_SET adds a drop rule
    for UDP 9100: datagrams Linux sends there are counted by it and dropped whole at the frame
    gate, never reaching LiteEth; a rule that would take the control port away is refused, by
    the CLI and by the board itself; the rule is disabled again at the end."""
    before = rules_now(board)
    assert [(r["index"], r["enable"], r["action"], r["port"]) for r in before["rules"]][:2] == [
        (0, 1, "fasttrack", FASTTRACK_PORT), (1, 0, "cpu", 0)]
    assert len(before["rules"]) == protocol.MAX_RULES
    r = ctl(board, "rules", "set", "1", "action=drop", "port=9100")
    assert r.returncode == 0 and "rule 1: enabled, drop for UDP port 9100" in r.stdout, r.stdout + r.stderr
    try:
        ns_python(board, f"""
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3):
    s.sendto(b"x" * 50, ({BOARD_IP!r}, 9100))
    time.sleep(0.2)
""")
        time.sleep(1)
        after = rules_now(board)
        assert after["rules"][1]["matched"] - before["rules"][1]["matched"] == 3
        assert after["gate_error"] - before["gate_error"] >= 3
        assert after["rules"][0]["matched"] == before["rules"][0]["matched"]
        # The CLI refuses a rule that takes the control port; so does the board, sent as raw bytes.
        r = ctl(board, "rules", "set", "2", "action=drop", f"port={CTL_PORT}")
        assert r.returncode == 2 and "control port" in r.stderr, r.stderr
        out = ns_python(board, f"""
import socket
from ethdaq.wire import daqformat, protocol
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(10)
s.sendto(protocol.rule_set_request(777, 2, 1, 2, protocol.RULE_MATCH_PORT, port={CTL_PORT}), ({BOARD_IP!r}, {CTL_PORT}))
print(protocol.parse_response(s.recvfrom(2048)[0], expect_seq=777)[2])
""")
        assert out.strip() == str(protocol.ERR_BAD_VALUE)
        assert rules_now(board)["rules"][2]["enable"] == 0
    finally:
        r = ctl(board, "rules", "set", "1", "enable=0")
        assert r.returncode == 0, r.stderr
    ping = board.ns_run(["ping", "-c", "2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "2 packets transmitted, 2 received" in ping.stdout, ping.stdout


NEW_IP, NEW_MAC = "192.168.77.51", "02:ab:00:00:00:42"

ADDRESS_CHANGE = """
import json, socket, sys
from ethdaq.wire import daqformat, protocol
old, port, new_ip, new_mac = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(10)
s.sendto(protocol.config_set_request(4242, ip=int(protocol.ipaddress.IPv4Address(new_ip)),
                                     mac=protocol.parse_mac(new_mac)), (old, port))
data, src = s.recvfrom(2048)
msg_type, seq, cfg = protocol.parse_response(data, expect_seq=4242)
print(json.dumps(dict(src=src[0], ip=cfg.ip, mac=protocol.format_mac(cfg.mac))))
"""

DATA_SOURCE = """
import json, socket, sys
from ethdaq.host.ctl import ControlClient
board, port = sys.argv[1], int(sys.argv[2])
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("0.0.0.0", 5000))
rx.settimeout(30)
with ControlClient(board, port) as c:
    c.emulator("counter", int(0.02 * 2**32))
    c.stream_start(dst_port=5000, payload=256)
    sources = {rx.recvfrom(65536)[1][0] for _ in range(8)}
    c.stream_stop()
print(json.dumps(sorted(sources)))
"""


def tap_mac(board):
    """The MAC address of Linux's end of the tap (the host's)."""
    link = json.loads(board.ns_run(["ip", "-j", "link", "show", TAP], capture_output=True, text=True,
                                   check=True).stdout)
    return link[0]["address"]


def neighbour_mac(board, ip):
    r = board.ns_run(["ip", "neigh", "show", ip], capture_output=True, text=True, timeout=30)
    m = re.search(r"lladdr ([0-9a-f:]{17})", r.stdout)
    return m.group(1) if m else None


def test_the_boards_addresses_change_at_run_time_and_are_announced(board, tmp_path):
    """CONFIG_SET ip/mac: the answer leaves from the old address, then the board answers ping, ARP,
    control and sends its data only at the new one, after an ARP announcement that tcpdump
    captures and scapy decodes; a MAC change alone moves Linux's neighbour entry by that
    announcement, without Linux asking. Set back at the end."""
    from scapy.layers.l2 import ARP, Ether
    from scapy.utils import rdpcap
    pcap = tmp_path / "arp.pcap"
    marks = len(board.lines)
    with Capture(pcap, "arp"):
        out = json.loads(ns_python_args(board, ADDRESS_CHANGE, [BOARD_IP, str(CTL_PORT), NEW_IP, NEW_MAC]))
        assert out == {"src": BOARD_IP, "ip": int(ipaddress.IPv4Address(NEW_IP)), "mac": NEW_MAC}
        wait_console(board, f"net: now {NEW_IP} at {NEW_MAC} (set by {HOST_IP})", timeout=120)
        deadline = time.monotonic() + 30   # The PTP port restarts under the new clock identity.
        while not any("ptp: auto over" in line for line in board.lines[marks:]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any("ptp: auto over" in line for line in board.lines[marks:])
    try:
        check_moved_board(board, pcap)
    finally:
        if not any(f"net: now {BOARD_IP} at {MAC}" in line for line in board.lines[marks:]):
            # Failed half-way: put the board back for the tests after this one.
            board.ns_run(ethdaq_cmd("ctl", "config", "set", f"ip={BOARD_IP}", f"mac={MAC}", "--ip", NEW_IP,
                                    "--port", str(CTL_PORT)), capture_output=True, timeout=60)


def check_moved_board(board, pcap):
    from scapy.layers.l2 import ARP, Ether
    from scapy.utils import rdpcap
    announcements = [f for f in rdpcap(str(pcap)) if f.haslayer(ARP) and f[Ether].src == NEW_MAC]
    assert announcements, "no ARP announcement captured"
    a = announcements[0]
    assert a[Ether].dst == "ff:ff:ff:ff:ff:ff"
    assert (a[ARP].op, a[ARP].hwsrc, a[ARP].psrc, a[ARP].pdst) == (1, NEW_MAC, NEW_IP, NEW_IP)

    r = board.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", NEW_IP], capture_output=True, text=True, timeout=60)
    assert "3 packets transmitted, 3 received" in r.stdout, r.stdout
    r = board.ns_run(["arping", "-c", "2", "-w", "10", "-I", TAP, NEW_IP], capture_output=True, text=True, timeout=60)
    assert r.stdout.count(f"from {NEW_MAC}") == 2, r.stdout
    r = board.ns_run(["arping", "-c", "2", "-w", "3", "-I", TAP, BOARD_IP], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "from " not in r.stdout, r.stdout   # The old address is gone.
    r = board.ns_run(ethdaq_cmd("ctl", "identify", "--ip", NEW_IP, "--port", str(CTL_PORT), "--json"),
                     capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ident = json.loads(r.stdout)
    assert (ident["ip"], ident["mac"]) == (NEW_IP, NEW_MAC)
    assert json.loads(ns_python_args(board, DATA_SOURCE, [NEW_IP, str(CTL_PORT)], timeout=180)) == [NEW_IP]

    # The MAC alone, back to the build's: Linux's entry for the address follows the announcement.
    assert neighbour_mac(board, NEW_IP) == NEW_MAC
    r = board.ns_run(ethdaq_cmd("ctl", "config", "set", f"mac={MAC}", "--ip", NEW_IP, "--port", str(CTL_PORT)),
                     capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and f"now answers at {NEW_IP} ({MAC})" in r.stderr, r.stderr
    wait_console(board, f"net: now {NEW_IP} at {MAC}", timeout=120)
    deadline = time.monotonic() + 20
    while neighbour_mac(board, NEW_IP) != MAC and time.monotonic() < deadline:
        time.sleep(0.2)
    assert neighbour_mac(board, NEW_IP) == MAC

    # Back to the build's address through the CLI, which then talks to the board there.
    r = board.ns_run(ethdaq_cmd("ctl", "config", "set", f"ip={BOARD_IP}", "--ip", NEW_IP, "--port", str(CTL_PORT),
                                "--json"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ip"] == BOARD_IP
    wait_console(board, f"net: now {BOARD_IP} at {MAC}", timeout=120)
    r = board.ns_run(["ping", "-c", "2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "2 packets transmitted, 2 received" in r.stdout, r.stdout
    r = ctl(board, "config", "set", "ip=224.0.0.9")
    assert r.returncode == 2 and "unicast host address" in r.stderr


# --- A host on another subnet, behind a router -------------------------------------------------

ROUTED_HOST = "10.99.0.2"  # Namespace B's address, behind the router (the board's namespace).
ROUTER_B    = "10.99.0.1"  # The router's address on B's side.


@contextlib.contextmanager
def routed_host(board):
    """A namespace B on 10.99.0.0/24 behind a Linux router: the board's namespace forwards
    (ip_forward) between the tap, where it also has the board's gateway address, and a veth pair
    to B. B, the veth pair, the address and forwarding are removed afterwards, even on failure."""
    ns = f"ethdaq-routed-{os.getpid()}"

    def run(*cmd):
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)

    def in_router(*cmd):
        run("ip", "netns", "exec", NETNS, *cmd)

    def in_b(*cmd):
        run("ip", "netns", "exec", ns, *cmd)

    run("ip", "netns", "add", ns)
    try:
        in_router("ip", "addr", "add", f"{GATEWAY}/24", "dev", TAP)
        in_router("sysctl", "-qw", "net.ipv4.ip_forward=1")
        in_router("ip", "link", "add", "ethdaq-rt0", "type", "veth", "peer", "name", "ethdaq-rt1", "netns", ns)
        in_router("ip", "addr", "add", f"{ROUTER_B}/24", "dev", "ethdaq-rt0")
        in_router("ip", "link", "set", "ethdaq-rt0", "up")
        in_b("ip", "link", "set", "lo", "up")
        in_b("ip", "addr", "add", f"{ROUTED_HOST}/24", "dev", "ethdaq-rt1")
        in_b("ip", "link", "set", "ethdaq-rt1", "up")
        in_b("ip", "route", "add", "default", "via", ROUTER_B)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)   # Takes the veth pair with it.
        subprocess.run(["ip", "netns", "exec", NETNS, "ip", "addr", "del", f"{GATEWAY}/24", "dev", TAP],
                       check=False, capture_output=True)
        subprocess.run(["ip", "netns", "exec", NETNS, "sysctl", "-qw", "net.ipv4.ip_forward=0"], check=False)
    assert ns not in sim.list_netns()


def ctl_from(ns, *args, timeout=60):
    return subprocess.run(["ip", "netns", "exec", ns, *ethdaq_cmd("ctl", *args, "--ip", BOARD_IP, "--port", str(CTL_PORT))],
                          capture_output=True, text=True, timeout=timeout)


def arp_requests(pcap):
    """The addresses the board asked for by ARP in a capture (scapy decodes it)."""
    from scapy.layers.l2 import ARP
    from scapy.utils import rdpcap
    return {p[ARP].pdst for p in rdpcap(str(pcap)) if ARP in p and p[ARP].op == 1 and p[ARP].psrc == BOARD_IP}


def test_a_host_behind_a_router_controls_the_board_and_gets_every_sample(board, tmp_path):
    """B (10.99.0.2) is outside the board's 192.168.77.0/24: the board's answers and its stream go
    to the gateway's MAC (the board asks ARP for the gateway, never for B), Linux forwards them,
    and every sample arrives in order with the board's counts. Without the route in LiteEth's IP
    layer the answers would never reach B; without it in the stream's resolver, no sample would."""
    assert ctl(board, "release").returncode == 0   # B becomes the controller.
    pcap = tmp_path / "arp.pcap"
    with routed_host(board) as ns:
        dump = subprocess.Popen(["ip", "netns", "exec", NETNS, "tcpdump", "-i", TAP, "-U", "-n", "-w", str(pcap), "arp"],
                                stderr=subprocess.PIPE, text=True)
        try:
            dump.stderr.readline()
            r = ctl_from(ns, "identify")
            assert r.returncode == 0 and BOARD_IP in r.stdout, r.stdout + r.stderr
            r = ctl_from(ns, "config", "--json")
            assert r.returncode == 0, r.stderr
            cfg = json.loads(r.stdout)
            assert (cfg["netmask"], cfg["gateway"]) == ("255.255.255.0", GATEWAY)
            r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", STREAM_CHECK, BOARD_IP, str(CTL_PORT),
                                "0.02", "60"], capture_output=True, text=True, timeout=240)
            assert r.returncode == 0, r.stderr
            res = json.loads(r.stdout.strip().splitlines()[-1])
        finally:
            dump.terminate()
            dump.wait(timeout=10)
            ctl_from(ns, "release")
    assert res["problems"] == []
    assert res["streams"] == [0, 1, 2, 3]
    assert res["datagrams"] >= 60 and res["missing"] == 0 and res["malformed"] == 0 and res["kernel"] == 0
    assert res["board_dropped"] == 0 and res["flags"]["first"] == 4 and res["flags"]["last"] == 4
    assert res["counters_run"] == res["run"] and res["counters"] == res["received"]
    asked = arp_requests(pcap)
    assert GATEWAY in asked and ROUTED_HOST not in asked, asked


def test_the_gateway_is_set_at_run_time_and_checked(board):
    """CONFIG_SET gateway: 0.0.0.0 takes the board back to asking ARP for every destination (B,
    behind the router, does not answer: the start says so); a gateway outside the subnet is
    refused; the build's gateway back, the stream to B resolves through it again."""
    def wait_route(text, before):
        deadline = time.monotonic() + 120
        while console_text(board).count(text) <= before:
            assert time.monotonic() < deadline, f"the console did not print {text!r}"
            time.sleep(0.2)

    none, via = f"net: route {BOARD_IP}/24, no gateway", f"net: route {BOARD_IP}/24 via {GATEWAY}"
    seen = console_text(board)
    with routed_host(board):
        try:
            r = ctl(board, "config", "set", "gateway=0.0.0.0")
            assert r.returncode == 0, r.stdout + r.stderr
            wait_route(none, seen.count(none))
            assert status(board)["running"] == 0
            assert ctl(board, "emulator", "--mode", "counter", "--rate", "0.01").returncode == 0
            r = ctl(board, "start", "--dst-ip", ROUTED_HOST, "--dst-port", "5000", "--payload", "256")
            assert r.returncode == 1 and f"{ROUTED_HOST} does not answer ARP" in r.stderr, r.stdout + r.stderr
            assert ctl(board, "stop").returncode == 0
            r = ctl(board, "config", "set", f"gateway={ROUTER_B}")
            assert r.returncode != 0 and f"gateway must be a host of the board's subnet 192.168.77.0/24 other " \
                f"than the board ({BOARD_IP}), or 0.0.0.0 for none, not {ROUTER_B}" in r.stderr, r.stdout + r.stderr
            # The board's own check, past the command line's.
            r = ns_python(board, f"""
from ethdaq.host.ctl import ControlClient, ControlRefused
with ControlClient({BOARD_IP!r}, {CTL_PORT}) as c:
    try:
        c.config_set(gateway={int(ipaddress.IPv4Address(ROUTER_B))})
    except ControlRefused as e:
        print("refused", e.code)
""")
            assert r.split() == ["refused", str(protocol.ERR_BAD_VALUE)], r
        finally:
            r = ctl(board, "config", "set", f"gateway={GATEWAY}")
            assert r.returncode == 0, r.stdout + r.stderr
        wait_route(via, seen.count(via))
        r = ctl(board, "start", "--dst-ip", ROUTED_HOST, "--dst-port", "5000", "--payload", "256")
        assert r.returncode == 0, r.stdout + r.stderr
        assert status(board)["dst_flags"] & protocol.DST_VALID
        assert ctl(board, "stop").returncode == 0


def test_phy_link_is_watched_and_a_pulled_cable_is_logged_and_counted(board):
    """The firmware finds the simulated PHY on MDIO (gateware/simphy.py, at an address other than
    0), reports its link in STATUS, and logs and counts a cable pulled out and plugged into a
    100 Mb/s port, which this 1000 Mb/s-only build warns about; nothing crosses while the link is
    down, and everything works again once it is back at 1000 Mb/s."""
    from ethdaq.gateware import simphy
    wait_console(board, "phy: link up", timeout=120)
    st = status(board)
    assert st["link"] == "up, 1000 Mb/s full duplex (auto-negotiated)"
    assert (st["phy_address"], st["phy_id"]) == (simphy.SIM_PHY_ADDRESS, f"0x{simphy.SIM_PHY_ID:08x}")
    assert st["link_losses"] == 0
    console = console_text(board)
    assert f"phy: PHY at MDIO address {simphy.SIM_PHY_ADDRESS}, id 0x{simphy.SIM_PHY_ID:08x}" in console
    assert "phy: link up, 1000 Mb/s full duplex (auto-negotiated)" in console
    cable = board.gateware_dir / "cable"
    try:
        cable.write_text(simphy.cable_line(link=False))
        wait_console(board, "phy: link down (losses since boot: 1)", timeout=120)
        r = board.ns_run(["ping", "-c", "2", "-i", "0.2", "-W", "1", BOARD_IP], capture_output=True, text=True)
        assert r.returncode != 0, "a ping crossed an unplugged cable"
        cable.write_text(simphy.cable_line(link=True, speed=100))
        wait_console(board, "phy: link up, 100 Mb/s full duplex (auto-negotiated)", timeout=120)
        wait_console(board, "phy: WARNING: this build's PHY interface runs at 1000 Mb/s only", timeout=30)
        # The simulated wire passes frames at any speed (a real RGMII PHY at 100 Mb/s would not):
        # the board can say what it sees.
        st = status(board)
        assert st["link_flags"] & protocol.LINK_MISMATCH and st["link_speed"] == 100
        assert "NOT the speed of this build's PHY interface" in st["link"]
        cable.write_text(simphy.cable_line(link=True, speed=1000))
        # A partner changing speed renegotiates: the link drops (latched in BMSR) and comes back.
        wait_console(board, "(losses since boot: 2)", timeout=120)
        deadline = time.monotonic() + 120
        while status(board)["link"] != "up, 1000 Mb/s full duplex (auto-negotiated)":
            assert time.monotonic() < deadline, status(board)
            time.sleep(0.5)
    finally:
        cable.write_text(simphy.cable_line(link=True, speed=1000))
    st = status(board)
    assert (st["link_losses"], st["link_flags"] & protocol.LINK_MISMATCH) == (2, 0)
    r = board.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


# Frames with a bad FCS or preamble that test_frames_injected_at_the_pins... put on the wire (the
# reboot test below counts them).
INJECTED_ERRORS = {"fcs": 0, "preamble": 0}
ECHO_ID = 0x1D1D


def test_frames_injected_at_the_pins_are_received_beside_linuxs_which_lose_nothing(board, tmp_path):
    """The PHY's injector (gateware/simphy.py) puts whole frames, byte for byte, on the receive
    pins while Linux pings the board: an ICMP echo request with a good FCS is answered (tcpdump
    sees the reply on the tap); frames with a bad FCS (bench/hostile.py's bad_fcs) are each counted
    by the MAC, exactly; frames whose SFD is wrong (and which hold no 0xD5 byte: LiteEth's
    checker hunts for one) each count a preamble error; meanwhile every ping is answered, and no
    Linux frame arrives corrupted (it would count as a bad FCS)."""
    sys.path.insert(0, str(REPO))
    import random
    from scapy.all import ICMP, IP, Ether, Raw, raw, rdpcap
    from bench.hostile import Network, fcs_ok, frames, with_fcs
    from ethdaq.gateware import simphy
    host_mac = tap_mac(board)
    net = Network(board_mac=MAC, board_ip=BOARD_IP, host_mac=host_mac, host_ip=HOST_IP, ctl_port=CTL_PORT)
    rng = random.Random(9)

    def echo(seq):
        return with_fcs(raw(Ether(src=host_mac, dst=MAC) / IP(src=HOST_IP, dst=BOARD_IP) /
                            ICMP(type=8, id=ECHO_ID, seq=seq) / Raw(b"injected at the PHY pins %03d" % seq)))

    def no_sfd(i):
        # A broadcast of an unused EtherType with no 0xD5 anywhere, FCS included.
        for pad in range(256):
            f = with_fcs(raw(Ether(src=host_mac, dst="ff:ff:ff:ff:ff:ff", type=0x88B5) / Raw(bytes([i, pad]) * 30)))
            if 0xD5 not in f:
                return f
    bad_fcs = frames("bad_fcs", net, rng, 4)
    assert not any(fcs_ok(f) for f in bad_fcs)
    bad_sfd = [simphy.wire_frame(no_sfd(i), preamble=bytes([0x55] * 8)) for i in range(2)]
    # Filler: full-size frames for another station, to keep the pins busy while the pings cross.
    filler = [simphy.wire_frame(with_fcs(raw(Ether(src=host_mac, dst="02:00:00:00:00:99", type=0x88B5) /
                                             Raw(bytes(rng.getrandbits(8) for _ in range(1500))))))
              for _ in range(8)]

    def batch(seq):
        # 56 full-size frames around the others: 0.7 ms of the wire, about the time between polls.
        out = [simphy.wire_frame(echo(seq))]
        for f in [simphy.wire_frame(f) for f in bad_fcs] + bad_sfd:
            out += filler + [f]
        return out + filler

    before = status(board)
    pcap = tmp_path / "echo.pcap"
    batches = 0
    with Capture(pcap, f"icmp and ether src {MAC}"):
        ping = subprocess.Popen(["ip", "netns", "exec", NETNS, "ping", "-c", "40", "-i", "0.02", "-W", "5", BOARD_IP],
                                stdout=subprocess.PIPE, text=True)
        try:
            while ping.poll() is None or batches < 3:
                frames_ = batch(batches)
                simphy.inject(board.gateware_dir, frames_, timeout=60)
                INJECTED_ERRORS["fcs"] += len(bad_fcs)
                INJECTED_ERRORS["preamble"] += len(bad_sfd)
                batches += 1
            pings = ping.communicate(timeout=60)[0]
        finally:
            if ping.poll() is None:
                ping.kill()
        time.sleep(1)  # The board's answer to the last batch's echo.
    after = status(board)
    if "40 packets transmitted, 40 received, 0% packet loss" not in pings:
        # Where the lost echoes went, for the failure's report: the board's counters that moved.
        moved = {k: (before[k], v) for k, v in after.items()
                 if isinstance(v, int) and isinstance(before.get(k), int) and v != before[k]}
        pytest.fail(f"{pings}\nboard counters that changed (before, after): {moved}\n"
                    f"receive counters by cause: {rx_stats(board)}")
    assert after["rx_fcs_errors"] - before["rx_fcs_errors"] == batches * len(bad_fcs)
    assert after["rx_preamble_errors"] - before["rx_preamble_errors"] == batches * len(bad_sfd)
    replies = sorted(f[ICMP].seq for f in rdpcap(str(pcap))
                     if f.haslayer(ICMP) and f[ICMP].type == 0 and f[ICMP].id == ECHO_ID)
    assert replies == list(range(batches)), replies


def rx_stats(board):
    r = ctl(board, "rx", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_hostile_frames_at_the_pins_during_a_stream_are_each_counted_by_cause(board):
    """Every kind of bench/hostile.py's frames (bad FCS and runts too), FCS and preamble
    as on a wire, put on the receive pins by the PHY's injector in batches while the board streams.
    Each frame is counted once, under the cause bench/hostile.py labels it with (RX_STATS); none
    disturbs the stream (complete, in order, nothing dropped); the MAC counts the bad FCSs; the
    control port answers throughout; ARP and ping are answered after."""
    import collections, random, threading
    from bench.hostile import KINDS, Network, fcs_ok, labelled
    from ethdaq.gateware import simphy
    net = Network(board_mac=MAC, board_ip=BOARD_IP, host_mac=tap_mac(board), host_ip=HOST_IP, ctl_port=CTL_PORT)
    rng = random.Random(21)
    mix = [(f, c) for kind in KINDS for f, c in labelled(kind, net, rng, 2 if kind == "jumbo" else 4)
           if c is not None]
    rng.shuffle(mix)
    batches = [mix[i::4] for i in range(4)]
    # Linux's own IPv6 chatter (router solicitations, MLD) would count as unknown EtherTypes.
    board.ns_run(["sysctl", "-q", "-w", f"net.ipv6.conf.{TAP}.disable_ipv6=1"], check=True)
    time.sleep(0.5)
    before, mac_before = rx_stats(board), status(board)
    result = {}
    stream = threading.Thread(target=lambda: result.update(run_stream(board, rate=0.02, count=60)))
    stream.start()
    try:
        for batch in batches:
            simphy.inject(board.gateware_dir, [simphy.wire_frame(f) for f, _ in batch], timeout=120)
            INJECTED_ERRORS["fcs"] += sum(not fcs_ok(f) for f, _ in batch)
            r = ctl(board, "identify")   # The control port answers between batches.
            assert r.returncode == 0, r.stderr
    finally:
        stream.join(timeout=300)
    assert not stream.is_alive()
    after, mac_after = rx_stats(board), status(board)
    delta = {name: after[name] - before[name] for name in before}
    expected = collections.Counter(c for _, c in mix)
    for name in protocol.RX_AUDIT_CAUSES:
        if name == "rx_ok":   # Linux's own frames (the stream's control, ARP) are good frames too.
            assert delta[name] >= expected[name], (name, delta)
        elif name == "icmp_type":
            # Linux's "port unreachable" for stream datagrams that arrive after the receiver closed.
            assert delta[name] >= expected[name], (name, delta)
        else:
            assert delta[name] == expected[name], (name, delta[name], expected[name])
    assert mac_after["rx_fcs_errors"] - mac_before["rx_fcs_errors"] == expected["fcs"]
    assert delta["rx_full"] == 0 and delta["cpu_full"] == 0, delta
    res = result
    assert res["problems"] == [] and res["streams"] == [0, 1, 2, 3]
    assert res["missing"] == 0 and res["malformed"] == 0 and res["board_dropped"] == 0
    assert res["flags"]["overflow"] == 0 and res["counters_run"] == res["run"] and res["counters"] == res["received"]
    # ARP and ping afterwards: Linux forgets the board's MAC and has to ask again.
    board.ns_run(["ip", "neigh", "flush", "dev", TAP], check=True)
    r = board.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "3 packets transmitted, 3 received" in r.stdout, r.stdout
    neigh = board.ns_run(["ip", "neigh", "show", BOARD_IP, "dev", TAP], capture_output=True, text=True).stdout
    assert MAC.lower() in neigh.lower(), neigh
    r = ctl(board, "identify")
    assert r.returncode == 0 and "sim" in r.stdout, r.stdout + r.stderr


def test_a_short_soak_under_a_ping_flood_and_control_traffic_loses_nothing(board):
    """The robustness soak, short (bench/robustness.py soak runs 1,000,000): 64-byte DAQ
    datagrams from 4 channels at 70 % of the line, every sample checked by the receiver, while
    Linux floods the board with pings and a client asks STATUS in a loop: nothing lost, out of
    sequence, duplicated, malformed or dropped on the board; the pings and requests answered;
    nothing counted as bad."""
    from bench.robustness import soak
    board.ns_run(["sysctl", "-q", "-w", f"net.ipv6.conf.{TAP}.disable_ipv6=1"], check=True)
    # About a minute of simulation; the limit is for a board that stopped streaming.
    res, delta = soak(board, packets=20_000, payload=64, board_ip=BOARD_IP, ctl_port=CTL_PORT,
                      gateware_dir=board.gateware_dir, timeout=900)
    print(res, delta)
    # The receiver stops counting at 20,000; those sent before STREAM_STOP came are read after.
    assert res["datagrams"] >= 20_000 and res["datagrams"] == res["board_datagrams"], res
    assert (res["missing"], res["out_of_order"], res["duplicates"], res["malformed"], res["nproblems"],
            res["board_dropped"], res["kernel"]) == (0, 0, 0, 0, 0, 0, 0), res
    assert res["streams"] == [0, 1, 2, 3]
    assert res["pings"]["transmitted"] > 100 and res["pings"]["received"] >= res["pings"]["transmitted"] - 1, res["pings"]
    assert res["control"]["sent"] > 20 and res["control"]["failed"] == 0, res["control"]
    bad = {name: v for name, v in delta.items() if v and name not in ("rx_ok",)}
    assert bad == {}, bad


def test_a_flood_from_linux_faster_than_the_wire_is_dropped_by_the_kernel_and_the_board_streams_on(board):
    """Linux floods the board with pings (hping3 -1's size and full-MTU ones, through a raw
    socket, far faster than a gigabit wire carries them) while it streams. The simulated wire
    takes them at its rate and the kernel's queue for the tap drops the rest, counted where `ip -s
    link` shows them; the simulation runs on; every frame the kernel handed over reaches the board
    whole (counted once by its receive audit, nothing malformed); every DAQ sample arrives; ping
    and IDENTIFY are answered after."""
    from bench.robustness import host_flood
    board.ns_run(["sysctl", "-q", "-w", f"net.ipv6.conf.{TAP}.disable_ipv6=1"], check=True)
    # 4 channels of 1472-byte datagrams at 0.001 samples per cycle each: 0.8 % of the line. The
    # board answers the pings first (LiteEth's frames go before bulk data), and the answers take
    # nearly the whole line while the flood lasts: each channel holds 8 datagrams, 47 ms of this
    # stream, several times the simulated time of the flood (about 10 ms).
    res = host_flood(board, board.gateware_dir, TAP, MAC, BOARD_IP, HOST_IP, CTL_PORT, seconds=4,
                     count=2_000_000, rate=0.001, payload=1472)
    assert res["running"], "the simulation stopped:\n" + console_text(board)[-1000:]
    assert "overflowed" not in console_text(board)
    assert "3 packets transmitted, 3 received" in res["ping"], res["ping"]
    r = ctl(board, "identify")
    assert r.returncode == 0 and "sim" in r.stdout, r.stdout + r.stderr
    f, tap, rx, stream = res["flood"], res["tap"], res["rx"], res["stream"]
    # The kernel dropped and counted what the wire could not carry; the rest it handed over.
    assert f["sent"] > 100_000 and 0 < tap["dropped"] <= f["sent"], res
    assert f["sent"] <= tap["dropped"] + tap["packets"], res
    # The board counted each frame it got once, as a good frame (or, for Linux's port unreachables
    # after the receiver closed, as an ICMP type it does not answer): none cut, none mixed. Its
    # count can be ahead by the RX_STATS request itself and an ARP exchange.
    audit = {name: rx[name] for name in protocol.RX_AUDIT_CAUSES}
    assert {k: v for k, v in audit.items() if v and k not in ("rx_ok", "icmp_type")} == {}, audit
    assert tap["packets"] <= sum(audit.values()) <= tap["packets"] + 3, (tap, audit)
    # Every sample of the run arrived, in order; nothing dropped on the board.
    assert stream["problems"] == [] and stream["streams"] == [0, 1, 2, 3], stream
    assert (stream["missing"], stream["out_of_order"], stream["duplicates"], stream["malformed"],
            stream["board_dropped"], stream["kernel"]) == (0, 0, 0, 0, 0, 0), stream
    assert stream["datagrams"] == stream["board_datagrams"] > 0, stream


def pin_echo(host_mac, seq, echo_id, dst_mac=MAC, dst_ip=BOARD_IP):
    """An ICMP echo request from the host (`tap_mac()`), as it goes on the board's receive pins."""
    from scapy.all import ICMP, IP, Ether, Raw, raw
    from bench.hostile import with_fcs
    from ethdaq.gateware import simphy
    return simphy.wire_frame(with_fcs(raw(Ether(src=host_mac, dst=dst_mac) / IP(src=HOST_IP, dst=dst_ip) /
                                          ICMP(type=8, id=echo_id, seq=seq) / Raw(bytes(40)))))


def inject_and_get_replies(board, tmp_path, frames, echo_id, rx_er=()):
    """Inject `frames` at the pins; the seqs of the board's echo replies with `echo_id` (tcpdump)."""
    from scapy.all import ICMP, rdpcap
    from ethdaq.gateware import simphy
    pcap = tmp_path / f"replies-{echo_id:x}.pcap"
    with Capture(pcap, f"icmp and ether src {MAC}"):
        simphy.inject(board.gateware_dir, frames, rx_er=set(rx_er), timeout=60)
        time.sleep(1)  # The board's answers to the last frames.
    return sorted(f[ICMP].seq for f in rdpcap(str(pcap)) if f.haslayer(ICMP) and f[ICMP].id == echo_id)


def test_a_frame_with_rx_er_is_counted_and_not_answered(board, tmp_path):
    """RX_ER high during a frame (the PHY saw a bad symbol): LiteEth's GMII receiver ignores it and
    answered such a ping; the receive audit counts it under phy_error and drops it. The same ping
    without RX_ER is answered."""
    host = tap_mac(board)
    before = rx_stats(board)
    replies = inject_and_get_replies(board, tmp_path, [pin_echo(host, seq, 0x1E1E) for seq in (1, 2, 3)], 0x1E1E,
                                     rx_er={0, 2})
    assert rx_stats(board)["phy_error"] - before["phy_error"] == 2
    assert replies == [2], replies


def test_pings_for_another_host_are_counted_and_not_answered(board, tmp_path):
    """LiteEth alone answers a ping to any IPv4 address (its IP layer's with_broadcast) and to any
    MAC (no layer checks it): on a shared segment the board would answer for other hosts. The
    receive audit counts both under not_ours and drops them; the board's own ping is answered."""
    host = tap_mac(board)
    before = rx_stats(board)
    frames = [pin_echo(host, 1, 0x2F2F, dst_ip="192.168.77.99"), pin_echo(host, 2, 0x2F2F, dst_mac="02:00:00:00:00:99"),
              pin_echo(host, 3, 0x2F2F)]
    replies = inject_and_get_replies(board, tmp_path, frames, 0x2F2F)
    assert rx_stats(board)["not_ours"] - before["not_ours"] == 2
    assert replies == [3], replies


def test_discovery_on_the_subnets_directed_broadcast_gets_the_board_and_nothing_else_does(board):
    """As a user finds boards: `ethdaq discover --broadcast 192.168.77.255` from the host on the
    board's /24 (Linux sends it to ff:ff:ff:ff:ff:ff) lists the board. A STATUS to the same
    address is not answered (only IDENTIFY is, there) and is counted as broadcast; an IDENTIFY
    to another subnet's broadcast (scapy, on the wire) is not the board's: not_ours."""
    before = rx_stats(board)
    r = board.ns_run(ethdaq_cmd("discover", "--broadcast", "192.168.77.255", "--port", str(CTL_PORT), "--timeout",
                                "6", "--json"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)
    assert [(b["answered_from"], b["ip"], b["mac"], b["ctl_port"]) for b in found] == [(BOARD_IP, BOARD_IP, MAC, CTL_PORT)]
    answers = ns_python(board, f"""
import socket
from scapy.all import IP, UDP, Ether, Raw, sendp
from ethdaq.wire import daqformat, protocol
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.settimeout(4)
s.sendto(protocol.status_request(77), ("192.168.77.255", {CTL_PORT}))
sendp(Ether(dst="ff:ff:ff:ff:ff:ff") / IP(src={HOST_IP!r}, dst="192.168.78.255") /
      UDP(sport=s.getsockname()[1], dport={CTL_PORT}) / Raw(protocol.identify_request(78)), iface={TAP!r}, verbose=False)
try:
    print(s.recvfrom(2048))
except socket.timeout:
    print("none")
""")
    assert answers.strip() == "none", answers
    delta = {name: v - before[name] for name, v in rx_stats(board).items()}
    assert delta["broadcast"] == 1 and delta["not_ours"] == 1, delta


def test_reboot_resets_the_board_once_and_it_comes_back(board):
    """Last in this module: it reboots the board. Until here no watchdog reset happened (every test
    above ran on the first boot, the firmware feeding its 10 ms simulated-time watchdog); REBOOT
    resets every core, the firmware boots again and says why, and a REBOOT sent again with the
    old boot count (a retry after a lost answer) does not reboot it twice."""
    before = status(board)
    assert (before["boots"], before["reset_cause"], before["watchdog_resets"]) == (0, 0, 0)
    assert before["uptime_ms"] > 0
    # Every frame Linux sent in this module had a good FCS: none may be counted bad (the MAC's
    # FCS check runs: gateware/txpath.py, test/gateware/test_macstats.py), but those injected at the pins.
    assert (before["rx_fcs_errors"], before["rx_preamble_errors"]) == (INJECTED_ERRORS["fcs"],
                                                                       INJECTED_ERRORS["preamble"])
    banners = sum("ethdaq ready" in line for line in board.lines)
    assert ctl(board, "config", "set", "payload=256").returncode == 0
    r = ctl(board, "reboot", timeout=180)
    assert r.returncode == 0, r.stderr
    assert "rebooted: boot 1 since power-on, reset cause reboot" in r.stdout
    after = status(board)
    assert (after["boots"], after["reset_cause"], after["watchdog_resets"]) == (1, 2, 0)
    assert after["running"] == 0 and after["run"] == 0  # The streamer was reset too.
    r = ctl(board, "config", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["payload"] == 1472  # The build's settings again.
    console = console_text(board)
    assert "control: reboot requested by " + HOST_IP in console
    assert "reset    : reboot (boot 1 since power-on, 0 by the watchdog)" in console
    assert sum("ethdaq ready" in line for line in board.lines) == banners + 1
    # The same REBOOT again, as a retry whose first answer was lost: answered, not executed.
    code = f"""
import json
from ethdaq.host.ctl import ControlClient
from ethdaq.wire import daqformat, protocol
with ControlClient({BOARD_IP!r}, {CTL_PORT}) as c:
    print(json.dumps(c._expect(lambda seq: protocol.reboot_request(seq, 0), protocol.MSG_REBOOT)))
"""
    assert json.loads(ns_python(board, code)) == [0, 1]
    assert status(board)["boots"] == 1
    r = board.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_rx_stats_count_received_frames_the_board_did_not_use_by_cause(board):
    """RX_STATS (`ethdaq ctl rx`): datagrams to a UDP port nothing on the board listens on are
    counted by the receive audit under udp_port, datagrams to the control port with a wrong magic
    by the firmware's parser under ctl_magic, each exactly once; frames the board used (the
    control requests themselves) under rx_ok."""
    before = rx_stats(board)
    # This build has the receive audit (an 8-bit, 1 Gb/s datapath), the frame gate (the classifier)
    # and PTP: every counter protocol.py defines.
    assert list(before) == [name for _, name, _ in protocol.RX_COUNTERS], before
    ns_python(board, f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(3):
    s.sendto(b"nobody listens on this port", ({BOARD_IP!r}, 4242))
for _ in range(2):
    s.sendto(b"\\xbe\\xef" + bytes(10), ({BOARD_IP!r}, {CTL_PORT}))
""")
    after = rx_stats(board)   # Sent after them on the same tap: the board has counted them when it answers.
    delta = {name: after[name] - before[name] for name in before}
    assert delta["udp_port"] == 3, delta
    assert delta["ctl_magic"] == 2, delta
    # The two wrong-magic datagrams and the second request reached the firmware: good frames.
    assert delta["rx_ok"] >= 3, delta
    assert all(delta[name] == 0 for name in ("fcs", "runt", "oversize", "udp_length", "udp_empty", "ip_checksum",
                                             "preamble", "rx_full", "cpu_full", "ctl_short", "ctl_response",
                                             "ctl_version", "ctl_type", "ctl_length")), delta
    r = ctl(board, "rx", "--nonzero")
    assert r.returncode == 0 and re.search(r"^  udp_port +\d+  UDP to a port nothing on the board listens on$",
                                           r.stdout, re.M), r.stdout


EXPORTER = """
import json, re, subprocess, sys, time, urllib.request
exporter, ctl, url = json.loads(sys.argv[1])
p = subprocess.Popen(exporter, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
p.stderr.readline()                      # "serving metrics of ...": the port is open
deadline = time.monotonic() + 200

def answered():
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    m = re.search(r'ethdaq_board_polls_total\\{board="[^"]+",result="ok"\\} (\\d+)', text)
    assert p.poll() is None and time.monotonic() < deadline, text
    return int(m.group(1)) if m else 0, text

def replies():
    return [json.loads(subprocess.run(ctl + [a, "--json"], capture_output=True, text=True, check=True).stdout)
            for a in ("status", "rx", "ptp")]

# The board's answers before and after one of the exporter's polls: before taken wholly between
# two polls (else again: the three ctl commands must fit between polls, which takes seconds on a
# loaded machine), then the next poll's metrics, then after.
while True:
    n, _ = answered()
    if n == 0:
        time.sleep(0.2)
        continue
    before = replies()
    if answered()[0] == n:
        break
while True:
    k, text = answered()
    if k > n:
        break
    time.sleep(0.2)
after = replies()
p.terminate()
print(json.dumps([text, p.wait(timeout=30), before, after]))
"""


def test_the_exporters_metrics_are_the_boards_counters(board):
    """`ethdaq exporter` polling the board, its metrics parsed by prometheus-client's own parser,
    against what `ethdaq ctl status`, `ctl rx` and `ctl ptp` report just before and just after
    that poll: every counter between the two (equal where nothing moved), the PTP state one of
    the two. The polls themselves move the control requests and the frames received."""
    from prometheus_client.parser import text_string_to_metric_families
    where = ["--port", str(CTL_PORT)]
    exporter = ethdaq_cmd("exporter", "--board", BOARD_IP, *where, "--metrics", "127.0.0.1:9109", "--interval", "8")
    ctl_cmd = ethdaq_cmd("ctl") + ["--ip", BOARD_IP, *where]
    out = ns_python_args(board, EXPORTER, [json.dumps([exporter, ctl_cmd, "http://127.0.0.1:9109/metrics"])],
                         timeout=300)
    text, code, (st0, rx0, ptp0), (st1, rx1, ptp1) = json.loads(out.strip().splitlines()[-1])
    assert code == 0      # SIGTERM ends it cleanly
    m = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            assert s.labels.pop("board") == BOARD_IP
            m[(s.name, tuple(sorted(s.labels.items())))] = s.value
    one = lambda name, **labels: m[(name, tuple(sorted(labels.items())))]  # noqa: E731

    def between(value, lo, hi, what):
        assert lo <= value <= hi, (what, lo, value, hi)

    assert one("ethdaq_board_up") == 1
    for name in ("boots", "datagrams", "dropped_samples", "link_losses", "watchdog_resets", "ctl_refused"):
        field = {"dropped_samples": "dropped"}.get(name, name)
        between(one(f"ethdaq_board_{name}_total"), st0[field], st1[field], name)
    between(one("ethdaq_board_ctl_requests_total"), st0["ctl_requests"] + 1, st1["ctl_requests"] - 1, "requests")
    between(one("ethdaq_board_uptime_seconds") * 1000, st0["uptime_ms"], st1["uptime_ms"], "uptime")
    assert one("ethdaq_board_run") == st1["run"] and one("ethdaq_board_running") == st1["running"] == st0["running"]
    assert one("ethdaq_board_link_up") in {st["link"].startswith("up") for st in (st0, st1)}, (st0["link"], st1["link"])
    assert one("ethdaq_board_link_speed_bits_per_second") in {st["link_speed"] * 1e6 for st in (st0, st1)}
    for s0, s1 in zip(st0["streams"], st1["streams"]):
        between(one("ethdaq_board_stream_datagrams_total", stream=str(s1["stream"])), s0["datagrams"], s1["datagrams"],
                "stream datagrams")
        between(one("ethdaq_board_stream_dropped_samples_total", stream=str(s1["stream"])), s0["dropped"],
                s1["dropped"], "stream dropped")
    exported_rx = {dict(k[1])["cause"]: v for k, v in m.items() if k[0] == "ethdaq_board_rx_frames_total"}
    assert set(exported_rx) == set(rx1)
    for cause in rx1:
        between(exported_rx[cause], rx0[cause], rx1[cause], cause)
    assert rx0["rx_ok"] < exported_rx["rx_ok"] < rx1["rx_ok"]
    states = {k[1] for k in m if k[0] == "ethdaq_board_ptp_state"}
    assert len(states) == 1 and dict(next(iter(states)))["state"] in (ptp0["state"], ptp1["state"]), states
    between(one("ethdaq_board_ptp_steps_total"), ptp0["steps"], ptp1["steps"], "ptp steps")
    info = [k for k in m if k[0] == "ethdaq_board_info"]
    assert len(info) == 1 and dict(info[0][1])["mac"] == MAC
