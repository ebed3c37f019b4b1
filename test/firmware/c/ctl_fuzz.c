/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Fuzz harness for software/firmware/protocol/ctl.c, the firmware's control protocol handler, built
 * unchanged for the host. One input is a conversation: several requesters sending requests
 * through one handler state (counters and reply cache), so mutations reach the retransmission
 * paths, not just the parser.
 *
 *   clang -fsanitize=fuzzer,address,undefined -DCTL_FUZZ_LIBFUZZER ...   (libFuzzer;
 *       bench/fuzz_ctl.py runs it)
 *   gcc -fsanitize=address,undefined ...   ctl_fuzz <iterations> <seed>  (standalone: builds
 *       conversations from valid requests and mutates them, deterministically; CI runs it)
 *
 * Input: byte 0 = configuration (bits 0-2: the error code the board's operations return, 0-6,
 * or 7: none, and the board has a shared key, so state changes need signed requests;
 * bit 3: built without the streamer; bits 4-7: response buffer size class). Then records of
 * [who][len][len bytes]: (who & 0x3f) % 6 picks the requester; who bit 7: send that requester's
 * previous request again, byte for byte (a retransmission; len bytes are then skipped); who bit 6:
 * first `len` seconds pass (leases lapse). Config bit 3: an allow-list that admits requesters
 * 0-2 only.
 *
 * Invariants (abort on violation), besides the sanitizers': the answer fits the buffer; an answer
 * has our magic and version, echoes the request's seq, and is either the request's response type
 * or a 9-byte ERROR_RSP, or for ERR_BAD_VALUE one with a reason (a field, and a value outside the
 * range given, min <= max); an RX_STATS answer holds as many records as its count says (at most
 * CTL_RX_STATS_MAX), codes ascending, and the board is never asked for the handler's own counters;
 * every request moves at least one counter (at most two: an error answer
 * that did not fit also counts no_room); a request answered from the reply cache runs no board
 * operation and gets byte for byte the answer that requester got before; a request runs at most
 * one board operation; a board operation runs only for an address in the allow-list, only while
 * no other address holds an unexpired lease, and leaves the requester holding the board.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "hmac_sha256.h"

#define REQUESTERS 6
#define MAX_REQ    (CTL_REPLAY_REQ_MAX + 8)  /* The longest request, signed, and mutations that lengthen it. */

static int ops_error;
static unsigned ops_calls;
static struct ctl_counters total;  /* Over all conversations: what the standalone run reached. */
static const uint8_t fuzz_key[32] = "ethdaq fuzz key, 32 bytes long!";

/* 1 if req ends in a right AUTH for fuzz_key (whatever its counter). */
static int signed_right(const uint8_t *req, size_t len)
{
	uint8_t mac[SHA256_DIGEST];
	if (len < CTL_HEADER_SIZE + CTL_AUTH_LEN)
		return 0;
	hmac_sha256(fuzz_key, sizeof(fuzz_key), req, len - SHA256_DIGEST, NULL, 0, mac);
	return memcmp(mac, req + len - SHA256_DIGEST, SHA256_DIGEST) == 0;
}

static void fail(const char *why)
{
	fprintf(stderr, "ctl_fuzz: invariant broken: %s\n", why);
	abort();
}

static int op_start(const struct ctl_stream_cfg *c, uint32_t *run)
{
	(void)c;
	ops_calls++;
	*run = 1;
	return ops_error;
}

static int op_stop(uint32_t *run)
{
	ops_calls++;
	*run = 1;
	return ops_error;
}

static int op_emulator(const struct ctl_emulator_cfg *c)
{
	(void)c;
	ops_calls++;
	return ops_error;
}

static void op_status(struct ctl_status *st)
{
	st->running = 1;
	st->datagrams = 12345;
}

static int op_ptp(struct ctl_ptp_status *p)
{
	p->state = 6;
	p->offset_ns = -1;
	return ops_error ? -1 : 0;
}

static int op_ptp_config(const struct ctl_ptp_config *c)
{
	(void)c;
	ops_calls++;
	return ops_error;
}

static void op_link(struct ctl_link *l)
{
	l->flags = CTL_LINK_PHY | CTL_LINK_UP;
	l->speed = 100;
}

static int op_streams(struct ctl_stream_counters *s, uint32_t *run)
{
	s[0].datagrams = 1;
	*run = 1;
	return ops_error ? -1 : 2;
}

