"""cocotb test (run by test/gateware/test_xgmiitx_cocotb.py, inside Verilator): bench/xgmii.py's
XGMIIBenchTop with mac="ethdaq" sends frames of the lengths in $XGMII_LENS; cocotbext-eth's
XgmiiSink receives them from tx_data/tx_ctl, and each must have a good FCS, the 802.3 preamble
and exactly the bytes in $XGMII_EXPECTED (one hex line per frame)."""

import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
from cocotbext.eth import XgmiiSink

LENS = [int(x) for x in os.environ["XGMII_LENS"].split(",")]
EXPECTED = [bytes.fromhex(line) for line in open(os.environ["XGMII_EXPECTED"]).read().split()]


async def next_length_after_each_start(dut):
    """As tb_xgmii.cpp: the source latches the next length when a frame's first word goes."""
    sofs = 0
    while True:
        await RisingEdge(dut.sys_clk)
        if dut.sof.value and not dut.sys_rst.value:
            sofs += 1
            dut.frame_len.value = LENS[sofs % len(LENS)]


@cocotb.test()
async def frames_decode(dut):
    cocotb.start_soon(Clock(dut.sys_clk, 6400, units="ps").start())
    sink = XgmiiSink(dut.tx_data, dut.tx_ctl, dut.sys_clk, dut.sys_rst)
    dut.sys_rst.value = 1
    dut.enable.value = 0
    dut.frame_len.value = LENS[0]
    dut.rate.value = 0
    dut.chmask.value = 0
    dut.close.value = 0
    for _ in range(10):
        await RisingEdge(dut.sys_clk)
    dut.sys_rst.value = 0
    cocotb.start_soon(next_length_after_each_start(dut))
    for _ in range(10):
        await RisingEdge(dut.sys_clk)
    dut.enable.value = 1
    for k in range(len(LENS)):
        f = await sink.recv()
        assert f.check_fcs(), f"frame {k}: FCS"
        assert f.get_preamble() == b"\x55"*7 + b"\xd5", f"frame {k}: preamble {f.get_preamble()!r}"
        assert f.get_payload() == EXPECTED[k], f"frame {k}: content"
    dut._log.info("%d frames decoded by cocotbext-eth's XgmiiSink", len(LENS))
