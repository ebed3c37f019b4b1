"""The simulated board's PTP stack (software/firmware/services/ptp behind ptpsvc.c) against linuxptp's
ptp4l on the simulation's tap, inside a private network namespace (docs/ptp-firmware.md,
"Interop with linuxptp"). These tests prove the protocol, not the accuracy: ptp4l uses software
timestamps and the board runs ~1000x slower than real time, so neither side can lock to the
other (bench/ptp2.py, two simulated boards, measures accuracy).

(a) ptp4l master (-S, UDP/IPv4, E2E, masterOnly), board slave (--ptp-role slave): the board
    qualifies ptp4l, takes it as parent and grandmaster, goes LISTENING -> UNCALIBRATED, measures
    the path delay with Delay_Req/Delay_Resp, and steps its clock to ptp4l's time.
(b) board master (--ptp-role master), ptp4l slave (slaveOnly): ptp4l selects the board as best
    master, goes LISTENING -> UNCALIBRATED, and accepts the board's Delay_Resp to its Delay_Req;
    on the 1G board and on the simulated 10G board (sim10g).
(c) both runs are captured on the tap (tcpdump) and every PTP frame decoded by tshark.
(d) (a) again over Layer 2 (--ptp-transport l2, ptp4l -2), on the 1G and the 10G board: marked
    slow, each needs its own build.

Each run happens once per module (fixtures): build (reused when unchanged), simulation, capture
and ptp4l, then everything stops and the namespace is removed; the tests judge what the run left.

Two time bases. ptp4l's intervals are wall-clock time, the board's simulated time (~1.5-2 ms
per wall second here, less on a busy machine):
- ptp4l as master sends Announce and Sync every 1 s (~1.5 ms simulated); the board qualifies it
  after two Announces within 4 of its announce intervals (2^0 s simulated: plenty). ptp4l's
  logMinDelayReqInterval -7, adopted by the board from Delay_Resp, gives a board Delay_Req every
  ~7.8 ms simulated (~5 s wall); before that the board's own --ptp-log-delay-req -9 (~1.3 s).
- The board as master announces every 2^-7 s simulated (~5 s wall) and syncs every 2^-9 s
  (~1.3 s wall); its --ptp-log-delay-req 0, adopted by ptp4l, gives a ptp4l Delay_Req every 1 s.
  ptp4l's announce receipt timeout is its own logAnnounceInterval x announceReceiptTimeout of wall
  time: 4 s x 10 here.
- But ptp4l qualifies a foreign master only with two Announces no further apart than 4 of the
  master's *advertised* intervals (port.c msg_current(), on the message's logMessageInterval):
  8 s x 2^-7 = 31 ms here, while the board's Announces come ~5 s apart in wall time. No
  interval satisfies that at a 1000x slowdown, so ptp4l alone never selects the simulated board
  ("new foreign master" and nothing more). Run (b) therefore repeats every Announce of the board
  once, byte for byte, within milliseconds, to ptp4l only (multicast TTL 0 on the host: looped
  back, never on the tap: test_b_capture_... checks that no copy reached the wire). ptp4l's
  best master algorithm still judges the board's own Announce.

ptp4l runs with free_running 1: with software timestamping its clock is CLOCK_REALTIME, which a
network namespace does not separate, and a ptp4l slave would step the machine's clock to the
board's (1970).

The board prints its full status line (counters) only when its port or servo state changes; a
master-only port never changes state after start-up, so in (b) the board's side of the
Delay_Req/Delay_Resp exchange is judged from the capture, ptp4l's own reaction, and the
mailbox's drop counter (ethdaq ctl status, port_rx_dropped).

Run one part: pytest test/system/test_ptp_interop.py -k "test_a and udp" (or test_b, or l2).
"""

import re
import time

import pytest

import ptp4l_helpers as h
from conftest import requires_root
from ethdaq.soc import sim

_missing = h.missing_tools()
pytestmark = [requires_root, pytest.mark.network,
              pytest.mark.skipif(bool(_missing), reason=f"needs {', '.join(_missing)} (ptp4l: apt install linuxptp)")]

BOOT_TIMEOUT = 180

