"""bench/latency.py's arithmetic, on readings written here (the bench itself runs the simulated
board for minutes: docs/realtime.md has its table): mean and 3 sigma from count, sum and sum of
squares; the read request's own share taken off the mailbox classes; the control answers of
every phase added up; the seed paper's figures beside ours."""

import statistics

from bench.latency import PAPER, ROWS, SIZES, stats_us, table


def reading(lats):
    return dict(count=len(lats), sum=sum(lats), sumsq=sum(l * l for l in lats),
                min=min(lats, default=0xFFFF), max=max(lats, default=0))


def test_mean_and_three_sigma_come_from_the_sums_exactly():
    lats = [3, 3, 4, 10, 3]
    n, mean, three_sigma = stats_us(reading(lats), 8.0)
    assert n == 5
    assert abs(mean - statistics.mean(lats) * 8 / 1000) < 1e-12
    assert abs(three_sigma - 3 * statistics.pstdev(lats) * 8 / 1000) < 1e-12
    assert stats_us(reading([]), 8.0) is None


def test_the_table_takes_the_read_requests_share_off_and_adds_up_the_answers():
    ft, udp, cpu, read_udp, read_cpu = [3] * 4, [63] * 4, [200, 400, 300, 100], [63], [5000]
    bulk, answers = [5, 5, 6], [[27, 28], [30], [27]]
    res, k = {}, 0
    for size in SIZES:
        res[f"rx_fasttrack_{size}"] = {"first": {"rx_fasttrack": reading(ft), "tx_cpu": reading(answers[0])},
                                       "read": {"rx_fasttrack": reading([])}}
        # The first read counts its own request at the mailbox; the second read says how much.
        res[f"rx_mailbox_{size}"] = {"first": {"rx_udp": reading(udp + read_udp), "rx_cpu": reading(cpu + read_cpu),
                                               "tx_cpu": reading(answers[1])},
                                     "read": {"rx_udp": reading(read_udp), "rx_cpu": reading(read_cpu)}}
        res[f"tx_bulk_{size}"] = {"first": {"tx_bulk": reading(bulk), "tx_cpu": reading(answers[2])}, "received": 3}
        k += 1
    res["port_rx_dropped"] = 0
    rows = table(res, 8.0)
    assert len(rows) == len(ROWS) * len(SIZES)
    by = {(r[1], r[2]): r for r in rows}
    assert by[("fast-track (hardware sink)", "64 B")][3:6] == ["4", "0.024", "0.000"]
    assert by[("hardware UDP port", "256 B")][3:6] == ["4", "0.504", "0.000"]
    cpu_row = by[("CPU (firmware sees it)", "1024 B")]
    assert cpu_row[3] == "4" and cpu_row[4] == f"{statistics.mean(cpu) * 8 / 1000:.3f}"
    assert cpu_row[5] == f"{3 * statistics.pstdev(cpu) * 8 / 1000:.3f}"
    # The control answers of every phase, in the first size's row only.
    all_answers = [a for _ in SIZES for group in answers for a in group]
    tx_cpu = by[("CPU (control answer)", "64 B")]
    assert tx_cpu[3] == str(len(all_answers)) and tx_cpu[4] == f"{statistics.mean(all_answers) * 8 / 1000:.3f}"
    assert by[("CPU (control answer)", "256 B")][3] == "-"
    # The paper's figures beside ours, and the ratio.
    assert by[("hardware UDP port", "64 B")][6:8] == [f"{PAPER['rx_pbuf'][64][0]:.2f}", f"{PAPER['rx_pbuf'][64][1]:.2f}"]
    assert by[("fast-track (hardware sink)", "64 B")][8] == "63x" and by[("fast-track (hardware sink)", "1024 B")][8] == "322x"
