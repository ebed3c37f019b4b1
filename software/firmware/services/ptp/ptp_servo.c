/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Fixed point: offsets in ns, frequencies in scaled ppb (2^-16 ppb), gains Q16. An offset of
 * x ns over an interval of 2^L s is a frequency of x * 2^-L ppb, so a gain g (Q16) turns x into
 * g * x * 2^-L scaled ppb: one multiply and a shift, no division. Bounds that keep every product
 * inside int64: |offset| <= 2^30 in the PI terms, gains <= 2^17, 2^-L <= 2^10.
 */
#include "ptp_msg.h"
#include "ptp_servo.h"

#define PI_OFFSET_LIMIT ((int64_t)1 << 30)   /* ~1.07 s: far beyond any max_freq slew anyway */
#define EST_OFFSET_LIMIT ((int64_t)1 << 32)
#define EST_SPAN_LIMIT  ((int64_t)1 << 46)   /* ~19.5 h between the two estimate samples */
/* The frequency estimate spans at least 2^26 ns (67 ms): with timestamps quantised to 8 ns, two
 * samples one 2^-10 s interval apart could be 16 ppm wrong, 67 ms apart 0.24 ppm. Longer sync
 * intervals take the next sample, as linuxptp does. */
#define EST_SPAN_MIN    ((int64_t)1 << 26)
#define NS_LIMIT        4000000000000000000LL

const char *ptp_servo_state_name(unsigned state)
{
	switch (state) {
	case PTP_SERVO_UNLOCKED: return "UNLOCKED";
	case PTP_SERVO_JUMP:     return "JUMP";
	case PTP_SERVO_LOCKED:   return "LOCKED";
	default:                 return "?";
	}
}

static int64_t magnitude(int64_t v)
{
	return v < 0 ? -v : v;  /* callers clamp first, so never INT64_MIN */
}

void ptp_servo_init(struct ptp_servo *s, const struct ptp_servo_config *cfg)
{
	s->cfg = *cfg;
	if (s->cfg.kp > PTP_SERVO_GAIN_MAX)
		s->cfg.kp = PTP_SERVO_GAIN_MAX;
	if (s->cfg.ki > PTP_SERVO_GAIN_MAX)
		s->cfg.ki = PTP_SERVO_GAIN_MAX;
	s->drift = 0;
	s->adj = 0;
	s->offset0 = 0;
	s->local0 = 0;
	s->log_interval = 0;
	s->count = 0;
	s->first_update = 1;
}

void ptp_servo_reset(struct ptp_servo *s)
{
	s->count = 0;
}

void ptp_servo_set_interval(struct ptp_servo *s, int log_interval)
{
	if (log_interval < PTP_LOG_INTERVAL_MIN)
		log_interval = PTP_LOG_INTERVAL_MIN;
	if (log_interval > PTP_LOG_INTERVAL_MAX)
		log_interval = PTP_LOG_INTERVAL_MAX;
	s->log_interval = (int8_t)log_interval;
}

/* How fast the clock runs against the master, scaled ppb: d_offset ns gained over span ns. */
static int64_t frequency_estimate(int64_t d_offset, int64_t span)
{
	int64_t n = ptp_clamp64(d_offset, EST_OFFSET_LIMIT) * 1000000000LL;  /* <= 2^62 */
	int64_t r, q = ptp_div64(n, span, &r);
	if (q > ((int64_t)1 << 30) || q < -((int64_t)1 << 30))  /* > 1e9 ppb: saturate, clamped later */
		return ptp_clamp64(q, (int64_t)1 << 30) * 65536;
	return q * 65536 + ptp_div64(r * 65536, span, NULL);  /* |r| < span <= 2^46 */
}

/* g * offset * 2^-log_interval, scaled ppb. */
static int64_t gain_term(uint32_t gain, int64_t offset, int log_interval)
{
	int64_t v = (int64_t)gain * offset;
	if (log_interval < 0)
		return v * ((int64_t)1 << -log_interval);
	return v >> log_interval;  /* arithmetic shift (gcc, clang): rounds toward -inf, fine here */
}

enum ptp_servo_state ptp_servo_sample(struct ptp_servo *s, int64_t offset_ns, int64_t local_ns,
                                      int64_t *adj)
{
	int64_t max = (int64_t)s->cfg.max_freq_ppb << PTP_SCALED_PPB_SHIFT;
	int64_t offset = ptp_clamp64(offset_ns, NS_LIMIT), local = ptp_clamp64(local_ns, NS_LIMIT);
	enum ptp_servo_state state = PTP_SERVO_UNLOCKED;
	int64_t span, p, i, out;

	switch (s->count) {
	case 0:
		s->offset0 = offset;
		s->local0 = local;
		s->count = 1;
		break;
	case 1:
		span = local - s->local0;
		if (span <= 0 || span > EST_SPAN_LIMIT) {
			/* Out of order or ancient: this sample starts a new estimate. */
			s->offset0 = offset;
			s->local0 = local;
			break;
		}
		if (span < EST_SPAN_MIN)
			break;
		/* The clock ran at s->adj; it should run slower by what it gained. */
		s->drift = ptp_clamp64(s->adj - frequency_estimate(offset - s->offset0, span), max);
		s->adj = s->drift;
		if ((s->first_update && s->cfg.first_step_threshold_ns &&
		     magnitude(offset) > s->cfg.first_step_threshold_ns) ||
		    (s->cfg.step_threshold_ns && magnitude(offset) > s->cfg.step_threshold_ns))
			state = PTP_SERVO_JUMP;
		else
			state = PTP_SERVO_LOCKED;
		s->first_update = 0;
		s->count = 2;
		break;
	default:
		if (s->cfg.step_threshold_ns && magnitude(offset) > s->cfg.step_threshold_ns) {
			/* Like linuxptp: estimate the frequency again, then step (state JUMP). */
			s->count = 0;
			break;
		}
		offset = ptp_clamp64(offset, PI_OFFSET_LIMIT);
		p = gain_term(s->cfg.kp, offset, s->log_interval);
		i = gain_term(s->cfg.ki, offset, s->log_interval);
		out = s->drift - p - i;
		s->adj = ptp_clamp64(out, max);
		if (s->adj == out)  /* Anti-windup: integrate only while the output is not clamped. */
			s->drift = ptp_clamp64(s->drift - i, max);
		state = PTP_SERVO_LOCKED;
		break;
	}
	*adj = s->adj;
	return state;
}