# (a): board slave, ptp4l master (see the module docstring for the intervals).
SLAVE_BUILD  = ("--ptp-role", "slave", "--ptp-log-delay-req", "-9")
PTP4L_MASTER = dict(masterOnly=1, logAnnounceInterval=0, logSyncInterval=0, logMinDelayReqInterval=-7,
                    announceReceiptTimeout=3)
# (b): board master, ptp4l slave.
MASTER_BUILD = ("--ptp-role", "master", "--ptp-log-announce", "-7", "--ptp-log-sync", "-9",
                "--ptp-log-delay-req", "0")
PTP4L_SLAVE  = dict(slaveOnly=1, logAnnounceInterval=2, announceReceiptTimeout=10, logMinDelayReqInterval=-1)

# Counters of the board's status line that must stay 0 against a single well-behaved master.
# (drop_state: Sync/Follow_Up before ptp4l is qualified; drop_sequence: measurements in flight
# across the clock step, discarded by design; both can be nonzero. LOSS_COUNTERS: see
# test_a_board_loses_no_ptp4l_message.)
CLEAN_COUNTERS = h.MALFORMED_DROPS + (
    "drop_domain", "drop_own", "drop_unsupported", "drop_no_timestamp", "drop_not_parent", "drop_not_ours",
    "drop_announce", "rx_other", "rx_delay_req", "tx_errors", "tx_ts_missing", "faults", "rx_ts_missing",
    "hw_tx_overflows", "clock_rejected")
# What a message lost on the way into the firmware leaves: a Delay_Resp (delay_resp_missing), a
# Sync or Follow_Up (rx_ts_discarded: the RX timestamp of a Sync never read; delay_rejected: a
# delay computed against the Sync before, a second older); more than 8 PTP frames while the
# firmware does not read their RX timestamps (hw_rx_overflows).
LOSS_COUNTERS = ("delay_resp_missing", "delay_rejected", "rx_ts_discarded", "hw_rx_overflows")
MESSAGE_LENGTH = {h.SYNC: 44, h.DELAY_REQ: 44, h.FOLLOW_UP: 44, h.DELAY_RESP: 54, h.ANNOUNCE: 64}
CONTROL_FIELD  = {h.SYNC: 0, h.DELAY_REQ: 1, h.FOLLOW_UP: 2, h.DELAY_RESP: 3, h.ANNOUNCE: 5}


# --- the runs ------------------------------------------------------------------------------------

def _start_capture(netns, pcap, tmp):
    cap = h.Background(netns, ["tcpdump", "-i", h.TAP, "-U", "-n", "-w", str(pcap)], tmp / "tcpdump.log")
    assert cap.wait_for(r"listening on", 30), cap.lines
    return cap


def _stop(run, session, procs):
    """Stop the programs (last started first) and keep what they and the board printed."""
    for proc in reversed(procs):
        code = proc.stop()
        if proc.cmd[0] == "ptp4l":
            run.ptp4l, run.ptp4l_exit = proc.lines[:], code
        time.sleep(0.5)  # the capture sees the last frames
    run.console = session.lines[:]


def _decode(run, pcap, tmp):
    run.pcap = pcap
    run.frames = h.decode_ptp(pcap, tmp)
    run.flagged = h.flagged_frames(pcap, tmp)


def _milestone(run, t0, name, found):
    run.milestones[name] = round(time.monotonic() - t0, 1) if found else None
    return found


def _status(predicate):
    """A console predicate: the board's full status line, parsed, if predicate(status)."""
    def check(line):
        s = h.parse_status(line)
        return s if s and predicate(s) else None
    return check


def _stepped_delay_req(frames):
    """A Delay_Req of the board with today's date in originTimestamp: sent after the step."""
    return any(f.type == h.DELAY_REQ and f.clock == h.BOARD_CLOCK and
               int(f["sdr.origintimestamp.seconds"] or 0) > 86400 for f in frames)


