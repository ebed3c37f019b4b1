#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Transmit classes and time-triggered launches, cycle-accurate (Migen simulation): the PTP clock
(sys) arms the launcher (gateware/launcher.py), the transmit path (gateware/txpath.py, eth_tx on the
same clock, as on the simulated board) merges the launcher (class 0), LiteEth's frames (class 1)
and bulk DAQ datagrams (class 2: canned-header framer, LiteEth's CRC and preamble inserters) in
front of LiteEth's GMII PHY. Everything is judged at the GMII pins by the bench itself: the cycle
the first preamble byte is on the pins, the PTP clock's time in that cycle, every frame's bytes.

    .venv/bin/python -m bench.txclasses            # the table in docs/realtime.md (minutes)

test/gateware/test_launcher.py runs the same harness with short frames.
"""

import random
import zlib

from migen import *
from migen.sim import passive, run_simulation

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.phy.gmii import LiteEthPHYGMIITX
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from ethdaq.gateware.launcher import LATENCY_CYCLES, Launcher, guard_cycles
from ethdaq.gateware.ptpclock import PTPClock
from ethdaq.gateware.tsu import PHY_FPGA_LATENCY_CYCLES
from ethdaq.gateware.txpath import TXPath

CLK_NS    = 8
BOARD_MAC = 0x10e2d5000001
BOARD_IP  = "192.168.1.50"
HOST_MAC  = 0x020000000001
HOST_IP   = 0xC0A80101
IFG       = 12
# Cycles from a class-1 frame offered at TXPath's MAC input to the scheduler's choice (LiteEth's
# buffer, the registered choice): a bulk frame starting on the pins within this many cycles (plus
# the pins' own 2) of the offer was already chosen.
PATH      = 6
# Slack in the wait bound: the path's registers between the offer and the pins.
PATH_SLACK = 4


class _PHY:
    dw = 8

    def __init__(self, pads):
        self.tx     = LiteEthPHYGMIITX(pads)
        self.sink   = self.tx.sink
        self.source = stream.Endpoint(eth_phy_description(8))


class Dut(LiteXModule):
    def __init__(self, with_launcher=True):
        for cd in ("sys", "eth_rx", "eth_tx"):
            setattr(self, f"cd_{cd}", ClockDomain(cd))
        self.pads   = Record([("tx_en", 1), ("tx_er", 1), ("tx_data", 8)])
        self.phy    = _PHY(self.pads)
        self.submodules.phy_tx = ClockDomainsRenamer("eth_tx")(self.phy.tx)
        self.clock  = PTPClock(125e6)
        self.launcher = Launcher(self.clock) if with_launcher else None
        self.txpath = TXPath(self.phy, BOARD_MAC, BOARD_IP, launcher=self.launcher)
        self.comb += [
            self.txpath.dst_mac.eq(HOST_MAC),
            self.txpath.dst_valid.eq(1),
        ]


def wire(frame):
    body = bytes(frame)
    body += bytes(max(0, 60 - len(body)))
    return bytes([0x55] * 7 + [0xD5]) + body + zlib.crc32(body).to_bytes(4, "little")


LAUNCH_FRAME = wire(Ether(dst="01:1b:19:00:00:00", src="10:e2:d5:00:00:01") /
                    IP(src=BOARD_IP, dst="224.0.1.129") / UDP(sport=319, dport=319) / bytes(range(44)))
CONTROL_FRAME = wire(Ether(dst="02:00:00:00:00:01", src="10:e2:d5:00:00:01") /
                     IP(src=BOARD_IP, dst="192.168.1.1") / UDP(sport=1234, dport=40000) / (b"ctl" * 10))


# Bench helpers ---------------------------------------------------------------------------------


def pulse(csr, value):
    yield csr.r.eq(value)
    yield csr.re.eq(1)
    yield
    yield csr.re.eq(0)


def load_frame(l, frame):
    yield l._frame_addr.storage.eq(0)
    yield l._frame_addr.re.eq(1)
    yield
    yield l._frame_addr.re.eq(0)
    for b in frame:
        yield from pulse(l._frame_data, b)
    yield l._length.storage.eq(len(frame))


def fire_time(t_ns, guard):
    """The fire time the firmware arms for a first preamble byte on the pins at t_ns."""
    return t_ns - (LATENCY_CYCLES + guard + TXPath.launch_cycles + PHY_FPGA_LATENCY_CYCLES["gmii"][0]) * CLK_NS


def arm(l, t_ns, guard, period=0, count=1):
    f = fire_time(t_ns, guard)
    yield l._time_sec.storage.eq(f // 10**9)
    yield l._time_ns.storage.eq(f % 10**9)
    yield l._period.storage.eq(period)
    yield l._count.storage.eq(count)
    yield l._guard.storage.eq(guard)
    yield
    yield from pulse(l._control, 1)


@passive
def pins(dut, frames):
    """Every frame on the GMII pins: (start cycle, PTP time in ns at that cycle, bytes)."""
    cycle, current, start = 0, None, None
    while True:
        en = yield dut.pads.tx_en
        if en:
            if current is None:
                current = []
                start = (cycle, (yield dut.clock.sec) * 10**9 + (yield dut.clock.ns))
            current.append((yield dut.pads.tx_data))
        elif current is not None:
            frames.append((start[0], start[1], bytes(current)))
            current = None
        cycle += 1
        yield


@passive
def bulk(dut, payload, log):
    """Back-to-back DAQ datagrams (class 2): payload bytes each; the cycle each is first offered."""
    ep = dut.txpath.data
    k = 0
    while True:
        yield ep.valid.eq(1)
        yield ep.ip_address.eq(HOST_IP)
        yield ep.src_port.eq(5000)
        yield ep.dst_port.eq(6000)
        yield ep.length.eq(payload)
        data = bytes([k & 0xff]) + bytes((k + i) & 0xff for i in range(1, payload))
        for i, b in enumerate(data):
            yield ep.data.eq(b)
            yield ep.last.eq(i == payload - 1)
            yield ep.last_be.eq(i == payload - 1)   # As the streamer sets it: LiteEth's CRC inserter needs it.
            yield
            while not (yield ep.ready):
                yield
        log.append(k)
        k += 1
        yield ep.valid.eq(0)
        yield ep.last.eq(0)


@passive
def control(dut, times, offered, frames=None):
    """Class-1 frames (as LiteEth's MAC hands them over) offered at the given cycles: CONTROL_FRAME,
    or frames[k] at times[k]."""
    ep = dut.txpath.mac_phy.sink
    cycle = 0
    for k, t in enumerate(times):
        while cycle < t:
            yield
            cycle += 1
        offered.append(cycle)
        frame = CONTROL_FRAME if frames is None else frames[k]
        for i, b in enumerate(frame):
            yield ep.valid.eq(1)
            yield ep.data.eq(b)
            yield ep.last.eq(i == len(frame) - 1)
            yield
            cycle += 1
            while not (yield ep.ready):
                yield
                cycle += 1
        yield ep.valid.eq(0)
    while True:
        yield


def check_bulk_frames(frames, payload):
    bulk_frames = [f for f in frames if len(f[2]) == 8 + 42 + payload + 4]
    for _, _, b in bulk_frames:
        assert b[:8] == bytes([0x55] * 7 + [0xD5])
        assert zlib.crc32(b[8:-4]).to_bytes(4, "little") == b[-4:]
        assert Ether(b[8:-4])[UDP].dport == 6000
    return bulk_frames


def run(dut, gens, cycles):
    done = {}

    def timer():
        for _ in range(cycles):
            yield
        done["ok"] = True
    run_simulation(dut, {"sys": gens.get("sys", []) + [timer()], "eth_tx": gens.get("eth_tx", [])},
                   clocks={"sys": CLK_NS, "eth_tx": CLK_NS, "eth_rx": CLK_NS})
    assert done


def counters(l):
    return {"sent": (yield l._sent.status), "past": (yield l._missed_past.status),
            "busy": (yield l._missed_busy.status), "armed": (yield l._status.fields.armed)}



def priority_wait(payload, with_launcher, nframes, seed):
    """Class-1 frames offered at random times under back-to-back bulk frames of `payload` bytes:
    per frame, the cycles from offered to its first byte on the pins, and how many bulk frames
    started on the pins in between."""
    dut = Dut(with_launcher=with_launcher)
    frames, sent_bulk, offered = [], [], []
    rng = random.Random(seed)
    bulk_wire = 8 + 42 + payload + 4
    times, t = [], 200
    for _ in range(nframes):
        t += rng.randrange(bulk_wire // 3, 2 * bulk_wire)
        times.append(t)
    run(dut, {"eth_tx": [pins(dut, frames), bulk(dut, payload, sent_bulk), control(dut, times, offered)]},
        times[-1] + 3 * bulk_wire)
    check_bulk_frames(frames, payload)
    ctl_starts = [f[0] for f in frames if f[2] == CONTROL_FRAME]
    assert len(ctl_starts) == nframes
    waits, overtaken = [], []
    for off, start in zip(offered, ctl_starts):
        waits.append(start - off)
        overtaken.append(sum(1 for f in frames if f[2] != CONTROL_FRAME and off + PATH < f[0] < start))
    return waits, overtaken, bulk_wire


# Table ------------------------------------------------------------------------------------------

def launch_errors(payload, launches=6, guard=None):
    """Launch errors (ns) of a periodic launch with back-to-back bulk datagrams of `payload`
    bytes (None: an idle line), and the launcher's counters."""
    dut = Dut()
    frames, sent_bulk = [], []
    l = dut.launcher
    wire_bulk = 8 + 42 + (payload or 0) + 4
    if guard is None:
        guard = guard_cycles(42 + payload) if payload else 1
    period = max(2 * wire_bulk, 1000) * CLK_NS + 3   # Not a multiple of the cycle: every phase.
    t0 = 2 * wire_bulk * CLK_NS + 5
    result = {}

    def bench():
        yield from load_frame(l, LAUNCH_FRAME)
        yield from arm(l, t0, guard, period=period, count=launches)
        for _ in range((t0 + launches * period) // CLK_NS + wire_bulk):
            yield
        result.update((yield from counters(l)))

    gens = [pins(dut, frames)] + ([bulk(dut, payload, sent_bulk)] if payload else [])
    run(dut, {"sys": [bench()], "eth_tx": gens}, (t0 + launches * period) // CLK_NS + wire_bulk + 100)
    launched = [f for f in frames if f[2] == LAUNCH_FRAME]
    times = [t0 + k * period for k in range(launches)]
    errors = [min((f[1] - t for t in times if f[1] >= t), default=None) for f in launched]
    if payload:
        check_bulk_frames(frames, payload)
    return errors, result, guard


def main(argv=None):
    import argparse
    import statistics
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("parts", nargs="*", choices=["priority", "launch"], default=["priority", "launch"])
    args = p.parse_args(argv)
    from ethdaq import migensim
    migensim.install()   # the same cycles as Migen's own simulator (test_migensim), faster
    if "priority" in args.parts:
        priority_table(statistics)
    if "launch" in args.parts:
        launch_table()


def priority_table(statistics):
    print("Transmit priority: a class-1 frame (LiteEth: control, PTP) offered at random times while")
    print("bulk DAQ frames go back to back (Migen, 125 MHz, 8 ns per cycle; simulated)")
    print()
    print(f"| bulk UDP payload | bulk frame on the wire | class-1 frames | wait min | wait mean | wait max | bound (frame + gap + {PATH_SLACK} cycles) | bulk frames started while waiting |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for payload, n in ((1472, 20), (8972, 8)):
        waits, overtaken, bulk_wire = priority_wait(payload, True, n, seed=payload)
        us = lambda c: f"{c} cycles ({c * CLK_NS / 1000:.2f} µs)"
        print(f"| {payload} | {bulk_wire} bytes | {n} | {us(min(waits))} | {statistics.mean(waits):.0f} cycles | "
              f"{us(max(waits))} | {bulk_wire + IFG + PATH_SLACK} | {max(overtaken)} |")


def launch_table():
    print()
    print("Time-triggered launch error (first preamble byte on the pins minus the launch time; periodic,")
    print("period not a multiple of the cycle; guard band from guard_cycles() for the bulk frame size)")
    print()
    print("| bulk load | guard band | launches | sent | missed (past) | missed (busy) | error min | error max |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for payload, launches in ((None, 6), (64, 6), (1472, 4), (8972, 3)):
        errors, c, guard = launch_errors(payload, launches)
        load = "none (idle line)" if payload is None else f"back-to-back {payload}-byte datagrams"
        print(f"| {load} | {guard} cycles | {len(errors) + c['past'] + c['busy']} | {c['sent']} | {c['past']} | "
              f"{c['busy']} | {min(errors)} ns | {max(errors)} ns |")


if __name__ == "__main__":
    main()
