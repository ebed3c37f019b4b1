"""BytePacketizer (gateware/packetizer.py) beside LiteEth's own Packetizer, in Migen simulation:
for each of LiteEth's 8-bit packetizers (MAC, ARP, IPv4, UDP, ICMP), one built by LiteEth and one
built inside byte_packetizers() take the same packets (random header fields and payloads, the
sink's `valid` dropping at random between beats, the source's `ready` at random), and every
cycle their sources (`valid`, `data` while valid, `last`, `last_be`, `error`) and their sinks'
`ready` must be the same. byte_packetizers() builds LiteEth's own at 64 bits and restores
LiteEth's modules when it closes, also after an error."""

import random

import pytest
from migen import *
from migen.sim import run_simulation

from liteeth.core.arp import LiteEthARPPacketizer
from liteeth.core.icmp import LiteEthICMPPacketizer
from liteeth.core.ip import LiteEthIPV4Packetizer
from liteeth.core.udp import LiteEthUDPPacketizer
from liteeth.mac.common import LiteEthMACPacketizer
from liteeth.packet import Packetizer as LiteEthPacketizer

from ethdaq.gateware import packetizer as bp
from ethdaq.gateware.packetizer import BytePacketizer, byte_packetizers

PACKETIZERS = {
    "mac":  LiteEthMACPacketizer,
    "arp":  LiteEthARPPacketizer,
    "ipv4": LiteEthIPV4Packetizer,
    "udp":  LiteEthUDPPacketizer,
    "icmp": LiteEthICMPPacketizer,
}

CONTROL = {"valid", "ready", "first", "last", "data", "last_be", "error"}


class Pair(Module):
    def __init__(self, cls):
        self.submodules.ref = ref = cls(8)
        with byte_packetizers():
            self.submodules.dut = dut = cls(8)
        assert not hasattr(dut, "fsm") and hasattr(ref, "fsm")
        self.fields = [name for name, _ in ref.sink.description.payload_layout + ref.sink.description.param_layout
                       if name not in CONTROL]


def drive(pair, packets, rng, gaps):
    """Offer each packet (fields, payload bytes, error byte index) on both sinks, a byte at a time,
    holding each beat until the reference's sink takes it."""
    ref, dut = pair.ref.sink, pair.dut.sink
    for fields, payload, err in packets:
        for i, b in enumerate(payload):
            while rng.random() < gaps:
                for s in (ref, dut):
                    yield s.valid.eq(0)
                    yield s.data.eq(rng.getrandbits(8))   # Not valid: anything.
                yield
            for s in (ref, dut):
                yield s.valid.eq(1)
                yield s.data.eq(b)
                yield s.last.eq(i == len(payload) - 1)
                yield s.last_be.eq(i == len(payload) - 1)
                yield s.error.eq(i == err)
                for name, value in fields.items():
                    yield getattr(s, name).eq(value)
            yield
            while not (yield ref.ready):
                yield
        for s in (ref, dut):
            yield s.valid.eq(0)
    for _ in range(60):
        yield


def compare(pair, rng, ready, cycles, log):
    ref, dut = pair.ref, pair.dut
    for _ in range(cycles):
        take = int(rng.random() < ready)
        yield ref.source.ready.eq(take)
        yield dut.source.ready.eq(take)
        yield
        r = {"sink.ready": (yield ref.sink.ready), "valid": (yield ref.source.valid)}
        d = {"sink.ready": (yield dut.sink.ready), "valid": (yield dut.source.valid)}
        if r["valid"]:
            for name in ("data", "last", "last_be", "error"):
                r[name] = yield getattr(ref.source, name)
                d[name] = yield getattr(dut.source, name)
        assert d == r, f"cycle {len(log)}: BytePacketizer {d}, LiteEth's {r}"
        if r["valid"] and take:
            log.append(r["data"])


@pytest.mark.parametrize("name", sorted(PACKETIZERS))
@pytest.mark.parametrize("gaps,ready", [(0.0, 1.0), (0.3, 0.6), (0.1, 0.2)])
def test_same_stream_as_liteeth(name, gaps, ready):
    rng = random.Random(f"{name} {gaps} {ready}")
    pair = Pair(PACKETIZERS[name])
    widths = {n: len(getattr(pair.ref.sink, n)) for n in pair.fields}
    packets = []
    for k in range(25):
        fields = {n: rng.getrandbits(w) for n, w in widths.items()}
        payload = bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 2, 3, rng.randint(4, 40)])))
        err = rng.randrange(len(payload)) if k % 5 == 4 else -1
        packets.append((fields, payload, err))
    log = []
    header_len = len(pair.ref.header)//8
    cycles = int(sum(header_len + len(p) for _, p, _ in packets)/(ready*(1 - gaps))*1.6) + 400
    run_simulation(pair, [drive(pair, packets, rng, gaps), compare(pair, rng, ready, cycles, log)])
    # Every header and payload byte went out (the comparison covers what they were).
    assert len(log) == sum(header_len + len(p) for _, p, _ in packets)


def test_other_widths_build_liteeths():
    with byte_packetizers():
        p = LiteEthUDPPacketizer(dw=64)
    assert hasattr(p, "fsm")


def test_restores_liteeth_after_an_error():
    with pytest.raises(RuntimeError):
        with byte_packetizers():
            import liteeth.core.arp
            assert liteeth.core.arp.Packetizer is BytePacketizer
            raise RuntimeError("in the middle of a build")
    import importlib
    for name in bp.LITEETH_PACKETIZER_USERS:
        assert importlib.import_module(name).Packetizer is LiteEthPacketizer
    assert hasattr(LiteEthARPPacketizer(8), "fsm")


def test_refuses_a_liteeth_it_does_not_know(monkeypatch):
    import liteeth.core.udp
    monkeypatch.setattr(liteeth.core.udp, "Packetizer", object)
    with pytest.raises(ValueError, match="liteeth.core.udp"):
        with byte_packetizers():
            pass
