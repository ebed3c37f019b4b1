"""Time-triggered transmission and transmit priority classes (gateware/launcher.py,
gateware/scheduler.py, gateware/txpath.py), in Migen simulation: the PTP clock (sys) arms the
launcher, the transmit path (eth_tx, same clock as on the simulated board) merges the launcher
(class 0), LiteEth's frames (class 1) and the bulk DAQ datagrams (class 2, through the canned-
header framer, LiteEth's CRC and preamble inserters) in front of LiteEth's GMII PHY.

Everything is judged at the GMII pins by the test bench itself: the cycle the first preamble byte
is on the pins, the PTP clock's published time in that cycle, the bytes of every frame (bulk
frames' FCS checked with zlib, an independent CRC-32; the launched frame built by scapy).
Checked: the launch error is under one cycle, with and without bulk load; launches whose time has
passed, or that find the line busy, are counted and never sent late; a waiting higher-class frame
is delayed by at most the one frame already on the line and no bulk frame starts while it waits.
Frames are short here to keep Migen fast; bench/txclasses.py runs the same harness with 1472-byte
and jumbo bulk frames for docs/realtime.md."""

import pytest

from bench.txclasses import (CLK_NS, CONTROL_FRAME, IFG, LAUNCH_FRAME, PATH_SLACK, Dut, arm, bulk,
                             check_bulk_frames, control, counters, guard_cycles,
                             load_frame, pins, priority_wait, pulse, run)


