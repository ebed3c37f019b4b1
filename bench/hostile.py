#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Hostile and broken traffic for the simulated wire (docs/robustness.md): the frames a DAQ
board on a shared lab network meets, built with scapy (a protocol model independent of ours),
whole Ethernet frames with their FCS as on the wire.

    from bench.hostile import KINDS, Network, frames
    net = Network(board_mac="10:e2:d5:00:00:01", board_ip="192.168.1.50",
                  host_mac="02:00:00:00:00:01", host_ip="192.168.1.100")
    for kind in KINDS:
        for frame in frames(kind, net, random.Random(1)):
            ...   # bytes: destination MAC first, FCS last

Every kind is a burst of frames of one malformation (KINDS says which, and what the board must do
with them). `strip_fcs()` gives a frame as a tap carries it (no FCS), for injection through the
Linux side; frames whose point is their FCS or their length on the wire (bad_fcs, runt) need the
simulated PHY instead.

    .venv/bin/python -m bench.hostile [--count N] [--seed S] [-o hostile.pcap]

prints a table of the kinds and, with -o, writes every frame (FCS included) to a pcap for tshark.
"""

import argparse
import random
import struct
import sys
import zlib
from dataclasses import dataclass

# What each kind is, and what a board must do with it: never hang, never let it into the DAQ
# stream, answer nothing it should not, count it.
KINDS = {
    "runt":            "frames of 17 to 63 bytes with a good FCS: dropped by the MAC",
    "oversize":        "1519 to 1600-byte frames (beyond 1518) to the board: dropped, counted",
    "jumbo":           "9018-byte frames, beyond the board's MTU: dropped, counted",
    "bad_fcs":         "UDP to the control port with a corrupted FCS: dropped by the MAC, counted",
    "bad_ip_checksum": "IPv4 UDP to the control port, header checksum wrong: dropped",
    "ip_options":      "IPv4 with options (IHL 6 to 15) to the control port: dropped or answered, never misparsed",
    "fragment":        "IPv4 fragments of a 3000-byte UDP datagram to the control port: dropped",
    "ip_version":      "EtherType IPv4 with version 6, 5 or 0 in the header: dropped",
    "udp_zero":        "UDP with no payload to the control, data and other ports",
    "udp_15_16":       "UDP payloads of 15 and 16 bytes (LiteEth's reported trouble sizes)",
    "udp_length_lies": "UDP length longer than the datagram, shorter than it, and under 8",
    "udp_truncated":   "IPv4 total length longer than the frame holds",
    "arp_storm":       "ARP requests for the board and for others from many hosts",
    "arp_malformed":   "ARP with wrong hardware/protocol sizes or types, unknown opcode",
    "icmp_flood":      "ICMP echo requests back to back",
    "icmp_big":        "pings of 1472 bytes (one frame) and 8000 bytes (fragmented)",
    "broadcast":       "UDP and unknown-EtherType broadcasts: limited, the board's subnet's and another's; "
                       "to the control port, IDENTIFY and other requests",
    "multicast":       "IPv4 multicast UDP (224.0.0.1, 239.x) and PTP's groups on other ports",
    "ptp_malformed":   "PTP event and general messages, UDP and Ethernet, truncated or with bad fields",
    "ctl_malformed":   "control-protocol datagrams with a bad magic, version, type or length",
    "random":          "random bytes of 60 to 1514 bytes to the board's MAC",
}


@dataclass
class Network:
    board_mac: str
    board_ip:  str
    host_mac:  str
    host_ip:   str
    ctl_port:  int = 7000
    data_port: int = 5000
    mtu:       int = 1500
    ptp_transport: str = "udp"   # "l2": PTP over Ethernet (EtherType 0x88F7), else over UDP.
    prefix:    int = 24          # The board's subnet (its build's --netmask).

    @property
    def directed_broadcast(self):
        """The board's subnet's broadcast address, e.g. 192.168.1.255."""
        import ipaddress
        return str(ipaddress.IPv4Network(f"{self.board_ip}/{self.prefix}", strict=False).broadcast_address)

    @property
    def udp_ports(self):
        """The UDP ports the board listens on."""
        return (self.ctl_port,) + ((319, 320) if self.ptp_transport == "udp" else ())


def fcs(frame):
    """The Ethernet FCS of `frame` (without one): CRC-32, least significant byte first."""
    return struct.pack("<I", zlib.crc32(frame) & 0xFFFFFFFF)


def with_fcs(frame):
    return frame + fcs(frame)


def fcs_ok(frame):
    return len(frame) >= 5 and fcs(frame[:-4]) == frame[-4:]


def strip_fcs(frame):
    return frame[:-4]


def _pad(frame):
    """Padded to the 60-byte minimum (before the FCS), as a sending MAC does."""
    return frame + bytes(max(0, 60 - len(frame)))


def frames(kind, net, rng, count=8):
    """A burst of about `count` frames of `kind` (bytes, FCS included)."""
    return [f for f, _ in labelled(kind, net, rng, count)]


def labelled(kind, net, rng, count=8):
    """frames(), each with the receive-audit cause a correct board counts it under
    (protocol.RX_COUNTERS' names: "rx_ok" for one its stack takes), decided here from how the
    frame was made; None where random bytes make it anybody's guess."""
    from scapy.all import ARP, ICMP, IP, UDP, Ether, Raw, fragment, raw
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    eth = Ether(src=net.host_mac, dst=net.board_mac)
    ip  = IP(src=net.host_ip, dst=net.board_ip)
    def payload(n):
        return bytes(rng.getrandbits(8) for _ in range(n))
    def udp_cause(dport, data, ok="rx_ok"):
        return "udp_empty" if not data else ok if dport in net.udp_ports else "udp_port"
    def udp(dport, data, **ip_fields):
        return raw(eth / IP(src=net.host_ip, dst=net.board_ip, **ip_fields) / UDP(sport=40000, dport=dport) / Raw(data))
    out = []
    for i in range(count):
        if kind == "runt":
            n = rng.randint(17 - 4, 63 - 4)
            out.append((with_fcs(raw(eth / ip / UDP(sport=40000, dport=net.ctl_port))[:n]), "runt"))
        elif kind == "oversize":
            out.append((with_fcs(udp(net.ctl_port, payload(rng.randint(1519, 1600) - 4 - 42))), "oversize"))
        elif kind == "jumbo":
            out.append((with_fcs(udp(rng.choice([net.ctl_port, net.data_port, 9999]), payload(9018 - 4 - 42))), "oversize"))
        elif kind == "bad_fcs":
            f = with_fcs(_pad(udp(net.ctl_port, payload(rng.randint(0, 100)))))
            bit = rng.randrange(8*42, 8*len(f))  # In the payload or the FCS: the headers stay readable.
            out.append((f[:bit // 8] + bytes([f[bit // 8] ^ (1 << bit % 8)]) + f[bit // 8 + 1:], "fcs"))
        elif kind == "bad_ip_checksum":
            good = IP(raw(ip / UDP(sport=40000, dport=net.ctl_port) / Raw(payload(20)))).chksum
            out.append((with_fcs(_pad(udp(net.ctl_port, payload(20), chksum=good ^ (1 + rng.randrange(0xFFFF))))), "ip_checksum"))
        elif kind == "ip_options":
            words = rng.randint(1, 10)
            opts = bytes([1]) * (4*words - 1) + bytes([0])   # NOPs then end-of-options.
            out.append((with_fcs(_pad(udp(net.ctl_port, payload(16), options=[Raw(opts)]))), "ip_options"))
        elif kind == "fragment":
            big = eth / IP(src=net.host_ip, dst=net.board_ip, id=rng.randrange(65536)) / \
                UDP(sport=40000, dport=net.ctl_port) / Raw(payload(3000))
            parts = fragment(big[IP], fragsize=1400)
            rng.shuffle(parts)
            out += [(with_fcs(_pad(raw(eth / p))), "ip_fragment") for p in parts]
        elif kind == "ip_version":
            f = bytearray(_pad(udp(net.ctl_port, payload(16))))
            f[14] = (rng.choice([6, 5, 0]) << 4) | (f[14] & 0x0F)
            out.append((with_fcs(bytes(f)), "ip_version"))
        elif kind == "udp_zero":
            out.append((with_fcs(_pad(udp(rng.choice([net.ctl_port, net.data_port, 9, 319, 320]), b""))), "udp_empty"))
        elif kind == "udp_15_16":
            port = rng.choice([net.ctl_port, 9000, 9999])
            out.append((with_fcs(_pad(udp(port, payload(15 + i % 2)))), udp_cause(port, b"x")))
        elif kind == "udp_length_lies":
            data = payload(rng.randint(8, 64))
            length = rng.choice([len(data) + 8 + rng.randint(1, 200), rng.randint(8, len(data) + 7),
                                 rng.randint(0, 7)])
            out.append((with_fcs(_pad(raw(eth / ip / UDP(sport=40000, dport=net.ctl_port, len=length) / Raw(data)))), "udp_length"))
        elif kind == "udp_truncated":
            data = payload(rng.randint(20, 200))
            f = raw(eth / IP(src=net.host_ip, dst=net.board_ip, len=20 + 8 + len(data) + rng.randint(1, 1000)) /
                    UDP(sport=40000, dport=net.ctl_port) / Raw(data))
            out.append((with_fcs(_pad(f)), "ip_length"))
        elif kind == "arp_storm":
            src_ip = f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
            src_mac = "02:" + ":".join(f"{rng.randrange(256):02x}" for _ in range(5))
            target = rng.choice([net.board_ip, f"10.{rng.randint(0, 255)}.0.1"])
            out.append((with_fcs(_pad(raw(Ether(src=src_mac, dst="ff:ff:ff:ff:ff:ff") /
                                          ARP(op=1, hwsrc=src_mac, psrc=src_ip, pdst=target)))),
                        "rx_ok" if target == net.board_ip else "not_ours"))
        elif kind == "arp_malformed":
            a = ARP(op=1, hwsrc=net.host_mac, psrc=net.host_ip, pdst=net.board_ip)
            variant = i % 4
            if variant == 0:
                a.hwlen = rng.choice([0, 4, 8])
            elif variant == 1:
                a.plen = rng.choice([0, 6, 16])
            elif variant == 2:
                a.op = rng.randint(3, 0xFFFF)
            else:
                a.hwtype, a.ptype = rng.choice([(0, 0x0800), (6, 0x0800), (1, 0x86DD), (0xFFFF, 0)])
            out.append((with_fcs(_pad(raw(Ether(src=net.host_mac, dst="ff:ff:ff:ff:ff:ff") / a))), "arp_malformed"))
        elif kind == "icmp_flood":
            out.append((with_fcs(_pad(raw(eth / ip / ICMP(id=0x4242, seq=i) / Raw(payload(56))))), "rx_ok"))
        elif kind == "icmp_big":
            if i % 2 == 0:
                out.append((with_fcs(raw(eth / ip / ICMP(id=0x4243, seq=i) / Raw(payload(1472)))), "rx_ok"))
            else:
                big = IP(src=net.host_ip, dst=net.board_ip, id=rng.randrange(65536)) / ICMP(id=0x4243, seq=i) / \
                    Raw(payload(8000))
                out += [(with_fcs(_pad(raw(eth / p))), "ip_fragment") for p in fragment(big, fragsize=1480)]
        elif kind == "broadcast":
            if i % 2:
                out.append((with_fcs(_pad(raw(Ether(src=net.host_mac, dst="ff:ff:ff:ff:ff:ff", type=0x88B5) /
                                              Raw(payload(46))))), "ethertype"))
            else:
                # Random data, or an IDENTIFY (the only control request a broadcast may carry), to
                # the limited broadcast, the board's subnet's, or another subnet's (not the board's).
                # The first two: a STATUS, then an IDENTIFY, to the control port of the board's subnet.
                port, data = rng.choice([net.ctl_port, 67, 137, 5000]), payload(rng.randint(0, 200))
                dst = rng.choice(["255.255.255.255", net.directed_broadcast, "10.99.255.255"])
                if i < 4:
                    port, dst, data = net.ctl_port, net.directed_broadcast, struct.pack(">HBBI", 0xEDAC, 1, 5, i)
                if (i == 2 or i >= 4 and rng.random() < 0.5) and port == net.ctl_port:
                    data = struct.pack(">HBBI", 0xEDAC, 1, 1, i)
                cause = udp_cause(port, data)
                # Byte 3 of a control datagram (padding if it is shorter) is the message type: 1 is IDENTIFY.
                if cause == "rx_ok" and port == net.ctl_port and (data + bytes(4))[3] != 1:
                    cause = "broadcast"
                out.append((with_fcs(_pad(raw(Ether(src=net.host_mac, dst="ff:ff:ff:ff:ff:ff") /
                                              IP(src=net.host_ip, dst=dst) /
                                              UDP(sport=40000, dport=port) / Raw(data)))),
                            "not_ours" if dst == "10.99.255.255" else cause))
        elif kind == "multicast":
            group = rng.choice(["224.0.0.1", "239.1.2.3", "224.0.1.129", "224.0.0.107"])
            last3 = [int(x) for x in group.split(".")[1:]]
            mac = "01:00:5e:%02x:%02x:%02x" % (last3[0] & 0x7F, last3[1], last3[2])
            port, data = rng.choice([5000, 9999, net.ctl_port]), payload(rng.randint(0, 300))
            joined = net.ptp_transport == "udp" and group in ("224.0.1.129", "224.0.0.107")
            out.append((with_fcs(_pad(raw(Ether(src=net.host_mac, dst=mac) / IP(src=net.host_ip, dst=group, ttl=1) /
                                          UDP(sport=40000, dport=port) / Raw(data)))),
                        udp_cause(port, data) if joined else "not_ours"))
        elif kind == "ptp_malformed":
            msg = bytearray(payload(rng.randint(0, 64)))
            if len(msg) >= 4:
                msg[0] = rng.choice([0x00, 0x08, 0x0B, 0x0F])        # Sync, Follow_Up, Announce, reserved.
                msg[1] = rng.choice([0x02, 0x01, 0x12, 0xF2])        # Versions 2, 1, 2.1 and junk.
                msg[2:4] = struct.pack(">H", rng.choice([len(msg), 0, 44, 64, 0xFFFF]))
            if i % 2:
                group = "224.0.1.129"
                port = rng.choice([319, 320])
                out.append((with_fcs(_pad(raw(Ether(src=net.host_mac, dst="01:00:5e:00:01:81") /
                                              IP(src=net.host_ip, dst=group, ttl=1) /
                                              UDP(sport=319, dport=port) / Raw(bytes(msg))))),
                            udp_cause(port, msg) if net.ptp_transport == "udp" else "not_ours"))
            else:
                out.append((with_fcs(_pad(raw(Ether(src=net.host_mac, dst="01:1b:19:00:00:00", type=0x88F7) /
                                              Raw(bytes(msg))))), "rx_ok" if net.ptp_transport == "l2" else "ethertype"))
        elif kind == "ctl_malformed":
            from ethdaq.wire import protocol
            good = bytearray(protocol.status_request(i))
            variant = i % 4
            if variant == 0:
                good[0:2] = struct.pack(">H", protocol.MAGIC ^ rng.randrange(1, 0x10000))
            elif variant == 1:
                good[2] = (protocol.VERSION + rng.randint(1, 200)) & 0xFF
            elif variant == 2:
                good[3] = rng.choice([0x00, 0x40, 0x7F, 0xFE])
            else:
                good = good + payload(rng.randint(1, 40)) if rng.random() < 0.5 else good[:rng.randint(0, 7)]
            out.append((with_fcs(_pad(udp(net.ctl_port, bytes(good)))), udp_cause(net.ctl_port, good)))
        elif kind == "random":
            f = bytes.fromhex(net.board_mac.replace(":", "")) + payload(rng.randint(60, 1514) - 6)
            ethertype = struct.unpack(">H", f[12:14])[0]
            out.append((with_fcs(f), None if ethertype in (0x0800, 0x0806, 0x88F7) else "ethertype"))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=8, help="frames per kind (default 8)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-o", "--output", help="pcap of every frame (FCS included: tshark -o eth.assume_fcs:TRUE)")
    args = p.parse_args(argv)
    net = Network(board_mac="10:e2:d5:00:00:01", board_ip="192.168.1.50", host_mac="02:00:00:00:00:01",
                  host_ip="192.168.1.100")
    rng = random.Random(args.seed)
    everything = []
    print(f"{'kind':<16} {'frames':>6} {'bytes':>8} {'bad FCS':>7}  what")
    for kind, what in KINDS.items():
        fs = frames(kind, net, rng, args.count)
        everything += fs
        print(f"{kind:<16} {len(fs):>6} {sum(map(len, fs)):>8} {sum(not fcs_ok(f) for f in fs):>7}  {what}")
    if args.output:
        from scapy.utils import PcapWriter
        with PcapWriter(args.output, linktype=1) as w:
            for f in everything:
                w.write(f)
        print(f"{len(everything)} frames in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
