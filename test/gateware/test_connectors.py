"""Connector pins for front-ends (gateware/connectors.py): every board's connectors, the pins a
front-end file kept outside the repository asks for in the generated LPF and XDC (LiteX's own
writers, no place and route), and the one-line errors for pins the board cannot give, from
`ethdaq build` as a user sees them."""

import re
import subprocess
import textwrap

import pytest
from migen import Signal, run_simulation

from conftest import REPO, ethdaq_cmd
from ethdaq.boards import BOARDS, get_board
from ethdaq.gateware import frontend as fe
from ethdaq.gateware.connectors import ConnectorPins, PinError, soc_sites

EXAMPLES = REPO / "examples" / "frontends"

HARDWARE = [name for name, board in BOARDS.items() if not board.is_sim]

# The connectors each board file declares, and the PTP outputs that sit on one of them.
CONNECTORS = {
    "colorlight_i5":        ({"pmode", "pmodf"}, {"pmode:0": "ptp_pps", "pmode:1": "ptp_periodic"}),
    "colorlight_5a_75b":    ({f"j{i}" for i in range(1, 9)}, {"j1:0": "ptp_pps", "j1:1": "ptp_periodic"}),
    "lattice_versa_ecp5":   ({"X3"}, {}),
    "gsd_butterstick":      ({"SYZYGY0", "SYZYGY1", "SYZYGY2"},
                             {"SYZYGY0:S0": "serial tx", "SYZYGY0:S1": "serial rx", "SYZYGY0:S2": "ptp_pps",
                              "SYZYGY0:S3": "ptp_periodic", "SYZYGY0:D0N": "ptp_pps"}),
    "digilent_arty":        ({"pmoda", "pmodb", "pmodc", "pmodd", "ck_io"},
                             {"pmoda:0": "ptp_pps", "pmoda:1": "ptp_periodic"}),
    "digilent_nexys_video": ({"pmoda", "pmodb", "pmodc", "LPC"}, {"pmoda:0": "ptp_pps", "pmoda:1": "ptp_periodic"}),
    "xilinx_kc705":         ({"HPC", "LPC"}, {}),
    "xilinx_kcu116":        ({"HPC", "pmod0", "pmod1"}, {"pmod0:0": "ptp_pps", "pmod0:1": "ptp_periodic"}),
}


def pins_of(board):
    platform = get_board(board).platform()
    return platform, ConnectorPins(platform, board)


def pin_error(pins, *args, **kwargs):
    with pytest.raises(PinError) as e:
        pins.request(*args, **kwargs)
    return str(e.value)


# The boards' connectors -------------------------------------------------------------------------------

def test_every_hardware_board_declares_its_connectors_and_the_soc_keeps_its_own_pins():
    assert sorted(CONNECTORS) == sorted(HARDWARE)
    for name, (connectors, soc_pins) in CONNECTORS.items():
        platform, pins = pins_of(name)
        assert set(pins.connectors) == connectors, name
        soc, reachable = soc_sites(platform), {}
        for conn, table in pins.connectors.items():
            for pin in (table if isinstance(table, dict) else map(str, range(len(table)))):
                try:
                    site = pins.site(conn, pin)
                except PinError as e:
                    assert "reaches no FPGA pin" in str(e), e  # Ground, power.
                    continue
                assert re.fullmatch(r"[A-Z]{1,2}\d{1,2}", site), (name, conn, pin, site)
                if site in soc:
                    reachable[f"{conn}:{pin}"] = soc[site]
        # Every connector pin the SoC uses is one of these (the PTP outputs, a console), and the
        # front-end asking for it gets the one-line error naming what uses it.
        assert {k: v for k, v in reachable.items() if k in soc_pins} == soc_pins, (name, reachable)
        assert set(reachable) - set(soc_pins) <= {"SYZYGY0:D0P", "SYZYGY0:D1P", "SYZYGY0:D1N"}, (name, reachable)
        for ref, used_by in soc_pins.items():
            conn, pin = ref.split(":")
            msg = pin_error(pins, "x", conn, pin, "LVCMOS33")
            assert msg == f"pin {ref} is FPGA pin {pins.site(conn, pin)}, which the SoC uses for {used_by}", msg
    assert not BOARDS["sim"].platform().constraint_manager.connector_manager.connector_table


