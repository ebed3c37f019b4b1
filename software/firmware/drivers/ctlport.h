/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the gateware CPU UDP port (gateware/cpuport.py): one mailbox for the control port
 * and, when the SoC has PTP over UDP, PTP's event (319) and general (320) ports. A struct cpuport
 * names one instance's accessors.
 */
#ifndef ETHDAQ_CTLPORT_H
#define ETHDAQ_CTLPORT_H

#include <stddef.h>
#include <stdint.h>

#include <generated/soc.h>

#define CTLPORT_MAX_DATAGRAM 1472

struct cpuport {
	const char *name;
	uint32_t (*rx_ready)(void);
	uint32_t (*rx_ip)(void);
	uint32_t (*rx_port)(void);
	uint32_t (*rx_length)(void);
	uint32_t (*rx_truncated)(void);
	uint32_t (*rx_data)(void);
	void     (*rx_next)(uint32_t);
	void     (*rx_consume)(uint32_t);
	uint32_t (*rx_local_port)(void);
	void     (*tx_data)(uint32_t);
	void     (*tx_ip)(uint32_t);
	void     (*tx_port)(uint32_t);
	void     (*tx_local_port)(uint32_t);
	void     (*tx_send)(uint32_t);
	uint32_t (*tx_busy)(void);
	size_t   tx_max;        /* Largest payload the port's transmit buffer holds. */
};

extern const struct cpuport cpuport_ctl;

struct ctlport_datagram {
	uint32_t ip;
	uint16_t port;
	uint16_t local_port;  /* The mailbox's port it was sent to (control, or PTP 319/320). */
	size_t   length;   /* Bytes copied into the caller's buffer. */
};

struct ctlport_stats {
	uint32_t rx_truncated;  /* Datagram lost bytes in the gateware (declared > arrived). */
	uint32_t rx_too_long;   /* Datagram longer than the caller's buffer: dropped. */
	uint32_t tx_too_long;   /* Send of more than the port can hold: refused. */
	uint32_t tx_timeout;    /* Port stayed busy: send refused. */
};

/* Returns 1 and fills d/buf when a complete datagram was received, 0 otherwise. */
int cpuport_receive(const struct cpuport *p, struct ctlport_datagram *d, uint8_t *buf, size_t cap,
                    struct ctlport_stats *st);
/* Send from local port src_port (one of the mailbox's). Returns 0 on success, -1 when refused
 * (counted in st). */
int cpuport_send(const struct cpuport *p, uint16_t src_port, uint32_t ip, uint16_t port,
                 const uint8_t *buf, size_t len, struct ctlport_stats *st);

/* Before the board resets or changes its addresses: wait up to `cycles` for the control port's
 * last datagram to leave the mailbox, then `cycles` more for LiteEth's UDP/IP/MAC pipeline
 * behind it, feeding the console meanwhile. */
void ctlport_wait_sent(uint32_t cycles);

static inline int ctlport_receive(struct ctlport_datagram *d, uint8_t *buf, size_t cap,
                                  struct ctlport_stats *st)
{
	return cpuport_receive(&cpuport_ctl, d, buf, cap, st);
}

static inline int ctlport_send(uint32_t ip, uint16_t port, const uint8_t *buf, size_t len,
                               struct ctlport_stats *st)
{
	return cpuport_send(&cpuport_ctl, ETHDAQ_CTL_PORT, ip, port, buf, len, st);
}

#endif
