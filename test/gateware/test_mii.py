"""The streamer at 100 Mb/s (the digilent_arty's MII PHY): streamer → canned-header
transmit path → LiteEth's own MII PHY (a nibble per 40 ns cycle, everything at 25 MHz), cycle-accurate
in Verilator (bench/gmii.py with phy="mii"). The testbench answers the stack's ARP request in
nibbles; every frame on the MII pins is joined low nibble first (IEEE 802.3 clause 22) and
decoded by scapy and tshark (independent decoders): FCS, IP checksum, UDP length, DAQ header.
Then what a user of a 100 Mb/s board relies on: back-to-back frames at the line rate with the
12-byte gap, every sample accounted for (in a datagram or counted as dropped), and timestamps in
the 25 MHz clock's nanoseconds."""

import zlib

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from bench import gmii
from conftest import REPO, tshark_frame_checks
from ethdaq.wire import daqformat

PREAMBLE = b"\x55"*7 + b"\xd5"
CYCLE_NS = 40                 # MII at 100 Mb/s: a nibble per 25 MHz cycle.
WIRE_OVERHEAD = 8 + 14 + 20 + 8 + 4 + 12   # Preamble, Ethernet, IPv4, UDP, FCS, gap.


@pytest.fixture(scope="module")
def exe():
    return gmii.build_verilator(REPO / "build" / "test-bench-mii", phy="mii")


def decode(frame):
    assert frame[:8] == PREAMBLE, frame[:8].hex()
    body, fcs = frame[8:-4], frame[-4:]
    assert zlib.crc32(body).to_bytes(4, "little") == fcs, "bad FCS"
    return Ether(body)


def datagrams(r, payload):
    """Per stream, its datagrams in order: (header, samples)."""
    streams = {}
    for frame in r["frames"][1:]:
        pkt = decode(frame)
        assert IP in pkt and UDP in pkt
        udp = pkt[UDP]
        assert udp.dport == 5000 and udp.len == 8 + payload
        data = bytes(udp.payload)
        h = daqformat.unpack_header(data)
        streams.setdefault(h.stream_id, []).append((h, daqformat.samples(data, h)))
    return streams


def test_the_first_frame_is_an_arp_request_and_the_answer_in_nibbles_is_taken(exe):
    """The stack asks for the host's address on the MII pins, and its reply, sent in nibbles,
    is understood: data frames follow, addressed to the host."""
    r = gmii.measure(exe, 256, frames=2, enable=0b1, phy="mii")
    arp = decode(r["frames"][0])
    assert ARP in arp and arp[ARP].op == 1 and arp[ARP].pdst == gmii.HOST_IP
    assert all(n % 2 == 0 for n in r["nibbles"]), r["nibbles"]
    data = decode(r["frames"][1])
    assert data.dst == gmii.HOST_MAC and data[IP].dst == gmii.HOST_IP


