#!/usr/bin/env python3
#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""libFuzzer runs over the firmware's packet parsers, built for the host exactly as the target
builds them, with AddressSanitizer and UndefinedBehaviorSanitizer:

- ctl: software/firmware/protocol/ctl.c, the control protocol handler with its reply cache; each input is
  a conversation of several requesters (test/firmware/c/ctl_fuzz.c, whose comment lists the invariants).
- ptp: software/firmware/services/ptp/, the PTP stack; each input is a script of received messages,
  time steps and TX timestamps (test/firmware/c/ptp_fuzz.c).
- dhcp: software/firmware/protocol/dhcp.c, the DHCP client; each input is a conversation of server
  replies and clock steps with one client (test/firmware/c/dhcp_fuzz.c).

Each harness starts from a small corpus of valid inputs written here, runs --runs inputs (default
10 million) and the table says how many ran, how fast, the coverage libFuzzer reached and how
many crashed (any crash stops libFuzzer: the input is kept in build/fuzz/<harness>/ and the exit
status is 1). Needs clang with libFuzzer (Debian: clang libclang-rt-14-dev; `make test` installs
them). CI runs short versions of each (test/firmware/test_protocol.py, test/firmware/test_ptp_fw.py, test/firmware/test_dhcp.py).

    .venv/bin/python bench/fuzz.py [--runs 10000000] [--harness ctl,ptp,dhcp] [--markdown]
"""

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.table import print_table  # noqa: E402
from ethdaq.wire import protocol  # noqa: E402

FW = REPO / "software" / "firmware"
SANITIZE = ["-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all"]


def build(harness, out):
    """The libFuzzer binary for one harness, in out/."""
    clang = shutil.which("clang")
    if clang is None:
        sys.exit("error: clang is not installed (Debian: apt-get install clang libclang-rt-14-dev; "
                 "`make test` installs them)")
    out.mkdir(parents=True, exist_ok=True)
    exe = out / f"{harness}_fuzz"
    if harness == "ctl":
        gen = out / "generated"
        gen.mkdir(exist_ok=True)
        (gen / "ctl_protocol.h").write_text(protocol.c_header())
        cmd = [clang, "-g", "-O1", *SANITIZE, "-DCTL_FUZZ_LIBFUZZER", f"-I{out}", f"-I{FW / 'protocol'}",
               str(FW / "protocol" / "ctl.c"), str(FW / "protocol" / "hmac_sha256.c"), str(REPO / "test" / "firmware" / "c" / "ctl_fuzz.c"), "-o", str(exe)]
    elif harness == "dhcp":
        cmd = [clang, "-g", "-O1", *SANITIZE, "-DDHCP_FUZZ_LIBFUZZER", f"-I{FW / 'protocol'}",
               str(FW / "protocol" / "dhcp.c"), str(REPO / "test" / "firmware" / "c" / "dhcp_fuzz.c"), "-o", str(exe)]
    else:
        ptp = FW / "services" / "ptp"
        cmd = [clang, "-g", "-O1", *SANITIZE, "-DPTP_FUZZ_LIBFUZZER", f"-I{ptp}",
               *map(str, sorted(ptp.glob("*.c"))), str(REPO / "test" / "firmware" / "c" / "ptp_fuzz.c"), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"error: building the {harness} harness failed:\n{r.stderr}")
    return exe


def ctl_seeds():
    """Conversations of valid requests: one requester, then a retransmission and a stale seq."""
    reqs = [protocol.identify_request(1), protocol.stream_start_request(2), protocol.status_request(3),
            protocol.emulator_request(4, 1, 1 << 31), protocol.stream_stop_request(5),
            protocol.reg_read_request(6, 8, 2), protocol.reg_write_request(7, 4, [1500]), protocol.rx_stats_request(8)]
    one = bytes([0xF0]) + b"".join(bytes([0, len(r)]) + r for r in reqs)
    retry = bytes([0xF5]) + b"".join(bytes([1, len(r)]) + r for r in reqs[1:2] * 2 + reqs[:1]) + bytes([0x81, 0])
    return {"conversation": one, "retransmission": retry}


def dhcp_seeds():
    """An offer, its ack, the clock to T1 and a renewal's ack, then the clock past the lease (the
    harness sets xid and MAC: kind 0x40 plus the length's high bits)."""
    from scapy.layers.dhcp import BOOTP, DHCP
    def reply(kind):
        opts = [("message-type", kind), ("server_id", "192.168.78.1"), ("lease_time", 100),
                ("subnet_mask", "255.255.255.0"), ("router", "192.168.78.254"), "end"]
        m = bytes(BOOTP(op=2, yiaddr="192.168.78.120") / DHCP(options=opts))
        return bytes([0x40 | len(m) >> 8, len(m) & 0xFF]) + m
    wait = lambda quarter_s: bytes([0x80, quarter_s])
    return {"lease": reply("offer") + reply("ack") + wait(200) + reply("ack") + wait(250) + wait(250),
            "nak": reply("offer") + reply("nak") + wait(20)}


