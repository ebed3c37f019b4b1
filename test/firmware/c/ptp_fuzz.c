/*
 * Fuzz harness for software/firmware/services/ptp: one input is a script of operations on a port
 * (receive a message, advance time, deliver a TX timestamp, format the status), so mutations
 * reach every state, not just the parser.
 *
 *   clang -fsanitize=fuzzer,address,undefined -DPTP_FUZZ_LIBFUZZER ...   (libFuzzer)
 *   gcc -fsanitize=address,undefined ...   ptp_fuzz <iterations> <seed>  (standalone: builds
 *       scripts from valid messages of a peer and mutates them, deterministically)
 *
 * Invariants checked (abort on violation), besides the sanitizers' (which also watch the status
 * line written into small buffers): every message the stack sends passes its own parser and
 * rebuilds to the same bytes; parse, build, parse again gives the same bytes for any input;
 * clock_adjfreq is never asked for more than max_freq_ppb.
 *
 * Script format: byte 0 = configuration (role, transport, domain, filter); then records of
 * [op][len][len bytes]: op % 4 == 0 receive (op bit 7: without RX timestamp; bit 6: replace the
 * sequenceId by that of the last Delay_Req the stack sent, so answers can match), 1 tick
 * (advance by the payload as a number of 1024 ns units), 2 TX timestamp (bit 4: Delay_Req,
 * else Sync; sequenceId = the last one sent of that type minus payload byte 1), 3 status.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptp_port.h"

static const uint8_t our_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
static uint64_t clock_ns;
static uint16_t last_sent_seq[16];

static void check_own_message(const uint8_t *msg, size_t len)
{
	struct ptp_msg m;
	uint8_t again[PTP_MAX_BUILD_LEN];
	if (ptp_msg_parse(msg, len, &m) != -1) {
		fprintf(stderr, "the stack sent a message its parser rejects\n");
		abort();
	}
	if (ptp_msg_build(again, sizeof(again), &m) != len || memcmp(again, msg, len)) {
		fprintf(stderr, "a sent message does not rebuild identically\n");
		abort();
	}
}

static int op_send(void *ctx, enum ptp_channel ch, const uint8_t *msg, size_t len)
{
	(void)ctx;
	(void)ch;
	check_own_message(msg, len);
	last_sent_seq[msg[0] & 0x0f] = (uint16_t)(msg[30] << 8 | msg[31]);
	return 0;
}

static void op_read(void *ctx, struct ptp_time *t)
{
	(void)ctx;
	t->sec = clock_ns / 1000000000u;
	t->nsec = (uint32_t)(clock_ns % 1000000000u);
}

static int op_step(void *ctx, int64_t offset)
{
	(void)ctx;
	clock_ns += (uint64_t)offset;
	return 0;
}

static int op_adjfreq(void *ctx, int64_t adj)
{
	(void)ctx;
	if (adj > (int64_t)500000 * 65536 || adj < -(int64_t)500000 * 65536) {
		fprintf(stderr, "adjustment beyond max_freq\n");
		abort();
	}
	return 0;
}

/* Parse, build, parse: for the types the stack builds, the second build equals the first. */
static void check_round_trip(const uint8_t *data, size_t size)
{
	struct ptp_msg m;
	uint8_t a[PTP_MAX_BUILD_LEN], b[PTP_MAX_BUILD_LEN];
	size_t na, nb;
	if (ptp_msg_parse(data, size, &m) != -1)
		return;
	na = ptp_msg_build(a, sizeof(a), &m);
	if (!na)
		return;
	if (ptp_msg_parse(a, na, &m) != -1) {
		fprintf(stderr, "built message does not parse\n");
		abort();
	}
	nb = ptp_msg_build(b, sizeof(b), &m);
	if (na != nb || memcmp(a, b, na)) {
		fprintf(stderr, "round trip differs\n");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ptp_port port;
	struct ptp_config cfg;
	struct ptp_ops ops = { op_send, op_read, op_step, op_adjfreq };
	uint64_t now = 1000000000;
	size_t pos = 1;
	char line[64];

	if (size < 1)
		return 0;
	ptp_config_default(&cfg, our_mac);
	cfg.role = (uint8_t)(data[0] % 3);
	cfg.transport = (uint8_t)(data[0] >> 2 & 1);
	cfg.domain = (uint8_t)(data[0] >> 3 & 1);
	cfg.log_sync_interval = -7;
	cfg.log_announce_interval = -4;
	cfg.log_min_delay_req_interval = -7;
	cfg.delay_filter_len = (uint8_t)(1 + (data[0] >> 4));
	clock_ns = 0;
	memset(last_sent_seq, 0, sizeof(last_sent_seq));
	if (ptp_port_init(&port, &cfg, &ops, NULL, now) != 0)
		abort();

	while (pos + 2 <= size) {
		uint8_t op = data[pos], len = data[pos + 1];
		const uint8_t *p = data + pos + 2;
		if (len > size - pos - 2)
			len = (uint8_t)(size - pos - 2);
		pos += 2 + (size_t)len;
		switch (op % 4) {
		case 0: {
			struct ptp_time ts = { clock_ns / 1000000000u, (uint32_t)(clock_ns % 1000000000u) };
			uint8_t msg[256];
			memcpy(msg, p, len);
			if ((op & 0x40) && len >= 32) {
				msg[30] = (uint8_t)(last_sent_seq[PTP_MSG_DELAY_REQ] >> 8);
				msg[31] = (uint8_t)last_sent_seq[PTP_MSG_DELAY_REQ];
			}
			check_round_trip(msg, len);
			ptp_port_receive(&port, msg, len, (op & 0x80) ? NULL : &ts);
			break;
		}
		case 1: {
			uint32_t step = 0;
			unsigned i;
			for (i = 0; i < len && i < 4; i++)
				step = step << 8 | p[i];
			now += (uint64_t)step << 10;
			clock_ns += (uint64_t)step << 10;
			ptp_port_tick(&port, now);
			break;
		}
		case 2: {
			struct ptp_time ts = { clock_ns / 1000000000u, (uint32_t)(clock_ns % 1000000000u) };
			unsigned type = op >> 4 & 1 ? PTP_MSG_DELAY_REQ : PTP_MSG_SYNC;
			uint16_t seq = (uint16_t)(last_sent_seq[type] - (len >= 2 ? p[1] : 0));
			ptp_port_tx_timestamp(&port, type, seq, &ts);
			break;
		}
		default:
			ptp_status_format(line, (size_t)(op >> 2) % sizeof(line), ptp_port_status(&port));
			break;
		}
	}
	return 0;
}

#ifndef PTP_FUZZ_LIBFUZZER
/* --- standalone: seeds from a plausible peer, then mutations ----------------------------------- */

static const uint8_t peer_id[8] = { 0x00, 0x1b, 0x19, 0xff, 0xfe, 0x00, 0x00, 0x07 };
static uint64_t rng;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* A message from peer 0 (a good grandmaster) or peer 1 (another, of random quality). */
static size_t peer_message(uint8_t *buf, unsigned peer, unsigned type, uint16_t seq)
{
	struct ptp_msg m;
	uint8_t me[8];
	memset(&m, 0, sizeof(m));
	m.hdr.type = (uint8_t)type;
	m.hdr.sequence_id = seq;
	m.hdr.flags = type == PTP_MSG_SYNC && rnd() % 8 ? PTP_FLAG_TWO_STEP : 0;
	m.hdr.log_interval = (int8_t)(rnd() % 8 ? -7 : (int)(rnd() % 20) - 12);
	m.hdr.correction = rnd() % 4 ? 0 : (int64_t)(rnd() % 100000);
	memcpy(m.hdr.source.clock_identity, peer_id, 8);
	m.hdr.source.clock_identity[7] = (uint8_t)(7 + peer);
	m.hdr.source.port_number = 1;
	m.ts.sec = 1700000000 + rnd() % 2;
	m.ts.nsec = rnd() % 1000000000u;
	ptp_clock_identity_from_mac(me, our_mac);
	memcpy(m.requesting.clock_identity, me, 8);
	m.requesting.port_number = 1;
	m.announce.gm_priority1 = (uint8_t)(peer ? rnd() : 100);
	m.announce.gm_quality.clock_class = (uint8_t)(peer ? rnd() : 6);
	m.announce.gm_quality.clock_accuracy = 0x21;
	m.announce.gm_quality.offset_scaled_log_variance = 0x4e5d;
	m.announce.gm_priority2 = 128;
	memcpy(m.announce.gm_identity, m.hdr.source.clock_identity, 8);
	m.announce.steps_removed = (uint16_t)(rnd() % 3);
	return ptp_msg_build(buf, 255, &m);
}

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
	unsigned n = rnd() % 4, i;
	for (i = 0; i < n; i++) {
		size_t at = *len ? rnd() % *len : 0;
		switch (rnd() % 6) {
		case 0: if (*len) buf[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
		case 1: if (*len) buf[at] = (uint8_t)rnd(); break;
		case 2: *len = *len ? rnd() % *len : 0; break;                     /* truncate */
		case 3: while (*len < cap && rnd() % 4) buf[(*len)++] = (uint8_t)rnd(); break;  /* pad */
		case 4: if (*len >= 4) { buf[2] = (uint8_t)rnd(); buf[3] = (uint8_t)rnd(); } break;
		default: if (*len > 33) buf[33] = (uint8_t)rnd(); break;          /* log interval */
		}
	}
}

static size_t pos;
static uint8_t script[8192];

static void add_message(unsigned peer, unsigned type, uint16_t seq, uint8_t flags)
{
	size_t n;
	script[pos] = (uint8_t)(flags | (rnd() % 16 ? 0 : 0x80));  /* sometimes no RX timestamp */
	if (rnd() % 32 == 0) {
		n = rnd() % 100;
		for (size_t i = 0; i < n; i++)
			script[pos + 2 + i] = (uint8_t)rnd();
	} else {
		n = peer_message(&script[pos + 2], peer, type, seq);
		if (rnd() % 8 == 0)
			mutate(&script[pos + 2], &n, 255);
	}
	script[pos + 1] = (uint8_t)n;
	pos += 2 + n;
}

static void add_tick(uint32_t units)
{
	script[pos++] = 1;
	script[pos++] = 4;
	script[pos++] = (uint8_t)(units >> 24);
	script[pos++] = (uint8_t)(units >> 16);
	script[pos++] = (uint8_t)(units >> 8);
	script[pos++] = (uint8_t)units;
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 10000, it;

	rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(argc > 2 ? atol(argv[2]) : 1);
	for (it = 0; it < iterations; it++) {
		/* A conversation: Announces, Sync/Follow_Up pairs, answers to our Delay_Reqs (our
		 * sequenceIds count from 0), TX timestamps for what we sent, time passing. */
		uint16_t seq_announce = 0, seq_sync = 0;
		int records = 1 + (int)(rnd() % 200), r;
		pos = 0;
		script[pos++] = (uint8_t)rnd();
		for (r = 0; r < records && pos + 300 < sizeof(script); r++) {
			unsigned peer = rnd() % 8 == 0;
			switch (rnd() % 10) {
			case 0:
			case 1:
				add_message(peer, PTP_MSG_ANNOUNCE, seq_announce++, 0);
				break;
			case 2:
			case 3:
				add_message(peer, PTP_MSG_SYNC, seq_sync, 0);
				if (rnd() % 2)
					add_tick(rnd() % 8);
				add_message(peer, PTP_MSG_FOLLOW_UP, (uint16_t)(seq_sync++ - (rnd() % 16 == 0)), 0);
				break;
			case 4:
				script[pos++] = 2 | 0x10;  /* TX timestamp of our last Delay_Req */
				script[pos++] = 2;
				script[pos++] = 0;
				script[pos++] = (uint8_t)(rnd() % 8 == 0);
				add_tick(rnd() % 64);
				add_message(peer, PTP_MSG_DELAY_RESP, 0, rnd() % 8 ? 0x40 : 0);  /* answer it */
				break;
			case 5:
				add_message(peer, rnd() % 2 ? PTP_MSG_DELAY_REQ : rnd() % 16, (uint16_t)rnd(), 0);
				break;
			case 6:
				script[pos++] = (uint8_t)(2 | (rnd() % 2) << 4);  /* a TX timestamp, maybe late */
				script[pos++] = 2;
				script[pos++] = 0;
				script[pos++] = (uint8_t)(rnd() % 4);
				break;
			case 7:
				script[pos++] = (uint8_t)(3 | (rnd() % 64) << 2);  /* status */
				script[pos++] = 0;
				break;
			default:
				add_tick(rnd() % 8 ? rnd() % 8000 : rnd() % 2000000);  /* up to ~2 s */
				break;
			}
		}
		LLVMFuzzerTestOneInput(script, pos);
	}
	printf("fuzz iterations=%ld ok\n", iterations);
	return 0;
}
#endif
