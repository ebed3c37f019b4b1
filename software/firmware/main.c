/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * ethdaq firmware: boots from ROM (no BIOS), prints a banner and serves the control port.
 */
#include <stdio.h>
#include <string.h>

#include <irq.h>
#include <system.h>
#include <libbase/uart.h>

#include <generated/csr.h>
#include <generated/soc.h>
#include <generated/ctl_key.h>

#include "protocol/ctl.h"
#include "protocol/route.h"
#include "drivers/ctlport.h"
#include "drivers/daq.h"
#include "drivers/console.h"
#include "services/ptpsvc.h"
#include "drivers/watchdog.h"
#include "services/phy.h"
#include "drivers/netaddr.h"
#include "drivers/classifier.h"
#include "drivers/launcher.h"
#include "drivers/probe.h"
#include "drivers/frontend.h"
#include "services/rxstats.h"
#include "services/dhcpsvc.h"

#define IDENT_SIZE 256

static char ident[IDENT_SIZE];
static uint8_t rx_buf[CTLPORT_MAX_DATAGRAM];
static uint8_t tx_buf[CTLPORT_MAX_DATAGRAM];
/* RX_STATS' answer with every counter (the longest answer) fits the send buffer, the mailbox's. */
_Static_assert(CTL_HEADER_SIZE + CTL_RX_STATS_RSP_MAX <= sizeof(tx_buf), "RX_STATS does not fit the send buffer");
/* Counters, reply cache (retransmitted requests are answered, not executed, twice) and who may
 * change the board's state. */
static struct ctl_state ctl;

/* Build option --ctl-allow: the networks whose addresses may control the board (none: any). */
static const struct ctl_net ctl_allow[] = {
#define ALLOW(i) { ETHDAQ_CTL_ALLOW_##i##_NET, ETHDAQ_CTL_ALLOW_##i##_MASK },
#ifdef ETHDAQ_CTL_ALLOW_0_NET
	ALLOW(0)
#endif
#ifdef ETHDAQ_CTL_ALLOW_1_NET
	ALLOW(1)
#endif
#ifdef ETHDAQ_CTL_ALLOW_2_NET
	ALLOW(2)
#endif
#ifdef ETHDAQ_CTL_ALLOW_3_NET
	ALLOW(3)
#endif
#ifdef ETHDAQ_CTL_ALLOW_4_NET
	ALLOW(4)
#endif
#ifdef ETHDAQ_CTL_ALLOW_5_NET
	ALLOW(5)
#endif
#ifdef ETHDAQ_CTL_ALLOW_6_NET
	ALLOW(6)
#endif
#ifdef ETHDAQ_CTL_ALLOW_7_NET
	ALLOW(7)
#endif
	{ 0, 0 }  /* Not counted: keeps the array non-empty. */
#undef ALLOW
};
#define NALLOW (sizeof(ctl_allow) / sizeof(ctl_allow[0]) - 1)

/* Each channel's worst-case samples per second its front-end declares (0: undeclared; IDENTIFY). */
static const uint32_t max_rates[8] = {
#ifdef ETHDAQ_MAX_RATE_0
	ETHDAQ_MAX_RATE_0,
#else
	0,
#endif
#ifdef ETHDAQ_MAX_RATE_1
	ETHDAQ_MAX_RATE_1,
#else
	0,
#endif
#ifdef ETHDAQ_MAX_RATE_2
	ETHDAQ_MAX_RATE_2,
#else
	0,
#endif
#ifdef ETHDAQ_MAX_RATE_3
	ETHDAQ_MAX_RATE_3,
#else
	0,
#endif
#ifdef ETHDAQ_MAX_RATE_4
	ETHDAQ_MAX_RATE_4,
#else
	0,
#endif
#ifdef ETHDAQ_MAX_RATE_5
	ETHDAQ_MAX_RATE_5,
#else
	0,
#endif
#ifdef ETHDAQ_MAX_RATE_6
	ETHDAQ_MAX_RATE_6,
#else
	0,
#endif
#ifdef ETHDAQ_MAX_RATE_7
	ETHDAQ_MAX_RATE_7,
#else
	0,
#endif
};
_Static_assert(ETHDAQ_NCHANNELS <= sizeof(max_rates) / sizeof(max_rates[0]), "a rate per channel");