static int op_launch(const struct ctl_launch *l, struct ctl_launch_status *s)
{
	/* The frame is in the request: touch every byte the handler promised (the sanitizers
	 * check it is in bounds). */
	unsigned sum = 0;
	for (unsigned i = 0; i < l->frame_len; i++)
		sum += l->frame[i];
	s->sent = sum;
	if (l->op != CTL_LAUNCH_QUERY)  /* A query reads, like STATUS: anybody's. */
		ops_calls++;
	return ops_error;
}

static int op_probe(int clear, struct ctl_probe_report *r)
{
	if (clear)
		return 0;
	/* Present bits beyond the protocol's classes, and records the build does not measure, must
	 * not reach the answer. */
	r->present = 0xFF;
	r->cycle_ps = 8000;
	for (unsigned i = 0; i < CTL_PROBE_MAX_CLASSES; i++)
		r->classes[i].count = i;
	return 0;
}

static int op_rules(const struct ctl_rule *set, struct ctl_rules_report *r)
{
	if (set != NULL)
		return set->index == 3 ? CTL_ERR_BUSY : 0;
	r->nrules = 0xFF;   /* More than fit: the handler must cut it to CTL_MAX_RULES. */
	for (unsigned i = 0; i < CTL_MAX_RULES; i++)
		r->rules[i].matched = i;
	return 0;
}

static int op_regs(int write, uint16_t offset, uint8_t count, uint32_t *words)
{
	(void)write;
	if (offset >= 64)
		return CTL_ERR_BAD_VALUE;
	for (unsigned i = 0; i < count; i++)   /* count is at most CTL_REG_MAX_WORDS: ASan checks. */
		words[i] ^= offset + i;
	return 0;
}

/* Some codes present, some not, as builds differ; never one of the handler's own. */
static int op_rx_counter(uint8_t code, uint64_t *value)
{
	if (code >= CTL_RX_COUNTER_CTL_SHORT && code <= CTL_RX_COUNTER_CTL_LENGTH)
		fail("RX_STATS asked the board for one of the handler's own counters");
	*value = ~(uint64_t)code;
	return ops_error ? code % 3 != 0 : 1;
}

static const struct ctl_ops ops = { op_start, op_stop, op_emulator, op_status, op_ptp, op_ptp_config, op_link,
				    op_streams, op_launch, op_probe, op_rules, op_regs, op_rx_counter };

/* RX_STATS_RSP's records: as many as its count says, at most CTL_RX_STATS_MAX, codes ascending. */
static int rx_stats_well_formed(const uint8_t *rsp, int n)
{
	int last = -1;
	if (n < (int)CTL_HEADER_SIZE + 1 || rsp[CTL_HEADER_SIZE] > CTL_RX_STATS_MAX ||
	    n != (int)(CTL_HEADER_SIZE + 1 + rsp[CTL_HEADER_SIZE] * CTL_RX_STATS_RECORD_SIZE))
		return 0;
	for (int at = CTL_HEADER_SIZE + 1; at < n; at += CTL_RX_STATS_RECORD_SIZE) {
		if (rsp[at] <= last)
			return 0;
		last = rsp[at];
	}
	return 1;
}

