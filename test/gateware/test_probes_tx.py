"""The DAQ SoC's transmit latency probes (gateware/probe.py DAQProbes), in Migen simulation, on
the transmit path of bench/txclasses.py: the launcher (class 0), LiteEth's frames (class 1) and
bulk DAQ datagrams (class 2) in front of LiteEth's GMII PHY, all at once.

The bench takes its own cycle counts: a monitor reads the cycle each datagram is handed over (a
control datagram offered to LiteEth's UDP port, here a stand-in stream; a DAQ datagram offered to
the transmit path; the launcher's fire decision), and `pins` the cycle each frame's
first preamble byte is on the GMII pins. The probe's count, sum, min, max and histogram of each
class must equal the bench's, frame for frame; ARP requests (class 2, not DAQ data) and control
frames from other ports (class 1, not the mailbox's) must not be counted."""

from migen import *
from migen.sim import passive

from litex.soc.interconnect import stream

from liteeth.common import eth_udp_user_description
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.txclasses import (CONTROL_FRAME, LAUNCH_FRAME, Dut, arm, check_bulk_frames, control,
                             load_frame, pins, run, wire)
from ethdaq.gateware.probe import TX_CLASSES, DAQProbes
from ethdaq.gateware.tsu import PHY_FPGA_LATENCY_CYCLES

from test_probe import expected, read_class

MAILBOX_PORT = 1234       # CONTROL_FRAME's source port.
OTHER_FRAME  = wire(Ether(dst="02:00:00:00:00:01", src="10:e2:d5:00:00:01") /
                    IP(src="192.168.1.50", dst="192.168.1.1") / UDP(sport=4321, dport=40000) / (b"x" * 30))


class ProbedDut(Dut):
    def __init__(self):
        Dut.__init__(self)
        self.cpu_source = stream.Endpoint(eth_udp_user_description(8))   # sys: the mailbox's datagrams.
        self.probes = DAQProbes(self.txpath, self.phy, self.cpu_source, cpu_ports=[MAILBOX_PORT, 319],
                                phy_cycles=PHY_FPGA_LATENCY_CYCLES["gmii"], launcher=self.launcher)


@passive
def handovers(dut, times, seen):
    """Drives the mailbox's stand-in stream: a one-beat datagram at each of `times` (cycles)."""
    ep, cycle = dut.cpu_source, 0
    yield ep.ready.eq(1)
    while True:
        yield ep.valid.eq(cycle in times)
        yield ep.last.eq(1)
        yield
        cycle += 1


@passive
def monitor(dut, starts):
    """The bench's start events, read like the pins are: the cycle each is seen. A datagram is
    handed over in the first cycle it is offered (valid), taken then or later."""
    data, cycle, offered = dut.txpath.data, 0, False
    while True:
        if (yield dut.cpu_source.valid) and (yield dut.cpu_source.ready):
            starts["cpu"].append(cycle)
        if (yield data.valid):
            if not offered:
                starts["bulk"].append(cycle)
            offered = not ((yield data.ready) and (yield data.last))
        if (yield dut.launcher.fire):
            starts["launch"].append(cycle)
        cycle += 1
        yield


def test_every_transmit_class_agrees_with_the_benchs_cycle_counts():
    dut = ProbedDut()
    frames, sent_bulk, offered = [], [], []
    starts = {c: [] for c in TX_CLASSES}
    payload, guard = 120, 200
    # Control datagrams from the mailbox (CONTROL_FRAME, its port) and from elsewhere (OTHER_FRAME,
    # e.g. an ICMP answer): class 1 both, only the first kind measured.
    times = [400 + 530 * k for k in range(6)]
    got = {}

    def bench():
        yield from load_frame(dut.launcher, LAUNCH_FRAME)
        yield from arm(dut.launcher, 9_003, guard, period=7_001, count=2)
        for _ in range(3400):
            yield
        for i, c in enumerate(TX_CLASSES):
            got[c] = yield from read_class(dut.probes.tx, i)
        got["unpaired"] = yield dut.probes.tx._unpaired.status
        got["overflows"] = yield dut.probes.tx._overflows.status

    @passive
    def others(dut):
        # The ARP requester (class 2, not DAQ data) asks once, in the middle of the bulk stream.
        for _ in range(1500):
            yield
        yield dut.txpath.arp_request.eq(1)
        yield dut.txpath.arp_target.eq(0xC0A80163)
        yield
        yield dut.txpath.arp_request.eq(0)
        while True:
            yield

    @passive
    def bulk_later(dut):
        # After the probe's clearing walk at reset (which drops results, counted as overflows);
        # 12 datagrams back to back, over before the bench reads the probe.
        for _ in range(100):
            yield
        ep = dut.txpath.data
        for k in range(12):
            yield ep.valid.eq(1)
            yield ep.ip_address.eq(0xC0A80101)
            yield ep.src_port.eq(5000)
            yield ep.dst_port.eq(6000)
            yield ep.length.eq(payload)
            for i in range(payload):
                yield ep.data.eq((k + i) & 0xff)
                yield ep.last.eq(i == payload - 1)
                yield ep.last_be.eq(i == payload - 1)
                yield
                while not (yield ep.ready):
                    yield
            sent_bulk.append(k)
            yield ep.valid.eq(0)
            yield ep.last.eq(0)
        while True:
            yield

    run(dut, {"sys": [bench()],
              "eth_tx": [pins(dut, frames), bulk_later(dut), control(dut, times, [], [CONTROL_FRAME if k % 2 == 0 else OTHER_FRAME for k in range(len(times))]),
                         handovers(dut, set(times[::2]), []), monitor(dut, starts), others(dut)]},
        3700)
    check_bulk_frames(frames, payload)
    ctl_pins    = [f[0] for f in frames if f[2] == CONTROL_FRAME]
    launch_pins = [f[0] for f in frames if f[2] == LAUNCH_FRAME]
    bulk_pins   = [f[0] for f in frames if len(f[2]) == 8 + 42 + payload + 4]
    arp_frames  = [f for f in frames if f[2][20:22] == b"\x08\x06"]
    assert arp_frames and len(launch_pins) == 2
    # The class-1 frames alternate: the mailbox's (handed over at times[::2]) and others.
    cpu_pins = ctl_pins
    assert len([f for f in frames if f[2] == OTHER_FRAME]) == 3
    assert len(starts["cpu"]) == len(cpu_pins) == 3
    lats = {
        "cpu":    [p - s for s, p in zip(starts["cpu"], cpu_pins)],
        "launch": [p - s for s, p in zip(starts["launch"], launch_pins)],
        # The last datagram handed over may still be on its way at the end.
        "bulk":   [p - s for s, p in zip(starts["bulk"], bulk_pins)],
    }
    print(lats)
    assert len(lats["bulk"]) == len(sent_bulk) == 12
    for c in TX_CLASSES:
        assert got[c] == expected(lats[c]), (c, got[c], lats[c], got["overflows"], got["unpaired"])
    # Launch: the fire decision to the pins is lead + guard, the same every time.
    assert len(set(lats["launch"])) == 1 and lats["launch"][0] > guard
    # The control frames not from the mailbox ended nothing; nothing was dropped.
    assert (got["unpaired"], got["overflows"]) == (0, 0)
