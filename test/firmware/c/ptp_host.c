/*
 * Host driver for software/firmware/services/ptp, for test/firmware/test_ptp_fw.py: reads one command per line on
 * stdin, answers on stdout, and ends every answer with a line "." so that Python can drive it
 * interactively (e.g. a servo in a loop with a plant model written in Python).
 *
 * Port (one, created by init; its ops print what the stack asks of the board):
 *   init [key=value...]          role= domain= prio1= prio2= class= id=<16 hex> portnum= log_sync=
 *                                log_announce= log_dreq= art= filter= seed= transport= kp= ki=
 *                                max_ppb= step= first_step= fault_log= now=
 *   tick <mono_ns>
 *   rx <sec> <nsec> <hex> | rx - <hex>     (- : no RX timestamp)
 *   txts <type> <seq> <sec> <nsec>
 *   clock <sec> <nsec>           what clock_read returns
 *   fail <send|step|adjfreq> <0|1>
 *   status
 *   ops print:  send <event|general> <hex> / step <ns> / adjfreq <scaled ppb>
 * Messages:
 *   parse <hex>                  -> parse <-1|reason> <fields>
 *   build key=value...           -> build <hex>   (type= seq= domain= flags= corr= id= portnum= log=
 *                                   ts_sec= ts_nsec= req_id= req_port= utc= p1= class= acc= var=
 *                                   p2= gm= steps= source= ts=(transport specific))
 * Pure functions:
 *   dscmp <A> | <B>              datasets as p1,class,acc,var,p2,gm,steps,sender,sport,receiver,rport
 *   decide <D0> | <Erbest or -> | <listening>
 *   fsm <state> <event> <slave_only>
 *   servo_init kp ki max_ppb first_step step
 *   servo_interval <log>
 *   servo <offset_ns> <local_ns>  -> servo <state> <adj>
 *   servo_reset
 *   div <n> <d>                  -> div <q> <r>
 *   hwts <ps> <lane4_ps> <sec> <nsec> <lane>
 *                                -> hwts <rc> <sec> <nsec>   (PTP_HWTS_CORR, ptp_hwts_correct)
 *   format <buflen>              status of the port formatted into a buffer of buflen
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptp_hwts.h"
#include "ptp_port.h"

static struct ptp_port port;
static struct ptp_config cfg;
static struct ptp_ops ops;
static struct ptp_time clock_now;
static int fail_send, fail_step, fail_adjfreq;
static struct ptp_servo servo;

static void print_hex(const uint8_t *b, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static size_t parse_hex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = 0;
	while (s[0] && s[1] && n < cap) {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

static int op_send(void *ctx, enum ptp_channel ch, const uint8_t *msg, size_t len)
{
	(void)ctx;
	printf("send %s ", ch == PTP_CHANNEL_EVENT ? "event" : "general");
	print_hex(msg, len);
	printf("\n");
	return fail_send ? -1 : 0;
}

static void op_read(void *ctx, struct ptp_time *t)
{
	(void)ctx;
	*t = clock_now;
}

static int op_step(void *ctx, int64_t offset)
{
	(void)ctx;
	printf("step %" PRId64 "\n", offset);
	return fail_step ? -1 : 0;
}

static int op_adjfreq(void *ctx, int64_t adj)
{
	(void)ctx;
	printf("adjfreq %" PRId64 "\n", adj);
	return fail_adjfreq ? -1 : 0;
}

static int64_t num(const char *s)
{
	return strtoll(s, NULL, 0);
}

static void identity_from_hex(uint8_t id[8], const char *hex)
{
	memset(id, 0, 8);
	parse_hex(hex, id, 8);
}

/* Next "key=value" token of a line scanned by strtok (pass the line first, then NULL). */
static int next_kv(char *start, char **k, char **v)
{
	char *tok = strtok(start, " \t\n");
	if (!tok)
		return 0;
	*k = tok;
	*v = strchr(tok, '=');
	if (*v)
		*(*v)++ = 0;
	else
		*v = tok + strlen(tok);
	return 1;
}

