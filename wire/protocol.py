#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Control protocol: what its messages mean and how the host builds and reads them. Every
message's fields are declared once, in the table of `ethdaq.wire.ctlformat`; the structs, field
tuples and dataclasses here are made from it, and so are the firmware's C header (`c_header()`),
the Wireshark dissector and the message tables of docs/protocol.md, which describes the protocol
for people.

All multi-byte fields are big-endian (network order). The header (8 bytes, ctlformat.HEADER):
magic u16 0xEDAC, version u8 1, type u8 (MSG_*), seq u32 (chosen by the requester, echoed in the
response).
"""

import hashlib
import hmac
import ipaddress
import dataclasses
import re
import struct
from dataclasses import dataclass

from ethdaq.wire import ctlformat as T
# The message types, codes and value names the table uses; protocol.X names them for the host.
from ethdaq.wire.ctlformat import (
    CAP_ALLOW, CAP_AUTH, CAP_DHCP, CAP_ETHERBONE, CAP_FRONTEND, CAP_LAUNCHER, CAP_NET_CONFIG, CAP_PROBES, CAP_PTP,
    CAP_RULES, CAP_STREAMER,
    DEFAULT_CTL_PORT, DEFAULT_DST_PORT, DST_UNREACHABLE, DST_VALID, EMULATOR_MODES, ERR_AUTH_FAILED,
    ERR_AUTH_REQUIRED, ERR_BAD_LENGTH, ERR_BAD_TYPE, ERR_BAD_VALUE, ERR_BAD_VERSION, ERR_BUSY, ERR_NOT_ALLOWED, ERR_NOT_CONTROLLER,
    ERR_STALE_SEQ, ERR_UNSUPPORTED, ERROR_NAMES, LAUNCH_ARM, LAUNCH_FRAME_MAX, LAUNCH_QUERY, LAUNCH_RELATIVE,
    LAUNCH_STOP, LINK_AUTONEG, LINK_FULL_DUPLEX, LINK_MISMATCH, LINK_PHY, LINK_UP, MAGIC, MAX_RULES,
    MAX_STREAMS, MIN_PAYLOAD, MSG_CLAIM, MSG_CONFIG_GET, MSG_CONFIG_SET, MSG_EMULATOR, MSG_ERROR_RSP,
    MSG_IDENTIFY, MSG_IDENTIFY_RSP, MSG_LAUNCH, MSG_PROBE, MSG_PROBE_CLEAR, MSG_PTP_STATUS, MSG_REBOOT,
    MSG_REG_READ, MSG_REG_WRITE, MSG_RELEASE, MSG_RULE_SET, MSG_RULES, MSG_RX_STATS, MSG_STATUS,
    MSG_STREAM_START, MSG_STREAM_STOP, MSG_STREAMS, NO_PHY, PROBE_CLASSES, PROBE_MAX_CLASSES, PROBE_NBINS,
    PTP_LOG_MAX, PTP_LOG_MIN, PTP_ROLES, PTP_STATES, REFUSAL_FIELD_NAMES, REFUSAL_FIELDS, REG_MAX_WORDS,
    RESET_CAUSES, RESET_POWER_ON, RESET_REBOOT, RESET_WATCHDOG, RESPONSE, RULE_ACTIONS, RULE_MATCH_PORT,
    RULE_MATCH_PROTO, RULE_MATCH_SRC, RULE_MATCH_TYPE, SERVO_STATES, STREAM_ENABLED, STREAM_PRESENT, VERSION)

HEADER = T.struct_of(T.HEADER)
_REQUEST = {m.code: T.struct_of(m.request) for m in T.MESSAGES}
_RESPONSE = {m.code: T.struct_of(m.response) for m in T.MESSAGES}

NS_PER_S = 10**9

# Error codes carried by MSG_ERROR_RSP (ctlformat.ERR_*; payload: code u8, for ERR_BAD_VALUE
# possibly a REFUSAL). ERR_BAD_VALUE: a field is out of range (e.g. payload size, channel mask).
# ERR_BUSY: STREAM_START while a run is going: stop it first. ERR_UNSUPPORTED: the board was built
# without the feature (e.g. no streamer).
# The request's seq is one of the REPLAY_HISTORY before the last this requester (IP and port) sent,
# or the last one on a different request: not executed. Send it again with a new seq.
# State-changing requests (STREAM_START, STREAM_STOP, EMULATOR, CLAIM, RELEASE) are accepted only
# from the controller: the address that claimed the board (CLAIM, or implicitly its first
# state-changing request while nobody held it), until it releases it or its lease runs out.
# ERR_NOT_CONTROLLER: another address holds the board (CLAIM says which, and for how long).
# ERR_NOT_ALLOWED: the address is not in the board's allow-list (build option --ctl-allow).
# With a shared key (build option --ctl-key-file), state-changing requests must be signed: AUTH
# appended to the request, a counter and HMAC-SHA256(key, request || counter). The counter must be
# larger than the last one the board accepted (any controller: the key is shared), which stops a
# recorded request from being replayed; hosts use their clock in ns.
# ERR_AUTH_REQUIRED: a state-changing request without AUTH on a board that has a key.
# ERR_AUTH_FAILED: wrong MAC (another key, or changed on the way), or an old counter.
# ERROR_RSP's payload: the code (ERROR_CODE), then for ERR_BAD_VALUE, when the board can say why,
# REFUSAL: the field it refused (REFUSAL_FIELDS), the value it got and the range that field takes
# there (min, max), all signed 64-bit. An answer of the code alone is a refusal without a reason
# (the board's drivers' own refusals, and checks that are no range: an address, a port the board
# needs, an offset's alignment).
ERROR_CODE = T.struct_of(T.ERROR)
REFUSAL    = T.struct_of(T.REFUSAL)
# REFUSAL_FIELDS (ctlformat): code, field (CONFIG_FIELDS' names where the field is a setting;
# others are the request's), and what else the field takes besides the range.
REFUSAL_FIELD_CODES = {name: code for code, name, _ in REFUSAL_FIELDS}
REFUSAL_FIELD_NOTES = {name: note for _, name, note in REFUSAL_FIELDS}
REFUSAL_HEX = T.refusal_hex()   # Fields whose value and range a refusal shows in hex (the table's).
assert len(REFUSAL_FIELD_CODES) == len(REFUSAL_FIELDS) == len(REFUSAL_FIELD_NAMES) and 0 not in REFUSAL_FIELD_NAMES
AUTH           = T.struct_of(T.AUTH)
KEY_MIN, KEY_MAX = 16, 64  # Key bytes.

# CLAIM request: lease in seconds (0: DEFAULT_LEASE_S; at most MAX_LEASE_S). Every accepted
# state-changing request from the controller renews the lease. CLAIM_RSP: granted (1) or held by
# another (0), the controller's IPv4 (0: none), the lease's remaining milliseconds.
# PTP_STATUS response: the firmware's IEEE 1588 port (docs/ptp-firmware.md); its fields are
# ctlformat.PTP_STATUS.
PTP_STATUS_RSP = _RESPONSE[MSG_PTP_STATUS]

# CONFIG_GET response, CONFIG_SET request (after a u32 mask) and response: the board's settings.
# Network addresses (ip, mac: the build's, --ip --mac, until CONFIG_SET changes them on a board
# with CAP_NET_CONFIG; the reply leaves from the old ones, then the board switches and announces
# the new ones by ARP; a unicast host address (BOARD_IP_INVALID) and a unicast MAC), the stream settings a
# start uses for what it does not give (`ethdaq ctl start` without options; dst_ip 0 is the
# requester of the start; STREAM_START itself carries every field and does not change these),
# the emulator's (applied at once, on every channel; EMULATOR changes them too), and the PTP port's (role 0 auto 1 master 2 slave, transport 0 UDP/IPv4 1 L2 (fixed
# at build time), domain, log2 intervals of Sync, Announce and Delay_Req (-10..6), priority1
# and 2; a change restarts the PTP port, its counters too). CONFIG_SET's mask bit i sets
# CONFIG_FIELDS[i]; other fields keep their value. Nothing is applied unless everything is
# valid: ERR_BAD_VALUE for a value out of range, ERR_UNSUPPORTED for a fixed field (CONFIG_FIXED)
# or a part the build lacks. Settings live in RAM: a reboot returns to the build's.
# The board's subnet and default gateway (netmask, gateway: the build's, --netmask --gateway, until
# CONFIG_SET changes them like ip and mac): destinations outside ip/netmask are sent to the
# gateway's MAC; gateway 0.0.0.0 is none (every destination on-link). A gateway must be a host of
# the board's subnet other than the board (route_gateway_valid).
CONFIG = T.struct_of([T.CONFIG])
CONFIG_FIELDS = T.names([T.CONFIG])
# The fields a change of which moves the board on the network (CONFIG_SET applies them after its
# answer has left, gateware/netaddr.py).
CONFIG_NET     = ("ip", "mac", "netmask", "gateway")
CONFIG_SET     = _REQUEST[MSG_CONFIG_SET]
CONFIG_FIXED   = ("ptp_transport",)
# Networks a board's own address may not be in: "this network", loopback, multicast, reserved
# and broadcast (RFC 1122, 5771, 1112). The firmware refuses them too (ERR_BAD_VALUE).
BOARD_IP_INVALID = (("0.0.0.0", 8), ("127.0.0.0", 8), ("224.0.0.0", 4), ("240.0.0.0", 4))

# REBOOT request: the boot count (STATUS boots) the requester saw. The board reboots only if that
# is still its count, so a REBOOT retransmitted after the board rebooted (its reply cache gone with
# the reset) does not reboot it again: REBOOT_RSP says rebooting (1) or not (0: it has rebooted
# since; boots tells the count now). The reply leaves before the reset.
REBOOT         = _REQUEST[MSG_REBOOT]
REBOOT_RSP     = _RESPONSE[MSG_REBOOT]
CLAIM          = _REQUEST[MSG_CLAIM]
CLAIM_RSP      = _RESPONSE[MSG_CLAIM]
DEFAULT_LEASE_S = 60
MAX_LEASE_S     = 3600
MAX_ALLOW       = 8      # Allow-list entries (address/prefix) a build takes.

# Retransmission safety: the board keeps, for each of the last REPLAY_SOURCES requesters
# (IP, port), its last request and the answer (if at most REPLAY_RSP_MAX bytes: every answer but
# a long IDENTIFY, which is read-only). The same request with the same seq again gets that answer
# again without being executed; one of the REPLAY_HISTORY seqs before it gets ERR_STALE_SEQ.
REPLAY_SOURCES = 4
REPLAY_HISTORY = 8
REPLAY_REQ_MAX = 170      # The longest request (LAUNCH) with AUTH.
REPLAY_RSP_MAX = 112     # STATUS (109 bytes) and PTP_STATUS (106) fit.

# Identify response payload, fixed part; followed by three strings, each u8 length + bytes:
# board name, build id (git hash), SoC identifier string.
# mac, ip, ctl_port, sys_clk_hz, eth_dw, nchannels, sample_bits, max_payload, capabilities (CAP_*)
IDENTIFY_FIXED = _RESPONSE[MSG_IDENTIFY]
# Then, optionally, one IDENTIFY_RATE per channel (nchannels of them, channel 0 first): the
# worst-case samples per second its user front-end declares it makes (gateware/frontend.py,
# rounded up; 0: undeclared, as on boards with the emulators). A reply that ends after the
# strings declares no rate.
IDENTIFY_RATE  = T.struct_of([T.IDENTIFY_RATE])
# Then, after the rates and only from a board with an event channel, one IDENTIFY_EVENT per
# channel: 0 for a channel of samples; 1 to EVENT_ID_BITS_MAX for a channel of events, each its
# PTP time in ns and an id of that many bits (gateware/frontend.py's event_id_bits: the words'
# layout is ethdaq.host.events'). Values above EVENT_ID_BITS_MAX are reserved for other layouts.
IDENTIFY_EVENT = T.struct_of([T.IDENTIFY_EVENT])
EVENT_ID_BITS_MAX = 31   # ev44's pixel_id is an int32: a 31-bit id is never negative.
# CAP_* (ctlformat.CAPABILITIES): IDENTIFY_RSP's capability bits, what the build has.
CAP_NAMES    = {CAP_STREAMER: "streamer", CAP_PTP: "ptp", CAP_AUTH: "signed requests", CAP_ALLOW: "allow-list",
                CAP_ETHERBONE: "ETHERBONE (raw bus access for anyone: debug build)",
                CAP_NET_CONFIG: "address change", CAP_LAUNCHER: "time-triggered launch",
                CAP_PROBES: "latency probes", CAP_RULES: "receive rules", CAP_FRONTEND: "front-end registers",
                CAP_DHCP: "dhcp client"}
MAX_STRING     = 255

# STREAM_START request (ctlformat.STREAM_CFG): where and how to stream. flush: ns a channel's
# partial datagram waits after its last sample before it leaves (FLAG_FLUSH; 0: only when full or at
# stop; else FLUSH_MIN_NS..FLUSH_MAX_NS).
STREAM_START   = _REQUEST[MSG_STREAM_START]
# The flush time's range and the build's setting. The default bounds how long a triggered
# burst's last samples wait (1 ms), and what idle flushes can cost: at most one datagram per
# channel per flush time (1000/s per channel, under 1 Mb/s of headers at 1 ms).
FLUSH_MIN_NS     = 1_000
FLUSH_MAX_NS     = 1_000_000_000
FLUSH_DEFAULT_NS = 1_000_000
STREAM_START_RSP = _RESPONSE[MSG_STREAM_START]   # run number, destination IP used
STREAM_STOP_RSP  = _RESPONSE[MSG_STREAM_STOP]    # run number that was stopped
EMULATOR       = _REQUEST[MSG_EMULATOR]          # mode, rate (x 2**-32 per cycle), seed
# The emulator's rate is a fraction of the system clock (samples per cycle per channel, 0..1) sent
# as fixed point: rate x EMULATOR_RATE_SCALE, at most EMULATOR_RATE_MAX. The default is the
# board's after boot and what `ethdaq ctl emulator` and `ethdaq sim --stream` send: 4 channels of
# 16 bits at 0.01 make 1 byte per 12.5 cycles, within every board's link at every system clock
# (the Arty's 100 Mb/s at 100 MHz: 8 MB/s of samples, 8.6 MB/s on the wire at 1472-byte payloads).
EMULATOR_RATE_SCALE   = 2**32
EMULATOR_RATE_MAX     = 2**32 - 1
EMULATOR_RATE_DEFAULT = 0.01
# STATUS response (ctlformat.STATUS): the run, the control port's counters, the controller and its
# lease, the board's resets (gateware/watchdog.py), received frames the MAC found bad, the link as
# the PHY reports it over MDIO (firmware services/phy.c) and the stream destination's ARP
# (gateware/resolver.py).
STATUS_RSP     = _RESPONSE[MSG_STATUS]
# STREAMS response (ctlformat.STREAMS): per stream, this run's counters: since its STREAM_START
# (before the first run, since boot), and after its STOP what it sent.
STREAMS_RSP    = _RESPONSE[MSG_STREAMS]
# LAUNCH: time-triggered transmission (gateware/launcher.py, docs/realtime.md). One frame, sent
# when the board's PTP clock reaches a time, once or every period, ahead of all other traffic.
#   op: LAUNCH_STOP, LAUNCH_ARM or LAUNCH_QUERY (read-only; the others are the controller's).
#   flags: LAUNCH_RELATIVE: sec/ns are an offset from the board's clock when the request arrives.
#   sec, ns (< 10^9): when the frame's first preamble byte is to be on the PHY's pins.
#   period (ns, < 10^9; 0: once), count (launches; 0: until stopped),
#   guard (transmit cycles before each launch in which other traffic starts no frame; 0: the
#     board's default, enough for the longest frame it sends otherwise),
#   frame_len, frame: the Ethernet frame from its destination MAC to the end of the payload (no
#     FCS: the board adds it, pads to 60 bytes and adds the preamble), LAUNCH_FRAME_MIN to
#     LAUNCH_FRAME_MAX bytes, then zeros to LAUNCH_FRAME_MAX.
# Answer (every op): armed, guard and lead (cycles; the board arms at launch time - (lead +
# guard) cycles), cycle_ps, launches sent, skipped because their time had passed, skipped because
# the line was busy (guard too short), and the first launch time (absolute) of the last ARM.
LAUNCH_FRAME_MIN = 14
LAUNCH     = _REQUEST[MSG_LAUNCH]
LAUNCH_RSP = _RESPONSE[MSG_LAUNCH]
LAUNCH_FIELDS = T.names(T.LAUNCH_STATUS)
# PROBE: the latency probes (gateware/probe.py, docs/realtime.md): every frame's latency per
# class, in the probe's clock cycles (cycle_ps each), from the data handed over to its first
# preamble byte on the pins (tx_*), or from its last byte on the pins to its consumer (rx_*).
# Read-only, no payload. PROBE_CLEAR (no payload, empty answer; the controller's) empties both
# probes: statistics from then on.
# Answer: cycle_ps, the classes this build measures (bit i: PROBE_CLASSES[i]), the transmit and the
# receive probe's unpaired events (an end without a start, a start whose frame never came) and
# overflows (latencies not recorded), then PROBE_MAX_CLASSES records: count, sum, sum of squares,
# min (0xFFFF before any), max, and PROBE_NBINS histogram counts (bin 0: 0 or 1 cycle; bin k: 2^k to
# 2^(k+1) - 1; the last bin: everything from 2^(PROBE_NBINS-1) on). A class the build does not
# measure reads as zeros.
PROBE_RECORD = T.struct_of(next(r for r in T.PROBE if isinstance(r, T.Records)).fields)
PROBE_RSP  = _RESPONSE[MSG_PROBE]
# RULES (read-only) and RULE_SET (the controller's): the receive classifier's rule table
# (gateware/classifier.py, docs/realtime.md). A rule matches on any of EtherType, IPv4 protocol,
# UDP destination port and IPv4 source (RULE_MATCH_* bits say which it uses), in frames to the
# board; the first enabled rule that matches decides: RULE_ACTIONS. RULE_SET: index, enable,
# action, match, ethertype, proto, port, src_ip; answered with the rule as set. A rule that drops
# or fast-tracks must match a UDP destination port, and not the control port or PTP's 319 and 320
# (the board would no longer hear its controller): ERROR_RSP 4 otherwise.
# RULES answer: the build's number of rules, frames no rule matched, the frame gate's whole-frame
# drops (bad FCS or taken by a rule, no room, oversize), then MAX_RULES records: enable, action,
# match, ethertype, proto, port, src_ip, frames matched and acted on, frames matched but refused
# (bad FCS; fast-track: a fragment or a UDP length the frame does not hold).
RULE            = T.struct_of([T.RULE])
RULE_FIELDS     = tuple(name.removeprefix("rule_") for name in T.names([T.RULE]))
RULE_RECORD     = T.struct_of(next(r for r in T.RULES if isinstance(r, T.Records)).fields)
RULES_RSP       = _RESPONSE[MSG_RULES]
# REG_READ (anybody's) and REG_WRITE (the controller's): the user front-end's CSRs, and nothing
# else on the bus. offset: bytes from the front-end's first register (a multiple of 4, as in
# csr.json: address - csr_bases["frontend"]); count: 32-bit words, 1 to REG_MAX_WORDS, in bus
# order (a register wider than 32 bits is several words, most significant first; it takes a
# write when its last word is written). REG_WRITE carries REG_MAX_WORDS words, the first `count`
# written; both answer offset, count and the words read after any write (unused words 0).
# Outside the front-end's registers, or a build without one: ERROR_RSP 4 or 3.
REG_READ  = _REQUEST[MSG_REG_READ]
REG_WORDS = T.struct_of([T.REG_WORDS])
# RX_STATS (anybody's): every received frame the board did not use, counted by cause, and the
# frames it did. The answer: a count, then that many records (code u8, value u64), in code order;
# a build lists only the counters it has (a build without the receive audit has no 0x0_/0x1_
# codes). The audit's counts are since power-up (it keeps them in RAM, which the watchdog's and
# REBOOT's reset does not clear); the others since the board's last reset, and the PTP port's
# since the port last started (CONFIG_SET of a ptp_ setting restarts it). A host that does not
# know a code shows it as code_0xNN.
#   0x00-0x1F: the receive audit (gateware/rxaudit.py): each frame the MAC passes on is counted
#              once, under "rx_ok" or under the first check it fails (in the order the
#              header's fields arrive: gateware/rxaudit.py lists it; not_ours covers three
#              checks, the destination MAC first); every one but rx_ok is dropped whole before
#              LiteEth's layers see it.
#   0x20-0x3F: drops before and after the audit (MAC framing, buffers full).
#   0x40-0x5F: control datagrams the firmware's parser dropped or refused as malformed.
#   0x60-0x7F: PTP messages the firmware's PTP port dropped as malformed.
RX_COUNTERS = (
    (0x00, "rx_ok",          "well-formed frames for the board, passed on to its network stack (or to a receive rule that takes them)"),
    (0x01, "fcs",            "bad frame check sequence"),
    (0x02, "runt",           "shorter than 64 bytes (FCS included)"),
    (0x03, "oversize",       "longer than 1518 bytes (FCS included)"),
    (0x04, "ethertype",      "an EtherType the board does not speak"),
    (0x05, "arp_malformed",  "ARP: hardware or protocol type or size, or operation, wrong"),
    (0x06, "not_ours",       "to another host: unicast MAC, ARP target or IPv4 destination not the board's"),
    (0x07, "ip_version",     "IPv4 EtherType, but version not 4 or header length under 20 bytes"),
    (0x08, "ip_options",     "IPv4 header with options (the board's stack takes 20-byte headers only)"),
    (0x09, "ip_checksum",    "IPv4 header checksum wrong"),
    (0x0A, "ip_length",      "IPv4 total length under 20 bytes, or past the frame's end (truncated)"),
    (0x0B, "ip_fragment",    "an IPv4 fragment (the board does not reassemble)"),
    (0x0C, "ip_protocol",    "an IPv4 protocol other than UDP and ICMP"),
    (0x0D, "icmp_type",      "ICMP other than an echo request"),
    (0x0E, "udp_length",     "UDP length under 8, or not the IPv4 payload's length"),
    (0x0F, "udp_empty",      "UDP datagram with no payload"),
    (0x10, "udp_port",       "UDP to a port nothing on the board listens on"),
    (0x11, "phy_error",      "the PHY signalled a receive error (RX_ER) during the frame"),
    (0x12, "broadcast",  "a control request other than IDENTIFY to a broadcast address (only discovery is answered there)"),
    (0x20, "preamble",       "bad preamble or start-of-frame delimiter (dropped by the MAC)"),
    (0x21, "rx_full",        "no room in a receive buffer (the frame gate; on a 64-bit PHY also the receive crossing)"),
    (0x22, "cpu_full",       "control or PTP datagram: the CPU's mailbox was full"),
    (0x40, "ctl_short",      "control: shorter than the header"),
    (0x41, "ctl_magic",      "control: wrong magic (not this protocol)"),
    (0x42, "ctl_response",   "control: a response sent to the board"),
    (0x43, "ctl_version",    "control: wrong protocol version"),
    (0x44, "ctl_type",       "control: unknown message type"),
    (0x45, "ctl_length",     "control: wrong length for its type"),
    (0x60, "ptp_short",      "PTP: shorter than the common header"),
    (0x61, "ptp_version",    "PTP: versionPTP not 2"),
    (0x62, "ptp_type",       "PTP: reserved messageType"),
    (0x63, "ptp_type_length", "PTP: shorter than its type's body"),
    (0x64, "ptp_length",     "PTP: messageLength past the datagram, or short of its type's"),
)
RX_COUNTER_NAMES = {code: name for code, name, _ in RX_COUNTERS}
# The receive audit's causes (their code is the index).
RX_AUDIT_CAUSES = tuple(name for code, name, _ in RX_COUNTERS if code < 0x20)
RX_STATS_MAX    = 64
assert [code for code, _, _ in RX_COUNTERS if code < 0x20] == list(range(len(RX_AUDIT_CAUSES)))
assert len(RX_COUNTERS) <= RX_STATS_MAX and len(set(RX_COUNTER_NAMES.values())) == len(RX_COUNTERS)
# In code order, each code once: the firmware answers in the table's order (CTL_RX_COUNTER_CODES).
assert [code for code, _, _ in RX_COUNTERS] == sorted(RX_COUNTER_NAMES)
RX_STATS_RECORD = T.struct_of(T.RX_STATS_RECORD)
RX_STATS_RSP_MAX = 1 + RX_STATS_MAX * RX_STATS_RECORD.size   # The answer's body at most: 577 bytes.
RX_COUNTER_DESCRIPTIONS = {name: text for _, name, text in RX_COUNTERS}
STREAM_FIELDS  = T.names(next(r for r in T.STREAMS if isinstance(r, T.Records)).fields)

# Expected request lengths (header included), checked by the firmware before anything else.
REQUEST_LENGTH = {code: HEADER.size + st.size for code, st in _REQUEST.items()}


# Field names of STREAM_START and EMULATOR, in wire order: the same settings as CONFIG's fields
# of those names (EMULATOR's with the prefix "emulator_").
STREAM_START_FIELDS = T.names(T.MESSAGE["STREAM_START"].request)
EMULATOR_FIELDS     = tuple(f"emulator_{name}" for name in T.names(T.MESSAGE["EMULATOR"].request))
# What the protocol allows of a numeric field, within its wire width (None: the width's bound).
# A board narrows payload (to its IDENTIFY max_payload) and the channel masks (to its channels):
# board_field_range.
FIELD_LIMITS = {name: f.limits for name, f in T.flatten([T.CONFIG]) if f.limits}
_CODE_BITS = {"b": 8, "h": 16, "i": 32, "q": 64}


def struct_codes(st):
    """A struct's fields as format codes, one a field ('>IH6s' -> ['I', 'H', '6s'])."""
    return [count + code if code == "s" else code
            for count, code in re.findall(r"(\d*)([a-zA-Z?])", st.format.lstrip("<>!=@"))
            for _ in range(1 if code == "s" else int(count or 1))]