static int64_t get_be64s(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

/* ERROR_RSP: the code alone, or ERR_BAD_VALUE with its reason (protocol.py REFUSAL): a field, and
 * a value outside the range min..max. */
static int error_well_formed(const uint8_t *rsp, int n)
{
	const uint8_t *r = rsp + CTL_HEADER_SIZE + 1;
	int64_t value, lo, hi;

	if (n == (int)CTL_HEADER_SIZE + 1)
		return 1;
	if (n != (int)(CTL_HEADER_SIZE + 1 + CTL_REFUSAL_SIZE) || rsp[CTL_HEADER_SIZE] != CTL_ERR_BAD_VALUE || r[0] == 0)
		return 0;
	value = get_be64s(r + 1);
	lo = get_be64s(r + 9);
	hi = get_be64s(r + 17);
	return lo <= hi && (value < lo || value > hi);
}

static uint32_t counter_sum(const struct ctl_counters *c)
{
	return c->requests + c->short_drop + c->magic_drop + c->response_drop + c->bad_version +
	       c->bad_type + c->bad_length + c->refused + c->no_room + c->stale_seq + c->replayed +
	       c->not_allowed + c->not_controller + c->auth_required + c->auth_failed;
}

static void conversation(const uint8_t *data, size_t size)
{
	static const size_t caps[16] = { 0, 1, 8, 9, 12, 16, 24, 40, 64, 80, 96, 128, 200, 512, 1024, 2048 };
	struct ctl_identity id = {
		.mac = {0x10, 0xe2, 0xd5, 0, 0, 1}, .ip = 0xC0A80132u, .ctl_port = 7000,
		.sys_clk_hz = 125000000u, .eth_dw = 8, .nchannels = 4, .sample_bits = 16, .max_payload = 8972, .capabilities = 0x0B,
		.board = "fuzz", .build_id = "0123456789ab", .ident = "ethdaq ctl fuzz",
	};
	static struct ctl_state st;
	static const struct ctl_net allow[] = { { 0x0A000000u, 0xFFFFFFFCu } };  /* Requesters 0-2. */
	struct ctl_counters *c = &st.cnt;
	uint64_t now_ms = 0;
	static uint8_t last_req[REQUESTERS][MAX_REQ], last_rsp[REQUESTERS][2048], rsp[2048];
	size_t last_req_len[REQUESTERS] = {0};
	int last_rsp_len[REQUESTERS] = {0};
	size_t cap, off = 1;

	static int trace = -1;
	if (trace < 0)
		trace = getenv("CTL_FUZZ_TRACE") != NULL;
	if (size < 1)
		return;
	memset(&st, 0, sizeof(st));
	if (data[0] & 8) {  /* With an allow-list that leaves some requesters out. */
		st.access.allow = allow;
		st.access.nallow = 1;
	}
	ops_error = data[0] & 7;
	if (ops_error == 7) {
		ops_error = 0;
		st.key = fuzz_key;
		st.key_len = sizeof(fuzz_key);
	}
	if ((data[0] & 0x18) == 0x18)
		id.nchannels = 0;
	cap = caps[data[0] >> 4];

	while (off + 2 <= size) {
		unsigned who = (data[off] & 0x3f) % REQUESTERS;
		int again = data[off] & 0x80;
		size_t len = data[off + 1];
		const uint8_t *req;
		uint32_t before_cnt = counter_sum(c), replayed = c->replayed;
		uint32_t executed = c->requests + c->refused + c->not_allowed + c->not_controller;
		uint32_t holder = st.access.holder;
		uint64_t lease_end = st.access.expires_ms;
		struct ctl_request rq;
		unsigned before_calls = ops_calls;
		int n;

		off += 2;
		if (len > size - off)
			len = size - off;
		if (again && last_req_len[who] > 0) {
			req = last_req[who];
			len = last_req_len[who];
		} else {
			req = data + off;
			off += len;
		}
		/* who bit 6: time passes (seconds, from the length byte), so leases lapse. */
		if (data[off - 2] & 0x40)
			now_ms += (uint64_t)data[off - 1] * 1000u;
		rq = (struct ctl_request){ req, len, 0x0A000001u + who, (uint16_t)(40000 + who), now_ms };
		n = ctl_handle(&st, &rq, rsp, cap, &id, &ops);
		if (ops_calls != before_calls && st.key_len && !signed_right(req, len))
			fail("a board operation ran for a request without a right signature");
		if (ops_calls != before_calls && st.access.holder != rq.src_ip)
			fail("a board operation ran for another address than the controller's");
		if (ops_calls != before_calls && holder != 0 && holder != rq.src_ip && now_ms < lease_end)
			fail("a board operation ran while another address held an unexpired lease");
		if (ops_calls != before_calls && st.access.nallow && !((rq.src_ip & allow[0].mask) == allow[0].net))
			fail("a board operation ran for an address outside the allow-list");
		if (trace)
			fprintf(stderr, "who=%u len=%zu type=%02x seq=%02x%02x%02x%02x now=%llu n=%d rsp_type=%02x code=%u "
				"replayed=%u executed=%u holder=%08x\n", who, len, len > 3 ? req[3] : 0,
				len > 7 ? req[4] : 0, len > 7 ? req[5] : 0, len > 7 ? req[6] : 0, len > 7 ? req[7] : 0,
				(unsigned long long)now_ms, n, n > 3 ? rsp[3] : 0, n > 8 ? rsp[8] : 0,
				c->replayed - replayed, c->requests + c->refused + c->not_allowed + c->not_controller - executed,
				(unsigned)st.access.holder);
		if (n > (int)cap || n < -1)
			fail("answer longer than the buffer");
		if (counter_sum(c) - before_cnt < 1 || counter_sum(c) - before_cnt > 2)
			fail("a request must move one counter (two for an error answer that did not fit)");
		if (ops_calls - before_calls > 1)
			fail("one request ran two board operations");
		if (n > 0) {
			uint8_t type = rsp[3];
			if (n < (int)CTL_HEADER_SIZE || rsp[0] != (CTL_MAGIC >> 8) || rsp[1] != (CTL_MAGIC & 0xff) ||
			    rsp[2] != CTL_VERSION)
				fail("answer without our header");
			if (len < CTL_HEADER_SIZE || memcmp(rsp + 4, req + 4, 4) != 0)
				fail("answer does not echo the request's seq");
			if (type == CTL_MSG_ERROR_RSP ? !error_well_formed(rsp, n) : type != (req[3] | CTL_RESPONSE))
				fail("answer of the wrong type or length");
			if (type == (CTL_MSG_RX_STATS | CTL_RESPONSE) && !rx_stats_well_formed(rsp, n))
				fail("RX_STATS answer whose records are not its count's, or not in code order");
		}
		if (c->replayed != replayed) {
			if (ops_calls != before_calls)
				fail("a retransmission ran a board operation again");
			if (n != last_rsp_len[who] || memcmp(rsp, last_rsp[who], (size_t)n) != 0)
				fail("a retransmission got another answer than the first time");
		}
		if (len <= MAX_REQ) {
			memmove(last_req[who], req, len);  /* req may be last_req[who] itself. */
			last_req_len[who] = len;
		}
		/* The answer the reply cache keeps: that of a request that was executed (with a key:
		 * and signed). */
		/* (A signed request to a board without a key is refused before it is executed.) */
		int keyless_signed = !st.key_len && len >= CTL_HEADER_SIZE + CTL_AUTH_LEN &&
				     len - CTL_AUTH_LEN == ctl_request_length(req[3]);
		if (n > 0 && c->requests + c->refused + c->not_allowed + c->not_controller != executed &&
		    (st.key_len ? signed_right(req, len) : !keyless_signed)) {
			memcpy(last_rsp[who], rsp, (size_t)n);
			last_rsp_len[who] = n;
		}
	}
	total.requests += c->requests;
	total.refused += c->refused;
	total.replayed += c->replayed;
	total.stale_seq += c->stale_seq;
	total.no_room += c->no_room;
	total.bad_length += c->bad_length;
	total.magic_drop += c->magic_drop;
	total.not_allowed += c->not_allowed;
	total.not_controller += c->not_controller;
	total.auth_required += c->auth_required;
	total.auth_failed += c->auth_failed;
}

#ifdef CTL_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	conversation(data, size);
	return 0;
}
#else
/* A valid request of a random type with random fields, into buf; its length. */
static size_t valid_request(uint8_t *buf, unsigned *seed, uint32_t seq)
{
	static const uint8_t types[] = { CTL_MSG_IDENTIFY, CTL_MSG_STREAM_START, CTL_MSG_STREAM_STOP,
					 CTL_MSG_EMULATOR, CTL_MSG_STATUS, CTL_MSG_CLAIM, CTL_MSG_RELEASE,
					 CTL_MSG_PTP_STATUS, CTL_MSG_LAUNCH, CTL_MSG_RULES, CTL_MSG_RULE_SET,
					 CTL_MSG_REG_READ, CTL_MSG_REG_WRITE, CTL_MSG_RX_STATS };
	static const size_t lengths[] = { CTL_IDENTIFY_REQ_LENGTH, CTL_STREAM_START_REQ_LENGTH,
					  CTL_STREAM_STOP_REQ_LENGTH, CTL_EMULATOR_REQ_LENGTH, CTL_STATUS_REQ_LENGTH,
					  CTL_CLAIM_REQ_LENGTH, CTL_RELEASE_REQ_LENGTH, CTL_PTP_STATUS_REQ_LENGTH,
					  CTL_LAUNCH_REQ_LENGTH, CTL_RULES_REQ_LENGTH, CTL_RULE_SET_REQ_LENGTH,
					  CTL_REG_READ_REQ_LENGTH, CTL_REG_WRITE_REQ_LENGTH, CTL_RX_STATS_REQ_LENGTH };
	unsigned k = (unsigned)rand_r(seed) % (sizeof(types) / sizeof(types[0]));
	buf[0] = CTL_MAGIC >> 8;
	buf[1] = CTL_MAGIC & 0xff;
	buf[2] = CTL_VERSION;
	buf[3] = types[k];
	buf[4] = (uint8_t)(seq >> 24); buf[5] = (uint8_t)(seq >> 16); buf[6] = (uint8_t)(seq >> 8); buf[7] = (uint8_t)seq;
	for (size_t i = CTL_HEADER_SIZE; i < lengths[k]; i++)
		buf[i] = (uint8_t)rand_r(seed);
	if ((types[k] == CTL_MSG_REG_READ || types[k] == CTL_MSG_REG_WRITE) && rand_r(seed) % 2) {
		/* Often in shape: word-aligned, 1 to CTL_REG_MAX_WORDS words, near the registers. */
		buf[8] = 0;
		buf[9] = (uint8_t)(4 * (rand_r(seed) % 20));
		buf[10] = (uint8_t)(1 + rand_r(seed) % CTL_REG_MAX_WORDS);
	}
	if (types[k] == CTL_MSG_CLAIM && rand_r(seed) % 2) {  /* Often a short lease. */
		buf[8] = 0;
		buf[9] = (uint8_t)(rand_r(seed) % 120);
	}
	if (types[k] == CTL_MSG_STREAM_START && rand_r(seed) % 2) {  /* Often in range. */
		buf[14] = 0x05; buf[15] = 0xC0;  /* 1472-byte payload */
		buf[16] = 0x0F; buf[17] = 0;
	}
	if (types[k] == CTL_MSG_LAUNCH && rand_r(seed) % 2) {  /* Often in range: arm, any frame length. */
		buf[8] = (uint8_t)(rand_r(seed) % 3); buf[9] = (uint8_t)(rand_r(seed) % 2);
		buf[10] = buf[11] = 0;                  /* sec < 2^48 */
		buf[18] = buf[22] = 0;                  /* ns, period < 2^24 */
		buf[32] = 0; buf[33] = (uint8_t)(rand_r(seed) % (CTL_LAUNCH_FRAME_MAX + 8));
	}
	return lengths[k];
}

