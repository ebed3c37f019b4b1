/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * rxcore: the receive hot loop of the host receiver. See rxcore.h for the interface and
 * docs/receiver.md for how it fits; ethdaq.host.receiver is the reference model of the
 * accounting (test/host/test_rxcore.py checks both agree on the same datagrams).
 *
 * Rules kept here: every byte of a datagram is read through get_be(), which checks the read
 * against the datagram's length; every datagram read from the socket is counted, and every one
 * not handed out is counted under the reason why (malformed reason, table_full, duplicate).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "daq_format.h"
#include "rxcore.h"

/* Not in every libc's headers; values from the Linux UAPI (asm-generic/socket.h, sock_diag.h). */
#ifndef SO_RCVBUFFORCE
#define SO_RCVBUFFORCE 33
#endif
#ifndef SO_RXQ_OVFL
#define SO_RXQ_OVFL 40
#endif
#ifndef SO_BUSY_POLL
#define SO_BUSY_POLL 46
#endif
#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define SK_MEMINFO_DROPS 8  /* Index of the socket's drop counter in SO_MEMINFO's u32 array. */
#define SK_MEMINFO_VARS  9

#define RX_MAX_BATCH    1024u   /* UIO_MAXIOV: the most recvmmsg takes in one call. */
#define RX_MAX_STREAMS  65536u
#define RX_MAX_DATAGRAM 65536u  /* Larger than any UDP/IPv4 payload. */
#define RX_GAPS_INITIAL 16u

_Static_assert(sizeof(struct rx_packet) == 60, "rx_packet must match batch.PACKET_DTYPE (60 bytes)");
_Static_assert(offsetof(struct rx_packet, run) == 12 && offsetof(struct rx_packet, seq) == 20 &&
	       offsetof(struct rx_packet, offset) == 52, "rx_packet must match batch.PACKET_DTYPE");
_Static_assert((RX_GAPS_TRACKED & (RX_GAPS_TRACKED - 1)) == 0, "gap ring size must be a power of 2");
_Static_assert(DAQ_HEADER_LEN == 40, "header length changed: check the parser");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "get_be and rx_packet assume a little-endian host");

/* --- Wire format ---------------------------------------------------------------------------- */

/* Big-endian unsigned field of n bytes at off; false (and *v = 0) if it does not fit in len.
 * Inlined with constant n, the usual widths become one load and a byte swap. */
static inline __attribute__((always_inline)) bool get_be(const uint8_t *buf, size_t len, size_t off,
							 size_t n, uint64_t *v)
{
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	*v = 0;
	if (n > 8 || n > len || off > len - n)
		return false;
	switch (n) {
	case 1: *v = buf[off]; break;
	case 2: memcpy(&v16, buf + off, 2); *v = __builtin_bswap16(v16); break;
	case 4: memcpy(&v32, buf + off, 4); *v = __builtin_bswap32(v32); break;
	case 8: memcpy(&v64, buf + off, 8); *v = __builtin_bswap64(v64); break;
	default:
		for (size_t i = 0; i < n; i++)
			*v = (*v << 8) | buf[off + i];
	}
	return true;
}

struct daq_hdr {
	uint64_t stream_id, flags, seq, timestamp, dropped, sample_count, sample_bits, run;
};

/* Parse and check a datagram, in the order daqformat.unpack_header checks. Returns -1 for a valid
 * datagram, else its rx_malformed reason. */
static int parse(const uint8_t *buf, size_t len, struct daq_hdr *h)
{
	uint64_t magic, version, header_len;

	if (len < DAQ_HEADER_LEN)
		return RX_MAL_SHORT;
	/* The length check above makes every read below fit; get_be checks again regardless. */
	if (!get_be(buf, len, DAQ_MAGIC_OFFSET, 2, &magic) || magic != DAQ_MAGIC)
		return RX_MAL_BAD_MAGIC;
	if (!get_be(buf, len, DAQ_VERSION_OFFSET, 1, &version) || version != DAQ_VERSION)
		return RX_MAL_BAD_VERSION;
	if (!get_be(buf, len, DAQ_HEADER_LEN_OFFSET, 1, &header_len) || header_len != DAQ_HEADER_LEN)
		return RX_MAL_BAD_HEADER_LEN;
	if (!get_be(buf, len, DAQ_SAMPLE_BITS_OFFSET, 1, &h->sample_bits) ||
	    h->sample_bits == 0 || h->sample_bits % 8)
		return RX_MAL_BAD_SAMPLE_BITS;
	if (!get_be(buf, len, DAQ_STREAM_ID_OFFSET, 2, &h->stream_id) ||
	    !get_be(buf, len, DAQ_FLAGS_OFFSET, 2, &h->flags) ||
	    !get_be(buf, len, DAQ_SEQ_OFFSET, 8, &h->seq) ||
	    !get_be(buf, len, DAQ_TIMESTAMP_OFFSET, 8, &h->timestamp) ||
	    !get_be(buf, len, DAQ_DROPPED_OFFSET, 8, &h->dropped) ||
	    !get_be(buf, len, DAQ_SAMPLE_COUNT_OFFSET, 2, &h->sample_count) ||
	    !get_be(buf, len, DAQ_RUN_OFFSET, 4, &h->run))
		return RX_MAL_SHORT;
	/* At most 65535 samples of 255 bits: no overflow. */
	if ((uint64_t)len != DAQ_HEADER_LEN + h->sample_count * (h->sample_bits / 8))
		return RX_MAL_WRONG_LENGTH;
	return -1;
}

