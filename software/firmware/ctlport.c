/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>

#include "ctlport.h"

int ctlport_receive(struct ctlport_datagram *d, uint8_t *buf, size_t cap, struct ctlport_stats *st)
{
	size_t i, len;

	if (!ctlport_rx_ready_read())
		return 0;
	len = ctlport_rx_length_read();
	if (ctlport_rx_truncated_read()) {
		st->rx_truncated++;
		ctlport_rx_consume_write(1);
		return 0;
	}
	if (len > cap) {
		st->rx_too_long++;
		ctlport_rx_consume_write(1);
		return 0;
	}
	d->ip     = ctlport_rx_ip_read();
	d->port   = (uint16_t)ctlport_rx_port_read();
	d->length = len;
	for (i = 0; i < len; i++) {
		buf[i] = (uint8_t)ctlport_rx_data_read();
		ctlport_rx_next_write(1);
	}
	ctlport_rx_consume_write(1);
	return 1;
}

int ctlport_send(uint32_t ip, uint16_t port, const uint8_t *buf, size_t len, struct ctlport_stats *st)
{
	size_t i;
	unsigned int spins = 0;

	if (len == 0 || len > CTLPORT_MAX_DATAGRAM) {
		st->tx_too_long++;
		return -1;
	}
	while (ctlport_tx_busy_read()) {
		if (++spins > 1000000) {
			st->tx_timeout++;
			return -1;
		}
	}
	for (i = 0; i < len; i++)
		ctlport_tx_data_write(buf[i]);
	ctlport_tx_ip_write(ip);
	ctlport_tx_port_write(port);
	ctlport_tx_send_write(1);
	return 0;
}
