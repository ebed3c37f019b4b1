/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the gateware CPU UDP port (gateware/cpuport.py).
 */
#ifndef ETHDAQ_CTLPORT_H
#define ETHDAQ_CTLPORT_H

#include <stddef.h>
#include <stdint.h>

#define CTLPORT_MAX_DATAGRAM 1472

struct ctlport_datagram {
	uint32_t ip;
	uint16_t port;
	size_t   length;   /* Bytes copied into the caller's buffer. */
};

struct ctlport_stats {
	uint32_t rx_truncated;  /* Datagram lost bytes in the gateware (declared > arrived). */
	uint32_t rx_too_long;   /* Datagram longer than the caller's buffer: dropped. */
	uint32_t tx_too_long;   /* Send of more than the port can hold: refused. */
	uint32_t tx_timeout;    /* Port stayed busy: send refused. */
};

/* Returns 1 and fills d/buf when a complete datagram was received, 0 otherwise. */
int ctlport_receive(struct ctlport_datagram *d, uint8_t *buf, size_t cap, struct ctlport_stats *st);
/* Returns 0 on success, -1 when refused (counted in st). */
int ctlport_send(uint32_t ip, uint16_t port, const uint8_t *buf, size_t len, struct ctlport_stats *st);

#endif
