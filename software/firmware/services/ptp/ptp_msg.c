/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Packet bytes are only touched through a cursor that carries the buffer's length: reading past
 * the end yields 0 and writing past it nothing, so no caller does pointer arithmetic on packet
 * data. The parser checks lengths first and the builder sizes the message first, so in practice
 * those fallbacks are never taken. Fields are read and written in wire order.
 */
#include "ptp_msg.h"

static const char *const drop_names[PTP_DROP_COUNT] = {
	"short", "version", "type", "type_length", "length", "domain", "own", "unsupported",
	"no_timestamp", "state", "not_parent", "not_ours", "sequence", "announce",
};

const char *ptp_drop_name(unsigned reason)
{
	return reason < PTP_DROP_COUNT ? drop_names[reason] : "?";
}

const char *ptp_msg_type_name(unsigned type)
{
	switch (type) {
	case PTP_MSG_SYNC:         return "sync";
	case PTP_MSG_DELAY_REQ:    return "delay_req";
	case PTP_MSG_PDELAY_REQ:   return "pdelay_req";
	case PTP_MSG_PDELAY_RESP:  return "pdelay_resp";
	case PTP_MSG_FOLLOW_UP:    return "follow_up";
	case PTP_MSG_DELAY_RESP:   return "delay_resp";
	case PTP_MSG_PDELAY_RESP_FOLLOW_UP: return "pdelay_resp_fup";
	case PTP_MSG_ANNOUNCE:     return "announce";
	case PTP_MSG_SIGNALING:    return "signaling";
	case PTP_MSG_MANAGEMENT:   return "management";
	default:                   return "reserved";
	}
}

size_t ptp_msg_min_len(unsigned type)
{
	switch (type) {
	case PTP_MSG_SYNC:
	case PTP_MSG_DELAY_REQ:
	case PTP_MSG_FOLLOW_UP:   return PTP_SYNC_LEN;
	case PTP_MSG_DELAY_RESP:  return PTP_DELAY_RESP_LEN;
	case PTP_MSG_PDELAY_REQ:
	case PTP_MSG_PDELAY_RESP:
	case PTP_MSG_PDELAY_RESP_FOLLOW_UP: return PTP_PDELAY_LEN;
	case PTP_MSG_ANNOUNCE:    return PTP_ANNOUNCE_LEN;
	case PTP_MSG_SIGNALING:   return PTP_SIGNALING_LEN;
	case PTP_MSG_MANAGEMENT:  return PTP_MANAGEMENT_LEN;
	default:                  return 0;
	}
}

void ptp_copy(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	while (n--)
		*d++ = *s++;
}

int ptp_compare(const void *a, const void *b, size_t n)
{
	const uint8_t *x = a, *y = b;
	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x < *y ? -1 : 1;
	return 0;
}

int ptp_port_identity_equal(const struct ptp_port_identity *a, const struct ptp_port_identity *b)
{
	return a->port_number == b->port_number && !ptp_compare(a->clock_identity, b->clock_identity, 8);
}

/* --- bounded sequential access ------------------------------------------------------------------ */

struct cursor {
	const uint8_t *in;    /* reading */
	uint8_t       *out;   /* or writing */
	size_t         len;
	size_t         pos;
};

/* Next n <= 4 bytes, big-endian. 32-bit on purpose: 64-bit shifts are long on rv32i. */
static uint32_t get(struct cursor *c, unsigned n)
{
	uint32_t v = 0;
	while (n--)
		v = (v << 8) | (c->pos < c->len ? c->in[c->pos++] : 0);
	return v;
}

static void get_bytes(struct cursor *c, uint8_t *dst, unsigned n)
{
	while (n--)
		*dst++ = (uint8_t)get(c, 1);
}

static void get_time(struct cursor *c, struct ptp_time *t)
{
	t->sec = (uint64_t)get(c, 2) << 32;
	t->sec |= get(c, 4);
	t->nsec = get(c, 4);
}

static void get_port_identity(struct cursor *c, struct ptp_port_identity *id)
{
	get_bytes(c, id->clock_identity, 8);
	id->port_number = (uint16_t)get(c, 2);
}

