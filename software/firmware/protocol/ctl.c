/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Parsing order follows linuxptp: minimum length, then magic and version, then message type and
 * its expected length. Byte order is converted here, at the boundary, with explicit shifts.
 */
#include <string.h>

#include "ctl.h"
#include "hmac_sha256.h"
#include "route.h"

static uint16_t get_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Bounded writer: every put checks the remaining room, so no caller does pointer arithmetic. */
struct writer {
	uint8_t *buf;
	size_t   cap;
	size_t   len;
	int      overflow;
};

static void put_bytes(struct writer *w, const void *src, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return;
	}
	memcpy(w->buf + w->len, src, n);
	w->len += n;
}

static void put_u8(struct writer *w, uint8_t v) { put_bytes(w, &v, 1); }
static void put_be16(struct writer *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put_bytes(w, b, 2);
}
static void put_be32(struct writer *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	put_bytes(w, b, 4);
}

static void put_be64(struct writer *w, uint64_t v)
{
	put_be32(w, (uint32_t)(v >> 32));
	put_be32(w, (uint32_t)v);
}

static void put_string(struct writer *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n > CTL_MAX_STRING)
		n = CTL_MAX_STRING;
	put_u8(w, (uint8_t)n);
	put_bytes(w, s, n);
}

static void put_header(struct writer *w, uint8_t type, uint32_t seq)
{
	put_be16(w, CTL_MAGIC);
	put_u8(w, CTL_VERSION);
	put_u8(w, type);
	put_be32(w, seq);
}

static int finish(struct writer *w, struct ctl_counters *cnt)
{
	if (w->overflow) {
		cnt->no_room++;
		return -1;
	}
	return (int)w->len;
}

static int error_response(struct writer *w, uint32_t seq, uint8_t code, struct ctl_counters *cnt)
{
	put_header(w, CTL_MSG_ERROR_RSP, seq);
	put_u8(w, code);
	return finish(w, cnt);
}

static int refuse(struct writer *w, uint32_t seq, int code, struct ctl_counters *cnt)
{
	cnt->refused++;
	return error_response(w, seq, (uint8_t)code, cnt);
}

/* Why a value is refused (protocol.py REFUSAL): the field (CTL_FIELD_*; 0: no reason given), the
 * value and the range that field takes. */
struct refusal {
	uint8_t field;
	int64_t value, lo, hi;
};

_Static_assert(CTL_REFUSAL_SIZE == 1 + 3 * 8, "refuse_value follows protocol.py REFUSAL");

/* 1 (r filled) if v is outside lo..hi, else 0. */
static int out_of(struct refusal *r, uint8_t field, int64_t v, int64_t lo, int64_t hi)
{
	if (v >= lo && v <= hi)
		return 0;
	r->field = field;
	r->value = v;
	r->lo = lo;
	r->hi = hi;
	return 1;
}

/* ERR_BAD_VALUE, with the reason if r has one. */
static int refuse_value(struct writer *w, uint32_t seq, const struct refusal *r, struct ctl_counters *cnt)
{
	cnt->refused++;
	put_header(w, CTL_MSG_ERROR_RSP, seq);
	put_u8(w, CTL_ERR_BAD_VALUE);
	if (r->field != 0) {
		put_u8(w, r->field);
		put_be64(w, (uint64_t)r->value);
		put_be64(w, (uint64_t)r->lo);
		put_be64(w, (uint64_t)r->hi);
	}
	return finish(w, cnt);
}

static int answered(struct writer *w, struct ctl_counters *cnt)
{
	if (!w->overflow)
		cnt->requests++;
	return finish(w, cnt);
}

/* STREAM_START's fields (protocol.py STREAM_START), also part of CONFIG. */
static void get_stream_cfg(const uint8_t *p, struct ctl_stream_cfg *cfg)
{
	cfg->dst_ip       = get_be32(p);
	cfg->dst_port     = get_be16(p + 4);
	cfg->payload      = get_be16(p + 6);
	cfg->enable       = p[8];
	cfg->backpressure = p[9];
	cfg->gap          = get_be32(p + 10);
	memcpy(cfg->dst_mac, p + 14, sizeof(cfg->dst_mac));
	cfg->flush        = get_be32(p + 20);
}

/* 1 if the stream settings are valid, else 0 with the reason in r. dst_ip 0 stands for the
 * requester of the start (resolved before the board is touched). The channel masks take the
 * board's channels: a mask of n channels is at most 2^n - 1. */
static int stream_cfg_valid(const struct ctl_stream_cfg *cfg, const struct ctl_identity *id, struct refusal *r)
{
	int64_t all = (int64_t)((1u << id->nchannels) - 1u);

	return !out_of(r, CTL_FIELD_DST_IP, cfg->dst_ip, 0, 0xFFFFFFFEu) &&
	       !out_of(r, CTL_FIELD_DST_PORT, cfg->dst_port, 1, 0xFFFF) &&
	       !out_of(r, CTL_FIELD_PAYLOAD, cfg->payload, CTL_MIN_PAYLOAD, id->max_payload) &&
	       !out_of(r, CTL_FIELD_ENABLE, cfg->enable, 1, all) &&
	       !out_of(r, CTL_FIELD_BACKPRESSURE, cfg->backpressure, 0, all) &&
	       (cfg->flush == 0 || !out_of(r, CTL_FIELD_FLUSH, cfg->flush, CTL_FLUSH_MIN_NS, CTL_FLUSH_MAX_NS));
}

