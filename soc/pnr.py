#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""nextpnr-ecp5 with a way out when its default router does not converge.

nextpnr's router1 routes the colorlight_i5's full SoC (over 80 % of the ECP5-25F's LUTs) in 3 to 6
minutes when it converges, and sometimes never does: any change to the netlist, even the git hash
in the firmware's ident string, moves the placement, and with some placements router1 was still at
20,000 unrouted arcs after 3,000 s. router2 always finished in
about a minute of routing, with worse timing. So: router1 first, for at most
ROUTER1_BUDGET_S seconds of its own CPU time in the routing step (CPU time, not wall time, so a
busy machine does not change the outcome); past that, the build says so and routes again with
router2. router2 does not always converge either: on the colorlight_5a_75b at 88 % of the LUTs
its overused wires grew from 3,000 to 8,000 over 60 iterations (seed 2: down to 759 at iteration
25, then up to 13,897 at 74), and it never stops by itself.
It gets ROUTER2_BUDGET_S; past that the build stops with an error that says the design does not
route on this FPGA, instead of running for ever. A build that names a router itself (a board's
nextpnr_opts) runs nextpnr unchanged.

Which router made the bitstream is written beside nextpnr's report (`<report>.router`) for the
build summary.

Usage (the `nextpnr-ecp5` shim of soc/build.py runs this):
    python -m ethdaq.soc.pnr NEXTPNR [nextpnr options]
"""

import collections
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from ethdaq.soc import progress

# CPU seconds router1 may spend routing before router2 takes over. Converging runs took 200 to
# 380 s of wall time for the whole of routing on this project's machines.
ROUTER1_BUDGET_S = float(os.environ.get("ETHDAQ_ROUTER1_BUDGET_S", 600))
# CPU seconds router2 may spend routing. When it converged it took 60 to 300 s (colorlight_i5:
# 80 iterations, 86.5 s); on the colorlight_5a_75b it had diverged after 66 iterations, 790 s.
ROUTER2_BUDGET_S = float(os.environ.get("ETHDAQ_ROUTER2_BUDGET_S", 900))

# Placements to try (seeds S, S+1, ...) until every clock meets its constraint; set by soc/build.py
# from `ethdaq build --tries` for the build script's nextpnr. 1 (one placement) when unset.
TRIES_ENV = "ETHDAQ_PNR_TRIES"

# Placements `ethdaq build` tries on ECP5 boards until every clock meets its constraint (seeds
# S, S+1, ...). On the 88 %-full colorlight_i5 one netlist's eth clock ranges over
# 10 MHz between seeds around its 137.5 MHz constraint (docs/boards/README.md): one
# placement meets it about half the time, three together most of the time. A build that meets
# timing with the first placement takes no longer.
DEFAULT_TRIES = 3

# run()'s exit code and the start of its verdict when neither router converged within its budget
# (soc/build.py finds the verdict in the build's log and makes it the build's error).
EXIT_UNROUTABLE = 75
UNROUTABLE = "the design does not route on this FPGA"
# The verdict (same exit code) when the synthesised netlist needs more block RAMs or logic cells
# than the FPGA nextpnr is asked for has: said in a line before placement, not after minutes of it.
DOES_NOT_FIT = "the design does not fit this FPGA"
# The verdicts soc/build.py looks for in the build's log.
VERDICTS = (UNROUTABLE, DOES_NOT_FIT)

# Logic cells (LUT4s) and DP16KD block RAMs of each ECP5 size (nextpnr-ecp5's --25k etc.).
ECP5_CAPACITY = {12: (12096, 32), 25: (24288, 56), 45: (43848, 108), 85: (83640, 208)}

# The line each router prints as it starts routing (after the quick "Routing globals...").
ROUTING_STARTS = ("Info: Routing..", "Info: Running router2")


def ecp5_size(args):
    """The ECP5 size (12, 25, 45 or 85) nextpnr-ecp5's options ask for (--25k, --um5g-45k, ...)."""
    for a in args:
        m = re.fullmatch(r"--(?:um5g-|um-)?(\d+)k", a)
        if m and int(m.group(1)) in ECP5_CAPACITY:
            return int(m.group(1))
    return None


def netlist_cells(netlist_path):
    """Cell counts by type of the top module of a Yosys JSON netlist."""
    design = json.loads(Path(netlist_path).read_text())
    top = next((m for m in design["modules"].values() if m.get("attributes", {}).get("top")), None)
    if top is None:
        return collections.Counter()
    return collections.Counter(c["type"] for c in top["cells"].values())


def lut4_equivalent(cells):
    """LUT4s a synth_ecp5 netlist's logic takes: LUT4 + 2 per CCU2C carry cell + 4 per DPR16X4
    distributed RAM (`cells`: counts by type)."""
    return cells["LUT4"] + 2*cells["CCU2C"] + 4*cells["TRELLIS_DPR16X4"]


def fit_verdict(netlist_path, args):
    """None if the netlist can fit the ECP5 nextpnr's options name, else the line that says why not:
    more DP16KD block RAMs than the part has, or more LUT4s (lut4_equivalent) than its logic cells
    (placement needs a few percent more than that for route-throughs, so a netlist just below the
    size can still fail in nextpnr)."""
    size = ecp5_size(args)
    if size is None or netlist_path is None or not Path(netlist_path).exists():
        return None
    luts, brams = ECP5_CAPACITY[size]
    cells = netlist_cells(netlist_path)
    need_brams = cells["DP16KD"]
    need_luts = lut4_equivalent(cells)
    if need_brams > brams:
        return (f"{DOES_NOT_FIT}: it needs {need_brams} DP16KD block RAMs and the ECP5-{size}F has {brams} "
                "(fewer --channels, a narrower --sample-width, or a larger FPGA)")
    if need_luts > luts:
        return (f"{DOES_NOT_FIT}: it needs {need_luts} LUT4s and the ECP5-{size}F has {luts} "
                "(fewer --channels, a narrower --sample-width, or a larger FPGA)")
    return None


def cpu_seconds(pid):
    """User + system CPU time of process `pid` (Linux /proc), 0 if it has gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def option(args, name):
    """The value of nextpnr option `name` in `args`, or None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def _copy(stream, out, seen):
    for line in stream:
        out.write(line)
        if line.startswith(ROUTING_STARTS):
            seen.set()
    out.flush()


def _run_budgeted(cmd, budget_s, out, poll_s):
    """Run nextpnr; its exit code, or None if its routing step used more than `budget_s` seconds
    of CPU (then it has been stopped)."""
    progress.mark(progress.PLACEMENT, out)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    routing = threading.Event()
    copier = threading.Thread(target=_copy, args=(proc.stdout, out, routing), daemon=True)
    copier.start()
    routing_cpu0 = None
    while proc.poll() is None:
        if routing_cpu0 is None and routing.is_set():
            routing_cpu0 = cpu_seconds(proc.pid)
        if routing_cpu0 is not None and cpu_seconds(proc.pid) - routing_cpu0 > budget_s:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            copier.join()
            return None
        time.sleep(poll_s)
    copier.join()
    return proc.returncode


def run(nextpnr, args, budget_s=None, out=sys.stdout, poll_s=1.0, budget2_s=None):
    """Run nextpnr with router1 and the CPU budget; returns (exit code, "router1") or, if the
    budget ran out, nextpnr's result with router2: (exit code, "router2"), and (EXIT_UNROUTABLE,
    "none") if router2 overran its budget too. Output goes to `out`."""
    budget_s = ROUTER1_BUDGET_S if budget_s is None else budget_s
    budget2_s = ROUTER2_BUDGET_S if budget2_s is None else budget2_s
    code = _run_budgeted([nextpnr, *args], budget_s, out, poll_s)
    if code is not None:
        return code, "router1"
    out.write(f"ethdaq: nextpnr's router1 had not converged after {budget_s:.0f} s of routing "
              f"(CPU time); routing again with router2 (soc/pnr.py)\n")
    out.flush()
    code = _run_budgeted([nextpnr, *args, "--router", "router2"], budget2_s, out, poll_s)
    if code is not None:
        return code, "router2"
    out.write(f"ethdaq: {UNROUTABLE}: neither nextpnr's router1 "
              f"({budget_s:.0f} s) nor router2 ({budget2_s:.0f} s of routing, CPU time) converged. "
              f"The FPGA is too full for the router; use a larger FPGA or a smaller SoC "
              f"(docs/boards/README.md)\n")
    out.flush()
    return EXIT_UNROUTABLE, "none"


def clock_name(net):
    """A clock's name from nextpnr's net name for it, e.g. '$glbnet$eth_clocks0_rx$TRELLIS_IO_IN'."""
    return net.replace("$glbnet$", "").replace("$TRELLIS_IO_IN", "")


def fmax(report_path):
    """{clock: (achieved MHz, constraint MHz)} from nextpnr's JSON report."""
    with open(report_path) as f:
        report = json.load(f)
    return {name: (v.get("achieved", 0.0), v.get("constraint", 0.0)) for name, v in report.get("fmax", {}).items()}


def met(clocks):
    """Every clock at or above its constraint (the constraints carry the build's margin)."""
    return bool(clocks) and all(a >= c for a, c in clocks.values())


def slack_ratio(clocks):
    """The worst clock's achieved / constraint: how far the placement is from meeting timing."""
    return min((a / c for a, c in clocks.values() if c), default=0.0)


def with_option(args, name, value):
    """`args` with nextpnr option `name` set to `value` (replaced where it is, else appended)."""
    out, i, found = [], 0, False
    while i < len(args):
        a = args[i]
        if a == name and i + 1 < len(args):
            out += [name, value]
            i, found = i + 2, True
            continue
        if a.startswith(name + "="):
            out.append(f"{name}={value}")
            i, found = i + 1, True
            continue
        out.append(a)
        i += 1
    return out if found else out + [name, value]


def with_options(args, extra):
    """`args` with the options in `extra` (a list of words, or a string "--a 1 --b=x --flag")
    set where `args` has them and added where not; a flag (an option without a value) is added
    once. nextpnr refuses an option given twice, so a board's nextpnr_opts or a bench's
    --nextpnr must replace the build's value, not repeat it."""
    words = shlex.split(extra) if isinstance(extra, str) else list(extra)
    for i, w in enumerate(words):
        if not w.startswith("--"):
            continue
        if "=" in w:
            name, value = w.split("=", 1)
        else:
            name = w
            value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else None
        if value is None:
            args = list(args) + ([name] if name not in args else [])
        else:
            args = with_option(args, name, value)
    return args


def place(nextpnr, args, out=sys.stdout):
    """One placement and routing: (exit code, router). A router named in `args` (a board's
    nextpnr_opts) runs as it is, without the budgets."""
    if option(args, "--router") is not None:
        return _run_budgeted([nextpnr, *args], float("inf"), out, 1.0), option(args, "--router")
    return run(nextpnr, args, out=out)


def _keep(path, seed):
    return f"{path}.seed{seed}"


def sweep(nextpnr, args, tries, out=sys.stdout):
    """Place and route with seeds S, S+1, ... (S: the --seed in `args`, default 1) until every
    clock meets its constraint, at most `tries` times. The bitstream's files (--textcfg,
    --report) are the first placement that meets timing or, if none does, the one closest to it.
    Returns (exit code, attempts: [{seed, router, fmax, met}], the chosen attempt or None)."""
    report, textcfg = option(args, "--report"), option(args, "--textcfg")
    seed0 = int(option(args, "--seed") or 1)
    attempts, chosen = [], None
    for k in range(tries):
        seed = seed0 + k
        if not k:
            out.write(f"ethdaq: placing with seed {seed} (attempt 1 of {tries}, soc/pnr.py)\n")
        else:
            last = attempts[-1]
            why = ("did not route" if last["router"] == "none" else
                   "missed " + ", ".join(f"{n} ({a:.1f} < {c:.1f} MHz)" for n, (a, c) in last["fmax"].items() if a < c))
            out.write(f"ethdaq: placement with seed {last['seed']} {why}; placing again with seed {seed} "
                      f"(attempt {k + 1} of {tries}, soc/pnr.py)\n")
            out.flush()
        code, router = place(nextpnr, with_option(args, "--seed", str(seed)), out=out)
        if code == EXIT_UNROUTABLE:
            attempts.append({"seed": seed, "router": "none", "fmax": {}, "met": False})
            continue
        if code != 0:
            return code, attempts, None
        clocks = fmax(report)
        attempts.append({"seed": seed, "router": router, "fmax": clocks, "met": met(clocks)})
        if attempts[-1]["met"]:
            chosen = attempts[-1]
            break
        if k < tries - 1:   # Kept aside in case it is the closest; the last stays in place.
            for path in (report, textcfg):
                shutil.copyfile(path, _keep(path, seed))
    routed = [a for a in attempts if a["router"] != "none"]
    if chosen is None and routed:
        chosen = max(routed, key=lambda a: slack_ratio(a["fmax"]))
        if chosen is not attempts[-1]:
            for path in (report, textcfg):
                shutil.copyfile(_keep(path, chosen["seed"]), path)
            out.write(f"ethdaq: no placement met every clock's constraint; keeping seed {chosen['seed']}'s, "
                      f"the closest (soc/pnr.py)\n")
            out.flush()
    for a in attempts:
        for path in (report, textcfg):
            if os.path.exists(_keep(path, a["seed"])):
                os.remove(_keep(path, a["seed"]))
    if chosen is None:
        return (EXIT_UNROUTABLE if attempts else 1), attempts, None
    return 0, attempts, chosen


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m ethdaq.soc.pnr NEXTPNR [options]", file=sys.stderr)
        return 2
    nextpnr, args = argv[0], argv[1:]
    tries = int(os.environ.get(TRIES_ENV, "1"))
    report = option(args, "--report")
    if tries < 1:
        print(f"ethdaq: {TRIES_ENV} must be at least 1, not {tries}", file=sys.stderr)
        return 2
    verdict = fit_verdict(option(args, "--json"), args)
    if verdict is not None:
        sys.stdout.write(f"ethdaq: {verdict}\n")
        sys.stdout.flush()
        return EXIT_UNROUTABLE
    if report is None or option(args, "--textcfg") is None:
        # Without nextpnr's report there is no verdict to sweep on.
        tries = 1
    if tries == 1 and option(args, "--router") is not None:
        progress.mark(progress.PLACEMENT)
        os.execv(nextpnr, [nextpnr, *args])
    t0 = time.monotonic()
    if tries == 1:
        code, router = run(nextpnr, args)
        attempts = None
    else:
        code, attempts, chosen = sweep(nextpnr, args, tries)
        router = chosen["router"] if chosen else "none"
    if report is not None and code == 0:
        if option(args, "--router") is None:
            note = router if router == "router1" else \
                f"router2 (router1 had not converged after {ROUTER1_BUDGET_S:.0f} s of routing)"
            with open(report + ".router", "w") as f:
                f.write(note + "\n")
        if attempts is not None:
            with open(report + ".seeds", "w") as f:
                json.dump({"tries": tries, "chosen": chosen["seed"],
                           "attempts": [{**a, "fmax": {n: list(v) for n, v in a["fmax"].items()}} for a in attempts]},
                          f, indent=1)
    if router != "none":
        sys.stdout.write(f"ethdaq: place and route took {time.monotonic() - t0:.0f} s with {router}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
