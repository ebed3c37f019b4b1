/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * DHCP client (RFC 2131, options RFC 2132): the messages a client sends and reads, and the
 * client's state machine, pure C over byte buffers and a clock the caller gives (built unchanged
 * for the host tests and the fuzzer; services/dhcpsvc.c runs it on the board). Addresses are
 * host-order uint32_t (192.168.1.50 is 0xC0A80132); on the wire every field is big-endian.
 *
 * The board keeps the build's address until a server offers one (it is in use meanwhile, so
 * DISCOVER and the first REQUEST leave from it, with ciaddr 0 and the broadcast flag: the
 * server's answers come to 255.255.255.255). A lease is renewed at T1 (REQUEST unicast to its
 * server), rebound at T2 (REQUEST broadcast); when it expires, or a server refuses it (NAK), the
 * board goes back to the build's address and discovers again, retransmitting after 4, 8, 16, 32,
 * then every 64 seconds.
 */
#ifndef ETHDAQ_DHCP_H
#define ETHDAQ_DHCP_H

#include <stddef.h>
#include <stdint.h>

#define DHCP_SERVER_PORT 67u
#define DHCP_CLIENT_PORT 68u

#define DHCP_FIXED_SIZE  236u   /* op .. file: the BOOTP header. */
#define DHCP_COOKIE      0x63825363u
#define DHCP_MIN_SIZE    (DHCP_FIXED_SIZE + 4u)  /* Header and cookie: the least a message is. */
#define DHCP_SEND_SIZE   300u   /* What the client sends: BOOTP's minimum, options padded. */
#define DHCP_FLAG_BROADCAST 0x8000u

/* Message types (option 53). */
enum dhcp_type {
	DHCP_DISCOVER = 1, DHCP_OFFER = 2, DHCP_REQUEST = 3, DHCP_DECLINE = 4,
	DHCP_ACK = 5, DHCP_NAK = 6, DHCP_RELEASE = 7, DHCP_INFORM = 8,
};

/* Options the client reads or sends. */
enum dhcp_option {
	DHCP_OPT_PAD = 0, DHCP_OPT_SUBNET_MASK = 1, DHCP_OPT_ROUTER = 3, DHCP_OPT_REQUESTED_IP = 50,
	DHCP_OPT_LEASE_TIME = 51, DHCP_OPT_MSG_TYPE = 53, DHCP_OPT_SERVER_ID = 54,
	DHCP_OPT_PARAM_LIST = 55, DHCP_OPT_MAX_SIZE = 57, DHCP_OPT_T1 = 58, DHCP_OPT_T2 = 59,
	DHCP_OPT_END = 255,
};

/* Which optional fields a parsed message has (struct dhcp_msg.has). */
#define DHCP_HAS_SERVER_ID 0x01u
#define DHCP_HAS_LEASE     0x02u
#define DHCP_HAS_T1        0x04u
#define DHCP_HAS_T2        0x08u
#define DHCP_HAS_NETMASK   0x10u
#define DHCP_HAS_ROUTER    0x20u

#define DHCP_LEASE_INFINITE 0xFFFFFFFFu

/* A server's message, as far as a client reads it. Options after the first of their kind are
 * ignored; a router option's first address is the one taken. */
struct dhcp_msg {
	uint8_t  op;        /* 2: BOOTREPLY. */
	uint32_t xid;
	uint16_t flags;
	uint32_t ciaddr, yiaddr, siaddr;
	uint8_t  chaddr[6];
	uint8_t  type;      /* enum dhcp_type */
	uint8_t  has;       /* DHCP_HAS_* */
	uint32_t server_id, lease_s, t1_s, t2_s, netmask, router;
};

/* Why a message was not read (dhcp_parse's negative results). */
enum dhcp_parse_error {
	DHCP_ERR_SHORT = -1,    /* Shorter than the header and cookie. */
	DHCP_ERR_HEADER = -2,   /* Not a BOOTREPLY for Ethernet (op 2, htype 1, hlen 6). */
	DHCP_ERR_COOKIE = -3,   /* No DHCP magic cookie. */
	DHCP_ERR_OPTION = -4,   /* An option runs past the end, or has a length its kind cannot have. */
	DHCP_ERR_NO_TYPE = -5,  /* No message type (a BOOTP reply), or one out of range. */
};

/* Reads a server's message of len bytes. Returns 0 and fills m, or a dhcp_parse_error. */
int dhcp_parse(const uint8_t *buf, size_t len, struct dhcp_msg *m);

/* What the client sends. */
struct dhcp_out {
	uint8_t  type;          /* DHCP_DISCOVER or DHCP_REQUEST. */
	uint32_t xid;
	uint16_t secs;
	uint16_t flags;         /* DHCP_FLAG_BROADCAST while the client has no lease. */
	uint32_t ciaddr;        /* The leased address when renewing or rebinding, else 0. */
	uint32_t requested_ip;  /* Option 50 (0: none): the offered address, selecting. */
	uint32_t server_id;     /* Option 54 (0: none): the chosen server, selecting. */
	uint8_t  mac[6];
};

