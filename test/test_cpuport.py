"""CPU UDP port (gateware/cpuport.py) in Migen simulation: datagrams in and out, padding,
overload drops counted, the UDP stack never stalled, a frame never paused mid-datagram."""

import random

import pytest
from migen import passive, run_simulation

from ethdaq.gateware.cpuport import CPUUDPPort


def send_datagram(sink, payload, ip=0xC0A80164, port=5555, declared=None, padding=0):
    """Drive one datagram into the port's sink as the LiteEth UDP crossbar would (dw=8)."""
    data = list(payload) + [0xEE] * padding
    declared = len(payload) if declared is None else declared
    for i, b in enumerate(data):
        yield sink.valid.eq(1)
        yield sink.data.eq(b)
        yield sink.last.eq(i == len(data) - 1)
        yield sink.length.eq(declared)
        yield sink.ip_address.eq(ip)
        yield sink.src_port.eq(port)
        yield
        while not (yield sink.ready):
            yield
    yield sink.valid.eq(0)
    yield sink.last.eq(0)
    yield


def csr_write(csr, value=1):
    if hasattr(csr, "storage"):
        yield csr.storage.eq(value)
    yield csr.re.eq(1)
    yield
    yield csr.re.eq(0)
    yield


def cpu_read_datagram(dut):
    """What the firmware driver does: wait for rx_ready, read length and bytes, consume."""
    for _ in range(10000):
        if (yield dut._rx_ready.status):
            break
        yield
    else:
        raise AssertionError("no datagram became ready within 10000 cycles")
    length = yield dut._rx_length.status
    meta = dict(ip=(yield dut._rx_ip.status), port=(yield dut._rx_port.status),
                truncated=(yield dut._rx_truncated.status))
    data = []
    for _ in range(length):
        data.append((yield dut._rx_data.status))
        yield from csr_write(dut._rx_next)
    yield from csr_write(dut._rx_consume)
    for _ in range(4):
        yield
    return bytes(data), meta


def test_rx_datagrams_in_order_with_metadata_and_padding_stripped():
    dut = CPUUDPPort(udp_port=7000, rx_depth=512)
    rng = random.Random(1)
    datagrams = [bytes(rng.randrange(256) for _ in range(n)) for n in (1, 8, 60, 200)]
    got = []

    def producer():
        for i, d in enumerate(datagrams):
            # Short datagrams arrive with Ethernet padding after the payload.
            yield from send_datagram(dut.sink, d, port=1000 + i, padding=10 if len(d) < 18 else 0)

    def consumer():
        for _ in datagrams:
            got.append((yield from cpu_read_datagram(dut)))

    run_simulation(dut, [producer(), consumer()])
    assert [g[0] for g in got] == datagrams
    assert [g[1]["port"] for g in got] == [1000, 1001, 1002, 1003]
    assert all(g[1]["ip"] == 0xC0A80164 and g[1]["truncated"] == 0 for g in got)


def test_rx_overload_drops_whole_datagrams_counts_them_and_never_stalls():
    dut = CPUUDPPort(udp_port=7000, rx_depth=128, rx_datagrams=4)
    stalls = []

    @passive
    def watch_ready():
        while True:
            if (yield dut.sink.valid) and not (yield dut.sink.ready):
                stalls.append(1)
            yield

    def producer():
        # Nobody reads: 100 bytes fit, the next three 100-byte datagrams do not.
        for i in range(4):
            yield from send_datagram(dut.sink, bytes([i]) * 100)
        # A datagram larger than the whole buffer can never fit.
        yield from send_datagram(dut.sink, bytes(200))
        for _ in range(10):
            yield
        assert (yield dut._rx_dropped.status) == 4
        assert (yield dut._rx_count.status) == 1
        data, meta = yield from cpu_read_datagram(dut)
        assert data == bytes([0]) * 100
        # After the CPU has emptied the buffer, datagrams are accepted again.
        yield from send_datagram(dut.sink, b"again")
        data, meta = yield from cpu_read_datagram(dut)
        assert data == b"again"

    run_simulation(dut, [producer(), watch_ready()])
    # The admission FSM takes one cycle to decide per datagram; beyond that, ready stays high.
    assert len(stalls) <= 6  # Six datagrams were offered.


