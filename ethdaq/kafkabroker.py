#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""A real Apache Kafka broker on loopback, for tests and for trying `ethdaq recv --kafka` on one PC.

Kafka's jars come from Maven Central, pinned and checked against ethdaq/kafka-jars.lock, into
.cache/kafka/ in the repository (ignored by git; ETHDAQ_KAFKA_CACHE moves it). `make kafka` fetches
them once; a run with every jar present and intact downloads nothing. Java is Debian's
openjdk-17-jre-headless (the Makefile's DEBS).

    with KafkaBroker() as broker:            # a single-node KRaft broker+controller, free ports
        print(broker.bootstrap)              # '127.0.0.1:PORT' for bootstrap.servers
        broker.stop(); broker.start()        # the same broker again: same ports, same data

or from a shell:

    python -m ethdaq.kafkabroker fetch       # what `make kafka` runs
    python -m ethdaq.kafkabroker run         # a broker until Ctrl-C; prints its address
"""

import argparse
import base64
import hashlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

LOCK = Path(__file__).resolve().parent / "kafka-jars.lock"
CACHE = Path(os.environ.get("ETHDAQ_KAFKA_CACHE", Path(__file__).resolve().parents[1] / ".cache" / "kafka"))
CENTRAL = "https://repo1.maven.org/maven2"
READY_TIMEOUT_S = 120.0   # A cold JVM on a busy 2-core machine; about 25 s when idle.
STOP_TIMEOUT_S = 30.0     # Controlled shutdown after SIGTERM, then SIGKILL.
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


class BrokerError(Exception):
    """A broker that cannot be fetched, started or reached, as one line."""


# Jars ------------------------------------------------------------------------------------------

def locked_jars(lock=LOCK):
    """[(group, artifact, version, sha256)] from the lock file."""
    jars = []
    for n, line in enumerate(Path(lock).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            coords, sha = line.split()
            group, artifact, version = coords.split(":")
        except ValueError:
            raise BrokerError(f"{lock}:{n}: expected 'group:artifact:version sha256', not {line!r}") from None
        jars.append((group, artifact, version, sha.lower()))
    return jars


def kafka_version(lock=LOCK):
    return next(v for g, a, v, _ in locked_jars(lock) if a.startswith("kafka_"))


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _jar_name(artifact, version):
    return f"{artifact}-{version}.jar"


def fetch(cache=CACHE, lock=LOCK, out=sys.stderr, base=CENTRAL):
    """Download every locked jar that is missing or damaged into `cache`, checking its sha256.
    Returns how many were downloaded (0 when everything is present)."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    fetched = 0
    for group, artifact, version, sha in locked_jars(lock):
        path = cache / _jar_name(artifact, version)
        if path.exists() and _sha256(path) == sha:
            continue
        url = f"{base}/{group.replace('.', '/')}/{artifact}/{version}/{path.name}"
        out.write(f"fetching {url}\n")
        part = path.with_suffix(".part")
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(part, "wb") as f:
                shutil.copyfileobj(r, f)
        except (urllib.error.URLError, OSError) as e:
            part.unlink(missing_ok=True)
            raise BrokerError(f"cannot fetch {url}: {getattr(e, 'reason', e)}") from None
        got = _sha256(part)
        if got != sha:
            part.unlink()
            raise BrokerError(f"{path.name}: sha256 {got} does not match {sha} in {lock}")
        part.replace(path)
        fetched += 1
    return fetched


def classpath(cache=CACHE, lock=LOCK):
    """The broker's class path; a BrokerError naming `make kafka` when a jar is missing."""
    paths = [Path(cache) / _jar_name(a, v) for _, a, v, _ in locked_jars(lock)]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        raise BrokerError(f"Apache Kafka is not installed ({len(missing)} of {len(paths)} jars missing in {cache}, "
                          f"e.g. {missing[0]}): run `make kafka`")
    return os.pathsep.join(str(p) for p in paths)


def java():
    path = shutil.which("java")
    if path is None:
        raise BrokerError("Java is not installed: apt-get install openjdk-17-jre-headless (or `make deps`)")
    return path


# The broker ------------------------------------------------------------------------------------

def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _properties(port, controller_port, logs):
    return f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={logs}
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
"""


_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
"""


def ping(bootstrap, timeout=5.0):
    """True when a broker at `bootstrap` answers a metadata request within `timeout` seconds."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    quiet = logging.getLogger("ethdaq.kafkabroker.ping")   # Refused connections are the answer here.
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 2000,
                         "logger": quiet})
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return bool(md.brokers)


def _die_with_parent():
    """In the broker's process before exec: SIGTERM when the Python process that started it dies,
    so that a test run killed from outside leaves no broker behind (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


class KafkaBroker:
    """A single-node Kafka (KRaft, broker and controller in one JVM) on 127.0.0.1, its data in a
    temporary directory removed on close. start() formats the storage on first use and returns
    once the broker answers a metadata request; stop() shuts it down (SIGTERM, then SIGKILL)."""

    def __init__(self, cache=CACHE, workdir=None, ready_timeout=READY_TIMEOUT_S, netns=None):
        # netns: run the broker on that network namespace's loopback (`ip netns exec`), for
        # clients that run there too, such as receivers of a simulated board's tap.
        self.netns = netns
        self._classpath = classpath(cache)
        self._java = java()
        self._own_dir = workdir is None
        self.dir = Path(tempfile.mkdtemp(prefix="ethdaq-kafka-") if workdir is None else workdir)
        self.port = free_port()
        self.controller_port = free_port()
        self.ready_timeout = ready_timeout
        self.proc = None
        self._formatted = False
        self.properties = self.dir / "server.properties"
        self.properties.write_text(_properties(self.port, self.controller_port, self.dir / "data"))
        (self.dir / "log4j2.properties").write_text(_LOG4J.format(path=self.dir / "server.log"))

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def _java_cmd(self, main, *args):
        netns = ["ip", "netns", "exec", self.netns] if self.netns else []
        return [*netns, self._java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                "-cp", self._classpath, main, *args]

    def _format(self):
        # Kafka's form of a cluster id; it may begin with '-', hence --cluster-id=ID below.
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        r = subprocess.run(self._java_cmd("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                                          "-c", str(self.properties)),
                           capture_output=True, text=True, timeout=self.ready_timeout)
        if r.returncode != 0:
            last = (r.stderr.strip() or r.stdout.strip() or "no output").splitlines()[-1]
            raise BrokerError(f"formatting Kafka's storage in {self.dir} failed: {last}")
        self._formatted = True

    def start(self):
        if self.proc is not None:
            return self
        if not self._formatted:
            self._format()
        out = open(self.dir / "stdout.log", "ab")
        self.proc = subprocess.Popen(self._java_cmd("kafka.Kafka", str(self.properties)), stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                     preexec_fn=_die_with_parent)
        out.close()
        deadline = time.monotonic() + self.ready_timeout
        try:
            while not self._answers():
                if self.proc.poll() is not None:
                    raise BrokerError(f"the Kafka broker exited with status {self.proc.returncode} while starting "
                                      f"(see {self.dir / 'server.log'})")
                if time.monotonic() > deadline:
                    raise BrokerError(f"the Kafka broker did not answer on {self.bootstrap} within "
                                      f"{self.ready_timeout:g} s (see {self.dir / 'server.log'})")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise
        return self

    def _answers(self):
        if self.netns is None:
            return ping(self.bootstrap, timeout=2.0)
        code = "import sys; from ethdaq.kafkabroker import ping; sys.exit(0 if ping(sys.argv[1], 2.0) else 1)"
        return subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c", code, self.bootstrap],
                              capture_output=True).returncode == 0

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self):
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc):
        self.close()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ethdaq.kafkabroker", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help=f"download Apache Kafka's jars into {CACHE} (once) and check them")
    sub.add_parser("run", help="run a single-node broker on 127.0.0.1 until Ctrl-C")
    args = p.parse_args(argv)
    try:
        if args.command == "fetch":
            n = fetch()
            print(f"Apache Kafka {kafka_version()}: {len(locked_jars())} jars in {CACHE}" +
                  (f" ({n} downloaded)" if n else ", all present"))
            return 0
        signal.signal(signal.SIGTERM, signal.default_int_handler)   # SIGTERM stops it like Ctrl-C.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with KafkaBroker() as broker:
            print(f"Kafka {kafka_version()} broker on {broker.bootstrap} (data in {broker.dir}); Ctrl-C stops",
                  flush=True)
            try:
                broker.proc.wait()
            except KeyboardInterrupt:
                pass
        return 0
    except BrokerError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
