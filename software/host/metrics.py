#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Prometheus metrics of a receiver (`ethdaq recv --metrics ADDR:PORT`): what its live display
and run summary show, on an HTTP port for a Prometheus server to scrape (prometheus-client's
exposition format, the standard names: `_total` counters, bytes, seconds).

The receive loop hands a snapshot of its counters to `RecvMetrics.update` at each display tick
(every REFRESH_S) and at the end of the run; a scrape reads the newest snapshot, so it never
touches the receive core from the HTTP server's thread. Per stream (label `stream`: the name the
run file gives it, e.g. 192.168.1.50_5001_s0):

    ethdaq_recv_datagrams_total                datagrams with new data
    ethdaq_recv_samples_total                  samples in them
    ethdaq_recv_sample_bytes_total             their sample bytes (headers excluded)
    ethdaq_recv_missing_datagrams_total        skipped by sequence number, not (yet) arrived
    ethdaq_recv_out_of_order_datagrams_total   arrived late and filled their gap
    ethdaq_recv_duplicate_datagrams_total      sequence number already received (not data)
    ethdaq_recv_board_dropped_samples_total    samples the board says it dropped (headers)

and for the whole receiver: ethdaq_recv_socket_datagrams_total and _bytes_total (everything
read, malformed and duplicates too), ethdaq_recv_malformed_datagrams_total{reason},
ethdaq_recv_kernel_dropped_datagrams_total (when the kernel counts them), with --kafka
ethdaq_recv_kafka_published_datagrams_total and ethdaq_recv_kafka_unpublished_datagrams_total
{cause} (queue_full, buffer_full, failed), and ethdaq_recv_start_time_seconds,
ethdaq_recv_running (1 until the run ends).
"""

import threading
import time

from ethdaq.host.batch import stream_name

# prometheus_client (about 65 ms to import) is imported where metrics are served and collected:
# every `ethdaq` command imports this module for its --metrics argument type.

PREFIX = "ethdaq_recv_"

STREAM_COUNTERS = (   # (metric, StreamStats field, help)
    ("datagrams", "datagrams", "datagrams with new data"),
    ("samples", "samples", "samples in the datagrams with new data"),
    ("sample_bytes", "payload_bytes", "sample bytes of the datagrams with new data (headers excluded)"),
    ("missing_datagrams", "missing", "datagrams skipped by sequence number and not (yet) arrived"),
    ("out_of_order_datagrams", "out_of_order", "datagrams that arrived after a higher sequence number"),
    ("duplicate_datagrams", "duplicates", "datagrams whose sequence number was already received"),
    ("board_dropped_samples", "board_dropped", "samples the board reports it dropped"),
)
UNPUBLISHED_CAUSES = ("queue_full", "buffer_full", "failed")


class MetricsError(Exception):
    """The metrics port cannot be served, as one line."""


def parse_address(text):
    """`ADDR:PORT` or `PORT` (on 127.0.0.1): (addr, port)."""
    addr, _, port = text.rpartition(":")
    addr = addr or "127.0.0.1"
    try:
        port = int(port)
    except ValueError:
        raise ValueError(f"not ADDR:PORT or PORT: {text!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is not 1 to 65535")
    return addr, port


def address_arg(text):
    """argparse type of --metrics: parse_address, its errors as argparse's."""
    import argparse
    try:
        return parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class RecvMetrics:
    """A prometheus-client collector of the newest snapshot the receive loop gave `update`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._snapshot = None
        self._started = time.time()
        self._running = True

    def update(self, stats, pub=None, running=True):
        """Take the receiver's counters now (called from the receive loop)."""
        streams = []
        for key in sorted(stats.streams):
            s = stats.streams[key]
            streams.append((stream_name(key), {field: s[field] or 0 for _, field, _ in STREAM_COUNTERS}))
        kafka = None
        if pub is not None:
            totals = pub.totals()
            kafka = {name: totals[name] for name in ("published",) + UNPUBLISHED_CAUSES}
        snapshot = dict(streams=streams, datagrams=stats.datagrams, bytes=stats.bytes,
                        malformed=dict(stats.malformed), kernel_dropped=stats.kernel_dropped, kafka=kafka)
        with self._lock:
            self._snapshot = snapshot
            self._running = running

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        with self._lock:
            snap, running = self._snapshot, self._running
        yield GaugeMetricFamily(PREFIX + "start_time_seconds", "when the receiver started (Unix time)",
                                value=self._started)
        yield GaugeMetricFamily(PREFIX + "running", "1 while the receiver runs, 0 once its run has ended",
                                value=1 if running else 0)
        if snap is None:
            return
        for metric, field, doc in STREAM_COUNTERS:
            family = CounterMetricFamily(PREFIX + metric, doc, labels=["stream"])
            for name, values in snap["streams"]:
                family.add_metric([name], values[field])
            yield family
        yield CounterMetricFamily(PREFIX + "socket_datagrams", "every datagram read from the socket "
                                  "(malformed and duplicates too)", value=snap["datagrams"])
        yield CounterMetricFamily(PREFIX + "socket_bytes", "the UDP payload bytes of every datagram read",
                                  value=snap["bytes"])
        family = CounterMetricFamily(PREFIX + "malformed_datagrams", "datagrams that are not DAQ datagrams",
                                     labels=["reason"])
        for reason, n in sorted(snap["malformed"].items()):
            family.add_metric([reason], n)
        yield family
        if snap["kernel_dropped"] is not None:
            yield CounterMetricFamily(PREFIX + "kernel_dropped_datagrams", "datagrams this host's kernel "
                                      "dropped (socket buffer full)", value=snap["kernel_dropped"])
        if snap["kafka"] is not None:
            yield CounterMetricFamily(PREFIX + "kafka_published_datagrams", "datagrams the Kafka broker "
                                      "acknowledged", value=snap["kafka"]["published"])
            family = CounterMetricFamily(PREFIX + "kafka_unpublished_datagrams", "datagrams not published, "
                                         "by cause", labels=["cause"])
            for cause in UNPUBLISHED_CAUSES:
                family.add_metric([cause], snap["kafka"][cause])
            yield family


def serve(address, collector=None):
    """Serve `collector` (default: a new RecvMetrics) on `address` ((addr, port)), in its own
    registry: (the collector, the HTTP server)."""
    from prometheus_client import CollectorRegistry, start_http_server
    collector = RecvMetrics() if collector is None else collector
    registry = CollectorRegistry()
    registry.register(collector)
    try:
        server, _ = start_http_server(address[1], addr=address[0], registry=registry)
    except OSError as e:
        raise MetricsError(f"cannot serve metrics on {address[0]}:{address[1]}: {e.strerror or e}") from None
    return collector, server
