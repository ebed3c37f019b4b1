"""SoCConfig (soc/socconfig.py): the board's values fill what a configuration leaves open, and
every option the build would refuse is refused here, before any gateware, with the one-line
message `ethdaq build` prints (test_cli.py runs the command line for the same messages)."""

import pytest

from ethdaq.boards import get_board
from ethdaq.soc.socconfig import SoCConfig
from ethdaq.wire import protocol


def test_the_defaults_are_the_boards_where_the_config_leaves_them_open():
    board = get_board("colorlight_i5")
    config = SoCConfig(build_id="ci").resolve(board)
    assert config.sys_clk_freq == int(board.sys_clk_freq) and config.eth_dw == board.eth_dw
    assert config.max_payload == board.max_payload
    assert (config.ip_address, config.netmask, config.mac_address) == (0xC0A80132, 0xFFFFFF00, 0x10E2D5000000)
    assert (config.ptp_log_sync, config.ptp_log_announce, config.ptp_log_delay_req) == (0, 1, 0)
    assert config.with_rx_audit is True and config.with_classifier is False
    # The simulated board runs about 1000x slower than real time: its own PTP intervals.
    sim = get_board("sim")
    assert SoCConfig().resolve(sim).ptp_log_sync == sim.ptp_log_sync
    # Given values win; fast-track ports imply the classifier.
    config = SoCConfig(ip_address="10.1.2.3", netmask="/20", ptp_log_sync=-3, fasttrack_ports=[9000]).resolve(board)
    assert (config.netmask, config.ptp_log_sync, config.with_classifier) == (0xFFFFF000, -3, True)
    assert config.fasttrack_ports == (9000,)
    assert config.netmask == SoCConfig(ip_address="10.1.2.3", netmask=0xFFFFF000).resolve(board).netmask
    assert SoCConfig(ip_address="10.1.2.3").resolve(board).netmask == 0xFF000000   # Its class: A.


def test_resolving_twice_changes_nothing():
    for name in ("sim", "colorlight_i5"):
        once = SoCConfig(build_id="x", ctl_allow="10.0.0.0/8", fasttrack_ports=(9000,)).resolve(get_board(name))
        assert once.resolve(get_board(name)) == once


def test_resolve_leaves_the_config_it_was_given_as_it_was():
    config = SoCConfig()
    config.resolve(get_board("sim"))
    assert config == SoCConfig()


