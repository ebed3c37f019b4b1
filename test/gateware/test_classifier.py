"""Receive classifier (gateware/classifier.py) in LiteEth's MAC receive path, in Migen simulation:
frames built by scapy, with the FCS from zlib (an independent CRC-32), arrive on GMII pads
through LiteEth's GMII PHY, preamble checker and FCS checker, as on the board. Checked: which
rule decides, the fast-track payload and metadata, that a bad FCS, a fragment or a lying UDP
length never reaches the fast-track sink, what LiteEth is handed (dropped and fast-tracked
frames flagged, others untouched), the per-rule counters, and the latency from the frame's last
byte on the pads to the fast-track sink, counted in cycles here, independently of the design.
The same frames arrive at 64 bits too (dw=64): as XGMII columns through LiteEth's XGMII receiver
(/S/ in lane 0 or 4, which its aligner moves to lane 0) and its 64-bit preamble and FCS checkers,
and must give the same fast-track deliveries, flags and counters."""


import pytest
from migen import *
from migen.sim import passive, run_simulation

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from liteeth.common import eth_phy_description
from liteeth.mac.core import LiteEthMACCore
from liteeth.phy.gmii import LiteEthPHYGMIIRX
from liteeth.phy.xgmii import LiteEthPHYXGMIIRX
from scapy.layers.inet import IP, UDP, TCP
from scapy.layers.l2 import ARP, Ether

from ethdaq.gateware.classifier import (ACTION_CPU, ACTION_DROP, ACTION_FASTTRACK, FastTrackSink,
                                        RXClassifier, insert_classifier)
from ethdaq.gateware.probe import RX_CLASSES, DAQProbes
from ethdaq.gateware.tsu import PHY_FPGA_LATENCY_CYCLES

from stream_helpers import wire
from test_probe import expected, read_class

BOARD_MAC = "10:e2:d5:00:00:77"
BOARD_IP  = "192.168.77.50"
HOST      = dict(src="02:00:00:00:00:01")
CLK_NS    = {8: 8, 64: 6.4}   # 125 MHz (GMII), 156.25 MHz (XGMII).


@pytest.fixture(params=[8, 64])
def dw(request):
    return request.param


class _PHY:
    def __init__(self, pads, dw):
        self.dw     = dw
        self.rx     = LiteEthPHYGMIIRX(pads) if dw == 8 else LiteEthPHYXGMIIRX(pads, dw)
        self.source = self.rx.source
        self.sink   = stream.Endpoint(eth_phy_description(dw))


class Dut(LiteXModule):
    def __init__(self, nrules=4, payload_bytes=16, dw=8):
        for cd in ("sys", "eth_rx", "eth_tx"):
            setattr(self, f"cd_{cd}", ClockDomain(cd))
        if dw == 8:
            self.pads = Record([("rx_dv", 1), ("rx_er", 1), ("rx_data", 8)])
        else:
            self.pads = Record([("rx_ctl", 8), ("rx_data", 64)])
        self.phy  = _PHY(self.pads, dw)
        self.submodules.phy_rx = ClockDomainsRenamer("eth_rx")(self.phy.rx)
        self.core = LiteEthMACCore(self.phy, dw=dw, with_preamble_crc=True)
        if dw == 8:
            # LiteEth's 8-bit PHYs leave last_be at 0, and its FCS checker then checks nothing:
            # DAQSoC sets it (gateware/txpath.py); so does this bench.
            self.comb += self.phy.source.last_be.eq(self.phy.source.last)
        self.classifier = RXClassifier(nrules=nrules, payload_bytes=payload_bytes, dw=dw)
        insert_classifier(self.core, self.classifier)
        self.comb += self.classifier.mac.eq(int(BOARD_MAC.replace(":", ""), 16))
        self.sink_csrs = FastTrackSink(self.classifier.fasttrack)
        if dw == 8:
            # The SoC's receive latency probe (gateware/probe.py), on the same events as in DAQSoC.
            self.probes = DAQProbes(None, self.phy, None, (), PHY_FPGA_LATENCY_CYCLES["gmii"],
                                    fasttrack=self.classifier.fasttrack)


