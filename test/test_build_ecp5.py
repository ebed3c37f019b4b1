"""One full colorlight_i5 bitstream build with the yowasp tools (Yosys + nextpnr-ecp5 + ecppack),
and the summary table parsed from nextpnr's report. Timing closure itself is a later issue: this
test checks that the summary reports achieved vs required frequency honestly, not that it passes."""

import re
import subprocess

import pytest

from conftest import REPO, ethdaq_cmd

pytestmark = pytest.mark.slow


@pytest.mark.xfail(run=False, reason=(
    "issue 8: with the PTP CPU path the colorlight_i5 design uses 22053 of 24288 LUTs (91 %); "
    "nextpnr's router1 then stalls near 55k overused wires and router2 near 630 (2026-11-21), so the "
    "build does not finish within the test's 30 minutes. Not run until the LUT use is cut."))
def test_colorlight_i5_bitstream_and_summary():
    out = REPO / "build" / "test-colorlight_i5"
    r = subprocess.run(ethdaq_cmd("build", "--board", "colorlight_i5", "--output-dir", str(out)),
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    bit = out / "gateware" / "colorlight_i5.bit"
    assert bit.exists() and bit.stat().st_size > 100_000
    summary = r.stdout[r.stdout.index("ethdaq build summary"):]
    for resource in ("LUT4", "FF", "BRAM (DP16KD)"):
        m = re.search(rf"{re.escape(resource)}\s+(\d+) / (\d+)", summary)
        assert m and 0 < int(m.group(1)) < int(m.group(2)), summary
    clocks = re.findall(r"^\s+(\S+)\s+([\d.]+) MHz\s+([\d.]+) MHz\s+(met|FAILED)$", summary, re.M)
    names = {c[0] for c in clocks}
    assert "sys_clk" in names and any(n.startswith("eth_clocks0_rx") for n in names), summary
    for name, achieved, required, status in clocks:
        assert (status == "met") == (float(achieved) >= float(required))
    # The firmware is in the bitstream's ROM: the same binary the build reports.
    assert (out / "software" / "firmware" / "firmware.bin").stat().st_size > 1000