# Tests -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("t_ns", [3_000, 3_003, 1_000_000_007])
def test_single_launch_on_time_on_an_idle_line(t_ns):
    dut = Dut()
    frames, result = [], {}
    l = dut.launcher

    def bench():
        yield from load_frame(l, LAUNCH_FRAME)
        start = 0
        if t_ns > 10**9:
            # Start the clock just before a second boundary: the launch crosses it.
            start = 10**9 - 3_000
            yield dut.clock.set_sec.eq(0)
            yield dut.clock.set_ns.eq(start)
            yield dut.clock.set_stb.eq(1)
            yield
            yield dut.clock.set_stb.eq(0)
            for _ in range(10):
                yield
        yield from arm(l, t_ns, guard=50)
        for _ in range((t_ns - start) // CLK_NS + 200):
            yield
        result.update((yield from counters(l)))

    run(dut, {"sys": [bench()], "eth_tx": [pins(dut, frames)]}, (t_ns % 10**9) // CLK_NS + 3000)
    assert [f[2] for f in frames] == [LAUNCH_FRAME]
    error = frames[0][1] - t_ns
    print(f"launch at {t_ns} ns: first preamble byte on the pins at {frames[0][1]} ns (error {error} ns)")
    assert 0 <= error < CLK_NS
    assert result == {"sent": 1, "past": 0, "busy": 0, "armed": 0}


def test_periodic_launches_under_bulk_load_are_on_time_and_nothing_else_is_disturbed():
    dut = Dut()
    frames, sent_bulk, offered = [], [], []
    payload = 200
    guard = guard_cycles(42 + payload)
    period, count, t0 = 4_003, 4, 5_005   # A period not a multiple of the cycle: several phases.
    result = {}
    l = dut.launcher

    def bench():
        yield from load_frame(l, LAUNCH_FRAME)
        yield from arm(l, t0, guard, period=period, count=count)
        for _ in range((t0 + count * period) // CLK_NS + 300):
            yield
        result.update((yield from counters(l)))

    # Control frames too, offered during bulk frames and during guard bands.
    times = [300 + 470 * k for k in range(5)]
    run(dut, {"sys": [bench()], "eth_tx": [pins(dut, frames), bulk(dut, payload, sent_bulk),
              control(dut, times, offered)]}, (t0 + count * period) // CLK_NS + 400)
    launched = [f for f in frames if f[2] == LAUNCH_FRAME]
    errors = [f[1] - (t0 + k * period) for k, f in enumerate(launched)]
    print(f"launch errors under {payload}-byte bulk load (ns): {errors}")
    assert len(launched) == count
    assert all(0 <= e < CLK_NS for e in errors)
    assert len(set(errors)) > 1
    assert result == {"sent": count, "past": 0, "busy": 0, "armed": 0}
    # Bulk went on around the launches, every frame whole and correct, and so did control.
    bulk_frames = check_bulk_frames(frames, payload)
    assert len(bulk_frames) >= 4
    assert len(bulk_frames) >= len(sent_bulk) - 1   # All but the one still in the path at the end.
    assert len([f for f in frames if f[2] == CONTROL_FRAME]) == len(times)
    assert len(frames) == len(launched) + len(times) + len(bulk_frames)
    for a, b in zip(frames, frames[1:]):
        assert b[0] >= a[0] + len(a[2]) + IFG   # The inter-frame gap, between all classes.


def test_a_launch_whose_time_has_passed_is_counted_not_sent():
    dut = Dut()
    frames, result = [], {}
    l = dut.launcher
    period = 1_500

    def bench():
        yield from load_frame(l, LAUNCH_FRAME)
        for _ in range(600):
            yield
        now = (yield dut.clock.ns)
        # Launches at t0 + k*period, the first three already past when armed; the last two go.
        t0 = now - 5 * period // 2 + 300
        result["t0"] = t0
        yield from arm(l, t0, guard=20, period=period, count=5)
        for _ in range(3 * period // CLK_NS):
            yield
        result.update((yield from counters(l)))

    run(dut, {"sys": [bench()], "eth_tx": [pins(dut, frames)]}, 1900)
    t0 = result.pop("t0")
    assert result == {"sent": 2, "past": 3, "busy": 0, "armed": 0}
    assert [f[2] for f in frames] == [LAUNCH_FRAME] * 2
    for k, f in enumerate(frames):
        assert 0 <= f[1] - (t0 + (3 + k) * period) < CLK_NS


def test_a_launch_that_finds_the_line_busy_is_counted_not_sent_late():
    # A guard band far too short for the bulk frames: launches that find a bulk frame on the line
    # are dropped and counted; those that go are on time.
    dut = Dut()
    frames, sent_bulk, result = [], [], {}
    l = dut.launcher
    # Bulk frames take 254 + 12 cycles; a 150-cycle guard catches about half the launches with
    # a bulk frame still on the line.
    payload, period, count, t0, guard = 200, 2_403, 8, 4_000, 150

    def bench():
        yield from load_frame(l, LAUNCH_FRAME)
        yield from arm(l, t0, guard=guard, period=period, count=count)
        for _ in range((t0 + count * period) // CLK_NS + 200):
            yield
        result.update((yield from counters(l)))

    run(dut, {"sys": [bench()], "eth_tx": [pins(dut, frames), bulk(dut, payload, sent_bulk)]},
        (t0 + count * period) // CLK_NS + 300)
    launched = [f for f in frames if f[2] == LAUNCH_FRAME]
    print(f"guard {guard} cycles under {payload}-byte bulk: {result}")
    assert result["sent"] == len(launched)
    assert result["busy"] > 0 and result["sent"] > 0
    assert result["sent"] + result["busy"] == count
    assert result["past"] == 0
    for f in launched:
        # On time, never late.
        assert any(0 <= f[1] - (t0 + k * period) < CLK_NS for k in range(count))
    check_bulk_frames(frames, payload)


def test_stop_disarms():
    dut = Dut()
    frames, result = [], {}
    l = dut.launcher

    def bench():
        yield from load_frame(l, LAUNCH_FRAME)
        yield from arm(l, 2_000, guard=10, period=2_000, count=0)   # Forever: 2, 4, 6 µs, ...
        for _ in range(7_000 // CLK_NS):
            yield
        yield from pulse(l._control, 2)
        for _ in range(600):
            yield
        result.update((yield from counters(l)))

    run(dut, {"sys": [bench()], "eth_tx": [pins(dut, frames)]}, 1600)
    assert result == {"sent": 3, "past": 0, "busy": 0, "armed": 0}
    assert len(frames) == 3


def test_a_waiting_control_frame_is_delayed_by_at_most_the_bulk_frame_on_the_line():
    payload = 200
    waits, overtaken, bulk_wire = priority_wait(payload, with_launcher=True, nframes=6, seed=3)
    bound = bulk_wire + IFG + PATH_SLACK
    print(f"bulk {payload}-byte payload ({bulk_wire} bytes on the wire): class-1 wait "
          f"min {min(waits)} max {max(waits)} cycles (bound {bound}); bulk frames started "
          f"while waiting: {max(overtaken)}")
    assert max(overtaken) == 0           # No bulk frame starts while a control frame waits.
    assert max(waits) <= bound
    assert max(waits) > bulk_wire // 2   # Some arrived early in a bulk frame (the bench works).


def test_without_the_launcher_the_two_classes_keep_their_order():
    waits, overtaken, bulk_wire = priority_wait(200, with_launcher=False, nframes=4, seed=1)
    assert max(overtaken) == 0
    assert max(waits) <= bulk_wire + IFG + PATH_SLACK
