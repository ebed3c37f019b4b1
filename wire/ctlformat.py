#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Control protocol messages: the one table of every message's fields, like daqformat.FIELDS for
the DAQ header.

Each message type has a request body and a response body after the 8-byte header, each a list of
named, typed, documented fields in wire order. From this table come the Python encoders and
decoders (`ethdaq.wire.protocol`'s structs, field tuples and dataclasses), the C view of the
firmware (`c_header()`: per message its size, each field's offset and a get/put function with
explicit byte order), the Wireshark dissector's fields (`ethdaq.host.dissector`) and the message
tables of docs/protocol.md (`markdown()`; `python -m ethdaq.wire.ctlformat --write` rewrites them
there). All multi-byte fields are big-endian (network order).

A field's type is its width on the wire: u8, u16, u32, u64, i8, i16, i64 (two's complement), ipv4
(u32, an address), mac (6 bytes) or bytesN (N bytes). A `Records` item repeats its fields, once per
label (flat names: label_field); a `Block` is a group of fields shared by several messages (the C
view has one set of accessors for it).
"""

import re
import struct
import sys
from collections import namedtuple
from pathlib import Path

MAGIC   = 0xEDAC
VERSION = 1
DEFAULT_CTL_PORT = 7000   # The firmware's control port unless the build says otherwise (--ctl-port).
DEFAULT_DST_PORT = 5000   # The stream's destination port a start uses unless told otherwise.

# Message types: requests have bit 7 clear; a response is the request type | RESPONSE.
RESPONSE          = 0x80
MSG_IDENTIFY      = 0x01
MSG_STREAM_START  = 0x02
MSG_STREAM_STOP   = 0x03
MSG_EMULATOR      = 0x04
MSG_STATUS        = 0x05
MSG_CLAIM         = 0x06
MSG_RELEASE       = 0x07
MSG_PTP_STATUS    = 0x08
MSG_REBOOT        = 0x09
MSG_CONFIG_GET    = 0x0A
MSG_CONFIG_SET    = 0x0B
MSG_STREAMS       = 0x0C
MSG_LAUNCH        = 0x0D
MSG_PROBE         = 0x0E
MSG_PROBE_CLEAR   = 0x0F
MSG_RULES         = 0x10
MSG_RULE_SET      = 0x11
MSG_REG_READ      = 0x12
MSG_REG_WRITE     = 0x13
MSG_RX_STATS      = 0x14
MSG_IDENTIFY_RSP  = MSG_IDENTIFY | RESPONSE
MSG_ERROR_RSP     = 0xFF

# Error codes carried by MSG_ERROR_RSP (protocol.py says when each is sent).
ERR_BAD_VERSION    = 1
ERR_BAD_TYPE       = 2
ERR_BAD_LENGTH     = 3
ERR_BAD_VALUE      = 4
ERR_BUSY           = 5
ERR_UNSUPPORTED    = 6
ERR_STALE_SEQ      = 7
ERR_NOT_CONTROLLER = 8
ERR_NOT_ALLOWED    = 9
ERR_AUTH_REQUIRED  = 10
ERR_AUTH_FAILED    = 11
ERROR_NAMES = {ERR_BAD_VERSION: "bad version", ERR_BAD_TYPE: "unknown message type",
               ERR_BAD_LENGTH: "bad length", ERR_BAD_VALUE: "value out of range",
               ERR_BUSY: "busy (a run is going: stop it first)", ERR_UNSUPPORTED: "not supported by this build",
               ERR_STALE_SEQ: "stale sequence number (not executed)",
               ERR_NOT_CONTROLLER: "another controller holds the board (ethdaq ctl claim shows which)",
               ERR_NOT_ALLOWED: "this address is not in the board's allow-list",
               ERR_AUTH_REQUIRED: "the board needs signed requests (--key-file)",
               ERR_AUTH_FAILED: "authentication failed (wrong key, or an old counter: is this host's clock behind?)"}

# ERROR_RSP's reason for ERR_BAD_VALUE (REFUSAL): code, field (CONFIG's names where the field is a
# setting; others are the request's), and what else the field takes besides its range.
REFUSAL_FIELDS = (
    (0x01, "payload",          ""),
    (0x02, "enable",           ""),
    (0x03, "backpressure",     ""),
    (0x04, "dst_port",         ""),
    (0x05, "dst_ip",           " (0: the requester)"),
    (0x06, "flush",            ", or 0"),
    (0x07, "emulator_mode",    ""),
    (0x08, "ptp_role",         ""),
    (0x09, "ptp_log_sync",     ""),
    (0x0A, "ptp_log_announce", ""),
    (0x0B, "ptp_log_delay_req", ""),
    (0x0C, "config_mask",      ""),
    (0x0D, "lease_s",          " (0: the default)"),
    (0x0E, "launch_op",        ""),
    (0x0F, "launch_flags",     ""),
    (0x10, "sec",              ""),
    (0x11, "ns",               ""),
    (0x12, "period",           ""),
    (0x13, "frame_len",        ""),
    (0x14, "rule_index",       ""),
    (0x15, "rule_enable",      ""),
    (0x16, "rule_action",      ""),
    (0x17, "rule_match",       ""),
    (0x18, "reg_count",        ""),
)
REFUSAL_FIELD_NAMES = {code: name for code, name, _ in REFUSAL_FIELDS}

# Values some fields take, by name.
EMULATOR_MODES = {"off": 0, "counter": 1, "ramp": 2, "pulse": 3}
PTP_STATES   = {1: "INITIALIZING", 2: "FAULTY", 3: "DISABLED", 4: "LISTENING", 5: "PRE_MASTER", 6: "MASTER",
                7: "PASSIVE", 8: "UNCALIBRATED", 9: "SLAVE"}
SERVO_STATES = {0: "unlocked", 1: "jump", 2: "locked"}
PTP_ROLES    = {0: "auto", 1: "master", 2: "slave"}
PTP_TRANSPORTS = {0: "udp4", 1: "l2"}
RESET_POWER_ON, RESET_WATCHDOG, RESET_REBOOT = 0, 1, 2   # gateware/watchdog.py records them
RESET_CAUSES = {RESET_POWER_ON: "power-on", RESET_WATCHDOG: "watchdog", RESET_REBOOT: "reboot"}
LAUNCH_STOP, LAUNCH_ARM, LAUNCH_QUERY = 0, 1, 2
LAUNCH_OPS = {LAUNCH_STOP: "stop", LAUNCH_ARM: "arm", LAUNCH_QUERY: "query"}
LAUNCH_RELATIVE = 0x01
RULE_ACTIONS = {"cpu": 0, "fasttrack": 1, "drop": 2}
RULE_MATCH_TYPE, RULE_MATCH_PROTO, RULE_MATCH_PORT, RULE_MATCH_SRC = 0x1, 0x2, 0x4, 0x8
DST_VALID       = 0x01  # The destination MAC is known: datagrams flow.
DST_UNREACHABLE = 0x02  # The destination did not answer ARP: datagrams wait, samples are dropped.
DST_FLAGS       = {"VALID": DST_VALID, "UNREACHABLE": DST_UNREACHABLE}
LINK_UP          = 0x01  # The PHY reports the link up.
LINK_FULL_DUPLEX = 0x02
LINK_AUTONEG     = 0x04  # Speed and duplex were auto-negotiated (else forced).
LINK_PHY         = 0x08  # A PHY answers on MDIO: the other LINK_ flags are known.
LINK_MISMATCH    = 0x10  # The link's speed is not the one this build's PHY interface runs at.
NO_PHY           = 0xFF
STREAM_PRESENT = 0x01   # The build has this stream.
STREAM_ENABLED = 0x02   # Enabled in the run.
MIN_PAYLOAD    = 64     # The smallest datagram payload a run takes, DAQ header included.
PTP_LOG_MIN, PTP_LOG_MAX = -10, 6

# IDENTIFY_RSP's capabilities: what the build has. Name (the field's bits), bit, what it means.
CAPABILITIES = (
    ("STREAMER",   0x001, "DAQ streamer (nchannels channels)"),
    ("PTP",        0x002, "PTP clock, timestamp unit and the firmware's IEEE 1588 port (PTP_STATUS)"),
    ("AUTH",       0x004, "built with a shared key: state changes need signed requests"),
    ("ALLOW",      0x008, "built with an allow-list (`--ctl-allow`)"),
    ("ETHERBONE",  0x010, "debug build with raw bus access over UDP (`--with-etherbone`): anyone can change "
                          "anything"),
    ("NET_CONFIG", 0x020, "address change: CONFIG_SET takes ip and mac (gateware/netaddr.py)"),
    ("LAUNCHER",   0x040, "time-triggered transmission: LAUNCH (gateware/launcher.py)"),
    ("PROBES",     0x080, "latency probes on every frame: PROBE (gateware/probe.py)"),
    ("RULES",      0x100, "receive classifier, its rules and counters: RULES and RULE_SET (gateware/classifier.py)"),
    ("FRONTEND",   0x200, "a user's front-end (`--frontend`), its registers: REG_READ and REG_WRITE "
                          "(gateware/frontend.py)"),
    ("DHCP",       0x400, "a DHCP client (`--dhcp`): ip, and CONFIG's netmask and gateway, are a lease's while "
                          "it has one"),
)
CAP = {name: bit for name, bit, _ in CAPABILITIES}
CAP_STREAMER, CAP_PTP, CAP_AUTH, CAP_ALLOW = CAP["STREAMER"], CAP["PTP"], CAP["AUTH"], CAP["ALLOW"]
CAP_ETHERBONE, CAP_NET_CONFIG, CAP_LAUNCHER = CAP["ETHERBONE"], CAP["NET_CONFIG"], CAP["LAUNCHER"]
CAP_PROBES, CAP_RULES, CAP_FRONTEND, CAP_DHCP = CAP["PROBES"], CAP["RULES"], CAP["FRONTEND"], CAP["DHCP"]

# Sizes of the messages' repeated parts.
MAX_STREAMS       = 8      # STREAM_START's channel mask is 8 bits.
LAUNCH_FRAME_MAX  = 96
PROBE_CLASSES     = ("tx_launch", "tx_cpu", "tx_bulk", "rx_fasttrack", "rx_udp", "rx_cpu")
PROBE_MAX_CLASSES = len(PROBE_CLASSES)
PROBE_NBINS       = 16
MAX_RULES         = 4
REG_MAX_WORDS     = 16


Field = namedtuple("Field", "name type doc unit limits enum show bits", defaults=(None, None, None, None, None))
Field.__doc__ = """One field on the wire. name: its name (in Python, C and Wireshark); type: its wire
type (module doc); doc: what it means; unit: of its value (None: none); limits: (lo, hi) the
protocol takes (None: the type's range); enum: {value: name}; show: "hex" to show it in hex;
bits: {flag name: bit} of a flag field."""
Records = namedtuple("Records", "name labels fields doc")
Records.__doc__ = """`fields` repeated once per label, in order. name: the C view's name of a record;
a field named "" is the record itself (its flat name is the label)."""
Block = namedtuple("Block", "name fields")
Block.__doc__ = """Fields several messages carry the same way (the C view has one set of accessors)."""
Message = namedtuple("Message", "code name request response access doc notes reply_notes tail",
                     defaults=("", "", ""))
Message.__doc__ = """A message type: its request and response bodies (after the header). access:
"anybody" (read-only), "controller" (changes the board's state: the controller's alone, signed on
a board with a key) or "claim" (signed, but checks the controller itself). doc: what it is for, in
a line. notes: what a user needs besides the request's fields (its ERROR_RSP codes, the command
that sends it); reply_notes: the same for the response; tail: what follows the response's fixed
fields, varying in length ("": nothing)."""

_INTS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i8": "b", "i16": "h", "i64": "q", "ipv4": "I"}


def type_code(type_):
    """A wire type's struct format code: 'u16' -> 'H', 'mac' -> '6s', 'bytes8' -> '8s'."""
    if type_ in _INTS:
        return _INTS[type_]
    if type_ == "mac":
        return "6s"
    m = re.fullmatch(r"bytes(\d+)", type_)
    if not m:
        raise ValueError(f"a field's type must be one of {', '.join(_INTS)}, mac or bytesN, not {type_!r}")
    return f"{m.group(1)}s"


