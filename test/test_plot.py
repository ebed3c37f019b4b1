"""`ethdaq plot` (ethdaq.host.plot): what is drawn for crafted run files (rates per bin, timestamp
spacing without late datagrams or run changes, the excerpt), a valid PNG, and one-line errors
with exit status 2 for each bad input."""

import argparse
import struct
import subprocess
import sys

import h5py
import pytest

from ethdaq.host import plot
from ethdaq.host.daqformat import FLAG_OVERFLOW
from ethdaq.host.h5file import Writer, open_run
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
    assert png_size(tmp_path / "out.png") == (1500, 660)  # 15 x (2 x 3 + 0.6) inches at 100 dpi.
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
    assert png_size(tmp_path / "out.png") == (1500, 360)


def test_default_output_is_beside_the_run_file_and_default_bins_are_1_2_5_steps(run_file):
    assert plot.main([str(run_file)]) == 0
    assert png_size(run_file.with_suffix(".png"))[0] == 1500
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
    assert png_size(tmp_path / "x.png") == (1500, 360)


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
        ([str(run_file), "--excerpt", "-5"], "argument --excerpt: excerpt must be an integer >= 0, not '-5' (see 'ethdaq plot --help')"),
        ([str(run_file), "--bin", "0"], "argument --bin: bin must be a number of seconds > 0, not '0' (see 'ethdaq plot --help')"),
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
