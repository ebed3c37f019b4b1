"""The 10 % timing margin (soc/daqsoc.py's TIMING_MARGIN): ECP5 builds are constrained at the
nominal clock frequencies plus the margin (so nextpnr works on every clock until it has the
margin), and the build summary judges against the nominal frequency and says whether the margin
was reached."""

import json

from conftest import REPO

from ethdaq.boards import get_board
from ethdaq.soc.build import build_hardware, format_summary, nextpnr_summary
from ethdaq.soc.daqsoc import TIMING_MARGIN


def test_colorlight_i5_is_constrained_with_the_margin():
    assert TIMING_MARGIN == 0.10
    out = REPO / "build" / "test-margin-script"
    result = build_hardware(get_board("colorlight_i5"), out, run=False)
    lpf = (out / "gateware" / "colorlight_i5.lpf").read_text()
    # The PHY's clocks at 137.5 MHz, sys (a PLL output, named as a net) at 66.
    assert 'FREQUENCY PORT "eth_rx_clk" 137.5 MHz;' in lpf, lpf
    assert 'FREQUENCY NET "sys_clk" 66.000 MHz;' in lpf, lpf
    csr = json.loads((out / "csr.json").read_text())
    assert csr["constants"]["ethdaq_timing_margin_pct"] == 10


def _report(tmp_path, fmax, margin_pct=10):
    (tmp_path / "gateware").mkdir()
    (tmp_path / "csr.json").write_text(json.dumps({"constants": {"ethdaq_timing_margin_pct": margin_pct}}))
    path = tmp_path / "gateware" / "b_report.json"
    path.write_text(json.dumps({"fmax": {f"$glbnet${k}": {"achieved": a, "constraint": c} for k, (a, c) in fmax.items()},
                                "utilization": {"TRELLIS_COMB": {"used": 1, "available": 2}}}))
    return path


def test_the_summary_judges_against_the_nominal_frequency_and_names_the_margin(tmp_path):
    path = _report(tmp_path, {"eth": (130.0, 137.5), "sys_clk": (70.0, 66.0), "slow": (100.0, 110.0)})
    report = nextpnr_summary(path, None)
    clocks = {c["clock"]: c for c in report["clocks"]}
    assert abs(clocks["eth"]["required_mhz"] - 125.0) < 1e-9
    assert clocks["eth"]["met"] and not clocks["eth"]["margin_met"]
    assert clocks["sys_clk"]["met"] and clocks["sys_clk"]["margin_met"]
    text = format_summary(report)
    assert "eth" in text and "130.0 MHz  125.0 MHz  met (without the 10 % margin: constrained at 137.5 MHz)" in text, text
    assert "70.0 MHz   60.0 MHz  met (with the 10 % margin: constrained at 66.0 MHz)" in text, text


def test_a_build_without_the_margin_is_summarised_as_before(tmp_path):
    path = _report(tmp_path, {"eth": (120.0, 125.0)}, margin_pct=0)
    text = format_summary(nextpnr_summary(path, None))
    assert text.rstrip().endswith("120.0 MHz  125.0 MHz  FAILED"), text
