"""bench/hostile.py: every kind of hostile frame is what it says, by tshark's reading (an
independent decoder) and by zlib's CRC: the generator for the robustness tests
(docs/robustness.md)."""

import random
import subprocess

import pytest

from bench.hostile import KINDS, Network, fcs_ok, frames

NET = Network(board_mac="10:e2:d5:00:00:01", board_ip="192.168.1.50", host_mac="02:00:00:00:00:01",
              host_ip="192.168.1.100", ctl_port=7001)
FIELDS = ["frame.len", "eth.dst", "eth.type", "eth.fcs.status", "ip.version", "ip.hdr_len", "ip.len",
          "ip.checksum.status", "ip.flags.mf", "ip.frag_offset", "ip.dst", "udp.length", "udp.dstport",
          "arp.opcode", "arp.hw.size", "arp.proto.size", "arp.hw.type", "arp.proto.type", "icmp.type", "_ws.malformed"]


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    from scapy.utils import PcapWriter
    tmp = tmp_path_factory.mktemp("hostile")
    rng = random.Random(7)
    made = [(kind, f) for kind in KINDS for f in frames(kind, NET, rng, count=10)]
    with PcapWriter(str(tmp / "h.pcap"), linktype=1) as w:
        for _, f in made:
            w.write(f)
    cmd = ["tshark", "-n", "-r", str(tmp / "h.pcap"), "-o", "eth.fcs:TRUE", "-o", "eth.check_fcs:TRUE",
           "-o", "ip.check_checksum:TRUE", "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={"HOME": str(tmp), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    rows = [dict(zip(FIELDS, line.split("|"))) for line in r.stdout.splitlines()]
    assert len(rows) == len(made)
    by_kind = {}
    for (kind, f), row in zip(made, rows):
        by_kind.setdefault(kind, []).append((f, row))
    return by_kind


def num(text):
    return int(text, 0) if text else None


CHECKS = {
    "runt":            lambda f, r: len(f) < 64,
    "oversize":        lambda f, r: 1518 < len(f) <= 1600 and r["eth.fcs.status"] == "1",
    "jumbo":           lambda f, r: len(f) == 9018 and r["eth.fcs.status"] == "1",
    "bad_fcs":         lambda f, r: r["eth.fcs.status"] == "0",
    "bad_ip_checksum": lambda f, r: r["ip.checksum.status"] == "0" and r["udp.dstport"] == "7001",
    "ip_options":      lambda f, r: num(r["ip.hdr_len"]) > 20 and r["ip.checksum.status"] == "1",
    "fragment":        lambda f, r: r["ip.flags.mf"] in ("1", "True") or num(r["ip.frag_offset"]),
    "ip_version":      lambda f, r: r["eth.type"] == "0x0800" and r["ip.version"] != "4",
    "udp_zero":        lambda f, r: r["udp.length"] == "8",
    "udp_15_16":       lambda f, r: r["udp.length"] in ("23", "24"),
    "udp_length_lies": lambda f, r: num(r["udp.length"]) != num(r["ip.len"]) - num(r["ip.hdr_len"]),
    "udp_truncated":   lambda f, r: num(r["ip.len"]) > len(f) - 18,
    "arp_storm":       lambda f, r: r["arp.opcode"] == "1" and r["eth.dst"] == "ff:ff:ff:ff:ff:ff",
    "arp_malformed":   lambda f, r: (r["arp.hw.size"] != "6" or r["arp.proto.size"] != "4" or
                                     num(r["arp.opcode"]) > 2 or r["arp.hw.type"] != "1" or
                                     r["arp.proto.type"] != "0x0800"),
    "icmp_flood":      lambda f, r: r["icmp.type"] == "8",
    "icmp_big":        lambda f, r: len(f) >= 1000 or num(r["ip.frag_offset"]),
    "broadcast":       lambda f, r: r["eth.dst"] == "ff:ff:ff:ff:ff:ff",
    "multicast":       lambda f, r: r["eth.dst"].startswith("01:00:5e") and 224 <= int(r["ip.dst"].split(".")[0]) < 240,
    "ptp_malformed":   lambda f, r: r["eth.type"] == "0x88f7" or r["udp.dstport"] in ("319", "320"),
    "ctl_malformed":   lambda f, r: r["udp.dstport"] == "7001",
    "random":          lambda f, r: r["eth.dst"] == "10:e2:d5:00:00:01",
}


def test_every_kind_is_checked():
    assert set(CHECKS) == set(KINDS)


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_is_what_it_says(decoded, kind):
    got = decoded[kind]
    assert len(got) >= 10
    for f, row in got:
        assert CHECKS[kind](f, row), (kind, row)
        assert fcs_ok(f) == (kind != "bad_fcs"), kind   # Only bad_fcs has a wrong FCS.


def test_malformed_control_datagrams_are_refused_by_our_own_parser_too():
    from ethdaq.wire import protocol
    for f in frames("ctl_malformed", NET, random.Random(3), count=12):
        udp_len = int.from_bytes(f[38:40], "big") - 8
        body = f[42:42 + udp_len]
        ok = (len(body) == protocol.REQUEST_LENGTH.get(body[3] if len(body) > 3 else -1, -1) and
              body[:2] == protocol.MAGIC.to_bytes(2, "big") and body[2] == protocol.VERSION)
        assert not ok, body.hex()


def test_the_same_seed_gives_the_same_frames():
    a = [frames(k, NET, random.Random(5), 3) for k in KINDS]
    b = [frames(k, NET, random.Random(5), 3) for k in KINDS]
    assert a == b
