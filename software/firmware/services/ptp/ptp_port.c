/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * The port: timers, message handling, foreign masters, state decisions, offset and delay.
 * Follows linuxptp's port.c/clock.c/tsproc.c where the standard leaves a choice (noted below).
 */
#include "ptp_port.h"

#define TIME_SHIFT           10    /* timer unit: 1024 ns */
#define FOREIGN_TIME_WINDOW  4     /* announce intervals, for 2 Announces (9.3.2.4.4) */
#define CORRECTION_LIMIT     ((int64_t)1 << 46)  /* 2^30 ns, ~1 s in scaled ns: more is garbage */
#define DELAY_SUM_LIMIT      ((int64_t)1 << 30)  /* |2 x delay| in ns beyond which a sample is junk */
#define SEED_DEFAULT         0x2545f491u

#define SYNC_NONE     0
#define SYNC_WAIT_FUP 1        /* two-step Sync seen, t2 known */
#define SYNC_COMPLETE 2        /* t1 and t2 known */

#define DREQ_SENT 1
#define DREQ_T3   2
#define DREQ_T4   4
#define DREQ_ALL  (DREQ_SENT | DREQ_T3 | DREQ_T4)

/* --- small helpers ---------------------------------------------------------------------------- */

static void zero(void *dst, size_t n)
{
	uint8_t *d = dst;
	while (n--)
		*d++ = 0;
}

/* Scaled ns to ns, rounding half away from zero; |x| < 2^62. */
static int64_t scaled_to_ns(int64_t x)
{
	return x >= 0 ? (x + 32768) >> 16 : -((-x + 32768) >> 16);
}

static int log_valid(int log)
{
	return log >= PTP_LOG_INTERVAL_MIN && log <= PTP_LOG_INTERVAL_MAX;
}

/* 2^log s in timer units: 976562 units per second, 0.5 us short of one (which does not matter). */
static uint32_t interval(int log)
{
	if (!log_valid(log))
		log = 0;
	return log >= 0 ? (1000000000u >> TIME_SHIFT) << log : (1000000000u >> TIME_SHIFT) >> -log;
}

/* xorshift32: deterministic, seedable, enough to decorrelate timers. */
static uint32_t rng_next(struct ptp_port *p)
{
	uint32_t x = p->rng;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return p->rng = x;
}

/* Uniform in [0, span). */
static uint32_t random_part(struct ptp_port *p, uint32_t span)
{
	uint32_t r = rng_next(p) & 0xffff;
	return (span >> 16) * r + (((span & 0xffff) * r) >> 16);
}

static int after(uint32_t a, uint32_t b)  /* a at or after b, modulo 2^32 */
{
	return (int32_t)(a - b) >= 0;
}

/* delay < 2^31 units (36 min), or comparisons modulo 2^32 go wrong: intervals are <= 2^26. */
static void arm(struct ptp_port *p, enum ptp_timer t, uint32_t delay)
{
	p->deadline[t] = p->now + delay;
	p->armed |= (uint8_t)(1u << t);
}

static int expired(const struct ptp_port *p, enum ptp_timer t)
{
	return (p->armed >> t & 1) && after(p->now, p->deadline[t]);
}

/* Periodic timers keep their phase; after a stall they resume from now instead of bursting. */
static void rearm(struct ptp_port *p, enum ptp_timer t, uint32_t period)
{
	p->deadline[t] += period;
	if (after(p->now, p->deadline[t]))
		p->deadline[t] = p->now + period;
}

static int slave_side(unsigned state)
{
	return state == PTP_PS_UNCALIBRATED || state == PTP_PS_SLAVE;
}

static void own_identity(const struct ptp_port *p, struct ptp_port_identity *id)
{
	ptp_copy(id->clock_identity, p->cfg.clock_identity, 8);
	id->port_number = p->cfg.port_number;
}

/* --- delay filter ------------------------------------------------------------------------------
 * Interquartile mean of the last len samples: sort a copy, drop the lowest and the highest
 * quarter, average the rest. As robust as linuxptp's default moving median against a sample
 * spoilt by a time jump or a queued frame, and, unlike a median, it averages 8 ns timestamp
 * quantisation down to sub-ns. */

static void filter_reset(struct ptp_delay_filter *f)
{
	f->count = 0;
	f->next = 0;
}

static void filter_add(struct ptp_delay_filter *f, int64_t v)
{
	if (f->count < f->len)
		f->count++;
	f->sample[f->next] = v;
	f->next = (uint8_t)((f->next + 1) % f->len);
}

