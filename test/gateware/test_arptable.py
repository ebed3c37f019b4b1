"""gateware/arptable.py: the ARP table LiteEth's IPv4 transmitter asks for MACs (Migen simulation).

Clock 1 kHz: a request interval is 100 cycles and the cache's idle clear 1000. The ARP transmitter
is a model that takes a frame 20 cycles after it is offered (LiteEth's takes it at its last byte)."""

import pytest
from liteeth.core.arp import LiteEthARPCache
from migen import run_simulation
from migen.sim import passive

import liteeth.core.arp as liteeth_arp
from ethdaq.gateware.arptable import ARPTable, MAX_REQUESTS, arp_tables

CLK = 1000
HOSTS = {0xC0A80164: 0x0200000000A1, 0xC0A80165: 0x0200000000B2, 0xC0A80166: 0x0200000000C3}
A, B, C = HOSTS
FRAME_CYCLES = 20


class Bench:
    """Drives an ARPTable: lookups as LiteEth's IPv4 transmitter makes them, ARP frames as its
    receiver delivers them; records every frame the table sends, with its cycle."""
    def __init__(self):
        self.dut = ARPTable(clk_freq=CLK)
        self.cycle = 0
        self.sent = []          # (cycle, "request"/"reply", ip, mac)
        self.rx = []            # (cycle, kind, ip, mac) to deliver

    @passive
    def transmitter(self):
        src = self.dut.source
        while True:
            if (yield src.valid):
                for _ in range(FRAME_CYCLES):
                    yield
                kind = "reply" if (yield src.reply) else "request" if (yield src.request) else "?"
                self.sent.append((self.cycle, kind, (yield src.ip_address), (yield src.mac_address)))
                yield src.ready.eq(1)
                yield
                yield src.ready.eq(0)
            yield

    @passive
    def receiver(self):
        snk = self.dut.sink
        while True:
            due = [f for f in self.rx if f[0] == self.cycle]
            if due:
                _, kind, ip, mac = due[0]
                yield snk.valid.eq(1)
                yield snk.reply.eq(kind == "reply")
                yield snk.request.eq(kind == "request")
                yield snk.ip_address.eq(ip)
                yield snk.mac_address.eq(mac)
            else:
                yield snk.valid.eq(0)
            yield

    @passive
    def clock(self):
        while True:
            yield
            self.cycle += 1

    def lookup(self, ip, answer_after=None, answer_mac=None, timeout=2000):
        """One lookup of `ip`, as LiteEthIPTX makes it; with `answer_after`, the network answers
        each request that many cycles after it has gone. Returns (mac, failed)."""
        req, rsp = self.dut.request, self.dut.response
        yield req.valid.eq(1)
        yield req.ip_address.eq(ip)
        yield
        while not (yield req.ready):
            yield
        yield req.valid.eq(0)
        answered = len(self.sent)
        for _ in range(timeout):
            if answer_after is not None:
                for cyc, kind, rip, _ in self.sent[answered:]:
                    if kind == "request" and rip == ip:
                        self.rx.append((cyc + answer_after, "reply", ip, answer_mac or HOSTS[ip]))
                answered = len(self.sent)
            if (yield rsp.valid):
                result = ((yield rsp.mac_address), (yield rsp.failed))
                yield rsp.ready.eq(1)
                yield
                yield rsp.ready.eq(0)
                return result
            yield
        raise AssertionError(f"no response to the lookup of {ip:#x}")

    def wait(self, n):
        for _ in range(n):
            yield

    def run(self, script):
        run_simulation(self.dut, [script(), self.transmitter(), self.receiver(), self.clock()])

    def requests(self, ip=None):
        return [s for s in self.sent if s[1] == "request" and (ip is None or s[2] == ip)]


def test_a_miss_asks_once_and_the_answer_is_cached():
    b, out = Bench(), []

    def script():
        out.append((yield from b.lookup(A, answer_after=5)))
        out.append((yield from b.lookup(A)))
    b.run(script)
    assert out == [(HOSTS[A], 0), (HOSTS[A], 0)]
    assert [s[2] for s in b.requests()] == [A]


def test_two_hosts_are_each_answered_with_their_own_mac_and_a_third_replaces_the_older():
    b, out = Bench(), []

    def script():
        for ip in (A, B):
            out.append((yield from b.lookup(ip, answer_after=5)))
        for ip in (B, A, B, A):
            out.append((yield from b.lookup(ip)))
        out.append((yield from b.lookup(C, answer_after=5)))   # Replaces A's entry (the older).
        out.append((yield from b.lookup(B)))
        out.append((yield from b.lookup(A, answer_after=5)))   # Asked again.
    b.run(script)
    assert out == [(HOSTS[ip], 0) for ip in (A, B, B, A, B, A, C, B, A)]
    assert [s[2] for s in b.requests()] == [A, B, C, A]


