"""cocotb test (run by test/gateware/test_framespacer.py, inside Verilator): cocotbext-eth's
XgmiiSource puts the frames in $RX_FRAMES (one hex line each, without FCS: the source adds it) on
the XGMII receive pins back to back at 156.25 MHz; the chain behind them (LiteEth's XGMII receiver,
its crossing into sys at 125 MHz, preamble and FCS checkers, with or without the spacer) gives
each frame's words; one line per frame goes to $RX_RESULTS: the bytes out (hex) and the `error`
of each word."""

import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
from cocotbext.eth import GmiiFrame, XgmiiSource

FRAMES = [bytes.fromhex(line) for line in open(os.environ["RX_FRAMES"]).read().split()]


@cocotb.test()
async def chain(dut):
    cocotb.start_soon(Clock(dut.eth_rx_clk, 6400, units="ps").start())
    cocotb.start_soon(Clock(dut.sys_clk, 8000, units="ps").start())
    dut.eth_rx_rst.value = 1
    dut.sys_rst.value = 1
    source = XgmiiSource(dut.rx_data, dut.rx_ctl, dut.eth_rx_clk, dut.eth_rx_rst)
    for _ in range(10):
        await RisingEdge(dut.sys_clk)
    dut.eth_rx_rst.value = 0
    dut.sys_rst.value = 0
    for _ in range(10):
        await RisingEdge(dut.sys_clk)
    for f in FRAMES:
        await source.send(GmiiFrame.from_payload(f))
    out, words, idle = [], [], 0
    while len(out) < len(FRAMES) and idle < 2000:
        await RisingEdge(dut.sys_clk)
        if not dut.source_valid.value:
            idle += 1
            continue
        idle = 0
        words.append((int(dut.source_data.value), int(dut.source_last_be.value), int(dut.source_error.value)))
        if dut.source_last.value:
            nbytes = words[-1][1].bit_length()
            data = b"".join(d.to_bytes(8, "little") for d, _, _ in words[:-1])
            data += words[-1][0].to_bytes(8, "little")[:nbytes]
            out.append(data.hex() + " " + ",".join(str(e) for _, _, e in words))
            words = []
    with open(os.environ["RX_RESULTS"], "w") as f:
        f.write("\n".join(out) + "\n")
    dut._log.info("%d frames out of the receive chain", len(out))
