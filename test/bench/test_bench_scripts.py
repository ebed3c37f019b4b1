"""Every bench script starts as the docs run it (`.venv/bin/python bench/X.py`), from the
repository root: its module-level imports resolve and its argument parser answers --help. The
benches take minutes to hours, so CI runs none of them in full; this catches a bench broken by a
refactor at its imports (bench/ecp5_timing.py imported bench.ecp5_pnr inside a function, where
it failed when run as a script: 658184a to this test)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The scripts (the others are modules they share).
SCRIPTS = sorted(p.name for p in (REPO / "bench").glob("*.py") if '__name__ == "__main__"' in p.read_text())


def test_the_list_is_not_empty():
    assert {"ecp5_timing.py", "ecp5_rxtiming.py", "bram_timing.py", "resources.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_bench_script_answers_help(script):
    r = subprocess.run([sys.executable, f"bench/{script}", "--help"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage" in r.stdout.lower(), r.stdout[-2000:]


def test_seeds_runs_the_builds_own_nextpnr_command_with_each_seed(tmp_path):
    """bench/seeds.py takes nextpnr's arguments from LiteX's build script and changes only the
    seed and the output files."""
    from bench.seeds import nextpnr_command, with_option
    gw = tmp_path / "gateware"
    gw.mkdir()
    (gw / "build_b.sh").write_text("set -e\nyosys -l b.rpt b.ys\nnextpnr-ecp5 --json b.json --lpf b.lpf "
                                   "--report b_report.json --25k --speed 6 --seed 1 \necppack b.config\n")
    args = nextpnr_command(gw)
    assert args[:2] == ["--json", "b.json"] and "--25k" in args
    seeded = with_option(with_option(args, "--seed", "3"), "--textcfg", "seeds/x.config")
    assert seeded[seeded.index("--seed") + 1] == "3" and seeded.count("--seed") == 1
    assert seeded[-2:] == ["--textcfg", "seeds/x.config"] and "--speed" in seeded
    (gw / "build_b.sh").write_text("vivado -mode batch\n")
    with pytest.raises(SystemExit, match="no nextpnr-ecp5 line"):
        nextpnr_command(gw)


def test_seeds_extra_nextpnr_options_replace_or_add():
    """--nextpnr "..." (bench/seeds.py) and a board's nextpnr_opts (soc/build.py) set an option the
    build already passes, add a new one, and add a flag once."""
    from ethdaq.soc.pnr import with_options
    base = ["--json", "b.json", "--seed", "1", "--speed", "6"]
    args = with_options(base, "--speed 8 --placer-heap-timingweight 40 --tmg-ripup")
    assert args[args.index("--speed") + 1] == "8" and args.count("--speed") == 1
    assert args[args.index("--placer-heap-timingweight") + 1] == "40"
    assert args.count("--tmg-ripup") == 1
    assert with_options(args, "--tmg-ripup").count("--tmg-ripup") == 1
    assert with_options(base, "") == base
    assert with_options(base, "--speed=8") == ["--json", "b.json", "--seed", "1", "--speed", "8"]
    assert with_options(base, ["--seed", "4"]).count("--seed") == 1


def test_scaleout_quick_run_publishes_every_datagram(kafka_broker):
    """bench/scaleout.py --quick against the test broker: a row per --kafka-batch, and at the
    few datagrams of a quick run, nothing lost or unpublished."""
    r = subprocess.run([sys.executable, "bench/scaleout.py", "--quick", "--rate", "2000", "--bootstrap",
                        kafka_broker.bootstrap], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split() for line in r.stdout.split("\n\n")[1].splitlines()[2:]]
    assert [row[0] for row in rows] == ["no", "1", "8", "64"], r.stdout
    for row in rows:
        assert row[-6] == "0" and float(row[-5]) > 0, r.stdout      # lost, receiver's CPU
    for row in rows[1:]:
        assert row[-2] == "0" and float(row[-3]) > 0, r.stdout      # unpublished, MiB/s
        assert float(row[-1]) > 0, r.stdout                          # the publishing process's CPU
    assert rows[0][-4:] == ["-"] * 4, r.stdout
    # ethdaq merge of each published topic: every sample the receiver published is in its file.
    merges = [line.split() for line in r.stdout.split("\n\n")[2].splitlines()[2:]]
    assert [m[0] for m in merges] == ["1", "8", "64"], r.stdout
    assert all(m[-1] == "yes" and float(m[-3]) > 0 and float(m[2].replace(",", "")) > 0 for m in merges), r.stdout
    # The largest lag, within the default 50 ms watermark: nothing was late.
    assert all(0 <= float(m[-2]) < 50 for m in merges), r.stdout


def test_scaleout_zero_loss_search_finds_the_capacity_from_below():
    """bench/scaleout.zero_loss_rate against a modelled receiver: every rate above its capacity
    loses datagrams, a short run hides a deficit of up to 3 %, and the Kafka row's publisher
    keeps pace only below its own capacity: the search returns a confirmed rate within a few %
    below the capacity, never above it, and nothing when even the lowest rate fails."""
    from bench.scaleout import held, zero_loss_rate

    def model(capacity, publisher=None, hide=0.03):
        def measure(rate, full):
            offered, seconds = rate or 2.5 * capacity, 10 if full else 2
            took = min(offered, capacity * (1 if full else 1 + hide))
            backlog = max(0, took - publisher) * seconds if publisher else 0
            return {"offered": offered, "lost": int(offered - took), "unpublished": 0, "received_per_s": took,
                    "sending_s": seconds, "drain_s": 0.15 + (backlog / publisher if publisher else 0)}
        return measure

    rate, run = zero_loss_rate(model(100_000), None, steps=5, full_steps=6)
    assert 90_000 <= rate <= 100_000 and run["lost"] == 0
    rate, run = zero_loss_rate(model(100_000, publisher=60_000), 64, steps=5, full_steps=6)
    assert 0.9 * 60_000 <= rate <= 60_000 * 1.1 and held(run, 64)
    assert zero_loss_rate(model(40), None, steps=2, full_steps=2) == (0, None)


def test_scaleout_held_needs_every_datagram_published_at_pace():
    from bench.scaleout import held
    run = {"lost": 0, "unpublished": 0, "sending_s": 10.0, "drain_s": 0.2}
    assert held(run, None) and held(run, 64)
    assert not held(dict(run, lost=1), None)
    assert held(dict(run, unpublished=5), None) and not held(dict(run, unpublished=5), 64)
    assert held(dict(run, drain_s=3.0), None) and not held(dict(run, drain_s=3.0), 64)


def test_scaleout_zero_loss_quick_run(kafka_broker):
    """bench/scaleout.py --zero-loss --quick against the test broker: a row without Kafka and one
    with. The receiver alone holds a positive rate; the Kafka row's rate may be 0 on a loaded
    machine (its 0.5 s runs then drain for longer than they may), and its share of the rate alone
    is that rate over the first row's."""
    r = subprocess.run([sys.executable, "bench/scaleout.py", "--quick", "--zero-loss", "--batches", "none,64",
                        "--bootstrap", kafka_broker.bootstrap], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split() for line in r.stdout.split("\n\n")[1].splitlines()[2:]]
    assert [row[0] for row in rows] == ["no", "64"], r.stdout
    alone, with_kafka = (float(row[i].replace(",", "")) for row, i in ((rows[0], 2), (rows[1], 1)))
    assert alone > 0 and rows[0][-1] == "-", r.stdout + r.stderr[-3000:]
    assert rows[1][-2] == "-", r.stdout                     # the broker's CPU: not this bench's broker
    assert rows[1][-1] == f"{100 * with_kafka / alone:.0f}", r.stdout


