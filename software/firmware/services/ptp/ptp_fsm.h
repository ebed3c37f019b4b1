/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Port state machine of IEEE 1588-2008 clause 9.2.5 (Figure 23) for an ordinary clock, as a pure
 * function like linuxptp's fsm.c. PRE_MASTER is never entered: an ordinary clock's master
 * decisions are M1/M2 (grandmaster), which go straight to MASTER.
 */
#ifndef ETHDAQ_PTP_FSM_H
#define ETHDAQ_PTP_FSM_H

/* Values of portState (Table 8), as Management messages would report them. */
enum ptp_port_state {
	PTP_PS_INITIALIZING = 1,
	PTP_PS_FAULTY       = 2,
	PTP_PS_DISABLED     = 3,
	PTP_PS_LISTENING    = 4,
	PTP_PS_PRE_MASTER   = 5,
	PTP_PS_MASTER       = 6,
	PTP_PS_PASSIVE      = 7,
	PTP_PS_UNCALIBRATED = 8,
	PTP_PS_SLAVE        = 9,
};

enum ptp_fsm_event {
	PTP_EV_NONE,
	PTP_EV_POWERUP,                   /* (re)initialise */
	PTP_EV_INIT_COMPLETE,
	PTP_EV_FAULT_DETECTED,
	PTP_EV_FAULT_CLEARED,
	PTP_EV_ANNOUNCE_RECEIPT_TIMEOUT,
	PTP_EV_RS_MASTER,                 /* state decision M1/M2 */
	PTP_EV_RS_PASSIVE,                /* P1 */
	PTP_EV_RS_SLAVE,                  /* S1, same parent as before */
	PTP_EV_RS_SLAVE_NEW_PARENT,       /* S1, another parent */
	PTP_EV_MASTER_CLOCK_SELECTED,     /* the servo locked */
	PTP_EV_SYNCHRONIZATION_FAULT,     /* the servo unlocked or stepped */
	PTP_EV_COUNT
};

/* Next state; slave_only selects the slave-only variant (never MASTER: LISTENING instead). */
enum ptp_port_state ptp_fsm(enum ptp_port_state state, enum ptp_fsm_event event, int slave_only);

const char *ptp_port_state_name(unsigned state);

#endif
