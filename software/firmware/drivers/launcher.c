/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>

#include <generated/csr.h>
#include <generated/soc.h>

#include "launcher.h"
#include "protocol/ethframe.h"

#define NS_PER_S 1000000000u

#ifdef CSR_LAUNCHER_BASE

#define STATUS(field) ((launcher_status_read() >> CSR_LAUNCHER_STATUS_##field##_OFFSET) & 1u)
#define CONTROL_ARM  1u
#define CONTROL_STOP 2u
/* The firmware needs this long from reading the clock to arming (CSR writes; the simulated board's
 * CPU is the slowest): a first launch closer than this after the request is refused, not late. */
#define ARM_MARGIN_NS 200000u

static uint16_t guard_in_use = ETHDAQ_LAUNCHER_GUARD;
static uint64_t first_sec;
static uint32_t first_ns;

int launcher_present(void) { return 1; }

void launcher_init(void)
{
	printf("  launcher : time-triggered frames ahead of all other traffic; lead %u cycles, guard %u cycles\n",
	       (unsigned)ETHDAQ_LAUNCHER_LEAD_CYCLES, (unsigned)ETHDAQ_LAUNCHER_GUARD);
}

static void report(struct ctl_launch_status *s)
{
	s->armed       = (uint8_t)STATUS(ARMED);
	s->guard       = guard_in_use;
	s->lead        = ETHDAQ_LAUNCHER_LEAD_CYCLES;
	s->cycle_ps    = ETHDAQ_LAUNCHER_CYCLE_PS;
	s->sent        = launcher_sent_read();
	s->missed_past = launcher_missed_past_read();
	s->missed_busy = launcher_missed_busy_read();
	s->first_sec   = first_sec;
	s->first_ns    = first_ns;
}

/* a - b in ns for a >= b less than 4 s apart; UINT32_MAX-ish when further (or a < b: 0). */
static uint64_t later_by_ns(uint64_t a_sec, uint32_t a_ns, uint64_t b_sec, uint32_t b_ns)
{
	if (a_sec < b_sec || (a_sec == b_sec && a_ns < b_ns))
		return 0;
	if (a_sec - b_sec > 4)
		return 5ull * NS_PER_S;
	return (a_sec - b_sec) * NS_PER_S + a_ns - b_ns;
}

int launcher_op(const struct ctl_launch *l, struct ctl_launch_status *s, uint64_t now_sec, uint32_t now_ns)
{
	uint8_t wire[ETHFRAME_PREAMBLE + CTL_LAUNCH_FRAME_MAX + ETHFRAME_MIN + ETHFRAME_FCS];
	uint64_t t_sec, fire_sec;
	uint32_t t_ns, fire_ns, lead_ns;
	uint16_t guard;
	size_t n, i;
	unsigned spins;

	if (l->op == CTL_LAUNCH_STOP || l->op == CTL_LAUNCH_ARM)
		launcher_control_write(CONTROL_STOP);
	if (l->op != CTL_LAUNCH_ARM) {
		report(s);
		return 0;
	}
	n = ethframe_wire(wire, sizeof(wire), l->frame, l->frame_len);
	if (n == 0 || n > ETHDAQ_LAUNCHER_DEPTH)
		return CTL_ERR_BAD_VALUE;
	guard = l->guard ? l->guard : (uint16_t)ETHDAQ_LAUNCHER_GUARD;
	/* When is the frame's first byte to be on the pins, and when must the gateware fire for that. */
	if (l->flags & CTL_LAUNCH_RELATIVE) {
		t_sec = now_sec + l->sec;
		t_ns  = now_ns + l->ns;
		if (t_ns >= NS_PER_S) {
			t_ns -= NS_PER_S;
			t_sec++;
		}
	} else {
		t_sec = l->sec;
		t_ns  = l->ns;
	}
	lead_ns = (uint32_t)(((uint64_t)(ETHDAQ_LAUNCHER_LEAD_CYCLES + guard) * ETHDAQ_LAUNCHER_CYCLE_PS + 500u) / 1000u);
	if (later_by_ns(t_sec, t_ns, now_sec, now_ns) < (uint64_t)lead_ns + ARM_MARGIN_NS)
		return CTL_ERR_BAD_VALUE;
	fire_sec = t_sec;
	if (t_ns >= lead_ns) {
		fire_ns = t_ns - lead_ns;
	} else {
		fire_ns = t_ns + NS_PER_S - lead_ns;
		fire_sec--;
	}
	/* The previous launch may still be on the line: the buffer is not written under it. */
	for (spins = 0; STATUS(SENDING); spins++)
		if (spins > 100000)
			return CTL_ERR_BUSY;
	launcher_frame_addr_write(0);
	for (i = 0; i < n; i++)
		launcher_frame_data_write(wire[i]);
	launcher_length_write((uint32_t)n);
	launcher_time_sec_write(fire_sec);
	launcher_time_ns_write(fire_ns);
	launcher_period_write(l->period);
	launcher_count_write(l->period ? l->count : 1u);
	launcher_guard_write(guard);
	launcher_control_write(CONTROL_ARM);
	guard_in_use = guard;
	first_sec = t_sec;
	first_ns  = t_ns;
	report(s);
	return 0;
}

#else

int  launcher_present(void) { return 0; }
void launcher_init(void) {}
int  launcher_op(const struct ctl_launch *l, struct ctl_launch_status *s, uint64_t now_sec, uint32_t now_ns)
{
	(void)l; (void)s; (void)now_sec; (void)now_ns;
	return CTL_ERR_UNSUPPORTED;
}

#endif
