"""`ethdaq ioc` serving the simulated board's PVs, read and written by an independent Channel Access
client (pyepics, with EPICS base's libca) inside the board's namespace: every read PV against what
`ethdaq ctl ... --json` reports around it, puts that start and stop a run and change settings, puts
the board refuses (out of its range, another host holding it) as alarms with the board's reason,
and a board that stops answering as INVALID/COMM alarms. A pvAccess client (p4p) reads and writes
the same PVs."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import ethdaq_cmd, requires_root
from ethdaq.host import ioc
from ethdaq.wire import protocol
from test_network import BOARD_IP, CTL_PORT, HOST_IP, MAC, NETNS, SECOND_IP, TAP, board, ns_python_args  # noqa: F401

# The simulated board of test_network (the same build and namespace, made again for this module).
pytestmark = [requires_root, pytest.mark.network]

PREFIX = "LAB:DAQ1:"          # The board's PVs. Beside it, GHOST: a board that never answers.
GHOST = "127.0.0.1:7999"
# Channel Access and pvAccess on loopback only, on ports of their own, inside the namespace: no
# search, beacon or server port on any other interface.
EPICS_ENV = {"EPICS_CA_ADDR_LIST": "127.0.0.1", "EPICS_CA_AUTO_ADDR_LIST": "NO", "EPICS_CA_SERVER_PORT": "15064",
             "EPICS_CA_REPEATER_PORT": "15065", "EPICS_CAS_INTF_ADDR_LIST": "127.0.0.1",
             "EPICS_CAS_BEACON_ADDR_LIST": "127.0.0.1", "EPICS_CAS_AUTO_BEACON_ADDR_LIST": "NO",
             "EPICS_PVA_ADDR_LIST": "127.0.0.1", "EPICS_PVA_AUTO_ADDR_LIST": "NO",
             "EPICS_PVAS_INTF_ADDR_LIST": "127.0.0.1", "EPICS_PVAS_BEACON_ADDR_LIST": "127.0.0.1",
             "EPICS_PVAS_AUTO_BEACON_ADDR_LIST": "NO", "EPICS_PVAS_SERVER_PORT": "15075",
             "EPICS_PVAS_BROADCAST_PORT": "15076", "EPICS_PVA_SERVER_PORT": "15075", "EPICS_PVA_BROADCAST_PORT": "15076"}
NO, MINOR, MAJOR, INVALID = range(4)                       # EPICS alarm severities
WRITE_ALARM, COMM_ALARM, UDF_ALARM = 2, 9, 17              # and statuses (alarm.h)
NAMES = [pv.name for pv in ioc.board_pvs()]
# Read as text: the long strings and the enums (by their state's name).
AS_TEXT = ["ID:BUILD", "ID:FIRMWARE", "COMM:MSG", "CTL:MSG", "EMU:MODE_RBV", "PTP:ROLE_RBV", "PTP:STATE", "PTP:SERVO",
           "EMU:MODE", "PTP:ROLE"]


@pytest.fixture(scope="module")
def served(board, tmp_path_factory):
    """`ethdaq ioc` inside the namespace, polling the board every second."""
    log = tmp_path_factory.mktemp("ioc") / "ioc.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(["ip", "netns", "exec", NETNS, *ethdaq_cmd(
                                    "ioc", "--board", f"{BOARD_IP}:{CTL_PORT}=DAQ1", "--board", f"{GHOST}=GHOST",
                                    "--prefix", "LAB:", "--interval", "1", "--timeout", "2")],
                                env=os.environ | EPICS_ENV, stdout=f, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while "Ctrl-C stops" not in log.read_text():     # EPICS base's banner comes first.
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    assert (f"serving {2 * len(NAMES)} PVs of {BOARD_IP}:{CTL_PORT} as {PREFIX}, {GHOST} as LAB:GHOST: over Channel "
            f"Access and pvAccess") in log.read_text(), log.read_text()
    yield proc
    proc.terminate()
    proc.wait(timeout=60)
    assert proc.returncode == 0, log.read_text()   # SIGTERM stops it cleanly


# The client's side, run inside the namespace: get(name) -> {value, severity, status, units},
# put(name, value) with a callback (returns once the IOC processed it), wait_for(name, test).
CLIENT = f"""
import json, os, subprocess, sys, time
os.environ.update({EPICS_ENV!r})
import epics
PREFIX = {PREFIX!r}

