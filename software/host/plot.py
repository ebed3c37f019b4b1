#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""`ethdaq plot run.h5 -o run.png`: a run file at a glance, one row per stream:

- data rate over time: sample bytes received per time bin (host arrival time rx_time_ns), MiB/s;
- timestamp spacing: the DAQ `timestamp` difference between consecutive datagrams, in ns, over
  the datagrams received in order (late ones are left out: they would show as negative spacing;
  the gap they filled shows as one long spacing). Long runs are drawn as a min..max band;
- an excerpt on the board's time axis (seconds since its first sample; samples within a datagram
  placed evenly up to the next datagram's timestamp): a waveform, the first samples as a line;
  pulses (each sample a pulse height at a random time), the first PULSE_EXCERPT as stems;
- a histogram of all the stream's sample values: the pulse-height spectrum for pulse data.

A stream is pulse-like when consecutive samples of its excerpt differ, in the median, by more
than PULSE_JUMP of their range (random heights: about 0.3; counters, ramps and sampled waveforms:
far less); `--kind` overrides the guess.

Also `python -m ethdaq.host.plot`. The command line registers it with add_arguments() and run().
numpy, h5py and matplotlib (Agg, no display) are imported only when a plot is made, so
registering the subcommand costs nothing.
"""

import argparse
import math
import os
import sys
from pathlib import Path
from typing import NamedTuple

from ethdaq.host import argtypes

MIB             = 2**20
DEFAULT_EXCERPT = 2000       # Samples in the waveform excerpt.
PULSE_EXCERPT   = 200        # Pulses in the excerpt of pulse-like data (at most --excerpt).
PULSE_JUMP      = 0.05       # Median step over range above which a stream is pulse-like.
HIST_BITS       = 12         # The histogram is counted in 2**12 bins over the sample range...
HIST_BARS       = 128        # ... and drawn as at most this many bars over the values present.
KINDS           = ("auto", "waveform", "pulses")
BLOCK           = 2**20      # Datagram records read at a time: memory stays bounded on long runs.
MAX_POINTS      = 100_000    # Spacing points drawn per stream; beyond, min..max per group of datagrams.
MIN_BIN_NS      = 1_000_000  # Rate bins of at least 1 ms: finer ones are mostly receive batching.


class PlotError(Exception):
    pass


class StreamPlot(NamedTuple):
    """What was drawn for one stream (returned by plot_run, e.g. for tests or further use)."""
    bin_s: float           # Width of a rate bin, s; bin i starts at t0 + i * bin_s.
    rate_mib_s: object     # numpy array, one value per bin (all streams share t0 and the bins).
    spacing_step: int      # Datagrams per spacing point (1: every spacing drawn).
    spacing_min_ns: object  # numpy int64 arrays: per point the smallest and largest spacing.
    spacing_max_ns: object
    excerpt: object        # The first samples (first PULSE_EXCERPT for pulses).
    late: int              # Datagrams that arrived late (left out of the spacing).
    dropped: int           # Samples the board dropped (summed over runs).
    overflows: int         # Datagrams flagged OVERFLOW.
    excerpt_t_s: object    # Board time of each excerpt sample, s since the excerpt's first.
    pulses: bool           # Drawn as pulses (pulse-like, or --kind pulses).
    hist_edges: object     # Histogram of all sample values: bin edges (len(counts) + 1) ...
    hist_counts: object    # ... and counts, over the values present.


def bin_width_ns(duration_ns):
    """About 100 bins over the run, in 1-2-5 steps, at least MIN_BIN_NS."""
    target = max(duration_ns / 100, MIN_BIN_NS)
    decade = 10 ** math.floor(math.log10(target))
    for m in (1, 2, 5, 10):
        if m * decade >= target:
            return int(m * decade)


def _check_output(out):
    # Fail before reading a possibly large run file, not after.
    if out.is_dir():
        raise PlotError(f"cannot write {out}: Is a directory")
    parent = out.parent
    if not parent.is_dir():
        raise PlotError(f"cannot write {out}: No such file or directory")
    if not os.access(parent, os.W_OK):
        raise PlotError(f"cannot write {out}: Permission denied")


def _stream_data(run, name, t0, bin_ns, nbins, excerpt, kind):
    import numpy as np
    from ethdaq.wire.daqformat import FLAG_OVERFLOW

    info = run.streams[name]
    nbytes = info.sample_bits // 8
    rate = np.zeros(nbins)
    step = max(1, math.ceil(info.n_packets / MAX_POINTS))
    mins, maxs, pending = [], [], np.zeros(0, dtype=np.int64)
    last = None  # (timestamp, run) of the last in-order datagram of the previous block.
    late = overflows = 0
    dropped = {}  # run -> largest cumulative count seen.
    shift = max(0, info.sample_bits - HIST_BITS)
    hist = np.zeros(2 ** min(info.sample_bits, HIST_BITS), dtype=np.int64)
    for start in range(0, info.n_samples, BLOCK):
        values = run.samples(name, start, start + BLOCK)
        hist += np.bincount((values >> values.dtype.type(shift)).astype(np.int64), minlength=len(hist))
    for start in range(0, info.n_packets, BLOCK):
        recs = run.packets(name, start, start + BLOCK)
        idx = ((recs["rx_time_ns"] - np.uint64(t0)) // np.uint64(bin_ns)).astype(np.int64)
        rate += np.bincount(idx, weights=recs["sample_count"].astype(np.float64) * nbytes, minlength=nbins)
        late += int(recs["late"].sum())
        overflows += int((recs["flags"] & FLAG_OVERFLOW != 0).sum())
        for r in np.unique(recs["run"]):
            dropped[int(r)] = max(dropped.get(int(r), 0), int(recs["dropped"][recs["run"] == r].max()))
        inorder = recs[recs["late"] == 0]
        ts, runs = inorder["timestamp"].astype(np.int64), inorder["run"]
        if last is not None and len(ts):
            ts, runs = np.concatenate(([last[0]], ts)), np.concatenate(([last[1]], runs))
        if len(ts):
            last = (ts[-1], runs[-1])
            same_run = runs[1:] == runs[:-1]  # Across a run start the timestamps mean nothing.
            pending = np.concatenate((pending, np.diff(ts)[same_run]))
        whole = len(pending) // step * step
        if whole:
            groups = pending[:whole].reshape(-1, step)
            mins.append(groups.min(axis=1))
            maxs.append(groups.max(axis=1))
            pending = pending[whole:]
    if len(pending):
        mins.append(pending.min(keepdims=True))
        maxs.append(pending.max(keepdims=True))
    empty = np.zeros(0, dtype=np.int64)
    first = run.samples(name, 0, excerpt)
    pulses = is_pulse_like(first) if kind == "auto" else kind == "pulses"
    if pulses:
        first = first[:PULSE_EXCERPT]
    edges, counts = _bars(hist, shift, np)
    return StreamPlot(bin_ns / 1e9, rate / (bin_ns / 1e9) / MIB, step,
                      np.concatenate(mins) if mins else empty, np.concatenate(maxs) if maxs else empty,
                      first, late, sum(dropped.values()), overflows, _sample_times(run, name, len(first), np),
                      pulses, edges, counts)


def is_pulse_like(samples):
    """True for samples that jump about their range from one to the next (pulse heights), False
    for counters, ramps and waveforms sampled finer than they change."""
    import numpy as np
    values = np.asarray(samples, dtype=np.float64)
    if len(values) < 16 or values.max() == values.min():
        return False
    return float(np.median(np.abs(np.diff(values)))) > PULSE_JUMP * float(values.max() - values.min())


def _sample_times(run, name, n, np):
    """Board time of the stream's first n samples, s since the first: each datagram's timestamp,
    its samples spread evenly up to the next datagram's timestamp (the last one: at the spacing
    before it). Across a run change or a timestamp going back, a datagram's samples share its time."""
    if n == 0:
        return np.zeros(0)
    total, k = run.streams[name].n_packets, n + 1
    recs = run.packets(name, 0, k)
    while int(recs["sample_count"].sum()) < n and k < total:  # Datagrams without samples.
        k *= 2
        recs = run.packets(name, 0, k)
    counts = recs["sample_count"].astype(np.int64)
    ts = recs["timestamp"].astype(np.float64)
    step = np.zeros(len(recs))
    if len(recs) > 1:
        gap = np.diff(ts)
        ok = (gap > 0) & (recs["run"][1:] == recs["run"][:-1]) & (counts[:-1] > 0)
        step[:-1] = np.where(ok, gap / np.maximum(counts[:-1], 1), 0.0)
        step[-1] = step[-2]
    index = np.arange(n)
    owner = np.searchsorted(np.cumsum(counts), index, side="right")
    within = index - (np.cumsum(counts) - counts)[owner]
    t = ts[owner] + within * step[owner]
    return (t - t[0]) / 1e9


