"""The simulated 10G board (sim10g: gateware/xgmiiphy.py's XGMII PHY, eth_dw=64) on a tap inside a private network
namespace, against real Linux programs: ping, arping, `ethdaq ctl`, a stream to a receiver that
checks every sample, tcpdump + tshark as an independent decoder."""

import json
import subprocess
import sys

import pytest

from conftest import REPO, background_build, ethdaq_cmd, requires_root
from ethdaq.boards import get_board
from ethdaq.soc import build, sim
from ethdaq.soc.gitrev import git_hash
from test_network import STREAM_CHECK, Capture

NETNS    = "ethdaq-test-10g"
TAP      = "ethdaq10"
BOARD_IP = "192.168.84.50"
HOST_IP  = "192.168.84.1"
MAC      = "10:e2:d5:00:00:84"
CTL_PORT = 7010
FASTTRACK_PORT = 9000
OUT      = REPO / "build" / "test-sim10g"
# With the receive classifier at 64 bits (a fast-track rule implies it).
BUILD = ["build", "--board", "sim10g", "--ip", BOARD_IP, "--netmask", "24", "--mac", MAC,
         "--ctl-port", str(CTL_PORT), "--fasttrack-port", str(FASTTRACK_PORT), "--output-dir", str(OUT)]
pytestmark = [requires_root, pytest.mark.network, pytest.mark.background_build("sim10g", BUILD)]


@pytest.fixture(scope="module")
def board():
    code, log = background_build("sim10g", timeout=1800)
    assert code == 0, log
    build.write_sim_config(get_board("sim10g"), OUT / "gateware", tap=TAP, host_ip=HOST_IP)
    session = sim.SimSession(OUT / "gateware", netns=NETNS, echo=False, log=OUT / "console-fixture.log")
    with session:
        session.wait_for("ethdaq ready", timeout=300)
        yield session
    assert NETNS not in sim.list_netns()


def ctl(board, *args, timeout=60):
    return board.ns_run(ethdaq_cmd("ctl", *args, "--ip", BOARD_IP, "--port", str(CTL_PORT)),
                        capture_output=True, text=True, timeout=timeout)


def tap_mac(board):
    """The MAC address of the tap, Linux's end of the board's wire."""
    return json.loads(board.ns_run(["ip", "-j", "link", "show", TAP], capture_output=True, text=True,
                                   check=True).stdout)[0]["address"]


