#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Resource and timing table of the boards' full DAQ SoC (issue 8), built as a user builds it.

For each board: `ethdaq build` (through soc.build.build_hardware: Yosys synth_ecp5 -abc9, nextpnr,
ecppack), then one table of LUT/FF/BRAM/DSP use and per-clock achieved vs required frequency
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

The seed paper's VHDL stack (Spartan-6, LUT6) is printed beside for reference: 4906 LUTs with
PTP, of which 2071 are PTP. An ECP5 LUT4 holds less logic than a Spartan-6 LUT6, so the
figures are not directly comparable.
"""

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT.parent))

# Migen name prefix -> core. First match wins (longest prefixes first where they overlap).
CORES = [
    ("CPU (VexRiscv minimal)",   ("VexRiscv", "cpu_", "vexriscv")),
    ("CPU mailboxes (ctl, PTP)", ("ctlport", "cpumacport", "ptp_l2")),
    ("timestamp unit (PTP)",     ("ptpclock", "ptp_", "ptptimestamper", "ptp")),
    ("streamer + emulators",     ("daqstreamer", "detectoremulator", "txpath_pipe", "txpath_data_buf")),
    ("IP/UDP/ARP/ICMP",          ("ethcore_ip", "ethcore_arp", "ethcore_icmp", "ethcore_udp", "liteethip",
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


MEMORY_WRITE = re.compile(r"^\s*(?:if\s*\([^)]*\)\s*)?((?:storage|mem)(?:_\d+)?)\[[^\]]*\]\s*<=\s*([A-Za-z_][A-Za-z0-9_]*)", re.M)


def memory_writers(verilog_path):
    """LiteX names memories storage, storage_1, mem_1, ...: map each to the signal written into
    it, whose name says which core it belongs to."""
    text = Path(verilog_path).read_text()
    return {m.group(1): m.group(2) for m in MEMORY_WRITE.finditer(text)}


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


def attribute(netlist_path, verilog_path):
    """Per-core counts of LUT4, CCU2C, DPR16X4, DP16KD and FF from a Yosys JSON netlist."""
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
    kind = {}
    for cn, c in cells.items():
        t = c["type"]
        for k in ("TRELLIS_FF", "DP16KD", "TRELLIS_DPR16X4", "LUT4", "CCU2C", "PFUMX", "L6MUX21", "MULT18X18D"):
            if t == k or t.endswith("\\" + k):
                kind[cn] = k
    owner = {cn: core_of_(cn) for cn, k in kind.items() if k in ("TRELLIS_FF", "DP16KD", "TRELLIS_DPR16X4", "MULT18X18D")}

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
                    if l not in owner and l not in seen and l not in memo and kind.get(l) in ("LUT4", "CCU2C", "PFUMX", "L6MUX21"):
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


def lut_eq(c):
    return c["LUT4"] + 2*c["CCU2C"] + 4*c["TRELLIS_DPR16X4"]


def print_tables(board, fpga, report, table, elapsed=None):
    print(f"\n## {board} ({fpga})" + (f", built in {elapsed/60:.1f} min" if elapsed else ""))
    print()
    print("| resource | used | available | % |")
    print("|---|---:|---:|---:|")
    for key, label in [("luts", "LUT4 (TRELLIS_COMB)"), ("ffs", "FF"), ("bram", "BRAM (DP16KD)"), ("dsp", "DSP (MULT18X18D)")]:
        used, avail = report.get(key, (0, 0))
        pct = f"{100.0*used/avail:.1f}" if avail else "-"
        print(f"| {label} | {used} | {avail} | {pct} |")
    print()
    print("| clock | required MHz | achieved MHz | margin | status |")
    print("|---|---:|---:|---:|---|")
    for c in report["clocks"]:
        margin = 100.0*(c["achieved_mhz"]/c["required_mhz"] - 1) if c["required_mhz"] else 0.0
        status = "met, >= 10 % margin" if margin >= 10 else ("met" if c["met"] else "FAILED")
        print(f"| {c['clock']} | {c['required_mhz']:.1f} | {c['achieved_mhz']:.1f} | {margin:+.0f} % | {status} |")
    print()
    print("| core (attributed, see bench/resources.py) | LUT4 eq. | LUT4 | CCU2C | DPR16X4 | FF | DP16KD |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total = collections.Counter()
    for core, c in sorted(table.items(), key=lambda kv: -lut_eq(kv[1])):
        total.update(c)
        print(f"| {core} | {lut_eq(c)} | {c['LUT4']} | {c['CCU2C']} | {c['TRELLIS_DPR16X4']} | {c['TRELLIS_FF']} | {c['DP16KD']} |")
    print(f"| total | {lut_eq(total)} | {total['LUT4']} | {total['CCU2C']} | {total['TRELLIS_DPR16X4']} | {total['TRELLIS_FF']} | {total['DP16KD']} |")
    print(f"| {SEED_PAPER[0]} | {SEED_PAPER[1]} LUT6 (PTP {SEED_PAPER[2]}) | | | | | |")


def main(argv=None):
    from ethdaq.boards import BOARDS, get_board
    from ethdaq.soc.build import build_hardware, nextpnr_summary

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--board", action="append", help="board (repeatable; default: every ECP5 board)")
    p.add_argument("--build-dir", default=str(ROOT / "build" / "resources"))
    p.add_argument("--from-build", help="report on an existing build directory (one board) instead of building")
    args = p.parse_args(argv)
    names = args.board or [n for n, b in BOARDS.items() if not b.is_sim and "trellis" in b.toolchains]
    for name in names:
        board = get_board(name)
        elapsed = None
        if args.from_build:
            out = Path(args.from_build)
        else:
            out = Path(args.build_dir) / name
            t0 = time.monotonic()
            build_hardware(board, out)
            elapsed = time.monotonic() - t0
        gw = out / "gateware"
        report = nextpnr_summary(gw / f"{name}_report.json", None)
        table = attribute(gw / f"{name}.json", gw / f"{name}.v")
        print_tables(name, board.fpga, report, table, elapsed)


if __name__ == "__main__":
    main()
