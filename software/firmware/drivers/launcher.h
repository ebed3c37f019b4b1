/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the time-triggered launcher (gateware/launcher.py): the frame into its buffer, the
 * launch time turned into the fire time the gateware compares, period and count. It is the board
 * side of the control protocol's LAUNCH. Builds without the launcher (--with-launcher) get stubs
 * that answer "unsupported".
 */
#ifndef ETHDAQ_LAUNCHER_H
#define ETHDAQ_LAUNCHER_H

#include <stdint.h>

#include "protocol/ctl.h"

/* 1 if this build has the launcher (CTL_CAP_LAUNCHER). */
int  launcher_present(void);
/* A console line about the launcher at boot. */
void launcher_init(void);
/* Do l->op, then fill s. 0 or a CTL_ERR_* code (CTL_ERR_BAD_VALUE: the first launch is too soon to
 * be armed in time). now_sec/now_ns: the PTP clock's time now, which a relative launch counts from
 * (the caller reads it from the PTP service: a driver calls no service). */
int  launcher_op(const struct ctl_launch *l, struct ctl_launch_status *s, uint64_t now_sec, uint32_t now_ns);

#endif