@pytest.mark.parametrize("board, options, text", [
    ("sim", dict(ip_address="192.168.1"), "IP address must be dotted IPv4 like 192.168.1.50, not '192.168.1'"),
    ("sim", dict(ip_address="224.0.0.1"), "a board's IP address must be unicast, not 224.0.0.1"),
    ("sim", dict(netmask="33"), "netmask must be a prefix length 0..32"),
    ("sim", dict(mac_address="11:e2:d5:00:00:00"), "MAC address must be unicast"),
    ("sim", dict(ctl_allow="10.0.0.1/8"), "'10.0.0.1/8' is not an IPv4 address or network"),
    ("sim", dict(ctl_key=b"short"), f"ctl_key must be {protocol.KEY_MIN} to {protocol.KEY_MAX} bytes"),
    ("sim", dict(ctl_port=5000), "control port 5000 is already in use by the DAQ data stream"),
    ("sim", dict(ctl_port=320), "control port 320 is reserved for PTP (319 event, 320 general)"),
    ("sim", dict(with_etherbone=True, etherbone_port=5000),
     "Etherbone port must be in 1..65535 and free, not 5000 (used by the DAQ data stream)"),
    ("sim", dict(ptp_role="boss"), "PTP role must be one of auto, master, slave, not 'boss'"),
    ("sim", dict(ptp_transport="tcp"), "PTP transport must be one of udp, l2, not 'tcp'"),
    ("sim", dict(ptp_log_sync=7), "PTP sync interval must be a log2 interval in seconds from -10 to 6, not 7"),
    ("sim", dict(ptp_domain=256), "PTP domain must be 0..255, not 256"),
    ("sim", dict(sys_clk_freq=50e6), "the simulated board's sys clock is fixed at 125 MHz (it is the GMII clock)"),
    ("colorlight_i5", dict(with_pin_probe=True),
     "--pin-probe reports from the simulated board's pins; colorlight_i5 is real hardware"),
    ("colorlight_i5", dict(with_ptp_testbench=True),
     "with_ptp_testbench models a board in simulation; colorlight_i5 is real hardware"),
    ("sim", dict(fasttrack_ports=(7000,)), "fast-track port 7000 is the control port's"),
    ("sim", dict(fasttrack_ports=(9000, 9000)), "fast-track ports must be distinct, not [9000, 9000]"),
    ("sim", dict(fasttrack_ports=(1, 2, 3, 4, 6)), "at most 4 fast-track ports (the classifier's rules), not 5"),
    ("sim", dict(eth_dw=64, with_streamer=False, with_classifier=True, with_probes=True),
     "the latency probes with the receive classifier need eth_dw=8 for now, not 64"),
    ("sim", dict(frontend=object(), with_streamer=False), "a front-end needs the streamer: it drives the stream channels"),
    ("sim", dict(nchannels=9), "the streamer takes 1 to 8 channels (the control protocol's channel mask is 8 bits), not 9"),
    ("sim10g", dict(eth_dw=8), "eth_dw must be 8, 16, 32 or 64 and at least the PHY's width on sim10g (64 bits), not 8"),
    ("sim", dict(eth_dw=12), "eth_dw must be 8, 16, 32 or 64 and at least the PHY's width on sim (8 bits), not 12"),
    ("sim10g", dict(with_pin_probe=True), "--pin-probe watches GMII pins; sim10g's PHY is 64-bit"),
    # The 10G hardware board: its PHY is 64-bit, its sys clock fixed by the transceiver's resets.
    ("xilinx_kcu116", dict(eth_dw=8),
     "eth_dw must be 8, 16, 32 or 64 and at least the PHY's width on xilinx_kcu116 (64 bits), not 8"),
    ("xilinx_kcu116", dict(sys_clk_freq=100e6),
     "xilinx_kcu116's sys clock is fixed at 125 MHz (its transceiver's reset sequencer counts in it), not 100 MHz"),
    ("xilinx_kcu116", dict(with_launcher=True), "the time-triggered launcher needs an 8-bit PHY for now; xilinx_kcu116's is 64-bit"),
    ("xilinx_kcu116", dict(with_probes=True), "the latency probes need an 8-bit PHY for now; xilinx_kcu116's is 64-bit"),
    ("xilinx_kcu116", dict(with_pin_probe=True), "--pin-probe reports from the simulated board's pins; xilinx_kcu116 is real hardware"),
])
def test_what_the_build_refuses_is_a_one_line_value_error(board, options, text):
    with pytest.raises(ValueError) as e:
        SoCConfig(**options).resolve(get_board(board))
    assert str(e.value).startswith(text) and "\n" not in str(e.value)


def test_kcu116_takes_its_64_bit_datapath_and_sys_clock():
    config = SoCConfig().resolve(get_board("xilinx_kcu116"))
    assert (config.eth_dw, config.sys_clk_freq) == (64, 125_000_000)
    assert SoCConfig(ptp_transport="l2").resolve(get_board("xilinx_kcu116")).ptp_transport == "l2"
    assert SoCConfig(sys_clk_freq=125e6).resolve(get_board("xilinx_kcu116")).sys_clk_freq == 125_000_000


def test_without_the_streamer_its_port_is_free():
    assert SoCConfig(with_streamer=False, ctl_port=5000).resolve(get_board("sim")).ctl_port == 5000


def test_the_command_lines_defaults_are_the_configs():
    """`ethdaq build` and `ethdaq sim` without options make SoCConfig(): one set of defaults."""
    from ethdaq.soc import cli
    sim = get_board("sim")
    for words in (["build", "--board", "sim"], ["sim"]):
        assert cli.build.soc_config(cli.make_parser().parse_args(words), sim) == SoCConfig()
