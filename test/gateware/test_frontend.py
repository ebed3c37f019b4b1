"""User front-ends (gateware/frontend.py): the loader's checks and their messages,
the example triggered ADC against its Python model, and a SoC built with a front-end."""

import itertools
import random
import subprocess
import sys
import textwrap
import types

import pytest
from migen import Signal, passive, run_simulation

from conftest import REPO, ethdaq_cmd
from ethdaq.boards import get_board
from ethdaq.gateware import frontend as fe

EXAMPLE = REPO / "examples" / "frontends" / "triggered_adc.py"

HEADER = textwrap.dedent("""\
    from migen import *
    from litex.gen import *
    from litex.soc.interconnect import stream
    from litex.soc.interconnect.csr import *
    """)


def context(path, sample_width=16, platform=None, board="sim"):
    return fe.FrontendContext(path, platform, get_board(board), sample_width=sample_width, max_channels=8,
                              sys_clk_freq=125e6, time_ns=Signal(64))


def user_file(tmp_path, body, name="my_frontend.py"):
    path = tmp_path / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def error_of(path, ctx=None):
    with pytest.raises(fe.FrontendError) as e:
        factory = fe.load(path)
        fe.instantiate(factory, ctx or context(factory.path))
    return str(e.value)


# The loader's checks: every message names the file and what is wrong -----------------------------

def test_a_missing_file_or_a_file_that_is_not_python(tmp_path):
    assert "not found" in error_of(tmp_path / "nothing.py")
    vhdl = tmp_path / "adc.vhd"
    vhdl.write_text("entity adc is end;\n")
    assert "a front-end is a Python file (.py) defining frontend(ctx), or a Verilog file" in error_of(vhdl)


def test_a_syntax_error_or_an_exception_names_the_line(tmp_path):
    path = user_file(tmp_path, "def frontend(ctx)\n    pass\n")
    msg = error_of(path)
    assert str(path) in msg and "line 5" in msg
    path = user_file(tmp_path, """\
        class ADC(LiteXModule):
            def __init__(self, ctx):
                self.sources = [stream.Endpoint([("data", ctx.sample_width)])]
                self.comb += self.sources[0].data.eq(undefined_name)

        def frontend(ctx):
            return ADC(ctx)
        """)
    msg = error_of(path)
    assert str(path) in msg and "line 8" in msg and "NameError" in msg and "undefined_name" in msg


def test_no_frontend_function_or_not_a_module(tmp_path):
    assert "defines no function frontend(ctx)" in error_of(user_file(tmp_path, "x = 1\n"))
    assert "must return a LiteX/Migen module, not int" in error_of(user_file(tmp_path, "def frontend(ctx):\n    return 3\n"))


@pytest.mark.parametrize("sources, expected", [
    ("", "has no 'sources'"),
    ("self.sources = stream.Endpoint([('data', 16)])", "must be a list of endpoints"),
    ("self.sources = []", "drives 0 channels; it must drive 1 to 8"),
    ("self.sources = [stream.Endpoint([('data', 16)]) for _ in range(9)]", "drives 9 channels"),
    ("self.sources = [stream.Endpoint([('data', 16)]), Signal(16)]", "sources[1] is a Signal"),
    ("self.sources = [stream.Endpoint([('data', 16)]), stream.Endpoint([('data', 12)])]",
     "sources[1].data is 12 bits; the channels take 16-bit samples"),
    ("self.sources = [stream.Endpoint([('sample', 16)])]", "sources[0] has payload fields ['sample']"),
])
def test_wrong_ports_are_named(tmp_path, sources, expected):
    path = user_file(tmp_path, f"""\
        class ADC(LiteXModule):
            def __init__(self, ctx):
                {sources or 'pass'}

        def frontend(ctx):
            return ADC(ctx)
        """)
    msg = error_of(path)
    assert str(path) in msg and expected in msg, msg


