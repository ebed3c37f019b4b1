import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from ethdaq import migensim

REPO = Path(__file__).resolve().parents[1]

# Migen simulations run on the compiled simulator (ethdaq/migensim.py, checked against Migen's
# own in test_migensim.py), about ten times faster; ETHDAQ_MIGEN_SIM=interpreted keeps Migen's.
migensim.install()
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def repo():
    return REPO


def ethdaq_cmd(*args):
    return [str(VENV_BIN / "ethdaq"), *args]


requires_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces")


# Network namespaces left behind -------------------------------------------------------------------
# A run killed from outside (a CI timeout, a machine stopped) cannot remove the namespaces its
# simulations ran in, and `ethdaq sim` rightly refuses a namespace that exists. The tests' own
# namespaces are all named ethdaq-*; one in which no process runs belongs to no live simulation
# (each simulation runs inside its namespace), so it is removed before the tests start.
def _remove_stale_test_namespaces():
    if os.geteuid() != 0:
        return
    from ethdaq.soc.sim import list_netns, netns_pids
    for ns in list_netns():
        if ns.startswith("ethdaq-") and not netns_pids(ns):
            subprocess.run(["ip", "netns", "del", ns], check=False)
            print(f"\nremoved the network namespace {ns!r}, left behind by an earlier run", flush=True)


# Parallel runs and background builds --------------------------------------------------------------
# `make test` runs the suite on two pytest-xdist workers (`-n 2`) beside the background builds: a
# test file is one unit of work, so its module fixtures (a simulated board, a PTP run) are made
# once; the files with tests that create network namespaces and taps (marked `network`) are one
# unit together, so they run one after another on one worker. Those are the tests in which a
# simulated board answers Linux programs with wall-clock timeouts (ping, ptp4l, sockets): on two
# cores with three busy processes they would get two thirds of a core, so as root they run at a
# higher priority (PRIORITY_NETWORK, inherited by the simulators and programs they start) and the
# rest at the nice value the run started at; the total work and its finish are the same.
#
# A bitstream build (test_build_ecp5.py) takes about 10 minutes of one core, a Yosys synth_xilinx
# pass (test_build_xilinx.py) about 3. A test marked
#     @pytest.mark.background_build("name", [ethdaq arguments...])
# has its command queued as soon as the session's tests are collected (when it is selected); one
# process (the first worker, or the only one) runs the queue, one command at a time, the simulated
# boards first, then in collection order, and records each command's exit code with the run's id in
# build/NAME.background.rc, where a test on any worker finds it. Such tests run last and wait.
BACKGROUND_BUILDS = {}
_QUEUE_STOP = threading.Event()
_QUEUE = []
RUN_ID = {}


def _worker():
    """This process's xdist worker name (gw0, gw1, ...), None outside xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def _runs_queue():
    return _worker() in (None, "gw0")


def _network_files():
    """The test files with a test marked `network` (read as text: xdist's controller, which
    schedules, does not collect)."""
    return {str(f.relative_to(REPO)) for f in (REPO / "test").rglob("test_*.py") if "pytest.mark.network" in f.read_text()}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    network = _network_files()

    class ByFileNetworkTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return "network" if path in network else path

    return ByFileNetworkTogether(config, log)


PRIORITY_NETWORK = -5   # nice steps: about three times a default process's share of a core
# The nice value the run started at (`make test`: 0; `nice -n 19 pytest ...`: 19): the rest run
# at it, the network files PRIORITY_NETWORK steps higher, so a niced run stays niced.
NICE_AT_START = os.getpriority(os.PRIO_PROCESS, 0)


def forget_traced_objects():
    """Migen's tracer (migen/fhdl/tracer.py) keeps every module object it has named a signal
    after, per class, in a list it searches linearly for each new signal, and never drops one:
    in a worker that has built hundreds of SoCs, each new signal scans all of them (a DAQSoC that
    elaborates in 1 s alone took 50 s late in a run) and none of them is freed. Each test starts
    as a fresh process would: its signals are numbered from 0, as in `ethdaq build`."""
    from migen.fhdl import tracer
    tracer.classname_to_objs.clear()
    tracer.name_to_idx.clear()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the test's fixtures are made (a module's simulated board starts with its first
    test): Migen's tracer forgets the earlier tests' objects, and the process takes the priority
    of its file's kind."""
    forget_traced_objects()
    if os.geteuid() == 0:
        network = item.get_closest_marker("network") is not None
        os.setpriority(os.PRIO_PROCESS, 0, max(-20, NICE_AT_START + PRIORITY_NETWORK) if network else NICE_AT_START)


def pytest_configure(config):
    workerinput = getattr(config, "workerinput", None)
    RUN_ID["id"] = workerinput["testrunuid"] if workerinput else uuid.uuid4().hex
    if workerinput is None:
        from run_guard import RunGuard
        config.pluginmanager.register(RunGuard(config, REPO), "ethdaq-run-guard")