/* --- Per-stream sequence accounting (receiver.py's _Run and _track) ---------------------------- */

struct rx_gap {
	uint64_t start, end;  /* Missing seqs [start, end). */
};

/* One (stream, run): highest seq seen, plus the still-open gaps below it, sorted, in a ring
 * (oldest = lowest first) so that forgetting the oldest gap when full costs nothing. */
struct rx_run {
	uint64_t highest;
	uint64_t dropped;      /* Newest (largest) board `dropped` of this run. */
	struct rx_gap *gaps;   /* NULL until the run has a gap: most never do. */
	uint32_t head, count, cap;
	uint32_t run;
};

struct rx_stream {
	uint64_t key;
	struct rx_run runs[RX_RUNS_TRACKED];
	uint32_t nruns;   /* Runs in use. */
	uint32_t oldest;  /* Index of the oldest run in runs[]: the next one replaced when full. */
	uint32_t last;    /* Index of the run of the previous datagram: almost always the next one's. */
	struct rx_stream_stats st;
};

#define GAP(r, i) ((r)->gaps[((r)->head + (i)) & ((r)->cap - 1)])

/* Double a run's gap ring (up to RX_GAPS_TRACKED); false if out of memory. */
static bool gaps_grow(struct rx_run *r)
{
	uint32_t cap = r->cap ? 2 * r->cap : RX_GAPS_INITIAL;
	struct rx_gap *g;

	if (cap > RX_GAPS_TRACKED)
		return false;
	g = malloc(cap * sizeof *g);
	if (!g)
		return false;
	for (uint32_t i = 0; i < r->count; i++)
		g[i] = GAP(r, i);
	free(r->gaps);
	r->gaps = g;
	r->cap = cap;
	r->head = 0;
	return true;
}

/* Forget the oldest (lowest) gap: its seqs stay missing, a late one counts as a duplicate. */
static void gaps_forget_oldest(struct rx_run *r)
{
	r->head = (r->head + 1) & (r->cap - 1);
	r->count--;
}

/* Room for one more gap: grow, or forget the oldest like the reference does at RX_GAPS_TRACKED.
 * False only when there is no ring at all (no memory). */
static bool gaps_make_room(struct rx_run *r, uint64_t *unrecorded)
{
	if (r->count < r->cap)
		return true;
	if (r->cap < RX_GAPS_TRACKED && gaps_grow(r))
		return true;
	if (r->cap == 0) {
		(*unrecorded)++;
		return false;
	}
	if (r->cap < RX_GAPS_TRACKED)
		(*unrecorded)++;  /* Forgotten early for lack of memory, not by the rule. */
	gaps_forget_oldest(r);
	return true;
}

static void gaps_add(struct rx_run *r, uint64_t start, uint64_t end, uint64_t *unrecorded)
{
	if (!gaps_make_room(r, unrecorded))
		return;
	GAP(r, r->count) = (struct rx_gap){start, end};
	r->count++;
}

static void gaps_remove(struct rx_run *r, uint32_t i)
{
	if (i < r->count / 2) {  /* Shift the shorter side. */
		for (uint32_t j = i; j > 0; j--)
			GAP(r, j) = GAP(r, j - 1);
		r->head = (r->head + 1) & (r->cap - 1);
	} else {
		for (uint32_t j = i; j + 1 < r->count; j++)
			GAP(r, j) = GAP(r, j + 1);
	}
	r->count--;
}

