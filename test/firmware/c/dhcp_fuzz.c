/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Fuzz harness for software/firmware/protocol/dhcp.c, the firmware's DHCP client, built unchanged
 * for the host. One input is a conversation with one client: datagrams to port 68 between steps
 * of its clock, so mutations reach every state (selecting, requesting, bound, renewing,
 * rebinding), not just the parser.
 *
 *   clang -fsanitize=fuzzer,address,undefined -DDHCP_FUZZ_LIBFUZZER ...   (libFuzzer; bench/fuzz.py)
 *   gcc -fsanitize=address,undefined ...   dhcp_fuzz <iterations> <seed>  (standalone: mutates
 *       conversations of valid server replies, deterministically; test/firmware/test_dhcp.py runs it)
 *
 * Input: records of [kind][len][bytes]. kind bit 7: the clock moves len x 250 ms (no bytes follow)
 * and the client is polled; otherwise (kind & 3) << 8 | len bytes follow, a datagram to port 68,
 * and with kind bit 6 its xid and client MAC are first set to the client's (so it is taken as an
 * answer).
 *
 * Invariants (abort on violation), besides the sanitizers': a message to send is DHCP_SEND_SIZE
 * bytes, a BOOTREQUEST with the client's MAC and xid, to the limited broadcast or to the lease's
 * server (renewing); the address in use is the fallback or a lease's usable address with
 * T1 <= T2 <= lease; a fallback action comes only from a lease; after a poll, no timer is due
 * (the main loop is not kept busy); every datagram moves one counter.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhcp.h"

static const uint8_t MAC[6] = { 0x10, 0xe2, 0xd5, 0x00, 0x00, 0x78 };
static const struct dhcp_lease FALLBACK = { 0xC0A84E32u, 0xFFFFFF00u, 0, 0, 0, 0, 0 };

static struct dhcp_counters total;  /* Over all conversations: what the standalone run reached. */

static void fail(const char *why)
{
	fprintf(stderr, "dhcp_fuzz: invariant broken: %s\n", why);
	abort();
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int leased(const struct dhcp_client *c)
{
	return c->state == DHCP_S_BOUND || c->state == DHCP_S_RENEWING || c->state == DHCP_S_REBINDING;
}

static uint32_t counted(const struct dhcp_client *c)
{
	const struct dhcp_counters *n = &c->count;

	return n->offers + n->acks + n->naks + n->malformed + n->ignored + n->refused;
}

static void check(const struct dhcp_client *c, enum dhcp_state before, const struct dhcp_action *a,
                  const uint8_t *out)
{
	const struct dhcp_lease *l = dhcp_client_address(c);

	if (a->what & DHCP_ACT_SEND) {
		if (a->len != DHCP_SEND_SIZE || out[0] != 1 || memcmp(out + 28, MAC, 6) != 0 || rd32(out + 4) != c->xid)
			fail("a message to send is not the client's request");
		if (a->dst_ip != 0xFFFFFFFFu && !(c->state == DHCP_S_RENEWING && a->dst_ip == c->lease.server))
			fail("a message goes elsewhere than broadcast or the lease's server");
	}
	if ((a->what & DHCP_ACT_FALLBACK) && !(before == DHCP_S_BOUND || before == DHCP_S_RENEWING ||
					       before == DHCP_S_REBINDING))
		fail("fallback without a lease");
	if (leased(c)) {
		uint8_t top = (uint8_t)(l->ip >> 24);

		if (top == 0 || top == 127 || top >= 224)
			fail("a lease of an unusable address");
		if (l->lease_s != DHCP_LEASE_INFINITE && !(l->t1_s <= l->t2_s && l->t2_s <= l->lease_s))
			fail("lease times out of order");
	} else if (memcmp(l, &FALLBACK, sizeof(*l)) != 0) {
		fail("without a lease, the address is not the fallback");
	}
}

static void conversation(const uint8_t *data, size_t size)
{
	struct dhcp_client c;
	struct dhcp_action a;
	uint8_t out[DHCP_SEND_SIZE], dgram[1500];
	uint64_t now = 0;
	size_t off = 0;

	dhcp_client_init(&c, MAC, &FALLBACK, 5, 0);
	while (off + 2 <= size) {
		uint8_t kind = data[off];
		size_t len = (size_t)(kind & 3u) << 8 | data[off + 1];
		enum dhcp_state before = c.state;

		off += 2;
		if (kind & 0x80) {
			now += (uint64_t)len * 250u;
			dhcp_client_poll(&c, now, out, sizeof(out), &a);
			check(&c, before, &a, out);
			if (c.state != DHCP_S_STOPPED && c.next_ms <= now)
				fail("a timer is still due after a poll");
		} else {
			size_t n = size - off < len ? size - off : len;
			uint32_t before_count = counted(&c);

			memcpy(dgram, data + off, n);
			off += n;
			if ((kind & 0x40) && n >= 34) {
				dgram[4] = (uint8_t)(c.xid >> 24); dgram[5] = (uint8_t)(c.xid >> 16);
				dgram[6] = (uint8_t)(c.xid >> 8);  dgram[7] = (uint8_t)c.xid;
				memcpy(dgram + 28, MAC, 6);
			}
			dhcp_client_input(&c, now, dgram, n, out, sizeof(out), &a);
			check(&c, before, &a, out);
			if (counted(&c) != before_count + 1)
				fail("a datagram moved no counter, or more than one");
		}
	}
	total.offers += c.count.offers; total.acks += c.count.acks; total.naks += c.count.naks;
	total.expired += c.count.expired; total.malformed += c.count.malformed; total.refused += c.count.refused;
}

#ifdef DHCP_FUZZ_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	conversation(data, size);
	return 0;
}

