"""Destination MAC resolver of the data path (gateware/resolver.py), in Migen simulation: what it
asks, when it gives up, what it takes (only the answer to its own request), what it refuses and
counts, how it refreshes, and the addresses it maps without asking."""

from migen import run_simulation

from ethdaq.gateware.resolver import ARPResolver, MODE_ARP, MODE_FIXED

CLK = 1e6  # 1 MHz: timeout 0.1 ms = 100 cycles, retry interval 1 ms = 1000, refresh 3 ms = 3000.
HOST_IP, HOST_MAC = 0xC0A84D01, 0x02AABBCCDD01
EVIL_MAC = 0x02EEEEEEEE66
NEW_MAC  = 0x02AABBCCDD02


def make():
    return ARPResolver(CLK, timeout=100e-6, tries=3, retry_interval=1e-3, refresh=3e-3)


def run(dut, body, running=0):
    out = {}
    def gen():
        yield dut.active.eq(1)
        yield dut.running.eq(running)
        yield dut.mode.eq(MODE_ARP)
        yield from body(out)
    run_simulation(dut, gen())
    return out


def count_requests(dut, cycles, trace):
    for _ in range(cycles):
        yield
        if (yield dut.request):
            trace.append(1)


def request_times(dut, cycles):
    """The cycles (from now) at which the resolver asks."""
    times = []
    for t in range(cycles):
        yield
        if (yield dut.request):
            times.append(t)
    return times


def arp(dut, ip, mac, reply):
    """One frame on the snoop port, as LiteEth's ARP receiver presents it (one cycle), then a few
    idle cycles for it to act."""
    yield dut.arp_ip.eq(ip)
    yield dut.arp_mac.eq(mac)
    yield dut.arp_reply.eq(reply)
    yield dut.arp_valid.eq(1)
    yield
    yield dut.arp_valid.eq(0)
    yield dut.arp_reply.eq(0)
    for _ in range(3):
        yield


def state(dut):
    return dict(valid=(yield dut.valid), mac=(yield dut.mac), unreachable=(yield dut.unreachable),
                changes=(yield dut.changes), refused=(yield dut.refused), timeouts=(yield dut.timeouts),
                requests=(yield dut.requests))


def resolve_now(dut, mac=HOST_MAC):
    """Wait for the resolver's request and answer it."""
    while not (yield dut.request):
        yield
    yield from arp(dut, HOST_IP, mac, reply=1)


def test_three_requests_then_unreachable_then_slow_retries():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        out["times"] = yield from request_times(dut, 350)
        out["early"] = yield from state(dut)
        out["later"] = yield from request_times(dut, 2100)
    out = run(dut, body)
    # Three requests one timeout (100 cycles) apart, unanswered: unreachable; from then on one
    # request per retry interval (1000 cycles).
    t = out["times"]
    assert len(t) == 3 and all(99 <= b - a <= 102 for a, b in zip(t, t[1:]))
    assert out["early"]["timeouts"] == 3 and out["early"]["unreachable"] == 1 and out["early"]["valid"] == 0
    later = [350 + x for x in out["later"]]
    gaps = [b - a for a, b in zip([t[-1]] + later, later)]
    assert len(later) == 2 and all(999 <= g <= 1002 for g in gaps), gaps


def test_the_answer_to_its_own_request_is_taken_and_a_new_destination_is_resolved_again():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        while not (yield dut.request):
            yield
        # A reply from another IP is nobody's concern; the destination's answer is taken.
        yield from arp(dut, HOST_IP + 1, EVIL_MAC, reply=1)
        out["other_ip"] = yield from state(dut)
        yield from arp(dut, HOST_IP, HOST_MAC, reply=1)
        out["answered"] = yield from state(dut)
        out["requests_after"] = yield from request_times(dut, 500)
        yield dut.ip.eq(HOST_IP + 2)
        yield
        yield
        out["new_ip"] = yield from state(dut)
    out = run(dut, body)
    assert out["other_ip"]["valid"] == 0 and out["other_ip"]["refused"] == 0
    assert out["answered"]["valid"] == 1 and out["answered"]["mac"] == HOST_MAC
    assert out["answered"]["changes"] == 0 and out["answered"]["refused"] == 0
    assert out["requests_after"] == []
    assert out["new_ip"]["valid"] == 0


def test_unsolicited_replies_and_requests_never_move_the_stream_and_are_counted():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        # Before anything is resolved, between our first request's timeout and the next request:
        # a request claiming the IP.
        yield from request_times(dut, 101)
        yield from arp(dut, HOST_IP, EVIL_MAC, reply=0)
        out["before"] = yield from state(dut)
        yield from resolve_now(dut)
        out["resolved"] = yield from state(dut)
        # Resolved: unsolicited replies (unicast or broadcast look the same here), requests from
        # the destination's IP with another MAC, again and again.
        for _ in range(3):
            yield from arp(dut, HOST_IP, EVIL_MAC, reply=1)
            yield from arp(dut, HOST_IP, EVIL_MAC, reply=0)
        out["spoofed"] = yield from state(dut)
        # The real host asking for us, or repeating its answer: nothing refused, nothing changed.
        yield from arp(dut, HOST_IP, HOST_MAC, reply=0)
        yield from arp(dut, HOST_IP, HOST_MAC, reply=1)
        out["host"] = yield from state(dut)
    out = run(dut, body)
    assert out["before"]["valid"] == 0 and out["before"]["refused"] == 1
    assert out["resolved"]["valid"] == 1 and out["resolved"]["mac"] == HOST_MAC and out["resolved"]["refused"] == 1
    assert out["spoofed"]["mac"] == HOST_MAC and out["spoofed"]["valid"] == 1
    assert out["spoofed"]["refused"] == 7 and out["spoofed"]["changes"] == 0
    assert out["host"]["mac"] == HOST_MAC and out["host"]["refused"] == 7 and out["host"]["changes"] == 0