def wire_range(code):
    """(lo, hi) of an integer format code: 'B' 0..255, 'b' -128..127."""
    bits = _CODE_BITS[code.lower()]
    return (0, 2**bits - 1) if code.isupper() else (-2**(bits - 1), 2**(bits - 1) - 1)


def field_range(name):
    """(lo, hi) of a numeric setting (a CONFIG_FIELDS name): its wire width in CONFIG, narrowed by
    FIELD_LIMITS."""
    lo, hi = wire_range(struct_codes(CONFIG)[CONFIG_FIELDS.index(name)])
    limit_lo, limit_hi = FIELD_LIMITS.get(name, (None, None))
    return (lo if limit_lo is None else limit_lo, hi if limit_hi is None else limit_hi)


def board_field_range(name, ident):
    """field_range narrowed to one board (an Identity): payload to its max_payload, the channel
    masks to its channels."""
    lo, hi = field_range(name)
    if name == "payload":
        hi = min(hi, ident.max_payload)
    elif name in ("enable", "backpressure"):
        hi = min(hi, (1 << ident.nchannels) - 1)
    return lo, hi


def check_field(name, value, ident=None):
    """value if the setting `name` takes it (on the board `ident`, when given), else ValueError
    naming the field and its range."""
    lo, hi = field_range(name) if ident is None else board_field_range(name, ident)
    if not lo <= value <= hi:
        what = f" on this board ({ident.nchannels} channels, max payload {ident.max_payload})" if ident else ""
        shown = (lambda v: f"0x{v:x}") if name in ("enable", "backpressure") else str
        raise ValueError(f"{name} must be from {shown(lo)} to {shown(hi)}{what}, not {shown(value)}")
    return value


