"""ICMP echo responder (gateware/icmpecho.py) in Migen simulation, its messages built and its
replies judged by scapy: every echo request is answered once, in order, to its sender, with the
request's bytes, type 0 and a checksum that verifies; other messages, short and oversized ones,
and messages whose frame ends early are not; Ethernet padding after a message is not echoed; the
source stalls and the crossbar back-pressures at random. Then the responder on LiteEth's IPv4
core in place of LiteEth's ICMP, answering a ping frame as LiteEth's did (scapy checks the frame
it sends, IPv4 and ICMP checksums included)."""

import random
import zlib

import pytest
from migen.sim import passive, run_simulation

from liteeth.common import icmp_protocol
from liteeth.core import LiteEthIPCore
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether
from scapy.utils import checksum

from ethdaq.gateware.icmpecho import ICMPEcho, echo_reply_checksum
from ipcore_helpers import BOARD_IP, BOARD_MAC, HOST_IP, HOST_MAC, IPCoreBench, exchange_ping, ping_request


def ping(seq, payload, icmp_type=8):
    return bytes(ICMP(type=icmp_type, id=0x4711, seq=seq) / payload)


def with_checksum(message, value):
    """`message` (an even number of bytes, at least 10) with its checksum field set to `value`
    and its last two bytes chosen so that the checksum still verifies."""
    m = bytearray(message)
    m[2:4] = value.to_bytes(2, "big")
    m[-2:] = b"\0\0"
    rest = ~checksum(bytes(m)) & 0xFFFF     # The one's-complement sum of the other words.
    m[-2:] = (0xFFFF - rest).to_bytes(2, "big")
    assert checksum(bytes(m)) == 0
    return bytes(m)


def echo_sim(messages, ready_prob=0.7, valid_prob=0.8, seed=1, depth=2048, max_message=1480, messages_max=16, cycles=None):
    """messages: (ip, bytes on the port, IPv4 length). Returns the replies: (ip, length, bytes)."""
    dut = ICMPEcho(depth=depth, max_message=max_message, messages=messages_max)
    rng = random.Random(seed)
    replies, cur = [], []

    def feed():
        for ip, data, length in messages:
            yield dut.sink.ip_address.eq(ip)
            yield dut.sink.length.eq(length)
            yield dut.sink.protocol.eq(icmp_protocol)
            for i, b in enumerate(data):
                while rng.random() > valid_prob:
                    yield dut.sink.valid.eq(0)
                    yield
                yield dut.sink.valid.eq(1)
                yield dut.sink.data.eq(b)
                yield dut.sink.last.eq(i == len(data) - 1)
                yield
                while not (yield dut.sink.ready):
                    yield
            yield dut.sink.valid.eq(0)

    @passive
    def drain():
        while True:
            yield dut.source.ready.eq(rng.random() < ready_prob)
            yield
            if (yield dut.source.valid) and (yield dut.source.ready):
                cur.append((yield dut.source.data))
                assert (yield dut.source.protocol) == icmp_protocol
                if (yield dut.source.last):
                    replies.append(((yield dut.source.ip_address), (yield dut.source.length), bytes(cur)))
                    cur.clear()

    def wait():
        total = sum(len(d) for _, d, _ in messages)
        for _ in range(cycles or 20*total + 2000):
            yield

    run_simulation(dut, [feed(), drain(), wait()])
    assert cur == []
    return replies


def expected_reply(message):
    reply = bytearray(message)
    reply[0] = 0
    reply[2:4] = echo_reply_checksum(int.from_bytes(message[2:4], "big")).to_bytes(2, "big")
    return bytes(reply)


def test_the_reply_checksum_is_the_requests_plus_0x0800_with_end_around_carry():
    # It verifies, and it is the checksum scapy computes afresh, or its other zero (0xFFFF for
    # 0x0000: a one's-complement sum of non-zero words is never 0x0000).
    for c in (0x0000, 0x1234, 0xF7FF, 0xF800, 0xF8FF, 0xFEFF, 0xFFFE, 0xFFFF):
        r = expected_reply(with_checksum(ping(1, b"abcdefgh"), c))
        assert checksum(r) == 0
        fresh = checksum(r[:2] + b"\0\0" + r[4:])
        assert int.from_bytes(r[2:4], "big") in {fresh, 0xFFFF if fresh == 0 else fresh}


def test_the_gateware_reply_checksum_is_the_same_for_every_request_checksum():
    """echo_reply_checksum on a 16-bit signal, as the responder builds it, against its integer
    form for all 65536 request checksums (the end-around carry from 0xF800 up included)."""
    from migen import Module, Signal
    c, r = Signal(16), Signal(16)
    m, got = Module(), []
    m.comb += r.eq(echo_reply_checksum(c))

    def gen():
        for v in range(2**16):
            yield c.eq(v)
            yield
            got.append((yield r))
    run_simulation(m, gen())
    assert got == [echo_reply_checksum(v) for v in range(2**16)]


