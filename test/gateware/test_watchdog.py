"""Watchdog (gateware/watchdog.py), driven through LiteX's CSR bank as the firmware drives it, with
its `reset` output wired to the domain's reset as the SoC's CRG wires it: it resets when not fed
and when asked to, lasts RESET_CYCLES, and what must survive the reset (why, how often, the
retained words) does."""

import pytest

from migen import ClockDomain, run_simulation

from litex.gen import LiteXModule
from litex.soc.interconnect import csr_bus

from ethdaq.gateware.watchdog import (CAUSE_POWER_ON, CAUSE_REBOOT, CAUSE_WATCHDOG, RESET_CYCLES,
                                      Watchdog)

TIMEOUT = 200
# CSR addresses in declaration order (one 32-bit word each; retain is two, most significant first).
CONTROL, TIMEOUT_REG, REMAINING, REBOOT, CAUSE, BOOTS, WDT_RESETS, RETAIN_HI, RETAIN_LO = range(9)
ENABLE, FEED = 1, 2


class Soc(LiteXModule):
    def __init__(self):
        self.wdt = Watchdog(TIMEOUT)
        self.bank = csr_bus.CSRBank(self.wdt.get_csrs(), address=0, paging=0x800, ordering="big",
                                    bus=csr_bus.Interface(data_width=32, address_width=14))
        self.cd_sys = ClockDomain()
        self.comb += self.cd_sys.rst.eq(self.wdt.reset)


class Bench:
    """Cycle-counted CSR accesses and a record of every cycle `reset` was high."""
    def __init__(self, soc):
        self.soc = soc
        self.cycle = 0
        self.reset_cycles = []

    def tick(self):
        if (yield self.soc.wdt.reset):
            self.reset_cycles.append(self.cycle)
        yield
        self.cycle += 1

    def write(self, adr, dat):
        bus = self.soc.bank.bus
        yield bus.adr.eq(adr)
        yield bus.we.eq(1)
        yield bus.dat_w.eq(dat)
        yield from self.tick()
        yield bus.we.eq(0)
        yield from self.tick()

    def read(self, adr):
        bus = self.soc.bank.bus
        yield bus.adr.eq(adr)
        yield from self.tick()
        yield from self.tick()
        return (yield bus.dat_r)

    def read_all(self, addresses):
        values = []
        for adr in addresses:
            values.append((yield from self.read(adr)))
        return values

    def idle(self, n):
        for _ in range(n):
            yield from self.tick()


def run(body):
    soc = Soc()
    bench = Bench(soc)
    out = {}
    run_simulation(soc, body(bench, out))
    return bench, out


def test_fed_watchdog_never_resets_and_starved_one_resets_once():
    def body(b, out):
        out["power_on"] = (yield from b.read_all((CAUSE, BOOTS, WDT_RESETS)))
        yield from b.write(RETAIN_HI, 0x01234567)
        yield from b.write(RETAIN_LO, 0x89ABCDEF)
        yield from b.write(CONTROL, ENABLE)
        for _ in range(20):  # 20 x 150 cycles: far past one timeout, fed in time every time.
            yield from b.idle(146)
            yield from b.write(CONTROL, ENABLE | FEED)
        out["fed_resets"] = list(b.reset_cycles)
        out["remaining"] = yield from b.read(REMAINING)
        fed_at = b.cycle
        yield from b.idle(TIMEOUT + 2 * RESET_CYCLES + 20)
        out["fed_at"] = fed_at
        out["after"] = (yield from b.read_all((CAUSE, BOOTS, WDT_RESETS, RETAIN_HI, RETAIN_LO, CONTROL, TIMEOUT_REG)))
        yield from b.idle(3 * TIMEOUT)  # Not enabled again: no second reset.

    b, out = run(body)
    assert out["power_on"] == [CAUSE_POWER_ON, 0, 0]
    assert out["fed_resets"] == []
    assert 0 < out["remaining"] <= TIMEOUT
    # One reset, RESET_CYCLES long, a timeout after the last feed (plus the CSR write's latency).
    assert len(b.reset_cycles) == RESET_CYCLES
    assert b.reset_cycles == list(range(b.reset_cycles[0], b.reset_cycles[0] + RESET_CYCLES))
    assert TIMEOUT <= b.reset_cycles[0] - out["fed_at"] <= TIMEOUT + 4
    cause, boots, wdt, hi, lo, control, timeout = out["after"]
    assert (cause, boots, wdt) == (CAUSE_WATCHDOG, 1, 1)
    assert (hi, lo) == (0x01234567, 0x89ABCDEF)  # Retained across the reset.
    assert (control, timeout) == (0, TIMEOUT)    # The rest was reset: disabled, default timeout.


def test_reboot_resets_at_once_and_is_counted_apart_from_watchdog_resets():
    def body(b, out):
        yield from b.write(TIMEOUT_REG, 50)
        yield from b.write(CONTROL, ENABLE)
        yield from b.idle(80)  # Starved: a watchdog reset.
        out["after_wdt"] = (yield from b.read_all((CAUSE, BOOTS, WDT_RESETS)))
        n = len(b.reset_cycles)
        asked = b.cycle
        yield from b.write(REBOOT, 1)
        yield from b.idle(2 * RESET_CYCLES)
        out["asked"] = asked
        out["first"] = b.reset_cycles[n]
        out["after_reboot"] = (yield from b.read_all((CAUSE, BOOTS, WDT_RESETS)))

    b, out = run(body)
    assert out["after_wdt"] == [CAUSE_WATCHDOG, 1, 1]
    assert out["after_reboot"] == [CAUSE_REBOOT, 2, 1]
    assert out["first"] - out["asked"] <= 3  # The CSR write, its strobe, the hold register.
    assert len(b.reset_cycles) == 2 * RESET_CYCLES


def test_disabled_watchdog_never_resets():
    def body(b, out):
        yield from b.idle(3 * TIMEOUT)
        out["state"] = (yield from b.read_all((CAUSE, BOOTS, REMAINING)))

    b, out = run(body)
    assert b.reset_cycles == []
    assert out["state"] == [CAUSE_POWER_ON, 0, TIMEOUT]


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout_cycles": 0}, "watchdog timeout must be 1 to 2**32-1 cycles, not 0"),
    ({"timeout_cycles": 10, "reset_cycles": 0}, "watchdog reset must last 1 to 255 cycles, not 0"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError) as e:
        Watchdog(**kwargs)
    assert str(e.value) == message
