"""soc/pnr.py: nextpnr with router1 first and router2 when router1 overruns its CPU budget,
driven with a stand-in nextpnr (a script that behaves like one) so it runs in seconds."""

import io
import subprocess
import sys
import textwrap

import pytest

from ethdaq.soc import build, pnr

# A stand-in nextpnr: places, then routes. With router1 it converges only if told to
# (--converge), else spins printing progress like router1 stuck at thousands of arcs (and fails
# after a minute);
# router2 finishes unless told not to (--stuck2), then it spins like router1. Writes the
# report it is asked for.
FAKE = textwrap.dedent('''\
    #!{python}
    import json, sys, time
    args = sys.argv[1:]
    print("Info: Placed 100 cells", flush=True)
    print("Info: Routing globals...", flush=True)
    router = args[args.index("--router") + 1] if "--router" in args else "router1"
    # What each router prints as it starts (nextpnr-ecp5 0.7): router2 never prints "Routing..".
    print("Info: Routing.." if router == "router1" else "Info: Running router2...", flush=True)
    if (router == "router1" and "--converge" not in args) or (router == "router2" and "--stuck2" in args):
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 60:  # Gives up by itself: a broken budget fails, not hangs.
            n += 1
            if n % 200000 == 0:
                print(f"Info: {{n:10d}} |  remaining 21000", flush=True)
        sys.exit(3)
    if "--report" in args:
        open(args[args.index("--report") + 1], "w").write(json.dumps({{"router": router}}))
    print(f"Info: Routing complete ({{router}}).", flush=True)
    ''')


