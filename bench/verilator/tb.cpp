// Verilator testbench for bench/gmii.py's StreamBenchTop: clocks the design at one cycle per
// GMII byte (125 MHz), answers the ARP request with bytes from a file (built by scapy), and
// prints every cycle with tx_en high ("T cycle byte") and every datagram completion at the
// streamer input ("C cycle"), and every cycle in which channels took a sample ("A cycle mask"),
// until `frames` frames ended on the wire (0: no limit) or `max_cycles` passed.
// Usage: tb payload rate enable frames arp_reply_file max_cycles gap [mode [flush]]
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "Vtop.h"
#include "verilated.h"

int main(int argc, char **argv) {
    if (argc < 8) { fprintf(stderr, "usage: tb payload rate enable frames arp_file max_cycles gap\n"); return 2; }
    Verilated::commandArgs(argc, argv);
    unsigned payload = strtoul(argv[1], 0, 0), rate = strtoul(argv[2], 0, 0), enable = strtoul(argv[3], 0, 0);
    unsigned frames = strtoul(argv[4], 0, 0);
    unsigned long long max_cycles = strtoull(argv[6], 0, 0);
    unsigned gap = strtoul(argv[7], 0, 0);
    unsigned mode = argc > 8 ? strtoul(argv[8], 0, 0) : 1;    // The emulators' mode: 1 counter, 3 pulse.
    unsigned flush = argc > 9 ? strtoul(argv[9], 0, 0) : 0;   // The streamer's idle flush, cycles.
    std::vector<unsigned char> arp;
    FILE *f = fopen(argv[5], "rb");
    if (!f) { perror(argv[5]); return 2; }
    int c;
    while ((c = fgetc(f)) != EOF) arp.push_back((unsigned char)c);
    fclose(f);

    Vtop *t = new Vtop;
    t->payload = payload; t->rate = rate; t->enable = enable; t->gap = gap; t->mode = mode; t->flush = flush;
    t->start = 0; t->rx_dv = 0; t->rx_data = 0; t->sys_rst = 1;
    unsigned long long cycle = 0;
    unsigned done = 0, prev_en = 0;
    long arp_at = -1; size_t arp_i = 0;
    while (cycle < max_cycles && (frames == 0 || done < frames)) {
        // Inputs for this edge.
        t->sys_rst = cycle < 10;
        t->start = cycle == 20;
        if (arp_at >= 0 && (long)cycle >= arp_at && arp_i < arp.size()) {
            t->rx_dv = 1; t->rx_data = arp[arp_i++];
        } else {
            t->rx_dv = 0;
        }
        t->sys_clk = 0; t->eval();
        t->sys_clk = 1; t->eval();
        cycle++;
        if (t->tx_en) printf("T %llu %02x\n", cycle, t->tx_data);
        if (t->close) printf("C %llu\n", cycle);
        if (t->accept) printf("A %llu %x\n", cycle, (unsigned)t->accept);
        if (prev_en && !t->tx_en) {
            done++;
            if (done == 1) arp_at = cycle + 20;  // The first frame is the ARP request.
        }
        prev_en = t->tx_en;
    }
    t->final();
    delete t;
    fprintf(stderr, "cycles=%llu frames=%u\n", cycle, done);
    return frames && done < frames ? 1 : 0;
}
