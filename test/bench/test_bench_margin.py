"""bench/margin.py's verdicts: the median placement against the margin, the worst against the
bare requirement, a placement that did not route counting as a miss; and users' builds that are
distinct netlists."""

from bench import margin


def placement(eth, sys_, routed=True):
    if not routed:
        return {"fmax": {}, "router": "none"}
    # nextpnr's constraints carry the 10 % margin: 137.5 MHz for the 125 MHz eth clock.
    return {"fmax": {"eth_clocks0_rx": [eth, 137.5], "crg_clkout": [sys_, 66.0]}, "router": "router1"}


def test_median_against_the_margin_and_worst_against_the_requirement():
    s = margin.summary([placement(140.0, 70.0), placement(138.0, 67.0), placement(126.0, 61.0)])
    eth, sys_ = s["eth_clocks0_rx"], s["crg_clkout"]
    assert round(eth["required"], 6) == 125.0 and round(sys_["required"], 6) == 60.0
    assert eth["median"] == 138.0 and eth["worst"] == 126.0 and eth["best"] == 140.0
    assert eth["median_meets_margin"] and eth["worst_meets_requirement"]
    assert sys_["median_meets_margin"] and sys_["worst_meets_requirement"]
    s = margin.summary([placement(140.0, 70.0), placement(137.0, 70.0), placement(124.9, 70.0)])
    assert not s["eth_clocks0_rx"]["median_meets_margin"]
    assert not s["eth_clocks0_rx"]["worst_meets_requirement"]


def test_a_placement_that_did_not_route_is_the_worst_of_every_clock():
    s = margin.summary([placement(140.0, 70.0), placement(139.0, 69.0), placement(0, 0, routed=False)])
    assert s["eth_clocks0_rx"]["worst"] == 0.0 and not s["eth_clocks0_rx"]["worst_meets_requirement"]
    assert s["eth_clocks0_rx"]["median"] == 139.0 and s["eth_clocks0_rx"]["median_meets_margin"]


def test_users_builds_differ_in_build_id_and_addresses():
    ids = margin.identities(5)
    assert ids[0][1:] == (None, None)        # A fresh clone's: the git hash, default addresses.
    assert len({i[0] for i in ids}) == 5 and len({i[1] for i in ids[1:]}) == 4 and len({i[2] for i in ids[1:]}) == 4


def test_the_limiting_path_is_the_worst_one_within_the_clock(tmp_path):
    """nextpnr's report lists the worst path per clock pair: the one from eth to eth is named,
    with its cells' names stripped of the mapping's suffixes, its logic levels and its route."""
    import json
    eth, sys_ = "posedge $glbnet$eth_clocks0_rx$TRELLIS_IO_IN", "posedge $glbnet$sys_clk"

    def hop(kind, delay, src="x", dst="y"):
        return {"type": kind, "delay": delay, "from": {"cell": src}, "to": {"cell": dst}}
    report = {"critical_paths": [
        {"from": eth, "to": sys_, "path": [hop("clk-to-q", 0.5, "a_TRELLIS_FF_Q"), hop("routing", 3.0, dst="b")]},
        {"from": eth, "to": eth, "path": [hop("clk-to-q", 0.5, "serializer_sel_TRELLIS_FF_Q_3"), hop("routing", 2.0),
                                          hop("logic", 0.4), hop("routing", 1.5), hop("logic", 0.4),
                                          hop("setup", 0.2, dst="framer_data_TRELLIS_FF_Q")]}]}
    path = tmp_path / "margin-1.json"
    path.write_text(json.dumps(report))
    assert margin.limiting_path(path, "eth_clocks0_rx") == \
        "serializer_sel → framer_data (2 logic levels, 5.00 ns, 3.50 of them route)"
    assert margin.limiting_path(path, "crg_clkout") == ""


def test_a_carry_chain_counts_as_one_level_per_cell(tmp_path):
    import json
    eth = "posedge $glbnet$eth_clocks0_rx$TRELLIS_IO_IN"

    def hop(kind, delay, dst="y"):
        return {"type": kind, "delay": delay, "from": {"cell": "a_TRELLIS_FF_Q"}, "to": {"cell": dst}}
    path = [hop("clk-to-q", 0.5), hop("logic", 0.2, "c$CCU2_COMB0"), hop("logic", 0.1, "c$CCU2_COMB1"),
            hop("logic", 0.4, "l"), hop("setup", 0.3, "b_TRELLIS_FF_Q")]
    (tmp_path / "r.json").write_text(json.dumps({"critical_paths": [{"from": eth, "to": eth, "path": path}]}))
    assert margin.limiting_path(tmp_path / "r.json", "eth_clocks0_rx") == \
        "a → b (2 logic levels, 1.50 ns, 0.00 of them route)"