class ProtocolError(ValueError):
    pass


def message_dataclass(name, items, base=object, extra=(), doc=None):
    """A dataclass with one attribute per flat field of items (ctlformat's table), in wire order,
    then `extra` ((name, type, dataclasses.field) triples); methods and properties from `base`."""
    fields = [(n, bytes if T.type_code(f.type).endswith("s") else int) for n, f in T.flatten(items)]
    cls = dataclasses.make_dataclass(name, fields + list(extra), bases=(base,))
    cls.__module__, cls.__qualname__ = __name__, name
    cls.__doc__ = doc or base.__doc__
    return cls


@dataclass(frozen=True)
class Refusal:
    """Why a board refused a value (REFUSAL): the field, the value it got and the range it takes."""
    field: int
    value: int
    lo: int
    hi: int

    @property
    def name(self):
        return REFUSAL_FIELD_NAMES.get(self.field, f"field 0x{self.field:02X}")

    def describe(self):
        """'payload 9000 out of range 64..8954'."""
        shown = (lambda v: f"0x{v:x}") if self.name in REFUSAL_HEX else str
        also = REFUSAL_FIELD_NOTES.get(self.name, "")
        return f"{self.name} {shown(self.value)} out of range {shown(self.lo)}..{shown(self.hi)}{also}"


