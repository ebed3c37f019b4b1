#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Prometheus metrics of boards (`ethdaq exporter`): each board's IDENTIFY, STATUS, STREAMS,
PTP_STATUS and RX_STATS, asked over the control protocol every --interval seconds (requests
anybody may send: the exporter needs no claim), served on one HTTP port for a Prometheus server
to scrape. Every metric has the label `board` (the board's IPv4 address); a scrape reads the
newest poll, never the board itself.

    ethdaq_board_up                          1 when the newest poll was answered, else 0
    ethdaq_board_polls_total{result}         polls answered (ok) and not (timeout, refused)
    ethdaq_board_info{board_name,build_id,   1, with IDENTIFY's strings as labels
      ident,mac,channels,sample_bits}
    ethdaq_board_uptime_seconds, ethdaq_board_boots_total, ethdaq_board_running, ethdaq_board_run
    ethdaq_board_datagrams_total, ethdaq_board_dropped_samples_total    (STATUS, since reset)
    ethdaq_board_stream_datagrams_total{stream} / _stream_bytes_total / _stream_dropped_samples_total
                                             (STREAMS: the current run's, per stream)
    ethdaq_board_rx_frames_total{cause}      RX_STATS: frames by what the board did with them
    ethdaq_board_<STATUS counter>_total      ctl_requests, ctl_refused, ctl_replayed,
                                             port_rx_dropped, port_tx_dropped, arp_timeouts,
                                             arp_refused, rx_fcs_errors, rx_preamble_errors,
                                             link_losses, watchdog_resets, dst_mac_changes
    ethdaq_board_link_up, ethdaq_board_link_speed_bits_per_second
    ethdaq_board_ptp_state{state}            1 for the port's state (MASTER, SLAVE, ...)
    ethdaq_board_ptp_offset_seconds, ethdaq_board_ptp_mean_path_delay_seconds,
    ethdaq_board_ptp_frequency_adjustment_ppb, ethdaq_board_ptp_<counter>_total (steps,
    announce_timeouts, delay_resp_missing, tx_ts_missing, rx_ts_missing, faults)
"""

import threading
import time

from ethdaq.host.metrics import serve
from ethdaq.wire import protocol

# prometheus_client is imported where metrics are collected: `ethdaq ioc` polls boards with poll()
# and serves no metrics.

PREFIX = "ethdaq_board_"
STATUS_COUNTERS = ("ctl_requests", "ctl_refused", "ctl_replayed", "port_rx_dropped", "port_tx_dropped",
                   "arp_timeouts", "arp_refused", "rx_fcs_errors", "rx_preamble_errors", "link_losses",
                   "watchdog_resets", "dst_mac_changes")
PTP_COUNTERS = ("steps", "announce_timeouts", "delay_resp_missing", "tx_ts_missing", "rx_ts_missing", "faults")


def poll(client, settings=False):
    """One board's replies, as plain values: a dict (raises the client's errors). With `settings`
    also its settings (CONFIG_GET's fields, as numbers) under "config"."""
    ident = client.identify()
    st = client.status()
    streams = client.streams_if_any()
    ptp = client.ptp_status()
    values = dict(info=_identity(ident),
                  status={k: getattr(st, k) for k in ("running", "run", "datagrams", "dropped", "boots", "uptime_ms",
                                                      "link_speed", "controller_ip", "lease_ms", *STATUS_COUNTERS)},
                  link_up=bool(st.link_flags & protocol.LINK_UP),
                  streams=[(s.stream, s.datagrams, s.bytes, s.dropped) for s in streams.streams] if streams else [],
                  ptp=dict(state=ptp.state_name, servo=ptp.servo_name, offset_ns=ptp.offset_ns,
                           delay_ns=ptp.mean_path_delay_ns, freq_ppb=ptp.freq_scaled_ppb / 65536,
                           **{k: getattr(ptp, k) for k in PTP_COUNTERS}),
                  rx=dict(client.rx_stats()),
                  capabilities=ident.capabilities)
    if settings:
        values["config"] = dict(client.config().__dict__)
    return values


def _identity(ident):
    """IDENTIFY's strings, as info labels."""
    return {"board_name": ident.board, "build_id": ident.build_id, "ident": ident.ident,
            "mac": protocol.format_mac(ident.mac), "channels": str(ident.nchannels),
            "sample_bits": str(ident.sample_bits)}


class BoardMetrics:
    """A prometheus-client collector of the newest poll of each board."""

    def __init__(self, boards):
        self._lock = threading.Lock()
        self._polls = {b: None for b in boards}      # The newest answered poll's values.
        self._up = {b: False for b in boards}
        self._results = {b: {"ok": 0, "timeout": 0, "refused": 0} for b in boards}

    def record(self, board, result, values=None):
        """A poll of `board`: result ok (with its values), timeout or refused."""
        with self._lock:
            self._results[board][result] += 1
            self._up[board] = result == "ok"
            if result == "ok":
                self._polls[board] = values

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        with self._lock:
            polls, up = dict(self._polls), dict(self._up)
            results = {b: dict(r) for b, r in self._results.items()}
        fams = {}

        def fam(kind, name, doc, labels=()):
            key = PREFIX + name
            if key not in fams:
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                fams[key] = cls(key, doc, labels=["board", *labels])
            return fams[key]

        for board, values in polls.items():
            fam("gauge", "up", "1 when the newest poll was answered").add_metric([board], 1 if up[board] else 0)
            for result, n in results[board].items():
                fam("counter", "polls", "polls of the board, by result", ["result"]).add_metric([board, result], n)
            if values is not None:   # The newest answered poll's: counters stay while a board is down.
                self._board(fam, board, values)
        yield from fams.values()

    @staticmethod
    def _board(fam, board, v):
        info = v["info"]
        fam("gauge", "info", "the board's identity (IDENTIFY) as labels", sorted(info)).add_metric(
            [board, *(info[k] for k in sorted(info))], 1)
        st = v["status"]
        fam("gauge", "uptime_seconds", "time since the board's last reset").add_metric([board], st["uptime_ms"] / 1000)
        fam("counter", "boots", "boots since power-on").add_metric([board], st["boots"])
        fam("gauge", "running", "1 while a run streams").add_metric([board], 1 if st["running"] else 0)
        fam("gauge", "run", "the current or last run's number").add_metric([board], st["run"])
        fam("counter", "datagrams", "DAQ datagrams sent since reset").add_metric([board], st["datagrams"])
        fam("counter", "dropped_samples", "samples dropped since reset (more than the link carries)").add_metric(
            [board], st["dropped"])
        for name in STATUS_COUNTERS:
            fam("counter", name, f"STATUS {name}").add_metric([board], st[name])
        fam("gauge", "link_up", "1 while the PHY reports link").add_metric([board], 1 if v["link_up"] else 0)
        fam("gauge", "link_speed_bits_per_second", "the link's speed").add_metric(
            [board], st["link_speed"] * 1e6)
        for stream, datagrams, nbytes, dropped in v["streams"]:
            fam("counter", "stream_datagrams", "this run's datagrams of the stream", ["stream"]).add_metric(
                [board, str(stream)], datagrams)
            fam("counter", "stream_bytes", "this run's UDP payload bytes of the stream", ["stream"]).add_metric(
                [board, str(stream)], nbytes)
            fam("counter", "stream_dropped_samples", "this run's dropped samples of the stream",
                ["stream"]).add_metric([board, str(stream)], dropped)
        for cause, n in v["rx"].items():
            fam("counter", "rx_frames", "received frames, by what the board did with them", ["cause"]).add_metric(
                [board, cause], n)
        ptp = v["ptp"]
        fam("gauge", "ptp_state", "1 for the PTP port's state", ["state"]).add_metric([board, ptp["state"]], 1)
        fam("gauge", "ptp_offset_seconds", "offset from the master, as the servo measured it").add_metric(
            [board], ptp["offset_ns"] * 1e-9)
        fam("gauge", "ptp_mean_path_delay_seconds", "mean path delay to the master").add_metric(
            [board], ptp["delay_ns"] * 1e-9)
        fam("gauge", "ptp_frequency_adjustment_ppb", "the servo's frequency adjustment").add_metric(
            [board], ptp["freq_ppb"])
        for name in PTP_COUNTERS:
            fam("counter", f"ptp_{name}", f"PTP_STATUS {name}").add_metric([board], ptp[name])


def run(boards, address, ctl_port=7000, interval=5.0, timeout=1.0, key=None, duration=None, err=None):
    """`ethdaq exporter`: poll `boards` every `interval` s and serve their metrics on `address`
    until `duration` s have passed (None: until SIGINT or SIGTERM). Returns the exit status."""
    import signal
    import sys
    from ethdaq.host.ctl import ControlClient, ControlRefused, ControlTimeout
    err = err or sys.stderr
    metrics, server = serve(address, BoardMetrics(boards))
    stop = threading.Event()
    old = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    err.write(f"serving metrics of {', '.join(boards)} on http://{address[0]}:{address[1]}/metrics, "
              f"a poll every {interval:g} s; Ctrl-C stops\n")
    err.flush()
    end = None if duration is None else time.monotonic() + duration
    try:
        while not stop.is_set() and (end is None or time.monotonic() < end):
            for board in boards:
                try:
                    with ControlClient(board, ctl_port, timeout=timeout, key=key) as client:
                        metrics.record(board, "ok", poll(client))
                except ControlTimeout:
                    metrics.record(board, "timeout")
                except ControlRefused:
                    metrics.record(board, "refused")
            wait = interval if end is None else max(0.0, min(interval, end - time.monotonic()))
            stop.wait(wait)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        server.shutdown()
    return 0
