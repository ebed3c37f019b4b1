// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// The simulated 10G board's wire to Linux: a LiteX simulation module that bridges the 64-bit
// XGMII pins (one column of eight lanes per eth_clk cycle, IEEE 802.3 clause 46) to a tap
// interface (boards/sim10g.py). Derived from LiteX's xgmii_ethernet module (BSD-2-Clause) and
// ethdaq_gmii; unlike LiteX's module it runs on its own clock (eth_clk, not sys_clk), and:
//
// - Pins to tap: /S/ in lane 0 or 4, then six 0x55 and the SFD 0xD5, the frame and its FCS up to
//   /T/. A frame whose preamble, SFD or FCS is wrong, or with any other control character inside
//   it (/E/ among them), is not sent to the tap: it is counted and reported on the console. A good
//   frame goes to the tap without its FCS.
// - Tap to pins: paced at the wire's rate. /S/ goes in lane 0 or 4 once at least IFG bytes (/T/
//   included) have gone since the last frame's end: gaps of 12 to 15 bytes, never less than the
//   standard's average. Frames wait in the queue of ../common/tapqueue.h (shared with
//   ethdaq_gmii): while it is full the tap is not read, so the kernel's queue for the tap fills and
//   the kernel drops and counts what does not fit. A frame from the tap longer than the wire
//   carries is dropped whole, counted and reported, never cut.

#include "tapqueue.h"

#define TX_MAX_LEN   (TAPQ_MAX_FRAME + 4) // Pins to tap: bytes of a frame with its FCS.
#define IFG          12       // Bytes at least from a frame's /T/ (included) to the next /S/.

#define CH_IDLE  0x07
#define CH_START 0xfb
#define CH_TERM  0xfd

typedef enum { TX_IDLE, TX_PREAMBLE, TX_FRAME, TX_ABORT } tx_state_t;

typedef struct {
    // Pins.
    uint64_t *rx_data;
    uint8_t  *rx_ctl;
    uint64_t *tx_data;
    uint8_t  *tx_ctl;
    uint8_t  *clk;
    clk_edge_state_t clk_edge;

    // Pins to tap.
    tx_state_t tx_state;
    uint8_t    tx_pkt[TX_MAX_LEN];
    size_t     tx_len;
    unsigned   tx_preamble;           // Preamble bytes seen after /S/.
    uint64_t   tx_bad;                // Frames not sent to the tap.

    // Tap to pins: the queue's first frame is being sent.
    tapq_t     tap;
    bool       rx_sending;
    size_t     rx_pos;                // Bytes of the first frame on the pins after /S/ (preamble included).
    unsigned   rx_idle;               // Bytes since the last frame's /T/ (saturates at IFG).
} xgmii_state_t;

static struct event_base *base = NULL;

// Tap to pins, one lane: (ctl, byte) of the next character.
static void rx_lane(xgmii_state_t *s, unsigned lane, bool *ctl, uint8_t *byte) {
    tapq_frame_t *f = tapq_first(&s->tap);
    if (!s->rx_sending) {
        if (f && s->rx_idle >= IFG && (lane == 0 || lane == 4)) {
            s->rx_sending = true;
            s->rx_pos = 1;
            *ctl = true;
            *byte = CH_START;
            return;
        }
        if (s->rx_idle < IFG)
            s->rx_idle++;
        *ctl = true;
        *byte = CH_IDLE;
        return;
    }
    if (s->rx_pos < 8) {
        *ctl = false;
        *byte = (s->rx_pos == 7) ? 0xd5 : 0x55;
        s->rx_pos++;
    } else if (s->rx_pos < 8 + f->len) {
        *ctl = false;
        *byte = f->data[s->rx_pos - 8];
        s->rx_pos++;
    } else {
        *ctl = true;
        *byte = CH_TERM;
        s->rx_sending = false;
        s->rx_idle    = 1;
        tapq_pop(&s->tap);
    }
}

static void rx_adv(xgmii_state_t *s) {
    uint64_t data = 0;
    uint8_t  ctl  = 0;
    for (unsigned lane = 0; lane < 8; lane++) {
        bool c;
        uint8_t b;
        rx_lane(s, lane, &c, &b);
        data |= (uint64_t) b << (8*lane);
        ctl  |= (uint8_t) c << lane;
    }
    *s->rx_data = data;
    *s->rx_ctl  = ctl;
}

static void tx_bad(xgmii_state_t *s, const char *why, unsigned lane) {
    s->tx_bad++;
    fprintf(stderr, "[ethdaq_xgmii] TX %s (lane %u): frame not sent (%llu so far)\n",
            why, lane, (unsigned long long) s->tx_bad);
    s->tx_state = TX_ABORT;
}