def run_board_slave(gateware, netns, tmp, transport):
    """(a): ptp4l master against the slave-only board, until the board has measured the delay,
    stepped its clock and sent a Delay_Req from the new time (or a step times out: the tests then
    say which)."""
    run, procs, pcap = h.Run(), [], tmp / "tap.pcap"
    cfg = h.write_ptp4l_config(tmp / "ptp4l.cfg", network_transport=transport, **PTP4L_MASTER)
    session = sim.SimSession(gateware, netns=netns, echo=False, log=tmp / "console.log")
    with session:
        try:
            session.wait_for("ethdaq ready", timeout=BOOT_TIMEOUT)
            run.ptp4l_clock = h.tap_clock(netns)
            procs.append(_start_capture(netns, pcap, tmp))
            t0 = time.monotonic()
            ptp4l = h.Background(netns, ["ptp4l", "-i", h.TAP, "-f", str(cfg), "-m", "-l", "7"], tmp / "ptp4l.log")
            procs.append(ptp4l)
            (_milestone(run, t0, "ptp4l grand master", ptp4l.wait_for(r"assuming the grand master role", 60)) and
             _milestone(run, t0, "board uncalibrated",
                        h.wait_console(session, lambda line: "ptp: state LISTENING -> UNCALIBRATED" in line, 90)) and
             # The servo's first decision (JUMP) comes after two offsets 2^26 ns of simulated time
             # apart (~45 s wall), and needs a delay: its status line has the exchange's counters.
             _milestone(run, t0, "board servo decided",
                        h.wait_console(session, _status(lambda s: s["servo"] != "UNLOCKED"), 300)) and
             # The step, at the next Sync once a new delay is known (~5 s).
             _milestone(run, t0, "board stepped",
                        h.wait_console(session, _status(lambda s: int(s["steps"]) >= 1), 120)) and
             _milestone(run, t0, "board Delay_Req after the step",
                        h.wait_capture(pcap, tmp, _stepped_delay_req, 60)))
            run.board_status = h.board_status(netns)
        finally:
            _stop(run, session, procs)
    assert not h.netns_exists(netns)
    _decode(run, pcap, tmp)
    return run


def _b_enough(frames):
    count = lambda side_ip, t: sum(1 for f in frames if f["ip.src"] == side_ip and f.type == t)  # noqa: E731
    return (count(h.HOST_IP, h.DELAY_REQ) >= 5 and count(h.BOARD_IP, h.DELAY_RESP) >= 4 and
            count(h.BOARD_IP, h.ANNOUNCE) >= 3 and count(h.BOARD_IP, h.FOLLOW_UP) >= 5)


def run_board_master(gateware, netns, tmp):
    """(b): ptp4l slave against the master-only board, until ptp4l has accepted the board's
    Delay_Resp and computed a path delay from it, and a few exchanges are on record."""
    run, procs, pcap = h.Run(), [], tmp / "tap.pcap"
    cfg = h.write_ptp4l_config(tmp / "ptp4l.cfg", network_transport="UDPv4", **PTP4L_SLAVE)
    session = sim.SimSession(gateware, netns=netns, echo=False, log=tmp / "console.log")
    with session:
        try:
            session.wait_for("ethdaq ready", timeout=BOOT_TIMEOUT)
            run.ptp4l_clock = h.tap_clock(netns)
            procs.append(_start_capture(netns, pcap, tmp))
            repeater = h.start_announce_repeater(netns, tmp / "repeater.log")
            procs.append(repeater)
            assert repeater.wait_for(r"^repeating$", 30), repeater.lines
            t0 = time.monotonic()
            ptp4l = h.Background(netns, ["ptp4l", "-i", h.TAP, "-f", str(cfg), "-m", "-l", "7"], tmp / "ptp4l.log")
            procs.append(ptp4l)
            (_milestone(run, t0, "ptp4l new foreign master", ptp4l.wait_for(r"new foreign master", 90)) and
             _milestone(run, t0, "ptp4l uncalibrated", ptp4l.wait_for(r"LISTENING to UNCALIBRATED", 90)) and
             _milestone(run, t0, "ptp4l adopted the board's delay request interval",
                        ptp4l.wait_for(r"minimum delay request interval", 60)) and
             _milestone(run, t0, "ptp4l path delay", ptp4l.wait_for(r"delay\s+filtered", 60)) and
             _milestone(run, t0, "exchanges on record", h.wait_capture(pcap, tmp, _b_enough, 60)))
            run.board_status = h.board_status(netns)
        finally:
            _stop(run, session, procs)
    assert not h.netns_exists(netns)
    _decode(run, pcap, tmp)
    return run


@pytest.fixture(scope="module", params=[
    "udp", "udp-10g", pytest.param("l2", marks=pytest.mark.slow), pytest.param("l2-10g", marks=pytest.mark.slow)])