def test_connector_pins_on_each_kind_of_connector_resolve_to_the_board_documentation():
    # One pin of each board file against litex-boards' platform files (which they cite).
    for board, conn, pin, site in [("colorlight_i5", "pmodf", "0", "D1"), ("colorlight_5a_75b", "j8", "14", "M4"),
                                   ("lattice_versa_ecp5", "X3", "20", "C6"), ("gsd_butterstick", "SYZYGY1", "S31", "E2"),
                                   ("digilent_arty", "ck_io", "ck_io41", "N17"), ("digilent_nexys_video", "LPC", "LA33_N", "F14"),
                                   ("xilinx_kc705", "HPC", "HA23_P", "L12"), ("xilinx_kc705", "LPC", "LA13_N", "AC25")]:
        assert pins_of(board)[1].site(conn, pin) == site, (board, conn, pin)


def test_a_pin_the_board_cannot_give_is_one_line_naming_it():
    _, pins = pins_of("colorlight_i5")
    assert pin_error(pins, "a", "pmodx", 0, "LVCMOS33") == \
        "the board colorlight_i5 has no connector 'pmodx'; its connectors: pmode, pmodf"
    assert pin_error(pins, "a", "pmodf", 8, "LVCMOS33") == \
        "connector 'pmodf' of the board colorlight_i5 has no pin '8'; its pins are 0 to 7"
    assert pin_error(pins, "a", "pmodf", [0, "x"], "LVCMOS33").startswith("connector 'pmodf' of the board "
                                                                       "colorlight_i5 has no pin 'x'")
    pins.request("a", "pmodf", [0, 1], "LVCMOS33")
    assert pin_error(pins, "b", "pmodf", [2, 1], "LVCMOS33") == \
        "pin pmodf:1 (FPGA pin C1) is asked for twice: for 'a' and for 'b'"
    assert pin_error(pins, "c", "pmodf", "3 3", "LVCMOS33") == \
        "pin pmodf:3 (FPGA pin E3) is asked for twice: for 'c' and for 'c'"
    assert pin_error(pins, "a", "pmodf", 5, "LVCMOS33") == "the name 'a' is asked for twice; give each group of pins its own"
    assert "I/O standard must be a name such as 'LVCMOS33', not None" in pin_error(pins, "d", "pmodf", 5, None)
    assert "pins must be a pin or a list of pins" in pin_error(pins, "d", "pmodf", 5.0, "LVCMOS33")
    assert "no pins given" in pin_error(pins, "d", "pmodf", [], "LVCMOS33")
    _, pins = pins_of("colorlight_5a_75b")
    # The HUB75 ports share their address lines: one FPGA pin under two names.
    pins.request("addr", "j1", 8, "LVCMOS33")
    assert pin_error(pins, "other", "j5", 8, "LVCMOS33") == \
        "pin j5:8 (FPGA pin N5) is asked for twice: for 'addr' (as j1:8) and for 'other'"
    assert pin_error(pins, "gnd", "j2", 3, "LVCMOS33") == \
        "pin j2:3 of the board colorlight_5a_75b reaches no FPGA pin (ground, power or not connected)"
    _, pins = pins_of("gsd_butterstick")
    assert pin_error(pins, "a", "SYZYGY2", "RX0P", "LVCMOS33").startswith(
        "connector 'SYZYGY2' of the board gsd_butterstick has no pin 'RX0P'; its pins: S0, S1, ")
    _, pins = pins_of("lattice_versa_ecp5")
    assert "pin X3:1 of the board lattice_versa_ecp5 reaches no FPGA pin" in pin_error(pins, "a", "X3", 1, "LVCMOS33")


# Pins in the generated constraints -------------------------------------------------------------------

FRONTEND = textwrap.dedent("""\
    from migen import *
    from litex.gen import *
    from litex.soc.interconnect import stream

    class Pulser(LiteXModule):
        def __init__(self, ctx):
            self.sources = [stream.Endpoint([("data", ctx.sample_width)])]
            # # #
            adc  = ctx.pins("adc", "pmodf", [4, 5, 6], iostandard="LVCMOS33", misc=["PULLMODE=UP"])
            flag = ctx.pins("flag", "pmode", "7", iostandard="LVCMOS25")
            {extra}
            self.comb += [self.sources[0].valid.eq(1), self.sources[0].data.eq(adc), flag.eq(adc[0])]

    def frontend(ctx):
        return Pulser(ctx)
    """)


def user_frontend(tmp_path, extra=""):
    path = tmp_path / "pulser.py"
    path.write_text(FRONTEND.format(extra=extra))
    return path


