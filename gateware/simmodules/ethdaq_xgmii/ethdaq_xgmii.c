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
//   standard's average. Frames wait here in a queue of RX_QUEUE; while it is full the tap is not
//   read, so the kernel's queue for the tap fills and the kernel drops and counts what does not
//   fit (as ethdaq_gmii). A frame from the tap longer than RX_MAX_FRAME is dropped whole, counted
//   and reported, never cut.

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>
#include <zlib.h>

#include "error.h"
#include "modules.h"
#include "tapcfg.h"

#define TX_MAX_LEN   (9216 + 4) // Pins to tap: bytes of a frame with its FCS.
#define RX_MAX_FRAME 9216     // Tap to pins: bytes of a frame without FCS (the usual jumbo limit).
#define RX_MIN_FRAME 60       // Shorter frames are padded with zeros, as a NIC does.
#define RX_QUEUE     16       // Frames waiting here.
#define RDBUF        65600    // Beyond the largest frame a tap passes (MTU 65535 plus header).
#define IFG          12       // Bytes at least from a frame's /T/ (included) to the next /S/.

#define CH_IDLE  0x07
#define CH_START 0xfb
#define CH_TERM  0xfd

// The host's side of the tap.
static const char macadr[6] = {0xaa, 0xb6, 0x24, 0x69, 0x77, 0x21};

typedef struct {
    uint8_t data[RX_MAX_FRAME + 4];   // The frame and its FCS.
    size_t  len;                      // With the FCS.
} rx_frame_t;

typedef enum { TX_IDLE, TX_PREAMBLE, TX_FRAME, TX_ABORT } tx_state_t;

typedef struct {
    // Pins.
    uint64_t *rx_data;
    uint8_t  *rx_ctl;
    uint64_t *tx_data;
    uint8_t  *tx_ctl;
    uint8_t  *clk;
    clk_edge_state_t clk_edge;

    tapcfg_t *tapcfg;
    int       tap_fd;
    struct event *ev;
    bool      reading;                // The tap's read event is armed.

    // Pins to tap.
    tx_state_t tx_state;
    uint8_t    tx_pkt[TX_MAX_LEN];
    size_t     tx_len;
    unsigned   tx_preamble;           // Preamble bytes seen after /S/.
    uint64_t   tx_bad;                // Frames not sent to the tap.

    // Tap to pins: a ring of frames, the first being sent.
    rx_frame_t rx_queue[RX_QUEUE];
    unsigned   rx_head, rx_count;
    bool       rx_sending;
    size_t     rx_pos;                // Bytes of the first frame on the pins after /S/ (preamble included).
    unsigned   rx_idle;               // Bytes since the last frame's /T/ (saturates at IFG).
    uint64_t   rx_too_long;           // Tap frames over RX_MAX_FRAME, dropped whole.
    uint8_t    rdbuf[RDBUF];
} xgmii_state_t;

static struct event_base *base = NULL;

static void rx_arm(xgmii_state_t *s, bool on) {
    if (on && !s->reading)
        event_add(s->ev, NULL);
    else if (!on && s->reading)
        event_del(s->ev);
    s->reading = on;
}