#define FOR_KV(line, k, v) \
	for (int first_ = 1; next_kv(first_ ? (line) : NULL, &k, &v); first_ = 0)

static void cmd_init(char *args)
{
	static const uint8_t mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
	uint64_t now = 0;
	char *k, *v;
	int r;

	ptp_config_default(&cfg, mac);
	FOR_KV(args, k, v) {
		if (!strcmp(k, "role"))
			cfg.role = !strcmp(v, "master") ? PTP_ROLE_MASTER_ONLY : !strcmp(v, "slave") ?
				PTP_ROLE_SLAVE_ONLY : !strcmp(v, "auto") ? PTP_ROLE_AUTO : (uint8_t)num(v);
		else if (!strcmp(k, "domain"))       cfg.domain = (uint8_t)num(v);
		else if (!strcmp(k, "prio1"))        cfg.priority1 = (uint8_t)num(v);
		else if (!strcmp(k, "prio2"))        cfg.priority2 = (uint8_t)num(v);
		else if (!strcmp(k, "class"))        cfg.quality.clock_class = (uint8_t)num(v);
		else if (!strcmp(k, "id"))           identity_from_hex(cfg.clock_identity, v);
		else if (!strcmp(k, "portnum"))      cfg.port_number = (uint16_t)num(v);
		else if (!strcmp(k, "log_sync"))     cfg.log_sync_interval = (int8_t)num(v);
		else if (!strcmp(k, "log_announce")) cfg.log_announce_interval = (int8_t)num(v);
		else if (!strcmp(k, "log_dreq"))     cfg.log_min_delay_req_interval = (int8_t)num(v);
		else if (!strcmp(k, "art"))          cfg.announce_receipt_timeout = (uint8_t)num(v);
		else if (!strcmp(k, "filter"))       cfg.delay_filter_len = (uint8_t)num(v);
		else if (!strcmp(k, "seed"))         cfg.seed = (uint32_t)num(v);
		else if (!strcmp(k, "transport"))    cfg.transport = !strcmp(v, "l2") ? PTP_TRANSPORT_L2 : PTP_TRANSPORT_UDP_IPV4;
		else if (!strcmp(k, "kp"))           cfg.servo.kp = (uint32_t)num(v);
		else if (!strcmp(k, "ki"))           cfg.servo.ki = (uint32_t)num(v);
		else if (!strcmp(k, "max_ppb"))      cfg.servo.max_freq_ppb = (uint32_t)num(v);
		else if (!strcmp(k, "step"))         cfg.servo.step_threshold_ns = num(v);
		else if (!strcmp(k, "first_step"))   cfg.servo.first_step_threshold_ns = num(v);
		else if (!strcmp(k, "fault_log"))    cfg.log_fault_reset_interval = (int8_t)num(v);
		else if (!strcmp(k, "now"))          now = (uint64_t)num(v);
		else
			printf("error unknown key %s\n", k);
	}
	ops.send = op_send;
	ops.clock_read = op_read;
	ops.clock_step = op_step;
	ops.clock_adjfreq = op_adjfreq;
	r = ptp_port_init(&port, &cfg, &ops, NULL, now);
	printf("init %d\n", r);
}

static void print_identity(const char *name, const struct ptp_port_identity *id)
{
	printf(" %s=", name);
	print_hex(id->clock_identity, 8);
	printf(":%u", id->port_number);
}

