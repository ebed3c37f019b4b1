"""Destination MAC resolver of the data path (gateware/resolver.py), in Migen simulation: what it
asks, when it gives up, what it learns, and the addresses it maps without asking."""

from migen import run_simulation

from ethdaq.gateware.resolver import ARPResolver, MODE_ARP, MODE_FIXED

CLK = 1e6  # 1 MHz: timeout 0.1 ms = 100 cycles, retry interval 1 ms = 1000 cycles.
HOST_IP, HOST_MAC = 0xC0A84D01, 0x02AABBCCDD01


def make():
    return ARPResolver(CLK, timeout=100e-6, tries=3, retry_interval=1e-3)


def run(dut, body):
    out = {}
    def gen():
        yield dut.active.eq(1)
        yield dut.mode.eq(MODE_ARP)
        yield from body(out)
    run_simulation(dut, gen())
    return out


def count_requests(dut, cycles, trace):
    for _ in range(cycles):
        yield
        if (yield dut.request):
            trace.append(1)


def test_three_requests_then_unreachable_then_slow_retries():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        trace = []
        yield from count_requests(dut, 350, trace)
        out["early"] = len(trace)
        out["unreachable"] = (yield dut.unreachable)
        out["valid"] = (yield dut.valid)
        out["timeouts"] = (yield dut.timeouts)
        yield from count_requests(dut, 2100, trace)
        out["later"] = len(trace)
    out = run(dut, body)
    # Three requests 100 cycles apart, unanswered: unreachable, and from then on one request per
    # retry interval (1000 cycles), the first at once.
    assert out["timeouts"] == 3 and out["early"] == 4
    assert out["unreachable"] == 1 and out["valid"] == 0
    assert out["later"] == 6


def test_reply_is_learned_and_a_new_destination_is_resolved_again():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        for _ in range(20):
            yield
        # A reply from someone else is ignored; the destination's own is learned.
        for ip, mac in ((HOST_IP + 1, 0x02FFFFFFFF00), (HOST_IP, HOST_MAC)):
            yield dut.arp_ip.eq(ip)
            yield dut.arp_mac.eq(mac)
            yield dut.arp_valid.eq(1)
            yield
            yield dut.arp_valid.eq(0)
            yield
            yield
            out.setdefault("valid", []).append((yield dut.valid))
        out["mac"] = (yield dut.mac)
        trace = []
        yield from count_requests(dut, 500, trace)
        out["requests_after"] = len(trace)
        yield dut.ip.eq(HOST_IP + 2)
        yield
        yield
        out["valid_new"] = (yield dut.valid)
    out = run(dut, body)
    assert out["valid"] == [0, 1]
    assert out["mac"] == HOST_MAC
    assert out["requests_after"] == 0
    assert out["valid_new"] == 0


def test_fixed_broadcast_and_multicast_need_no_arp():
    dut = make()

    def body(out):
        for mode, ip, fixed in ((MODE_FIXED, HOST_IP, 0x020000000099), (MODE_ARP, 0xFFFFFFFF, 0),
                                (MODE_ARP, 0xEF01020A, 0)):  # 239.1.2.10
            yield dut.mode.eq(mode)
            yield dut.ip.eq(ip)
            yield dut.fixed_mac.eq(fixed)
            trace = []
            yield from count_requests(dut, 300, trace)
            out.setdefault("seen", []).append(((yield dut.valid), (yield dut.mac), len(trace), (yield dut.unreachable)))
    out = run(dut, body)
    assert out["seen"] == [(1, 0x020000000099, 0, 0), (1, 0xFFFFFFFFFFFF, 0, 0), (1, 0x01005E01020A, 0, 0)]


def test_idle_resolver_sends_nothing():
    dut = make()

    def gen():
        yield dut.ip.eq(HOST_IP)
        trace = []
        yield from count_requests(dut, 500, trace)
        assert trace == []
    run_simulation(dut, gen())
