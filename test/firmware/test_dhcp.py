#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The firmware's DHCP client (software/firmware/protocol/dhcp.c) built for the host: its cmocka
unit tests (test/firmware/c/dhcp_unit.c), its parser against server messages scapy builds, its messages as
scapy reads them, and the fuzz harness (test/firmware/c/dhcp_fuzz.c) with the sanitizers."""

import ipaddress
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.dhcp import BOOTP, DHCP

PROTO = "software/firmware/protocol"
MAC = bytes.fromhex("10e2d5000078")
SERVER, OFFERED, ROUTER = "192.168.78.1", "192.168.78.120", "192.168.78.254"
ERR = {"short": -1, "header": -2, "cookie": -3, "option": -4, "no_type": -5}
HAS = {"server_id": 0x01, "lease": 0x02, "t1": 0x04, "t2": 0x08, "netmask": 0x10, "router": 0x20}


def ip(text):
    return int(ipaddress.IPv4Address(text))


def compile_c(repo, tmp_path_factory, name, sources, libs=()):
    if shutil.which("gcc") is None or not Path("/usr/include/cmocka.h").exists():
        pytest.fail("gcc and cmocka are required (make test installs them)")
    exe = tmp_path_factory.mktemp(name) / name
    subprocess.run(["gcc", "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{repo / PROTO}", str(repo / PROTO / "dhcp.c"),
                    *(str(repo / s) for s in sources), *libs, "-o", str(exe)], check=True)
    return exe


@pytest.fixture(scope="module")
def dhcp_unit(repo, tmp_path_factory):
    return compile_c(repo, tmp_path_factory, "dhcp_unit", ["test/firmware/c/dhcp_unit.c"], ["-lcmocka"])


def parse(exe, packets):
    """dhcp_parse on each packet (bytes): a dict of its fields, as dhcp_unit prints them."""
    out = subprocess.run([str(exe), "parse"], input="".join(p.hex() + "\n" for p in packets),
                         capture_output=True, text=True, check=True).stdout.split("\n")
    names = ("rc", "type", "xid", "yiaddr", "server_id", "lease", "t1", "t2", "netmask", "router", "has")
    result = []
    for line in out[:len(packets)]:
        fields = line.split()
        d = {n: int(v) if n == "rc" else int(v, 16) for n, v in zip(names, fields)}
        d["chaddr"] = bytes.fromhex(fields[-1])
        result.append(d)
    return result


def server_message(msg_type, xid=0x1234ABCD, **options):
    """A server's message by scapy: BOOTREPLY to MAC with the options given (scapy's names)."""
    opts = [("message-type", msg_type)] + list(options.items()) + ["end"]
    return bytes(BOOTP(op=2, xid=xid, yiaddr=OFFERED if msg_type != "nak" else "0.0.0.0",
                       chaddr=MAC + bytes(10), flags=0x8000) / DHCP(options=opts))


def test_cmocka_unit_tests_of_the_client(dhcp_unit):
    r = subprocess.run([str(dhcp_unit)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASSED" in r.stdout + r.stderr


def test_server_messages_built_by_scapy_are_read_field_for_field(dhcp_unit):
    offer = server_message("offer", server_id=SERVER, lease_time=600, subnet_mask="255.255.255.0",
                           router=ROUTER, renewal_time=300, rebinding_time=525)
    ack = bytes(BOOTP(op=2, xid=7, yiaddr=OFFERED, chaddr=MAC) /
                DHCP(options=[("message-type", "ack"), ("server_id", SERVER), ("lease_time", 0xFFFFFFFF),
                              ("router", ROUTER, "192.168.78.253"), ("domain", "example.org"),
                              ("name_server", "192.168.78.1"), "end"]))
    nak = server_message("nak", server_id=SERVER, error_message="address not available")
    padded = bytes(BOOTP(op=2, xid=9, yiaddr=OFFERED, chaddr=MAC) /
                   DHCP(options=["pad", "pad", ("message-type", "ack"), "pad", ("lease_time", 60), "end"]))
    o, a, n, p = parse(dhcp_unit, [offer, ack, nak, padded])
    assert o == dict(rc=0, type=2, xid=0x1234ABCD, yiaddr=ip(OFFERED), server_id=ip(SERVER), lease=600, t1=300,
                     t2=525, netmask=0xFFFFFF00, router=ip(ROUTER), has=0x3F, chaddr=MAC)
    assert (a["rc"], a["type"], a["xid"], a["lease"], a["router"]) == (0, 5, 7, 0xFFFFFFFF, ip(ROUTER))
    assert a["has"] == HAS["server_id"] | HAS["lease"] | HAS["router"]
    assert (n["rc"], n["type"], n["server_id"], n["has"]) == (0, 6, ip(SERVER), HAS["server_id"])
    assert (p["rc"], p["type"], p["lease"], p["has"]) == (0, 5, 60, HAS["lease"])


def test_malformed_server_messages_are_refused_with_their_reason(dhcp_unit):
    good = server_message("ack", server_id=SERVER, lease_time=600)
    bootp = bytes(BOOTP(op=2, xid=1, chaddr=MAC, options=b"\x63\x82\x53\x63\xff"))
    cases = {
        "short": good[:239],
        "header": bytes([1]) + good[1:],                       # a BOOTREQUEST
        "cookie": good[:236] + b"\x00\x00\x00\x00" + good[240:],
        "option": good[:-4],                                   # the lease time cut
        "no_type": bootp,
    }
    bad_len = bytes(BOOTP(op=2, xid=1, chaddr=MAC) / DHCP(options=[("message-type", "ack"), "end"]))
    bad_len = bad_len.replace(b"\x35\x01\x05", b"\x35\x02\x05\x00")   # a 2-byte message type
    results = parse(dhcp_unit, list(cases.values()) + [bad_len])
    assert [r["rc"] for r in results] == [ERR[k] for k in cases] + [ERR["option"]]


def test_every_cut_and_byte_flip_of_scapy_messages_is_read_or_refused_without_harm(dhcp_unit):
    """Under ASan and UBSan: a message cut at every length, and 2000 with random bytes changed."""
    msg = server_message("offer", server_id=SERVER, lease_time=600, subnet_mask="255.255.255.0", router=ROUTER)
    rng = random.Random(3)
    packets = [msg[:n] for n in range(len(msg) + 1)]
    for _ in range(2000):
        m = bytearray(msg)
        for _ in range(rng.randint(1, 6)):
            m[rng.randrange(236, len(m))] = rng.randrange(256)
        packets.append(bytes(m))
    results = parse(dhcp_unit, packets)
    assert len(results) == len(packets)
    assert all(r["rc"] in (0, *ERR.values()) for r in results)
    assert [r["rc"] for r in results[:240]] == [ERR["short"]] * 240
    assert results[len(msg)]["rc"] == 0


def test_the_clients_messages_as_scapy_reads_them(dhcp_unit):
    """DISCOVER and the selecting REQUEST broadcast-flagged with ciaddr 0, the REQUEST naming the
    offer and its server; the renewing REQUEST with ciaddr and neither; each asking for the
    options the board uses."""
    out = subprocess.run([str(dhcp_unit), "build"], capture_output=True, text=True, check=True).stdout.split()
    discover, select, renew = (BOOTP(bytes.fromhex(h)) for h in out)
    asked = [1, 3, 51, 54, 58, 59]
    for m in (discover, select, renew):
        assert (m.op, m.htype, m.hlen, m.chaddr[:6]) == (1, 1, 6, MAC)
        assert len(bytes(m)) == 300
        opts = dict(o for o in m[DHCP].options if isinstance(o, tuple))
        assert opts["param_req_list"] == asked
    d = dict(o for o in discover[DHCP].options if isinstance(o, tuple))
    assert (d["message-type"], discover.flags, discover.ciaddr) == (1, 0x8000, "0.0.0.0")
    assert "requested_addr" not in d and "server_id" not in d
    s = dict(o for o in select[DHCP].options if isinstance(o, tuple))
    assert (s["message-type"], select.flags, select.ciaddr) == (3, 0x8000, "0.0.0.0")
    assert (s["requested_addr"], s["server_id"]) == (OFFERED, SERVER)
    assert select.xid == discover.xid
    r = dict(o for o in renew[DHCP].options if isinstance(o, tuple))
    assert (r["message-type"], renew.flags, renew.ciaddr) == (3, 0, OFFERED)
    assert "requested_addr" not in r and "server_id" not in r
    assert renew.xid != select.xid


def test_fuzz_harness_with_the_sanitizers(repo, tmp_path_factory):
    """test/firmware/c/dhcp_fuzz.c standalone: mutated conversations of server replies through one client,
    its invariants checked at every step; it reaches leases, renewals, NAKs and expiries."""
    exe = compile_c(repo, tmp_path_factory, "dhcp_fuzz", ["test/firmware/c/dhcp_fuzz.c"])
    r = subprocess.run([str(exe), "30000", "7"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    counts = dict(zip(r.stdout.split()[-12::2], map(int, r.stdout.split()[-11::2])))
    assert all(counts[k] > 0 for k in ("offers", "acks", "naks", "expired", "malformed")), r.stdout