/* Writes the message into out (DHCP_SEND_SIZE bytes). Returns its length, or 0 when cap is too
 * small (nothing is written then). */
size_t dhcp_build(uint8_t *out, size_t cap, const struct dhcp_out *o);

/* Client ------------------------------------------------------------------------------------ */

enum dhcp_state {
	DHCP_S_INIT,        /* No lease: DISCOVER due at next_ms (the build's address in use). */
	DHCP_S_SELECTING,   /* DISCOVER sent, waiting for an OFFER. */
	DHCP_S_REQUESTING,  /* REQUEST sent for an offer, waiting for its ACK. */
	DHCP_S_BOUND,       /* Lease in use until T1. */
	DHCP_S_RENEWING,    /* After T1: REQUEST unicast to the lease's server. */
	DHCP_S_REBINDING,   /* After T2: REQUEST broadcast to any server. */
	DHCP_S_STOPPED,     /* The address was set by hand (CONFIG_SET): no DHCP until a reboot. */
};

/* The address a lease gives (or the build's, as the fallback). */
struct dhcp_lease {
	uint32_t ip, netmask, gateway;
	uint32_t server;                 /* 0 for the fallback. */
	uint32_t lease_s, t1_s, t2_s;    /* As the server granted them (or the defaults). */
};

/* What happened, for the caller to print and count. */
struct dhcp_counters {
	uint32_t discovers, requests, offers, acks, naks;
	uint32_t malformed;   /* dhcp_parse refused it. */
	uint32_t ignored;     /* Not for us (xid, chaddr), or not expected in this state. */
	uint32_t refused;     /* An offer or ack with an address or times the board cannot use. */
	uint32_t expired;     /* Leases that ran out. */
	uint32_t send_fail;   /* Messages the caller could not send (dhcp_client_send_failed). */
};

struct dhcp_client {
	enum dhcp_state state;
	uint8_t  mac[6];
	struct dhcp_lease fallback, lease;   /* The build's; the one in use (when bound/renewing/rebinding). */
	uint32_t rand;                       /* xorshift32 state: transaction ids. */
	uint32_t xid;
	uint32_t offered_ip, offer_server;   /* The offer being requested. */
	uint64_t next_ms;                    /* The next transmission (or, bound, T1). */
	uint64_t start_ms;                   /* When the exchange began (secs; a lease's start). */
	uint64_t lease_start_ms;             /* When the lease in use was requested. */
	uint32_t backoff_s;                  /* The retransmission interval now. */
	uint32_t tries;
	struct dhcp_counters count;
};

/* What the caller must do after a step. */
#define DHCP_ACT_SEND     0x1u  /* Send out[0..len) from port 68 to dst_ip:67. */
#define DHCP_ACT_BOUND    0x2u  /* Use c->lease: a new address, netmask or gateway. */
#define DHCP_ACT_RENEWED  0x4u  /* The lease in use was extended (same addresses). */
#define DHCP_ACT_FALLBACK 0x8u  /* Back to c->fallback: the lease expired or was refused. */

struct dhcp_action {
	unsigned what;      /* DHCP_ACT_* */
	uint32_t dst_ip;
	size_t   len;
};

#define DHCP_BACKOFF_MIN_S 4u
#define DHCP_BACKOFF_MAX_S 64u
#define DHCP_REQUEST_TRIES 4u    /* REQUESTs for one offer before discovering again. */
#define DHCP_RENEW_MIN_S   60u   /* RFC 2131 4.4.5: retransmissions while renewing or rebinding. */

/* A client for `mac` with `fallback` in use; its first DISCOVER is due at now_ms. seed varies the
 * transaction ids between boots. */
void dhcp_client_init(struct dhcp_client *c, const uint8_t mac[6], const struct dhcp_lease *fallback,
                      uint32_t seed, uint64_t now_ms);
/* Timers: call often. out (cap bytes, DHCP_SEND_SIZE is enough) receives a message to send. */
void dhcp_client_poll(struct dhcp_client *c, uint64_t now_ms, uint8_t *out, size_t cap, struct dhcp_action *a);
/* A datagram that came to port 68 (len bytes of UDP payload). */
void dhcp_client_input(struct dhcp_client *c, uint64_t now_ms, const uint8_t *buf, size_t len,
                       uint8_t *out, size_t cap, struct dhcp_action *a);
/* The addresses were set by hand: stop (no more messages, no fallback). */
void dhcp_client_stop(struct dhcp_client *c);
/* The address in use: the lease's, or the fallback's. */
const struct dhcp_lease *dhcp_client_address(const struct dhcp_client *c);
const char *dhcp_state_name(enum dhcp_state s);

#endif
