// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// The tap's side of the simulated boards' wire modules (ethdaq_gmii, ethdaq_xgmii), compiled into
// each (static functions):
//
// - The module's arguments and pads: `module_arg`, `module_pad`.
// - The tap, opened with the host's MAC and address and read without waiting: `tapq_open`.
// - Tap to pins, a queue of TAPQ_LEN whole frames, each padded to TAPQ_MIN_FRAME bytes with its
//   FCS appended. While the queue is full the tap is not read, so frames wait in the kernel's
//   queue for the tap and, when that is full too, the kernel drops them and counts them where `ip
//   -s link` shows them (TX dropped on the tap), as a NIC's transmit queue does when the wire is
//   busy. Nothing is dropped here for want of room. A frame from the tap is read whole (TAPQ_RDBUF
//   bytes, more than any tap MTU allows); one longer than TAPQ_MAX_FRAME (without FCS) is not cut
//   to fit but dropped whole, counted and reported on the console.
//
// The module's pins take the first frame (`tapq_first`) and release it when it is on the wire
// (`tapq_pop`), which reads the tap again.

#ifndef ETHDAQ_TAPQUEUE_H
#define ETHDAQ_TAPQUEUE_H

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

#define TAPQ_MAX_FRAME 9216     // Bytes of a frame without FCS (the usual jumbo limit).
#define TAPQ_MIN_FRAME 60       // Shorter frames are padded with zeros, as a NIC does.
#define TAPQ_LEN       16       // Frames waiting: more than the wire drains between two reads.
#define TAPQ_RDBUF     65600    // Beyond the largest frame a tap passes (MTU 65535 plus header).

// The host's side of the tap.
static const char tapq_host_mac[6] = {0xaa, 0xb6, 0x24, 0x69, 0x77, 0x21};

typedef struct {
    uint8_t data[TAPQ_MAX_FRAME + 4];   // The frame and its FCS.
    size_t  len;                        // With the FCS.
} tapq_frame_t;

typedef struct {
    const char   *name;                 // The module's, in its console messages.
    tapcfg_t     *tapcfg;
    int           fd;
    struct event *ev;
    bool          reading;              // The tap's read event is armed.
    tapq_frame_t  frames[TAPQ_LEN];     // A ring, the first being sent.
    unsigned      head, count;
    uint64_t      too_long;             // Tap frames over TAPQ_MAX_FRAME, dropped whole.
    uint8_t       rdbuf[TAPQ_RDBUF];
} tapq_t;

// The module's argument `key` (a string, to be freed), NULL and a console line without it.
static char *module_arg(const char *module, const char *args, const char *key) {
    char *value = NULL;
    json_object *obj = NULL, *js = json_tokener_parse(args);
    if (js && json_object_is_type(js, json_type_object) && json_object_object_get_ex(js, key, &obj))
        value = strdup(json_object_get_string(obj));
    else
        fprintf(stderr, "[%s] no \"%s\" in the module's arguments: %s\n", module, key, args);
    if (js)
        json_object_put(js);
    return value;
}

static void *module_pad(struct pad_s *pads, const char *name) {
    for (int i = 0; pads[i].name; i++)
        if (!strcmp(pads[i].name, name))
            return pads[i].signal;
    return NULL;
}

static void tapq_arm(tapq_t *q, bool on) {
    if (on && !q->reading)
        event_add(q->ev, NULL);
    else if (!on && q->reading)
        event_del(q->ev);
    q->reading = on;
}

static void tapq_too_long(tapq_t *q, ssize_t n) {
    q->too_long++;
    // The first and then at each power of two: a flood of them does not flood the console.
    if ((q->too_long & (q->too_long - 1)) == 0)
        fprintf(stderr, "[%s] a frame of %zd bytes from the tap is longer than the simulated "
                "wire carries (%d without FCS): dropped whole (%llu so far)\n",
                q->name, n, TAPQ_MAX_FRAME, (unsigned long long) q->too_long);
}

// The tap is readable: take frames while there is room; with none left, stop reading.
static void tapq_read(int fd, short event, void *arg) {
    tapq_t *q = arg;
    (void) event;
    while (q->count < TAPQ_LEN) {
        ssize_t n = read(fd, q->rdbuf, sizeof(q->rdbuf));
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                fprintf(stderr, "[%s] reading the tap: %s\n", q->name, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if (n > TAPQ_MAX_FRAME) {
            tapq_too_long(q, n);
            continue;
        }
        tapq_frame_t *f = &q->frames[(q->head + q->count) % TAPQ_LEN];
        size_t len = (size_t) n < TAPQ_MIN_FRAME ? TAPQ_MIN_FRAME : (size_t) n;
        memcpy(f->data, q->rdbuf, n);
        memset(f->data + n, 0, len - n);
        uint32_t crc = crc32(0, f->data, len);
        for (int i = 0; i < 4; i++)
            f->data[len + i] = (crc >> (8*i)) & 0xff;
        f->len = len + 4;
        q->count++;
    }
    if (q->count == TAPQ_LEN)
        tapq_arm(q, false);
}

// The first waiting frame, NULL when none waits.
static tapq_frame_t *tapq_first(tapq_t *q) {
    return q->count ? &q->frames[q->head] : NULL;
}

// The first frame is on the wire: its place is free, and the tap is read again.
static void tapq_pop(tapq_t *q) {
    q->head = (q->head + 1) % TAPQ_LEN;
    q->count--;
    tapq_arm(q, true);
}

// The tap named by the module's argument "interface", with the host's MAC and the address of the
// argument "ip" (/24), up, read from the simulation's event loop `base`.
static int tapq_open(tapq_t *q, const char *module, struct event_base *base, const char *args) {
    q->name = module;
    char *tap = module_arg(module, args, "interface");
    char *ip  = module_arg(module, args, "ip");
    if (!tap || !ip) {
        free(tap);
        free(ip);
        return RC_JSERROR;
    }
    q->tapcfg = tapcfg_init();
    tapcfg_start(q->tapcfg, tap, 0);
    q->fd = tapcfg_get_fd(q->tapcfg);
    tapcfg_iface_set_hwaddr(q->tapcfg, tapq_host_mac, 6);
    tapcfg_iface_set_ipv4(q->tapcfg, ip, 24);
    tapcfg_iface_set_status(q->tapcfg, TAPCFG_STATUS_ALL_UP);
    free(tap);
    free(ip);
    // Read until the kernel has no frame left, never waiting: the simulation runs on.
    fcntl(q->fd, F_SETFL, fcntl(q->fd, F_GETFL) | O_NONBLOCK);
    q->ev = event_new(base, q->fd, EV_READ | EV_PERSIST, tapq_read, q);
    tapq_arm(q, true);
    return RC_OK;
}

// A frame from the pins (FCS included) whose FCS is `crc32` of the rest: 1, else 0.
static int fcs_good(const uint8_t *frame, size_t len_with_fcs, uint32_t *crc, uint32_t *fcs) {
    size_t len = len_with_fcs - 4;
    *crc = crc32(0, frame, len);
    *fcs = (uint32_t) frame[len] | (uint32_t) frame[len + 1] << 8
         | (uint32_t) frame[len + 2] << 16 | (uint32_t) frame[len + 3] << 24;
    return *crc == *fcs;
}

#endif