/* Take seq out of a gap; false if it was in none (a duplicate). */
static bool gaps_fill(struct rx_run *r, uint64_t seq, uint64_t *unrecorded)
{
	uint32_t lo = 0, hi = r->count, i;
	struct rx_gap g;

	while (lo < hi) {  /* First gap starting after seq. */
		uint32_t mid = lo + (hi - lo) / 2;
		if (GAP(r, mid).start <= seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	i = lo - 1;
	g = GAP(r, i);
	if (seq >= g.end)
		return false;
	if (g.start == seq && g.end == seq + 1) {
		gaps_remove(r, i);
	} else if (g.start == seq) {
		GAP(r, i).start = seq + 1;
	} else if (g.end == seq + 1) {
		GAP(r, i).end = seq;
	} else if (r->count == r->cap && (r->cap >= RX_GAPS_TRACKED || !gaps_grow(r))) {
		/* Splitting needs one more gap and the ring is full: the reference inserts, then forgets
		 * the oldest. If that is the one being split, only its upper part remains. */
		if (r->cap < RX_GAPS_TRACKED)
			(*unrecorded)++;
		if (i == 0) {
			GAP(r, 0).start = seq + 1;
		} else {
			gaps_forget_oldest(r);
			i--;
			GAP(r, i).end = seq;
			for (uint32_t j = r->count; j > i + 1; j--)
				GAP(r, j) = GAP(r, j - 1);
			GAP(r, i + 1) = (struct rx_gap){seq + 1, g.end};
			r->count++;
		}
	} else {
		GAP(r, i).end = seq;
		for (uint32_t j = r->count; j > i + 1; j--)
			GAP(r, j) = GAP(r, j - 1);
		GAP(r, i + 1) = (struct rx_gap){seq + 1, g.end};
		r->count++;
	}
	return true;
}

static struct rx_run *run_find(struct rx_stream *s, uint32_t run)
{
	if (s->nruns && s->runs[s->last].run == run)
		return &s->runs[s->last];
	for (uint32_t i = 0; i < s->nruns; i++) {
		if (s->runs[i].run == run) {
			s->last = i;
			return &s->runs[i];
		}
	}
	return NULL;
}

/* A new run, replacing the oldest tracked one when all RX_RUNS_TRACKED are in use (its gaps are
 * forgotten, its ring memory reused). */
static struct rx_run *run_new(struct rx_stream *s, uint32_t run, uint64_t seq)
{
	uint32_t i;
	struct rx_run *r;

	if (s->nruns < RX_RUNS_TRACKED) {
		i = s->nruns++;
	} else {
		i = s->oldest;
		s->oldest = (s->oldest + 1) % RX_RUNS_TRACKED;
	}
	r = &s->runs[i];
	r->run = run;
	r->highest = seq;
	r->dropped = 0;
	r->head = 0;
	r->count = 0;
	s->last = i;
	return r;
}

/* Sequence accounting of one valid datagram, exactly receiver.Receiver._track; true if it brings
 * new data (*late: it filled a gap). */
static bool track(struct rx_stream *s, const struct daq_hdr *h, uint64_t payload_len, bool *late,
		  uint64_t *unrecorded)
{
	struct rx_stream_stats *st = &s->st;
	struct rx_run *r = run_find(s, (uint32_t)h->run);

	*late = false;
	if (!r) {
		/* A new run: seq restarts at 0, so a run change is no gap. Datagrams before the first one
		 * we see of a later run were lost; of the very first run, we may just have started
		 * late, so they are not counted. */
		r = run_new(s, (uint32_t)h->run, h->seq);
		if (st->runs && h->seq > 0) {
			st->missing += h->seq;
			gaps_add(r, 0, h->seq, unrecorded);
		}
		st->runs++;
		st->run = (uint32_t)h->run;
		st->have = (st->have | RX_HAVE_RUN) & ~RX_HAVE_LAST_SEQ;
	} else if (h->seq > r->highest) {
		if (h->seq - r->highest > 1) {
			st->missing += h->seq - r->highest - 1;
			gaps_add(r, r->highest + 1, h->seq, unrecorded);
		}
		r->highest = h->seq;
	} else if (gaps_fill(r, h->seq, unrecorded)) {
		st->missing--;
		st->out_of_order++;
		*late = true;
	} else {
		st->duplicates++;
		return false;
	}
	st->datagrams++;
	st->samples += h->sample_count;
	st->payload_bytes += payload_len;
	st->sample_bits = (uint32_t)h->sample_bits;
	if (!(st->have & RX_HAVE_FIRST_SEQ)) {
		st->first_seq = h->seq;
		st->have |= RX_HAVE_FIRST_SEQ | RX_HAVE_SAMPLE_BITS;
	}
	if (h->run == st->run) {
		st->last_seq = r->highest;
		st->have |= RX_HAVE_LAST_SEQ;
	}
	if (h->flags & DAQ_FLAG_OVERFLOW)
		st->overflow_flags++;
	if (h->flags & DAQ_FLAG_LAST)
		st->last_flags++;
	if (h->dropped > r->dropped) {  /* Cumulative, so the largest is the newest (late ones lag). */
		st->board_dropped += h->dropped - r->dropped;
		r->dropped = h->dropped;
	}
	return true;
}

/* --- The core ------------------------------------------------------------------------------- */

struct rx_core {
	int fd;
	struct rx_config cfg;
	uint32_t max_payload;     /* Sample bytes of the longest datagram a ring buffer holds. */
	bool rxq_ovfl;
	uint32_t drops_raw;       /* Last reading of the socket's u32 drop counter. */
	int rcvtimeo_ms;          /* SO_RCVTIMEO now set, -2: unknown. */
	struct rx_totals t;

	/* recvmmsg ring: cfg.batch buffers of cfg.max_datagram bytes, their headers and cmsgs. */
	uint8_t *ring;
	struct mmsghdr *msgs;
	struct iovec *iov;
	struct sockaddr_in *names;
	uint8_t *ctrl;
	size_t ctrl_len;
	uint32_t filled;  /* Messages the last recvmmsg filled: their lengths and flags to reset. */
	size_t slot;      /* Bytes per ring buffer: max_datagram, or RX_GRO_BUFFER with GRO. */

	/* Where handing out the last recvmmsg's datagrams stopped for lack of room (GRO only: without
	 * it every call asks for no more datagrams than fit). Message `next`, from byte `off`. */
	uint32_t next;
	size_t off;
	bool begun;       /* message_begin() has run for message `next`. */
	uint64_t call_ns; /* When that recvmmsg returned. */
	size_t seg;       /* Datagram length within the message: the GRO segment size, or all of it. */
	uint64_t msg_ns;  /* The message's rx_time_ns. */
	uint32_t msg_ip;
	uint16_t msg_port;

	/* Streams in first-seen order, found through an open-addressing table of index + 1. */
	struct rx_stream *streams;
	uint32_t nstreams;
	uint32_t *slots;
	uint32_t mask;
	uint64_t seed;
	struct rx_stream *recent;  /* Stream of the previous datagram. */
};

static uint64_t mix64(uint64_t x)  /* splitmix64's finalizer */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* The stream of key, created if new; NULL when it is new and the table is full. */
static struct rx_stream *stream_get(struct rx_core *c, uint32_t ip, uint16_t port, uint16_t sid)
{
	uint64_t key = ((uint64_t)ip << 32) | ((uint64_t)port << 16) | sid;
	uint32_t i;
	struct rx_stream *s;

	if (c->recent && c->recent->key == key)
		return c->recent;
	/* The table has at least twice as many slots as streams, so an empty slot ends the probe. */
	for (i = (uint32_t)mix64(key ^ c->seed) & c->mask; c->slots[i]; i = (i + 1) & c->mask) {
		s = &c->streams[c->slots[i] - 1];
		if (s->key == key)
			return c->recent = s;
	}
	if (c->nstreams >= c->cfg.max_streams)
		return NULL;
	s = &c->streams[c->nstreams];
	memset(s, 0, sizeof *s);
	s->key = key;
	s->st.src_ip = ip;
	s->st.src_port = port;
	s->st.stream_id = sid;
	c->slots[i] = ++c->nstreams;
	c->t.streams = c->nstreams;
	return c->recent = s;
}

/* Fold in a reading of the socket's u32 drop counter. Readings can come out of order (a queued
 * datagram carries the count from when it was queued), hence the sign check. */
static void note_drops(struct rx_core *c, uint32_t raw)
{
	uint32_t delta = raw - c->drops_raw;

	if (delta > 0 && delta < (1u << 31)) {
		c->t.kernel_dropped += delta;
		c->drops_raw = raw;
	}
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Account for one datagram; write its record and samples if it brings new data. Returns 1 if a
 * record was written. The caller guarantees room for max_payload more bytes. */
static uint32_t datagram(struct rx_core *c, const uint8_t *buf, size_t len, struct rx_packet *out,
			 uint8_t *payload, uint64_t *used)
{
	struct daq_hdr h;
	struct rx_stream *s;
	int reason;
	bool late;

	c->t.datagrams++;
	c->t.bytes += len < c->cfg.max_datagram ? len : c->cfg.max_datagram;  /* As read without GRO. */
	if (len > c->cfg.max_datagram) {
		c->t.malformed[RX_MAL_TRUNCATED]++;
		return 0;
	}
	reason = parse(buf, len, &h);
	if (reason >= 0) {
		c->t.malformed[reason]++;
		return 0;
	}
	s = stream_get(c, c->msg_ip, c->msg_port, (uint16_t)h.stream_id);
	if (!s) {
		c->t.table_full++;
		return 0;
	}
	/* len was checked against the header, and len <= max_datagram, so the samples fit. */
	if (!track(s, &h, len - DAQ_HEADER_LEN, &late, &c->t.gaps_unrecorded))
		return 0;
	out->src_ip = c->msg_ip;
	out->src_port = c->msg_port;
	out->stream_id = (uint16_t)h.stream_id;
	out->flags = (uint16_t)h.flags;
	out->sample_bits = (uint8_t)h.sample_bits;
	out->late = late;
	out->run = (uint32_t)h.run;
	out->sample_count = (uint32_t)h.sample_count;
	out->seq = h.seq;
	out->timestamp = h.timestamp;
	out->dropped = h.dropped;
	out->rx_time_ns = c->msg_ns;
	out->offset = *used;
	memcpy(payload + *used, buf + DAQ_HEADER_LEN, len - DAQ_HEADER_LEN);
	*used += len - DAQ_HEADER_LEN;
	c->t.delivered++;
	c->t.delivered_bytes += len - DAQ_HEADER_LEN;
	return 1;
}

/* Start on message k: its control messages, source, and how it splits into datagrams. Returns
 * false if the message holds nothing usable (truncated: counted).
 * now_ns: when the recvmmsg call returned, the rx_time_ns without a kernel timestamp.
 * Control messages come only with kernel timestamps, with GRO for merged buffers, or
 * (SO_RXQ_OVFL) once the socket has dropped datagrams: otherwise msg_controllen is 0 and the
 * loop below costs nothing. */
static bool message_begin(struct rx_core *c, uint32_t k, uint64_t now_ns)
{
	struct mmsghdr *m = &c->msgs[k];
	size_t len = m->msg_len;

	c->t.buffers++;
	c->msg_ns = now_ns;
	c->seg = len;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m->msg_hdr); cm; cm = CMSG_NXTHDR(&m->msg_hdr, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
			uint32_t raw;
			memcpy(&raw, CMSG_DATA(cm), sizeof raw);
			note_drops(c, raw);
		} else if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS &&
			   cm->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(cm), sizeof ts);
			c->msg_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		} else if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO &&
			   cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int gso_size;
			memcpy(&gso_size, CMSG_DATA(cm), sizeof gso_size);
			if (gso_size > 0 && (size_t)gso_size < len)
				c->seg = (size_t)gso_size;
		}
	}
	c->msg_ip = 0;
	c->msg_port = 0;
	if (m->msg_hdr.msg_namelen >= sizeof(struct sockaddr_in) && c->names[k].sin_family == AF_INET) {
		c->msg_ip = ntohl(c->names[k].sin_addr.s_addr);
		c->msg_port = ntohs(c->names[k].sin_port);
	}
	if ((m->msg_hdr.msg_flags & MSG_TRUNC) || len > c->slot) {
		/* Without GRO: one datagram longer than max_datagram. With GRO the buffer holds any
		 * UDP/IPv4 payload, so this does not happen; if it did, the datagrams in it are unknown
		 * and the buffer counts as one. */
		c->t.datagrams++;
		c->t.bytes += len < c->slot ? len : c->slot;
		c->t.malformed[RX_MAL_TRUNCATED]++;
		return false;
	}
	return true;
}

