"""gateware/globalreset.py: on ECP5 boards each clock domain's reset leaves its synchroniser
through a DCCA (the global clock buffer, whose output nextpnr routes on the global network), and
the synchroniser still releases it on the domain's clock; other platforms are untouched."""

from migen import ClockDomain, Instance, Module, Signal
from migen.genlib.resetsync import AsyncResetSynchronizer

from ethdaq.boards import get_board
from ethdaq.gateware.globalreset import promote_resets
from ethdaq.soc.daqsoc import DAQSoC
from ethdaq.soc.socconfig import SoCConfig


class CRG(Module):
    def __init__(self):
        self.clock_domains.cd_a = ClockDomain()
        self.clock_domains.cd_b = ClockDomain()
        self.trigger = Signal()
        self.specials += [AsyncResetSynchronizer(self.cd_a, self.trigger),
                          AsyncResetSynchronizer(self.cd_b, ~self.trigger)]


def instances(module, of):
    return [s for s in module._fragment.specials if isinstance(s, Instance) and s.of == of]


def port(instance, name):
    return next(item.expr for item in instance.items if getattr(item, "name", None) == name)


def test_each_synchronised_reset_goes_through_its_own_dcca():
    crg = CRG()
    assert promote_resets(crg) == ["a", "b"]
    dccas = {port(d, "CLKO"): d for d in instances(crg, "DCCA")}
    assert set(dccas) == {crg.cd_a.rst, crg.cd_b.rst}
    syncs = [s for s in crg._fragment.specials if isinstance(s, AsyncResetSynchronizer)]
    assert len(syncs) == 2
    for cd, inverted in ((crg.cd_a, False), (crg.cd_b, True)):
        sync = next(s for s in syncs if s.cd.rst is port(dccas[cd.rst], "CLKI"))  # synchroniser -> DCCA -> domain
        assert sync.cd is not cd
        assert any(st.l is sync.cd.clk and st.r is cd.clk for st in crg._fragment.comb)  # domain's clock
        # The same asynchronous trigger as before (a's the signal, b's its complement).
        assert (sync.async_reset is crg.trigger) == (not inverted)
        assert inverted == (getattr(sync.async_reset, "op", None) == "~" and sync.async_reset.operands[0] is crg.trigger)


def test_promotion_order_is_the_creation_order():
    """The same design gives the same netlist (docs/boards: CI's builds depend on it)."""
    for _ in range(5):
        assert promote_resets(CRG()) == ["a", "b"]


def test_ecp5_socs_put_every_domain_reset_on_a_global_and_the_simulation_does_not():
    soc = DAQSoC(get_board("colorlight_i5"), SoCConfig(build_id="ci"))
    assert sorted(soc.global_resets) == ["eth_rx", "eth_tx", "sys"]
    verilog = str(soc.platform.get_verilog(soc))
    for cd in ("sys", "eth_rx", "eth_tx"):
        assert f"DCCA {cd}_rst_dcca(" in verilog
    assert DAQSoC(get_board("sim")).global_resets == []