def type_size(type_):
    return struct.calcsize(">" + type_code(type_))


def type_range(type_):
    """(lo, hi) of an integer wire type."""
    bits = 8 * type_size(type_)
    return (-2**(bits - 1), 2**(bits - 1) - 1) if type_.startswith("i") else (0, 2**bits - 1)


HEADER = [
    Field("magic",   "u16", f"0x{MAGIC:04X}", show="hex"),
    Field("version", "u8",  f"{VERSION}"),
    Field("type",    "u8",  "message type; responses have bit 7 set", show="hex"),
    Field("seq",     "u32", "chosen by the requester, echoed in the response"),
]

ERROR = [Field("code", "u8", "the error (ERR_*)", enum=ERROR_NAMES)]
# After ERROR's code, for ERR_BAD_VALUE when the board can say why: the field refused, the value it
# got and the range the field takes there (all of it or none of it).
REFUSAL = [
    Field("field", "u8",  "the field refused (REFUSAL_FIELDS)", enum=REFUSAL_FIELD_NAMES),
    Field("value", "i64", "the value the request carried"),
    Field("min",   "i64", "the smallest value the field takes"),
    Field("max",   "i64", "the largest (payload: the board's max_payload; enable, backpressure: 2^channels - 1)"),
]
# Appended to a signed request: a counter larger than the last the board accepted (hosts use their
# clock in ns) and HMAC-SHA256(key, request || counter).
AUTH = [
    Field("counter", "u64", "larger than the last counter the board accepted"),
    Field("mac",     "bytes32", "HMAC-SHA256(key, request || counter)"),
]