def test_an_unknown_pad_is_named_with_the_pads_the_board_has(tmp_path):
    from ethdaq.boards import get_board
    board = get_board("colorlight_i5")
    platform = board.platform()
    path = user_file(tmp_path, """\
        class ADC(LiteXModule):
            def __init__(self, ctx):
                self.sources = [stream.Endpoint([("data", 16)])]
                self.adc = ctx.request("adc_data")

        def frontend(ctx):
            return ADC(ctx)
        """)
    msg = error_of(path, context(path, platform=platform, board="colorlight_i5"))
    assert str(path) in msg and "has no free pad 'adc_data'" in msg and "ptp_pps" in msg, msg


@pytest.mark.parametrize("attr, value, expected", [("max_rates", value, expected) for value, expected in [
    ("[-1]", "max_rates[0] must be a positive number of samples per second, not -1"),
    ("[0]", "max_rates[0] must be a positive number of samples per second, not 0"),
    ("[1e6, 2e6]", "'max_rates' must have 1 entry, one per channel (None for an unknown one), not 2"),
    ("['fast']", "max_rates[0] must be a number of samples per second, not 'fast'"),
    ("[float('nan')]", "max_rates[0] must be a number of samples per second, not nan"),
    ("[True]", "max_rates[0] must be a number of samples per second, not True"),
    ("1e6", "'max_rates' must be a list of samples per second, one per channel"),
    ("[126e6]", "max_rates[0] must be at most one sample per clock cycle, what a channel takes (125 Msamples/s "
                "at this build's clock), not 1.26e+08 samples per second"),
]] + [("event_id_bits", value, expected) for value, expected in [
    ("[0]", "event_id_bits[0] must be a whole number of bits from 1 to 31 (an event's id is ev44's int32 "
            "pixel_id), not 0"),
    ("[True]", "event_id_bits[0] must be a whole number of bits from 1 to 31"),
    ("[12, None]", "'event_id_bits' must have 1 entry, one per channel (None for a channel of samples), not 2"),
    ("12", "'event_id_bits' must be a list of id widths in bits, one per channel (None for a channel of samples), "
           "not 12"),
]])
def test_wrong_declared_rates_and_event_channels_are_named(tmp_path, attr, value, expected):
    path = user_file(tmp_path, f"""\
        class ADC(LiteXModule):
            def __init__(self, ctx):
                self.sources = [stream.Endpoint([("data", 16)])]
                self.{attr} = {value}

        def frontend(ctx):
            return ADC(ctx)
        """)
    msg = error_of(path)
    assert msg.startswith(f"{path}: ") and expected in msg, msg


def test_declared_rates_are_rounded_up_and_a_channel_may_leave_its_rate_out(tmp_path):
    path = user_file(tmp_path, """\
        class ADC(LiteXModule):
            def __init__(self, ctx):
                self.sources = [stream.Endpoint([("data", 16)]) for _ in range(3)]
                self.max_rates = [0.5, None, ctx.sys_clk_freq / 3]

        def frontend(ctx):
            return ADC(ctx)
        """)
    factory = fe.load(path)
    ctx = context(factory.path)
    module, sources = fe.instantiate(factory, ctx)
    assert fe.declared_rates(module, ctx, len(sources)) == (1, 0, 41_666_667)
    module.max_rates = None   # Nothing declared.
    assert fe.declared_rates(module, ctx, len(sources)) == (0, 0, 0)


