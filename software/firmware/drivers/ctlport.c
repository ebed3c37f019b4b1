/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>
#include <generated/soc.h>

#include "console.h"
#include "ctlport.h"

#define CPUPORT(prefix, max) {                                                                   \
	.name = #prefix,                                                                         \
	.rx_ready = prefix##_rx_ready_read,  .rx_ip = prefix##_rx_ip_read,                       \
	.rx_port = prefix##_rx_port_read,    .rx_length = prefix##_rx_length_read,               \
	.rx_truncated = prefix##_rx_truncated_read, .rx_data = prefix##_rx_data_read,            \
	.rx_next = prefix##_rx_next_write,   .rx_consume = prefix##_rx_consume_write,            \
	.rx_local_port = prefix##_rx_local_port_read,                                            \
	.tx_data = prefix##_tx_data_write,   .tx_ip = prefix##_tx_ip_write,                      \
	.tx_port = prefix##_tx_port_write,   .tx_send = prefix##_tx_send_write,                  \
	.tx_local_port = prefix##_tx_local_port_write,                                           \
	.tx_busy = prefix##_tx_busy_read,                                                        \
	.tx_max = (max),                                                                         \
}

const struct cpuport cpuport_ctl = CPUPORT(ctlport, CTLPORT_MAX_DATAGRAM);

int cpuport_receive(const struct cpuport *p, struct ctlport_datagram *d, uint8_t *buf, size_t cap,
                    struct ctlport_stats *st)
{
	size_t i, len;

	if (!p->rx_ready())
		return 0;
	len = p->rx_length();
	if (p->rx_truncated()) {
		st->rx_truncated++;
		p->rx_consume(1);
		return 0;
	}
	if (len > cap) {
		st->rx_too_long++;
		p->rx_consume(1);
		return 0;
	}
	d->ip     = p->rx_ip();
	d->port   = (uint16_t)p->rx_port();
	d->local_port = (uint16_t)p->rx_local_port();
	d->length = len;
	for (i = 0; i < len; i++) {
		buf[i] = (uint8_t)p->rx_data();
		p->rx_next(1);
	}
	p->rx_consume(1);
	return 1;
}

int cpuport_send(const struct cpuport *p, uint16_t src_port, uint32_t ip, uint16_t port,
                 const uint8_t *buf, size_t len, struct ctlport_stats *st)
{
	size_t i;
	unsigned int spins = 0;

	if (len == 0 || len > p->tx_max) {
		st->tx_too_long++;
		return -1;
	}
	while (p->tx_busy()) {
		if (++spins > 1000000) {
			st->tx_timeout++;
			return -1;
		}
	}
	for (i = 0; i < len; i++)
		p->tx_data(buf[i]);
	p->tx_ip(ip);
	p->tx_port(port);
	p->tx_local_port(src_port);
	p->tx_send(1);
	return 0;
}

void ctlport_wait_sent(uint32_t cycles)
{
	/* Each pass takes at least 16 cycles (a CSR read, the console's check). */
	for (uint32_t i = 0; i < cycles / 16u && cpuport_ctl.tx_busy(); i++)
		console_poll();
	for (uint32_t i = 0; i < cycles / 16u; i++)
		console_poll();
}
