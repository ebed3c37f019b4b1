"""Full bitstream builds with the yowasp tools (Yosys + nextpnr-ecp5 + ecppack), as `ethdaq build`
does them for a user, and the summary table parsed from nextpnr's report: the colorlight_i5
(CI's board: a 25F-6, about 80 % of its LUTs used), meeting every clock's requirement (asserted) and the 10 % margin
(expected to fail: it depends on the placement). The other ECP5 boards' timing, over several
netlists and seeds, is bench/margin.py's table (docs/boards/README.md), too long for this suite.

The build (about 10 minutes of one core) starts when the tests are collected and runs beside the
rest of the suite (test/conftest.py, background_build); these tests run last and wait for it.
"""

import re

import pytest

from conftest import REPO, background_build

pytestmark = pytest.mark.slow

OUT = REPO / "build" / "test-colorlight_i5"
# A fixed build id: the SoC's identifier ROM is logic, and with the git revision in it every
# commit (even one that changes only docs) gives a different netlist and placement.
BUILD_ID = "ci"
# One placement (seed 1): a user's build tries up to three seeds until one meets every clock with
# the margin (soc/pnr.py, test_pnr), which on this board is three full placements whenever none
# does, too long beside the rest of the suite on CI's two cores.
BUILD = pytest.mark.background_build("colorlight_i5", ["build", "--board", "colorlight_i5", "--output-dir", str(OUT),
                                                       "--build-id", BUILD_ID, "--seed", "1", "--tries", "1"])


def summary():
    code, out = background_build("colorlight_i5", timeout=2400)
    assert code == 0, out[-4000:]
    return out[out.index("ethdaq build summary"):]


def clocks(text):
    return re.findall(r"^\s+(\S+)\s+([\d.]+) MHz\s+([\d.]+) MHz\s+(met|FAILED)\b", text, re.M)


@BUILD
def test_colorlight_i5_bitstream_and_summary():
    text = summary()
    bit = OUT / "gateware" / "colorlight_i5.bit"
    assert bit.exists() and bit.stat().st_size > 100_000
    for resource in ("LUT4", "FF", "BRAM (DP16KD)"):
        m = re.search(rf"{re.escape(resource)}\s+(\d+) / (\d+)", text)
        assert m and 0 < int(m.group(1)) < int(m.group(2)), text
    # The full SoC fits with room to route: at 91 % of the LUTs nextpnr's router1 does not finish
    # (router2 routes what router1 leaves, soc/pnr.py). The same gateware's count
    # moves by about 1 % between builds (placement packs LUTs differently).
    m = re.search(r"LUT4\s+(\d+) / (\d+)", text)
    assert int(m.group(1)) < 0.90*int(m.group(2)), text
    found = clocks(text)
    names = {c[0] for c in found}
    assert "sys_clk" in names and any(n.startswith("eth_clocks0_rx") for n in names), text
    for name, achieved, required, status in found:
        assert (status == "met") == (float(achieved) >= float(required))
    # PPS and the periodic output reach the PMOD pins (boards/colorlight_i5.py).
    lpf = (OUT / "gateware" / "colorlight_i5.lpf").read_text()
    assert re.search(r'LOCATE COMP "ptp_pps" SITE "C17"', lpf), lpf
    assert re.search(r'LOCATE COMP "ptp_periodic" SITE "B18"', lpf), lpf
    # The firmware is in the bitstream's ROM: the same binary the build reports.
    assert (OUT / "software" / "firmware" / "firmware.bin").stat().st_size > 1000
    # picolibc is kept without its debug information (-g3: 86 MB an archive) or meson's objects.
    libc = OUT / "software" / "libc"
    assert all((libc / a).stat().st_size < 10_000_000 for a in ("__libc.a", "_libc.a", "libc.a"))
    assert not list((libc / "newlib").rglob("*.o"))
    # --build-id reached the SoC's identifier and the firmware.
    soc_h = (OUT / "software" / "include" / "generated" / "soc.h").read_text()
    assert re.search(rf'#define ETHDAQ_BUILD_ID "{BUILD_ID}"', soc_h), soc_h


@BUILD
def test_colorlight_i5_meets_every_clocks_requirement():
    """Every clock at least what it needs (eth 125 MHz, sys 60), by nextpnr's estimate after
    routing, in the placement the build keeps."""
    text = summary()
    found = clocks(text)
    assert found, text
    for name, achieved, required, status in found:
        assert status == "met" and float(achieved) >= float(required), (name, achieved, required)
    assert "timing not met" not in text


@BUILD
@pytest.mark.xfail(strict=False, reason="the colorlight_i5's eth margin depends on the placement: the "
                                        "seed spread on one netlist is about 13 MHz, so a netlist's seed 1 may "
                                        "fall below 137.5 where the median over netlists and seeds does not "
                                        "(docs/boards/README.md, 'Margin over the netlists users build')")
def test_colorlight_i5_meets_timing_with_10_percent_margin():
    """The project's criterion on CI's board: every clock at least 10 % above what it needs (eth
    137.5 MHz for 125, sys 66 for 60), by nextpnr's estimate after routing, in seed 1's placement.
    The margin holds for some netlists and seeds and not others; what every build must meet is
    asserted above."""
    text = summary()
    found = clocks(text)
    assert found, text
    for name, achieved, required, status in found:
        assert float(achieved) >= 1.1*float(required), (name, achieved, required)
    assert text.count("met (with the 10 % margin") == len(found), text


def test_board_nextpnr_options_reach_the_build_script():
    """A board's own nextpnr options (a board file's `nextpnr_opts`, here a router) are in the
    script LiteX writes, beside the report option; without them nextpnr runs with its defaults
    (and soc/pnr.py's router1-then-router2)."""
    from ethdaq.boards import get_board
    from ethdaq.soc.build import build_hardware
    out = REPO / "build" / "test-butterstick-script"

    def nextpnr_line(board, **kwargs):
        build_hardware(board, out, run=False, **kwargs)
        script = (out / "gateware" / "build_gsd_butterstick.sh").read_text()
        return next(l for l in script.splitlines() if l.startswith("nextpnr-ecp5"))

    board = get_board("gsd_butterstick")
    line = nextpnr_line(board)
    assert "--router" not in line and "--seed 1" in line, line
    assert "--placer-heap-timingweight 40 --tmg-ripup" in line, line   # soc/build.py NEXTPNR_OPTIONS
    assert "--um5g-85k" in line and "--speed 8" in line
    # A board's own options are added; its own value of an option the build sets replaces it
    # (nextpnr refuses an option given twice); `ethdaq build --seed 7` sets the seed.
    class WithOptions(board):
        nextpnr_opts = ["--router", "router2", "--placer-heap-timingweight", "80", "--tmg-ripup"]
    line = nextpnr_line(WithOptions, seed=7)
    assert "--report gsd_butterstick_report.json" in line and "--router router2" in line, line
    words = line.split()
    assert words.count("--placer-heap-timingweight") == 1 and words.count("--tmg-ripup") == 1, words
    assert words[words.index("--placer-heap-timingweight") + 1] == "80", words
    assert words[words.index("--seed") + 1] == "7", words
    # abc9 maps with its flow3 script, to LUT4s only (soc/build.py TRELLIS_OPTIONS), set before synthesis.
    ys = (out / "gateware" / "gsd_butterstick.ys").read_text().splitlines()
    synth = next(k for k, l in enumerate(ys) if l.startswith("synth_ecp5"))
    assert ys.index("scratchpad -copy abc9.script.flow3 abc9.script") < synth, ys
    assert "-nowidelut" in ys[synth].split() and "-abc9" in ys[synth].split(), ys[synth]
