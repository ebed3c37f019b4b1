"""CSRConfig (gateware/csr.py): written through LiteX's CSR bank like a CSRStorage, reads back as
0, so the bank's read multiplexer has no inputs for it. A plain CSRStorage beside it still reads
back (the bank itself is unchanged)."""

from migen import run_simulation

from litex.gen import LiteXModule
from litex.soc.interconnect import csr_bus
from litex.soc.interconnect.csr import CSRStorage

from ethdaq.gateware.csr import CSRConfig


class Dut(LiteXModule):
    def __init__(self):
        self._config = CSRConfig(48, reset=0x123, description="write-only")
        self._plain  = CSRStorage(32, reset=0x55, description="read-back")


def test_config_is_written_like_a_storage_and_reads_as_zero():
    core = Dut()
    bank = csr_bus.CSRBank(core.get_csrs(), address=0, paging=0x800, ordering="big",
                           bus=csr_bus.Interface(data_width=32, address_width=14))
    core.bank = bank
    out = {}

    def access(adr, we=0, dat=0):
        yield bank.bus.adr.eq(adr)
        yield bank.bus.we.eq(we)
        yield bank.bus.dat_w.eq(dat)
        yield
        yield bank.bus.we.eq(0)
        yield
        return (yield bank.bus.dat_r)

    def gen():
        out["reset"] = (yield core._config.storage)
        # 48 bits: two words, most significant first (ordering "big").
        yield from access(0, 1, 0xBEEF)
        yield from access(1, 1, 0xCAFE1234)
        yield from access(2, 1, 0xA5A5A5A5)
        out["storage"] = (yield core._config.storage)
        out["plain"]   = (yield core._plain.storage)
        out["read"] = []
        for a in range(3):
            out["read"].append((yield from access(a)))

    run_simulation(core, gen())
    assert out["reset"] == 0x123
    assert out["storage"] == 0xBEEFCAFE1234
    assert out["plain"] == 0xA5A5A5A5
    assert out["read"] == [0, 0, 0xA5A5A5A5]
