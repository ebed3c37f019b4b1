#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""nextpnr-ecp5 with a way out when its default router does not converge.

nextpnr's router1 routes the colorlight_i5's full SoC (over 80 % of the ECP5-25F's LUTs) in 3 to 6
minutes when it converges, and sometimes never does: any change to the netlist, even the git hash
in the firmware's ident string, moves the placement, and with some placements router1 was still at
20,000 unrouted arcs after 3,000 s (docs/boards/colorlight_i5.md). router2 always finished in
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

Usage (the `nextpnr-ecp5` shim of soc/tools.py runs this):
    python -m ethdaq.soc.pnr NEXTPNR [nextpnr options]
"""

import os
import subprocess
import sys
import threading
import time

# CPU seconds router1 may spend routing before router2 takes over. Converging runs took 200 to
# 380 s of wall time for the whole of routing on this project's machines.
ROUTER1_BUDGET_S = float(os.environ.get("ETHDAQ_ROUTER1_BUDGET_S", 600))
# CPU seconds router2 may spend routing. When it converged it took 60 to 300 s (colorlight_i5:
# 80 iterations, 86.5 s); on the colorlight_5a_75b it had diverged after 66 iterations, 790 s.
ROUTER2_BUDGET_S = float(os.environ.get("ETHDAQ_ROUTER2_BUDGET_S", 900))

# run()'s exit code and the start of its verdict when neither router converged within its budget
# (soc/build.py finds the verdict in the build's log and makes it the build's error).
EXIT_UNROUTABLE = 75
UNROUTABLE = "the design does not route on this FPGA"

# The line each router prints as it starts routing (after the quick "Routing globals...").
ROUTING_STARTS = ("Info: Routing..", "Info: Running router2")


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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m ethdaq.soc.pnr NEXTPNR [options]", file=sys.stderr)
        return 2
    nextpnr, args = argv[0], argv[1:]
    if option(args, "--router") is not None:
        os.execv(nextpnr, [nextpnr, *args])
    t0 = time.monotonic()
    code, router = run(nextpnr, args)
    report = option(args, "--report")
    if report is not None and code == 0:
        note = router if router == "router1" else \
            f"router2 (router1 had not converged after {ROUTER1_BUDGET_S:.0f} s of routing)"
        with open(report + ".router", "w") as f:
            f.write(note + "\n")
    if router != "none":
        sys.stdout.write(f"ethdaq: place and route took {time.monotonic() - t0:.0f} s with {router}\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
