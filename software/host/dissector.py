#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Wireshark Lua dissectors for the DAQ datagrams and the control protocol, generated from
`ethdaq.wire.daqformat` and `ethdaq.wire.protocol` so each wire format stays written once (like
the C headers of their `c_header()`).

The generated file is committed as software/host/ethdaq.lua; test/wire/test_dissector.py checks it
equals `lua_dissector()` and runs it in tshark. After changing the format, regenerate it:

    .venv/bin/python -m ethdaq.host.dissector --write

Load it with `wireshark -X lua_script:software/host/ethdaq.lua` (or `tshark -X ...`), or copy it
to ~/.local/lib/wireshark/plugins/. docs/protocol.md ("Wireshark") describes what it shows.
"""

import struct
import sys
from pathlib import Path

from ethdaq.wire import ctlformat, daqformat, protocol

LUA_PATH = Path(__file__).with_name("ethdaq.lua")

# The streamer's default destination port and the control port (the firmware's default --ctl-port).
DEFAULT_PORT = ctlformat.DEFAULT_DST_PORT
CTL_PORT = ctlformat.DEFAULT_CTL_PORT

MAX_DECODED_SAMPLES = 16     # Samples shown decoded, one per line, under the raw sample bytes.
MAX_SAMPLE_BITS_DECODED = 64  # Wider samples are shown as bytes only.

_HEX_FIELDS = {"magic", "flags", "reserved"}
_UINT = {1: "uint8", 2: "uint16", 3: "uint24", 4: "uint32", 8: "uint64"}
_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _lua_str(text):
    """A Lua double-quoted string literal (ASCII; anything else as decimal byte escapes)."""
    out = []
    for b in str(text).encode("utf-8"):
        c = chr(b)
        out.append(c if 32 <= b < 127 and c not in '"\\' else f"\\{b:03d}")
    return '"' + "".join(out) + '"'


def _lua_daq_fields():
    names = [f.name for f in daqformat.FIELDS]
    for needed in ("magic", "version", "header_len", "stream_id", "flags", "seq", "sample_count",
                   "sample_bits", "reserved", "run"):
        if needed not in names:
            raise ValueError(f"daqformat.FIELDS has no {needed!r}: update ethdaq.host.dissector")
    flags_size = next(f.size for f in daqformat.FIELDS if f.name == "flags")
    out = ["-- The header's fields, in wire order (daqformat.FIELDS): name, offset, size.",
           "local FIELDS = {"]
    for f in daqformat.FIELDS:
        out.append(f"    {{ name = {_lua_str(f.name)}, offset = {f.offset}, size = {f.size} }},")
    out += ["}", "", "local f = {}"]
    for f in daqformat.FIELDS:
        if f.size not in _UINT:
            raise ValueError(f"field {f.name}: no Wireshark integer type of {f.size} bytes")
        base = "base.HEX" if f.name in _HEX_FIELDS else "base.DEC"
        out.append(f"f.{f.name} = ProtoField.{_UINT[f.size]}({_lua_str('ethdaq.' + f.name)}, "
                   f"{_lua_str(f.name)}, {base}, nil, nil, {_lua_str(f.doc)})")
    out += ["", "-- FLAG_* bits (daqformat.FLAGS), in bit order.", "local FLAGS = {"]
    for name, bit in sorted(daqformat.FLAGS.items(), key=lambda kv: kv[1]):
        if bit <= 0 or bit & (bit - 1) or bit >= 1 << (8 * flags_size):
            raise ValueError(f"FLAG_{name} = {bit:#x} is not a single bit of the flags field")
        abbr = f"ethdaq.flags.{name.lower()}"
        out.append(f"    {{ name = {_lua_str(name)}, bit = 0x{bit:04X}, field = ProtoField.bool("
                   f"{_lua_str(abbr)}, {_lua_str(name)}, {8 * flags_size}, nil, 0x{bit:04X}, "
                   f"{_lua_str('FLAG_' + name)}) }},")
    out += ["}",
            'f.samples = ProtoField.bytes("ethdaq.samples", "samples", nil, '
            '"sample_count samples of sample_bits bits, big-endian")',
            'f.sample = ProtoField.uint64("ethdaq.sample", "sample", base.DEC, nil, nil, '
            f'"a decoded sample (the first {MAX_DECODED_SAMPLES}, up to {MAX_SAMPLE_BITS_DECODED} bits wide)")']
    return out


_DAQ_BODY = r"""