def test_recvrate_search_finds_the_receivers_capacity_or_names_the_sender(monkeypatch):
    """bench/recvrate.search (bench/ratesearch.py's search, as scaleout's) against a modelled
    receiver: below the sender's own speed it returns a held rate within a few % below the
    receiver's capacity, "receiver"; when the receiver takes all the sender sends, "sender"."""
    import types

    import bench.recvrate as rr

    def model(capacity, sender=300_000, hide=0.03):
        def quiet_measure(exe, payload, rate, seconds, args, log):
            full = seconds == args.seconds
            offered = rate or sender
            took = min(offered, capacity * (1 if full else 1 + hide))
            return {"rate": rate, "sent": offered * seconds, "received": took * seconds, "achieved": offered,
                    "seconds": seconds, "held": took >= offered}
        return quiet_measure

    args = types.SimpleNamespace(seconds=10, trial_seconds=2, steps=5, full_steps=6)
    monkeypatch.setattr(rr, "quiet_measure", model(100_000))
    m, limit = rr.search(None, 1472, args, None)
    assert limit == "receiver" and 90_000 <= m["rate"] <= 100_000 and m["held"]
    monkeypatch.setattr(rr, "quiet_measure", model(1_000_000))
    m, limit = rr.search(None, 1472, args, None)
    assert limit == "sender" and m["rate"] == 0 and m["held"]


def test_resources_attributes_every_memory_to_its_writer_and_nothing_else(tmp_path):
    """Memories named after their attribute (not storage/mem) go to the core that writes them;
    a register written a slice at a time is not a memory."""
    import bench.resources as resources
    v = tmp_path / "top.v"
    v.write_text("reg [63:0] seqs[0:3];\nreg [7:0] storage_1[0:15];\nreg [31:0] ctl_storage = 32'd0;\n"
                 "always @(posedge clk) begin\n\tif (we)\n\t\tseqs[adr] <= daqstreamer_serializer_wr_dat_w;\n"
                 "\tstorage_1[a] <= ethcore_arp_dat_w;\n\tctl_storage[7:0] <= csr_bankarray_r;\nend\n")
    writers = resources.memory_writers(v)
    assert writers == {"seqs": "daqstreamer_serializer_wr_dat_w", "storage_1": "ethcore_arp_dat_w"}
    assert resources.core_of("seqs", writers) == "streamer + emulators"
    assert resources.core_of("ctl_storage", writers) == resources.OTHER