/* Hand out the datagrams of the last recvmmsg not handed out yet, while there is room for a
 * record and for max_payload more bytes. Returns the new record count. */
static uint32_t drain(struct rx_core *c, struct rx_packet *packets, uint32_t n, uint32_t max_packets,
		      uint8_t *payload, uint64_t payload_cap, uint64_t *used)
{
	while (c->next < c->filled) {
		uint32_t k = c->next;
		size_t len = c->msgs[k].msg_len;
		const uint8_t *buf = c->ring + (size_t)k * c->slot;

		if (!c->begun) {
			c->begun = true;
			if (!message_begin(c, k, c->call_ns)) {
				c->next++;
				c->begun = false;
				continue;
			}
		}
		if (len == 0)  /* An empty datagram: counted (as short), nothing to hand out. */
			datagram(c, buf, 0, NULL, payload, used);
		while (c->off < len) {
			size_t dlen = len - c->off < c->seg ? len - c->off : c->seg;
			if (n >= max_packets || payload_cap - *used < c->max_payload)
				return n;  /* Resume at this datagram next call. */
			n += datagram(c, buf + c->off, dlen, packets + n, payload, used);
			c->off += dlen;
		}
		c->next++;
		c->off = 0;
		c->begun = false;
	}
	return n;
}

static int set_rcvtimeo(struct rx_core *c, int timeout_ms)
{
	struct timeval tv = {0, 0};  /* 0: block without limit. */

	if (c->rcvtimeo_ms == timeout_ms)
		return 0;
	if (timeout_ms > 0) {
		tv.tv_sec = timeout_ms / 1000;
		tv.tv_usec = (timeout_ms % 1000) * 1000;
	}
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
		return -errno;
	c->rcvtimeo_ms = timeout_ms;
	return 0;
}

