/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the latency probes (gateware/probe.py DAQProbes): the board side of the control
 * protocol's PROBE and PROBE_CLEAR. Builds without the probes (--with-probes) get stubs.
 */
#ifndef ETHDAQ_PROBE_H
#define ETHDAQ_PROBE_H

#include "protocol/ctl.h"

/* 1 if this build has the probes (CTL_CAP_PROBES). */
int  probe_present(void);
/* A console line about the probes at boot. */
void probe_init(void);
/* ctl_ops.probe: clear (r unused), or read every class into r. 0 or a CTL_ERR_* code. */
int  probe_op(int clear, struct ctl_probe_report *r);

#endif
