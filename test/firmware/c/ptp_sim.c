/*
 * Two PTP ordinary clocks (software/firmware/services/ptp, unmodified) on a simulated link, each with a
 * software clock driven by its own oscillator, for test/firmware/test_ptp_fw.py: the fast pre-check of
 * what the cycle-accurate two-board simulation proves later.
 *
 * Time: the simulation runs on true time t (int64 ns). Each node has an oscillator off nominal
 * by osc ppb; its free-running count (ns + 2^-48 ns) is the stack's monotonic tick source, and
 * its PTP clock runs at (1 + osc)(1 + adj), adj being what the stack set with clock_adjfreq.
 * Hardware timestamping is modelled on a cycle grid of `gran` ns of each node's oscillator, as a
 * 125 MHz timestamp unit would do: a frame leaves at the sender's next cycle edge, arrives
 * `delay` ns later (plus optional jitter) and is seen at the receiver's next cycle edge; each
 * timestamp is the PTP clock's integer ns at that edge. TX timestamps reach the stack tx_lat ns
 * after the edge, received frames rx_lat ns after theirs (firmware latency; may be dropped).
 *
 * Usage: ptp_sim key=value...  (see struct params below). Prints the status lines of both
 * ports and one "result" line of key=value statistics; with dump=FILE, every frame sent as
 * "t_ns node channel hex"; with trace=FILE, every ms "t true_offset reported_offset delay state".
 * Statistics cover the servo samples after the last one with |true offset - expected| above
 * threshold or the slave not in SLAVE ("converged_s"); expected is -(d_ms - d_sm) / 2, the
 * error E2E makes by design on an asymmetric path.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptp_port.h"

typedef __int128 i128;

#define FRAC_BITS 48
#define FRAC_ONE  ((i128)1 << FRAC_BITS)
#define MAX_EVENTS 256

struct params {
	int64_t  seconds_ns;
	int64_t  master_ppb, slave_ppb;  /* oscillator errors */
	int64_t  d_ms, d_sm;             /* one-way delays, ns: master to slave, slave to master */
	int64_t  jitter;                 /* extra uniform delay 0..jitter ns per frame */
	int64_t  gran;                   /* timestamp cycle, ns (0: exact) */
	int64_t  tick_ns;                /* main-loop period of each node */
	int64_t  tx_lat, rx_lat;
	int64_t  master_start_s, slave_start_s;
	int      log_sync, log_dreq, log_announce;
	int      master_role, slave_role;
	int      transport;
	uint32_t txts_drop_ppm;          /* TX timestamps lost, per million */
	uint32_t rx_drop_ppm;            /* frames lost */
	uint32_t seed;
	uint32_t kp, ki;                 /* 0: the stack's defaults */
	int64_t  threshold;              /* |true offset| considered converged, ns */
	int64_t  jump_at_ns, jump_ns;    /* the master's clock jumps by jump_ns at jump_at_ns */
	const char *dump, *trace;
} P = {
	.seconds_ns = 2000000000LL, .d_ms = 1000, .d_sm = 1000, .gran = 8, .tick_ns = 20000,
	.tx_lat = 1500, .rx_lat = 3000, .master_start_s = 1700000000, .slave_start_s = 0,
	.log_sync = -7, .log_dreq = -7, .log_announce = -3,
	.master_role = PTP_ROLE_MASTER_ONLY, .slave_role = PTP_ROLE_SLAVE_ONLY,
	.transport = PTP_TRANSPORT_UDP_IPV4, .seed = 1, .threshold = 8,
};

/* A clock as ns + fraction, advanced lazily to the simulation time. */
struct sclock {
	int64_t  ns;
	uint64_t frac;     /* 2^-48 ns */
	i128     rate;     /* ns per true ns, Q48 */
	int64_t  t;        /* true time of ns/frac */
};

struct node {
	int           id;
	struct ptp_port port;
	struct ptp_config cfg;
	struct ptp_ops ops;
	struct sclock osc;   /* free-running: ticks, cycle grid */
	struct sclock ptp;   /* the PTP clock */
	i128          osc_rate;
	int64_t       adj;   /* scaled ppb */
	int64_t       next_tick;
};

enum ev_kind { EV_TX_CAPTURE, EV_RX_CAPTURE, EV_TXTS_DELIVER, EV_RX_DELIVER };

