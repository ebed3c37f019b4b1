/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * PI clock servo after linuxptp's pi.c, in integer arithmetic (the target has no FPU and no
 * multiplier). Input: offset from master (ns, slave minus master) and the local time of the
 * sample. Output: the frequency adjustment to apply, in scaled ppb (ppb * 2^16, positive makes
 * the clock run faster), and a state:
 *   UNLOCKED: collecting the first samples (frequency estimate), leave the clock alone;
 *   JUMP:     step the clock by -offset and apply the adjustment (the estimated frequency);
 *   LOCKED:   apply the adjustment.
 * Gains are normalised to the sync interval: kp = 0.4 corrects 40% of an offset within one
 * interval whatever the interval, so the loop converges in the same number of samples at
 * 2^-10 s as at 1 s. (linuxptp's hardware-timestamping gains, 0.7 and 0.3, are this at 1 s.)
 */
#ifndef ETHDAQ_PTP_SERVO_H
#define ETHDAQ_PTP_SERVO_H

#include <stdint.h>

#define PTP_SCALED_PPB_SHIFT 16          /* 1 ppb = 65536 scaled ppb */
#define PTP_SERVO_GAIN_ONE   65536       /* gains are Q16 */
#define PTP_SERVO_GAIN_MAX   (2 * PTP_SERVO_GAIN_ONE)
#define PTP_LOG_INTERVAL_MIN (-10)
#define PTP_LOG_INTERVAL_MAX 6

enum ptp_servo_state {
	PTP_SERVO_UNLOCKED,
	PTP_SERVO_JUMP,
	PTP_SERVO_LOCKED,
};

struct ptp_servo_config {
	uint32_t kp;                      /* proportional gain per sync interval, Q16 (<= 2.0) */
	uint32_t ki;                      /* integral gain per sync interval, Q16 (<= 2.0) */
	uint32_t max_freq_ppb;            /* |adjustment| limit; clamped output stops integration */
	int64_t  first_step_threshold_ns; /* first lock: step when |offset| exceeds it (0: never) */
	int64_t  step_threshold_ns;       /* later: re-estimate and step beyond it (0: never) */
};

struct ptp_servo {
	struct ptp_servo_config cfg;
	int64_t drift;         /* integral term: adjustment at zero offset, scaled ppb */
	int64_t adj;           /* last adjustment returned, scaled ppb: what the clock runs at */
	int64_t offset0;       /* first sample of the frequency estimate */
	int64_t local0;
	int8_t  log_interval;  /* sync interval, log2 s */
	uint8_t count;         /* samples taken since reset; 2 means the PI loop runs */
	uint8_t first_update;  /* never locked since init: first_step_threshold applies */
};

void ptp_servo_init(struct ptp_servo *s, const struct ptp_servo_config *cfg);

/* Start over with a frequency estimate (new master, or offset beyond step_threshold); the
 * frequency found so far is kept as the starting point. */
void ptp_servo_reset(struct ptp_servo *s);

/* The interval between samples, log2 seconds, clamped to PTP_LOG_INTERVAL_MIN..MAX. */
void ptp_servo_set_interval(struct ptp_servo *s, int log_interval);

/* One sample: offset (ns) measured at local time local_ns (ns, any origin, increasing).
 * *adj receives the adjustment in scaled ppb. */
enum ptp_servo_state ptp_servo_sample(struct ptp_servo *s, int64_t offset_ns, int64_t local_ns,
                                      int64_t *adj);

const char *ptp_servo_state_name(unsigned state);

#endif