class ErrorCode(int):
    """ERROR_RSP's body: the error code, an int, with the board's reason (a Refusal) when it gave
    one, else None."""

    def __new__(cls, code, refusal=None):
        obj = super().__new__(cls, code)
        obj.refusal = refusal
        return obj

    def describe(self):
        """The code's meaning, or the reason when the board gave one."""
        if self.refusal is not None:
            return self.refusal.describe()
        return ERROR_NAMES.get(int(self), f"error {int(self)}")


def pack_error_response(seq, code, refusal=None):
    """ERROR_RSP: the code, and the reason (a Refusal) if given."""
    out = pack_header(MSG_ERROR_RSP, seq) + ERROR_CODE.pack(code)
    if refusal is not None:
        out += REFUSAL.pack(refusal.field, refusal.value, refusal.lo, refusal.hi)
    return out


class _IdentityView:
    """IDENTIFY's answer: the fixed fields (ctlformat.IDENTIFY_FIXED), the strings, then per channel
    max_rates (samples/s its front-end declares, 0 undeclared: IDENTIFY_RATE) and event_id_bits (0
    samples, else events with an id of this many bits: IDENTIFY_EVENT)."""

    def __post_init__(self):
        # One per channel: the missing ones undeclared (rates) or channels of samples (events).
        for name in ("max_rates", "event_id_bits"):
            values = tuple(getattr(self, name))[:self.nchannels]
            setattr(self, name, values + (0,) * (self.nchannels - len(values)))

    @property
    def event_channels(self):
        """{channel: id bits} of the channels that carry events."""
        return {i: bits for i, bits in enumerate(self.event_id_bits) if bits}

    @property
    def mac_str(self):
        return ":".join(f"{b:02x}" for b in self.mac)

    @property
    def ip_str(self):
        return ".".join(str(self.ip >> s & 0xff) for s in (24, 16, 8, 0))


Identity = message_dataclass(
    "Identity", T.IDENTIFY_FIXED, _IdentityView,
    [(name, str, dataclasses.field()) for name in T.IDENTIFY_STRINGS] +
    [("max_rates", tuple, dataclasses.field(default=())), ("event_id_bits", tuple, dataclasses.field(default=()))])


def pack_header(msg_type, seq):
    return HEADER.pack(MAGIC, VERSION, msg_type, seq & 0xffffffff)


def identify_request(seq):
    return pack_header(MSG_IDENTIFY, seq)


def stream_start_request(seq, dst_ip=0, dst_port=DEFAULT_DST_PORT, payload=1472, enable=0xF, backpressure=0, gap=0,
                         dst_mac=b"\0"*6, flush=FLUSH_DEFAULT_NS):
    return pack_header(MSG_STREAM_START, seq) + STREAM_START.pack(dst_ip, dst_port, payload, enable,
                                                                 backpressure, gap, bytes(dst_mac), flush)


def stream_stop_request(seq):
    return pack_header(MSG_STREAM_STOP, seq)


def emulator_rate_fixed(fraction, name="emulator rate"):
    """The emulator's rate as users give it (a fraction of the clock, 0..1) -> its wire value.
    ValueError naming the range."""
    try:
        value = float(fraction)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 <= value <= 1:
        raise ValueError(f"{name} must be a fraction from 0 to 1 (samples per clock cycle per "
                         f"channel), not {fraction!r}")
    return min(round(value * EMULATOR_RATE_SCALE), EMULATOR_RATE_MAX)


def emulator_rate_fraction(fixed):
    """The wire value of the emulator's rate -> the fraction users type (0.01, 0.5)."""
    return 1.0 if fixed == EMULATOR_RATE_MAX else fixed / EMULATOR_RATE_SCALE


def emulator_request(seq, mode, rate, seed=1):
    return pack_header(MSG_EMULATOR, seq) + EMULATOR.pack(mode, rate, seed)


def parse_mac(text):
    """'10:e2:d5:00:00:00' (or with '-') → 6 bytes; ValueError with the reason otherwise."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) != 6:
            raise ValueError(f"MAC address must be 6 bytes, not {len(text)}")
        return bytes(text)
    parts = str(text).replace("-", ":").split(":")
    example = "six hex bytes like 10:e2:d5:00:00:00"
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"MAC address must be {example}, not {text!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"MAC address must be {example}, not {text!r}") from None


def board_ip_valid(ip):
    """Whether a board may take this IPv4 address (int) as its own."""
    return not any((ip >> (32 - bits)) == (int(ipaddress.IPv4Address(net)) >> (32 - bits))
                   for net, bits in BOARD_IP_INVALID)


def parse_netmask(text):
    """'255.255.255.0', '/24' or '24' -> the mask as an int; ValueError with a clear message."""
    text = str(text).strip()
    try:
        prefix = text.removeprefix("/")
        if prefix.isdigit():
            return int(ipaddress.IPv4Network(f"0.0.0.0/{prefix}").netmask)
        return int(ipaddress.IPv4Network(f"0.0.0.0/{text}").netmask)
    except ValueError:
        raise ValueError(f"netmask must be a prefix length 0..32 like 24 (or /24) or a mask like 255.255.255.0, "
                         f"not {text!r}") from None


def netmask_valid(mask):
    """Whether a 32-bit netmask is ones, then zeros."""
    host_bits = ~mask & 0xFFFFFFFF
    return 0 <= mask < 2**32 and host_bits & (host_bits + 1) == 0


def gateway_valid(ip, netmask, gateway):
    """Whether a board at ip/netmask can use `gateway` (ints): 0 (none), or a host of its subnet
    other than the board, not the subnet's network or broadcast address (a /31 and /32 have none).
    The firmware's route_gateway_valid (software/firmware/protocol/route.h) decides the same."""
    if gateway == 0:
        return True
    if not netmask_valid(netmask) or (gateway ^ ip) & netmask or gateway == ip:
        return False
    host = gateway & ~netmask & 0xFFFFFFFF
    return bin(netmask).count("1") >= 31 or host not in (0, ~netmask & 0xFFFFFFFF)


def next_hop(ip, netmask, gateway, dst):
    """The address whose MAC a datagram to `dst` goes to: dst itself when it is on-link (no
    gateway, broadcast or multicast, or inside ip/netmask), else the gateway."""
    if gateway == 0 or dst == 0xFFFFFFFF or dst >> 28 == 0xE or not (dst ^ ip) & netmask:
        return dst
    return gateway


def board_mac_valid(mac):
    """Whether a board may take this MAC (6 bytes) as its own: unicast, not all zero."""
    return len(mac) == 6 and not (mac[0] & 1) and any(mac)


def format_mac(mac):
    return ":".join(f"{b:02x}" for b in mac)


def status_request(seq):
    return pack_header(MSG_STATUS, seq)


def sign(request, key, counter):
    """The request with AUTH appended: counter and HMAC-SHA256(key, request || counter)."""
    tail = struct.pack(">Q", counter)
    return request + tail + hmac.new(key, request + tail, hashlib.sha256).digest()


