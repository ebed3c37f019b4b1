"""The control protocol's one table (ethdaq.wire.ctlformat): the shared vectors
(test/vectors/ctl_messages.json, written from the structs the protocol had before the table) packed
and parsed by Python and read by the generated C accessors byte for byte; docs/protocol.md's
generated tables are the table's; a field added to the table reaches Python, the C header, the
Wireshark dissector and the docs (its fields and the messages' overview); a field the table shows in
hex is shown in hex in a refusal."""

import json
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from ethdaq.wire import ctlformat as T
from ethdaq.wire import protocol

VECTORS = json.loads((REPO / "test" / "vectors" / "ctl_messages.json").read_text())["vectors"]
BODIES = {code: (name, items) for code, name, items, _ in T.bodies()}


def wire_values(items, fields):
    """The vector's field values in wire order, as struct packs them."""
    return [bytes.fromhex(fields[name]) if T.type_code(f.type).endswith("s") else fields[name]
            for name, f in T.flatten(items)]


def test_every_message_body_has_vectors():
    assert {v["type"] for v in VECTORS} == set(BODIES)


@pytest.mark.parametrize("v", VECTORS, ids=lambda v: f"{v['name']}-{v['seq']}")
def test_python_packs_and_parses_the_shared_vectors(v):
    name, items = BODIES[v["type"]]
    assert name == v["name"]
    raw = bytes.fromhex(v["hex"])
    strings = [s for s in T.IDENTIFY_STRINGS if s in v["fields"]]
    packed = protocol.pack_header(v["type"], v["seq"]) + T.struct_of(items).pack(*wire_values(items, v["fields"]))
    packed += b"".join(bytes([len(v["fields"][s])]) + v["fields"][s].encode() for s in strings)
    assert packed == raw
    got = T.struct_of(items).unpack_from(raw, protocol.HEADER.size)
    assert list(got) == wire_values(items, v["fields"])


def c_reads(prefix, items, base="p", indexes=()):
    """C statements printing every flat field of items through the generated accessors."""
    out = []
    for item in items:
        if isinstance(item, T.Block):
            out += c_reads(f"ctl_get_{item.name}", item.fields,
                           f"{base} + {prefix.replace('ctl_get_', 'CTL_').upper()}_{item.name.upper()}_OFFSET", indexes)
        elif isinstance(item, T.Records):
            i = f"i{len(indexes)}"
            body = c_reads(f"{prefix}_{item.name}", item.fields, base, indexes + (i,))
            out.append(f"for (unsigned {i} = 0; {i} < {len(item.labels)}u; {i}++) {{ " + " ".join(body) + " }")
        else:
            name = f"{prefix}_{item.name}" if item.name else prefix
            call = f"{name}({base}{''.join(', ' + i for i in indexes)})"
            if T.type_code(item.type).endswith("s"):
                out.append(f"hex({call}, {T.type_size(item.type)});")
            elif item.type.startswith("i"):
                out.append(f'printf("%lld\\n", (long long){call});')
            else:
                out.append(f'printf("%llu\\n", (unsigned long long){call});')
    return out


def test_the_generated_c_accessors_read_the_shared_vectors(tmp_path):
    """A C program made of the generated header's accessors prints every field of every vector,
    in wire order: the same values as the vectors'."""
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "ctl_protocol.h").write_text(protocol.c_header())
    cases = []
    for code, name, items, _ in T.bodies():
        tag = name.lower() if name.endswith("_RSP") else f"{name.lower()}_req"
        cases.append(f"case 0x{code:02X}: {{ " + " ".join(c_reads(f"ctl_get_{tag}", items)) + " break; }")
    src = textwrap.dedent("""\
        #include <stdio.h>
        #include <generated/ctl_protocol.h>
        static void hex(const uint8_t *b, unsigned n) { for (unsigned i = 0; i < n; i++) printf("%02x", b[i]); printf("\\n"); }
        int main(void)
        {
        \tstatic uint8_t d[2048];
        \tsize_t n = fread(d, 1, sizeof(d), stdin);
        \tconst uint8_t *p = d + CTL_HEADER_SIZE;
        \tif (n < CTL_HEADER_SIZE || ctl_get_header_magic(d) != CTL_MAGIC) return 1;
        \tprintf("%u\\n", (unsigned)ctl_get_header_seq(d));
        \tswitch (ctl_get_header_type(d)) {
        """) + "\n".join("\t" + c for c in cases) + "\n\tdefault: return 2;\n\t}\n\treturn 0;\n}\n"
    (tmp_path / "read.c").write_text(src)
    exe = tmp_path / "read"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{tmp_path}", str(tmp_path / "read.c"),
                    "-o", str(exe)], check=True)
    for v in VECTORS:
        out = subprocess.run([str(exe)], input=bytes.fromhex(v["hex"]), capture_output=True, check=True).stdout
        _, items = BODIES[v["type"]]
        want = [v["seq"]] + [x.hex() if isinstance(x, bytes) else x for x in wire_values(items, v["fields"])]
        assert len(out.split()) == len(want), v["name"]
        got = [int(x) if re.fullmatch(r"-?\d+", x) and not isinstance(w, str) else x
               for x, w in zip(out.decode().split(), want)]
        assert got == want, v["name"]


def test_docs_tables_are_the_tables_output():
    text = T.DOCS_PATH.read_text()
    assert T.docs_with_tables(text) == text, \
        "docs/protocol.md's message tables are stale: run .venv/bin/python -m ethdaq.wire.ctlformat --write"