# IDENTIFY_RSP's fixed part; then three strings (u8 length + ASCII: board, build_id, ident), then
# optionally one IDENTIFY_RATE per channel, then, only from a board with an event channel, one
# IDENTIFY_EVENT per channel.
IDENTIFY_FIXED = [
    Field("mac",          "mac",  "the board's MAC"),
    Field("ip",           "ipv4", "the board's IPv4 (a DHCP lease's while it has one)"),
    Field("ctl_port",     "u16",  "the control port"),
    Field("sys_clk_hz",   "u32",  "system clock", unit="Hz"),
    Field("eth_dw",       "u8",   "the Ethernet datapath's width", unit="bits"),
    Field("nchannels",    "u8",   "streamer channels (0: no streamer)"),
    Field("sample_bits",  "u8",   "bits per sample", unit="bits"),
    Field("max_payload",  "u16",  "the largest UDP payload per datagram, DAQ header included", unit="bytes"),
    Field("capabilities", "u32",  "CAP_* bits: what the build has", show="hex", bits=CAP),
]
IDENTIFY_STRINGS = ("board", "build_id", "ident")
IDENTIFY_RATE  = Field("max_rate", "u32", "a channel's worst-case samples per second its front-end declares "
                       "(0: undeclared)", unit="samples/s")
IDENTIFY_EVENT = Field("event_id_bits", "u8", "a channel's event layout: 0 samples, 1..31 events with an id of "
                       "this many bits")

STREAM_CFG = Block("stream_cfg", [
    Field("dst_ip",       "ipv4", "stream destination (0: the host that starts the run)"),
    Field("dst_port",     "u16",  "stream destination port", limits=(1, None)),
    Field("payload",      "u16",  "UDP payload bytes per datagram, header included (64..max_payload)",
          unit="bytes", limits=(MIN_PAYLOAD, None)),
    Field("enable",       "u8",   "channel mask (not 0; only existing channels)", limits=(1, None), show="hex"),
    Field("backpressure", "u8",   "channels that stall instead of dropping", show="hex"),
    Field("gap",          "u32",  "idle PHY-clock cycles after each datagram (rate limit)", unit="cycles"),
    Field("dst_mac",      "mac",  "destination MAC; all zero: by ARP (broadcast and multicast by rule)"),
    Field("flush",        "u32",  "ns a partial datagram waits after its channel's last sample (0: off, only when "
          "full or at the stop; 1 µs..1 s; default 1 ms)", unit="ns"),
])

CONFIG = Block("config", [
    Field("ip",   "ipv4", "the board's IPv4 (the build's, `ethdaq build --ip`, until changed): a unicast host "
          "address"),
    Field("mac",  "mac",  "the board's MAC (the build's, `--mac`, until changed): unicast, not zero"),
    STREAM_CFG,
    Field("emulator_mode", "u8",  "the emulators' mode", limits=(0, max(EMULATOR_MODES.values())),
          enum={v: k for k, v in EMULATOR_MODES.items()}),
    Field("emulator_rate", "u32", "samples (or pulse probability) per cycle x 2^32"),
    Field("emulator_seed", "u32", "channel i gets seed + i"),
    Field("ptp_role",      "u8",  "the PTP port's role (auto: BMCA)", limits=(0, max(PTP_ROLES)), enum=PTP_ROLES),
    Field("ptp_transport", "u8",  "PTP over UDP/IPv4 or Ethernet (fixed: `--ptp-transport`)", enum=PTP_TRANSPORTS),
    Field("ptp_domain",    "u8",  "domainNumber"),
    Field("ptp_log_sync",      "i8", "log2 of the Sync interval, -10..6", unit="log2 s", limits=(PTP_LOG_MIN, PTP_LOG_MAX)),
    Field("ptp_log_announce",  "i8", "log2 of the Announce interval, -10..6", unit="log2 s", limits=(PTP_LOG_MIN, PTP_LOG_MAX)),
    Field("ptp_log_delay_req", "i8", "log2 of the Delay_Req interval, -10..6", unit="log2 s", limits=(PTP_LOG_MIN, PTP_LOG_MAX)),
    Field("ptp_priority1", "u8",  "BMCA priority1 (default 128)"),
    Field("ptp_priority2", "u8",  "BMCA priority2 (default 128)"),
    Field("netmask",       "ipv4", "the board's subnet (the build's `--netmask`, else the address's class, until "
          "changed): ones, then zeros"),
    Field("gateway",       "ipv4", "default gateway (the build's `--gateway` until changed; 0.0.0.0: none, every "
          "destination on-link): a host of the board's subnet other than the board, not its network or broadcast "
          "address"),
])

RULE = Block("rule", [
    Field("rule_index",     "u8",   "the rule's index"),
    Field("rule_enable",    "u8",   "1 enabled, 0 disabled"),
    Field("rule_action",    "u8",   "what the rule does with a frame it matches", enum={v: k for k, v in RULE_ACTIONS.items()}),
    Field("rule_match",     "u8",   "RULE_MATCH_* bits: which of the next four it matches on", show="hex"),
    Field("rule_ethertype", "u16",  "EtherType", show="hex"),
    Field("rule_proto",     "u8",   "IPv4 protocol"),
    Field("rule_port",      "u16",  "UDP destination port"),
    Field("rule_src_ip",    "ipv4", "IPv4 source"),
])

REG_WORDS = Block("reg_words", [
    Field("reg_offset", "u16", "bytes from the front-end's first register, a multiple of 4", unit="bytes"),
    Field("reg_count",  "u8",  "32-bit words, 1 to REG_MAX_WORDS"),
    Records("words", [f"reg_word{i}" for i in range(REG_MAX_WORDS)],
            [Field("", "u32", "a word (the first reg_count used, the rest 0)")], "the words, in bus order"),
])