// A whole frame from the pins, FCS included: to the tap without it, if the FCS is right.
static void tx_end(xgmii_state_t *s, unsigned lane) {
    if (s->tx_len < 4 + 14) {
        tx_bad(s, "frame too short", lane);
        return;
    }
    uint32_t crc, fcs;
    if (!fcs_good(s->tx_pkt, s->tx_len, &crc, &fcs)) {
        fprintf(stderr, "[ethdaq_xgmii] TX packet FCS mismatch. Expected: %08x. Actual: %08x.\n", crc, fcs);
        tx_bad(s, "FCS error", lane);
        return;
    }
    tapcfg_write(s->tap.tapcfg, s->tx_pkt, s->tx_len - 4);
    s->tx_state = TX_IDLE;
}

// Pins to tap, one lane.
static void tx_lane(xgmii_state_t *s, unsigned lane, bool ctl, uint8_t byte) {
    switch (s->tx_state) {
    case TX_ABORT:
        if (ctl && byte == CH_TERM)
            s->tx_state = TX_IDLE;
        if (!(ctl && byte == CH_START))
            break;
        s->tx_state = TX_IDLE;
        /* fall through: a start ends the aborted frame too */
    case TX_IDLE:
        if (ctl && byte == CH_START) {
            if (lane != 0 && lane != 4) {
                tx_bad(s, "/S/ outside lanes 0 and 4", lane);
                break;
            }
            s->tx_state = TX_PREAMBLE;
            s->tx_preamble = 0;
            s->tx_len = 0;
        } else if (!ctl || byte != CH_IDLE) {
            fprintf(stderr, "[ethdaq_xgmii] TX %s %02x between frames (lane %u)\n",
                    ctl ? "control" : "data", byte, lane);
        }
        break;
    case TX_PREAMBLE:
        if (ctl || byte != (s->tx_preamble == 6 ? 0xd5 : 0x55)) {
            tx_bad(s, "preamble or SFD error", lane);
            break;
        }
        if (++s->tx_preamble == 7)
            s->tx_state = TX_FRAME;
        break;
    case TX_FRAME:
        if (ctl) {
            if (byte == CH_TERM)
                tx_end(s, lane);
            else
                tx_bad(s, byte == 0xfe ? "error character /E/" : "control character inside a frame", lane);
        } else if (s->tx_len < TX_MAX_LEN) {
            s->tx_pkt[s->tx_len++] = byte;
        } else {
            tx_bad(s, "frame too long", lane);
        }
        break;
    }
}

static void tx_adv(xgmii_state_t *s) {
    uint64_t data = *s->tx_data;
    uint8_t  ctl  = *s->tx_ctl;
    for (unsigned lane = 0; lane < 8; lane++)
        tx_lane(s, lane, (ctl >> lane) & 1, (data >> (8*lane)) & 0xff);
}

static int xgmii_tick(void *state, uint64_t time_ps) {
    xgmii_state_t *s = state;
    // XGMII's receive and transmit clocks are both eth_clk here.
    if (s->clk && clk_pos_edge(&s->clk_edge, *s->clk)) {
        tx_adv(s);
        rx_adv(s);
    }
    return RC_OK;
}

static int xgmii_add_pads(void *state, struct pad_list_s *plist) {
    xgmii_state_t *s = state;
    if (!state || !plist)
        return RC_INVARG;
    if (!strcmp(plist->name, "xgmii_eth")) {
        s->rx_data = module_pad(plist->pads, "rx_data");
        s->rx_ctl  = module_pad(plist->pads, "rx_ctl");
        s->tx_data = module_pad(plist->pads, "tx_data");
        s->tx_ctl  = module_pad(plist->pads, "tx_ctl");
    }
    if (!strcmp(plist->name, "eth_clk"))
        s->clk = module_pad(plist->pads, "eth_clk");
    return RC_OK;
}

static int xgmii_start(void *b) {
    base = (struct event_base *) b;
    printf("[ethdaq_xgmii] loaded (%p)\n", base);
    return RC_OK;
}

static int xgmii_new(void **state, char *args) {
    xgmii_state_t *s = calloc(1, sizeof(*s));
    *state = s;
    if (!s)
        return RC_NOENMEM;
    s->rx_idle = IFG;
    return tapq_open(&s->tap, "ethdaq_xgmii", base, args);
}

static struct ext_module_s ext_mod = {
    "ethdaq_xgmii",
    xgmii_start,
    xgmii_new,
    xgmii_add_pads,
    NULL,
    xgmii_tick
};

int litex_sim_ext_module_init(int (*register_module)(struct ext_module_s *)) {
    // zlib's CRC table before anything could call crc32() from two threads.
    get_crc_table();
    return register_module(&ext_mod);
}
