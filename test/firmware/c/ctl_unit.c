/*
 * This file is part of ethdaq.
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Unit tests (cmocka) of software/firmware/protocol/ctl.c, the control protocol handler, built for the
 * host as the firmware builds it. The board's operations are cmocka mocks, so each test states
 * which operations a request may run, with which arguments, and fails on any other call.
 * test/firmware/test_protocol.py builds and runs this (and checks the wire format against the Python
 * definition separately); these tests pin the handler's decisions one by one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ctl.h"
#include "hmac_sha256.h"

#define HOST  0xC0A80164u  /* 192.168.1.100 */
#define OTHER 0xC0A80165u

/* --- Mocked board operations ------------------------------------------------------------------ */

static int mock_start(const struct ctl_stream_cfg *cfg, uint32_t *run)
{
	check_expected(cfg->dst_ip);
	check_expected(cfg->payload);
	*run = 7;
	return (int)mock();
}

static int mock_stop(uint32_t *run)
{
	function_called();
	*run = 7;
	return (int)mock();
}

static int mock_emulator(const struct ctl_emulator_cfg *cfg)
{
	check_expected(cfg->mode);
	return (int)mock();
}

static void mock_status(struct ctl_status *st)
{
	st->running = 1;
}

static const struct ctl_ops ops = { mock_start, mock_stop, mock_emulator, mock_status, NULL, NULL, NULL, NULL, NULL,
				    NULL, NULL, NULL, NULL };

static const struct ctl_identity id = {
	.mac = {0x10, 0xe2, 0xd5, 0, 0, 1}, .ip = 0xC0A80132u, .ctl_port = 7000, .sys_clk_hz = 125000000u,
	.eth_dw = 8, .nchannels = 4, .sample_bits = 16, .max_payload = 8972, .capabilities = 0x0B,
	.board = "unit", .build_id = "0123", .ident = "ethdaq unit", .boots = 5, .reset_cause = 1,
};

/* --- Helpers ---------------------------------------------------------------------------------- */

static size_t header(uint8_t *b, uint8_t type, uint32_t seq)
{
	b[0] = CTL_MAGIC >> 8; b[1] = CTL_MAGIC & 0xff; b[2] = CTL_VERSION; b[3] = type;
	b[4] = (uint8_t)(seq >> 24); b[5] = (uint8_t)(seq >> 16); b[6] = (uint8_t)(seq >> 8); b[7] = (uint8_t)seq;
	return CTL_HEADER_SIZE;
}

static size_t start_req(uint8_t *b, uint32_t seq, uint16_t payload)
{
	size_t n = header(b, CTL_MSG_STREAM_START, seq);
	memset(b + n, 0, CTL_STREAM_START_REQ_LENGTH - n);
	b[n + 4] = 0x13; b[n + 5] = 0x88;                       /* dst_port 5000 */
	b[n + 6] = (uint8_t)(payload >> 8); b[n + 7] = (uint8_t)payload;
	b[n + 8] = 0x0F;                                        /* all four channels */
	return CTL_STREAM_START_REQ_LENGTH;
}

struct fixture {
	struct ctl_state st;
	uint8_t rsp[512];
	uint64_t now_ms;
};

static int setup(void **state)
{
	static struct fixture f;
	memset(&f, 0, sizeof(f));
	*state = &f;
	return 0;
}

static int handle(struct fixture *f, const uint8_t *req, size_t len, uint32_t ip, uint16_t port)
{
	struct ctl_request rq = { req, len, ip, port, f->now_ms };
	return ctl_handle(&f->st, &rq, f->rsp, sizeof(f->rsp), &id, &ops);
}

/* An ERROR_RSP's code: the code alone, or ERR_BAD_VALUE with its reason. */
static uint8_t error_code(const struct fixture *f, int n)
{
	assert_int_equal(f->rsp[3], CTL_MSG_ERROR_RSP);
	if (n != CTL_HEADER_SIZE + 1) {
		assert_int_equal(n, CTL_HEADER_SIZE + 1 + CTL_REFUSAL_SIZE);
		assert_int_equal(f->rsp[8], CTL_ERR_BAD_VALUE);
	}
	return f->rsp[8];
}

