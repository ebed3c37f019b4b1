/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * The board's one route: its subnet (address and netmask) is on-link, everything else goes to
 * the default gateway. Pure functions over host-order IPv4 addresses (uint32_t, 192.168.1.50 is
 * 0xC0A80132), header-only so the control protocol's host builds and fuzzer need nothing more;
 * gateware/netaddr.py's next_hop() makes the same decision for LiteEth's IP layer.
 *
 * A gateway of 0.0.0.0 is "none": every destination is on-link (ARP asks for it directly), which
 * is what a board without a gateway has always done.
 */
#ifndef ETHDAQ_ROUTE_H
#define ETHDAQ_ROUTE_H

#include <stdint.h>

#define ROUTE_NO_GATEWAY 0u

/* A netmask is ones, then zeros (0.0.0.0 and 255.255.255.255 included). */
static inline int route_netmask_valid(uint32_t netmask)
{
	uint32_t host_bits = ~netmask;

	return (host_bits & (host_bits + 1u)) == 0;
}

/* The number of ones of a valid netmask (its prefix length). */
static inline unsigned route_prefix_length(uint32_t netmask)
{
	unsigned n = 0;

	for (; netmask & 0x80000000u; netmask <<= 1)
		n++;
	return n;
}

/* Destinations whose MAC comes by rule, never by ARP: the limited broadcast and IPv4 multicast
 * (224.0.0.0/4, RFC 1112). They are on-link whatever the subnet. */
static inline int route_by_rule(uint32_t dst)
{
	return dst == 0xFFFFFFFFu || (dst >> 28) == 0xEu;
}

/* 1 if `dst` is reached directly (asked for by ARP itself), 0 if through the gateway. */
static inline int route_on_link(uint32_t ip, uint32_t netmask, uint32_t gateway, uint32_t dst)
{
	return gateway == ROUTE_NO_GATEWAY || route_by_rule(dst) || ((dst ^ ip) & netmask) == 0;
}

/* The address whose MAC a datagram to `dst` is sent to: `dst` on-link, else the gateway. */
static inline uint32_t route_next_hop(uint32_t ip, uint32_t netmask, uint32_t gateway, uint32_t dst)
{
	return route_on_link(ip, netmask, gateway, dst) ? dst : gateway;
}

/* A gateway the board at ip/netmask can use: none (0.0.0.0), or a host of its own subnet other
 * than itself (not the subnet's network or broadcast address, where the subnet has them: a /31
 * and a /32 do not, RFC 3021). */
static inline int route_gateway_valid(uint32_t ip, uint32_t netmask, uint32_t gateway)
{
	uint32_t host = gateway & ~netmask;

	if (gateway == ROUTE_NO_GATEWAY)
		return 1;
	if (!route_netmask_valid(netmask) || ((gateway ^ ip) & netmask) != 0 || gateway == ip)
		return 0;
	if (route_prefix_length(netmask) >= 31)
		return 1;
	return host != 0 && host != ~netmask;
}

#endif
