"""The control client's retries (ethdaq.host.ctl.ControlClient) against a scripted board on
loopback: a retry carries the same seq (so the board's reply cache answers it instead of
executing it again: test_protocol.py checks that side), and a stale-seq refusal is retried once
with a new seq."""


import pytest

from ethdaq.host.ctl import ControlClient, ControlTimeout
from board_fakes import ScriptedBoard, config_answer, seq_of
from ethdaq.wire import protocol



def stop_answer(req):
    return protocol.pack_header(protocol.MSG_STREAM_STOP | protocol.RESPONSE, seq_of(req)) + \
        protocol.STREAM_STOP_RSP.pack(5)


def error_answer(code):
    return lambda req: protocol.pack_header(protocol.MSG_ERROR_RSP, seq_of(req)) + bytes([code])


def test_a_retry_after_a_lost_answer_carries_the_same_seq():
    board = ScriptedBoard([lambda req: None, lambda req: None, stop_answer])
    with ControlClient("127.0.0.1", board.port, timeout=0.3, retries=3) as c:
        assert c.stream_stop() == 5
        next_seq = c.seq + 1
    board.close()
    assert len(board.seen) == 3 and len(set(board.seen)) == 1  # Byte for byte the same request.
    assert seq_of(board.seen[0]) == next_seq - 1


def test_each_new_request_gets_a_new_seq():
    board = ScriptedBoard([stop_answer, stop_answer])
    with ControlClient("127.0.0.1", board.port, timeout=1) as c:
        c.stream_stop()
        c.stream_stop()
    board.close()
    assert seq_of(board.seen[1]) == (seq_of(board.seen[0]) + 1) & 0xffffffff


def test_a_stale_seq_refusal_is_retried_once_with_a_new_seq():
    board = ScriptedBoard([error_answer(protocol.ERR_STALE_SEQ), stop_answer])
    with ControlClient("127.0.0.1", board.port, timeout=1, retries=1) as c:
        assert c.stream_stop() == 5  # Even with retries=1: the refusal was an answer, not a loss.
    board.close()
    assert seq_of(board.seen[0]) != seq_of(board.seen[1])


def test_a_second_stale_seq_refusal_is_reported():
    from ethdaq.host.ctl import ControlRefused
    board = ScriptedBoard([error_answer(protocol.ERR_STALE_SEQ)] * 2)
    with ControlClient("127.0.0.1", board.port, timeout=1) as c:
        with pytest.raises(ControlRefused, match="stale sequence number"):
            c.stream_stop()
    board.close()


def test_no_answer_at_all_is_a_timeout_naming_the_board():
    board = ScriptedBoard([lambda req: None] * 2)
    with ControlClient("127.0.0.1", board.port, timeout=0.2, retries=2) as c:
        with pytest.raises(ControlTimeout, match=f"127.0.0.1:{board.port} after 2 tries"):
            c.status()
    board.close()


def test_with_a_key_every_request_is_signed_and_a_retry_is_the_same_signed_bytes():
    import hashlib
    import hmac
    key = bytes(range(1, 33))
    board = ScriptedBoard([lambda req: None, stop_answer, stop_answer])
    with ControlClient("127.0.0.1", board.port, timeout=0.3, key=key) as c:
        c.stream_stop()
        c.stream_stop()
    board.close()
    first, retry, second = board.seen
    assert first == retry  # Same seq, same counter, same MAC: the board's reply cache answers it.
    for req in (first, second):
        body, counter, mac = req[:-40], req[-40:-32], req[-32:]
        assert len(body) == protocol.REQUEST_LENGTH[protocol.MSG_STREAM_STOP]
        assert mac == hmac.new(key, body + counter, hashlib.sha256).digest()
    assert int.from_bytes(second[-40:-32], "big") > int.from_bytes(first[-40:-32], "big")



def test_an_address_change_whose_answer_was_lost_is_asked_again_at_the_new_address():
    # The board switched to 127.0.0.2 but its answer from 127.0.0.1 was lost: the client sends
    # the same request (same seq) to the new address, and talks to it from then on.
    old = ScriptedBoard([lambda req: None] * 3)
    new = ScriptedBoard([config_answer, stop_answer], addr=("127.0.0.2", old.port))
    with ControlClient("127.0.0.1", old.port, timeout=0.3, retries=3) as c:
        cfg = c.config_set(ip="127.0.0.2")
        assert cfg.ip == 0x7F000002 and c.addr == ("127.0.0.2", old.port)
        assert c.stream_stop() == 5
    old.close()
    new.close()
    assert len(old.seen) == 3 and len(set(old.seen)) == 1
    assert new.seen[0] == old.seen[0]     # Byte for byte: the board's reply cache answers it.


def test_an_address_change_answered_from_the_old_address_moves_the_client():
    board = ScriptedBoard([config_answer])
    with ControlClient("127.0.0.1", board.port, timeout=0.3, retries=3) as c:
        c.config_set(ip=0x7F000003)
        assert c.addr == ("127.0.0.3", board.port)
    board.close()


def test_streams_if_any_is_none_only_from_a_build_without_a_streamer():
    """STREAMS refused as unsupported (a build without a streamer) gives None; any other refusal
    is raised."""
    from ethdaq.host.ctl import ControlRefused
    board = ScriptedBoard([error_answer(protocol.ERR_UNSUPPORTED), error_answer(protocol.ERR_BAD_VALUE)])
    with ControlClient("127.0.0.1", board.port, timeout=1) as c:
        assert c.streams_if_any() is None
        with pytest.raises(ControlRefused):
            c.streams_if_any()
    board.close()
    assert [protocol.HEADER.unpack_from(r)[2] for r in board.seen] == [protocol.MSG_STREAMS] * 2