def get(name, as_string=False):
    pv = epics.get_pv(PREFIX + name, form="ctrl", connect=True, timeout=10)
    m = pv.get_with_metadata(as_string=as_string, use_monitor=False, timeout=10)
    assert m is not None, name
    value = m["value"]
    value = value.item() if hasattr(value, "item") else value
    return dict(value=value, severity=m["severity"], status=m["status"], units=m.get("units"))

def text(name):
    return get(name, as_string=True)

def put(name, value):
    return epics.caput(PREFIX + name, value, wait=True, timeout=60)

def wait_for(name, test, as_string=False, timeout=60):
    deadline = time.monotonic() + timeout
    while not test(m := get(name, as_string)):
        assert time.monotonic() < deadline, (name, m)
        time.sleep(0.2)
    return m

CTL = {ethdaq_cmd("ctl") + ["--ip", BOARD_IP, "--port", str(CTL_PORT)]!r}

def ctl(*args):
    return json.loads(subprocess.run(CTL + list(args) + ["--json"], capture_output=True, text=True, check=True).stdout)
"""


def client(board, code, *args, timeout=240):
    """Run CLIENT + code inside the namespace; its last line of output, as JSON."""
    return json.loads(ns_python_args(board, CLIENT + code, [json.dumps(a) for a in args],
                                     timeout=timeout).strip().splitlines()[-1])


READ_ALL = """
names, as_text = json.loads(sys.argv[1]), json.loads(sys.argv[2])
# The board's replies, STATUS last, then a poll of the IOC answered after them all (its uptime is
# later than that STATUS's), then every PV, then the replies again: each PV's value is between.
def replies():
    return {a: ctl(a) for a in ("identify", "config", "rx", "ptp", "status")}
