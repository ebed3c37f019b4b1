"""Xilinx boards without Vivado, as a user without Vivado sees them: `ethdaq build --toolchain
vivado` writes the complete Vivado project of every Xilinx board and says in one line what to run
where Vivado is installed; `--toolchain yosys` synthesises the full SoC with Yosys' synth_xilinx
(so the Xilinx path cannot rot) and reports resource estimates, on the smallest part (the Arty's
XC7A35T), with a detector front-end as a user builds one: the Verilog example pulse_height.v with
its output on a Pmod pin. The SoC is the same on every board: the others differ in their PHY's
I/O, which their projects' constraints show. The UltraScale+ 10G board (the KCU116, eth_dw=64)
synthesises with synth_xilinx -family xcup and ABC9 on a mapping-only script (soc/build.py,
XCUP_ABC9_SCRIPT): with abc9's default script its 64-bit CRC engines took about 50 minutes;
test_synth_xcup.py checks the LUT RAM step ethdaq changes in it.

The builds (a synthesis about 3 minutes of one core, a project under a minute) are queued behind
the ECP5 bitstream build from collection on (test/conftest.py, background_build); these tests run
last.
"""

import json
import re
import shutil

import pytest

from conftest import REPO, background_build

from ethdaq.boards import BOARDS
from ethdaq.soc.build import XCUP_ABC9_SCRIPT, XILINX_CAPACITY, xilinx_family

pytestmark = pytest.mark.slow

XILINX = [name for name, board in BOARDS.items() if "vivado" in board.toolchains]
OUT = REPO / "build" / "test-xilinx"


FRONTEND = REPO / "examples" / "frontends" / "pulse_height.v"


def yosys_build(name, *more):
    return pytest.mark.background_build(f"{name}-yosys",
        ["build", "--board", name, "--toolchain", "yosys", "--output-dir", str(OUT / name), *more])


def vivado_project(name):
    return pytest.mark.background_build(f"{name}-vivado",
        ["build", "--board", name, "--toolchain", "vivado", "--no-compile", "--output-dir", str(OUT / f"{name}-vivado")])


def _project(name):
    """The gateware directory of the board's Vivado project, written without running Vivado."""
    code, out = background_build(f"{name}-vivado", timeout=3600)
    assert code == 0, out[-4000:]
    return OUT / f"{name}-vivado" / "gateware"


def test_every_xilinx_board_is_tested():
    assert sorted(XILINX) == ["digilent_arty", "digilent_nexys_video", "xilinx_kc705", "xilinx_kcu116"]


# The cells synth_xilinx leaves, by family: the primitives it maps to and those ethdaq
# instantiates (clocking, I/O, the GTY transceiver's blackboxes).
CELLS = {
    "xc7":  r"\$scopeinfo|BUFG|CARRY4|FD[RSCP]E|IBUF|IBUFDS|IOBUF|OBUF|IDDR|ODDR|IDELAYCTRL|IDELAYE2|INV|"
            r"LUT[1-6]|MUXF[78]|PLLE2_ADV|MMCME2_ADV|RAM\w+|RAMB(18|36)E1|SRL\w+|DSP48E1",
    # CARRY4: Yosys' carry cell on UltraScale+ too (Vivado retargets it to CARRY8).
    "xcup": r"\$scopeinfo|BUFG|BUFG_GT|CARRY[48]|FD[RSCP]E|IBUF|IBUFDS|IBUFDS_GTE4|IOBUF|OBUF|INV|LUT[1-6]|MUXF[789]|"
            r"MMCME4_ADV|GTYE4_CHANNEL|GTYE4_COMMON|RAM\w+|RAMB(18|36)E2|SRL\w+|DSP48E2",
}


def _resources(text, dsp):
    found = {}
    for label in ("LUT6", "FF", "BRAM \\(36 Kb\\)", dsp):
        m = re.search(rf"^\s+{label}\s+([\d.]+) / (\d+)\s+\(\s*([\d.]+) %\)$", text, re.M)
        assert m, (label, text)
        found[label.split()[0]] = (float(m.group(1)), int(m.group(2)))
    return found


