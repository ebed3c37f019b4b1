/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the gateware watchdog (gateware/watchdog.py): started at boot, fed by the main loop;
 * REBOOT resets the board through it. It tells each boot why the last reset happened and keeps
 * one 64-bit word across resets (the shared key's last accepted counter).
 */
#ifndef ETHDAQ_WATCHDOG_H
#define ETHDAQ_WATCHDOG_H

#include <stdint.h>

struct boot_info {
	uint16_t boots;            /* Resets since power-on. */
	uint8_t  cause;            /* 0 power-on, 1 watchdog, 2 reboot. */
	uint16_t watchdog_resets;  /* Of the boots, by the watchdog. */
};

void     watchdog_boot_info(struct boot_info *b);
/* Start counting (the gateware's timeout, set at build time). Returns the timeout in cycles. */
uint32_t watchdog_start(void);
void     watchdog_feed(void);
/* Wait until the control port has sent its last datagram, then reset the board. */
void     watchdog_reboot(void) __attribute__((noreturn));
uint64_t watchdog_retained(void);
void     watchdog_retain(uint64_t v);
const char *watchdog_cause_name(uint8_t cause);

#endif