STATUS = [
    Field("running",         "u8",  "1 while a run is going"),
    Field("run",             "u32", "run number"),
    Field("datagrams",       "u64", "datagrams sent since reset"),
    Field("dropped",         "u64", "samples dropped this run"),
    Field("ctl_requests",    "u32", "control requests answered"),
    Field("ctl_refused",     "u32", "control requests refused or dropped (every one not answered normally)"),
    Field("port_rx_dropped", "u32", "CPU-port datagrams dropped (receive)"),
    Field("port_tx_dropped", "u32", "CPU-port datagrams dropped (transmit)"),
    Field("arp_timeouts",    "u32", "ARP requests for the stream destination that got no answer"),
    Field("dst_flags",       "u8",  "the stream destination", show="hex", bits=DST_FLAGS),
    Field("dst_mac",         "mac", "destination MAC in use"),
    Field("stale",           "u32", "datagrams of an earlier run discarded unsent (queued for a destination that "
          "never answered)"),
    Field("ctl_replayed",    "u32", "requests answered again from the reply cache, not executed again"),
    Field("controller_ip",   "ipv4", "the controller (0: nobody holds the board)"),
    Field("lease_ms",        "u32", "the controller's lease left", unit="ms"),
    Field("boots",           "u16", "resets since power-on (a reboot or the watchdog)"),
    Field("reset_cause",     "u8",  "why the last reset happened", enum=RESET_CAUSES),
    Field("watchdog_resets", "u16", "resets the watchdog made"),
    Field("uptime_ms",       "u32", "time since this boot", unit="ms"),
    Field("rx_fcs_errors",   "u32", "received frames the MAC found with a bad FCS (since the last reset)"),
    Field("rx_preamble_errors", "u32", "received frames the MAC found with a bad preamble (since the last reset)"),
    Field("link_flags",      "u8",  "the link as the PHY reports it over MDIO", show="hex",
          bits={"UP": LINK_UP, "FULL_DUPLEX": LINK_FULL_DUPLEX, "AUTONEG": LINK_AUTONEG, "PHY": LINK_PHY,
                "MISMATCH": LINK_MISMATCH}),
    Field("link_speed",      "u16", "link speed (0: unknown)", unit="Mb/s"),
    Field("link_losses",     "u32", "link losses since boot"),
    Field("phy_address",     "u8",  "the PHY's MDIO address (0xFF: none answered)"),
    Field("phy_id",          "u32", "the PHY's identifier (registers 2 and 3)", show="hex"),
    Field("dst_mac_changes", "u32", "times the destination MAC in use was replaced by the answer to a refresh "
          "(since boot)"),
    Field("arp_refused",     "u32", "ARP frames claiming the destination's IP with another MAC that were refused "
          "(not the answer to the board's own request; since boot)"),
]

PTP_STATUS = [
    Field("state",              "u8",  "port state", enum=PTP_STATES),
    Field("servo_state",        "u8",  "servo state", enum=SERVO_STATES),
    Field("role",               "u8",  "role", enum=PTP_ROLES),
    Field("transport",          "u8",  "UDP/IPv4 or Ethernet (L2)", enum=PTP_TRANSPORTS),
    Field("offset_ns",          "i64", "last offset from the master (slave minus master)", unit="ns"),
    Field("mean_path_delay_ns", "i64", "mean path delay", unit="ns"),
    Field("freq_scaled_ppb",    "i64", "frequency adjustment", unit="ppb x 2^16"),
    Field("clock_identity",     "bytes8", "our clock identity"),
    Field("parent_identity",    "bytes8", "parent port's clock identity"),
    Field("parent_port",        "u16", "parent port number"),
    Field("gm_identity",        "bytes8", "grandmaster identity"),
    Field("gm_priority1",       "u8",  "grandmaster priority1"),
    Field("gm_priority2",       "u8",  "grandmaster priority2"),
    Field("steps_removed",      "u16", "steps removed from the grandmaster"),
    Field("utc_offset",         "i16", "UTC offset", unit="s"),
    Field("time_flags",         "u16", "time property flags", show="hex"),
    Field("steps",              "u32", "clock steps"),
    Field("announce_timeouts",  "u32", "Announce receipt timeouts"),
    Field("servo_samples",      "u32", "servo samples"),
    Field("delay_resp_missing", "u32", "Delay_Req without Delay_Resp"),
    Field("tx_ts_missing",      "u32", "event messages without TX timestamp"),
    Field("faults",             "u32", "clock faults"),
    Field("rx_ts_missing",      "u32", "event messages without RX timestamp"),
    Field("hw_rx_overflows",    "u32", "timestamp records lost in the gateware (RX)"),
    Field("hw_tx_overflows",    "u32", "timestamp records lost in the gateware (TX)"),
]

LAUNCH_REQ = [
    Field("launch_op",    "u8",  "what to do (query: read-only)", enum=LAUNCH_OPS),
    Field("launch_flags", "u8",  "LAUNCH_RELATIVE: sec/ns are an offset from the board's clock", show="hex"),
    Field("sec",          "u64", "when the frame's first preamble byte is on the PHY's pins (< 2^48)", unit="s"),
    Field("ns",           "u32", "(< 10^9)", unit="ns"),
    Field("period",       "u32", "between launches (< 10^9; 0: once)", unit="ns"),
    Field("count",        "u32", "launches in all (0: until stopped)"),
    Field("guard",        "u16", "transmit cycles before each launch in which no other frame starts (0: the "
          "board's default)", unit="cycles"),
    Field("frame_len",    "u16", "the frame's length (14..96 for arm)", unit="bytes"),
    Field("frame",        f"bytes{LAUNCH_FRAME_MAX}", "the Ethernet frame from its destination MAC to the end of "
          "its payload, no FCS, then zeros"),
]
LAUNCH_STATUS = [
    Field("armed",       "u8",  "1 while armed"),
    Field("guard",       "u16", "guard in use", unit="cycles"),
    Field("lead",        "u16", "cycles from the fire decision to the pins", unit="cycles"),
    Field("cycle_ps",    "u32", "transmit clock period", unit="ps"),
    Field("sent",        "u32", "launches sent"),
    Field("missed_past", "u32", "launches skipped because their time had passed"),
    Field("missed_busy", "u32", "launches skipped because the line was busy (guard too short)"),
    Field("first_sec",   "u64", "first launch of the last arm, absolute", unit="s"),
    Field("first_ns",    "u32", "first launch of the last arm, absolute", unit="ns"),
]

STREAMS = [
    Field("run",      "u32", "the run the counters belong to"),
    Field("nstreams", "u8",  "streams in this build"),
    Records("stream", [f"s{i}" for i in range(MAX_STREAMS)], [
        Field("flags",     "u8",  "STREAM_PRESENT, STREAM_ENABLED", show="hex"),
        Field("datagrams", "u64", "datagrams sent this run"),
        Field("bytes",     "u64", "UDP payload bytes sent this run, DAQ header included", unit="bytes"),
        Field("dropped",   "u64", "samples dropped this run"),
    ], "one per stream (past the build's streams: zeros)"),
]