struct event {
	int64_t  t;
	int      kind;
	int      node;       /* who the event is for (receiver, or sender for TX events) */
	unsigned type;
	uint16_t seq;
	struct ptp_time ts;
	size_t   len;
	uint8_t  msg[128];
	int      used;
};

static struct node nodes[2];
static struct event events[MAX_EVENTS];
static int64_t now;           /* true time */
static uint64_t rng = 88172645463325252ull;
static FILE *dump_file;

static uint64_t rand64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* --- clocks ------------------------------------------------------------------------------------- */

static i128 rate_of(int64_t scaled_ppb)
{
	/* 1 + scaled_ppb / 2^16 * 1e-9, in Q48 */
	return FRAC_ONE + (i128)scaled_ppb * ((i128)1 << (FRAC_BITS - 16)) / 1000000000;
}

static void sclock_advance(struct sclock *c, int64_t t)
{
	i128 acc;
	if (t < c->t) {
		fprintf(stderr, "time went back\n");
		exit(2);
	}
	acc = (i128)(t - c->t) * c->rate + c->frac;
	c->ns += (int64_t)(acc >> FRAC_BITS);
	c->frac = (uint64_t)(acc & (FRAC_ONE - 1));
	c->t = t;
}

/* Value at t >= c->t as ns with fraction, in Q48 (only for statistics). */
static i128 sclock_q48(const struct sclock *c, int64_t t)
{
	return ((i128)c->ns << FRAC_BITS) + c->frac + (i128)(t - c->t) * c->rate;
}

static struct ptp_time to_ptp_time(int64_t ns)
{
	struct ptp_time pt;
	int64_t sec = ns / 1000000000, rem = ns % 1000000000;
	if (rem < 0) {
		rem += 1000000000;
		sec--;
	}
	pt.sec = (uint64_t)sec;
	pt.nsec = (uint32_t)rem;
	return pt;
}

static void set_ptp_rate(struct node *n)
{
	/* (1 + osc)(1 + adj) */
	n->ptp.rate = (n->osc_rate * rate_of(n->adj)) >> FRAC_BITS;
}

/* The next cycle edge of node n at or after true time t. */
static int64_t next_edge(struct node *n, int64_t t)
{
	i128 o, rest, dt;
	if (P.gran <= 1)
		return t;
	o = sclock_q48(&n->osc, t);
	rest = ((i128)P.gran << FRAC_BITS) - (o % ((i128)P.gran << FRAC_BITS));
	if (rest == ((i128)P.gran << FRAC_BITS))
		return t;
	dt = (rest * FRAC_ONE + n->osc.rate - 1) / n->osc.rate;  /* ceil: true ns to get there */
	return t + (int64_t)((dt + FRAC_ONE - 1) >> FRAC_BITS);
}

/* The PTP clock's integer ns at t >= its last update, without committing (t may be a few ns
 * ahead of the simulation: nothing changes a clock within one cycle that matters here). */
static struct ptp_time timestamp(struct node *n, int64_t t)
{
	return to_ptp_time((int64_t)(sclock_q48(&n->ptp, t) >> FRAC_BITS));
}

/* --- events ------------------------------------------------------------------------------------- */

static struct event *new_event(int64_t t, int kind, int node)
{
	int i;
	for (i = 0; i < MAX_EVENTS; i++) {
		if (!events[i].used) {
			memset(&events[i], 0, sizeof(events[i]));
			events[i].used = 1;
			events[i].t = t;
			events[i].kind = kind;
			events[i].node = node;
			return &events[i];
		}
	}
	fprintf(stderr, "event queue full\n");
	exit(2);
}

static int chance(uint32_t ppm)
{
	return ppm && rand64() % 1000000 < ppm;
}

/* --- ops ---------------------------------------------------------------------------------------- */

static int op_send(void *ctx, enum ptp_channel ch, const uint8_t *msg, size_t len)
{
	struct node *n = ctx;
	int64_t edge = next_edge(n, now);
	struct event *e;

	if (len > sizeof(e->msg))
		return -1;
	if (dump_file) {
		size_t i;
		fprintf(dump_file, "%lld %d %s ", (long long)now, n->id, ch == PTP_CHANNEL_EVENT ? "event" : "general");
		for (i = 0; i < len; i++)
			fprintf(dump_file, "%02x", msg[i]);
		fputc('\n', dump_file);
	}
	if (ch == PTP_CHANNEL_EVENT) {
		e = new_event(edge, EV_TX_CAPTURE, n->id);
		e->type = msg[0] & 0x0f;
		e->seq = (uint16_t)(msg[30] << 8 | msg[31]);
	}
	if (chance(P.rx_drop_ppm))
		return 0;
	{
		int64_t d = n->id == 0 ? P.d_ms : P.d_sm;
		if (P.jitter)
			d += (int64_t)(rand64() % (uint64_t)(P.jitter + 1));
		/* Capture at the receiver's first edge after arrival (computed when it happens). */
		e = new_event(edge + d, EV_RX_CAPTURE, 1 - n->id);
		memcpy(e->msg, msg, len);
		e->len = len;
	}
	return 0;
}

