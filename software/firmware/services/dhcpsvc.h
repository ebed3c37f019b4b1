/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * The board's DHCP client (build option --dhcp; protocol/dhcp.c is the client, this its board
 * side): its messages through the control mailbox's port 68, its clock from the uptime, and the
 * address it decides on handed to the main loop, which switches the board to it (drivers/netaddr.c).
 * Without the option every call does nothing and the build's address stays.
 */
#ifndef ETHDAQ_DHCPSVC_H
#define ETHDAQ_DHCPSVC_H

#include <stddef.h>
#include <stdint.h>

#include "drivers/ctlport.h"
#include "protocol/dhcp.h"

/* 1 if this build runs the client (CTL_CAP_DHCP). */
int  dhcpsvc_enabled(void);
/* Starts with the build's addresses as the fallback; the first DISCOVER goes at the next poll. */
void dhcpsvc_init(const uint8_t mac[6], const struct dhcp_lease *fallback, uint32_t seed, uint64_t now_ns,
                  struct ctlport_stats *st);
/* Timers (call from the main loop) and a datagram to port 68. Each returns 1 and fills `use`
 * when the board's address, netmask or gateway is to change to `use`, else 0. */
int  dhcpsvc_poll(uint64_t now_ns, struct dhcp_lease *use);
int  dhcpsvc_input(const uint8_t *buf, size_t len, uint64_t now_ns, struct dhcp_lease *use);
/* CONFIG_SET set the addresses by hand: the client stops until a reboot. */
void dhcpsvc_stop(void);

#endif
