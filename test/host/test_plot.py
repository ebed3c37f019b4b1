"""`ethdaq plot` (ethdaq.host.plot): what is drawn for crafted run files (rates per bin, timestamp
spacing without late datagrams or run changes, the excerpt), a valid PNG, and one-line errors
with exit status 2 for each bad input."""

import argparse
import struct
import subprocess
import sys

import h5py
import numpy as np
import pytest

from ethdaq.host import plot
from ethdaq.host.h5file import Writer, open_run
from ethdaq.wire.daqformat import FLAG_OVERFLOW
from test_h5file import S16, S24, batch, datagram

MS = 1_000_000
NAME16, NAME24 = "192.168.1.50_5001_s1", "10.0.0.2_6000_s0"


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert data[-12:] == b"\x00\x00\x00\x00IEND\xaeB`\x82"  # Complete, not cut short.
    return struct.unpack(">II", data[16:24])


def traffic():
    """S16: seq 0..9 every 1 ms, seq 3 late (after 5), then seq 0 of the next run; S24 every 2 ms."""
    order = [0, 1, 2, 4, 5, 3, 6, 7, 8, 9]
    d = [datagram(S16, s, 100, rx=i * MS, late=int(s == 3), flags=FLAG_OVERFLOW if s == 6 else 0,
                  dropped=40 if s >= 6 else 0) for i, s in enumerate(order)]
    d.append(datagram(S16, 0, 100, rx=9 * MS + 1, run=4, dropped=5))
    d += [datagram(S24, s, 10, rx=2 * s * MS) for s in range(5)]
    return d


@pytest.fixture
def run_file(tmp_path):
    with Writer(tmp_path / "run.h5") as w:
        w.write(batch(traffic()))
    return tmp_path / "run.h5"


def test_plot_draws_rates_spacing_and_excerpt_into_a_png(run_file, tmp_path, capsys):
    assert plot.main([str(run_file), "-o", str(tmp_path / "out.png"), "--bin", "0.002", "--excerpt", "150"]) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'out.png'} (2 streams)\n"
    assert png_size(tmp_path / "out.png") == (2000, 660)  # 20 x (2 x 3 + 0.6) inches at 100 dpi.
    data = plot.plot_run(run_file, tmp_path / "out.png", excerpt=150, bin_s=0.002)
    assert list(data) == [NAME24, NAME16]
    a, b = data[NAME16], data[NAME24]
    # Bins of 2 ms from the first datagram; S16 has 200 sample bytes per datagram, two per bin
    # (three in the last: the next run's first datagram came at 9 ms too).
    assert a.bin_s == b.bin_s == 0.002
    assert a.rate_mib_s * 0.002 * 2**20 == pytest.approx([400, 400, 400, 400, 600])
    assert b.rate_mib_s * 0.002 * 2**20 == pytest.approx([30, 30, 30, 30, 30])
    # In-order datagrams 0,1,2,4,5,6..9: the gap late seq 3 filled is one double spacing; the
    # change to run 4 is no spacing at all.
    assert a.spacing_step == 1
    assert a.spacing_min_ns.tolist() == a.spacing_max_ns.tolist() == [1000, 1000, 2000, 1000, 1000, 1000, 1000, 1000]
    assert b.spacing_min_ns.tolist() == [1000] * 4
    assert (a.late, a.overflows, a.dropped, b.late, b.dropped) == (1, 1, 45, 0, 0)
    with open_run(run_file) as run:
        assert a.excerpt.tolist() == run.samples(NAME16)[:150].tolist()
        assert b.excerpt.tolist() == run.samples(NAME24).tolist()  # Only 50: all of them.
        assert len(a.excerpt) == 150 and len(b.excerpt) == 50


