/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Unit tests (cmocka) of software/firmware/protocol/route.h, the board's on-link / next-hop
 * decision, built for the host as the firmware builds it (test/firmware/test_route.py). With a program
 * argument "table", it reads lines "ip netmask gateway dst" (hex) on stdin and prints
 * "on_link next_hop gateway_valid" for each, for the Python side to compare with ipaddress.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "route.h"

#define IP4(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

static const uint32_t BOARD = IP4(192, 168, 77, 50);
static const uint32_t MASK24 = IP4(255, 255, 255, 0);
static const uint32_t GW = IP4(192, 168, 77, 254);

static void without_a_gateway_every_destination_is_on_link(void **state)
{
	(void)state;
	assert_true(route_on_link(BOARD, MASK24, ROUTE_NO_GATEWAY, IP4(10, 99, 0, 2)));
	assert_int_equal(route_next_hop(BOARD, MASK24, ROUTE_NO_GATEWAY, IP4(10, 99, 0, 2)), IP4(10, 99, 0, 2));
	assert_int_equal(route_next_hop(BOARD, MASK24, ROUTE_NO_GATEWAY, IP4(192, 168, 77, 1)), IP4(192, 168, 77, 1));
}

static void the_subnet_is_on_link_and_the_rest_goes_to_the_gateway(void **state)
{
	(void)state;
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(192, 168, 77, 1)), IP4(192, 168, 77, 1));
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(192, 168, 77, 255)), IP4(192, 168, 77, 255));
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(192, 168, 78, 1)), GW);
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(10, 99, 0, 2)), GW);
	/* The first and last address outside, either side of the subnet. */
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(192, 168, 76, 255)), GW);
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(192, 168, 78, 0)), GW);
	/* A wider subnet takes them in. */
	assert_int_equal(route_next_hop(BOARD, IP4(255, 255, 252, 0), GW, IP4(192, 168, 78, 1)), IP4(192, 168, 78, 1));
}

static void broadcast_and_multicast_never_go_to_the_gateway(void **state)
{
	(void)state;
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, 0xFFFFFFFFu), 0xFFFFFFFFu);
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(224, 0, 1, 129)), IP4(224, 0, 1, 129));
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(239, 255, 255, 255)), IP4(239, 255, 255, 255));
	/* 240.0.0.0/4 is not multicast. */
	assert_int_equal(route_next_hop(BOARD, MASK24, GW, IP4(240, 0, 0, 1)), GW);
}

static void a_netmask_is_ones_then_zeros(void **state)
{
	(void)state;
	assert_true(route_netmask_valid(0));
	assert_true(route_netmask_valid(0xFFFFFFFFu));
	assert_true(route_netmask_valid(MASK24));
	assert_true(route_netmask_valid(IP4(255, 255, 255, 254)));
	assert_false(route_netmask_valid(IP4(255, 0, 255, 0)));
	assert_false(route_netmask_valid(IP4(0, 255, 255, 255)));
	assert_false(route_netmask_valid(1));
	assert_int_equal(route_prefix_length(MASK24), 24);
	assert_int_equal(route_prefix_length(0), 0);
	assert_int_equal(route_prefix_length(0xFFFFFFFFu), 32);
}

static void a_gateway_is_another_host_of_the_subnet(void **state)
{
	(void)state;
	assert_true(route_gateway_valid(BOARD, MASK24, ROUTE_NO_GATEWAY));
	assert_true(route_gateway_valid(BOARD, MASK24, GW));
	assert_true(route_gateway_valid(BOARD, MASK24, IP4(192, 168, 77, 1)));
	assert_false(route_gateway_valid(BOARD, MASK24, BOARD));                      /* itself */
	assert_false(route_gateway_valid(BOARD, MASK24, IP4(192, 168, 78, 1)));       /* another subnet */
	assert_false(route_gateway_valid(BOARD, MASK24, IP4(192, 168, 77, 0)));       /* network */
	assert_false(route_gateway_valid(BOARD, MASK24, IP4(192, 168, 77, 255)));     /* broadcast */
	assert_false(route_gateway_valid(BOARD, IP4(255, 0, 255, 0), GW));            /* no netmask */
	/* A /31 has two hosts and no network or broadcast address (RFC 3021). */
	assert_true(route_gateway_valid(IP4(10, 0, 0, 0), IP4(255, 255, 255, 254), IP4(10, 0, 0, 1)));
	/* A /32 has no room for one. */
	assert_false(route_gateway_valid(BOARD, 0xFFFFFFFFu, GW));
}

static int table(void)
{
	unsigned long ip, mask, gw, dst;

	while (scanf("%lx %lx %lx %lx", &ip, &mask, &gw, &dst) == 4)
		printf("%d %08lx %d\n", route_on_link(ip, mask, gw, dst),
		       (unsigned long)route_next_hop(ip, mask, gw, dst), route_gateway_valid(ip, mask, gw));
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(without_a_gateway_every_destination_is_on_link),
		cmocka_unit_test(the_subnet_is_on_link_and_the_rest_goes_to_the_gateway),
		cmocka_unit_test(broadcast_and_multicast_never_go_to_the_gateway),
		cmocka_unit_test(a_netmask_is_ones_then_zeros),
		cmocka_unit_test(a_gateway_is_another_host_of_the_subnet),
	};
	if (argc > 1 && strcmp(argv[1], "table") == 0)
		return table();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
