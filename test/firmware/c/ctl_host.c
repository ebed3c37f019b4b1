/*
 * Host harness for software/firmware/protocol/ctl.c: reads one request datagram from stdin, writes the
 * response (possibly empty) to stdout and the counters and the board calls it made to stderr,
 * so tests in Python can check the firmware's parser byte for byte against ethdaq.wire.protocol.
 * Usage: ctl_host [response capacity] [src ip] [stub error code] [SoC identifier string]
 *                 [allow-list: NET/MASK,... as numbers] [shared key as hex]
 *
 * With src ip "session": stdin holds several requests, each as src ip (u32), src port (u16),
 * time in ms (u32), length (u16) and the bytes, big-endian, handled in order with one handler
 * state; stdout gets each answer as length (u16; 0: none, 0xFFFF: did not fit) and the bytes.
 * An accepted REBOOT reboots the board as the firmware does (main.c): after its answer, the handler
 * state starts afresh but for what the gateware retains (the key's last counter), and the boot
 * count goes up (a "call=reboot" line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static int stub_error;

static int stream_start(const struct ctl_stream_cfg *c, uint32_t *run)
{
	fprintf(stderr, "call=stream_start dst_ip=%u dst_port=%u payload=%u enable=%u backpressure=%u gap=%u "
		"dst_mac=%02x:%02x:%02x:%02x:%02x:%02x\n",
		c->dst_ip, c->dst_port, c->payload, c->enable, c->backpressure, c->gap,
		c->dst_mac[0], c->dst_mac[1], c->dst_mac[2], c->dst_mac[3], c->dst_mac[4], c->dst_mac[5]);
	*run = 42;
	return stub_error;
}

static int stream_stop(uint32_t *run)
{
	fprintf(stderr, "call=stream_stop\n");
	*run = 42;
	return stub_error;
}

static int emulator(const struct ctl_emulator_cfg *c)
{
	fprintf(stderr, "call=emulator mode=%u rate=%u seed=%u\n", c->mode, c->rate, c->seed);
	return stub_error;
}

static void status(struct ctl_status *st)
{
	st->running = 1; st->run = 42; st->datagrams = 0x0000000100000002ull; st->dropped = 7;
	st->port_rx_dropped = 3; st->port_tx_dropped = 4; st->arp_timeouts = 5;
	st->dst_flags = CTL_DST_VALID; st->stale = 6; st->rx_fcs_errors = 11; st->rx_preamble_errors = 12;
	st->dst_mac_changes = 14; st->arp_refused = 15;
	for (int i = 0; i < 6; i++)
		st->dst_mac[i] = (uint8_t)(0xa0 + i);
}

static void link(struct ctl_link *l)
{
	l->flags = CTL_LINK_PHY | CTL_LINK_UP | CTL_LINK_FULL_DUPLEX | CTL_LINK_AUTONEG;
	l->speed = 1000; l->losses = 13; l->phy_address = 1; l->phy_id = 0x65646171u;
}

static int streams(struct ctl_stream_counters *s, uint32_t *run)
{
	for (int i = 0; i < 4; i++) {
		s[i].flags = i == 2 ? 0 : CTL_STREAM_ENABLED;
		s[i].datagrams = 100u + (uint64_t)i;
		s[i].bytes = (1ull << 40) + (uint64_t)i;
		s[i].dropped = (uint64_t)i * 7u;
	}
	*run = 42;
	return 4;
}

static int ptp_status(struct ctl_ptp_status *p)
{
	p->state = 9; p->servo_state = 2; p->role = 2; p->transport = 1;
	p->offset_ns = -1234567890123LL; p->mean_path_delay_ns = 4567; p->freq_scaled_ppb = -(100LL << 16);
	for (int i = 0; i < 8; i++) {
		p->clock_identity[i] = (uint8_t)(0x10 + i);
		p->parent_identity[i] = (uint8_t)(0x20 + i);
		p->gm_identity[i] = (uint8_t)(0x30 + i);
	}
	p->parent_port = 1; p->gm_priority1 = 128; p->gm_priority2 = 127; p->steps_removed = 1;
	p->utc_offset = -37; p->time_flags = 0x0308;
	p->steps = 1; p->announce_timeouts = 2; p->servo_samples = 3; p->delay_resp_missing = 4;
	p->tx_ts_missing = 5; p->faults = 6; p->rx_ts_missing = 7; p->hw_rx_overflows = 8; p->hw_tx_overflows = 9;
	return stub_error ? -1 : 0;
}

static int ptp_config(const struct ctl_ptp_config *c)
{
	fprintf(stderr, "call=ptp_config role=%u domain=%u log_sync=%d log_announce=%d log_delay_req=%d "
		"priority1=%u priority2=%u\n", c->role, c->domain, c->log_sync, c->log_announce, c->log_delay_req,
		c->priority1, c->priority2);
	return stub_error;
}

static int launch(const struct ctl_launch *l, struct ctl_launch_status *s)
{
	fprintf(stderr, "call=launch op=%u flags=%u sec=%llu ns=%u period=%u count=%u guard=%u frame=",
		l->op, l->flags, (unsigned long long)l->sec, l->ns, l->period, l->count, l->guard);
	for (unsigned i = 0; i < l->frame_len; i++)
		fprintf(stderr, "%02x", l->frame[i]);
	fprintf(stderr, "\n");
	s->armed = l->op == CTL_LAUNCH_ARM; s->guard = l->guard ? l->guard : 1537; s->lead = 7;
	s->cycle_ps = 8000; s->sent = 5; s->missed_past = 6; s->missed_busy = 7;
	s->first_sec = l->sec; s->first_ns = l->ns;
	return stub_error;
}

/* Two classes measured (tx_cpu, rx_fasttrack); every other record the driver fills must not
 * reach the answer. */
