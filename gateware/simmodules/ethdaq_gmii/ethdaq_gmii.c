// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// The simulated board's wire to Linux: a LiteX simulation module that bridges the GMII pins to a
// tap interface (gateware/simphy.py). Derived from LiteX's gmii_ethernet module (BSD-2-Clause);
// the transmit side (pins to tap) is LiteX's, the receive side (tap to pins) differs:
//
// - Paced at the wire's rate: a frame goes on the pins as preamble, SFD, the frame padded to 60
//   bytes and its FCS, then at least IFG idle cycles before the next one, as on a real wire.
// - Back-pressure to the kernel: frames wait here in a queue of RX_QUEUE frames; while the queue
//   is full the tap is not read, so frames wait in the kernel's queue for the tap and, when that is
//   full too, the kernel drops them and counts them where `ip -s link` shows them (TX dropped on
//   the tap), as a NIC's transmit queue does when the wire is busy. Nothing is dropped here for
//   want of room, and the simulation never falls behind Linux by more than the queue.
// - Whole frames only: a frame from the tap is read whole (RDBUF bytes, more than any tap MTU
//   allows); one longer than RX_MAX_FRAME (without FCS) is not cut to fit but dropped whole,
//   counted and reported on the console. (LiteX's module reads through tapcfg's 4 KiB buffer.)

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

#define TX_MAX_LEN   9000     // Pins to tap: bytes of a frame with its FCS (LiteX's ETH_LEN).
#define RX_MAX_FRAME 9216     // Tap to pins: bytes of a frame without FCS (the usual jumbo limit).
#define RX_MIN_FRAME 60       // Shorter frames are padded with zeros, as a NIC does.
#define RX_QUEUE     16       // Frames waiting here: more than the wire drains between two reads.
#define RDBUF        65600    // Beyond the largest frame a tap passes (MTU 65535 plus header).
#define PREAMBLE     8        // Seven 0x55 and the SFD 0xD5.
#define IFG          12       // Idle cycles at least between frames on the receive pins.

// The host's side of the tap.
static const char macadr[6] = {0xaa, 0xb6, 0x24, 0x69, 0x77, 0x21};

typedef struct {
    uint8_t data[RX_MAX_FRAME + 4];   // The frame and its FCS.
    size_t  len;                      // With the FCS.
} rx_frame_t;

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

    tapcfg_t *tapcfg;
    int       tap_fd;
    struct event *ev;
    bool      reading;                // The tap's read event is armed.

    // Pins to tap.
    uint8_t tx_pkt[TX_MAX_LEN];
    size_t  tx_len;
    bool    tx_prev_en, tx_abort, tx_too_long;
    uint8_t tx_preamble;

    // Tap to pins: a ring of frames, the first being sent.
    rx_frame_t rx_queue[RX_QUEUE];
    unsigned   rx_head, rx_count;
    bool       rx_sending;
    size_t     rx_pos;                // Bytes of the first frame on the pins, preamble included.
    unsigned   rx_idle;               // Idle cycles since the last frame (saturates at IFG).
    uint64_t   rx_too_long;           // Tap frames over RX_MAX_FRAME, dropped whole.
    uint8_t    rdbuf[RDBUF];
} gmii_state_t;

static struct event_base *base = NULL;

static void rx_arm(gmii_state_t *s, bool on) {
    if (on && !s->reading)
        event_add(s->ev, NULL);
    else if (!on && s->reading)
        event_del(s->ev);
    s->reading = on;
}

// Tap to pins, one cycle: the next byte of the first waiting frame, or idle.
static void rx_adv(gmii_state_t *s) {
    if (!s->rx_sending && s->rx_count && s->rx_idle >= IFG) {
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
    rx_frame_t *f = &s->rx_queue[s->rx_head];
    if (s->rx_pos < PREAMBLE)
        *s->rx_data = (s->rx_pos == PREAMBLE - 1) ? 0xd5 : 0x55;
    else
        *s->rx_data = f->data[s->rx_pos - PREAMBLE];
    *s->rx_dv = true;
    if (++s->rx_pos == PREAMBLE + f->len) {
        s->rx_sending = false;
        s->rx_idle    = 0;
        s->rx_head    = (s->rx_head + 1) % RX_QUEUE;
        s->rx_count--;
        rx_arm(s, true);   // Room again: read the tap.
    }
}

static void rx_too_long(gmii_state_t *s, ssize_t n) {
    s->rx_too_long++;
    // The first and then at each power of two: a flood of them does not flood the console.
    if ((s->rx_too_long & (s->rx_too_long - 1)) == 0)
        fprintf(stderr, "[ethdaq_gmii] a frame of %zd bytes from the tap is longer than the simulated "
                "wire carries (%d without FCS): dropped whole (%llu so far)\n",
                n, RX_MAX_FRAME, (unsigned long long) s->rx_too_long);
}

// The tap is readable: take frames while there is room; with none left, stop reading.
static void rx_read(int fd, short event, void *arg) {
    gmii_state_t *s = arg;
    while (s->rx_count < RX_QUEUE) {
        ssize_t n = read(fd, s->rdbuf, sizeof(s->rdbuf));
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                fprintf(stderr, "[ethdaq_gmii] reading the tap: %s\n", strerror(errno));
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
            size_t len = s->tx_len - 4;
            uint32_t crc = crc32(0, s->tx_pkt, len);
            uint32_t fcs = (uint32_t) s->tx_pkt[len] | (uint32_t) s->tx_pkt[len + 1] << 8
                         | (uint32_t) s->tx_pkt[len + 2] << 16 | (uint32_t) s->tx_pkt[len + 3] << 24;
            if (crc != fcs)
                fprintf(stderr, "[ethdaq_gmii] TX packet FCS mismatch. Expected: %08x. Actual: %08x.\n", crc, fcs);
            tapcfg_write(s->tapcfg, s->tx_pkt, len);
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

static char *get_arg(const char *args, const char *name) {
    char *value = NULL;
    json_object *obj = NULL, *js = json_tokener_parse(args);
    if (js && json_object_is_type(js, json_type_object) && json_object_object_get_ex(js, name, &obj))
        value = strdup(json_object_get_string(obj));
    else
        fprintf(stderr, "[ethdaq_gmii] no \"%s\" in the module's arguments: %s\n", name, args);
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

static int gmii_add_pads(void *state, struct pad_list_s *plist) {
    gmii_state_t *s = state;
    if (!state || !plist)
        return RC_INVARG;
    if (!strcmp(plist->name, "gmii_eth")) {
        s->rx_data = pad(plist->pads, "rx_data");
        s->rx_dv   = pad(plist->pads, "rx_dv");
        s->rx_er   = pad(plist->pads, "rx_er");
        s->tx_data = pad(plist->pads, "tx_data");
        s->tx_en   = pad(plist->pads, "tx_en");
        s->tx_er   = pad(plist->pads, "tx_er");
    }
    if (!strcmp(plist->name, "sys_clk"))
        s->clk = pad(plist->pads, "sys_clk");
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