static int stream_start(struct writer *w, const uint8_t *p, uint32_t seq, uint32_t src_ip,
                        const struct ctl_identity *id, const struct ctl_ops *ops, struct ctl_counters *cnt)
{
	struct ctl_stream_cfg cfg;
	struct refusal r = { 0, 0, 0, 0 };
	uint32_t run = 0;
	int err;

	if (id->nchannels == 0 || ops == NULL || ops->stream_start == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	get_stream_cfg(p, &cfg);
	if (cfg.dst_ip == 0)
		cfg.dst_ip = src_ip;
	if (cfg.dst_ip == 0 || !stream_cfg_valid(&cfg, id, &r))
		return refuse_value(w, seq, &r, cnt);
	err = ops->stream_start(&cfg, &run);
	if (err)
		return refuse(w, seq, err, cnt);
	put_header(w, CTL_MSG_STREAM_START | CTL_RESPONSE, seq);
	put_be32(w, run);
	put_be32(w, cfg.dst_ip);
	return answered(w, cnt);
}

/* Every request, signed or not, fits the cache, and so does every answer to a request that
 * changes state. */
#define FITS(len) ((len) + CTL_AUTH_LEN <= CTL_REPLAY_REQ_MAX)
_Static_assert(FITS(CTL_STREAM_START_REQ_LENGTH) && FITS(CTL_EMULATOR_REQ_LENGTH) && FITS(CTL_STATUS_REQ_LENGTH) &&
	       FITS(CTL_IDENTIFY_REQ_LENGTH) && FITS(CTL_STREAM_STOP_REQ_LENGTH) && FITS(CTL_CLAIM_REQ_LENGTH) &&
	       FITS(CTL_RELEASE_REQ_LENGTH) && FITS(CTL_PTP_STATUS_REQ_LENGTH) && FITS(CTL_REBOOT_REQ_LENGTH) &&
	       FITS(CTL_CONFIG_GET_REQ_LENGTH) && FITS(CTL_CONFIG_SET_REQ_LENGTH) &&
	       FITS(CTL_STREAMS_REQ_LENGTH) && FITS(CTL_LAUNCH_REQ_LENGTH) && FITS(CTL_PROBE_REQ_LENGTH) &&
	       FITS(CTL_PROBE_CLEAR_REQ_LENGTH) && FITS(CTL_RULES_REQ_LENGTH) && FITS(CTL_RULE_SET_REQ_LENGTH) &&
	       FITS(CTL_REG_READ_REQ_LENGTH) && FITS(CTL_REG_WRITE_REQ_LENGTH) && FITS(CTL_RX_STATS_REQ_LENGTH),
	       "a request does not fit the reply cache");
#undef FITS
_Static_assert(CTL_HEADER_SIZE + CTL_STATUS_RSP_SIZE <= CTL_REPLAY_RSP_MAX &&
	       CTL_HEADER_SIZE + CTL_CONFIG_SIZE <= CTL_REPLAY_RSP_MAX &&
	       CTL_HEADER_SIZE + CTL_LAUNCH_RSP_SIZE <= CTL_REPLAY_RSP_MAX &&
	       CTL_HEADER_SIZE + CTL_RULE_SIZE <= CTL_REPLAY_RSP_MAX &&
	       CTL_HEADER_SIZE + CTL_REG_WORDS_SIZE <= CTL_REPLAY_RSP_MAX &&
	       CTL_HEADER_SIZE + 1 + CTL_REFUSAL_SIZE <= CTL_REPLAY_RSP_MAX,
	       "STATUS or CONFIG do not fit the reply cache (only read-only answers may be too long for it: IDENTIFY's, PTP_STATUS's, STREAMS')");

static struct ctl_replay_entry *replay_find(struct ctl_replay *r, uint32_t ip, uint16_t port)
{
	for (size_t i = 0; i < CTL_REPLAY_SOURCES; i++)
		if (r->e[i].used && r->e[i].ip == ip && r->e[i].port == port)
			return &r->e[i];
	return NULL;
}

/* The entry for a new requester: a free one, else the one heard from longest ago. */
static struct ctl_replay_entry *replay_new(struct ctl_replay *r, uint32_t ip, uint16_t port)
{
	struct ctl_replay_entry *e = &r->e[0];

	for (size_t i = 0; i < CTL_REPLAY_SOURCES; i++) {
		if (!r->e[i].used) {
			e = &r->e[i];
			break;
		}
		if ((int32_t)(r->e[i].last_used - e->last_used) < 0)
			e = &r->e[i];
	}
	memset(e, 0, sizeof(*e));
	e->used = 1;
	e->ip = ip;
	e->port = port;
	return e;
}

static int replay_older(const struct ctl_replay_entry *e, uint32_t seq)
{
	for (size_t i = 0; i < e->older_count; i++)
		if (e->older[i] == seq)
			return 1;
	return 0;
}

static void replay_store(struct ctl_replay_entry *e, int fresh, uint32_t seq, const uint8_t *req,
			 size_t req_len, const uint8_t *rsp, int rsp_len)
{
	if (!fresh && e->seq != seq) {
		e->older[e->older_next] = e->seq;
		e->older_next = (uint8_t)((e->older_next + 1) % CTL_REPLAY_HISTORY);
		if (e->older_count < CTL_REPLAY_HISTORY)
			e->older_count++;
	}
	e->seq = seq;
	e->req_len = (uint8_t)req_len;  /* <= CTL_REPLAY_REQ_MAX: lengths were checked. */
	memcpy(e->req, req, req_len);
	e->rsp_len = 0;
	if (rsp_len > 0 && (size_t)rsp_len <= sizeof(e->rsp)) {
		memcpy(e->rsp, rsp, (size_t)rsp_len);
		e->rsp_len = (uint16_t)rsp_len;
	}
}

static int execute(struct ctl_state *st, const struct ctl_request *rq, uint8_t *rsp, size_t rsp_cap,
		   uint8_t type, uint32_t seq, int authed, const struct ctl_identity *id, const struct ctl_ops *ops);

static uint64_t get_be64(const uint8_t *p)
{
	return ((uint64_t)get_be32(p) << 32) | get_be32(p + 4);
}

/* AUTH at the end of a request of `body` bytes: 0 if it is right and new (then the counter is
 * used up), else the error code. */
static int authenticate(struct ctl_state *st, const uint8_t *req, size_t body)
{
	uint8_t mac[SHA256_DIGEST];
	uint64_t counter = get_be64(req + body);

	hmac_sha256(st->key, st->key_len, req, body + 8, NULL, 0, mac);
	if (!equal_ct(mac, req + body + 8, SHA256_DIGEST) || counter <= st->auth_counter) {
		st->cnt.auth_failed++;
		return CTL_ERR_AUTH_FAILED;
	}
	st->auth_counter = counter;
	return 0;
}

/* Access ------------------------------------------------------------------------------------------ */

static int allowed(const struct ctl_access *a, uint32_t ip)
{
	if (a->nallow == 0)
		return 1;
	for (size_t i = 0; i < a->nallow; i++)
		if ((ip & a->allow[i].mask) == a->allow[i].net)
			return 1;
	return 0;
}

static uint32_t lease_left_ms(const struct ctl_access *a, uint64_t now_ms)
{
	if (a->holder == 0 || now_ms >= a->expires_ms)
		return 0;
	return a->expires_ms - now_ms > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)(a->expires_ms - now_ms);
}

/* 0 if ip may hold the board now (it is free or ip's), else the error code, counted. A lapsed
 * lease frees the board first. */
static int may_hold(struct ctl_access *a, uint32_t ip, uint64_t now_ms, struct ctl_counters *cnt)
{
	if (!allowed(a, ip)) {
		cnt->not_allowed++;
		return CTL_ERR_NOT_ALLOWED;
	}
	if (a->holder != 0 && now_ms >= a->expires_ms)
		a->holder = 0;
	if (a->holder != 0 && a->holder != ip) {
		cnt->not_controller++;
		return CTL_ERR_NOT_CONTROLLER;
	}
	return 0;
}

/* 0 if ip may change the board's state now (and then it holds the board, its lease renewed), else
 * the error code. */
