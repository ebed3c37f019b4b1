"""IPv4Checksum (gateware/ipchecksum.py) beside LiteEth's LiteEthIPV4Checksum, cycle by cycle:
random headers and headers whose sums carry at every step, `ce` with gaps, resets in the middle
of a sum; `done` must rise in the same cycle and `value` must be the same from then on. The
value is also checked against RFC 1071's sum computed here (an independent model): a header
with its right checksum checks to 0, and the transmit side's value is the checksum to send.
Then the swap into a LiteEthIP."""

import random

import pytest

from migen import Module, Signal, run_simulation

from liteeth.common import ipv4_header
from liteeth.core.ip import LiteEthIPV4Checksum

from ethdaq.gateware.ipchecksum import IPv4Checksum, checksum_cycles, replace_ip_checksums

from stream_helpers import collect_frames, send_frames

HEADER_BITS = ipv4_header.length*8
CHECKSUM_WORD = ipv4_header.fields["checksum"].byte//2


def rfc1071(words):
    s = sum(words)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def header_words(header):
    """The header signal's 16-bit words as LiteEth lays them out (word i = bits 16i..16i+15)."""
    return [(header >> (16*i)) & 0xFFFF for i in range(ipv4_header.length//2)]


def byteswap(v):
    return ((v & 0xFF) << 8) | (v >> 8)


class Pair(Module):
    def __init__(self, skip):
        self.header = Signal(HEADER_BITS)
        self.ce     = Signal()
        self.reset  = Signal()
        self.submodules.ref = ref = LiteEthIPV4Checksum(skip_checksum=skip)
        self.submodules.dut = dut = IPv4Checksum(skip_checksum=skip)
        self.comb += [m.header.eq(self.header) for m in (ref, dut)]
        self.comb += [m.ce.eq(self.ce) for m in (ref, dut)]
        self.comb += [m.reset.eq(self.reset) for m in (ref, dut)]


def headers(seed, n):
    rng = random.Random(seed)
    out = [0, 2**HEADER_BITS - 1]                                    # All ones: a carry at every step.
    out += [int.from_bytes(bytes([0xFF]*18 + [0x00, 0x01]), "big")]  # Sums that reach 0x1FFFF.
    out += [rng.getrandbits(HEADER_BITS) for _ in range(n)]
    return out


def run_pair(skip, seed):
    dut = Pair(skip)
    rng = random.Random(seed)
    checked = []

    def gen():
        for header in headers(seed, 40):
            yield dut.header.eq(header)
            yield dut.reset.eq(1)
            yield
            yield dut.reset.eq(0)
            restarted = False
            for cycle in range(3*checksum_cycles(skip) + 4):
                yield dut.ce.eq(rng.random() < 0.7)
                # A reset in the middle of a sum, once per header in a few: both start again.
                if not restarted and cycle == 4 and rng.random() < 0.2:
                    yield dut.reset.eq(1)
                    restarted = True
                else:
                    yield dut.reset.eq(0)
                yield
                ref_done, dut_done = (yield dut.ref.done), (yield dut.dut.done)
                assert ref_done == dut_done, f"header {header:#x}, cycle {cycle}: done {dut_done}, LiteEth's {ref_done}"
                if ref_done:
                    ref_value, dut_value = (yield dut.ref.value), (yield dut.dut.value)
                    assert dut_value == ref_value, f"header {header:#x}: value {dut_value:#06x}, LiteEth's {ref_value:#06x}"
            assert (yield dut.dut.done), f"header {header:#x}: not done after {3*checksum_cycles(skip) + 4} cycles"
            checked.append((header, (yield dut.dut.value)))
            yield dut.ce.eq(0)

    run_simulation(dut, gen())
    return checked


def test_receive_side_matches_liteeth_and_rfc1071():
    checked = run_pair(skip=False, seed=1)
    assert len(checked) == 43
    for header, value in checked:
        # The receiver's value is the complement of the sum over the whole header: 0 when right.
        assert byteswap(value) == rfc1071(header_words(header))
    # A header carrying its right checksum checks to 0.
    words = header_words(random.Random(2).getrandbits(HEADER_BITS))
    words[CHECKSUM_WORD] = 0
    words[CHECKSUM_WORD] = rfc1071(words)
    assert rfc1071(words) == 0


def test_transmit_side_matches_liteeth_and_rfc1071():
    checked = run_pair(skip=True, seed=3)
    for header, value in checked:
        words = header_words(header)
        words[CHECKSUM_WORD] = 0   # Skipped: whatever the field holds, the sum is of the others.
        assert byteswap(value) == rfc1071(words)


def test_replaces_both_of_a_liteeth_ip():
    # LiteEthIP needs a MAC and an ARP table; the swap only looks at its receiver and transmitter.
    class Side(Module):
        def __init__(self, skip):
            self.submodules.checksum = LiteEthIPV4Checksum(skip_checksum=skip)
    class IP:
        rx, tx = Side(False), Side(True)
    ip = IP()
    olds = (ip.rx.checksum, ip.tx.checksum)
    rx, tx = replace_ip_checksums(ip)
    for side, old, new in ((ip.rx, olds[0], rx), (ip.tx, olds[1], tx)):
        mods = [m for _, m in side._submodules]
        assert new in mods and old not in mods
        assert (new.header, new.value, new.done, new.ce, new.reset) == (old.header, old.value, old.done, old.ce, old.reset)
    assert checksum_cycles(False) == 11 and checksum_cycles(True) == 9


def test_refuses_a_side_without_liteeth_checksum():
    class Side(Module):
        pass
    class IP:
        rx, tx = Side(), Side()
    try:
        replace_ip_checksums(IP())
    except ValueError as e:
        assert "no LiteEthIPV4Checksum" in str(e)
    else:
        raise AssertionError("no error for a LiteEthIP without its checksum")


class IPSides(Module):
    """LiteEth's IPv4 receiver and transmitter (the transmitter's ARP table answers at once),
    their checksums replaced by ours, or not."""
    def __init__(self, replaced):
        from litex.soc.interconnect import stream
        from liteeth.common import arp_table_request_layout, arp_table_response_layout
        from liteeth.core.ip import LiteEthIPRX, LiteEthIPTX

        class ARPTable:
            request  = stream.Endpoint(arp_table_request_layout)
            response = stream.Endpoint(arp_table_response_layout)
        arp = ARPTable()
        self.comb += [arp.request.ready.eq(1), arp.response.valid.eq(1), arp.response.mac_address.eq(0x020000000001)]
        self.submodules.rx = LiteEthIPRX(mac_address=0x10E2D5000000, ip_address=0xC0A80132, dw=8)
        self.submodules.tx = LiteEthIPTX(mac_address=0x10E2D5000000, ip_address=0xC0A80132, arp_table=arp, dw=8)
        if replaced:
            replace_ip_checksums(self)


@pytest.mark.parametrize("replaced", [True, False])
def test_liteeth_ip_receiver_and_transmitter_with_the_checksums(replaced):
    """Received: datagrams whose header checksum is right pass, those with a wrong one are
    dropped. Sent: the header checksum is right by scapy's reckoning (an independent one), for
    lengths that change the sum. Both with LiteEth's own checksums (so the test is of behaviour)
    and with ours."""
    from scapy.layers.inet import IP, UDP

    dut = IPSides(replaced)
    good = [bytes(IP(src="192.168.1.100", dst="192.168.1.50", id=k, ttl=64 - k)/UDP(sport=1000 + k, dport=7000)/
                  bytes(range(k*7 % 50 + 1))) for k in range(6)]
    bad = [bytearray(g) for g in good[:3]]
    for b in bad:
        b[10] ^= 0x01   # The checksum's low bit.
    received, sent = [], []
    lengths = [1, 2, 37, 255, 256, 1000]

    def send_tx():
        sink = dut.tx.sink
        for n in lengths:
            payload = bytes((n + i) & 0xFF for i in range(n))
            yield sink.ip_address.eq(0xC0A80164)
            yield sink.protocol.eq(17)
            yield sink.length.eq(n)
            for i, b in enumerate(payload):
                yield sink.valid.eq(1)
                yield sink.data.eq(b)
                yield sink.last.eq(i == n - 1)
                yield sink.last_be.eq(i == n - 1)
                yield
                while not (yield sink.ready):
                    yield
            yield sink.valid.eq(0)
            for _ in range(20):
                yield

    frames = [bytes(f) for pair in zip(good, bad + [None]*3) for f in pair if f is not None]
    run_simulation(dut, [send_frames(dut.rx.sink, frames, between=4), collect_frames(dut.rx.source, received, 3000),
                         send_tx(), collect_frames(dut.tx.source, sent, 3000)])
    # The receiver passes the payload after the IPv4 header (the UDP header and data here).
    assert received == [g[20:] for g in good]
    assert len(sent) == len(lengths)
    for frame, n in zip(sent, lengths):
        ip = IP(frame)
        assert ip.len == 20 + n and ip.dst == "192.168.1.100" and ip.src == "192.168.1.50"
        checksum = ip.chksum
        del ip.chksum
        assert IP(bytes(ip)).chksum == checksum, f"{n}-byte datagram: checksum {checksum:#06x}"