PROBE = [
    Field("cycle_ps",     "u32", "the probes' clock period", unit="ps"),
    Field("classes",      "u8",  "bit i: PROBE_CLASSES[i] is measured", show="hex"),
    Field("tx_unpaired",  "u32", "transmit probe: an end without a start, or a start whose frame never came"),
    Field("tx_overflows", "u32", "transmit probe: latencies not recorded"),
    Field("rx_unpaired",  "u32", "receive probe: unpaired events"),
    Field("rx_overflows", "u32", "receive probe: latencies not recorded"),
    Records("class", list(PROBE_CLASSES), [
        Field("count", "u32", "latencies recorded"),
        Field("sum",   "u64", "their sum", unit="cycles"),
        Field("sumsq", "u64", "the sum of their squares", unit="cycles^2"),
        Field("min",   "u16", "the smallest (0xFFFF before any)", unit="cycles"),
        Field("max",   "u16", "the largest", unit="cycles"),
        Records("bin", [f"bin{k}" for k in range(PROBE_NBINS)], [
            Field("", "u32", "latencies in the bin: bin 0 0 or 1 cycle, bin k 2^k to 2^(k+1) - 1, the last "
                  "everything from 2^15 on"),
        ], "the histogram"),
    ], "one per class, in PROBE_CLASSES order (a class the build does not measure: zeros)"),
]

RULES = [
    Field("nrules",        "u8",  "rules in this build"),
    Field("unmatched",     "u32", "frames no rule matched"),
    Field("gate_error",    "u32", "the frame gate's whole-frame drops: bad FCS or taken by a rule"),
    Field("gate_full",     "u32", "the frame gate's drops: no room"),
    Field("gate_oversize", "u32", "the frame gate's drops: too long"),
    Records("rule", [f"r{i}" for i in range(MAX_RULES)], [
        Field("enable",    "u8",  "1 enabled"),
        Field("action",    "u8",  "what the rule does with a frame it matches", enum={v: k for k, v in RULE_ACTIONS.items()}),
        Field("match",     "u8",  "RULE_MATCH_* bits", show="hex"),
        Field("ethertype", "u16", "EtherType", show="hex"),
        Field("proto",     "u8",  "IPv4 protocol"),
        Field("port",      "u16", "UDP destination port"),
        Field("src_ip",    "ipv4", "IPv4 source"),
        Field("matched",   "u32", "frames matched and acted on"),
        Field("refused",   "u32", "frames matched but refused (bad FCS; fast-track: a fragment or a bad UDP length)"),
    ], "one per rule (past the build's rules: zeros)"),
]

MESSAGES = [
    Message(MSG_IDENTIFY, "IDENTIFY", [], IDENTIFY_FIXED, "anybody", "who the board is",
            reply_notes="capabilities: " + "; ".join(f"0x{bit:02X} {doc}" for _, bit, doc in CAPABILITIES),
            tail="three strings, each u8 length + ASCII: board, build id (git hash), SoC identifier; then nchannels "
                 "u32 (or none): each channel's worst-case samples per second its user front-end declares, rounded "
                 "up, 0 undeclared (docs/frontends.md); then, only from a board with an event channel, nchannels "
                 "u8: each channel's event layout, 0 a channel of samples, 1 to 31 a channel of events whose id has "
                 "that many bits (docs/frontends.md, \"Event channels\"; 32 to 255 reserved). A reply ending after "
                 "the strings or after the rates parses: every channel carries samples"),
    Message(MSG_STREAM_START, "STREAM_START", [STREAM_CFG], [
        Field("run",    "u32",  "the run number"),
        Field("dst_ip", "ipv4", "the destination used"),
    ], "controller", "start a run with these settings", notes="ERROR_RSP 5 while a run is going"),
    Message(MSG_STREAM_STOP, "STREAM_STOP", [], [Field("run", "u32", "the run that was stopped")], "controller",
            "stop the run", notes="each enabled channel sends its partial datagram flagged LAST"),
    Message(MSG_EMULATOR, "EMULATOR", [
        Field("mode", "u8",  "the emulators' mode", enum={v: k for k, v in EMULATOR_MODES.items()}),
        Field("rate", "u32", "samples per cycle per channel x 2^32"),
        Field("seed", "u32", "channel i gets seed + i"),
    ], [], "controller", "the emulators' mode, rate and seed, on every channel",
            notes="in pulse mode the rate is the probability of a pulse in each cycle, so arrivals are a Poisson "
                  "process; the seed restarts both generators. A pulse's sample is its amplitude, uniform over the "
                  "sample range (0 to 65535 at 16 bits, mean 32767.5), drawn independently of its arrival "
                  "(gateware/emulator.py)"),
    Message(MSG_STATUS, "STATUS", [], STATUS, "anybody", "the run, counters, controller, boot and link",
            notes="`ethdaq ctl status`"),
    Message(MSG_CLAIM, "CLAIM", [
        Field("lease_s", "u16", "lease length (0: the default; at most MAX_LEASE_S)", unit="s"),
    ], [
        Field("granted",       "u8",   "1 granted, 0 held by another"),
        Field("controller_ip", "ipv4", "the controller (0: none)"),
        Field("lease_ms",      "u32",  "the lease left", unit="ms"),
    ], "claim", "become the controller", notes="lease 0: 60 s, at most 3600 s ([Who may change the board](#who-may-change-the-board))"),
    Message(MSG_RELEASE, "RELEASE", [], [], "claim", "stop being the controller"),
    Message(MSG_PTP_STATUS, "PTP_STATUS", [], PTP_STATUS, "anybody", "the firmware's IEEE 1588 port",
            notes="ERROR_RSP 6 in a build without PTP. `ethdaq ctl ptp [--json]`"),
    Message(MSG_REBOOT, "REBOOT", [Field("boots", "u16", "the boot count the requester saw in STATUS")], [
        Field("rebooting", "u8",  "1 rebooting; 0 the board has rebooted since that count"),
        Field("boots",     "u16", "the boot count now"),
    ], "controller", "reboot, if the board has not rebooted since the requester looked",
            reply_notes="sent before the reset ([Reboot and the watchdog](#reboot-and-the-watchdog))"),
    Message(MSG_CONFIG_GET, "CONFIG_GET", [], [CONFIG], "anybody", "the board's settings",
            notes="CONFIG: [Configuration](#configuration-config_get-config_set)"),
    Message(MSG_CONFIG_SET, "CONFIG_SET", [
        Field("mask", "u32", "bit i sets CONFIG's field i; the others keep their value", show="hex"),
        CONFIG,
    ], [CONFIG], "controller", "change the settings in the mask; answered with all of them",
            notes="fields outside the mask are ignored"),
    Message(MSG_STREAMS, "STREAMS", [], STREAMS, "anybody", "this run's counters of each stream",
            notes="ERROR_RSP 6 in a build without a streamer. `ethdaq ctl status` prints them as a table",
            reply_notes="all this run (since its STREAM_START; before the first run, since boot)"),
    Message(MSG_LAUNCH, "LAUNCH", LAUNCH_REQ, LAUNCH_STATUS, "controller",
            "time-triggered transmission (query: anybody's)",
            notes="ERROR_RSP 4 for a first launch too soon to arm in time, 6 in a build without the launcher. "
                  "`ethdaq ctl launch arm|stop|status`; docs/realtime.md"),
    Message(MSG_PROBE, "PROBE", [], PROBE, "anybody", "the latency probes",
            notes="ERROR_RSP 6 in a build without the probes (`--with-probes`). `ethdaq ctl probe`; docs/realtime.md",
            reply_notes="answered afresh, never from the reply cache"),
    Message(MSG_PROBE_CLEAR, "PROBE_CLEAR", [], [], "controller", "empty the latency probes",
            notes="both probes' statistics and counters. `ethdaq ctl probe clear`"),
    Message(MSG_RULES, "RULES", [], RULES, "anybody", "the receive classifier's rules and counters",
            notes="ERROR_RSP 6 in a build without the receive classifier. `ethdaq ctl rules`; docs/realtime.md"),
    Message(MSG_RULE_SET, "RULE_SET", [RULE], [RULE], "controller", "set one receive rule; answered with it",
            notes="ERROR_RSP 4 for an index past the build's rules, an unknown action or match bit, or an enabled "
                  "drop or fast-track rule that does not match a UDP port, or matches the control port or PTP's "
                  "319/320 (the board would no longer hear its controller). "
                  "`ethdaq ctl rules set 1 action=drop port=9100`"),
    Message(MSG_REG_READ, "REG_READ", [Field("reg_offset", "u16", "bytes from the front-end's first register, "
                                             "a multiple of 4", unit="bytes"),
                                       Field("reg_count", "u8", "32-bit words, 1 to REG_MAX_WORDS")],
            [REG_WORDS], "anybody", "read the front-end's registers",
            notes="the offset is csr.json's address minus `csr_bases.frontend`. Only the front-end's registers "
                  "(docs/frontends.md), never the rest of the bus: ERROR_RSP 4 past them, 3 in a build without a "
                  "front-end. `ethdaq ctl regs --csr build/x/csr.json`"),
    Message(MSG_REG_WRITE, "REG_WRITE", [REG_WORDS], [REG_WORDS], "controller",
            "write the front-end's registers; answered with them read back",
            notes="the first reg_count words are written in order: a register wider than 32 bits is several words, "
                  "most significant first, and takes the write at its last word. "
                  "`ethdaq ctl regs threshold=1500 --csr build/x/csr.json`"),
    Message(MSG_RX_STATS, "RX_STATS", [], [Field("count", "u8", "records that follow (code u8, value u64), "
                                                 "codes ascending")],
            "anybody", "received frames the board did not use, by cause", notes="`ethdaq ctl rx` (below)",
            tail="`count` records (at most 64) in ascending code order: code (u8), value (u64); only the counters "
                 "the build has ([Received frames by cause](#received-frames-by-cause-rx_stats))"),
]
MESSAGE = {m.name: m for m in MESSAGES}
# The fields after a response's fixed ones that vary in number: RX_STATS_RSP's records.
RX_STATS_RECORD = [Field("code", "u8", "the counter (RX_COUNTERS)"), Field("value", "u64", "its count")]