def slave_run(request, tmp_path_factory):
    """(a), (a) on the simulated 10G board (udp-10g: XGMII, 64-bit timestamp units), and (d) with
    the l2 parameters: ptp4l -2 against a board built for Layer 2, on the 1G and the 10G board
    (the PTP CPU port's bytes through gateware/cpuport.py's MACPortConverter)."""
    if request.param == "udp":
        gateware = h.build_board("slave", *SLAVE_BUILD)
        run = run_board_slave(gateware, "ethdaq-ptp-a", tmp_path_factory.mktemp("ptp-a"), "UDPv4")
    elif request.param == "udp-10g":
        gateware = h.build_board("slave-10g", *SLAVE_BUILD, board="sim10g")
        run = run_board_slave(gateware, "ethdaq-ptp-a10g", tmp_path_factory.mktemp("ptp-a10g"), "UDPv4")
    elif request.param == "l2-10g":
        gateware = h.build_board("slave-l2-10g", *SLAVE_BUILD, "--ptp-transport", "l2", board="sim10g")
        run = run_board_slave(gateware, "ethdaq-ptp-d10g", tmp_path_factory.mktemp("ptp-d10g"), "L2")
    else:
        gateware = h.build_board("slave-l2", *SLAVE_BUILD, "--ptp-transport", "l2")
        run = run_board_slave(gateware, "ethdaq-ptp-d", tmp_path_factory.mktemp("ptp-d"), "L2")
    run.transport = request.param.split("-")[0]
    return run


@pytest.fixture(scope="module", params=["udp", "udp-10g"])
def master_run(request, tmp_path_factory):
    """(b), and (b) on the simulated 10G board (udp-10g: XGMII, the firmware's lane correction on
    its Sync and Delay_Resp timestamps)."""
    if request.param == "udp":
        gateware = h.build_board("master", *MASTER_BUILD)
        run = run_board_master(gateware, "ethdaq-ptp-b", tmp_path_factory.mktemp("ptp-b"))
    else:
        gateware = h.build_board("master-10g", *MASTER_BUILD, board="sim10g")
        run = run_board_master(gateware, "ethdaq-ptp-b10g", tmp_path_factory.mktemp("ptp-b10g"))
    return run


# --- shared checks -------------------------------------------------------------------------------

def describe(run):
    """Context for a failure: when things happened, the last lines of both sides."""
    console = [line.strip() for line in run.console if "ptp" in line][-8:]
    ptp4l = [line for line in run.ptp4l if " item " not in line][-12:]
    return (f"milestones (s after ptp4l started): {run.milestones}\n--- board console (last):\n" +
            "\n".join(console) + "\n--- ptp4l (last):\n" + "\n".join(ptp4l))


def ptp4l_lines(run):
    return [line for line in run.ptp4l if " item " not in line]


def from_board(run, frame):
    if run.transport == "l2":
        return frame["eth.src"] == h.BOARD_MAC
    return frame["ip.src"] == h.BOARD_IP


def by_side(run):
    board = [f for f in run.frames if from_board(run, f)]
    ptp4l = [f for f in run.frames if not from_board(run, f)]
    return board, ptp4l