static int64_t be64_at(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (int64_t)v;
}

/* The reason of an ERR_BAD_VALUE answer of n bytes: the field, value, min and max. */
static void assert_refusal(const struct fixture *f, int n, uint8_t field, int64_t value, int64_t lo, int64_t hi)
{
	assert_int_equal(error_code(f, n), CTL_ERR_BAD_VALUE);
	assert_int_equal(n, CTL_HEADER_SIZE + 1 + CTL_REFUSAL_SIZE);
	assert_int_equal(f->rsp[9], field);
	assert_int_equal(be64_at(f->rsp + 10), value);
	assert_int_equal(be64_at(f->rsp + 18), lo);
	assert_int_equal(be64_at(f->rsp + 26), hi);
}

/* --- Tests ------------------------------------------------------------------------------------- */

static void a_start_runs_once_with_the_requester_as_default_destination(void **state)
{
	struct fixture *f = *state;
	uint8_t req[64];
	size_t len = start_req(req, 1, 1472);

	expect_value(mock_start, cfg->dst_ip, HOST);
	expect_value(mock_start, cfg->payload, 1472);
	will_return(mock_start, 0);
	assert_int_equal(handle(f, req, len, HOST, 40000), CTL_HEADER_SIZE + 8);
	assert_int_equal(f->rsp[3], CTL_MSG_STREAM_START | CTL_RESPONSE);
	assert_int_equal(f->st.cnt.requests, 1);
}

static void a_retransmission_is_answered_without_running_again(void **state)
{
	struct fixture *f = *state;
	uint8_t req[64], first[64];
	size_t len = start_req(req, 2, 1024);

	expect_value(mock_start, cfg->dst_ip, HOST);
	expect_value(mock_start, cfg->payload, 1024);
	will_return(mock_start, 0);  /* One call only: a second would fail the test. */
	assert_int_equal(handle(f, req, len, HOST, 40000), CTL_HEADER_SIZE + 8);
	memcpy(first, f->rsp, CTL_HEADER_SIZE + 8);
	assert_int_equal(handle(f, req, len, HOST, 40000), CTL_HEADER_SIZE + 8);
	assert_memory_equal(first, f->rsp, CTL_HEADER_SIZE + 8);
	assert_int_equal(f->st.cnt.replayed, 1);
}

static void an_out_of_range_payload_is_refused_before_the_board_is_touched(void **state)
{
	struct fixture *f = *state;
	uint8_t req[64];
	size_t len = start_req(req, 3, 63);  /* below CTL_MIN_PAYLOAD; mock_start must not run */

	assert_refusal(f, handle(f, req, len, HOST, 40000), CTL_FIELD_PAYLOAD, 63, CTL_MIN_PAYLOAD, id.max_payload);
	assert_int_equal(f->st.cnt.refused, 1);
	len = start_req(req, 4, 9000);       /* above the board's max_payload */
	assert_refusal(f, handle(f, req, len, HOST, 40000), CTL_FIELD_PAYLOAD, 9000, CTL_MIN_PAYLOAD, id.max_payload);
	len = start_req(req, 5, 1472);
	req[CTL_HEADER_SIZE + 8] = 0x13;     /* channel 4 on a board of four channels */
	assert_refusal(f, handle(f, req, len, HOST, 40000), CTL_FIELD_ENABLE, 0x13, 1, 0x0F);
	assert_int_equal(f->st.cnt.refused, 3);
}

static void an_emulator_mode_past_the_last_is_refused_with_the_modes_range(void **state)
{
	struct fixture *f = *state;
	uint8_t req[64];
	size_t len = header(req, CTL_MSG_EMULATOR, 6);

	memset(req + len, 0, CTL_EMULATOR_REQ_LENGTH - len);
	req[len] = CTL_EMULATOR_MODE_MAX + 1;  /* mock_emulator must not run */
	assert_refusal(f, handle(f, req, CTL_EMULATOR_REQ_LENGTH, HOST, 40000), CTL_FIELD_EMULATOR_MODE,
		       CTL_EMULATOR_MODE_MAX + 1, 0, CTL_EMULATOR_MODE_MAX);
}