before = replies()
wait_for("STAT:UPTIME", lambda m: m["value"] * 1000 > before["status"]["uptime_ms"] and m["severity"] == 0)
pvs = {n: text(n) if n in as_text else get(n) for n in names}
after = replies()
print(json.dumps([before, pvs, after]))
"""


def test_every_read_pv_is_what_the_board_reports(board, served):
    before, pvs, after = client(board, READ_ALL, NAMES, AS_TEXT)
    st0, st1 = before["status"], after["status"]

    def between(name, lo, hi):
        m = pvs[name]
        assert m["severity"] == NO and lo <= m["value"] <= hi, (name, lo, m, hi)

    def equal(name, value):
        m = pvs[name]
        assert m["severity"] == NO and m["value"] == value, (name, m, value)

    ident = after["identify"]
    equal("ID:BOARD", ident["board"])
    equal("ID:BUILD", ident["build_id"])
    equal("ID:FIRMWARE", ident["ident"])
    equal("ID:MAC", MAC)
    equal("ID:CHANNELS", ident["nchannels"])
    equal("ID:SAMPLE_BITS", ident["sample_bits"])
    equal("COMM:UP", 1)
    assert pvs["COMM:FAILS"]["severity"] == NO   # A poll of a simulated board on a loaded machine may time out.
    equal("COMM:MSG", "")
    between("STAT:UPTIME", st0["uptime_ms"] / 1000, st1["uptime_ms"] / 1000)
    equal("STAT:BOOTS", st1["boots"])
    equal("RUN:RUNNING", st1["running"])
    equal("RUN:NUMBER", st1["run"])
    between("RUN:DATAGRAMS", st0["datagrams"], st1["datagrams"])
    between("RUN:DROPPED", st0["dropped"], st1["dropped"])
    assert pvs["LINK:UP"]["value"] in {int(st["link"].startswith("up")) for st in (st0, st1)}, (pvs["LINK:UP"], st0, st1)
    assert pvs["LINK:SPEED"]["value"] in {st["link_speed"] for st in (st0, st1)}, (pvs["LINK:SPEED"], st0, st1)
    for name in ("ctl_requests", "ctl_refused", "ctl_replayed", "port_rx_dropped", "port_tx_dropped", "arp_timeouts",
                 "arp_refused", "rx_fcs_errors", "rx_preamble_errors", "link_losses", "watchdog_resets",
                 "dst_mac_changes"):
        between(f"STAT:{name.upper()}", st0[name], st1[name])
    assert pvs["STAT:CTL_REQUESTS"]["value"] > st0["ctl_requests"]      # The IOC's own polls count.
    equal("CTL:CONTROLLER", st1["controller_ip"] or "")
    streams0, streams1 = {s["stream"]: s for s in st0["streams"]}, {s["stream"]: s for s in st1["streams"]}
    assert len(streams1) == ident["nchannels"]
    for i in range(protocol.MAX_STREAMS):
        for field in ("datagrams", "bytes", "dropped"):
            name = f"S{i}:{field.upper()}"
            if i in streams1:
                between(name, streams0[i][field], streams1[i][field])
            else:   # Not in this build.
                assert (pvs[name]["severity"], pvs[name]["status"]) == (INVALID, UDF_ALARM), (name, pvs[name])
    for _, cause, _ in protocol.RX_COUNTERS:
        name = f"RX:{cause.upper()}"
        if cause in after["rx"]:
            between(name, before["rx"][cause], after["rx"][cause])
        else:
            assert (pvs[name]["severity"], pvs[name]["status"]) == (INVALID, UDF_ALARM), (name, pvs[name])
    assert pvs["RX:RX_OK"]["value"] > before["rx"]["rx_ok"]     # The poll's own requests.
    ptp0, ptp1 = before["ptp"], after["ptp"]
    assert pvs["PTP:STATE"]["value"] in (ptp0["state"], ptp1["state"]), pvs["PTP:STATE"]
    assert pvs["PTP:SERVO"]["value"] in (ptp0["servo_state"], ptp1["servo_state"]), pvs["PTP:SERVO"]
    for name in ("steps", "announce_timeouts", "delay_resp_missing", "tx_ts_missing", "rx_ts_missing", "faults"):
        between(f"PTP:{name.upper()}", ptp0[name], ptp1[name])
    if ptp0["offset_ns"] == ptp1["offset_ns"]:
        equal("PTP:OFFSET", ptp1["offset_ns"])
        equal("PTP:DELAY", ptp1["mean_path_delay_ns"])
    cfg = after["config"]
    assert cfg == before["config"]
    equal("CFG:PAYLOAD_RBV", cfg["payload"])
    equal("CFG:ENABLE_RBV", cfg["enable"])
    equal("CFG:DST_IP_RBV", "" if cfg["dst_ip"] == "requester" else cfg["dst_ip"])
    equal("CFG:DST_PORT_RBV", cfg["dst_port"])
    equal("EMU:MODE_RBV", cfg["emulator_mode"])
    assert pvs["EMU:RATE_RBV"]["value"] == pytest.approx(cfg["emulator_rate"], rel=1e-6)
    equal("PTP:ROLE_RBV", cfg["ptp_role"])
    # Units as the PV table gives them, through Channel Access.
    assert pvs["STAT:UPTIME"]["units"] == "s" and pvs["PTP:OFFSET"]["units"] == "ns" and pvs["CFG:PAYLOAD_RBV"]["units"] == "B"
    assert pvs["S0:BYTE_RATE"]["units"] == "B/s" and pvs["RX:FCS"]["units"] == "frames"


RUN = """
out = {}
mode = out["original_mode"] = ctl("config")["emulator_mode"]
out["counter"] = put("EMU:MODE", "counter")
out["config_counter"] = ctl("config")["emulator_mode"]
out["start"] = put("RUN:CTRL", "Start")
out["status_started"] = ctl("status")
out["msg_started"] = text("CTL:MSG")
out["running"] = wait_for("RUN:RUNNING", lambda m: m["value"] == 1)
# Two polls while datagrams flow: the rates.
out["rate"] = wait_for("S0:DATAGRAM_RATE", lambda m: m["severity"] == 0 and m["value"] > 0)
out["byte_rate"] = get("S0:BYTE_RATE")
out["payload"] = put("CFG:PAYLOAD", 1024)
out["config_payload"] = ctl("config")["payload"]
out["payload_rbv"] = wait_for("CFG:PAYLOAD_RBV", lambda m: m["value"] == 1024)
out["stop"] = put("RUN:CTRL", "Stop")
out["status_stopped"] = ctl("status")
out["stopped"] = wait_for("RUN:RUNNING", lambda m: m["value"] == 0)
out["rate_stopped"] = wait_for("S0:DATAGRAM_RATE", lambda m: m["value"] == 0)
out["mode"] = put("EMU:MODE", "ramp")
out["config_mode"] = ctl("config")["emulator_mode"]
out["mode_rbv"] = wait_for("EMU:MODE_RBV", lambda m: m["value"] == "ramp", as_string=True)
put("CFG:PAYLOAD", 1472)
put("EMU:MODE", mode)
out["restored"] = ctl("config")
out["write_errors"] = get("CTL:WRITE_ERRORS")
print(json.dumps(out))
"""


def test_puts_start_and_stop_a_run_and_change_the_boards_settings(board, served):
    out = client(board, RUN)
    assert out["counter"] == 1 and out["config_counter"] == "counter"
    assert out["start"] == 1 and out["status_started"]["running"] == 1
    run = out["status_started"]["run"]
    assert out["msg_started"]["value"].startswith(f"RUN:CTRL Start: run {run} started: datagrams of 1472 bytes to "
                                                  f"{HOST_IP}:5000"), out["msg_started"]
    assert out["msg_started"]["severity"] == NO
    assert out["rate"]["value"] > 0 and out["byte_rate"]["value"] > out["rate"]["value"] * 16
    assert out["payload"] == 1 and out["config_payload"] == 1024 and out["payload_rbv"]["severity"] == NO
    assert out["mode"] == 1 and out["config_mode"] == "ramp" and out["mode_rbv"]["severity"] == NO
    assert out["stop"] == 1 and out["status_stopped"]["running"] == 0 and out["status_stopped"]["run"] == run
    assert out["restored"]["payload"] == 1472 and out["restored"]["emulator_mode"] == out["original_mode"]
    assert out["write_errors"]["value"] == 0


REFUSED = f"""
from ethdaq.host.ctl import ControlClient
out = {{}}
max_payload = ctl("identify")["max_payload"]
errors = get("CTL:WRITE_ERRORS")["value"]
out["too_big"] = put("CFG:PAYLOAD", max_payload + 1)
out["too_big_pv"] = get("CFG:PAYLOAD")
out["too_big_msg"] = text("CTL:MSG")
out["too_big_config"] = ctl("config")["payload"]
out["errors"] = get("CTL:WRITE_ERRORS")["value"] - errors
out["max_payload"] = max_payload
# Another host holds the board: the IOC lets it go, the other claims it.
out["release"] = put("CTL:CLAIM", "Release")
with ControlClient({BOARD_IP!r}, {CTL_PORT}, bind={SECOND_IP!r}) as other:
    out["other_claim"] = other.claim(60)
    out["start"] = put("RUN:CTRL", "Start")
    out["start_pv"] = get("RUN:CTRL")
    out["start_msg"] = text("CTL:MSG")
    out["status"] = ctl("status")
    out["claim"] = put("CTL:CLAIM", "Claim")
    out["claim_msg"] = text("CTL:MSG")
    out["controller"] = wait_for("CTL:CONTROLLER", lambda m: m["value"] == {SECOND_IP!r})
    other.release()
