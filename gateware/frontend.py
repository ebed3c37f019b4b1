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
What the context gives the module (FrontendContext below): the sample width, how many channels
it may drive, the system clock frequency, the PTP clock's time in ns, the board's name, and
`ctx.request(name)` for the board's pads. Everything runs in the `sys` clock domain.

Mistakes in the user's file stop the build with a FrontendError naming the file, and the line
or the port, never a traceback from inside LiteX.
"""

import importlib.util
import sys
import traceback
from pathlib import Path

from migen import Module, Signal

from litex.build.generic_platform import ConstraintError
from litex.soc.interconnect import stream


class FrontendError(ValueError):
    """A mistake in the user's front-end, explained in one message naming the file."""


class FrontendContext:
    """What a front-end may use from the platform."""
    def __init__(self, path, platform, board, sample_width, max_channels, sys_clk_freq, time_ns):
        self.path         = Path(path)
        self.board        = board.name
        self.is_sim       = board.is_sim
        self.sample_width = sample_width  # Bits per sample on every channel.
        self.max_channels = max_channels  # Channels a front-end may drive (the protocol's mask).
        self.sys_clk_freq = sys_clk_freq
        self.time_ns      = time_ns       # PTP time of day in ns, 64 bits, `sys` domain.
        self._platform    = platform

    def request(self, name, number=0):
        """The board's pad (or group of pads) `name`, as the board file declares it."""
        try:
            return self._platform.request(name, number)
        except ConstraintError:
            known = sorted({io[0] for io in self._platform.constraint_manager.available})
            raise FrontendError(f"{self.path}: the board {self.board} has no free pad {name!r} "
                                f"(number {number}); pads it can still give: {', '.join(known) or 'none'}") from None


def _user_line(path, exc):
    """'line N' of the deepest frame of `exc`'s traceback that is in the user's file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f"line {frames[-1].lineno}" if frames else None


def load(path):
    """Import the user's front-end file; return its `frontend` function."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FrontendError(f"front-end file {str(path)!r} not found")
    if path.suffix != ".py":
        raise FrontendError(f"{path}: a front-end is a Python file (.py) defining frontend(ctx)")
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
    return fe, sources
