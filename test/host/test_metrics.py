"""`ethdaq recv --metrics`: the receiver's counters on an HTTP port, scraped by a real Prometheus
server (Debian's, started here on loopback) and read back through its query API; the values must
be the run summary's (run.json), stream by stream, with losses, duplicates and malformed
datagrams among them."""

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from conftest import REPO, ethdaq_cmd
from kafka_helpers import Board, datagram, start_recv

PROMETHEUS = shutil.which("prometheus")


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


@pytest.fixture
def prometheus(tmp_path):
    """A Prometheus server on loopback scraping 127.0.0.1:<target port> every second: (its URL,
    the target port)."""
    if PROMETHEUS is None:
        pytest.fail("Debian's prometheus is not installed (make test installs it)", pytrace=False)
    target, port = free_tcp_port(), free_tcp_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                   f"  - job_name: ethdaq\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n")
    p = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                          f"--web.listen-address=127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if "Ready" in get(url + "/-/ready"):
                    break
            except OSError:
                pass
            assert p.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "Prometheus did not get ready within 60 s"
            time.sleep(0.2)
        yield url, target
    finally:
        p.terminate()
        p.wait(timeout=30)


def query(url, expr):
    """{labels tuple: value} of an instant query."""
    r = json.loads(get(url + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
    assert r["status"] == "success", r
    return {tuple(sorted((k, v) for k, v in m["metric"].items() if k not in ("job", "instance", "__name__"))):
            float(m["value"][1]) for m in r["data"]["result"]}


def test_a_prometheus_server_reads_the_run_summarys_counters(prometheus, tmp_path):
    url, target = prometheus
    out = tmp_path / "run.h5"
    rx, port = start_recv(tmp_path, "--metrics", f"127.0.0.1:{target}", "-o", str(out), "--duration", "30")
    try:
        board = Board("127.0.0.3", port, streams=(0, 1))
        board.send(50)
        board.next[1] += 7                 # 7 datagrams of stream 1 never sent: missing
        board.send(40)
        board.sock.sendto(datagram(0, 10), ("127.0.0.1", port))        # a duplicate
        board.sock.sendto(b"\x00" * 5, ("127.0.0.1", port))            # malformed: too short
        # Scraped while running, after everything arrived (the newest snapshot is at most a
        # display tick old).
        deadline = time.monotonic() + 20
        while not query(url, 'ethdaq_recv_socket_datagrams_total') or \
                max(query(url, 'ethdaq_recv_socket_datagrams_total').values()) < 182:
            assert time.monotonic() < deadline, query(url, "up")
            time.sleep(0.5)
        assert query(url, "ethdaq_recv_running") == {(): 1.0}
    finally:
        rx.terminate()
        rx.communicate(timeout=60)
    summary = json.loads(out.with_suffix(".json").read_text())
    streams = summary["streams"]
    # The newest value of each series (a query after the receiver ended sees its last scrape).
    last = lambda metric: query(url, f"max_over_time({metric}[10m])")  # noqa: E731
    for metric, field in (("datagrams", "datagrams"), ("samples", "samples"), ("missing_datagrams", "missing"),
                          ("duplicate_datagrams", "duplicates"), ("board_dropped_samples", "board_dropped")):
        got = {dict(k)["stream"]: v for k, v in last(f"ethdaq_recv_{metric}_total").items()}
        assert got == {name: float(s[field]) for name, s in streams.items()}, (metric, got)
    by_stream = {dict(k)["stream"]: v for k, v in last("ethdaq_recv_datagrams_total").items()}
    assert sorted(by_stream.values()) == [90.0, 90.0]
    assert {dict(k)["stream"]: v for k, v in last("ethdaq_recv_missing_datagrams_total").items()} \
        == {n: (7.0 if n.endswith("_s1") else 0.0) for n in by_stream}
    assert last("ethdaq_recv_socket_datagrams_total") == {(): float(summary["datagrams"])} == {(): 182.0}
    assert last("ethdaq_recv_malformed_datagrams_total") == {(("reason", r),): float(n)
                                                             for r, n in summary["malformed_by_reason"].items()}
    assert summary["malformed"] == 1


def test_a_port_that_cannot_be_served_is_one_line_before_the_run(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run(ethdaq_cmd("recv", "--port", "0", "--bind", "127.0.0.1", "--metrics", f"127.0.0.1:{port}",
                                      "-o", str(tmp_path / "x.h5"), "--duration", "1"),
                           capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in r.stderr
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize("bad", ["99999", "host:", "127.0.0.1:0"])
def test_a_bad_metrics_address_is_a_usage_error(bad):
    r = subprocess.run(ethdaq_cmd("recv", "--metrics", bad), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--metrics" in r.stderr and "Traceback" not in r.stderr, r.stderr


def exported_names():
    """Every sample name the two collectors give, fed with one stream, one board, every field."""
    from types import SimpleNamespace
    from ethdaq.host import boardmetrics, metrics
    recv = metrics.RecvMetrics()
    stream = {field: 1 for _, field, _ in metrics.STREAM_COUNTERS}
    stats = SimpleNamespace(streams={(0x7f000001, 5001, 0): stream}, datagrams=1, bytes=1, malformed={"short": 1},
                            kernel_dropped=0)
    pub = SimpleNamespace(totals=lambda: {"published": 1, "queue_full": 0, "buffer_full": 0, "failed": 0})
    recv.update(stats, pub)
    board = boardmetrics.BoardMetrics(["b"])
    status = {k: 1 for k in ("running", "run", "datagrams", "dropped", "boots", "uptime_ms", "link_speed",
                             *boardmetrics.STATUS_COUNTERS)}
    ptp = {"state": "SLAVE", "offset_ns": 1, "delay_ns": 1, "freq_ppb": 0.0,
           **{k: 0 for k in boardmetrics.PTP_COUNTERS}}
    board.record("b", "ok", dict(info={"mac": "x"}, status=status, link_up=True, streams=[(0, 1, 1, 0)], ptp=ptp,
                                 rx={"rx_ok": 1}))
    return {s.name for c in (recv, board) for fam in c.collect() for s in fam.samples}


def test_the_grafana_dashboards_queries_run_on_prometheus_and_name_our_metrics(prometheus):
    """docs/grafana/ethdaq.json (not tried in Grafana here: no Debian package): every panel's
    query is PromQL the Prometheus server accepts, over metrics the collectors export."""
    import re
    url, _ = prometheus
    dashboard = json.loads((REPO / "docs" / "grafana" / "ethdaq.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15
    names = exported_names()
    for expr in exprs:
        query(url, expr)      # asserts status "success": Prometheus parsed and ran it
        for name in re.findall(r"\bethdaq_\w+", expr):
            assert name in names, (name, expr)
