// Verilator testbench for bench/xgmii.py's XGMIIBenchTop: one cycle per 64-bit XGMII column
// (156.25 MHz, 8 byte times). Holds reset for 10 cycles, raises `enable` at cycle 20, sets
// `frame_len` to the lengths given in turn (the next one after each `sof`, the source latches it
// when the current frame ends), and prints every cycle where some TX lane is not idle:
//     X cycle ctl_hex data_hex
// (lane i = ctl bit i, data bits 8i..8i+7), and every cycle where `close` is high (a complete
// datagram handed to the transmit side; only Stream10GBenchTop drives it):
//     C cycle
// until `frames` /T/ characters went out or `max_cycles` passed (exit status 1 then).
// rate and chmask drive Stream10GBenchTop's emulator rate and channel enables.
// Usage: tb_xgmii len[,len...] frames max_cycles [rate [chmask]]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "Vtop.h"
#include "verilated.h"

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: tb_xgmii len[,len...] frames max_cycles [rate [chmask]]\n"); return 2; }
    Verilated::commandArgs(argc, argv);
    std::vector<unsigned> lens;
    for (char *p = argv[1]; *p; ) {
        char *end;
        lens.push_back(strtoul(p, &end, 0));
        if (end == p) { fprintf(stderr, "bad length list %s\n", argv[1]); return 2; }
        p = *end == ',' ? end + 1 : end;
    }
    unsigned frames = strtoul(argv[2], 0, 0);
    unsigned long long max_cycles = strtoull(argv[3], 0, 0);
    unsigned rate = argc > 4 ? strtoul(argv[4], 0, 0) : 0xffffffffu;
    unsigned chmask = argc > 5 ? strtoul(argv[5], 0, 0) : 0xfu;

    Vtop *t = new Vtop;
    t->sys_rst = 1; t->enable = 0; t->frame_len = lens[0]; t->rate = rate; t->chmask = chmask;
    unsigned long long cycle = 0;
    unsigned done = 0, sofs = 0;
    while (cycle < max_cycles && done < frames) {
        t->sys_rst = cycle < 10;
        t->enable = cycle >= 20;
        t->sys_clk = 0; t->eval();
        bool sof = t->sof && !t->sys_rst;  // First word accepted at this edge.
        t->sys_clk = 1; t->eval();
        cycle++;
        if (sof) { sofs++; t->frame_len = lens[sofs % lens.size()]; }
        if (t->close) printf("C %llu\n", cycle);
        unsigned ctl = t->tx_ctl;
        unsigned long long data = t->tx_data;
        if (ctl != 0xff || data != 0x0707070707070707ULL) {
            printf("X %llu %02x %016llx\n", cycle, ctl, data);
            for (int i = 0; i < 8; i++)
                if (((ctl >> i) & 1) && ((data >> (8*i)) & 0xff) == 0xfd) done++;
        }
    }
    t->final();
    delete t;
    fprintf(stderr, "cycles=%llu frames=%u\n", cycle, done);
    return done < frames ? 1 : 0;
}
