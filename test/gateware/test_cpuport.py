"""CPU ports (gateware/cpuport.py) in Migen simulation.

CPUUDPPort: datagrams in and out, padding, overload drops counted, the UDP stack never stalled, a
frame never paused mid-datagram. CPUMACPort: raw frames of one EtherType in and out, truncation,
drops and errors counted, the MAC crossbar never stalled; and once through LiteEth's real MAC."""

import random

import pytest
from migen import passive, run_simulation
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from liteeth.common import eth_phy_description
from liteeth.mac import LiteEthMAC

from ethdaq.gateware.cpuport import CPUUDPPort, CPUMACPort, connect_udp_ports

from stream_helpers import wire


def send_datagram(sink, payload, ip=0xC0A80164, port=5555, declared=None, padding=0, dst_port=None, error_at=None):
    """Drive one datagram into the port's sink as the LiteEth UDP crossbar would (dw=8). error_at:
    the beat that carries the MAC's error flag (-1: the last, as a bad FCS does)."""
    data = list(payload) + [0xEE] * padding
    declared = len(payload) if declared is None else declared
    flagged = None if error_at is None else error_at % len(data)
    for i, b in enumerate(data):
        yield sink.valid.eq(1)
        yield sink.data.eq(b)
        yield sink.error.eq(i == flagged)
        yield sink.last.eq(i == len(data) - 1)
        yield sink.length.eq(declared)
        yield sink.ip_address.eq(ip)
        yield sink.src_port.eq(port)
        if dst_port is not None:
            yield sink.dst_port.eq(dst_port)
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


def cpu_read(dut, meta_csrs, what="datagram"):
    """What the firmware driver does: wait for rx_ready, read the metadata (name -> CSR value),
    length and bytes, consume."""
    for _ in range(10000):
        if (yield dut._rx_ready.status):
            break
        yield
    else:
        raise AssertionError(f"no {what} became ready within 10000 cycles")
    length = yield dut._rx_length.status
    meta = {}
    for name, value in meta_csrs(dut).items():
        meta[name] = yield value
    data = []
    for _ in range(length):
        data.append((yield dut._rx_data.status))
        yield from csr_write(dut._rx_next)
    yield from csr_write(dut._rx_consume)
    for _ in range(4):
        yield
    return bytes(data), meta


def cpu_read_datagram(dut):
    return (yield from cpu_read(dut, lambda d: dict(ip=d._rx_ip.status, port=d._rx_port.status,
        truncated=d._rx_truncated.status, local_port=d._rx_local_port.status)))


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


def test_rx_datagrams_the_mac_flagged_are_discarded_unseen_and_counted():
    """A bad FCS reaches LiteEth's UDP layer as the error flag on the last beat (the data is
    already stored by then): the CPU never sees such a datagram, and it is counted."""
    dut = CPUUDPPort(udp_port=7000, rx_depth=512, rx_datagrams=4)
    got = []

    def producer():
        yield from send_datagram(dut.sink, b"good one")
        yield from send_datagram(dut.sink, b"bad fcs", error_at=-1)
        yield from send_datagram(dut.sink, b"x" * 40, error_at=3)
        yield from send_datagram(dut.sink, b"good two", padding=10)
        yield from send_datagram(dut.sink, b"!", padding=17, error_at=-1)  # Flag on the padding.

    def consumer():
        for _ in range(2):
            got.append((yield from cpu_read_datagram(dut)))
        for _ in range(300):
            yield
        assert not (yield dut._rx_ready.status)
        assert (yield dut._rx_errors.status) == 3
        assert (yield dut._rx_count.status) == 2

    run_simulation(dut, [producer(), consumer()])
    assert [g[0] for g in got] == [b"good one", b"good two"]


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


# CPU MAC port -------------------------------------------------------------------------------------

PTP_ETHERTYPE = 0x88F7
OWN_MAC       = 0x10E2D5000001
PEER_MAC      = 0x02AABBCCDDEE
PTP_MULTICAST = 0x011B19000000  # 01:1B:19:00:00:00, PTP over Ethernet (all except peer delay).