// Tap to pins, one lane: (ctl, byte) of the next character.
static void rx_lane(xgmii_state_t *s, unsigned lane, bool *ctl, uint8_t *byte) {
    if (!s->rx_sending) {
        if (s->rx_count && s->rx_idle >= IFG && (lane == 0 || lane == 4)) {
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
    rx_frame_t *f = &s->rx_queue[s->rx_head];
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
        s->rx_head    = (s->rx_head + 1) % RX_QUEUE;
        s->rx_count--;
        rx_arm(s, true);   // Room again: read the tap.
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

static void rx_too_long(xgmii_state_t *s, ssize_t n) {
    s->rx_too_long++;
    // The first and then at each power of two: a flood of them does not flood the console.
    if ((s->rx_too_long & (s->rx_too_long - 1)) == 0)
        fprintf(stderr, "[ethdaq_xgmii] a frame of %zd bytes from the tap is longer than the simulated "
                "wire carries (%d without FCS): dropped whole (%llu so far)\n",
                n, RX_MAX_FRAME, (unsigned long long) s->rx_too_long);
}

// The tap is readable: take frames while there is room; with none left, stop reading.
static void rx_read(int fd, short event, void *arg) {
    xgmii_state_t *s = arg;
    while (s->rx_count < RX_QUEUE) {
        ssize_t n = read(fd, s->rdbuf, sizeof(s->rdbuf));
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                fprintf(stderr, "[ethdaq_xgmii] reading the tap: %s\n", strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (n > RX_MAX_FRAME) {
            rx_too_long(s, n);
            continue;
        }
        rx_frame_t *f = &s->rx_queue[(s->rx_head + s->rx_count) % RX_QUEUE];
        size_t len = (size_t) n < RX_MIN_FRAME ? RX_MIN_FRAME : (size_t) n;
        memcpy(f->data, s->rdbuf, n);
        memset(f->data + n, 0, len - n);
        uint32_t crc = crc32(0, f->data, len);
        for (int i = 0; i < 4; i++)
            f->data[len + i] = (crc >> (8*i)) & 0xff;
        f->len = len + 4;
        s->rx_count++;
    }
    if (s->rx_count == RX_QUEUE)
        rx_arm(s, false);
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
    size_t len = s->tx_len - 4;
    uint32_t crc = crc32(0, s->tx_pkt, len);
    uint32_t fcs = (uint32_t) s->tx_pkt[len] | (uint32_t) s->tx_pkt[len + 1] << 8
                 | (uint32_t) s->tx_pkt[len + 2] << 16 | (uint32_t) s->tx_pkt[len + 3] << 24;
    if (crc != fcs) {
        fprintf(stderr, "[ethdaq_xgmii] TX packet FCS mismatch. Expected: %08x. Actual: %08x.\n", crc, fcs);
        tx_bad(s, "FCS error", lane);
        return;
    }
    tapcfg_write(s->tapcfg, s->tx_pkt, len);
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

static char *get_arg(const char *args, const char *name) {
    char *value = NULL;
    json_object *obj = NULL, *js = json_tokener_parse(args);
    if (js && json_object_is_type(js, json_type_object) && json_object_object_get_ex(js, name, &obj))
        value = strdup(json_object_get_string(obj));
    else
        fprintf(stderr, "[ethdaq_xgmii] no \"%s\" in the module's arguments: %s\n", name, args);
    if (js)
        json_object_put(js);
    return value;
}

static void *pad(struct pad_s *pads, const char *name) {
    for (int i = 0; pads[i].name; i++)
        if (!strcmp(pads[i].name, name))
            return pads[i].signal;
    return NULL;
}

static int xgmii_add_pads(void *state, struct pad_list_s *plist) {
    xgmii_state_t *s = state;
    if (!state || !plist)
        return RC_INVARG;
    if (!strcmp(plist->name, "xgmii_eth")) {
        s->rx_data = pad(plist->pads, "rx_data");
        s->rx_ctl  = pad(plist->pads, "rx_ctl");
        s->tx_data = pad(plist->pads, "tx_data");
        s->tx_ctl  = pad(plist->pads, "tx_ctl");
    }
    if (!strcmp(plist->name, "eth_clk"))
        s->clk = pad(plist->pads, "eth_clk");
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
    char *tap = get_arg(args, "interface");
    char *ip  = get_arg(args, "ip");
    if (!tap || !ip) {
        free(tap);
        free(ip);
        return RC_JSERROR;
    }
    s->tapcfg = tapcfg_init();
    tapcfg_start(s->tapcfg, tap, 0);
    s->tap_fd = tapcfg_get_fd(s->tapcfg);
    tapcfg_iface_set_hwaddr(s->tapcfg, macadr, 6);
    tapcfg_iface_set_ipv4(s->tapcfg, ip, 24);
    tapcfg_iface_set_status(s->tapcfg, TAPCFG_STATUS_ALL_UP);
    free(tap);
    free(ip);
    // Read until the kernel has no frame left, never waiting: the simulation runs on.
    fcntl(s->tap_fd, F_SETFL, fcntl(s->tap_fd, F_GETFL) | O_NONBLOCK);
    s->rx_idle = IFG;
    s->ev = event_new(base, s->tap_fd, EV_READ | EV_PERSIST, rx_read, s);
    rx_arm(s, true);
    return RC_OK;
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