def response_name(message):
    return f"{message.name}_RSP"


def flatten(items, prefix=""):
    """[(flat name, Field)] of items in wire order: records repeated, blocks opened."""
    out = []
    for item in items:
        if isinstance(item, Block):
            out += flatten(item.fields, prefix)
        elif isinstance(item, Records):
            for label in item.labels:
                out += flatten(item.fields, f"{prefix}{label}_")
        else:
            name = f"{prefix}{item.name}" if item.name else prefix.rstrip("_")
            out.append((name, item))
    return out


def names(items):
    """The flat field names of items, in wire order."""
    return tuple(name for name, _ in flatten(items))


def struct_of(items):
    """The struct.Struct that packs items' flat fields, in wire order."""
    return struct.Struct(">" + "".join(type_code(f.type) for _, f in flatten(items)))


def size(items):
    return struct_of(items).size


def bodies():
    """[(type code, name, items, message)] of every message body, requests then responses, and
    ERROR_RSP's."""
    out = [(m.code, m.name, m.request, m) for m in MESSAGES]
    out += [(m.code | RESPONSE, response_name(m), m.response, m) for m in MESSAGES]
    out.append((MSG_ERROR_RSP, "ERROR_RSP", ERROR, None))
    return out


def _check():
    codes = [m.code for m in MESSAGES]
    assert len(set(codes)) == len(codes) and all(c < RESPONSE for c in codes)
    for _, name, items, _ in bodies():
        flat = names(items)
        assert len(set(flat)) == len(flat), f"{name}: a field name twice"
        for _, f in flatten(items):
            type_code(f.type)
            assert f.doc, f"{name}.{f.name}: no doc"


_check()

# A refusal's field (REFUSAL_FIELDS' names) is the request field of that flat name, except these.
REFUSAL_ALIASES = {"config_mask": ("CONFIG_SET", "mask")}


def refused_field(name):
    """The request field (a Field) that a refusal's field `name` stands for."""
    if name in REFUSAL_ALIASES:
        message, field = REFUSAL_ALIASES[name]
        return dict(flatten(MESSAGE[message].request))[field]
    for m in MESSAGES:
        fields = dict(flatten(m.request))
        if name in fields:
            return fields[name]
    raise ValueError(f"REFUSAL_FIELDS' {name!r} must be a request's field (or in REFUSAL_ALIASES)")


def refusal_hex():
    """The refused fields whose value and range a refusal shows in hex: those the table shows in hex,
    and addresses (a range of dotted quads would not read as one)."""
    return tuple(name for _, name, _ in REFUSAL_FIELDS
                 if refused_field(name).show == "hex" or refused_field(name).type == "ipv4")


refusal_hex()   # Every refused field is a request's.


# --- The C view ------------------------------------------------------------------------------------

_C_INT = {"u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "i8": "int8_t",
          "i16": "int16_t", "i64": "int64_t", "ipv4": "uint32_t"}

