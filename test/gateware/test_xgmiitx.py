"""XGMIITransmitter (gateware/xgmiitx.py) in Migen simulation, its XGMII lanes decoded by
bench.xgmii.decode_xgmii (lane protocol, preamble/SFD, FCS by zlib.crc32), every frame parsed
by scapy and dissected by tshark (FCS, IPv4 checksum, UDP length), and every gap held against the
deficit idle count of 802.3 46.3.1.4 (/S/ in lane 0 or 4, each gap at least 9 bytes plus the
idles deleted before it and not made up, at most 3 outstanding)."""

import random
import zlib

import pytest
from migen import ClockDomain, run_simulation
from migen.sim import passive
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from litex.gen import LiteXModule

from bench import xgmii
from conftest import tshark_frame_checks
from ethdaq.gateware.xgmiitx import XGMIITransmitter

PREAMBLE = b"\x55"*7 + b"\xd5"


class Dut(LiteXModule):
    def __init__(self):
        self.cd_sys = ClockDomain("sys")
        self.pads = xgmii.XGMIIPads()
        self.tx = XGMIITransmitter(self.pads)


def udp_frame(payload_len, seq):
    """An Ethernet/IPv4/UDP frame (no FCS) built by scapy."""
    payload = bytes((seq + i) & 0xff for i in range(payload_len))
    return bytes(Ether(dst="aa:b6:24:69:77:21", src="10:e2:d5:00:00:00") /
                 IP(src="192.168.1.50", dst="192.168.1.100", id=seq & 0xffff) /
                 UDP(sport=5000, dport=5000) / Raw(payload))


@passive
def send_words(sink, frames, rng=None, gap_prob=0.0, hole=None):
    """Offer `frames` on `sink` 8 bytes a word; with `rng`, idle cycles before a frame with
    probability `gap_prob` each; `hole` = (frame, word): valid drops for 3 cycles before it."""
    for k, f in enumerate(frames):
        while rng is not None and rng.random() < gap_prob:
            yield sink.valid.eq(0)
            yield
        words = [f[i:i + 8] for i in range(0, len(f), 8)]
        for i, w in enumerate(words):
            if hole == (k, i):
                yield sink.valid.eq(0)
                for _ in range(3):
                    yield
            yield sink.valid.eq(1)
            yield sink.data.eq(int.from_bytes(w, "little"))
            yield sink.last.eq(i == len(words) - 1)
            yield sink.last_be.eq(1 << (len(w) - 1) if i == len(words) - 1 else 0)
            yield
            while not (yield sink.ready):
                yield
        yield sink.valid.eq(0)
    while True:
        yield


