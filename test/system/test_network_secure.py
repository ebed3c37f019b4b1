"""A board built with a shared key and an allow-list (--ctl-key-file, --ctl-allow), simulated on
its own tap: the firmware itself, not the handler in a harness, refuses what it should, counts it,
and obeys the signed requests of an allowed controller; a signed request recorded before a reboot
cannot be replayed after it.

The same board is built with a data path other than the default (--channels 8 --sample-width 32),
so one simulated build also shows that profile end to end: gateware, firmware and receiver."""

import json
import subprocess
import sys

import pytest

from conftest import REPO, background_build, ethdaq_cmd, requires_root
from ethdaq.boards import get_board
from ethdaq.soc import build, sim
from ethdaq.wire import protocol

NETNS    = "ethdaq-test-sec"
TAP      = "ethdaq1"
BOARD_IP = "192.168.78.50"
HOST_IP  = "192.168.78.1"     # On the allow-list.
OTHER_IP = "192.168.78.2"     # Not on it.
CTL_PORT = 7002
KEY      = bytes(range(0x40, 0x60))
OUT      = REPO / "build" / "test-sim-secure"
KEY_FILE = OUT / "ctl.key"

# The build runs in the background from collection on (test/conftest.py), beside the other tests;
# it reads the key file, so that is written now.
OUT.mkdir(parents=True, exist_ok=True)
KEY_FILE.write_text(KEY.hex() + "\n")
BUILD = ["build", "--board", "sim", "--ip", BOARD_IP, "--ctl-port", str(CTL_PORT), "--ctl-key-file", str(KEY_FILE),
         "--ctl-allow", f"{HOST_IP}/32", "--channels", "8", "--sample-width", "32", "--output-dir", str(OUT)]
pytestmark = [requires_root, pytest.mark.network, pytest.mark.background_build("sim-secure", BUILD)]


@pytest.fixture(scope="module")
def board():
    code, log = background_build("sim-secure", timeout=1800)
    assert code == 0, log
    build.write_sim_config(get_board("sim"), OUT / "gateware", tap=TAP, host_ip=HOST_IP)
    session = sim.SimSession(OUT / "gateware", netns=NETNS, echo=False, log=OUT / "console-fixture.log")
    with session:
        session.wait_for("ethdaq ready", timeout=180)
        # A second host on the same link, outside the allow-list.
        session.ns_run(["ip", "addr", "add", f"{OTHER_IP}/24", "dev", TAP], check=True)
        yield session
    assert NETNS not in sim.list_netns()


def run_client(board, body, bind=HOST_IP, key=None):
    """Run `body` (Python using `c`, a ControlClient) inside the namespace; returns its JSON output.
    The client waits 10 s for each answer, not 2: a signed request costs the simulated CPU about a
    second of a loaded machine's time, and a refused request sent again is refused (and counted)
    again, as it is not kept in the reply cache."""
    code = f"""
import json
from ethdaq.host.ctl import ControlClient, ControlRefused
from ethdaq.wire import protocol
out = {{}}
def refused(fn):
    try:
        fn()
    except ControlRefused as e:
        return e.code
    return 0
with ControlClient({BOARD_IP!r}, {CTL_PORT}, bind={bind!r}, key={key!r}, timeout=10) as c:
{body}
print(json.dumps(out))
"""
    r = board.ns_run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def status(board):
    return run_client(board, "    st = c.status(); out.update(refused=st.ctl_refused, running=st.running, "
                             "controller=st.controller_ip, boots=st.boots)")


def test_banner_says_what_protects_the_board(board):
    console = "\n".join(board.lines)
    assert "control: changes need requests signed with the shared key" in console
    assert "control: only 1 allowed network(s) may take control" in console


def test_reads_need_no_key_but_changes_do(board):
    before = status(board)["refused"]
    out = run_client(board, """
    ident = c.identify()
    out["caps"] = ident.capabilities
    out["unsigned"] = refused(lambda: c.stream_start(dst_port=5000))
""")
    assert out["caps"] & protocol.CAP_AUTH and out["caps"] & protocol.CAP_ALLOW
    assert out["unsigned"] == protocol.ERR_AUTH_REQUIRED
    wrong = run_client(board, "    out['code'] = refused(lambda: c.stream_start(dst_port=5000))", key=bytes(32))
    assert wrong["code"] == protocol.ERR_AUTH_FAILED
    after = status(board)
    assert after["refused"] == before + 2 and after["running"] == 0 and after["controller"] == 0


