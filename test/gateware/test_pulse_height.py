"""The example Verilog front-end examples/frontends/pulse_height.v on its own under Verilator
(test/gateware/verilog/tb_pulse_height.cpp), against its Python model pulse_height_model.py: the heights
and widths of its two sample channels, and the events of its event channel reassembled by the
host's own code (ethdaq.host.events), with the channels ready every cycle and stalled."""

import itertools
import shutil
import subprocess
import sys

import pytest

from conftest import REPO
from ethdaq.host import events

EXAMPLES = REPO / "examples" / "frontends"
T0 = 1_795_000_000_123_456_789   # A PTP time of day in 2026, ns: every bit of the 64 in use.
CYCLES = 200_000

sys.path.insert(0, str(EXAMPLES))
try:
    import pulse_height_model as model
finally:
    sys.path.pop(0)


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    if shutil.which("verilator") is None:
        pytest.skip("verilator is not installed")
    out = tmp_path_factory.mktemp("pulse_height")
    r = subprocess.run(["nice", "-n", "10", "verilator", "--cc", "--exe", "--build", "-Wno-fatal", "-MAKEFLAGS", "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0",
                        "--Mdir", str(out), "-o", "tb", str(EXAMPLES / "pulse_height.v"),
                        str(REPO / "test" / "gateware" / "verilog" / "tb_pulse_height.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return out / "tb"


def run(tb, ready=(100, 100, 100), seed=1):
    """{channel: [words]} and the (pulses, lost) registers after CYCLES cycles."""
    r = subprocess.run([str(tb), str(CYCLES), str(T0), *map(str, ready), str(seed)], capture_output=True,
                       text=True, check=True)
    *lines, last = r.stdout.splitlines()
    words = {0: [], 1: [], 2: []}
    for line in lines:
        ch, word = line.split()
        words[int(ch)].append(int(word))
    _, pulses, _, lost = last.split()
    return words, (int(pulses), int(lost))


@pytest.mark.parametrize("ready", [(100, 100, 100), (100, 100, 40)], ids=["ready", "events-stalled"])
def test_each_pulse_is_a_height_a_width_and_an_event_with_its_threshold_crossing_time(tb, ready):
    words, (pulses, lost) = run(tb, ready)
    assert lost == 0 and pulses > 500
    assert list(zip(words[0], words[1])) == list(itertools.islice(model.results(), pulses))
    asm = events.Assembler(sample_bits=16, id_bits=model.EVENT_ID_BITS)
    assert events.words_per_event(16, model.EVENT_ID_BITS) == 6
    times, ids = asm.feed(words[2], run=0, seq=0, dropped=0)
    expected = list(itertools.islice(model.events(lambda cycle: T0 + 8 * cycle), pulses))
    got = list(zip(times.tolist(), ids.tolist()))
    assert got == expected[:len(got)] and len(got) >= pulses - 8 and asm.discarded_words == 0
    # Each event's words as the host's own packing of the model's event makes them.
    assert words[2][:6 * len(got)] == [w for t, i in expected[:len(got)] for w in events.pack(t, i, 16, 12)]


def test_a_full_event_queue_loses_the_pulse_on_every_channel(tb):
    """Events never taken (ready 0): the queue fills after 8 and every later pulse is lost, on
    every channel, and counted."""
    words, (pulses, lost) = run(tb, (100, 100, 0))
    assert pulses == 8 and lost > 500 and words[2] == []
    assert list(zip(words[0], words[1])) == list(itertools.islice(model.results(), 8))
