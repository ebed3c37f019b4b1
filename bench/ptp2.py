#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Two simulated boards wired back to back, PTP master and slave: the accuracy of the whole
timing chain (timestamp units, CPU ports, firmware, servo) against ground truth.

Both boards are complete DAQSoCs (VexRiscv running the real firmware from ROM, LiteEth, the
timestamp unit) in one Verilator model, clocked by the same 125 MHz clock. Their GMII pins are
crossed through a delay line of `cable` cycles each way (bench/verilator/tb_ptp2.cpp). The
slave's oscillator runs off nominal by `ppm` (its PTP clock advances by the nominal period times
(1 + ppm 1e-6) per cycle: ptpclock.PTPClock with_osc_error, set at run time). Each sample interval the
testbench reads both clocks' time in the same cycle: the true offset, slave minus master.

    .venv/bin/python bench/ptp2.py                 # -100, 0, +100 ppm, the table of docs/ptp.md
    .venv/bin/python bench/ptp2.py --ppm 50 --seconds 0.5 --cable 100
    .venv/bin/python bench/ptp2.py --phy mii --ppm 100 --cable 52   # LiteEth's MII PHY, 100 Mb/s

Simulated time only; on hardware the PHY chips' latencies and their variation add to this.
"""

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO.parent) not in sys.path:
    sys.path.insert(0, str(REPO.parent))

TB = REPO / "bench" / "verilator" / "tb_ptp2.cpp"
PERIOD_NS = 8

# Fast message rates: simulated time is expensive (about 1 s of wall time per simulated ms).
DEFAULTS = dict(ptp_log_sync=-7, ptp_log_delay_req=-7, ptp_log_announce=-8, ptp_status_log=-7)

BOARDS = {
    # build name: (role, IP, MAC)
    "ptpm": ("master", "192.168.1.50", "10:e2:d5:00:00:01"),
    "ptps": ("slave",  "192.168.1.51", "10:e2:d5:00:00:02"),
}


def sim_board(phy="gmii"):
    """The simulated board, or with phy="mii" the same with LiteEth's MII PHY at 100 Mb/s on a
    25 MHz clock (gateware/simphy.py SimMIIPHY), as the digilent_arty's PHY: its timestamp
    corrections (ptp_phy) and link speed."""
    from ethdaq.boards import get_board
    board = get_board("sim")
    if phy == "gmii":
        return board
    if phy != "mii":
        raise ValueError(f"phy must be 'gmii' or 'mii', not {phy!r}")
    from ethdaq.gateware.simphy import SimMIIPHY

    class SimMII(board):
        description = "Simulated board with LiteEth's MII PHY (100 Mb/s), for two-board runs"
        phy         = "MII (LiteEth), 25 MHz from sys"
        link        = "100M"
        ptp_phy     = "mii"

        @staticmethod
        def ethphy(platform):
            return SimMIIPHY(platform, platform.request("gmii_eth"))
    return SimMII


def build(output_dir, transport="udp", verbose=False, phy="gmii", tb=TB, boards=BOARDS, with_streamer=False,
          **ptp_kwargs):
    """Both boards' gateware + firmware, and the two-board Verilator binary of testbench `tb`.
    Returns the run directory (binary obj/Vtop; the ROM images it reads at start-up are there)."""
    from ethdaq.soc import build as socbuild
    from ethdaq.soc.socconfig import SoCConfig
    board = sim_board(phy)
    output_dir = Path(output_dir).resolve()
    settings = {**DEFAULTS, **ptp_kwargs}
    sources = []
    for name, (role, ip, mac) in boards.items():
        soc = socbuild.make_soc(board, SoCConfig(ip_address=ip, mac_address=mac, ptp_role=role,
            ptp_transport=transport, with_ptp_testbench=True, with_streamer=with_streamer, **settings))
        builder = socbuild.DAQBuilder(soc, output_dir=str(output_dir / name))
        config = board.sim_config(soc.sys_clk_freq, "unused", "192.168.1.100")
        with socbuild.output_to(output_dir / f"{name}.log", verbose=verbose), socbuild._path_prepended():
            builder.build(build_name=name, sim_config=config, build=True, run=False, interactive=False)
        sources += [Path(p) for p, _, _ in soc.platform.sources if str(p).endswith(".v")]
    run_dir = compile_tb(output_dir, sources, tb, list(boards))
    if phy == "mii":
        # The simulated PHY chips' link partner (gateware/simphy.py, the file `cable` both read):
        # 100 Mb/s, as a switch port would be for an MII board (without it the partner does
        # 1000 Mb/s and the firmware warns that no frame passes).
        from ethdaq.gateware.simphy import cable_line
        (run_dir / "cable").write_text(cable_line(speed=100))
    return run_dir


PORTS = [  # (name, direction, width) of each board's top module (boards/sim.py pins)
    ("gmii_eth_rx_data", "input", 8), ("gmii_eth_rx_dv", "input", 1), ("gmii_eth_rx_er", "input", 1),
    ("gmii_eth_tx_data", "output", 8), ("gmii_eth_tx_en", "output", 1), ("gmii_eth_tx_er", "output", 1),
    ("ptp_osc_error", "input", 32), ("ptp_time_ns", "output", 64),
    ("serial_sink_data", "input", 8), ("serial_sink_ready", "output", 1), ("serial_sink_valid", "input", 1),
    ("serial_source_data", "output", 8), ("serial_source_ready", "input", 1), ("serial_source_valid", "output", 1),
]


def _wrapper(modules):
    """top: boards `modules` (master, slave: ports m_*, s_*) on one clock and reset."""
    ports, body = ["input wire sys_clk", "input wire sys_rst", "input wire sim_trace"], []
    for module, p in zip(modules, ["m", "s"]):
        conns = [".sys_clk(sys_clk)", ".sys_rst(sys_rst)", ".sim_trace(sim_trace)"]
        for name, direction, width in PORTS:
            ports.append(f"{direction} wire [{width - 1}:0] {p}_{name}")
            conns.append(f".{name}({p}_{name})")
        body.append(f"{module} {p} (\n    " + ",\n    ".join(conns) + "\n);")
    return "module top (\n    " + ",\n    ".join(ports) + "\n);\n" + "\n".join(body) + "\nendmodule\n"


def compile_tb(output_dir, sources, tb=TB, modules=tuple(BOARDS)):
    run_dir = output_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    unique = []
    for s in sources:
        if s.name not in [u.name for u in unique]:
            unique.append(s)
    # Memory images are read relative to the working directory at start-up.
    for s in unique:
        for init in s.parent.glob("*.init"):
            shutil.copy(init, run_dir / init.name)
    digest = hashlib.sha256(tb.read_bytes() + _wrapper(modules).encode())
    for header in sorted(tb.parent.glob("*.h")):   # What the testbenches include (tbutil.h).
        digest.update(header.read_bytes())
    for s in unique:
        digest.update(re.sub(rb"//.*(Date|Auto-Generated).*\n", b"", s.read_bytes()))
    stamp, exe = run_dir / "stamp", run_dir / "obj" / "Vtop"
    if exe.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        return run_dir
    shutil.rmtree(run_dir / "obj", ignore_errors=True)
    wrapper = run_dir / "top.v"
    wrapper.write_text(_wrapper(modules))
    r = subprocess.run(["verilator", "--cc", str(wrapper), *map(str, unique), "--exe", str(tb),
                        "--build", "-j", "2", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", "top",
                        "-O3", "-CFLAGS", "-O2", "--Mdir", str(run_dir / "obj")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"verilator failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    stamp.write_text(digest.hexdigest())
    return run_dir



# Running and reading ------------------------------------------------------------------------------

STATUS = re.compile(r"^S: ptp: (\w+) (\w+) offset=(-?\d+) delay=(-?\d+) freq=(-?\d+\.\d+) ppb")


@dataclass
class Result:
    ppm:        float
    cable:      int                    # cycles, each way
    seconds:    float                  # simulated
    samples:    list = field(default_factory=list)   # (t_ns, true offset ns: slave - master)
    status:     list = field(default_factory=list)   # (t_ns, state, servo, offset, delay, freq_ppb)
    console:    list = field(default_factory=list)   # every console line, "M: ..." / "S: ..."
    threshold:  int = PERIOD_NS

    @property
    def true_delay_ns(self):
        return self.cable * PERIOD_NS

    @property
    def expected_freq_ppb(self):
        """The adjustment that cancels the slave's oscillator error: -ppm / (1 + ppm 1e-6)."""
        return -self.ppm * 1e3 / (1 + self.ppm * 1e-6)

    @property
    def converged_s(self):
        """Simulated time from which, to the end, the true offset stays within the threshold and
        the slave reports SLAVE; None if it never gets there."""
        bad = [i for i, (t, off) in enumerate(self.samples) if abs(off) > self.threshold]
        start = bad[-1] + 1 if bad else 0
        not_slave = [i for i, s in enumerate(self.status) if s[1] != "SLAVE"]
        first_slave = not_slave[-1] + 1 if not_slave else 0
        if start >= len(self.samples) or first_slave >= len(self.status):
            return None
        return max(self.samples[start][0], self.status[first_slave][0]) / 1e9

    def steady(self):
        """Samples and status lines after convergence."""
        c = self.converged_s
        if c is None:
            return [], []
        t0 = c * 1e9
        return [off for t, off in self.samples if t >= t0], [s for s in self.status if s[0] >= t0]

    def summary(self):
        offsets, status = self.steady()
        d = dict(ppm=self.ppm, converged_s=self.converged_s, samples=len(offsets),
                 true_delay_ns=self.true_delay_ns, expected_freq_ppb=self.expected_freq_ppb)
        if offsets:
            d.update(offset_mean=statistics.fmean(offsets), offset_max=max(map(abs, offsets)))
        if status:
            errs = [s[4] - self.true_delay_ns for s in status]
            d.update(delay_err_mean=statistics.fmean(errs), delay_err_max=max(map(abs, errs)),
                     reported_offset_max=max(abs(s[3]) for s in status),
                     freq_ppb=statistics.fmean(s[5] for s in status))
        return d


