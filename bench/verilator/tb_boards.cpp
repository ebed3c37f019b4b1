// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// Two boards and Linux on one switch (bench/boards2.py): boards m and s (complete SoCs, wrapped
// in top.v, as bench/ptp2.py builds them) on one 125 MHz clock, their GMII pins and a tap
// joined by a small learning switch.
//
//   Vtop tap=NAME [cycles=N] [m_osc=A] [s_osc=B] [sample=K] [queue=Q]
//
//              +--------+   GMII    +-----------------------------+   frames   +-----+
//   board m -- | m port | <-------> |  learning switch:           | <--------> | tap | -- Linux
//   board s -- | s port | <-------> |  store and forward, a queue |            +-----+
//              +--------+           |  of whole frames per port   |
//                                   +-----------------------------+
//
// The switch learns each source MAC's port; a frame to a learnt MAC goes to that port only, a
// broadcast, multicast or unknown one to every port but its own. A board's frame is forwarded
// as its pins sent it (preamble, SFD and FCS included); one to the tap loses preamble, SFD and
// FCS, a frame from the tap gains them (padded to 60 bytes, the FCS computed here). Each board
// port sends one frame after another with at least 12 idle cycles between them. A full queue
// (Q frames) drops the frame and counts it; a frame from a board with a bad FCS or TX_ER is
// counted and not forwarded. The counts are printed as "X: switch ..." lines at the end.
//
// The store-and-forward delay is the frame's length, the same both ways for frames of one
// length: PTP's Sync and Delay_Req are, so the boards' path delay measures it and their clocks
// agree as on a cable. A frame queued behind another waits for it, as in any switch.
//
// Prints each board's console lines as "M: text" / "S: text", and every K cycles (K > 0)
// "T cycle m_time_ns s_time_ns": both PTP clocks read after the same clock edge. SIGTERM or
// SIGINT ends the run after the current cycle.
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "Vtop.h"
#include "tbutil.h"
#include "verilated.h"

typedef std::vector<uint8_t> Frame;

static volatile sig_atomic_t stop_now = 0;
static void on_signal(int) { stop_now = 1; }

static uint32_t crc32(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
	}
	return ~c;
}

// One switch port: frames queued for it, and for a board port the GMII transmitter that sends
// them to the board's receive pins and the receiver that collects what the board sends.
struct Port {
	const char *name;
	size_t limit;
	std::deque<Frame> queue;
	uint64_t forwarded = 0, dropped_full = 0, bad = 0;
	// Switch to board.
	size_t pos = 0;
	int idle = 12;
	bool sending = false;
	// Board to switch.
	Frame rx;
	bool rx_er = false;

	bool push(const Frame &f) {
		if (queue.size() >= limit) {
			dropped_full++;
			return false;
		}
		queue.push_back(f);
		return true;
	}

	// The byte for the board's receive pins this cycle.
	void drive(uint8_t &data, uint8_t &dv) {
		if (!sending && idle >= 12 && !queue.empty()) {
			sending = true;
			pos = 0;
		}
		if (sending) {
			data = queue.front()[pos++];
			dv = 1;
			if (pos == queue.front().size()) {
				queue.pop_front();
				sending = false;
				idle = 0;
			}
		} else {
			data = 0;
			dv = 0;
			idle++;
		}
	}
};

struct Switch {
	std::vector<Port *> ports;            // Board ports, then the tap's.
	std::map<uint64_t, size_t> learnt;    // MAC -> port.
	int tap_fd;
	size_t tap_port;
	uint64_t tap_written = 0, tap_write_errors = 0;

	static uint64_t mac(const uint8_t *p) {
		uint64_t v = 0;
		for (int i = 0; i < 6; i++)
			v = (v << 8) | p[i];
		return v;
	}

	// `eth`: the frame from its destination MAC to its FCS; `wire`: as a board's pins carry it.
	void forward(size_t from, const uint8_t *eth, size_t len, const Frame &wire) {
		if (len < 14)
			return;
		learnt[mac(eth + 6)] = from;
		auto it = learnt.find(mac(eth));
		bool flood = (eth[0] & 1) || it == learnt.end();
		for (size_t p = 0; p < ports.size(); p++) {
			if (p == from || (!flood && it->second != p))
				continue;
			ports[from]->forwarded++;
			if (p == tap_port) {
				if (write(tap_fd, eth, len - 4) < 0)
					tap_write_errors++;
				else
					tap_written++;
			} else {
				ports[p]->push(wire);
			}
		}
	}