def run(frames, rng=None, gap_prob=0.0, hole=None):
    """The XGMII lanes ("X cycle ctl data" lines, bench.xgmii's format) and the underrun count."""
    dut = Dut()
    lines, result = [], {}
    cycles = 200 + sum(len(f) // 8 + 6 for f in frames) * (1 + int(8 * gap_prob))

    def reader():
        ends = 0
        for cycle in range(cycles):
            yield
            ctl, data = (yield dut.pads.tx_ctl), (yield dut.pads.tx_data)
            if ctl != 0xff or data != 0x0707070707070707:
                lines.append(f"X {cycle} {ctl:02x} {data:016x}")
                ends += sum((ctl >> i) & 1 and (data >> 8*i) & 0xff == 0xfd for i in range(8))
                if ends == len(frames):
                    break
        result["underruns"] = yield dut.tx.underruns

    run_simulation(dut, [send_words(dut.tx.sink, frames, rng, gap_prob, hole), reader()])
    return lines, result["underruns"]


def padded(frame):
    return frame + bytes(max(0, 60 - len(frame)))


def dic_check(frames, back_to_back=False):
    """Each gap against the deficit idle count; back to back, each gap is the shortest allowed.
    Returns the gaps."""
    gaps = xgmii.ifgs(frames)
    dic = 0
    for k, g in enumerate(gaps):
        assert frames[k + 1].lane in (0, 4)
        assert g >= 9 + dic, f"gap {k}: {g} bytes with {dic} idles already deleted"
        if back_to_back:
            assert g - 4 < 9 + dic, f"gap {k}: {g} bytes, {g - 4} was allowed (deficit {dic})"
        dic = max(0, dic + 12 - g)
        assert 0 <= dic <= 3
    return gaps


def check_frames(decoded, frames, tmp_path):
    """Every frame intact, in order: decoder, scapy, tshark."""
    assert len(decoded) == len(frames)
    for k, (f, sent) in enumerate(zip(decoded, frames)):
        assert f.preamble_ok, f"frame {k}: preamble/SFD"
        assert f.fcs_ok, f"frame {k}: FCS"
        assert f.data[:-4] == padded(sent), f"frame {k}: content"
        assert f.data[-4:] == zlib.crc32(padded(sent)).to_bytes(4, "little")
        pkt, ref = Ether(f.data[:-4]), Ether(sent)
        sent_payload = bytes(ref[UDP].payload)
        assert pkt[UDP].len == ref[UDP].len == 8 + len(sent_payload)
        assert bytes(pkt[UDP].payload)[:len(sent_payload)] == sent_payload, f"frame {k}: UDP payload"
    checks = tshark_frame_checks([PREAMBLE + f.data for f in decoded], tmp_path / "xgmii.pcap")
    for k, (protocols, fcs, ipsum, udplen) in enumerate(checks):
        assert protocols.startswith("eth:ethertype:ip:udp"), f"frame {k}: {protocols}"
        assert (fcs, ipsum) == ("1", "1"), f"frame {k}: FCS {fcs}, IPv4 checksum {ipsum}"
        assert int(udplen) == Ether(frames[k])[UDP].len


def random_frames(seed, n):
    """UDP payloads of 0..17 bytes (frames under 60 bytes: padding), 18..22 (60..64-byte
    frames), every frame length mod 8, and random sizes up to 600 (the Verilator bench takes the jumbo frames)."""
    rng = random.Random(seed)
    sizes = list(range(0, 23)) + [100 + r for r in range(8)] + [1472]
    sizes += [rng.randrange(0, 600) for _ in range(n - len(sizes))]
    rng.shuffle(sizes)
    return [udp_frame(s, k) for k, s in enumerate(sizes)]


def test_random_frames_back_to_back_decode_and_keep_the_shortest_gaps(tmp_path):
    frames = random_frames(1, 60)
    lines, underruns = run(frames)
    decoded = xgmii.decode_xgmii(lines)
    check_frames(decoded, frames, tmp_path)
    gaps = dic_check(decoded, back_to_back=True)
    assert underruns == 0
    assert abs(sum(gaps) - 12*len(gaps)) <= 3, f"mean gap {sum(gaps)/len(gaps)}"
    assert min(gaps) == 9 and max(gaps) == 15
    assert {f.lane for f in decoded} == {0, 4}


@pytest.mark.parametrize("seed", [2])
def test_random_frames_with_gaps_on_the_input(tmp_path, seed):
    frames = random_frames(seed, 50)
    lines, underruns = run(frames, random.Random(seed), gap_prob=0.4)
    decoded = xgmii.decode_xgmii(lines)
    check_frames(decoded, frames, tmp_path)
    dic_check(decoded)
    assert underruns == 0


@pytest.mark.parametrize("frame_len", [60, 61, 64, 65, 67, 106])
def test_back_to_back_at_one_size_is_the_full_line_rate(frame_len):
    """The /S/ of frame k + 1 comes frame_len + 24 byte times after frame k's, on average
    exactly: preamble 8, FCS 4, gap 12."""
    frames = [bytes([0x02] + [k & 0xff]*(frame_len - 1)) for k in range(24)]
    decoded = xgmii.decode_xgmii(run(frames)[0])
    assert [f.data[:-4] for f in decoded] == frames and all(f.fcs_ok for f in decoded)
    gaps = dic_check(decoded, back_to_back=True)
    span = decoded[-1].start - decoded[0].start
    assert abs(span - (len(frames) - 1)*(frame_len + 24)) <= 3


def test_a_frame_with_a_hole_goes_out_with_error_characters_and_is_counted():
    frames = [udp_frame(200, k) for k in range(3)]
    lines, underruns = run(frames, hole=(1, 10))
    assert underruns == 3
    errored = [line for line in lines if "fe" in line.split()[3]]
    assert errored
    with pytest.raises(xgmii.XGMIIError, match="control fe"):
        xgmii.decode_xgmii(lines)
    first = xgmii.decode_xgmii([line for line in lines if int(line.split()[1]) < int(errored[0].split()[1])])
    assert [f.data[:-4] for f in first] == frames[:1]


def test_from_a_frame_offered_to_an_idle_link_to_its_start_is_one_cycle():
    """The first word is offered in cycle 1 (the sender's first yield) and the output register
    shows /S/ after the next clock: one cycle (6.4 ns at 156.25 MHz)."""
    lines, _ = run([udp_frame(100, 0)])
    assert lines[0].split()[1:3] == ["1", "01"]