def test_a_request_claiming_the_ip_is_refused_even_while_our_own_is_outstanding():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        while not (yield dut.request):
            yield
        yield from arp(dut, HOST_IP, EVIL_MAC, reply=0)
        out["request"] = yield from state(dut)
        # The first answer closes our request: a second one, racing or late, is refused.
        yield from arp(dut, HOST_IP, HOST_MAC, reply=1)
        yield from arp(dut, HOST_IP, EVIL_MAC, reply=1)
        out["second"] = yield from state(dut)
    out = run(dut, body)
    assert out["request"]["valid"] == 0 and out["request"]["refused"] == 1
    assert out["second"]["mac"] == HOST_MAC and out["second"]["refused"] == 2 and out["second"]["changes"] == 0


def test_an_answer_after_its_request_timed_out_is_refused_the_next_requests_answer_taken():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        yield from request_times(dut, 350)  # Three requests unanswered: unreachable, retries 1000 apart.
        yield from arp(dut, HOST_IP, HOST_MAC, reply=1)  # Late: no request of ours is out.
        out["late"] = yield from state(dut)
        yield from resolve_now(dut)
        out["retry"] = yield from state(dut)
    out = run(dut, body)
    assert out["late"]["valid"] == 0 and out["late"]["unreachable"] == 1 and out["late"]["refused"] == 1
    assert out["retry"]["valid"] == 1 and out["retry"]["mac"] == HOST_MAC and out["retry"]["unreachable"] == 0
    assert out["retry"]["requests"] == 4


def test_refresh_during_a_run_keeps_the_mac_until_answered_and_counts_a_change():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        yield from resolve_now(dut)
        # The refresh: a request 3000 cycles after the answer; the MAC stays in use meanwhile.
        t = 0
        while not (yield dut.request):
            yield
            t += 1
        out["refresh_at"] = t
        yield
        out["waiting"] = yield from state(dut)
        # Answered by the same MAC: no change.
        yield from arp(dut, HOST_IP, HOST_MAC, reply=1)
        out["same"] = yield from state(dut)
        # The next refresh finds the host at another MAC (a new NIC): the stream moves, counted.
        yield from resolve_now(dut, NEW_MAC)
        out["moved"] = yield from state(dut)
        # The next gets no answer at all: three timeouts, the MAC in use stays, not unreachable.
        t = yield from request_times(dut, 3400)
        out["unanswered"] = t
        out["kept"] = yield from state(dut)
    out = run(dut, body, running=1)
    assert 2990 <= out["refresh_at"] <= 3005
    w = out["waiting"]
    assert w["valid"] == 1 and w["mac"] == HOST_MAC
    assert out["same"]["mac"] == HOST_MAC and out["same"]["changes"] == 0
    m = out["moved"]
    assert m["mac"] == NEW_MAC and m["valid"] == 1 and m["changes"] == 1 and m["refused"] == 0
    u = out["unanswered"]
    assert len(u) == 3 and u[0] > 2900 and u[2] - u[0] < 210
    k = out["kept"]
    assert k["valid"] == 1 and k["mac"] == NEW_MAC and k["unreachable"] == 0 and k["timeouts"] == 3


def test_no_refresh_while_stopped_and_resolve_forgets():
    dut = make()

    def body(out):
        yield dut.ip.eq(HOST_IP)
        yield from resolve_now(dut)
        out["idle"] = yield from request_times(dut, 7000)
        out["held"] = yield from state(dut)
        yield dut.resolve.eq(1)
        yield
        yield dut.resolve.eq(0)
        yield
        yield
        out["forgot"] = yield from state(dut)
        yield from resolve_now(dut, NEW_MAC)
        out["again"] = yield from state(dut)
    out = run(dut, body, running=0)
    assert out["idle"] == [] and out["held"]["valid"] == 1 and out["held"]["mac"] == HOST_MAC
    assert out["forgot"]["valid"] == 0
    # Resolved afresh on request, not a change under a run.
    assert out["again"]["mac"] == NEW_MAC and out["again"]["changes"] == 0


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
            # Claims of the IP change nothing and refuse nothing: ARP is not consulted.
            yield from arp(dut, ip, EVIL_MAC, reply=1)
            out.setdefault("seen", []).append(((yield dut.valid), (yield dut.mac), len(trace),
                                               (yield dut.unreachable), (yield dut.refused)))
    out = run(dut, body, running=1)
    assert out["seen"] == [(1, 0x020000000099, 0, 0, 0), (1, 0xFFFFFFFFFFFF, 0, 0, 0), (1, 0x01005E01020A, 0, 0, 0)]


def test_idle_resolver_sends_nothing():
    dut = make()

    def gen():
        yield dut.ip.eq(HOST_IP)
        trace = []
        yield from count_requests(dut, 500, trace)
        assert trace == []
    run_simulation(dut, gen())