def test_event_channels_are_declared_per_channel_and_a_toml_channel_declares_its_own(tmp_path):
    path = user_file(tmp_path, """\
        class ADC(LiteXModule):
            def __init__(self, ctx):
                self.sources = [stream.Endpoint([("data", 16)]) for _ in range(3)]
                self.event_id_bits = [None, 12, 31]

        def frontend(ctx):
            return ADC(ctx)
        """)
    factory = fe.load(path)
    ctx = context(factory.path)
    module, sources = fe.instantiate(factory, ctx)
    assert fe.declared_events(module, ctx, len(sources)) == (0, 12, 31)
    module.event_id_bits = None   # Every channel carries samples.
    assert fe.declared_events(module, ctx, len(sources)) == (0, 0, 0)
    (tmp_path / "adc.v").write_text(VERILOG)
    (tmp_path / "adc.toml").write_text(GOOD_TOML.replace('ready = "r"', 'ready = "r"\nevent_id_bits = 9'))
    factory = fe.load(tmp_path / "adc.v")
    ctx = context(factory.path, platform=get_board("sim").platform())
    module, sources = fe.instantiate(factory, ctx)
    assert fe.declared_events(module, ctx, len(sources)) == (9,)


# The example against its model -------------------------------------------------------------------

def load_example():
    factory = fe.load(EXAMPLE)
    return factory, types.SimpleNamespace(**factory.__globals__)  # The example's module.


