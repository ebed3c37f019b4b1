// This file is part of ethdaq.
// SPDX-License-Identifier: BSD-2-Clause
//
// Simulation only (Verilator): frames on the simulated board's GMII transmit pins carrying an
// IPv4/UDP datagram to port PORT (EtherType 0x0800, a 20-byte IP header, protocol 17), with the
// PTP clock's published time in the cycle their first preamble byte was on the pins:
// "probe: launch CYCLE time SEC NS". Decoded here from the pins, independently of the launcher, so
// a test can compare the time against the launch time it asked for.
module ethdaq_launch_probe #(
    parameter PORT = 9100
) (
    input wire        clk,
    input wire        tx_en,
    input wire [7:0]  tx_data,
    input wire [47:0] sec,
    input wire [29:0] ns
);
    reg [63:0] cycle = 0;
    reg [15:0] index = 0;
    reg        en_d = 0;
    reg [63:0] start_cycle = 0;
    reg [47:0] start_sec = 0;
    reg [29:0] start_ns = 0;
    reg [15:0] ethertype = 0;
    reg [7:0]  proto = 0;
    reg [7:0]  ihl = 0;
    reg [15:0] dport = 0;

    always @(posedge clk) begin
        cycle <= cycle + 1;
        en_d <= tx_en;
        if (tx_en) begin
            if (!en_d) begin
                start_cycle <= cycle;
                start_sec <= sec;
                start_ns <= ns;
                index <= 1;
            end else
                index <= index + 1;
            // Byte offsets on the wire: preamble 0-7, Ethernet header 8-21, IPv4 from 22.
            case (en_d ? index : 16'd0)
                20: ethertype[15:8] <= tx_data;
                21: ethertype[7:0] <= tx_data;
                22: ihl <= tx_data;
                31: proto <= tx_data;
                44: dport[15:8] <= tx_data;
                45: begin
                    if (ethertype == 16'h0800 && ihl == 8'h45 && proto == 8'd17 && {dport[15:8], tx_data} == PORT) begin
                        $display("probe: launch %0d time %0d %0d", start_cycle, start_sec, start_ns);
                        $fflush();
                    end
                end
                default: ;
            endcase
        end
    end
endmodule
