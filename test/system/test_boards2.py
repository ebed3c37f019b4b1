"""Several boards end to end: two simulated boards, PTP master and slave in one model
(bench/boards2.py), each stream to its own `ethdaq recv` publishing into a real Kafka broker, and
`ethdaq merge` building the merged file by PTP time; everything in a namespace of the test's own.

Checked at every stage: what each board says it sent is what its receiver received (nothing
lost), every received datagram is published, every published sample is in the merged file
exactly once, in slices of PTP time, the same samples and times as the receivers' run files;
the slave's clock agrees with the master's to the PTP accuracy (the testbench reads both clocks
in the same cycle) while the data flows."""

import json
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from conftest import REPO, requires_root

sys.path.insert(0, str(REPO))
from bench import boards2  # noqa: E402

# Not in the `network` group (test/conftest.py): its namespace and tap names are its own, so it
# runs beside the single-board network tests.
pytestmark = [pytest.mark.slow, requires_root]

OUT = REPO / "build" / "test-boards2"
NETNS = "ethdaq-boards2"
TAP = "ethdaq2"
CTL_PORT = 7000
TOPIC = "boards"
# Each board's stream: one channel of counter samples, 1 % of the cycles (1.25 MS/s), to a
# receiver port of its own.
PORTS = {"e2em": 5000, "e2es": 5001}
RATE = 0.01
DATAGRAMS = 150          # per board, before the streams stop
PTP_ACCURACY_NS = 100    # |slave - master| while the data flows


@pytest.fixture(scope="module")
def boards():
    run_dir = boards2.build(OUT)
    with boards2.Boards2(run_dir, netns=NETNS, tap=TAP, s_ppm=50, sample_cycles=12500,
                         log=OUT / "console.log") as b:
        b.wait_for("M: ethdaq ready", timeout=300)
        b.wait_for("S: ethdaq ready", timeout=300)
        b.wait_for(boards2.SLAVE_STATUS, timeout=1200)
        yield b
    assert NETNS not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


CONTROL = """
import json, sys, time
from ethdaq.host.ctl import ControlClient
action, ip, port, rate, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
with ControlClient(ip, 7000, timeout=5.0) as ctl:
    if action == "status":
        print(json.dumps({"datagrams": ctl.status().datagrams}))
    elif action == "start":
        ctl.emulator("counter", int(rate * 2**32))
        run, _ = ctl.stream_start(dst_port=port, payload=256, enable=0x1)
        print(json.dumps({"run": run}))
    elif action == "wait":
        deadline = time.monotonic() + 600
        while ctl.status().datagrams < count and time.monotonic() < deadline:
            time.sleep(1)
        print(json.dumps({"datagrams": ctl.status().datagrams}))
    else:
        ctl.stream_stop()
        streams = ctl.streams()
        print(json.dumps({"run": streams.run, "sent": {str(c.stream): c.datagrams for c in streams.streams},
                          "dropped": {str(c.stream): c.dropped for c in streams.streams}}))
"""


