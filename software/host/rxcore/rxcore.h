/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * rxcore: the receive hot loop of the host receiver (ethdaq.host.rxcore is its Python front end).
 *
 * One UDP socket, read with recvmmsg into a preallocated ring of buffers; every datagram parsed
 * with explicit lengths and byte order (daq_format.h, generated from ethdaq.wire.daqformat);
 * sequence accounting per stream keyed by (source IPv4, source UDP port, stream_id) with the
 * semantics of ethdaq.host.receiver (the Python reference model); datagrams that bring new data
 * copied out as packet records (laid out as ethdaq.host.batch.PACKET_DTYPE) plus their samples.
 *
 * Plain C, no Python.h: loaded with ctypes. Every struct here is mirrored in rxcore.py; bump
 * RX_ABI_VERSION when one changes (the loader refuses a .so with another version).
 */
#ifndef ETHDAQ_RXCORE_H
#define ETHDAQ_RXCORE_H

#include <stddef.h>
#include <stdint.h>

#define RX_ABI_VERSION 3u

#define RX_RUNS_TRACKED 4u     /* Runs per stream whose gaps late datagrams may still fill. */
#define RX_GAPS_TRACKED 4096u  /* Gap ranges per run; older ones stay missing for good. Power of 2. */

/* Why a datagram was not accepted, in the order daqformat.unpack_header checks (truncated first:
 * the datagram did not fit the receive buffer, so its length says nothing). */
enum rx_malformed {
	RX_MAL_TRUNCATED = 0,
	RX_MAL_SHORT,
	RX_MAL_BAD_MAGIC,
	RX_MAL_BAD_VERSION,
	RX_MAL_BAD_HEADER_LEN,
	RX_MAL_BAD_SAMPLE_BITS,
	RX_MAL_WRONG_LENGTH,
	RX_MAL_REASONS
};

/* One received datagram that brought new data: ethdaq.host.batch.PACKET_DTYPE, byte for byte
 * (little-endian host; packed, since PACKET_DTYPE has no padding). */
struct __attribute__((packed)) rx_packet {
	uint32_t src_ip;        /* Host order: 127.0.0.1 is 0x7F000001. */
	uint16_t src_port;
	uint16_t stream_id;
	uint16_t flags;
	uint8_t  sample_bits;
	uint8_t  late;          /* 1: arrived after a higher seq and filled its gap. */
	uint32_t run;
	uint32_t sample_count;
	uint64_t seq;
	uint64_t timestamp;
	uint64_t dropped;
	uint64_t rx_time_ns;    /* CLOCK_REALTIME ns: when the recvmmsg call that read it returned, or
	                         * with kernel_timestamps the kernel's arrival time (SO_TIMESTAMPNS). */
	uint64_t offset;        /* Byte offset of the samples in the caller's payload buffer. */
};
#define RX_PACKET_FIELDS 13u

struct rx_config {
	uint32_t bind_ip;       /* Host order. */
	uint32_t port;          /* 0: any free port. */
	int32_t  rcvbuf;        /* Bytes to ask for (SO_RCVBUFFORCE if rcvbuf_force and allowed, else SO_RCVBUF). */
	int32_t  rcvbuf_force;
	int32_t  busy_poll_us;  /* 0: off. */
	int32_t  reuseport;     /* SO_REUSEPORT: several sockets (processes) share the port. */
	uint32_t max_streams;   /* Bound of the stream table. */
	uint32_t batch;         /* Datagrams per recvmmsg call: the ring's size. */
	uint32_t max_datagram;  /* Ring buffer size: longer datagrams are counted as truncated. */
	int32_t  kernel_timestamps;  /* SO_TIMESTAMPNS: a kernel arrival time per datagram (costs
	                              * ~15 % of the kernel's receive time per datagram). */
	int32_t  gro;           /* UDP_GRO: the kernel may hand over a run of same-sized datagrams of
	                         * one source (Linux merges up to 64) as one buffer, which the core
	                         * splits; each ring buffer is then RX_GRO_BUFFER bytes. */
};

#define RX_GRO_BUFFER   65536u  /* Holds any GRO buffer: the kernel merges to under 64 KiB. */

