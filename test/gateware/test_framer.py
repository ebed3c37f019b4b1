"""Canned-header framer and ARP requester (gateware/framer.py) in Migen simulation, decoded by
scapy: every header field, the IPv4 checksum (scapy recomputes it), and holding for the MAC."""

import random

import pytest
from migen import Module, Signal, run_simulation
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from ethdaq.gateware.framer import ARPRequester, UDPFramer
from stream_helpers import collect_frames

SRC_MAC, SRC_IP = 0x10E2D5000077, 0xC0A84D32      # 192.168.77.50
DST_MAC, DST_IP = 0x02AABBCCDD01, 0xC0A84D01


def send(framer, datagrams):
    """Back-to-back datagrams, each (destination address, destination port, payload)."""
    yield framer.dst_mac.eq(DST_MAC)
    yield framer.mac_valid.eq(1)
    for dst_ip, dst_port, p in datagrams:
        yield framer.sink.ip_address.eq(dst_ip)
        yield framer.sink.src_port.eq(5000)
        yield framer.sink.dst_port.eq(dst_port)
        yield framer.sink.length.eq(len(p))
        for i, b in enumerate(p):
            yield framer.sink.valid.eq(1)
            yield framer.sink.data.eq(b)
            yield framer.sink.last.eq(i == len(p) - 1)
            yield
            while not (yield framer.sink.ready):
                yield
        yield framer.sink.valid.eq(0)


def assert_checksum(ip, what=""):
    recomputed = IP(bytes(ip))
    del recomputed.chksum
    assert ip.chksum == IP(bytes(recomputed)).chksum, f"{what}IPv4 header checksum differs from scapy's"


def test_udp_frames_decode_with_valid_checksums_and_increasing_identification():
    dut = UDPFramer(SRC_MAC, SRC_IP)
    payloads = [bytes((i*7 + n) & 0xff for i in range(n)) for n in (1, 64, 255, 1000)]
    frames = []
    datagrams = [(DST_IP, 6000 + k, p) for k, p in enumerate(payloads)]
    run_simulation(dut, [send(dut, datagrams), collect_frames(dut.source, frames, 4000, count=len(payloads))])
    assert len(frames) == len(payloads)
    for k, (frame, p) in enumerate(zip(frames, payloads)):
        pkt = Ether(frame)
        assert pkt.dst == "02:aa:bb:cc:dd:01" and pkt.src == "10:e2:d5:00:00:77"
        ip = pkt[IP]
        assert (ip.src, ip.dst, ip.ttl, ip.flags, ip.id, ip.len) == ("192.168.77.50", "192.168.77.1", 64, "DF", k, 28 + len(p))
        assert_checksum(ip)
        udp = pkt[UDP]
        assert (udp.sport, udp.dport, udp.len, udp.chksum) == (5000, 6000 + k, 8 + len(p), 0)
        assert bytes(udp.payload) == p


def test_frames_wait_for_the_destination_mac():
    dut = UDPFramer(SRC_MAC, SRC_IP)
    seen = []

    def gen():
        yield dut.sink.valid.eq(1)
        yield dut.sink.length.eq(1)
        yield dut.sink.last.eq(1)
        for _ in range(50):
            yield dut.source.ready.eq(1)
            yield
            seen.append((yield dut.source.valid))
        yield dut.dst_mac.eq(DST_MAC)
        yield dut.mac_valid.eq(1)
        yield
        yield
        seen.append((yield dut.source.valid))

    run_simulation(dut, gen())
    assert seen[:50] == [0]*50 and seen[-1] == 1


def test_arp_request_is_a_padded_who_has():
    dut = ARPRequester(SRC_MAC, SRC_IP)
    frames = []

    def gen():
        yield dut.target_ip.eq(DST_IP)
        yield dut.request.eq(1)
        yield
        yield dut.request.eq(0)

    run_simulation(dut, [gen(), collect_frames(dut.source, frames, 200, count=1)])
    assert len(frames) == 1 and len(frames[0]) == 60
    pkt = Ether(frames[0])
    assert pkt.dst == "ff:ff:ff:ff:ff:ff" and pkt.src == "10:e2:d5:00:00:77"
    arp = pkt[ARP]
    assert (arp.op, arp.hwsrc, arp.psrc, arp.pdst) == (1, "10:e2:d5:00:00:77", "192.168.77.50", "192.168.77.1")


@pytest.mark.parametrize("dw", [8, 64])
def test_arp_frames_back_to_back_to_a_stalling_consumer_are_whole(dw):
    """An announcement and a who-has waiting together go out one after the other, first the
    announcement, each whole (60 bytes, scapy's decode), while the consumer takes a word only
    now and then: the registered output word must follow `ready`, not run ahead of it."""
    dut = ARPRequester(SRC_MAC, SRC_IP, dw=dw)
    frames = []

    def gen():
        yield dut.target_ip.eq(DST_IP)
        yield dut.request.eq(1)
        yield dut.announce.eq(1)
        yield
        yield dut.request.eq(0)
        yield dut.announce.eq(0)

    run_simulation(dut, [gen(), collect_frames(dut.source, frames, 2000, count=2, ready=0.4, rng=random.Random(dw))])
    assert [len(f) for f in frames] == [60, 60]
    announce, request = (Ether(f)[ARP] for f in frames)
    assert (announce.op, announce.psrc, announce.pdst) == (1, "192.168.77.50", "192.168.77.50")
    assert (request.op, request.hwsrc, request.psrc, request.pdst) == (1, "10:e2:d5:00:00:77", "192.168.77.50", "192.168.77.1")
    assert all(Ether(f).dst == "ff:ff:ff:ff:ff:ff" for f in frames)