C_PRIMITIVES = """\
/* Byte order at the boundary: every multi-byte field is big-endian. Not inlined: one call per
 * field keeps the firmware as small as a hand-written writer. */
#define CTL_OUT_OF_LINE static __attribute__((noinline, unused))
CTL_OUT_OF_LINE uint16_t ctl_get_be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
CTL_OUT_OF_LINE uint32_t ctl_get_be32(const uint8_t *p)
{
\treturn ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
CTL_OUT_OF_LINE uint64_t ctl_get_be64(const uint8_t *p) { return ((uint64_t)ctl_get_be32(p) << 32) | ctl_get_be32(p + 4); }
CTL_OUT_OF_LINE void ctl_put_be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
CTL_OUT_OF_LINE void ctl_put_be32(uint8_t *p, uint32_t v)
{
\tp[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
CTL_OUT_OF_LINE void ctl_put_be64(uint8_t *p, uint64_t v) { ctl_put_be32(p, (uint32_t)(v >> 32)); ctl_put_be32(p + 4, (uint32_t)v); }
"""


def _c_get(type_, at):
    n = type_size(type_)
    if type_code(type_).endswith("s"):
        return f"{at}"
    raw = {1: f"{at}[0]", 2: f"ctl_get_be16({at})", 4: f"ctl_get_be32({at})", 8: f"ctl_get_be64({at})"}[n]
    return f"({_C_INT[type_]}){raw}"


def _c_put(type_, at):
    n = type_size(type_)
    if type_code(type_).endswith("s"):
        return f"memcpy({at}, v, {n})"
    unsigned = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}[n]
    return {1: f"{at}[0] = (uint8_t)v", 2: f"ctl_put_be16({at}, (uint16_t)v)", 4: f"ctl_put_be32({at}, (uint32_t)v)",
            8: f"ctl_put_be64({at}, ({unsigned})v)"}[n]


def _c_accessors(prefix, items, base="", indexes=()):
    """#defines and get/put functions for items at `base` bytes into a body (a C expression)."""
    out, offset = [], 0
    for item in items:
        if isinstance(item, Block):
            out.append(f"#define {prefix.upper()}_{item.name.upper()}_OFFSET {offset}u")
            offset += size(item.fields)
        elif isinstance(item, Records):
            rec = size(item.fields)
            name = f"{prefix}_{item.name}"
            i = f"i{len(indexes)}"
            out += [f"#define {name.upper()}_OFFSET {offset}u  /* {len(item.labels)} x {rec} bytes: {item.doc} */",
                    f"#define {name.upper()}_SIZE {rec}u",
                    f"#define {name.upper()}_COUNT {len(item.labels)}u"]
            out += _c_accessors(name, item.fields, f"{base}{offset}u + {rec}u * {i} + ", indexes + (i,))
            offset += rec * len(item.labels)
        else:
            f = item
            name = f"{prefix}_{f.name}" if f.name else prefix
            at = f"p + {base}{offset}u" if (base or offset) else "p"
            args = "".join(f", unsigned {i}" for i in indexes)
            bytes_ = type_code(f.type).endswith("s")
            ctype = "const uint8_t *" if bytes_ else f"{_C_INT[f.type]} "
            if f.name:
                out.append(f"#define {name.upper()}_OFFSET {offset}u  /* {f.type}: {f.doc} */")
            out.append(f"static inline {ctype}{name.replace('ctl_', 'ctl_get_', 1)}(const uint8_t *p{args}) "
                       f"{{ return {_c_get(f.type, f'({at})')}; }}")
            value = "const uint8_t *v" if bytes_ else f"{_C_INT[f.type]} v"
            out.append(f"static inline void {name.replace('ctl_', 'ctl_put_', 1)}(uint8_t *p{args}, {value}) "
                       f"{{ {_c_put(f.type, f'({at})')}; }}")
            offset += type_size(f.type)
    return out


def c_messages():
    """The C view of the table: the header's, each block's and each message body's sizes, field
    offsets and accessors: ctl_get_<body>_<field>(p) and ctl_put_<body>_<field>(p, v), p the body
    (after the header), records indexed."""
    out = [C_PRIMITIVES]
    out.append("/* Message types: a response is the request's type | CTL_RESPONSE. */")
    out += [f"#define CTL_MSG_{m.name:<16} 0x{m.code:02X}u" for m in MESSAGES]
    out += [f"#define CTL_MSG_IDENTIFY_RSP     0x{MSG_IDENTIFY_RSP:02X}u", f"#define CTL_MSG_ERROR_RSP        0x{MSG_ERROR_RSP:02X}u"]
    out.append(f"#define CTL_HEADER_SIZE {size(HEADER)}u")
    out += _c_accessors("ctl_header", HEADER)
    blocks = {}
    for _, _, items, _ in bodies():
        for item in items:
            if isinstance(item, Block):
                blocks[item.name] = item
    for block in blocks.values():
        out.append(f"\n/* {block.name}: carried by several messages. */")
        out.append(f"#define CTL_{block.name.upper()}_SIZE {size(block.fields)}u")
        out += _c_accessors(f"ctl_{block.name}", block.fields)
    for code, name, items, _ in bodies():
        tag = name.lower() if name.endswith("_RSP") else f"{name.lower()}_req"
        out.append(f"\n/* {name} (0x{code:02X}) */")
        out.append(f"#define CTL_{tag.upper()}_SIZE {size(items)}u")
        if not name.endswith("_RSP"):
            out.append(f"#define CTL_{name}_REQ_LENGTH {size(HEADER) + size(items)}u")
        out += _c_accessors(f"ctl_{tag}", items)
    out.append("\n/* ERROR_RSP's reason, after its code (REFUSAL). */")
    out.append(f"#define CTL_REFUSAL_SIZE {size(REFUSAL)}u")
    out += _c_accessors("ctl_refusal", REFUSAL)
    out.append(f"#define CTL_AUTH_LEN {size(AUTH)}u")
    out += _c_accessors("ctl_auth", AUTH)
    out.append(f"#define CTL_RX_STATS_RECORD_SIZE {size(RX_STATS_RECORD)}u")
    out += _c_accessors("ctl_rx_stats_record", RX_STATS_RECORD)
    out.append("/* IDENTIFY_RSP after its strings: one rate per channel, then (optionally) one event layout each. */")
    out.append(f"#define CTL_IDENTIFY_RATE_SIZE  {type_size(IDENTIFY_RATE.type)}u")
    out += _c_accessors("ctl_identify_rate", [IDENTIFY_RATE._replace(name="")])
    out.append(f"#define CTL_IDENTIFY_EVENT_SIZE {type_size(IDENTIFY_EVENT.type)}u")
    out += _c_accessors("ctl_identify_event", [IDENTIFY_EVENT._replace(name="")])
    out.append(f"#define CTL_NMESSAGES {len(MESSAGES)}u  /* Message types (requests). */")
    access = {"anybody": 0, "controller": 1, "claim": 2}
    out.append("#define CTL_ACCESS_ANYBODY 0u\n#define CTL_ACCESS_CONTROLLER 1u\n#define CTL_ACCESS_CLAIM 2u")
    out += [f"#define CTL_{m.name}_ACCESS {access[m.access]}u" for m in MESSAGES]
    return "\n".join(out) + "\n"


