"""The transmit path as DAQSoC assembles it (gateware/txpath.py): DAQ datagrams, ARP requests and
announcements, and LiteEth's frames, through framer, schedulers, FCS and preamble, gap and PHY
register to a GMII transmitter's pins, in Migen simulation; the frames on the pins decoded by
scapy and their FCS by zlib. The receive side passes to LiteEth untouched, with the last byte
marked valid (last_be). The cores inside have their own tests (test_framer, test_scheduler,
test_mactx); the class priorities and time-triggered launches are test_launcher's."""

import zlib

import pytest
from migen import ClockDomain, ClockDomainsRenamer, Record, passive
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from litex.gen import LiteXModule

from bench.txclasses import BOARD_IP, BOARD_MAC, CLK_NS, CONTROL_FRAME, HOST_IP, HOST_MAC, IFG, _PHY, control, run
from ethdaq.gateware.txpath import TXPath

from stream_helpers import PREAMBLE


class Dut(LiteXModule):
    def __init__(self):
        for cd in ("sys", "eth_rx", "eth_tx"):
            setattr(self, f"cd_{cd}", ClockDomain(cd))
        self.pads   = Record([("tx_en", 1), ("tx_er", 1), ("tx_data", 8)])
        self.phy    = _PHY(self.pads)
        self.submodules.phy_tx = ClockDomainsRenamer("eth_tx")(self.phy.tx)
        self.txpath = TXPath(self.phy, BOARD_MAC, BOARD_IP)


@passive
def pins(dut, frames, gaps):
    """Frames on the GMII pins (bytes), and the idle cycles before each but the first."""
    current, idle, seen = None, 0, False
    while True:
        if (yield dut.pads.tx_en):
            if current is None:
                current = []
                if seen:
                    gaps.append(idle)
            current.append((yield dut.pads.tx_data))
        else:
            if current is not None:
                frames.append(bytes(current))
                current, seen, idle = None, True, 0
            idle += 1
        yield


def datagrams(dut, payloads, dst_valid_after=0, log=None):
    """UDP datagrams into TXPath.data (HOST_IP:6000 from port 5000), back to back; the
    destination MAC becomes valid `dst_valid_after` cycles after the first is offered."""
    ep, tx = dut.txpath.data, dut.txpath
    yield tx.dst_mac.eq(HOST_MAC)
    cycle = 0
    for k, payload in enumerate(payloads):
        yield ep.ip_address.eq(HOST_IP)
        yield ep.src_port.eq(5000)
        yield ep.dst_port.eq(6000)
        yield ep.length.eq(len(payload))
        for i, b in enumerate(payload):
            yield ep.valid.eq(1)
            yield ep.data.eq(b)
            yield ep.last.eq(i == len(payload) - 1)
            yield ep.last_be.eq(i == len(payload) - 1)
            while True:
                yield tx.dst_valid.eq(cycle >= dst_valid_after)
                yield
                cycle += 1
                if (yield ep.ready):
                    break
        if log is not None:
            log.append(cycle)
        yield ep.valid.eq(0)
    yield "passive"   # The rest holds the destination while the frames leave.
    while True:
        yield tx.dst_valid.eq(cycle >= dst_valid_after)
        yield
        cycle += 1


def check_frame(frame):
    """Preamble, FCS and minimum size of one frame on the pins: its Ethernet bytes."""
    assert frame[:8] == PREAMBLE, frame[:8].hex()
    body, fcs = frame[8:-4], frame[-4:]
    assert zlib.crc32(body).to_bytes(4, "little") == fcs
    assert len(body) >= 60
    return body


def test_datagrams_leave_as_udp_frames_whole_padded_and_twelve_bytes_apart():
    dut = Dut()
    payloads = [bytes((k * 7 + i) & 0xff for i in range(n)) for k, n in enumerate((1, 17, 18, 100, 5, 300))]
    frames, gaps = [], []
    run(dut, {"eth_tx": [pins(dut, frames, gaps), datagrams(dut, payloads)]}, 1400)
    assert len(frames) == len(payloads)
    for frame, payload in zip(frames, payloads):
        pkt = Ether(check_frame(frame))
        assert pkt.dst == "02:00:00:00:00:01" and pkt.src == "10:e2:d5:00:00:01"
        ip, udp = pkt[IP], pkt[UDP]
        assert (ip.src, ip.dst, udp.sport, udp.dport) == (BOARD_IP, "192.168.1.1", 5000, 6000)
        assert ip.len == 28 + len(payload) and udp.len == 8 + len(payload)
        assert bytes(udp.payload)[:len(payload)] == payload
        # scapy's own checksums of the same header and datagram.
        recomputed = IP(bytes(ip))
        del recomputed.chksum, recomputed[UDP].chksum
        recomputed = IP(bytes(recomputed))
        assert ip.chksum == recomputed.chksum
        assert udp.chksum in (0, recomputed[UDP].chksum)
    # Back to back, each gap exactly the 12-byte inter-frame gap or (a datagram still being
    # framed) longer, never shorter.
    assert len(gaps) == len(payloads) - 1 and min(gaps) == IFG, gaps


