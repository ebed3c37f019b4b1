"""PTP accuracy against ground truth: two complete simulated boards (VexRiscv firmware, LiteEth,
timestamp unit) wired back to back with a 50-cycle cable, the slave's oscillator -100, 0 and
+100 ppm off (bench/ptp2.py, bench/verilator/tb_ptp2.cpp).

The testbench reads both PTP clocks in the same cycle every 100 us of simulated time: the true
offset. After convergence it must stay within one 125 MHz cycle (8 ns), the slave's measured
mean path delay within 8 ns of the true 400 ns, and its frequency adjustment must cancel the
modelled oscillator error."""

import re
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench import ptp2
from conftest import REPO

PPMS    = (-100, 0, 100)
SECONDS = 0.16     # simulated; the slave locks after about 0.13 s
CABLE   = 50       # cycles each way: 400 ns

pytestmark = pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not installed")


@pytest.fixture(scope="module")
def results():
    run_dir = ptp2.build(REPO / "build" / "test-ptp2")
    with ThreadPoolExecutor(len(PPMS)) as pool:
        runs = list(pool.map(lambda ppm: ptp2.run(run_dir, ppm, CABLE, SECONDS), PPMS))
    return dict(zip(PPMS, runs))


def counters(result, board="S"):
    """Counters of the board's last full status line (printed at each state change)."""
    full = [l for l in result.console if l.startswith(f"{board}: ptp: state=")]
    assert full, f"board {board} printed no full status line"
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)(?=\s|$)", full[-1])}


@pytest.mark.parametrize("ppm", PPMS)
def test_slave_converges_and_stays_within_one_cycle_of_the_master(results, ppm):
    r = results[ppm]
    assert r.converged_s is not None, (
        f"never converged: last true offsets {r.samples[-5:]}, last status {r.status[-3:]}")
    assert r.converged_s <= 0.14
    offsets, status = r.steady()
    assert len(offsets) >= 200                 # >= 20 ms of simulated time, every 100 us
    assert max(map(abs, offsets)) <= 8
    assert all(s[1] == "SLAVE" and s[2] == "LOCKED" for s in status)
    # The master stays master throughout.
    states = [l.split()[2] for l in r.console if l.startswith("M: ptp: ") and " offset=" in l and "state=" not in l]
    assert "MASTER" in states
    assert all(s == "MASTER" for s in states[states.index("MASTER"):]), states


@pytest.mark.parametrize("ppm", PPMS)
def test_measured_path_delay_is_the_cable_delay(results, ppm):
    r = results[ppm]
    _, status = r.steady()
    assert status
    assert all(abs(s[4] - CABLE * ptp2.PERIOD_NS) <= 8 for s in status), status


@pytest.mark.parametrize("ppm", PPMS)
def test_frequency_adjustment_cancels_the_oscillator_error(results, ppm):
    r = results[ppm]
    _, status = r.steady()
    # The mean over the steady state (a few status lines): each sample's proportional term
    # reacts to the 8 ns timestamp quantisation by about 400 ppb (kp 0.4 x 8 ns / 7.8 ms), so a
    # single adjustment is only good to about a ppm. 1000 ppb: 1 % of the 100 ppm corrected; the
    # rate itself is pinned much tighter by the true offset staying within 8 ns.
    mean = sum(s[5] for s in status) / len(status)
    assert abs(mean - r.expected_freq_ppb) <= 1000, (mean, r.expected_freq_ppb)


@pytest.mark.parametrize("ppm", PPMS)
def test_no_message_or_timestamp_lost(results, ppm):
    c = counters(results[ppm])
    assert c["rx_sync"] > 5 and c["rx_follow_up"] > 5 and c["rx_delay_resp"] > 3
    for name in ("tx_ts_missing", "tx_ts_unmatched", "delay_resp_missing", "rx_ts_missing",
                 "rx_ts_discarded", "hw_rx_overflows", "hw_tx_overflows", "clock_rejected", "faults",
                 "tx_errors", "port_rx_dropped", "console_dropped"):
        assert c[name] == 0, name
    assert all(v == 0 for k, v in c.items() if k.startswith("drop_") and k not in ("drop_state", "drop_not_parent")), c
