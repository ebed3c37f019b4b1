/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Streamer and detector-emulator control through CSRs (gateware/streamer.py, emulator.py).
 */
#ifndef ETHDAQ_DAQ_H
#define ETHDAQ_DAQ_H

#include "protocol/ctl.h"
#include "ctlport.h"

/* The ops the control protocol handler calls; status also reports the CPU port's counters. */
void daq_ops(struct ctl_ops *ops, const struct ctlport_stats *port);

#endif