@pytest.mark.parametrize("payload", [64, 1472])
def test_back_to_back_frames_at_100_mbps_line_rate(exe, payload):
    """Four channels at full rate: the link is the bottleneck. Every frame follows the one before
    after exactly the 12-byte gap (24 nibble times), so the datagrams leave at the line rate:
    one every (payload + 66) byte times of 80 ns."""
    r = gmii.measure(exe, payload, frames=16, enable=0b1111, phy="mii")
    assert len(r["frames"]) >= 17
    assert sorted(set(r["gaps"][1:])) == [gmii.IFG], r["gaps"]
    spacing = {b - a for a, b in zip(r["starts"][1:], r["starts"][2:])}
    assert spacing == {2*(payload + WIRE_OVERHEAD)}, spacing
    streams = datagrams(r, payload)
    assert sorted(streams) == [0, 1, 2, 3]
    for dgrams in streams.values():
        seqs = [h.seq for h, _ in dgrams]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_every_sample_is_in_a_datagram_or_counted_as_dropped_and_timestamps_count_40_ns(exe):
    """Counter emulators at a sample per cycle on four channels offer 16 times what 100 Mb/s
    carries: once the channel buffers are full the streamer must drop, and count what it drops.
    Per channel, the next datagram's first sample is the last one sent plus one plus the samples
    dropped in between (flagged OVERFLOW exactly when there were some), and its timestamp is
    later by exactly that many 40 ns cycles (the timebase at the MII's 25 MHz)."""
    payload = 256
    r = gmii.measure(exe, payload, frames=48, enable=0b1111, phy="mii")
    streams = datagrams(r, payload)
    pairs = drops = 0
    for dgrams in streams.values():
        for (h0, s0), (h1, s1) in zip(dgrams, dgrams[1:]):
            assert s0 == [(s0[0] + i) & 0xffff for i in range(len(s0))]   # Consecutive within a datagram.
            dropped = h1.dropped - h0.dropped
            assert dropped >= 0
            assert bool(h1.flags & daqformat.FLAG_OVERFLOW) == (dropped > 0), (h1, dropped)
            assert s1[0] == (s0[-1] + 1 + dropped) & 0xffff, (s0[-1], s1[0], dropped)
            assert h1.timestamp - h0.timestamp == (len(s0) + dropped)*CYCLE_NS
            pairs += 1
            drops += dropped > 0
    assert pairs >= 40 and drops >= 8     # The buffers filled and overflowed on every channel.


def test_ip_checksum_and_fcs_by_tshark(exe, tmp_path):
    """tshark (an independent dissector) on the bytes joined from the MII pins, FCS included."""
    r = gmii.measure(exe, 1472, frames=6, enable=0b1111, phy="mii")
    rows = tshark_frame_checks(r["frames"], tmp_path / "mii.pcap")
    assert len(rows) == len(r["frames"]) >= 7
    assert all(row[1] == "1" for row in rows), rows           # 1 = Good FCS, ARP included.
    udp = [row for row in rows if "udp" in row[0]]
    assert len(udp) == len(rows) - 1
    assert all(row[2] == "1" and row[3] == str(8 + 1472) for row in udp), udp


def test_a_nibble_out_of_place_is_an_error_not_a_byte():
    """The decoder keeps an odd nibble visible instead of rounding it away."""
    r = gmii._join_nibbles({"frames": [[0x5, 0x5, 0xd]], "gaps": [], "starts": [0], "ends": [3], "closes": []})
    assert r["frames"] == [b"\x55\x0d"] and r["nibbles"] == [3]
    with pytest.raises(ValueError):
        gmii._join_nibbles({"frames": [[0x15, 0x5]], "gaps": [], "starts": [0], "ends": [2], "closes": []})


# PTP timestamps at 100 Mb/s, in the real transmit path ------------------------------------------