def constraints(tmp_path, board, frontend_path, suffix):
    """The LPF or XDC LiteX writes for `board` with the front-end (run=False: no tools run)."""
    from ethdaq.soc.daqsoc import DAQSoC
    from ethdaq.soc.socconfig import SoCConfig
    soc = DAQSoC(get_board(board), SoCConfig(frontend=fe.load(frontend_path)))
    soc.platform.build(soc, build_dir=str(tmp_path / "gateware"), build_name=board, run=False)
    return (tmp_path / "gateware" / f"{board}.{suffix}").read_text()


def test_a_front_end_outside_the_repository_gets_its_pins_in_the_lpf(tmp_path):
    path = user_frontend(tmp_path)
    assert REPO not in path.parents
    lpf = constraints(tmp_path, "colorlight_i5", path, "lpf")
    # pmodf pins 4, 5, 6 are E2, D2, B1: bit 0 first, each with its I/O standard and pull-up.
    for i, site in enumerate(["E2", "D2", "B1"]):
        assert f'LOCATE COMP "frontend_adc[{i}]" SITE "{site}";' in lpf, lpf
        assert f'IOBUF PORT "frontend_adc[{i}]" IO_TYPE=LVCMOS33;' in lpf, lpf
        assert f'IOBUF PORT "frontend_adc[{i}]" PULLMODE=UP;' in lpf, lpf
    assert 'LOCATE COMP "frontend_flag" SITE "D20";' in lpf and 'IOBUF PORT "frontend_flag" IO_TYPE=LVCMOS25;' in lpf
    assert 'LOCATE COMP "ptp_pps" SITE "C17";' in lpf  # The SoC keeps its own.


def test_the_examples_pins_in_the_lpf_and_the_xdc(tmp_path):
    """Each example puts its output on pmodf pin 0 of the colorlight_i5 (D1) and on the Arty's
    Pmod JB pin 1 (E15); on a board it names no pins for, the output stays inside."""
    for example, port in [("triggered_adc.py", "gate"), ("pulse_height.v", "discriminator")]:
        lpf = constraints(tmp_path / f"{example}-i5", "colorlight_i5", EXAMPLES / example, "lpf")
        assert f'LOCATE COMP "frontend_{port}" SITE "D1";' in lpf, lpf
        assert f'IOBUF PORT "frontend_{port}" IO_TYPE=LVCMOS33;' in lpf, lpf
        xdc = constraints(tmp_path / f"{example}-arty", "digilent_arty", EXAMPLES / example, "xdc")
        assert f"set_property LOC E15 [get_ports {{frontend_{port}}}]" in xdc, xdc
        assert f"set_property IOSTANDARD LVCMOS33 [get_ports {{frontend_{port}}}]" in xdc, xdc
        lpf = constraints(tmp_path / f"{example}-5a", "colorlight_5a_75b", EXAMPLES / example, "lpf")
        assert "frontend_" not in lpf