def parse_key(text):
    """A key file's text: KEY_MIN..KEY_MAX bytes as hex (whitespace ignored); ValueError why not."""
    raw = "".join(str(text).split())
    try:
        key = bytes.fromhex(raw)
    except ValueError:
        raise ValueError("a key file holds the key as hex digits, e.g. from "
                         "`python3 -c 'import secrets; print(secrets.token_hex(32))'`") from None
    if not KEY_MIN <= len(key) <= KEY_MAX:
        raise ValueError(f"a key must be {KEY_MIN} to {KEY_MAX} bytes ({2 * KEY_MIN} to {2 * KEY_MAX} hex digits), "
                         f"not {len(key)}")
    return key


def read_key_file(path):
    """The key in a key file (parse_key); ValueError as one line naming the file otherwise."""
    from pathlib import Path
    try:
        return parse_key(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"cannot read key file {path}: {e.strerror}") from None
    except ValueError as e:
        raise ValueError(f"key file {path}: {e}") from None


def claim_request(seq, lease_s=0):
    return pack_header(MSG_CLAIM, seq) + CLAIM.pack(lease_s)


def release_request(seq):
    return pack_header(MSG_RELEASE, seq)


Config = message_dataclass("Config", [T.CONFIG], doc="CONFIG: the board's settings (ctlformat.CONFIG).")


def streams_request(seq):
    return pack_header(MSG_STREAMS, seq)


def launch_request(seq, op, frame=b"", sec=0, ns=0, period=0, count=1, guard=0, relative=False):
    if op not in (LAUNCH_STOP, LAUNCH_ARM, LAUNCH_QUERY):
        raise ProtocolError(f"launch op must be stop, arm or query, not {op!r}")
    if op == LAUNCH_ARM and not (LAUNCH_FRAME_MIN <= len(frame) <= LAUNCH_FRAME_MAX):
        raise ProtocolError(f"the launched frame must be {LAUNCH_FRAME_MIN} to {LAUNCH_FRAME_MAX} bytes "
                            f"(Ethernet header and payload, no FCS), not {len(frame)}")
    if not (0 <= ns < NS_PER_S) or not (0 <= period < NS_PER_S):
        raise ProtocolError(f"ns and period must be below 10^9, not {ns} and {period}")
    return pack_header(MSG_LAUNCH, seq) + LAUNCH.pack(op, LAUNCH_RELATIVE if relative else 0, sec, ns,
                                                      period, count, guard, len(frame), bytes(frame))


def probe_request(seq):
    return pack_header(MSG_PROBE, seq)


def probe_clear_request(seq):
    return pack_header(MSG_PROBE_CLEAR, seq)


def rules_request(seq):
    return pack_header(MSG_RULES, seq)


def check_rule(index, enable, action, match, port, ctl_port, nrules=MAX_RULES):
    """ProtocolError unless the rule is one a board takes (the firmware checks the same)."""
    if not 0 <= index < nrules:
        raise ProtocolError(f"rule index must be 0..{nrules - 1}, not {index}")
    if enable not in (0, 1) or action not in RULE_ACTIONS.values() or not 0 <= match <= 0xF:
        raise ProtocolError(f"enable 0/1, action one of {', '.join(RULE_ACTIONS)}, match bits 0..15")
    if enable and action != RULE_ACTIONS["cpu"]:
        if not match & RULE_MATCH_PORT:
            raise ProtocolError("a rule that drops or fast-tracks must match a UDP destination port")
        if port in (ctl_port, 319, 320):
            raise ProtocolError(f"a rule may not drop or fast-track UDP port {port}: the board's control "
                                f"port and PTP's 319 and 320 must reach its CPU")


def check_reg(offset, count):
    if offset % 4 or not 0 <= offset <= 0xFFFF or not 1 <= count <= REG_MAX_WORDS:
        raise ProtocolError(f"register offset must be a multiple of 4 (0..65532) and 1 to {REG_MAX_WORDS} words, "
                            f"not offset {offset} count {count}")


def reg_read_request(seq, offset, count=1):
    check_reg(offset, count)
    return pack_header(MSG_REG_READ, seq) + REG_READ.pack(offset, count)


def reg_write_request(seq, offset, words):
    words = list(words)
    check_reg(offset, len(words))
    return pack_header(MSG_REG_WRITE, seq) + REG_WORDS.pack(offset, len(words), *words,
                                                            *[0]*(REG_MAX_WORDS - len(words)))


@dataclass
class Registers:
    """REG_READ's and REG_WRITE's answer: `count` words from `offset`."""
    offset: int
    words:  list

    @classmethod
    def unpack(cls, body):
        offset, count, *words = body
        if not 1 <= count <= REG_MAX_WORDS or any(words[count:]):
            raise ProtocolError(f"register answer: {count} words, unused words not 0")
        return cls(offset, list(words[:count]))


def rx_stats_request(seq):
    return pack_header(MSG_RX_STATS, seq)


def rx_counter_name(code):
    """RX_COUNTERS' name of a code; code_0xNN for one this host does not know (a newer board's)."""
    return RX_COUNTER_NAMES.get(code, f"code_0x{code:02x}")


def rx_counter_code(name):
    """The code of a name rx_counter_name gives; ValueError for any other name."""
    for code, known, _ in RX_COUNTERS:
        if known == name:
            return code
    if re.fullmatch(r"code_0x[0-9a-f]{2}", name):
        return int(name[len("code_"):], 16)
    raise ValueError(f"no receive counter {name!r}; there are: {', '.join(RX_COUNTER_NAMES.values())}")


def rx_stats_body(records):
    """RX_STATS_RSP's body (after the header) for [(code, value)], as given (tests build bad ones)."""
    records = list(records)
    return bytes([len(records)]) + b"".join(RX_STATS_RECORD.pack(code, value) for code, value in records)


class RxStats(dict):
    """RX_STATS's answer: {counter name: value} in code order, only the counters the board's build
    has (RX_COUNTERS; a code this host does not know is kept, named code_0xNN)."""

    @classmethod
    def unpack(cls, body):
        """From the answer's bytes after the header; ProtocolError for a count past RX_STATS_MAX, a
        length that is not the count's records, or codes not in ascending order."""
        if not body:
            raise ProtocolError("RX_STATS answer: no record count")
        count = body[0]
        if count > RX_STATS_MAX:
            raise ProtocolError(f"RX_STATS answer: at most {RX_STATS_MAX} records, not {count}")
        size = 1 + count * RX_STATS_RECORD.size
        if len(body) != size:
            raise ProtocolError(f"RX_STATS answer with {count} records must be {HEADER.size + size} bytes, "
                                f"not {HEADER.size + len(body)}")
        out, last = cls(), -1
        for code, value in RX_STATS_RECORD.iter_unpack(body[1:]):
            if code <= last:
                raise ProtocolError(f"RX_STATS answer: code 0x{code:02X} after 0x{last:02X} (codes must ascend)")
            out[rx_counter_name(code)] = value
            last = code
        return out

    def records(self):
        """[(code, value)] in code order."""
        return [(rx_counter_code(name), value) for name, value in self.items()]

    def pack(self):
        return rx_stats_body(self.records())


def rule_set_request(seq, index, enable=1, action=0, match=0, ethertype=0, proto=0, port=0, src_ip=0):
    return pack_header(MSG_RULE_SET, seq) + RULE.pack(index, enable, action, match, ethertype, proto, port, src_ip)


@dataclass
class Rule:
    index:     int
    enable:    int
    action:    int
    match:     int
    ethertype: int
    proto:     int
    port:      int
    src_ip:    int
    matched:   int = 0
    refused:   int = 0

    @property
    def action_name(self):
        return {v: k for k, v in RULE_ACTIONS.items()}.get(self.action, str(self.action))

    def describe(self):
        """What it matches, in words ("any frame" when nothing)."""
        parts = []
        if self.match & RULE_MATCH_TYPE:
            parts.append(f"EtherType 0x{self.ethertype:04x}")
        if self.match & RULE_MATCH_PROTO:
            parts.append(f"IP protocol {self.proto}")
        if self.match & RULE_MATCH_PORT:
            parts.append(f"UDP port {self.port}")
        if self.match & RULE_MATCH_SRC:
            parts.append(f"from {ipaddress.IPv4Address(self.src_ip)}")
        return ", ".join(parts) or "any frame"


@dataclass
class Rules:
    """RULES' answer."""
    unmatched:     int
    gate_error:    int
    gate_full:     int
    gate_oversize: int
    rules:         list

    @classmethod
    def unpack(cls, body):
        n = body[0]
        if n > MAX_RULES:
            raise ProtocolError(f"RULES says {n} rules, at most {MAX_RULES} fit")
        per = len(RULE_RECORD.unpack(bytes(RULE_RECORD.size)))
        recs = [body[5 + per*i:5 + per*(i + 1)] for i in range(MAX_RULES)]
        if any(any(r) for r in recs[n:]):
            raise ProtocolError(f"RULES: a record past the build's {n} rules is not empty")
        return cls(*body[1:5], [Rule(i, *r) for i, r in enumerate(recs[:n])])