static int probe(int clear, struct ctl_probe_report *r)
{
	fprintf(stderr, "call=probe clear=%d\n", clear);
	if (clear)
		return stub_error;
	r->cycle_ps = 8000; r->present = (1u << CTL_PROBE_TX_CPU) | (1u << CTL_PROBE_RX_FASTTRACK);
	r->tx_unpaired = 1; r->tx_overflows = 2; r->rx_unpaired = 3; r->rx_overflows = 4;
	for (unsigned i = 0; i < CTL_PROBE_MAX_CLASSES; i++) {
		struct ctl_probe_class *c = &r->classes[i];
		c->count = 10u + i; c->sum = (1ull << 40) + i; c->sumsq = (1ull << 60) + i; c->min = (uint16_t)(20u + i); c->max = (uint16_t)(0xFFF0u + i);
		for (unsigned k = 0; k < CTL_PROBE_NBINS; k++)
			c->bins[k] = 100u * i + k;
	}
	return stub_error;
}

/* Three rules in the build; rule 0 a fast-track rule, the others as RULE_SET left them. */
static int rules(const struct ctl_rule *set, struct ctl_rules_report *r)
{
	if (set != NULL) {
		fprintf(stderr, "call=rules index=%u enable=%u action=%u match=%u ethertype=%u proto=%u port=%u src_ip=%u\n",
			set->index, set->enable, set->action, set->match, set->ethertype, set->proto, set->port, set->src_ip);
		return stub_error;
	}
	fprintf(stderr, "call=rules read=1\n");
	r->nrules = 3; r->unmatched = 70; r->gate_error = 71; r->gate_full = 72; r->gate_oversize = 73;
	for (unsigned i = 0; i < CTL_MAX_RULES; i++) {
		struct ctl_rule *o = &r->rules[i];
		o->index = (uint8_t)i; o->enable = i == 0; o->action = CTL_RULE_FASTTRACK; o->match = CTL_RULE_MATCH_PORT;
		o->port = (uint16_t)(9000 + i); o->ethertype = 0x0800; o->proto = 17; o->src_ip = 0xC0A80100u + i;
		o->matched = 1000u + i; o->refused = 2000u + i;
	}
	return stub_error;
}