def check_capture(run, board_types, ptp4l_types):
    """(c): every PTP frame on the tap decodes cleanly as PTPv2 with the layout its type asks,
    over the run's transport; each side sent exactly the message types expected of its role,
    from its own clock; Follow_Up follows each Sync; every Delay_Req was answered."""
    assert run.frames, describe(run)
    assert run.flagged == [], run.flagged   # tshark: malformed or expert errors (checksums included)
    board, ptp4l = by_side(run)
    for side, frames, clock in (("board", board, h.BOARD_CLOCK), ("ptp4l", ptp4l, run.ptp4l_clock)):
        for f in frames:
            where = f"{side} frame {f['frame.number']} ({f.name})"
            assert f["versionptp"] == "2" and f["domainnumber"] == "0", where
            assert f.type in MESSAGE_LENGTH, where
            assert int(f["messagelength"]) == MESSAGE_LENGTH[f.type], where
            assert int(f["controlfield"]) == CONTROL_FIELD[f.type], where
            assert f.clock == clock and f["sourceportid"] == "1", where
            if run.transport == "l2":
                assert f["eth.type"] == "0x88f7" and f["eth.dst"] == h.PTP_L2_MCAST and not f["ip.src"], where
            else:
                port = str(h.EVENT_PORT if f.type < 8 else h.GENERAL_PORT)
                assert f["ip.dst"] == h.PTP_MCAST and f["eth.dst"] == "01:00:5e:00:01:81", where
                assert f["udp.srcport"] == port and f["udp.dstport"] == port, where
                assert f["ip.checksum.status"] == "1", where           # 1: good
                assert f["udp.checksum.status"] in ("1", "3"), where   # good, or none (allowed in IPv4)
        expected = board_types if side == "board" else ptp4l_types
        assert {f.name for f in frames} == {h.TYPE_NAMES[t] for t in expected}, (side, sorted({f.name for f in frames}))
    for b in board:
        assert b["eth.src"] == h.BOARD_MAC and (run.transport == "l2" or b["ip.src"] == h.BOARD_IP), b
    # Two-step Sync, each followed up with its sequenceId (the last one may be cut by the capture's end).
    for side in board, ptp4l:
        syncs = [f for f in side if f.type == h.SYNC]
        fups = {f.seq for f in side if f.type == h.FOLLOW_UP}
        assert all(f["flags.twostep"] == "1" for f in syncs), syncs
        assert all(f.seq in fups for f in syncs[:-1]), (sorted(f.seq for f in syncs), sorted(fups))
    # Every Delay_Req answered by a Delay_Resp naming its sender and sequenceId, except one in
    # flight when the capture stopped.
    requester, responder = (board, ptp4l) if h.DELAY_REQ in board_types else (ptp4l, board)
    requests = [f for f in requester if f.type == h.DELAY_REQ]
    answered = {(h.clock_id(f["dr.requestingsourceportidentity"]), f["dr.requestingsourceportid"], f.seq)
                for f in responder if f.type == h.DELAY_RESP}
    unanswered = [f.seq for f in requests if (f.clock, f["sourceportid"], f.seq) not in answered]
    assert len(requests) >= 3, describe(run)
    assert unanswered in ([], [requests[-1].seq]), (unanswered, describe(run))
    assert len(answered) == len([f for f in responder if f.type == h.DELAY_RESP])  # no duplicates, no strays
    assert all(int(f["logmessageperiod"]) == 127 for f in requests)  # 0x7F (Table 24)


# --- (a) ptp4l master, board slave (and (d): the same over Layer 2) ---------------------------------

def test_a_ptp4l_becomes_grand_master_with_the_taps_clock(slave_run):
    lines = ptp4l_lines(slave_run)
    assert slave_run.milestones.get("ptp4l grand master") is not None, describe(slave_run)
    assert any("LISTENING to MASTER on ANNOUNCE_RECEIPT_TIMEOUT_EXPIRES" in line for line in lines), lines
    selected = [line.split("selected local clock ")[1].split()[0] for line in lines if "selected local clock" in line]
    # As ptp4l prints it (aabbcc.fffe.ddeeff), and as derived from the tap's MAC.
    assert selected and h.clock_id(selected[0]) == slave_run.ptp4l_clock, (selected, slave_run.ptp4l_clock)
    assert h.ptp4l_complaints(lines) == []
    assert slave_run.ptp4l_exit == 0


def test_a_board_selects_ptp4l_as_parent_and_grandmaster(slave_run):
    console = [line.strip() for line in slave_run.console]
    transport = {"udp": "UDP/IPv4 (224.0.1.129)", "l2": "Ethernet (0x88F7)"}[slave_run.transport]
    banner = [line for line in console if line.startswith("ptp: slave over ")]
    assert len(banner) == 1 and banner[0].startswith(f"ptp: slave over {transport}, domain 0, sync ") and \
        banner[0].endswith(", delay_req 2^-9 s, priority 128/128"), banner
    statuses = h.statuses(slave_run.console)
    assert statuses, describe(slave_run)
    for s in statuses:  # from the first state change (LISTENING -> UNCALIBRATED) on
        assert s["port"] == f"{h.BOARD_CLOCK}-1" and s["role"] == "slave", s
        assert s["transport"] == {"udp": "udp4", "l2": "l2"}[slave_run.transport], s
        assert s["parent"] == f"{slave_run.ptp4l_clock}-1" and s["gm"] == slave_run.ptp4l_clock, s
        assert (s["steps_removed"], s["gm_priority1"], s["gm_class"], s["utc_offset"]) == ("1", "128", "248", "37"), s


