"""gateware/bustimeout.py: the bus timeout answers from a flip-flop, one cycle after LiteX's
wishbone.Timeout would, with the same answer; accesses that are acknowledged are untouched.
LiteX's own Timeout, in the same interconnect, is the reference."""

import pytest

from migen import *

from litex.soc.interconnect import wishbone

from ethdaq.gateware.bustimeout import RegisteredTimeout, registered_timeout, use_registered_timeout

CYCLES = 9


class Bench(Module):
    """One master, an SRAM at words 0..15; everything else is unmapped."""
    def __init__(self, registered):
        self.master = wishbone.Interface()
        self.sram   = wishbone.SRAM(64, init=[0x1000 + i for i in range(16)])
        slaves = [(lambda a: a[4:] == 0, self.sram.bus)]
        if registered:
            with registered_timeout():
                self.submodules.ic = wishbone.InterconnectShared([self.master], slaves, timeout_cycles=CYCLES)
        else:
            self.submodules.ic = wishbone.InterconnectShared([self.master], slaves, timeout_cycles=CYCLES)
        self.submodules += self.sram


def access(registered, adr, we=False, dat_w=0):
    """(cycles from the strobe to ack, dat_r at ack, error cycles seen)."""
    bench = Bench(registered)
    m, out = bench.master, {}

    def gen():
        yield m.adr.eq(adr); yield m.we.eq(we); yield m.dat_w.eq(dat_w); yield m.sel.eq(0xf)
        yield m.cyc.eq(1); yield m.stb.eq(1)
        errors = 0
        for n in range(3*CYCLES):
            yield
            errors += (yield bench.ic.timeout.error)
            if (yield m.ack):
                out["at"], out["dat_r"] = n, (yield m.dat_r)
                break
        yield m.cyc.eq(0); yield m.stb.eq(0)
        for _ in range(CYCLES + 3):  # No second answer after the access ends.
            yield
            errors += (yield bench.ic.timeout.error)
            assert not (yield m.ack)
        out["errors"] = errors
    run_simulation(bench, gen())
    return out["at"], out["dat_r"], out["errors"]


def test_the_interconnect_builds_the_registered_timeout_only_inside_the_block():
    assert isinstance(Bench(True).ic.timeout, RegisteredTimeout)
    assert type(Bench(False).ic.timeout) is wishbone.Timeout


def test_an_unanswered_access_gets_litex_s_answer_one_cycle_later():
    at_ref, dat_ref, err_ref = access(False, 0x100)
    at, dat, err = access(True, 0x100)
    assert (dat, err) == (dat_ref, err_ref) == (0xffffffff, 1)
    assert at == at_ref + 1 and at_ref >= CYCLES


@pytest.mark.parametrize("adr", [0, 5, 15])
def test_answered_accesses_are_untouched(adr):
    assert access(True, adr) == access(False, adr)
    assert access(True, adr)[1:] == (0x1000 + adr, 0)


def test_a_write_to_nowhere_ends_too():
    assert access(True, 0x200, we=True, dat_w=0x12345678)[2] == 1


def test_cycles_are_checked():
    with pytest.raises(ValueError, match="at least 1 cycle"):
        RegisteredTimeout(wishbone.Interface(), 0)


def test_the_daqsoc_bus_uses_it_and_counts_its_errors():
    """DAQSoC's shared interconnect has the registered timeout, and its answers reach LiteX's
    bus error signal (ctrl.bus_error), which the SoC's event counters count (EVENT_BUS_ERRORS)."""
    from migen.fhdl.structure import _Assign
    from ethdaq.boards import get_board
    from ethdaq.soc.daqsoc import DAQSoC
    soc = DAQSoC(get_board("sim"))
    soc.finalize()
    timeout = soc.bus._interconnect.timeout
    assert isinstance(timeout, RegisteredTimeout)
    assert any(isinstance(st, _Assign) and st.l is soc.ctrl.bus_error and st.r is timeout.error
               for st in soc._fragment.comb)
    assert soc.events.names[0] == "bus_errors" and soc.constants["EVENT_BUS_ERRORS"] == 0


def test_litex_building_another_timeout_is_an_error(monkeypatch):
    """Should a LiteX release stop looking wishbone.Timeout up by name, the SoC build stops
    rather than silently keeping the slow timeout."""
    class Handler:
        timeout = 1e6
        def do_finalize(self):
            self._interconnect = wishbone.InterconnectShared([wishbone.Interface()],
                [(lambda a: 1, wishbone.Interface()), (lambda a: 0, wishbone.Interface())])
    import ethdaq.gateware.bustimeout as bt
    monkeypatch.setattr(bt, "registered_timeout", lambda: __import__("contextlib").nullcontext())
    handler = Handler()
    use_registered_timeout(handler)
    with pytest.raises(TypeError, match="no longer builds wishbone.Timeout"):
        handler.do_finalize()
