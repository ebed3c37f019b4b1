"""Receive audit (gateware/rxaudit.py), in Migen simulation: every kind of bench/hostile.py's
frames (built by scapy, FCS by zlib, each labelled there with the cause a correct board counts it
under) arrives as LiteEth's FCS checker hands it on. Checked: each frame is counted once under its
label, exactly; what goes on to LiteEth (every frame not rx_ok flagged, the others untouched, byte
for byte); the counters read through `select`/`count` as the firmware reads them. Every test of frames
runs at both widths: bytes (dw=8, in the receive clock) and LiteEth's 64-bit beats (dw=64, in sys as
LiteEth's 64-bit MAC datapath runs, `last_be` on the last byte), the same frames giving the same
verdicts and counts. The audit inside the simulated board, behind LiteEth's PHY and MAC, is
test_network.py's."""

import collections
import random

import pytest
from migen import *
from migen.sim import passive, run_simulation

from litex.gen import LiteXModule

from bench.hostile import KINDS, Network, _pad, fcs_ok, labelled, with_fcs
from ethdaq.gateware.rxaudit import CAUSE, RXAudit
from ethdaq.wire.protocol import RX_AUDIT_CAUSES

NET = Network(board_mac="10:e2:d5:00:00:77", board_ip="192.168.77.50", host_mac="02:00:00:00:00:01",
              host_ip="192.168.77.1")


def ip_int(text):
    return int.from_bytes(bytes(map(int, text.split("."))), "big")


@pytest.fixture(params=[8, 64])
def dw(request):
    return request.param


class Dut(LiteXModule):
    def __init__(self, claimed=False, **kwargs):
        for cd in ("sys", "eth_rx"):
            setattr(self, f"cd_{cd}", ClockDomain(cd))
        kwargs.setdefault("udp_ports", NET.udp_ports)
        kwargs.setdefault("ip_groups", (0xE0000181, 0xE000006B))
        kwargs.setdefault("netmask", 0xFFFFFFFF << (32 - NET.prefix) & 0xFFFFFFFF)
        kwargs.setdefault("ctl_port", NET.ctl_port)
        self.audit = RXAudit(**kwargs)
        self.comb += [
            self.audit.mac.eq(int(NET.board_mac.replace(":", ""), 16)),
            self.audit.ip.eq(ip_int(NET.board_ip)),
            self.audit.claimed.eq(claimed),
        ]


def beats(body, dw):
    """A frame's bytes as LiteEth's MAC hands them on at `dw` bits: (data, last_be) per beat,
    `last_be` one-hot on the last byte (at dw=8, 1 on the last byte); the bytes of a last beat
    beyond it random, as LiteEth's 64-bit FCS checker leaves the FCS there."""
    n, rng = dw//8, random.Random(len(body))
    for i in range(0, len(body), n):
        chunk = body[i:i + n]
        last_be = 1 << (len(chunk) - 1) if i + n >= len(body) else 0
        chunk += bytes(rng.randrange(256) for _ in range(n - len(chunk)))
        yield int.from_bytes(chunk, "little"), last_be