def test_a_board_goes_from_listening_to_uncalibrated_and_no_further_back(slave_run):
    transitions = h.transitions(slave_run.console)
    assert transitions and transitions[0] == ("LISTENING", "UNCALIBRATED"), (transitions, describe(slave_run))
    # Servo state changes print "UNCALIBRATED -> UNCALIBRATED"; SLAVE is allowed but not
    # expected (no frequency lock at a 1000x time scale); never back to LISTENING, never FAULTY.
    assert all(a in ("UNCALIBRATED", "SLAVE") and b in ("UNCALIBRATED", "SLAVE") for a, b in transitions[1:]), \
        transitions


def test_a_board_sends_delay_requests_and_gets_ptp4l_delay_responses(slave_run):
    assert slave_run.milestones.get("board servo decided") is not None, describe(slave_run)
    statuses = h.statuses(slave_run.console)
    s = statuses[-1]
    tx, rx = int(s["tx_delay_req"]), int(s["rx_delay_resp"])
    assert tx > 0 and 0 < rx <= tx, s
    assert int(s["rx_sync"]) > 0 and int(s["rx_follow_up"]) > 0 and int(s["rx_announce"]) >= 2, s
    assert int(s["tx_sync"]) == int(s["tx_follow_up"]) == int(s["tx_announce"]) == int(s["tx_delay_resp"]) == 0, s
    # A delay came out of them (t1..t4 complete) and fed the servo.
    jump = next(s for s in statuses if s["servo"] == "JUMP")
    assert int(jump["delay"]) != 0 and int(jump["servo_samples"]) > 0, jump
    # ptp4l's side: each of the board's Delay_Req answered with its identity and sequenceId
    # (check_capture), and with the minimum interval the board then adopts.
    board, ptp4l = by_side(slave_run)
    requests = [f for f in board if f.type == h.DELAY_REQ]
    responses = [f for f in ptp4l if f.type == h.DELAY_RESP]
    assert len(requests) >= tx - 1 and len(responses) >= rx, (len(requests), len(responses), tx, rx)
    assert all(h.clock_id(f["dr.requestingsourceportidentity"]) == h.BOARD_CLOCK for f in responses)
    assert all(f["logmessageperiod"] == str(PTP4L_MASTER["logMinDelayReqInterval"]) for f in responses)


def test_a_board_steps_its_clock_to_ptp4l_time(slave_run):
    """The servo's JUMP, then the step: the board's clock (free-running from 0 s, 1970) moves to
    ptp4l's time, i.e. it used t1 from ptp4l's Follow_Up and t4 from its Delay_Resp: the board's
    Delay_Req carry today's date in originTimestamp from then on (within the seconds the
    simulation falls behind real time)."""
    assert slave_run.milestones.get("board stepped") is not None, describe(slave_run)
    statuses = h.statuses(slave_run.console)
    jump = next(s for s in statuses if s["servo"] == "JUMP")
    assert abs(int(jump["offset"])) > 50 * 365 * 86400 * 10**9, jump   # 1970 against today
    assert int(jump["steps"]) == 0 and float(jump["freq_ppb"]) != 0, jump  # frequency first, then the step
    stepped = next(s for s in statuses if int(s["steps"]) >= 1)
    assert stepped["clock_rejected"] == "0" and stepped["faults"] == "0", stepped
    board, _ = by_side(slave_run)
    requests = [f for f in board if f.type == h.DELAY_REQ]
    assert int(requests[0]["sdr.origintimestamp.seconds"]) < 86400, requests[0]   # free-running
    after = [f for f in requests if int(f["sdr.origintimestamp.seconds"]) > 86400]
    assert after, describe(slave_run)
    for f in after:
        assert abs(int(f["sdr.origintimestamp.seconds"]) - float(f["frame.time_epoch"])) < 300, f


def test_a_board_drops_no_ptp4l_message_as_malformed_or_unexpected(slave_run):
    statuses = h.statuses(slave_run.console)
    assert statuses, describe(slave_run)
    last = statuses[-1]
    assert {k: last[k] for k in CLEAN_COUNTERS} == {k: "0" for k in CLEAN_COUNTERS}, last
    assert int(last["drop_state"]) <= 4, last   # ptp4l's first Sync/Follow_Up, before qualification