/* What rx_open got from the kernel; on failure err/where say which call failed. */
struct rx_info {
	uint32_t port;             /* Bound port. */
	int32_t  rcvbuf_kernel;    /* getsockopt(SO_RCVBUF): twice the usable size (kernel bookkeeping). */
	int32_t  rcvbuf_forced;    /* 1: SO_RCVBUFFORCE accepted (CAP_NET_ADMIN), 0: SO_RCVBUF, capped at net.core.rmem_max. */
	int32_t  busy_poll_us;     /* getsockopt(SO_BUSY_POLL) after setting it. */
	int32_t  busy_poll_errno;  /* Non-zero: the kernel refused SO_BUSY_POLL. */
	int32_t  rxq_ovfl;         /* 1: SO_RXQ_OVFL on, kernel drops known. */
	int32_t  timestamps;       /* 1: SO_TIMESTAMPNS asked for and on. */
	int32_t  gro;              /* 1: UDP_GRO asked for and on. */
	int32_t  gro_errno;        /* Non-zero: the kernel refused UDP_GRO (before Linux 5.0). */
	int32_t  err;              /* errno of the failing call, 0 on success. */
	char     where[64];        /* Name of the failing call. */
};

struct rx_totals {
	uint64_t datagrams;        /* Every datagram read, malformed, refused and duplicates too. */
	uint64_t bytes;            /* Their UDP payload bytes (as read: at most max_datagram each). */
	uint64_t delivered;        /* Packet records handed out (new data). */
	uint64_t delivered_bytes;  /* Sample bytes handed out. */
	uint64_t malformed[RX_MAL_REASONS];
	uint64_t table_full;       /* Valid datagrams of a new stream refused: stream table full. */
	uint64_t gaps_unrecorded;  /* Gap ranges forgotten early because memory ran out (normally 0). */
	uint64_t kernel_dropped;   /* Datagrams the kernel dropped, socket buffer full. */
	uint64_t recv_calls;       /* recvmmsg calls that returned datagrams. */
	uint64_t buffers;          /* Buffers those calls returned: datagrams, or with GRO runs of them. */
	uint32_t kernel_drops_known;
	uint32_t streams;
};

#define RX_HAVE_FIRST_SEQ   1u
#define RX_HAVE_LAST_SEQ    2u
#define RX_HAVE_RUN         4u
#define RX_HAVE_SAMPLE_BITS 8u

/* ethdaq.host.receiver.StreamStats of one stream; `have` says which optional fields are set. */
struct rx_stream_stats {
	uint32_t src_ip;
	uint16_t src_port;
	uint16_t stream_id;
	uint32_t run;
	uint32_t sample_bits;
	uint32_t have;
	uint32_t reserved;
	uint64_t datagrams;
	uint64_t samples;
	uint64_t payload_bytes;
	uint64_t first_seq;
	uint64_t last_seq;
	uint64_t missing;
	uint64_t out_of_order;
	uint64_t duplicates;
	uint64_t board_dropped;
	uint64_t overflow_flags;
	uint64_t runs;
	uint64_t last_flags;
};

struct rx_core;

uint32_t rx_abi_version(void);
/* sizeof of rx_packet, rx_config, rx_info, rx_totals, rx_stream_stats (which = 0..4), else 0. */
size_t rx_sizeof(int which);
/* offsetof of each rx_packet field, in declaration order; returns sizeof(struct rx_packet). */
size_t rx_packet_layout(uint32_t *offsets, size_t n);

struct rx_core *rx_open(const struct rx_config *cfg, struct rx_info *info);
/* Waits up to timeout_ms (-1: forever, 0: not at all) for a datagram, then reads what is ready,
 * up to max_packets records and payload_cap sample bytes. Returns the number of records
 * written (0 on timeout or signal), or -errno. Without GRO, no datagram past max_packets is read
 * from the socket. With GRO a buffer can hold more datagrams than there is room for: the rest
 * stay in the core, uncounted, and come first in the next call (rx_pending() says how many
 * buffers wait); closed with them, they are lost like datagrams still queued in the socket. */
int rx_recv(struct rx_core *c, struct rx_packet *packets, uint32_t max_packets,
	    uint8_t *payload, uint64_t payload_cap, uint64_t *payload_used, int timeout_ms);
/* Counters; read_meminfo: first fold in the kernel's drop counter read now with SO_MEMINFO. */
void rx_totals(struct rx_core *c, struct rx_totals *out, int read_meminfo);
/* Per-stream counters in first-seen order; returns how many streams there are. */
uint32_t rx_streams(struct rx_core *c, struct rx_stream_stats *out, uint32_t max);
/* Buffers read from the socket whose datagrams are not all handed out yet (GRO only). */
uint32_t rx_pending(struct rx_core *c);
void rx_close(struct rx_core *c);

#endif