def rules_field_names():
    """The RULES_RSP fields, flat (the dissector's names)."""
    return (["nrules", "unmatched", "gate_error", "gate_full", "gate_oversize"] +
            [f"r{i}_{f}" for i in range(MAX_RULES) for f in list(RULE_FIELDS[1:]) + ["matched", "refused"]])


@dataclass
class ProbeClass:
    """One class's latencies, in cycles (ProbeReport.cycle_ps each)."""
    name:  str
    count: int
    sum:   int
    sumsq: int
    min:   int
    max:   int
    bins:  list

    @property
    def mean(self):
        return self.sum / self.count if self.count else None

    @property
    def std(self):
        """The standard deviation (cycles) of the latencies, from the sums (population)."""
        if not self.count:
            return None
        return max(self.sumsq / self.count - self.mean**2, 0.0) ** 0.5

    @staticmethod
    def bin_range(k):
        """The latencies (cycles) histogram bin k holds: (lowest, highest; None: no limit)."""
        lo = 0 if k == 0 else 2**k
        return lo, (None if k == PROBE_NBINS - 1 else 2**(k + 1) - 1)


@dataclass
class ProbeReport:
    """PROBE's answer: the classes this build measures, by name."""
    cycle_ps:      int
    tx_unpaired:   int
    tx_overflows:  int
    rx_unpaired:   int
    rx_overflows:  int
    classes:       dict

    @classmethod
    def unpack(cls, body):
        cycle_ps, present, txu, txo, rxu, rxo = body[:6]
        if present >> PROBE_MAX_CLASSES:
            raise ProtocolError(f"PROBE names classes beyond the {PROBE_MAX_CLASSES} known: 0x{present:02X}")
        n = 5 + PROBE_NBINS
        classes = {}
        for i, name in enumerate(PROBE_CLASSES):
            rec = body[6 + n*i:6 + n*(i + 1)]
            if present >> i & 1:
                classes[name] = ProbeClass(name, *rec[:5], list(rec[5:]))
            elif any(rec):
                raise ProtocolError(f"PROBE: class {name} is absent but its record is not empty")
        return cls(cycle_ps, txu, txo, rxu, rxo, classes)


def probe_field_names():
    """The PROBE_RSP fields, flat (the dissector's names)."""
    return (["cycle_ps", "classes", "tx_unpaired", "tx_overflows", "rx_unpaired", "rx_overflows"] +
            [f"{c}_{f}" for c in PROBE_CLASSES for f in ["count", "sum", "sumsq", "min", "max"] +
             [f"bin{k}" for k in range(PROBE_NBINS)]])


def udp_frame(dst_mac, src_mac, src_ip, dst_ip, sport, dport, payload, ttl=64):
    """An Ethernet II / IPv4 / UDP frame without FCS, for LAUNCH: the IPv4 header checksum
    computed, the UDP checksum 0 (none, as IPv4 allows). MACs as bytes, IPs as ints."""
    udp_len = 8 + len(payload)
    ip = bytearray(struct.pack(">BBHHHBBHII", 0x45, 0, 20 + udp_len, 0, 0x4000, ttl, 17, 0, src_ip, dst_ip))
    total = sum(struct.unpack(">10H", ip))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    ip[10:12] = struct.pack(">H", ~total & 0xFFFF)
    return bytes(dst_mac) + bytes(src_mac) + b"\x08\x00" + bytes(ip) + struct.pack(">HHHH", sport, dport, udp_len, 0) + bytes(payload)


LaunchStatus = message_dataclass("LaunchStatus", T.LAUNCH_STATUS, doc="LAUNCH's answer (ctlformat.LAUNCH_STATUS).")


def config_get_request(seq):
    return pack_header(MSG_CONFIG_GET, seq)


def config_set_request(seq, **fields):
    """CONFIG_SET of the given fields (CONFIG_FIELDS names); the others are sent as 0 and not set."""
    unknown = set(fields) - set(CONFIG_FIELDS)
    if unknown:
        raise ValueError(f"configuration fields must be among {', '.join(CONFIG_FIELDS)}, not {', '.join(sorted(unknown))}")
    mask = 0
    values = []
    for i, name in enumerate(CONFIG_FIELDS):
        blank = b"\0" * 6 if name in ("mac", "dst_mac") else 0
        if name in fields:
            mask |= 1 << i
        values.append(fields.get(name, blank))
    return pack_header(MSG_CONFIG_SET, seq) + CONFIG_SET.pack(mask, *values)


# The settings that take names (role and mode by name): {field: {value: name}}, from the table.
_CONFIG_NAMES = {name: f.enum for name, f in T.flatten([T.CONFIG]) if f.enum}


DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_duration_ns(text):
    """'2ms', '500us', '1.5s', '800ns' → ns. ValueError naming what is wrong."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)\s*", str(text))
    if not m:
        raise ValueError(f"a duration like 2ms, 500us, 1s or 800ns, not {text!r}")
    return round(float(m.group(1)) * DURATION_UNITS[m.group(2)])


def parse_flush(text):
    """The flush time as users give it: a duration (1us to 1s), or 0 / off → ns (0: off).
    ValueError naming the range."""
    text = str(text).strip()
    if text in ("0", "off"):
        return 0
    ns = parse_duration_ns(text)
    if not FLUSH_MIN_NS <= ns <= FLUSH_MAX_NS:
        raise ValueError(f"flush must be 0 (off) or 1us to 1s, not {text}")
    return ns


def format_duration_ns(ns):
    """ns as the shortest exact text parse_duration_ns reads back ('1ms', '250us'; '0' for 0)."""
    if ns == 0:
        return "0"
    for unit in ("s", "ms", "us"):
        if ns % DURATION_UNITS[unit] == 0:
            return f"{ns // DURATION_UNITS[unit]}{unit}"
    return f"{ns}ns"


def parse_config_assignment(text):
    """'name=value' as `ethdaq ctl config set` takes it → (name, value for config_set_request):
    addresses dotted (dst_ip) or colon-separated (dst_mac), role and mode by name, numbers in
    decimal or 0x hex. ValueError naming what is wrong."""
    name, sep, value = str(text).partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise ValueError(f"a setting must be NAME=VALUE, not {text!r}")
    if name not in CONFIG_FIELDS:
        raise ValueError(f"setting must be one of {', '.join(CONFIG_FIELDS)}, not {name!r}")
    if name in CONFIG_FIXED:
        raise ValueError(f"{name} is fixed at build time (ethdaq build --ptp-transport)")
    if name == "ip":
        try:
            ip = ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(f"ip must be dotted IPv4 like 192.168.1.50, not {value!r}") from None
        if not board_ip_valid(int(ip)):
            raise ValueError(f"ip must be a unicast host address, not {value} (loopback, multicast, "
                             f"broadcast and 0.0.0.0/8 are refused)")
        return name, int(ip)
    if name == "mac":
        mac = parse_mac(value)
        if not board_mac_valid(mac):
            raise ValueError(f"mac must be a unicast address (bit 0 of the first byte clear) and not all "
                             f"zero, not {value}")
        return name, mac
    if name == "netmask":
        return name, parse_netmask(value)
    if name == "gateway":
        try:
            return name, int(ipaddress.IPv4Address(value))
        except ValueError:
            raise ValueError(f"gateway must be dotted IPv4 like 192.168.1.254 (0.0.0.0: none), "
                             f"not {value!r}") from None
    if name == "dst_ip":
        try:
            return name, int(ipaddress.IPv4Address(value))
        except ValueError:
            raise ValueError(f"dst_ip must be dotted IPv4 like 192.168.1.100 (0.0.0.0: the host that "
                             f"starts the run), not {value!r}") from None
    if name == "dst_mac":
        return name, parse_mac(value)
    if name == "flush":
        return name, parse_flush(value)
    if name == "emulator_rate":
        return name, emulator_rate_fixed(value, name)
    names = _CONFIG_NAMES.get(name)
    if names and value in names.values():
        return name, next(k for k, v in names.items() if v == value)
    try:
        number = int(value, 0)
    except ValueError:
        choices = f" ({', '.join(names.values())} or a number)" if names else ""
        raise ValueError(f"{name} must be a number{choices}, not {value!r}") from None
    return name, check_field(name, number)


def format_config(config):
    """A Config as a dict of readable values (addresses as text, role and mode by name)."""
    d = dict(config.__dict__)
    d["ip"] = str(ipaddress.IPv4Address(d["ip"]))
    d["netmask"] = str(ipaddress.IPv4Address(d["netmask"]))
    d["gateway"] = str(ipaddress.IPv4Address(d["gateway"])) if d["gateway"] else "none"
    d["dst_ip"] = str(ipaddress.IPv4Address(d["dst_ip"])) if d["dst_ip"] else "requester"
    d["mac"] = format_mac(d["mac"])
    d["dst_mac"] = format_mac(d["dst_mac"]) if any(d["dst_mac"]) else "arp"
    d["flush"] = format_duration_ns(d["flush"]) if d["flush"] else "off"
    d["emulator_rate"] = float(f"{emulator_rate_fraction(d['emulator_rate']):.9g}")
    for name, names in _CONFIG_NAMES.items():
        d[name] = names.get(d[name], d[name])
    return d


def reboot_request(seq, boots):
    return pack_header(MSG_REBOOT, seq) + REBOOT.pack(boots)


class _StatusView:
    """STATUS's answer (ctlformat.STATUS)."""

    @property
    def link_text(self):
        """'up, 1000 Mb/s full duplex (auto-negotiated)', 'down', or why it is unknown."""
        if not self.link_flags & LINK_PHY:
            return "unknown (no PHY answers on MDIO)"
        if not self.link_flags & LINK_UP:
            return "down"
        text = "up"
        if self.link_speed:
            text += (f", {self.link_speed} Mb/s {'full' if self.link_flags & LINK_FULL_DUPLEX else 'half'} duplex"
                     f" ({'auto-negotiated' if self.link_flags & LINK_AUTONEG else 'forced'})")
        if self.link_flags & LINK_MISMATCH:
            text += ", NOT the speed of this build's PHY interface: no frames pass"
        return text

    @property
    def reset_cause_name(self):
        return RESET_CAUSES.get(self.reset_cause, f"cause {self.reset_cause}")