static void op_read(void *ctx, struct ptp_time *t)
{
	struct node *n = ctx;
	*t = timestamp(n, now);
}

static int op_step(void *ctx, int64_t offset)
{
	struct node *n = ctx;
	sclock_advance(&n->ptp, now);
	n->ptp.ns += offset;
	return 0;
}

static int op_adjfreq(void *ctx, int64_t scaled_ppb)
{
	struct node *n = ctx;
	sclock_advance(&n->ptp, now);
	n->adj = scaled_ppb;
	set_ptp_rate(n);
	return 0;
}

/* --- main --------------------------------------------------------------------------------------- */

static int64_t arg_int(const char *v)
{
	return strtoll(v, NULL, 0);
}

static int role_of(const char *v)
{
	return !strcmp(v, "master") ? PTP_ROLE_MASTER_ONLY : !strcmp(v, "slave") ? PTP_ROLE_SLAVE_ONLY :
		PTP_ROLE_AUTO;
}

static void parse_args(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		char *k = argv[i], *v = strchr(k, '=');
		if (!v) {
			fprintf(stderr, "bad argument %s\n", k);
			exit(2);
		}
		*v++ = 0;
		if (!strcmp(k, "seconds"))          P.seconds_ns = (int64_t)(atof(v) * 1e9);
		else if (!strcmp(k, "master_ppb"))  P.master_ppb = arg_int(v);
		else if (!strcmp(k, "slave_ppb"))   P.slave_ppb = arg_int(v);
		else if (!strcmp(k, "d_ms"))        P.d_ms = arg_int(v);
		else if (!strcmp(k, "d_sm"))        P.d_sm = arg_int(v);
		else if (!strcmp(k, "jitter"))      P.jitter = arg_int(v);
		else if (!strcmp(k, "gran"))        P.gran = arg_int(v);
		else if (!strcmp(k, "tick_ns"))     P.tick_ns = arg_int(v);
		else if (!strcmp(k, "tx_lat"))      P.tx_lat = arg_int(v);
		else if (!strcmp(k, "rx_lat"))      P.rx_lat = arg_int(v);
		else if (!strcmp(k, "master_start_s")) P.master_start_s = arg_int(v);
		else if (!strcmp(k, "slave_start_s"))  P.slave_start_s = arg_int(v);
		else if (!strcmp(k, "log_sync"))    P.log_sync = (int)arg_int(v);
		else if (!strcmp(k, "log_dreq"))    P.log_dreq = (int)arg_int(v);
		else if (!strcmp(k, "log_announce")) P.log_announce = (int)arg_int(v);
		else if (!strcmp(k, "master_role")) P.master_role = role_of(v);
		else if (!strcmp(k, "slave_role"))  P.slave_role = role_of(v);
		else if (!strcmp(k, "transport"))   P.transport = !strcmp(v, "l2") ? PTP_TRANSPORT_L2 : PTP_TRANSPORT_UDP_IPV4;
		else if (!strcmp(k, "txts_drop_ppm")) P.txts_drop_ppm = (uint32_t)arg_int(v);
		else if (!strcmp(k, "rx_drop_ppm")) P.rx_drop_ppm = (uint32_t)arg_int(v);
		else if (!strcmp(k, "seed"))        P.seed = (uint32_t)arg_int(v);
		else if (!strcmp(k, "kp"))          P.kp = (uint32_t)arg_int(v);
		else if (!strcmp(k, "ki"))          P.ki = (uint32_t)arg_int(v);
		else if (!strcmp(k, "threshold"))   P.threshold = arg_int(v);
		else if (!strcmp(k, "jump_at"))     P.jump_at_ns = (int64_t)(atof(v) * 1e9);
		else if (!strcmp(k, "jump_ns"))     P.jump_ns = arg_int(v);
		else if (!strcmp(k, "dump"))        P.dump = v;
		else if (!strcmp(k, "trace"))       P.trace = v;
		else {
			fprintf(stderr, "unknown parameter %s\n", k);
			exit(2);
		}
	}
}