static int64_t filter_value(const struct ptp_delay_filter *f)
{
	int64_t sorted[PTP_DELAY_FILTER_MAX], sum = 0;
	unsigned n = f->count, i, j, cut = n / 4;

	for (i = 0; i < n; i++) {  /* insertion sort: at most 16 samples */
		int64_t v = f->sample[i];
		for (j = i; j > 0 && sorted[j - 1] > v; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = v;
	}
	for (i = cut; i < n - cut; i++)
		sum += sorted[i];
	return n ? ptp_div64(sum, n - 2 * cut, NULL) : 0;
}

/* --- configuration ---------------------------------------------------------------------------- */

void ptp_clock_identity_from_mac(uint8_t identity[8], const uint8_t mac[6])
{
	identity[0] = mac[0];
	identity[1] = mac[1];
	identity[2] = mac[2];
	identity[3] = 0xff;
	identity[4] = 0xfe;
	identity[5] = mac[3];
	identity[6] = mac[4];
	identity[7] = mac[5];
}

void ptp_config_default(struct ptp_config *cfg, const uint8_t mac[6])
{
	zero(cfg, sizeof(*cfg));
	ptp_clock_identity_from_mac(cfg->clock_identity, mac);
	cfg->port_number = 1;
	cfg->role = PTP_ROLE_AUTO;
	cfg->transport = PTP_TRANSPORT_UDP_IPV4;
	cfg->priority1 = 128;
	cfg->priority2 = 128;
	cfg->quality.clock_class = 248;
	cfg->quality.clock_accuracy = 0xfe;
	cfg->quality.offset_scaled_log_variance = 0xffff;
	cfg->time_source = 0xa0;
	cfg->utc_offset = 37;
	cfg->time_flags = PTP_FLAG_PTP_TIMESCALE;
	cfg->log_announce_interval = 1;
	cfg->log_sync_interval = 0;
	cfg->log_min_delay_req_interval = 0;
	cfg->announce_receipt_timeout = 3;
	cfg->log_fault_reset_interval = 4;
	cfg->delay_filter_len = 16;
	cfg->seed = SEED_DEFAULT;
	cfg->servo.kp = 26214;                        /* 0.4 per interval: critically damped */
	cfg->servo.ki = 3277;                         /* 0.05 per interval (see docs) */
	cfg->servo.max_freq_ppb = 500000;
	cfg->servo.first_step_threshold_ns = 20000;   /* ptp4l's first_step_threshold */
	cfg->servo.step_threshold_ns = 1000000;       /* ptp4l: 0 (never); see docs */
}

/* --- sending ---------------------------------------------------------------------------------- */

static void msg_init(const struct ptp_port *p, struct ptp_msg *m, unsigned type, uint16_t seq,
                     int log_interval)
{
	zero(m, sizeof(*m));
	m->hdr.type = (uint8_t)type;
	m->hdr.domain = p->cfg.domain;
	own_identity(p, &m->hdr.source);
	m->hdr.sequence_id = seq;
	m->hdr.log_interval = (int8_t)log_interval;
}

static void origin_estimate(const struct ptp_port *p, struct ptp_time *t)
{
	if (p->ops->clock_read)
		p->ops->clock_read(p->ctx, t);
}

static int transmit(struct ptp_port *p, enum ptp_channel channel, const struct ptp_msg *m)
{
	uint8_t buf[PTP_MAX_BUILD_LEN];
	size_t len = ptp_msg_build(buf, sizeof(buf), m);

	if (len == 0 || p->ops->send(p->ctx, channel, buf, len) != 0) {
		p->st.cnt.tx_errors++;
		return -1;
	}
	p->st.cnt.tx[m->hdr.type & 0x0f]++;
	return 0;
}

static void send_announce(struct ptp_port *p)
{
	struct ptp_msg m;
	struct ptp_announce *a = &m.announce;

	msg_init(p, &m, PTP_MSG_ANNOUNCE, p->seq_announce++, p->cfg.log_announce_interval);
	m.hdr.flags = p->cfg.time_flags;
	origin_estimate(p, &m.ts);
	a->utc_offset = p->cfg.utc_offset;
	a->gm_priority1 = p->cfg.priority1;
	a->gm_quality = p->cfg.quality;
	a->gm_priority2 = p->cfg.priority2;
	ptp_copy(a->gm_identity, p->cfg.clock_identity, 8);
	a->steps_removed = 0;
	a->time_source = p->cfg.time_source;
	transmit(p, PTP_CHANNEL_GENERAL, &m);
}

static void send_sync(struct ptp_port *p)
{
	struct ptp_msg m;

	if (p->sync_pending)
		p->st.cnt.tx_ts_missing++;  /* Its Follow_Up is never sent: better none than a wrong one. */
	p->sync_pending = 0;
	msg_init(p, &m, PTP_MSG_SYNC, p->seq_sync++, p->cfg.log_sync_interval);
	m.hdr.flags = PTP_FLAG_TWO_STEP;
	origin_estimate(p, &m.ts);
	if (transmit(p, PTP_CHANNEL_EVENT, &m) == 0) {
		p->sync_pending = 1;
		p->sync_pending_seq = m.hdr.sequence_id;
	}
}

static void send_follow_up(struct ptp_port *p, uint16_t seq, const struct ptp_time *t1)
{
	struct ptp_msg m;

	msg_init(p, &m, PTP_MSG_FOLLOW_UP, seq, p->cfg.log_sync_interval);
	m.ts = *t1;
	transmit(p, PTP_CHANNEL_GENERAL, &m);
}

static void send_delay_req(struct ptp_port *p)
{
	struct ptp_msg m;

	if (p->dreq_flags & DREQ_SENT) {
		if (!(p->dreq_flags & DREQ_T3))
			p->st.cnt.tx_ts_missing++;
		else if (!(p->dreq_flags & DREQ_T4))
			p->st.cnt.delay_resp_missing++;
	}
	p->dreq_flags = 0;
	msg_init(p, &m, PTP_MSG_DELAY_REQ, p->seq_delay_req++, PTP_LOG_INTERVAL_UNSPECIFIED);
	origin_estimate(p, &m.ts);
	if (transmit(p, PTP_CHANNEL_EVENT, &m) == 0) {
		p->dreq_flags = DREQ_SENT;
		p->dreq_seq = m.hdr.sequence_id;
	}
}

/* --- states and timers ------------------------------------------------------------------------ */

static struct ptp_foreign *find_foreign(struct ptp_port *p, const struct ptp_port_identity *id)
{
	int i;
	for (i = 0; i < PTP_MAX_FOREIGN; i++)
		if (p->foreign[i].count && ptp_port_identity_equal(&p->foreign[i].ds.sender, id))
			return &p->foreign[i];
	return NULL;
}

static void arm_announce_receipt(struct ptp_port *p)
{
	/* The master's own announce interval when we have one (robust against a slave configured
	 * faster than its master); ptp4l uses the local setting. Plus up to one interval of
	 * randomness, as ptp4l does, so that two silent clocks do not claim master together. */
	const struct ptp_foreign *f = slave_side(p->st.state) || p->st.state == PTP_PS_PASSIVE ?
		find_foreign(p, &p->st.parent) : NULL;
	uint32_t period = interval(f ? f->log_interval : p->cfg.log_announce_interval);
	uint32_t n = p->cfg.announce_receipt_timeout;
	/* 255 x 64 s would not fit the timers: such a timeout is as good as 18 minutes. */
	uint32_t timeout = period > (1u << 30) / n ? 1u << 30 : n * period;
	arm(p, PTP_TIMER_ANNOUNCE_RX, timeout + random_part(p, period));
}

static void arm_delay_req(struct ptp_port *p)
{
	/* 9.5.11.2 asks for randomness; uniform within +-50% keeps the mean at the interval. */
	uint32_t period = interval(p->log_delay_req);
	arm(p, PTP_TIMER_DELAY_REQ, period / 2 + random_part(p, period));
}

/* Forget measurements in flight: they belong to another master or another clock setting. */
static void slave_restart(struct ptp_port *p)
{
	ptp_servo_reset(&p->servo);
	filter_reset(&p->delay);
	p->sync_state = SYNC_NONE;
	p->dreq_flags = 0;
	p->step_pending = 0;
	p->log_delay_req = p->cfg.log_min_delay_req_interval;
	p->st.servo_state = PTP_SERVO_UNLOCKED;
}

static void parent_is_self(struct ptp_port *p)
{
	struct ptp_status *st = &p->st;
	own_identity(p, &st->parent);
	ptp_copy(st->gm_identity, p->cfg.clock_identity, 8);
	st->gm_quality = p->cfg.quality;
	st->gm_priority1 = p->cfg.priority1;
	st->gm_priority2 = p->cfg.priority2;
	st->steps_removed = 0;
	st->utc_offset = p->cfg.utc_offset;
	st->time_flags = p->cfg.time_flags;
}

static void adopt_parent(struct ptp_port *p, const struct ptp_foreign *f)
{
	struct ptp_status *st = &p->st;
	st->parent = f->ds.sender;
	ptp_copy(st->gm_identity, f->ds.identity, 8);
	st->gm_quality = f->ds.quality;
	st->gm_priority1 = f->ds.priority1;
	st->gm_priority2 = f->ds.priority2;
	st->steps_removed = (uint16_t)(f->ds.steps_removed + 1);
	st->utc_offset = f->utc_offset;
	st->time_flags = f->time_flags;
}

static void set_state(struct ptp_port *p, enum ptp_port_state next)
{
	enum ptp_port_state prev = (enum ptp_port_state)p->st.state;

	if (next == prev)
		return;
	p->st.state = (uint8_t)next;
	if (slave_side(prev) && slave_side(next))
		return;  /* UNCALIBRATED <-> SLAVE: the same work goes on. */

	p->armed = 0;
	p->sync_pending = 0;
	slave_restart(p);

	switch (next) {
	case PTP_PS_MASTER:
		parent_is_self(p);
		p->st.offset_ns = 0;
		p->st.mean_path_delay_ns = 0;
		arm(p, PTP_TIMER_ANNOUNCE_TX, 0);  /* Announce at once; Sync right after. */
		arm(p, PTP_TIMER_SYNC_TX, 0);
		break;
	case PTP_PS_LISTENING:
	case PTP_PS_PASSIVE:
		arm_announce_receipt(p);
		break;
	case PTP_PS_UNCALIBRATED:
	case PTP_PS_SLAVE:
		arm_announce_receipt(p);
		arm_delay_req(p);
		break;
	case PTP_PS_FAULTY:
		arm(p, PTP_TIMER_FAULT, interval(p->cfg.log_fault_reset_interval));
		break;
	default:
		break;
	}
}

static void fsm_event(struct ptp_port *p, enum ptp_fsm_event ev)
{
	set_state(p, ptp_fsm((enum ptp_port_state)p->st.state, ev,
	                     p->cfg.role == PTP_ROLE_SLAVE_ONLY));
}

static void fault(struct ptp_port *p)
{
	p->st.cnt.faults++;
	fsm_event(p, PTP_EV_FAULT_DETECTED);
}

static int qualified(const struct ptp_port *p, const struct ptp_foreign *f)
{
	/* FOREIGN_MASTER_THRESHOLD (2) Announces within FOREIGN_MASTER_TIME_WINDOW intervals. */
	return f->count >= 2 && p->now - f->rx_prev <= FOREIGN_TIME_WINDOW * interval(f->log_interval);
}

static void own_dataset(const struct ptp_port *p, struct ptp_dataset *d0)
{
	d0->priority1 = p->cfg.priority1;
	d0->quality = p->cfg.quality;
	d0->priority2 = p->cfg.priority2;
	ptp_copy(d0->identity, p->cfg.clock_identity, 8);
	d0->steps_removed = 0;
	own_identity(p, &d0->sender);
	d0->receiver = d0->sender;
}

/* 9.3.3 for our single port, then the FSM. Run on every Announce and announce timeout. */
static void state_decision(struct ptp_port *p)
{
	enum ptp_port_state state = (enum ptp_port_state)p->st.state;
	struct ptp_foreign *best = NULL;
	struct ptp_dataset d0;
	enum ptp_fsm_event ev = PTP_EV_RS_MASTER;
	int i;

	if (state != PTP_PS_LISTENING && state != PTP_PS_MASTER && state != PTP_PS_PASSIVE &&
	    !slave_side(state))
		return;
	if (p->cfg.role != PTP_ROLE_MASTER_ONLY) {
		for (i = 0; i < PTP_MAX_FOREIGN; i++) {
			struct ptp_foreign *f = &p->foreign[i];
			if (!qualified(p, f)) {
				/* Silent for a whole window: free the record (before the 32-bit time
				 * wraps and makes it look recent). */
				if (p->now - f->rx_last > FOREIGN_TIME_WINDOW * interval(f->log_interval))
					f->count = 0;
				continue;
			}
			if (!best || ptp_dscmp(&f->ds, &best->ds) > 0)
				best = f;
		}
		own_dataset(p, &d0);
		switch (ptp_state_decision(&d0, best ? &best->ds : NULL, state == PTP_PS_LISTENING)) {
		case PTP_DECISION_NONE:
			return;
		case PTP_DECISION_MASTER:
			ev = PTP_EV_RS_MASTER;
			break;
		case PTP_DECISION_PASSIVE:
			ev = PTP_EV_RS_PASSIVE;
			break;
		case PTP_DECISION_SLAVE:
			ev = slave_side(state) && ptp_port_identity_equal(&best->ds.sender, &p->st.parent) ?
				PTP_EV_RS_SLAVE : PTP_EV_RS_SLAVE_NEW_PARENT;
			break;
		}
	}
	if (ev == PTP_EV_RS_SLAVE_NEW_PARENT || ev == PTP_EV_RS_SLAVE || ev == PTP_EV_RS_PASSIVE) {
		int new_parent = !ptp_port_identity_equal(&best->ds.sender, &p->st.parent);
		adopt_parent(p, best);
		if (new_parent && slave_side(state)) {
			/* Another master while UNCALIBRATED/SLAVE: start over (set_state will not). */
			slave_restart(p);
			arm_announce_receipt(p);
		}
	}
	fsm_event(p, ev);
}

static void announce_timeout(struct ptp_port *p)
{
	enum ptp_port_state state = (enum ptp_port_state)p->st.state;
	struct ptp_foreign *f = find_foreign(p, &p->st.parent);

	p->st.cnt.announce_timeouts++;
	if (f && state != PTP_PS_LISTENING)
		f->count = 0;  /* Our master went silent: forget it (linuxptp clears its record too). */
	fsm_event(p, PTP_EV_ANNOUNCE_RECEIPT_TIMEOUT);
	if (p->st.state == state)
		arm_announce_receipt(p);  /* Slave-only and still listening: keep waiting. */
	state_decision(p);
}

/* INITIALIZING: forget everything, put the clock at its nominal rate, then LISTENING. */
static void initialize(struct ptp_port *p)
{
	ptp_servo_init(&p->servo, &p->cfg.servo);
	filter_reset(&p->delay);
	zero(p->foreign, sizeof(p->foreign));
	p->st.freq_scaled_ppb = 0;
	p->st.offset_ns = 0;
	p->st.mean_path_delay_ns = 0;
	parent_is_self(p);
	if (p->ops->clock_adjfreq(p->ctx, 0) != 0) {
		fault(p);
		return;
	}
	fsm_event(p, PTP_EV_INIT_COMPLETE);
	state_decision(p);
}

/* --- slave: offset and delay ------------------------------------------------------------------ */

static void clock_step(struct ptp_port *p, int64_t delta)
{
	if (p->ops->clock_step(p->ctx, delta) != 0) {
		fault(p);
		return;
	}
	p->st.cnt.steps++;
	/* Timestamps taken before the step do not mix with those after it. */
	p->sync_state = SYNC_NONE;
	p->dreq_flags = 0;
}

static void clock_adjfreq(struct ptp_port *p, int64_t adj)
{
	if (p->ops->clock_adjfreq(p->ctx, adj) != 0) {
		fault(p);
		return;
	}
	p->st.freq_scaled_ppb = adj;
}

static int64_t time_to_ns(const struct ptp_time *t)
{
	static const struct ptp_time epoch = { 0, 0 };
	return ptp_time_diff_ns(t, &epoch);
}

/* t1/t2 complete: offset = (t2 - t1 - corrections) - meanPathDelay (11.2), into the servo. */
static void update_offset(struct ptp_port *p)
{
	int64_t delay, offset, adj;
	enum ptp_servo_state s;

	if (p->delay.count == 0)
		return;  /* No delay yet (or none since the last frequency correction). */
	delay = filter_value(&p->delay);
	if (p->servo.count == 0)
		p->est_delay = delay;
	if (p->servo.count < 2)
		delay = p->est_delay;  /* A changing delay would corrupt the frequency estimate. */
	offset = ptp_time_diff_ns(&p->t2, &p->t1) - scaled_to_ns(p->sync_corr + delay);
	p->st.offset_ns = offset;

	if (p->step_pending) {
		p->step_pending = 0;
		p->st.servo_state = PTP_SERVO_LOCKED;  /* the servo already runs its PI loop */
		clock_step(p, -offset);
		return;
	}

	ptp_servo_set_interval(&p->servo, p->sync_log);
	s = ptp_servo_sample(&p->servo, offset, time_to_ns(&p->t2), &adj);
	p->st.cnt.servo_samples++;
	p->st.servo_state = (uint8_t)s;
	switch (s) {
	case PTP_SERVO_UNLOCKED:
		fsm_event(p, PTP_EV_SYNCHRONIZATION_FAULT);
		break;
	case PTP_SERVO_JUMP:
		/* Correct the frequency now, step later: delays measured before this point carry the
		 * old frequency error (it drifts the offset between t2 and t3), so the step waits
		 * for a delay measured at the new frequency. */
		clock_adjfreq(p, adj);
		filter_reset(&p->delay);
		p->dreq_flags = 0;
		p->step_pending = 1;
		fsm_event(p, PTP_EV_SYNCHRONIZATION_FAULT);
		break;
	case PTP_SERVO_LOCKED:
		clock_adjfreq(p, adj);
		fsm_event(p, PTP_EV_MASTER_CLOCK_SELECTED);
		break;
	}
}

/* t1..t4 complete: meanPathDelay = ((t2 - t1) + (t4 - t3) - corrections) / 2 (11.3.2). */
static void update_delay(struct ptp_port *p)
{
	int64_t sum, sample;

	if ((p->dreq_flags & DREQ_ALL) != DREQ_ALL || p->sync_state != SYNC_COMPLETE)
		return;
	p->dreq_flags = 0;
	sum = ptp_time_diff_ns(&p->t2, &p->t1) + ptp_time_diff_ns(&p->t4, &p->t3);
	if (sum > DELAY_SUM_LIMIT || sum < -DELAY_SUM_LIMIT) {
		p->st.cnt.delay_rejected++;
		return;
	}
	sample = (sum * 65536 - p->sync_corr - p->dresp_corr) / 2;
	filter_add(&p->delay, sample);
	p->st.mean_path_delay_ns = scaled_to_ns(filter_value(&p->delay));
}

static void sync_complete(struct ptp_port *p)
{
	p->sync_state = SYNC_COMPLETE;
	update_delay(p);  /* A Delay_Resp may have been waiting for a Sync. */
	update_offset(p);
}

/* --- receiving -------------------------------------------------------------------------------- */

static int from_parent(struct ptp_port *p, const struct ptp_msg *m)
{
	if (!slave_side(p->st.state)) {
		p->st.cnt.drop[PTP_DROP_STATE]++;
		return 0;
	}
	if (!ptp_port_identity_equal(&m->hdr.source, &p->st.parent)) {
		p->st.cnt.drop[PTP_DROP_NOT_PARENT]++;
		return 0;
	}
	return 1;
}

static int received_log(const struct ptp_msg *m, int fallback)
{
	return log_valid(m->hdr.log_interval) ? m->hdr.log_interval : fallback;
}

static void rx_sync(struct ptp_port *p, const struct ptp_msg *m, const struct ptp_time *rx_ts)
{
	if (!from_parent(p, m))
		return;
	p->t2 = *rx_ts;
	p->sync_seq = m->hdr.sequence_id;
	p->sync_corr = ptp_clamp64(m->hdr.correction, CORRECTION_LIMIT);
	p->sync_log = (int8_t)received_log(m, p->cfg.log_sync_interval);
	if (m->hdr.flags & PTP_FLAG_TWO_STEP) {
		p->sync_state = SYNC_WAIT_FUP;
		return;
	}
	p->t1 = m->ts;  /* One-step master: originTimestamp is precise. */
	sync_complete(p);
}

static void rx_follow_up(struct ptp_port *p, const struct ptp_msg *m)
{
	if (!from_parent(p, m))
		return;
	if (p->sync_state != SYNC_WAIT_FUP || m->hdr.sequence_id != p->sync_seq) {
		p->st.cnt.drop[PTP_DROP_SEQUENCE]++;
		return;
	}
	p->t1 = m->ts;
	p->sync_corr += ptp_clamp64(m->hdr.correction, CORRECTION_LIMIT);
	sync_complete(p);
}

static void rx_delay_req(struct ptp_port *p, const struct ptp_msg *req, const struct ptp_time *rx_ts)
{
	struct ptp_msg m;

	if (p->st.state != PTP_PS_MASTER) {
		p->st.cnt.drop[PTP_DROP_STATE]++;
		return;
	}
	msg_init(p, &m, PTP_MSG_DELAY_RESP, req->hdr.sequence_id, p->cfg.log_min_delay_req_interval);
	m.hdr.correction = req->hdr.correction;  /* transparent clocks' residence, returned (11.3.2) */
	m.ts = *rx_ts;
	m.requesting = req->hdr.source;
	transmit(p, PTP_CHANNEL_GENERAL, &m);
}

static void rx_delay_resp(struct ptp_port *p, const struct ptp_msg *m)
{
	struct ptp_port_identity me;

	own_identity(p, &me);
	if (slave_side(p->st.state) && !ptp_port_identity_equal(&m->requesting, &me)) {
		p->st.cnt.drop[PTP_DROP_NOT_OURS]++;
		return;
	}
	if (!from_parent(p, m))
		return;
	if (!(p->dreq_flags & DREQ_SENT) || (p->dreq_flags & DREQ_T4) ||
	    m->hdr.sequence_id != p->dreq_seq) {
		p->st.cnt.drop[PTP_DROP_SEQUENCE]++;
		return;
	}
	p->t4 = m->ts;
	p->dresp_corr = ptp_clamp64(m->hdr.correction, CORRECTION_LIMIT);
	p->dreq_flags |= DREQ_T4;
	/* The master tells the Delay_Req rate it wants (ptp4l adopts it too). */
	p->log_delay_req = (int8_t)received_log(m, p->log_delay_req);
	update_delay(p);
}

static void rx_announce(struct ptp_port *p, const struct ptp_msg *m)
{
	const struct ptp_announce *a = &m->announce;
	struct ptp_foreign *f;
	int i;

	if (p->cfg.role == PTP_ROLE_MASTER_ONLY) {
		p->st.cnt.drop[PTP_DROP_STATE]++;
		return;
	}
	if (a->steps_removed >= 255) {  /* 9.3.2.5 */
		p->st.cnt.drop[PTP_DROP_ANNOUNCE]++;
		return;
	}
	f = find_foreign(p, &m->hdr.source);
	if (f && f->seq == m->hdr.sequence_id) {
		p->st.cnt.drop[PTP_DROP_ANNOUNCE]++;  /* a duplicate does not qualify anyone */
		return;
	}
	if (!f) {
		/* A free record, else the one heard from longest ago that is not our parent. */
		for (i = 0; i < PTP_MAX_FOREIGN; i++) {
			struct ptp_foreign *c = &p->foreign[i];
			if (!c->count) {
				f = c;
				break;
			}
			if (ptp_port_identity_equal(&c->ds.sender, &p->st.parent))
				continue;
			if (!f || !after(c->rx_last, f->rx_last))
				f = c;
		}
		if (!f)
			f = &p->foreign[0];
		zero(f, sizeof(*f));
	}
	f->ds.priority1 = a->gm_priority1;
	f->ds.quality = a->gm_quality;
	f->ds.priority2 = a->gm_priority2;
	ptp_copy(f->ds.identity, a->gm_identity, 8);
	f->ds.steps_removed = a->steps_removed;
	f->ds.sender = m->hdr.source;
	own_identity(p, &f->ds.receiver);
	f->utc_offset = a->utc_offset;
	f->time_flags = m->hdr.flags;
	f->seq = m->hdr.sequence_id;
	f->log_interval = (int8_t)received_log(m, p->cfg.log_announce_interval);
	f->rx_prev = f->rx_last;
	f->rx_last = p->now;
	if (f->count < 2)
		f->count++;

	if ((slave_side(p->st.state) || p->st.state == PTP_PS_PASSIVE) &&
	    ptp_port_identity_equal(&m->hdr.source, &p->st.parent)) {
		arm_announce_receipt(p);
		adopt_parent(p, f);
	}
	state_decision(p);
}

void ptp_port_receive(struct ptp_port *p, const uint8_t *msg, size_t len,
                      const struct ptp_time *rx_ts)
{
	struct ptp_counters *cnt = &p->st.cnt;
	struct ptp_msg m;
	int r = ptp_msg_parse(msg, len, &m);

	if (r >= 0) {
		cnt->drop[r]++;
		return;
	}
	if (m.hdr.domain != p->cfg.domain) {
		cnt->drop[PTP_DROP_DOMAIN]++;
		return;
	}
	if (!ptp_compare(m.hdr.source.clock_identity, p->cfg.clock_identity, 8)) {
		cnt->drop[PTP_DROP_OWN]++;
		return;
	}
	cnt->rx[m.hdr.type]++;
	if ((m.hdr.type == PTP_MSG_SYNC || m.hdr.type == PTP_MSG_DELAY_REQ) && !rx_ts) {
		cnt->drop[PTP_DROP_NO_TIMESTAMP]++;
		return;
	}
	switch (m.hdr.type) {
	case PTP_MSG_SYNC:       rx_sync(p, &m, rx_ts); break;
	case PTP_MSG_FOLLOW_UP:  rx_follow_up(p, &m); break;
	case PTP_MSG_DELAY_REQ:  rx_delay_req(p, &m, rx_ts); break;
	case PTP_MSG_DELAY_RESP: rx_delay_resp(p, &m); break;
	case PTP_MSG_ANNOUNCE:   rx_announce(p, &m); break;
	default:                 cnt->drop[PTP_DROP_UNSUPPORTED]++; break;
	}
}

void ptp_port_tx_timestamp(struct ptp_port *p, unsigned msg_type, uint16_t sequence_id,
                           const struct ptp_time *tx_ts)
{
	if (msg_type == PTP_MSG_SYNC && p->st.state == PTP_PS_MASTER && p->sync_pending &&
	    sequence_id == p->sync_pending_seq) {
		p->sync_pending = 0;
		send_follow_up(p, sequence_id, tx_ts);
		return;
	}
	if (msg_type == PTP_MSG_DELAY_REQ && slave_side(p->st.state) &&
	    (p->dreq_flags & (DREQ_SENT | DREQ_T3)) == DREQ_SENT && sequence_id == p->dreq_seq) {
		p->t3 = *tx_ts;
		p->dreq_flags |= DREQ_T3;
		update_delay(p);
		return;
	}
	p->st.cnt.tx_ts_unmatched++;
}

/* --- time ------------------------------------------------------------------------------------- */

void ptp_port_tick(struct ptp_port *p, uint64_t now_ns)
{
	uint32_t now = (uint32_t)(now_ns >> TIME_SHIFT);
	unsigned t;

	if (!after(now, p->now)) {
		/* The monotonic clock went back (it must not): keep the remaining delays. */
		for (t = 0; t < PTP_TIMER_COUNT; t++)
			p->deadline[t] += now - p->now;
	}
	p->now = now;

	switch (p->st.state) {
	case PTP_PS_FAULTY:
		if (expired(p, PTP_TIMER_FAULT)) {
			fsm_event(p, PTP_EV_FAULT_CLEARED);
			initialize(p);
		}
		break;
	case PTP_PS_MASTER:
		if (expired(p, PTP_TIMER_ANNOUNCE_TX)) {
			rearm(p, PTP_TIMER_ANNOUNCE_TX, interval(p->cfg.log_announce_interval));
			send_announce(p);
			state_decision(p);  /* at least once per announce interval (9.2.6.8) */
		}
		if (expired(p, PTP_TIMER_SYNC_TX)) {
			rearm(p, PTP_TIMER_SYNC_TX, interval(p->cfg.log_sync_interval));
			send_sync(p);
		}
		break;
	default:
		if (expired(p, PTP_TIMER_ANNOUNCE_RX))
			announce_timeout(p);
		if (slave_side(p->st.state) && expired(p, PTP_TIMER_DELAY_REQ)) {
			arm_delay_req(p);
			send_delay_req(p);
		}
		break;
	}
}

/* --- setup ------------------------------------------------------------------------------------ */

int ptp_port_init(struct ptp_port *p, const struct ptp_config *cfg, const struct ptp_ops *ops,
                  void *ctx, uint64_t now_ns)
{
	if (!ops || !ops->send || !ops->clock_step || !ops->clock_adjfreq ||
	    !log_valid(cfg->log_announce_interval) || !log_valid(cfg->log_sync_interval) ||
	    !log_valid(cfg->log_min_delay_req_interval) || !log_valid(cfg->log_fault_reset_interval) ||
	    cfg->announce_receipt_timeout < 2 || cfg->delay_filter_len < 1 ||
	    cfg->delay_filter_len > PTP_DELAY_FILTER_MAX || cfg->role > PTP_ROLE_SLAVE_ONLY)
		return -1;
	zero(p, sizeof(*p));
	p->cfg = *cfg;
	if (cfg->role == PTP_ROLE_SLAVE_ONLY)
		p->cfg.quality.clock_class = 255;  /* 7.6.2.4; as ptp4l's slaveOnly does */
	p->ops = ops;
	p->ctx = ctx;
	p->now = (uint32_t)(now_ns >> TIME_SHIFT);
	p->rng = cfg->seed ? cfg->seed : SEED_DEFAULT;
	p->delay.len = cfg->delay_filter_len;
	p->log_delay_req = cfg->log_min_delay_req_interval;
	own_identity(p, &p->st.port_identity);
	p->st.role = cfg->role;
	p->st.transport = cfg->transport;
	p->st.state = PTP_PS_INITIALIZING;
	initialize(p);
	return 0;
}

const struct ptp_status *ptp_port_status(const struct ptp_port *p)
{
	return &p->st;
}