def test_every_echo_request_is_answered_once_in_order_with_a_checksum_that_verifies():
    rng = random.Random(7)
    messages, want = [], []
    sizes = [0, 1, 2, 7, 8, 56, 100, 255, 1472] + [rng.randrange(0, 300) for _ in range(20)]
    for n, size in enumerate(sizes):
        ip = 0x0A000001 + n
        m = ping(n, bytes(rng.randrange(256) for _ in range(size)))
        if len(m) % 2 == 0 and size >= 2 and n % 3 == 0:
            m = with_checksum(m, rng.choice([0xF7FF, 0xF800, 0xFFFF, 0xFFFE, 0x0000, 0xF8FF]))
        messages.append((ip, m, len(m)))
        want.append((ip, len(m), expected_reply(m)))
    got = echo_sim(messages)
    assert got == want
    for _, _, r in got:
        assert ICMP(r).type == 0 and checksum(r) == 0


def test_other_messages_and_broken_ones_are_not_answered_and_lose_nothing_after_them():
    good = ping(1, b"after")
    short = ping(2, b"")[:6]
    messages = [
        (1, ping(3, b"reply", icmp_type=0), 13),      # An echo reply.
        (2, ping(4, b"x"*20, icmp_type=3), 28),       # Destination unreachable.
        (3, ping(5, b"x"*20, icmp_type=13), 28),      # Timestamp request.
        (4, short, 6),                                # Shorter than an ICMP header.
        (5, ping(6, b"truncated"), 40),               # The frame ends before its IPv4 length.
        (6, good, len(good)),
        (7, ping(8, b"y"*1473), 1481),                # Longer than max_message.
        (8, good + bytes(18), len(good)),             # Ethernet padding after the message.
        (9, ping(9, b"z"*1472), 1480),                # max_message.
    ]
    got = echo_sim(messages, depth=2048)
    assert got == [(6, len(good), expected_reply(good)), (8, len(good), expected_reply(good)),
                   (9, 1480, expected_reply(ping(9, b"z"*1472)))]


def test_a_flood_waits_for_room_and_every_request_is_answered():
    # 64 requests of 300 bytes through 1024 bytes of RAM and 4 slots, a slow reader: the sink
    # waits, nothing is dropped or overwritten.
    rng = random.Random(3)
    messages, want = [], []
    for n in range(64):
        m = ping(n, bytes(rng.randrange(256) for _ in range(292)))
        messages.append((n, m, len(m)))
        want.append((n, len(m), expected_reply(m)))
    got = echo_sim(messages, ready_prob=0.3, valid_prob=1.0, depth=1024, max_message=300, messages_max=4, cycles=200000)
    assert got == want


def test_depth_must_be_a_power_of_two_with_room_for_the_longest_message():
    with pytest.raises(ValueError, match="power of two"):
        ICMPEcho(depth=1500)
    with pytest.raises(ValueError, match="max_message must be 8 to depth - 2 = 1022"):
        ICMPEcho(depth=1024)


# --- On LiteEth's IPv4 core, in place of its ICMP ----------------------------------------------------

class IPCoreDut(IPCoreBench):
    def __init__(self):
        IPCoreBench.__init__(self)
        self.core = LiteEthIPCore(self.phy, BOARD_MAC, BOARD_IP, clk_freq=100e6, dw=8, with_icmp=False)
        self.echo = ICMPEcho()
        port = self.core.ip.crossbar.get_port(icmp_protocol, 8)
        self.comb += [self.echo.source.connect(port.sink), port.source.connect(self.echo.sink)]


@pytest.mark.parametrize("payload", [b"", b"ethdaq!", bytes(range(256))*5])
def test_on_liteeths_ip_core_a_ping_frame_is_answered(payload):
    request = ping_request(payload)
    # sys keeps up with the wire (the bench does not wait for the MAC's receive crossing).
    sent = exchange_ping(IPCoreDut(), request, cycles=8000, clocks={"sys": 7, "eth_rx": 8, "eth_tx": 8})
    frame = sent[-1]
    assert zlib.crc32(frame[8:-4]).to_bytes(4, "little") == frame[-4:]
    reply = Ether(frame[8:-4])
    assert reply.dst == HOST_MAC and reply[IP].dst == HOST_IP and reply[IP].src == BOARD_IP
    ip_bytes = bytes(reply[IP])[:reply[IP].len]
    assert checksum(ip_bytes[:20]) == 0
    icmp = ip_bytes[20:]
    assert checksum(icmp) == 0
    assert ICMP(icmp).type == 0 and icmp[4:] == bytes(request[ICMP])[4:]