# Free again: the next put is taken and clears the alarms.
out["stop"] = put("RUN:CTRL", "Stop")
out["stop_pv"] = get("RUN:CTRL")
out["stop_msg"] = text("CTL:MSG")
out["errors_after"] = get("CTL:WRITE_ERRORS")["value"] - errors
print(json.dumps(out))
"""


def test_a_refused_put_is_an_alarm_with_the_boards_reason(board, served):
    """Out of the board's range (its max payload), and from the IOC while another host holds the
    board: the put is not taken (the PV keeps its value), the PV and CTL:MSG alarm with the board's
    reason, CTL:WRITE_ERRORS counts them, and the board is unchanged."""
    board.ns_run(["ip", "addr", "add", f"{SECOND_IP}/24", "dev", TAP], check=True)
    try:
        out = client(board, REFUSED)
    finally:
        board.ns_run(["ip", "addr", "del", f"{SECOND_IP}/24", "dev", TAP])
    max_payload = out["max_payload"]
    pv = out["too_big_pv"]
    assert out["too_big"] == 1 and pv["value"] != max_payload + 1 and (pv["severity"], pv["status"]) == (MAJOR, WRITE_ALARM)
    msg = out["too_big_msg"]
    assert msg["value"] == (f"CFG:PAYLOAD {max_payload + 1}: board refused the request: payload {max_payload + 1} "
                            f"out of range 64..{max_payload}"), msg
    assert (msg["severity"], msg["status"]) == (MAJOR, WRITE_ALARM)
    assert out["too_big_config"] == pv["value"] and out["errors"] == 1
    assert out["release"] == 1 and out["other_claim"][0] is True
    assert (out["start_pv"]["value"], out["start_pv"]["severity"], out["start_pv"]["status"]) == (0, MAJOR, WRITE_ALARM)
    assert out["start_msg"]["value"] == ("RUN:CTRL Start: board refused the request: another controller holds the board "
                                         "(ethdaq ctl claim shows which)"), out["start_msg"]
    assert out["status"]["running"] == 0 and out["status"]["controller_ip"] == SECOND_IP
    assert out["claim_msg"]["value"].startswith(f"CTL:CLAIM Claim: the board is held by {SECOND_IP} for another ")
    assert out["controller"]["severity"] == NO
    assert (out["stop_pv"]["severity"], out["stop_msg"]["severity"]) == (NO, NO)
    assert out["stop_msg"]["value"].startswith("RUN:CTRL Stop: run "), out["stop_msg"]
    assert out["errors_after"] == 3


SILENT = """
phase = json.loads(sys.argv[1])
if phase == "down":
    out = {"up": wait_for("COMM:UP", lambda m: m["value"] == 0)}
    out.update({n: get(n) for n in ("STAT:UPTIME", "RUN:RUNNING", "S0:DATAGRAMS", "RX:RX_OK", "PTP:STATE", "CFG:PAYLOAD_RBV")})
    out["msg"] = text("COMM:MSG")
    out["fails"] = get("COMM:FAILS")
