#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Resource and timing table of the boards' full DAQ SoC, built as a user builds it.

For each board: `ethdaq build` (through soc.build.build_hardware: Yosys synth_ecp5 -nowidelut
-abc9 with abc9's flow3 script, nextpnr, ecppack), then one table of LUT/FF/BRAM/DSP use and per-clock achieved vs required frequency
from nextpnr's report, and one of resources per core.

Per-core figures come from Yosys' netlist (gateware/BOARD.json), not from separate syntheses: LiteX
writes one flat Verilog module, but its flip-flops and RAMs keep the hierarchical Migen names
(ptpclock_..., ethcore_ip_..., daqstreamer_...). Each flip-flop/RAM belongs to the core its name
says; each LUT4/CCU2C to the core owning most of the flip-flops its output reaches through
combinational logic (ties and pure-logic cones fall back to the names of the nets it drives).
That is an attribution, not a measurement: logic shared by two cores is counted once, for one.
"LUT4 eq." counts a CCU2C (carry cell) as 2 LUT4 and a DPR16X4 (16x4 distributed RAM) as 4, as
nextpnr's TRELLIS_COMB does (nextpnr's COMB total also includes route-through LUTs).

    .venv/bin/python bench/resources.py [--board colorlight_i5 ...] [--build-dir build/resources]
    .venv/bin/python bench/resources.py --from-build build/try1 --board colorlight_i5   (no build)
    .venv/bin/python bench/resources.py --build-dir build/resources --no-build   (the tables again)
    .venv/bin/python bench/resources.py --board colorlight_i5 --device LFE5U-45F-6BG381C
    .venv/bin/python bench/resources.py --board colorlight_i5 --synth-only --build-id ci   (Yosys only)
    .venv/bin/python bench/resources.py --board colorlight_i5 --frontend examples/frontends/triggered_adc.py

`--synth-only` (ECP5) stops after Yosys: the per-core table in a few minutes instead of a
place and route, for comparing gateware. Its LUT4 figure is Yosys' LUT4 eq. (LUT4 + 2 CCU2C +
4 DPR16X4), about 9 % below nextpnr's TRELLIS_COMB, which adds the LUTs placement uses as
route-throughs (docs/boards/README.md compares the two on the colorlight_i5); no clock figures.

`--device` builds an ECP5 board's SoC, pins and clocks on another part in the same package and
speed grade: the LFE5U-45F-6BG381C beside the colorlight_i5's LFE5U-25F-6BG381C has the same
fabric speed and twice the room, so it tells what the speed grade costs from what the fill costs
(docs/boards/README.md). No board is built that way; it is a measurement.