static void put(struct cursor *c, unsigned n, uint32_t v)
{
	while (n--)
		if (c->pos < c->len)
			c->out[c->pos++] = (uint8_t)(v >> (8 * n));
}

static void put_bytes(struct cursor *c, const uint8_t *src, unsigned n)
{
	while (n--)
		put(c, 1, *src++);
}

static void put_time(struct cursor *c, const struct ptp_time *t)
{
	put(c, 2, (uint32_t)(t->sec >> 32));
	put(c, 4, (uint32_t)t->sec);
	put(c, 4, t->nsec);
}

static void put_port_identity(struct cursor *c, const struct ptp_port_identity *id)
{
	put_bytes(c, id->clock_identity, 8);
	put(c, 2, id->port_number);
}

/* --- parse ------------------------------------------------------------------------------------ */

int ptp_msg_parse(const uint8_t *buf, size_t len, struct ptp_msg *m)
{
	struct ptp_header *h = &m->hdr;
	struct cursor c = { buf, NULL, len, 0 };
	size_t min;
	uint32_t b0;

	if (len < PTP_HEADER_LEN)
		return PTP_DROP_SHORT;
	b0 = get(&c, 1);
	/* The high nibble is minorVersionPTP in 1588-2019 (ptp4l 4.x sends 0x12): only versionPTP. */
	h->version = (uint8_t)(get(&c, 1) & 0x0f);
	if (h->version != PTP_VERSION)
		return PTP_DROP_VERSION;
	h->transport_specific = (uint8_t)(b0 >> 4);
	h->type = (uint8_t)(b0 & 0x0f);
	min = ptp_msg_min_len(h->type);
	if (min == 0)
		return PTP_DROP_TYPE;
	if (len < min)
		return PTP_DROP_TYPE_LENGTH;
	h->length = (uint16_t)get(&c, 2);
	if (h->length > len || h->length < min)
		return PTP_DROP_LENGTH;
	c.len = h->length;  /* From here on nothing past messageLength is read. */

	h->domain = (uint8_t)get(&c, 1);
	get(&c, 1);                                   /* reserved */
	h->flags = (uint16_t)get(&c, 2);
	h->correction = (int64_t)((uint64_t)get(&c, 4) << 32);
	h->correction = (int64_t)((uint64_t)h->correction | get(&c, 4));
	get(&c, 4);                                   /* reserved */
	get_port_identity(&c, &h->source);
	h->sequence_id = (uint16_t)get(&c, 2);
	h->control = (uint8_t)get(&c, 1);
	h->log_interval = (int8_t)get(&c, 1);

	switch (h->type) {
	case PTP_MSG_SYNC:
	case PTP_MSG_DELAY_REQ:
	case PTP_MSG_FOLLOW_UP:
	case PTP_MSG_DELAY_RESP:
	case PTP_MSG_ANNOUNCE:
		get_time(&c, &m->ts);
		break;
	default:
		return -1;  /* Types the stack does not handle: the header is all it needs. */
	}
	if (h->type == PTP_MSG_DELAY_RESP)
		get_port_identity(&c, &m->requesting);
	if (h->type == PTP_MSG_ANNOUNCE) {
		struct ptp_announce *a = &m->announce;
		a->utc_offset = (int16_t)get(&c, 2);
		get(&c, 1);                           /* reserved */
		a->gm_priority1 = (uint8_t)get(&c, 1);
		a->gm_quality.clock_class = (uint8_t)get(&c, 1);
		a->gm_quality.clock_accuracy = (uint8_t)get(&c, 1);
		a->gm_quality.offset_scaled_log_variance = (uint16_t)get(&c, 2);
		a->gm_priority2 = (uint8_t)get(&c, 1);
		get_bytes(&c, a->gm_identity, 8);
		a->steps_removed = (uint16_t)get(&c, 2);
		a->time_source = (uint8_t)get(&c, 1);
	}
	return -1;
}

/* --- build ------------------------------------------------------------------------------------ */