def _bars(hist, shift, np):
    """Counts per 2**shift values -> (edges, counts) over the values present, at most HIST_BARS bars."""
    present = np.flatnonzero(hist)
    if not len(present):
        return np.zeros(1), np.zeros(0, dtype=np.int64)
    lo, hi = int(present[0]), int(present[-1]) + 1
    group = max(1, math.ceil((hi - lo) / HIST_BARS))
    part = np.zeros(math.ceil((hi - lo) / group) * group, dtype=hist.dtype)
    avail = hist[lo:lo + len(part)]
    part[:len(avail)] = avail
    counts = part.reshape(-1, group).sum(axis=1)
    edges = (lo + np.arange(len(counts) + 1) * group) * float(2 ** shift)
    return edges, counts


def plot_run(path, out_png, excerpt=DEFAULT_EXCERPT, streams=None, bin_s=None, kind="auto"):
    """Plot the run file `path` into the PNG `out_png`. streams: names to plot (default all);
    bin_s: rate bin width in seconds (default: about 100 bins); kind: "auto", "waveform" or
    "pulses" (how to draw the excerpt). Returns {name: StreamPlot}. Raises PlotError or
    h5file.RunFileError, with one-line messages."""
    out = Path(out_png)
    _check_output(out)
    fig, data = figure(path, excerpt, streams, bin_s, kind)
    try:
        fig.savefig(out, dpi=100, format="png")
    except OSError as e:
        raise PlotError(f"cannot write {out}: {e.strerror or e}") from None
    return data