def send_frame(sink, payload, src=PEER_MAC, dst=OWN_MAC, ethernet_type=PTP_ETHERTYPE, error_at=None):
    """Drive one frame into the port's sink as the LiteEth MAC crossbar would (dw=8): the header
    fields come with every beat; ``error_at`` is the beat with error set (-1: the last, as the
    MAC's FCS checker does)."""
    data = list(payload)
    error_at = None if error_at is None else error_at % len(data)
    for i, b in enumerate(data):
        yield sink.valid.eq(1)
        yield sink.data.eq(b)
        yield sink.last.eq(i == len(data) - 1)
        yield sink.last_be.eq(i == len(data) - 1)
        yield sink.error.eq(i == error_at)
        yield sink.sender_mac.eq(src)
        yield sink.target_mac.eq(dst)
        yield sink.ethernet_type.eq(ethernet_type)
        yield
        while not (yield sink.ready):
            yield
    yield sink.valid.eq(0)
    yield sink.last.eq(0)
    yield sink.error.eq(0)
    yield


def cpu_read_frame(dut):
    return (yield from cpu_read(dut, lambda d: dict(mac=d._rx_mac.status,
        multicast=d._rx_dst.fields.multicast, truncated=d._rx_truncated.status), what="frame"))


@passive
def watch_stalls(endpoint, stalls):
    while True:
        if (yield endpoint.valid) and not (yield endpoint.ready):
            stalls.append(1)
        yield


def test_mac_rx_frames_stored_with_padding_and_long_frame_truncated():
    dut = CPUMACPort(PTP_ETHERTYPE, OWN_MAC, rx_depth=512, rx_frames=8, rx_max=128)
    rng = random.Random(5)
    # What the MAC delivers: a 44-byte PTP Sync padded with 2 zero bytes to the 46-byte minimum,
    # minimum-size payloads, larger ones, and one longer than rx_max.
    payloads = [bytes(rng.randrange(256) for _ in range(44)) + bytes(2)]
    payloads += [bytes(rng.randrange(256) for _ in range(n)) for n in (1, 46, 127, 128, 129, 300)]
    got, stalls = [], []

    def producer():
        for i, p in enumerate(payloads):
            yield from send_frame(dut.sink, p, src=PEER_MAC + i)

    def consumer():
        for _ in payloads:
            got.append((yield from cpu_read_frame(dut)))
        assert (yield dut._rx_count.status) == len(payloads)
        assert (yield dut._rx_dropped.status) == 0
        assert (yield dut._rx_errors.status) == 0

    run_simulation(dut, [producer(), consumer(), watch_stalls(dut.sink, stalls)])
    assert [g[0] for g in got] == [p[:128] for p in payloads]
    assert [len(g[0]) for g in got] == [46, 1, 46, 127, 128, 128, 128]
    assert [g[1]["truncated"] for g in got] == [0, 0, 0, 0, 0, 1, 1]
    assert [g[1]["mac"] for g in got] == [PEER_MAC + i for i in range(len(payloads))]
    assert stalls == []


def test_mac_rx_reports_source_mac_and_multicast_destination():
    dut = CPUMACPort(PTP_ETHERTYPE, OWN_MAC)
    dsts = [OWN_MAC, PTP_MULTICAST, 0x0180C200000E, 0xFFFFFFFFFFFF, 0xFEFFFFFFFFFF]
    srcs = [0x02AABBCCDD00 + i for i in range(len(dsts))]
    got = []

    def run():
        for i, (src, dst) in enumerate(zip(srcs, dsts)):
            yield from send_frame(dut.sink, bytes([i]) * 46, src=src, dst=dst)
            got.append((yield from cpu_read_frame(dut)))

    run_simulation(dut, run())
    assert [g[0] for g in got] == [bytes([i]) * 46 for i in range(len(dsts))]
    assert [g[1]["mac"] for g in got] == srcs
    # Only bit 0 of the first destination byte counts: FE:FF:... is unicast.
    assert [g[1]["multicast"] for g in got] == [0, 1, 1, 1, 0]