static uint8_t control_field(unsigned type)
{
	switch (type) {  /* Table 23: deprecated, still expected by version 1 hardware. */
	case PTP_MSG_SYNC:       return 0;
	case PTP_MSG_DELAY_REQ:  return 1;
	case PTP_MSG_FOLLOW_UP:  return 2;
	case PTP_MSG_DELAY_RESP: return 3;
	case PTP_MSG_MANAGEMENT: return 4;
	default:                 return 5;
	}
}

size_t ptp_msg_build(uint8_t *buf, size_t cap, const struct ptp_msg *m)
{
	const struct ptp_header *h = &m->hdr;
	struct cursor c = { NULL, buf, 0, 0 };

	switch (h->type) {
	case PTP_MSG_SYNC:
	case PTP_MSG_DELAY_REQ:
	case PTP_MSG_FOLLOW_UP:
	case PTP_MSG_DELAY_RESP:
	case PTP_MSG_ANNOUNCE:
		c.len = ptp_msg_min_len(h->type);
		break;
	default:
		return 0;
	}
	if (cap < c.len)
		return 0;

	put(&c, 1, (uint32_t)((h->transport_specific & 0x0f) << 4 | h->type));
	put(&c, 1, PTP_VERSION);
	put(&c, 2, (uint32_t)c.len);
	put(&c, 1, h->domain);
	put(&c, 1, 0);
	put(&c, 2, h->flags);
	put(&c, 4, (uint32_t)((uint64_t)h->correction >> 32));
	put(&c, 4, (uint32_t)h->correction);
	put(&c, 4, 0);
	put_port_identity(&c, &h->source);
	put(&c, 2, h->sequence_id);
	put(&c, 1, control_field(h->type));
	put(&c, 1, (uint8_t)h->log_interval);
	put_time(&c, &m->ts);

	if (h->type == PTP_MSG_DELAY_RESP)
		put_port_identity(&c, &m->requesting);
	if (h->type == PTP_MSG_ANNOUNCE) {
		const struct ptp_announce *a = &m->announce;
		put(&c, 2, (uint16_t)a->utc_offset);
		put(&c, 1, 0);
		put(&c, 1, a->gm_priority1);
		put(&c, 1, a->gm_quality.clock_class);
		put(&c, 1, a->gm_quality.clock_accuracy);
		put(&c, 2, a->gm_quality.offset_scaled_log_variance);
		put(&c, 1, a->gm_priority2);
		put_bytes(&c, a->gm_identity, 8);
		put(&c, 2, a->steps_removed);
		put(&c, 1, a->time_source);
	}
	return c.pos == c.len ? c.len : 0;  /* every byte written exactly once */
}

/* --- time arithmetic -------------------------------------------------------------------------- */

int64_t ptp_time_diff_ns(const struct ptp_time *a, const struct ptp_time *b)
{
	/* Seconds are 48-bit on the wire but the struct allows more: limit both to keep it exact. */
	int64_t sa = (int64_t)(a->sec & 0xffffffffffffull), sb = (int64_t)(b->sec & 0xffffffffffffull);
	int64_t dsec = sa - sb;
	int64_t dns = (int64_t)a->nsec - (int64_t)b->nsec;

	if (dsec > 4000000000LL)
		return PTP_NS_SATURATE;
	if (dsec < -4000000000LL)
		return -PTP_NS_SATURATE;
	return dsec * 1000000000LL + dns;
}

int64_t ptp_div64(int64_t n, int64_t d, int64_t *rem)
{
	uint64_t un = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n, ud = (uint64_t)d, q = 0, r = 0;
	int i;

	for (i = 0; i < 64; i++) {
		r = r << 1 | un >> 63;
		un <<= 1;
		q <<= 1;
		if (r >= ud) {
			r -= ud;
			q |= 1;
		}
	}
	if (rem)
		*rem = n < 0 ? -(int64_t)r : (int64_t)r;
	return n < 0 ? -(int64_t)q : (int64_t)q;
}

int64_t ptp_clamp64(int64_t v, int64_t limit)
{
	return v > limit ? limit : v < -limit ? -limit : v;
}
