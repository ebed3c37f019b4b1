import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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


# Background builds ---------------------------------------------------------------------------------
# A bitstream build (test_build_ecp5.py) takes about 10 minutes of one core, a Yosys synth_xilinx
# pass (test_build_xilinx.py) about 3, and the rest of the suite is mostly single-threaded
# simulation. A test marked
#     @pytest.mark.background_build("name", [ethdaq arguments...])
# has its command queued as soon as the session's tests are collected (when it is selected); the
# queue runs one command at a time on the machine's second core, the simulated boards first, then
# in collection order. Such tests run last and wait for their command.
BACKGROUND_BUILDS = {}
_QUEUE_STOP = threading.Event()


class _Build:
    def __init__(self, args, log):
        self.args, self.log = args, log
        self.proc, self.returncode = None, None
        self.done = threading.Event()


def _run_queue(builds):
    for build in builds:
        if _QUEUE_STOP.is_set():
            build.done.set()
            continue
        with open(build.log, "w") as f:
            build.proc = subprocess.Popen(ethdaq_cmd(*build.args), stdout=f, stderr=subprocess.STDOUT, text=True)
            build.returncode = build.proc.wait()
        build.done.set()


def pytest_collection_modifyitems(session, config, items):
    marked = [item for item in items if item.get_closest_marker("background_build")]
    for item in marked:
        items.remove(item)
        items.append(item)


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
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
        log = REPO / "build" / f"{name}.background.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        BACKGROUND_BUILDS[name] = build = _Build(args, log)
        queue.append(build)
    # The simulated boards' builds (a minute or two each) before the bitstream and synthesis
    # builds (10 to 25 minutes): their tests then need not wait for the long ones.
    queue.sort(key=lambda b: not _is_sim_build(b.args))
    if queue:
        threading.Thread(target=_run_queue, args=(queue,), daemon=True).start()


def _is_sim_build(args):
    return "--board" in args and args[args.index("--board") + 1] == "sim"


def background_build(name, timeout):
    """Wait for a background build: (return code, its output)."""
    build = BACKGROUND_BUILDS[name]
    if not build.done.wait(timeout=timeout):
        _QUEUE_STOP.set()
        if build.proc is not None:
            build.proc.kill()
        raise TimeoutError(f"background build {name!r} still running after {timeout} s")
    if build.returncode is None:
        raise RuntimeError(f"background build {name!r} did not run (the queue was stopped)")
    return build.returncode, build.log.read_text()


def pytest_sessionfinish(session, exitstatus):
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