@pytest.mark.parametrize("rx_max, size, offered, accepted", [
    (64,  46,  5, 4),  # rx_frames + 1 small frames: the fifth finds no frame slot.
    (128, 46,  4, 3),  # A third would leave fewer than rx_max bytes free for a fourth.
    (128, 300, 3, 2),  # Truncated frames take rx_max bytes: two fill the 256-byte buffer.
])
def test_mac_rx_full_drops_whole_frames_counts_them_and_never_stalls(rx_max, size, offered, accepted):
    dut = CPUMACPort(PTP_ETHERTYPE, OWN_MAC, rx_depth=256, rx_frames=4, rx_max=rx_max)
    stalls = []

    def producer():
        # Nobody reads while the frames arrive.
        for i in range(offered):
            yield from send_frame(dut.sink, bytes([i]) * size)
        for _ in range(10):
            yield
        assert (yield dut._rx_count.status) == accepted
        assert (yield dut._rx_dropped.status) == offered - accepted
        for i in range(accepted):
            data, meta = yield from cpu_read_frame(dut)
            assert data == bytes([i]) * min(size, rx_max)
            assert meta["truncated"] == (size > rx_max)
        assert not (yield dut._rx_ready.status)
        # Once the CPU has emptied the buffer, frames are accepted again.
        yield from send_frame(dut.sink, b"again")
        data, meta = yield from cpu_read_frame(dut)
        assert data == b"again"
        assert (yield dut._rx_count.status) == accepted + 1

    run_simulation(dut, [producer(), watch_stalls(dut.sink, stalls)])
    assert stalls == []


def test_mac_rx_error_frames_are_discarded_unseen_and_counted():
    dut = CPUMACPort(PTP_ETHERTYPE, OWN_MAC, rx_frames=4)
    got = []

    def producer():
        yield from send_frame(dut.sink, b"A" * 46)
        yield from send_frame(dut.sink, b"B" * 46, error_at=-1)  # Bad FCS: flagged on the last beat.
        yield from send_frame(dut.sink, b"C" * 46, error_at=10)  # Flagged mid-frame.
        yield from send_frame(dut.sink, b"D" * 1, error_at=-1)   # One beat, first and last.
        yield from send_frame(dut.sink, b"E" * 46)

    def consumer():
        # Errors are counted as they end; the CPU only ever sees the good frames.
        for _ in range(2):
            got.append((yield from cpu_read_frame(dut)))
        for _ in range(200):
            yield
        assert not (yield dut._rx_ready.status)
        assert (yield dut._rx_errors.status) == 3
        assert (yield dut._rx_count.status) == 2
        assert (yield dut._rx_dropped.status) == 0

    run_simulation(dut, [producer(), consumer()])
    assert [g[0] for g in got] == [b"A" * 46, b"E" * 46]


def test_mac_rx_consume_discards_unread_bytes():
    dut = CPUMACPort(PTP_ETHERTYPE, OWN_MAC)

    def run():
        yield from send_frame(dut.sink, b"first-frame".ljust(46, b"."))
        yield from send_frame(dut.sink, b"second".ljust(46, b"."))
        while not (yield dut._rx_ready.status):
            yield
        yield from csr_write(dut._rx_next)  # Read a little of the first, then skip the rest.
        yield from csr_write(dut._rx_consume)
        data, _ = yield from cpu_read_frame(dut)
        assert data == b"second".ljust(46, b".")

    run_simulation(dut, run())


