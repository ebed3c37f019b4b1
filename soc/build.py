#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Build flow: gateware + firmware (+ bitstream, or a Verilator binary for the simulated board).

The firmware is compiled against the headers LiteX generates for this exact SoC, then placed in
the integrated ROM, so the CPU runs it from reset without the LiteX BIOS.
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from litex.soc.integration.builder import Builder
from litex.soc.integration.soc_core import get_mem_data

import ethdaq.host
from ethdaq.host import protocol
from ethdaq.soc.daqsoc import DAQSoC
from ethdaq.soc import tools

FIRMWARE_DIR = Path(ethdaq.host.__file__).resolve().parent.parent / "firmware"


class BuildError(RuntimeError):
    pass


class DAQBuilder(Builder):
    """LiteX Builder that compiles our firmware package instead of the BIOS and boots it from ROM."""
    def __init__(self, soc, **kwargs):
        Builder.__init__(self, soc, **kwargs)
        self.add_software_package("firmware", str(FIRMWARE_DIR))

    def _generate_includes(self, **kwargs):
        Builder._generate_includes(self, **kwargs)
        # One source of truth for the control protocol: the C header comes from the Python module.
        path = Path(self.generated_dir) / "ctl_protocol.h"
        if not path.exists() or path.read_text() != protocol.c_header():
            path.write_text(protocol.c_header())

    def _generate_rom_software(self, compile_bios=True):
        # The firmware replaces the BIOS; the LiteX libraries are still built and linked.
        Builder._generate_rom_software(self, compile_bios=False)

    @property
    def firmware_bin(self):
        return Path(self.software_dir) / "firmware" / "firmware.bin"


def _init_firmware(soc, **kwargs):
    """Called by Builder.build() after the software is compiled: put the firmware into the ROM."""
    firmware = soc.builder.firmware_bin
    if not firmware.exists():
        raise BuildError(f"firmware was not built: {firmware} is missing")
    soc.init_rom("rom", get_mem_data(str(firmware), data_width=soc.bus.data_width,
        endianness=soc.cpu.endianness))


@contextlib.contextmanager
def _path_prepended(*dirs):
    """PATH with our virtualenv's bin (LiteX's makefiles run `python3 -m litex...`) and `dirs` first."""
    old = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join([*map(str, dirs), str(Path(sys.executable).parent), old])
    try:
        yield
    finally:
        os.environ["PATH"] = old


@contextlib.contextmanager
def output_to(log_path, verbose=False):
    """Send everything the build prints (LiteX logging, make, compilers: file descriptors 1 and
    2) to log_path, unless verbose. On failure, the log's last lines are kept in the error."""
    if verbose:
        yield
        return
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        except BuildError as e:
            sys.stdout.flush()
            sys.stderr.flush()
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
            raise BuildError(f"{e} (full log: {log_path})\n{tail}") from None
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


@dataclass
class BuildResult:
    board:      str
    output_dir: Path
    artifact:   Path = None
    report:     dict = field(default_factory=dict)
    firmware:   Path = None
    gateware:   Path = None
    toolchain:  str  = None
    vivado_missing: bool = False


def make_soc(board, toolchain=None, **soc_kwargs):
    soc = DAQSoC(board, toolchain=toolchain, **soc_kwargs)
    soc.init_mems = lambda **kwargs: _init_firmware(soc, **kwargs)
    return soc


def preflight(board, output_dir):
    """Checks that need no build: tools present, output directory usable. Raises before anything
    is written. Returns the resolved output directory."""
    output_dir = Path(output_dir).resolve()
    if not board.is_sim and (output_dir == Path("/tmp") or Path("/tmp") in output_dir.parents):
        raise BuildError(f"output directory must not be under /tmp, not {str(output_dir)!r}, "
                         "because the yowasp tools (WASI) see their own /tmp")
    tools.require("make", "riscv64-unknown-elf-gcc", *(["verilator"] if board.is_sim else []))
    return output_dir


