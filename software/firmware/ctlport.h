/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the gateware CPU UDP ports (gateware/cpuport.py): the control port and, when the
 * SoC has PTP over UDP, the PTP event (319) and general (320) ports. Every port has the same
 * registers; a struct cpuport names one instance's accessors.
 */
#ifndef ETHDAQ_CTLPORT_H
#define ETHDAQ_CTLPORT_H

#include <stddef.h>
#include <stdint.h>

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
	uint32_t (*rx_dropped)(void);
	void     (*tx_data)(uint32_t);
	void     (*tx_ip)(uint32_t);
	void     (*tx_port)(uint32_t);
	void     (*tx_send)(uint32_t);
	uint32_t (*tx_busy)(void);
	uint32_t (*tx_dropped)(void);
	size_t   tx_max;        /* Largest payload the port's transmit buffer holds. */
};

extern const struct cpuport cpuport_ctl;
#ifdef ETHDAQ_PTP_UDP
extern const struct cpuport cpuport_ptp_event;
extern const struct cpuport cpuport_ptp_general;
#endif

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
int cpuport_receive(const struct cpuport *p, struct ctlport_datagram *d, uint8_t *buf, size_t cap,
                    struct ctlport_stats *st);
/* Returns 0 on success, -1 when refused (counted in st). */
int cpuport_send(const struct cpuport *p, uint32_t ip, uint16_t port, const uint8_t *buf, size_t len,
                 struct ctlport_stats *st);

static inline int ctlport_receive(struct ctlport_datagram *d, uint8_t *buf, size_t cap,
                                  struct ctlport_stats *st)
{
	return cpuport_receive(&cpuport_ctl, d, buf, cap, st);
}

static inline int ctlport_send(uint32_t ip, uint16_t port, const uint8_t *buf, size_t len,
                               struct ctlport_stats *st)
{
	return cpuport_send(&cpuport_ctl, ip, port, buf, len, st);
}

#endif