# --- The tables of docs/protocol.md ----------------------------------------------------------------

DOCS_PATH = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"


def docs_markers(part):
    """The lines docs/protocol.md's generated part `part` stands between."""
    return (f"<!-- Generated by ethdaq.wire.ctlformat ({part}): do not edit; "
            f"python -m ethdaq.wire.ctlformat --write -->", f"<!-- End of the generated {part} table. -->")


def _doc_cell(f):
    """A field's meaning in a table cell: its doc, its values' names, its unit."""
    text = f.doc
    if f.enum:
        text += "; values: " + ", ".join(f"{k} {v}" for k, v in sorted(f.enum.items()))
    if f.bits:
        text += "; bits: " + ", ".join(f"0x{bit:02X} {name}" for name, bit in sorted(f.bits.items(), key=lambda kv: kv[1]))
    if f.unit:
        text += f" [{f.unit}]"
    return text.replace("|", "\\|")


def _doc_rows(items, start):
    """Table rows of items from byte `start`; a record's fields once, with its count."""
    rows, offset = [], start
    for item in items:
        if isinstance(item, Block):
            rows += _doc_rows(item.fields, offset)
            offset += size(item.fields)
        elif isinstance(item, Records):
            rec = size(item.fields)
            first = item.labels[0]
            rows.append(f"| {offset} | {rec} x {len(item.labels)} | {item.name} | record | {item.doc} "
                        f"({first}, ..., {item.labels[-1]}) |")
            for row in _doc_rows(item.fields, 0):
                rows.append(row.replace("| ", f"| {item.name}+", 1))
            offset += rec * len(item.labels)
        else:
            rows.append(f"| {offset} | {type_size(item.type)} | {item.name or '(value)'} | "
                        f"{item.type} | {_doc_cell(item)} |")
            offset += type_size(item.type)
    return rows


def _body_heading(code, name, items, m):
    """The heading of a message body's fields: type, name, length and, for a request, whose it is."""
    who = f", {m.access}'s" if m and not name.endswith("_RSP") else ""
    return f"0x{code:02X} {name} ({size(HEADER) + size(items)} bytes{who})"


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def messages_markdown():
    """Each message body's fields, offsets from the start of the datagram (the header is 8 bytes)."""
    head = "| offset | size | field | type | meaning |\n|-------:|-----:|-------|------|---------|"
    out = ["### Header", "", head, *_doc_rows(HEADER, 0), ""]
    hs = size(HEADER)
    for code, name, items, m in bodies():
        out += [f"### {_body_heading(code, name, items, m)}", ""]
        out += [head, *_doc_rows(items, hs), ""] if items else ["No body: the header only.", ""]
    out += ["### ERROR_RSP's reason (after the code, all of it or none)", "", head,
            *_doc_rows(REFUSAL, hs + size(ERROR)), "",
            "### AUTH (appended to a signed request)", "", head.replace("offset", "from"), *_doc_rows(AUTH, 0)]
    return "\n".join(out)


def _cell(*parts):
    """A table cell of sentences (empty ones left out)."""
    text = ". ".join(p[0].upper() + p[1:] for p in parts if p)
    return (text + "." if text else "").replace("|", "\\|")


def overview_markdown():
    """One row per message type: its direction, whose request it is, its length, what it is for and
    what a user needs besides its fields; the name links to its fields."""
    out = ["| type | message | direction | whose | bytes | what for |",
           "|-----:|---------|-----------|-------|------:|----------|"]
    hs = size(HEADER)
    for m in MESSAGES:
        for code, name, items, who, text in (
                (m.code, m.name, m.request, f"{m.access}'s", _cell(m.doc, m.notes)),
                (m.code | RESPONSE, response_name(m), m.response, "",
                 _cell(m.reply_notes, m.tail and f"then {m.tail}"))):
            link = anchor(_body_heading(code, name, items, m))
            length = f"{hs + size(items)}{' +' if who == '' and m.tail else ''}"
            direction = "host → board" if who else "board → host"
            out.append(f"| 0x{code:02X} | [{name}](#{link}) | {direction} | {who} | {length} | {text} |")
    codes = ", ".join(f"{code} {text}" for code, text in sorted(ERROR_NAMES.items()))
    link = anchor(_body_heading(MSG_ERROR_RSP, "ERROR_RSP", ERROR, None))
    text = _cell(f"the request refused: code {codes}; for code {ERR_BAD_VALUE}, when the board can say why, "
                 f"the reason follows (below)")
    out.append(f"| 0x{MSG_ERROR_RSP:02X} | [ERROR_RSP](#{link}) | board → host | | {hs + size(ERROR)} or "
               f"{hs + size(ERROR) + size(REFUSAL)} | {text} |")
    return "\n".join(out)


def config_markdown():
    """CONFIG's fields: bit i of CONFIG_SET's mask sets field i."""
    out = ["| bit | field | type | meaning |", "|----:|-------|------|---------|"]
    out += [f"| {i} | {name} | {f.type} | {_doc_cell(f)} |" for i, (name, f) in enumerate(flatten([CONFIG]))]
    return "\n".join(out)


DOCS_PARTS = {"overview": overview_markdown, "messages": messages_markdown, "config": config_markdown}


def markdown():
    """Every generated part of docs/protocol.md, each between its markers."""
    return "\n\n".join("\n".join([docs_markers(part)[0], make(), docs_markers(part)[1]])
                       for part, make in DOCS_PARTS.items())


def docs_with_tables(text):
    """docs/protocol.md's text with each generated part replaced by the table's."""
    for part, make in DOCS_PARTS.items():
        begin, end = docs_markers(part)
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            raise ValueError(f"docs/protocol.md must hold the markers {begin!r} and {end!r}")
        text = text[:i + len(begin)] + "\n" + make() + "\n" + text[j:]
    return text


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m ethdaq.wire.ctlformat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the generated tables in {DOCS_PATH}")
    args = parser.parse_args(argv)
    if args.write:
        DOCS_PATH.write_text(docs_with_tables(DOCS_PATH.read_text()))
    else:
        sys.stdout.write(markdown() + "\n")


if __name__ == "__main__":
    main()