def _check_synth(name, min_luts, min_bram, timeout=3600):
    code, out = background_build(f"{name}-yosys", timeout=timeout)
    assert code == 0, out[-4000:]
    text = out[out.index("ethdaq build summary"):]
    board = BOARDS[name]
    family = xilinx_family(board.platform().device)
    res = _resources(text, "DSP48E2" if family == "xcup" else "DSP48E1")
    cap = next(v for k, v in XILINX_CAPACITY.items() if board.fpga.lower().startswith(k))
    assert res["LUT6"][1] == cap[0] and res["FF"][1] == cap[1] and res["BRAM"][1] == cap[2]
    # The whole SoC was synthesised (CPU, LiteEth, streamer, PTP), and it fits.
    assert min_luts < res["LUT6"][0] < 0.8*cap[0], text
    assert 2000 < res["FF"][0] < cap[1], text
    assert min_bram <= res["BRAM"][0] <= cap[2], text
    assert "no timing" in text and "Vivado" in text
    gateware = OUT / name / "gateware"
    log = (gateware / f"{name}_yosys.log").read_text()
    assert "Executing SYNTH_XILINX pass" in log and "End of script" in log and "ERROR" not in log
    assert f"synth_xilinx -family {family} " in (gateware / f"{name}_yosys.ys").read_text()
    # No cell left as an unknown black box: every instance Yosys did not map is a primitive of the family.
    stat = json.loads((gateware / f"{name}_yosys_stat.json").read_text())
    for cell in stat["design"]["num_cells_by_type"]:
        assert re.fullmatch(CELLS[family], cell), cell
    return gateware


def _check_project(name, gateware):
    board = BOARDS[name]
    tcl = (gateware / f"{name}.tcl").read_text()
    assert re.search(rf"synth_design .*-top {name} -part {board.platform().device}", tcl), tcl
    assert "write_bitstream" in tcl and f"read_xdc {name}.xdc" in tcl and "VexRiscv" in tcl
    xdc = (gateware / f"{name}.xdc").read_text()
    # Clocks: the oscillator and the PHY's receive clock pin, each created before its I/O delays.
    assert re.search(r"create_clock -name eth_clocks0_rx -period (8|40) \[get_ports eth_clocks0_rx\]", xdc), xdc
    first_delay = xdc.index("set_input_delay")
    assert xdc.index("create_clock -name eth_clocks0_rx") < first_delay
    assert "set_clock_groups" in xdc  # sys and the Ethernet clocks are asynchronous (CDC FIFOs).
    return xdc


@vivado_project("digilent_nexys_video")
def test_nexys_video_project():
    xdc = _check_project("digilent_nexys_video", _project("digilent_nexys_video"))
    # RGMII: data edge-aligned with RXC within +/-0.5 ns, on both edges.
    for edge in ("", " -clock_fall"):
        for kind, value in (("max", "0.5"), ("min", "-0.5")):
            assert re.search(rf"set_input_delay -clock \[get_clocks -of_objects \[get_ports eth_clocks0_rx\]\]{edge} "
                             rf"-{kind} {value} \[get_ports {{eth0_rx_ctl eth0_rx_data\[\*\]}}\]", xdc), (edge, kind)
    assert "set_property LOC AB22 [get_ports {ptp_pps}]" in xdc  # Pmod JA pin 1


@vivado_project("xilinx_kc705")
def test_kc705_project():
    xdc = _check_project("xilinx_kc705", _project("xilinx_kc705"))
    # GMII receive: valid 2 ns before to 0 ns after RX_CLK at the FPGA.
    assert re.search(r"-max 6 \[get_ports {eth0_rx_dv eth0_rx_data\[\*\] eth0_rx_er}\]", xdc), xdc
    assert re.search(r"-min 0 \[get_ports {eth0_rx_dv eth0_rx_data\[\*\] eth0_rx_er}\] -add_delay", xdc), xdc


@yosys_build("digilent_arty", "--frontend", str(FRONTEND))
def test_arty_synth_xilinx_and_project():
    gateware = _check_synth("digilent_arty", min_luts=5000, min_bram=4)
    xdc = _check_project("digilent_arty", gateware)
    # The front-end: its module synthesised into the SoC, its output on Pmod JB pin 1.
    log = (gateware / "digilent_arty_yosys.log").read_text()
    assert re.search(r"^Used module:\s+\\pulse_height$", log, re.M), "the front-end is not in the synthesis"
    assert "set_property LOC E15 [get_ports {frontend_discriminator}]" in xdc, xdc
    # MII: both 25 MHz clocks from the PHY; receive data 10..30 ns after RX_CLK; transmit setup 10 ns.
    assert "create_clock -name eth_clocks0_tx -period 40 [get_ports eth_clocks0_tx]" in xdc
    assert re.search(r"set_input_delay .* -max 30 \[get_ports {eth0_rx_dv eth0_rx_data\[\*\]}\]", xdc), xdc
    for kind, value in (("max", "10"), ("min", "0")):
        assert re.search(rf"set_output_delay -clock \[get_clocks -of_objects \[get_ports eth_clocks0_tx\]\] -{kind} {value} "
                         rf"\[get_ports {{eth0_tx_en eth0_tx_data\[\*\]}}\]", xdc), (kind, xdc)