The seed paper's VHDL stack (Spartan-6, LUT6) is printed beside for reference: 4906 LUTs with
PTP, of which 2071 are PTP. An ECP5 LUT4 holds less logic than a Spartan-6 LUT6, so the
figures are not directly comparable.
"""

import argparse
import collections
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT.parent))

from ethdaq.soc.pnr import ECP5_CAPACITY, lut4_equivalent as lut_eq   # noqa: E402

# Migen name prefix -> core. First match wins (longest prefixes first where they overlap).
CORES = [
    ("CPU (VexRiscv minimal)",   ("VexRiscv", "cpu_", "vexriscv")),
    ("CPU mailboxes (ctl, PTP)", ("ctlport", "cpumacport", "ptp_l2")),
    ("timestamp unit (PTP)",     ("ptpclock", "ptp_", "ptptimestamper", "ptp")),
    ("receive audit, gate, classifier", ("rx_audit", "rxaudit", "rx_gate", "framegate", "rxclassifier", "classifier", "fasttrack")),
    ("streamer + emulators",     ("daqstreamer", "detectoremulator", "txpath_pipe", "txpath_data_buf")),
    # Migen names a front-end's signals after the function that calls frontend(ctx)
    # (gateware/frontend.py instantiate); its pins are frontend_<name>.
    ("detector front-end",       ("instantiate", "frontend")),
    ("IP/UDP/ARP/ICMP",          ("ethcore_ip", "ethcore_arp", "ethcore_icmp", "icmpecho", "ethcore_udp", "liteethip",
                                  "liteethudp", "liteetharp", "liteethicmp", "txpath_udpframer",
                                  "txpath_arprequester", "txpath_framer", "ipv4", "udpframer", "arprequester")),
    ("MAC + PHY",                ("ethcore_mac", "liteethmac", "ethphy", "eth_", "txpath", "ethcore",
                                  "framescheduler")),
    ("CSR bus",                  ("csr_bankarray", "csr", "wishbone2csr")),
    ("ROM/SRAM/UART/bus",        ("daqsoc_", "rom", "sram", "uart", "serial", "rs232", "ctrl", "bus", "slaves", "grant",
                                  "interface", "mem")),
]
OTHER = "other (clock-domain crossings, stream buffers, glue)"
SEED_PAPER = ("seed paper VHDL stack, Spartan-6 (LUT6)", 4906, 2071)


MEMORY_DECL  = re.compile(r"^reg\s+(?:\[[^\]]*\]\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\[\d+:\d+\];", re.M)
MEMORY_WRITE = re.compile(r"^\s*(?:if\s*\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]*)\[[^\]]*\]\s*<=\s*([A-Za-z_][A-Za-z0-9_]*)", re.M)


def memory_writers(verilog_path):
    """LiteX names most memories storage, storage_1, mem_1, ... (others after their attribute):
    map each to the signal written into it, whose name says which core it belongs to."""
    text = Path(verilog_path).read_text()
    arrays = set(MEMORY_DECL.findall(text))
    return {m.group(1): m.group(2) for m in MEMORY_WRITE.finditer(text) if m.group(1) in arrays}


def core_of(name, memories={}):
    name = name.lstrip("\\")
    for mem, writer in memories.items():
        if name == mem or name.startswith(mem + ".") or name.startswith(mem + "_dat") or name.startswith(mem + "_adr"):
            name = writer
            break
    low = name.lower()
    for core, prefixes in CORES:
        if any(low.startswith(p.lower()) for p in prefixes):
            return core
    return OTHER


# Per FPGA family: cells owned by the core their name says (flip-flops, RAMs, DSPs), and the
# combinational cells attributed through what they feed.
FAMILY_CELLS = {
    "ecp5": ({"TRELLIS_FF", "DP16KD", "TRELLIS_DPR16X4", "MULT18X18D"},
             {"LUT4", "CCU2C", "PFUMX", "L6MUX21"}),
    "xc7":  ({"FDRE", "FDSE", "FDCE", "FDPE", "RAMB18E1", "RAMB36E1", "DSP48E1", "RAM32M", "RAM64M", "RAM32X1D",
              "RAM64X1D", "RAM128X1D", "RAM256X1S", "RAM32X1S", "RAM64X1S", "RAM128X1S", "SRL16E", "SRLC32E"},
             {"LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "INV", "CARRY4", "MUXF7", "MUXF8"}),
}


def attribute(netlist_path, verilog_path, family="ecp5"):
    """Per-core counts of each cell type of FAMILY_CELLS[family] from a Yosys JSON netlist."""
    memories = memory_writers(verilog_path)
    core_of_ = lambda n: core_of(n, memories)
    design = json.loads(Path(netlist_path).read_text())
    top = next(m for m in design["modules"].values() if m["attributes"].get("top"))
    cells = top["cells"]
    names_of_bit = collections.defaultdict(list)
    for net, v in top["netnames"].items():
        for b in v["bits"]:
            if isinstance(b, int):
                names_of_bit[b].append(net)
    loads = collections.defaultdict(list)
    for cn, c in cells.items():
        for port, bits in c["connections"].items():
            if c.get("port_directions", {}).get(port) != "output":
                for b in bits:
                    if isinstance(b, int):
                        loads[b].append(cn)
    owned_kinds, comb_kinds = FAMILY_CELLS[family]
    kind = {}
    for cn, c in cells.items():
        t = c["type"].split("\\")[-1]
        if t in owned_kinds or t in comb_kinds:
            kind[cn] = t
    def own_name(cn, depth=0):
        # synth_ecp5 names a flip-flop after its register; synth_xilinx leaves "$auto$..." names,
        # and the register's name is on the net it drives (or, for a top-level output, on the
        # far side of its OBUF).
        if not cn.startswith("$"):
            return cn
        outs = [b for port, bits in cells[cn]["connections"].items()
                if cells[cn]["port_directions"].get(port) == "output" for b in bits if isinstance(b, int)]
        for b in outs:
            for n in names_of_bit.get(b, []):
                if not n.startswith("$"):
                    return n
        if depth == 0:
            for b in outs:
                for l in loads[b]:
                    if cells[l]["type"] in ("OBUF", "OBUFT"):
                        name = own_name(l, 1)
                        if not name.startswith("$"):
                            return name
        return cn
    owner = {cn: core_of_(own_name(cn)) for cn, k in kind.items() if k in owned_kinds}

    def output_bits(c):
        for port, bits in c["connections"].items():
            if c["port_directions"].get(port) == "output":
                yield from (b for b in bits if isinstance(b, int))

    # Forward reachability from each combinational cell to owned cells, iteratively (memoised).
    memo = {}
    def owners(start):
        if start in memo:
            return memo[start]
        stack, order, seen = [start], [], {start}
        while stack:
            cn = stack.pop()
            order.append(cn)
            for b in output_bits(cells[cn]):
                for l in loads[b]:
                    if l not in owner and l not in seen and l not in memo and kind.get(l) in comb_kinds:
                        seen.add(l)
                        stack.append(l)
        # Resolve in reverse discovery order (an approximation on cycles, which comb logic has not).
        for cn in reversed(order):
            acc = collections.Counter()
            for b in output_bits(cells[cn]):
                for l in loads[b]:
                    if l in owner:
                        acc[owner[l]] += 1
                    elif l in memo and l != cn:
                        acc.update(memo[l])
            if not acc:
                for b in output_bits(cells[cn]):
                    for n in names_of_bit.get(b, []):
                        if not n.startswith("$"):
                            acc[core_of_(n)] += 1
            # Keep only the winner: counts grow combinatorially otherwise.
            memo[cn] = collections.Counter([acc.most_common(1)[0][0]]) if acc else collections.Counter()
        return memo[start]

    table = collections.defaultdict(collections.Counter)
    for cn, k in kind.items():
        if cn in owner:
            table[owner[cn]][k] += 1
        else:
            o = owners(cn)
            table[o.most_common(1)[0][0] if o else OTHER][k] += 1
    return table


def _xc7_lutram(c):
    from ethdaq.soc.build import _LUTRAM_LUTS
    return sum(n*c[t] for t, n in _LUTRAM_LUTS.items())


def _xc7_lut(c):
    return sum(c[f"LUT{i}"] for i in range(1, 7)) + c["INV"]


# Per family: resource rows of the summary, and the per-core columns (label, count function).
COLUMNS = {
    "ecp5": ([("luts", "LUT4 (TRELLIS_COMB)"), ("ffs", "FF"), ("bram", "BRAM (DP16KD)"), ("dsp", "DSP (MULT18X18D)")],
             [("LUT4 eq.", lut_eq), ("LUT4", lambda c: c["LUT4"]), ("CCU2C", lambda c: c["CCU2C"]),
              ("DPR16X4", lambda c: c["TRELLIS_DPR16X4"]), ("FF", lambda c: c["TRELLIS_FF"]),
              ("DP16KD", lambda c: c["DP16KD"])]),
    "xc7":  ([("luts", "LUT6 (logic + memory)"), ("ffs", "FF"), ("bram", "BRAM (36 Kb)"), ("dsp", "DSP48E1")],
             [("LUT6 eq.", lambda c: _xc7_lut(c) + _xc7_lutram(c)), ("LUT", _xc7_lut), ("CARRY4", lambda c: c["CARRY4"]),
              ("LUTRAM/SRL (LUTs)", _xc7_lutram), ("FF", lambda c: sum(c[t] for t in ("FDRE", "FDSE", "FDCE", "FDPE"))),
              ("BRAM36", lambda c: c["RAMB36E1"] + c["RAMB18E1"]/2)]),
}


def print_tables(board, fpga, report, table, elapsed=None, family="ecp5"):
    resources, columns = COLUMNS[family]
    print(f"\n## {board} ({fpga})" + (f", built in {elapsed/60:.1f} min" if elapsed else ""))
    if report.get("estimate"):
        print(f"\n{report['estimate']}.")
    print()
    print("| resource | used | available | % |")
    print("|---|---:|---:|---:|")
    for key, label in resources:
        used, avail = report.get(key, (0, 0))
        pct = f"{100.0*used/avail:.1f}" if avail else "-"
        print(f"| {label} | {used:g} | {avail} | {pct} |")
    print()
    if report["clocks"]:
        print("| clock | required MHz | achieved MHz | margin | status |")
        print("|---|---:|---:|---:|---|")
    elif report.get("synth_only"):
        print("Timing: not estimated (synthesis only; nextpnr estimates it after placement and routing).")
    else:
        print("Timing: not estimated here (Vivado reports it where it is installed).")
    for c in report["clocks"]:
        margin = 100.0*(c["achieved_mhz"]/c["required_mhz"] - 1) if c["required_mhz"] else 0.0
        status = "met, >= 10 % margin" if c["margin_met"] else ("met" if c["met"] else "FAILED")
        print(f"| {c['clock']} | {c['required_mhz']:.1f} | {c['achieved_mhz']:.1f} | {margin:+.0f} % | {status} |")
    print()
    print("| core (attributed, see bench/resources.py) | " + " | ".join(l for l, _ in columns) + " |")
    print("|---|" + "---:|"*len(columns))
    total = collections.Counter()
    for core, c in sorted(table.items(), key=lambda kv: -columns[0][1](kv[1])):
        total.update(c)
        print(f"| {core} | " + " | ".join(f"{f(c):g}" for _, f in columns) + " |")
    print("| total | " + " | ".join(f"{f(total):g}" for _, f in columns) + " |")
    print(f"| {SEED_PAPER[0]} | {SEED_PAPER[1]} LUT6 (PTP {SEED_PAPER[2]}) |" + " |"*(len(columns) - 1))


def _used(pair):
    used, avail = pair
    return f"{used:g} ({100.0*used/avail:.1f} %)" if avail else f"{used:g}"


def timing_verdict(report):
    """One board's timing in words: every clock with the margin, met, or which failed."""
    clocks = report["clocks"]
    if report.get("synth_only"):
        return "not estimated (synthesis only)"
    if not clocks:
        return "not estimated (Vivado's job)"
    failed = [c["clock"] for c in clocks if not c["met"]]
    if failed:
        return "FAILED: " + ", ".join(failed)
    if all(c["margin_met"] for c in clocks):
        return "met, every clock with the 10 % margin"
    return "met, not every clock with the 10 % margin"