def build_hardware(board, output_dir, toolchain="trellis", run=True, **soc_kwargs):
    """Build gateware + firmware + bitstream for a hardware board; return a BuildResult.

    toolchain "trellis" (ECP5): Yosys + nextpnr + ecppack, all here. "vivado" (Xilinx): the
    complete Vivado project; Vivado runs only if it is on PATH (result.vivado_missing otherwise).
    "yosys" (Xilinx): the same project, then Yosys' synth_xilinx for a resource estimate."""
    output_dir = preflight(board, output_dir)
    shims = tools.yowasp_shims(output_dir / ".tools")
    soc = make_soc(board, toolchain="vivado" if toolchain == "yosys" else toolchain, **soc_kwargs)
    if toolchain == "trellis":
        soc.platform.toolchain._pnr_opts += f" --report {board.name}_report.json"
        soc.platform.toolchain._pnr_opts += "".join(f" {opt}" for opt in getattr(board, "nextpnr_opts", []))
    vivado_missing = toolchain in ("vivado", "yosys") and shutil.which("vivado") is None
    if toolchain == "yosys" or vivado_missing:
        run = False
    builder = DAQBuilder(soc, output_dir=str(output_dir))
    # A failed build must not leave the previous bitstream looking like its result.
    stale = Path(builder.gateware_dir) / f"{board.name}.bit"
    if stale.exists():
        stale.unlink()
    with _path_prepended(shims):
        try:
            builder.build(build_name=board.name, run=run)
        except (OSError, subprocess.CalledProcessError) as e:
            raise BuildError(f"{board.name} build failed: {e}") from None
        gateware = Path(builder.gateware_dir)
        result = BuildResult(board.name, output_dir, firmware=builder.firmware_bin, gateware=gateware,
                             toolchain=toolchain)
        if toolchain == "yosys":
            result.report = synth_xilinx(soc, gateware, board.name)
    result.vivado_missing = toolchain == "vivado" and vivado_missing
    if run:
        result.artifact = gateware / f"{board.name}.bit"
        if not result.artifact.exists():
            raise BuildError(f"no bitstream produced at {result.artifact}")
        result.report = (vivado_summary(gateware, board.name) if toolchain == "vivado" else
                         nextpnr_summary(gateware / f"{board.name}_report.json", soc))
    return result


def vivado_command(result):
    """What to run where Vivado is installed, for a generated project."""
    return f"cd {result.gateware} && vivado -mode batch -source {result.board}.tcl"


# Capacity of the Xilinx parts we build for (data sheets DS180/DS182): LUTs, FFs, 36 Kb block RAMs,
# DSP48E1 slices.
XILINX_CAPACITY = {
    "xc7a35t":  (20800,  41600,  50,  90),
    "xc7a200t": (133800, 267600, 365, 740),
    "xc7k325t": (203800, 407600, 445, 840),
}