static uint64_t counter;

/* req with AUTH for fuzz_key appended (a new counter, or sometimes an old one). */
static size_t sign(uint8_t *req, size_t len, unsigned *seed)
{
	uint64_t c = rand_r(seed) % 8 ? ++counter : counter - (uint64_t)(rand_r(seed) % 3);
	for (int i = 0; i < 8; i++)
		req[len + (size_t)i] = (uint8_t)(c >> (56 - 8 * i));
	hmac_sha256(fuzz_key, sizeof(fuzz_key), req, len + 8, NULL, 0, req + len + 8);
	return len + CTL_AUTH_LEN;
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 100000;
	unsigned seed = argc > 2 ? (unsigned)atoi(argv[2]) : 1;
	static uint8_t input[4096];

	for (long it = 0; it < iterations; it++) {
		size_t size = 0;
		uint32_t seq[REQUESTERS];
		int records = 1 + rand_r(&seed) % 24;
		for (int i = 0; i < REQUESTERS; i++)
			seq[i] = (uint32_t)rand_r(&seed);
		input[size++] = (uint8_t)rand_r(&seed);
		for (int r = 0; r < records; r++) {
			unsigned who = (unsigned)rand_r(&seed) % REQUESTERS, what = (unsigned)rand_r(&seed) % 16;
			uint8_t req[MAX_REQ] = {0};
			size_t len;
			/* Mostly the next seq; sometimes the same again or an old one. */
			uint32_t s = what < 11 ? ++seq[who] : what < 13 ? seq[who] : seq[who] - 1 - (uint32_t)rand_r(&seed) % 10;
			len = valid_request(req, &seed, s);
			if ((input[0] & 7) == 7 && rand_r(&seed) % 4)
				len = sign(req, len, &seed);
			switch (rand_r(&seed) % 8) {  /* Mutations: none most often. */
			case 0: req[rand_r(&seed) % len] ^= (uint8_t)(1u << (rand_r(&seed) % 8)); break;
			case 1: len = (size_t)rand_r(&seed) % (len + 1); break;
			case 2: len += (size_t)rand_r(&seed) % 8; break;
			default: break;
			}
			if (len > MAX_REQ)
				len = MAX_REQ;
			/* 0x80: retransmit; 0x40: time passes */
			input[size++] = (uint8_t)(who | (what == 15 ? 0x80 : 0) | (rand_r(&seed) % 8 == 0 ? 0x40 : 0));
			input[size++] = (uint8_t)len;
			memcpy(input + size, req, len);
			size += len;
		}
		conversation(input, size);
	}
	printf("ctl_fuzz: %ld conversations, no invariant broken: requests=%u refused=%u replayed=%u "
	       "stale_seq=%u no_room=%u bad_length=%u magic=%u not_allowed=%u not_controller=%u auth_required=%u "
	       "auth_failed=%u\n", iterations,
	       total.requests, total.refused, total.replayed, total.stale_seq, total.no_room, total.bad_length,
	       total.magic_drop, total.not_allowed, total.not_controller, total.auth_required, total.auth_failed);
	return 0;
}
#endif