else:
    out = {"up": wait_for("COMM:UP", lambda m: m["value"] == 1), "uptime": wait_for("STAT:UPTIME", lambda m: m["severity"] == 0)}
print(json.dumps(out))
"""


def test_a_board_that_stops_answering_turns_its_pvs_invalid(board, served):
    """The simulation stopped (SIGSTOP): no answer; every read PV of the board keeps its last value
    with severity INVALID and status COMM, COMM:UP is 0 (MAJOR) and COMM:MSG says why. Going on
    (SIGCONT), the next poll clears them."""
    os.killpg(board.proc.pid, signal.SIGSTOP)
    try:
        down = client(board, SILENT, "down")
    finally:
        os.killpg(board.proc.pid, signal.SIGCONT)
    assert (down["up"]["severity"], down["up"]["status"]) == (MAJOR, 7)    # ZSV: the STATE alarm.
    for name in ("STAT:UPTIME", "RUN:RUNNING", "S0:DATAGRAMS", "RX:RX_OK", "PTP:STATE", "CFG:PAYLOAD_RBV"):
        assert (down[name]["severity"], down[name]["status"]) == (INVALID, COMM_ALARM), (name, down[name])
    assert down["STAT:UPTIME"]["value"] > 0
    assert down["msg"]["value"].startswith(f"no answer from {BOARD_IP}:{CTL_PORT} after 3 tries of 2 s"), down["msg"]
    assert down["fails"]["value"] >= 1
    up = client(board, SILENT, "up")
    assert up["up"]["severity"] == NO and up["uptime"]["value"] > down["STAT:UPTIME"]["value"]


PVA = """
from p4p.client.thread import Context
ctx = Context("pva", conf={k: v for k, v in os.environ.items() if k.startswith("EPICS_PVA_")}, useenv=False)