def xgmii_columns(frames):
    """The wire frames (wire(): preamble, SFD, frame, FCS) as XGMII columns (ctl, data): /S/ in
    place of the first preamble byte, /T/ after the FCS, then idles to the next start, which
    alternates between lane 0 and lane 4 (a 12 to 19-byte gap). For each frame, the index of the
    column holding its last FCS byte."""
    chars, ends = [], []
    for n, f in enumerate(frames):
        chars += [(1, 0xFB)] + [(0, b) for b in f[1:]]
        ends.append((len(chars) - 1)//8)
        chars += [(1, 0xFD)] + [(1, 0x07)]*11
        lane = 4 if n % 2 == 0 else 0
        chars += [(1, 0x07)]*((lane - len(chars)) % 8)
    chars += [(1, 0x07)]*(-len(chars) % 8 + 16)
    columns = []
    for c in range(0, len(chars), 8):
        col = chars[c:c + 8]
        columns.append((sum(k << i for i, (k, _) in enumerate(col)), sum(b << 8*i for i, (_, b) in enumerate(col))))
    return columns, ends


def udp(dport, payload, src_ip="192.168.77.1", sport=40000, dst_mac=BOARD_MAC, **ip):
    return Ether(dst=dst_mac, **HOST) / IP(src=src_ip, dst=BOARD_IP, **ip) / UDP(sport=sport, dport=dport) / payload


def rule(dut, index, action, ethertype=None, proto=None, port=None, src_ip=None, enable=1):
    c = dut.classifier
    yield c._rule_select.storage.eq(index)
    fields = c._rule_control.fields
    yield fields.enable.eq(enable)
    yield fields.action.eq(action)
    yield fields.match_type.eq(ethertype is not None)
    yield fields.match_proto.eq(proto is not None)
    yield fields.match_port.eq(port is not None)
    yield fields.match_src.eq(src_ip is not None)
    yield c._rule_ethertype.storage.eq(ethertype or 0)
    yield c._rule_proto.storage.eq(proto or 0)
    yield c._rule_port.storage.eq(port or 0)
    yield c._rule_src_ip.storage.eq(int.from_bytes(bytes(map(int, src_ip.split("."))), "big") if src_ip else 0)
    yield c._rule_write.re.eq(1)
    yield
    yield c._rule_write.re.eq(0)
    for _ in range(20):
        yield
    assert (yield c._rule_pending.status) == 0


def run(frames, rules, payload_bytes=16, nrules=4, dw=8):
    """frames: [(wire bytes)]; rules: [(index, action, kwargs)]. Returns what the fast-track sink
    and LiteEth received (bytes and error flag per frame), the latencies and the counters."""
    dut = Dut(nrules=nrules, payload_bytes=payload_bytes, dw=dw)
    out = {"ft": [], "mac": [], "last_on_pads": [], "ft_cycles": [], "counters": {}}
    state = {"cycle": 0, "started": False}

    @passive
    def clock():
        while True:
            yield
            state["cycle"] += 1

    def pads():
        while not state["started"]:
            yield
        if dw == 64:
            columns, ends = xgmii_columns(frames)
            for c, (ctl, data) in enumerate(columns):
                yield dut.pads.rx_ctl.eq(ctl)
                yield dut.pads.rx_data.eq(data)
                if c in ends:
                    out["last_on_pads"].append(state["cycle"])
                yield
            return
        for f in frames:
            for i, b in enumerate(f):
                yield dut.pads.rx_dv.eq(1)
                yield dut.pads.rx_data.eq(b)
                if i == len(f) - 1:
                    out["last_on_pads"].append(state["cycle"])
                yield
            yield dut.pads.rx_dv.eq(0)
            for _ in range(12):   # Inter-frame gap.
                yield

    @passive
    def ft_sink():
        ft = dut.classifier.fasttrack
        while True:
            if (yield ft.valid):
                out["ft_cycles"].append(state["cycle"])
                n = yield ft.length
                p = (yield ft.payload).to_bytes(payload_bytes, "little")
                out["ft"].append(dict(rule=(yield ft.rule), length=n, payload=p[:min(n, payload_bytes)],
                                      src_ip=(yield ft.src_ip), src_port=(yield ft.src_port)))
            yield

    def mac_side():
        yield dut.core.source.ready.eq(1)
        for index, action, kw in rules:
            yield from rule(dut, index, action, **kw)
        state["started"] = True
        n = 0
        for _ in range(sum(len(f) + 40 for f in frames) + 400):
            if (yield dut.core.source.valid):
                if (yield dut.core.source.last):
                    n += (yield dut.core.source.last_be).bit_length() if dw == 64 else 1
                    out["mac"].append((n, int((yield dut.core.source.error) != 0)))
                    n = 0
                else:
                    n += dw//8
            yield
        c = dut.classifier
        for i in range(nrules):
            yield c._rule_select.storage.eq(i)
            yield
            yield
            out["counters"][i] = ((yield c._matched.status), (yield c._refused.status))
        out["counters"]["unmatched"] = yield c._unmatched.status
        if dw == 8:
            out["probe"] = yield from read_class(dut.probes.rx, RX_CLASSES.index("fasttrack"))
            out["probe_unpaired"] = yield dut.probes.rx._unpaired.status
        f = dut.sink_csrs
        out["sink_csrs"] = dict(count=(yield f._count.status), rule=(yield f._rule.status),
                                src_ip=(yield f._src_ip.status), length=(yield f._length.status),
                                payload=(yield f._payload.status).to_bytes(8, "little"))

    run_simulation(dut, {"eth_rx": [pads(), ft_sink(), clock()], "sys": [mac_side()]},
                   clocks={"sys": 10, "eth_rx": 8, "eth_tx": 8})
    return out


def test_a_fasttrack_rule_delivers_the_payload_within_150_ns_of_the_last_byte_on_the_pads(dw):
    frames = [wire(udp(9000, bytes(range(1, 6)))), wire(udp(9000, bytes(range(100, 140)), sport=1234))]
    out = run(frames, [(0, ACTION_FASTTRACK, dict(port=9000))], dw=dw)
    assert out["ft"] == [
        dict(rule=0, length=5, payload=bytes(range(1, 6)), src_ip=0xC0A84D01, src_port=40000),
        dict(rule=0, length=40, payload=bytes(range(100, 116)), src_ip=0xC0A84D01, src_port=1234),
    ]
    cycles = [f - l for f, l in zip(out["ft_cycles"], out["last_on_pads"])]
    latencies = [n * CLK_NS[dw] for n in cycles]
    assert all(0 < ns <= 150 for ns in latencies), latencies
    # Taken from the stack: LiteEth sees both frames flagged.
    assert [e for _, e in out["mac"]] == [1, 1]
    assert out["counters"][0] == (2, 0) and out["counters"]["unmatched"] == 0
    # The SoC's consumer (CSRs in sys): both counted, the last one kept.
    assert out["sink_csrs"] == dict(count=2, rule=0, src_ip=0xC0A84D01, length=40, payload=bytes(range(100, 108)))
    print(f"fast-track latency at {dw} bits: {latencies} ns ({cycles} cycles) after the last FCS byte on the pads")
    if dw == 64:   # The latency probes are 8-bit only.
        return
    # The latency probe agrees, frame for frame. The bench counts from the cycle it writes the
    # last byte to the pads, the probe from the cycle the byte is on them: one cycle later.
    assert out["probe"] == expected([n - 1 for n in cycles])
    assert out["probe_unpaired"] == 0


def test_the_fasttrack_probe_counts_only_fasttracked_frames_and_never_a_bad_one():
    """Frames of every kind arrive, each one's last byte a start for the probe; only the
    fast-tracked ones end. A bad FCS on a fast-track port reaches no sink and records nothing."""
    frames = [wire(udp(9000, b"a" * 20)), wire(udp(7000, b"b" * 30)), wire(udp(9000, b"c" * 5), fcs_flip=1),
              wire(Ether(dst="ff:ff:ff:ff:ff:ff", **HOST) / ARP(pdst=BOARD_IP)), wire(udp(9000, b"d" * 64))]
    out = run(frames, [(0, ACTION_FASTTRACK, dict(port=9000))])
    assert len(out["ft"]) == 2
    good = [out["last_on_pads"][0], out["last_on_pads"][4]]
    assert out["probe"] == expected([f - l - 1 for f, l in zip(out["ft_cycles"], good)])
    assert out["probe_unpaired"] == 0


def test_bad_fcs_fragments_and_lying_lengths_never_reach_the_sink_and_are_counted(dw):
    good = udp(9000, b"trigger!")
    lying = udp(9000, b"short")
    lying[UDP].len = 60                                     # More than the frame holds.
    frames = [
        wire(good, fcs_flip=1),                             # Bad FCS.
        wire(udp(9000, b"x" * 20, flags="MF")),             # First fragment of several.
        wire(Ether(bytes(lying))),
        wire(good),                                         # The only one delivered.
    ]
    out = run(frames, [(0, ACTION_FASTTRACK, dict(port=9000))], dw=dw)
    assert [f["payload"] for f in out["ft"]] == [b"trigger!"]
    assert out["counters"][0] == (1, 2)        # The fragment has no UDP port: no match at all.
    assert out["counters"]["unmatched"] == 1
    # LiteEth: the bad frame flagged by its FCS checker, the fragment passed on, the lying and
    # the good datagram taken by the rule.
    assert [e for _, e in out["mac"]] == [1, 0, 1, 1]


def test_first_matching_rule_decides_and_other_traffic_is_untouched(dw):
    frames = [
        wire(udp(7000, b"a", src_ip="192.168.77.9")),                  # rule 1 (src) before rule 2 (port)
        wire(udp(7000, b"b")),                                         # rule 2
        wire(udp(7001, b"c")),                                         # no rule
        wire(Ether(dst="ff:ff:ff:ff:ff:ff", **HOST) / ARP(pdst=BOARD_IP)),   # rule 3 (EtherType), CPU
        wire(udp(7000, b"d", dst_mac="02:00:00:00:00:99")),            # not addressed to the board
        wire(Ether(dst=BOARD_MAC, **HOST) / IP(src="10.0.0.1", dst=BOARD_IP) / TCP(dport=7000)),  # proto 6
    ]
    out = run(frames, [
        (0, ACTION_DROP, dict(proto=6)),
        (1, ACTION_FASTTRACK, dict(src_ip="192.168.77.9")),
        (2, ACTION_DROP, dict(port=7000, proto=17)),
        (3, ACTION_CPU, dict(ethertype=0x0806)),
    ], dw=dw)
    assert [(f["rule"], f["payload"]) for f in out["ft"]] == [(1, b"a")]
    assert [e for _, e in out["mac"]] == [1, 1, 0, 0, 0, 1]
    assert [len(f) - 12 for f in frames] == [n for n, _ in out["mac"]]   # Every byte but preamble and FCS.
    assert [out["counters"][i] for i in range(4)] == [(1, 0), (1, 0), (1, 0), (1, 0)]
    assert out["counters"]["unmatched"] == 2


def test_a_disabled_rule_matches_nothing(dw):
    out = run([wire(udp(9000, b"z"))], [(0, ACTION_FASTTRACK, dict(port=9000, enable=0))], dw=dw)
    assert out["ft"] == [] and [e for _, e in out["mac"]] == [0]
    assert out["counters"][0] == (0, 0) and out["counters"]["unmatched"] == 1


def test_ip_options_move_the_udp_header_and_are_parsed(dw):
    """4, 8 and 40 bytes of options: at 64 bits the UDP header then starts in lane 6, 2 and 2
    of beats 4, 5 and 9 (lane 2 of beat 4 without)."""
    from scapy.layers.inet import IPOption_NOP
    frames = [wire(udp(9000, b"opt%d" % n, sport=n, options=[IPOption_NOP()] * n)) for n in (4, 8, 40)]
    out = run(frames, [(0, ACTION_FASTTRACK, dict(port=9000))], dw=dw)
    assert [(f["payload"], f["src_port"]) for f in out["ft"]] == [(b"opt4", 4), (b"opt8", 8), (b"opt40", 40)]


def test_every_payload_length_and_lane_gives_the_same_delivery(dw):
    """Payloads of 0 to 30 bytes with 20 kept (not a whole number of 64-bit words), the UDP
    header in lane 2 and lane 6 (4 bytes of IP options), datagrams that end in the frame's last
    beat and in its padding: every delivery holds the payload's first bytes, and its length."""
    from scapy.layers.inet import IPOption_NOP
    frames, expect = [], []
    for n in range(0, 31, 3):
        for options in (0, 4):
            payload = bytes((7*n + i) & 0xff for i in range(n))
            frames.append(wire(udp(9000, payload, sport=n, options=[IPOption_NOP()] * options)))
            expect.append((n, payload[:20]))
    out = run(frames, [(0, ACTION_FASTTRACK, dict(port=9000))], payload_bytes=20, dw=dw)
    assert [(f["length"], f["payload"]) for f in out["ft"]] == expect
    assert out["counters"][0] == (len(frames), 0)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="nrules"):
        RXClassifier(nrules=0)
    with pytest.raises(ValueError, match="payload_bytes"):
        RXClassifier(payload_bytes=0)
    with pytest.raises(ValueError, match=r"^dw must be 8 \(1G\) or 64 \(10G\), not 16$"):
        RXClassifier(dw=16)


