/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the board's run-time addresses (gateware/netaddr.py): CONFIG_SET ip/mac/netmask/
 * gateway switches LiteEth (MAC filter, ARP, IP and its route) and the DAQ transmit path to them
 * at once, and announces them by ARP (RFC 5227: twice, ANNOUNCE_INTERVAL 2 s apart). It keeps the
 * route the stream's next hop is chosen by (protocol/route.h).
 */
#ifndef ETHDAQ_NETADDR_H
#define ETHDAQ_NETADDR_H

#include <stdint.h>

/* 1 if this build can change its addresses (CTL_CAP_NET_CONFIG). */
int  netaddr_available(void);
/* After the control port's last answer has left from the old addresses: switch and announce. */
void netaddr_apply(uint32_t ip, const uint8_t mac[6], uint32_t netmask, uint32_t gateway, uint64_t now_ns);
/* The address whose MAC a datagram to `dst` goes to, by the route in use (the build's until an
 * apply): `dst` on-link, else the gateway. */
uint32_t netaddr_next_hop(uint32_t dst);
/* The main loop: the second announcement when it is due. */
void netaddr_poll(uint64_t now_ns);

#endif