def osc_error(ppm):
    """tsu osc_error value (2^-F ns per cycle) of an oscillator `ppm` off nominal at 125 MHz."""
    from ethdaq.gateware.ptpclock import frac_bits_for, modelled_increment, nominal_increment
    f, F = 125e6, frac_bits_for(125e6)
    return modelled_increment(f, F, ppm) - nominal_increment(f, F)


def run(run_dir, ppm, cable=50, seconds=0.2, sample_cycles=12500, echo=False):
    """One simulation of `seconds` simulated time; the slave's oscillator `ppm` off."""
    run_dir = Path(run_dir).resolve()
    cycles = int(seconds * 1e9 / PERIOD_NS)
    cmd = [str(Path(run_dir) / "obj" / "Vtop"), f"cycles={cycles}", f"cable={cable}",
           f"sample={sample_cycles}", "m_osc=0", f"s_osc={osc_error(ppm)}"]
    result = Result(ppm, cable, seconds)
    now = 0
    with subprocess.Popen(cmd, cwd=run_dir, stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.startswith("T "):
                _, k, tm, ts = line.split()
                now = int(k) * PERIOD_NS
                result.samples.append((now, int(ts) - int(tm)))
                continue
            result.console.append(line)
            if echo:
                print(line, flush=True)
            m = STATUS.match(line)
            if m:
                state, servo, off, delay, freq = m.groups()
                result.status.append((now, state, servo, int(off), int(delay), float(freq)))
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}")
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ppm", type=float, nargs="+", default=[-100, 0, 100],
                   help="slave oscillator errors to run (default -100 0 100)")
    p.add_argument("--cable", type=int, default=50, help="cable delay each way, cycles of 8 ns (default 50)")
    p.add_argument("--seconds", type=float, default=0.2, help="simulated seconds per run (default 0.2)")
    p.add_argument("--transport", choices=["udp", "l2"], default="udp")
    p.add_argument("--phy", choices=["gmii", "mii"], default="gmii",
                   help="the boards' PHY: GMII at 1 Gb/s, or LiteEth's MII at 100 Mb/s (the digilent_arty's)")
    p.add_argument("--output-dir", default=str(REPO / "build" / "ptp2"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--echo", action="store_true", help="print the consoles")
    args = p.parse_args(argv)
    from concurrent.futures import ThreadPoolExecutor
    print(f"building both boards ({args.transport}, {args.phy}) ...", flush=True)
    run_dir = build(Path(args.output_dir) / (args.transport + ("" if args.phy == "gmii" else "-" + args.phy)),
                    transport=args.transport, phy=args.phy)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda ppm: run(run_dir, ppm, args.cable, args.seconds, echo=args.echo), args.ppm))
    print(f"\nTwo simulated boards ({args.phy.upper()}), PTP over {args.transport}, cable {args.cable} cycles = "
          f"{args.cable * PERIOD_NS} ns each way, {args.seconds:g} s simulated each "
          f"(.venv/bin/python bench/ptp2.py{' ' + ' '.join(argv or sys.argv[1:]) if (argv or sys.argv[1:]) else ''})\n")
    print("| slave ppm | converged at (s) | true offset mean (ns) | true offset max (ns) | samples "
          "| path delay error mean / max (ns) | freq adj mean (ppb) | expected (ppb) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        s = r.summary()
        if s["converged_s"] is None:
            print(f"| {r.ppm:+g} | not converged | | | | | | {s['expected_freq_ppb']:.3f} |")
            continue
        print(f"| {r.ppm:+g} | {s['converged_s']:.4f} | {s['offset_mean']:+.2f} | {s['offset_max']} | {s['samples']} "
              f"| {s.get('delay_err_mean', float('nan')):+.2f} / {s.get('delay_err_max', '-')} "
              f"| {s.get('freq_ppb', float('nan')):.3f} | {s['expected_freq_ppb']:.3f} |")
    return 0 if all(r.converged_s is not None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
