"""What a run that goes wrong leaves in its log, for a run read only from its output (CI).

The header gives the free disk and memory the run starts with. At the first failure or error the
run prints the machine's state (free disk and memory, load, the busiest processes): a full disk or
an exhausted memory fails many tests at once, each for a reason of its own. At its deadline
(ETHDAQ_TEST_DEADLINE seconds, default 80 minutes: CI stops a run at 90 without a summary) it
prints the tests still running and the machine's state, then interrupts itself the way Ctrl-C
does, so pytest stops its workers and prints its summary.

Runs in the process that reports (pytest-xdist's controller, or the only process)."""
import os
import shutil
import signal
import subprocess
import threading
import time

DEADLINE_S = float(os.environ.get("ETHDAQ_TEST_DEADLINE", 80 * 60))


def machine_state(path):
    """Lines: free disk at `path` and /tmp, available memory, load, the 10 busiest processes."""
    gib = 2 ** 30
    lines = [f"disk free: {shutil.disk_usage(path).free / gib:.1f} GiB at {path}, "
             f"{shutil.disk_usage('/tmp').free / gib:.1f} GiB at /tmp"]
    with open("/proc/meminfo") as f:
        meminfo = {k: v.split()[0] for k, v in (line.split(":", 1) for line in f)}
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"memory available: {int(meminfo['MemAvailable']) // 1024} MiB of "
                 f"{int(meminfo['MemTotal']) // 1024}; load {load}")
    ps = subprocess.run(["ps", "-eo", "pid,etimes,pcpu,rss,args", "--sort=-pcpu"],
                        capture_output=True, text=True, check=False)
    lines += [line[:160] for line in ps.stdout.splitlines()[:11]]
    return lines


class RunGuard:
    """The pytest plugin: registered by test/conftest.py in the reporting process."""

    def __init__(self, config, path, deadline_s=DEADLINE_S):
        self.config, self.path, self.deadline_s = config, path, deadline_s
        self.running = {}   # node id -> start time (monotonic)
        self.failure_seen = False
        self.timer = None

    def _write(self, title, lines):
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.write_line("")
        reporter.write_sep("-", title)
        for line in lines:
            reporter.write_line(line)

    def pytest_report_header(self, config):
        return machine_state(self.path)[:2]

    def pytest_sessionstart(self, session):
        if self.deadline_s > 0:
            # A run started in the background by a non-interactive shell (`make test &`, a CI
            # script) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt for
            # it: the deadline's interrupt would do nothing. Take it as Python does by default.
            if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
                signal.signal(signal.SIGINT, signal.default_int_handler)
            self.timer = threading.Timer(self.deadline_s, self._deadline)
            self.timer.daemon = True
            self.timer.start()

    def pytest_sessionfinish(self, session):
        if self.timer is not None:
            self.timer.cancel()

    def pytest_runtest_logstart(self, nodeid, location):
        self.running[nodeid] = time.monotonic()

    def pytest_runtest_logfinish(self, nodeid, location):
        self.running.pop(nodeid, None)

    def pytest_runtest_logreport(self, report):
        if report.failed and not self.failure_seen:
            self.failure_seen = True
            self._write(f"the machine at the first failure ({report.nodeid}, {report.when})",
                        machine_state(self.path))

    def _deadline(self):
        now = time.monotonic()
        running = [f"{now - t:6.0f} s  {nodeid}" for nodeid, t in sorted(self.running.items(), key=lambda kv: kv[1])]
        self._write(f"the run's deadline ({self.deadline_s:.0f} s, ETHDAQ_TEST_DEADLINE) has passed: "
                    "tests running", running or ["(none)"])
        self._write("the machine at the deadline", machine_state(self.path))
        os.kill(os.getpid(), signal.SIGINT)