static void parse_order_is_length_magic_response_version_type_length(void **state)
{
	struct fixture *f = *state;
	uint8_t req[64];

	header(req, CTL_MSG_STATUS, 4);
	assert_int_equal(handle(f, req, 7, HOST, 1), 0);                          /* short: silent */
	req[0] ^= 0xFF;
	assert_int_equal(handle(f, req, 8, HOST, 1), 0);                          /* magic: silent */
	header(req, CTL_MSG_STATUS | CTL_RESPONSE, 4);
	assert_int_equal(handle(f, req, 8, HOST, 1), 0);                          /* a response: silent */
	header(req, 0x7E, 4);
	req[2] = CTL_VERSION + 1;
	assert_int_equal(error_code(f, handle(f, req, 8, HOST, 1)), CTL_ERR_BAD_VERSION);  /* before type */
	header(req, 0x7E, 4);
	assert_int_equal(error_code(f, handle(f, req, 8, HOST, 1)), CTL_ERR_BAD_TYPE);
	header(req, CTL_MSG_STATUS, 4);
	assert_int_equal(error_code(f, handle(f, req, 9, HOST, 1)), CTL_ERR_BAD_LENGTH);
	assert_int_equal(f->st.cnt.short_drop + f->st.cnt.magic_drop + f->st.cnt.response_drop, 3);
	assert_int_equal(f->st.cnt.bad_version + f->st.cnt.bad_type + f->st.cnt.bad_length, 3);
}

static void another_address_cannot_stop_the_controllers_run_until_its_lease_lapses(void **state)
{
	struct fixture *f = *state;
	uint8_t req[64];

	header(req, CTL_MSG_STREAM_STOP, 10);
	expect_function_call(mock_stop);
	will_return(mock_stop, 0);
	assert_int_equal(handle(f, req, CTL_STREAM_STOP_REQ_LENGTH, HOST, 1), CTL_HEADER_SIZE + 4);
	f->now_ms = CTL_DEFAULT_LEASE_S * 1000u - 1;
	header(req, CTL_MSG_STREAM_STOP, 11);
	assert_int_equal(error_code(f, handle(f, req, CTL_STREAM_STOP_REQ_LENGTH, OTHER, 1)), CTL_ERR_NOT_CONTROLLER);
	f->now_ms++;
	expect_function_call(mock_stop);
	will_return(mock_stop, 0);
	header(req, CTL_MSG_STREAM_STOP, 12);
	assert_int_equal(handle(f, req, CTL_STREAM_STOP_REQ_LENGTH, OTHER, 1), CTL_HEADER_SIZE + 4);
	assert_int_equal(f->st.access.holder, OTHER);
}

static void with_a_key_only_a_signed_request_with_a_new_counter_runs(void **state)
{
	struct fixture *f = *state;
	static const uint8_t key[32] = "unit test key, thirty-two bytes";
	uint8_t req[128];
	size_t len = header(req, CTL_MSG_EMULATOR, 20);

	f->st.key = key;
	f->st.key_len = sizeof(key);
	req[len] = 1;                        /* mode counter, rate and seed 0 */
	memset(req + len + 1, 0, 8);
	len = CTL_EMULATOR_REQ_LENGTH;
	assert_int_equal(error_code(f, handle(f, req, len, HOST, 1)), CTL_ERR_AUTH_REQUIRED);
	memset(req + len, 0, 7);
	req[len + 7] = 5;                    /* counter 5 */
	hmac_sha256(key, sizeof(key), req, len + 8, NULL, 0, req + len + 8);
	expect_value(mock_emulator, cfg->mode, 1);
	will_return(mock_emulator, 0);
	assert_int_equal(handle(f, req, len + CTL_AUTH_LEN, HOST, 1), CTL_HEADER_SIZE);
	req[7] = 21;                         /* new seq, same counter: a replayed signature */
	hmac_sha256(key, sizeof(key), req, len + 8, NULL, 0, req + len + 8);
	assert_int_equal(error_code(f, handle(f, req, len + CTL_AUTH_LEN, HOST, 1)), CTL_ERR_AUTH_FAILED);
	req[len + 7] = 6;                    /* new counter, but the MAC of the old bytes */
	assert_int_equal(error_code(f, handle(f, req, len + CTL_AUTH_LEN, HOST, 1)), CTL_ERR_AUTH_FAILED);
	assert_int_equal(f->st.cnt.auth_required, 1);
	assert_int_equal(f->st.cnt.auth_failed, 2);
}