def test_long_runs_are_read_in_blocks_and_drawn_as_min_max_bands(run_file, tmp_path, monkeypatch):
    monkeypatch.setattr(plot, "BLOCK", 3)        # Carry across blocks: spacing and rates.
    monkeypatch.setattr(plot, "MAX_POINTS", 4)   # 11 datagrams -> groups of 3.
    data = plot.plot_run(run_file, tmp_path / "out.png", bin_s=0.002, streams=[NAME16])
    a = data[NAME16]
    assert list(data) == [NAME16]
    assert a.rate_mib_s * 0.002 * 2**20 == pytest.approx([400, 400, 400, 400, 600])
    assert a.spacing_step == 3
    assert a.spacing_min_ns.tolist() == [1000, 1000, 1000]
    assert a.spacing_max_ns.tolist() == [2000, 1000, 1000]
    assert png_size(tmp_path / "out.png") == (2000, 360)


def test_default_output_is_beside_the_run_file_and_default_bins_are_1_2_5_steps(run_file):
    assert plot.main([str(run_file)]) == 0
    assert png_size(run_file.with_suffix(".png"))[0] == 2000
    assert [plot.bin_width_ns(d) for d in (0, 9 * MS, 150 * MS, 250 * MS, 3 * 10**9, 10**12)] == [
        MS, MS, 2 * MS, 5 * MS, 50 * MS, 10**10]


def test_the_ethdaq_cli_registers_the_subcommand_in_two_lines(run_file, tmp_path):
    parser = argparse.ArgumentParser(prog="ethdaq")
    sub = parser.add_subparsers()
    p = sub.add_parser("plot")
    plot.add_arguments(p)
    p.set_defaults(func=plot.run)
    args = parser.parse_args(["plot", str(run_file), "-o", str(tmp_path / "x.png"), "--stream", NAME24])
    assert args.func(args) == 0
    assert png_size(tmp_path / "x.png") == (2000, 360)


def test_importing_the_module_loads_no_plotting_or_hdf5_library():
    code = "import sys, ethdaq.host.plot; print(sorted(m for m in ('matplotlib', 'h5py', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"


def test_errors_are_one_line_with_exit_status_2(run_file, tmp_path, capsys):
    d = tmp_path
    (d / "text.h5").write_text("not hdf5\n")
    with h5py.File(d / "plain.h5", "w"):
        pass
    with Writer(d / "empty.h5"):
        pass
    (d / "outdir").mkdir()
    cases = [
        ([f"{d}/missing.h5"], f"cannot open {d}/missing.h5: No such file or directory"),
        ([f"{d}/text.h5"], f"{d}/text.h5 is not an ethdaq run file (not HDF5)"),
        ([f"{d}/plain.h5"], f"{d}/plain.h5 is not an ethdaq run file (no format attribute)"),
        ([f"{d}/empty.h5"], f"{d}/empty.h5 holds no datagrams (empty run)"),
        ([str(run_file), "-o", f"{d}/nodir/x.png"], f"cannot write {d}/nodir/x.png: No such file or directory"),
        ([str(run_file), "-o", f"{d}/outdir"], f"cannot write {d}/outdir: Is a directory"),
        ([str(run_file), "--stream", "nope"], f"{run_file} has no stream 'nope' (streams: {NAME24}, {NAME16})"),
        ([str(run_file), "--excerpt", "-5"], "argument --excerpt: excerpt must be 0 or a positive integer, not '-5' (see 'ethdaq plot --help')"),
        ([str(run_file), "--bin", "0"], "argument --bin: bin must be a positive number, not '0' (see 'ethdaq plot --help')"),
        ([], "the following arguments are required: run (see 'ethdaq plot --help')"),
    ]
    for argv, message in cases:
        try:
            rc = plot.main(argv)
        except SystemExit as e:  # argparse's usage errors.
            rc = e.code
        out, err = capsys.readouterr()
        assert (rc, err, out) == (2, f"Error: {message}\n", ""), argv
    assert sorted(p.name for p in d.iterdir() if p.suffix == ".png") == []