def summary_lines(results):
    """The issue's one table over every board built: a row per board (FPGA, LUT/FF/BRAM/DSP used
    and %, each clock's achieved vs required MHz, the verdict, the placement), then one per core
    with a column per board, beside the seed paper's stack. `results`: [(board, fpga, report,
    per-core table, family)]."""
    lines = ["", "## Every board", "",
             "| board | FPGA | LUT | FF | BRAM | DSP | clocks: achieved / required MHz | timing | placement |",
             "|---|---|---:|---:|---:|---:|---|---|---|"]
    for board, fpga, report, _, family in results:
        lut_unit = "LUT4" if family == "ecp5" else "LUT6"
        clocks = "; ".join(f"{c['clock']} {c['achieved_mhz']:.1f} / {c['required_mhz']:.1f} "
                           f"({100.0*(c['achieved_mhz']/c['required_mhz'] - 1):+.0f} %)"
                           for c in report["clocks"]) or "-"
        placements = report.get("placements")
        if placements:
            chosen = placements.get("chosen")
            placement = f"seed {chosen}, {len(placements['attempts'])} of up to {placements['tries']} tried"
        else:
            placement = report.get("router") or ("-" if not report["clocks"] else "one")
        lines.append(f"| {board} | {fpga} | {_used(report['luts'])} {lut_unit} | {_used(report['ffs'])} | "
                     f"{_used(report['bram'])} | {_used(report['dsp'])} | {clocks} | {timing_verdict(report)} | "
                     f"{placement} |")
    cores = []
    for _, _, _, table, family in results:   # In the first board's order, largest first.
        count = COLUMNS[family][1][0][1]
        cores += [c for c in sorted(table, key=lambda k: -count(table[k])) if c not in cores]
    lines += ["", "| core (attributed, see bench/resources.py) | " +
              " | ".join(f"{b} ({COLUMNS[f][1][0][0]})" for b, _, _, _, f in results) + " |",
              "|---|" + "---:|"*len(results)]
    for core in cores + ["total"]:
        cells = []
        for _, _, _, table, family in results:
            count = COLUMNS[family][1][0][1]
            if core == "total":
                cells.append(f"{sum(count(c) for c in table.values()):g}")
            else:
                cells.append(f"{count(table[core]):g}" if core in table else "-")
        lines.append(f"| {core} | " + " | ".join(cells) + " |")
    lines.append(f"| {SEED_PAPER[0]} | {SEED_PAPER[1]} LUT6 (PTP {SEED_PAPER[2]}) |" + " |"*(len(results) - 1))
    lines += ["", "An ECP5 LUT4 holds less logic than a Spartan-6 or 7-series LUT6: compare the LUT6 columns "
                  "with the seed paper. Clock figures are nextpnr's estimates after routing; nothing here ran "
                  "on a board."]
    return lines


