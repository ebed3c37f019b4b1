/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * PTP service: the board side of the PTP stack (ptp/): the timestamp unit's clock and records
 * (gateware/ptpclock.py, gateware/tsu.py) and the PTP transports (CPU UDP ports 319/320 or the EtherType 0x88F7 port)
 * as struct ptp_ops, and the main-loop work (ticks, received messages, TX timestamps, console).
 */
#ifndef ETHDAQ_PTPSVC_H
#define ETHDAQ_PTPSVC_H

#include <stddef.h>
#include <stdint.h>

#include "ptp/ptp_port.h"

struct ptpsvc_counters {
	uint32_t rx_ts_missing;     /* event message with no matching RX timestamp record */
	uint32_t rx_ts_discarded;   /* RX records of event messages that matched no message */
	uint32_t rx_truncated;      /* message cut by the gateware port */
	uint32_t rx_too_long;
	uint32_t tx_too_long;
	uint32_t tx_timeout;
	uint32_t hw_rx_overflows;   /* timestamp records lost in the gateware (FIFO full) */
	uint32_t hw_tx_overflows;
	uint32_t clock_rejected;    /* set/add commands the clock refused */
	uint32_t port_rx_dropped;   /* datagrams/frames the CPU port had no room for (UDP: shared with control) */
};

struct ctl_ptp_config;
/* The build's settings (role, transport, domain, intervals, priorities). */
void ptpsvc_default_config(struct ctl_ptp_config *c);
/* Sets up the stack with these settings. */
void ptpsvc_init(const uint8_t mac[6], const struct ctl_ptp_config *c);
/* The board's MAC changed (CONFIG_SET mac): the clock identity is made from it (EUI-64), so the
 * port restarts under the new one. */
void ptpsvc_set_mac(const uint8_t mac[6], const struct ctl_ptp_config *c);
/* CONFIG_SET: restart the port with new settings; 0, or a CTL_ERR_* code (nothing changed). */
int ptpsvc_configure(const struct ctl_ptp_config *c);
/* Main-loop work; cheap when nothing happened. */
void ptpsvc_poll(void);
/* A datagram the control port's mailbox received on local port 319 or 320 (PTP over UDP). */
void ptpsvc_input(uint16_t local_port, const uint8_t *msg, size_t len);
/* The full status line on the console, "ptp: state=... offset=..." (also printed on every change of
 * the port's or the servo's state; every 2^ETHDAQ_PTP_STATUS_LOG seconds a short one, followed by
 * the full one if ETHDAQ_PTP_STATUS_FULL). Queued, never blocking (console.h). */
void ptpsvc_print_status(void);
const struct ptp_status *ptpsvc_status(void);
const struct ptpsvc_counters *ptpsvc_counters(void);
/* Milliseconds of a clock that is never stepped (the PTP clock minus the steps applied). */
uint64_t ptpsvc_uptime_ms(void);
/* The uptime in ns as ptpsvc_poll() last read it: for the main loop's other services, without a
 * second read of the clock and the 64-bit multiply and division (software routines on the
 * VexRiscv) that the ms take. */
uint64_t ptpsvc_uptime_ns(void);
/* The PTP clock's time of day now (0, 0 without PTP). */
void ptpsvc_now(uint64_t *sec, uint32_t *ns);
struct ctl_ptp_status;
/* The port's state and counters for the control protocol's PTP_STATUS; -1 without PTP. */
int ptpsvc_ctl_status(struct ctl_ptp_status *out);

#endif
