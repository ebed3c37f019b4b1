/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>
#include <generated/soc.h>
#include <generated/ctl_protocol.h>

#include "console.h"
#include "ctlport.h"
#include "watchdog.h"

const char *watchdog_cause_name(uint8_t cause)
{
	switch (cause) {
	case CTL_RESET_POWER_ON: return "power-on";
	case CTL_RESET_WATCHDOG: return "watchdog";
	case CTL_RESET_REBOOT:   return "reboot";
	default: return "unknown";
	}
}

#ifdef CSR_WATCHDOG_BASE

#define FEED   (1u << CSR_WATCHDOG_CONTROL_FEED_OFFSET)
#define ENABLE (1u << CSR_WATCHDOG_CONTROL_ENABLE_OFFSET)

void watchdog_boot_info(struct boot_info *b)
{
	b->boots = (uint16_t)watchdog_boots_read();
	b->cause = (uint8_t)watchdog_cause_read();
	b->watchdog_resets = (uint16_t)watchdog_watchdog_resets_read();
}

void watchdog_feed(void)
{
	watchdog_control_write(ENABLE | FEED);
}

uint32_t watchdog_start(void)
{
	watchdog_feed();  /* Enabling loads the timeout. */
	return watchdog_timeout_read();
}

/* The answer to REBOOT has to leave first: the port's buffer empties into LiteEth's UDP/IP/MAC
 * pipeline, which holds at most a frame; 20 us send a 1500-byte frame at 1 Gb/s (12 us) and
 * more. At 100 Mb/s a full-size answer would need 120 us, but REBOOT's answer is 11 bytes. */
#define SEND_WAIT_CYCLES (CONFIG_CLOCK_FREQUENCY / 50000u)

void watchdog_reboot(void)
{
	ctlport_wait_sent(SEND_WAIT_CYCLES);  /* And the console, what it can of it. */
	/* Written again and again rather than once before `for (;;) ;`: with the CPU spinning on a
	 * jump to itself right after the store, the reset did not come (seen in simulation: the
	 * watchdog reset the board 10 ms later instead). Should the write never take effect, the
	 * watchdog, not fed from here on, resets the board anyway. */
	for (;;)
		watchdog_reboot_write(1);
}

uint64_t watchdog_retained(void)
{
	return watchdog_retain_read();
}

void watchdog_retain(uint64_t v)
{
	watchdog_retain_write(v);
}

#else

void watchdog_boot_info(struct boot_info *b) { b->boots = 0; b->cause = 0; b->watchdog_resets = 0; }
uint32_t watchdog_start(void) { return 0; }
void watchdog_feed(void) {}
void watchdog_reboot(void) { for (;;) ; }
uint64_t watchdog_retained(void) { return 0; }
void watchdog_retain(uint64_t v) { (void)v; }

#endif
