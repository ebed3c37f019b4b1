# ethdaq: the two commands a new user needs, on a fresh Debian 12 machine as root.
#   make demo   boot the simulated board, ping it and identify it
#   make test   run the test suite (unit, firmware-on-host, network, one ECP5 bitstream build)
#   make kafka  fetch Apache Kafka's pinned jars into .cache/kafka (tests and `python -m ethdaq.kafkabroker run`)
# Each installs what is missing (Debian packages, .venv with pinned pip packages); safe to re-run.

SHELL   := /bin/bash
VENV    := .venv
PYTHON  := $(VENV)/bin/python
STAMPS  := $(VENV)/.stamps

# Debian packages the build, the simulation and the tests need.
DEBS := python3 python3-venv python3-dev git make gcc g++ \
        verilator gcc-riscv64-unknown-elf libevent-dev libjson-c-dev zlib1g-dev \
        iproute2 iputils-ping arping tcpdump tshark openfpgaloader linuxptp ethtool \
        clang libclang-rt-14-dev libcmocka-dev ccache hdf5-tools \
        openjdk-17-jre-headless prometheus dnsmasq-base

.PHONY: all deps venv kafka demo test test-fast clean

all: venv

deps:
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "Error: installing Debian packages needs root (run as root, or: sudo apt-get install" $$missing")"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The receive core (C) is compiled by pip install: rebuild it when its sources change.
$(STAMPS)/venv: setup.py constraints.txt $(wildcard software/host/rxcore/*.[ch]) | deps
	@test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip==24.3.1
	$(PYTHON) -m pip install -q -c constraints.txt -e '.[test]'
	@mkdir -p $(STAMPS) && touch $@

venv: deps $(STAMPS)/venv

# Apache Kafka's broker for the tests and for one-PC trials: jars checked against ethdaq/kafka-jars.lock.
kafka: venv
	$(PYTHON) -m ethdaq.kafkabroker fetch

demo: venv
	$(VENV)/bin/ethdaq sim --identify --stream 8 --ping 5

test: venv kafka
	$(VENV)/bin/pytest -n 2

test-fast: venv kafka
	$(VENV)/bin/pytest -m "not slow"

clean:
	rm -rf build .pytest_cache