static void cmd_parse(const char *hex)
{
	static uint8_t buf[4096];
	size_t n = parse_hex(hex, buf, sizeof(buf));
	struct ptp_msg m;
	int r;

	memset(&m, 0, sizeof(m));
	r = ptp_msg_parse(buf, n, &m);
	printf("parse %d", r);
	if (r < 0) {
		const struct ptp_header *h = &m.hdr;
		printf(" type=%u tsp=%u version=%u length=%u domain=%u flags=%u corr=%" PRId64
		       " seq=%u control=%u log=%d ts_sec=%" PRIu64 " ts_nsec=%u",
		       h->type, h->transport_specific, h->version, h->length, h->domain, h->flags,
		       h->correction, h->sequence_id, h->control, h->log_interval, m.ts.sec, m.ts.nsec);
		print_identity("source", &h->source);
		print_identity("requesting", &m.requesting);
		printf(" utc=%d p1=%u class=%u acc=%u var=%u p2=%u steps=%u tsrc=%u gm=",
		       m.announce.utc_offset, m.announce.gm_priority1, m.announce.gm_quality.clock_class,
		       m.announce.gm_quality.clock_accuracy, m.announce.gm_quality.offset_scaled_log_variance,
		       m.announce.gm_priority2, m.announce.steps_removed, m.announce.time_source);
		print_hex(m.announce.gm_identity, 8);
	}
	printf("\n");
}

static void cmd_build(char *args)
{
	struct ptp_msg m;
	uint8_t buf[256];
	size_t cap = sizeof(buf), n;
	char *k, *v;

	memset(&m, 0, sizeof(m));
	FOR_KV(args, k, v) {
		if (!strcmp(k, "type"))          m.hdr.type = (uint8_t)num(v);
		else if (!strcmp(k, "tsp"))      m.hdr.transport_specific = (uint8_t)num(v);
		else if (!strcmp(k, "seq"))      m.hdr.sequence_id = (uint16_t)num(v);
		else if (!strcmp(k, "domain"))   m.hdr.domain = (uint8_t)num(v);
		else if (!strcmp(k, "flags"))    m.hdr.flags = (uint16_t)num(v);
		else if (!strcmp(k, "corr"))     m.hdr.correction = num(v);
		else if (!strcmp(k, "id"))       identity_from_hex(m.hdr.source.clock_identity, v);
		else if (!strcmp(k, "portnum"))  m.hdr.source.port_number = (uint16_t)num(v);
		else if (!strcmp(k, "log"))      m.hdr.log_interval = (int8_t)num(v);
		else if (!strcmp(k, "ts_sec"))   m.ts.sec = (uint64_t)strtoull(v, NULL, 0);
		else if (!strcmp(k, "ts_nsec"))  m.ts.nsec = (uint32_t)num(v);
		else if (!strcmp(k, "req_id"))   identity_from_hex(m.requesting.clock_identity, v);
		else if (!strcmp(k, "req_port")) m.requesting.port_number = (uint16_t)num(v);
		else if (!strcmp(k, "utc"))      m.announce.utc_offset = (int16_t)num(v);
		else if (!strcmp(k, "p1"))       m.announce.gm_priority1 = (uint8_t)num(v);
		else if (!strcmp(k, "class"))    m.announce.gm_quality.clock_class = (uint8_t)num(v);
		else if (!strcmp(k, "acc"))      m.announce.gm_quality.clock_accuracy = (uint8_t)num(v);
		else if (!strcmp(k, "var"))      m.announce.gm_quality.offset_scaled_log_variance = (uint16_t)num(v);
		else if (!strcmp(k, "p2"))       m.announce.gm_priority2 = (uint8_t)num(v);
		else if (!strcmp(k, "gm"))       identity_from_hex(m.announce.gm_identity, v);
		else if (!strcmp(k, "steps"))    m.announce.steps_removed = (uint16_t)num(v);
		else if (!strcmp(k, "tsrc"))     m.announce.time_source = (uint8_t)num(v);
		else if (!strcmp(k, "cap"))      cap = (size_t)num(v);
		else
			printf("error unknown key %s\n", k);
	}
	if (cap > sizeof(buf))
		cap = sizeof(buf);
	n = ptp_msg_build(buf, cap, &m);
	printf("build ");
	print_hex(buf, n);
	printf("\n");
}