class AuditDut(LiteXModule):
    """The receive audit in front of the classifier, as DAQSoC chains them (the classifier's
    `takes` is the audit's `claimed`), in the MAC datapath's domain: eth_rx at 8 bits, sys at 64."""
    def __init__(self, dw):
        from ethdaq.gateware.rxaudit import RXAudit
        for cd in ("sys", "eth_rx"):
            setattr(self, f"cd_{cd}", ClockDomain(cd))
        cd_rx = "eth_rx" if dw == 8 else "sys"
        self.audit      = RXAudit(dw=dw, udp_ports=(7000,), ctl_port=7000, cd_rx=cd_rx)
        self.classifier = RXClassifier(dw=dw, cd_rx=cd_rx)
        mac = int(BOARD_MAC.replace(":", ""), 16)
        self.comb += [
            self.audit.source.connect(self.classifier.sink),
            self.classifier.source.ready.eq(1),
            self.audit.claimed.eq(self.classifier.takes),
            self.audit.mac.eq(mac), self.classifier.mac.eq(mac),
            self.audit.ip.eq(int.from_bytes(bytes(map(int, BOARD_IP.split("."))), "big")),
        ]


def test_a_fasttrack_rule_claims_its_port_for_the_audit_in_time_at_both_widths(dw):
    """Minimum-size datagrams to a port only a fast-track rule takes, back to back (at 64 bits
    the UDP port is 3 beats before the last, the classifier 2 cycles behind the audit): the audit
    counts them rx_ok, not udp_port, and the rule delivers them; one to another port is udp_port."""
    from ethdaq.gateware.rxaudit import CAUSE
    frames = [bytes(udp(9100, bytes([n]*18)))[:60] for n in range(6)] + [bytes(udp(9101, bytes(18)))[:60]]
    dut = AuditDut(dw)
    n, cd = dw//8, "eth_rx" if dw == 8 else "sys"
    out = {"ft": [], "counts": {}}
    state = {"started": False, "done": False}

    def feed():
        sink = dut.audit.sink
        while not state["started"]:
            yield
        for f in frames:
            for i in range(0, len(f), n):
                last = i + n >= len(f)
                yield sink.valid.eq(1)
                yield sink.data.eq(int.from_bytes(f[i:i + n], "little"))
                yield sink.last.eq(last)
                yield sink.last_be.eq(1 << (len(f[i:i + n]) - 1) if last else 0)
                yield
            yield sink.valid.eq(0)
            for _ in range(max(2, 20//n)):   # Preamble and gap: 20 byte times.
                yield
        for _ in range(40):
            yield
        state["done"] = True

    @passive
    def ft_sink():
        while True:
            if (yield dut.classifier.fasttrack.valid):
                out["ft"].append((yield dut.classifier.fasttrack.payload) & 0xff)
            yield

    def cpu():
        yield from rule(dut, 0, ACTION_FASTTRACK, port=9100)
        state["started"] = True
        while not state["done"]:
            yield
        for name, i in CAUSE.items():
            yield from dut.audit._select.write(i)
            for _ in range(4):
                yield
            out["counts"][name] = yield from dut.audit._count.read()

    gens = {"sys": [cpu()]}
    gens.setdefault(cd, []).extend([feed(), ft_sink()])
    run_simulation(dut, gens, clocks={"sys": 10, "eth_rx": 8} if dw == 8 else {"sys": 8, "eth_rx": 8})
    assert out["ft"] == list(range(6))
    assert {k: v for k, v in out["counts"].items() if v} == {"rx_ok": 6, "udp_port": 1}