static void a_build_without_ptp_answers_ptp_status_unsupported(void **state)
{
	struct fixture *f = *state;
	uint8_t req[16];

	header(req, CTL_MSG_PTP_STATUS, 30);
	assert_int_equal(error_code(f, handle(f, req, CTL_PTP_STATUS_REQ_LENGTH, HOST, 1)), CTL_ERR_UNSUPPORTED);
}

static size_t reboot_req(uint8_t *b, uint32_t seq, uint16_t boots)
{
	size_t n = header(b, CTL_MSG_REBOOT, seq);
	b[n] = (uint8_t)(boots >> 8);
	b[n + 1] = (uint8_t)boots;
	return CTL_REBOOT_REQ_LENGTH;
}

static void reboot_is_asked_of_the_caller_only_for_the_boot_the_requester_saw(void **state)
{
	struct fixture *f = *state;
	uint8_t req[16];

	/* Boot 4 was before this one (5): a late retransmission; answered, nothing to do. */
	assert_int_equal(handle(f, req, reboot_req(req, 50, 4), HOST, 1), CTL_HEADER_SIZE + 3);
	assert_int_equal(f->rsp[CTL_HEADER_SIZE], 0);
	assert_int_equal(f->rsp[CTL_HEADER_SIZE + 2], 5);
	assert_int_equal(f->st.reboot_pending, 0);
	/* Another address, while HOST holds the board: refused. */
	assert_int_equal(error_code(f, handle(f, req, reboot_req(req, 51, 5), OTHER, 1)), CTL_ERR_NOT_CONTROLLER);
	assert_int_equal(f->st.reboot_pending, 0);
	assert_int_equal(handle(f, req, reboot_req(req, 52, 5), HOST, 1), CTL_HEADER_SIZE + 3);
	assert_int_equal(f->rsp[CTL_HEADER_SIZE], 1);
	assert_int_equal(f->st.reboot_pending, 1);
}

static void an_answer_that_does_not_fit_is_counted_not_written_past_the_buffer(void **state)
{
	struct fixture *f = *state;
	uint8_t req[16];
	struct ctl_request rq = { req, CTL_IDENTIFY_REQ_LENGTH, HOST, 1, 0 };
	uint8_t small[CTL_HEADER_SIZE + 4 + 1];

	header(req, CTL_MSG_IDENTIFY, 40);
	small[sizeof(small) - 1] = 0xA5;
	assert_int_equal(ctl_handle(&f->st, &rq, small, sizeof(small) - 1, &id, &ops), -1);
	assert_int_equal(small[sizeof(small) - 1], 0xA5);
	assert_int_equal(f->st.cnt.no_room, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(a_start_runs_once_with_the_requester_as_default_destination, setup),
		cmocka_unit_test_setup(a_retransmission_is_answered_without_running_again, setup),
		cmocka_unit_test_setup(an_out_of_range_payload_is_refused_before_the_board_is_touched, setup),
		cmocka_unit_test_setup(an_emulator_mode_past_the_last_is_refused_with_the_modes_range, setup),
		cmocka_unit_test_setup(parse_order_is_length_magic_response_version_type_length, setup),
		cmocka_unit_test_setup(another_address_cannot_stop_the_controllers_run_until_its_lease_lapses, setup),
		cmocka_unit_test_setup(with_a_key_only_a_signed_request_with_a_new_counter_runs, setup),
		cmocka_unit_test_setup(a_build_without_ptp_answers_ptp_status_unsupported, setup),
		cmocka_unit_test_setup(reboot_is_asked_of_the_caller_only_for_the_boot_the_requester_saw, setup),
		cmocka_unit_test_setup(an_answer_that_does_not_fit_is_counted_not_written_past_the_buffer, setup),
	};
	return cmocka_run_group_tests_name("ctl", tests, NULL, NULL);
}