def test_nothing_leaves_until_the_destination_is_known():
    dut = Dut()
    frames, gaps, offered = [], [], []
    hold = 400
    payloads = [bytes(range(40)), bytes(range(60))]
    run(dut, {"eth_tx": [pins(dut, frames, gaps), datagrams(dut, payloads, dst_valid_after=hold, log=offered)]}, 900)
    # The first datagram waited whole in the framer (its first byte accepted long before):
    # nothing on the pins before the destination, then both datagrams, unchanged.
    assert offered[0] > hold
    assert [bytes(Ether(check_frame(f))[UDP].payload)[:len(p)] for f, p in zip(frames, payloads)] == payloads


@pytest.mark.parametrize("what", ["request", "announce"])
def test_arp_requests_and_announcements_leave_as_arp_frames(what):
    dut = Dut()
    frames, gaps, announced = [], [], []
    target = 0xC0A80177   # 192.168.1.119

    def ask():
        tx = dut.txpath
        yield tx.arp_target.eq(target)
        yield getattr(tx, "arp_request" if what == "request" else "announce").eq(1)
        yield
        yield getattr(tx, "arp_request" if what == "request" else "announce").eq(0)
        for _ in range(300):
            announced.append((yield tx.announced))
            yield

    run(dut, {"eth_tx": [pins(dut, frames, gaps), ask()]}, 320)
    assert len(frames) == 1
    pkt = Ether(check_frame(frames[0]))
    arp = pkt[ARP]
    assert pkt.dst == "ff:ff:ff:ff:ff:ff" and pkt.src == "10:e2:d5:00:00:01"
    assert arp.op == 1 and arp.hwsrc == "10:e2:d5:00:00:01" and arp.psrc == BOARD_IP
    if what == "request":
        assert arp.pdst == "192.168.1.119" and sum(announced) == 0
    else:
        # RFC 5227: who-has our own address, from it; `announced` high for one cycle.
        assert arp.pdst == BOARD_IP and sum(announced) == 1


def test_liteeths_frames_leave_unchanged_between_datagrams_and_never_closer_than_the_gap():
    dut = Dut()
    frames, gaps, offered = [], [], []
    payloads = [bytes(range(200))] * 6
    times = [30, 250, 700]
    run(dut, {"eth_tx": [pins(dut, frames, gaps), datagrams(dut, payloads), control(dut, times, offered)]}, 2200)
    # LiteEth hands over frames with preamble and FCS: they reach the pins byte for byte.
    assert [f for f in frames if f == CONTROL_FRAME] == [CONTROL_FRAME] * len(times)
    data = [f for f in frames if f != CONTROL_FRAME]
    assert [bytes(Ether(check_frame(f))[UDP].payload) for f in data] == payloads
    assert min(gaps) >= IFG, gaps


def test_received_frames_pass_to_liteeth_with_the_last_byte_marked_valid():
    dut = Dut()
    frame = PREAMBLE + bytes(range(64))
    got = []

    def phy_rx():
        src = dut.phy.source
        for i, b in enumerate(frame):
            yield src.valid.eq(1)
            yield src.data.eq(b)
            yield src.last.eq(i == len(frame) - 1)
            yield
        yield src.valid.eq(0)
        for _ in range(5):
            yield

    @passive
    def mac_rx():
        snk = dut.txpath.mac_phy.source
        yield snk.ready.eq(1)
        while True:
            yield
            if (yield snk.valid):
                got.append(((yield snk.data), (yield snk.last), (yield snk.last_be)))

    run(dut, {"eth_tx": [phy_rx(), mac_rx()]}, 100)
    assert bytes(b for b, _, _ in got) == frame
    assert [(last, be) for _, last, be in got] == [(0, 0)] * (len(frame) - 1) + [(1, 1)]