def ptp_seeds(exe):
    """The standalone harness' own scripts are not written out; an empty corpus is fine for
    libFuzzer, and a few bytes of each operation give it a start."""
    return {"ops": bytes([0x00, 0x01, 0x02, 0x10, 0x00, 0x02, 0x01, 0x00, 0x03, 0x00])}


def run(harness, exe, runs, seed, timeout, workdir):
    corpus = workdir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    seeds = ctl_seeds() if harness == "ctl" else dhcp_seeds() if harness == "dhcp" else ptp_seeds(exe)
    for name, data in seeds.items():
        (corpus / name).write_bytes(data)
    cmd = [str(exe), f"-runs={runs}", f"-seed={seed}", f"-timeout={timeout}", "-print_final_stats=1",
           f"-artifact_prefix={workdir}/", str(corpus)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    text = r.stderr
    done = re.search(r"Done (\d+) runs in (\d+) second", text)
    last = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)/", text)
    crashes = sorted(p.name for p in workdir.glob("crash-*")) + sorted(p.name for p in workdir.glob("timeout-*")) + \
        sorted(p.name for p in workdir.glob("leak-*"))
    execs = int(done.group(1)) if done else int((re.findall(r"stat::number_of_executed_units: (\d+)", text) or [0])[-1])
    cov, ft, corp = map(int, last[-1]) if last else (0, 0, 0)
    ok = r.returncode == 0 and done is not None and not crashes
    # Stopped from outside (a signal, no crash input written): not a crash, but not complete.
    interrupted = not crashes and done is None
    return dict(harness=harness, runs=execs, seconds=seconds, rate=execs / seconds if seconds else 0.0,
                cov=cov, ft=ft, corpus=corp, crashes=len(crashes), interrupted=interrupted,
                artifacts=crashes, ok=ok, tail="\n".join(text.splitlines()[-15:]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10_000_000, help="inputs per harness (default 10,000,000)")
    p.add_argument("--harness", default="ctl,ptp,dhcp", help="comma-separated: ctl, ptp, dhcp (default all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10)")
    p.add_argument("--build-dir", default=str(REPO / "build" / "fuzz"))
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    harnesses = [h.strip() for h in args.harness.split(",") if h.strip()]
    bad = [h for h in harnesses if h not in ("ctl", "ptp", "dhcp")]
    if bad or not harnesses:
        p.error(f"--harness takes ctl, ptp and/or dhcp, not {args.harness!r}")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    results = []
    for h in harnesses:
        out = Path(args.build_dir) / h
        if out.exists():
            shutil.rmtree(out)
        exe = build(h, out)
        print(f"{h}: {args.runs:,} runs ...", file=sys.stderr, flush=True)
        m = run(h, exe, args.runs, args.seed, args.timeout, out)
        results.append(m)
        if not m["ok"]:
            print(m["tail"], file=sys.stderr)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown")
    clang = subprocess.run(["clang", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"machine: {os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}; {clang}; "
          f"ASan + UBSan + libFuzzer, one process per harness")
    head = ["harness", "inputs run", "seconds", "inputs/s", "coverage (edges)", "features", "corpus", "crashes"]
    rows = [[m["harness"], f"{m['runs']:,}" + (" (interrupted)" if m["interrupted"] else ""), f"{m['seconds']:.0f}",
             f"{m['rate']:,.0f}", str(m["cov"]), str(m["ft"]), str(m["corpus"]), str(m["crashes"])] for m in results]
    print_table(head, rows, args.markdown)
    for m in results:
        if m["artifacts"]:
            print(f"{m['harness']}: inputs that failed are in {Path(args.build_dir) / m['harness']}: "
                  f"{', '.join(m['artifacts'])} (replay: {Path(args.build_dir) / m['harness'] / (m['harness'] + '_fuzz')} FILE)")
    return 0 if all(m["ok"] for m in results) else 1


if __name__ == "__main__":
    sys.exit(main())