/* p1,class,acc,var,p2,gm,steps,sender,sport,receiver,rport */
static int parse_dataset(const char *s, struct ptp_dataset *d)
{
	char gm[32], snd[32], rcv[32];
	unsigned p1, cl, acc, var, p2, steps, sport, rport;
	if (sscanf(s, " %u,%u,%u,%u,%u,%31[0-9a-fA-F],%u,%31[0-9a-fA-F],%u,%31[0-9a-fA-F],%u",
	           &p1, &cl, &acc, &var, &p2, gm, &steps, snd, &sport, rcv, &rport) != 11)
		return 0;
	d->priority1 = (uint8_t)p1;
	d->quality.clock_class = (uint8_t)cl;
	d->quality.clock_accuracy = (uint8_t)acc;
	d->quality.offset_scaled_log_variance = (uint16_t)var;
	d->priority2 = (uint8_t)p2;
	identity_from_hex(d->identity, gm);
	d->steps_removed = (uint16_t)steps;
	identity_from_hex(d->sender.clock_identity, snd);
	d->sender.port_number = (uint16_t)sport;
	identity_from_hex(d->receiver.clock_identity, rcv);
	d->receiver.port_number = (uint16_t)rport;
	return 1;
}

static void cmd_dscmp(char *args)
{
	struct ptp_dataset a, b;
	char *bar = strchr(args, '|');
	if (!bar) {
		printf("error\n");
		return;
	}
	*bar = 0;
	if (!parse_dataset(args, &a) || !parse_dataset(bar + 1, &b)) {
		printf("error dataset\n");
		return;
	}
	printf("dscmp %d %d\n", ptp_dscmp(&a, &b), ptp_dscmp(&b, &a));
}

static void cmd_decide(char *args)
{
	static const char *const names[] = { "none", "master", "passive", "slave" };
	struct ptp_dataset d0, e;
	char *b1 = strchr(args, '|'), *b2 = b1 ? strchr(b1 + 1, '|') : NULL;
	int have_e;
	if (!b2) {
		printf("error\n");
		return;
	}
	*b1 = *b2 = 0;
	have_e = parse_dataset(b1 + 1, &e);
	if (!parse_dataset(args, &d0)) {
		printf("error dataset\n");
		return;
	}
	printf("decide %s\n", names[ptp_state_decision(&d0, have_e ? &e : NULL, atoi(b2 + 1))]);
}