def run(frames, gap=24, phy_errors=(), valid_gaps=0.0, dw=8, **kwargs):
    """frames: whole frames, FCS included. They reach the audit as from LiteEth's FCS checker:
    the FCS taken off, `error` on the last beat where zlib says it is wrong; with valid_gaps, a
    cycle without valid before a beat with that probability. At dw=64 the audit runs in sys, as
    in the SoC (LiteEth's 64-bit MAC datapath is in sys), and the gap (24 byte times) is 3 beats.
    Returns what goes on to LiteEth, [(bytes, error)], and the counters by cause name."""
    rng = random.Random(5)
    cd_rx = "eth_rx" if dw == 8 else "sys"
    dut = Dut(dw=dw, cd_rx=cd_rx, **kwargs)
    sink, source = dut.audit.sink, dut.audit.source
    out = {"mac": [], "counts": {}}
    state = {"done": False}
    nbytes, every = dw//8, 2**(dw//8) - 1

    def feed():
        for n, f in enumerate(frames):
            body, bad = f[:-4], not fcs_ok(f)
            words = list(beats(body, dw))
            for i, (word, last_be) in enumerate(words):
                while i and rng.random() < valid_gaps:
                    yield sink.valid.eq(0)
                    yield sink.data.eq(rng.randrange(2**dw))   # Not a beat: must not be taken.
                    yield
                last = i == len(words) - 1
                yield sink.valid.eq(1)
                yield sink.data.eq(word)
                yield sink.last.eq(last)
                yield sink.last_be.eq(last_be)
                # RX_ER reaches the audit as `error` on the byte it came with (SimPHY): byte 20.
                phy_er = (1 << (20 % nbytes)) if n in phy_errors and i == 20//nbytes else 0
                yield sink.error.eq((every if bad and last else 0) | phy_er)
                yield
            yield sink.valid.eq(0)
            for _ in range(gap//nbytes):   # Preamble, FCS and inter-frame gap: 24 byte times at least.
                yield
        for _ in range(20):
            yield
        state["done"] = True

    @passive
    def mac_side():
        data = bytearray()
        while True:
            if (yield source.valid):
                word = (yield source.data).to_bytes(nbytes, "little")
                if (yield source.last):
                    last_be = (yield source.last_be) if dw > 8 else 1
                    data += word[:last_be.bit_length()]
                    out["mac"].append((bytes(data), int((yield source.error) != 0)))
                    data = bytearray()
                else:
                    data += word
            yield

    def cpu():
        while not state["done"]:
            yield
        for _ in range(20):
            yield
        for name, i in CAUSE.items():
            yield from dut.audit._select.write(i)
            for _ in range(4):    # The firmware's bus accesses between (a dummy read of select).
                yield
            out["counts"][name] = yield from dut.audit._count.read()

    if dw == 8:
        run_simulation(dut, {"eth_rx": [feed(), mac_side()], "sys": [cpu()]}, clocks={"sys": 20, "eth_rx": 8})
    else:
        run_simulation(dut, {"sys": [feed(), mac_side(), cpu()]}, clocks={"sys": 8, "eth_rx": 8})
    return out


def test_the_causes_are_the_protocols():
    assert list(CAUSE) == list(RX_AUDIT_CAUSES) and CAUSE["rx_ok"] == 0


@pytest.fixture(scope="module", params=[8, 64])
def hostile(request):
    """Every kind, shuffled together, with the frames LiteEth should see."""
    rng = random.Random(9)
    frames = []
    for kind in KINDS:
        count = 2 if kind in ("jumbo", "oversize", "fragment", "icmp_big") else 4
        frames += [(f, cause) for f, cause in labelled(kind, NET, rng, count) if cause is not None]
    rng.shuffle(frames)
    return frames, run([f for f, _ in frames], dw=request.param), request.param


def test_every_hostile_frame_is_counted_once_under_its_cause(hostile):
    frames, out, dw = hostile
    expected = collections.Counter(cause for _, cause in frames)
    assert set(expected) >= set(CAUSE) - {"icmp_type", "ip_protocol", "phy_error"}, "the mix misses a cause"
    counts = {name: n for name, n in out["counts"].items() if n}
    assert counts == dict(expected)


def test_gaps_in_valid_change_no_verdict(hostile):
    """The audit judges bytes, not cycles: the same frames with idle cycles inside them."""
    frames, out, dw = hostile
    gapped = run([f for f, _ in frames], valid_gaps=0.3, dw=dw)
    assert gapped["counts"] == out["counts"]
    assert gapped["mac"] == out["mac"]


def test_only_good_frames_reach_liteeth_unflagged_and_unchanged(hostile):
    frames, out, dw = hostile
    assert len(out["mac"]) == len(frames)
    for (f, cause), (data, error) in zip(frames, out["mac"]):
        assert error == (cause != "rx_ok"), (cause, f[:42].hex())
        if cause == "rx_ok":
            assert data == f[:-4]    # LiteEth's FCS checker takes the FCS off.


def scapy_frame(layers):
    from scapy.all import raw
    return with_fcs(_pad(raw(layers)))


def test_the_other_ip_protocols_icmp_types_and_hosts_are_counted_apart(dw):
    from scapy.all import ICMP, IP, TCP, UDP, Ether, Raw
    eth = Ether(src=NET.host_mac, dst=NET.board_mac)
    ip  = IP(src=NET.host_ip, dst=NET.board_ip)
    frames = [
        (eth / ip / TCP(dport=22, flags="S"), "ip_protocol"),                 # A port scan.
        (eth / ip / ICMP(type=0), "icmp_type"),                               # An echo reply.
        (eth / ip / ICMP(type=3, code=3) / Raw(bytes(28)), "icmp_type"),      # Port unreachable.
        (eth / ip / ICMP(type=8) / Raw(b"ping"), "rx_ok"),
        (eth / IP(src=NET.host_ip, dst="192.168.77.51") / ICMP(type=8), "not_ours"),     # Another host's IP...
        (Ether(src=NET.host_mac, dst="10:e2:d5:00:00:78") / ip / ICMP(type=8), "not_ours"),  # ...or MAC.
        (eth / ip / UDP(dport=NET.ctl_port) / Raw(b"x" * 20), "rx_ok"),
        (Ether(src=NET.host_mac, dst="ff:ff:ff:ff:ff:ff") / IP(src=NET.host_ip, dst="255.255.255.255") /
         UDP(dport=NET.ctl_port) / Raw(bytes.fromhex("edac010100000007")), "rx_ok"),   # Broadcast discovery.
        (Ether(src=NET.host_mac, dst="01:00:5e:00:01:81") / IP(src=NET.host_ip, dst="224.0.1.129") /
         UDP(dport=319) / Raw(b"x" * 44), "rx_ok"),                           # PTP's group.
    ]
    out = run([scapy_frame(f) for f, _ in frames], dw=dw)
    assert {n: c for n, c in out["counts"].items() if c} == dict(collections.Counter(c for _, c in frames))
    assert [e for _, e in out["mac"]] == [int(c != "rx_ok") for _, c in frames]


def control_broadcasts(dsts, msg_types=(1, 5, 2)):
    """For each destination, datagrams to the control port from broadcast Ethernet: a control
    header of each message type (1 IDENTIFY, 5 STATUS, 2 STREAM_START)."""
    import struct
    from scapy.all import IP, UDP, Ether, Raw
    return [scapy_frame(Ether(src=NET.host_mac, dst="ff:ff:ff:ff:ff:ff") / IP(src=NET.host_ip, dst=dst) /
                        UDP(sport=40000, dport=NET.ctl_port) / Raw(struct.pack(">HBBI", 0xEDAC, 1, t, 7)))
            for dst in dsts for t in msg_types]


def test_identify_to_the_subnets_directed_broadcast_passes_as_to_the_limited_one(dw):
    """The board (192.168.77.50/24) takes IDENTIFY to 255.255.255.255 and to 192.168.77.255; other
    control requests to either are counted as broadcast and dropped; a broadcast of another
    subnet (192.168.78.255, 192.168.255.255) is not the board's."""
    out = run(control_broadcasts(["255.255.255.255", "192.168.77.255", "192.168.78.255", "192.168.255.255"]), dw=dw)
    assert [e for _, e in out["mac"]] == [0, 1, 1,  0, 1, 1,  1, 1, 1,  1, 1, 1]
    assert {n: c for n, c in out["counts"].items() if c} == {"rx_ok": 2, "broadcast": 4, "not_ours": 6}


@pytest.mark.parametrize("prefix, taken", [(16, "192.168.255.255"), (23, "192.168.77.255"), (30, "192.168.77.51")])
def test_the_directed_broadcast_follows_the_netmask(prefix, taken, dw):
    """The same board on a /16, a /23 and a /30: its subnet's broadcast is taken, the /24's only
    where it is that one (192.168.77.255 is a host address of a /16)."""
    others = [a for a in ("192.168.255.255", "192.168.77.255", "192.168.77.51", "192.168.76.255") if a != taken]
    out = run(control_broadcasts([taken, *others], msg_types=(1,)), netmask=0xFFFFFFFF << (32 - prefix) & 0xFFFFFFFF, dw=dw)
    assert [e for _, e in out["mac"]] == [0, 1, 1, 1]
    assert {n: c for n, c in out["counts"].items() if c} == {"rx_ok": 1, "not_ours": 3}


def test_a_31_or_32_bit_prefix_has_no_directed_broadcast(dw):
    """RFC 3021: on a /31 both addresses are hosts; on a /32 there is no subnet. Only the limited
    broadcast is taken."""
    for prefix in (31, 32):
        out = run(control_broadcasts(["192.168.77.51", "255.255.255.255"], msg_types=(1,)),
                  netmask=0xFFFFFFFF << (32 - prefix) & 0xFFFFFFFF, dw=dw)
        assert [e for _, e in out["mac"]] == [1, 0], prefix


def test_a_netmask_with_holes_is_refused():
    with pytest.raises(ValueError, match="netmask must be a 32-bit IPv4 netmask"):
        RXAudit(udp_ports=(7000,), netmask=0xFFFF00FF)


def test_16_bit_fields_are_compared_whole(dw):
    """EtherTypes and ARP's fields that differ from the expected ones only in their high byte
    (the audit compares the high byte a byte ahead, gateware/rxaudit.py w16_is)."""
    from scapy.all import ARP, Ether, Raw
    eth = Ether(src=NET.host_mac, dst="ff:ff:ff:ff:ff:ff")
    arp = dict(hwsrc=NET.host_mac, psrc=NET.host_ip, pdst=NET.board_ip)
    frames = [
        (Ether(src=NET.host_mac, dst=NET.board_mac, type=0x1800) / Raw(bytes(46)), "ethertype"),  # IPv4's low byte.
        (Ether(src=NET.host_mac, dst=NET.board_mac, type=0x0906) / Raw(bytes(46)), "ethertype"),  # ARP's low byte.
        (eth / ARP(hwtype=0x0101, **arp), "arp_malformed"),
        (eth / ARP(ptype=0x0900, **arp), "arp_malformed"),
        (eth / ARP(op=0x0101, **arp), "arp_malformed"),
        (eth / ARP(op=0x0102, **arp), "arp_malformed"),
        (eth / ARP(op=1, **arp), "rx_ok"),
    ]
    out = run([scapy_frame(f) for f, _ in frames], dw=dw)
    assert {n: c for n, c in out["counts"].items() if c} == dict(collections.Counter(c for _, c in frames))


def test_ptp_over_ethernet_is_taken_only_when_the_build_speaks_it(dw):
    from scapy.all import Ether, Raw
    frame = scapy_frame(Ether(src=NET.host_mac, dst="01:1b:19:00:00:00", type=0x88F7) / Raw(bytes(44)))
    assert run([frame], dw=dw)["counts"]["ethertype"] == 1
    out = run([frame], ethertypes=(0x88F7,), dw=dw)
    assert out["counts"]["ethertype"] == 0 and out["counts"]["rx_ok"] == 1


def test_minimum_frames_back_to_back_are_all_counted(dw):
    """64-byte frames with the shortest gap, bad and good alternating: one event per 84 byte
    times, with sys slower than the receive clock (20 ns against 8 ns here)."""
    from scapy.all import ICMP, IP, Ether
    good = scapy_frame(Ether(src=NET.host_mac, dst=NET.board_mac) / IP(src=NET.host_ip, dst=NET.board_ip) / ICMP())
    bad  = good[:-1] + bytes([good[-1] ^ 0x80])
    out = run([good, bad] * 30, gap=24 if dw == 8 else 16, dw=dw)   # At 10G: 10.5 beats a frame.
    assert out["counts"]["rx_ok"] == 30 and out["counts"]["fcs"] == 30
    assert sum(out["counts"].values()) == 60


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="udp_ports"):
        RXAudit(udp_ports=())
    with pytest.raises(ValueError, match="ethertypes"):
        RXAudit(udp_ports=(7000,), ethertypes=(0x0800,))
    with pytest.raises(ValueError, match="ip_groups"):
        RXAudit(udp_ports=(7000,), ip_groups=(0xC0A80101,))
    with pytest.raises(ValueError, match="max_frame"):
        RXAudit(udp_ports=(7000,), max_frame=40)
    with pytest.raises(ValueError, match=r"^dw must be 8 \(1G\) or 64 \(10G\), not 32$"):
        RXAudit(dw=32, udp_ports=(7000,))


