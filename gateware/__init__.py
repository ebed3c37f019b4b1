# Every design built through ethdaq gets LiteX's Verilog output with signed negative constants
# (see verilog_fix.py).
from ethdaq.gateware import verilog_fix  # noqa: F401
