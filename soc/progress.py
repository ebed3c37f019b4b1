#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""The build's progress on the console, read from the build's own log as it grows.

    build.log ──► follow (a thread) ──► BuildLog.feed(line) ──► status() ──► console
      ▲ LiteX, make, the compilers, Yosys, soc/pnr.py + nextpnr, ecppack (fds 1 and 2)
      ▲ "ethdaq: stage: NAME" lines from the build's own steps (mark())

Everything a build prints goes to OUTPUT_DIR/build.log (soc/build.py's output_to); nothing but
this module's lines reaches the console. The stage comes from the build's marks (building the SoC,
compiling firmware, generating Verilog; soc/pnr.py marks each placement and the ecppack shim the
bitstream) and from the tools' own output (Yosys' banner, nextpnr's "Routing globals...",
Vivado's "Command: route_design"). Within a stage, the detail is the tool's latest progress line,
condensed: the library being compiled, Yosys' current pass, the HeAP and annealing placers'
iteration and wirelength, nextpnr's timing estimate after placement, router1's remaining arcs,
router2's overused wires; for a sweep of placements, the seed and attempt.

On a terminal one status line is rewritten in place (carriage return) and every finished stage
leaves a line with its time; elsewhere (CI, a pipe, a log) the status is a plain line at each
stage change and every PLAIN_INTERVAL_S seconds, so the output stays readable.
"""

import os
import re
import sys
import threading
import time

# The line the build's own steps print when a stage starts (the rest of the line names it).
STAGE_MARK = "ethdaq: stage: "

SOC        = "building the SoC"
FIRMWARE   = "compiling firmware"
VERILOG    = "generating Verilog"
SYNTHESIS  = "synthesis (Yosys)"
PLACEMENT  = "placement (nextpnr)"
ROUTING    = "routing (nextpnr)"
BITSTREAM  = "bitstream (ecppack)"
VERILATOR  = "compiling the simulation (Verilator)"
XILINX_SYNTHESIS = "synthesis (Yosys synth_xilinx, estimate)"
# Vivado's steps, from the "Command: ..." line it logs as each starts (not run here: no Vivado).
VIVADO = {"synth_design": "synthesis (Vivado)", "place_design": "placement (Vivado)",
          "route_design": "routing (Vivado)", "write_bitstream": "bitstream (Vivado)"}

# Seconds between status lines when the console is not a terminal (and no stage changed).
PLAIN_INTERVAL_S = 30
# Seconds between looks at the log (and redraws of the terminal's line).
POLL_S = 0.5


def mark(stage, out=None):
    """Say in the build's output (the log) that `stage` starts."""
    out = sys.stdout if out is None else out
    out.write(f"{STAGE_MARK}{stage}\n")
    out.flush()


def clock(net):
    """A clock's short name from nextpnr's net name, e.g. '$glbnet$eth_clocks0_rx$TRELLIS_IO_IN'."""
    return net.replace("$glbnet$", "").replace("$TRELLIS_IO_IN", "")


def elapsed(seconds):
    """1:05 (minutes:seconds), or 1:02:05 from an hour on."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# What the tools print, as (pattern, handler name). Matched against each line of the log in this
# order; the first match wins. Each was read from the tools' real output (test_progress runs them).
_RULES = [
    (re.compile(re.escape(STAGE_MARK) + r"(.+)"), "on_stage_mark"),
    # soc/pnr.py: each placement of a sweep ("placing with seed 1 (attempt 1 of 3" and "placing
    # again with seed 2 (attempt 2 of 3"); router1 over its budget.
    (re.compile(r"ethdaq: .*seed (\d+) \(attempt (\d+) of (\d+)"), "on_attempt"),
    (re.compile(r"ethdaq: nextpnr's router1 had not converged"), "on_router2_fallback"),
    # Firmware: make entering a library; picolibc's ninja ([n/m]); LiteX's make rules (" CC  x.o").
    (re.compile(r"make(?:\[\d+\])?: Entering directory '.*/software/([^/']+)'"), "on_library"),
    (re.compile(r"\[(\d+)/(\d+)\] (?:Compiling|Linking)"), "on_ninja"),
    (re.compile(r" (CC|CXX|AS|LD|AR|OBJCOPY)\s+(\S+)$"), "on_make_rule"),
    # Yosys.
    (re.compile(r"\s*(?:\|\s+yosys -- Yosys Open SYnthesis Suite|Yosys \d+\.\d+ \()"), "on_yosys"),
    (re.compile(r"(\d+(?:\.\d+)*)\. Executing ([^:(]+?)(?: pass)?\.?\s*(?:[:(]|$)"), "on_yosys_pass"),
    # nextpnr: packing, the HeAP placer (initial and main iterations), simulated annealing.
    (re.compile(r"Info: Logic utilisation before packing"), "on_nextpnr"),
    (re.compile(r"Info: Packing "), "on_packing"),
    (re.compile(r"Info:\s+at initial placer iter (\d+), wirelen = (\d+)"), "on_heap_initial"),
    (re.compile(r"Info:\s+at iteration #(\d+), type \w+: wirelen solved = (\d+), spread = (\d+), legal = (\d+)"),
     "on_heap"),
    (re.compile(r"Info:\s+at iteration #(\d+): temp = [\d.e+-]+, timing cost = (\d+), wirelen = (\d+)"), "on_annealing"),
    (re.compile(r"(?:Info|Warning): Max frequency for clock\s+'([^']+)': ([\d.]+) MHz \((PASS|FAIL) at ([\d.]+) MHz\)"),
     "on_fmax"),
    # nextpnr: routing. router1's table rows: iterations | ripped up | delta | remaining arcs | time.
    (re.compile(r"Info: Routing globals"), "on_routing"),
    (re.compile(r"Info: Routing\.\.$"), "on_router1"),
    (re.compile(r"Info: Routing (\d+) arcs\."), "on_arcs"),
    (re.compile(r"Info:\s+(\d+) \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|"), "on_router1_row"),
    (re.compile(r"Info: Running router2"), "on_router2"),
    (re.compile(r"Info:\s+iter=(\d+) wires=(\d+) overused=(\d+) overuse=(\d+)"), "on_router2_row"),
    (re.compile(r"Info: Routing complete"), "on_routed"),
    # Vivado.
    (re.compile(r"Command: (\w+)"), "on_vivado_command"),
    (re.compile(r"(Phase \d+(?:\.\d+)* .+?)\s*(?:\|.*)?$"), "on_vivado_phase"),
]

# Cheap first test: only lines that may match a rule go through the patterns.
_PREFIXES = ("ethdaq: ", "make", "[", " ", "Info", "Warning", "Command: ", "Phase ")


class BuildLog:
    """The build's state as read from its log, line by line: the stage, and within it the
    latest progress worth showing. Knows nothing of time or of the console."""

    def __init__(self):
        self.stages   = []      # Every stage in the order it started (a stage may come again).
        self.detail   = ""      # The current stage's latest progress.
        self.attempt  = None    # (seed, k, n) while soc/pnr.py sweeps placements.
        self.router   = ""      # "router2 (router1 over its budget)" after soc/pnr.py's fallback.
        self.estimate = {}      # {clock: (MHz, constraint MHz)}: nextpnr's latest timing analysis.
        self.outcomes = {}      # {index in stages: what the stage ended with}: nextpnr's frequencies.
        self._lib     = ""
        self._arc_total = None

    @property
    def stage(self):
        return self.stages[-1] if self.stages else None

    def feed(self, line):
        line = line.rstrip("\r\n")
        if not line.startswith(_PREFIXES) and not line[:1].isdigit():
            return
        for pattern, handler in _RULES:
            m = pattern.match(line)
            if m:
                getattr(self, handler)(*m.groups())
                return

    def status(self):
        """The stage's progress in one line (without the stage's name)."""
        parts = []
        if self.attempt and self.stage in (PLACEMENT, ROUTING):
            seed, k, n = self.attempt
            parts.append(f"seed {seed} ({k} of {n})")
        if self.router and self.stage == ROUTING:
            parts.append(self.router)
        if self.detail:
            parts.append(self.detail)
        return " | ".join(parts)

    def _enter(self, stage):
        if stage != self.stage:
            self.stages.append(stage)
            self.detail = ""
            if stage == PLACEMENT:
                self.estimate = {}

    def _clocks(self):
        return ", ".join(f"{name} {a:.1f}/{c:.1f}" for name, (a, c) in sorted(self.estimate.items())) + " MHz"

    # Handlers, one per rule.

    def on_stage_mark(self, stage):
        self._enter(stage.strip())

    def on_attempt(self, seed, k, n):
        self.attempt = (int(seed), int(k), int(n))
        self.router = ""

    def on_router2_fallback(self):
        self.router = "router2 (router1 over its budget)"

    def on_library(self, name):
        if self.stage == FIRMWARE:
            self._lib = name
            self.detail = name

    def on_ninja(self, done, total):
        if self.stage == FIRMWARE:
            self.detail = f"{self._lib or 'picolibc'} {done}/{total}"

    def on_make_rule(self, rule, target):
        if self.stage == FIRMWARE:
            self.detail = f"{self._lib}: {rule} {target}" if self._lib else f"{rule} {target}"

    def on_yosys(self):
        if self.stage != XILINX_SYNTHESIS:
            self._enter(SYNTHESIS)

    def on_yosys_pass(self, step, name):
        if self.stage in (SYNTHESIS, XILINX_SYNTHESIS):
            # "AST frontend in derive mode using pre-parsed AST for module ...": its first words.
            self.detail = f"pass {step} {re.split(r' (?:in|using|for|from) ', name.strip())[0][:40]}"

    def on_nextpnr(self):
        self._enter(PLACEMENT)

    def on_packing(self):
        if self.stage == PLACEMENT:
            self.detail = "packing"

    def on_heap_initial(self, it, wirelen):
        self.detail = f"HeAP initial iter {it}: wirelen {int(wirelen)}"

    def on_heap(self, it, solved, spread, legal):
        self.detail = f"HeAP iter {it}: wirelen {int(legal)}"

    def on_annealing(self, it, timing_cost, wirelen):
        self.detail = f"SA iter {it}: wirelen {int(wirelen)}, timing cost {int(timing_cost)}"

    def on_fmax(self, net, achieved, verdict, constraint):
        self.estimate[clock(net)] = (float(achieved), float(constraint))
        if self.stage in (PLACEMENT, ROUTING):
            self.detail = f"{'estimate' if self.stage == PLACEMENT else 'routed'}: {self._clocks()}"
            self.outcomes[len(self.stages) - 1] = self.detail

    def on_routing(self):
        self._enter(ROUTING)
        self.detail = "global clocks"

    def on_router1(self):
        self._enter(ROUTING)
        self.detail = "router1"

    def on_arcs(self, arcs):
        self._arc_total = int(arcs)
        self.detail = f"router1: {self._arc_total} arcs to route"

    def on_router1_row(self, iterations, remaining):
        total = f"/{self._arc_total}" if self._arc_total else ""
        self.detail = f"router1 iter {int(iterations)}: {int(remaining)}{total} arcs left"

    def on_router2(self):
        self._enter(ROUTING)
        self.detail = "router2"

    def on_router2_row(self, it, wires, overused, overuse):
        self.detail = f"router2 iter {it}: {int(overused)} overused wires"

    def on_routed(self):
        if self.stage == ROUTING:
            self.detail = "routing complete; timing analysis"
            self.estimate = {}

    def on_vivado_command(self, command):
        if command in VIVADO:
            self._enter(VIVADO[command])

    def on_vivado_phase(self, phase):
        if self.stage in VIVADO.values():
            self.detail = phase


class Console:
    """Writes the build's progress to `out`: on a terminal (`tty`) one line rewritten in place,
    otherwise plain lines at each stage change and every `interval` seconds."""

    def __init__(self, out, tty, interval=PLAIN_INTERVAL_S, width=None, clock=time.monotonic):
        self.out, self.tty, self.interval, self.clock = out, tty, interval, clock
        self.width = width
        self.t0 = clock()
        self.stage_t0 = self.t0
        self.seen = 0            # Stages of the log already reported.
        self.last_plain = self.t0  # Without a terminal: the last plain line (a stage change prints one).
        self.live = False        # A status line is on the terminal, without its newline.
        self.drawn = None        # ... and what it says.

    def _columns(self):
        if self.width:
            return self.width
        try:
            columns = os.get_terminal_size(self.out.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        return columns or 80   # A terminal without a size (a fresh pty) says 0.

    def line(self, log, now):
        stage = log.stage or SOC
        text = f"ethdaq build {elapsed(now - self.t0)} | {stage} {elapsed(now - self.stage_t0)}"
        status = log.status()
        return f"{text} | {status}" if status else text

    def _write(self, text):
        if self.out is None:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            # The console went away (a reader that stopped, a closed terminal): the build goes on.
            self.out = None

    def _permanent(self, text):
        """A line that stays: on a terminal it replaces the status line, which is drawn again."""
        self._write(("\r\x1b[K" if self.live else "") + text + "\n")
        self.live = False

    def update(self, log, final=False):
        now = self.clock()
        # Stages that started since the last update: each finished one gets its line. Stages
        # that started and ended between two looks at the log count from the look.
        while self.seen < len(log.stages):
            if self.seen:
                self._permanent(self._took(log, self.seen - 1, now))
            self.seen += 1
            self.stage_t0 = now
            if not self.tty and self.seen == len(log.stages):
                self._permanent(self.line(log, now))
                self.last_plain = now
        if final:
            return
        if self.tty:
            text = self.line(log, now)[:max(self._columns() - 1, 20)]
            if not self.live or text != self.drawn:
                self._write("\r" + text + "\x1b[K")
            self.live, self.drawn = True, text
        elif now - self.last_plain >= self.interval:
            self._permanent(self.line(log, now))
            self.last_plain = now

    def _took(self, log, index, now):
        """A finished stage's line: its time, and what it ended with (nextpnr's frequencies)."""
        text = f"ethdaq build {elapsed(now - self.t0)} | {log.stages[index]} took {elapsed(now - self.stage_t0)}"
        return f"{text} | {log.outcomes[index]}" if index in log.outcomes else text

    def finish(self, log, error=None, log_path=None):
        """The last lines: the last stage's time, and on failure where the full log is."""
        self.update(log, final=True)
        now = self.clock()
        stage = log.stage or SOC
        if error is None:
            self._permanent(self._took(log, len(log.stages) - 1, now) if log.stages else
                            f"ethdaq build {elapsed(now - self.t0)} | {stage} took {elapsed(now - self.stage_t0)}")
        else:
            self._permanent(f"ethdaq build {elapsed(now - self.t0)} | failed during {stage} after "
                            f"{elapsed(now - self.stage_t0)}; full log: {log_path}")


class Follower(threading.Thread):
    """Reads the log at `path` as the build writes it and keeps `console` up to date."""

    def __init__(self, path, console, poll_s=POLL_S):
        super().__init__(daemon=True, name="ethdaq-progress")
        self.path, self.console, self.poll_s = path, console, poll_s
        self.log = BuildLog()
        self._halt = threading.Event()
        # Opened once: the build changes directory (LiteX runs its toolchain from the gateware
        # directory), so a relative path would no longer name the log.
        self._file = open(path, "rb")
        self._partial = b""

    def _read(self):
        data = self._file.read()
        if not data:
            return
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            # Tools that redraw a line with carriage returns: the last drawing counts.
            self.log.feed(line.decode("utf-8", "replace").rstrip("\r").rsplit("\r", 1)[-1])

    def run(self):
        while not self._halt.is_set():
            self._read()
            self.console.update(self.log)
            self._halt.wait(self.poll_s)

    def stop(self, error=None):
        self._halt.set()
        if self.is_alive():
            self.join()
        self._read()
        self._file.close()
        if self._partial:
            self.log.feed(self._partial.decode("utf-8", "replace"))
            self._partial = b""
        self.console.finish(self.log, error=error, log_path=self.path)
