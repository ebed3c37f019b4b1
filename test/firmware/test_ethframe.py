"""software/firmware/protocol/ethframe.c, the firmware's wire-frame builder (the launcher's frames),
built for the host with the sanitizers and checked against an independent model: preamble and
SFD as IEEE 802.3 gives them, padding to 60 bytes, and the FCS from zlib's CRC-32; scapy reads the
frame back."""

import random
import shutil
import struct
import subprocess
import zlib

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether


@pytest.fixture(scope="module")
def ethframe(tmp_path_factory, repo):
    if shutil.which("gcc") is None:
        pytest.fail("gcc is required (make test installs it)")
    d = tmp_path_factory.mktemp("ethframe")
    exe = d / "ethframe_host"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-fsanitize=address,undefined",
                    "-fno-sanitize-recover=all", f"-I{repo}/software/firmware/protocol",
                    str(repo / "software/firmware/protocol/ethframe.c"), str(repo / "test/firmware/c/ethframe_host.c"),
                    "-o", str(exe)], check=True)

    def run(frames, cap=65536):
        data = b"".join(struct.pack(">H", len(f)) + f for f in frames)
        out = subprocess.run([str(exe), str(cap)], input=data, capture_output=True, check=True).stdout
        wires = []
        while out:
            (n,) = struct.unpack_from(">H", out)
            wires.append(out[2:2 + n] if n else None)
            out = out[2 + n:]
        return wires
    return run


def reference(frame):
    body = frame + bytes(max(0, 60 - len(frame)))
    return bytes([0x55] * 7 + [0xD5]) + body + zlib.crc32(body).to_bytes(4, "little")


def test_wire_bytes_match_zlib_and_scapy_reads_the_frame(ethframe):
    rng = random.Random(1)
    frames = [bytes(Ether(dst="02:00:00:00:00:01", src="10:e2:d5:00:00:01") / IP(src="192.168.1.50", dst="192.168.1.1")
                    / UDP(sport=319, dport=9000) / bytes(n)) for n in (0, 1, 17, 18, 54)]
    frames += [bytes(rng.randrange(256) for _ in range(n)) for n in (0, 14, 59, 60, 61, 96, 1514, 9018)]
    wires = ethframe(frames)
    assert wires == [reference(f) for f in frames]
    udp = Ether(wires[2][8:-4])
    assert udp[UDP].dport == 9000 and len(udp[UDP].payload) >= 17


def test_a_frame_that_does_not_fit_is_refused_whole(ethframe):
    frame = bytes(range(40))
    assert ethframe([frame], cap=8 + 60 + 4) == [reference(frame)]
    assert ethframe([frame], cap=8 + 60 + 3) == [None]