def test_an_output_error_while_saving_is_one_line_too(run_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plot, "_check_output", lambda out: None)  # Let savefig meet the error.
    assert plot.main([str(run_file), "-o", f"{tmp_path}/nodir/x.png"]) == 2
    assert capsys.readouterr() == ("", f"Error: cannot write {tmp_path}/nodir/x.png: No such file or directory\n")


def _write_stream(path, samples, per_datagram, spacing_ns, bits=16, key=S16, timestamps=None):
    """A run file of one stream: `samples` cut into datagrams of per_datagram, the board's
    timestamps spacing_ns apart (or `timestamps`), as the live receiver would hand them over."""
    n = len(samples) // per_datagram
    d = []
    for s in range(n):
        rec, _, _ = datagram(key, s, per_datagram, bits=bits, rx=s * spacing_ns)
        rec["timestamp"] = s * spacing_ns if timestamps is None else timestamps[s]
        part = samples[s * per_datagram:(s + 1) * per_datagram]
        d.append((rec, b"".join(int(v).to_bytes(bits // 8, "big") for v in part), list(part)))
    with Writer(path) as w:
        w.write(batch(d))


def _labels(fig):
    return [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes]


def test_pulse_data_gets_a_pulse_height_histogram_and_stems_on_a_time_axis_in_seconds(tmp_path):
    # The emulator's pulse mode (its bit-exact model): each sample a pulse height, uniform over
    # the 16-bit range.
    from emulator_model import model
    heights = np.array(model(int(0.05 * 2**32), 90_000, seed=7)[:40 * 100])
    assert len(heights) == 40 * 100
    _write_stream(tmp_path / "pulses.h5", heights, 100, 2 * MS)
    fig, data = plot.figure(tmp_path / "pulses.h5")
    d = data[NAME16]
    assert d.pulses and len(d.excerpt) == plot.PULSE_EXCERPT
    assert _labels(fig) == [("time since first datagram (s)", "MiB/s"),
                            ("datagram (received in order)", "timestamp spacing (ns)"),
                            ("board time since the first sample (s)", "pulse height"),
                            ("pulse height (raw 16-bit value)", "count")]
    ax_wave, ax_hist = fig.axes[2], fig.axes[3]
    assert ax_wave.get_title() == f"first {plot.PULSE_EXCERPT} pulses"
    # Stems, one per pulse, not a line through 2000 random heights (a solid block).
    assert [len(c.get_segments()) for c in ax_wave.collections] == [plot.PULSE_EXCERPT]
    assert all(len(line.get_xdata()) == plot.PULSE_EXCERPT for line in ax_wave.lines)
    assert all(line.get_linestyle() == "None" for line in ax_wave.lines)
    # 100 pulses per datagram, 2 ms apart: pulse i at i x 20 us, in seconds.
    assert d.excerpt_t_s == pytest.approx(np.arange(plot.PULSE_EXCERPT) * 20e-6)
    assert ax_wave.get_xlim()[1] == pytest.approx(d.excerpt_t_s[-1], rel=0.1)
    # Every pulse counted once, in bars that hold exactly the heights np.histogram puts there.
    assert d.hist_counts.sum() == len(heights) and len(d.hist_counts) <= plot.HIST_BARS
    assert d.hist_counts.tolist() == np.histogram(heights, bins=d.hist_edges)[0].tolist()
    assert ax_hist.get_title() == f"pulse heights: all {len(heights)} samples"
    assert len(ax_hist.patches) == 1  # The histogram's bars (one stairs patch).


def test_a_narrow_pulse_spectrum_is_drawn_over_the_heights_present_at_full_resolution(tmp_path):
    heights = np.random.default_rng(3).normal(1500, 20, 50 * 64).astype(np.int64).clip(0, 2**16 - 1)
    _write_stream(tmp_path / "peak.h5", heights, 64, MS)
    _, data = plot.figure(tmp_path / "peak.h5")
    d = data[NAME16]
    assert d.pulses
    # 16-bit values counted in bins of 16 (2**12 bins over the range): bars of 16 values
    # (about 170 values present: 11 bars of 16 fit in 128), from the bin of the lowest height.
    assert np.diff(d.hist_edges).tolist() == [16] * len(d.hist_counts)
    assert d.hist_edges[0] <= heights.min() < d.hist_edges[0] + 16 and d.hist_edges[-1] > heights.max()
    assert d.hist_counts.tolist() == np.histogram(heights, bins=d.hist_edges)[0].tolist()


def test_a_counter_is_a_waveform_and_kind_overrides_the_guess(tmp_path):
    counter = np.arange(30 * 100) % 2**16
    _write_stream(tmp_path / "counter.h5", counter, 100, MS)
    fig, data = plot.figure(tmp_path / "counter.h5", excerpt=500)
    d = data[NAME16]
    assert not d.pulses and len(d.excerpt) == 500
    assert _labels(fig)[2:] == [("board time since the first sample (s)", "value"),
                                ("sample value (raw 16-bit value)", "count")]
    assert fig.axes[2].get_title() == "first 500 samples" and not fig.axes[2].collections
    (line,) = fig.axes[2].lines
    assert line.get_ydata().tolist() == counter[:500].tolist()
    assert line.get_xdata() == pytest.approx(np.arange(500) * 10e-6)  # 100 samples per ms.
    assert fig.axes[3].get_title() == "sample values: all 3000 samples"
    _, data = plot.figure(tmp_path / "counter.h5", kind="pulses")
    assert data[NAME16].pulses and len(data[NAME16].excerpt) == plot.PULSE_EXCERPT
    assert plot.main([str(tmp_path / "counter.h5"), "--kind", "pulses", "-o", str(tmp_path / "c.png")]) == 0
    assert png_size(tmp_path / "c.png") == (2000, 360)
    with pytest.raises(plot.PlotError, match="kind must be one of auto, waveform, pulses, not 'x'"):
        plot.figure(tmp_path / "counter.h5", kind="x")


def test_sample_times_follow_the_boards_timestamps_across_uneven_datagrams_and_a_run_change(tmp_path):
    # Datagrams of 10 samples at 0, 1 ms, 3 ms; then the board restarts its clock (smaller timestamp).
    values = np.arange(40) * 7 % 2**16
    _write_stream(tmp_path / "t.h5", values, 10, MS, timestamps=[0, MS, 3 * MS, MS // 2])
    _, data = plot.figure(tmp_path / "t.h5", kind="waveform")
    t = data[NAME16].excerpt_t_s
    assert t[:10] == pytest.approx(np.arange(10) * 1e-4)
    assert t[10:20] == pytest.approx(1e-3 + np.arange(10) * 2e-4)
    # The datagram before the step back: its samples share its time; after: its own time.
    assert t[20:30] == pytest.approx([3e-3] * 10)
    assert t[30:] == pytest.approx([0.5e-3] * 10)


def test_datagrams_without_samples_before_the_data_do_not_cut_the_excerpt_short(tmp_path):
    d = []
    for s in range(20):  # Empty datagrams (nothing to send), then two of 5 samples, 1 ms apart.
        rec, _, _ = datagram(S16, s, 0, rx=s)
        d.append((rec, b"", []))
    for s, ts in ((20, 30 * MS), (21, 31 * MS)):
        rec, raw, values = datagram(S16, s, 5, rx=s)
        rec["timestamp"] = ts
        d.append((rec, raw, values))
    with Writer(tmp_path / "sparse.h5") as w:
        w.write(batch(d))
    _, data = plot.figure(tmp_path / "sparse.h5", excerpt=10, kind="waveform")
    assert len(data[NAME16].excerpt) == 10
    assert data[NAME16].excerpt_t_s == pytest.approx(np.arange(10) * 2e-4)
