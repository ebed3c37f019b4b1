/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * A user's front-end's registers (gateware/frontend.py, --frontend): the board side of the control
 * protocol's REG_READ and REG_WRITE. Only the front-end's own CSRs are reachable, never the rest
 * of the bus. Builds without a front-end get stubs.
 */
#ifndef ETHDAQ_FRONTEND_H
#define ETHDAQ_FRONTEND_H

#include "protocol/ctl.h"

/* 1 if this build has a front-end (CTL_CAP_FRONTEND). */
int  frontend_present(void);
/* ctl_ops.regs: write `count` words from `words` at `offset` (bytes from the front-end's first
 * register) if `write`, then read them back into `words`. 0, or CTL_ERR_BAD_VALUE for words
 * outside the front-end's registers. */
int  frontend_regs(int write, uint16_t offset, uint8_t count, uint32_t *words);

#endif