def figure(path, excerpt=DEFAULT_EXCERPT, streams=None, bin_s=None, kind="auto"):
    """The matplotlib Figure of the run file `path` (Agg canvas, no display), and {name: StreamPlot}:
    a row per stream of four panels (rate, timestamp spacing, excerpt, histogram)."""
    import numpy as np
    from ethdaq.host.h5file import open_run

    if not (isinstance(excerpt, int) and excerpt >= 0):
        raise PlotError(f"excerpt must be an integer >= 0, not {excerpt!r}")
    if bin_s is not None and not bin_s > 0:
        raise PlotError(f"bin_s must be > 0, not {bin_s!r}")
    if kind not in KINDS:
        raise PlotError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    try:
        title, infos, data = _read(path, open_run(path), excerpt, streams, bin_s, kind)
    except OSError as e:  # A damaged file (e.g. killed in the middle of a flush).
        raise PlotError(f"cannot read {path}: {str(e).splitlines()[0] if str(e) else e!r}") from None
    return _draw(title, infos, data, np), data


def _read(path, run, excerpt, streams, bin_s, kind):
    """Everything to draw, read from the open run file `run` (closed on return)."""
    with run:
        names = list(run.streams) if streams is None else list(streams)
        for name in names:
            if name not in run.streams:
                raise PlotError(f"{path} has no stream {name!r} (streams: {', '.join(run.streams) or 'none'})")
        names = [n for n in names if run.streams[n].n_packets]
        if not names:
            raise PlotError(f"{path} holds no datagrams (empty run)")
        t0, t1 = None, None
        for name in names:
            for start in range(0, run.streams[name].n_packets, BLOCK):
                rx = run.packets(name, start, start + BLOCK)["rx_time_ns"]
                t0 = int(rx.min()) if t0 is None else min(t0, int(rx.min()))
                t1 = int(rx.max()) if t1 is None else max(t1, int(rx.max()))
        bin_ns = max(1, round(bin_s * 1e9)) if bin_s else bin_width_ns(t1 - t0)
        nbins = (t1 - t0) // bin_ns + 1
        data = {name: _stream_data(run, name, t0, bin_ns, nbins, excerpt, kind) for name in names}
        uuid = f"run {run.run_uuid}, " if run.run_uuid else ""
        title = f"{Path(path).name}: {uuid}created {run.created}, {(t1 - t0) / 1e9:.3f} s of data"
        if run.closed_at is None:
            title += " (not closed cleanly: the writer was killed or is still running)"
        infos = {name: run.streams[name] for name in names}
    return title, infos, data