static int take(struct ctl_access *a, uint32_t ip, uint64_t now_ms, struct ctl_counters *cnt)
{
	int err = may_hold(a, ip, now_ms, cnt);

	if (err)
		return err;
	if (a->holder == 0) {
		a->holder = ip;
		a->lease_ms = CTL_DEFAULT_LEASE_S * 1000u;
	}
	a->expires_ms = now_ms + a->lease_ms;
	return 0;
}

size_t ctl_request_length(uint8_t type)
{
	switch (type) {
	case CTL_MSG_IDENTIFY:     return CTL_IDENTIFY_REQ_LENGTH;
	case CTL_MSG_STREAM_START: return CTL_STREAM_START_REQ_LENGTH;
	case CTL_MSG_STREAM_STOP:  return CTL_STREAM_STOP_REQ_LENGTH;
	case CTL_MSG_EMULATOR:     return CTL_EMULATOR_REQ_LENGTH;
	case CTL_MSG_STATUS:       return CTL_STATUS_REQ_LENGTH;
	case CTL_MSG_CLAIM:        return CTL_CLAIM_REQ_LENGTH;
	case CTL_MSG_RELEASE:      return CTL_RELEASE_REQ_LENGTH;
	case CTL_MSG_PTP_STATUS:   return CTL_PTP_STATUS_REQ_LENGTH;
	case CTL_MSG_REBOOT:       return CTL_REBOOT_REQ_LENGTH;
	case CTL_MSG_CONFIG_GET:   return CTL_CONFIG_GET_REQ_LENGTH;
	case CTL_MSG_CONFIG_SET:   return CTL_CONFIG_SET_REQ_LENGTH;
	case CTL_MSG_STREAMS:      return CTL_STREAMS_REQ_LENGTH;
	case CTL_MSG_LAUNCH:       return CTL_LAUNCH_REQ_LENGTH;
	case CTL_MSG_PROBE:        return CTL_PROBE_REQ_LENGTH;
	case CTL_MSG_PROBE_CLEAR:  return CTL_PROBE_CLEAR_REQ_LENGTH;
	case CTL_MSG_RULES:        return CTL_RULES_REQ_LENGTH;
	case CTL_MSG_RULE_SET:     return CTL_RULE_SET_REQ_LENGTH;
	case CTL_MSG_REG_READ:     return CTL_REG_READ_REQ_LENGTH;
	case CTL_MSG_REG_WRITE:    return CTL_REG_WRITE_REQ_LENGTH;
	case CTL_MSG_RX_STATS:     return CTL_RX_STATS_REQ_LENGTH;
	default:                   return 0;
	}
}

/* IDENTIFY's answer after the header: the fixed part, the strings, the channels' declared rates,
 * and from a board with an event channel each channel's event layout. */
_Static_assert(CTL_IDENTIFY_RATE_SIZE == 4, "IDENTIFY's channel rates are written as 32-bit words");
_Static_assert(CTL_IDENTIFY_EVENT_SIZE == 1, "IDENTIFY's event layouts are written as bytes");
static void put_identity(struct writer *w, const struct ctl_identity *id)
{
	unsigned i;
	put_bytes(w, id->mac, 6);
	put_be32(w, id->ip);
	put_be16(w, id->ctl_port);
	put_be32(w, id->sys_clk_hz);
	put_u8(w, id->eth_dw);
	put_u8(w, id->nchannels);
	put_u8(w, id->sample_bits);
	put_be16(w, id->max_payload);
	put_be32(w, id->capabilities);
	put_string(w, id->board);
	put_string(w, id->build_id);
	put_string(w, id->ident);
	for (i = 0; i < id->nchannels; i++)
		put_be32(w, id->max_rates ? id->max_rates[i] : 0u);
	if (id->event_id_bits)
		for (i = 0; i < id->nchannels; i++)
			put_u8(w, id->event_id_bits[i]);
}

int ctl_handle(struct ctl_state *st, const struct ctl_request *rq, uint8_t *rsp, size_t rsp_cap,
               const struct ctl_identity *id, const struct ctl_ops *ops)
{
	const uint8_t *req = rq->data;
	size_t req_len = rq->len, expected;
	struct ctl_counters *cnt = &st->cnt;
	struct ctl_replay *replay = &st->replay;
	struct writer w = { rsp, rsp_cap, 0, 0 };
	struct ctl_replay_entry *e;
	uint8_t  version, type;
	uint32_t seq;
	int n, last, same, signed_req, authed = 0;

	if (req == NULL || req_len < CTL_HEADER_SIZE) {
		cnt->short_drop++;
		return 0;
	}
	if (get_be16(req) != CTL_MAGIC) {
		cnt->magic_drop++;
		return 0;
	}
	version = req[2];
	type    = req[3];
	seq     = get_be32(req + 4);
	if (type & CTL_RESPONSE) {
		cnt->response_drop++;
		return 0;
	}
	if (version != CTL_VERSION) {
		cnt->bad_version++;
		return error_response(&w, seq, CTL_ERR_BAD_VERSION, cnt);
	}

	expected = ctl_request_length(type);
	if (expected == 0) {
		cnt->bad_type++;
		return error_response(&w, seq, CTL_ERR_BAD_TYPE, cnt);
	}
	signed_req = req_len == expected + CTL_AUTH_LEN;
	if (req_len != expected && !signed_req) {
		cnt->bad_length++;
		return error_response(&w, seq, CTL_ERR_BAD_LENGTH, cnt);
	}

	replay->clock++;
	e = replay_find(replay, rq->src_ip, rq->src_port);
	if (e != NULL) {
		last = seq == e->seq;
		same = last && e->req_len == req_len && memcmp(e->req, req, req_len) == 0;
		e->last_used = replay->clock;
		if (same && e->rsp_len > 0) {
			/* A retransmission: its answer was lost. Answer again, do not execute again. */
			if (e->rsp_len > rsp_cap) {
				cnt->no_room++;
				return -1;
			}
			memcpy(rsp, e->rsp, e->rsp_len);
			cnt->replayed++;
			return e->rsp_len;
		}
		if ((last && !same) || replay_older(e, seq)) {
			/* The last seq reused for another request, or a copy delayed from before it. */
			cnt->stale_seq++;
			return error_response(&w, seq, CTL_ERR_STALE_SEQ, cnt);
		}
		/* The last request with its answer not kept (an IDENTIFY, read-only) is answered
		 * afresh. */
	}
	/* After the reply cache: a retransmission of a signed request is answered from there, its
	 * counter having been used up by the first copy. */
	if (signed_req) {
		int err;
		if (st->key_len == 0)
			return refuse(&w, seq, CTL_ERR_UNSUPPORTED, cnt);
		err = authenticate(st, req, expected);
		if (err)
			return error_response(&w, seq, (uint8_t)err, cnt);
		authed = 1;
	}
	n = execute(st, rq, rsp, rsp_cap, type, seq, authed, id, ops);
	/* With a key, only signed requests enter the reply cache: forged ones (any source address
	 * can be forged) must not push a controller's last request out of it. */
	if (n > 0 && (st->key_len == 0 || authed)) {
		int fresh = e == NULL;
		if (fresh) {
			e = replay_new(replay, rq->src_ip, rq->src_port);
			e->last_used = replay->clock;
		}
		replay_store(e, fresh, seq, req, req_len, rsp, n);
	}
	return n;
}


