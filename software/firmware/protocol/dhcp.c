/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * DHCP client: messages and state machine (dhcp.h). Every read of a message goes through rd8/
 * rd16/rd32 at an offset checked against the message's length first.
 */
#include <string.h>

#include "dhcp.h"
#include "route.h"

/* Byte order ------------------------------------------------------------------------------ */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)((unsigned)p[0] << 8 | p[1]); }

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* Parsing --------------------------------------------------------------------------------- */

/* BOOTP header offsets (RFC 2131 figure 1). */
#define OFF_OP      0u
#define OFF_HTYPE   1u
#define OFF_HLEN    2u
#define OFF_XID     4u
#define OFF_SECS    8u
#define OFF_FLAGS   10u
#define OFF_CIADDR  12u
#define OFF_YIADDR  16u
#define OFF_SIADDR  20u
#define OFF_CHADDR  28u
#define OFF_COOKIE  DHCP_FIXED_SIZE
#define OFF_OPTIONS (DHCP_FIXED_SIZE + 4u)

/* One option (code, len bytes at val) into m; 0, or DHCP_ERR_OPTION for a length its kind
 * cannot have. The first of each kind counts. */
static int read_option(struct dhcp_msg *m, uint8_t code, const uint8_t *val, size_t len)
{
	uint8_t bit = 0;
	uint32_t *field = 0;

	switch (code) {
	case DHCP_OPT_MSG_TYPE:
		if (len != 1)
			return DHCP_ERR_OPTION;
		if (m->type == 0)
			m->type = val[0];
		return 0;
	case DHCP_OPT_SERVER_ID:   bit = DHCP_HAS_SERVER_ID; field = &m->server_id; break;
	case DHCP_OPT_LEASE_TIME:  bit = DHCP_HAS_LEASE;     field = &m->lease_s;   break;
	case DHCP_OPT_T1:          bit = DHCP_HAS_T1;        field = &m->t1_s;      break;
	case DHCP_OPT_T2:          bit = DHCP_HAS_T2;        field = &m->t2_s;      break;
	case DHCP_OPT_SUBNET_MASK: bit = DHCP_HAS_NETMASK;   field = &m->netmask;   break;
	case DHCP_OPT_ROUTER:
		/* One or more addresses, in order of preference. */
		if (len < 4 || len % 4 != 0)
			return DHCP_ERR_OPTION;
		if (!(m->has & DHCP_HAS_ROUTER)) {
			m->has |= DHCP_HAS_ROUTER;
			m->router = rd32(val);
		}
		return 0;
	default:
		return 0;   /* Not one the client reads. */
	}
	if (len != 4)
		return DHCP_ERR_OPTION;
	if (!(m->has & bit)) {
		m->has |= bit;
		*field = rd32(val);
	}
	return 0;
}

int dhcp_parse(const uint8_t *buf, size_t len, struct dhcp_msg *m)
{
	size_t off = OFF_OPTIONS;

	memset(m, 0, sizeof(*m));
	if (len < DHCP_MIN_SIZE)
		return DHCP_ERR_SHORT;
	if (buf[OFF_OP] != 2 || buf[OFF_HTYPE] != 1 || buf[OFF_HLEN] != 6)
		return DHCP_ERR_HEADER;
	if (rd32(buf + OFF_COOKIE) != DHCP_COOKIE)
		return DHCP_ERR_COOKIE;
	m->op     = buf[OFF_OP];
	m->xid    = rd32(buf + OFF_XID);
	m->flags  = rd16(buf + OFF_FLAGS);
	m->ciaddr = rd32(buf + OFF_CIADDR);
	m->yiaddr = rd32(buf + OFF_YIADDR);
	m->siaddr = rd32(buf + OFF_SIADDR);
	memcpy(m->chaddr, buf + OFF_CHADDR, sizeof(m->chaddr));
	/* Options: code, length, value; pad and end have no length. The sname and file fields are
	 * not read for more (option overload, 52, is not asked for). */
	while (off < len) {
		uint8_t code = buf[off];
		size_t n;
		int err;

		if (code == DHCP_OPT_END)
			break;
		if (code == DHCP_OPT_PAD) {
			off++;
			continue;
		}
		if (len - off < 2)
			return DHCP_ERR_OPTION;
		n = buf[off + 1];
		if (len - off - 2 < n)
			return DHCP_ERR_OPTION;
		err = read_option(m, code, buf + off + 2, n);
		if (err)
			return err;
		off += 2 + n;
	}
	if (m->type < DHCP_DISCOVER || m->type > DHCP_INFORM)
		return DHCP_ERR_NO_TYPE;
	return 0;
}