@pytest.mark.xfail(strict=False, reason=(
    "ptp4l sends in wall-clock time, about one message per 0.5 ms of simulated time here (700x the "
    "rate of its 1 s intervals on a real board), faster at times than the simulated firmware "
    "drains its 8-datagram mailbox; test_ptp2 asserts zero loss between two simulated boards at "
    "Sync and Delay_Req every 7.8 ms"))
def test_a_board_loses_no_ptp4l_message(slave_run):
    """Every message ptp4l sent reached the stack: the mailbox dropped nothing, each Sync had its
    Follow_Up, each Delay_Req its Delay_Resp."""
    last = h.statuses(slave_run.console)[-1]
    assert slave_run.board_status is not None, describe(slave_run)
    assert slave_run.board_status["port_rx_dropped"] == 0, (slave_run.board_status, last)
    assert {k: last[k] for k in LOSS_COUNTERS} == {k: "0" for k in LOSS_COUNTERS}, last
    assert int(last["rx_sync"]) - int(last["rx_follow_up"]) in (0, 1), last
    assert int(last["tx_delay_req"]) - int(last["rx_delay_resp"]) in (0, 1), last


def test_a_capture_decodes_cleanly_with_every_message_type_from_each_side(slave_run):
    # Slave-only board: Delay_Req only; ptp4l as master: the rest.
    check_capture(slave_run, board_types=[h.DELAY_REQ],
                  ptp4l_types=[h.ANNOUNCE, h.SYNC, h.FOLLOW_UP, h.DELAY_RESP])


# --- (b) board master, ptp4l slave ------------------------------------------------------------------

BOARD_PTP4L_ID = "10e2d5.fffe.000000"   # the board's clock identity as ptp4l prints it


def test_b_ptp4l_selects_the_board_as_best_master(master_run):
    lines = ptp4l_lines(master_run)
    assert any(f"new foreign master {BOARD_PTP4L_ID}-1" in line for line in lines), describe(master_run)
    assert any(f"selected best master clock {BOARD_PTP4L_ID}" in line for line in lines), describe(master_run)
    assert h.clock_id(BOARD_PTP4L_ID) == h.eui64_clock(h.BOARD_MAC) == h.BOARD_CLOCK
    assert not any("selected local clock" in line for line in lines), lines


def test_b_ptp4l_goes_from_listening_to_uncalibrated_and_stays(master_run):
    lines = ptp4l_lines(master_run)
    changes = [m.group(1) for m in (re.search(r"port 1: (\S+ to \S+ on \S+)", line) for line in lines) if m]
    assert "LISTENING to UNCALIBRATED on RS_SLAVE" in changes, (changes, describe(master_run))
    after = changes[changes.index("LISTENING to UNCALIBRATED on RS_SLAVE") + 1:]
    # No free-running ptp4l locks (s0 forever), and it never lost the board (announce timeout).
    assert all(change.startswith("UNCALIBRATED to SLAVE") for change in after), changes
    assert h.ptp4l_complaints(lines) == []
    assert master_run.ptp4l_exit == 0


def test_b_board_answers_ptp4l_delay_requests(master_run):
    """The board's Delay_Resp passed ptp4l's checks (state, requestingPortIdentity, parent's
    identity, sequenceId): ptp4l adopted the interval the board sets in them (its
    --ptp-log-delay-req 0) and computed a path delay from their receiveTimestamp (nonsense here,
    two time scales, hence its 'negative delay' debug lines)."""
    lines = ptp4l_lines(master_run)
    assert any("port 1: minimum delay request interval 2^0" in line for line in lines), describe(master_run)
    assert any("delay   filtered" in line for line in lines), describe(master_run)
    board, ptp4l = by_side(master_run)
    requests = [f for f in ptp4l if f.type == h.DELAY_REQ]
    responses = [f for f in board if f.type == h.DELAY_RESP]
    assert len(requests) >= 3 and responses, describe(master_run)
    # The board's mailbox lost none of them (ethdaq ctl status, at the end of the run).
    assert master_run.board_status and master_run.board_status["port_rx_dropped"] == 0, master_run.board_status
    for f in responses:
        assert h.clock_id(f["dr.requestingsourceportidentity"]) == master_run.ptp4l_clock, f
        assert f["dr.requestingsourceportid"] == "1" and f["logmessageperiod"] == "0", f
    # receiveTimestamp: the board's clock (free-running from 1970), advancing.
    stamps = [int(f["dr.receivetimestamp.seconds"]) for f in responses]
    assert stamps == sorted(stamps) and stamps[-1] < 86400, stamps