# Yosys' 7-series cells: how many LUTs a distributed-RAM or shift-register cell occupies.
_LUTRAM_LUTS = {"RAM32M": 4, "RAM64M": 4, "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1S": 4,
                "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "SRL16E": 1, "SRLC32E": 1, "SRLC16E": 1}


def xilinx_cell_summary(cells, device):
    """Resource use from Yosys' synth_xilinx cell counts ({cell type: count}) for `device`."""
    luts = sum(n for t, n in cells.items() if re.fullmatch(r"LUT[1-6]", t)) + cells.get("INV", 0)  # INV: a LUT1
    luts += sum(n*_LUTRAM_LUTS[t] for t, n in cells.items() if t in _LUTRAM_LUTS)
    ffs  = sum(n for t, n in cells.items() if re.fullmatch(r"FD[RSCP]E(_1)?", t))
    bram = cells.get("RAMB36E1", 0) + cells.get("RAMB18E1", 0)/2
    dsp  = cells.get("DSP48E1", 0)
    part = next((k for k in XILINX_CAPACITY if device.lower().startswith(k)), None)
    if part is None:
        raise BuildError(f"no capacity figures for Xilinx part {device!r}; add it to XILINX_CAPACITY")
    cap = XILINX_CAPACITY[part]
    return {"luts": (luts, cap[0]), "ffs": (ffs, cap[1]), "bram": (bram, cap[2]), "dsp": (dsp, cap[3]),
            "clocks": [], "estimate": "Yosys synth_xilinx before placement; no timing (Vivado's job)",
            "labels": [("luts", "LUT6"), ("ffs", "FF"), ("bram", "BRAM (36 Kb)"), ("dsp", "DSP48E1")]}


def synth_xilinx(soc, gateware, name):
    """Run Yosys' synth_xilinx on the generated Verilog (the sources of the Vivado project):
    checks the design synthesises for 7-series and estimates its resources. Runs with the yowasp
    shims first on PATH (build_hardware). Writes
    {name}_yosys.json (netlist) and {name}_yosys.log in the gateware directory."""
    sources = [Path(f) for f, lang, _ in sorted(soc.platform.sources) if lang in ("verilog", "systemverilog")]
    top = gateware / f"{name}.v"
    if top not in sources:
        sources.append(top)
    script = "\n".join([
        *[f"read_verilog -sv {src}" for src in sources],
        f"synth_xilinx -family xc7 -top {name} -flatten",
        f"tee -q -o {name}_yosys_stat.json stat -json",
        f"write_json {name}_yosys.json",
    ])
    (gateware / f"{name}_yosys.ys").write_text(script + "\n")
    r = subprocess.run(["yosys", "-q", "-l", f"{name}_yosys.log", f"{name}_yosys.ys"], cwd=gateware,
                       capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).splitlines()[-20:])
        raise BuildError(f"Yosys synth_xilinx failed (log: {gateware / (name + '_yosys.log')}):\n{tail}")
    stat = json.loads((gateware / f"{name}_yosys_stat.json").read_text())
    cells = stat["design"]["num_cells_by_type"]
    return xilinx_cell_summary(cells, soc.platform.device)


def vivado_summary(gateware, name):
    """Worst setup and hold slack from the timing summary LiteX's Vivado script writes. Untested
    here (no Vivado): if the report is missing or its format differs, say so, never pass."""
    rpt = gateware / f"{name}_timing.rpt"
    summary = {"clocks": [], "vivado_timing": rpt}
    text = rpt.read_text(errors="replace") if rpt.exists() else ""
    m = re.search(r"WNS\(ns\)\s+TNS\(ns\).*?\n[-\s]+\n\s*(-?[\d.]+)\s+(-?[\d.]+)\s+\d+\s+\d+\s+(-?[\d.]+)",
                  text, re.S)
    summary["wns_ns"] = float(m.group(1)) if m else None
    summary["whs_ns"] = float(m.group(3)) if m else None
    return summary


def nextpnr_summary(report_path, soc):
    """Resource use and achieved vs required frequency per clock, from nextpnr's JSON report."""
    report = json.loads(Path(report_path).read_text())
    util = report.get("utilization", {})
    def res(key):
        entry = util.get(key, {})
        return entry.get("used", 0), entry.get("available", 0)
    clocks = []
    for name, f in sorted(report.get("fmax", {}).items()):
        # nextpnr names global nets like '$glbnet$eth_clocks0_rx$TRELLIS_IO_IN'.
        name = name.replace("$glbnet$", "").replace("$TRELLIS_IO_IN", "")
        achieved, required = f.get("achieved", 0.0), f.get("constraint", 0.0)
        clocks.append({"clock": name, "achieved_mhz": achieved, "required_mhz": required,
                       "met": achieved >= required})
    return {
        "luts":  res("TRELLIS_COMB"),
        "ffs":   res("TRELLIS_FF"),
        "bram":  res("DP16KD"),
        "dsp":   res("MULT18X18D"),
        "clocks": clocks,
    }