/* Building -------------------------------------------------------------------------------- */

/* The options the client asks for (RFC 2132 9.8). */
static const uint8_t param_list[] = {
	DHCP_OPT_SUBNET_MASK, DHCP_OPT_ROUTER, DHCP_OPT_LEASE_TIME, DHCP_OPT_SERVER_ID, DHCP_OPT_T1, DHCP_OPT_T2,
};

size_t dhcp_build(uint8_t *out, size_t cap, const struct dhcp_out *o)
{
	size_t off = OFF_OPTIONS;

	if (cap < DHCP_SEND_SIZE)
		return 0;
	memset(out, 0, DHCP_SEND_SIZE);
	out[OFF_OP] = 1;     /* BOOTREQUEST */
	out[OFF_HTYPE] = 1;  /* Ethernet */
	out[OFF_HLEN] = 6;
	wr32(out + OFF_XID, o->xid);
	wr16(out + OFF_SECS, o->secs);
	wr16(out + OFF_FLAGS, o->flags);
	wr32(out + OFF_CIADDR, o->ciaddr);
	memcpy(out + OFF_CHADDR, o->mac, 6);
	wr32(out + OFF_COOKIE, DHCP_COOKIE);
	/* At most 3 + 6 + 6 + 4 + 2 + sizeof(param_list) + 1 = 28 bytes of options: they fit the 60
	 * after the cookie. */
	out[off++] = DHCP_OPT_MSG_TYPE; out[off++] = 1; out[off++] = o->type;
	if (o->requested_ip) {
		out[off++] = DHCP_OPT_REQUESTED_IP; out[off++] = 4; wr32(out + off, o->requested_ip); off += 4;
	}
	if (o->server_id) {
		out[off++] = DHCP_OPT_SERVER_ID; out[off++] = 4; wr32(out + off, o->server_id); off += 4;
	}
	out[off++] = DHCP_OPT_MAX_SIZE; out[off++] = 2; wr16(out + off, 576); off += 2;
	out[off++] = DHCP_OPT_PARAM_LIST; out[off++] = (uint8_t)sizeof(param_list);
	memcpy(out + off, param_list, sizeof(param_list));
	off += sizeof(param_list);
	out[off] = DHCP_OPT_END;
	return DHCP_SEND_SIZE;
}

/* Client ---------------------------------------------------------------------------------- */

#define MS 1000ull

static uint32_t next_rand(struct dhcp_client *c)
{
	uint32_t x = c->rand;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return c->rand = x;
}

const char *dhcp_state_name(enum dhcp_state s)
{
	switch (s) {
	case DHCP_S_INIT:       return "init";
	case DHCP_S_SELECTING:  return "selecting";
	case DHCP_S_REQUESTING: return "requesting";
	case DHCP_S_BOUND:      return "bound";
	case DHCP_S_RENEWING:   return "renewing";
	case DHCP_S_REBINDING:  return "rebinding";
	case DHCP_S_STOPPED:    return "stopped";
	}
	return "?";
}

