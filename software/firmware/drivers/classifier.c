/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <stdio.h>

#include <generated/csr.h>
#include <generated/soc.h>

#include "classifier.h"
#include "events.h"

#ifdef CSR_CLASSIFIER_BASE

/* The gateware's rule table is written through staging registers and cannot be read back: the
 * firmware keeps what it wrote (all disabled at reset, as the gateware). */
static struct classifier_rule shadow[ETHDAQ_CLASSIFIER_RULES];

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
	shadow[index] = *r;
	return 0;
}

int classifier_rules_op(const struct ctl_rule *set, struct ctl_rules_report *rep)
{
	if (set != NULL) {
		struct classifier_rule r = { .enable = set->enable, .action = set->action, .match = set->match,
					     .ethertype = set->ethertype, .port = set->port, .proto = set->proto,
					     .src_ip = set->src_ip };
		if (set->index >= ETHDAQ_CLASSIFIER_RULES)
			return CTL_ERR_BAD_VALUE;   /* A build with fewer rules than the protocol carries. */
		if (classifier_set_rule(set->index, &r) != 0)
			return CTL_ERR_BUSY;
		printf("rules: rule %u %s\n", (unsigned)set->index, set->enable ? "set" : "disabled");
		return 0;
	}
	rep->nrules = ETHDAQ_CLASSIFIER_RULES < CTL_MAX_RULES ? ETHDAQ_CLASSIFIER_RULES : CTL_MAX_RULES;
	for (unsigned i = 0; i < rep->nrules; i++) {
		const struct classifier_rule *r = &shadow[i];
		struct ctl_rule *o = &rep->rules[i];
		o->index = (uint8_t)i; o->enable = r->enable; o->action = r->action; o->match = r->match;
		o->ethertype = r->ethertype; o->proto = r->proto; o->port = r->port; o->src_ip = r->src_ip;
		classifier_rule_select_write(i);
		o->matched = classifier_matched_read();
		o->refused = classifier_refused_read();
	}
	rep->unmatched = classifier_unmatched_read();
	rep->gate_error    = event_count(EVENT_RX_GATE_DROPPED_ERROR);
	rep->gate_full     = event_count(EVENT_RX_GATE_DROPPED_FULL);
	rep->gate_oversize = event_count(EVENT_RX_GATE_DROPPED_OVERSIZE);
	return 0;
}

int classifier_present(void) { return 1; }

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
int classifier_present(void) { return 0; }
int classifier_rules_op(const struct ctl_rule *set, struct ctl_rules_report *rep)
{
	(void)set; (void)rep;
	return CTL_ERR_UNSUPPORTED;
}

#endif
