"""Users' front-ends on the whole simulated board: the example triggered ADC
(examples/frontends/triggered_adc.py, Python) and pulse-height analyser (pulse_height.v, Verilog),
each copied outside the repository as a user would keep it, built with `ethdaq build --board sim
--frontend PATH`, stream through the board to a Linux receiver in a network namespace; what
arrives is compared with the example's Python model, word for word. Boards of their own, built
here (about a minute each: the background queue is busy with the bitstream builds)."""

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

from conftest import REPO, ethdaq_cmd, requires_root
from ethdaq.boards import get_board
from ethdaq.gateware import frontend as fe
from ethdaq.soc import build, sim

NETNS    = "ethdaq-test-frontend"
TAP      = "ethdaq3"
BOARD_IP = "192.168.80.50"
HOST_IP  = "192.168.80.1"
CTL_PORT = 7000
# How far into the model's words the run may start: it started about 4,000 words in (some 7 ms of
# simulated time after reset); a search of a million words takes under a minute when it fails.
MODEL_WORDS = 1_000_000
OUT      = REPO / "build" / "test-sim-frontend"
EXAMPLE  = REPO / "examples" / "frontends" / "triggered_adc.py"
pytestmark = [requires_root, pytest.mark.network]


def run_board(files, out, netns, tap, board_ip, host_ip):
    """Copy the user's files outside the repository, build the board with the first as its
    front-end, and run it: a context manager yielding the session."""
    user_dir = Path(tempfile.mkdtemp(prefix="ethdaq-user-frontend-"))
    try:
        for f in files:
            shutil.copy(f, user_dir / f.name)
        r = subprocess.run(ethdaq_cmd("build", "--board", "sim", "--ip", board_ip, "--ctl-port", str(CTL_PORT),
                                      "--frontend", str(user_dir / files[0].name), "--output-dir", str(out)),
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        shutil.rmtree(user_dir, ignore_errors=True)
    build.write_sim_config(get_board("sim"), out / "gateware", tap=tap, host_ip=host_ip)
    return sim.SimSession(out / "gateware", netns=netns, echo=False, log=out / "console-fixture.log")


@pytest.fixture(scope="module")
def board():
    with run_board([EXAMPLE], OUT, NETNS, TAP, BOARD_IP, HOST_IP) as session:
        session.wait_for("ethdaq ready", timeout=180)
        yield session
    assert NETNS not in sim.list_netns()


RECEIVE = """
import json, sys
from ethdaq.host.ctl import ControlClient
from ethdaq.host.receiver import Receiver
from ethdaq.wire import daqformat
board, ctl_port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
datagrams = []

def keep(h, payload):
    n = h.sample_bits // 8
    datagrams.append(dict(stream=h.stream_id, seq=h.seq, dropped=h.dropped, flags=h.flags,
                          samples=[int.from_bytes(payload[i*n:(i+1)*n], "big") for i in range(h.sample_count)]))

with Receiver(port=5000) as rx, ControlClient(board, ctl_port) as ctl:
    ident = ctl.identify()
    run, dst = ctl.stream_start(dst_port=5000, payload=1472)   # Every channel the board has.
    stats = rx.run(max_datagrams=count, idle_timeout=60, on_datagram=keep)
    ctl.stream_stop()
    stats = rx.run(idle_timeout=3, on_datagram=keep)
print(json.dumps(dict(nchannels=ident.nchannels, datagrams=datagrams, missing=stats.missing,
                      malformed=stats.malformed_total)))
"""


def receive(session, board_ip, count):
    """RECEIVE inside the board's namespace: its JSON (nchannels, datagrams, missing, malformed)."""
    r = session.ns_run([sys.executable, "-c", RECEIVE, board_ip, str(CTL_PORT), str(count)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def ctl(session, board_ip, *args, timeout=60):
    """`ethdaq ctl ...` inside the board's namespace: (exit code, stdout, stderr)."""
    r = session.ns_run(ethdaq_cmd("ctl", *args, "--board", board_ip, "--port", str(CTL_PORT)), capture_output=True,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def test_the_csr_map_has_the_front_ends_registers(board):
    names = (OUT / "csr.csv").read_text()
    for reg in ("frontend_threshold", "frontend_pre", "frontend_post", "frontend_events", "frontend_lost"):
        assert reg in names
    assert "emu0_" not in names  # The front-end replaced the emulators.


def test_the_front_ends_samples_reach_linux_as_its_model_made_them(board):
    res = receive(board, BOARD_IP, 12)
    assert res["nchannels"] == 1 and res["missing"] == 0 and res["malformed"] == 0
    dgrams = res["datagrams"]
    assert len(dgrams) >= 12 and {d["stream"] for d in dgrams} == {0}
    assert all(d["dropped"] == 0 for d in dgrams)  # Nothing lost on the board: the words are consecutive.
    words = [w for d in dgrams for w in d["samples"]]

    example = types.SimpleNamespace(**fe.load(EXAMPLE).__globals__)
    first = next(i for i, w in enumerate(words) if w & example.FIRST)  # The run may start mid-window.
    received = words[first:]
    # Find the received first window among the model's windows (the ADC ran since reset; the
    # run started later), then everything after it must be the model's words in order.
    model = example.model()
    window = received[:next(i for i in range(1, len(received)) if received[i] & example.FIRST)]
    prefix = []
    for position in range(MODEL_WORDS):
        w = next(model)
        if w & example.FIRST:
            if prefix == window:
                break
            prefix = [w]
        elif prefix:
            prefix.append(w)
    else:
        pytest.fail(f"the first received window is nowhere in the model's first {MODEL_WORDS} words")
    print(f"first received window ends at the model's word {position}")
    expected = window + [w] + list(itertools.islice(model, len(received) - len(window) - 1))
    assert received == expected
    assert sum(1 for w in received if w & example.FIRST) > 50


def test_the_front_ends_registers_through_the_control_protocol(board):
    """ethdaq ctl regs names them from the build's csr.json; a new window length set through it
    is what the next run's windows have."""
    csr = str(OUT / "csr.json")
    code, out, err = ctl(board, BOARD_IP, "identify")
    assert code == 0 and "front-end registers" in out, out + err
    code, out, err = ctl(board, BOARD_IP, "regs", "--csr", csr, "--json")
    assert code == 0, err
    defaults = json.loads(out)
    assert {k: defaults[k] for k in ("threshold", "pre", "post", "divider", "enable", "lost")} == dict(
        threshold=1200, pre=4, post=12, divider=16, enable=1, lost=0)
    assert defaults["events"] > 50  # The windows the model test received, and those before its run.
    code, out, err = ctl(board, BOARD_IP, "regs", "post=20", "pre", "--csr", csr, "--json")
    assert code == 0 and json.loads(out) == dict(post=20, pre=4), out + err
    code, out, err = ctl(board, BOARD_IP, "regs", "events=3", "--csr", csr)
    assert code != 0 and "read-only" in err
    try:
        words = [w for d in receive(board, BOARD_IP, 6)["datagrams"] for w in d["samples"]]
        starts = [i for i, w in enumerate(words) if w & 0x8000]
        lengths = {b - a for a, b in zip(starts, starts[1:])}
        assert len(starts) > 20 and lengths == {24}, lengths  # pre 4 + post 20.
    finally:
        assert ctl(board, BOARD_IP, "regs", "post=12", "--csr", csr)[0] == 0


IOC_CLIENT = """
import json, os, subprocess, sys, time
import epics
P = "LAB:FE:"

def get(name):
    m = epics.get_pv(P + name, form="ctrl", connect=True, timeout=10).get_with_metadata(use_monitor=False, timeout=10)
    assert m is not None, name
    v = m["value"]
    return dict(value=v.item() if hasattr(v, "item") else v, severity=m["severity"], status=m["status"])

def wait_for(name, test, timeout=60):
    deadline = time.monotonic() + timeout
    while not test(m := get(name)):
        assert time.monotonic() < deadline, (name, m)
        time.sleep(0.2)
    return m

CTL = json.loads(sys.argv[1])
regs = lambda: json.loads(subprocess.run(CTL, capture_output=True, text=True, check=True).stdout)
out = {"first": wait_for("FE:THRESHOLD_RBV", lambda m: m["severity"] == 0)}
out["before"] = regs()
# A poll that began after `before` (its STATUS, read before the registers, is later): every PV is
# from it or a later one.
uptime = json.loads(subprocess.run(json.loads(sys.argv[3]), capture_output=True, text=True, check=True).stdout)["uptime_ms"]
wait_for("STAT:UPTIME", lambda m: m["value"] * 1000 > uptime and m["severity"] == 0)
out["pvs"] = {n: get(n) for n in json.loads(sys.argv[2])}
out["after"] = regs()
out["put"] = epics.caput(P + "FE:THRESHOLD", 1300, wait=True, timeout=60)
out["rbv"] = wait_for("FE:THRESHOLD_RBV", lambda m: m["value"] == 1300)
out["board"] = regs()
epics.caput(P + "FE:THRESHOLD", 2**32, wait=True, timeout=60)
out["too_big"] = get("FE:THRESHOLD")
out["too_big_msg"] = epics.caget(P + "CTL:MSG", as_string=True)
out["board_after"] = regs()
epics.caput(P + "FE:THRESHOLD", 1200, wait=True, timeout=60)
out["restored"] = wait_for("FE:THRESHOLD_RBV", lambda m: m["value"] == 1200)
print(json.dumps(out))
"""


def test_an_epics_ioc_serves_the_front_ends_registers_as_pvs(board, tmp_path):
    """`ethdaq ioc --csr`: every FE: PV reads what `ethdaq ctl regs` reports around it (pyepics,
    Channel Access on the namespace's loopback); a put to the threshold is a REG_WRITE the board
    takes; a value past its 32 bits is refused, an alarm with the reason, and not written."""
    from test_network_ioc import EPICS_ENV, MAJOR, WRITE_ALARM
    log = tmp_path / "ioc.log"
    with open(log, "w") as f:
        ioc = board.ns_popen(ethdaq_cmd("ioc", "--board", f"{BOARD_IP}:{CTL_PORT}", "--prefix", "LAB:FE:",
                                        "--csr", str(OUT / "csr.json"), "--interval", "0.5"),
                             env=os.environ | EPICS_ENV, stdout=f, stderr=subprocess.STDOUT, text=True)
    try:
        names = ["FE:THRESHOLD", "FE:THRESHOLD_RBV", "FE:PRE_RBV", "FE:POST_RBV", "FE:EVENTS", "FE:LOST"]
        ctl_regs = ethdaq_cmd("ctl", "regs", "--csr", str(OUT / "csr.json"), "--json", "--board", BOARD_IP,
                              "--port", str(CTL_PORT))
        ctl_status = ethdaq_cmd("ctl", "status", "--json", "--board", BOARD_IP, "--port", str(CTL_PORT))
        r = board.ns_run([sys.executable, "-c", IOC_CLIENT, json.dumps(ctl_regs), json.dumps(names), json.dumps(ctl_status)],
                         env=os.environ | EPICS_ENV, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr + log.read_text()
        out = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        ioc.terminate()
        ioc.wait(timeout=60)
    assert ioc.returncode == 0, log.read_text()
    before, pvs, after = out["before"], out["pvs"], out["after"]
    for name in ("threshold", "pre", "post", "lost"):
        pv = pvs[f"FE:{name.upper()}" + ("" if name == "lost" else "_RBV")]
        assert pv["value"] == before[name] == after[name] and pv["severity"] == 0, (name, pv)
    assert pvs["FE:THRESHOLD"]["value"] == before["threshold"]   # The setpoint starts at the board's value.
    assert before["events"] <= pvs["FE:EVENTS"]["value"] <= after["events"]
    assert out["put"] == 1 and out["board"]["threshold"] == 1300
    assert (out["too_big"]["severity"], out["too_big"]["status"]) == (MAJOR, WRITE_ALARM)
    assert out["too_big_msg"] == "FE:THRESHOLD 4294967296: threshold holds 32 bits (0 to 4294967295), not 4294967296"
    assert out["board_after"]["threshold"] == 1300 and out["restored"]["value"] == 1200


def test_registers_outside_the_front_end_are_refused(board):
    from ethdaq.wire import protocol
    code = board.ns_run([sys.executable, "-c", f"""
from ethdaq.host.ctl import ControlClient, ControlRefused
with ControlClient("{BOARD_IP}", {CTL_PORT}) as c:
    assert c.reg_read(28, 1) == [0]            # lost: the last register.
    try:
        c.reg_read(28, 2)                     # One word past it.
    except ControlRefused as e:
        print(e.code)
"""], capture_output=True, text=True, timeout=60)
    assert code.returncode == 0, code.stderr
    assert code.stdout.strip() == str(protocol.ERR_BAD_VALUE)


def test_the_declared_rate_reaches_the_host_and_start_warns_with_the_arithmetic(board):
    """The example declares a sample every clock cycle (125 MHz): identify shows it, and a run
    warns that 125 Msamples/s of 2 bytes (250 MB/s) exceed the gigabit link."""
    code, out, err = ctl(board, BOARD_IP, "identify")
    assert code == 0 and "max rates     channel 0 125 Msamples/s" in out, out + err
    code, out, err = ctl(board, BOARD_IP, "start", "--dst-port", "5000", "--payload", "1472")
    try:
        assert code == 0 and "run " in out, out + err
        assert ("warning: the board will drop samples when the front-end makes what it declares as its worst "
                "case: 125 Msamples/s x 2 bytes = 250.0 MB/s of samples") in err, err
        assert "at 1472-byte payloads, but the link carries 125.0 MB/s (1000 Mb/s)" in err, err
    finally:
        assert ctl(board, BOARD_IP, "stop")[0] == 0


# The Verilog front-end ----------------------------------------------------------------------------

V_OUT     = REPO / "build" / "test-sim-frontend-v"
V_EXAMPLE = [REPO / "examples" / "frontends" / n for n in ("pulse_height.v", "pulse_height.toml")]
V_BOARD_IP, V_HOST_IP = "192.168.81.50", "192.168.81.1"


@pytest.fixture(scope="module")
def vboard():
    with run_board(V_EXAMPLE, V_OUT, "ethdaq-test-frontend-v", "ethdaq4", V_BOARD_IP, V_HOST_IP) as session:
        session.wait_for("ethdaq ready", timeout=180)
        yield session


def test_the_verilog_front_ends_results_reach_linux_as_its_model_made_them(vboard):
    sys.path.insert(0, str(REPO / "examples" / "frontends"))
    try:
        import pulse_height_model as model
    finally:
        sys.path.pop(0)
    res = receive(vboard, V_BOARD_IP, 12)
    assert res["nchannels"] == 3 and res["missing"] == 0 and res["malformed"] == 0
    dgrams = res["datagrams"]
    assert {d["stream"] for d in dgrams} == {0, 1, 2} and all(d["dropped"] == 0 for d in dgrams)
    heights = [w for d in dgrams if d["stream"] == 0 for w in d["samples"]]
    widths  = [w for d in dgrams if d["stream"] == 1 for w in d["samples"]]
    n = min(len(heights), len(widths))
    assert n > 200
    # Both channels start in the same cycle, so the run's first result is on both; find it in the
    # model's results (the analyser ran since reset) by its first 16 heights.
    expected = []
    for peak, cycles in itertools.islice(model.results(), 200_000):
        expected.append((peak, cycles))
        if [p for p, _ in expected[-16:]] == heights[:16]:
            break
    else:
        pytest.fail("the first received heights are nowhere in the model's first 200,000 results")
    start = len(expected) - 16
    got = list(zip(heights[:n], widths[:n]))
    assert got == list(itertools.islice(model.results(), start, start + n))


def test_the_verilog_front_ends_registers_through_the_control_protocol(vboard):
    csr = str(V_OUT / "csr.json")
    code, out, err = ctl(vboard, V_BOARD_IP, "regs", "--csr", csr, "--json")
    assert code == 0, err
    regs = json.loads(out)
    assert regs["threshold"] == 1000 and regs["rate"] == 2**24 and regs["lost"] == 0 and regs["pulses"] > 200


def test_the_verilog_front_ends_declared_rates_reach_the_host(vboard):
    """pulse_height.toml declares half a sample per clock cycle on each sample channel: 62.5
    Msamples/s at the simulated board's 125 MHz, and a word every cycle on the event channel, in
    IDENTIFY, and that channel 2 carries events with 12-bit ids."""
    code, out, err = ctl(vboard, V_BOARD_IP, "identify", "--json")
    assert code == 0, err
    assert json.loads(out)["max_rates"] == [62_500_000, 62_500_000, 125_000_000]
    assert json.loads(out)["event_id_bits"] == [0, 0, 12]


READ_EVENTS = """
import json, sys
sys.path.insert(0, sys.argv[3])
from kafka_helpers import read_topic
from streaming_data_types import deserialise_ev44, deserialise_se00, deserialise_x5f2
got = read_topic(sys.argv[1], sys.argv[2], lambda m: any(x.value()[4:8] == b"6s4t" for x in m))
out = dict(ev44=[], se00={}, status={})
for m in got:
    schema = m.value()[4:8]
    if schema == b"ev44":
        e = deserialise_ev44(m.value())
        out["ev44"].append(dict(name=e.source_name, id=e.message_id, ref=e.reference_time.tolist(),
                                index=e.reference_time_index.tolist(), tof=e.time_of_flight.tolist(),
                                pixel=e.pixel_id.tolist()))
    elif schema == b"se00":
        s = deserialise_se00(m.value())
        out["se00"].setdefault(s.channel, []).extend(s.values.tolist())
    elif schema == b"x5f2":
        s = json.loads(deserialise_x5f2(m.value()).status_json)
        out["status"][s["stream"]] = s
print(json.dumps(out))
"""


def test_the_verilog_front_ends_events_reach_kafka_as_ev44_as_its_model_made_them(vboard, tmp_path):
    """The whole chain: the board's event channel (pulse_height.v's channel 2), named by its
    IDENTIFY, through `ethdaq recv --kafka --board-ip -o` in the namespace to a broker there, read
    back with ess-streaming-data-types' deserialise_ev44: each event's id is the pulse's peak
    (the same pulses as the heights channel's se00 samples and the model's), its time the PTP
    time at the threshold crossing, 8 ns per cycle apart as the model's crossing cycles are; the
    run file keeps the same events (h5py)."""
    from ethdaq.kafkabroker import KafkaBroker
    sys.path.insert(0, str(REPO / "examples" / "frontends"))
    try:
        import pulse_height_model as model
    finally:
        sys.path.pop(0)
    topic = "ethdaq-test-events"
    with KafkaBroker(netns=vboard.netns) as broker:
        recv = vboard.ns_popen(ethdaq_cmd("recv", "--port", "5000", "--kafka", broker.bootstrap, "--topic", topic,
                                          "--board-ip", V_BOARD_IP, "--board-port", str(CTL_PORT),
                                          "--count", "30", "--progress", "off", "-o", str(tmp_path / "run.h5")),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert "receiving on UDP" in recv.stderr.readline()
            assert recv.stderr.readline() == (f"event channels of {V_BOARD_IP}, published as ev44 and kept as events "
                                              f"in the run file: 2 (12-bit ids)\n")
            code, out, err = ctl(vboard, V_BOARD_IP, "start", "--dst-port", "5000")
            assert code == 0, err
            out, err = recv.communicate(timeout=600)
        finally:
            if recv.poll() is None:
                recv.kill()
            ctl(vboard, V_BOARD_IP, "stop")
        assert recv.returncode == 0, out + err
        r = vboard.ns_run([sys.executable, "-c", READ_EVENTS, broker.bootstrap, topic, str(REPO / "test")],
                          capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    msgs = got["ev44"]
    assert len(msgs) > 3 and [m["id"] for m in msgs] == list(range(len(msgs)))
    assert all(m["index"] == [0] and len(m["ref"]) == 1 for m in msgs)
    times = [m["ref"][0] + tof for m in msgs for tof in m["tof"]]
    pixels = [p for m in msgs for p in m["pixel"]]
    assert len(pixels) > 200
    # The run starts at a pulse on every channel: the heights channel's samples are the events' ids.
    heights = got["se00"]["0"]
    n = min(len(heights), len(pixels))
    assert pixels[:n] == heights[:n]
    # Find the run's first pulse in the model's (the analyser ran since reset) by its first 16 ids.
    pulses = []
    for pulse in itertools.islice(model.pulses(), 200_000):
        pulses.append(pulse)
        if [p for p, _, _ in pulses[-16:]] == pixels[:16]:
            break
    else:
        pytest.fail("the first events' ids are nowhere in the model's first 200,000 pulses")
    expected = list(itertools.islice(model.pulses(), len(pulses) - 16, len(pulses) - 16 + len(pixels)))
    assert pixels == [peak for peak, _, _ in expected]
    # Each event's PTP time is the board's clock at its crossing cycle: 8 ns a cycle (125 MHz).
    at_reset = {t - 8 * crossing for t, (_, _, crossing) in zip(times, expected)}
    assert len(at_reset) == 1, sorted(at_reset)[:5]
    status = got["status"][msgs[0]["name"]]
    # At most the words of one event cut by the run's start are discarded.
    assert status["events"] == len(pixels) and status["event_words_discarded"] < 6
    # The run file has the same events, rebuilt from the same words.
    import h5py
    with h5py.File(tmp_path / "run.h5") as f:
        ev = f["streams"][msgs[0]["name"]]["events"]
        assert ev["event_id"][()].tolist() == pixels and ev["event_time"][()].tolist() == times
        assert ev.attrs["words_discarded"] >= status["event_words_discarded"]