Status = message_dataclass("Status", T.STATUS, _StatusView)


@dataclass
class StreamCounters:
    stream:    int
    flags:     int
    datagrams: int
    bytes:     int
    dropped:   int

    @property
    def enabled(self):
        return bool(self.flags & STREAM_ENABLED)


@dataclass
class Streams:
    """STREAMS: this run's counters of each of the build's streams."""
    run:      int
    streams:  list

    @classmethod
    def unpack(cls, body):
        run, n = body[:2]
        records = [StreamCounters(i, *body[2 + 4*i:6 + 4*i]) for i in range(MAX_STREAMS)]
        if n > MAX_STREAMS:
            raise ProtocolError(f"STREAMS says {n} streams, at most {MAX_STREAMS} fit")
        if any(r.flags & STREAM_PRESENT for r in records[n:]) or any(not r.flags & STREAM_PRESENT for r in records[:n]):
            raise ProtocolError(f"STREAMS: the present flags disagree with its {n} streams")
        return cls(run, records[:n])


def streams_field_names():
    """The STREAMS_RSP fields, flat (the dissector's names)."""
    return ["run", "nstreams"] + [f"s{i}_{f}" for i in range(MAX_STREAMS) for f in STREAM_FIELDS]


class _PtpStatusView:
    """PTP_STATUS's answer (ctlformat.PTP_STATUS)."""

    @property
    def state_name(self):
        return PTP_STATES.get(self.state, f"state {self.state}")

    @property
    def servo_name(self):
        return SERVO_STATES.get(self.servo_state, f"servo {self.servo_state}")


PtpStatus = message_dataclass("PtpStatus", T.PTP_STATUS, _PtpStatusView)


def ptp_status_request(seq):
    return pack_header(MSG_PTP_STATUS, seq)


def unpack_header(data):
    if len(data) < HEADER.size:
        raise ProtocolError(f"datagram must be at least {HEADER.size} bytes, not {len(data)}")
    magic, version, msg_type, seq = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ProtocolError(f"magic must be 0x{MAGIC:04X}, not 0x{magic:04X}")
    if version != VERSION:
        raise ProtocolError(f"version must be {VERSION}, not {version}")
    return msg_type, seq


def _take_string(data, offset):
    if offset >= len(data):
        raise ProtocolError("identify response truncated before a string length")
    n = data[offset]
    end = offset + 1 + n
    if end > len(data):
        raise ProtocolError(f"identify response string of {n} bytes runs past the datagram end")
    return data[offset + 1:end].decode("ascii", errors="replace"), end


def pack_identify_response(seq, identity):
    out = pack_header(MSG_IDENTIFY_RSP, seq) + IDENTIFY_FIXED.pack(identity.mac, identity.ip,
        identity.ctl_port, identity.sys_clk_hz, identity.eth_dw, identity.nchannels,
        identity.sample_bits, identity.max_payload, identity.capabilities)
    for text in (identity.board, identity.build_id, identity.ident):
        raw = text.encode("ascii")[:MAX_STRING]
        out += bytes([len(raw)]) + raw
    for rate in identity.max_rates:
        out += IDENTIFY_RATE.pack(rate)
    if any(identity.event_id_bits):   # Only a board with an event channel sends them.
        for bits in identity.event_id_bits:
            out += IDENTIFY_EVENT.pack(bits)
    return out


def parse_response(data, expect_seq=None):
    """Parse a response datagram. Returns (msg_type, seq, body): body is an Identity for
    MSG_IDENTIFY_RSP, a tuple of the response struct's fields for the stream messages, a Status
    for MSG_STATUS's response, and the error code (an ErrorCode) for MSG_ERROR_RSP."""
    msg_type, seq = unpack_header(data)
    if expect_seq is not None and seq != expect_seq:
        raise ProtocolError(f"sequence number must be {expect_seq}, not {seq}")
    if msg_type == MSG_ERROR_RSP:
        short, full = HEADER.size + ERROR_CODE.size, HEADER.size + ERROR_CODE.size + REFUSAL.size
        if len(data) not in (short, full):
            raise ProtocolError(f"error response must be {short} or {full} bytes, not {len(data)}")
        code, = ERROR_CODE.unpack_from(data, HEADER.size)
        refusal = Refusal(*REFUSAL.unpack_from(data, short)) if len(data) == full else None
        return msg_type, seq, ErrorCode(code, refusal)
    if msg_type == MSG_RX_STATS | RESPONSE:
        return msg_type, seq, RxStats.unpack(data[HEADER.size:])
    if msg_type == MSG_IDENTIFY_RSP:
        offset = HEADER.size
        if len(data) < offset + IDENTIFY_FIXED.size:
            raise ProtocolError(f"identify response must be at least {offset + IDENTIFY_FIXED.size} bytes, not {len(data)}")
        fixed = IDENTIFY_FIXED.unpack_from(data, offset)
        offset += IDENTIFY_FIXED.size
        board,    offset = _take_string(data, offset)
        build_id, offset = _take_string(data, offset)
        ident,    offset = _take_string(data, offset)
        nchannels = fixed[list(Identity.__dataclass_fields__).index("nchannels")]
        rates, events = nchannels * IDENTIFY_RATE.size, nchannels * IDENTIFY_EVENT.size
        tail = len(data) - offset
        if tail not in (0, rates, rates + events):
            raise ProtocolError(f"identify response has {tail} bytes after its strings; it takes none, "
                                f"{nchannels} channel rates of {IDENTIFY_RATE.size} bytes, or those and "
                                f"{nchannels} event layouts of {IDENTIFY_EVENT.size} byte")
        max_rates = tuple(r for r, in IDENTIFY_RATE.iter_unpack(data[offset:offset + rates]))
        event_id_bits = tuple(data[offset + rates:])
        return msg_type, seq, Identity(*fixed, board, build_id, ident, max_rates, event_id_bits)
    # Every other response is its fixed fields alone (None: no body).
    fixed = {code | RESPONSE: (st if st.size else None) for code, st in _RESPONSE.items()
             if code not in (MSG_IDENTIFY, MSG_RX_STATS)}
    if msg_type in fixed:
        st = fixed[msg_type]
        size = HEADER.size + (st.size if st else 0)
        if len(data) != size:
            raise ProtocolError(f"response 0x{msg_type:02X} must be {size} bytes, not {len(data)}")
        if st is None:
            return msg_type, seq, ()
        body = st.unpack_from(data, HEADER.size)
        if msg_type == MSG_STATUS | RESPONSE:
            return msg_type, seq, Status(*body)
        if msg_type == MSG_PTP_STATUS | RESPONSE:
            return msg_type, seq, PtpStatus(*body)
        if msg_type == MSG_STREAMS | RESPONSE:
            return msg_type, seq, Streams.unpack(body)
        if msg_type == MSG_LAUNCH | RESPONSE:
            return msg_type, seq, LaunchStatus(*body)
        if msg_type == MSG_PROBE | RESPONSE:
            return msg_type, seq, ProbeReport.unpack(body)
        if msg_type == MSG_RULES | RESPONSE:
            return msg_type, seq, Rules.unpack(body)
        if msg_type in (MSG_REG_READ | RESPONSE, MSG_REG_WRITE | RESPONSE):
            return msg_type, seq, Registers.unpack(body)
        if msg_type == MSG_RULE_SET | RESPONSE:
            return msg_type, seq, Rule(*body)
        if msg_type in (MSG_CONFIG_GET | RESPONSE, MSG_CONFIG_SET | RESPONSE):
            return msg_type, seq, Config(*body)
        return msg_type, seq, body
    raise ProtocolError(f"unknown response type 0x{msg_type:02X}")


