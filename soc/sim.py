#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Running the simulated board inside a private network namespace.

The Verilator binary's tap module (ethdaq_gmii, gateware/simphy.py) creates the tap interface
itself; we start the binary inside a namespace we create, so the tap, its address and every
packet stay in that namespace, and removing the namespace removes everything.
"""

import ipaddress
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from ethdaq import tools

# Lines the simulator's modules print at start-up that say nothing about the board.
_NOISE = ("[warn] Epoll ADD", "loaded (", "[clocker]", "[clocker] loaded")


class SimError(RuntimeError):
    pass


def check_can_run(netns):
    if os.geteuid() != 0:
        raise SimError("the simulation needs root to create its network namespace; run as root (e.g. sudo ethdaq sim)")
    tools.require("ip")
    if netns in list_netns():
        if netns_pids(netns):
            raise SimError(f"network namespace {netns!r} is already in use (another 'ethdaq sim' running?); "
                           f"stop it, choose --netns, or remove it with 'ip netns del {netns}'")
        raise SimError(f"network namespace {netns!r} exists but no process runs in it (left behind by a "
                       f"run that was killed?); remove it with 'ip netns del {netns}' or choose --netns")


def list_netns():
    """The names of the network namespaces `ip netns` knows."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_pids(netns):
    """The processes running in a network namespace (a simulation runs in the one it made)."""
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def check_addresses(board_ip, host_ip):
    net = ipaddress.IPv4Network(f"{host_ip}/24", strict=False)
    if ipaddress.IPv4Address(board_ip) not in net:
        raise SimError(f"host IP {host_ip} and board IP {board_ip} must share a /24 subnet (the tap is configured /24)")
    if board_ip == host_ip:
        raise SimError(f"host IP and board IP must differ, both are {board_ip}")


class SimSession:
    """Context manager: namespace + running simulation. Console lines are kept in `lines` and
    echoed to stdout when `echo` is set. `command` is the simulation's, run in `gateware_dir`
    (default LiteX's Vsim); a subclass can take lines before they are kept (_take) and finish
    setting up once the simulation runs (_started)."""
    def __init__(self, gateware_dir, netns="ethdaq", echo=True, log=None, command=("./obj_dir/Vsim",)):
        self.gateware_dir = Path(gateware_dir)
        self.command = list(command)
        self.netns = netns
        self.echo  = echo
        self.log   = log
        self.lines = []
        self.proc  = None
        self._cond = threading.Condition()
        self._ns_created = False

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        check_can_run(self.netns)
        subprocess.run(["ip", "netns", "add", self.netns], check=True)
        self._ns_created = True
        try:
            self.ns_run(["ip", "link", "set", "lo", "up"], check=True)
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, *self.command],
                cwd=self.gateware_dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True)
            threading.Thread(target=self._reader, daemon=True).start()
            self._started()
        except BaseException:
            self.stop()
            raise

    def _started(self):
        """Called once the simulation runs, before start() returns."""

    def _take(self, line):
        """True when `line` is not console text (then it is neither kept, logged nor echoed)."""
        return False

    def _reader(self):
        logf = open(self.log, "w") if self.log else None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if self._take(line):
                continue
            if logf:
                logf.write(line + "\n")
                logf.flush()
            # Echo before publishing, so whoever waits on this line prints after it.
            if self.echo and not any(n in line for n in _NOISE):
                print(line, flush=True)
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        if logf:
            logf.close()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, text, timeout):
        """Wait until a console line contains `text`, a string or a compiled regular expression;
        the line. SimError on timeout or exit."""
        deadline = time.monotonic() + timeout
        match = text.search if hasattr(text, "search") else (lambda line: text in line)
        with self._cond:
            while True:
                for line in self.lines:
                    if match(line):
                        return line
                if self.proc.poll() is not None:
                    raise SimError(f"simulation exited (code {self.proc.returncode}) before printing {text!r}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SimError(f"simulation did not print {text!r} within {timeout:g} s")
                self._cond.wait(min(left, 0.5))

    def ns_run(self, cmd, **kwargs):
        """Run a command inside the simulation's namespace."""
        return subprocess.run(["ip", "netns", "exec", self.netns, *cmd], **kwargs)

    def ns_popen(self, cmd, **kwargs):
        """Start a command inside the simulation's namespace."""
        return subprocess.Popen(["ip", "netns", "exec", self.netns, *cmd], **kwargs)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        if self._ns_created:
            subprocess.run(["ip", "netns", "del", self.netns], check=False)
            self._ns_created = False