def _draw(title, infos, data, np):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(20, 3 * len(data) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)  # Agg: no display, no pyplot state.
    fig.suptitle(title)
    axes = fig.subplots(len(data), 4, squeeze=False)
    for (name, d), (ax_rate, ax_spacing, ax_wave, ax_hist) in zip(data.items(), axes):
        info = infos[name]
        # Bin edges, last value repeated: a run shorter than one bin still draws its bin.
        t = np.arange(len(d.rate_mib_s) + 1) * d.bin_s
        ax_rate.step(t, np.append(d.rate_mib_s, d.rate_mib_s[-1]), where="post")
        ax_rate.set(xlabel="time since first datagram (s)", ylabel="MiB/s",
                    title=f"{name}: {info.sample_bits}-bit, {info.n_packets} datagrams, "
                          f"{info.n_samples} samples", ylim=(0, None))
        x = np.arange(len(d.spacing_min_ns)) * d.spacing_step
        if d.spacing_step == 1:
            ax_spacing.plot(x, d.spacing_min_ns, ".", markersize=2)
        else:
            ax_spacing.fill_between(x, d.spacing_min_ns, d.spacing_max_ns, step="post")
        ax_spacing.set(xlabel="datagram (received in order)", ylabel="timestamp spacing (ns)",
                       title=f"{d.late} late (left out), {d.overflows} OVERFLOW, {d.dropped} samples dropped by the board")
        _draw_excerpt(ax_wave, d, np)
        if len(d.hist_counts):
            ax_hist.stairs(d.hist_counts, d.hist_edges, fill=True)
        else:
            ax_hist.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax_hist.transAxes)
        what = "pulse height" if d.pulses else "sample value"
        ax_hist.set(xlabel=f"{what} (raw {info.sample_bits}-bit value)", ylabel="count",
                    title=f"{what}s: all {info.n_samples} samples")
        for ax in (ax_rate, ax_spacing, ax_wave, ax_hist):
            ax.title.set_fontsize("small")
    return fig


def _draw_excerpt(ax, d, np):
    if not len(d.excerpt):
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
    elif d.pulses:
        ax.vlines(d.excerpt_t_s, 0, d.excerpt, linewidth=0.8)
        ax.plot(d.excerpt_t_s, d.excerpt, ".", markersize=3)
    else:
        order = np.argsort(d.excerpt_t_s, kind="stable")  # Late datagrams in their place.
        ax.plot(d.excerpt_t_s[order], d.excerpt[order], linewidth=0.8)
    kind = "pulses" if d.pulses else "samples"
    ax.locator_params(axis="x", nbins=5)  # Seconds with many digits: fewer ticks stay legible.
    ax.set(xlabel="board time since the first sample (s)", ylabel="pulse height" if d.pulses else "value",
           title=f"first {len(d.excerpt)} {kind}")


# Command line -------------------------------------------------------------------------------------

def add_arguments(parser):
    """Add `ethdaq plot`'s arguments to an argparse parser (the ethdaq CLI's subparser)."""
    parser.add_argument("run", help="run file written by ethdaq recv (HDF5)")
    parser.add_argument("-o", "--output", help="PNG to write (default: the run file with .png)")
    parser.add_argument("--excerpt", type=argtypes.positive("excerpt", int, zero=True), default=DEFAULT_EXCERPT, metavar="N",
                        help=f"samples in the waveform excerpt (default {DEFAULT_EXCERPT})")
    parser.add_argument("--bin", type=argtypes.positive("bin", float), metavar="S",
                        help="rate bin width in seconds (default: about 100 bins, at least 1 ms)")
    parser.add_argument("--stream", action="append", metavar="NAME",
                        help="plot only this stream, e.g. 192.168.1.50_5000_s0 (repeatable; default all)")
    parser.add_argument("--kind", choices=KINDS, default="auto",
                        help="draw the excerpt as a waveform or as pulses (default auto: pulses when "
                             "consecutive samples jump about their range)")


def run(args):
    """Run `ethdaq plot` with parsed arguments; returns the exit status (errors: one line, 2)."""
    from ethdaq.host.h5file import RunFileError
    out = Path(args.output) if args.output else Path(args.run).with_suffix(".png")
    try:
        data = plot_run(args.run, out, excerpt=args.excerpt, streams=args.stream, bin_s=args.bin, kind=args.kind)
    except (PlotError, RunFileError) as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    print(f"wrote {out} ({len(data)} stream{'s' if len(data) != 1 else ''})")
    return 0


def main(argv=None):
    parser = argtypes.OneLineParser(prog="ethdaq plot", description="Plot a run file: per stream, data rate, "
                     "timestamp spacing, an excerpt on the board's time axis and a histogram of "
                     "the sample values (pulse heights).",
                     epilog="example:\n  ethdaq plot run.h5 -o run.png",
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