#ifdef ETHDAQ_EVENT_CHANNELS
/* Each channel's event layout its front-end declares: 0 samples, else the bits of its events' id
 * (IDENTIFY; only a build with an event channel sends them). */
static const uint8_t event_id_bits[8] = {
#ifdef ETHDAQ_EVENT_ID_BITS_0
	ETHDAQ_EVENT_ID_BITS_0,
#else
	0,
#endif
#ifdef ETHDAQ_EVENT_ID_BITS_1
	ETHDAQ_EVENT_ID_BITS_1,
#else
	0,
#endif
#ifdef ETHDAQ_EVENT_ID_BITS_2
	ETHDAQ_EVENT_ID_BITS_2,
#else
	0,
#endif
#ifdef ETHDAQ_EVENT_ID_BITS_3
	ETHDAQ_EVENT_ID_BITS_3,
#else
	0,
#endif
#ifdef ETHDAQ_EVENT_ID_BITS_4
	ETHDAQ_EVENT_ID_BITS_4,
#else
	0,
#endif
#ifdef ETHDAQ_EVENT_ID_BITS_5
	ETHDAQ_EVENT_ID_BITS_5,
#else
	0,
#endif
#ifdef ETHDAQ_EVENT_ID_BITS_6
	ETHDAQ_EVENT_ID_BITS_6,
#else
	0,
#endif
#ifdef ETHDAQ_EVENT_ID_BITS_7
	ETHDAQ_EVENT_ID_BITS_7,
#else
	0,
#endif
};
_Static_assert(ETHDAQ_NCHANNELS <= sizeof(event_id_bits), "an event layout per channel");
#define EVENT_ID_BITS event_id_bits
#else
#define EVENT_ID_BITS 0
#endif
static struct ctlport_stats port_stats;

static void read_ident(void)
{
	int i;
	for (i = 0; i < IDENT_SIZE - 1; i++) {
#ifdef CSR_IDENTIFIER_MEM_BASE
		ident[i] = (char)MMPTR(CSR_IDENTIFIER_MEM_BASE + CONFIG_CSR_ALIGNMENT / 8 * i);
#else
		ident[i] = 0;
#endif
		if (ident[i] == 0)
			break;
	}
	ident[i] = 0;
}

static void print_ip(uint32_t ip)
{
	printf("%u.%u.%u.%u", (unsigned)(ip >> 24) & 0xff, (unsigned)(ip >> 16) & 0xff,
	       (unsigned)(ip >> 8) & 0xff, (unsigned)ip & 0xff);
}

/* "192.168.1.50/24 via 192.168.1.254" (or "..., no gateway"). */
static void print_route(uint32_t ip, uint32_t netmask, uint32_t gateway)
{
	print_ip(ip);
	printf("/%u", route_prefix_length(netmask));
	if (gateway == ROUTE_NO_GATEWAY) {
		printf(", no gateway");
		return;
	}
	printf(" via ");
	print_ip(gateway);
}

/* CONFIG_SET changed ip, mac, netmask or gateway (ctl.net_pending) and its answer is on its way: switch the board to
 * them, announce them, and restart PTP under the identity made from a new MAC. IDENTIFY tells
 * the new ones from now on; a reboot returns to the build's. */
