"""DAQSoC options checked at elaboration (no build): the Etherbone debug option is absent unless
asked for, and when asked for it is on the bus, announced, and cannot take a port in use; the
console's full PTP line as a build option."""

import logging

import pytest
from migen.fhdl.tools import list_targets

from ethdaq.boards import get_board
from ethdaq.soc.daqsoc import DAQSoC
from ethdaq.soc.socconfig import SoCConfig


def test_no_raw_bus_access_by_default():
    soc = DAQSoC(get_board("sim"))
    assert not hasattr(soc, "etherbone")
    assert "etherbone" not in soc.bus.masters
    assert "ETHDAQ_ETHERBONE_PORT" not in soc.constants


def test_etherbone_debug_build_is_on_the_bus_and_says_so_loudly(caplog):
    with caplog.at_level(logging.WARNING):
        soc = DAQSoC(get_board("sim"), SoCConfig(with_etherbone=True, etherbone_port=1235))
    assert "etherbone" in soc.bus.masters
    assert soc.constants["ETHDAQ_ETHERBONE_PORT"] == 1235
    assert any("anyone who can reach the board can read and write its whole bus" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("port, used", [(7000, "the control port"), (5000, "the DAQ data stream"), (319, "PTP")])
def test_etherbone_port_must_be_free(port, used):
    with pytest.raises(ValueError, match=f"used by {used}"):
        DAQSoC(get_board("sim"), SoCConfig(with_etherbone=True, etherbone_port=port))


def test_the_audit_classifier_and_gate_sit_between_the_fcs_checker_and_the_rest_of_the_mac():
    def crc_index(soc):
        pipeline = soc.ethcore.mac.core.rx_datapath.pipeline
        return pipeline, pipeline.index(soc.eth_rx_fcs)
    plain = DAQSoC(get_board("sim"))
    assert not hasattr(plain, "classifier") and "ETHDAQ_CLASSIFIER_RULES" not in plain.constants
    pipeline, crc = crc_index(plain)
    assert pipeline[crc + 1] is plain.rx_audit and pipeline[crc + 2] is plain.rx_gate
    assert "ETHDAQ_RX_AUDIT" in plain.constants
    soc = DAQSoC(get_board("sim"), SoCConfig(fasttrack_ports=(9000, 9001)))
    pipeline, crc = crc_index(soc)
    assert pipeline[crc + 1] is soc.rx_audit
    assert pipeline[crc + 2] is soc.classifier and pipeline[crc + 3] is soc.rx_gate
    assert (soc.constants["ETHDAQ_FASTTRACK_PORT_0"], soc.constants["ETHDAQ_FASTTRACK_PORT_1"]) == (9000, 9001)


def test_at_64_bits_the_audit_classifier_and_gate_are_64_bit_in_sys_behind_liteeths_fcs_checker():
    """eth_dw=64: LiteEth's MAC datapath is 64-bit in sys (with_sys_datapath), and so are the
    receive audit, the classifier and the frame gate right behind its FCS checker; the audit is
    on by default as at 8 bits."""
    from liteeth.mac.crc import LiteEthMACCRC32Checker
    wide = DAQSoC(get_board("sim"), SoCConfig(eth_dw=64, with_streamer=False, fasttrack_ports=(9000,)))
    pipeline = wide.ethcore.mac.core.rx_datapath.pipeline
    crc = [i for i, m in enumerate(pipeline) if isinstance(m, LiteEthMACCRC32Checker)]
    assert len(crc) == 1 and len(pipeline[crc[0]].source.data) == 64
    assert pipeline[crc[0] + 1:crc[0] + 4] == [wide.rx_audit, wide.classifier, wide.rx_gate]
    assert all(len(m.sink.data) == len(m.source.data) == 64 for m in (wide.rx_audit, wide.classifier, wide.rx_gate))
    assert "ETHDAQ_RX_AUDIT" in wide.constants and wide.constants["ETHDAQ_FASTTRACK_PORT_0"] == 9000
    # In sys: the audit's, classifier's and gate's registers are in sys's synchronous logic.
    fragment = wide.get_fragment()
    in_sys = {s for stmt in fragment.sync.get("sys", []) for s in list_targets(stmt)}
    assert wide.rx_audit.source.valid in in_sys and wide.classifier.fasttrack.valid in in_sys
    assert not any(wide.rx_audit.source.valid in list_targets(stmt) for stmt in fragment.sync.get("eth_rx", []))


def test_the_launcher_is_the_first_transmit_class_with_the_lead_the_firmware_needs():
    from ethdaq.gateware.launcher import LATENCY_CYCLES
    plain = DAQSoC(get_board("sim"))
    assert not hasattr(plain, "launcher") and "ETHDAQ_LAUNCHER_LEAD_CYCLES" not in plain.constants
    assert len(plain.txpath.scheduler.sinks) == 2
    soc = DAQSoC(get_board("sim"), SoCConfig(with_launcher=True))
    assert len(soc.txpath.scheduler.sinks) == 3
    # Lead on the simulated board's GMII PHY: the launcher, phy_reg, the PHY's output register.
    assert soc.constants["ETHDAQ_LAUNCHER_LEAD_CYCLES"] == LATENCY_CYCLES + 1 + 1
    assert soc.constants["ETHDAQ_LAUNCHER_CYCLE_PS"] == 8000



def test_the_launchers_default_guard_band_covers_the_longest_frame_of_the_other_classes():
    from ethdaq.gateware.launcher import guard_cycles
    soc = DAQSoC(get_board("sim"), SoCConfig(with_launcher=True, max_payload=8972))
    assert soc.constants["ETHDAQ_LAUNCHER_GUARD"] == guard_cycles(42 + 8972) == 8 + 9014 + 4 + 11
    soc = DAQSoC(get_board("sim"), SoCConfig(with_launcher=True, max_payload=1000))
    assert soc.constants["ETHDAQ_LAUNCHER_GUARD"] == guard_cycles(1514)   # LiteEth's longest.


def test_the_latency_probes_are_an_option_with_the_classes_the_firmware_reads():
    from ethdaq.gateware.probe import RX_CLASSES, TX_CLASSES
    plain = DAQSoC(get_board("sim"))
    assert not hasattr(plain, "probes") and "ETHDAQ_PROBE_TX_CLASSES" not in plain.constants
    soc = DAQSoC(get_board("sim"), SoCConfig(with_probes=True, with_launcher=True, fasttrack_ports=(9000,)))
    assert soc.constants["ETHDAQ_PROBE_TX_CLASSES"] == len(TX_CLASSES) == 3
    assert soc.constants["ETHDAQ_PROBE_RX_CLASSES"] == len(RX_CLASSES) == 1
    # The transmit tap knows the scheduler's inputs: launcher 0, LiteEth 1, bulk 2.
    assert len(soc.txpath.scheduler.sinks) == 3


def test_no_buffer_of_the_data_path_is_mapped_on_the_cpu_bus():
    """LiteX's AutoCSR maps every Memory it finds as an attribute of a CSR module onto the CPU's
    bus, with one more port: a block RAM with a third (write) port, which Xilinx block RAMs do
    not have (yosys synth_xilinx stops), and CSR space and logic for nothing. The identifier's
    ROM is the only memory the CPU reads through the CSR bus."""
    soc = DAQSoC(get_board("sim"), SoCConfig(fasttrack_ports=(9000,)))
    mapped = {name: sub.get_memories() for name, sub in soc._submodules
              if name and hasattr(sub, "get_memories")}
    assert {name for name, memories in mapped.items() if memories} == {"identifier"}


def test_the_mac_transmit_crossing_stores_whole_frames():
    """LiteEth's transmit crossing (Migen's AsyncFIFO: its RAM read at the next address, from `re`,
    and bytes passed on as they come) is replaced by a FrameFIFO that holds a whole frame,
    behind the buffer that cuts LiteEth's ready chain (gateware/macpipeline.py); the AsyncFIFO is
    gone from the design, not left unconnected."""
    from litex.soc.interconnect import stream
    from ethdaq.gateware.framefifo import FrameFIFO
    soc = DAQSoC(get_board("sim"))
    tx = soc.ethcore.mac.core.tx_datapath
    assert tx.pipeline[1] is soc.eth_tx_cdc and isinstance(soc.eth_tx_cdc, FrameFIFO)
    assert len(soc.eth_tx_cdc.fifo.level) == 12   # 2048 bytes: LiteEth's 1530-byte MTU fits.
    assert tx.pipeline[2] is soc.eth_tx_buffer
    assert not any(isinstance(m, stream.ClockDomainCrossing) for m in tx.pipeline)
    assert not any(isinstance(m, stream.ClockDomainCrossing) for _, m in tx._submodules)


def test_the_mac_fcs_checker_judges_from_a_register():
    """LiteEth's FCS checker is replaced by gateware/fcschecker.py's, in the receive pipeline and
    as the source of the FCS error counter's pulse; LiteEth's is gone from the design."""
    from migen.fhdl.structure import _Assign
    from migen.genlib.cdc import PulseSynchronizer
    from liteeth.mac.crc import LiteEthMACCRC32Checker
    from ethdaq.gateware.fcschecker import FCSChecker
    soc = DAQSoC(get_board("sim"))
    rx  = soc.ethcore.mac.core.rx_datapath
    assert isinstance(soc.eth_rx_fcs, FCSChecker) and soc.eth_rx_fcs in rx.pipeline
    assert rx.pipeline[rx.pipeline.index(soc.eth_rx_fcs) + 1] is soc.rx_audit
    assert not any(isinstance(m, LiteEthMACCRC32Checker) for m in rx.pipeline)
    assert not any(isinstance(m, LiteEthMACCRC32Checker) for _, m in rx._submodules)
    pulses = {id(m.i) for _, m in rx._submodules if isinstance(m, PulseSynchronizer)}
    assert any(id(st.l) in pulses and st.r is soc.eth_rx_fcs.error
               for st in rx._fragment.comb if isinstance(st, _Assign))


def test_the_csr_bus_is_driven_from_flip_flops():
    """The CPU's CSR accesses reach the CSR banks through LiteX's registered Wishbone-to-CSR
    bridge: the CSR bus's address, write and read enables and write data are flip-flops, so no
    path runs from the CPU's bus command into every CSR's clock enable (sys's critical path on
    the colorlight_i5 with LiteX's default, unregistered bridge in SoCs without SDRAM)."""
    from migen.fhdl.tools import list_targets
    soc = DAQSoC(get_board("sim"))
    frag = soc.get_fragment()
    csr  = soc.csr_bridge.csr
    bus  = {id(s) for s in (csr.adr, csr.we, csr.re, csr.dat_w)}
    comb = {id(s) for s in list_targets(frag.comb)}
    sync = {id(s) for stmts in frag.sync.values() for s in list_targets(stmts)}
    assert not bus & comb
    assert bus <= sync


def test_liteeth_ipv4_receive_ready_is_cut_between_the_receiver_and_its_crossbar():
    """gateware/macpipeline.py's buffer (registered valid, payload and ready) sits between
    LiteEth's IPv4 receiver and its IPv4 crossbar: LiteEth's direct connection is gone and the
    receiver's `ready` is the buffer's, not the crossbar's. The network tests check that pings and
    the control port still work through it."""
    from migen.fhdl.structure import _Assign
    from litex.soc.interconnect.stream import Buffer, PipeReady, PipeValid
    soc = DAQSoC(get_board("sim"))
    frag = soc.get_fragment()
    ip, buf = soc.ethcore.ip, soc.eth_ip_rx_buffer
    assert isinstance(buf, Buffer)
    assert isinstance(buf.pipe_valid, PipeValid) and isinstance(buf.pipe_ready, PipeReady)
    drives = {}
    for st in frag.comb:
        if isinstance(st, _Assign):
            drives.setdefault(id(st.l), []).append(st.r)
    assert drives[id(ip.rx.source.ready)] == [buf.sink.ready]
    assert drives[id(buf.sink.valid)] == [ip.rx.source.valid]
    assert drives[id(ip.crossbar.master.sink.valid)] == [buf.source.valid]
    assert drives[id(buf.source.ready)] == [ip.crossbar.master.sink.ready]


def test_cutting_a_connection_that_is_not_there_is_an_error():
    from litex.soc.interconnect import stream
    from migen import Module
    from ethdaq.gateware.macpipeline import cut_connection
    m = Module()
    a, b = stream.Endpoint([("data", 8)]), stream.Endpoint([("data", 8)])
    m.comb += a.connect(b, omit={"last"})
    with pytest.raises(ValueError, match="no longer wires it"):
        cut_connection(m, a, b, stream.PipeReady([("data", 8)]))


def test_the_full_periodic_ptp_line_is_a_build_option_from_the_cli_to_the_firmware():
    """--ptp-status-full reaches DAQSoC and the firmware's ETHDAQ_PTP_STATUS_FULL (test_network's
    board, built with it, shows what the console then prints); without it the constant is 0."""
    from ethdaq.soc import cli
    args = lambda *more: cli.make_parser().parse_args(["build", "--board", "sim", *more])  # noqa: E731
    assert cli.build.soc_config(args("--ptp-status-full"), get_board("sim")).ptp_status_full is True
    assert cli.build.soc_config(args(), get_board("sim")).ptp_status_full is False
    assert DAQSoC(get_board("sim"), SoCConfig(ptp_status_full=True)).constants["ETHDAQ_PTP_STATUS_FULL"] == 1
    assert DAQSoC(get_board("sim")).constants["ETHDAQ_PTP_STATUS_FULL"] == 0


def test_the_add_steps_name_signals_as_one_constructor_would():
    """Migen names a signal after the frames that made it, one level per frame with a `self`:
    DAQSoC's constructor has none (its first argument is `soc`), so a part an add_* step makes
    has the one DAQSoC level it had when the constructor made every part itself, and the
    generated Verilog keeps its names (a second level renamed thousands of signals on ECP5)."""
    soc = DAQSoC(get_board("sim"))
    for signal, var in ((soc.netaddr.announce, "netaddr"), (soc.ptp_tx.fifo.level, "ptp_tx"),
                        (soc.watchdog.reset, "watchdog")):
        names = [name for name, _ in signal.backtrace]
        i = names.index(var)
        assert names[i - 1] == "daqsoc" and names[i - 2] != "daqsoc", names


def test_the_10g_board_streams_through_a_64_bit_transmit_path_into_ethdaqs_xgmii_transmitter():
    """sim10g (eth_dw=64, XGMII): the streamer, framer and scheduler are 64-bit in eth_tx; the PHY
    (gateware/xgmiiphy.py) is ethdaq's XGMII transmitter, which frames itself, so neither the transmit path nor LiteEth's
    MAC inserts preamble or FCS, and LiteEth's frames reach it whole (store-and-forward); LiteEth
    still checks preamble and FCS on receive; the PTP timestamp units are 64-bit."""
    from litex.soc.interconnect.packet import PacketFIFO
    from liteeth.mac.crc import LiteEthMACCRC32Checker, LiteEthMACCRC32Inserter
    from liteeth.mac.preamble import LiteEthMACPreambleChecker, LiteEthMACPreambleInserter
    from ethdaq.gateware.xgmiitx import XGMIITransmitter
    soc = DAQSoC(get_board("sim10g"))
    assert soc.soc_config.eth_dw == 64 and soc.constants["ETHDAQ_ETH_DW"] == 64
    assert isinstance(soc.ethphy.tx, XGMIITransmitter)
    assert len(soc.streamer.source.data) == len(soc.txpath.data.data) == 64
    assert len(soc.txpath.scheduler.source.data) == 64
    assert not hasattr(soc.txpath, "crc") and not hasattr(soc.txpath, "mactx") and not hasattr(soc.txpath, "phy_reg")
    tx = [type(m) for m in soc.ethcore.mac.core.tx_datapath.pipeline]
    assert LiteEthMACCRC32Inserter not in tx and LiteEthMACPreambleInserter not in tx
    assert not any(isinstance(m, (LiteEthMACCRC32Inserter, LiteEthMACPreambleInserter))
                   for _, m in soc.ethcore.mac.core.tx_datapath._submodules)
    rx = [type(m) for m in soc.ethcore.mac.core.rx_datapath.pipeline]
    assert LiteEthMACPreambleChecker in rx and LiteEthMACCRC32Checker in rx
    assert isinstance(soc.txpath.mac_frames, PacketFIFO)
    assert len(soc.ptp_tx.sink.data) == len(soc.ptp_rx.sink.data) == 64
    # The 1G board's transmit path is unchanged: 8 bits, the MAC transmitter's preamble and FCS.
    plain = DAQSoC(get_board("sim"))
    assert len(plain.streamer.source.data) == 8 and hasattr(plain.txpath, "mactx")
    assert not hasattr(plain.txpath, "mac_frames")
