/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>

#include <generated/soc.h>

#include "dhcpsvc.h"

#ifdef ETHDAQ_DHCP

/* The client's clock: lease seconds are ETHDAQ_DHCP_TIME_SCALE times shorter than the board's
 * (1 on hardware; the simulated board runs about 1000 times slower than real time, and its
 * build may shorten them so leases, which a server grants for minutes, run out in a test). */
#ifndef ETHDAQ_DHCP_TIME_SCALE
#define ETHDAQ_DHCP_TIME_SCALE 1
#endif

static struct dhcp_client client;
static uint8_t out[DHCP_SEND_SIZE];
static struct ctlport_stats *port_stats;

static uint64_t lease_ms(uint64_t now_ns)
{
	return now_ns / 1000u * ETHDAQ_DHCP_TIME_SCALE / 1000u;
}

static void print_ip(uint32_t ip)
{
	printf("%u.%u.%u.%u", (unsigned)(ip >> 24) & 0xff, (unsigned)(ip >> 16) & 0xff,
	       (unsigned)(ip >> 8) & 0xff, (unsigned)ip & 0xff);
}

static void print_counts(void)
{
	const struct dhcp_counters *n = &client.count;

	printf(" [discover %u, request %u, offer %u, ack %u, nak %u, expired %u; dropped: malformed %u, "
	       "not ours %u, unusable %u, unsent %u]\n", (unsigned)n->discovers, (unsigned)n->requests,
	       (unsigned)n->offers, (unsigned)n->acks, (unsigned)n->naks, (unsigned)n->expired,
	       (unsigned)n->malformed, (unsigned)n->ignored, (unsigned)n->refused, (unsigned)n->send_fail);
}

/* Sends what the client asked for; returns 1 and fills `use` for a change of address. */
static int act(const struct dhcp_action *a, struct dhcp_lease *use)
{
	const struct dhcp_lease *l = dhcp_client_address(&client);

	if (a->what & DHCP_ACT_SEND) {
		if (cpuport_send(&cpuport_ctl, DHCP_CLIENT_PORT, a->dst_ip, DHCP_SERVER_PORT, out, a->len,
				 port_stats) != 0)
			client.count.send_fail++;
	}
	if (a->what & DHCP_ACT_RENEWED) {
		printf("dhcp: lease of ");
		print_ip(l->ip);
		printf(" renewed by ");
		print_ip(l->server);
		printf(" for %u s", (unsigned)l->lease_s);
		print_counts();
	}
	if (a->what & DHCP_ACT_BOUND) {
		printf("dhcp: lease of ");
		print_ip(l->ip);
		printf(" from ");
		print_ip(l->server);
		printf(" for %u s (renew at %u s, rebind at %u s)", (unsigned)l->lease_s, (unsigned)l->t1_s,
		       (unsigned)l->t2_s);
		print_counts();
	}
	if (a->what & DHCP_ACT_FALLBACK) {
		printf("dhcp: the lease ended (it expired, or a server refused it): back to the build's ");
		print_ip(l->ip);
		print_counts();
	}
	if (!(a->what & (DHCP_ACT_BOUND | DHCP_ACT_FALLBACK)))
		return 0;
	*use = *l;
	return 1;
}

int dhcpsvc_enabled(void)
{
	return 1;
}

void dhcpsvc_init(const uint8_t mac[6], const struct dhcp_lease *fallback, uint32_t seed, uint64_t now_ns,
                  struct ctlport_stats *st)
{
	port_stats = st;
	dhcp_client_init(&client, mac, fallback, seed, lease_ms(now_ns));
}

int dhcpsvc_poll(uint64_t now_ns, struct dhcp_lease *use)
{
	struct dhcp_action a;

	dhcp_client_poll(&client, lease_ms(now_ns), out, sizeof(out), &a);
	return act(&a, use);
}

int dhcpsvc_input(const uint8_t *buf, size_t len, uint64_t now_ns, struct dhcp_lease *use)
{
	struct dhcp_action a;

	dhcp_client_input(&client, lease_ms(now_ns), buf, len, out, sizeof(out), &a);
	return act(&a, use);
}

void dhcpsvc_stop(void)
{
	if (client.state == DHCP_S_STOPPED)
		return;
	dhcp_client_stop(&client);
	printf("dhcp: stopped (addresses set by CONFIG_SET) until a reboot\n");
}

#else

int dhcpsvc_enabled(void) { return 0; }
void dhcpsvc_init(const uint8_t mac[6], const struct dhcp_lease *fallback, uint32_t seed, uint64_t now_ns,
                  struct ctlport_stats *st)
{
	(void)mac; (void)fallback; (void)seed; (void)now_ns; (void)st;
}
int dhcpsvc_poll(uint64_t now_ns, struct dhcp_lease *use) { (void)now_ns; (void)use; return 0; }
int dhcpsvc_input(const uint8_t *buf, size_t len, uint64_t now_ns, struct dhcp_lease *use)
{
	(void)buf; (void)len; (void)now_ns; (void)use;
	return 0;
}
void dhcpsvc_stop(void) {}

#endif