local ethdaq = Proto("ethdaq", "ethdaq DAQ datagram")
local fields = {}
for _, fd in ipairs(FIELDS) do fields[#fields + 1] = f[fd.name] end
for _, fl in ipairs(FLAGS) do fields[#fields + 1] = fl.field end
fields[#fields + 1] = f.samples
fields[#fields + 1] = f.sample
ethdaq.fields = fields

-- Failures, in the order daqformat.unpack_header checks them (and with its messages).
local e = {
    short           = ProtoExpert.new("ethdaq.short", "Datagram shorter than the header", expert.group.MALFORMED, expert.severity.ERROR),
    bad_magic       = ProtoExpert.new("ethdaq.bad_magic", "Wrong magic", expert.group.MALFORMED, expert.severity.ERROR),
    bad_version     = ProtoExpert.new("ethdaq.bad_version", "Wrong version", expert.group.MALFORMED, expert.severity.ERROR),
    bad_header_len  = ProtoExpert.new("ethdaq.bad_header_len", "Wrong header_len", expert.group.MALFORMED, expert.severity.ERROR),
    bad_sample_bits = ProtoExpert.new("ethdaq.bad_sample_bits", "sample_bits not a non-zero multiple of 8", expert.group.MALFORMED, expert.severity.ERROR),
    bad_length      = ProtoExpert.new("ethdaq.bad_length", "Datagram length does not match sample_count and sample_bits", expert.group.MALFORMED, expert.severity.ERROR),
    reserved        = ProtoExpert.new("ethdaq.reserved_nonzero", "reserved is not 0", expert.group.PROTOCOL, expert.severity.WARN),
}
ethdaq.experts = { e.short, e.bad_magic, e.bad_version, e.bad_header_len, e.bad_sample_bits, e.bad_length, e.reserved }

ethdaq.prefs.port = Pref.uint("UDP port", DEFAULT_PORT,
    "UDP port of DAQ datagrams (the streamer's destination port; 0: none). On other ports the heuristic dissector recognises the header (magic, version, header_len).")

local function flag_names(v)
    local names = {}
    for _, fl in ipairs(FLAGS) do
        if math.floor(v / fl.bit) % 2 == 1 then
            names[#names + 1] = fl.name
            v = v - fl.bit
        end
    end
    if v ~= 0 then names[#names + 1] = string.format("0x%04X", v) end
    return table.concat(names, ",")
end

local function show(v)  -- "?" for a field the datagram is too short to hold; no "3.0" on Lua 5.3+.
    if v == nil then return "?" end
    if type(v) == "number" then return string.format("%d", v) end
    return tostring(v)
end

local function dissect(tvb, pinfo, tree)
    local caplen = tvb:len()
    local length = tvb:reported_len()
    pinfo.cols.protocol = "ETHDAQ"
    local t = tree:add(ethdaq, tvb())
    local item, v = {}, {}
    for _, fd in ipairs(FIELDS) do
        if fd.offset + fd.size <= caplen then
            local r = tvb(fd.offset, fd.size)
            item[fd.name] = t:add(f[fd.name], r)
            if fd.size <= 4 then v[fd.name] = r:uint() else v[fd.name] = r:uint64() end
            if fd.name == "flags" then
                for _, fl in ipairs(FLAGS) do item.flags:add(fl.field, r) end
            end
        end
    end

    local problems = {}
    local function fail(key, at, fmt, ...)
        local text = string.format(fmt, ...)
        at:add_proto_expert_info(e[key], text)
        problems[#problems + 1] = text
    end
    if length < HEADER_LEN then
        fail("short", t, "datagram must be at least %d bytes, not %d", HEADER_LEN, length)
    end
    if v.magic and v.magic ~= MAGIC then
        fail("bad_magic", item.magic, "magic must be 0x%04X, not 0x%04X", MAGIC, v.magic)
    end
    if v.version and v.version ~= VERSION then
        fail("bad_version", item.version, "version must be %d, not %d", VERSION, v.version)
    end
    if v.header_len and v.header_len ~= HEADER_LEN then
        fail("bad_header_len", item.header_len, "header_len must be %d, not %d", HEADER_LEN, v.header_len)
    end
    local good_bits = v.sample_bits and v.sample_bits ~= 0 and v.sample_bits % 8 == 0
    if v.sample_bits and not good_bits then
        fail("bad_sample_bits", item.sample_bits, "sample_bits must be a non-zero multiple of 8, not %d", v.sample_bits)
    end
    if good_bits and v.sample_count and length >= HEADER_LEN then
        local expected = HEADER_LEN + v.sample_count * (v.sample_bits / 8)
        if length ~= expected then
            fail("bad_length", t, "datagram must be %d bytes for %d samples of %d bits, not %d",
                 expected, v.sample_count, v.sample_bits, length)
        end
    end
    if v.reserved and v.reserved ~= 0 then
        fail("reserved", item.reserved, "reserved must be 0, not %d", v.reserved)
    end

    if caplen > HEADER_LEN then
        local st = t:add(f.samples, tvb(HEADER_LEN))
        if good_bits and v.sample_count and v.sample_bits <= MAX_SAMPLE_BITS_DECODED then
            local n = v.sample_bits / 8
            local count = math.min(v.sample_count, math.floor((caplen - HEADER_LEN) / n), MAX_DECODED_SAMPLES)
            for i = 0, count - 1 do
                local r = tvb(HEADER_LEN + i * n, n)
                st:add(f.sample, r, r:uint64())
            end
        end
    end

    local info = string.format("Stream %s, Seq %s, Run %s, %s samples of %s bits", show(v.stream_id), show(v.seq),
                               show(v.run), show(v.sample_count), show(v.sample_bits))
    if v.flags and v.flags ~= 0 then info = info .. ", Flags " .. flag_names(v.flags) end
    if #problems > 0 then info = info .. " [" .. table.concat(problems, "; ") .. "]" end
    pinfo.cols.info = info
    t:append_text(", " .. info)
    return caplen
end

function ethdaq.dissector(tvb, pinfo, tree)
    return dissect(tvb, pinfo, tree)
end

-- Any UDP port: magic, version and header_len have their values.
local function field_is(tvb, header, name, value)
    for _, fd in ipairs(header) do
        if fd.name == name then
            return tvb:len() >= fd.offset + fd.size and tvb(fd.offset, fd.size):uint() == value
        end
    end
end

local function heuristic(tvb, pinfo, tree)
    if not (field_is(tvb, FIELDS, "magic", MAGIC) and field_is(tvb, FIELDS, "version", VERSION)
            and field_is(tvb, FIELDS, "header_len", HEADER_LEN)) then
        return false
    end
    dissect(tvb, pinfo, tree)
    return true
end
ethdaq:register_heuristic("udp", heuristic)

local udp_port = DissectorTable.get("udp.port")
local port = ethdaq.prefs.port
if port ~= 0 then udp_port:add(port, ethdaq) end
function ethdaq.prefs_changed()
    if ethdaq.prefs.port ~= port then
        if port ~= 0 then udp_port:remove(port, ethdaq) end
        port = ethdaq.prefs.port
        if port ~= 0 then udp_port:add(port, ethdaq) end
    end
end
"""


# Control protocol: every field, its name, type and how it is shown, from ethdaq.wire.ctlformat's table.

def _body(items):
    """[(name, count, struct code, Field)] of a message body's flat fields."""
    out = []
    for name, f in ctlformat.flatten(items):
        code = ctlformat.type_code(f.type)
        count, code = (int(code[:-1]), "s") if code.endswith("s") else (1, code)
        out.append((name, count, code, f))
    return out


def _size(count, code):
    return struct.calcsize(f">{count}{code}")


def ctl_messages():
    """{type: (name, [(field, count, struct code)], [length-prefixed string fields])} for every
    control message, from ctlformat's table."""
    return {code: (name, [b[:3] for b in _body(items)], list(ctlformat.IDENTIFY_STRINGS) if code == protocol.MSG_IDENTIFY_RSP else [])
            for code, name, items, _ in ctlformat.bodies()}


def ctl_fields():
    """{(type, field name): ctlformat.Field} of every field a message body, its optional part, its
    tails or its header carries."""
    out = {(None, f.name): f for f in ctlformat.HEADER}
    for code, _, items, _ in ctlformat.bodies():
        out.update({(code, name): f for name, f in ctlformat.flatten(items)})
    out.update({(protocol.MSG_ERROR_RSP, f.name): f for f in ctlformat.REFUSAL})
    return out


def ctl_records():
    """{type: (max records, record size, {code: field name}, field for other codes)} for the messages
    whose fixed fields end in a record count (u8) followed by that many records of a code (u8) and a
    value (u64), codes ascending: each known code's value is shown as a field of its own, named as
    protocol.py names the code."""
    P = protocol
    if [f.type for f in ctlformat.RX_STATS_RECORD] != ["u8", "u64"]:
        raise ValueError(f"RX_STATS_RECORD {ctlformat.RX_STATS_RECORD}: the dissector shows (code u8, value u64)")
    names = dict(P.RX_COUNTER_NAMES)
    if {"count", "other"} & set(names.values()):
        raise ValueError("an RX_COUNTERS name is one of the dissector's own: count, other")
    return {P.MSG_RX_STATS | P.RESPONSE: (P.RX_STATS_MAX, P.RX_STATS_RECORD.size, names, "other")}


def ctl_tails():
    """{type: [(names, count field, struct, ctlformat.Field), ...]}: parts after a message's strings, in order, each
    as many values as its count field says, each present only after the one before it (the message
    may end before any part): IDENTIFY_RSP's channel rates (IDENTIFY_RATE, one per channel), then
    its channels' event layouts (IDENTIFY_EVENT)."""
    P = protocol
    return {P.MSG_IDENTIFY_RSP: [([f"{f.name}{i}" for i in range(P.MAX_STREAMS)], "nchannels", ctlformat.struct_of([f]), f)
                                 for f in (ctlformat.IDENTIFY_RATE, ctlformat.IDENTIFY_EVENT)]}


def ctl_optional():
    """{type: [(field, count, struct code)]}: fields at the end of a message that a datagram holds
    all of or none of: ERROR_RSP's reason (REFUSAL)."""
    return {protocol.MSG_ERROR_RSP: [b[:3] for b in _body(ctlformat.REFUSAL)]}


def _lua_table(mapping, hex_keys=False):
    key = "[0x{:02X}]" if hex_keys else "[{}]"
    return "{ " + ", ".join(f"{key.format(k)} = {_lua_str(v)}" for k, v in sorted(mapping.items())) + " }"


def _lua_ctl_field(abbr, name, f):
    """The ProtoField of a ctlformat.Field: its type says how Wireshark shows it."""
    if f.type == "mac":
        return f"ProtoField.ether({_lua_str(abbr)}, {_lua_str(name)}, {_lua_str(f.doc)})"
    if f.type.startswith("bytes"):
        return f"ProtoField.bytes({_lua_str(abbr)}, {_lua_str(name)}, nil, {_lua_str(f.doc)})"
    if f.type == "ipv4":
        return f"ProtoField.ipv4({_lua_str(abbr)}, {_lua_str(name)}, {_lua_str(f.doc)})"
    size = ctlformat.type_size(f.type)
    values = _lua_table(f.enum) if f.enum else "nil"
    if f.type.startswith("i"):
        return f"ProtoField.{_INT[size]}({_lua_str(abbr)}, {_lua_str(name)}, base.DEC, {values}, nil, {_lua_str(f.doc)})"
    if size not in _UINT:
        raise ValueError(f"{name}: {f.type} is not an integer Wireshark can show")
    base = "base.HEX" if f.show == "hex" else "base.DEC"
    return f"ProtoField.{_UINT[size]}({_lua_str(abbr)}, {_lua_str(name)}, {base}, {values}, nil, {_lua_str(f.doc)})"


def _lua_ctl_bits(prefix, f):
    out = [f"ProtoField.bool({_lua_str(prefix + '.' + flag.lower())}, {_lua_str(flag)}, {8 * ctlformat.type_size(f.type)}, "
           f"nil, 0x{bit:02X})" for flag, bit in sorted(f.bits.items(), key=lambda kv: kv[1])]
    return "bits = { " + ", ".join(out) + " }, "


def _lua_ctl():
    P = protocol
    header = _body(ctlformat.HEADER)
    fields_of = ctl_fields()
    out = ["",
           "-- Control protocol (ethdaq.wire.ctlformat, ethdaq.wire.protocol).",
           f"local CTL_MAGIC = 0x{P.MAGIC:04X}",
           f"local CTL_VERSION = {P.VERSION}",
           f"local CTL_HEADER_LEN = {P.HEADER.size}",
           f"local CTL_RESPONSE = 0x{P.RESPONSE:02X}",
           f"local CTL_PORT = {CTL_PORT}",
           f"local CTL_MSG_ERROR_RSP = 0x{P.MSG_ERROR_RSP:02X}",
           f"local CTL_ERROR_NAMES = {_lua_table(P.ERROR_NAMES)}",
           "-- ERROR_RSP's reason (REFUSAL): field names, what else a field takes, fields shown in hex.",
           f"local CTL_REFUSAL_NAMES = {_lua_table(P.REFUSAL_FIELD_NAMES)}",
           "local CTL_REFUSAL_NOTES = { " + ", ".join(f"[{_lua_str(name)}] = {_lua_str(note)}"
                                                     for _, name, note in P.REFUSAL_FIELDS if note) + " }",
           "local CTL_REFUSAL_HEX = { " + ", ".join(f"[{_lua_str(name)}] = true" for name in P.REFUSAL_HEX) + " }",
           "",
           "local CTL_HEADER = {"]
    offset = 0
    for name, count, code, _ in header:
        out.append(f"    {{ name = {_lua_str(name)}, offset = {offset}, size = {_size(count, code)} }},")
        offset += _size(count, code)
    out += ["}", "local cf = {}"]
    messages = ctl_messages()
    records = ctl_records()
    optional = ctl_optional()
    tails = ctl_tails()
    type_names = {t: name for t, (name, _, _) in messages.items()}
    for name, count, code, f in header:
        values = _lua_table(type_names, hex_keys=True) if name == "type" else "nil"
        base = "base.HEX" if f.show == "hex" else "base.DEC"
        out.append(f"cf.{name} = ProtoField.{_UINT[_size(count, code)]}({_lua_str('ethdaqctl.' + name)}, "
                   f"{_lua_str(name)}, {base}, {values}, nil, {_lua_str(f.doc)})")
    out += ["",
            "-- Message type -> name, payload fields in order (ProtoField, size), length-prefixed strings,",
            "-- records after a count (the last field): (code u8, value u64), a field for each known code.",
            "local CTL_MESSAGES = {"]
    for t, (msg, body, strings) in sorted(messages.items()):
        fields = []
        for name, count, code in body:
            abbr = f"ethdaqctl.{msg.lower()}.{name}"
            f = fields_of[t, name]
            bits = _lua_ctl_bits(abbr, f) if f.bits else ""
            fields.append(f"{{ f = {_lua_ctl_field(abbr, name, f)}, size = {_size(count, code)}, {bits}}}")
        fields += [f"ProtoField.string({_lua_str(f'ethdaqctl.{msg.lower()}.{name}')}, {_lua_str(name)})"
                   for name in strings]
        out.append(f"    [0x{t:02X}] = {{ name = {_lua_str(msg)}, fields = {{" + ("" if body else "},")
                   + (" strings = {} }," if not body and not strings and t not in records else ""))
        out += [f"        {line}," for line in fields[:len(body)]]
        if body and t in optional:
            out.append("    }, strings = {}, optional = {")
            for name, count, code in optional[t]:
                abbr = f"ethdaqctl.{msg.lower()}.{name}"
                out.append(f"        {{ f = {_lua_ctl_field(abbr, name, fields_of[t, name])}, size = {_size(count, code)} }},")
            out.append("    } },")
        elif body:
            out.append("    }," + (" strings = {} }," if not strings and t not in records else ""))
        if strings:
            out.append("    strings = {")
            out += [f"        {line}," for line in fields[len(body):]]
            out.append("    }" + ("," if t in tails else " },"))
        if t in tails:
            out.append("    tails = {")
            for names, count, st, f in tails[t]:
                count_at = P.HEADER.size + sum(_size(n, c) for name, n, c in body[:[b[0] for b in body].index(count)])
                out.append(f"        {{ count_at = {count_at}, size = {st.size}, fields = {{")
                out += [f"            {_lua_ctl_field(f'ethdaqctl.{msg.lower()}.{name}', name, f)},"
                        for name in names]
                out.append("        } },")
            out.append("    } },")
        if t in records:
            most, size, names, other = records[t]
            prefix = f"ethdaqctl.{msg.lower()}."
            out.append(f"    strings = {{}}, records = {{ max = {most}, size = {size}, known = {{")
            blurb = {name: text for _, name, text in P.RX_COUNTERS}
            out += [f"        [0x{code:02X}] = ProtoField.uint64({_lua_str(prefix + name)}, {_lua_str(name)}, base.DEC, "
                    f"nil, nil, {_lua_str(blurb.get(name, ''))}),"
                    for code, name in sorted(names.items())]
            out.append(f"    }}, other = ProtoField.uint64({_lua_str(prefix + other)}, {_lua_str(other)}, base.DEC, nil, "
                       f"nil, \"a code this dissector does not know\") }} }},")
    out.append("}")
    return out


_CTL_BODY = r"""
local ethdaqctl = Proto("ethdaqctl", "ethdaq control protocol")
cf.response = ProtoField.bool("ethdaqctl.response", "response", 8, nil, CTL_RESPONSE, "bit 7 of type: a response")
local ctl_fields = {}
for _, fd in ipairs(CTL_HEADER) do ctl_fields[#ctl_fields + 1] = cf[fd.name] end
ctl_fields[#ctl_fields + 1] = cf.response
for _, msg in pairs(CTL_MESSAGES) do
    for _, fd in ipairs(msg.fields) do
        ctl_fields[#ctl_fields + 1] = fd.f
        for _, b in ipairs(fd.bits or {}) do ctl_fields[#ctl_fields + 1] = b end
    end
    for _, sf in ipairs(msg.strings) do ctl_fields[#ctl_fields + 1] = sf end
    for _, fd in ipairs(msg.optional or {}) do ctl_fields[#ctl_fields + 1] = fd.f end
    for _, tail in ipairs(msg.tails or {}) do
        for _, tf in ipairs(tail.fields) do ctl_fields[#ctl_fields + 1] = tf end
    end
    if msg.records then
        for _, rf in pairs(msg.records.known) do ctl_fields[#ctl_fields + 1] = rf end
        ctl_fields[#ctl_fields + 1] = msg.records.other
    end
end
ethdaqctl.fields = ctl_fields

local ce = {
    short       = ProtoExpert.new("ethdaqctl.short", "Datagram shorter than the header", expert.group.MALFORMED, expert.severity.ERROR),
    bad_magic   = ProtoExpert.new("ethdaqctl.bad_magic", "Wrong magic", expert.group.MALFORMED, expert.severity.ERROR),
    bad_version = ProtoExpert.new("ethdaqctl.bad_version", "Wrong version", expert.group.MALFORMED, expert.severity.ERROR),
    bad_type    = ProtoExpert.new("ethdaqctl.bad_type", "Unknown message type", expert.group.MALFORMED, expert.severity.ERROR),
    bad_length  = ProtoExpert.new("ethdaqctl.bad_length", "Wrong length for the message type", expert.group.MALFORMED, expert.severity.ERROR),
    bad_order   = ProtoExpert.new("ethdaqctl.bad_order", "Records not in ascending code order", expert.group.MALFORMED, expert.severity.ERROR),
}
ethdaqctl.experts = { ce.short, ce.bad_magic, ce.bad_version, ce.bad_type, ce.bad_length, ce.bad_order }

ethdaqctl.prefs.port = Pref.uint("UDP port", CTL_PORT,
    "UDP port of the board's control protocol (0: none). On other ports the heuristic dissector recognises the header (magic, version, known type).")

-- ERROR_RSP's reason at off (REFUSAL), as the host says it: "payload 9000 out of range 64..8954".
local function refusal_text(tvb, off)
    local code = tvb(off, 1):uint()
    local name = CTL_REFUSAL_NAMES[code] or string.format("field 0x%02X", code)
    local function show(at)
        local x = tvb(at, 8):int64()
        local n = x:tonumber()
        if CTL_REFUSAL_HEX[name] and n >= 0 and n < 2^53 then return string.format("0x%x", n) end
        return tostring(x)
    end
    return string.format("%s %s out of range %s..%s%s", name, show(off + 1), show(off + 9), show(off + 17),
                         CTL_REFUSAL_NOTES[name] or "")
end

local function ctl_dissect(tvb, pinfo, tree)
    local caplen = tvb:len()
    local length = tvb:reported_len()
    pinfo.cols.protocol = "ETHDAQ-CTL"
    local t = tree:add(ethdaqctl, tvb())
    local item, v = {}, {}
    for _, fd in ipairs(CTL_HEADER) do
        if fd.offset + fd.size <= caplen then
            local r = tvb(fd.offset, fd.size)
            item[fd.name] = t:add(cf[fd.name], r)
            v[fd.name] = r:uint()
            if fd.name == "type" then item.type:add(cf.response, r) end
        end
    end

    local problems = {}
    local function fail(key, at, fmt, ...)
        local text = string.format(fmt, ...)
        at:add_proto_expert_info(ce[key], text)
        problems[#problems + 1] = text
    end
    if length < CTL_HEADER_LEN then
        fail("short", t, "datagram must be at least %d bytes, not %d", CTL_HEADER_LEN, length)
    end
    if v.magic and v.magic ~= CTL_MAGIC then
        fail("bad_magic", item.magic, "magic must be 0x%04X, not 0x%04X", CTL_MAGIC, v.magic)
    end
    if v.version and v.version ~= CTL_VERSION then
        fail("bad_version", item.version, "version must be %d, not %d", CTL_VERSION, v.version)
    end
    local msg = v.type and CTL_MESSAGES[v.type]
    if v.type and not msg then
        fail("bad_type", item.type, "unknown message type 0x%02X", v.type)
    end
    local name = msg and msg.name or (v.type and string.format("type 0x%02X", v.type)) or "?"
    local info = string.format("%s, Seq %s", name, show(v.seq))

    if msg and length >= CTL_HEADER_LEN then
        local off = CTL_HEADER_LEN
        for _, fd in ipairs(msg.fields) do
            if off + fd.size <= caplen then
                local r = tvb(off, fd.size)
                local it = t:add(fd.f, r)
                for _, b in ipairs(fd.bits or {}) do it:add(b, r) end
            end
            off = off + fd.size
        end
        if v.type == CTL_MSG_ERROR_RSP and length > CTL_HEADER_LEN then
            local code = tvb(CTL_HEADER_LEN, 1):uint()
            info = info .. ", " .. (CTL_ERROR_NAMES[code] or string.format("error %d", code))
        end
        if msg.records then
            -- The last fixed field is the record count; each record a code (u8) and a value (u64).
            local rec = msg.records
            local n = (off > CTL_HEADER_LEN and off <= caplen) and tvb(off - 1, 1):uint() or 0
            if length < off then
                fail("bad_length", t, "%s must be at least %d bytes, not %d", name, off, length)
            elseif n > rec.max then
                fail("bad_length", t, "%s holds at most %d records, not %d", name, rec.max, n)
            elseif length ~= off + n * rec.size then
                fail("bad_length", t, "%s with %d records must be %d bytes, not %d", name, n, off + n * rec.size, length)
            elseif off + n * rec.size <= caplen then
                local last = -1
                for i = 0, n - 1 do
                    local at = off + i * rec.size
                    local code = tvb(at, 1):uint()
                    if code <= last then
                        fail("bad_order", t, "%s: code 0x%02X after 0x%02X (codes must ascend)", name, code, last)
                        break
                    end
                    local f = rec.known[code]
                    if f then
                        t:add(f, tvb(at + 1, rec.size - 1))
                    else
                        t:add(rec.other, tvb(at + 1, rec.size - 1)):append_text(string.format(" (code 0x%02X)", code))
                    end
                    last = code
                end
            end
        elseif #msg.strings == 0 then
            local opt = 0
            for _, fd in ipairs(msg.optional or {}) do opt = opt + fd.size end
            if opt > 0 and length == off + opt then
                if length <= caplen then
                    if v.type == CTL_MSG_ERROR_RSP then info = info .. ": " .. refusal_text(tvb, off) end
                    for _, fd in ipairs(msg.optional) do
                        t:add(fd.f, tvb(off, fd.size))
                        off = off + fd.size
                    end
                end
            elseif opt > 0 and length ~= off then
                fail("bad_length", t, "%s must be %d or %d bytes, not %d", name, off, off + opt, length)
            elseif length ~= off then
                fail("bad_length", t, "%s must be %d bytes, not %d", name, off, length)
            end
        elseif length < off then
            fail("bad_length", t, "%s must be at least %d bytes, not %d", name, off, length)
        else
            local ok = true
            for _, sf in ipairs(msg.strings) do
                if off >= length then
                    fail("bad_length", t, "%s truncated before a string length", name)
                    ok = false
                    break
                end
                local n = tvb(off, 1):uint()
                if off + 1 + n > length then
                    fail("bad_length", t, "%s string of %d bytes runs past the datagram end", name, n)
                    ok = false
                    break
                end
                t:add(sf, tvb(off, 1 + n), n > 0 and tvb(off + 1, n):string() or "")
                off = off + 1 + n
            end
            -- After the strings: parts in order, each one value per count (a field before them),
            -- each only after the one before it; the message may end before any part.
            for _, tail in ipairs(msg.tails or {}) do
                if not ok or off == length or tail.count_at >= caplen then break end
                local n = tvb(tail.count_at, 1):uint()
                if n <= #tail.fields and off + n * tail.size <= length then
                    for i = 1, n do
                        if off + tail.size <= caplen then t:add(tail.fields[i], tvb(off, tail.size)) end
                        off = off + tail.size
                    end
                else
                    fail("bad_length", t, "%s has %d bytes left after its strings; its next part takes %d of %d bytes",
                         name, length - off, n, tail.size)
                    ok = false
                end
            end
            if ok and off ~= length then
                fail("bad_length", t, "%s has %d trailing bytes", name, length - off)
            end
        end
    end

    if #problems > 0 then info = info .. " [" .. table.concat(problems, "; ") .. "]" end
    pinfo.cols.info = info
    t:append_text(", " .. info)
    return caplen
end

function ethdaqctl.dissector(tvb, pinfo, tree)
    return ctl_dissect(tvb, pinfo, tree)
end

-- Any UDP port: magic, version and a known message type.
local function ctl_heuristic(tvb, pinfo, tree)
    if tvb:len() < CTL_HEADER_LEN or not (field_is(tvb, CTL_HEADER, "magic", CTL_MAGIC)
                                          and field_is(tvb, CTL_HEADER, "version", CTL_VERSION)) then
        return false
    end
    local known = false
    for t in pairs(CTL_MESSAGES) do known = known or field_is(tvb, CTL_HEADER, "type", t) end
    if not known then return false end
    ctl_dissect(tvb, pinfo, tree)
    return true
end
ethdaqctl:register_heuristic("udp", ctl_heuristic)

local ctl_port = ethdaqctl.prefs.port
if ctl_port ~= 0 then udp_port:add(ctl_port, ethdaqctl) end
function ethdaqctl.prefs_changed()
    if ethdaqctl.prefs.port ~= ctl_port then
        if ctl_port ~= 0 then udp_port:remove(ctl_port, ethdaqctl) end
        ctl_port = ethdaqctl.prefs.port
        if ctl_port ~= 0 then udp_port:add(ctl_port, ethdaqctl) end
    end
end
"""


def lua_dissector():
    """The Wireshark Lua dissectors (software/host/ethdaq.lua): `ethdaq` for the DAQ datagrams,
    `ethdaqctl` for the control protocol."""
    out = [
        "-- Generated by ethdaq.host.dissector from ethdaq.wire.daqformat and ethdaq.wire.protocol: do not edit.",
        "-- Regenerate: .venv/bin/python -m ethdaq.host.dissector --write",
        "--",
        "-- Wireshark dissectors for ethdaq (docs/protocol.md): ethdaq, the DAQ datagrams, and ethdaqctl,",
        "-- the control protocol. Load them with",
        "--     wireshark -X lua_script:software/host/ethdaq.lua",
        "-- or copy this file to ~/.local/lib/wireshark/plugins/. Their UDP ports are preferences",
        f"-- (defaults {DEFAULT_PORT} and {CTL_PORT}; tshark -o ethdaq.port:N -o ethdaqctl.port:N), and heuristics",
        "-- find both on any port.",
        "",
        f"local MAGIC = 0x{daqformat.MAGIC:04X}",
        f"local VERSION = {daqformat.VERSION}",
        f"local HEADER_LEN = {daqformat.HEADER_LEN}",
        f"local DEFAULT_PORT = {DEFAULT_PORT}",
        f"local MAX_DECODED_SAMPLES = {MAX_DECODED_SAMPLES}",
        f"local MAX_SAMPLE_BITS_DECODED = {MAX_SAMPLE_BITS_DECODED}",
        "",
    ]
    out += _lua_daq_fields()
    return "\n".join(out) + "\n" + _DAQ_BODY + "\n".join(_lua_ctl()) + "\n" + _CTL_BODY


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m ethdaq.host.dissector", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {LUA_PATH} (default: print to stdout)")
    args = parser.parse_args(argv)
    if args.write:
        LUA_PATH.write_text(lua_dissector())
    else:
        sys.stdout.write(lua_dissector())


if __name__ == "__main__":
    main()