def format_summary(report):
    lines = []
    labels = report.get("labels", [("luts", "LUT4"), ("ffs", "FF"), ("bram", "BRAM (DP16KD)")])
    for key, label in labels:
        used, avail = report[key]
        pct = 100.0 * used / avail if avail else 0.0
        lines.append(f"  {label:<14} {used:>8g} / {avail:<6} ({pct:5.1f} %)")
    lines.append("")
    if report.get("estimate"):
        lines.append(f"  estimate: {report['estimate']}")
    if report["clocks"]:
        lines.append(f"  {'clock':<28} {'achieved':>10} {'required':>10}  status")
    for c in report["clocks"]:
        status = "met" if c["met"] else "FAILED"
        lines.append(f"  {c['clock']:<28} {c['achieved_mhz']:>6.1f} MHz {c['required_mhz']:>6.1f} MHz  {status}")
    if "wns_ns" in report:
        if report["wns_ns"] is None:
            lines.append(f"  timing: no summary found in {report['vivado_timing']}; read it there")
        else:
            met = report["wns_ns"] >= 0 and report["whs_ns"] >= 0
            lines.append(f"  timing: WNS {report['wns_ns']:.3f} ns, WHS {report['whs_ns']:.3f} ns: "
                         f"{'met' if met else 'FAILED'} (Vivado, {report['vivado_timing']})")
    return "\n".join(lines)

# Simulation ---------------------------------------------------------------------------------------

# LiteX stamps generated files with the time of generation; those lines must not defeat the cache.
_DATE_LINE = re.compile(rb"^//.*(Date\s*:|Auto-Generated by LiteX on).*$", re.M)


def _digest(paths):
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.name).encode())
        h.update(_DATE_LINE.sub(b"", p.read_bytes()))
    return h.hexdigest()


def write_sim_config(board, gateware_dir, tap, host_ip):
    """The simulation modules' run-time settings (tap name, host address), read when the
    binary starts: changing them needs no rebuild."""
    config = board.sim_config(board.sys_clk_freq, tap, host_ip)
    (Path(gateware_dir) / "sim_config.js").write_text(config.get_json())


def build_sim(board, output_dir, tap="ethdaq0", host_ip="192.168.1.100", opt_level="O3", **soc_kwargs):
    """Build the simulated board: gateware, firmware and the Verilator binary. Returns the
    gateware directory (run obj_dir/Vsim from there). The Verilator compile (the slow step) is
    skipped when the generated sources are unchanged."""
    output_dir = preflight(board, output_dir)
    soc = make_soc(board, **soc_kwargs)
    builder = DAQBuilder(soc, output_dir=str(output_dir))
    config = board.sim_config(soc.sys_clk_freq, tap, host_ip)
    with _path_prepended():
        try:
            builder.build(sim_config=config, build=True, run=False, opt_level=opt_level, interactive=False)
        except (OSError, subprocess.CalledProcessError) as e:
            raise BuildError(f"simulation build failed: {e}") from None
    gateware = Path(builder.gateware_dir)
    inputs = [p for p in gateware.iterdir() if p.suffix in (".v", ".init", ".json", ".sh", ".h", ".cpp", ".mak")]
    digest = _digest(inputs)
    stamp = gateware / "obj_dir" / "ethdaq.stamp"
    binary = gateware / "obj_dir" / "Vsim"
    if not (binary.exists() and stamp.exists() and stamp.read_text() == digest):
        r = subprocess.run(["bash", "build_sim.sh"], cwd=gateware, capture_output=True, text=True)
        if r.returncode != 0:
            tail = "\n".join((r.stdout + r.stderr).splitlines()[-30:])
            raise BuildError(f"Verilator build failed:\n{tail}")
        stamp.write_text(digest)
    return BuildResult(board.name, output_dir, artifact=binary, firmware=builder.firmware_bin)