static void apply_addresses(struct ctl_identity *id, struct ctl_state *c, uint32_t by)
{
	int new_mac = memcmp(id->mac, c->config.mac, sizeof(id->mac)) != 0;

	c->net_pending = 0;
	netaddr_apply(c->config.ip, c->config.mac, c->config.netmask, c->config.gateway, ptpsvc_uptime_ns());
	id->ip = c->config.ip;
	memcpy(id->mac, c->config.mac, sizeof(id->mac));
	printf("net: now ");
	print_ip(id->ip);
	printf(" at %02x:%02x:%02x:%02x:%02x:%02x (set by ", id->mac[0], id->mac[1], id->mac[2], id->mac[3],
	       id->mac[4], id->mac[5]);
	print_ip(by);
	printf("), announced by ARP\n");
	printf("net: route ");
	print_route(id->ip, c->config.netmask, c->config.gateway);
	printf("\n");
	if (new_mac)
		ptpsvc_set_mac(id->mac, &c->config.ptp);
}

/* The DHCP client decided on an address (a lease's, or the build's when a lease ended): switch the
 * board to it as CONFIG_SET would, so IDENTIFY and CONFIG_GET report it. */
static void use_lease(struct ctl_identity *id, struct ctl_state *c, const struct dhcp_lease *l)
{
	c->config.ip = l->ip;
	c->config.netmask = l->netmask;
	c->config.gateway = l->gateway;
	netaddr_apply(l->ip, id->mac, l->netmask, l->gateway, ptpsvc_uptime_ns());
	id->ip = l->ip;
	printf("net: now ");
	print_ip(id->ip);
	printf(" (dhcp), announced by ARP\n");
	printf("net: route ");
	print_route(id->ip, l->netmask, l->gateway);
	printf("\n");
}

/* The build's settings: what CONFIG_GET reports until CONFIG_SET (or EMULATOR, its emulator part)
 * changes them, and again after a reboot. */
/* ctl_ops.launch: the launcher driver, with the PTP clock's time now for a relative launch. */
static int launch(const struct ctl_launch *l, struct ctl_launch_status *s)
{
	uint64_t sec;
	uint32_t ns;

	ptpsvc_now(&sec, &ns);
	return launcher_op(l, s, sec, ns);
}

static void build_config(struct ctl_config *c, const struct ctl_identity *id)
{
	memset(c, 0, sizeof(*c));
	c->ip = id->ip;
	memcpy(c->mac, id->mac, sizeof(c->mac));
	c->netmask = ETHDAQ_NETMASK;
	c->gateway = ETHDAQ_GATEWAY;
	c->stream.dst_port = 5000;
	c->stream.payload  = id->max_payload < 1472 ? id->max_payload : 1472;
	c->stream.enable   = (uint8_t)((1u << id->nchannels) - 1u);
	c->stream.flush    = CTL_FLUSH_DEFAULT_NS;
	c->emulator.mode   = 0;           /* off, at the host tools' default rate */
	c->emulator.rate   = CTL_EMULATOR_RATE_DEFAULT;
	c->emulator.seed   = 1;
	ptpsvc_default_config(&c->ptp);
}

