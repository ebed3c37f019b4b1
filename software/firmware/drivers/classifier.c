/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>

#include <generated/csr.h>
#include <generated/soc.h>

#include "classifier.h"

#ifdef CSR_CLASSIFIER_BASE

int classifier_set_rule(unsigned index, const struct classifier_rule *r)
{
	uint32_t control;
	unsigned spins;

	if (index >= ETHDAQ_CLASSIFIER_RULES)
		return -1;
#define FIELD(name, v) ((uint32_t)(v) << CSR_CLASSIFIER_RULE_CONTROL_##name##_OFFSET)
	control = FIELD(ENABLE, r->enable & 1) | FIELD(ACTION, r->action & 3) |
		  FIELD(MATCH_TYPE, !!(r->match & CLASSIFIER_MATCH_TYPE)) |
		  FIELD(MATCH_PROTO, !!(r->match & CLASSIFIER_MATCH_PROTO)) |
		  FIELD(MATCH_PORT, !!(r->match & CLASSIFIER_MATCH_PORT)) |
		  FIELD(MATCH_SRC, !!(r->match & CLASSIFIER_MATCH_SRC));
#undef FIELD
	classifier_rule_select_write(index);
	classifier_rule_control_write(control);
	classifier_rule_ethertype_write(r->ethertype);
	classifier_rule_proto_write(r->proto);
	classifier_rule_port_write(r->port);
	classifier_rule_src_ip_write(r->src_ip);
	classifier_rule_write_write(1);
	/* The receive side takes the rule within a few of its cycles. */
	for (spins = 0; classifier_rule_pending_read(); spins++)
		if (spins > 10000)
			return -1;
	return 0;
}

void classifier_init(void)
{
	static const uint16_t ports[] = {
#ifdef ETHDAQ_FASTTRACK_PORT_0
		ETHDAQ_FASTTRACK_PORT_0,
#endif
#ifdef ETHDAQ_FASTTRACK_PORT_1
		ETHDAQ_FASTTRACK_PORT_1,
#endif
#ifdef ETHDAQ_FASTTRACK_PORT_2
		ETHDAQ_FASTTRACK_PORT_2,
#endif
#ifdef ETHDAQ_FASTTRACK_PORT_3
		ETHDAQ_FASTTRACK_PORT_3,
#endif
		0  /* Not a rule: keeps the array non-empty. */
	};
	unsigned i;

	for (i = 0; i + 1 < sizeof(ports) / sizeof(ports[0]); i++) {
		struct classifier_rule r = { .enable = 1, .action = CLASSIFIER_FASTTRACK,
					     .match = CLASSIFIER_MATCH_PORT, .port = ports[i] };
		if (classifier_set_rule(i, &r) == 0)
			printf("  fast-track: udp/%u -> hardware sink (rule %u), never the CPU\n", (unsigned)ports[i], i);
		else
			printf("  fast-track: udp/%u: rule %u not taken\n", (unsigned)ports[i], i);
	}
}

#else

int classifier_set_rule(unsigned index, const struct classifier_rule *r) { (void)index; (void)r; return -1; }
void classifier_init(void) {}

#endif