def test_mac_tx_frames_carry_header_and_stream_without_gaps_under_back_pressure():
    dut = CPUMACPort(PTP_ETHERTYPE, OWN_MAC, tx_depth=128)
    rng = random.Random(7)
    payloads = [bytes(rng.randrange(256) for _ in range(n)) for n in (44, 64)]
    dsts = [PTP_MULTICAST, PEER_MAC]
    beats, trace = [], []

    @passive
    def sink():
        rng = random.Random(3)
        while True:
            ready = rng.random() < 0.5  # Back-pressure from the MAC.
            yield dut.source.ready.eq(ready)
            yield
            valid = yield dut.source.valid
            trace.append((valid, ready, (yield dut.source.last)))
            if valid and ready:
                beats.append(dict(data=(yield dut.source.data), last=(yield dut.source.last),
                    last_be=(yield dut.source.last_be), error=(yield dut.source.error),
                    dst=(yield dut.source.target_mac), src=(yield dut.source.sender_mac),
                    type=(yield dut.source.ethernet_type)))

    def cpu():
        for n, (payload, dst) in enumerate(zip(payloads, dsts)):
            for b in payload:
                yield from csr_write(dut._tx_data, b)
            yield from csr_write(dut._tx_mac, dst)
            yield from csr_write(dut._tx_send)
            assert (yield dut._tx_busy.status)
            while (yield dut._tx_busy.status):
                yield
            assert (yield dut._tx_count.status) == n + 1
        assert (yield dut._tx_dropped.status) == 0

    run_simulation(dut, [cpu(), sink()])
    frames = [beats[:44], beats[44:]]
    assert len(beats) == 44 + 64
    for frame, payload, dst in zip(frames, payloads, dsts):
        assert bytes(b["data"] for b in frame) == payload
        assert [b["last"] for b in frame] == [0] * (len(payload) - 1) + [1]
        assert [b["last_be"] for b in frame] == [b["last"] for b in frame]
        assert all(b["dst"] == dst and b["src"] == OWN_MAC and b["type"] == PTP_ETHERTYPE
                   and b["error"] == 0 for b in frame)
    # valid never drops inside a frame.
    starts = [i for i, t in enumerate(trace) if t[0] and (i == 0 or not trace[i - 1][0])]
    ends = [i for i, t in enumerate(trace) if t[0] and t[1] and t[2]]
    assert len(starts) == len(ends) == 2
    for first, last in zip(starts, ends):
        assert all(t[0] for t in trace[first:last + 1]), "valid dropped inside the frame"


def test_mac_tx_payload_above_tx_depth_is_dropped_and_counted_then_port_recovers():
    dut = CPUMACPort(PTP_ETHERTYPE, OWN_MAC, tx_depth=64)
    beats = []

    @passive
    def sink():
        yield dut.source.ready.eq(1)
        while True:
            if (yield dut.source.valid):
                beats.append((yield dut.source.data))
            yield

    def cpu():
        for b in range(65):  # One byte more than tx_depth.
            yield from csr_write(dut._tx_data, b)
        yield from csr_write(dut._tx_send)
        while (yield dut._tx_busy.status):
            yield
        assert (yield dut._tx_dropped.status) == 1
        assert (yield dut._tx_count.status) == 0
        for b in range(64):  # Exactly tx_depth fits.
            yield from csr_write(dut._tx_data, b ^ 0x5A)
        yield from csr_write(dut._tx_send)
        while (yield dut._tx_busy.status):
            yield
        assert (yield dut._tx_count.status) == 1
        assert (yield dut._tx_dropped.status) == 1

    run_simulation(dut, [cpu(), sink()])
    assert beats == [b ^ 0x5A for b in range(64)]


@pytest.mark.parametrize("kwargs, message", [
    (dict(ethernet_type=0x05FF), "ethernet_type must be in 0x0600..0xFFFF, not 1535"),
    (dict(ethernet_type=0x10000), "ethernet_type must be in 0x0600..0xFFFF, not 65536"),
    (dict(mac_address=PTP_MULTICAST), f"mac_address must be a 48-bit unicast address, not {PTP_MULTICAST}"),
    (dict(mac_address=2**48), f"mac_address must be a 48-bit unicast address, not {2**48}"),
    (dict(rx_depth=100), "rx_depth must be a power of two >= 64, not 100"),
    (dict(rx_depth=32), "rx_depth must be a power of two >= 64, not 32"),
    (dict(tx_depth=96), "tx_depth must be a power of two >= 64, not 96"),
    (dict(rx_max=257), "rx_max must be in 1..256 (at most rx_depth), not 257"),
    (dict(rx_max=0), "rx_max must be in 1..256 (at most rx_depth), not 0"),
    (dict(rx_frames=0), "rx_frames must be >= 1, not 0"),
])
def test_mac_bad_parameters_are_refused_with_clear_message(kwargs, message):
    kwargs = dict(dict(ethernet_type=PTP_ETHERTYPE, mac_address=OWN_MAC), **kwargs)
    with pytest.raises(ValueError) as e:
        CPUMACPort(**kwargs)
    assert str(e.value) == message