# An ECP5 part's LUT4s and DP16KDs by its size (Lattice's ECP5 family data sheet, table 1.1).


def synth_only(board, out, config, device=None):
    """`board`'s SoC generated into `out` as `ethdaq build` generates it, then only Yosys (the
    build's own script): a report of the synthesised cells (LUT4 eq., FF, DP16KD, DSP) without
    clock figures."""
    from ethdaq.soc.build import build_hardware, yowasp_shims
    build_hardware(board, out, config, run=False)
    gw = Path(out).resolve() / "gateware"
    shims = yowasp_shims(Path(out).resolve() / ".tools")
    r = subprocess.run([str(shims / "yosys"), "-q", "-l", f"{board.name}.rpt", f"{board.name}.ys"], cwd=gw,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"Error: Yosys failed on {gw / (board.name + '.ys')} (log: {gw / (board.name + '.rpt')})")
    return synth_summary(gw / f"{board.name}.rpt", device or board.fpga)


def synth_summary(rpt_path, fpga):
    """Resource rows (as nextpnr_summary's) from a Yosys synth_ecp5 log's last statistics."""
    counts = collections.Counter()
    for line in Path(rpt_path).read_text().splitlines():
        m = re.match(r"\s+(\d+)\s+(CCU2C|LUT4|TRELLIS_DPR16X4|TRELLIS_FF|DP16KD|MULT18X18D)$", line)
        if m:
            counts[m.group(2)] = int(m.group(1))   # The last (top-level) statistics win.
    m = ECP5_PART.fullmatch(fpga)
    luts, brams = ECP5_CAPACITY.get(int(m.group(1)), (0, 0)) if m else (0, 0)
    return {"luts": (lut_eq(counts), luts), "ffs": (counts["TRELLIS_FF"], luts), "bram": (counts["DP16KD"], brams),
            "dsp": (counts["MULT18X18D"], 0), "clocks": [], "synth_only": True,
            "estimate": "Yosys synthesis only: LUT4 eq. (LUT4 + 2 CCU2C + 4 DPR16X4), before placement"}


