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

#include "protocol/ctl.h"

/* 1 if this build has the launcher (CTL_CAP_LAUNCHER). */
int  launcher_present(void);
/* A console line about the launcher at boot. */
void launcher_init(void);
/* ctl_ops.launch: do l->op, then fill s. 0 or a CTL_ERR_* code (CTL_ERR_BAD_VALUE: the first launch
 * is too soon to be armed in time). */
int  launcher_op(const struct ctl_launch *l, struct ctl_launch_status *s);

#endif