int main(void)
{
	static char line[65536];
	struct ptp_servo_config scfg;
	char out[4096];

	memset(&scfg, 0, sizeof(scfg));
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		char *cmd = strtok(line, " \t\n"), *rest = strtok(NULL, "\n");
		if (!rest)
			rest = "";
		if (!cmd) {
			printf(".\n");
			continue;
		}
		if (!strcmp(cmd, "init")) {
			cmd_init(rest);
		} else if (!strcmp(cmd, "tick")) {
			ptp_port_tick(&port, (uint64_t)strtoull(rest, NULL, 0));
		} else if (!strcmp(cmd, "rx")) {
			static uint8_t buf[32768];
			char sec[32], nsec[32], hex[sizeof(line)];
			struct ptp_time ts;
			size_t n;
			hex[0] = 0;
			if (!strncmp(rest, "- ", 2)) {  /* "rx - <hex>": no RX timestamp */
				n = parse_hex(rest + 2, buf, sizeof(buf));
				ptp_port_receive(&port, buf, n, NULL);
			} else if (sscanf(rest, "%31s %31s %65535s", sec, nsec, hex) >= 2) {
				ts.sec = strtoull(sec, NULL, 0);
				ts.nsec = (uint32_t)strtoul(nsec, NULL, 0);
				n = parse_hex(hex, buf, sizeof(buf));
				ptp_port_receive(&port, buf, n, &ts);
			}
		} else if (!strcmp(cmd, "txts")) {
			unsigned type, seq;
			unsigned long long sec;
			unsigned long nsec;
			struct ptp_time ts;
			if (sscanf(rest, "%u %u %llu %lu", &type, &seq, &sec, &nsec) == 4) {
				ts.sec = sec;
				ts.nsec = (uint32_t)nsec;
				ptp_port_tx_timestamp(&port, type, (uint16_t)seq, &ts);
			}
		} else if (!strcmp(cmd, "clock")) {
			unsigned long long sec;
			unsigned long nsec;
			if (sscanf(rest, "%llu %lu", &sec, &nsec) == 2) {
				clock_now.sec = sec;
				clock_now.nsec = (uint32_t)nsec;
			}
		} else if (!strcmp(cmd, "fail")) {
			char what[16];
			int on;
			if (sscanf(rest, "%15s %d", what, &on) == 2) {
				if (!strcmp(what, "send")) fail_send = on;
				if (!strcmp(what, "step")) fail_step = on;
				if (!strcmp(what, "adjfreq")) fail_adjfreq = on;
			}
		} else if (!strcmp(cmd, "status")) {
			ptp_status_format(out, sizeof(out), ptp_port_status(&port));
			printf("status %s\n", out);
		} else if (!strcmp(cmd, "format")) {
			size_t len = (size_t)strtoul(rest, NULL, 0), r;
			char *buf = malloc(len ? len : 1);  /* exactly len bytes: ASan catches overruns */
			memset(buf, 'X', len ? len : 1);
			r = ptp_status_format(len ? buf : NULL, len, ptp_port_status(&port));
			printf("format %zu %s\n", r, len ? buf : "");
			free(buf);
		} else if (!strcmp(cmd, "parse")) {
			cmd_parse(rest);
		} else if (!strcmp(cmd, "build")) {
			cmd_build(rest);
		} else if (!strcmp(cmd, "dscmp")) {
			cmd_dscmp(rest);
		} else if (!strcmp(cmd, "decide")) {
			cmd_decide(rest);
		} else if (!strcmp(cmd, "fsm")) {
			int s, e, so;
			if (sscanf(rest, "%d %d %d", &s, &e, &so) == 3)
				printf("fsm %d\n", ptp_fsm((enum ptp_port_state)s, (enum ptp_fsm_event)e, so));
		} else if (!strcmp(cmd, "servo_init")) {
			long long kp, ki, max, first, step;
			if (sscanf(rest, "%lld %lld %lld %lld %lld", &kp, &ki, &max, &first, &step) == 5) {
				scfg.kp = (uint32_t)kp;
				scfg.ki = (uint32_t)ki;
				scfg.max_freq_ppb = (uint32_t)max;
				scfg.first_step_threshold_ns = first;
				scfg.step_threshold_ns = step;
				ptp_servo_init(&servo, &scfg);
			}
		} else if (!strcmp(cmd, "servo_interval")) {
			ptp_servo_set_interval(&servo, atoi(rest));
		} else if (!strcmp(cmd, "servo_reset")) {
			ptp_servo_reset(&servo);
		} else if (!strcmp(cmd, "servo")) {
			long long off, local;
			int64_t adj = 0;
			if (sscanf(rest, "%lld %lld", &off, &local) == 2) {
				enum ptp_servo_state s = ptp_servo_sample(&servo, off, local, &adj);
				printf("servo %s %" PRId64 "\n", ptp_servo_state_name(s), adj);
			}
		} else if (!strcmp(cmd, "div")) {
			long long n, d;
			int64_t r;
			if (sscanf(rest, "%lld %lld", &n, &d) == 2) {
				int64_t q = ptp_div64(n, d, &r);
				printf("div %" PRId64 " %" PRId64 "\n", q, r);
			}
		} else if (!strcmp(cmd, "hwts")) {
			long ps, lane4_ps;
			unsigned long long sec;
			unsigned long nsec;
			unsigned lane;
			if (sscanf(rest, "%ld %ld %llu %lu %u", &ps, &lane4_ps, &sec, &nsec, &lane) == 5) {
				const struct ptp_hwts_corr c = PTP_HWTS_CORR(ps, lane4_ps);
				struct ptp_time t = { 0, 0 };
				int rc = ptp_hwts_correct(&t, sec, (uint32_t)nsec, lane, &c);
				printf("hwts %d %" PRIu64 " %" PRIu32 "\n", rc, t.sec, t.nsec);
			}
		} else {
			printf("error unknown command %s\n", cmd);
		}
		printf(".\n");
	}
	return 0;
}
