/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * udpblast: sends valid DAQ datagrams (one stream, seq 0, 1, 2, ...; 16-bit counter samples)
 * with sendmmsg, at a fixed rate or as fast as it can. bench/recvrate.py builds and runs it.
 * Each datagram's timestamp is its first sample's time on a 125 MHz sample clock (seq times the
 * samples per datagram times 8 ns), as a board's stream carries it whatever the sending rate, so
 * a merge of what it sent places every sample once in its slice.
 *
 *   udpblast --port P [--host 127.0.0.1] [--payload 1472] [--rate PPS, 0: unpaced]
 *            [--seconds S | --count N] [--cpu N] [--stream-id N] [--batch 64] [--gso 1]
 *
 * --gso N: each message of a sendmmsg call carries N datagrams back to back as one UDP GSO
 * send (UDP_SEGMENT = payload size); the kernel splits it into N separate datagrams before the
 * receiving socket, so the receiver sees exactly what N sends would give it, but the sender
 * goes through the IP stack once per N. On loopback that stack runs on the sender's CPU, and
 * without GSO it, not the receiver, is what limits the rate.
 *
 * Prints one line at exit: sent=N seconds=T user=U sys=S errors=E (CPU seconds: getrusage).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <netinet/udp.h>
#include <time.h>
#include <unistd.h>

#include "daq_format.h"

#define MAX_BATCH 1024
#define SAMPLE_PERIOD_NS 8u   /* The stream's sample clock: 125 MHz. */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void usage(const char *why)
{
	fprintf(stderr, "udpblast: %s\nusage: udpblast --port P [--host A] [--payload B] [--rate PPS] "
		"[--seconds S | --count N] [--cpu N] [--stream-id N] [--batch N] [--gso N]\n", why);
	exit(2);
}