def test_liteeths_cache_answers_the_second_host_with_the_firsts_mac():
    """Why the table keeps its own entries: LiteEth's cache (2 entries) answers a lookup that
    matches its second entry from its first. When this fails, LiteEth has changed."""
    cache = LiteEthARPCache(entries=2, clk_freq=1e6)
    cache.clear_enable.reset = 0
    answers = []

    def gen():
        yield from (None for _ in range(10))
        for ip in (A, B):
            yield cache.update.valid.eq(1)
            yield cache.update.ip_address.eq(ip)
            yield cache.update.mac_address.eq(HOSTS[ip])
            yield
            while not (yield cache.update.ready):
                yield
            yield cache.update.valid.eq(0)
            yield
        yield cache.request.valid.eq(1)
        yield cache.request.ip_address.eq(B)
        yield cache.response.ready.eq(1)
        for _ in range(20):
            yield
            if (yield cache.response.valid):
                answers.append(((yield cache.response.mac_address), (yield cache.response.error)))
                break
    run_simulation(cache, gen())
    assert answers == [(HOSTS[A], 0)]


def test_an_unanswered_lookup_fails_after_its_requests_a_request_interval_apart():
    b, out = Bench(), []

    def script():
        out.append((yield from b.lookup(A)))
        out.append((yield from b.lookup(A, answer_after=5)))   # Asked anew, answered.
    b.run(script)
    assert out[0][1] == 1 and out[1] == (HOSTS[A], 0)
    reqs = b.requests(A)
    assert len(reqs) == MAX_REQUESTS + 1
    gaps = [t1 - t0 for (t0, *_), (t1, *_) in zip(reqs[:MAX_REQUESTS], reqs[1:MAX_REQUESTS])]
    assert all(100 <= g <= 100 + FRAME_CYCLES + 5 for g in gaps), gaps


def test_only_the_answer_to_the_pending_lookup_is_cached():
    b, out = Bench(), []

    def script():
        b.rx.append((b.cycle + 2, "reply", B, HOSTS[B]))      # Unsolicited: not cached.
        yield from b.wait(5)
        # A reply for another address while A's lookup waits is not its answer: not cached.
        b.rx.append((b.cycle + 10, "reply", C, HOSTS[C]))
        out.append((yield from b.lookup(A, answer_after=40)))
        out.append((yield from b.lookup(B, answer_after=5)))
        out.append((yield from b.lookup(C, answer_after=5)))
    b.run(script)
    assert out == [(HOSTS[A], 0), (HOSTS[B], 0), (HOSTS[C], 0)]
    assert [s[2] for s in b.requests()] == [A, B, C]


def test_an_arp_request_for_the_board_gets_one_reply_with_the_askers_addresses():
    b = Bench()

    def script():
        b.rx.append((b.cycle + 2, "request", B, HOSTS[B]))
        yield from b.wait(60)
    b.run(script)
    assert [s[1:] for s in b.sent] == [("reply", B, HOSTS[B])]


def test_arp_frames_are_taken_while_the_table_is_busy():
    """An ARP request that arrives while the table sends a request of its own is answered after
    it, and the answer that arrives while the table sends that reply is cached (LiteEth's table
    drops both)."""
    b, out = Bench(), []

    def script():
        yield b.dut.request.valid.eq(1)
        yield b.dut.request.ip_address.eq(A)
        yield
        yield b.dut.request.valid.eq(0)
        b.rx.append((b.cycle + 5, "request", B, HOSTS[B]))      # While A's request is on its way.
        yield from b.wait(FRAME_CYCLES + 8)
        b.rx.append((b.cycle + 3, "reply", A, HOSTS[A]))        # While the reply to B is on its way.
        while not (yield b.dut.response.valid):
            yield
        out.append(((yield b.dut.response.mac_address), (yield b.dut.response.failed)))
        yield b.dut.response.ready.eq(1)
        yield
        yield b.dut.response.ready.eq(0)
        yield from b.wait(5)
    b.run(script)
    assert [s[1:3] for s in b.sent] == [("request", A), ("reply", B)]
    assert out == [(HOSTS[A], 0)]


def test_the_cache_is_cleared_after_a_second_without_lookups_only():
    b, out = Bench(), []

    def script():
        out.append((yield from b.lookup(A, answer_after=5)))
        for _ in range(4):                      # Lookups 600 cycles apart: kept.
            yield from b.wait(600)
            out.append((yield from b.lookup(A)))
        yield from b.wait(1100)                 # A second idle: cleared.
        out.append((yield from b.lookup(A, answer_after=5)))
    b.run(script)
    assert out == [(HOSTS[A], 0)]*6
    assert len(b.requests(A)) == 2


def test_liteeths_arp_builds_the_table_inside_arp_tables_only():
    from liteeth.core.arp import LiteEthARP

    class MAC:
        class crossbar:
            @staticmethod
            def get_port(ethernet_type, dw):
                from litex.soc.interconnect import stream
                from liteeth.common import eth_mac_description

                class Port:
                    sink, source = stream.Endpoint(eth_mac_description(dw)), stream.Endpoint(eth_mac_description(dw))
                return Port()
    with arp_tables():
        arp = LiteEthARP(MAC, 0x10E2D5000000, 0xC0A80132, clk_freq=CLK)
    assert isinstance(arp.table, ARPTable)
    assert not isinstance(LiteEthARP(MAC, 0x10E2D5000000, 0xC0A80132, clk_freq=CLK).table, ARPTable)


def test_a_liteeth_that_builds_its_table_otherwise_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(liteeth_arp, "LiteEthARPTable", object)
    with pytest.raises(ValueError, match="no longer builds its ARP table this way"):
        with arp_tables():
            pass