@pytest.fixture
def fake(tmp_path):
    path = tmp_path / "nextpnr-ecp5"
    path.write_text(FAKE.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_router1_that_converges_is_used_as_it_is(fake):
    out = io.StringIO()
    assert pnr.run(str(fake), ["--converge"], budget_s=60, out=out) == (0, "router1")
    assert "Routing complete (router1)" in out.getvalue() and "router2" not in out.getvalue()


def test_router1_past_its_cpu_budget_gives_way_to_router2(fake):
    out = io.StringIO()
    assert pnr.run(str(fake), ["--seed", "1"], budget_s=0.5, out=out, poll_s=0.05) == (0, "router2")
    text = out.getvalue()
    assert "router1 had not converged after 0 s of routing" in text
    assert text.count("Info: Routing..") == 1 and text.count("Info: Running router2...") == 1
    assert "Routing complete (router2)" in text


def test_router2_past_its_budget_too_ends_the_build_with_a_verdict(fake):
    """router2 does not always converge either (colorlight_5a_75b at 88 % of its LUTs): it has a
    budget too, and then the build stops and says why instead of running for ever."""
    out = io.StringIO()
    code, router = pnr.run(str(fake), ["--stuck2"], budget_s=0.5, budget2_s=0.5, out=out, poll_s=0.05)
    assert (code, router) == (pnr.EXIT_UNROUTABLE, "none")
    text = out.getvalue()
    assert text.count("Info: Routing..") == 1 and text.count("Info: Running router2...") == 1
    assert "Routing complete" not in text
    assert "ethdaq: the design does not route on this FPGA: neither nextpnr's router1 (0 s) nor router2 (0 s" in text


def test_the_build_error_is_the_verdict(tmp_path):
    from ethdaq.soc.build import _unroutable
    assert _unroutable(tmp_path) is None
    (tmp_path / "build.log").write_text("Info: Routing..\nethdaq: the design does not route on this FPGA: x\n")
    assert _unroutable(tmp_path) == "the design does not route on this FPGA: x"


def test_the_command_line_notes_the_router_beside_the_report(fake, tmp_path):
    report = tmp_path / "board_report.json"
    env = {"ETHDAQ_ROUTER1_BUDGET_S": "0.5", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "ethdaq.soc.pnr", str(fake), "--report", str(report)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"router2"' in report.read_text()
    assert (tmp_path / "board_report.json.router").read_text().startswith("router2 (router1 had not converged")
    assert "place and route took" in r.stdout


def test_a_router_chosen_by_the_build_is_left_alone(fake, tmp_path):
    """A board's own --router (a board file's nextpnr_opts) goes to nextpnr unchanged, no budget."""
    report = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "ethdaq.soc.pnr", str(fake), "--router", "router1", "--converge",
                        "--report", str(report)], capture_output=True, text=True, timeout=60,
                       env={"ETHDAQ_ROUTER1_BUDGET_S": "0", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and "Routing complete (router1)" in r.stdout, r.stdout + r.stderr
    assert not (tmp_path / "r.json.router").exists()


def test_the_nextpnr_shim_runs_through_pnr(tmp_path):
    shims = build.yowasp_shims(tmp_path)
    assert "-m ethdaq.soc.pnr" in (shims / "nextpnr-ecp5").read_text()
    assert "ethdaq.soc.pnr" not in (shims / "yosys").read_text()


# A stand-in nextpnr for placement tries: its eth clock reaches FAKE_FMAX's figure for its --seed
# (seed:MHz,...), against a 137.5 MHz constraint; it writes the report and the textual config
# (naming the seed) it is asked for.
FAKE_SEEDS = textwrap.dedent('''\
    #!{python}
    import json, os, sys
    args = sys.argv[1:]
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    fmax = dict(kv.split(":") for kv in os.environ["FAKE_FMAX"].split(","))
    print("Info: Routing..", flush=True)
    open(args[args.index("--report") + 1], "w").write(json.dumps(
        {{"fmax": {{"$glbnet$eth": {{"achieved": float(fmax[str(seed)]), "constraint": 137.5}},
                  "$glbnet$sys_clk": {{"achieved": 70.0, "constraint": 66.0}}}}}}))
    open(args[args.index("--textcfg") + 1], "w").write(f"placed with seed {{seed}}\\n")
    print(f"Info: Routing complete (seed {{seed}}).", flush=True)
    ''')


def sweep(tmp_path, fmax, tries, seed=None):
    fake = tmp_path / "nextpnr-ecp5"
    fake.write_text(FAKE_SEEDS.format(python=sys.executable))
    fake.chmod(0o755)
    report, cfg = tmp_path / "b_report.json", tmp_path / "b.config"
    args = [str(fake), "--textcfg", str(cfg), "--report", str(report), *(["--seed", str(seed)] if seed else [])]
    env = {"PATH": "/usr/bin:/bin", "FAKE_FMAX": fmax, **({pnr.TRIES_ENV: str(tries)} if tries else {})}
    r = subprocess.run([sys.executable, "-m", "ethdaq.soc.pnr", *args], capture_output=True, text=True, env=env, timeout=120)
    seeds = tmp_path / "b_report.json.seeds"
    placements = __import__("json").loads(seeds.read_text()) if seeds.exists() else None
    leftovers = sorted(p.name for p in tmp_path.iterdir() if ".seed" in p.name and not p.name.endswith(".seeds"))
    return r, cfg.read_text(), placements, leftovers


def test_a_placement_that_meets_timing_is_the_only_one(tmp_path):
    r, cfg, placements, leftovers = sweep(tmp_path, "1:140,2:120", tries=3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert cfg == "placed with seed 1\n" and r.stdout.count("Info: Routing..") == 1
    assert placements["chosen"] == 1 and [a["seed"] for a in placements["attempts"]] == [1]
    assert placements["attempts"][0]["met"] and not leftovers


def test_a_missed_clock_places_again_with_the_next_seed(tmp_path):
    r, cfg, placements, leftovers = sweep(tmp_path, "4:128.1,5:138.3,6:139.6", tries=3, seed=4)
    assert r.returncode == 0, r.stdout + r.stderr
    assert cfg == "placed with seed 5\n"
    assert "placement with seed 4 missed $glbnet$eth (128.1 < 137.5 MHz); placing again with seed 5 (attempt 2 of 3" in r.stdout
    assert [(a["seed"], a["met"]) for a in placements["attempts"]] == [(4, False), (5, True)]
    assert placements["chosen"] == 5 and not leftovers
    assert __import__("json").loads((tmp_path / "b_report.json").read_text())["fmax"]["$glbnet$eth"]["achieved"] == 138.3


def test_when_no_placement_meets_timing_the_closest_is_kept(tmp_path):
    r, cfg, placements, leftovers = sweep(tmp_path, "1:120,2:135,3:130", tries=3)
    assert r.returncode == 0, r.stdout + r.stderr
    assert cfg == "placed with seed 2\n"
    assert "no placement met every clock's constraint; keeping seed 2's, the closest" in r.stdout
    assert placements["chosen"] == 2 and not any(a["met"] for a in placements["attempts"]) and not leftovers
    assert __import__("json").loads((tmp_path / "b_report.json").read_text())["fmax"]["$glbnet$eth"]["achieved"] == 135


def test_one_try_is_one_placement_as_before(tmp_path):
    r, cfg, placements, _ = sweep(tmp_path, "1:120,2:140", tries=None)
    assert r.returncode == 0 and cfg == "placed with seed 1\n" and placements is None
    assert r.stdout.count("Info: Routing..") == 1


def test_the_build_summary_lists_the_placements():
    from ethdaq.soc.build import format_summary
    placements = {"tries": 3, "chosen": 2, "attempts": [
        {"seed": 1, "router": "router1", "met": False, "fmax": {"$glbnet$sys_clk": [70.0, 66.0], "$glbnet$eth_clocks0_rx$TRELLIS_IO_IN": [128.1, 137.5]}},
        {"seed": 2, "router": "router1", "met": True, "fmax": {"$glbnet$sys_clk": [67.6, 66.0], "$glbnet$eth_clocks0_rx$TRELLIS_IO_IN": [138.3, 137.5]}}]}
    text = format_summary({"luts": (1, 2), "ffs": (1, 2), "bram": (1, 2), "clocks": [], "placements": placements})
    assert "placed with nextpnr seed 2 (2 of up to 3 placements tried):" in text
    assert "seed 1: missed (MHz achieved/constraint: eth_clocks0_rx 128.1/137.5, sys_clk 70.0/66.0)" in text
    assert "seed 2: every clock met its constraint" in text


def test_placement_tries_keep_a_router_chosen_by_the_build(fake, tmp_path):
    """Each placement of a build with tries runs a board's own --router as it is (no budget, no
    router1 first), its output passed on as it comes."""
    report = tmp_path / "r.json"
    out = io.StringIO()
    assert pnr.place(str(fake), ["--router", "router2", "--report", str(report)], out=out) == (0, "router2")
    assert "Running router2" in out.getvalue() and "Info: Routing.." not in out.getvalue()


def test_placement_tries_are_for_ecp5_builds_and_bounded():
    from ethdaq.boards import get_board
    from ethdaq.soc.build import BuildError, check_placement_options
    check_placement_options(get_board("colorlight_i5"), "trellis", 1, 3)
    with pytest.raises(BuildError, match="--tries is nextpnr's, for ECP5 boards; sim builds with Verilator"):
        check_placement_options(get_board("sim"), "verilator", 1, 2)
    with pytest.raises(BuildError, match="--tries must be 1 to 20 placements, not 0"):
        check_placement_options(get_board("colorlight_i5"), "trellis", 1, 0)
    with pytest.raises(BuildError, match="--tries must be 1 to 20 placements, not 21"):
        check_placement_options(get_board("colorlight_i5"), "trellis", 1, 21)


def _netlist(path, **cells):
    """A Yosys JSON netlist whose top module holds `cells` (type: count), as synth_ecp5 writes it."""
    import json
    top = {"attributes": {"top": "00000000000000000000000000000001"}, "ports": {}, "netnames": {},
           "cells": {f"${t}${i}": {"type": t, "connections": {}} for t, n in cells.items() for i in range(n)}}
    path.write_text(json.dumps({"modules": {"sub": {"attributes": {}, "cells": {"$x": {"type": "DP16KD"}}},
                                            "top": top}}))
    return path


def test_a_netlist_with_more_block_rams_or_luts_than_the_part_is_refused_before_placement(tmp_path):
    """The verdict names what is short, how much is needed and what the part has; cells of
    sub-modules do not count (synth_ecp5 flattens: the top module holds the design)."""
    fits = _netlist(tmp_path / "a.json", DP16KD=56, LUT4=20000, CCU2C=1000, TRELLIS_DPR16X4=50)
    assert pnr.fit_verdict(str(fits), ["--25k", "--json", str(fits)]) is None
    brams = _netlist(tmp_path / "b.json", DP16KD=60, LUT4=100)
    assert pnr.fit_verdict(str(brams), ["--25k"]) == (
        "the design does not fit this FPGA: it needs 60 DP16KD block RAMs and the ECP5-25F has 56 "
        "(fewer --channels, a narrower --sample-width, or a larger FPGA)")
    assert pnr.fit_verdict(str(brams), ["--um5g-45k"]) is None
    luts = _netlist(tmp_path / "c.json", LUT4=20000, CCU2C=2000, TRELLIS_DPR16X4=100)
    verdict = pnr.fit_verdict(str(luts), ["--25k"])
    assert "it needs 24400 LUT4s and the ECP5-25F has 24288" in verdict
    # No size option (not an ECP5 nextpnr command line) or no netlist: nothing to judge.
    assert pnr.fit_verdict(str(brams), ["--freq", "60"]) is None
    assert pnr.fit_verdict(str(tmp_path / "missing.json"), ["--25k"]) is None


def test_the_command_line_refuses_a_netlist_that_does_not_fit_without_running_nextpnr(tmp_path):
    """`python -m ethdaq.soc.pnr` says the verdict in one line and exits with the unroutable code;
    the nextpnr it was given (here a path that does not exist) never runs. The build's error is
    that line (soc/build.py reads it from the build's log)."""
    from ethdaq.soc.build import _unroutable
    netlist = _netlist(tmp_path / "top.json", DP16KD=57)
    r = subprocess.run([sys.executable, "-m", "ethdaq.soc.pnr", str(tmp_path / "no-nextpnr"), "--25k",
                        "--json", str(netlist), "--report", str(tmp_path / "r.json")],
                       capture_output=True, text=True)
    assert r.returncode == pnr.EXIT_UNROUTABLE, r.stderr
    assert r.stdout.splitlines() == ["ethdaq: the design does not fit this FPGA: it needs 57 DP16KD block RAMs "
                                     "and the ECP5-25F has 56 (fewer --channels, a narrower --sample-width, "
                                     "or a larger FPGA)"]
    (tmp_path / "build.log").write_text("Info: ...\n" + r.stdout)
    assert _unroutable(tmp_path).startswith("the design does not fit this FPGA: it needs 57 DP16KD")


def test_a_failed_toolchain_leaves_the_process_where_it_was(tmp_path, monkeypatch):
    """LiteX's toolchain changes into the gateware directory and, when a tool fails, does not change
    back; the build's error (and the log named by a relative --output-dir) must still be found from
    where the user started. Here the toolchain is a stand-in that changes directory and fails."""
    import os
    from ethdaq.boards import get_board
    from ethdaq.soc import build

    def failing(self, *args, **kwargs):
        os.makedirs(self.gateware_dir, exist_ok=True)
        os.chdir(self.gateware_dir)
        raise subprocess.CalledProcessError(1, ["yosys"])
    monkeypatch.setattr(build.DAQBuilder, "build", failing)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(build.BuildError, match="digilent_arty build failed: Command '\\['yosys'\\]'"):
        build._build_hardware(get_board("digilent_arty"), "out", None, "yosys", False, 1, None)
    assert os.getcwd() == str(tmp_path)