def test_rx_consume_discards_unread_bytes():
    dut = CPUUDPPort(udp_port=7000, rx_depth=256)

    def run():
        yield from send_datagram(dut.sink, b"first-datagram")
        yield from send_datagram(dut.sink, b"second")
        while not (yield dut._rx_ready.status):
            yield
        yield from csr_write(dut._rx_consume)  # Skip the first without reading it.
        data, _ = yield from cpu_read_datagram(dut)
        assert data == b"second"

    run_simulation(dut, run())


def test_tx_sends_complete_datagram_without_gaps():
    dut = CPUUDPPort(udp_port=7000, tx_depth=64)
    beats = []

    @passive
    def sink():
        yield dut.source.ready.eq(1)
        while True:
            if (yield dut.source.valid) and (yield dut.source.ready):
                beats.append(dict(data=(yield dut.source.data), last=(yield dut.source.last),
                    length=(yield dut.source.length), ip=(yield dut.source.ip_address),
                    dst=(yield dut.source.dst_port), src=(yield dut.source.src_port)))
            yield

    def cpu():
        payload = b"hello, host"
        for b in payload:
            yield from csr_write(dut._tx_data, b)
        yield from csr_write(dut._tx_ip, 0xC0A80164)
        yield from csr_write(dut._tx_port, 4321)
        yield from csr_write(dut._tx_send)
        while (yield dut._tx_busy.status):
            yield
        assert (yield dut._tx_count.status) == 1

    run_simulation(dut, [cpu(), sink()])
    assert bytes(b["data"] for b in beats) == b"hello, host"
    assert [b["last"] for b in beats] == [0] * 10 + [1]
    assert all(b["length"] == 11 and b["ip"] == 0xC0A80164 and b["dst"] == 4321 and b["src"] == 7000 for b in beats)


def test_tx_valid_never_drops_inside_a_datagram():
    dut = CPUUDPPort(udp_port=7000, tx_depth=64)
    trace = []

    @passive
    def sink():
        rng = random.Random(3)
        while True:
            ready = rng.random() < 0.5  # Back-pressure from the stack.
            yield dut.source.ready.eq(ready)
            trace.append(((yield dut.source.valid), ready, (yield dut.source.last)))
            yield

    def cpu():
        for b in range(40):
            yield from csr_write(dut._tx_data, b)
        yield from csr_write(dut._tx_send)
        while (yield dut._tx_busy.status):
            yield

    run_simulation(dut, [cpu(), sink()])
    first = next(i for i, t in enumerate(trace) if t[0])
    last = next(i for i, t in enumerate(trace) if t[0] and t[1] and t[2])
    assert all(t[0] for t in trace[first:last + 1]), "valid dropped inside the datagram"


def test_tx_overflow_is_dropped_and_counted_then_port_recovers():
    dut = CPUUDPPort(udp_port=7000, tx_depth=64)
    beats = []

    @passive
    def sink():
        yield dut.source.ready.eq(1)
        while True:
            if (yield dut.source.valid):
                beats.append((yield dut.source.data))
            yield

    def cpu():
        for b in range(70):  # More than tx_depth.
            yield from csr_write(dut._tx_data, b & 0xff)
        yield from csr_write(dut._tx_send)
        while (yield dut._tx_busy.status):
            yield
        assert (yield dut._tx_dropped.status) == 1
        assert (yield dut._tx_count.status) == 0
        yield from csr_write(dut._tx_data, 0x42)
        yield from csr_write(dut._tx_send)
        while (yield dut._tx_busy.status):
            yield
        assert (yield dut._tx_count.status) == 1

    run_simulation(dut, [cpu(), sink()])
    assert beats == [0x42]


@pytest.mark.parametrize("kwargs, message", [
    (dict(udp_port=0), "udp_port must be in 1..65535, not 0"),
    (dict(udp_port=7000, rx_depth=100), "rx_depth must be a power of two >= 64, not 100"),
])
def test_bad_parameters_are_refused_with_clear_message(kwargs, message):
    with pytest.raises(ValueError) as e:
        CPUUDPPort(**kwargs)
    assert str(e.value) == message