def pva(name):
    v = ctx.get(PREFIX + name, timeout=10).raw
    try:
        units = v.display.units
    except AttributeError:
        units = None
    return dict(value=v.value, type=type(v.value).__name__, severity=v.alarm.severity, message=v.alarm.message,
                units=units)

out = {"requests": pva("STAT:CTL_REQUESTS"), "uptime": pva("STAT:UPTIME")}
max_payload = ctl("identify")["max_payload"]
out["before"] = pva("CFG:PAYLOAD")
ctx.put(PREFIX + "CFG:PAYLOAD", max_payload + 1, wait=True, timeout=60)
out["refused"] = pva("CFG:PAYLOAD")
out["refused_msg"] = pva("CTL:MSG")
out["config"] = ctl("config")["payload"]
ctx.put(PREFIX + "CFG:PAYLOAD", 1472, wait=True, timeout=60)
out["taken"] = pva("CFG:PAYLOAD")
out["max_payload"] = max_payload
print(json.dumps(out))
"""


def test_pvaccess_serves_the_same_pvs_and_refuses_the_same_puts(board, served):
    """QSRV's pvAccess beside Channel Access: the 64-bit counters as integers, units and alarms
    (EPICS's status name as the alarm's message), and a put the board refuses."""
    out = client(board, PVA)
    assert out["requests"]["type"] == "int" and out["requests"]["value"] > 0 and out["requests"]["units"] == "reqs"
    assert out["uptime"]["units"] == "s" and out["uptime"]["severity"] == NO
    max_payload = out["max_payload"]
    refused = out["refused"]
    assert refused["value"] == out["before"]["value"] == out["config"] != max_payload + 1
    assert (refused["severity"], refused["message"]) == (MAJOR, "WRITE")
    assert out["refused_msg"]["value"].startswith(f"CFG:PAYLOAD {max_payload + 1}: board refused the request: payload")
    assert (out["taken"]["value"], out["taken"]["severity"]) == (1472, NO)


NEVER = """
PREFIX = "LAB:GHOST:"
out = {"up": wait_for("COMM:UP", lambda m: m["value"] == 0 and m["severity"] == 2)}
out.update({n: get(n) for n in ("STAT:UPTIME", "RUN:RUNNING", "S0:DATAGRAMS", "CFG:PAYLOAD_RBV", "RUN:CTRL")})
out["comm_msg"] = text("COMM:MSG")
out["start"] = put("RUN:CTRL", "Start")
out["start_pv"] = get("RUN:CTRL")
out["msg"] = text("CTL:MSG")
print(json.dumps(out))
"""


def test_a_board_that_never_answered_is_invalid_beside_one_that_does(board, served):
    """The IOC's second board (NAME GHOST) has no board behind it: its read PVs are INVALID/COMM
    from the start, its setpoints undefined (no setting to start from), and a put to it is refused
    as unanswered after the client's tries (CTL:MSG: MAJOR, COMM), while the first board's PVs are
    served."""
    out = client(board, NEVER)
    for name in ("STAT:UPTIME", "RUN:RUNNING", "S0:DATAGRAMS", "CFG:PAYLOAD_RBV"):
        assert (out[name]["severity"], out[name]["status"]) == (INVALID, COMM_ALARM), (name, out[name])
    assert (out["RUN:CTRL"]["severity"], out["RUN:CTRL"]["status"]) == (INVALID, UDF_ALARM), out["RUN:CTRL"]
    assert out["comm_msg"]["value"] == f"no answer from {GHOST} after 3 tries of 2 s"
    # Still undefined: INVALID outranks the put's MAJOR.
    assert out["start"] == 1 and (out["start_pv"]["severity"], out["start_pv"]["status"]) == (INVALID, UDF_ALARM)
    assert out["msg"]["value"] == f"RUN:CTRL Start: no answer from {GHOST} after 3 tries of 2 s", out["msg"]
    assert (out["msg"]["severity"], out["msg"]["status"]) == (MAJOR, COMM_ALARM)
