/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Parsing order follows linuxptp: minimum length, then magic and version, then message type and
 * its expected length. Every field is read and written through the accessors of the generated
 * ctl_protocol.h (ethdaq.wire.ctlformat's table): each names its offset and byte order, so no
 * offset is written here. One handler per message type (`handlers` and execute() at the end).
 */
#include <string.h>

#include "ctl.h"
#include "hmac_sha256.h"
#include "route.h"

/* Bounded writer: room is checked once per part of an answer, so no caller does pointer arithmetic. */
struct writer {
	uint8_t *buf;
	size_t   cap;
	size_t   len;
	int      overflow;
};

/* n bytes of the answer, zeroed; NULL (and the answer marked too long) if they do not fit. */
static uint8_t *reserve(struct writer *w, size_t n)
{
	uint8_t *p;

	if (w->overflow || n > w->cap - w->len) {
		w->overflow = 1;
		return NULL;
	}
	p = w->buf + w->len;
	memset(p, 0, n);
	w->len += n;
	return p;
}

/* The header of an answer and room for its body of `body` bytes: the body, or NULL. */
static uint8_t *begin(struct writer *w, uint8_t type, uint32_t seq, size_t body)
{
	uint8_t *h = reserve(w, CTL_HEADER_SIZE + body);

	if (h == NULL)
		return NULL;
	ctl_put_header_magic(h, CTL_MAGIC);
	ctl_put_header_version(h, CTL_VERSION);
	ctl_put_header_type(h, type);
	ctl_put_header_seq(h, seq);
	return h + CTL_HEADER_SIZE;
}

static void put_string(struct writer *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	uint8_t *p;

	if (n > CTL_MAX_STRING)
		n = CTL_MAX_STRING;
	p = reserve(w, 1 + n);
	if (p != NULL) {
		p[0] = (uint8_t)n;
		memcpy(p + 1, s, n);
	}
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
	uint8_t *b = begin(w, CTL_MSG_ERROR_RSP, seq, CTL_ERROR_RSP_SIZE);

	if (b != NULL)
		ctl_put_error_rsp_code(b, code);
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
	uint8_t *b;

	cnt->refused++;
	b = begin(w, CTL_MSG_ERROR_RSP, seq, CTL_ERROR_RSP_SIZE + (r->field != 0 ? CTL_REFUSAL_SIZE : 0));
	if (b != NULL) {
		ctl_put_error_rsp_code(b, CTL_ERR_BAD_VALUE);
		if (r->field != 0) {
			b += CTL_ERROR_RSP_SIZE;
			ctl_put_refusal_field(b, r->field);
			ctl_put_refusal_value(b, r->value);
			ctl_put_refusal_min(b, r->lo);
			ctl_put_refusal_max(b, r->hi);
		}
	}
	return finish(w, cnt);
}

static int answered(struct writer *w, struct ctl_counters *cnt)
{
	if (!w->overflow)
		cnt->requests++;
	return finish(w, cnt);
}

/* The stream settings (the block stream_cfg: STREAM_START's body, part of CONFIG). */
static void get_stream_cfg(const uint8_t *p, struct ctl_stream_cfg *cfg)
{
	cfg->dst_ip       = ctl_get_stream_cfg_dst_ip(p);
	cfg->dst_port     = ctl_get_stream_cfg_dst_port(p);
	cfg->payload      = ctl_get_stream_cfg_payload(p);
	cfg->enable       = ctl_get_stream_cfg_enable(p);
	cfg->backpressure = ctl_get_stream_cfg_backpressure(p);
	cfg->gap          = ctl_get_stream_cfg_gap(p);
	memcpy(cfg->dst_mac, ctl_get_stream_cfg_dst_mac(p), sizeof(cfg->dst_mac));
	cfg->flush        = ctl_get_stream_cfg_flush(p);
}

static void put_stream_cfg(uint8_t *p, const struct ctl_stream_cfg *cfg)
{
	ctl_put_stream_cfg_dst_ip(p, cfg->dst_ip);
	ctl_put_stream_cfg_dst_port(p, cfg->dst_port);
	ctl_put_stream_cfg_payload(p, cfg->payload);
	ctl_put_stream_cfg_enable(p, cfg->enable);
	ctl_put_stream_cfg_backpressure(p, cfg->backpressure);
	ctl_put_stream_cfg_gap(p, cfg->gap);
	ctl_put_stream_cfg_dst_mac(p, cfg->dst_mac);
	ctl_put_stream_cfg_flush(p, cfg->flush);
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
	       CTL_HEADER_SIZE + CTL_ERROR_RSP_SIZE + CTL_REFUSAL_SIZE <= CTL_REPLAY_RSP_MAX,
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


/* AUTH at the end of a request of `body` bytes: 0 if it is right and new (then the counter is
 * used up), else the error code. */
static int authenticate(struct ctl_state *st, const uint8_t *req, size_t body)
{
	uint8_t mac[SHA256_DIGEST];
	uint64_t counter = ctl_get_auth_counter(req + body);

	hmac_sha256(st->key, st->key_len, req, body + CTL_AUTH_MAC_OFFSET, NULL, 0, mac);
	if (!equal_ct(mac, ctl_get_auth_mac(req + body), SHA256_DIGEST) || counter <= st->auth_counter) {
		st->cnt.auth_failed++;
		return CTL_ERR_AUTH_FAILED;
	}
	st->auth_counter = counter;
	return 0;
}
_Static_assert(CTL_AUTH_LEN == CTL_AUTH_MAC_OFFSET + SHA256_DIGEST, "AUTH: the counter, then the MAC");

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

/* Handlers ---------------------------------------------------------------------------------------- */

/* One request being answered: body is the request's after the header, w the answer. */
struct call {
	struct ctl_state          *st;
	const struct ctl_request  *rq;
	const uint8_t             *body;
	uint32_t                   seq;
	const struct ctl_identity *id;
	const struct ctl_ops      *ops;
	struct ctl_counters       *cnt;
	struct writer              w;
};

static int unsupported(struct call *c) { return refuse(&c->w, c->seq, CTL_ERR_UNSUPPORTED, c->cnt); }

/* An answer with no body. */
static int empty_answer(struct call *c, uint8_t type)
{
	begin(&c->w, type | CTL_RESPONSE, c->seq, 0);
	return answered(&c->w, c->cnt);
}

/* IDENTIFY's answer after the header: the fixed part, the strings, the channels' declared rates,
 * and from a board with an event channel each channel's event layout. */
static int identify(struct call *c)
{
	const struct ctl_identity *id = c->id;
	uint8_t *b = begin(&c->w, CTL_MSG_IDENTIFY_RSP, c->seq, CTL_IDENTIFY_RSP_SIZE);
	unsigned i;

	if (b != NULL) {
		ctl_put_identify_rsp_mac(b, id->mac);
		ctl_put_identify_rsp_ip(b, id->ip);
		ctl_put_identify_rsp_ctl_port(b, id->ctl_port);
		ctl_put_identify_rsp_sys_clk_hz(b, id->sys_clk_hz);
		ctl_put_identify_rsp_eth_dw(b, id->eth_dw);
		ctl_put_identify_rsp_nchannels(b, id->nchannels);
		ctl_put_identify_rsp_sample_bits(b, id->sample_bits);
		ctl_put_identify_rsp_max_payload(b, id->max_payload);
		ctl_put_identify_rsp_capabilities(b, id->capabilities);
	}
	put_string(&c->w, id->board);
	put_string(&c->w, id->build_id);
	put_string(&c->w, id->ident);
	for (i = 0; i < id->nchannels; i++) {
		b = reserve(&c->w, CTL_IDENTIFY_RATE_SIZE);
		if (b != NULL)
			ctl_put_identify_rate(b, id->max_rates ? id->max_rates[i] : 0u);
	}
	if (id->event_id_bits)
		for (i = 0; i < id->nchannels; i++) {
			b = reserve(&c->w, CTL_IDENTIFY_EVENT_SIZE);
			if (b != NULL)
				ctl_put_identify_event(b, id->event_id_bits[i]);
		}
	return answered(&c->w, c->cnt);
}

static int stream_start(struct call *c)
{
	struct ctl_stream_cfg cfg;
	struct refusal r = { 0, 0, 0, 0 };
	uint32_t run = 0;
	uint8_t *b;
	int err;

	if (c->id->nchannels == 0 || c->ops == NULL || c->ops->stream_start == NULL)
		return unsupported(c);
	get_stream_cfg(c->body + CTL_STREAM_START_REQ_STREAM_CFG_OFFSET, &cfg);
	if (cfg.dst_ip == 0)
		cfg.dst_ip = c->rq->src_ip;
	if (cfg.dst_ip == 0 || !stream_cfg_valid(&cfg, c->id, &r))
		return refuse_value(&c->w, c->seq, &r, c->cnt);
	err = c->ops->stream_start(&cfg, &run);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	b = begin(&c->w, CTL_MSG_STREAM_START | CTL_RESPONSE, c->seq, CTL_STREAM_START_RSP_SIZE);
	if (b != NULL) {
		ctl_put_stream_start_rsp_run(b, run);
		ctl_put_stream_start_rsp_dst_ip(b, cfg.dst_ip);
	}
	return answered(&c->w, c->cnt);
}

static int stream_stop(struct call *c)
{
	uint32_t run = 0;
	uint8_t *b;
	int err;

	if (c->id->nchannels == 0 || c->ops == NULL || c->ops->stream_stop == NULL)
		return unsupported(c);
	err = c->ops->stream_stop(&run);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	b = begin(&c->w, CTL_MSG_STREAM_STOP | CTL_RESPONSE, c->seq, CTL_STREAM_STOP_RSP_SIZE);
	if (b != NULL)
		ctl_put_stream_stop_rsp_run(b, run);
	return answered(&c->w, c->cnt);
}

static int emulator(struct call *c)
{
	struct ctl_emulator_cfg cfg;
	struct refusal r = { 0, 0, 0, 0 };
	int err;

	if (c->id->nchannels == 0 || c->ops == NULL || c->ops->emulator == NULL)
		return unsupported(c);
	cfg.mode = ctl_get_emulator_req_mode(c->body);
	cfg.rate = ctl_get_emulator_req_rate(c->body);
	cfg.seed = ctl_get_emulator_req_seed(c->body);
	if (out_of(&r, CTL_FIELD_EMULATOR_MODE, cfg.mode, 0, CTL_EMULATOR_MODE_MAX))
		return refuse_value(&c->w, c->seq, &r, c->cnt);
	err = c->ops->emulator(&cfg);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	c->st->config.emulator = cfg;
	return empty_answer(c, CTL_MSG_EMULATOR);
}

static uint32_t refused_total(const struct ctl_counters *cnt)
{
	return cnt->short_drop + cnt->magic_drop + cnt->response_drop + cnt->bad_version + cnt->bad_type +
	       cnt->bad_length + cnt->refused + cnt->no_room + cnt->stale_seq + cnt->not_allowed +
	       cnt->not_controller + cnt->auth_required + cnt->auth_failed;
}

static int status(struct call *c)
{
	const struct ctl_access *a = &c->st->access;
	uint64_t now = c->rq->now_ms;
	struct ctl_status sv;
	struct ctl_link lk;
	uint8_t *b;

	memset(&sv, 0, sizeof(sv));
	if (c->ops != NULL && c->ops->status != NULL)
		c->ops->status(&sv);
	memset(&lk, 0, sizeof(lk));
	lk.phy_address = CTL_NO_PHY;
	if (c->ops != NULL && c->ops->link != NULL)
		c->ops->link(&lk);
	b = begin(&c->w, CTL_MSG_STATUS | CTL_RESPONSE, c->seq, CTL_STATUS_RSP_SIZE);
	if (b == NULL)
		return finish(&c->w, c->cnt);
	ctl_put_status_rsp_running(b, sv.running);
	ctl_put_status_rsp_run(b, sv.run);
	ctl_put_status_rsp_datagrams(b, sv.datagrams);
	ctl_put_status_rsp_dropped(b, sv.dropped);
	ctl_put_status_rsp_ctl_requests(b, c->cnt->requests);
	ctl_put_status_rsp_ctl_refused(b, refused_total(c->cnt));
	ctl_put_status_rsp_port_rx_dropped(b, sv.port_rx_dropped);
	ctl_put_status_rsp_port_tx_dropped(b, sv.port_tx_dropped);
	ctl_put_status_rsp_arp_timeouts(b, sv.arp_timeouts);
	ctl_put_status_rsp_dst_flags(b, sv.dst_flags);
	ctl_put_status_rsp_dst_mac(b, sv.dst_mac);
	ctl_put_status_rsp_stale(b, sv.stale);
	ctl_put_status_rsp_ctl_replayed(b, c->cnt->replayed);
	ctl_put_status_rsp_controller_ip(b, lease_left_ms(a, now) ? a->holder : 0);
	ctl_put_status_rsp_lease_ms(b, lease_left_ms(a, now));
	ctl_put_status_rsp_boots(b, c->id->boots);
	ctl_put_status_rsp_reset_cause(b, c->id->reset_cause);
	ctl_put_status_rsp_watchdog_resets(b, c->id->watchdog_resets);
	ctl_put_status_rsp_uptime_ms(b, (uint32_t)now);
	ctl_put_status_rsp_rx_fcs_errors(b, sv.rx_fcs_errors);
	ctl_put_status_rsp_rx_preamble_errors(b, sv.rx_preamble_errors);
	ctl_put_status_rsp_link_flags(b, lk.flags);
	ctl_put_status_rsp_link_speed(b, lk.speed);
	ctl_put_status_rsp_link_losses(b, lk.losses);
	ctl_put_status_rsp_phy_address(b, lk.phy_address);
	ctl_put_status_rsp_phy_id(b, lk.phy_id);
	ctl_put_status_rsp_dst_mac_changes(b, sv.dst_mac_changes);
	ctl_put_status_rsp_arp_refused(b, sv.arp_refused);
	return answered(&c->w, c->cnt);
}

/* Only if the requester saw this boot: a retransmission reaching the board after the reset (which
 * emptied the reply cache) finds another count and reboots nothing. */
static int reboot(struct call *c)
{
	uint8_t now = ctl_get_reboot_req_boots(c->body) == c->id->boots;
	uint8_t *b;

	if (now)
		c->st->reboot_pending = 1;
	b = begin(&c->w, CTL_MSG_REBOOT | CTL_RESPONSE, c->seq, CTL_REBOOT_RSP_SIZE);
	if (b != NULL) {
		ctl_put_reboot_rsp_rebooting(b, now);
		ctl_put_reboot_rsp_boots(b, c->id->boots);
	}
	return answered(&c->w, c->cnt);
}

static int claim(struct call *c)
{
	struct ctl_access *a = &c->st->access;
	uint32_t lease_s = ctl_get_claim_req_lease_s(c->body);
	struct refusal r = { 0, 0, 0, 0 };
	uint8_t granted, *b;
	int err;

	if (out_of(&r, CTL_FIELD_LEASE_S, lease_s, 0, CTL_MAX_LEASE_S))
		return refuse_value(&c->w, c->seq, &r, c->cnt);
	err = may_hold(a, c->rq->src_ip, c->rq->now_ms, c->cnt);
	if (err == CTL_ERR_NOT_ALLOWED)
		return error_response(&c->w, c->seq, (uint8_t)err, c->cnt);
	granted = err == 0;  /* Held by another: answered "not granted", with who and how long. */
	if (granted) {
		a->holder = c->rq->src_ip;
		a->lease_ms = (lease_s ? lease_s : CTL_DEFAULT_LEASE_S) * 1000u;
		a->expires_ms = c->rq->now_ms + a->lease_ms;
	}
	b = begin(&c->w, CTL_MSG_CLAIM | CTL_RESPONSE, c->seq, CTL_CLAIM_RSP_SIZE);
	if (b != NULL) {
		ctl_put_claim_rsp_granted(b, granted);
		ctl_put_claim_rsp_controller_ip(b, a->holder);
		ctl_put_claim_rsp_lease_ms(b, lease_left_ms(a, c->rq->now_ms));
	}
	if (granted)
		return answered(&c->w, c->cnt);
	return finish(&c->w, c->cnt);
}

static int release(struct call *c)
{
	int err = may_hold(&c->st->access, c->rq->src_ip, c->rq->now_ms, c->cnt);

	if (err)
		return error_response(&c->w, c->seq, (uint8_t)err, c->cnt);
	c->st->access.holder = 0;  /* Released (or already free: releasing twice is no error). */
	return empty_answer(c, CTL_MSG_RELEASE);
}

static int ptp_status(struct call *c)
{
	struct ctl_ptp_status p;
	uint8_t *b;

	memset(&p, 0, sizeof(p));
	if (c->ops == NULL || c->ops->ptp_status == NULL || c->ops->ptp_status(&p) != 0)
		return unsupported(c);
	b = begin(&c->w, CTL_MSG_PTP_STATUS | CTL_RESPONSE, c->seq, CTL_PTP_STATUS_RSP_SIZE);
	if (b == NULL)
		return finish(&c->w, c->cnt);
	ctl_put_ptp_status_rsp_state(b, p.state);
	ctl_put_ptp_status_rsp_servo_state(b, p.servo_state);
	ctl_put_ptp_status_rsp_role(b, p.role);
	ctl_put_ptp_status_rsp_transport(b, p.transport);
	ctl_put_ptp_status_rsp_offset_ns(b, p.offset_ns);
	ctl_put_ptp_status_rsp_mean_path_delay_ns(b, p.mean_path_delay_ns);
	ctl_put_ptp_status_rsp_freq_scaled_ppb(b, p.freq_scaled_ppb);
	ctl_put_ptp_status_rsp_clock_identity(b, p.clock_identity);
	ctl_put_ptp_status_rsp_parent_identity(b, p.parent_identity);
	ctl_put_ptp_status_rsp_parent_port(b, p.parent_port);
	ctl_put_ptp_status_rsp_gm_identity(b, p.gm_identity);
	ctl_put_ptp_status_rsp_gm_priority1(b, p.gm_priority1);
	ctl_put_ptp_status_rsp_gm_priority2(b, p.gm_priority2);
	ctl_put_ptp_status_rsp_steps_removed(b, p.steps_removed);
	ctl_put_ptp_status_rsp_utc_offset(b, p.utc_offset);
	ctl_put_ptp_status_rsp_time_flags(b, p.time_flags);
	ctl_put_ptp_status_rsp_steps(b, p.steps);
	ctl_put_ptp_status_rsp_announce_timeouts(b, p.announce_timeouts);
	ctl_put_ptp_status_rsp_servo_samples(b, p.servo_samples);
	ctl_put_ptp_status_rsp_delay_resp_missing(b, p.delay_resp_missing);
	ctl_put_ptp_status_rsp_tx_ts_missing(b, p.tx_ts_missing);
	ctl_put_ptp_status_rsp_faults(b, p.faults);
	ctl_put_ptp_status_rsp_rx_ts_missing(b, p.rx_ts_missing);
	ctl_put_ptp_status_rsp_hw_rx_overflows(b, p.hw_rx_overflows);
	ctl_put_ptp_status_rsp_hw_tx_overflows(b, p.hw_tx_overflows);
	return answered(&c->w, c->cnt);
}

/* CONFIG (the block config), in CONFIG_FIELDS order. */
static void put_config(uint8_t *p, const struct ctl_config *c)
{
	ctl_put_config_ip(p, c->ip);
	ctl_put_config_mac(p, c->mac);
	put_stream_cfg(p + CTL_CONFIG_STREAM_CFG_OFFSET, &c->stream);
	ctl_put_config_emulator_mode(p, c->emulator.mode);
	ctl_put_config_emulator_rate(p, c->emulator.rate);
	ctl_put_config_emulator_seed(p, c->emulator.seed);
	ctl_put_config_ptp_role(p, c->ptp.role);
	ctl_put_config_ptp_transport(p, c->ptp.transport);
	ctl_put_config_ptp_domain(p, c->ptp.domain);
	ctl_put_config_ptp_log_sync(p, c->ptp.log_sync);
	ctl_put_config_ptp_log_announce(p, c->ptp.log_announce);
	ctl_put_config_ptp_log_delay_req(p, c->ptp.log_delay_req);
	ctl_put_config_ptp_priority1(p, c->ptp.priority1);
	ctl_put_config_ptp_priority2(p, c->ptp.priority2);
	ctl_put_config_netmask(p, c->netmask);
	ctl_put_config_gateway(p, c->gateway);
}

static void get_config(const uint8_t *p, struct ctl_config *c)
{
	c->ip = ctl_get_config_ip(p);
	memcpy(c->mac, ctl_get_config_mac(p), sizeof(c->mac));
	get_stream_cfg(p + CTL_CONFIG_STREAM_CFG_OFFSET, &c->stream);
	c->emulator.mode = ctl_get_config_emulator_mode(p);
	c->emulator.rate = ctl_get_config_emulator_rate(p);
	c->emulator.seed = ctl_get_config_emulator_seed(p);
	c->ptp.role = ctl_get_config_ptp_role(p);
	c->ptp.transport = ctl_get_config_ptp_transport(p);
	c->ptp.domain = ctl_get_config_ptp_domain(p);
	c->ptp.log_sync = ctl_get_config_ptp_log_sync(p);
	c->ptp.log_announce = ctl_get_config_ptp_log_announce(p);
	c->ptp.log_delay_req = ctl_get_config_ptp_log_delay_req(p);
	c->ptp.priority1 = ctl_get_config_ptp_priority1(p);
	c->ptp.priority2 = ctl_get_config_ptp_priority2(p);
	c->netmask = ctl_get_config_netmask(p);
	c->gateway = ctl_get_config_gateway(p);
}

static int config_answer(struct call *c, uint8_t type)
{
	uint8_t *b = begin(&c->w, type | CTL_RESPONSE, c->seq, CTL_CONFIG_SIZE);

	if (b != NULL)
		put_config(b, &c->st->config);
	return answered(&c->w, c->cnt);
}

static int config_get(struct call *c) { return config_answer(c, CTL_MSG_CONFIG_GET); }

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
static int config_apply(struct ctl_config *conf, const uint8_t *p, const struct ctl_identity *id,
			const struct ctl_ops *ops, struct refusal *r)
{
	uint32_t mask = ctl_get_config_set_req_mask(p);
	struct ctl_config in, next = *conf;
	int err;

	if (out_of(r, CTL_FIELD_CONFIG_MASK, mask, 0, (1u << CTL_CONFIG_NFIELDS) - 1u))
		return CTL_ERR_BAD_VALUE;
	if ((mask & CTL_CONFIG_FIXED) ||
	    ((mask & CFG_NET) && !(id->capabilities & CTL_CAP_NET_CONFIG)) ||
	    ((mask & (CFG_STREAM | CFG_EMULATOR)) && (id->nchannels == 0 || ops == NULL || ops->emulator == NULL)) ||
	    ((mask & CFG_PTP) && (ops == NULL || ops->ptp_config == NULL)))
		return CTL_ERR_UNSUPPORTED;
	get_config(p + CTL_CONFIG_SET_REQ_CONFIG_OFFSET, &in);
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

static int config_set(struct call *c)
{
	struct refusal r = { 0, 0, 0, 0 };
	int err = config_apply(&c->st->config, c->body, c->id, c->ops, &r);

	if (err == CTL_ERR_BAD_VALUE)
		return refuse_value(&c->w, c->seq, &r, c->cnt);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	if (ctl_get_config_set_req_mask(c->body) & CFG_NET)
		c->st->net_pending = 1;  /* The answer leaves from the old addresses first. */
	return config_answer(c, CTL_MSG_CONFIG_SET);
}

static int streams(struct call *c)
{
	struct ctl_stream_counters s[CTL_MAX_STREAMS];
	uint32_t run = 0;
	uint8_t *b;
	int n;

	memset(s, 0, sizeof(s));
	if (c->id->nchannels == 0 || c->ops == NULL || c->ops->streams == NULL)
		return unsupported(c);
	n = c->ops->streams(s, &run);
	if (n < 0 || n > (int)CTL_MAX_STREAMS)
		return unsupported(c);
	b = begin(&c->w, CTL_MSG_STREAMS | CTL_RESPONSE, c->seq, CTL_STREAMS_RSP_SIZE);
	if (b == NULL)
		return finish(&c->w, c->cnt);
	ctl_put_streams_rsp_run(b, run);
	ctl_put_streams_rsp_nstreams(b, (uint8_t)n);
	for (unsigned i = 0; i < (unsigned)n; i++) {  /* Records past the build's streams stay zero. */
		ctl_put_streams_rsp_stream_flags(b, i, (uint8_t)((s[i].flags & CTL_STREAM_ENABLED) | CTL_STREAM_PRESENT));
		ctl_put_streams_rsp_stream_datagrams(b, i, s[i].datagrams);
		ctl_put_streams_rsp_stream_bytes(b, i, s[i].bytes);
		ctl_put_streams_rsp_stream_dropped(b, i, s[i].dropped);
	}
	return answered(&c->w, c->cnt);
}
_Static_assert(CTL_STREAMS_RSP_STREAM_COUNT == CTL_MAX_STREAMS, "STREAMS has a record per stream");

static int launch(struct call *c)
{
	const uint8_t *p = c->body;
	struct ctl_launch l;
	struct ctl_launch_status s;
	struct refusal r = { 0, 0, 0, 0 };
	uint8_t *b;
	int err;

	if (c->ops == NULL || c->ops->launch == NULL)
		return unsupported(c);
	l.op        = ctl_get_launch_req_launch_op(p);
	l.flags     = ctl_get_launch_req_launch_flags(p);
	l.sec       = ctl_get_launch_req_sec(p);
	l.ns        = ctl_get_launch_req_ns(p);
	l.period    = ctl_get_launch_req_period(p);
	l.count     = ctl_get_launch_req_count(p);
	l.guard     = ctl_get_launch_req_guard(p);
	l.frame_len = ctl_get_launch_req_frame_len(p);
	l.frame     = ctl_get_launch_req_frame(p);
	if (out_of(&r, CTL_FIELD_LAUNCH_OP, l.op, 0, CTL_LAUNCH_QUERY) ||
	    out_of(&r, CTL_FIELD_LAUNCH_FLAGS, l.flags, 0, CTL_LAUNCH_RELATIVE) ||
	    out_of(&r, CTL_FIELD_SEC, l.sec > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)l.sec, 0, ((int64_t)1 << 48) - 1) ||
	    out_of(&r, CTL_FIELD_NS, l.ns, 0, 999999999) || out_of(&r, CTL_FIELD_PERIOD, l.period, 0, 999999999) ||
	    out_of(&r, CTL_FIELD_FRAME_LEN, l.frame_len, l.op == CTL_LAUNCH_ARM ? CTL_LAUNCH_FRAME_MIN : 0,
		   CTL_LAUNCH_FRAME_MAX))
		return refuse_value(&c->w, c->seq, &r, c->cnt);
	memset(&s, 0, sizeof(s));
	err = c->ops->launch(&l, &s);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	b = begin(&c->w, CTL_MSG_LAUNCH | CTL_RESPONSE, c->seq, CTL_LAUNCH_RSP_SIZE);
	if (b != NULL) {
		ctl_put_launch_rsp_armed(b, s.armed);
		ctl_put_launch_rsp_guard(b, s.guard);
		ctl_put_launch_rsp_lead(b, s.lead);
		ctl_put_launch_rsp_cycle_ps(b, s.cycle_ps);
		ctl_put_launch_rsp_sent(b, s.sent);
		ctl_put_launch_rsp_missed_past(b, s.missed_past);
		ctl_put_launch_rsp_missed_busy(b, s.missed_busy);
		ctl_put_launch_rsp_first_sec(b, s.first_sec);
		ctl_put_launch_rsp_first_ns(b, s.first_ns);
	}
	return answered(&c->w, c->cnt);
}

static int probe(struct call *c)
{
	static struct ctl_probe_report r;  /* 550 bytes: not on the firmware's small stack. */
	uint8_t *b;
	int err;

	if (c->ops == NULL || c->ops->probe == NULL)
		return unsupported(c);
	memset(&r, 0, sizeof(r));
	err = c->ops->probe(0, &r);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	b = begin(&c->w, CTL_MSG_PROBE | CTL_RESPONSE, c->seq, CTL_PROBE_RSP_SIZE);
	if (b == NULL)
		return finish(&c->w, c->cnt);
	ctl_put_probe_rsp_cycle_ps(b, r.cycle_ps);
	ctl_put_probe_rsp_classes(b, r.present & ((1u << CTL_PROBE_MAX_CLASSES) - 1u));
	ctl_put_probe_rsp_tx_unpaired(b, r.tx_unpaired);
	ctl_put_probe_rsp_tx_overflows(b, r.tx_overflows);
	ctl_put_probe_rsp_rx_unpaired(b, r.rx_unpaired);
	ctl_put_probe_rsp_rx_overflows(b, r.rx_overflows);
	for (unsigned i = 0; i < CTL_PROBE_MAX_CLASSES; i++) {
		/* A class the build does not measure reads as zeros, whatever the driver left. */
		const struct ctl_probe_class *k = &r.classes[i];
		if (!(r.present >> i & 1u))
			continue;
		ctl_put_probe_rsp_class_count(b, i, k->count);
		ctl_put_probe_rsp_class_sum(b, i, k->sum);
		ctl_put_probe_rsp_class_sumsq(b, i, k->sumsq);
		ctl_put_probe_rsp_class_min(b, i, k->min);
		ctl_put_probe_rsp_class_max(b, i, k->max);
		for (unsigned j = 0; j < CTL_PROBE_NBINS; j++)
			ctl_put_probe_rsp_class_bin(b, i, j, k->bins[j]);
	}
	return answered(&c->w, c->cnt);
}
_Static_assert(CTL_PROBE_RSP_CLASS_COUNT == CTL_PROBE_MAX_CLASSES && CTL_PROBE_RSP_CLASS_BIN_COUNT == CTL_PROBE_NBINS,
	       "PROBE has a record per class and a bin per histogram bin");

static int probe_clear(struct call *c)
{
	int err;

	if (c->ops == NULL || c->ops->probe == NULL)
		return unsupported(c);
	err = c->ops->probe(1, NULL);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	return empty_answer(c, CTL_MSG_PROBE_CLEAR);
}

static int rules(struct call *c)
{
	static struct ctl_rules_report r;
	uint8_t *b;
	int err;

	if (c->ops == NULL || c->ops->rules == NULL)
		return unsupported(c);
	memset(&r, 0, sizeof(r));
	err = c->ops->rules(NULL, &r);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	if (r.nrules > CTL_MAX_RULES)
		r.nrules = CTL_MAX_RULES;
	b = begin(&c->w, CTL_MSG_RULES | CTL_RESPONSE, c->seq, CTL_RULES_RSP_SIZE);
	if (b == NULL)
		return finish(&c->w, c->cnt);
	ctl_put_rules_rsp_nrules(b, r.nrules);
	ctl_put_rules_rsp_unmatched(b, r.unmatched);
	ctl_put_rules_rsp_gate_error(b, r.gate_error);
	ctl_put_rules_rsp_gate_full(b, r.gate_full);
	ctl_put_rules_rsp_gate_oversize(b, r.gate_oversize);
	for (unsigned i = 0; i < r.nrules; i++) {  /* Records past the build's rules stay zero. */
		const struct ctl_rule *k = &r.rules[i];
		ctl_put_rules_rsp_rule_enable(b, i, k->enable);
		ctl_put_rules_rsp_rule_action(b, i, k->action);
		ctl_put_rules_rsp_rule_match(b, i, k->match);
		ctl_put_rules_rsp_rule_ethertype(b, i, k->ethertype);
		ctl_put_rules_rsp_rule_proto(b, i, k->proto);
		ctl_put_rules_rsp_rule_port(b, i, k->port);
		ctl_put_rules_rsp_rule_src_ip(b, i, k->src_ip);
		ctl_put_rules_rsp_rule_matched(b, i, k->matched);
		ctl_put_rules_rsp_rule_refused(b, i, k->refused);
	}
	return answered(&c->w, c->cnt);
}
_Static_assert(CTL_RULES_RSP_RULE_COUNT == CTL_MAX_RULES, "RULES has a record per rule");

/* The checks protocol.check_rule makes, before the board sees the rule. */
static int rule_set(struct call *c)
{
	const uint8_t *p = c->body;
	struct ctl_rule r;
	struct refusal why = { 0, 0, 0, 0 };
	uint8_t *b;
	int err;

	if (c->ops == NULL || c->ops->rules == NULL)
		return unsupported(c);
	memset(&r, 0, sizeof(r));
	r.index     = ctl_get_rule_rule_index(p);
	r.enable    = ctl_get_rule_rule_enable(p);
	r.action    = ctl_get_rule_rule_action(p);
	r.match     = ctl_get_rule_rule_match(p);
	r.ethertype = ctl_get_rule_rule_ethertype(p);
	r.proto     = ctl_get_rule_rule_proto(p);
	r.port      = ctl_get_rule_rule_port(p);
	r.src_ip    = ctl_get_rule_rule_src_ip(p);
	if (out_of(&why, CTL_FIELD_RULE_INDEX, r.index, 0, CTL_MAX_RULES - 1) ||
	    out_of(&why, CTL_FIELD_RULE_ENABLE, r.enable, 0, 1) ||
	    out_of(&why, CTL_FIELD_RULE_ACTION, r.action, 0, CTL_RULE_DROP) ||
	    out_of(&why, CTL_FIELD_RULE_MATCH, r.match, 0,
		   CTL_RULE_MATCH_TYPE | CTL_RULE_MATCH_PROTO | CTL_RULE_MATCH_PORT | CTL_RULE_MATCH_SRC))
		return refuse_value(&c->w, c->seq, &why, c->cnt);
	/* A rule that takes frames from the CPU must name a UDP port, and not one the board needs. */
	if (r.enable && r.action != CTL_RULE_CPU &&
	    (!(r.match & CTL_RULE_MATCH_PORT) || r.port == c->id->ctl_port || r.port == 319 || r.port == 320))
		return refuse(&c->w, c->seq, CTL_ERR_BAD_VALUE, c->cnt);
	err = c->ops->rules(&r, NULL);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	b = begin(&c->w, CTL_MSG_RULE_SET | CTL_RESPONSE, c->seq, CTL_RULE_SIZE);
	if (b != NULL) {
		ctl_put_rule_rule_index(b, r.index);
		ctl_put_rule_rule_enable(b, r.enable);
		ctl_put_rule_rule_action(b, r.action);
		ctl_put_rule_rule_match(b, r.match);
		ctl_put_rule_rule_ethertype(b, r.ethertype);
		ctl_put_rule_rule_proto(b, r.proto);
		ctl_put_rule_rule_port(b, r.port);
		ctl_put_rule_rule_src_ip(b, r.src_ip);
	}
	return answered(&c->w, c->cnt);
}

/* REG_READ (offset, count) and REG_WRITE (the block reg_words: offset, count, CTL_REG_MAX_WORDS
 * words); both begin with offset and count. The board's ops check the words are the front-end's. */
_Static_assert(CTL_REG_READ_REQ_REG_OFFSET_OFFSET == CTL_REG_WORDS_REG_OFFSET_OFFSET &&
	       CTL_REG_READ_REQ_REG_COUNT_OFFSET == CTL_REG_WORDS_REG_COUNT_OFFSET &&
	       CTL_REG_WORDS_WORDS_COUNT == CTL_REG_MAX_WORDS, "REG_READ and REG_WRITE begin alike");
static int regs(struct call *c, int write)
{
	uint32_t words[CTL_REG_MAX_WORDS];
	struct refusal r = { 0, 0, 0, 0 };
	uint16_t offset;
	uint8_t count, *b;
	int err;

	if (c->ops == NULL || c->ops->regs == NULL)
		return unsupported(c);
	offset = ctl_get_reg_words_reg_offset(c->body);
	count  = ctl_get_reg_words_reg_count(c->body);
	if (out_of(&r, CTL_FIELD_REG_COUNT, count, 1, CTL_REG_MAX_WORDS) || (offset & 3u))
		return refuse_value(&c->w, c->seq, &r, c->cnt);
	memset(words, 0, sizeof(words));
	if (write)
		for (unsigned i = 0; i < count; i++)
			words[i] = ctl_get_reg_words_words(c->body, i);
	err = c->ops->regs(write, offset, count, words);
	if (err)
		return refuse(&c->w, c->seq, err, c->cnt);
	b = begin(&c->w, (uint8_t)((write ? CTL_MSG_REG_WRITE : CTL_MSG_REG_READ) | CTL_RESPONSE), c->seq,
		  CTL_REG_WORDS_SIZE);
	if (b != NULL) {
		ctl_put_reg_words_reg_offset(b, offset);
		ctl_put_reg_words_reg_count(b, count);
		for (unsigned i = 0; i < count; i++)  /* The unused words stay zero. */
			ctl_put_reg_words_words(b, i, words[i]);
	}
	return answered(&c->w, c->cnt);
}


/* RX_STATS: every counter of protocol.py's RX_COUNTERS this build has, in code order: the
 * handler's own (its drops of malformed requests, before anything else about them is known) from
 * cnt, the others from the board. Read-only, so its answer may be longer than the reply cache
 * keeps (answered afresh). */
static int rx_stats(struct call *c)
{
	static const uint8_t codes[] = CTL_RX_COUNTER_CODES;
	_Static_assert(sizeof(codes) <= CTL_RX_STATS_MAX, "RX_STATS: more counters than its answer holds");
	const struct ctl_counters *cnt = c->cnt;
	uint8_t n = 0, *b = begin(&c->w, CTL_MSG_RX_STATS | CTL_RESPONSE, c->seq, CTL_RX_STATS_RSP_SIZE);

	for (size_t i = 0; i < sizeof(codes); i++) {
		uint64_t v = 0;
		int have = 1;
		uint8_t *rec;

		switch (codes[i]) {
		case CTL_RX_COUNTER_CTL_SHORT:    v = cnt->short_drop;    break;
		case CTL_RX_COUNTER_CTL_MAGIC:    v = cnt->magic_drop;    break;
		case CTL_RX_COUNTER_CTL_RESPONSE: v = cnt->response_drop; break;
		case CTL_RX_COUNTER_CTL_VERSION:  v = cnt->bad_version;   break;
		case CTL_RX_COUNTER_CTL_TYPE:     v = cnt->bad_type;      break;
		case CTL_RX_COUNTER_CTL_LENGTH:   v = cnt->bad_length;    break;
		default:
			have = c->ops != NULL && c->ops->rx_counter != NULL && c->ops->rx_counter(codes[i], &v);
			break;
		}
		if (!have)
			continue;
		rec = reserve(&c->w, CTL_RX_STATS_RECORD_SIZE);
		if (rec != NULL) {
			ctl_put_rx_stats_record_code(rec, codes[i]);
			ctl_put_rx_stats_record_value(rec, v);
		}
		n++;
	}
	if (b != NULL && !c->w.overflow)
		ctl_put_rx_stats_rsp_count(b, n);
	return answered(&c->w, c->cnt);
}

/* Every message type: its request's length without AUTH (header included) and who may send it
 * (CTL_ACCESS_*), both from ethdaq.wire.ctlformat's table. execute() calls its handler: a switch,
 * not pointers, so that the compiler inlines each handler at its one call (smaller firmware). */
static const struct handler {
	uint8_t type;
	uint8_t length;
	uint8_t access;
} handlers[] = {
	{ CTL_MSG_IDENTIFY,     CTL_IDENTIFY_REQ_LENGTH,     CTL_IDENTIFY_ACCESS },
	{ CTL_MSG_STREAM_START, CTL_STREAM_START_REQ_LENGTH, CTL_STREAM_START_ACCESS },
	{ CTL_MSG_STREAM_STOP,  CTL_STREAM_STOP_REQ_LENGTH,  CTL_STREAM_STOP_ACCESS },
	{ CTL_MSG_EMULATOR,     CTL_EMULATOR_REQ_LENGTH,     CTL_EMULATOR_ACCESS },
	{ CTL_MSG_STATUS,       CTL_STATUS_REQ_LENGTH,       CTL_STATUS_ACCESS },
	{ CTL_MSG_CLAIM,        CTL_CLAIM_REQ_LENGTH,        CTL_CLAIM_ACCESS },
	{ CTL_MSG_RELEASE,      CTL_RELEASE_REQ_LENGTH,      CTL_RELEASE_ACCESS },
	{ CTL_MSG_PTP_STATUS,   CTL_PTP_STATUS_REQ_LENGTH,   CTL_PTP_STATUS_ACCESS },
	{ CTL_MSG_REBOOT,       CTL_REBOOT_REQ_LENGTH,       CTL_REBOOT_ACCESS },
	{ CTL_MSG_CONFIG_GET,   CTL_CONFIG_GET_REQ_LENGTH,   CTL_CONFIG_GET_ACCESS },
	{ CTL_MSG_CONFIG_SET,   CTL_CONFIG_SET_REQ_LENGTH,   CTL_CONFIG_SET_ACCESS },
	{ CTL_MSG_STREAMS,      CTL_STREAMS_REQ_LENGTH,      CTL_STREAMS_ACCESS },
	{ CTL_MSG_LAUNCH,       CTL_LAUNCH_REQ_LENGTH,       CTL_LAUNCH_ACCESS },
	{ CTL_MSG_PROBE,        CTL_PROBE_REQ_LENGTH,        CTL_PROBE_ACCESS },
	{ CTL_MSG_PROBE_CLEAR,  CTL_PROBE_CLEAR_REQ_LENGTH,  CTL_PROBE_CLEAR_ACCESS },
	{ CTL_MSG_RULES,        CTL_RULES_REQ_LENGTH,        CTL_RULES_ACCESS },
	{ CTL_MSG_RULE_SET,     CTL_RULE_SET_REQ_LENGTH,     CTL_RULE_SET_ACCESS },
	{ CTL_MSG_REG_READ,     CTL_REG_READ_REQ_LENGTH,     CTL_REG_READ_ACCESS },
	{ CTL_MSG_REG_WRITE,    CTL_REG_WRITE_REQ_LENGTH,    CTL_REG_WRITE_ACCESS },
	{ CTL_MSG_RX_STATS,     CTL_RX_STATS_REQ_LENGTH,     CTL_RX_STATS_ACCESS },
};
_Static_assert(sizeof(handlers) / sizeof(handlers[0]) == CTL_NMESSAGES, "a handler for every message type");

static const struct handler *handler_of(uint8_t type)
{
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
		if (handlers[i].type == type)
			return &handlers[i];
	return NULL;
}

size_t ctl_request_length(uint8_t type)
{
	const struct handler *h = handler_of(type);

	return h != NULL ? h->length : 0;
}

/* Everything that changes the board's state is the controller's alone, and signed if the board
 * has a key: 0 if this request may run, else the error code. */
static int permitted(struct call *c, const struct handler *h, int authed)
{
	uint8_t access = h->access;

	if (h->type == CTL_MSG_LAUNCH && ctl_get_launch_req_launch_op(c->body) == CTL_LAUNCH_QUERY)
		access = CTL_ACCESS_ANYBODY;  /* Read-only. */
	if (access == CTL_ACCESS_ANYBODY)
		return 0;
	if (c->st->key_len > 0 && !authed) {
		c->cnt->auth_required++;
		return CTL_ERR_AUTH_REQUIRED;
	}
	if (access == CTL_ACCESS_CLAIM)
		return 0;  /* CLAIM and RELEASE check the controller themselves. */
	return take(&c->st->access, c->rq->src_ip, c->rq->now_ms, c->cnt);
}

static int execute(struct ctl_state *st, const struct ctl_request *rq, uint8_t *rsp, size_t rsp_cap,
		   const struct handler *h, uint32_t seq, int authed, const struct ctl_identity *id,
		   const struct ctl_ops *ops)
{
	struct call c = { st, rq, rq->data + CTL_HEADER_SIZE, seq, id, ops, &st->cnt, { rsp, rsp_cap, 0, 0 } };
	int err = permitted(&c, h, authed);

	if (err)
		return error_response(&c.w, seq, (uint8_t)err, c.cnt);
	switch (h->type) {
	case CTL_MSG_IDENTIFY:     return identify(&c);
	case CTL_MSG_STREAM_START: return stream_start(&c);
	case CTL_MSG_STREAM_STOP:  return stream_stop(&c);
	case CTL_MSG_EMULATOR:     return emulator(&c);
	case CTL_MSG_STATUS:       return status(&c);
	case CTL_MSG_CLAIM:        return claim(&c);
	case CTL_MSG_RELEASE:      return release(&c);
	case CTL_MSG_PTP_STATUS:   return ptp_status(&c);
	case CTL_MSG_REBOOT:       return reboot(&c);
	case CTL_MSG_CONFIG_GET:   return config_get(&c);
	case CTL_MSG_CONFIG_SET:   return config_set(&c);
	case CTL_MSG_STREAMS:      return streams(&c);
	case CTL_MSG_LAUNCH:       return launch(&c);
	case CTL_MSG_PROBE:        return probe(&c);
	case CTL_MSG_PROBE_CLEAR:  return probe_clear(&c);
	case CTL_MSG_RULES:        return rules(&c);
	case CTL_MSG_RULE_SET:     return rule_set(&c);
	case CTL_MSG_REG_READ:     return regs(&c, 0);
	case CTL_MSG_REG_WRITE:    return regs(&c, 1);
	case CTL_MSG_RX_STATS:     return rx_stats(&c);
	default:  /* Not reached: ctl_handle answers a type without a handler first. */
		c.cnt->bad_type++;
		return error_response(&c.w, seq, CTL_ERR_BAD_TYPE, c.cnt);
	}
}

int ctl_handle(struct ctl_state *st, const struct ctl_request *rq, uint8_t *rsp, size_t rsp_cap,
               const struct ctl_identity *id, const struct ctl_ops *ops)
{
	const uint8_t *req = rq->data;
	size_t req_len = rq->len, expected;
	const struct handler *handler;
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
	if (ctl_get_header_magic(req) != CTL_MAGIC) {
		cnt->magic_drop++;
		return 0;
	}
	version = ctl_get_header_version(req);
	type    = ctl_get_header_type(req);
	seq     = ctl_get_header_seq(req);
	if (type & CTL_RESPONSE) {
		cnt->response_drop++;
		return 0;
	}
	if (version != CTL_VERSION) {
		cnt->bad_version++;
		return error_response(&w, seq, CTL_ERR_BAD_VERSION, cnt);
	}

	handler = handler_of(type);
	if (handler == NULL) {
		cnt->bad_type++;
		return error_response(&w, seq, CTL_ERR_BAD_TYPE, cnt);
	}
	expected = handler->length;
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
	n = execute(st, rq, rsp, rsp_cap, handler, seq, authed, id, ops);
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