# An ECP5 part number: size, speed grade, package (LFE5U-25F-6BG381C: 25, 6, BG381).
ECP5_PART = re.compile(r"LFE5UM?5?G?-(\d+)F-(\d)([A-Z]+\d+)[CI]?")


def on_device(board, device):
    """`board` (an ECP5 board) with its FPGA replaced by `device`, a part of the same package and
    speed grade (its pins and timing class are the board's)."""
    m_board = ECP5_PART.fullmatch(board.fpga)
    m_dev   = ECP5_PART.fullmatch(device)
    if m_board is None or "trellis" not in board.toolchains:
        raise ValueError(f"--device is for ECP5 boards; {board.name} has a {board.fpga}")
    if m_dev is None or m_dev.group(2, 3) != m_board.group(2, 3):
        raise ValueError(f"--device must be an ECP5 part in {board.name}'s package and speed grade "
                         f"(-{m_board.group(2)}{m_board.group(3)}), not {device!r}")
    make_platform = board.platform

    class OnDevice(board):
        fpga = device

        @staticmethod
        def platform(toolchain="trellis"):
            plat = make_platform(toolchain)
            plat.device = device
            return plat
    return OnDevice


def main(argv=None):
    from ethdaq.boards import BOARDS, get_board
    from ethdaq.soc.build import build_hardware, nextpnr_summary, xilinx_cell_summary
    from ethdaq.soc.cli.build import add_network_options, soc_config
    from ethdaq.soc.cli.common import CLIError, build_id_arg

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Every SoC option of `ethdaq build` applies (those after --synth-only); a build "
                                       "with --with-classifier, --channels, --sample-width other than 16 or "
                                       "--frontend goes to BUILD_DIR/BOARD with a suffix for each (-classifier, "
                                       "-Nch, -BITSbit, -NAME), --synth-only's to BOARD...-synth.")
    p.add_argument("--board", action="append", help="board (repeatable; default: every hardware board)")
    p.add_argument("--build-dir", default=str(ROOT / "build" / "resources"))
    p.add_argument("--from-build", help="report on an existing build directory (one board) instead of building")
    p.add_argument("--no-build", action="store_true",
                   help="report on the builds already in --build-dir (BUILD_DIR/BOARD) instead of building")
    p.add_argument("--device", help="ECP5 only: build on this part instead of the board's (same package and "
                                    "speed grade, e.g. LFE5U-45F-6BG381C for the colorlight_i5)")
    p.add_argument("--build-id", type=build_id_arg, help="the build's name in the SoC's identifier (default: the git "
                   "revision), as `ethdaq build --build-id`: the identifier is logic, so a fixed id keeps the netlist "
                   "(and nextpnr's result) the same from commit to commit; CI's builds use 'ci'")
    p.add_argument("--synth-only", action="store_true",
                   help="ECP5 only: stop after Yosys (LUT4 eq., FF, BRAM and the per-core table; no timing)")
    add_network_options(p)
    args = p.parse_args(argv)
    names = args.board or [n for n, b in BOARDS.items() if not b.is_sim]
    if args.synth_only and (args.from_build or args.no_build):
        p.error("--synth-only builds; it does not go with --from-build or --no-build")
    if args.device and len(names) != 1:
        p.error("--device needs exactly one --board")
    if args.from_build and len(names) != 1:
        p.error("--from-build needs exactly one --board (or --no-build for a directory of boards)")
    suffix = ("-classifier" if args.with_classifier else "") \
        + (f"-{args.channels}ch" if args.channels is not None else "") \
        + (f"-{args.sample_width}bit" if args.sample_width != 16 else "") \
        + (f"-{Path(args.frontend).stem}" if args.frontend else "")
    results = []
    for name in names:
        board = get_board(name)
        try:
            config = soc_config(args, board)
        except (CLIError, ValueError) as e:
            p.error(str(e))
        if args.device:
            try:
                board = on_device(board, args.device)
            except ValueError as e:
                p.error(str(e))
        xilinx = "yosys" in board.toolchains
        if args.synth_only and xilinx:
            p.error(f"--synth-only is for ECP5 boards; {name} synthesises with synth_xilinx anyway")
        elapsed = None
        report = None
        if args.synth_only:
            out = Path(args.build_dir) / (name + suffix + "-synth")
            t0 = time.monotonic()
            report = synth_only(board, out, config, args.device)
            elapsed = time.monotonic() - t0
        elif args.from_build:
            out = Path(args.from_build)
        elif args.no_build:
            out = Path(args.build_dir) / (name + suffix)
            if not (out / "gateware").is_dir():
                p.error(f"--no-build: {out / 'gateware'} does not exist (build {name} first, without --no-build)")
        else:
            out = Path(args.build_dir) / (name + suffix)
            t0 = time.monotonic()
            build_hardware(board, out, config, toolchain="yosys" if xilinx else "trellis")
            elapsed = time.monotonic() - t0
        gw = out / "gateware"
        if xilinx:
            stat = json.loads((gw / f"{name}_yosys_stat.json").read_text())
            report = xilinx_cell_summary(stat["design"]["num_cells_by_type"], board.platform().device)
            table = attribute(gw / f"{name}_yosys.json", gw / f"{name}.v", family="xc7")
        else:
            report = report or nextpnr_summary(gw / f"{name}_report.json", None)
            table = attribute(gw / f"{name}.json", gw / f"{name}.v")
        label = name + (f" on {args.device}" if args.device else "") + (" + classifier" if args.with_classifier else "") \
            + (f", {args.channels} channels" if args.channels is not None else "") \
            + (f", {args.sample_width}-bit samples" if args.sample_width != 16 else "") \
            + (f", {Path(args.frontend).name}" if args.frontend else "")
        family = "xc7" if xilinx else "ecp5"
        print_tables(label, board.fpga, report, table, elapsed, family=family)
        results.append((label, board.fpga, report, table, family))
    print("\n".join(summary_lines(results)))


if __name__ == "__main__":
    main()