static void node_init(struct node *n, int id, int64_t osc_ppb, int64_t start_s, int role)
{
	uint8_t mac[6] = { 0x02, 0x00, 0x5e, 0x10, 0x00, (uint8_t)(id + 1) };

	n->id = id;
	n->osc_rate = rate_of(osc_ppb * 65536);
	n->osc.rate = n->osc_rate;
	/* Random phase of the cycle grid: with equal frequencies it stays put for the whole run. */
	n->osc.ns = 1000000 * (id + 1) + (int64_t)(rand64() % (uint64_t)(P.gran > 1 ? P.gran : 1));
	n->osc.frac = (uint64_t)(rand64() & (uint64_t)(FRAC_ONE - 1));
	n->ptp.ns = start_s * 1000000000LL + 12345 * id;
	set_ptp_rate(n);
	n->ops.send = op_send;
	n->ops.clock_read = op_read;
	n->ops.clock_step = op_step;
	n->ops.clock_adjfreq = op_adjfreq;
	ptp_config_default(&n->cfg, mac);
	n->cfg.role = (uint8_t)role;
	n->cfg.transport = (uint8_t)P.transport;
	n->cfg.log_sync_interval = (int8_t)P.log_sync;
	n->cfg.log_min_delay_req_interval = (int8_t)P.log_dreq;
	n->cfg.log_announce_interval = (int8_t)P.log_announce;
	n->cfg.seed = P.seed * 2 + (uint32_t)id + 1;
	if (id == 0)
		n->cfg.priority1 = 100;  /* with role auto on both sides, BMCA makes node 0 master */
	if (P.kp)
		n->cfg.servo.kp = P.kp;
	if (P.ki)
		n->cfg.servo.ki = P.ki;
	n->next_tick = (int64_t)(rand64() % (uint64_t)P.tick_ns);
	if (ptp_port_init(&n->port, &n->cfg, &n->ops, n, (uint64_t)n->osc.ns) != 0) {
		fprintf(stderr, "ptp_port_init failed\n");
		exit(2);
	}
}

static void run_event(struct event *e)
{
	struct node *n = &nodes[e->node];
	struct event *d;

	switch (e->kind) {
	case EV_TX_CAPTURE:
		if (chance(P.txts_drop_ppm))
			break;
		d = new_event(e->t + P.tx_lat, EV_TXTS_DELIVER, e->node);
		d->type = e->type;
		d->seq = e->seq;
		d->ts = timestamp(n, e->t);
		break;
	case EV_RX_CAPTURE: {
		int64_t edge = next_edge(n, e->t);
		d = new_event(edge + P.rx_lat, EV_RX_DELIVER, e->node);
		memcpy(d->msg, e->msg, e->len);
		d->len = e->len;
		d->ts = timestamp(n, edge);  /* exact: nothing changes the clock within a cycle */
		break;
	}
	case EV_TXTS_DELIVER:
		ptp_port_tx_timestamp(&n->port, e->type, e->seq, &e->ts);
		break;
	case EV_RX_DELIVER:
		ptp_port_receive(&n->port, e->msg, e->len, &e->ts);
		break;
	}
}

/* Statistics over the samples after convergence. */
struct stats {
	double sum, sumsq, maxabs;
	long   n;
};

static void stat_add(struct stats *s, double v)
{
	s->sum += v;
	s->sumsq += v * v;
	if (v < 0 ? -v > s->maxabs : v > s->maxabs)
		s->maxabs = v < 0 ? -v : v;
	s->n++;
}

