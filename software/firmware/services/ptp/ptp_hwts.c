/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "ptp_hwts.h"

#define NSEC_PER_SEC 1000000000

int ptp_hwts_correct(struct ptp_time *t, uint64_t sec, uint32_t nsec, unsigned start_lane,
                     const struct ptp_hwts_corr *c)
{
	int64_t ns;

	if (nsec >= NSEC_PER_SEC || (start_lane != 0 && start_lane != 4))
		return -1;
	ns = (int64_t)nsec + (start_lane == 4 ? c->lane4_ns : c->lane0_ns);
	/* Corrections are far below a second: at most one second's carry or borrow. */
	if (ns < 0) {
		if (sec == 0)
			return -1;
		ns += NSEC_PER_SEC;
		sec -= 1;
	} else if (ns >= NSEC_PER_SEC) {
		ns -= NSEC_PER_SEC;
		sec += 1;
	}
	t->sec  = sec;
	t->nsec = (uint32_t)ns;
	return 0;
}