@pytest.mark.background_build("arty-vivado",
    ["build", "--board", "digilent_arty", "--toolchain", "vivado", "--output-dir", str(OUT / "arty-vivado")])
@pytest.mark.skipif(shutil.which("vivado") is not None, reason="Vivado is installed: it would run")
def test_vivado_missing_gives_one_line_and_a_complete_project():
    code, out = background_build("arty-vivado", timeout=3600)
    assert code == 0, out[-4000:]
    # Besides the first line and the build's progress (soc/progress.py), which ends with the
    # Verilog: the one line that says what to run.
    lines = [l for l in out.splitlines() if l.strip() and not l.startswith(("building ", "ethdaq build "))]
    assert len(lines) == 1, out
    assert re.search(r"^ethdaq build \d+:\d\d \| generating Verilog took \d+:\d\d$", out, re.M), out
    gateware = OUT / "arty-vivado" / "gateware"
    assert lines[0] == (f"Vivado is not on PATH: the complete project is in {gateware} (self-contained: copy it "
                        f"to where Vivado is installed); run: cd {gateware} && vivado -mode batch -source "
                        f"digilent_arty.tcl")
    for suffix in (".v", ".xdc", ".tcl", "_rom.init"):
        assert (gateware / f"digilent_arty{suffix}").stat().st_size > 0
    assert not (gateware / "digilent_arty.bit").exists()
    _check_project("digilent_arty", gateware)


@vivado_project("xilinx_kcu116")
def test_kcu116_project():
    """The 10G board: an UltraScale+ project with the GTY (gateware/uspgty10g.py), its reference
    clock constrained on its pins and the transceiver's clocks, the SFP's transmitter enabled."""
    gateware = _project("xilinx_kcu116")
    board = BOARDS["xilinx_kcu116"]
    tcl = (gateware / "xilinx_kcu116.tcl").read_text()
    assert re.search(rf"synth_design .*-top xilinx_kcu116 -part {board.platform().device}", tcl), tcl
    assert "write_bitstream" in tcl and "read_xdc xilinx_kcu116.xdc" in tcl and "VexRiscv" in tcl
    verilog = (gateware / "xilinx_kcu116.v").read_text()
    for primitive in ("GTYE4_CHANNEL", "GTYE4_COMMON", "IBUFDS_GTE4", "BUFG_GT", "MMCME4_ADV"):
        assert re.search(rf"^{primitive} ", verilog, re.M), primitive
    xdc = (gateware / "xilinx_kcu116.xdc").read_text()
    for pin, port in (("M7", "sfp_refclk_p"), ("L5", "sfp_txp"), ("K2", "sfp_rxp"), ("AA14", "sfp_tx_disable_n")):
        assert f"set_property LOC {pin} [get_ports {{{port}}}]" in xdc, (pin, port)
    # The reference clock on its pin (156.25 MHz) and the transceiver's output clocks.
    assert re.search(r"create_clock -name sfp_refclk_p -period 6\.4 \[get_ports sfp_refclk_p\]", xdc), xdc
    assert len(re.findall(r"create_clock -name \S+ -period 6\.4 \[get_nets \S*(tx|rx)outclk\S*\]", xdc)) == 2, xdc
    assert "set_clock_groups" in xdc  # sys and the transceiver's clocks are asynchronous (CDC FIFOs).


@yosys_build("xilinx_kcu116")
def test_kcu116_synth_xilinx():
    """The 10G board's SoC through synth_xilinx -family xcup: every cell an UltraScale+ primitive,
    the GTY transceiver among them, mapped with ABC9 on ethdaq's script. Its build: about 4.6
    minutes of wall time here (Yosys 3.5 of them), 13.5 with the 2 cores busy with other builds."""
    gateware = _check_synth("xilinx_kcu116", min_luts=8000, min_bram=20)
    assert "abc9 -W 300 -script xilinx_kcu116_abc9.script" in (gateware / "xilinx_kcu116_yosys.ys").read_text()
    assert (gateware / "xilinx_kcu116_abc9.script").read_text().strip() == XCUP_ABC9_SCRIPT
    cells = json.loads((gateware / "xilinx_kcu116_yosys_stat.json").read_text())["design"]["num_cells_by_type"]
    for primitive in ("GTYE4_CHANNEL", "GTYE4_COMMON", "IBUFDS_GTE4", "BUFG_GT", "MMCME4_ADV", "RAMB36E2"):
        assert cells.get(primitive, 0) >= 1, (primitive, cells)
