/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include "ptp_fsm.h"

const char *ptp_port_state_name(unsigned state)
{
	static const char *const names[] = {
		"?", "INITIALIZING", "FAULTY", "DISABLED", "LISTENING", "PRE_MASTER", "MASTER",
		"PASSIVE", "UNCALIBRATED", "SLAVE",
	};
	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}

enum ptp_port_state ptp_fsm(enum ptp_port_state state, enum ptp_fsm_event event, int slave_only)
{
	/* Where a master would go, a slave-only port listens. */
	enum ptp_port_state master = slave_only ? PTP_PS_LISTENING : PTP_PS_MASTER;

	switch (event) {
	case PTP_EV_POWERUP:
		return PTP_PS_INITIALIZING;
	case PTP_EV_FAULT_DETECTED:
		return state == PTP_PS_DISABLED ? state : PTP_PS_FAULTY;
	default:
		break;
	}

	switch (state) {
	case PTP_PS_INITIALIZING:
		return event == PTP_EV_INIT_COMPLETE ? PTP_PS_LISTENING : state;
	case PTP_PS_FAULTY:
		return event == PTP_EV_FAULT_CLEARED ? PTP_PS_INITIALIZING : state;
	case PTP_PS_DISABLED:
		return state;
	case PTP_PS_LISTENING:
	case PTP_PS_PRE_MASTER:
	case PTP_PS_MASTER:
	case PTP_PS_PASSIVE:
	case PTP_PS_UNCALIBRATED:
	case PTP_PS_SLAVE:
		break;
	}

	switch (event) {
	case PTP_EV_ANNOUNCE_RECEIPT_TIMEOUT:
		/* A master does not run the receipt timer; everyone else lost their master. */
		return state == PTP_PS_MASTER || state == PTP_PS_PRE_MASTER ? state : master;
	case PTP_EV_RS_MASTER:
		return master;
	case PTP_EV_RS_PASSIVE:
		return PTP_PS_PASSIVE;
	case PTP_EV_RS_SLAVE:
		return state == PTP_PS_SLAVE ? PTP_PS_SLAVE : PTP_PS_UNCALIBRATED;
	case PTP_EV_RS_SLAVE_NEW_PARENT:
		return PTP_PS_UNCALIBRATED;
	case PTP_EV_MASTER_CLOCK_SELECTED:
		return state == PTP_PS_UNCALIBRATED ? PTP_PS_SLAVE : state;
	case PTP_EV_SYNCHRONIZATION_FAULT:
		return state == PTP_PS_SLAVE ? PTP_PS_UNCALIBRATED : state;
	default:
		return state;
	}
}
