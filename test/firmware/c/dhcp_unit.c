/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Unit tests (cmocka) of software/firmware/protocol/dhcp.c, the firmware's DHCP client, built for
 * the host as the firmware builds it (test/firmware/test_dhcp.py). Program arguments, for the Python side
 * (which builds and reads packets with scapy):
 *   parse   lines of hex (a server's UDP payload) on stdin -> "rc type xid yiaddr server_id lease
 *           t1 t2 netmask router has chaddr" (hex) for each
 *   build   the client's DISCOVER, selecting REQUEST and renewing REQUEST, in hex, a line each
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dhcp.h"

#define IP4(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

static const uint8_t MAC[6] = { 0x10, 0xe2, 0xd5, 0x00, 0x00, 0x78 };
static const uint32_t SERVER = IP4(192, 168, 78, 1);
static const uint32_t OFFERED = IP4(192, 168, 78, 120);
static const uint32_t ROUTER = IP4(192, 168, 78, 254);
static const struct dhcp_lease FALLBACK = { IP4(192, 168, 78, 50), IP4(255, 255, 255, 0), 0, 0, 0, 0, 0 };

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* A server's reply of `type` to xid: yiaddr, server id, lease, T1, T2 (0: no such option), mask and router. */
static size_t reply(uint8_t *b, uint8_t type, uint32_t xid, uint32_t yiaddr, uint32_t lease, uint32_t t1, uint32_t t2)
{
	size_t off = DHCP_FIXED_SIZE + 4;

	memset(b, 0, 400);
	b[0] = 2; b[1] = 1; b[2] = 6;
	wr32(b + 4, xid);
	wr32(b + 16, yiaddr);
	memcpy(b + 28, MAC, 6);
	wr32(b + DHCP_FIXED_SIZE, DHCP_COOKIE);
	b[off++] = 53; b[off++] = 1; b[off++] = type;
	b[off++] = 54; b[off++] = 4; wr32(b + off, SERVER); off += 4;
	if (lease) { b[off++] = 51; b[off++] = 4; wr32(b + off, lease); off += 4; }
	if (t1)    { b[off++] = 58; b[off++] = 4; wr32(b + off, t1); off += 4; }
	if (t2)    { b[off++] = 59; b[off++] = 4; wr32(b + off, t2); off += 4; }
	b[off++] = 1; b[off++] = 4; wr32(b + off, IP4(255, 255, 255, 0)); off += 4;
	b[off++] = 3; b[off++] = 8; wr32(b + off, ROUTER); wr32(b + off + 4, IP4(192, 168, 78, 253)); off += 8;
	b[off++] = 255;
	return off;
}

/* The option `code` of a message the client built: its value, or NULL. */
static const uint8_t *option(const uint8_t *m, size_t len, uint8_t code, size_t *n)
{
	size_t off = DHCP_FIXED_SIZE + 4;

	while (off + 2 <= len && m[off] != 255) {
		if (m[off] == 0) { off++; continue; }
		if (m[off] == code) {
			*n = m[off + 1];
			return m + off + 2;
		}
		off += 2u + m[off + 1];
	}
	return NULL;
}

struct run {
	struct dhcp_client c;
	uint8_t out[DHCP_SEND_SIZE], in[400];
	struct dhcp_action a;
};

/* A client bound to OFFERED at t = 1 s: lease 100 s, T1 50 s, T2 80 s. */
static void bind(struct run *r)
{
	size_t n, len;

	dhcp_client_init(&r->c, MAC, &FALLBACK, 7, 0);
	dhcp_client_poll(&r->c, 0, r->out, sizeof(r->out), &r->a);
	assert_int_equal(r->a.what, DHCP_ACT_SEND);
	assert_int_equal(r->a.dst_ip, 0xFFFFFFFFu);
	assert_int_equal(r->a.len, DHCP_SEND_SIZE);
	assert_int_equal(r->out[0], 1);
	assert_int_equal((r->out[10] << 8 | r->out[11]), DHCP_FLAG_BROADCAST);
	assert_int_equal(*option(r->out, r->a.len, 53, &n), DHCP_DISCOVER);
	len = reply(r->in, DHCP_OFFER, rd32(r->out + 4), OFFERED, 100, 0, 0);
	dhcp_client_input(&r->c, 500, r->in, len, r->out, sizeof(r->out), &r->a);
	assert_int_equal(r->a.what, DHCP_ACT_SEND);
	assert_int_equal(*option(r->out, r->a.len, 53, &n), DHCP_REQUEST);
	assert_int_equal(rd32(option(r->out, r->a.len, 50, &n)), OFFERED);
	assert_int_equal(rd32(option(r->out, r->a.len, 54, &n)), SERVER);
	assert_int_equal(rd32(r->out + 12), 0);   /* ciaddr */
	len = reply(r->in, DHCP_ACK, rd32(r->out + 4), OFFERED, 100, 50, 80);
	dhcp_client_input(&r->c, 1000, r->in, len, r->out, sizeof(r->out), &r->a);
	assert_int_equal(r->a.what, DHCP_ACT_BOUND);
	assert_int_equal(r->c.state, DHCP_S_BOUND);
	assert_int_equal(dhcp_client_address(&r->c)->ip, OFFERED);
	assert_int_equal(dhcp_client_address(&r->c)->netmask, IP4(255, 255, 255, 0));
	assert_int_equal(dhcp_client_address(&r->c)->gateway, ROUTER);   /* The first router. */
}

static void test_discover_offer_request_ack_binds(void **state)
{
	struct run r;

	(void)state;
	bind(&r);
}

static void test_renewal_at_t1_is_unicast_to_the_server_and_an_ack_extends_the_lease(void **state)
{
	struct run r;
	size_t n, len;

	(void)state;
	bind(&r);
	/* The lease runs from the DISCOVER (t = 0): T1 at 50 s. */
	dhcp_client_poll(&r.c, 49999, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
	dhcp_client_poll(&r.c, 50000, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, DHCP_ACT_SEND);
	assert_int_equal(r.a.dst_ip, SERVER);
	assert_int_equal(rd32(r.out + 12), OFFERED);            /* ciaddr */
	assert_int_equal((r.out[10] << 8 | r.out[11]), 0);      /* no broadcast flag */
	assert_null(option(r.out, r.a.len, 50, &n));            /* no requested ip, no server id */
	assert_null(option(r.out, r.a.len, 54, &n));
	len = reply(r.in, DHCP_ACK, rd32(r.out + 4), OFFERED, 100, 50, 80);
	dhcp_client_input(&r.c, 50100, r.in, len, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, DHCP_ACT_RENEWED);
	/* The new lease runs from the renewal's start: T1 at 100 s. */
	dhcp_client_poll(&r.c, 99999, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
	dhcp_client_poll(&r.c, 100000, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, DHCP_ACT_SEND);
}

static void test_unanswered_the_client_rebinds_at_t2_then_falls_back_at_expiry(void **state)
{
	struct run r;
	uint64_t t;
	unsigned renew = 0, rebind = 0, fallback = 0;

	(void)state;
	bind(&r);
	for (t = 50000; t < 100000 + 5000; t += 100) {
		dhcp_client_poll(&r.c, t, r.out, sizeof(r.out), &r.a);
		if (r.a.what & DHCP_ACT_SEND && r.c.state == DHCP_S_RENEWING) {
			assert_int_equal(r.a.dst_ip, SERVER);
			renew++;
		}
		if (r.a.what & DHCP_ACT_SEND && r.c.state == DHCP_S_REBINDING) {
			assert_int_equal(r.a.dst_ip, 0xFFFFFFFFu);
			assert_int_equal(rd32(r.out + 12), OFFERED);
			assert_true(t >= 80000);
			rebind++;
		}
		if (r.a.what & DHCP_ACT_FALLBACK) {
			assert_int_equal(t, 100000);
			assert_int_equal(dhcp_client_address(&r.c)->ip, FALLBACK.ip);
			fallback++;
		}
	}
	assert_true(renew >= 1);
	assert_true(rebind >= 1);
	assert_int_equal(fallback, 1);
	assert_int_equal(r.c.count.expired, 1);
	/* Discovering again: a DISCOVER right after the expiry, the next 4 s later, then 8 s. */
	assert_true(r.c.count.discovers >= 2);
}

static void test_discover_backs_off_4_8_16_32_64_64(void **state)
{
	struct run r;
	uint64_t t, last = 0;
	uint64_t gaps[8];
	unsigned n = 0;

	(void)state;
	dhcp_client_init(&r.c, MAC, &FALLBACK, 1, 0);
	for (t = 0; t < 300000 && n < 8; t += 250) {
		dhcp_client_poll(&r.c, t, r.out, sizeof(r.out), &r.a);
		if (r.a.what & DHCP_ACT_SEND) {
			if (n > 0)
				gaps[n - 1] = t - last;
			last = t;
			n++;
		}
	}
	assert_int_equal(gaps[0], 4000);
	assert_int_equal(gaps[1], 8000);
	assert_int_equal(gaps[2], 16000);
	assert_int_equal(gaps[3], 32000);
	assert_int_equal(gaps[4], 64000);
	assert_int_equal(gaps[5], 64000);
}

static void test_nak_while_bound_falls_back_and_discovers_after_the_interval(void **state)
{
	struct run r;
	size_t len;

	(void)state;
	bind(&r);
	dhcp_client_poll(&r.c, 50000, r.out, sizeof(r.out), &r.a);
	len = reply(r.in, DHCP_NAK, rd32(r.out + 4), 0, 0, 0, 0);
	dhcp_client_input(&r.c, 50100, r.in, len, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, DHCP_ACT_FALLBACK);
	assert_int_equal(r.c.state, DHCP_S_INIT);
	assert_int_equal(dhcp_client_address(&r.c)->ip, FALLBACK.ip);
	assert_int_equal(r.c.count.naks, 1);
	dhcp_client_poll(&r.c, 50100 + 3999, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
	dhcp_client_poll(&r.c, 50100 + 4000, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, DHCP_ACT_SEND);
}

static void test_replies_not_ours_or_unexpected_are_ignored_and_counted(void **state)
{
	struct run r;
	size_t len;
	uint32_t xid;

	(void)state;
	dhcp_client_init(&r.c, MAC, &FALLBACK, 3, 0);
	dhcp_client_poll(&r.c, 0, r.out, sizeof(r.out), &r.a);
	xid = rd32(r.out + 4);
	len = reply(r.in, DHCP_OFFER, xid + 1, OFFERED, 100, 0, 0);           /* another xid */
	dhcp_client_input(&r.c, 10, r.in, len, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
	len = reply(r.in, DHCP_ACK, xid, OFFERED, 100, 0, 0);                 /* ACK while selecting */
	dhcp_client_input(&r.c, 10, r.in, len, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
	len = reply(r.in, DHCP_OFFER, xid, OFFERED, 100, 0, 0);
	r.in[33] ^= 1;                                                         /* another client's MAC */
	dhcp_client_input(&r.c, 10, r.in, len, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
	assert_int_equal(r.c.count.ignored, 3);
	len = reply(r.in, DHCP_OFFER, xid, IP4(127, 0, 0, 1), 100, 0, 0);     /* unusable address */
	dhcp_client_input(&r.c, 10, r.in, len, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
	assert_int_equal(r.c.count.refused, 1);
	assert_int_equal(r.c.state, DHCP_S_SELECTING);
}

static void test_malformed_replies_are_refused_at_each_length(void **state)
{
	uint8_t b[400];
	struct dhcp_msg m;
	size_t len, cut;

	(void)state;
	len = reply(b, DHCP_ACK, 1, OFFERED, 100, 50, 80);
	assert_int_equal(dhcp_parse(b, len, &m), 0);
	assert_int_equal(m.lease_s, 100);
	for (cut = 0; cut < DHCP_MIN_SIZE; cut++)
		assert_int_equal(dhcp_parse(b, cut, &m), DHCP_ERR_SHORT);
	/* Cut inside an option's value: runs past the end. */
	assert_int_equal(dhcp_parse(b, DHCP_FIXED_SIZE + 4 + 3 + 4, &m), DHCP_ERR_OPTION);
	/* A lease time of 3 bytes. */
	b[DHCP_FIXED_SIZE + 4 + 3 + 6 + 1] = 3;
	assert_int_equal(dhcp_parse(b, len, &m), DHCP_ERR_OPTION);
	len = reply(b, DHCP_ACK, 1, OFFERED, 100, 50, 80);
	b[DHCP_FIXED_SIZE] ^= 0xFF;
	assert_int_equal(dhcp_parse(b, len, &m), DHCP_ERR_COOKIE);
	b[DHCP_FIXED_SIZE] ^= 0xFF;
	b[0] = 1;
	assert_int_equal(dhcp_parse(b, len, &m), DHCP_ERR_HEADER);
}

static void test_build_refuses_a_small_buffer(void **state)
{
	struct dhcp_out o;
	uint8_t b[DHCP_SEND_SIZE];

	(void)state;
	memset(&o, 0, sizeof(o));
	o.type = DHCP_DISCOVER;
	memset(b, 0xAA, sizeof(b));
	assert_int_equal(dhcp_build(b, DHCP_SEND_SIZE - 1, &o), 0);
	assert_int_equal(b[0], 0xAA);
	assert_int_equal(dhcp_build(b, DHCP_SEND_SIZE, &o), DHCP_SEND_SIZE);
}

static void test_stopped_client_sends_nothing(void **state)
{
	struct run r;

	(void)state;
	bind(&r);
	dhcp_client_stop(&r.c);
	dhcp_client_poll(&r.c, 1000000, r.out, sizeof(r.out), &r.a);
	assert_int_equal(r.a.what, 0);
}

static void print_hex(const uint8_t *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

static int parse_lines(void)
{
	static char line[4096];
	uint8_t b[2048];

	while (fgets(line, sizeof(line), stdin)) {
		struct dhcp_msg m;
		size_t n = 0;
		int rc;
		unsigned v;

		while (n < sizeof(b) && sscanf(line + 2 * n, "%2x", &v) == 1)
			b[n++] = (uint8_t)v;
		rc = dhcp_parse(b, n, &m);
		printf("%d %x %x %x %x %x %x %x %x %x %x %02x%02x%02x%02x%02x%02x\n", rc, m.type, m.xid, m.yiaddr,
		       m.server_id, m.lease_s, m.t1_s, m.t2_s, m.netmask, m.router, m.has,
		       m.chaddr[0], m.chaddr[1], m.chaddr[2], m.chaddr[3], m.chaddr[4], m.chaddr[5]);
	}
	return 0;
}

static int build_messages(void)
{
	struct run r;
	size_t len;

	dhcp_client_init(&r.c, MAC, &FALLBACK, 11, 0);
	dhcp_client_poll(&r.c, 2000, r.out, sizeof(r.out), &r.a);
	print_hex(r.out, r.a.len);
	len = reply(r.in, DHCP_OFFER, rd32(r.out + 4), OFFERED, 100, 0, 0);
	dhcp_client_input(&r.c, 3000, r.in, len, r.out, sizeof(r.out), &r.a);
	print_hex(r.out, r.a.len);
	len = reply(r.in, DHCP_ACK, rd32(r.out + 4), OFFERED, 100, 0, 0);
	dhcp_client_input(&r.c, 3000, r.in, len, r.out, sizeof(r.out), &r.a);
	dhcp_client_poll(&r.c, 52000, r.out, sizeof(r.out), &r.a);
	print_hex(r.out, r.a.len);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_discover_offer_request_ack_binds),
		cmocka_unit_test(test_renewal_at_t1_is_unicast_to_the_server_and_an_ack_extends_the_lease),
		cmocka_unit_test(test_unanswered_the_client_rebinds_at_t2_then_falls_back_at_expiry),
		cmocka_unit_test(test_discover_backs_off_4_8_16_32_64_64),
		cmocka_unit_test(test_nak_while_bound_falls_back_and_discovers_after_the_interval),
		cmocka_unit_test(test_replies_not_ours_or_unexpected_are_ignored_and_counted),
		cmocka_unit_test(test_malformed_replies_are_refused_at_each_length),
		cmocka_unit_test(test_build_refuses_a_small_buffer),
		cmocka_unit_test(test_stopped_client_sends_nothing),
	};

	if (argc > 1 && strcmp(argv[1], "parse") == 0)
		return parse_lines();
	if (argc > 1 && strcmp(argv[1], "build") == 0)
		return build_messages();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