# Many pulses (1 in 8 samples): many windows and crossings inside windows; or none, and a
# threshold inside the baseline's noise (200 to 207), which it reaches exactly.
@pytest.mark.parametrize("pre, post, divider, stall, rate, threshold", [
    (4, 12, 1, 0.0, 2**32//8, 1200), (0, 5, 3, 0.3, 2**32//8, 1200), (15, 1, 2, 0.5, 2**32//8, 1200),
    (3, 3, 1, 0.0, 0, 204)])
def test_the_triggered_adc_sends_what_its_model_says(pre, post, divider, stall, rate, threshold):
    factory, example = load_example()
    dut, sources = fe.instantiate(factory, context(EXAMPLE))
    words, rng = [], random.Random(pre*100 + post)

    def configure():
        for csr, value in (("pre", pre), ("post", post), ("divider", divider), ("rate", rate),
                           ("threshold", threshold)):
            yield getattr(dut, csr).storage.eq(value)

    @passive
    def collect():
        src = sources[0]
        while True:
            yield src.ready.eq(rng.random() >= stall)
            yield
            if (yield src.valid) and (yield src.ready):
                words.append((yield src.data))

    def run():
        yield from configure()
        for _ in range(6000):
            yield
        assert (yield dut.lost.status) == 0
        dut.events_seen = (yield dut.events.status)

    # Reset values take effect from cycle 0; the settings above from cycle 1, so the model runs
    # with them from the start: configure before the first sample (divider >= 1 cycle).
    run_simulation(dut, [run(), collect()])
    expected = list(itertools.islice(example.model(threshold=threshold, pre=pre, post=post, rate=rate), len(words)))
    assert len(words) > 20*(pre + post)
    assert words == expected
    firsts = sum(1 for w in words if w & example.FIRST)
    assert dut.events_seen - firsts in (0, 1) and firsts > 20  # The last window may still be in the FIFO.


# In the SoC and on the command line ---------------------------------------------------------------

def test_the_front_end_drives_the_channels_instead_of_the_emulators():
    from ethdaq.soc.daqsoc import DAQSoC
    from ethdaq.soc.socconfig import SoCConfig
    soc = DAQSoC(get_board("sim"), SoCConfig(frontend=fe.load(EXAMPLE)))
    assert soc.constants["ETHDAQ_NCHANNELS"] == 1 and len(soc.streamer.sinks) == 1
    assert not hasattr(soc, "emu0") and hasattr(soc.frontend, "threshold")
    # Its declared worst case, one sample every clock cycle, reaches the firmware (IDENTIFY).
    assert soc.constants["ETHDAQ_MAX_RATE_0"] == 125_000_000 == get_board("sim").sys_clk_freq
    plain = DAQSoC(get_board("sim"))
    assert plain.constants["ETHDAQ_NCHANNELS"] == 4 and hasattr(plain, "emu0")
    assert not [k for k in plain.constants if k.startswith("ETHDAQ_MAX_RATE")]


def test_a_broken_front_end_stops_the_build_with_one_line_naming_it(tmp_path):
    path = user_file(tmp_path, """\
        class ADC(LiteXModule):
            def __init__(self, ctx):
                self.sources = [stream.Endpoint([("data", 8)])]

        def frontend(ctx):
            return ADC(ctx)
        """)
    r = subprocess.run(ethdaq_cmd("build", "--board", "sim", "--frontend", str(path), "--output-dir",
                                  str(REPO / "build" / "test-frontend-broken")),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert f"{path}: sources[0].data is 8 bits; the channels take 16-bit samples" in r.stderr, r.stderr
    r = subprocess.run(ethdaq_cmd("build", "--board", "sim", "--frontend", str(tmp_path / "none.py")),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "not found" in r.stderr and "Traceback" not in r.stderr, r.stderr


# Verilog front-ends: a module and a description of its ports ----------------------------------------

VERILOG = """\
module adc(input clk, input rst, input [11:0] level, output [15:0] d, output v, input r, output [7:0] count);
  assign d = {4'd0, level}; assign v = 1'b1; assign count = 8'd0;
endmodule
"""

GOOD_TOML = """\
module = "adc"
clock  = "clk"
reset  = "rst"
[[channel]]
data = "d"
valid = "v"
ready = "r"
[[register]]
name = "level"
port = "level"
reset = 7
[[register]]
name = "count"
port = "count"
"""


def verilog_error(tmp_path, toml, verilog=VERILOG, ctx_board="sim"):
    (tmp_path / "adc.v").write_text(verilog)
    (tmp_path / "adc.toml").write_text(toml)
    with pytest.raises(fe.FrontendError) as e:
        factory = fe.load(tmp_path / "adc.v")
        board = get_board(ctx_board)
        fe.instantiate(factory, context(factory.path, platform=board.platform(), board=ctx_board))
    return str(e.value)


def test_a_verilog_front_end_is_wrapped_with_its_channels_and_registers(tmp_path):
    (tmp_path / "adc.v").write_text(VERILOG)
    (tmp_path / "adc.toml").write_text(GOOD_TOML)
    factory = fe.load(tmp_path / "adc.v")
    platform = get_board("sim").platform()
    module, sources = fe.instantiate(factory, context(factory.path, platform=platform))
    assert len(sources) == 1 and len(sources[0].data) == 16
    csrs = {c.name: c for c in module.get_csrs()}
    assert set(csrs) == {"level", "count"} and csrs["level"].storage.reset.value == 7
    assert hasattr(csrs["count"], "status") and len(csrs["count"].status) == 8
    assert str(tmp_path / "adc.v") in [f for f, _, _ in platform.sources]


@pytest.mark.parametrize("toml, expected", [
    (GOOD_TOML.replace('module = "adc"', 'module = "nothing"'), "Yosys could not read module 'nothing'"),
    (GOOD_TOML.replace('data = "d"', 'data = "dd"'), "channel 0 data: module adc has no port 'dd' (its ports: clk, rst"),
    (GOOD_TOML.replace('valid = "v"', 'valid = "r"'), "channel 0 valid: port 'r' is a 1-bit input; it must be an output of 1 bit"),
    (GOOD_TOML.replace('data = "d"', 'data = "count"'), "port 'count' is a 8-bit output; it must be an output of 16 bits"),
    (GOOD_TOML.replace('reset  = "rst"\n', ''), "input port(s) rst of adc connected to nothing"),
    (GOOD_TOML + 'last = "l"\n', "channels carry samples without packet boundaries"),
    (GOOD_TOML.replace('[[channel]]', 'colour = "red"\n[[channel]]'), "unknown key(s) colour"),
    (GOOD_TOML.replace('clock  = "clk"\n', ''), "the description has no 'clock'"),
    (GOOD_TOML.replace('[[channel]]\ndata = "d"\nvalid = "v"\nready = "r"\n', ''),
     "no [[channel]]: the front-end must drive at least one channel"),
    (GOOD_TOML.replace('reset  = "rst"', 'reset  = "rst"\ntime   = "level"'),
     "time: port 'level' is a 12-bit input; it must be an input of 64 bits"),
    (GOOD_TOML.replace('name = "count"', 'name = "count"\nreset = 3'), "register 'count' reads output 'count': it has no reset value"),
    ('module = "adc"\nclock = ', "adc.toml"),
    (GOOD_TOML + '[[pad]]\npad = "adc_pins"\nport = "level"\n', "has no free pad 'adc_pins'"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nmax_rate = -5'),
     "channel 0 max_rate must be a positive number of samples per second, not -5"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nmax_rate = "fast"'),
     "channel 0 max_rate must be a number of samples per second, not 'fast'"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nmax_rate_per_cycle = 1.5'),
     "channel 0 max_rate_per_cycle must be at most one sample per clock cycle, what a channel takes (125 "
     "Msamples/s at this build's clock), not 1.5 samples per clock cycle"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nmax_rate = 1e6\nmax_rate_per_cycle = 0.1'),
     "channel 0 has both max_rate (samples per second) and max_rate_per_cycle: give one"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nmax_rates = 1e6'), "channel 0: unknown key(s) max_rates"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nevent_id_bits = 0'),
     "channel 0 event_id_bits must be a whole number of bits from 1 to 31 (an event's id is ev44's int32 "
     "pixel_id), not 0"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nevent_id_bits = 32'), "channel 0 event_id_bits must be a whole "
                                                                          "number of bits from 1 to 31"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nevent_id_bits = "peak"'), "not 'peak'"),
    (GOOD_TOML.replace('ready = "r"', 'ready = "r"\nevent_id_bits = 12.0'), "not 12.0"),
])
def test_verilog_front_end_mistakes_are_named(tmp_path, toml, expected):
    msg = verilog_error(tmp_path, toml)
    assert "adc.toml" in msg and expected in msg, msg


def test_a_verilog_syntax_error_and_a_missing_description(tmp_path):
    msg = verilog_error(tmp_path, GOOD_TOML, verilog="module adc(input clk; endmodule\n")
    assert "Yosys could not read module 'adc'" in msg and "syntax error" in msg.lower(), msg
    (tmp_path / "lonely.v").write_text(VERILOG)
    with pytest.raises(fe.FrontendError, match="needs a description of its ports in lonely.toml"):
        fe.load(tmp_path / "lonely.v")


def test_the_pulse_height_example_gives_the_soc_three_channels_one_of_events_and_its_registers():
    from ethdaq.soc.daqsoc import DAQSoC
    from ethdaq.soc.socconfig import SoCConfig
    soc = DAQSoC(get_board("sim"), SoCConfig(frontend=fe.load(REPO / "examples" / "frontends" / "pulse_height.v")))
    assert soc.constants["ETHDAQ_NCHANNELS"] == 3
    # Half a sample per clock cycle on the two sample channels, a word every cycle on the event
    # channel (pulse_height.toml), in samples per second.
    assert soc.constants["ETHDAQ_MAX_RATE_0"] == soc.constants["ETHDAQ_MAX_RATE_1"] == 62_500_000
    assert soc.constants["ETHDAQ_MAX_RATE_2"] == 125_000_000
    # Channel 2 carries events with 12-bit ids (the peaks), for IDENTIFY.
    assert "ETHDAQ_EVENT_CHANNELS" in soc.constants and soc.constants["ETHDAQ_EVENT_ID_BITS_2"] == 12
    assert "ETHDAQ_EVENT_ID_BITS_0" not in soc.constants and "ETHDAQ_EVENT_ID_BITS_1" not in soc.constants
    assert soc.constants["ETHDAQ_FRONTEND_CSR_BYTES"] == 16  # threshold, rate, pulses, lost.
