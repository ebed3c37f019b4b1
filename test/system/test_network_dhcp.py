"""A board built with the DHCP client (--dhcp), simulated on its own tap, against dnsmasq serving a
range in the namespace: the board takes the address dnsmasq leases (dnsmasq's lease file says so),
answers IDENTIFY and CONFIG there with the lease's address, netmask and gateway, streams every
sample to a receiver, renews the lease at T1, and after dnsmasq is stopped the lease expires and
the board is back at the build's address.

Lease times: dnsmasq grants at least two minutes. The build's --dhcp-time-scale 4000 makes a lease
second a quarter of a simulated millisecond (the simulation runs roughly 1000x slower than real
time): a 120 s lease renews at T1 (60 lease seconds) and runs out within tens of seconds of
wall-clock time. The test waits for console lines and lease-file entries, never for a time."""

import json
import re
import subprocess
import sys
import time

import pytest

from conftest import REPO, background_build, ethdaq_cmd, requires_root
from ethdaq.boards import get_board
from ethdaq.soc import build, sim
from test_network import STREAM_CHECK

NETNS    = "ethdaq-test-dhcp"
TAP      = "ethdaq4"
BOARD_IP = "192.168.81.50"    # The build's address: the fallback.
HOST_IP  = "192.168.81.1"     # dnsmasq's, and the receiver's.
GATEWAY  = "192.168.81.254"   # The router dnsmasq names (nobody answers there; every test host is on-link).
MAC      = "10:e2:d5:00:00:81"
CTL_PORT = 7004
OUT      = REPO / "build" / "test-sim-dhcp"
BUILD = ["build", "--board", "sim", "--ip", BOARD_IP, "--netmask", "24", "--mac", MAC, "--ctl-port", str(CTL_PORT),
         "--dhcp", "--dhcp-time-scale", "4000", "--output-dir", str(OUT)]
pytestmark = [requires_root, pytest.mark.network, pytest.mark.background_build("sim-dhcp", BUILD)]

LEASE = re.compile(r"dhcp: lease of (\d+\.\d+\.\d+\.\d+) from (\S+) for (\d+) s")


@pytest.fixture(scope="module")
def board():
    code, log = background_build("sim-dhcp", timeout=1800)
    assert code == 0, log
    build.write_sim_config(get_board("sim"), OUT / "gateware", tap=TAP, host_ip=HOST_IP)
    session = sim.SimSession(OUT / "gateware", netns=NETNS, echo=False, log=OUT / "console-fixture.log")
    with session:
        session.wait_for("ethdaq ready", timeout=180)
        yield session
    assert NETNS not in sim.list_netns()