class _Build:
    def __init__(self, name, args):
        self.name, self.args = name, args
        self.log = REPO / "build" / f"{name}.background.log"
        self.rc_file = REPO / "build" / f"{name}.background.rc"
        self.proc = None

    def finish(self, returncode):
        """Record the exit code (None: did not run) for every worker to see."""
        tmp = self.rc_file.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(f"{RUN_ID['id']} {returncode}")
        tmp.replace(self.rc_file)

    def result(self):
        """(True, exit code or None) once this run has recorded it, else (False, None)."""
        try:
            run, code = self.rc_file.read_text().split()
        except (FileNotFoundError, ValueError):
            return False, None
        if run != RUN_ID["id"]:
            return False, None
        return True, None if code == "None" else int(code)


def _run_queue(builds):
    for build in builds:
        if _QUEUE_STOP.is_set():
            build.finish(None)
            continue
        with open(build.log, "w") as f:
            build.proc = subprocess.Popen(ethdaq_cmd(*build.args), stdout=f, stderr=subprocess.STDOUT, text=True)
            build.finish(build.proc.wait())


def pytest_collection_modifyitems(session, config, items):
    marked = [item for item in items if item.get_closest_marker("background_build")]
    for item in marked:
        items.remove(item)
        items.append(item)


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    if _runs_queue():
        _remove_stale_test_namespaces()
    queue = []
    for item in session.items:
        marker = item.get_closest_marker("background_build")
        if marker is None or marker.args[0] in BACKGROUND_BUILDS:
            continue
        xfail = item.get_closest_marker("xfail")
        if xfail is not None and xfail.kwargs.get("run", True) is False:
            continue
        name, args = marker.args
        BACKGROUND_BUILDS[name] = build = _Build(name, args)
        queue.append(build)
    if not (queue and _runs_queue()):
        return
    (REPO / "build").mkdir(exist_ok=True)
    # The simulated boards' builds (a minute or two each) before the bitstream and synthesis
    # builds (10 to 25 minutes): their tests then need not wait for the long ones.
    queue.sort(key=lambda b: not _is_sim_build(b.args))
    thread = threading.Thread(target=_run_queue, args=(queue,), daemon=True)
    thread.start()
    _QUEUE.append(thread)


def _is_sim_build(args):
    from ethdaq.boards import BOARDS
    return "--board" in args and getattr(BOARDS.get(args[args.index("--board") + 1]), "is_sim", False)


def background_build(name, timeout):
    """Wait for a background build: (return code, its output)."""
    build = BACKGROUND_BUILDS[name]
    deadline = time.monotonic() + timeout
    while not (result := build.result())[0]:
        if time.monotonic() > deadline:
            _QUEUE_STOP.set()
            if build.proc is not None:
                build.proc.kill()
            raise TimeoutError(f"background build {name!r} still running after {timeout} s")
        time.sleep(1)
    if result[1] is None:
        raise RuntimeError(f"background build {name!r} did not run (the queue was stopped)")
    return result[1], build.log.read_text()


def pytest_sessionfinish(session, exitstatus):
    # The first worker can run out of tests while another still waits for the queue: it lets the
    # queue finish unless the run was interrupted.
    if _worker() is not None and exitstatus != pytest.ExitCode.INTERRUPTED:
        for thread in _QUEUE:
            thread.join()
    _QUEUE_STOP.set()
    for build in BACKGROUND_BUILDS.values():
        if build.proc is not None and build.proc.poll() is None:
            build.proc.kill()
            build.proc.wait()


def tshark_frame_checks(frames, pcap):
    """tshark (an independent dissector) on PHY-side frames (preamble and SFD first, FCS last)
    written to `pcap`: per frame, [protocols, FCS status, IPv4 checksum status, UDP length]
    (status "1" is good; empty where the frame has no such layer)."""
    from scapy.packet import Raw
    from scapy.utils import wrpcap
    wrpcap(str(pcap), [Raw(f[8:]) for f in frames], linktype=1)  # DLT_EN10MB
    out = subprocess.run(["tshark", "-r", str(pcap), "-o", "eth.fcs:Always", "-o", "eth.check_fcs:TRUE",
                          "-o", "ip.check_checksum:TRUE", "-T", "fields", "-E", "separator=,",
                          "-e", "frame.protocols", "-e", "eth.fcs.status", "-e", "ip.checksum.status",
                          "-e", "udp.length"], capture_output=True, text=True, timeout=120, check=True)
    return [line.split(",") for line in out.stdout.strip().splitlines()]


# Apache Kafka ------------------------------------------------------------------------------------
# One real broker (ethdaq.kafkabroker: Kafka's jars from `make kafka`, Debian's Java) for the whole
# session: it takes seconds to start. Tests that stop it use a KafkaBroker of their own.
@pytest.fixture(scope="session")
def kafka_broker():
    from kafka_helpers import running_broker
    with running_broker() as broker:
        yield broker
