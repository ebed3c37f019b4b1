"""DAQ header wire format: shared vectors (test/vectors/daq_header.json) checked against the
Python packer/parser, the generated C header, and the gateware's header byte table."""

import json
import re
import subprocess

import pytest

from conftest import REPO
from ethdaq.gateware.serializer import header_bytes
from ethdaq.wire import daqformat

VECTORS = json.loads((REPO / "test" / "vectors" / "daq_header.json").read_text())["vectors"]


@pytest.mark.parametrize("v", VECTORS)
def test_python_packs_and_parses_the_shared_vectors(v):
    assert daqformat.pack_header(**v["fields"]).hex() == v["hex"]
    data = bytes.fromhex(v["hex"]) + bytes(v["fields"]["sample_count"] * v["fields"]["sample_bits"] // 8)
    h = daqformat.unpack_header(data)
    assert {k: getattr(h, k) for k in v["fields"]} == v["fields"]


@pytest.mark.parametrize("v", VECTORS)
def test_gateware_header_table_matches_the_shared_vectors(v):
    f = v["fields"]
    fields = dict(magic=daqformat.MAGIC, version=daqformat.VERSION, header_len=daqformat.HEADER_LEN, **f)
    got = bytes(c.value for c in header_bytes(fields))  # All-constant fields: 8-bit Constants.
    assert got.hex() == v["hex"]


def test_c_view_parses_the_shared_vectors(tmp_path):
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "daq_format.h").write_text(daqformat.c_header())
    exe = tmp_path / "daq_parse"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", f"-I{tmp_path}", str(REPO / "test/firmware/c/daq_parse.c"),
                    "-o", str(exe)], check=True)
    for v in VECTORS:
        r = subprocess.run([str(exe)], input=v["hex"], capture_output=True, text=True, check=True)
        parsed = {k: int(x) for k, x in re.findall(r"(\w+)=(\d+)", r.stdout)}
        assert parsed == v["fields"]


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:39], "datagram must be at least 40 bytes, not 39"),
    (lambda b: b"\x00\x00" + b[2:], "magic must be 0xDA7A, not 0x0000"),
    (lambda b: b[:2] + b"\x02" + b[3:], "version must be 1, not 2"),
    (lambda b: b + b"\x00", "datagram must be 40 bytes for 0 samples of 8 bits, not 41"),
])
def test_malformed_headers_are_refused_with_clear_messages(mutate, message):
    good = bytes.fromhex(VECTORS[2]["hex"])
    with pytest.raises(daqformat.FormatError) as e:
        daqformat.unpack_header(mutate(good))
    assert str(e.value) == message
