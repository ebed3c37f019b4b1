"""bench/recvrate.py --line-rate, run as docs/results.md runs it, for a second on the veth pair it
makes (two namespaces of its own): one row per payload with its verdict and the kernel's drop
counters, which path_drops() reads from the receiving namespace and both veth ends."""

import subprocess
import sys

import pytest

from conftest import REPO, requires_root

pytestmark = [requires_root, pytest.mark.network]


def test_path_drops_reads_the_kernels_udp_counters():
    from bench.recvrate import path_drops
    drops = path_drops()
    assert set(drops) == {"rcvbuf", "udp_in_errors"} and all(isinstance(v, int) and v >= 0 for v in drops.values())


def test_line_rate_quick_run_prints_a_row_per_payload_with_the_drop_counters():
    r = subprocess.run([sys.executable, "bench/recvrate.py", "--line-rate", "1", "--payloads", "1472,8972",
                        "--seconds", "1", "--max-others", "100", "--retries", "0", "--max-wait", "0", "--markdown"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert "kernel drop counters" in head and head[-1] == "verdict", head
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [row[0] for row in rows] == ["1472", "8972"]
    assert [row[1] for row in rows] == ["81,274", "13,830"]   # 1 Gb/s: payload/(payload + 66) of 125 MB/s.
    for row in rows:
        assert row[-1] in ("held", "lost datagrams", "sender short of the rate"), row
        lost, counters = int(row[4].replace(",", "")), row[-2]
        assert lost >= 0 and (counters == "none" or all(" " in c for c in counters.split(", "))), row