#else

static uint32_t rng;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

/* A server's reply of `type` (the harness sets xid and MAC): yiaddr, lease 100 s, mask, router. */
static size_t reply(uint8_t *b, uint8_t type)
{
	static const uint8_t opts[] = { 53, 1, 0, 54, 4, 192, 168, 78, 1, 51, 4, 0, 0, 0, 100, 1, 4, 255, 255, 255, 0,
					3, 4, 192, 168, 78, 254, 58, 4, 0, 0, 0, 40, 255 };
	memset(b, 0, DHCP_FIXED_SIZE);
	b[0] = 2; b[1] = 1; b[2] = 6;
	b[16] = 192; b[17] = 168; b[18] = 78; b[19] = 120;
	b[236] = 0x63; b[237] = 0x82; b[238] = 0x53; b[239] = 0x63;
	memcpy(b + 240, opts, sizeof(opts));
	b[242] = type;
	return 240 + sizeof(opts);
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 100000;
	long i;
	static uint8_t buf[8192];

	rng = argc > 2 ? (uint32_t)atol(argv[2]) : 1;
	if (rng == 0)
		rng = 1;
	for (i = 0; i < iterations; i++) {
		size_t size = 0;
		unsigned steps = 1 + next() % 12, s;

		for (s = 0; s < steps && size + 2 + 300 < sizeof(buf); s++) {
			uint32_t r = next();

			if (r % 3 == 0) {
				buf[size++] = 0x80;
				buf[size++] = (uint8_t)(next() % 255);
			} else {
				static const uint8_t types[] = { DHCP_OFFER, DHCP_ACK, DHCP_NAK, DHCP_ACK, DHCP_OFFER, 9 };
				uint8_t msg[300];
				size_t n = reply(msg, types[next() % sizeof(types)]), m, k;

				/* Mutations: flipped bytes, a cut, a changed option length. */
				for (m = next() % 4, k = 0; k < m; k++)
					msg[next() % n] ^= (uint8_t)(1u << (next() % 8));
				if (next() % 4 == 0)
					n = next() % (n + 1);
				buf[size++] = (uint8_t)(((next() % 8) ? 0x40 : 0x00) | (n >> 8));
				buf[size++] = (uint8_t)n;
				memcpy(buf + size, msg, n);
				size += n;
			}
		}
		conversation(buf, size);
	}
	printf("dhcp_fuzz: %ld conversations, no invariant broken; offers %u acks %u naks %u expired %u "
	       "malformed %u unusable %u\n", iterations, (unsigned)total.offers, (unsigned)total.acks,
	       (unsigned)total.naks, (unsigned)total.expired, (unsigned)total.malformed, (unsigned)total.refused);
	return 0;
}

#endif
