"""The simulated board's Verilator binary is rebuilt exactly when what Verilator compiles changes.

LiteX 2024.12 writes two things into the Verilog that change from one generation of the same
design to the next: the generation time, and the order of black-box instances in its hierarchy
comment (sorted by str(instance), i.e. by memory address). Before the digest ignored the second,
`ethdaq sim` after `ethdaq build` with the same options rebuilt the binary in some runs, under a
simulation that was running from the same directory."""

import re
import subprocess
from pathlib import Path

from migen import Instance, Module, Signal

from litex.gen import LiteXContext
from litex.gen.fhdl.verilog import convert

from ethdaq.soc import build
from ethdaq.soc.build import generated_digest


class _TwoBlackBoxes(Module):
    def __init__(self, width=8):
        self.a, self.b = Signal(width), Signal(width)
        self.specials += Instance("probe_alpha", i_x=self.a), Instance("probe_beta", i_x=self.b)


def _generate(tmp_path, name, width=8):
    top = _TwoBlackBoxes(width)
    LiteXContext.top = top  # As a platform build sets it: then LiteX writes the hierarchy comment.
    try:
        text = str(convert(top, ios={top.a, top.b}, name="top"))
    finally:
        LiteXContext.top = None
    path = tmp_path / name / "top.v"
    path.parent.mkdir()
    path.write_text(text)
    return path


def test_the_hierarchy_comment_lists_the_black_boxes_and_its_order_does_not_count(tmp_path):
    first = _generate(tmp_path, "first")
    text = first.read_text()
    block = re.search(r"// Hierarchy\n//-*\n\s*/\*(.*?)^\*/", text, re.S | re.M)
    assert block and "[probe_alpha]" in block.group(1) and "[probe_beta]" in block.group(1)
    # The other order, as another process may print it, and another generation time.
    swapped = text.replace("[probe_alpha]", "[probe_tmp]").replace("[probe_beta]", "[probe_alpha]") \
                  .replace("[probe_tmp]", "[probe_beta]")
    swapped = re.sub(r"(// Date\s*: ).*", r"\g<1>1999-01-01 00:00:00", swapped)
    assert swapped != text
    second = tmp_path / "second" / "top.v"
    second.parent.mkdir()
    second.write_text(swapped)
    assert generated_digest([first]) == generated_digest([second])


def test_a_change_outside_the_comments_changes_the_digest(tmp_path):
    narrow, wide = _generate(tmp_path, "narrow", 8), _generate(tmp_path, "wide", 9)
    assert generated_digest([narrow]) != generated_digest([wide])
    # The instances in the other order in the body (not the comment) count too.
    text = narrow.read_text()
    alpha = re.search(r"^probe_alpha probe_alpha\(.*?\);\n", text, re.S | re.M).group(0)
    beta  = re.search(r"^probe_beta probe_beta\(.*?\);\n", text, re.S | re.M).group(0)
    moved = tmp_path / "moved" / "top.v"
    moved.parent.mkdir()
    moved.write_text(text.replace(alpha, "@@").replace(beta, alpha).replace("@@", beta))
    assert moved.read_text() != text
    assert generated_digest([narrow]) != generated_digest([moved])


def test_a_front_ends_verilog_edited_in_place_changes_the_digest(tmp_path):
    """The user's Verilog lives outside the build directory: its content is part of the digest."""
    from ethdaq.boards import get_board
    from ethdaq.soc.build import sim_inputs
    gateware = tmp_path / "gateware"
    gateware.mkdir()
    (gateware / "sim.v").write_text("module sim; endmodule\n")
    user = tmp_path / "adc.v"
    user.write_text("module adc(input clk); endmodule\n")
    platform = get_board("sim").platform()
    platform.add_source(str(user))
    before = generated_digest(sim_inputs(gateware, platform))
    assert generated_digest(sim_inputs(gateware, platform)) == before
    user.write_text("module adc(input clk, input rst); endmodule\n")
    assert generated_digest(sim_inputs(gateware, platform)) != before


def test_the_boards_simulation_modules_are_copied_into_the_build_and_change_the_digest(tmp_path):
    """The simulated board's own C modules (the tap's wire) are built by LiteX's Makefile from a
    copy in the gateware directory (LiteX writes its variables.mak there, not into our sources);
    an edited module changes the digest, so the binary is rebuilt with it."""
    from ethdaq.boards import get_board
    from ethdaq.gateware.simphy import TAP_MODULE
    from ethdaq.soc.build import SIM_MODULES, copy_sim_modules, sim_inputs
    board = get_board("sim")
    gateware = tmp_path / "gateware"
    gateware.mkdir()
    (gateware / "sim.v").write_text("module sim; endmodule\n")
    options = copy_sim_modules(board, gateware)
    assert options == {"extra_mods": [TAP_MODULE], "extra_mods_path": str(gateware / SIM_MODULES)}
    copied = gateware / SIM_MODULES / TAP_MODULE / f"{TAP_MODULE}.c"
    assert copied.read_text() == (board.sim_modules[TAP_MODULE] / f"{TAP_MODULE}.c").read_text()
    platform = board.platform()
    before = generated_digest(sim_inputs(gateware, platform))
    assert copied in sim_inputs(gateware, platform)
    copied.write_text(copied.read_text() + "// edited\n")
    assert generated_digest(sim_inputs(gateware, platform)) != before


def test_ccache_when_installed_is_put_where_litex_and_verilator_read_it_and_the_users_settings_win(monkeypatch):
    for k in ("CCACHE", "OBJCACHE", "CCACHE_BASEDIR", "CCACHE_NOHASHDIR"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(build.shutil, "which", lambda name: f"/usr/bin/{name}")
    env = build.compiler_cache()
    assert env["CCACHE"] == env["OBJCACHE"] == "ccache" and env["CCACHE_BASEDIR"] == "/"
    monkeypatch.setenv("CCACHE_BASEDIR", "/home/user")
    assert "CCACHE_BASEDIR" not in build.compiler_cache()
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    assert build.compiler_cache() == {}
    # The variables are the ones the installed makefiles read: LiteX's for the firmware, Verilator's
    # for the simulation.
    import litex
    common = Path(litex.__file__).parent / "soc" / "software" / "common.mak"
    assert "$(CCACHE) $(TARGET_PREFIX)gcc" in common.read_text()
    verilator_root = subprocess.run(["verilator", "--getenv", "VERILATOR_ROOT"], capture_output=True,
                                    text=True).stdout.strip()
    assert "$(OBJCACHE) $(CXX)" in (Path(verilator_root) / "include" / "verilated.mk").read_text()
