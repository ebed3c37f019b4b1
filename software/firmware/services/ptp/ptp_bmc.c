/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "ptp_bmc.h"

int ptp_port_identity_cmp(const struct ptp_port_identity *a, const struct ptp_port_identity *b)
{
	int c = ptp_compare(a->clock_identity, b->clock_identity, 8);
	if (c)
		return c;
	return a->port_number < b->port_number ? -1 : a->port_number > b->port_number;
}

/* Figure 28: the same grandmaster seen through two paths. */
static int dscmp_topology(const struct ptp_dataset *a, const struct ptp_dataset *b)
{
	unsigned sa = a->steps_removed, sb = b->steps_removed;
	int c;

	if (sa + 1 < sb)
		return PTP_A_BETTER;
	if (sb + 1 < sa)
		return PTP_B_BETTER;
	if (sa < sb) {
		/* b came one step further: it is worse unless it went through us ("error-1"). */
		c = ptp_port_identity_cmp(&b->receiver, &b->sender);
		if (c < 0)
			return PTP_A_BETTER;
		if (c > 0)
			return PTP_A_BETTER_TOPO;
		return PTP_DS_EQUAL;
	}
	if (sa > sb) {
		c = ptp_port_identity_cmp(&a->receiver, &a->sender);
		if (c < 0)
			return PTP_B_BETTER;
		if (c > 0)
			return PTP_B_BETTER_TOPO;
		return PTP_DS_EQUAL;
	}
	c = ptp_port_identity_cmp(&a->sender, &b->sender);
	if (c < 0)
		return PTP_A_BETTER_TOPO;
	if (c > 0)
		return PTP_B_BETTER_TOPO;
	c = ptp_port_identity_cmp(&a->receiver, &b->receiver);
	if (c < 0)
		return PTP_A_BETTER_TOPO;
	if (c > 0)
		return PTP_B_BETTER_TOPO;
	return PTP_DS_EQUAL;  /* "error-2" */
}

/* Figure 27: lower is better at every step. */
int ptp_dscmp(const struct ptp_dataset *a, const struct ptp_dataset *b)
{
	int c;

	if (a == b)
		return PTP_DS_EQUAL;
	if (!b)
		return PTP_A_BETTER;
	if (!a)
		return PTP_B_BETTER;

	c = ptp_compare(a->identity, b->identity, 8);
	if (c == 0)
		return dscmp_topology(a, b);

	if (a->priority1 != b->priority1)
		return a->priority1 < b->priority1 ? PTP_A_BETTER : PTP_B_BETTER;
	if (a->quality.clock_class != b->quality.clock_class)
		return a->quality.clock_class < b->quality.clock_class ? PTP_A_BETTER : PTP_B_BETTER;
	if (a->quality.clock_accuracy != b->quality.clock_accuracy)
		return a->quality.clock_accuracy < b->quality.clock_accuracy ? PTP_A_BETTER : PTP_B_BETTER;
	if (a->quality.offset_scaled_log_variance != b->quality.offset_scaled_log_variance)
		return a->quality.offset_scaled_log_variance < b->quality.offset_scaled_log_variance ?
			PTP_A_BETTER : PTP_B_BETTER;
	if (a->priority2 != b->priority2)
		return a->priority2 < b->priority2 ? PTP_A_BETTER : PTP_B_BETTER;
	return c < 0 ? PTP_A_BETTER : PTP_B_BETTER;
}

enum ptp_decision ptp_state_decision(const struct ptp_dataset *d0, const struct ptp_dataset *erbest,
                                     int listening)
{
	if (!erbest && listening)
		return PTP_DECISION_NONE;
	if (d0->quality.clock_class >= 1 && d0->quality.clock_class <= 127)
		return ptp_dscmp(d0, erbest) > 0 ? PTP_DECISION_MASTER : PTP_DECISION_PASSIVE;
	return ptp_dscmp(d0, erbest) > 0 ? PTP_DECISION_MASTER : PTP_DECISION_SLAVE;
}