def test_the_triggered_adcs_gate_is_high_for_its_windows():
    factory = fe.load(EXAMPLES / "triggered_adc.py")
    ctx = fe.FrontendContext(factory.path, None, get_board("sim"), sample_width=16, max_channels=8,
                             sys_clk_freq=125e6, time_ns=Signal(64))
    dut, (source,) = fe.instantiate(factory, ctx)
    divider, high, rises, words = 3, 0, 0, 0

    def run():
        nonlocal high, rises, words
        yield dut.divider.storage.eq(divider)
        yield dut.rate.storage.eq(2**32//8)
        yield source.ready.eq(1)
        last = 0
        for _ in range(3000):
            yield
            gate = yield dut.gate
            high, rises, last = high + gate, rises + (gate and not last), gate
            words += (yield source.valid) and (yield source.ready)
        dut.events_seen = yield dut.events.status

    run_simulation(dut, run())
    # High for `divider` cycles per sample of a window (windows back to back make one pulse; the
    # last window may be unfinished).
    window = 4 + 12
    assert 0 < rises <= dut.events_seen and dut.events_seen > 20
    assert divider*window*(dut.events_seen - 1) < high <= divider*window*dut.events_seen, (high, dut.events_seen)
    assert words >= window*(dut.events_seen - 2)


# The same errors from `ethdaq build`, one line naming the user's file ----------------------------------

@pytest.mark.parametrize("extra, expected", [
    ('ctx.pins("x", "pmodz", 0, iostandard="LVCMOS33")',
     "the board colorlight_i5 has no connector 'pmodz'; its connectors: pmode, pmodf"),
    ('ctx.pins("x", "pmodf", 9, iostandard="LVCMOS33")',
     "connector 'pmodf' of the board colorlight_i5 has no pin '9'; its pins are 0 to 7"),
    ('ctx.pins("x", "pmodf", [3, 5], iostandard="LVCMOS33")',
     "pin pmodf:5 (FPGA pin D2) is asked for twice: for 'adc' and for 'x'"),
    ('ctx.pins("x", "pmode", 0, iostandard="LVCMOS33")', "pin pmode:0 is FPGA pin C17, which the SoC uses for ptp_pps"),
])
def test_bad_pins_stop_the_build_with_one_line_naming_the_file(tmp_path, extra, expected):
    path = user_frontend(tmp_path, extra)
    r = subprocess.run(ethdaq_cmd("build", "--board", "colorlight_i5", "--frontend", str(path), "--output-dir",
                                  str(REPO / "build" / "test-connectors")), capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stdout.startswith("building colorlight_i5"), (r.returncode, r.stdout, r.stderr)
    assert r.stderr == f"Error: {path}: line 11: {expected}\n", r.stderr


# Verilog front-ends: [[pins]] in the description -----------------------------------------------------------

VERILOG = """\
module adc(input clk, output [15:0] d, output v, input [2:0] level, output flag);
  assign d = {13'd0, level}; assign v = 1'b1; assign flag = level[0];
endmodule
"""

TOML = """\
module = "adc"
clock  = "clk"
[[channel]]
data = "d"
valid = "v"
[[pins]]
board = "colorlight_i5"
port = "level"
connector = "pmodf"
pins = [4, 5, 6]
iostandard = "LVCMOS33"
"""


def verilog(where, toml, board="colorlight_i5"):
    where.mkdir(parents=True, exist_ok=True)
    (where / "adc.v").write_text(VERILOG)
    (where / "adc.toml").write_text(toml)
    factory = fe.load(where / "adc.v")
    platform = get_board(board).platform()
    ctx = fe.FrontendContext(factory.path, platform, get_board(board), sample_width=16, max_channels=8,
                             sys_clk_freq=60e6, time_ns=Signal(64), boards=BOARDS)
    return factory, ctx, platform


# Hardware builds take no Verilog from /tmp (the yowasp tools cannot see it): these go to build/.
VERILOG_DIR = REPO / "build" / "test-connectors-verilog"


def test_a_verilog_front_ends_pins_come_from_its_description():
    factory, ctx, platform = verilog(VERILOG_DIR, TOML)
    fe.instantiate(factory, ctx)
    (resource, pads), = [(r, o) for r, o in platform.constraint_manager.matched if r[0].startswith("frontend_")]
    assert resource[0] == "frontend_level" and resource[2].identifiers == ["E2", "D2", "B1"] and len(pads) == 3
    # Pins for another board: not asked for; an input left without them is named.
    factory, ctx, platform = verilog(VERILOG_DIR, TOML, board="digilent_arty")
    with pytest.raises(fe.FrontendError, match="input port.s. level of adc connected to nothing"):
        fe.instantiate(factory, ctx)


@pytest.mark.parametrize("toml, expected", [
    (TOML.replace('board = "colorlight_i5"', 'board = "colorlight_i9"'), "pins 0: unknown board 'colorlight_i9'; the boards: "),
    (TOML.replace("pins = [4, 5, 6]", "pins = [4, 5]"), "pins 0: 2 pins for port 'level' of 3 bits"),
    (TOML.replace('port = "level"', 'port = "levels"'), "pins 0: module adc has no port 'levels'"),
    (TOML.replace('iostandard = "LVCMOS33"\n', ''), "pins 0 has no 'iostandard'"),
    (TOML.replace('iostandard', 'voltage'), "pins 0: unknown key(s) voltage"),
    (TOML.replace("pins = [4, 5, 6]", "pins = [0, 1, 2]").replace('connector = "pmodf"', 'connector = "pmode"'),
     "pin pmode:0 is FPGA pin C17, which the SoC uses for ptp_pps"),
    (TOML + TOML[TOML.index("[[pins]]"):].replace('"level"', '"flag"').replace("[4, 5, 6]", "[6]"),
     "pin pmodf:6 (FPGA pin B1) is asked for twice: for 'level' and for 'flag'"),
])
def test_verilog_pin_mistakes_name_the_description(toml, expected):
    with pytest.raises(fe.FrontendError) as e:
        factory, ctx, _ = verilog(VERILOG_DIR, toml)
        fe.instantiate(factory, ctx)
    assert str(e.value).startswith(f"{VERILOG_DIR / 'adc.toml'}: ") and expected in str(e.value), str(e.value)