/* A front-end with 8 registers (32 bytes): register i reads 0xF0000000 + i until written. */
static uint32_t front_regs[8] = { 0xF0000000u, 0xF0000001u, 0xF0000002u, 0xF0000003u,
				  0xF0000004u, 0xF0000005u, 0xF0000006u, 0xF0000007u };

static int regs(int write, uint16_t offset, uint8_t count, uint32_t *words)
{
	fprintf(stderr, "call=regs write=%d offset=%u count=%u first=%u\n", write, offset, count, words[0]);
	if (stub_error)
		return stub_error;
	if ((uint32_t)offset + 4u * count > sizeof(front_regs))
		return CTL_ERR_BAD_VALUE;
	for (unsigned i = 0; i < count; i++) {
		if (write)
			front_regs[offset / 4u + i] = words[i];
		words[i] = front_regs[offset / 4u + i];
	}
	return 0;
}

/* Receive counters: the audit's cause i counts (1 << 40) + i (wider than 32 bits), the board's
 * 0x2N and PTP's 0x6N count 1000 + code. With a stub error: a build without the receive audit
 * and without the frame gate (no rx_full). */
static int rx_counter(uint8_t code, uint64_t *value)
{
	fprintf(stderr, "call=rx_counter code=%u\n", code);
	if (code < CTL_RX_AUDIT_CAUSES) {
		*value = (1ull << 40) + code;
		return !stub_error;
	}
	if (code == CTL_RX_COUNTER_RX_FULL && stub_error)
		return 0;
	*value = 1000u + code;
	return 1;
}

/* The build's settings, as main.c sets them at boot. */
static const struct ctl_config boot_config = {
	.ip = 0xC0A80132u, .mac = {0x10, 0xe2, 0xd5, 0x00, 0x00, 0x01},
	.stream = { .dst_port = 5000, .payload = 1472, .enable = 0x0F },
	.emulator = { .mode = 0, .rate = 0x80000000u, .seed = 1 },
	.ptp = { .role = 0, .transport = 0, .domain = 0, .log_sync = 0, .log_announce = 1, .log_delay_req = 0,
		 .priority1 = 128, .priority2 = 128 },
	.netmask = 0xFFFFFF00u, .gateway = 0,
};