void dhcp_client_init(struct dhcp_client *c, const uint8_t mac[6], const struct dhcp_lease *fallback,
                      uint32_t seed, uint64_t now_ms)
{
	unsigned i;

	memset(c, 0, sizeof(*c));
	memcpy(c->mac, mac, 6);
	c->fallback = *fallback;
	c->rand = seed ^ 0x9E3779B9u;
	for (i = 0; i < 6; i++)
		c->rand = c->rand * 31u + mac[i];
	if (c->rand == 0)
		c->rand = 1;
	c->state = DHCP_S_INIT;
	c->next_ms = now_ms;
	c->backoff_s = DHCP_BACKOFF_MIN_S;
}

static int leased(const struct dhcp_client *c)
{
	return c->state == DHCP_S_BOUND || c->state == DHCP_S_RENEWING || c->state == DHCP_S_REBINDING;
}

const struct dhcp_lease *dhcp_client_address(const struct dhcp_client *c)
{
	return leased(c) ? &c->lease : &c->fallback;
}

void dhcp_client_stop(struct dhcp_client *c)
{
	c->state = DHCP_S_STOPPED;
}

/* A message of `type` into out: a = send to dst. */
static void send_msg(struct dhcp_client *c, uint64_t now_ms, uint8_t type, uint32_t ciaddr, uint32_t requested,
                     uint32_t server, uint32_t dst, uint8_t *out, size_t cap, struct dhcp_action *a)
{
	struct dhcp_out o;
	uint64_t secs = (now_ms - c->start_ms) / MS;

	memset(&o, 0, sizeof(o));
	o.type = type;
	o.xid = c->xid;
	o.secs = secs > 0xFFFFu ? 0xFFFFu : (uint16_t)secs;
	o.flags = ciaddr ? 0 : DHCP_FLAG_BROADCAST;
	o.ciaddr = ciaddr;
	o.requested_ip = requested;
	o.server_id = server;
	memcpy(o.mac, c->mac, 6);
	a->len = dhcp_build(out, cap, &o);
	if (a->len == 0) {
		c->count.send_fail++;
		return;
	}
	a->what |= DHCP_ACT_SEND;
	a->dst_ip = dst;
	if (type == DHCP_DISCOVER)
		c->count.discovers++;
	else
		c->count.requests++;
}

/* The next DISCOVER after the current interval, which doubles up to its maximum. */
static void discover_later(struct dhcp_client *c, uint64_t now_ms)
{
	c->state = DHCP_S_INIT;
	c->next_ms = now_ms + (uint64_t)c->backoff_s * MS;
	c->backoff_s = c->backoff_s * 2 > DHCP_BACKOFF_MAX_S ? DHCP_BACKOFF_MAX_S : c->backoff_s * 2;
}

static uint64_t at_s(uint64_t start_ms, uint32_t s) { return start_ms + (uint64_t)s * MS; }

/* RFC 2131 4.4.5: half the time left before `until`, at least DHCP_RENEW_MIN_S, not past it. */
static uint64_t retransmit_at(uint64_t now_ms, uint64_t until_ms)
{
	uint64_t left = until_ms > now_ms ? until_ms - now_ms : 0;
	uint64_t wait = left / 2 < DHCP_RENEW_MIN_S * MS ? DHCP_RENEW_MIN_S * MS : left / 2;

	return wait < left ? now_ms + wait : until_ms;
}

