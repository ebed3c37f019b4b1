"""Run-time board addresses (gateware/netaddr.py) and the ARP announcement (gateware/framer.py
ARPRequester) in Migen simulation, with the transmit side in its own clock; frames decoded by
scapy."""

from migen import *
from migen.sim import run_simulation

from litex.gen import LiteXModule
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from ethdaq.gateware.framer import ARPRequester, UDPFramer
from ethdaq.gateware.netaddr import NetAddress
from stream_helpers import collect_frames

OLD_MAC, OLD_IP = 0x10E2D5000077, 0xC0A84D32      # 192.168.77.50
NEW_MAC, NEW_IP = 0x02AB00000042, 0xC0A84D33      # 192.168.77.51
DST_MAC, DST_IP = 0x02AABBCCDD01, 0xC0A84D01


def mac_text(v):
    return ":".join(f"{(v >> (8*(5 - i))) & 0xff:02x}" for i in range(6))


class Bench(LiteXModule):
    def __init__(self):
        self.clock_domains.cd_tx = ClockDomain("tx")
        self.netaddr   = NetAddress(OLD_IP, OLD_MAC, cd_tx="tx")
        self.requester = ClockDomainsRenamer("tx")(ARPRequester(self.netaddr.mac_tx, self.netaddr.ip_tx))
        self.framer    = ClockDomainsRenamer("tx")(UDPFramer(self.netaddr.mac_tx, self.netaddr.ip_tx))
        self.comb += [
            self.requester.announce.eq(self.netaddr.announce),
            self.netaddr.announced.eq(self.requester.announced),
        ]


def csr_write(csr, value):
    yield csr.storage.eq(value)


def test_apply_switches_both_addresses_at_once_and_announces_them():
    dut = Bench()
    arp_frames, seen, pending = [], [], []

    def cpu():
        # Staged values change nothing until apply.
        yield dut.netaddr._ip.storage.eq(NEW_IP)
        yield dut.netaddr._mac.storage.eq(NEW_MAC)
        for _ in range(20):
            yield
        seen.append(((yield dut.netaddr.ip), (yield dut.netaddr.mac), (yield dut.netaddr.ip_tx)))
        yield dut.netaddr._apply.re.eq(1)
        yield
        yield dut.netaddr._apply.re.eq(0)
        yield
        seen.append(((yield dut.netaddr.ip), (yield dut.netaddr.mac)))
        for _ in range(200):
            pending.append((yield dut.netaddr._pending.status))
            yield
        seen.append(((yield dut.netaddr.ip_tx), (yield dut.netaddr.mac_tx)))

    run_simulation(dut, {"sys": [cpu()], "tx": [collect_frames(dut.requester.source, arp_frames, 400)]},
                   clocks={"sys": 10, "tx": 8})
    assert seen[0] == (OLD_IP, OLD_MAC, OLD_IP)
    assert seen[1] == (NEW_IP, NEW_MAC)
    assert seen[2] == (NEW_IP, NEW_MAC)
    # Pending from the apply until the announcement has gone, then clear.
    assert pending[0] == 1 and pending[-1] == 0 and pending.index(0) > 30
    assert len(arp_frames) == 1
    pkt = Ether(arp_frames[0])
    assert pkt.dst == "ff:ff:ff:ff:ff:ff" and pkt.src == mac_text(NEW_MAC)
    arp = pkt[ARP]
    assert (arp.op, arp.hwsrc, arp.psrc, arp.pdst, arp.hwdst) == \
        (1, mac_text(NEW_MAC), "192.168.77.51", "192.168.77.51", "00:00:00:00:00:00")


def test_announcement_goes_first_and_a_waiting_request_is_not_lost():
    dut = ARPRequester(OLD_MAC, OLD_IP)
    frames = []

    def gen():
        yield dut.target_ip.eq(DST_IP)
        yield dut.request.eq(1)
        yield dut.announce.eq(1)
        yield
        yield dut.request.eq(0)
        yield dut.announce.eq(0)
        for _ in range(30):
            yield
        yield dut.request.eq(1)   # During the announcement: merged into the waiting request.
        yield
        yield dut.request.eq(0)

    run_simulation(dut, [gen(), collect_frames(dut.source, frames, 300)])
    assert len(frames) == 2
    first, second = Ether(frames[0])[ARP], Ether(frames[1])[ARP]
    assert (first.psrc, first.pdst) == ("192.168.77.50", "192.168.77.50")
    assert (second.psrc, second.pdst) == ("192.168.77.50", "192.168.77.1")


def test_data_frames_leave_from_the_new_addresses_after_apply():
    dut = Bench()
    frames = []
    payload = bytes(range(32))

    def send_one():
        yield dut.framer.sink.valid.eq(1)
        for i, b in enumerate(payload):
            yield dut.framer.sink.data.eq(b)
            yield dut.framer.sink.last.eq(i == len(payload) - 1)
            yield
            while not (yield dut.framer.sink.ready):
                yield
        yield dut.framer.sink.valid.eq(0)
        yield dut.framer.sink.last.eq(0)

    def tx():
        yield dut.framer.dst_mac.eq(DST_MAC)
        yield dut.framer.mac_valid.eq(1)
        yield dut.framer.sink.ip_address.eq(DST_IP)
        yield dut.framer.sink.src_port.eq(5000)
        yield dut.framer.sink.dst_port.eq(6000)
        yield dut.framer.sink.length.eq(len(payload))
        yield
        yield from send_one()
        while not (yield dut.netaddr.mac_tx) == NEW_MAC:
            yield
        for _ in range(5):
            yield
        yield from send_one()

    def cpu():
        for _ in range(100):
            yield
        yield dut.netaddr._ip.storage.eq(NEW_IP)
        yield dut.netaddr._mac.storage.eq(NEW_MAC)
        yield dut.netaddr._apply.re.eq(1)
        yield
        yield dut.netaddr._apply.re.eq(0)

    run_simulation(dut, {"sys": [cpu()], "tx": [tx(), collect_frames(dut.framer.source, frames, 800)]},
                   clocks={"sys": 10, "tx": 8})
    assert len(frames) == 2
    old, new = Ether(frames[0]), Ether(frames[1])
    assert (old.src, old[IP].src) == (mac_text(OLD_MAC), "192.168.77.50")
    assert (new.src, new[IP].src) == (mac_text(NEW_MAC), "192.168.77.51")
    for f in (old, new):
        # scapy recomputes the checksum of a copy without it: the framer's must be the same.
        check = f[IP].copy()
        del check.chksum
        assert IP(bytes(check)).chksum == f[IP].chksum
        assert bytes(f[UDP].payload)[:len(payload)] == payload


def test_bad_build_addresses_are_refused():
    import pytest
    with pytest.raises(ValueError, match="unicast"):
        NetAddress(OLD_IP, 0x010000000001)
    with pytest.raises(ValueError, match="IPv4"):
        NetAddress(2**32, OLD_MAC)
