/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Hardware timestamps: a timestamp unit's raw record (the clock's whole ns at the frame's SFD
 * beat, and at 64 bits the lane of its XGMII start character /S/) corrected to the IEEE 1588
 * timestamp point at the FPGA's pins (docs/ptp.md, "PHY latencies"). The SoC gives the
 * corrections in picoseconds (XGMII's are 6.4 and 3.2 ns); they are added to the record and the
 * sum rounded to the nearest ns, the resolution of the records and of the stack's times. The
 * rounding happens at compile time (PTP_HWTS_CORR of constants): the target has no divider.
 */
#ifndef ETHDAQ_PTP_HWTS_H
#define ETHDAQ_PTP_HWTS_H

#include <stdint.h>

#include "ptp_msg.h"

/* ps rounded to the nearest ns (halves up): floor((ps + 500) / 1000), for either sign. */
#define PTP_PS_TO_NS(ps) ((ps) + 500 >= 0 ? ((ps) + 500) / 1000 : -((499 - (ps)) / 1000))

/* One direction's corrections in whole ns (each under a second): for a frame whose /S/ was in lane 0 (every frame at
 * 8 bits) and in lane 4 (XGMII, 4 byte times later in its column). */
struct ptp_hwts_corr {
	int32_t lane0_ns;
	int32_t lane4_ns;
};

/* From the correction for lane 0 and what lane 4 adds, both in ps. */
#define PTP_HWTS_CORR(ps, lane4_ps) { PTP_PS_TO_NS(ps), PTP_PS_TO_NS((ps) + (lane4_ps)) }

/* *t = the record (sec, nsec, start_lane) plus its lane's correction: 0, or -1 (and *t
 * untouched) for a record no unit makes: nsec of a second or more, a lane other than 0 or 4, or
 * a corrected time before the epoch. */
int ptp_hwts_correct(struct ptp_time *t, uint64_t sec, uint32_t nsec, unsigned start_lane,
                     const struct ptp_hwts_corr *c);

#endif
