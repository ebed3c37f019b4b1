/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>
#include <generated/soc.h>

#include "drivers/events.h"
#include "protocol/ctl.h"
#include "ptpsvc.h"
#include "rxstats.h"

/* The PTP port's drops of malformed messages (enum ptp_drop), by RX_STATS code. */
static const struct { uint8_t code, reason; } ptp_drops[] = {
	{ CTL_RX_COUNTER_PTP_SHORT,       PTP_DROP_SHORT },
	{ CTL_RX_COUNTER_PTP_VERSION,     PTP_DROP_VERSION },
	{ CTL_RX_COUNTER_PTP_TYPE,        PTP_DROP_TYPE },
	{ CTL_RX_COUNTER_PTP_TYPE_LENGTH, PTP_DROP_TYPE_LENGTH },
	{ CTL_RX_COUNTER_PTP_LENGTH,      PTP_DROP_LENGTH },
};

int rxstats_counter(uint8_t code, uint64_t *value)
{
	const struct ptp_status *ptp;

#ifdef CSR_RX_AUDIT_BASE
	/* The audit's causes: code i is cause i. Writing `select` takes that cause's count into
	 * `count` (48 bits, whole); the read between gives the gateware the cycles it needs. */
	if (code < CTL_RX_AUDIT_CAUSES) {
		rx_audit_select_write(code);
		(void)rx_audit_select_read();
		*value = rx_audit_count_read();
#ifdef EVENT_RX_CROSSING_DROPPED_LONG
		/* Frames longer than the receive crossing never reach the audit: oversize too. */
		if (code == CTL_RX_COUNTER_OVERSIZE)
			*value += event_count(EVENT_RX_CROSSING_DROPPED_LONG);
#endif
		return 1;
	}
#endif
	switch (code) {
	case CTL_RX_COUNTER_PREAMBLE:
		*value = event_count(EVENT_ETH_PREAMBLE_ERRORS);
		return 1;
#if defined(EVENT_RX_GATE_DROPPED_FULL) || defined(EVENT_RX_CROSSING_DROPPED_FULL)
	case CTL_RX_COUNTER_RX_FULL:
		/* No room: in the frame gate, and (a 64-bit PHY) in the receive crossing before it. */
		*value = 0;
#ifdef EVENT_RX_GATE_DROPPED_FULL
		*value += event_count(EVENT_RX_GATE_DROPPED_FULL);
#endif
#ifdef EVENT_RX_CROSSING_DROPPED_FULL
		*value += event_count(EVENT_RX_CROSSING_DROPPED_FULL);
#endif
		return 1;
#endif
#if defined(EVENT_RX_CROSSING_DROPPED_LONG) && !defined(CSR_RX_AUDIT_BASE)
	case CTL_RX_COUNTER_OVERSIZE:
		*value = event_count(EVENT_RX_CROSSING_DROPPED_LONG);
		return 1;
#endif
	case CTL_RX_COUNTER_CPU_FULL:
		/* The control mailbox (which also takes PTP over UDP), and PTP over Ethernet's. */
		*value = event_count(EVENT_CTLPORT_RX_DROPPED);
#ifdef CSR_PTP_L2_BASE
		*value += ptp_l2_rx_dropped_read();
#endif
		return 1;
	default:
		break;
	}
	ptp = ptpsvc_status();  /* NULL: no PTP in this build. */
	for (unsigned i = 0; ptp != 0 && i < sizeof(ptp_drops) / sizeof(ptp_drops[0]); i++)
		if (ptp_drops[i].code == code) {
			*value = ptp->cnt.drop[ptp_drops[i].reason];
			return 1;
		}
	return 0;
}