	// A board's transmit pins this cycle; a frame goes on when TX_EN falls.
	void collect(size_t p, uint8_t data, uint8_t en, uint8_t er) {
		Port &port = *ports[p];
		if (en) {
			port.rx.push_back(data);
			port.rx_er |= er;
			return;
		}
		if (port.rx.empty())
			return;
		Frame wire;
		wire.swap(port.rx);
		bool er_seen = port.rx_er;
		port.rx_er = false;
		size_t sfd = 0;
		while (sfd < wire.size() && wire[sfd] == 0x55)
			sfd++;
		if (er_seen || sfd >= wire.size() || wire[sfd] != 0xd5 || wire.size() - sfd - 1 < 64) {
			port.bad++;
			return;
		}
		const uint8_t *eth = wire.data() + sfd + 1;
		size_t len = wire.size() - sfd - 1;
		uint32_t fcs = eth[len - 4] | eth[len - 3] << 8 | eth[len - 2] << 16 | (uint32_t)eth[len - 1] << 24;
		if (crc32(eth, len - 4) != fcs) {
			port.bad++;
			return;
		}
		forward(p, eth, len, wire);
	}

	// Frames Linux sent, while the board ports have room for them: a frame that cannot be queued
	// stays in the kernel's queue for the tap.
	void read_tap() {
		static uint8_t buf[65600];
		for (;;) {
			for (size_t p = 0; p < tap_port; p++)
				if (ports[p]->queue.size() >= ports[p]->limit)
					return;
			ssize_t n = read(tap_fd, buf, sizeof(buf));
			if (n <= 0)
				return;
			Frame wire(8, 0x55);
			wire[7] = 0xd5;
			wire.insert(wire.end(), buf, buf + n);
			while (wire.size() < 8 + 60)
				wire.push_back(0);
			uint32_t fcs = crc32(wire.data() + 8, wire.size() - 8);
			for (int i = 0; i < 4; i++)
				wire.push_back((fcs >> (8 * i)) & 0xff);
			forward(tap_port, wire.data() + 8, wire.size() - 8, wire);
		}
	}
};

static int open_tap(const char *name)
{
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
	if (fd < 0) {
		perror("open /dev/net/tun");
		exit(2);
	}
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		perror("TUNSETIFF");
		exit(2);
	}
	return fd;
}

int main(int argc, char **argv)
{
	Verilated::commandArgs(argc, argv);
	const char *tap = text_arg(argc, argv, "tap", nullptr);
	if (!tap) {
		fprintf(stderr, "usage: Vtop tap=NAME [cycles=N] [m_osc=A] [s_osc=B] [sample=K] [queue=Q]\n");
		return 2;
	}
	uint64_t cycles = arg(argc, argv, "cycles", 0);   // 0: until SIGTERM.
	uint64_t sample = arg(argc, argv, "sample", 0);
	size_t   limit  = arg(argc, argv, "queue", 64);
	int32_t  m_osc  = (int32_t)arg(argc, argv, "m_osc", 0);
	int32_t  s_osc  = (int32_t)arg(argc, argv, "s_osc", 0);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);

	Port m{"m", limit}, s{"s", limit}, t{"tap", limit};
	Switch sw;
	sw.ports = {&m, &s, &t};
	sw.tap_port = 2;
	sw.tap_fd = open_tap(tap);
	printf("X: switch up, tap %s\n", tap);
	fflush(stdout);

	Vtop *top = new Vtop;
	Console mc{'M', {}}, sc{'S', {}};
	power_on(top, m_osc, s_osc);
	for (uint64_t k = 0; !stop_now && (cycles == 0 || k < cycles); k++) {
		if (k == 8)
			top->sys_rst = 0;
		if (k % 128 == 0)
			sw.read_tap();
		uint8_t d, v;
		m.drive(d, v);
		top->m_gmii_eth_rx_data = d;
		top->m_gmii_eth_rx_dv = v;
		top->m_gmii_eth_rx_er = 0;
		s.drive(d, v);
		top->s_gmii_eth_rx_data = d;
		top->s_gmii_eth_rx_dv = v;
		top->s_gmii_eth_rx_er = 0;
		clock_cycle(top, mc, sc);
		sw.collect(0, top->m_gmii_eth_tx_data, top->m_gmii_eth_tx_en, top->m_gmii_eth_tx_er);
		sw.collect(1, top->s_gmii_eth_tx_data, top->s_gmii_eth_tx_en, top->s_gmii_eth_tx_er);
		if (sample && k % sample == 0) {
			printf("T %llu %llu %llu\n", (unsigned long long)k,
			       (unsigned long long)top->m_ptp_time_ns, (unsigned long long)top->s_ptp_time_ns);
			fflush(stdout);
		}
	}
	for (Port *p : sw.ports)
		printf("X: switch port %s forwarded %llu dropped_full %llu bad %llu\n", p->name,
		       (unsigned long long)p->forwarded, (unsigned long long)p->dropped_full, (unsigned long long)p->bad);
	printf("X: switch tap written %llu write_errors %llu\n", (unsigned long long)sw.tap_written,
	       (unsigned long long)sw.tap_write_errors);
	fflush(stdout);
	top->final();
	delete top;
	close(sw.tap_fd);
	return 0;
}
