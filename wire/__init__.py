"""The wire formats, each written once: the DAQ datagram header (daqformat) and the control
protocol (protocol). The gateware, the firmware (through the C headers they generate), the host
tools and the Wireshark dissector all take them from here; they import nothing else of ethdaq."""
