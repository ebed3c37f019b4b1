#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

"""Connector pins for front-ends: a front-end names pins on the board's expansion connectors (in
LiteX's connector form, `connectors` in the board file) with their I/O standard, and gets them
as one signal, constrained in the build's LPF or XDC like any pad of the board.

    pins = ConnectorPins(platform, "colorlight_i5")
    trigger = pins.request("trigger", "pmodf", [0], "LVCMOS33")   # 1 bit, FPGA pin D1
    adc     = pins.request("adc", "pmodf", [1, 2, 3], "LVCMOS33")  # 3 bits, pin 1 is bit 0

Every pin is checked before LiteX sees it, so that a mistake is one line (PinError) naming the
connector and the pin: a connector the board does not have, a pin the connector does not have or
that reaches no FPGA pin (ground, power), an FPGA pin asked for twice (also under two names: the
HUB75 ports of the 5A-75B share their address lines), and an FPGA pin that the board file gives
to the SoC (its clock, reset, console, Ethernet PHY, LEDs, the PTP pulse-per-second and periodic
outputs).
"""

from litex.build.generic_platform import IOStandard, Misc, Pins, Subsignal

# The top-level ports of front-end pins: frontend_<name> in the Verilog, the LPF and the XDC.
PREFIX = "frontend_"


class PinError(ValueError):
    """A front-end's pin request the board cannot give, in one line."""


def _sites(platform, label, constraints):
    """{FPGA pin: label} of a resource's (or subsignal's) constraints; a subsignal's label is
    its resource's and its own name ("serial tx")."""
    sites = {}
    for c in constraints:
        if isinstance(c, Pins):
            for site in platform.constraint_manager.connector_manager.resolve_identifiers(c.identifiers):
                sites[site] = label
        elif isinstance(c, Subsignal):
            sites.update(_sites(platform, f"{label} {c.name}", c.constraints))
    return sites


def soc_sites(platform):
    """{FPGA pin: pad name} of every pad the board file declares, requested or not: the SoC's."""
    cm = platform.constraint_manager
    sites = {}
    for name, number, *constraints in list(cm.available) + [r for r, _ in cm.matched]:
        if not name.startswith(PREFIX):
            sites.update(_sites(platform, name, constraints))
    return sites


def _listed(pins):
    """A pin, a list of pins or a string of pins separated by spaces, as a list of strings."""
    if isinstance(pins, (int, str)) and not isinstance(pins, bool):
        pins = str(pins).split()
    if not isinstance(pins, (list, tuple)) or not all(isinstance(p, (int, str)) and not isinstance(p, bool) for p in pins):
        raise PinError(f"pins must be a pin or a list of pins (numbers or names), not {pins!r}")
    return [str(p) for p in pins]


class ConnectorPins:
    """The board's connectors as one front-end sees them; remembers what it has given out."""
    def __init__(self, platform, board):
        self.platform = platform
        self.board    = board
        self.given    = {}  # FPGA pin: (name, "connector:pin") for every pin given out.

    @property
    def connectors(self):
        return self.platform.constraint_manager.connector_manager.connector_table

    def site(self, connector, pin):
        """The FPGA pin of `pin` (a string) on `connector`, or a PinError saying what is wrong."""
        if connector not in self.connectors:
            known = ", ".join(sorted(self.connectors))
            raise PinError(f"the board {self.board} has no connector {connector!r}; "
                           + (f"its connectors: {known}" if known else "it has none"))
        table = self.connectors[connector]
        if isinstance(table, dict):
            if pin not in table:
                raise PinError(f"connector {connector!r} of the board {self.board} has no pin {pin!r}; "
                               f"its pins: {', '.join(table)}")
            site = table[pin]
        else:
            if not pin.isdigit() or int(pin) >= len(table):
                raise PinError(f"connector {connector!r} of the board {self.board} has no pin {pin!r}; "
                               f"its pins are 0 to {len(table) - 1}")
            site = table[int(pin)]
        if site in (None, "-"):
            raise PinError(f"pin {connector}:{pin} of the board {self.board} reaches no FPGA pin "
                           f"(ground, power or not connected)")
        if ":" in site:  # A connector pin named through another connector.
            site = self.platform.constraint_manager.connector_manager.resolve_identifiers([site])[0]
        return site

    def request(self, name, connector, pins, iostandard, misc=()):
        """Pins `pins` of `connector` as one signal named frontend_<name>, the first pin its bit 0,
        with I/O standard `iostandard` (and `misc`, the toolchain's own attributes such as
        "PULLMODE=UP" for nextpnr or "PULLUP TRUE" for Vivado)."""
        if not isinstance(name, str) or not name.isidentifier():
            raise PinError(f"the pins' name must be a Python/Verilog identifier, not {name!r}")
        if any(n == name for n, _ in self.given.values()):
            raise PinError(f"the name {name!r} is asked for twice; give each group of pins its own")
        if not isinstance(iostandard, str) or not iostandard:
            raise PinError(f"pins {name!r}: the I/O standard must be a name such as 'LVCMOS33', not {iostandard!r}")
        if isinstance(misc, str) or not all(isinstance(m, str) for m in misc):
            raise PinError(f"pins {name!r}: misc must be a list of strings such as ['PULLMODE=UP'], not {misc!r}")
        pins = _listed(pins)
        if not pins:
            raise PinError(f"pins {name!r}: no pins given")
        soc, sites, here = soc_sites(self.platform), [], {}
        for pin in pins:
            site, ref = self.site(connector, pin), f"{connector}:{pin}"
            if site in soc:
                raise PinError(f"pin {ref} is FPGA pin {site}, which the SoC uses for {soc[site]}")
            if site in here or site in self.given:
                other, other_ref = (name, here[site]) if site in here else self.given[site]
                alias = "" if other_ref == ref else f" (as {other_ref})"
                raise PinError(f"pin {ref} (FPGA pin {site}) is asked for twice: for {other!r}{alias} and for {name!r}")
            here[site] = ref
            sites.append(site)
        for site, ref in here.items():
            self.given[site] = (name, ref)
        self.platform.add_extension([(PREFIX + name, 0, Pins(" ".join(sites)), IOStandard(iostandard),
                                      *[Misc(m) for m in misc])])
        return self.platform.request(PREFIX + name)
