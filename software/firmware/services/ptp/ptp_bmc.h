/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Best master clock algorithm of IEEE 1588-2008 clause 9.3: the dataset comparison (9.3.4,
 * Figures 27 and 28) and the state decision (9.3.3, Figure 26) for an ordinary clock, whose
 * single port makes Ebest and Erbest the same record. Pure functions, like linuxptp's bmc.c.
 */
#ifndef ETHDAQ_PTP_BMC_H
#define ETHDAQ_PTP_BMC_H

#include "ptp_msg.h"

/* What an Announce (or our own defaultDS, "D0") says about a grandmaster and the path to it. */
struct ptp_dataset {
	uint8_t  priority1;
	struct ptp_clock_quality quality;
	uint8_t  priority2;
	uint8_t  identity[8];              /* grandmasterIdentity */
	uint16_t steps_removed;
	struct ptp_port_identity sender;   /* the Announce's sourcePortIdentity (own port for D0) */
	struct ptp_port_identity receiver; /* the port that received it (own port) */
};

/* Results of ptp_dscmp: better by the clocks' attributes, or only by topology. */
#define PTP_A_BETTER       2
#define PTP_A_BETTER_TOPO  1
#define PTP_DS_EQUAL       0   /* the standard's "error-1"/"error-2": the same data twice */
#define PTP_B_BETTER_TOPO (-1)
#define PTP_B_BETTER      (-2)

/* Compare a and b; either may be NULL (an empty record is worse than any record). */
int ptp_dscmp(const struct ptp_dataset *a, const struct ptp_dataset *b);

/* Port identities in the order the standard compares them: clockIdentity octets, then port. */
int ptp_port_identity_cmp(const struct ptp_port_identity *a, const struct ptp_port_identity *b);

enum ptp_decision {
	PTP_DECISION_NONE,     /* no foreign master while LISTENING: stay */
	PTP_DECISION_MASTER,   /* M1/M2: our defaultDS is better */
	PTP_DECISION_PASSIVE,  /* P1: we are class 1..127 and the foreign master is better */
	PTP_DECISION_SLAVE,    /* S1: synchronise to erbest */
};

/* d0: our defaultDS; erbest: the best qualified foreign master or NULL. */
enum ptp_decision ptp_state_decision(const struct ptp_dataset *d0, const struct ptp_dataset *erbest,
                                     int listening);

#endif