static double number(const char *opt, const char *text, double lo, double hi)
{
	char *end;
	double v = strtod(text, &end);

	if (*end || end == text || v < lo || v > hi) {
		fprintf(stderr, "udpblast: %s must be a number in %g..%g, not '%s'\n", opt, lo, hi, text);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1";
	int port = -1, payload = 1472, cpu = -1, batch = 64, stream_id = 0, gso = 1;
	double rate = 0, seconds = 0;
	uint64_t count = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage("every option takes a value");
		if (!strcmp(a, "--host")) host = v;
		else if (!strcmp(a, "--port")) port = (int)number(a, v, 1, 65535);
		else if (!strcmp(a, "--payload")) payload = (int)number(a, v, DAQ_HEADER_LEN + 2, 65507);
		else if (!strcmp(a, "--rate")) rate = number(a, v, 0, 1e9);
		else if (!strcmp(a, "--seconds")) seconds = number(a, v, 0, 1e6);
		else if (!strcmp(a, "--count")) count = (uint64_t)number(a, v, 0, 1e15);
		else if (!strcmp(a, "--cpu")) cpu = (int)number(a, v, -1, 4095);
		else if (!strcmp(a, "--batch")) batch = (int)number(a, v, 1, MAX_BATCH);
		else if (!strcmp(a, "--stream-id")) stream_id = (int)number(a, v, 0, 65535);
		else if (!strcmp(a, "--gso")) gso = (int)number(a, v, 1, 64);
		else usage("unknown option");
		i++;
	}
	if (port < 0)
		usage("--port is required");
	if ((payload - DAQ_HEADER_LEN) % 2)
		usage("--payload minus the 40-byte header must be a whole number of 16-bit samples");
	if (seconds > 0 && rate > 0)
		count = (uint64_t)(seconds * rate + 0.5);
	if (count == 0 && seconds == 0)
		usage("--count, or --seconds, is required");
	if ((long)gso * payload > 65507)
		usage("--gso times --payload must fit one UDP datagram (65507 bytes)");
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof set, &set) < 0)
			perror("udpblast: sched_setaffinity (running unpinned)");
	}
	prctl(PR_SET_TIMERSLACK, 1UL);  /* Pacing sleeps are short: no 50 us default slack. */

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int sndbuf = 4 << 20;
	if (fd < 0 || inet_pton(AF_INET, host, &to.sin_addr) != 1) {
		perror("udpblast: socket or address");
		return 1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	if (connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
		perror("udpblast: connect");
		return 1;
	}
	if (gso > 1 && setsockopt(fd, SOL_UDP, UDP_SEGMENT, &payload, sizeof payload) < 0) {
		perror("udpblast: setsockopt(UDP_SEGMENT)");
		return 1;
	}

	/* batch messages of gso datagrams each, one buffer per datagram, filled once; only seq and
	 * timestamp change between sends. */
	int slots = batch * gso;
	uint8_t *bufs = calloc((size_t)slots, (size_t)payload);
	struct mmsghdr *msgs = calloc((size_t)batch, sizeof *msgs);
	struct iovec *iov = calloc((size_t)batch, sizeof *iov);
	unsigned samples = (unsigned)(payload - DAQ_HEADER_LEN) / 2;
	if (!bufs || !msgs || !iov) {
		perror("udpblast: calloc");
		return 1;
	}
	for (int k = 0; k < slots; k++) {
		uint8_t *d = bufs + (size_t)k * payload;
		put_be(d + DAQ_MAGIC_OFFSET, DAQ_MAGIC, 2);
		put_be(d + DAQ_VERSION_OFFSET, DAQ_VERSION, 1);
		put_be(d + DAQ_HEADER_LEN_OFFSET, DAQ_HEADER_LEN, 1);
		put_be(d + DAQ_STREAM_ID_OFFSET, (uint64_t)stream_id, 2);
		put_be(d + DAQ_SAMPLE_COUNT_OFFSET, samples, 2);
		put_be(d + DAQ_SAMPLE_BITS_OFFSET, 16, 1);
		for (unsigned s = 0; s < samples; s++)
			put_be(d + DAQ_HEADER_LEN + 2 * s, s, 2);
	}
	for (int m = 0; m < batch; m++) {
		iov[m].iov_base = bufs + (size_t)m * gso * payload;
		msgs[m].msg_hdr.msg_iov = &iov[m];
		msgs[m].msg_hdr.msg_iovlen = 1;
	}

	uint64_t burst = (uint64_t)(rate * 100e-6);
	if (burst < 1)
		burst = 1;
	if (burst > (uint64_t)slots)
		burst = (uint64_t)slots;
	uint64_t start = now_ns(), sent = 0, errors = 0;
	/* Paced: stop a little after the planned end even if behind, so a rate this sender cannot
	 * keep shows as a lower rate achieved instead of a longer run. */
	uint64_t end = seconds <= 0 ? UINT64_MAX : start + (uint64_t)(seconds * 1e9 * (rate > 0 ? 1.02 : 1.0));
	for (;;) {
		uint64_t now = now_ns(), want = (uint64_t)slots;
		if (count && sent >= count)
			break;
		if (now >= end)
			break;
		if (rate > 0) {
			/* Send in bursts of `burst` datagrams (100 us worth, at most one full batch) so
			 * that GSO and sendmmsg still batch; sleep until the next burst is due. */
			uint64_t due = (uint64_t)((double)(now - start) * rate / 1e9) + 1;
			uint64_t goal = sent + burst < count ? sent + burst : count;
			if (due < goal) {
				uint64_t at = start + (uint64_t)((double)(goal - 1) * 1e9 / rate);
				struct timespec ts = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)};
				clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
				continue;
			}
			if (due > count)
				due = count;
			if (due - sent < want)
				want = due - sent;
		}
		if (count && count - sent < want)
			want = count - sent;
		for (uint64_t k = 0; k < want; k++) {
			uint8_t *d = bufs + k * (uint64_t)payload;
			put_be(d + DAQ_SEQ_OFFSET, sent + k, 8);
			put_be(d + DAQ_TIMESTAMP_OFFSET, (sent + k) * samples * SAMPLE_PERIOD_NS, 8);
		}
		unsigned nmsg = (unsigned)((want + (uint64_t)gso - 1) / (uint64_t)gso);
		for (unsigned m = 0; m < nmsg; m++) {  /* The last message may carry fewer datagrams. */
			uint64_t n = want - (uint64_t)m * gso < (uint64_t)gso ? want - (uint64_t)m * gso : (uint64_t)gso;
			iov[m].iov_len = (size_t)n * (size_t)payload;
		}
		int r = sendmmsg(fd, msgs, nmsg, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			errors++;  /* ENOBUFS and friends: the same datagrams are tried again. */
			if (errors > 1000000) {
				perror("udpblast: sendmmsg");
				return 1;
			}
			continue;
		}
		/* Datagrams of the messages sent; a partial send resends from the first unsent seq. */
		for (int m = 0; m < r; m++)
			sent += iov[m].iov_len / (size_t)payload;
	}
	double elapsed = (double)(now_ns() - start) / 1e9;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("sent=%llu seconds=%.6f user=%.6f sys=%.6f errors=%llu\n", (unsigned long long)sent, elapsed,
	       ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
	       (unsigned long long)errors);
	return 0;
}