@pytest.mark.parametrize("dw", [8, 64])
def test_arp_frames_from_address_settings_are_scapys_byte_for_byte(dw):
    """With the board's addresses as settings (Signals, as gateware/netaddr.py gives them) that
    change between frames, each frame is byte for byte the who-has or announcement scapy builds
    (zero target MAC, zero padding to 60 bytes), to a consumer that takes a word only now and
    then."""
    class DUT(Module):
        def __init__(self):
            self.mac = Signal(48, reset=SRC_MAC)
            self.ip  = Signal(32, reset=SRC_IP)
            self.submodules.req = ARPRequester(self.mac, self.ip, dw=dw)
    dut = DUT()
    req = dut.req
    steps = [  # (mac, ip, target, announce)
        (SRC_MAC, SRC_IP, DST_IP, False),
        (SRC_MAC, SRC_IP, DST_IP, True),
        (0x0200FEDCBA98, 0x0A000102, 0xFFFFFFFE, False),
        (0x0200FEDCBA98, 0x0A000102, 0x01020304, True),
        (0xFFEEDDCCBBAA, 0x7F000001, 0x00000001, False),
    ]
    frames = []

    def gen():
        for mac, ip, target, announce in steps:
            yield dut.mac.eq(mac)
            yield dut.ip.eq(ip)
            yield req.target_ip.eq(target)
            yield (req.announce if announce else req.request).eq(1)
            yield
            yield req.announce.eq(0)
            yield req.request.eq(0)
            n = len(frames)
            while len(frames) == n:
                yield

    run_simulation(dut, [gen(), collect_frames(req.source, frames, 4000, count=len(steps), ready=0.5,
                                               rng=random.Random(dw))])

    def addr(value, n):
        return value.to_bytes(n, "big")
    for frame, (mac, ip, target, announce) in zip(frames, steps):
        pdst = ip if announce else target
        want = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=addr(mac, 6).hex(":")) /
                     ARP(op=1, hwsrc=addr(mac, 6).hex(":"), psrc=".".join(map(str, addr(ip, 4))),
                         hwdst="00:00:00:00:00:00", pdst=".".join(map(str, addr(pdst, 4)))))
        assert frame == want.ljust(60, b"\0")
    assert len(frames) == len(steps)


def test_checksums_with_the_source_a_setting_and_a_new_destination_every_datagram():
    """The source address as a signal (a CSR in the SoC: its words are summed in a register of
    their own) and a different destination in each back-to-back datagram (its words summed as
    it is registered): every checksum must still be right from the first frame."""
    class DUT(Module):
        def __init__(self):
            self.src_ip = Signal(32, reset=SRC_IP)
            self.submodules.framer = UDPFramer(SRC_MAC, self.src_ip)
    dut = DUT()
    framer = dut.framer
    dsts = [0xC0A84D01, 0x0A000001, 0xFFFFFFFE, 0x01020304, 0xAC10FFFF, 0xC0A84D01]
    frames = []
    datagrams = [(dst, 6000, bytes([k])) for k, dst in enumerate(dsts)]
    run_simulation(dut, [send(framer, datagrams), collect_frames(framer.source, frames, 4000, count=len(dsts))])
    assert len(frames) == len(dsts)
    for k, (frame, dst) in enumerate(zip(frames, dsts)):
        ip = Ether(frame)[IP]
        assert ip.src == "192.168.77.50" and ip.dst == ".".join(str(dst >> s & 0xff) for s in (24, 16, 8, 0))
        assert ip.id == k
        assert_checksum(ip, f"datagram {k}: ")


def test_each_length_is_one_adder_from_the_sink():
    """The IPv4 and UDP lengths are each the sink's length plus one constant: Yosys does not fold
    constants across additions, so `length + 8 + 20` was two carry chains in series (an eth
    critical path on the colorlight_i5). Checked in the Verilog Yosys reads."""
    import re
    from litex.gen.fhdl.verilog import convert
    from migen import ClockDomain
    top = Module()
    top.submodules.framer = framer = UDPFramer(SRC_MAC, SRC_IP)
    top.clock_domains.cd_sys = ClockDomain()
    text = str(convert(top, ios={framer.sink.length, top.cd_sys.clk, top.cd_sys.rst}, name="top"))
    for name, const in (("ip_len", 28), ("udp_len", 8)):
        rhs = re.findall(rf"_{name} <= (.*);", text)
        rhs = [r for r in rhs if "length" in r]
        assert len(rhs) == 1 and rhs[0].count("+") == 1 and f"'d{const})" in rhs[0], (name, rhs)
