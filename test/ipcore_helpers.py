"""A LiteEth IPv4 core on a stand-in 8-bit PHY, for Migen tests that put frames on its wire and
read what it sends: the board's addresses, the wire's bytes (preamble, padding, FCS), and one
ping exchanged with it (scapy builds the frames; the bench answers the core's ARP request)."""

from migen import ClockDomain
from migen.sim import run_simulation

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP, Ether

from stream_helpers import wire

BOARD_MAC, BOARD_IP = 0x10E2D5000077, "192.168.77.50"
BOARD_MAC_STR = ":".join(f"{b:02x}" for b in BOARD_MAC.to_bytes(6, "big"))
HOST_MAC, HOST_IP = "02:00:00:00:00:01", "192.168.77.1"


class StandInPHY:
    dw = 8

    def __init__(self):
        self.sink   = stream.Endpoint(eth_phy_description(8))
        self.source = stream.Endpoint(eth_phy_description(8))


class IPCoreBench(LiteXModule):
    """`phy` for a LiteEthIPCore the subclass builds; `rx` is what the bench puts on the wire."""
    def __init__(self):
        for cd in ("sys", "eth_rx", "eth_tx"):
            setattr(self, f"cd_{cd}", ClockDomain(cd))
        self.phy = StandInPHY()
        self.rx  = stream.Endpoint(eth_phy_description(8))
        self.comb += [self.rx.connect(self.phy.source), self.phy.source.last_be.eq(self.rx.last)]


def ping_request(payload=b"ethdaq!"):
    return Ether(dst=BOARD_MAC_STR, src=HOST_MAC) / IP(src=HOST_IP, dst=BOARD_IP) / \
        ICMP(type=8, id=7, seq=1) / payload


def exchange_ping(dut, request, fcs_flip=0, cycles=1500, clocks=None):
    """Send `request` (with its FCS xor `fcs_flip`), answer the core's ARP request for the sender,
    and return every frame the core sent (wire bytes) until its first ICMP frame or `cycles`."""
    arp_reply = Ether(dst=BOARD_MAC_STR, src=HOST_MAC) / ARP(
        op=2, hwsrc=HOST_MAC, psrc=HOST_IP, hwdst=BOARD_MAC_STR, pdst=BOARD_IP)
    sent = []

    def send(f):
        for i, b in enumerate(f):
            yield dut.rx.valid.eq(1)
            yield dut.rx.data.eq(b)
            yield dut.rx.last.eq(i == len(f) - 1)
            yield
        yield dut.rx.valid.eq(0)

    def feed():
        for _ in range(50):
            yield
        yield from send(wire(request, fcs_flip))
        for _ in range(cycles):
            if any(len(f) > 12 and Ether(f[8:-4]).haslayer(ARP) for f in sent):
                yield from send(wire(arp_reply))
                break
            yield

    def watch():
        cur = []
        yield dut.phy.sink.ready.eq(1)
        for _ in range(cycles):
            yield
            if (yield dut.phy.sink.valid):
                cur.append((yield dut.phy.sink.data))
                if (yield dut.phy.sink.last):
                    sent.append(bytes(cur))
                    cur = []
                    if Ether(sent[-1][8:-4]).haslayer(ICMP):
                        return

    run_simulation(dut, {"eth_rx": [feed()], "eth_tx": [watch()]},
                   clocks=clocks or {"sys": 10, "eth_rx": 8, "eth_tx": 8})
    return sent