int rx_recv(struct rx_core *c, struct rx_packet *packets, uint32_t max_packets,
	    uint8_t *payload, uint64_t payload_cap, uint64_t *payload_used, int timeout_ms)
{
	uint32_t n = 0;
	uint64_t used = 0;
	bool wait = timeout_ms != 0;

	*payload_used = 0;
	if (!c || c->fd < 0)
		return -EBADF;
	/* What a GRO buffer left over last time comes first; then there is no waiting. */
	n = drain(c, packets, n, max_packets, payload, payload_cap, &used);
	if (n > 0)
		wait = false;
	while (c->next >= c->filled) {
		/* Ask for no more datagrams than there is room for, however long they turn out (with
		 * GRO one message can hold more: drain() keeps the rest for the next call). */
		uint64_t room = (payload_cap - used) / c->max_payload;
		uint32_t vlen = c->cfg.batch;
		int flags = MSG_DONTWAIT, r;

		if (vlen > max_packets - n)
			vlen = max_packets - n;
		if (vlen > room)
			vlen = (uint32_t)room;
		if (vlen == 0)
			break;
		if (wait) {
			/* The first call blocks (busy polling first if SO_BUSY_POLL is set) until one
			 * datagram is there or the timeout passes, then takes what else is queued. */
			int err = set_rcvtimeo(c, timeout_ms);
			if (err)
				return err;
			flags = MSG_WAITFORONE;
			wait = false;
		}
		/* The kernel rewrote these lengths and flags in the messages it filled last time. */
		for (uint32_t k = 0; k < c->filled; k++) {
			c->msgs[k].msg_hdr.msg_namelen = sizeof c->names[k];
			c->msgs[k].msg_hdr.msg_controllen = c->ctrl_len;
			c->msgs[k].msg_hdr.msg_flags = 0;
		}
		c->filled = 0;
		c->next = 0;
		c->off = 0;
		c->begun = false;
		r = recvmmsg(c->fd, c->msgs, vlen, flags, NULL);
		if (r < 0) {
			int err = errno;
			if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || n > 0)
				break;  /* Timeout, signal (Ctrl-C reaches Python), or report what we have. */
			return -err;
		}
		if (r == 0)
			break;
		c->filled = (uint32_t)r;
		c->t.recv_calls++;
		/* One clock reading per call: rx_time_ns of every datagram it read (without kernel
		 * timestamps), so it is when the datagram left the socket queue, batched. */
		c->call_ns = realtime_ns();
		n = drain(c, packets, n, max_packets, payload, payload_cap, &used);
		if ((uint32_t)r < vlen)
			break;  /* Queue drained: do not spend a syscall to hear it is empty. */
	}
	*payload_used = used;
	return (int)n;
}