def test_b_board_announces_itself_and_syncs_two_step(master_run):
    board, _ = by_side(master_run)
    announces = [f for f in board if f.type == h.ANNOUNCE]
    syncs = [f for f in board if f.type == h.SYNC]
    fups = [f for f in board if f.type == h.FOLLOW_UP]
    assert len(announces) >= 2 and len(syncs) >= 3, describe(master_run)
    for a in announces:
        assert h.clock_id(a["an.grandmasterclockidentity"]) == h.BOARD_CLOCK, a
        assert (a["an.grandmasterclockclass"], a["an.priority1"], a["an.localstepsremoved"],
                a["logmessageperiod"]) == ("248", "128", "0", "-7"), a
    assert all(f["logmessageperiod"] == "-9" for f in syncs + fups)
    # Follow_Up carries the Sync's transmit time: the board's clock, advancing.
    t1 = [int(f["fu.preciseorigintimestamp.seconds"]) * 10**9 + int(f["fu.preciseorigintimestamp.nanoseconds"])
          for f in fups]
    assert t1 == sorted(t1) and len(set(t1)) == len(t1), t1


def test_b_board_stays_master(master_run):
    console = [line.strip() for line in master_run.console]
    assert "ptp: master over UDP/IPv4 (224.0.1.129), domain 0, sync 2^-9 s, announce 2^-7 s, delay_req 2^0 s, " \
        "priority 128/128" in console
    assert h.transitions(console) == [] and h.statuses(console) == []   # no state change at all
    periodic = [line for line in console if line.startswith("ptp: ") and "offset=" in line]
    assert all(line.startswith("ptp: MASTER ") for line in periodic), periodic


def test_b_capture_decodes_cleanly_with_every_message_type_from_each_side(master_run):
    # Master-only board: all but Delay_Req; ptp4l slave-only: Delay_Req only. The repeated
    # Announces (TTL 0) never reached the tap, or ptp4l would appear as an Announce sender.
    check_capture(master_run, board_types=[h.ANNOUNCE, h.SYNC, h.FOLLOW_UP, h.DELAY_RESP],
                  ptp4l_types=[h.DELAY_REQ])


def test_b_board_ptp_datagrams_have_ttl_128_as_documented(master_run):
    """LiteEth's IP transmitter has one fixed TTL, 128, for every datagram (ptp4l uses 1 for PTP
    multicast); docs/ptp-firmware.md says so."""
    board, _ = by_side(master_run)
    assert board and {f["ip.ttl"] for f in board} == {"128"}, sorted({f["ip.ttl"] for f in board})


# --- the checks themselves ---------------------------------------------------------------------------

def test_malformed_filter_flags_a_bad_checksum_and_a_truncated_ptp_message(tmp_path):
    """flagged_frames() catches what check_capture relies on it to catch."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.utils import wrpcap
    announce = bytes([0x0B, 0x02, 0x00, 0x40]) + bytes(60)
    good = Ether() / IP(src=h.BOARD_IP, dst=h.PTP_MCAST) / UDP(sport=320, dport=320) / Raw(announce)
    bad_sum = Ether() / IP(src=h.BOARD_IP, dst=h.PTP_MCAST) / UDP(sport=320, dport=320, chksum=0x1234) / Raw(announce)
    short = Ether() / IP(src=h.BOARD_IP, dst=h.PTP_MCAST) / UDP(sport=320, dport=320) / Raw(announce[:20])
    wrpcap(str(tmp_path / "t.pcap"), [good, bad_sum, short])
    flagged = h.flagged_frames(tmp_path / "t.pcap", tmp_path)
    assert [line.split("\t")[0] for line in flagged] == ["2", "3"], flagged
    frames = h.decode_ptp(tmp_path / "t.pcap", tmp_path)
    assert frames[0].type == h.ANNOUNCE and frames[0]["versionptp"] == "2"
