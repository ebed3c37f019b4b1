#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The board's route: its subnet on-link, everything else through the default gateway. The
firmware's decision (software/firmware/protocol/route.h, cmocka: test/firmware/c/route_unit.c), the host's
(protocol.next_hop, protocol.gateway_valid) and the gateware's (gateware/netaddr.py next_hop, in
Migen) against Python's ipaddress as the independent reference. On the simulated board behind a
real Linux router: test/system/test_network.py."""

import ipaddress
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from migen import Module, Signal, run_simulation

from ethdaq.gateware.netaddr import next_hop as gateware_next_hop
from ethdaq.wire import protocol


def reference(ip, netmask, gateway, dst):
    """(on_link, next hop, gateway valid) by ipaddress."""
    net = ipaddress.IPv4Network((ip, bin(netmask).count("1")), strict=False)
    d, g = ipaddress.IPv4Address(dst), ipaddress.IPv4Address(gateway)
    on_link = gateway == 0 or d.is_multicast or dst == 0xFFFFFFFF or d in net
    if gateway == 0:
        valid = True
    elif net.prefixlen >= 31:
        valid = g in net and gateway != ip
    else:
        valid = g in net and gateway != ip and g not in (net.network_address, net.broadcast_address)
    return on_link, dst if on_link else gateway, valid


def cases(n=3000, seed=5):
    """Boards on /0../32 subnets with gateways inside, outside and none, and destinations near
    and far: inside the subnet, next to it, broadcast, multicast."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        prefix = rng.choice([0, 1, 8, 16, 20, 23, 24, 25, 30, 31, 32])
        netmask = (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF
        ip = rng.getrandbits(32)
        host = ~netmask & 0xFFFFFFFF
        gateway = rng.choice([0, (ip & netmask) | (rng.getrandbits(32) & host), rng.getrandbits(32), ip,
                              ip & netmask, (ip & netmask) | host])
        dst = rng.choice([(ip & netmask) | (rng.getrandbits(32) & host), rng.getrandbits(32), 0xFFFFFFFF,
                          0xE0000000 | rng.getrandbits(28), ((ip & netmask) + (host + 1)) & 0xFFFFFFFF,
                          ((ip & netmask) - 1) & 0xFFFFFFFF])
        out.append((ip, netmask, gateway, dst))
    return out


@pytest.fixture(scope="module")
def route_unit(repo, tmp_path_factory):
    if shutil.which("gcc") is None or not Path("/usr/include/cmocka.h").exists():
        pytest.fail("gcc and cmocka are required (make test installs them)")
    exe = tmp_path_factory.mktemp("route") / "route_unit"
    subprocess.run(["gcc", "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{repo}/software/firmware/protocol",
                    str(repo / "test/firmware/c/route_unit.c"), "-lcmocka", "-o", str(exe)], check=True)
    return exe


def test_cmocka_unit_tests_of_the_route(route_unit):
    r = subprocess.run([str(route_unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[  PASSED  ] 5 test(s)." in r.stdout + r.stderr


def test_the_firmwares_route_agrees_with_ipaddress(route_unit):
    table = cases()
    stdin = "".join(f"{ip:x} {m:x} {g:x} {d:x}\n" for ip, m, g, d in table)
    r = subprocess.run([str(route_unit), "table"], input=stdin, capture_output=True, text=True, timeout=60, check=True)
    got = [line.split() for line in r.stdout.splitlines()]
    assert len(got) == len(table)
    for case, (on_link, hop, valid) in zip(table, got):
        want = reference(*case)
        assert (bool(int(on_link)), int(hop, 16), bool(int(valid))) == want, [str(ipaddress.IPv4Address(a)) for a in case]


def test_the_hosts_route_agrees_with_ipaddress():
    for ip, m, g, d in cases():
        _, hop, valid = reference(ip, m, g, d)
        assert protocol.next_hop(ip, m, g, d) == hop
        assert protocol.gateway_valid(ip, m, g) == valid


def test_the_gatewares_next_hop_agrees_with_ipaddress():
    ip, netmask, gateway, dst, hop = (Signal(32) for _ in range(5))
    dut = Module()
    dut.comb += hop.eq(gateware_next_hop(ip, netmask, gateway, dst))
    table = cases(400)
    got = []

    def bench():
        for case in table:
            for s, v in zip((ip, netmask, gateway, dst), case):
                yield s.eq(v)
            yield
            got.append((yield hop))

    run_simulation(dut, bench())
    assert got == [reference(*case)[1] for case in table]


class _ARPTableStub:
    """The two endpoints LiteEthIPTX uses of its ARP table."""
    def __init__(self):
        from liteeth.common import arp_table_request_layout, arp_table_response_layout
        from litex.soc.interconnect import stream
        self.request  = stream.Endpoint(arp_table_request_layout)
        self.response = stream.Endpoint(arp_table_response_layout)


def test_liteeths_ip_layer_asks_arp_for_the_gateway_of_an_off_subnet_destination():
    """A real LiteEthIPTX, routed by route_ip_tx: each datagram's ARP question is its next hop,
    the gateway for 10.99.0.2 from 192.168.77.50/24, the host itself on the subnet and for any
    destination once the gateway is 0.0.0.0."""
    from liteeth.core.ip import LiteEthIPTX
    from ethdaq.gateware.netaddr import route_ip_tx
    board, mask, gateway = 0xC0A84D32, 0xFFFFFF00, 0xC0A84DFE
    ip, netmask, gw = Signal(32, reset=board), Signal(32, reset=mask), Signal(32, reset=gateway)
    table = _ARPTableStub()
    dut = LiteEthIPTX(0x10E2D5000077, ip, table, dw=8)
    route_ip_tx(dut, table, ip, netmask, gw)
    asked = []
    datagrams = [(0x0A630002, gateway),   # 10.99.0.2: through the gateway
                 (0xC0A84D01, gateway),   # 192.168.77.1: on-link
                 (0x0A630002, 0)]         # no gateway: asked for directly

    def sender():
        for dst, gateway_now in datagrams:
            yield gw.eq(gateway_now)
            for i in range(8):
                yield dut.sink.valid.eq(1)
                yield dut.sink.last.eq(i == 7)
                yield dut.sink.data.eq(i)
                yield dut.sink.ip_address.eq(dst)
                yield dut.sink.length.eq(8)
                yield dut.sink.protocol.eq(17)
                yield
                while not (yield dut.sink.ready):
                    yield
            yield dut.sink.valid.eq(0)
            for _ in range(500):   # Its question, then the frame out.
                yield

    def arp_table():
        yield dut.source.ready.eq(1)
        for _ in range(3000):
            if (yield table.request.valid) and len(asked) < len(datagrams):
                asked.append((yield table.request.ip_address))
                yield table.request.ready.eq(1)
                yield
                yield table.request.ready.eq(0)
                yield table.response.valid.eq(1)
                yield table.response.mac_address.eq(0x02AA00000001)
                yield
                yield table.response.valid.eq(0)
            yield

    run_simulation(dut, [sender(), arp_table()])
    assert asked == [gateway, 0xC0A84D01, 0x0A630002]
