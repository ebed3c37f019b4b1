/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Driver for the receive classifier (gateware/classifier.py): its rule table, written one rule at a
 * time, and the fast-track sink's record. Builds without it (--with-classifier) get stubs.
 */
#ifndef ETHDAQ_CLASSIFIER_H
#define ETHDAQ_CLASSIFIER_H

#include <stdint.h>

#include "protocol/ctl.h"

enum classifier_action { CLASSIFIER_CPU = 0, CLASSIFIER_FASTTRACK = 1, CLASSIFIER_DROP = 2 };

#define CLASSIFIER_MATCH_TYPE  0x1u
#define CLASSIFIER_MATCH_PROTO 0x2u
#define CLASSIFIER_MATCH_PORT  0x4u
#define CLASSIFIER_MATCH_SRC   0x8u

struct classifier_rule {
	uint8_t  enable, action, match;  /* match: CLASSIFIER_MATCH_* */
	uint16_t ethertype, port;
	uint8_t  proto;
	uint32_t src_ip;
};

/* Write rule `index`; 0, or -1 (no such rule, or the receive side did not take it). */
int  classifier_set_rule(unsigned index, const struct classifier_rule *r);
/* The build's rules (--fasttrack-port): at boot, with a console line each. */
void classifier_init(void);
/* 1 if this build has the classifier (CTL_CAP_RULES). */
int  classifier_present(void);
/* ctl_ops.rules: write `set`, or read the table and its counters into `rep`. */
int  classifier_rules_op(const struct ctl_rule *set, struct ctl_rules_report *rep);

#endif
