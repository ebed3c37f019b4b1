/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Unit tests (cmocka) of software/firmware/services/phy_mode.c, what the firmware concludes from a
 * PHY's clause 22 registers, built for the host as the firmware builds it (test/firmware/test_phy.py).
 * The expected modes follow IEEE 802.3 Annex 28B.3's priority (1000BASE-T full, 1000BASE-T half,
 * 100BASE-TX full, 100BASE-TX half, 10BASE-T full, 10BASE-T half) and 22.2.4.1 (forced modes);
 * the register values are those of the standard, with the pause and next-page bits real PHYs
 * set beside them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "phy_mode.h"

#define AN_UP   0x796du  /* BMSR: abilities, extended status, AN complete, link up */
#define ALL_10_100 0x01e1u
#define PAUSE   0x0c00u

static struct phy_mode resolve_ok(uint16_t bmcr, uint16_t bmsr, uint16_t anar, uint16_t anlpar,
                                  uint16_t gbcr, uint16_t gbsr)
{
	struct phy_regs r = { bmcr, bmsr, anar, anlpar, gbcr, gbsr };
	struct phy_mode m;
	assert_int_equal(phy_resolve(&r, &m), 0);
	return m;
}

static void gigabit_full_when_both_ends_can(void **state)
{
	(void)state;
	/* A gigabit PHY against a gigabit switch port (GBSR: local and remote receiver OK, partner
	 * 1000BASE-T full and half). */
	struct phy_mode m = resolve_ok(0x1140, AN_UP, ALL_10_100 | PAUSE, 0xc5e1, 0x0300, 0x3c00);
	assert_int_equal(m.speed, 1000);
	assert_int_equal(m.full_duplex, 1);
	assert_int_equal(m.autoneg, 1);
}

static void gigabit_half_before_fast_full(void **state)
{
	(void)state;
	struct phy_mode m = resolve_ok(0x1140, AN_UP, ALL_10_100, 0x41e1, 0x0300, 0x0400);
	assert_int_equal(m.speed, 1000);
	assert_int_equal(m.full_duplex, 0);
	/* We no longer advertise 1000BASE-T half: 100BASE-TX full wins. */
	m = resolve_ok(0x1140, AN_UP, ALL_10_100, 0x41e1, 0x0200, 0x0400);
	assert_int_equal(m.speed, 100);
	assert_int_equal(m.full_duplex, 1);
}

static void fast_ethernet_partner(void **state)
{
	(void)state;
	struct phy_mode m = resolve_ok(0x1140, AN_UP, ALL_10_100, 0x40a1 /* 100 half, 10 half */, 0x0300, 0);
	assert_int_equal(m.speed, 100);
	assert_int_equal(m.full_duplex, 0);
	m = resolve_ok(0x1140, AN_UP, 0x0021 /* we: 10 half only */, 0x41e1, 0x0000, 0x0c00);
	assert_int_equal(m.speed, 10);
	assert_int_equal(m.full_duplex, 0);
	m = resolve_ok(0x1140, AN_UP, ALL_10_100, 0x4061 /* 10 full and half */, 0, 0);
	assert_int_equal(m.speed, 10);
	assert_int_equal(m.full_duplex, 1);
}

static void a_10_100_phy_has_no_gigabit_registers(void **state)
{
	(void)state;
	/* Without BMSR's extended status bit registers 9 and 10 do not exist: whatever was read
	 * there must not make the link gigabit. */
	struct phy_mode m = resolve_ok(0x3100, AN_UP & ~0x0100u, ALL_10_100, 0x45e1, 0xffff, 0xffff);
	assert_int_equal(m.speed, 100);
	assert_int_equal(m.full_duplex, 1);
}

static void forced_modes_come_from_bmcr(void **state)
{
	(void)state;
	struct phy_mode m = resolve_ok(0x2100 /* 100, full, AN off */, 0x7909 | 0x0004, 0, 0, 0, 0);
	assert_int_equal(m.speed, 100);
	assert_int_equal(m.full_duplex, 1);
	assert_int_equal(m.autoneg, 0);
	m = resolve_ok(0x0040 /* 1000, half */, 0x790d, ALL_10_100, 0, 0x0300, 0);
	assert_int_equal(m.speed, 1000);
	assert_int_equal(m.full_duplex, 0);
	m = resolve_ok(0x0000, 0x790d, 0, 0, 0, 0);
	assert_int_equal(m.speed, 10);
}

static void unresolvable_modes_are_reported(void **state)
{
	(void)state;
	struct phy_regs incomplete = { 0x1140, AN_UP & ~0x0020u, ALL_10_100, 0xc5e1, 0x0300, 0x3c00 };
	struct phy_regs nothing_common = { 0x1140, AN_UP, 0x0181 /* 100 only */, 0x4061 /* 10 only */, 0, 0 };
	struct phy_regs reserved_speed = { 0x2040, 0x790d, 0, 0, 0, 0 };
	struct phy_mode m;
	assert_int_equal(phy_resolve(&incomplete, &m), -1);
	assert_int_equal(m.speed, 0);
	assert_int_equal(phy_resolve(&nothing_common, &m), -1);
	assert_int_equal(phy_resolve(&reserved_speed, &m), -1);
}

static void ids_of_absent_phys(void **state)
{
	(void)state;
	assert_false(phy_id_valid(0xffff, 0xffff));  /* Nobody drives: the pull-up. */
	assert_false(phy_id_valid(0x0000, 0x0000));
	assert_true(phy_id_valid(0x001c, 0xc915));   /* Realtek RTL8211E */
	assert_true(phy_id_valid(0x0022, 0x1622));   /* Micrel KSZ9031 */
}

static void mode_text(void **state)
{
	(void)state;
	char buf[64];
	struct phy_mode m = { 1000, 1, 1 };
	assert_string_equal(phy_mode_text(&m, buf, sizeof(buf)), "1000 Mb/s full duplex (auto-negotiated)");
	m = (struct phy_mode){ 100, 0, 0 };
	assert_string_equal(phy_mode_text(&m, buf, sizeof(buf)), "100 Mb/s half duplex (forced)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gigabit_full_when_both_ends_can),
		cmocka_unit_test(gigabit_half_before_fast_full),
		cmocka_unit_test(fast_ethernet_partner),
		cmocka_unit_test(a_10_100_phy_has_no_gigabit_registers),
		cmocka_unit_test(forced_modes_come_from_bmcr),
		cmocka_unit_test(unresolvable_modes_are_reported),
		cmocka_unit_test(ids_of_absent_phys),
		cmocka_unit_test(mode_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