static int streams(struct writer *w, uint32_t seq, const struct ctl_identity *id, const struct ctl_ops *ops,
		   struct ctl_counters *cnt)
{
	struct ctl_stream_counters s[CTL_MAX_STREAMS];
	uint32_t run = 0;
	int n;

	memset(s, 0, sizeof(s));
	if (id->nchannels == 0 || ops == NULL || ops->streams == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	n = ops->streams(s, &run);
	if (n < 0 || n > (int)CTL_MAX_STREAMS)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	put_header(w, CTL_MSG_STREAMS | CTL_RESPONSE, seq);
	put_be32(w, run);
	put_u8(w, (uint8_t)n);
	for (int i = 0; i < (int)CTL_MAX_STREAMS; i++) {
		struct ctl_stream_counters z = { 0, 0, 0, 0 };
		const struct ctl_stream_counters *c = i < n ? &s[i] : &z;
		put_u8(w, (uint8_t)(i < n ? ((c->flags & CTL_STREAM_ENABLED) | CTL_STREAM_PRESENT) : 0));
		put_be64(w, c->datagrams);
		put_be64(w, c->bytes);
		put_be64(w, c->dropped);
	}
	return answered(w, cnt);
}

static int launch(struct writer *w, const uint8_t *p, uint32_t seq, const struct ctl_ops *ops,
		  struct ctl_counters *cnt)
{
	struct ctl_launch l;
	struct ctl_launch_status s;
	struct refusal r = { 0, 0, 0, 0 };
	int err;