# CPU MAC port on LiteEth's MAC --------------------------------------------------------------------

class WirePHY(LiteXModule):
    """PHY model for LiteEthMAC (dw=8) whose streams are the bytes on the wire, preamble and FCS
    included. (liteeth.phy.model.LiteEthPHYModel disables the MAC's preamble and FCS handling.)"""
    dw = 8

    def __init__(self):
        self.sink   = stream.Endpoint(eth_phy_description(8))  # MAC -> wire.
        self.source = stream.Endpoint(eth_phy_description(8))  # Wire -> MAC.


class MACTop(LiteXModule):
    """LiteEth MAC in crossbar mode with the CPU MAC port on EtherType 0x88F7 and, as in the SoC,
    an IPv4 user beside it."""
    def __init__(self):
        self.phy = WirePHY()
        self.mac = LiteEthMAC(self.phy, dw=8, interface="crossbar", with_preamble_crc=True)
        self.ptp = CPUMACPort(PTP_ETHERTYPE, OWN_MAC)
        ptp_port = self.mac.crossbar.get_port(PTP_ETHERTYPE, dw=8)
        self.ipv4 = self.mac.crossbar.get_port(0x0800, dw=8)
        self.comb += [
            ptp_port.source.connect(self.ptp.sink),
            self.ptp.source.connect(ptp_port.sink),
            self.ipv4.source.ready.eq(1),
        ]


def wire_frame(dst, src, ethernet_type, payload, bad_fcs=False):
    """Preamble, SFD, header, payload, zero padding to 60 bytes, FCS: what a GMII PHY carries."""
    frame = dst.to_bytes(6, "big") + src.to_bytes(6, "big") + ethernet_type.to_bytes(2, "big") + payload
    return wire(frame, 0xFFFFFFFF if bad_fcs else 0)


def test_mac_port_through_liteeth_mac_with_preamble_and_fcs():
    dut = MACTop()
    rng = random.Random(11)
    sync = bytes(rng.randrange(256) for _ in range(44))        # A PTP Sync is 44 bytes.
    delay_resp = bytes(rng.randrange(256) for _ in range(54))  # A PTP Delay_Resp is 54 bytes.
    to_send = bytes(rng.randrange(256) for _ in range(44))
    wire_in = [
        wire_frame(PTP_MULTICAST, PEER_MAC, PTP_ETHERTYPE, sync),
        wire_frame(PTP_MULTICAST, PEER_MAC, PTP_ETHERTYPE, sync, bad_fcs=True),
        wire_frame(OWN_MAC, PEER_MAC, 0x0800, bytes(46)),         # IPv4: not for this port.
        wire_frame(OWN_MAC, PEER_MAC + 1, PTP_ETHERTYPE, delay_resp),
    ]
    got, wire_out, ipv4 = [], [], []

    def phy_rx():
        for frame in wire_in:
            for i, b in enumerate(frame):
                yield dut.phy.source.valid.eq(1)
                yield dut.phy.source.data.eq(b)
                yield dut.phy.source.last.eq(i == len(frame) - 1)
                yield dut.phy.source.last_be.eq(i == len(frame) - 1)
                yield
            yield dut.phy.source.valid.eq(0)
            for _ in range(12):  # Inter-frame gap.
                yield

    @passive
    def phy_tx():
        yield dut.phy.sink.ready.eq(1)
        while True:
            if (yield dut.phy.sink.valid):
                wire_out.append(((yield dut.phy.sink.data), (yield dut.phy.sink.last)))
            yield

    @passive
    def ipv4_user():
        while True:
            if (yield dut.ipv4.source.valid) and (yield dut.ipv4.source.last):
                ipv4.append((yield dut.ipv4.source.ethernet_type))
            yield

    def cpu():
        port = dut.ptp
        for _ in range(2):
            got.append((yield from cpu_read_frame(port)))
        for _ in range(200):
            yield
        assert (yield port._rx_count.status) == 2
        assert (yield port._rx_errors.status) == 1
        assert (yield port._rx_dropped.status) == 0
        assert not (yield port._rx_ready.status)
        assert (yield dut.mac.core.rx_datapath.crc_errors.status) == 1
        for b in to_send:
            yield from csr_write(port._tx_data, b)
        yield from csr_write(port._tx_mac, PTP_MULTICAST)
        yield from csr_write(port._tx_send)
        while (yield port._tx_busy.status):
            yield
        for _ in range(200):
            yield
        assert (yield port._tx_count.status) == 1

    run_simulation(dut, {"sys": [cpu(), ipv4_user()], "eth_rx": phy_rx(), "eth_tx": phy_tx()},
                   clocks={"sys": 10, "eth_rx": 10, "eth_tx": 10})

    # RX: the payload follows the EtherType and keeps the sender's padding; the FCS is gone.
    assert got[0] == (sync + bytes(2), dict(mac=PEER_MAC, multicast=1, truncated=0))
    assert got[1] == (delay_resp, dict(mac=PEER_MAC + 1, multicast=0, truncated=0))
    assert ipv4 == [0x0800]
    # TX: the MAC adds preamble, header, padding to 60 bytes and FCS around the payload.
    assert bytes(b for b, _ in wire_out) == wire_frame(PTP_MULTICAST, OWN_MAC, PTP_ETHERTYPE, to_send)
    assert [last for _, last in wire_out] == [0] * (len(wire_out) - 1) + [1]


