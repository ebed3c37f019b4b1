// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// The simulated board's wire to Linux: a LiteX simulation module that bridges the GMII pins to a
// tap interface (gateware/simphy.py). Derived from LiteX's gmii_ethernet module (BSD-2-Clause);
// the transmit side (pins to tap) is LiteX's, the receive side (tap to pins) differs:
//
// - Paced at the wire's rate: a frame goes on the pins as preamble, SFD, the frame padded to 60
//   bytes and its FCS, then at least IFG idle cycles before the next one, as on a real wire.
// - Back-pressure to the kernel, whole frames only (../common/tapqueue.h, the tap's side shared
//   with ethdaq_xgmii): a tap frame waits in a queue here, then in the kernel's queue for the tap,
//   and when that is full the kernel drops and counts it; one too long for the wire is dropped
//   whole, counted and reported. (LiteX's module reads through tapcfg's 4 KiB buffer.)

#include "tapqueue.h"

#define TX_MAX_LEN   9000     // Pins to tap: bytes of a frame with its FCS (LiteX's ETH_LEN).
#define PREAMBLE     8        // Seven 0x55 and the SFD 0xD5.
#define IFG          12       // Idle cycles at least between frames on the receive pins.

typedef struct {
    // Pins.
    uint8_t *rx_data;
    bool    *rx_dv;
    bool    *rx_er;
    uint8_t *tx_data;
    uint8_t *tx_en;
    uint8_t *tx_er;
    bool    *clk;
    clk_edge_state_t clk_edge;

    // Pins to tap.
    uint8_t tx_pkt[TX_MAX_LEN];
    size_t  tx_len;
    bool    tx_prev_en, tx_abort, tx_too_long;
    uint8_t tx_preamble;

    // Tap to pins: the queue's first frame is being sent.
    tapq_t     tap;
    bool       rx_sending;
    size_t     rx_pos;                // Bytes of the first frame on the pins, preamble included.
    unsigned   rx_idle;               // Idle cycles since the last frame (saturates at IFG).
} gmii_state_t;

static struct event_base *base = NULL;

// Tap to pins, one cycle: the next byte of the first waiting frame, or idle.
static void rx_adv(gmii_state_t *s) {
    tapq_frame_t *f = tapq_first(&s->tap);
    if (!s->rx_sending && f && s->rx_idle >= IFG) {
        s->rx_sending = true;
        s->rx_pos     = 0;
    }
    *s->rx_er = false;
    if (!s->rx_sending) {
        *s->rx_data = 0;
        *s->rx_dv   = false;
        if (s->rx_idle < IFG)
            s->rx_idle++;
        return;
    }
    if (s->rx_pos < PREAMBLE)
        *s->rx_data = (s->rx_pos == PREAMBLE - 1) ? 0xd5 : 0x55;
    else
        *s->rx_data = f->data[s->rx_pos - PREAMBLE];
    *s->rx_dv = true;
    if (++s->rx_pos == PREAMBLE + f->len) {
        s->rx_sending = false;
        s->rx_idle    = 0;
        tapq_pop(&s->tap);
    }
}

// Pins to tap, one cycle (LiteX's gmii_ethernet): a whole frame with a good preamble goes to the
// tap without its FCS; a bad preamble, TX_ER or a frame over TX_MAX_LEN is reported, not sent.
static void tx_adv(gmii_state_t *s) {
    bool en = *s->tx_en;
    if (!s->tx_prev_en && en) {
        s->tx_len = 0;
        s->tx_preamble = 0;
        s->tx_abort = false;
        s->tx_too_long = false;
    }
    if (en && !s->tx_abort) {
        if (*s->tx_er) {
            fprintf(stderr, "[ethdaq_gmii] TX error %02x: frame not sent\n", *s->tx_data);
            s->tx_abort = true;
        } else if (s->tx_preamble < PREAMBLE) {
            uint8_t want = (s->tx_preamble == PREAMBLE - 1) ? 0xd5 : 0x55;
            if (*s->tx_data == want) {
                s->tx_preamble++;
            } else {
                fprintf(stderr, "[ethdaq_gmii] TX preamble error! %u %02x\n", s->tx_preamble, *s->tx_data);
                s->tx_abort = true;
            }
        } else if (s->tx_len < TX_MAX_LEN) {
            s->tx_pkt[s->tx_len++] = *s->tx_data;
        } else if (!s->tx_too_long) {
            fprintf(stderr, "[ethdaq_gmii] TX frame over %d bytes with FCS: not sent\n", TX_MAX_LEN);
            s->tx_too_long = true;
        }
    }
    if (s->tx_prev_en && !en && s->tx_len >= 1 && !s->tx_abort && !s->tx_too_long) {
        if (s->tx_len < 4) {
            fprintf(stderr, "[ethdaq_gmii] TX packet too short to contain frame check sequence\n");
        } else {
            uint32_t crc, fcs;
            if (!fcs_good(s->tx_pkt, s->tx_len, &crc, &fcs))
                fprintf(stderr, "[ethdaq_gmii] TX packet FCS mismatch. Expected: %08x. Actual: %08x.\n", crc, fcs);
            tapcfg_write(s->tap.tapcfg, s->tx_pkt, s->tx_len - 4);
        }
    }
    s->tx_prev_en = en;
}

static int gmii_tick(void *state, uint64_t time_ps) {
    gmii_state_t *s = state;
    // GMII's receive and transmit clocks are both sys_clk here.
    if (clk_pos_edge(&s->clk_edge, *s->clk)) {
        tx_adv(s);
        rx_adv(s);
    }
    return RC_OK;
}

static int gmii_add_pads(void *state, struct pad_list_s *plist) {
    gmii_state_t *s = state;
    if (!state || !plist)
        return RC_INVARG;
    if (!strcmp(plist->name, "gmii_eth")) {
        s->rx_data = module_pad(plist->pads, "rx_data");
        s->rx_dv   = module_pad(plist->pads, "rx_dv");
        s->rx_er   = module_pad(plist->pads, "rx_er");
        s->tx_data = module_pad(plist->pads, "tx_data");
        s->tx_en   = module_pad(plist->pads, "tx_en");
        s->tx_er   = module_pad(plist->pads, "tx_er");
    }
    if (!strcmp(plist->name, "sys_clk"))
        s->clk = module_pad(plist->pads, "sys_clk");
    return RC_OK;
}

static int gmii_start(void *b) {
    base = (struct event_base *) b;
    printf("[ethdaq_gmii] loaded (%p)\n", base);
    return RC_OK;
}

static int gmii_new(void **state, char *args) {
    gmii_state_t *s = calloc(1, sizeof(*s));
    *state = s;
    if (!s)
        return RC_NOENMEM;
    s->rx_idle = IFG;
    return tapq_open(&s->tap, "ethdaq_gmii", base, args);
}

static struct ext_module_s ext_mod = {
    "ethdaq_gmii",
    gmii_start,
    gmii_new,
    gmii_add_pads,
    NULL,
    gmii_tick
};

int litex_sim_ext_module_init(int (*register_module)(struct ext_module_s *)) {
    // zlib's CRC table before anything could call crc32() from two threads.
    get_crc_table();
    return register_module(&ext_mod);
}