def control(b, action, name, count=0, rate=RATE):
    ip = boards2.BOARDS[name][1]
    r = b.ns_run([sys.executable, "-c", CONTROL, action, ip, str(PORTS[name]), str(rate), str(count)],
                 capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def ethdaq(*args):
    return [str(REPO / ".venv" / "bin" / "ethdaq"), *args]


def wait_listening(b, port, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = b.ns_run(["ss", "-ulnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        if out.strip():
            return
        time.sleep(0.2)
    raise AssertionError(f"no receiver listening on UDP {port}")


def run_file(path):
    """{stream name: (samples, index of each datagram's first sample, its header's PTP time)} of
    a receiver's run file, for the datagrams that carry samples (the run's last one, FLAG_LAST,
    has none when the stop finds no datagram open)."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, g in f["streams"].items():
            if isinstance(g, h5py.Group) and "samples" in g:
                p = g["packets"]
                full = p["sample_count"][()] > 0
                out[name] = (g["samples"][()], p["first_sample"][()][full], p["timestamp"][()].astype(np.int64)[full])
    return out


def start_receiver(b, name, out, bootstrap, *more):
    """`ethdaq recv` in the namespace for board `name`'s port, writing `out` and publishing one
    se00 message per datagram; returns once it listens."""
    port = PORTS[name]
    proc = b.ns_popen(ethdaq("recv", "--port", str(port), "-o", str(out), "--kafka", bootstrap, "--topic", TOPIC,
                             "--kafka-batch", "1", "--progress", "off", *more),
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_listening(b, port)
    return proc


def test_two_boards_through_kafka_to_one_merged_file(boards, tmp_path):
    from ethdaq.kafkabroker import KafkaBroker
    with KafkaBroker(netns=NETNS) as broker:
        receivers = {name: start_receiver(boards, name, tmp_path / f"{name}.h5", broker.bootstrap,
                                          "--board-ip", boards2.BOARDS[name][1]) for name in PORTS}
        try:
            flowing = len(boards.samples)
            runs = {name: control(boards, "start", name)["run"] for name in PORTS}
            for name in PORTS:
                assert control(boards, "wait", name, DATAGRAMS)["datagrams"] >= DATAGRAMS
            stopped = {name: control(boards, "stop", name) for name in PORTS}
            ptp_offsets = [ts - tm for _, tm, ts in boards.samples[flowing:]]
            time.sleep(5)   # The last datagrams through the tap.
        finally:
            for p in receivers.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        outputs = {name: p.communicate(timeout=120)[0] for name, p in receivers.items()}
        for name, p in receivers.items():
            assert p.returncode == 0, outputs[name]
        merged = tmp_path / "merged.h5"
        r = boards.ns_run(ethdaq("merge", "--kafka", broker.bootstrap, "--topic", TOPIC, "--slice", "100us",
                                 "--watermark", "1ms", "-o", str(merged), "--until-stop"),
                          capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr

    # Board sent = receiver received, nothing lost; received = published, nothing unpublished.
    for name in PORTS:
        summary = json.loads((tmp_path / f"{name}.json").read_text())
        streams = list(summary["streams"].values())
        assert len(streams) == 1, summary["streams"]
        s = streams[0]
        sent = stopped[name]["sent"]["0"]
        assert stopped[name]["run"] == runs[name]
        assert (s["datagrams"], s["missing"], s["duplicates"]) == (sent, 0, 0), (name, s, stopped[name])
        assert (s["published"], s["unpublished"]) == (sent, 0), (name, s)
        assert stopped[name]["dropped"]["0"] == s["board_dropped"] == 0
        k = summary["kafka"]
        assert (k["received"], k["published"], k["unpublished"], k["pending"]) == (sent, sent, 0, 0), k
    # Published = merged: every sample of both receivers' files, exactly once, with its time.
    files = {}
    for name in PORTS:
        files.update(run_file(tmp_path / f"{name}.h5"))
    assert len(files) == 2
    with h5py.File(merged, "r") as f:
        entry = f["merged"]
        assert entry.attrs["duplicates"] == 0 and entry.attrs["late_samples"] == 0 and entry.attrs["gaps"] == 0
        total = 0
        for source, (samples, firsts, stamps) in files.items():
            g = entry[source]
            assert np.array_equal(g["samples"][()], samples), source
            # Each datagram's first sample at the PTP time its header gave (one message each).
            assert np.array_equal(g["time"][()][firsts], stamps), source
            # Counter samples: consecutive, none twice, none missing.
            assert np.array_equal(np.diff(samples.astype(np.int64)) % 65536, np.ones(len(samples) - 1)), source
            total += len(samples)
        assert entry.attrs["merged_samples"] == entry.attrs["samples"] == total
        # Published = consumed: one se00 message per datagram (--kafka-batch 1).
        assert entry.attrs["se00_messages"] == sum(stopped[name]["sent"]["0"] for name in PORTS)
        # Slices in time order, and each holds samples of both boards once both stream.
        slices = entry["slices"]
        starts = slices["time"][()]
        assert np.all(np.diff(starts) > 0)
        assert (slices["sources"][()] == 2).sum() >= len(starts) // 2
    # The boards' clocks agreed to the PTP accuracy while the data flowed (testbench ground truth).
    assert ptp_offsets and max(map(abs, ptp_offsets)) <= PTP_ACCURACY_NS, ptp_offsets


def test_a_receiver_stopped_and_the_broker_restarted_mid_run_lose_nothing_silently(boards, tmp_path):
    """The broker stops and starts again while both boards stream, then one receiver is stopped
    (SIGTERM) while its board goes on sending: every datagram a receiver got is published or
    counted unpublished, every published one is merged once, and what the stopped receiver did not
    get is the board's datagrams after its last one, which the board counts as sent."""
    from ethdaq.kafkabroker import KafkaBroker
    slow = 0.002   # 250 kS/s: a run's counter samples do not wrap (16 bits).
    with KafkaBroker(netns=NETNS) as broker:
        receivers = {name: start_receiver(boards, name, tmp_path / f"{name}.h5", broker.bootstrap) for name in PORTS}
        try:
            for name in PORTS:
                control(boards, "start", name, rate=slow)
            sent = lambda name: control(boards, "status", name)["datagrams"]   # noqa: E731
            base = {name: sent(name) for name in PORTS}
            wait_sent(boards, "e2em", base["e2em"] + 30)
            broker.stop()
            wait_sent(boards, "e2em", base["e2em"] + 60)
            broker.start()
            wait_sent(boards, "e2em", base["e2em"] + 90)
            receivers["e2es"].send_signal(signal.SIGTERM)
            receivers["e2es"].wait(timeout=120)
            wait_sent(boards, "e2es", sent("e2es") + 20)   # The slave's datagrams no one receives.
            stopped = {name: control(boards, "stop", name) for name in PORTS}
            time.sleep(5)
        finally:
            for p in receivers.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
        outputs = {name: p.communicate(timeout=180)[0] for name, p in receivers.items()}
        merged = tmp_path / "merged.h5"
        r = boards.ns_run(ethdaq("merge", "--kafka", broker.bootstrap, "--topic", TOPIC, "--slice", "100us",
                                 "--watermark", "1ms", "-o", str(merged), "--until-stop"),
                          capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    summaries = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in PORTS}
    files = {name: run_file(tmp_path / f"{name}.h5") for name in PORTS}
    published = 0
    for name in PORTS:
        s, = summaries[name]["streams"].values()
        k = summaries[name]["kafka"]
        assert s["missing"] == s["duplicates"] == 0, (name, s)
        # Received = published + unpublished, nothing pending at the end.
        assert k["received"] == s["datagrams"] == k["published"] + k["unpublished"] and k["pending"] == 0, (name, k)
        published += k["published"]
    print({name: {k: v for k, v in summaries[name]["kafka"].items() if k != "job_id"} for name in PORTS})
    # The publishers saw the broker go away (librdkafka reports it), and went on once it was back.
    assert summaries["e2em"]["kafka"]["client_errors"] > 0
    # The master's receiver ran throughout: it got everything its board sent.
    assert summaries["e2em"]["streams"].popitem()[1]["datagrams"] == stopped["e2em"]["sent"]["0"], outputs["e2em"]
    # The slave's receiver stopped first: it got the run's first datagrams, the board sent more.
    s = summaries["e2es"]["streams"].popitem()[1]
    assert (s["first_seq"], s["last_seq"] + 1) == (0, s["datagrams"]) and s["datagrams"] < stopped["e2es"]["sent"]["0"]
    with h5py.File(merged, "r") as f:
        entry = f["merged"]
        assert entry.attrs["se00_messages"] == published
        assert entry.attrs["duplicates"] == entry.attrs["late_samples"] == 0
        for name in PORTS:
            (source, (samples, _, _)), = files[name].items()
            got = entry[source]["samples"][()]
            # Counter values are unique within the run: the merged ones are the file's, once each,
            # and all of them when nothing went unpublished.
            assert len(np.unique(got)) == len(got) and np.isin(got, samples).all(), source
            if summaries[name]["kafka"]["unpublished"] == 0:
                assert np.array_equal(got, samples), source


def wait_sent(b, name, count):
    assert control(b, "wait", name, count)["datagrams"] >= count
