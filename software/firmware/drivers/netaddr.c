/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <generated/csr.h>
#include <generated/soc.h>

#include "ctlport.h"
#include "netaddr.h"
#include "protocol/route.h"

/* The route in use: the build's until an apply. */
static uint32_t route_ip = ETHDAQ_IP, route_netmask = ETHDAQ_NETMASK, route_gateway = ETHDAQ_GATEWAY;

uint32_t netaddr_next_hop(uint32_t dst)
{
	return route_next_hop(route_ip, route_netmask, route_gateway, dst);
}

#ifdef CSR_NETADDR_BASE

#define ANNOUNCE_INTERVAL_NS 2000000000ull  /* RFC 5227 ANNOUNCE_INTERVAL */

static uint32_t cur_ip;
static uint64_t cur_mac;
static uint64_t reannounce_ns;  /* 0: none due. */

/* The answer to CONFIG_SET has to leave from the old addresses: the mailbox empties into LiteEth's
 * UDP/IP/MAC pipeline, whose IP layer writes our address into the header as the datagram passes
 * and may first wait for ARP to resolve the requester (a LAN answers in well under 1 ms). 1 ms
 * covers both; a change of address is rare, and the watchdog allows a second. */
#define SEND_WAIT_CYCLES (CONFIG_CLOCK_FREQUENCY / 1000u)

static void switch_to(uint32_t ip, uint64_t mac)
{
	netaddr_ip_write(ip);
	netaddr_mac_write(mac);
	netaddr_apply_write(1);
}

int netaddr_available(void)
{
	return 1;
}

void netaddr_apply(uint32_t ip, const uint8_t mac[6], uint32_t netmask, uint32_t gateway, uint64_t now_ns)
{
	unsigned i;

	ctlport_wait_sent(SEND_WAIT_CYCLES);
	route_ip = ip;
	route_netmask = netmask;
	route_gateway = gateway;
	netaddr_netmask_write(netmask);
	netaddr_gateway_write(gateway);
	cur_ip = ip;
	cur_mac = 0;
	for (i = 0; i < 6; i++)
		cur_mac = cur_mac << 8 | mac[i];
	switch_to(cur_ip, cur_mac);
	reannounce_ns = now_ns + ANNOUNCE_INTERVAL_NS;
}

void netaddr_poll(uint64_t now_ns)
{
	/* A second announcement, for neighbours that missed the first (RFC 5227 ANNOUNCE_NUM 2). */
	if (reannounce_ns != 0 && now_ns >= reannounce_ns) {
		reannounce_ns = 0;
		if (!netaddr_pending_read())
			switch_to(cur_ip, cur_mac);
	}
}

#else

int netaddr_available(void) { return 0; }
void netaddr_apply(uint32_t ip, const uint8_t mac[6], uint32_t netmask, uint32_t gateway, uint64_t now_ns)
{
	(void)ip; (void)mac; (void)netmask; (void)gateway; (void)now_ns;
}
void netaddr_poll(uint64_t now_ns) { (void)now_ns; }

#endif