int main(int argc, char **argv)
{
	static uint8_t req[65536], rsp[2048];
	static struct ctl_state st;
	static struct ctl_net allow[CTL_MAX_ALLOW];
	struct ctl_request rq;
	/* Declared front-end rates: one undeclared, one at the u32's top. */
	static const uint32_t max_rates[4] = { 1000000u, 0u, 4294967295u, 1u };
	/* Event layouts: channels 1 and 3 carry events, with 12-bit and 31-bit ids. */
	static const uint8_t event_id_bits[4] = { 0u, 12u, 0u, 31u };
	struct ctl_identity id = {
		.mac = {0x10, 0xe2, 0xd5, 0x00, 0x00, 0x01},
		.ip = 0xC0A80132u, .ctl_port = 7000, .sys_clk_hz = 125000000u, .eth_dw = 8,
		.nchannels = 4, .sample_bits = 16, .max_payload = 8972, .capabilities = 0x2B,
		.board = "sim", .build_id = "0123456789ab", .ident = "ethdaq sim test", .max_rates = max_rates,
		.event_id_bits = event_id_bits,
		.boots = 3, .reset_cause = 2, .watchdog_resets = 1,
	};
	struct ctl_ops ops = { stream_start, stream_stop, emulator, status, ptp_status, ptp_config, link, streams, launch,
			       probe, rules, regs, rx_counter };
	size_t cap = argc > 1 ? (size_t)atoi(argv[1]) : sizeof(rsp);
	int session = argc > 2 && strcmp(argv[2], "session") == 0;
	uint32_t src_ip = argc > 2 && !session ? (uint32_t)strtoul(argv[2], NULL, 0) : 0xC0A80164u;
	size_t n = fread(req, 1, sizeof(req), stdin);
	int r = 0;
	stub_error = argc > 3 ? atoi(argv[3]) : 0;
	st.config = boot_config;
	if (argc > 4)
		id.ident = argv[4];
	static uint8_t key[CTL_KEY_MAX];
	if (argc > 6) {
		const char *h = argv[6];
		while (h[0] && h[1] && st.key_len < sizeof(key)) {
			unsigned v;
			if (sscanf(h, "%2x", &v) != 1)
				return 2;
			key[st.key_len++] = (uint8_t)v;
			h += 2;
		}
		st.key = key;
	}
	if (argc > 5) {
		char *p = argv[5];
		while (*p && st.access.nallow < CTL_MAX_ALLOW) {
			allow[st.access.nallow].net = (uint32_t)strtoul(p, &p, 0);
			if (*p++ != '/')
				return 2;
			allow[st.access.nallow++].mask = (uint32_t)strtoul(p, &p, 0);
			if (*p == ',')
				p++;
		}
		st.access.allow = allow;
	}
	if (cap > sizeof(rsp))
		cap = sizeof(rsp);
	if (!session) {
		rq = (struct ctl_request){ req, n, src_ip, 40000, 0 };
		r = ctl_handle(&st, &rq, rsp, cap, &id, &ops);
		if (r > 0)
			fwrite(rsp, 1, (size_t)r, stdout);
	}
	for (size_t off = 0; session && off + 12 <= n;) {
		uint32_t ip = ((uint32_t)req[off] << 24) | ((uint32_t)req[off + 1] << 16) |
			      ((uint32_t)req[off + 2] << 8) | req[off + 3];
		uint16_t port = (uint16_t)((req[off + 4] << 8) | req[off + 5]);
		uint32_t now = ((uint32_t)req[off + 6] << 24) | ((uint32_t)req[off + 7] << 16) |
			       ((uint32_t)req[off + 8] << 8) | req[off + 9];
		size_t len = (size_t)((req[off + 10] << 8) | req[off + 11]);
		uint8_t out[2];
		if (len > n - off - 12)
			return 2;
		rq = (struct ctl_request){ req + off + 12, len, ip, port, now };
		r = ctl_handle(&st, &rq, rsp, cap, &id, &ops);
		out[0] = (uint8_t)((r < 0 ? 0xFFFF : r) >> 8);
		out[1] = (uint8_t)(r < 0 ? 0xFFFF : r);
		fwrite(out, 1, 2, stdout);
		if (r > 0)
			fwrite(rsp, 1, (size_t)r, stdout);
		off += 12 + len;
		if (st.net_pending) {  /* As main.c: the board takes the addresses after answering. */
			fprintf(stderr, "call=net\n");
			id.ip = st.config.ip;
			memcpy(id.mac, st.config.mac, sizeof(id.mac));
			st.net_pending = 0;
		}
		if (st.reboot_pending) {
			struct ctl_state fresh = { .access = { .allow = st.access.allow, .nallow = st.access.nallow },
						   .key = st.key, .key_len = st.key_len,
						   .auth_counter = st.auth_counter, .config = boot_config };
			fprintf(stderr, "call=reboot\n");
			st = fresh;
			id.ip = boot_config.ip;
			memcpy(id.mac, boot_config.mac, sizeof(id.mac));
			id.boots++;
			id.reset_cause = 2;
		}
	}
	fprintf(stderr, "ret=%d requests=%u short=%u magic=%u response=%u version=%u type=%u length=%u refused=%u "
		"no_room=%u stale_seq=%u replayed=%u not_allowed=%u not_controller=%u auth_required=%u auth_failed=%u\n",
		r, st.cnt.requests, st.cnt.short_drop, st.cnt.magic_drop, st.cnt.response_drop, st.cnt.bad_version,
		st.cnt.bad_type, st.cnt.bad_length, st.cnt.refused, st.cnt.no_room, st.cnt.stale_seq, st.cnt.replayed,
		st.cnt.not_allowed, st.cnt.not_controller, st.cnt.auth_required, st.cnt.auth_failed);
	return 0;
}