int main(void)
{
	struct ctl_identity id;
	struct ctl_ops ops;
	struct boot_info boot;
	uint32_t watchdog_cycles;
	int i;

#ifdef CONFIG_CPU_HAS_INTERRUPT
	irq_setmask(0);
	irq_setie(1);
#endif
	uart_init();
	/* First: a firmware that hangs from here on is reset. */
	watchdog_cycles = watchdog_start();
	watchdog_boot_info(&boot);
	read_ident();

	for (i = 0; i < 2; i++)
		id.mac[i] = (uint8_t)(ETHDAQ_MAC_HI >> (8 * (1 - i)));
	for (i = 0; i < 4; i++)
		id.mac[2 + i] = (uint8_t)(ETHDAQ_MAC_LO >> (8 * (3 - i)));
	id.ip         = ETHDAQ_IP;
	id.ctl_port   = ETHDAQ_CTL_PORT;
	id.sys_clk_hz = CONFIG_CLOCK_FREQUENCY;
	id.eth_dw     = ETHDAQ_ETH_DW;
	id.nchannels  = ETHDAQ_NCHANNELS;
	id.sample_bits = ETHDAQ_SAMPLE_BITS;
	id.max_payload = ETHDAQ_MAX_PAYLOAD;
	id.max_rates  = max_rates;
	id.event_id_bits = EVENT_ID_BITS;
	daq_ops(&ops, &port_stats);
	ops.ptp_status = ptpsvc_ctl_status;
	ops.link       = phy_link;
	ops.launch     = launcher_present() ? launch : 0;
	ops.probe      = probe_present() ? probe_op : 0;
	ops.rules      = classifier_present() ? classifier_rules_op : 0;
	ops.regs       = frontend_present() ? frontend_regs : 0;
	ops.rx_counter = rxstats_counter;
#ifdef CSR_PTP_BASE
	ops.ptp_config = ptpsvc_configure;
#else
	ops.ptp_config = 0;
#endif
	id.board      = ETHDAQ_BOARD;
	id.build_id   = ETHDAQ_BUILD_ID;
	id.ident      = ident;
	id.boots      = boot.boots;
	id.reset_cause = boot.cause;
	id.watchdog_resets = boot.watchdog_resets;

	printf("\n");
	printf("ethdaq firmware\n");
	printf("  board    : %s\n", ETHDAQ_BOARD);
	printf("  build    : %s\n", ETHDAQ_BUILD_ID);
	printf("  ident    : %s\n", ident);
	printf("  mac      : %02x:%02x:%02x:%02x:%02x:%02x\n",
	       id.mac[0], id.mac[1], id.mac[2], id.mac[3], id.mac[4], id.mac[5]);
	printf("  ip       : ");
	print_ip(id.ip);
	/* The subnet: the directed broadcast the board answers IDENTIFY on (build option --netmask). */
	printf("/%u\n", route_prefix_length(ETHDAQ_NETMASK));
	/* Where datagrams to addresses outside the subnet go (build option --gateway). */
	printf("  gateway  : ");
	if (ETHDAQ_GATEWAY == ROUTE_NO_GATEWAY)
		printf("none (every destination on-link)\n");
	else {
		print_ip(ETHDAQ_GATEWAY);
		printf("\n");
	}
	if (dhcpsvc_enabled())
		printf("  dhcp     : on (the address above until a server leases one, and after a lease ends)\n");
	printf("  control  : udp/%u\n", (unsigned)id.ctl_port);
	printf("  sys clock: %u Hz\n", (unsigned)CONFIG_CLOCK_FREQUENCY);
	printf("  reset    : %s (boot %u since power-on, %u by the watchdog)\n", watchdog_cause_name(boot.cause),
	       (unsigned)boot.boots, (unsigned)boot.watchdog_resets);
	printf("  watchdog : %u cycles\n", (unsigned)watchdog_cycles);
	printf("  streamer : %u channels x %u-bit samples, datagrams up to %u bytes, udp/%u\n",
	       (unsigned)id.nchannels, (unsigned)id.sample_bits, (unsigned)id.max_payload,
	       (unsigned)ETHDAQ_DATA_PORT);
	if (ETHDAQ_CTL_KEY_LEN > 0)
		printf("  control: changes need requests signed with the shared key\n");
	if (NALLOW > 0)
		printf("  control: only %u allowed network(s) may take control\n", (unsigned)NALLOW);
#ifdef ETHDAQ_ETHERBONE_PORT
	printf("  WARNING: Etherbone on udp/%u: anyone who can reach this board can read and write its\n"
	       "  WARNING: whole bus, past the controller, allow-list and key. Debug build only.\n",
	       (unsigned)ETHDAQ_ETHERBONE_PORT);
#endif
	classifier_init();
	launcher_init();
	probe_init();
	build_config(&ctl.config, &id);
	if (ops.emulator)   /* The emulators hold what CONFIG_GET reports from the start. */
		ops.emulator(&ctl.config.emulator);
	ptpsvc_init(id.mac, &ctl.config.ptp);
	phy_init();
	printf("ethdaq ready\n");

	id.capabilities = (id.nchannels ? CTL_CAP_STREAMER : 0) | (ETHDAQ_CTL_KEY_LEN ? CTL_CAP_AUTH : 0) |
			  (NALLOW > 0 ? CTL_CAP_ALLOW : 0);
#ifdef CSR_PTP_BASE
	id.capabilities |= CTL_CAP_PTP;
#endif
#ifdef ETHDAQ_ETHERBONE_PORT
	id.capabilities |= CTL_CAP_ETHERBONE;
#endif
	if (netaddr_available())
		id.capabilities |= CTL_CAP_NET_CONFIG;
	if (launcher_present())
		id.capabilities |= CTL_CAP_LAUNCHER;
	if (probe_present())
		id.capabilities |= CTL_CAP_PROBES;
	if (classifier_present())
		id.capabilities |= CTL_CAP_RULES;
	if (frontend_present())
		id.capabilities |= CTL_CAP_FRONTEND;
	if (dhcpsvc_enabled()) {
		struct dhcp_lease fallback = { ETHDAQ_IP, ETHDAQ_NETMASK, ETHDAQ_GATEWAY, 0, 0, 0, 0 };

		id.capabilities |= CTL_CAP_DHCP;
		dhcpsvc_init(id.mac, &fallback, boot.boots ^ (uint32_t)ptpsvc_uptime_ns(), ptpsvc_uptime_ns(), &port_stats);
	}
	ctl.key = ethdaq_ctl_key;
	ctl.key_len = ETHDAQ_CTL_KEY_LEN;
	/* The last signed request's counter survives a reboot: one recorded before it stays old. */
	ctl.auth_counter = watchdog_retained();
	ctl.access.allow = ctl_allow;
	ctl.access.nallow = NALLOW;
	for (;;) {
		struct ctlport_datagram d;
		struct ctl_request rq;
		struct dhcp_lease lease;
		uint64_t auth_counter;
		int n;

		watchdog_feed();
		console_poll();
		ptpsvc_poll();
		phy_poll(ptpsvc_uptime_ns());
		netaddr_poll(ptpsvc_uptime_ns());
		if (dhcpsvc_poll(ptpsvc_uptime_ns(), &lease))
			use_lease(&id, &ctl, &lease);
		if (!ctlport_receive(&d, rx_buf, sizeof(rx_buf), &port_stats))
			continue;
		if (d.local_port == DHCP_CLIENT_PORT) {
			/* Only a --dhcp build's mailbox takes port 68. */
			if (dhcpsvc_input(rx_buf, d.length, ptpsvc_uptime_ns(), &lease))
				use_lease(&id, &ctl, &lease);
			continue;
		}
		if (d.local_port != ETHDAQ_CTL_PORT) {
			/* PTP's ports share the mailbox (ETHDAQ_PTP_UDP); anything else cannot arrive. */
			ptpsvc_input(d.local_port, rx_buf, d.length);
			continue;
		}
		rq.data = rx_buf;
		rq.len = d.length;
		rq.src_ip = d.ip;
		rq.src_port = d.port;
		rq.now_ms = ptpsvc_uptime_ms();
		auth_counter = ctl.auth_counter;
		n = ctl_handle(&ctl, &rq, tx_buf, sizeof(tx_buf), &id, &ops);
		if (n > 0)
			ctlport_send(d.ip, d.port, tx_buf, (size_t)n, &port_stats);
		if (ctl.auth_counter != auth_counter)  /* A signed request was accepted. */
			watchdog_retain(ctl.auth_counter);
		if (ctl.net_pending) {
			dhcpsvc_stop();   /* Addresses set by hand are kept: DHCP would replace them. */
			apply_addresses(&id, &ctl, d.ip);
		}
		if (ctl.reboot_pending) {
			printf("control: reboot requested by ");
			print_ip(d.ip);
			printf("\n");
			watchdog_reboot();
		}
	}
	return 0;
}