def start_dnsmasq(board, leases):
    """dnsmasq in the board's namespace, DHCP only (no DNS), serving .100-.150 for two minutes
    (its least) with the subnet's mask and a router."""
    return board.ns_popen(["dnsmasq", "--no-daemon", "--conf-file=/dev/null",
                           "--port=0", f"--interface={TAP}", "--bind-interfaces", "--no-ping", "--log-dhcp",
                           f"--dhcp-leasefile={leases}", "--dhcp-range=192.168.81.100,192.168.81.150,255.255.255.0,2m",
                           f"--dhcp-option=option:router,{GATEWAY}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def ctl_at(board, ip, *args, timeout=60):
    return board.ns_run(ethdaq_cmd("ctl", *args, "--ip", ip, "--port", str(CTL_PORT)),
                        capture_output=True, text=True, timeout=timeout)


def dhcp_requests(pcap):
    """The board's DHCP messages in a capture, as scapy reads them: (type, IP destination, BOOTP
    flags, ciaddr) each."""
    from scapy.layers.dhcp import BOOTP, DHCP
    from scapy.layers.inet import IP
    from scapy.utils import rdpcap
    out = []
    for p in rdpcap(str(pcap)):
        if BOOTP in p and p[BOOTP].op == 1 and DHCP in p:
            kind = next(o[1] for o in p[DHCP].options if isinstance(o, tuple) and o[0] == "message-type")
            out.append((kind, p[IP].dst, p[BOOTP].flags, p[BOOTP].ciaddr))
    return out


def test_the_board_takes_a_lease_renews_it_and_falls_back_when_it_expires(board, tmp_path):
    leases, pcap = tmp_path / "dnsmasq.leases", tmp_path / "dhcp.pcap"
    dump = board.ns_popen(["tcpdump", "-i", TAP, "-U", "-n", "-w", str(pcap), "udp port 67 or udp port 68"],
                          stderr=subprocess.PIPE, text=True)
    dump.stderr.readline()   # "listening on ...": capturing from here on.
    dnsmasq = start_dnsmasq(board, leases)
    try:
        line = board.wait_for(LEASE, timeout=300)
        ip, server, seconds = LEASE.search(line).groups()
        assert (server, seconds) == (HOST_IP, "120"), line
        # dnsmasq's own record of the lease: the board's MAC and the same address.
        deadline = time.monotonic() + 30
        while not (leases.exists() and MAC in leases.read_text()) and time.monotonic() < deadline:
            time.sleep(0.5)
        entry = next(e.split() for e in leases.read_text().splitlines() if MAC in e)
        assert entry[2] == ip and ip != BOARD_IP
        board.wait_for("net: now " + ip + " (dhcp)", timeout=60)

        r = ctl_at(board, ip, "identify", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        ident = json.loads(r.stdout)
        assert ident["ip"] == ip and "dhcp client" in ident["capabilities"], ident
        r = ctl_at(board, ip, "config", "--json")
        assert r.returncode == 0, r.stderr
        cfg = json.loads(r.stdout)
        assert (cfg["ip"], cfg["netmask"], cfg["gateway"]) == (ip, "255.255.255.0", GATEWAY)

        r = board.ns_run([sys.executable, "-c", STREAM_CHECK, ip, str(CTL_PORT), "0.02", "40"],
                         capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert res["problems"] == [] and res["streams"] == [0, 1, 2, 3]
        assert res["datagrams"] >= 40 and res["missing"] == 0 and res["malformed"] == 0 and res["kernel"] == 0
        assert res["board_dropped"] == 0 and res["counters"] == res["received"]
        assert ctl_at(board, ip, "release").returncode == 0

        # T1: a REQUEST unicast to dnsmasq, which extends the lease.
        board.wait_for(f"dhcp: lease of {ip} renewed by {HOST_IP} for 120 s", timeout=300)
    finally:
        dnsmasq.terminate()
        log = dnsmasq.communicate(timeout=30)[0]
    assert f"DHCPREQUEST({TAP}) {ip} {MAC}" in log and f"DHCPACK({TAP}) {ip} {MAC}" in log, log

    # No server: renewing and rebinding go unanswered, the lease runs out, the build's address is back.
    board.wait_for(f"back to the build's {BOARD_IP}", timeout=300)
    board.wait_for(f"net: now {BOARD_IP} (dhcp)", timeout=60)
    r = ctl_at(board, BOARD_IP, "identify", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["ip"] == BOARD_IP
    assert ctl_at(board, ip, "identify", "--timeout", "2", timeout=60).returncode != 0
    # An address set by hand stops the client: DHCP does not replace it until a reboot.
    r = ctl_at(board, BOARD_IP, "config", "set", f"gateway={GATEWAY}")
    assert r.returncode == 0, r.stdout + r.stderr
    board.wait_for("dhcp: stopped (addresses set by CONFIG_SET) until a reboot", timeout=60)
    dump.terminate()
    dump.wait(timeout=10)
    # On the wire: DISCOVERs (the capture starts after the board's first) and the first REQUEST
    # broadcast with the broadcast flag and no ciaddr;
    # the renewal unicast to dnsmasq with the leased ciaddr; after T2 with no server, rebinding
    # broadcast with the leased ciaddr; after the expiry, DISCOVER again.
    sent = dhcp_requests(pcap)
    bcast, none = "255.255.255.255", "0.0.0.0"
    first = next(i for i, m in enumerate(sent) if m[0] == 3)
    assert first >= 1 and set(sent[:first]) == {(1, bcast, 0x8000, none)}, sent
    assert sent[first] == (3, bcast, 0x8000, none), sent
    assert (3, HOST_IP, 0, ip) in sent, sent
    renewals = [i for i, m in enumerate(sent) if m == (3, HOST_IP, 0, ip)]
    rebind = [i for i, m in enumerate(sent) if m == (3, bcast, 0, ip)]
    assert rebind and rebind[0] > renewals[-1], sent
    assert sent[-1] == (1, bcast, 0x8000, none) and len(sent) - 1 > rebind[-1], sent