uint32_t rx_pending(struct rx_core *c)
{
	return c && c->next < c->filled ? c->filled - c->next : 0;
}

/* --- Setup and teardown ----------------------------------------------------------------------- */

static void fail(struct rx_info *info, int err, const char *where)
{
	info->err = err ? err : EINVAL;
	strncpy(info->where, where, sizeof info->where - 1);
	info->where[sizeof info->where - 1] = 0;
}

void rx_close(struct rx_core *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->streams) {
		for (uint32_t i = 0; i < c->nstreams; i++)
			for (uint32_t j = 0; j < RX_RUNS_TRACKED; j++)
				free(c->streams[i].runs[j].gaps);
	}
	free(c->streams);
	free(c->slots);
	free(c->ring);
	free(c->msgs);
	free(c->iov);
	free(c->names);
	free(c->ctrl);
	free(c);
}

static int setopt(int fd, int name, int value)
{
	return setsockopt(fd, SOL_SOCKET, name, &value, sizeof value);
}

static int getopt_int(int fd, int name, int32_t *value)
{
	int v = 0;
	socklen_t len = sizeof v;

	if (getsockopt(fd, SOL_SOCKET, name, &v, &len) < 0)
		return -1;
	*value = v;
	return 0;
}

struct rx_core *rx_open(const struct rx_config *cfg, struct rx_info *info)
{
	struct rx_core *c;
	struct sockaddr_in addr;
	socklen_t alen = sizeof addr;
	uint32_t tsize = 1;
	struct timespec now;