ADD_A_FIELD = """
import subprocess, sys
from ethdaq.wire import ctlformat as T
T.STATUS.append(T.Field("board_temp", "i16", "the FPGA's temperature", unit="0.1 degC"))
from ethdaq.wire import protocol as P
from ethdaq.host import dissector
out = {}
out["size"] = P.STATUS_RSP.size
body = P.STATUS_RSP.pack(*[bytes(6) if isinstance(x, bytes) else x
                           for x in [0] * 10 + [bytes(6)] + [0] * 17 + [-123]])
_, _, status = P.parse_response(P.pack_header(P.MSG_STATUS | P.RESPONSE, 9) + body)
out["python"] = status.board_temp
out["c"] = P.c_header()
out["lua"] = dissector.lua_dissector()
out["docs"] = T.markdown()
print(repr(out))
"""


def test_a_field_added_to_the_table_reaches_python_c_lua_and_docs(tmp_path):
    """STATUS gains a field in the table, and only there: the struct, the dataclass and the parser
    take it, the C header has its offset and accessors (and compiles with the firmware's parser),
    the dissector shows it and the docs list it."""
    r = subprocess.run([sys.executable, "-c", ADD_A_FIELD], capture_output=True, text=True, check=True)
    out = eval(r.stdout)
    assert out["size"] == protocol.STATUS_RSP.size + 2
    assert out["python"] == -123
    assert re.search(rf"#define CTL_STATUS_RSP_SIZE {protocol.STATUS_RSP.size + 2}u", out["c"])
    assert f"#define CTL_STATUS_RSP_BOARD_TEMP_OFFSET {protocol.STATUS_RSP.size}u" in out["c"]
    assert "ctl_put_status_rsp_board_temp(uint8_t *p, int16_t v)" in out["c"]
    assert 'ProtoField.int16("ethdaqctl.status_rsp.board_temp", "board_temp"' in out["lua"]
    assert f"| {8 + protocol.STATUS_RSP.size} | 2 | board_temp | i16 | the FPGA's temperature [0.1 degC] |" in out["docs"]
    length = 8 + protocol.STATUS_RSP.size + 2
    assert f"| 0x85 | [STATUS_RSP](#0x85-status_rsp-{length}-bytes) | board → host |  | {length} |" in out["docs"]
    assert f"### 0x85 STATUS_RSP ({length} bytes)" in out["docs"]
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "ctl_protocol.h").write_text(out["c"])
    fw = REPO / "software" / "firmware" / "protocol"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", f"-I{tmp_path}", f"-I{fw}",
                    str(fw / "ctl.c"), "-o", str(tmp_path / "ctl.o")], check=True)


def test_the_overview_has_every_message_with_its_length_and_whose_it_is():
    rows = T.overview_markdown().splitlines()[2:]
    assert len(rows) == 2 * len(T.MESSAGES) + 1
    for m in T.MESSAGES:
        request = next(r for r in rows if r.startswith(f"| 0x{m.code:02X} | [{m.name}]("))
        assert f"| host → board | {m.access}'s | {8 + T.size(m.request)} |" in request
        response = next(r for r in rows if r.startswith(f"| 0x{m.code | T.RESPONSE:02X} | [{m.name}_RSP]("))
        assert f"| board → host |  | {8 + T.size(m.response)}{' +' if m.tail else ''} |" in response
    assert rows[-1].startswith("| 0xFF | [ERROR_RSP](#0xff-error_rsp-9-bytes) | board → host | | 9 or 34 |")
    assert "6 not supported by this build" in rows[-1]


SHOW_IN_HEX = """
from ethdaq.wire import ctlformat as T
fields = T.STREAM_CFG.fields
i = [f.name for f in fields].index("payload")
fields[i] = fields[i]._replace(show="hex")
from ethdaq.wire import protocol as P
from ethdaq.host import dissector
print(repr({"describe": P.Refusal(P.REFUSAL_FIELD_CODES["payload"], 9000, 64, 8954).describe(),
            "lua": dissector.lua_dissector()}))
"""


def test_a_refusal_shows_a_field_in_hex_as_the_table_does():
    """REFUSAL_HEX is the table's: the fields shown in hex (and addresses); a field the table comes
    to show in hex is shown in hex in a refusal, by Python and by the dissector."""
    assert set(protocol.REFUSAL_HEX) == {"enable", "backpressure", "config_mask", "launch_flags", "rule_match",
                                         "dst_ip"}
    assert protocol.Refusal(protocol.REFUSAL_FIELD_CODES["payload"], 9000, 64, 8954).describe() == \
        "payload 9000 out of range 64..8954"
    r = subprocess.run([sys.executable, "-c", SHOW_IN_HEX], capture_output=True, text=True, check=True)
    out = eval(r.stdout)
    assert out["describe"] == "payload 0x2328 out of range 0x40..0x22fa"
    hex_set = re.search(r"local CTL_REFUSAL_HEX = \{ (.*) \}", out["lua"]).group(1)
    assert '["payload"] = true' in hex_set
    assert T.refused_field("config_mask") is dict(T.flatten(T.MESSAGE["CONFIG_SET"].request))["mask"]
    with pytest.raises(ValueError, match="REFUSAL_FIELDS' 'nope' must be a request's field"):
        T.refused_field("nope")