	if (ops == NULL || ops->launch == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	l.op        = p[0];
	l.flags     = p[1];
	l.sec       = get_be64(p + 2);
	l.ns        = get_be32(p + 10);
	l.period    = get_be32(p + 14);
	l.count     = get_be32(p + 18);
	l.guard     = get_be16(p + 22);
	l.frame_len = get_be16(p + 24);
	l.frame     = p + 26;
	if (out_of(&r, CTL_FIELD_LAUNCH_OP, l.op, 0, CTL_LAUNCH_QUERY) ||
	    out_of(&r, CTL_FIELD_LAUNCH_FLAGS, l.flags, 0, CTL_LAUNCH_RELATIVE) ||
	    out_of(&r, CTL_FIELD_SEC, l.sec > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)l.sec, 0, ((int64_t)1 << 48) - 1) ||
	    out_of(&r, CTL_FIELD_NS, l.ns, 0, 999999999) || out_of(&r, CTL_FIELD_PERIOD, l.period, 0, 999999999) ||
	    out_of(&r, CTL_FIELD_FRAME_LEN, l.frame_len, l.op == CTL_LAUNCH_ARM ? CTL_LAUNCH_FRAME_MIN : 0,
		   CTL_LAUNCH_FRAME_MAX))
		return refuse_value(w, seq, &r, cnt);
	memset(&s, 0, sizeof(s));
	err = ops->launch(&l, &s);
	if (err)
		return refuse(w, seq, err, cnt);
	put_header(w, CTL_MSG_LAUNCH | CTL_RESPONSE, seq);
	put_u8(w, s.armed);
	put_be16(w, s.guard);
	put_be16(w, s.lead);
	put_be32(w, s.cycle_ps);
	put_be32(w, s.sent);
	put_be32(w, s.missed_past);
	put_be32(w, s.missed_busy);
	put_be64(w, s.first_sec);
	put_be32(w, s.first_ns);
	return answered(w, cnt);
}

static int probe(struct writer *w, uint32_t seq, const struct ctl_ops *ops, struct ctl_counters *cnt)
{
	static struct ctl_probe_report r;  /* 550 bytes: not on the firmware's small stack. */
	static const struct ctl_probe_class none;
	int err;

	if (ops == NULL || ops->probe == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	memset(&r, 0, sizeof(r));
	err = ops->probe(0, &r);
	if (err)
		return refuse(w, seq, err, cnt);
	put_header(w, CTL_MSG_PROBE | CTL_RESPONSE, seq);
	put_be32(w, r.cycle_ps);
	put_u8(w, r.present & ((1u << CTL_PROBE_MAX_CLASSES) - 1u));
	put_be32(w, r.tx_unpaired);
	put_be32(w, r.tx_overflows);
	put_be32(w, r.rx_unpaired);
	put_be32(w, r.rx_overflows);
	for (unsigned i = 0; i < CTL_PROBE_MAX_CLASSES; i++) {
		/* A class the build does not measure reads as zeros, whatever the driver left. */
		const struct ctl_probe_class *c = (r.present >> i & 1u) ? &r.classes[i] : &none;
		put_be32(w, c->count);
		put_be64(w, c->sum);
		put_be64(w, c->sumsq);
		put_be16(w, c->min);
		put_be16(w, c->max);
		for (unsigned k = 0; k < CTL_PROBE_NBINS; k++)
			put_be32(w, c->bins[k]);
	}
	return answered(w, cnt);
}

static int probe_clear(struct writer *w, uint32_t seq, const struct ctl_ops *ops, struct ctl_counters *cnt)
{
	int err;

	if (ops == NULL || ops->probe == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	err = ops->probe(1, NULL);
	if (err)
		return refuse(w, seq, err, cnt);
	put_header(w, CTL_MSG_PROBE_CLEAR | CTL_RESPONSE, seq);
	return answered(w, cnt);
}

static void put_rule(struct writer *w, const struct ctl_rule *r, int with_counters)
{
	if (!with_counters)
		put_u8(w, r->index);
	put_u8(w, r->enable);
	put_u8(w, r->action);
	put_u8(w, r->match);
	put_be16(w, r->ethertype);
	put_u8(w, r->proto);
	put_be16(w, r->port);
	put_be32(w, r->src_ip);
	if (with_counters) {
		put_be32(w, r->matched);
		put_be32(w, r->refused);
	}
}

static int rules(struct writer *w, uint32_t seq, const struct ctl_ops *ops, struct ctl_counters *cnt)
{
	static struct ctl_rules_report r;
	static const struct ctl_rule none;
	int err;

	if (ops == NULL || ops->rules == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	memset(&r, 0, sizeof(r));
	err = ops->rules(NULL, &r);
	if (err)
		return refuse(w, seq, err, cnt);
	if (r.nrules > CTL_MAX_RULES)
		r.nrules = CTL_MAX_RULES;
	put_header(w, CTL_MSG_RULES | CTL_RESPONSE, seq);
	put_u8(w, r.nrules);
	put_be32(w, r.unmatched);
	put_be32(w, r.gate_error);
	put_be32(w, r.gate_full);
	put_be32(w, r.gate_oversize);
	for (unsigned i = 0; i < CTL_MAX_RULES; i++)
		put_rule(w, i < r.nrules ? &r.rules[i] : &none, 1);
	return answered(w, cnt);
}

/* The checks protocol.check_rule makes, before the board sees the rule. */
static int rule_set(struct writer *w, const uint8_t *p, uint32_t seq, const struct ctl_identity *id,
		    const struct ctl_ops *ops, struct ctl_counters *cnt)
{
	struct ctl_rule r;
	struct refusal why = { 0, 0, 0, 0 };
	int err;

	if (ops == NULL || ops->rules == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	memset(&r, 0, sizeof(r));
	r.index     = p[0];
	r.enable    = p[1];
	r.action    = p[2];
	r.match     = p[3];
	r.ethertype = get_be16(p + 4);
	r.proto     = p[6];
	r.port      = get_be16(p + 7);
	r.src_ip    = get_be32(p + 9);
	if (out_of(&why, CTL_FIELD_RULE_INDEX, r.index, 0, CTL_MAX_RULES - 1) ||
	    out_of(&why, CTL_FIELD_RULE_ENABLE, r.enable, 0, 1) ||
	    out_of(&why, CTL_FIELD_RULE_ACTION, r.action, 0, CTL_RULE_DROP) ||
	    out_of(&why, CTL_FIELD_RULE_MATCH, r.match, 0,
		   CTL_RULE_MATCH_TYPE | CTL_RULE_MATCH_PROTO | CTL_RULE_MATCH_PORT | CTL_RULE_MATCH_SRC))
		return refuse_value(w, seq, &why, cnt);
	/* A rule that takes frames from the CPU must name a UDP port, and not one the board needs. */
	if (r.enable && r.action != CTL_RULE_CPU &&
	    (!(r.match & CTL_RULE_MATCH_PORT) || r.port == id->ctl_port || r.port == 319 || r.port == 320))
		return refuse(w, seq, CTL_ERR_BAD_VALUE, cnt);
	err = ops->rules(&r, NULL);
	if (err)
		return refuse(w, seq, err, cnt);
	put_header(w, CTL_MSG_RULE_SET | CTL_RESPONSE, seq);
	put_rule(w, &r, 0);
	return answered(w, cnt);
}

/* REG_READ (p: offset, count) and REG_WRITE (p: offset, count, CTL_REG_MAX_WORDS words). The
 * board's ops check the words are the front-end's. */
static int regs(struct writer *w, int write, const uint8_t *p, uint32_t seq, const struct ctl_ops *ops,
		struct ctl_counters *cnt)
{
	uint32_t words[CTL_REG_MAX_WORDS];
	struct refusal r = { 0, 0, 0, 0 };
	uint16_t offset;
	uint8_t count;
	int err;

	if (ops == NULL || ops->regs == NULL)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	offset = get_be16(p);
	count  = p[2];
	if (out_of(&r, CTL_FIELD_REG_COUNT, count, 1, CTL_REG_MAX_WORDS) || (offset & 3u))
		return refuse_value(w, seq, &r, cnt);
	memset(words, 0, sizeof(words));
	if (write)
		for (unsigned i = 0; i < count; i++)
			words[i] = get_be32(p + 3 + 4u * i);
	err = ops->regs(write, offset, count, words);
	if (err)
		return refuse(w, seq, err, cnt);
	put_header(w, (uint8_t)((write ? CTL_MSG_REG_WRITE : CTL_MSG_REG_READ) | CTL_RESPONSE), seq);
	put_be16(w, offset);
	put_u8(w, count);
	for (unsigned i = 0; i < CTL_REG_MAX_WORDS; i++)
		put_be32(w, i < count ? words[i] : 0);
	return answered(w, cnt);
}

/* RX_STATS: every counter of protocol.py's RX_COUNTERS this build has, in code order: the
 * handler's own (its drops of malformed requests, before anything else about them is known) from
 * cnt, the others from the board. Read-only, so its answer may be longer than the reply cache
 * keeps (answered afresh). */
static int rx_stats(struct writer *w, uint32_t seq, const struct ctl_ops *ops, struct ctl_counters *cnt)
{
	static const uint8_t codes[] = CTL_RX_COUNTER_CODES;
	_Static_assert(sizeof(codes) <= CTL_RX_STATS_MAX, "RX_STATS: more counters than its answer holds");
	size_t count_at;
	uint8_t n = 0;

	put_header(w, CTL_MSG_RX_STATS | CTL_RESPONSE, seq);
	count_at = w->len;
	put_u8(w, 0);  /* The count, set below. */
	for (size_t i = 0; i < sizeof(codes); i++) {
		uint64_t v = 0;
		int have = 1;

		switch (codes[i]) {
		case CTL_RX_COUNTER_CTL_SHORT:    v = cnt->short_drop;    break;
		case CTL_RX_COUNTER_CTL_MAGIC:    v = cnt->magic_drop;    break;
		case CTL_RX_COUNTER_CTL_RESPONSE: v = cnt->response_drop; break;
		case CTL_RX_COUNTER_CTL_VERSION:  v = cnt->bad_version;   break;
		case CTL_RX_COUNTER_CTL_TYPE:     v = cnt->bad_type;      break;
		case CTL_RX_COUNTER_CTL_LENGTH:   v = cnt->bad_length;    break;
		default:
			have = ops != NULL && ops->rx_counter != NULL && ops->rx_counter(codes[i], &v);
			break;
		}
		if (!have)
			continue;
		put_u8(w, codes[i]);
		put_be64(w, v);
		n++;
	}
	if (!w->overflow)
		w->buf[count_at] = n;  /* Written above: count_at < w->len. */
	return answered(w, cnt);
}

static int ptp_status(struct writer *w, uint32_t seq, const struct ctl_ops *ops, struct ctl_counters *cnt)
{
	struct ctl_ptp_status p;

	memset(&p, 0, sizeof(p));
	if (ops == NULL || ops->ptp_status == NULL || ops->ptp_status(&p) != 0)
		return refuse(w, seq, CTL_ERR_UNSUPPORTED, cnt);
	put_header(w, CTL_MSG_PTP_STATUS | CTL_RESPONSE, seq);
	put_u8(w, p.state);
	put_u8(w, p.servo_state);
	put_u8(w, p.role);
	put_u8(w, p.transport);
	put_be64(w, (uint64_t)p.offset_ns);
	put_be64(w, (uint64_t)p.mean_path_delay_ns);
	put_be64(w, (uint64_t)p.freq_scaled_ppb);
	put_bytes(w, p.clock_identity, 8);
	put_bytes(w, p.parent_identity, 8);
	put_be16(w, p.parent_port);
	put_bytes(w, p.gm_identity, 8);
	put_u8(w, p.gm_priority1);
	put_u8(w, p.gm_priority2);
	put_be16(w, p.steps_removed);
	put_be16(w, (uint16_t)p.utc_offset);
	put_be16(w, p.time_flags);
	put_be32(w, p.steps);
	put_be32(w, p.announce_timeouts);
	put_be32(w, p.servo_samples);
	put_be32(w, p.delay_resp_missing);
	put_be32(w, p.tx_ts_missing);
	put_be32(w, p.faults);
	put_be32(w, p.rx_ts_missing);
	put_be32(w, p.hw_rx_overflows);
	put_be32(w, p.hw_tx_overflows);
	return answered(w, cnt);
}

/* CONFIG (protocol.py), in CONFIG_FIELDS order. */
static void put_config(struct writer *w, const struct ctl_config *c)
{
	put_be32(w, c->ip);
	put_bytes(w, c->mac, 6);
	put_be32(w, c->stream.dst_ip);
	put_be16(w, c->stream.dst_port);
	put_be16(w, c->stream.payload);
	put_u8(w, c->stream.enable);
	put_u8(w, c->stream.backpressure);
	put_be32(w, c->stream.gap);
	put_bytes(w, c->stream.dst_mac, 6);
	put_be32(w, c->stream.flush);
	put_u8(w, c->emulator.mode);
	put_be32(w, c->emulator.rate);
	put_be32(w, c->emulator.seed);
	put_u8(w, c->ptp.role);
	put_u8(w, c->ptp.transport);
	put_u8(w, c->ptp.domain);
	put_u8(w, (uint8_t)c->ptp.log_sync);
	put_u8(w, (uint8_t)c->ptp.log_announce);
	put_u8(w, (uint8_t)c->ptp.log_delay_req);
	put_u8(w, c->ptp.priority1);
	put_u8(w, c->ptp.priority2);
	put_be32(w, c->netmask);
	put_be32(w, c->gateway);
}

static void get_config(const uint8_t *p, struct ctl_config *c)
{
	c->ip = get_be32(p);
	memcpy(c->mac, p + 4, 6);
	get_stream_cfg(p + 10, &c->stream);
	c->emulator.mode = p[34];
	c->emulator.rate = get_be32(p + 35);
	c->emulator.seed = get_be32(p + 39);
	c->ptp.role = p[43];
	c->ptp.transport = p[44];
	c->ptp.domain = p[45];
	c->ptp.log_sync = (int8_t)p[46];
	c->ptp.log_announce = (int8_t)p[47];
	c->ptp.log_delay_req = (int8_t)p[48];
	c->ptp.priority1 = p[49];
	c->ptp.priority2 = p[50];
	c->netmask = get_be32(p + 51);
	c->gateway = get_be32(p + 55);
}
_Static_assert(CTL_CONFIG_SIZE == 59, "get_config/put_config follow protocol.py CONFIG");

#define CFG_NET (CTL_CFG_IP | CTL_CFG_MAC | CTL_CFG_NETMASK | CTL_CFG_GATEWAY)
#define CFG_STREAM (CTL_CFG_DST_IP | CTL_CFG_DST_PORT | CTL_CFG_PAYLOAD | CTL_CFG_ENABLE | \
		    CTL_CFG_BACKPRESSURE | CTL_CFG_GAP | CTL_CFG_DST_MAC | CTL_CFG_FLUSH)
#define CFG_EMULATOR (CTL_CFG_EMULATOR_MODE | CTL_CFG_EMULATOR_RATE | CTL_CFG_EMULATOR_SEED)
#define CFG_PTP (CTL_CFG_PTP_ROLE | CTL_CFG_PTP_DOMAIN | CTL_CFG_PTP_LOG_SYNC | CTL_CFG_PTP_LOG_ANNOUNCE | \
		 CTL_CFG_PTP_LOG_DELAY_REQ | CTL_CFG_PTP_PRIORITY1 | CTL_CFG_PTP_PRIORITY2)

/* A board's own address: a unicast host address (protocol.py BOARD_IP_INVALID). */
static int board_ip_valid(uint32_t ip)
{
	static const struct { uint32_t net; unsigned bits; } invalid[] = CTL_BOARD_IP_INVALID;
	size_t i;

	for (i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		if ((ip >> (32 - invalid[i].bits)) == (invalid[i].net >> (32 - invalid[i].bits)))
			return 0;
	return 1;
}

/* A board's own MAC: unicast (the group bit of the first byte clear) and not all zero. */
static int board_mac_valid(const uint8_t mac[6])
{
	return !(mac[0] & 1) && (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]) != 0;
}

/* CONFIG_SET: the fields in the mask, all checked before any is applied. 0 or the error code
 * (CTL_ERR_BAD_VALUE: the reason in r, if it is a range). */
static int config_set(struct ctl_config *conf, const uint8_t *p, const struct ctl_identity *id,
		      const struct ctl_ops *ops, struct refusal *r)
{
	uint32_t mask = get_be32(p);
	struct ctl_config in, next = *conf;
	int err;

	if (out_of(r, CTL_FIELD_CONFIG_MASK, mask, 0, (1u << CTL_CONFIG_NFIELDS) - 1u))
		return CTL_ERR_BAD_VALUE;
	if ((mask & CTL_CONFIG_FIXED) ||
	    ((mask & CFG_NET) && !(id->capabilities & CTL_CAP_NET_CONFIG)) ||
	    ((mask & (CFG_STREAM | CFG_EMULATOR)) && (id->nchannels == 0 || ops == NULL || ops->emulator == NULL)) ||
	    ((mask & CFG_PTP) && (ops == NULL || ops->ptp_config == NULL)))
		return CTL_ERR_UNSUPPORTED;
	get_config(p + 4, &in);
#define TAKE(bit, field) do { if (mask & (bit)) next.field = in.field; } while (0)
	TAKE(CTL_CFG_IP, ip);
	if (mask & CTL_CFG_MAC)
		memcpy(next.mac, in.mac, 6);
	TAKE(CTL_CFG_DST_IP, stream.dst_ip);
	TAKE(CTL_CFG_DST_PORT, stream.dst_port);
	TAKE(CTL_CFG_PAYLOAD, stream.payload);
	TAKE(CTL_CFG_ENABLE, stream.enable);
	TAKE(CTL_CFG_BACKPRESSURE, stream.backpressure);
	TAKE(CTL_CFG_GAP, stream.gap);
	if (mask & CTL_CFG_DST_MAC)
		memcpy(next.stream.dst_mac, in.stream.dst_mac, 6);
	TAKE(CTL_CFG_FLUSH, stream.flush);
	TAKE(CTL_CFG_EMULATOR_MODE, emulator.mode);
	TAKE(CTL_CFG_EMULATOR_RATE, emulator.rate);
	TAKE(CTL_CFG_EMULATOR_SEED, emulator.seed);
	TAKE(CTL_CFG_PTP_ROLE, ptp.role);
	TAKE(CTL_CFG_PTP_DOMAIN, ptp.domain);
	TAKE(CTL_CFG_PTP_LOG_SYNC, ptp.log_sync);
	TAKE(CTL_CFG_PTP_LOG_ANNOUNCE, ptp.log_announce);
	TAKE(CTL_CFG_PTP_LOG_DELAY_REQ, ptp.log_delay_req);
	TAKE(CTL_CFG_PTP_PRIORITY1, ptp.priority1);
	TAKE(CTL_CFG_PTP_PRIORITY2, ptp.priority2);
	TAKE(CTL_CFG_NETMASK, netmask);
	TAKE(CTL_CFG_GATEWAY, gateway);
#undef TAKE
	/* The gateway must stay a host of the subnet whichever of ip, netmask and gateway changes. */
	if (((mask & CTL_CFG_IP) && !board_ip_valid(next.ip)) || ((mask & CTL_CFG_MAC) && !board_mac_valid(next.mac)) ||
	    ((mask & CTL_CFG_NETMASK) && !route_netmask_valid(next.netmask)) ||
	    ((mask & (CTL_CFG_IP | CTL_CFG_NETMASK | CTL_CFG_GATEWAY)) &&
	     !route_gateway_valid(next.ip, next.netmask, next.gateway)) ||
	    ((mask & CFG_STREAM) && !stream_cfg_valid(&next.stream, id, r)) ||
	    out_of(r, CTL_FIELD_EMULATOR_MODE, next.emulator.mode, 0, CTL_EMULATOR_MODE_MAX) ||
	    out_of(r, CTL_FIELD_PTP_ROLE, next.ptp.role, 0, CTL_PTP_ROLE_MAX) ||
	    out_of(r, CTL_FIELD_PTP_LOG_SYNC, next.ptp.log_sync, CTL_PTP_LOG_MIN, CTL_PTP_LOG_MAX) ||
	    out_of(r, CTL_FIELD_PTP_LOG_ANNOUNCE, next.ptp.log_announce, CTL_PTP_LOG_MIN, CTL_PTP_LOG_MAX) ||
	    out_of(r, CTL_FIELD_PTP_LOG_DELAY_REQ, next.ptp.log_delay_req, CTL_PTP_LOG_MIN, CTL_PTP_LOG_MAX))
		return CTL_ERR_BAD_VALUE;
	if (mask & CFG_PTP) {
		err = ops->ptp_config(&next.ptp);
		if (err)
			return err;
	}
	if (mask & CFG_EMULATOR) {
		err = ops->emulator(&next.emulator);
		if (err)
			return err;
	}
	*conf = next;
	return 0;
}

static int execute(struct ctl_state *st, const struct ctl_request *rq, uint8_t *rsp, size_t rsp_cap,
		   uint8_t type, uint32_t seq, int authed, const struct ctl_identity *id, const struct ctl_ops *ops)
{
	struct writer w = { rsp, rsp_cap, 0, 0 };
	struct ctl_counters *cnt = &st->cnt;
	struct ctl_access *a = &st->access;
	const uint8_t *req = rq->data;
	uint32_t src_ip = rq->src_ip, run = 0;
	int err;

	/* Everything that changes the board's state is the controller's alone, and signed if the
	 * board has a key. */
	switch (type) {
	case CTL_MSG_LAUNCH:
		if (req[CTL_HEADER_SIZE] == CTL_LAUNCH_QUERY)
			break;  /* Read-only. */
		/* fall through */
	case CTL_MSG_PROBE_CLEAR:
	case CTL_MSG_RULE_SET:
	case CTL_MSG_REG_WRITE:
	case CTL_MSG_STREAM_START:
	case CTL_MSG_STREAM_STOP:
	case CTL_MSG_EMULATOR:
	case CTL_MSG_CLAIM:
	case CTL_MSG_RELEASE:
	case CTL_MSG_REBOOT:
	case CTL_MSG_CONFIG_SET:
		if (st->key_len > 0 && !authed) {
			cnt->auth_required++;
			return error_response(&w, seq, CTL_ERR_AUTH_REQUIRED, cnt);
		}
		if (type == CTL_MSG_CLAIM || type == CTL_MSG_RELEASE)
			break;  /* They check the controller themselves. */
		err = take(a, src_ip, rq->now_ms, cnt);
		if (err)
			return error_response(&w, seq, (uint8_t)err, cnt);
		break;
	default:
		break;
	}

	switch (type) {
	case CTL_MSG_IDENTIFY:
		put_header(&w, CTL_MSG_IDENTIFY_RSP, seq);
		put_identity(&w, id);
		return answered(&w, cnt);
	case CTL_MSG_STREAM_START:
		return stream_start(&w, req + CTL_HEADER_SIZE, seq, src_ip, id, ops, cnt);
	case CTL_MSG_STREAM_STOP:
		if (id->nchannels == 0 || ops == NULL || ops->stream_stop == NULL)
			return refuse(&w, seq, CTL_ERR_UNSUPPORTED, cnt);
		err = ops->stream_stop(&run);
		if (err)
			return refuse(&w, seq, err, cnt);
		put_header(&w, CTL_MSG_STREAM_STOP | CTL_RESPONSE, seq);
		put_be32(&w, run);
		return answered(&w, cnt);
	case CTL_MSG_EMULATOR: {
		struct ctl_emulator_cfg cfg;
		struct refusal r = { 0, 0, 0, 0 };
		const uint8_t *p = req + CTL_HEADER_SIZE;
		if (id->nchannels == 0 || ops == NULL || ops->emulator == NULL)
			return refuse(&w, seq, CTL_ERR_UNSUPPORTED, cnt);
		cfg.mode = p[0];
		cfg.rate = get_be32(p + 1);
		cfg.seed = get_be32(p + 5);
		if (out_of(&r, CTL_FIELD_EMULATOR_MODE, cfg.mode, 0, CTL_EMULATOR_MODE_MAX))
			return refuse_value(&w, seq, &r, cnt);
		err = ops->emulator(&cfg);
		if (err)
			return refuse(&w, seq, err, cnt);
		st->config.emulator = cfg;
		put_header(&w, CTL_MSG_EMULATOR | CTL_RESPONSE, seq);
		return answered(&w, cnt);
	}
	case CTL_MSG_STATUS: {
		struct ctl_status sv;
		memset(&sv, 0, sizeof(sv));
		if (ops != NULL && ops->status != NULL)
			ops->status(&sv);
		put_header(&w, CTL_MSG_STATUS | CTL_RESPONSE, seq);
		put_u8(&w, sv.running);
		put_be32(&w, sv.run);
		put_be32(&w, (uint32_t)(sv.datagrams >> 32));
		put_be32(&w, (uint32_t)sv.datagrams);
		put_be32(&w, (uint32_t)(sv.dropped >> 32));
		put_be32(&w, (uint32_t)sv.dropped);
		put_be32(&w, cnt->requests);
		put_be32(&w, cnt->short_drop + cnt->magic_drop + cnt->response_drop + cnt->bad_version +
		             cnt->bad_type + cnt->bad_length + cnt->refused + cnt->no_room + cnt->stale_seq +
		             cnt->not_allowed + cnt->not_controller + cnt->auth_required + cnt->auth_failed);
		put_be32(&w, sv.port_rx_dropped);
		put_be32(&w, sv.port_tx_dropped);
		put_be32(&w, sv.arp_timeouts);
		put_u8(&w, sv.dst_flags);
		for (size_t i = 0; i < sizeof(sv.dst_mac); i++)
			put_u8(&w, sv.dst_mac[i]);
		put_be32(&w, sv.stale);
		put_be32(&w, cnt->replayed);
		put_be32(&w, lease_left_ms(a, rq->now_ms) ? a->holder : 0);
		put_be32(&w, lease_left_ms(a, rq->now_ms));
		put_be16(&w, id->boots);
		put_u8(&w, id->reset_cause);
		put_be16(&w, id->watchdog_resets);
		put_be32(&w, (uint32_t)rq->now_ms);
		put_be32(&w, sv.rx_fcs_errors);
		put_be32(&w, sv.rx_preamble_errors);
		struct ctl_link lk;
		memset(&lk, 0, sizeof(lk));
		lk.phy_address = CTL_NO_PHY;
		if (ops != NULL && ops->link != NULL)
			ops->link(&lk);
		put_u8(&w, lk.flags);
		put_be16(&w, lk.speed);
		put_be32(&w, lk.losses);
		put_u8(&w, lk.phy_address);
		put_be32(&w, lk.phy_id);
		put_be32(&w, sv.dst_mac_changes);
		put_be32(&w, sv.arp_refused);
		return answered(&w, cnt);
	}
	case CTL_MSG_REBOOT: {
		/* Only if the requester saw this boot: a retransmission reaching the board after the
		 * reset (which emptied the reply cache) finds another count and reboots nothing. */
		uint8_t now = get_be16(req + CTL_HEADER_SIZE) == id->boots;
		if (now)
			st->reboot_pending = 1;
		put_header(&w, CTL_MSG_REBOOT | CTL_RESPONSE, seq);
		put_u8(&w, now);
		put_be16(&w, id->boots);
		return answered(&w, cnt);
	}
	case CTL_MSG_CONFIG_GET:
		put_header(&w, CTL_MSG_CONFIG_GET | CTL_RESPONSE, seq);
		put_config(&w, &st->config);
		return answered(&w, cnt);
	case CTL_MSG_CONFIG_SET: {
		struct refusal r = { 0, 0, 0, 0 };
		err = config_set(&st->config, req + CTL_HEADER_SIZE, id, ops, &r);
		if (err == CTL_ERR_BAD_VALUE)
			return refuse_value(&w, seq, &r, cnt);
		if (err)
			return refuse(&w, seq, err, cnt);
		if (get_be32(req + CTL_HEADER_SIZE) & CFG_NET)
			st->net_pending = 1;  /* The answer leaves from the old addresses first. */
		put_header(&w, CTL_MSG_CONFIG_SET | CTL_RESPONSE, seq);
		put_config(&w, &st->config);
		return answered(&w, cnt);
	}
	case CTL_MSG_CLAIM: {
		uint32_t lease_s = get_be16(req + CTL_HEADER_SIZE);
		struct refusal r = { 0, 0, 0, 0 };
		uint8_t granted;
		if (out_of(&r, CTL_FIELD_LEASE_S, lease_s, 0, CTL_MAX_LEASE_S))
			return refuse_value(&w, seq, &r, cnt);
		err = may_hold(a, src_ip, rq->now_ms, cnt);
		if (err == CTL_ERR_NOT_ALLOWED)
			return error_response(&w, seq, (uint8_t)err, cnt);
		granted = err == 0;  /* Held by another: answered "not granted", with who and how long. */
		if (granted) {
			a->holder = src_ip;
			a->lease_ms = (lease_s ? lease_s : CTL_DEFAULT_LEASE_S) * 1000u;
			a->expires_ms = rq->now_ms + a->lease_ms;
		}
		put_header(&w, CTL_MSG_CLAIM | CTL_RESPONSE, seq);
		put_u8(&w, granted);
		put_be32(&w, a->holder);
		put_be32(&w, lease_left_ms(a, rq->now_ms));
		if (granted)
			return answered(&w, cnt);
		return finish(&w, cnt);
	}
	case CTL_MSG_PTP_STATUS:
		return ptp_status(&w, seq, ops, cnt);
	case CTL_MSG_STREAMS:
		return streams(&w, seq, id, ops, cnt);
	case CTL_MSG_LAUNCH:
		return launch(&w, req + CTL_HEADER_SIZE, seq, ops, cnt);
	case CTL_MSG_PROBE:
		return probe(&w, seq, ops, cnt);
	case CTL_MSG_PROBE_CLEAR:
		return probe_clear(&w, seq, ops, cnt);
	case CTL_MSG_RULES:
		return rules(&w, seq, ops, cnt);
	case CTL_MSG_RULE_SET:
		return rule_set(&w, req + CTL_HEADER_SIZE, seq, id, ops, cnt);
	case CTL_MSG_REG_READ:
		return regs(&w, 0, req + CTL_HEADER_SIZE, seq, ops, cnt);
	case CTL_MSG_REG_WRITE:
		return regs(&w, 1, req + CTL_HEADER_SIZE, seq, ops, cnt);
	case CTL_MSG_RX_STATS:
		return rx_stats(&w, seq, ops, cnt);
	case CTL_MSG_RELEASE:
		err = may_hold(a, src_ip, rq->now_ms, cnt);
		if (err)
			return error_response(&w, seq, (uint8_t)err, cnt);
		a->holder = 0;  /* Released (or already free: releasing twice is no error). */
		put_header(&w, CTL_MSG_RELEASE | CTL_RESPONSE, seq);
		return answered(&w, cnt);
	default:
		cnt->bad_type++;
		return error_response(&w, seq, CTL_ERR_BAD_TYPE, cnt);
	}
}