void dhcp_client_poll(struct dhcp_client *c, uint64_t now_ms, uint8_t *out, size_t cap, struct dhcp_action *a)
{
	a->what = 0;
	a->len = 0;
	if (c->state == DHCP_S_STOPPED || now_ms < c->next_ms)
		return;
	/* A lease that ran out: back to the build's address, and a DISCOVER at once. */
	if (leased(c) && c->lease.lease_s != DHCP_LEASE_INFINITE &&
	    now_ms >= at_s(c->lease_start_ms, c->lease.lease_s)) {
		c->count.expired++;
		a->what |= DHCP_ACT_FALLBACK;
		c->backoff_s = DHCP_BACKOFF_MIN_S;
		c->state = DHCP_S_INIT;
	}
	switch (c->state) {
	case DHCP_S_INIT:
		c->xid = next_rand(c);
		c->start_ms = now_ms;
		c->state = DHCP_S_SELECTING;
		/* fall through */  /* The first DISCOVER. */
	case DHCP_S_SELECTING:
		send_msg(c, now_ms, DHCP_DISCOVER, 0, 0, 0, 0xFFFFFFFFu, out, cap, a);
		c->next_ms = now_ms + (uint64_t)c->backoff_s * MS;
		c->backoff_s = c->backoff_s * 2 > DHCP_BACKOFF_MAX_S ? DHCP_BACKOFF_MAX_S : c->backoff_s * 2;
		return;
	case DHCP_S_REQUESTING:
		if (c->tries >= DHCP_REQUEST_TRIES) {   /* No answer to the offer: discover again. */
			discover_later(c, now_ms);
			return;
		}
		c->tries++;
		send_msg(c, now_ms, DHCP_REQUEST, 0, c->offered_ip, c->offer_server, 0xFFFFFFFFu, out, cap, a);
		c->next_ms = now_ms + (uint64_t)DHCP_BACKOFF_MIN_S * c->tries * MS;
		return;
	default:
		break;
	}
	/* A lease: rebinding from T2, renewing from T1. */
	if (c->state != DHCP_S_REBINDING && now_ms >= at_s(c->lease_start_ms, c->lease.t2_s)) {
		c->state = DHCP_S_REBINDING;
		c->xid = next_rand(c);
		c->start_ms = now_ms;
	} else if (c->state == DHCP_S_BOUND) {
		c->state = DHCP_S_RENEWING;
		c->xid = next_rand(c);
		c->start_ms = now_ms;
	}
	if (c->state == DHCP_S_RENEWING) {
		send_msg(c, now_ms, DHCP_REQUEST, c->lease.ip, 0, 0, c->lease.server, out, cap, a);
		c->next_ms = retransmit_at(now_ms, at_s(c->lease_start_ms, c->lease.t2_s));
	} else {
		send_msg(c, now_ms, DHCP_REQUEST, c->lease.ip, 0, 0, 0xFFFFFFFFu, out, cap, a);
		c->next_ms = retransmit_at(now_ms, at_s(c->lease_start_ms, c->lease.lease_s));
	}
}

/* An address the board can take: not this network (0/8), loopback, multicast, reserved, or the
 * limited broadcast. */
static int address_usable(uint32_t ip)
{
	uint8_t top = (uint8_t)(ip >> 24);

	return top != 0 && top != 127 && top < 224;
}

/* The lease an ACK grants: times defaulted and ordered as RFC 2131 4.4.5 says (T1 half the lease,
 * T2 seven eighths), the subnet the build's when the server names none, a router outside it
 * dropped. 0 if the board cannot use it. */
static int lease_from_ack(const struct dhcp_client *c, const struct dhcp_msg *m, uint32_t server,
                          struct dhcp_lease *l)
{
	memset(l, 0, sizeof(*l));
	if (!(m->has & DHCP_HAS_LEASE) || m->lease_s == 0 || !address_usable(m->yiaddr))
		return 0;
	l->ip = m->yiaddr;
	l->server = server;
	l->lease_s = m->lease_s;
	if (m->lease_s == DHCP_LEASE_INFINITE) {
		l->t1_s = l->t2_s = DHCP_LEASE_INFINITE;
	} else {
		l->t1_s = (m->has & DHCP_HAS_T1) ? m->t1_s : m->lease_s / 2;
		l->t2_s = (m->has & DHCP_HAS_T2) ? m->t2_s : (uint32_t)((uint64_t)m->lease_s * 7 / 8);
		if (l->t2_s > l->lease_s)
			l->t2_s = (uint32_t)((uint64_t)m->lease_s * 7 / 8);
		if (l->t1_s > l->t2_s)
			l->t1_s = l->t2_s;
	}
	l->netmask = (m->has & DHCP_HAS_NETMASK) ? m->netmask : c->fallback.netmask;
	if (!route_netmask_valid(l->netmask) || route_prefix_length(l->netmask) > 30)
		return 0;
	l->gateway = (m->has & DHCP_HAS_ROUTER) && route_gateway_valid(l->ip, l->netmask, m->router) ?
		     m->router : ROUTE_NO_GATEWAY;
	return 1;
}