@pytest.mark.parametrize("sys_ns", [CYCLE_NS, 8], ids=["one-clock", "sys-125MHz"])
def test_ptp_timestamps_at_the_mii_pins_are_exact_in_the_transmit_path_and_liteeth_receiver(sys_ns):
    """PTP event messages from LiteEth's side (the firmware's class) between bulk DAQ datagrams,
    through the transmit path and LiteEth's MII PHY, with the timestamp units tapped as the SoC
    taps them (gateware/tsu.py tap_phy); the MII pins looped back into LiteEth's MII receiver.
    Each raw timestamp plus the firmware's correction for MII (phy_corrections_ns) is the PTP
    clock's time when the first nibble after the SFD is on the pins (the IEEE 1588 timestamp
    point): exactly with the PTP clock, eth_tx and eth_rx on one 25 MHz clock; within one sys
    cycle with sys (the PTP clock and the firmware's side of the record FIFOs) at 125 MHz, five
    times the PHY's clock as on the Arty (100 MHz), where the record FIFOs once gave only zeros."""
    from migen import ClockDomain, Record
    from migen.sim import passive, run_simulation
    from litex.gen import LiteXModule
    from bench.txclasses import bulk, control
    from ethdaq.gateware.ptpclock import PTPClock
    from ethdaq.gateware.tsu import PTPTimestamper, TX_TAP_CYCLES, phy_corrections_ns, tap_phy
    from ethdaq.gateware.txpath import TXPath
    from test_tsu import ptp_udp, reader

    class Dut(LiteXModule):
        def __init__(self):
            self.cd_sys = ClockDomain("sys")
            self.pads = gmii._Pads(gmii.PINS["mii"])
            self.phy = gmii._SimPHY(self.pads, "mii")
            self.clock = PTPClock(1e9/sys_ns)
            self.txpath = TXPath(self.phy, gmii.BOARD_MAC, gmii.BOARD_IP)
            faster = sys_ns < CYCLE_NS   # As DAQSoC decides it.
            self.ptp_tx = PTPTimestamper(self.clock, cd="eth_tx", cd_clock="sys", depth=8, sys_faster=faster)
            self.ptp_rx = PTPTimestamper(self.clock, cd="eth_rx", cd_clock="sys", depth=8, sys_faster=faster)
            tap_phy(self, self.phy, self.ptp_tx, self.ptp_rx)
            self.comb += [
                self.txpath.dst_mac.eq(0x020000000001), self.txpath.dst_valid.eq(1),
                self.txpath.mac_phy.source.ready.eq(1),       # LiteEth's MAC takes what it receives.
                self.pads.rx_dv.eq(self.pads.tx_en), self.pads.rx_data.eq(self.pads.tx_data),
            ]

    dut = Dut()
    frames = [ptp_udp(0, 100 + k) if k % 2 == 0 else ptp_udp(1, 100 + k) for k in range(4)]
    wire_bulk = 2*(64 + WIRE_OVERHEAD)
    times = [300 + k*2*wire_bulk for k in range(len(frames))]
    stamp_point = 2*len(PREAMBLE)        # The first nibble after the SFD.
    seen, tx_records, rx_records, offered, sent_bulk = [], [], [], [], []
    done = {}

    @passive
    def pins():
        nibbles, start_time = [], None
        while True:
            if (yield dut.pads.tx_en):
                nibbles.append((yield dut.pads.tx_data))
                if len(nibbles) == stamp_point + 1:
                    start_time = (yield dut.clock.sec)*10**9 + (yield dut.clock.ns)
            elif nibbles:
                frame = bytes(nibbles[i] | nibbles[i + 1] << 4 for i in range(0, len(nibbles) - 1, 2))
                seen.append((start_time, frame))
                nibbles = []
            yield

    def timer():
        for _ in range((times[-1] + 2*wire_bulk)*CYCLE_NS//sys_ns):
            yield
        done["ok"] = True

    run_simulation(dut, {
        "sys": [timer(), reader(dut.ptp_tx, tx_records, lambda: "ok" in done),
                reader(dut.ptp_rx, rx_records, lambda: "ok" in done)],
        "eth_tx": [pins(), bulk(dut, 64, sent_bulk), control(dut, times, offered, frames)],
    }, clocks={"sys": sys_ns, "eth_tx": CYCLE_NS, "eth_rx": CYCLE_NS})

    ptp_on_pins = [(t, f) for t, f in seen if f in frames]
    assert [f for _, f in ptp_on_pins] == frames                  # Whole, in order, between bulk.
    assert len(sent_bulk) >= 4 and len(seen) >= len(frames) + 4
    tx_ns, rx_ns = phy_corrections_ns("mii", tx_tap_cycles=TX_TAP_CYCLES)
    assert (tx_ns, rx_ns) == (40, -40)
    for records, correction in ((tx_records, tx_ns), (rx_records, rx_ns)):
        assert [r["seq"] for r in records] == [100 + k for k in range(len(frames))]
        for r, (t, _) in zip(records, ptp_on_pins):
            error = r["sec"]*10**9 + r["ns"] + correction - t
            assert error == 0 if sys_ns == CYCLE_NS else abs(error) <= sys_ns, (r, t, correction)