def c_header():
    """The C view of this module, generated into the firmware build (ctl_protocol.h)."""
    lines = [
        "/* Generated by ethdaq.wire.protocol: do not edit. */",
        "#ifndef ETHDAQ_CTL_PROTOCOL_H",
        "#define ETHDAQ_CTL_PROTOCOL_H",
        "#include <stdint.h>",
        "#include <string.h>",
        f"#define CTL_MAGIC            0x{MAGIC:04X}u",
        f"#define CTL_VERSION          {VERSION}u",
        f"#define CTL_RESPONSE         0x{RESPONSE:02X}u",
        f"#define CTL_RESET_POWER_ON   {RESET_POWER_ON}u",
        f"#define CTL_RESET_WATCHDOG   {RESET_WATCHDOG}u",
        f"#define CTL_RESET_REBOOT     {RESET_REBOOT}u",
        f"#define CTL_MAX_STREAMS      {MAX_STREAMS}u",
        f"#define CTL_LAUNCH_STOP      {LAUNCH_STOP}u",
        f"#define CTL_LAUNCH_ARM       {LAUNCH_ARM}u",
        f"#define CTL_LAUNCH_QUERY     {LAUNCH_QUERY}u",
        f"#define CTL_LAUNCH_RELATIVE  0x{LAUNCH_RELATIVE:02X}u",
        f"#define CTL_LAUNCH_FRAME_MIN {LAUNCH_FRAME_MIN}u",
        f"#define CTL_LAUNCH_FRAME_MAX {LAUNCH_FRAME_MAX}u",
        f"#define CTL_CAP_LAUNCHER     0x{CAP_LAUNCHER:02X}u",
        f"#define CTL_PROBE_MAX_CLASSES {PROBE_MAX_CLASSES}u",
        f"#define CTL_PROBE_NBINS      {PROBE_NBINS}u",
        *(f"#define CTL_PROBE_{name.upper():<16} {i}u" for i, name in enumerate(PROBE_CLASSES)),
        f"#define CTL_CAP_PROBES       0x{CAP_PROBES:02X}u",
        f"#define CTL_CAP_RULES        0x{CAP_RULES:03X}u",
        f"#define CTL_CAP_FRONTEND     0x{CAP_FRONTEND:03X}u",
        f"#define CTL_CAP_DHCP         0x{CAP_DHCP:03X}u",
        f"#define CTL_REG_MAX_WORDS    {REG_MAX_WORDS}u",
        f"#define CTL_RX_STATS_MAX     {RX_STATS_MAX}u",
        f"#define CTL_RX_STATS_RSP_MAX {RX_STATS_RSP_MAX}u",
        f"#define CTL_RX_AUDIT_CAUSES  {len(RX_AUDIT_CAUSES)}u",
        "/* RX_STATS' counters (protocol.py RX_COUNTERS): their codes, and all of them in code order. */",
        *(f"#define CTL_RX_COUNTER_{name.upper():<16} 0x{code:02X}u" for code, name, _ in RX_COUNTERS),
        "#define CTL_RX_COUNTER_CODES { " + ", ".join(f"0x{code:02X}u" for code, _, _ in RX_COUNTERS) + " }",
        f"#define CTL_MAX_RULES        {MAX_RULES}u",
        f"#define CTL_RULE_CPU         {RULE_ACTIONS['cpu']}u",
        f"#define CTL_RULE_FASTTRACK   {RULE_ACTIONS['fasttrack']}u",
        f"#define CTL_RULE_DROP        {RULE_ACTIONS['drop']}u",
        f"#define CTL_RULE_MATCH_TYPE  0x{RULE_MATCH_TYPE:X}u",
        f"#define CTL_RULE_MATCH_PROTO 0x{RULE_MATCH_PROTO:X}u",
        f"#define CTL_RULE_MATCH_PORT  0x{RULE_MATCH_PORT:X}u",
        f"#define CTL_RULE_MATCH_SRC   0x{RULE_MATCH_SRC:X}u",
        f"#define CTL_STREAM_PRESENT   0x{STREAM_PRESENT:02X}u",
        f"#define CTL_STREAM_ENABLED   0x{STREAM_ENABLED:02X}u",
        f"#define CTL_CONFIG_NFIELDS   {len(CONFIG_FIELDS)}u",
        f"#define CTL_CONFIG_FIXED     0x{sum(1 << CONFIG_FIELDS.index(n) for n in CONFIG_FIXED):X}u",
        "/* Networks a board's own address may not be in: { net, prefix bits }. */",
        "#define CTL_BOARD_IP_INVALID { " + ", ".join(
            f"{{ 0x{int(ipaddress.IPv4Address(n)):08X}u, {b} }}" for n, b in BOARD_IP_INVALID) + " }",
        f"#define CTL_PTP_LOG_MIN      ({PTP_LOG_MIN})",
        f"#define CTL_PTP_LOG_MAX      {PTP_LOG_MAX}",
        *(f"#define CTL_CFG_{name.upper():<20} (1u << {i})" for i, name in enumerate(CONFIG_FIELDS)),
        f"#define CTL_ERR_NOT_CONTROLLER {ERR_NOT_CONTROLLER}u",
        f"#define CTL_ERR_NOT_ALLOWED  {ERR_NOT_ALLOWED}u",
        f"#define CTL_DEFAULT_LEASE_S  {DEFAULT_LEASE_S}u",
        f"#define CTL_MAX_LEASE_S      {MAX_LEASE_S}u",
        f"#define CTL_MAX_ALLOW        {MAX_ALLOW}u",
        f"#define CTL_CAP_STREAMER     0x{CAP_STREAMER:02X}u",
        f"#define CTL_CAP_PTP          0x{CAP_PTP:02X}u",
        f"#define CTL_CAP_AUTH         0x{CAP_AUTH:02X}u",
        f"#define CTL_CAP_ALLOW        0x{CAP_ALLOW:02X}u",
        f"#define CTL_CAP_ETHERBONE    0x{CAP_ETHERBONE:02X}u",
        f"#define CTL_CAP_NET_CONFIG   0x{CAP_NET_CONFIG:02X}u",
        f"#define CTL_ERR_AUTH_REQUIRED {ERR_AUTH_REQUIRED}u",
        f"#define CTL_ERR_AUTH_FAILED  {ERR_AUTH_FAILED}u",
        f"#define CTL_KEY_MAX          {KEY_MAX}u",
        f"#define CTL_ERR_BAD_VALUE    {ERR_BAD_VALUE}u",
        "/* ERROR_RSP's reason for ERR_BAD_VALUE (protocol.py REFUSAL_FIELDS): the field refused. */",
        *(f"#define CTL_FIELD_{name.upper():<18} 0x{code:02X}u" for code, name, _ in REFUSAL_FIELDS),
        f"#define CTL_EMULATOR_MODE_MAX {field_range('emulator_mode')[1]}u",
        f"#define CTL_PTP_ROLE_MAX     {field_range('ptp_role')[1]}u",
        f"#define CTL_ERR_BUSY         {ERR_BUSY}u",
        f"#define CTL_ERR_UNSUPPORTED  {ERR_UNSUPPORTED}u",
        f"#define CTL_ERR_STALE_SEQ    {ERR_STALE_SEQ}u",
        f"#define CTL_REPLAY_SOURCES   {REPLAY_SOURCES}u",
        f"#define CTL_REPLAY_HISTORY   {REPLAY_HISTORY}u",
        f"#define CTL_REPLAY_REQ_MAX   {REPLAY_REQ_MAX}u",
        f"#define CTL_REPLAY_RSP_MAX   {REPLAY_RSP_MAX}u",
        f"#define CTL_MIN_PAYLOAD      {MIN_PAYLOAD}u",
        f"#define CTL_FLUSH_MIN_NS     {FLUSH_MIN_NS}u",
        f"#define CTL_FLUSH_MAX_NS     {FLUSH_MAX_NS}u",
        f"#define CTL_FLUSH_DEFAULT_NS {FLUSH_DEFAULT_NS}u",
        f"#define CTL_EMULATOR_RATE_DEFAULT {emulator_rate_fixed(EMULATOR_RATE_DEFAULT)}u",
        f"#define CTL_DST_VALID        0x{DST_VALID:02X}u",
        f"#define CTL_LINK_UP          0x{LINK_UP:02X}u",
        f"#define CTL_LINK_FULL_DUPLEX 0x{LINK_FULL_DUPLEX:02X}u",
        f"#define CTL_LINK_AUTONEG     0x{LINK_AUTONEG:02X}u",
        f"#define CTL_LINK_PHY         0x{LINK_PHY:02X}u",
        f"#define CTL_LINK_MISMATCH    0x{LINK_MISMATCH:02X}u",
        f"#define CTL_NO_PHY           0x{NO_PHY:02X}u",
        f"#define CTL_DST_UNREACHABLE  0x{DST_UNREACHABLE:02X}u",
        f"#define CTL_ERR_BAD_VERSION  {ERR_BAD_VERSION}u",
        f"#define CTL_ERR_BAD_TYPE     {ERR_BAD_TYPE}u",
        f"#define CTL_ERR_BAD_LENGTH   {ERR_BAD_LENGTH}u",
        f"#define CTL_IDENTIFY_FIXED_SIZE {IDENTIFY_FIXED.size}u",
        "",
        "/* The messages (ethdaq.wire.ctlformat's table). */",
        T.c_messages(),
        f"#define CTL_MAX_STRING       {MAX_STRING}u",
        "#endif",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    sys.stdout.write(c_header())