	memset(info, 0, sizeof *info);
	/* ethdaq.host.rxcore checks these with messages for people; this is the last line. */
	if (cfg->port > 65535 || cfg->rcvbuf <= 0 || cfg->busy_poll_us < 0 ||
	    cfg->batch < 1 || cfg->batch > RX_MAX_BATCH ||
	    cfg->max_streams < 1 || cfg->max_streams > RX_MAX_STREAMS ||
	    cfg->max_datagram <= DAQ_HEADER_LEN || cfg->max_datagram > RX_MAX_DATAGRAM) {
		fail(info, EINVAL, "config");
		return NULL;
	}
	c = calloc(1, sizeof *c);
	if (!c) {
		fail(info, ENOMEM, "calloc");
		return NULL;
	}
	c->fd = -1;
	c->cfg = *cfg;
	c->max_payload = cfg->max_datagram - DAQ_HEADER_LEN;
	c->rcvtimeo_ms = -2;
	while (tsize < 2 * cfg->max_streams)
		tsize <<= 1;
	c->mask = tsize - 1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	c->seed = mix64((uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 32) ^ (uint64_t)(uintptr_t)c);
	/* Room for a timestamp and a drop count, generously (the kernel sets MSG_CTRUNC if short). The
	 * lengths and flags the kernel rewrites are set by the first rx_recv (filled = batch) and
	 * reset before each later call in the messages the previous one filled. */
	c->ctrl_len = CMSG_SPACE(sizeof(struct timespec)) + CMSG_SPACE(sizeof(uint32_t)) +
		      CMSG_SPACE(sizeof(int)) + 64;
	c->slot = cfg->gro ? RX_GRO_BUFFER : cfg->max_datagram;
	c->ring = malloc((size_t)cfg->batch * c->slot);
	c->msgs = calloc(cfg->batch, sizeof *c->msgs);
	c->iov = calloc(cfg->batch, sizeof *c->iov);
	c->names = calloc(cfg->batch, sizeof *c->names);
	c->ctrl = calloc(cfg->batch, c->ctrl_len);
	c->streams = calloc(cfg->max_streams, sizeof *c->streams);
	c->slots = calloc(tsize, sizeof *c->slots);
	if (!c->ring || !c->msgs || !c->iov || !c->names || !c->ctrl || !c->streams || !c->slots) {
		fail(info, ENOMEM, "malloc");
		goto out;
	}
	/* Touch the ring now: page faults on the first busy reads would stall them long enough to
	 * overflow the socket buffer at high rates. */
	memset(c->ring, 0, (size_t)cfg->batch * c->slot);
	for (uint32_t k = 0; k < cfg->batch; k++) {
		c->iov[k].iov_base = c->ring + (size_t)k * c->slot;
		c->iov[k].iov_len = c->slot;
		c->msgs[k].msg_hdr.msg_iov = &c->iov[k];
		c->msgs[k].msg_hdr.msg_iovlen = 1;
		c->msgs[k].msg_hdr.msg_name = &c->names[k];
		c->msgs[k].msg_hdr.msg_control = c->ctrl + (size_t)k * c->ctrl_len;
	}
	c->filled = cfg->batch;
	c->next = cfg->batch;  /* Nothing to hand out. */