def rx_stats(board):
    """The board's receive counters (RX_STATS), by name."""
    r = ctl(board, "rx", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def stream(board, rate, count):
    r = board.ns_run([sys.executable, "-c", STREAM_CHECK, BOARD_IP, str(CTL_PORT), str(rate), str(count)],
                     capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_firmware_boots_on_the_10g_board_and_says_so(board):
    console = "\n".join(board.lines)
    assert "board    : sim10g" in console
    assert f"ip       : {BOARD_IP}/24" in console and f"mac      : {MAC}" in console
    assert "eth_dw=64" in console


def test_linux_ping_gets_every_reply_also_at_the_mtu(board):
    r = board.ns_run(["ping", "-c", "5", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "5 packets transmitted, 5 received, 0% packet loss" in r.stdout, r.stdout
    r = board.ns_run(["ping", "-c", "2", "-s", "1472", "-M", "do", "-W", "5", BOARD_IP],
                     capture_output=True, text=True, timeout=60)
    assert "2 packets transmitted, 2 received, 0% packet loss" in r.stdout, r.stdout


def test_arping_gets_replies_from_the_boards_mac(board):
    r = board.ns_run(["arping", "-c", "3", "-w", "10", "-I", TAP, BOARD_IP], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count(f"from {MAC}") == 3


def test_identify_names_the_10g_board_and_its_64_bit_datapath(board):
    r = ctl(board, "identify", "--json")
    assert r.returncode == 0, r.stderr
    ident = json.loads(r.stdout)
    assert ident["board"] == "sim10g" and ident["build_id"] == git_hash()
    assert ident["ip"] == BOARD_IP and ident["mac"] == MAC and ident["ctl_port"] == CTL_PORT
    assert ident["eth_dw"] == 64 and ident["sys_clk_hz"] == 125_000_000
    assert ident["ident"].startswith(f"ethdaq sim10g {git_hash()}") and "eth_dw=64" in ident["ident"]
    assert "ptp" in ident["capabilities"] and "streamer" in ident["capabilities"]


def test_requests_with_an_empty_answer_are_answered(board):
    """An empty answer is an 8-byte datagram: one word of the 64-bit stack (hold_upconverter_params,
    gateware/cpuport.py); the board must neither lose it nor reset."""
    for action in ("claim", "release", "claim"):
        r = ctl(board, action)
        assert r.returncode == 0, r.stdout + r.stderr
    r = ctl(board, "emulator", "--mode", "counter", "--rate", "0.01")
    assert r.returncode == 0, r.stdout + r.stderr
    r = ctl(board, "status", "--json")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert status["watchdog_resets"] == 0 and status["boots"] == 0, status
    assert ctl(board, "release").returncode == 0


def test_frames_on_the_wire_decode_cleanly_in_tshark(board, tmp_path):
    """tcpdump on the tap; tshark checks the IPv4 and ICMP checksums of everything the board sent
    and decodes the identify answer as UDP from the control port."""
    pcap = tmp_path / "board.pcap"
    with Capture(pcap, f"ether src {MAC}", netns=NETNS, tap=TAP):
        board.ns_run(["ping", "-c", "3", "-W", "5", BOARD_IP], capture_output=True, timeout=60)
        ctl(board, "identify")
    r = subprocess.run(["tshark", "-r", str(pcap), "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
                        "-T", "fields", "-E", "separator=,", "-e", "frame.protocols", "-e", "ip.checksum.status",
                        "-e", "icmp.checksum.status", "-e", "udp.srcport"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = [line.split(",") for line in r.stdout.strip().splitlines()]
    icmp = [row for row in rows if "icmp" in row[0]]
    ctl_udp = [row for row in rows if "udp" in row[0] and row[3] == str(CTL_PORT)]
    assert len(icmp) == 3 and all(row[1] == "1" and row[2] == "1" for row in icmp), rows   # 1 = Good.
    assert len(ctl_udp) >= 1 and all(row[1] == "1" for row in ctl_udp), rows


def test_a_stream_arrives_complete_and_in_order_every_sample_checked(board):
    res = stream(board, rate=0.02, count=60)
    assert res["problems"] == [] and res["streams"] == [0, 1, 2, 3]
    assert res["missing"] == 0 and res["malformed"] == 0 and res["kernel"] == 0
    assert res["board_dropped"] == 0 and res["flags"]["overflow"] == 0
    assert res["flags"]["first"] == 4 and res["flags"]["last"] == 4
    assert res["status_dropped"] == 0
    assert res["counters_run"] == res["run"] and res["counters"] == res["received"]


def test_four_channels_at_a_sample_per_cycle_fit_the_10g_link(board):
    """Four 16-bit channels at one sample per 125 MHz cycle each: 8 Gb/s of samples, eight times
    what the 1G board's link carries (it drops and counts the rest, test_network.py), within
    10 Gb/s with the headers: nothing dropped, every sample arrives."""
    res = stream(board, rate=1.0, count=120)
    assert res["problems"] == [] and res["streams"] == [0, 1, 2, 3]
    assert res["missing"] == 0 and res["malformed"] == 0 and res["kernel"] == 0
    assert res["board_dropped"] == 0 and res["flags"]["overflow"] == 0 and res["status_dropped"] == 0
    assert res["counters"] == res["received"]


# Frames (hex, without FCS) from a file into the tap through a raw socket, spread over a stream:
# the frames of a line (separated by commas) one right after the other, so the tap module puts
# them on the pins back to back; the tap's MTU (ours, in our namespace) raised for the oversize
# and jumbo ones.
SEND_FRAMES = """
import socket, subprocess, sys, time
tap, path = sys.argv[1:3]
lines = [[bytes.fromhex(h) for h in line.split(",")] for line in open(path).read().split()]
subprocess.run(["ip", "link", "set", "dev", tap, "mtu", "9100"], check=True)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((tap, 0))
for frames in lines:
    for f in frames:
        s.send(f)
    time.sleep(0.02)
print(sum(len(frames) for frames in lines))
"""


def in_pairs(frames, longest=1514):
    """Frames two to a line (back to back on the wire), those longer than `longest` alone."""
    lines, pending = [], []
    for f in frames:
        if len(f) > longest:
            lines.append([f])
            continue
        pending.append(f)
        if len(pending) == 2:
            lines.append(pending)
            pending = []
    return lines + ([pending] if pending else [])


def test_hostile_frames_from_linux_during_a_stream_are_each_counted_by_cause(board, tmp_path):
    """bench/hostile.py's frames, shuffled, from Linux through the XGMII wire while the board
    streams, two at a time back to back: each is counted once by the receive audit (RX_STATS) under the cause bench/hostile.py
    labels it with, none disturbs the stream, the control port answers after. Not the kinds whose
    point is the FCS or the length on the wire (bad_fcs, runt): this board has no injector, and
    the tap module gives every frame a good FCS and pads it to 60 bytes."""
    import collections, random, threading
    from bench.hostile import KINDS, Network, labelled, strip_fcs
    from ethdaq.wire import protocol
    net = Network(board_mac=MAC, board_ip=BOARD_IP, host_mac=tap_mac(board), host_ip=HOST_IP, ctl_port=CTL_PORT)
    rng = random.Random(31)
    mix = [(f, c) for kind in KINDS if kind not in ("bad_fcs", "runt")
           for f, c in labelled(kind, net, rng, 2 if kind == "jumbo" else 4) if c is not None]
    rng.shuffle(mix)
    frames_file = tmp_path / "frames.hex"
    frames_file.write_text("\n".join(",".join(f.hex() for f in line)
                                     for line in in_pairs([strip_fcs(f) for f, _ in mix])) + "\n")
    # Linux's own IPv6 chatter (router solicitations, MLD) would count as unknown EtherTypes.
    board.ns_run(["sysctl", "-q", "-w", f"net.ipv6.conf.{TAP}.disable_ipv6=1"], check=True)
    before = rx_stats(board)
    result = {}
    thread = threading.Thread(target=lambda: result.update(stream(board, rate=0.02, count=60)))
    thread.start()
    try:
        r = board.ns_run([sys.executable, "-c", SEND_FRAMES, TAP, str(frames_file)],
                         capture_output=True, text=True, timeout=300)
    finally:
        thread.join(timeout=300)
    assert r.returncode == 0 and int(r.stdout) == len(mix), r.stdout + r.stderr
    assert not thread.is_alive()
    after = rx_stats(board)
    delta = {name: after[name] - before[name] for name in before}
    expected = collections.Counter(c for _, c in mix)
    # Linux's own good frames (the stream's control, ARP) add to rx_ok; its "port unreachable"
    # for stream datagrams that arrive after the receiver closed, to icmp_type.
    at_least = ("rx_ok", "icmp_type")
    assert all(delta[name] >= expected[name] for name in at_least), (delta, expected)
    assert {name: delta[name] for name in protocol.RX_AUDIT_CAUSES if name not in at_least} == \
           {name: expected[name] for name in protocol.RX_AUDIT_CAUSES if name not in at_least}, delta
    assert delta["rx_full"] == 0 and delta["cpu_full"] == 0, delta
    res = result
    assert res["problems"] == [] and res["streams"] == [0, 1, 2, 3]
    assert res["missing"] == 0 and res["malformed"] == 0 and res["board_dropped"] == 0
    assert res["flags"]["overflow"] == 0 and res["counters"] == res["received"]
    r = board.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "3 packets transmitted, 3 received" in r.stdout, r.stdout
    assert ctl(board, "identify").returncode == 0

def test_frames_back_to_back_of_every_length_are_each_counted_once(board, tmp_path):
    """UDP datagrams to a port nothing listens on, two at a time back to back, in frames of 60 to
    75 bytes and their FCS (the last word holding each of 1 to 8 bytes, twice over): each is
    counted as udp_port, none as an FCS or PHY error, and so is the one after it (they leave the
    receive crossing back to back; gateware/framespacer.py)."""
    from scapy.all import IP, UDP, Ether, Raw, raw
    from ethdaq.wire import protocol
    frames = [raw(Ether(src=tap_mac(board), dst=MAC) / IP(src=HOST_IP, dst=BOARD_IP) / UDP(sport=40000, dport=9999) /
                  Raw(bytes(n - 42))) for n in range(60, 76)]
    frames_file = tmp_path / "frames.hex"
    frames_file.write_text("\n".join(f"{f.hex()},{f.hex()}" for f in frames) + "\n")
    board.ns_run(["sysctl", "-q", "-w", f"net.ipv6.conf.{TAP}.disable_ipv6=1"], check=True)
    before = rx_stats(board)
    r = board.ns_run([sys.executable, "-c", SEND_FRAMES, TAP, str(frames_file)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and int(r.stdout) == 2*len(frames), r.stdout + r.stderr
    after = rx_stats(board)
    delta = {name: after[name] - before[name] for name in protocol.RX_AUDIT_CAUSES if after[name] != before[name]}
    rx_ok = delta.pop("rx_ok", 0)   # The control request itself, ARP.
    assert delta == {"udp_port": 2*len(frames)} and rx_ok >= 1, delta


def test_bursts_that_overfill_the_receive_crossing_are_counted_frame_by_frame(board, tmp_path):
    """Frames back to back from Linux, faster than sys takes them (156.25 into 125 MHz): 40
    1514-byte UDP frames to a port nothing listens on, then 4 jumbo frames. Each MTU frame is
    counted once, as udp_port or, once the receive crossing is full, as rx_full (dropped whole:
    none as an FCS or PHY error); each jumbo frame, longer than the crossing, as oversize. The
    board answers after."""
    from scapy.all import IP, UDP, Ether, Raw, raw
    from ethdaq.wire import protocol
    udp = Ether(src=tap_mac(board), dst=MAC) / IP(src=HOST_IP, dst=BOARD_IP) / UDP(sport=40000, dport=9999)
    mtu, jumbo = raw(udp / Raw(bytes(1514 - 42))), raw(udp / Raw(bytes(9014 - 42)))
    frames_file = tmp_path / "frames.hex"
    frames_file.write_text(",".join([mtu.hex()] * 40) + "\n" + ",".join([jumbo.hex()] * 4) + "\n")
    board.ns_run(["sysctl", "-q", "-w", f"net.ipv6.conf.{TAP}.disable_ipv6=1"], check=True)
    before = rx_stats(board)
    r = board.ns_run([sys.executable, "-c", SEND_FRAMES, TAP, str(frames_file)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and int(r.stdout) == 44, r.stdout + r.stderr
    after = rx_stats(board)
    delta = {name: after[name] - before[name] for name in (*protocol.RX_AUDIT_CAUSES, "rx_full")
             if after[name] != before[name]}
    delta.pop("rx_ok", 0)   # The control requests themselves, ARP.
    assert delta.get("rx_full", 0) > 0 and delta.get("udp_port", 0) >= 10, delta
    assert delta == {"udp_port": 40 - delta["rx_full"], "rx_full": delta["rx_full"], "oversize": 4}, delta
    r = board.ns_run(["ping", "-c", "3", "-i", "0.2", "-W", "5", BOARD_IP], capture_output=True, text=True, timeout=60)
    assert "3 packets transmitted, 3 received" in r.stdout, r.stdout


def rules_now(board):
    r = ctl(board, "rules", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_receive_rules_at_64_bits_take_their_datagrams_and_count_them(board):
    """The receive classifier at 64 bits, behind the XGMII receiver and the 64-bit FCS checker:
    RULES shows the build's fast-track rule; datagrams to its port are counted by it (and go to
    the hardware sink, not to LiteEth); a drop rule set through the control protocol counts what
    Linux sends to its port, dropped whole at the frame gate; the control port answers after."""
    from ethdaq.wire import protocol
    before = rules_now(board)
    assert len(before["rules"]) == protocol.MAX_RULES
    assert [(r["index"], r["enable"], r["action"], r["port"]) for r in before["rules"]][:2] == [
        (0, 1, "fasttrack", FASTTRACK_PORT), (1, 0, "cpu", 0)]
    r = ctl(board, "rules", "set", "1", "action=drop", "port=9100")
    assert r.returncode == 0 and "rule 1: enabled, drop for UDP port 9100" in r.stdout, r.stdout + r.stderr
    try:
        r = board.ns_run([sys.executable, "-c", f"""
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for port in (9100, 9100, 9100, {FASTTRACK_PORT}, {FASTTRACK_PORT}):
    s.sendto(b"x" * 50, ({BOARD_IP!r}, port))
    time.sleep(0.2)
"""], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        after = rules_now(board)
        assert after["rules"][1]["matched"] - before["rules"][1]["matched"] == 3
        assert after["rules"][0]["matched"] - before["rules"][0]["matched"] == 2
        assert after["gate_error"] - before["gate_error"] >= 3
    finally:
        r = ctl(board, "rules", "set", "1", "enable=0")
        assert r.returncode == 0, r.stderr
    assert ctl(board, "identify").returncode == 0


def test_every_frame_the_board_sent_passed_the_tap_modules_xgmii_checks(board):
    """Last: the tap module reports each frame it did not pass on (a lane, preamble, SFD or FCS
    error, /E/) on the console; after everything above there is none."""
    console = "\n".join(board.lines)
    assert "[ethdaq_xgmii] TX" not in console
    assert "ethdaq ready" in console and console.count("ethdaq firmware") == 1   # No reset either.