int main(int argc, char **argv)
{
	struct node *m = &nodes[0], *s = &nodes[1];
	FILE *trace = NULL;
	int64_t sample_every, next_sample, last_bad = 0, first_slave = -1;
	double expected_offset, expected_delay;
	struct stats st_true = {0}, st_meas = {0}, st_delay = {0};
	/* The samples are kept until the convergence time is known. */
	static double true_off[200000], meas_off[200000], delay_err[200000];
	static int64_t when[200000];
	long nsamples = 0, i;
	uint32_t last_servo_samples = 0;
	char line[2048];

	parse_args(argc, argv);
	rng ^= (uint64_t)P.seed * 0x9e3779b97f4a7c15ull;
	if (P.dump && !(dump_file = fopen(P.dump, "w")))
		return 2;
	if (P.trace && !(trace = fopen(P.trace, "w")))
		return 2;
	node_init(m, 0, P.master_ppb, P.master_start_s, P.master_role);
	node_init(s, 1, P.slave_ppb, P.slave_start_s, P.slave_role);
	/* What PTP must deliver: the offset is off by half the asymmetry, by design of E2E. */
	expected_offset = (double)(P.d_sm - P.d_ms) / 2;
	expected_delay = (double)(P.d_ms + P.d_sm) / 2 + (double)P.jitter / 2;
	sample_every = 1000000;  /* 1 ms of true time */
	next_sample = sample_every;

	while (now < P.seconds_ns) {
		int64_t t = INT64_MAX;
		struct event *next = NULL;
		int k;

		for (k = 0; k < MAX_EVENTS; k++)
			if (events[k].used && events[k].t < t) {
				t = events[k].t;
				next = &events[k];
			}
		for (k = 0; k < 2; k++)
			if (nodes[k].next_tick < t) {
				t = nodes[k].next_tick;
				next = NULL;
			}
		if (next_sample < t) {
			t = next_sample;
			next = NULL;
		}
		now = t;
		if (next) {
			struct event e = *next;
			next->used = 0;
			run_event(&e);
		} else if (now == next_sample) {
			const struct ptp_status *ss = ptp_port_status(&s->port);
			i128 diff = sclock_q48(&s->ptp, now) - sclock_q48(&m->ptp, now);
			double off = (double)diff / (double)FRAC_ONE;
			next_sample += sample_every;
			if (P.jump_ns && now >= P.jump_at_ns) {
				sclock_advance(&m->ptp, now);
				m->ptp.ns += P.jump_ns;
				P.jump_ns = 0;
				last_bad = now;
			}
			if (ss->state == PTP_PS_SLAVE && first_slave < 0)
				first_slave = now;
			if (ss->state != PTP_PS_SLAVE)
				last_bad = now;
			if (ss->cnt.servo_samples != last_servo_samples && nsamples < 200000) {
				last_servo_samples = ss->cnt.servo_samples;
				when[nsamples] = now;
				true_off[nsamples] = off - expected_offset;
				meas_off[nsamples] = (double)ss->offset_ns;
				delay_err[nsamples] = (double)ss->mean_path_delay_ns - expected_delay;
				if (off - expected_offset > P.threshold || off - expected_offset < -P.threshold)
					last_bad = now;
				nsamples++;
			}
			if (trace)
				fprintf(trace, "%.6f %.3f %lld %lld %s\n", (double)now / 1e9, off,
				        (long long)ss->offset_ns, (long long)ss->mean_path_delay_ns,
				        ptp_port_state_name(ss->state));
		} else {
			for (k = 0; k < 2; k++) {
				if (nodes[k].next_tick == now) {
					sclock_advance(&nodes[k].osc, now);
					ptp_port_tick(&nodes[k].port, (uint64_t)nodes[k].osc.ns);
					nodes[k].next_tick += P.tick_ns;
				}
			}
		}
	}

	for (i = 0; i < nsamples; i++) {
		if (when[i] <= last_bad)
			continue;
		stat_add(&st_true, true_off[i]);
		stat_add(&st_meas, meas_off[i]);
		stat_add(&st_delay, delay_err[i]);
	}
	for (i = 0; i < 2; i++) {
		ptp_status_format(line, sizeof(line), ptp_port_status(&nodes[i].port));
		printf("status%ld %s\n", i, line);
	}
	printf("result converged_s=%.6f first_slave_s=%.6f samples=%ld "
	       "true_mean=%.3f true_rms=%.3f true_max=%.3f "
	       "meas_mean=%.3f meas_max=%.3f delay_err_mean=%.3f delay_err_max=%.3f expected_offset=%.1f\n",
	       (double)last_bad / 1e9, (double)first_slave / 1e9, st_true.n,
	       st_true.n ? st_true.sum / st_true.n : 0.0,
	       st_true.n ? __builtin_sqrt(st_true.sumsq / st_true.n) : 0.0, st_true.maxabs,
	       st_meas.n ? st_meas.sum / st_meas.n : 0.0, st_meas.maxabs,
	       st_delay.n ? st_delay.sum / st_delay.n : 0.0, st_delay.maxabs, expected_offset);
	if (dump_file)
		fclose(dump_file);
	if (trace)
		fclose(trace);
	return 0;
}