def test_the_cli_with_the_key_file_controls_the_board_and_without_it_says_why(board):
    r = board.ns_run(ethdaq_cmd("ctl", "start", "--ip", BOARD_IP, "--port", str(CTL_PORT)),
                     capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "the board needs signed requests (--key-file)" in r.stderr
    key_file = str(KEY_FILE)
    for action in ("start", "stop"):
        r = board.ns_run(ethdaq_cmd("ctl", action, "--ip", BOARD_IP, "--port", str(CTL_PORT), "--key-file", key_file),
                         capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    st = status(board)
    assert st["running"] == 0
    r = board.ns_run(ethdaq_cmd("ctl", "release", "--ip", BOARD_IP, "--port", str(CTL_PORT), "--key-file", key_file),
                     capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_an_address_off_the_allow_list_is_refused_even_with_the_key(board):
    before = status(board)["refused"]
    out = run_client(board, """
    out["code"] = refused(lambda: c.claim(30))
    out["start"] = refused(lambda: c.stream_start(dst_port=5000))
    out["status_running"] = c.status().running   # Reads are still answered.
""", bind=OTHER_IP, key=KEY)
    assert out == dict(code=protocol.ERR_NOT_ALLOWED, start=protocol.ERR_NOT_ALLOWED, status_running=0)
    assert status(board)["refused"] == before + 2


def test_a_recorded_signed_request_is_not_accepted_again_even_after_a_reboot(board):
    """The counter of the last accepted signed request survives the reboot (gateware/watchdog.py
    retained word), so a copy recorded on the wire is refused before and after it."""
    out = run_client(board, """
    import socket, time
    c.claim(30)
    boots = c.status().boots
    recorded = protocol.sign(protocol.stream_stop_request(12345), c.key, time.time_ns())
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(({HOST_IP!r}, 0))
    # A signed request takes the simulated CPU about a second of this machine's time (HMAC-SHA256
    # in software, 2 ms simulated): like ControlClient, wait longer than that, send the same bytes
    # again on a timeout and take only the answer with the request's seq.
    s.settimeout(10)
    def send(datagram):
        seq = protocol.unpack_header(datagram)[1]
        for attempt in range(3):
            s.sendto(datagram, ({BOARD_IP!r}, {CTL_PORT}))
            try:
                while True:
                    rsp = protocol.parse_response(s.recv(2048))
                    if rsp[1] == seq:
                        return rsp
            except TimeoutError:
                continue
        raise TimeoutError(f"no answer to seq {seq}")
    out["first"] = send(recorded)[0]
    # The same bytes again are a retransmission: answered from the reply cache, not executed.
    out["again"] = send(recorded)[0]
    # Its counter under a new seq: a replay.
    seq2 = protocol.sign(protocol.stream_stop_request(12346), c.key, int.from_bytes(recorded[-40:-32], "big"))
    out["replay"] = send(seq2)[2]
    c.reboot(wait=120)
    out["boots"] = c.status().boots - boots
    out["after_reboot"] = send(seq2)[2]
    out["recorded_after_reboot"] = send(recorded)[2]
""".replace("{HOST_IP!r}", repr(HOST_IP)).replace("{BOARD_IP!r}", repr(BOARD_IP)).replace("{CTL_PORT}", str(CTL_PORT)),
        key=KEY)
    assert out["first"] == out["again"] == protocol.MSG_STREAM_STOP | protocol.RESPONSE
    assert out["replay"] == protocol.ERR_AUTH_FAILED
    assert out["boots"] == 1
    assert out["after_reboot"] == protocol.ERR_AUTH_FAILED
    assert out["recorded_after_reboot"] == protocol.ERR_AUTH_FAILED


def test_eight_channels_of_32_bit_samples_arrive_whole_and_in_order(board):
    """The build's profile, end to end: the banner and IDENTIFY say 8 channels of 32-bit samples;
    each channel's emulator (the firmware sets all eight) counts, and the receiver gets every
    stream's counter samples consecutive modulo 2**32, nothing missing or dropped, each stream's
    datagrams and bytes what the board counted sending."""
    assert "streamer : 8 channels x 32-bit samples" in "\n".join(board.lines)
    out = run_client(board, """
    from ethdaq.host.receiver import Receiver
    from ethdaq.wire import daqformat
    ident = c.identify()
    out["ident"] = [ident.nchannels, ident.sample_bits]
    problems, last, received = [], {}, {}
    def check(h, payload):
        n = h.sample_bits // 8
        s = [int.from_bytes(payload[i*n:(i+1)*n], "big") for i in range(h.sample_count)]
        r = received.setdefault(h.stream_id, [0, 0, h.sample_bits])
        r[0] += 1
        r[1] += daqformat.HEADER_LEN + h.sample_count * n
        if s != [(s[0] + i) % 2**32 for i in range(len(s))]:
            problems.append(f"stream {h.stream_id} seq {h.seq}: samples not consecutive")
        if h.stream_id in last and s and (s[0] - last[h.stream_id] - 1) % 2**32 != 0:
            problems.append(f"stream {h.stream_id} seq {h.seq}: a gap before {s[0]}")
        if s:
            last[h.stream_id] = s[-1]
    with Receiver(port=5000) as rx:
        c.claim(60)
        c.emulator("counter", int(0.01 * 2**32))
        run, dst = c.stream_start(dst_port=5000, payload=1472)
        stats = rx.run(max_datagrams=48, idle_timeout=60, on_datagram=check)
        c.stream_stop()
        stats = rx.run(idle_timeout=3, on_datagram=check)
        streams = c.streams()
        c.release()
    out.update(problems=problems, missing=stats.missing, malformed=stats.malformed_total,
               board_dropped=sum(s.board_dropped for s in stats.streams.values()),
               received={str(k): v[:2] for k, v in sorted(received.items())},
               bits=sorted({v[2] for v in received.values()}), run=run, counters_run=streams.run,
               counters={str(s.stream): [s.datagrams, s.bytes] for s in streams.streams})
""", key=KEY)
    assert out["ident"] == [8, 32]
    assert out["problems"] == [] and out["bits"] == [32], out
    assert sorted(out["received"]) == [str(i) for i in range(8)], out
    assert (out["missing"], out["malformed"], out["board_dropped"]) == (0, 0, 0), out
    assert out["counters_run"] == out["run"] and out["counters"] == out["received"], out


HOST_B_IP = "192.168.78.3"
HOST_B_NS = NETNS + "-b"


def test_two_hosts_with_their_own_macs_each_get_their_replies(board):
    """Two hosts with their own MAC addresses on the board's link: the namespace (on a bridge with
    the board's tap) and host B (its own namespace, a veth into that bridge). They ping the board
    in turn, so both are in its ARP cache: each gets every reply. LiteEth's ARP cache answers a
    lookup from its first entry; with it one of the two hosts gets none (its replies go to the
    other's MAC, which drops them: forwarding is off); gateware/arptable.py answers from the
    entry that matched. Runs last: it moves
    the namespace's addresses onto the bridge and puts them back."""
    run = lambda *cmd: board.ns_run(list(cmd), check=True)                      # noqa: E731
    subprocess.run(["ip", "netns", "add", HOST_B_NS], check=True)
    try:
        run("ip", "link", "add", "br0", "type", "bridge")
        run("ip", "link", "set", "br0", "address", "02:00:00:00:78:01")
        run("ip", "addr", "flush", "dev", TAP)       # deleting the first address takes the second too
        for ip in (HOST_IP, OTHER_IP):
            run("ip", "addr", "add", f"{ip}/24", "dev", "br0")
        run("ip", "link", "set", TAP, "master", "br0")
        run("ip", "link", "add", "vb", "type", "veth", "peer", "name", "eth0", "netns", HOST_B_NS)
        run("ip", "link", "set", "vb", "master", "br0")
        for dev in ("vb", "br0"):
            run("ip", "link", "set", dev, "up")
        b = ["ip", "netns", "exec", HOST_B_NS]
        subprocess.run(b + ["ip", "link", "set", "eth0", "address", "02:00:00:00:78:03"], check=True)
        subprocess.run(b + ["ip", "addr", "add", f"{HOST_B_IP}/24", "dev", "eth0"], check=True)
        subprocess.run(b + ["ip", "link", "set", "eth0", "up"], check=True)
        ping = ["ping", "-c", "1", "-W", "10", BOARD_IP]
        got = {"A": 0, "B": 0}
        for _ in range(4):
            a = board.ns_run(ping + ["-I", HOST_IP], capture_output=True, text=True, timeout=60)
            got["A"] += " 0% packet loss" in a.stdout
            r = subprocess.run(b + ping, capture_output=True, text=True, timeout=60)
            got["B"] += " 0% packet loss" in r.stdout
        neigh = board.ns_run(["ip", "neigh", "show", BOARD_IP], capture_output=True, text=True).stdout
        assert got == {"A": 4, "B": 4}, (got, neigh)
    finally:
        subprocess.run(["ip", "netns", "del", HOST_B_NS])
        board.ns_run(["ip", "link", "set", TAP, "nomaster"])
        board.ns_run(["ip", "link", "del", "br0"])
        for ip in (HOST_IP, OTHER_IP):
            board.ns_run(["ip", "addr", "add", f"{ip}/24", "dev", TAP])
