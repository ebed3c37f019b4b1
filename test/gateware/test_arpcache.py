"""gateware/arpcache.py: LiteEth's ARP cache, filled with two hosts, answers a lookup of either
with that host's MAC (Migen simulation); LiteEth's cache alone answers the second host's lookup
with the first's MAC."""

import pytest
from liteeth.core.arp import LiteEthARPCache
from migen import run_simulation

from ethdaq.gateware.arpcache import answer_from_found_entry

HOSTS = {0xC0A80164: 0x0200000000A1, 0xC0A80165: 0x0200000000B2}


def lookups(fixed):
    cache = LiteEthARPCache(entries=2, clk_freq=1e6)
    if fixed:
        answer_from_found_entry(cache)
    cache.clear_enable.reset = 0     # No 1 s clear in the middle of the test.
    answers = {}

    def gen():
        for _ in range(10):          # Out of CLEAR.
            yield
        for ip, mac in HOSTS.items():
            yield cache.update.valid.eq(1)
            yield cache.update.ip_address.eq(ip)
            yield cache.update.mac_address.eq(mac)
            yield
            while not (yield cache.update.ready):
                yield
            yield cache.update.valid.eq(0)
            yield
        for ip in list(HOSTS) + list(HOSTS):
            yield cache.request.valid.eq(1)
            yield cache.request.ip_address.eq(ip)
            yield cache.response.ready.eq(1)
            for _ in range(20):
                yield
                if (yield cache.response.valid):
                    answers.setdefault(ip, []).append(((yield cache.response.mac_address), (yield cache.response.error)))
                    break
            yield cache.request.valid.eq(0)
            yield
            yield
    run_simulation(cache, gen())
    return answers


def test_each_host_is_answered_with_its_own_mac():
    answers = lookups(fixed=True)
    assert answers == {ip: [(mac, 0), (mac, 0)] for ip, mac in HOSTS.items()}


def test_liteeths_cache_alone_answers_the_second_host_with_the_firsts_mac():
    """LiteEth's behaviour the fix is for: when this fails, LiteEth has changed (and the fix may
    no longer be needed)."""
    first, second = HOSTS
    answers = lookups(fixed=False)
    assert answers[first] == [(HOSTS[first], 0)] * 2
    assert answers[second] == [(HOSTS[first], 0)] * 2


def test_a_cache_searched_otherwise_is_a_one_line_error():
    cache = LiteEthARPCache(entries=2, clk_freq=1e6)
    cache.fsm.actions["MEM_SEARCH"] = []
    with pytest.raises(ValueError, match="no longer searches its cache this way"):
        answer_from_found_entry(cache)