static void take_ack(struct dhcp_client *c, uint64_t now_ms, const struct dhcp_msg *m, struct dhcp_action *a)
{
	struct dhcp_lease l;
	uint32_t server = (m->has & DHCP_HAS_SERVER_ID) ? m->server_id :
			  c->state == DHCP_S_REQUESTING ? c->offer_server : c->lease.server;
	int renewing = c->state == DHCP_S_RENEWING || c->state == DHCP_S_REBINDING;

	if (!lease_from_ack(c, m, server, &l) || (renewing && l.ip != c->lease.ip) ||
	    (c->state == DHCP_S_REQUESTING && l.ip != c->offered_ip)) {
		c->count.refused++;
		if (c->state == DHCP_S_REQUESTING)
			discover_later(c, now_ms);
		return;
	}
	c->count.acks++;
	a->what |= renewing && l.netmask == c->lease.netmask && l.gateway == c->lease.gateway ?
		   DHCP_ACT_RENEWED : DHCP_ACT_BOUND;
	c->lease = l;
	/* The lease runs from when its exchange began (RFC 2131 4.4.1). */
	c->lease_start_ms = c->start_ms;
	c->state = DHCP_S_BOUND;
	c->backoff_s = DHCP_BACKOFF_MIN_S;
	c->next_ms = l.t1_s == DHCP_LEASE_INFINITE ? UINT64_MAX : at_s(c->lease_start_ms, l.t1_s);
}

void dhcp_client_input(struct dhcp_client *c, uint64_t now_ms, const uint8_t *buf, size_t len,
                       uint8_t *out, size_t cap, struct dhcp_action *a)
{
	struct dhcp_msg m;

	a->what = 0;
	a->len = 0;
	if (dhcp_parse(buf, len, &m) != 0) {
		c->count.malformed++;
		return;
	}
	if (c->state == DHCP_S_STOPPED || m.xid != c->xid || memcmp(m.chaddr, c->mac, 6) != 0) {
		c->count.ignored++;
		return;
	}
	switch (m.type) {
	case DHCP_OFFER:
		if (c->state != DHCP_S_SELECTING) {
			c->count.ignored++;
			return;
		}
		if (!address_usable(m.yiaddr) || !(m.has & DHCP_HAS_SERVER_ID)) {
			c->count.refused++;
			return;
		}
		/* The first usable offer is taken (RFC 2131 4.4.1 lets the client choose). */
		c->count.offers++;
		c->offered_ip = m.yiaddr;
		c->offer_server = m.server_id;
		c->state = DHCP_S_REQUESTING;
		c->tries = 1;
		send_msg(c, now_ms, DHCP_REQUEST, 0, c->offered_ip, c->offer_server, 0xFFFFFFFFu, out, cap, a);
		c->next_ms = now_ms + (uint64_t)DHCP_BACKOFF_MIN_S * MS;
		return;
	case DHCP_ACK:
		if (c->state != DHCP_S_REQUESTING && c->state != DHCP_S_RENEWING && c->state != DHCP_S_REBINDING) {
			c->count.ignored++;
			return;
		}
		take_ack(c, now_ms, &m, a);
		return;
	case DHCP_NAK:
		if (c->state != DHCP_S_REQUESTING && c->state != DHCP_S_RENEWING && c->state != DHCP_S_REBINDING) {
			c->count.ignored++;
			return;
		}
		/* The server refuses the address: back to the build's, discover after the interval (a
		 * server that refuses every time is not asked at once again). */
		c->count.naks++;
		if (c->state != DHCP_S_REQUESTING)
			a->what |= DHCP_ACT_FALLBACK;
		discover_later(c, now_ms);
		return;
	default:
		c->count.ignored++;
		return;
	}
}
