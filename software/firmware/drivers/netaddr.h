/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the board's run-time addresses (gateware/netaddr.py): CONFIG_SET ip/mac switches
 * LiteEth (MAC filter, ARP, IP) and the DAQ transmit path to them at once, and announces them by
 * ARP (RFC 5227: twice, ANNOUNCE_INTERVAL 2 s apart).
 */
#ifndef ETHDAQ_NETADDR_H
#define ETHDAQ_NETADDR_H

#include <stdint.h>

/* 1 if this build can change its addresses (CTL_CAP_NET_CONFIG). */
int  netaddr_available(void);
/* After the control port's last answer has left from the old addresses: switch and announce. */
void netaddr_apply(uint32_t ip, const uint8_t mac[6], uint64_t now_ns);
/* The main loop: the second announcement when it is due. */
void netaddr_poll(uint64_t now_ns);

#endif