def test_a_port_a_classifier_rule_takes_is_not_a_fault(dw):
    """Rules change at run time: a datagram to a port no core listens on is counted as udp_port,
    unless a drop or fast-track rule of the classifier behind takes it (its `takes`, the audit's
    `claimed`); then it passes (the rule counts it). Other faults stay faults."""
    from scapy.all import IP, UDP, Ether, Raw
    eth = Ether(src=NET.host_mac, dst=NET.board_mac)
    good  = scapy_frame(eth / IP(src=NET.host_ip, dst=NET.board_ip) / UDP(dport=9100) / Raw(b"x" * 30))
    empty = scapy_frame(eth / IP(src=NET.host_ip, dst=NET.board_ip) / UDP(dport=9100))
    assert run([good], dw=dw)["counts"]["udp_port"] == 1
    out = run([good, empty], claimed=True, dw=dw)
    assert out["counts"]["rx_ok"] == 1 and out["counts"]["udp_empty"] == 1 and out["counts"]["udp_port"] == 0
    assert [e for _, e in out["mac"]] == [0, 1]


def test_a_receive_error_the_phy_signalled_comes_first(dw):
    """A frame during which the PHY raised RX_ER is counted as phy_error and dropped, whatever
    else it is (here a good ping, and one with a bad FCS too)."""
    from scapy.all import ICMP, IP, Ether
    good = scapy_frame(Ether(src=NET.host_mac, dst=NET.board_mac) / IP(src=NET.host_ip, dst=NET.board_ip) / ICMP())
    bad  = good[:-1] + bytes([good[-1] ^ 0x01])
    out = run([good, good, bad, good], phy_errors={1, 2}, dw=dw)
    assert {n: c for n, c in out["counts"].items() if c} == {"rx_ok": 2, "phy_error": 2}
    assert [e for _, e in out["mac"]] == [0, 1, 1, 0]