class _SharedMailbox(LiteXModule):
    """The control port's mailbox also serving PTP's 319 and 320 through LiteEth's UDP crossbar,
    as DAQSoC builds it."""
    def __init__(self):
        from liteeth.core.udp import LiteEthUDPCrossbar
        self.crossbar = LiteEthUDPCrossbar(dw=8)
        self.mailbox  = CPUUDPPort(udp_port=7000, extra_ports=(319, 320), rx_depth=512, tx_depth=128)
        self.comb += connect_udp_ports(self.crossbar, self.mailbox)


def test_shared_mailbox_tells_local_ports_apart_and_sends_from_the_chosen_one():
    dut = _SharedMailbox()
    got, sent = [], []
    offered = [(7000, b"control"), (319, b"sync" * 11), (320, b"follow" * 7), (999, b"nobody"), (7000, b"again")]

    def network():
        for dst, payload in offered:
            yield from send_datagram(dut.crossbar.master.sink, payload, port=4000 + dst % 100, dst_port=dst)

    def cpu():
        for _ in range(4):  # The datagram to 999 has no user: the crossbar discards it.
            got.append((yield from cpu_read_datagram(dut.mailbox)))
        for src, payload in [(320, b"announce"), (7000, b"reply"), (319, b"delay_req")]:
            for b in payload:
                yield from csr_write(dut.mailbox._tx_data, b)
            yield from csr_write(dut.mailbox._tx_ip, 0xE0000181)
            yield from csr_write(dut.mailbox._tx_port, src)
            yield from csr_write(dut.mailbox._tx_local_port, src)
            yield from csr_write(dut.mailbox._tx_send)
            while (yield dut.mailbox._tx_busy.status):
                yield
        for _ in range(50):
            yield

    @passive
    def wire():
        src = dut.crossbar.master.source
        yield src.ready.eq(1)
        frame = []
        while True:
            if (yield src.valid):
                frame.append((yield src.data))
                if (yield src.last):
                    sent.append(((yield src.src_port), (yield src.dst_port), bytes(frame)))
                    frame = []
            yield

    run_simulation(dut, [network(), cpu(), wire()])
    assert [(m["local_port"], data) for data, m in got] == [
        (7000, b"control"), (319, b"sync" * 11), (320, b"follow" * 7), (7000, b"again")]
    assert [m["port"] for _, m in got] == [4000, 4019, 4020, 4000]
    assert sent == [(320, 320, b"announce"), (7000, 7000, b"reply"), (319, 319, b"delay_req")]