	c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		fail(info, errno, "socket");
		goto out;
	}
	/* Past net.core.rmem_max needs CAP_NET_ADMIN; without it the kernel silently caps. */
	if (cfg->rcvbuf_force && setopt(c->fd, SO_RCVBUFFORCE, cfg->rcvbuf) == 0) {
		info->rcvbuf_forced = 1;
	} else if (setopt(c->fd, SO_RCVBUF, cfg->rcvbuf) < 0) {
		fail(info, errno, "setsockopt(SO_RCVBUF)");
		goto out;
	}
	if (getopt_int(c->fd, SO_RCVBUF, &info->rcvbuf_kernel) < 0) {
		fail(info, errno, "getsockopt(SO_RCVBUF)");
		goto out;
	}
	/* Not fatal: without them kernel drops are unknown and rx_time_ns is taken after the read.
	 * SO_RXQ_OVFL costs nothing until the socket drops (the kernel only adds the cmsg when its
	 * drop counter is non-zero); SO_TIMESTAMPNS costs on every datagram, so it is optional. */
	c->rxq_ovfl = setopt(c->fd, SO_RXQ_OVFL, 1) == 0;
	info->rxq_ovfl = c->rxq_ovfl;
	c->t.kernel_drops_known = c->rxq_ovfl;
	info->timestamps = cfg->kernel_timestamps && setopt(c->fd, SO_TIMESTAMPNS, 1) == 0;
	/* Not fatal either: without GRO every datagram is a buffer, as before Linux 5.0. */
	if (cfg->gro) {
		int one = 1;
		if (setsockopt(c->fd, SOL_UDP, UDP_GRO, &one, sizeof one) == 0)
			info->gro = 1;
		else
			info->gro_errno = errno;
	}
	if (cfg->busy_poll_us > 0 && setopt(c->fd, SO_BUSY_POLL, cfg->busy_poll_us) < 0)
		info->busy_poll_errno = errno;
	if (getopt_int(c->fd, SO_BUSY_POLL, &info->busy_poll_us) < 0)
		info->busy_poll_us = 0;
	/* Off by default: two receivers on one port would each get part of the datagrams. */
	if (cfg->reuseport && setopt(c->fd, SO_REUSEPORT, 1) < 0) {
		fail(info, errno, "setsockopt(SO_REUSEPORT)");
		goto out;
	}
	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(cfg->bind_ip);
	addr.sin_port = htons((uint16_t)cfg->port);
	if (bind(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
		fail(info, errno, "bind");
		goto out;
	}
	if (getsockname(c->fd, (struct sockaddr *)&addr, &alen) < 0) {
		fail(info, errno, "getsockname");
		goto out;
	}
	info->port = ntohs(addr.sin_port);
	return c;
out:
	rx_close(c);
	return NULL;
}

void rx_totals(struct rx_core *c, struct rx_totals *out, int read_meminfo)
{
	/* SO_RXQ_OVFL only reports drops on a later datagram that made it into the queue, so drops
	 * at the end of a burst would go unseen; SO_MEMINFO reads the same counter now. */
	if (read_meminfo && c->rxq_ovfl && c->fd >= 0) {
		uint32_t info[SK_MEMINFO_VARS];
		socklen_t len = sizeof info;
		if (getsockopt(c->fd, SOL_SOCKET, SO_MEMINFO, info, &len) == 0 && len >= sizeof info)
			note_drops(c, info[SK_MEMINFO_DROPS]);
	}
	*out = c->t;
}

uint32_t rx_streams(struct rx_core *c, struct rx_stream_stats *out, uint32_t max)
{
	for (uint32_t i = 0; i < c->nstreams && i < max; i++)
		out[i] = c->streams[i].st;
	return c->nstreams;
}

uint32_t rx_abi_version(void)
{
	return RX_ABI_VERSION;
}

size_t rx_sizeof(int which)
{
	switch (which) {
	case 0: return sizeof(struct rx_packet);
	case 1: return sizeof(struct rx_config);
	case 2: return sizeof(struct rx_info);
	case 3: return sizeof(struct rx_totals);
	case 4: return sizeof(struct rx_stream_stats);
	default: return 0;
	}
}

size_t rx_packet_layout(uint32_t *offsets, size_t n)
{
	static const uint32_t off[RX_PACKET_FIELDS] = {
		offsetof(struct rx_packet, src_ip), offsetof(struct rx_packet, src_port),
		offsetof(struct rx_packet, stream_id), offsetof(struct rx_packet, flags),
		offsetof(struct rx_packet, sample_bits), offsetof(struct rx_packet, late),
		offsetof(struct rx_packet, run), offsetof(struct rx_packet, sample_count),
		offsetof(struct rx_packet, seq), offsetof(struct rx_packet, timestamp),
		offsetof(struct rx_packet, dropped), offsetof(struct rx_packet, rx_time_ns),
		offsetof(struct rx_packet, offset),
	};
	for (size_t i = 0; i < n && i < RX_PACKET_FIELDS; i++)
		offsets[i] = off[i];
	return sizeof(struct rx_packet);
}
