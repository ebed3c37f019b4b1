"""Time-triggered launches on the whole simulated board (Verilator, firmware, Linux in a network
namespace): LAUNCH requests from Linux, the datagrams decoded on the GMII transmit pins by a
testbench probe (gateware/verilog/ethdaq_launch_probe.v) with the PTP clock's time in the cycle of
their first preamble byte. A board of its own (--with-launcher --pin-probe), built in the
background from collection on (test/conftest.py)."""

import json
import re
import subprocess
import sys
import time

import pytest

from conftest import REPO, background_build, requires_root
from ethdaq.boards import get_board
from ethdaq.soc import build, sim
from ethdaq.wire import protocol

NETNS    = "ethdaq-test-launch"
TAP      = "ethdaq2"
BOARD_IP = "192.168.79.50"
HOST_IP  = "192.168.79.1"
CTL_PORT = 7000
OUT      = REPO / "build" / "test-sim-launch"
BUILD = ["build", "--board", "sim", "--ip", BOARD_IP, "--ctl-port", str(CTL_PORT), "--pin-probe", "--with-launcher",
         "--output-dir", str(OUT)]
pytestmark = [requires_root, pytest.mark.network, pytest.mark.background_build("sim-launch", BUILD)]


@pytest.fixture(scope="module")
def board():
    code, log = background_build("sim-launch", timeout=1800)
    assert code == 0, log
    build.write_sim_config(get_board("sim"), OUT / "gateware", tap=TAP, host_ip=HOST_IP)
    session = sim.SimSession(OUT / "gateware", netns=NETNS, echo=False, log=OUT / "console-fixture.log")
    with session:
        session.wait_for("ethdaq ready", timeout=180)
        yield session
    assert NETNS not in sim.list_netns()


LAUNCH_CHECK = """
import json, socket, subprocess, sys
from ethdaq.host.ctl import ControlClient
from ethdaq.wire import protocol
board, ctl_port, host_ip, tap, port, period, count, with_bulk = sys.argv[1:9]
port, period, count, with_bulk = int(port), int(period), int(count), with_bulk == "1"
link = json.loads(subprocess.run(["ip", "-j", "link", "show", tap], capture_output=True, text=True, check=True).stdout)
host_mac = protocol.parse_mac(link[0]["address"])
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind((host_ip, port))
rx.settimeout(60)
bulk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
bulk.bind((host_ip, 5000))   # Bulk datagrams land here, unread: the kernel drops what overflows.
with ControlClient(board, int(ctl_port), timeout=5) as c:
    ident = c.identify()
    before = c.launch_status()
    if with_bulk:
        c.emulator("counter", 2**32 - 1)
        c.stream_start(dst_port=5000, payload=1472)
        c.wait_destination()
    frame = protocol.udp_frame(host_mac, ident.mac, ident.ip, int(protocol.ipaddress.IPv4Address(host_ip)),
                               port, port, b"launch")
    ls = c.launch(frame, after_ns=3_000_000, period_ns=period, count=count)
    got = [rx.recvfrom(2048)[0] for _ in range(count)]
    after = c.launch_status()
    streamed = c.status().datagrams if with_bulk else 0
    if with_bulk:
        c.stream_stop()
print(json.dumps(dict(caps=ident.capabilities, first=[ls.first_sec, ls.first_ns], guard=ls.guard, lead=ls.lead,
                      cycle_ps=ls.cycle_ps, got=[g.hex() for g in got], streamed=streamed,
                      sent=after.sent - before.sent, past=after.missed_past - before.missed_past,
                      busy=after.missed_busy - before.missed_busy, armed=after.armed)))
"""


@pytest.mark.parametrize("with_bulk", [False, True], ids=["idle", "under-bulk-load"])
def test_time_triggered_launches_leave_on_time_at_the_pins(board, with_bulk):
    """LAUNCH from Linux: a UDP datagram to the host, 3 ms after the board reads the request and
    then every period; the testbench's probe (gateware/verilog/ethdaq_launch_probe.v) decodes it on
    the GMII transmit pins and reports the PTP clock's time when its first preamble byte was there.
    Every launch is within one cycle of its time, with or without the DAQ stream going; Linux
    receives each datagram."""
    from ethdaq.soc.daqsoc import LAUNCH_PROBE_PORT
    assert any("launcher : time-triggered frames" in l for l in board.lines)
    marks = len(board.lines)
    period, count = 200_003, 3   # Longer than the default guard (jumbo frames: 72 µs); not a whole cycle.
    r = board.ns_run([sys.executable, "-c", LAUNCH_CHECK, BOARD_IP, str(CTL_PORT), HOST_IP, TAP, str(LAUNCH_PROBE_PORT),
                      str(period), str(count), "1" if with_bulk else "0"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["caps"] & protocol.CAP_LAUNCHER
    assert out["got"] == [b"launch".hex()] * count
    assert (out["sent"], out["past"], out["busy"], out["armed"]) == (count, 0, 0, 0)
    if with_bulk:
        assert out["streamed"] > 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # The simulator prints at once, so a probe line can land inside a line the firmware is
        # still printing: searched for anywhere in a line.
        got = [tuple(int(x) for x in m.groups()) for l in board.lines[marks:]
               for m in re.finditer(r"probe: launch (\d+) time (\d+) (\d+)", l)]
        if len(got) >= count:
            break
        time.sleep(0.2)
    assert len(got) == count
    first = out["first"][0] * 10**9 + out["first"][1]
    errors = [sec * 10**9 + ns - (first + k * period) for k, (_, sec, ns) in enumerate(got)]
    print(f"launch errors ({'under bulk load' if with_bulk else 'idle line'}): {errors} ns; "
          f"guard {out['guard']} cycles, lead {out['lead']} cycles")
    assert all(0 <= e < out["cycle_ps"] / 1000 for e in errors), errors