def test_mailbox_ports_must_be_distinct_and_valid():
    with pytest.raises(ValueError, match="UDP ports must be distinct"):
        CPUUDPPort(udp_port=319, extra_ports=(319, 320))
    with pytest.raises(ValueError, match="udp_port must be in 1..65535"):
        CPUUDPPort(udp_port=7000, extra_ports=(70000,))


@pytest.mark.parametrize("fixed", [False, True])
def test_a_one_word_datagram_waiting_at_the_udp_crossbars_widening_converter_keeps_its_address(fixed):
    """LiteEth's UDP crossbar widens the CPU port's 8-bit datagrams for a 64-bit stack with LiteX's
    StrideConverter, which registers the parameters in every cycle: an 8-byte datagram (one word)
    whose word waits for `ready` took on the address the sink showed next. hold_upconverter_params
    makes the word keep its own; without it this test shows the loss."""
    from liteeth.common import eth_udp_user_description
    from ethdaq.gateware.cpuport import hold_upconverter_params
    conv = stream.StrideConverter(eth_udp_user_description(8), eth_udp_user_description(64))
    if fixed:
        hold_upconverter_params(conv)
    seen = []

    def source():
        for i in range(8):
            yield conv.sink.valid.eq(1)
            yield conv.sink.data.eq(i)
            yield conv.sink.last.eq(i == 7)
            yield conv.sink.ip_address.eq(0xC0A80164)
            yield conv.sink.length.eq(8)
            yield
            while not (yield conv.sink.ready):
                yield
        # The sink shows something else (the next datagram, or an idle FIFO's output).
        yield conv.sink.valid.eq(0)
        yield conv.sink.ip_address.eq(0)
        yield conv.sink.length.eq(0)

    def sink():
        for _ in range(20):   # The stack is busy: the word waits.
            yield
        yield conv.source.ready.eq(1)
        while not (yield conv.source.valid):
            yield
        seen.append(((yield conv.source.ip_address), (yield conv.source.length), (yield conv.source.last)))

    run_simulation(conv, [source(), sink()])
    assert (seen[0] == (0xC0A80164, 8, 1)) is fixed


def test_mac_port_converter_carries_frames_between_8_bits_and_64_whole_with_their_header():
    """MACPortConverter, both ways, against stalling consumers: 64-bit frames of every last-word
    fill come out as their bytes, no more, with their addresses and EtherType; 8-bit frames go in
    as 64-bit words whose `last_be` marks the last byte, each word with its own frame's header."""
    from ethdaq.gateware.cpuport import MACPortConverter
    from stream_helpers import collect_frames
    rng = random.Random(64)
    frames = [(bytes(rng.getrandbits(8) for _ in range(n)), rng.getrandbits(47) << 1, 0x88F7 + k)
              for k, n in enumerate([1, 7, 8, 9, 15, 16, 17, 44, 60, 64, 90])]
    fields = ("target_mac", "sender_mac", "ethernet_type")

    def offer(sink, nb):
        for payload, mac, ethertype in frames:
            words = [payload[i:i + nb] for i in range(0, len(payload), nb)]
            for i, w in enumerate(words):
                yield sink.valid.eq(1)
                yield sink.data.eq(int.from_bytes(w, "little"))
                yield sink.last.eq(i == len(words) - 1)
                yield sink.last_be.eq(1 << (len(w) - 1) if i == len(words) - 1 else 0)
                yield sink.target_mac.eq(mac)
                yield sink.sender_mac.eq(mac ^ 1)
                yield sink.ethernet_type.eq(ethertype)
                yield
                while not (yield sink.ready):
                    yield
            yield sink.valid.eq(0)
            for _ in range(rng.randrange(3)):
                yield

    dut = MACPortConverter(64)
    down, up = [], []
    run_simulation(dut, [
        offer(dut.wide_sink, 8), offer(dut.sink, 1),
        collect_frames(dut.source, down, 4000, count=len(frames), ready=0.7, rng=random.Random(1), fields=fields),
        collect_frames(dut.wide_source, up, 4000, count=len(frames), ready=0.3, rng=random.Random(2), fields=fields),
    ])
    expected = [(p, dict(target_mac=mac, sender_mac=mac ^ 1, ethernet_type=t)) for p, mac, t in frames]
    assert down == expected and up == expected
