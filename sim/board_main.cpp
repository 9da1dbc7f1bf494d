// The simulated board: a Verilated device that serves its byte link on a TCP port.
//
// Built by sim/board.py (`verilator --cc --exe --build`) with the device's Verilog and the wrapper
// module `hwgen_board` (generated there), which registers the link between this harness and the
// device. BOARD_UART selects the link: 0 = the device's byte streams, fed through the wrapper's
// `feed_*` handshake (one byte per cycle) and collected from `out_*`; 1 = the 8N1 pins `rx` and
// `tx` at `--divisor` clock cycles per bit.
//
// Usage: board --port P [--quiesce N] [--divisor D] [--host_bit Q]
//   --port 0 picks a free port. The chosen port is printed on stdout as "port P" once the socket
//   listens. The model sleeps in poll() until the next byte once nothing can change without one.
//   With the byte streams the device says so itself: its `rest` output is high when its clocks
//   have stopped (hwgen.device.Device's gate_idle: no run, no request under way, a partial
//   request dropped at its timeout), so the harness clocks no idle cycle at all. With the UART
//   it cannot see into the receive FIFO: --quiesce is the number of cycles the model keeps
//   running after the last byte in or out (at least the device's partial-frame timeout, so that
//   a truncated request is dropped on time). The process ends on SIGTERM or SIGINT, on EOF on
//   stdin (the parent has gone) or when it is re-parented; it then writes its statistics.
//
// --host_bit is the host's (the USB bridge's) bit time in 1/65536 clock cycles (default: the
// divisor's, D * 65536): the rx frames are driven and the tx frames sampled at that bit time, so
// a bridge whose rate is off the device's (its own error, and a real bridge's 2 %) is modelled;
// bit edges fall on the first clock cycle at or after their time, and back-to-back frames keep
// the fraction.
//
// Statistics: on SIGUSR1 and at exit one line on stderr,
//   "stats cycles=C busy_cycles=B run_s=R wall_s=W cpu_s=P quiet=Q"
// C cycles simulated, B of them with `busy` high, R seconds spent clocking the model (poll()
// sleeps excluded), W seconds since start, P CPU seconds used (R without the time other
// processes took the CPU), Q 1 when the model is asleep (see active()).
//
// Nothing runs per cycle but the model and a few branches: socket I/O happens between slices of
// cycles.

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "Vboard.h"
#include "verilated.h"

#ifndef BOARD_UART
#define BOARD_UART 0
#endif

namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_report = 0;

void on_stop(int) { g_stop = 1; }
void on_report(int) { g_report = 1; }

double clock_s(clockid_t clock) {
    timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double now_s() { return clock_s(CLOCK_MONOTONIC); }

[[noreturn]] void die(const char *what) {
    std::fprintf(stderr, "board: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

// Cycles clocked between two looks at the sockets: short enough that a request waits little,
// long enough that poll() costs a few percent of the time at most.
constexpr int SLICE = 512;
// Largest response backlog kept for a slow reader before the device is held (o_stream.ready).
constexpr size_t OUT_LIMIT = 1 << 20;
constexpr size_t IN_CHUNK = 1 << 16;
#if BOARD_UART
constexpr uint64_t OUT_PAUSE = 1;  // the line is slow: pass every byte on at once
#else
// Cycles without an output byte that end a burst: longer than the gaps inside a READ response
// (one word fetched from memory), so that a response goes out in one piece.
constexpr uint64_t OUT_PAUSE = 16;
#endif
// One clock cycle in the fixed point of --host_bit.
constexpr uint64_t ONE_CYCLE = 1 << 16;

struct Stats {
    uint64_t cycles = 0;
    uint64_t busy_cycles = 0;
    double run_s = 0;
    double start_s = 0;
};

struct Board {
    Vboard top;
    Stats st;
    // Bytes from the client not yet given to the device, and bytes of the device not yet sent.
    std::vector<uint8_t> in;
    size_t in_pos = 0;
    std::vector<uint8_t> out;
    size_t out_pos = 0;
    uint64_t last_in = 0;   // cycle of the last byte in (stream: the last one not yet taken)
    uint64_t last_out = 0;  // cycle of the last byte out
    uint64_t quiesce = 0;   // UART: cycles clocked after the last byte

#if BOARD_UART
    uint32_t divisor = 0;
    uint64_t host_bit = 0;  // the host's bit time, in 1/65536 cycles
    // rx driver: the 10-bit frame being sent (start, 8 data, stop), bit index, time since the
    // frame's start and of the next bit edge (1/65536 cycles).
    uint32_t rx_frame = 0;
    int rx_bit = -1;
    uint64_t rx_t = 0;
    uint64_t rx_next = 0;
    // tx decoder: -1 idle, 0 start bit, 1..8 data, 9 stop; time since the start edge and of
    // the next sample (1/65536 cycles).
    int tx_bit = -1;
    uint64_t tx_t = 0;
    uint64_t tx_next = 0;
    uint32_t tx_shift = 0;
    int tx_prev = 1;
#endif

    bool pending_in() const { return in_pos < in.size(); }

    // "quiet": the model sleeps until the next byte (see active()): nothing pending, not busy,
    // and any partial request has been dropped by the device.
    void report() const {
        std::fprintf(stderr,
                     "stats cycles=%llu busy_cycles=%llu run_s=%.6f wall_s=%.6f cpu_s=%.6f "
                     "quiet=%d\n",
                     (unsigned long long)st.cycles, (unsigned long long)st.busy_cycles,
                     st.run_s, now_s() - st.start_s, clock_s(CLOCK_PROCESS_CPUTIME_ID),
                     int(!active()));
        std::fflush(stderr);
    }

    bool active() const {
        if (pending_in() || top.busy) return true;
#if BOARD_UART
        // Bytes may wait in the device's receive FIFO, out of sight: wait out the timeout.
        if (rx_bit >= 0 || tx_bit >= 0) return true;
        uint64_t last = last_in > last_out ? last_in : last_out;
        return st.cycles - last < quiesce;
#else
        // At rest (and the wrapper empty) the device's clocks are stopped: a cycle changes
        // nothing, so none is clocked.
        return !top.rest;
#endif
    }

    void reset() {
        top.reset = 1;
#if BOARD_UART
        top.rx = 1;
#else
        top.feed_valid = 0;
        top.out_hold = 0;
#endif
        for (int i = 0; i < 4; i++) cycle();
        top.reset = 0;
    }

    void cycle() {
        top.eval();  // clk is low: no edge, but Verilator must see clk low to find the next edge
        top.clk = 1;
        top.eval();
        top.clk = 0;
    }

    // Clock up to `n` cycles; stop early when the model has nothing to do or the device has sent
    // bytes and then paused (the end of a response, most likely: send it at once).
    void run(int n) {
        double t0 = now_s();
        for (int k = 0; k < n && active(); k++) {
            step();
            if (out.size() > out_pos && st.cycles - last_out >= OUT_PAUSE) break;
        }
        st.run_s += now_s() - t0;
    }

#if !BOARD_UART
    // One clock cycle of the byte-stream device. The wrapper registers everything between the
    // harness and the device: feed_ready and out_valid describe the last clock edge.
    void step() {
        bool fed = pending_in() && top.feed_ready;
        top.feed_valid = fed;
        top.feed_payload = fed ? in[in_pos] : 0;
        top.out_hold = out.size() - out_pos >= OUT_LIMIT;
        cycle();
        st.busy_cycles += top.busy;
        st.cycles++;
        if (fed) in_pos++;
        if (fed || !top.feed_empty) last_in = st.cycles;
        if (top.out_valid) {
            out.push_back(top.out_payload);
            last_out = st.cycles;
        }
    }
#else
    // One clock cycle of the UART device: drive `rx` from the input bytes, decode `tx`.
    void step() {
        if (rx_bit < 0 && pending_in()) {
            rx_frame = (1u << 9) | (uint32_t(in[in_pos++]) << 1);  // stop 1, data, start 0
            rx_bit = 0;
            rx_next = host_bit;
            last_in = st.cycles;
        }
        top.rx = rx_bit < 0 ? 1 : (rx_frame >> rx_bit) & 1;
        cycle();
        st.busy_cycles += top.busy;
        st.cycles++;
        if (rx_bit >= 0 && (rx_t += ONE_CYCLE) >= rx_next) {
            rx_next += host_bit;
            if (++rx_bit == 10) {
                rx_bit = -1;
                // The next frame starts where this one ended, between two cycles; an idle line
                // starts afresh.
                rx_t = pending_in() ? rx_t - 10 * host_bit : 0;
            }
        }
        // Sample tx in the middle of each bit, timed from the falling edge of the start bit
        // (the edge's cycle, then half a bit time, whole cycles).
        int tx = top.tx;
        if (tx_bit < 0) {
            if (tx_prev && !tx) {
                tx_bit = 0;
                tx_t = 0;
                tx_next = host_bit / 2 / ONE_CYCLE * ONE_CYCLE;
            }
        } else if ((tx_t += ONE_CYCLE) >= tx_next) {
            tx_next += host_bit;
            if (tx_bit == 0 && tx) {
                tx_bit = -1;  // a glitch, not a start bit
            } else if (tx_bit >= 1 && tx_bit <= 8) {
                tx_shift |= uint32_t(tx) << (tx_bit - 1);
                tx_bit++;
            } else if (tx_bit == 9) {
                if (tx) out.push_back(uint8_t(tx_shift));  // a framing error loses the byte
                tx_shift = 0;
                tx_bit = -1;
                last_out = st.cycles;
            } else {
                tx_bit++;
            }
        }
        tx_prev = tx;
    }
#endif
};

int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) < 0) die("bind");
    if (listen(fd, 4) < 0) die("listen");
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) < 0) die("getsockname");
    std::printf("port %d\n", ntohs(addr.sin_port));
    std::fflush(stdout);
    return fd;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

uint64_t arg_u64(int argc, char **argv, const char *name, uint64_t fallback) {
    for (int i = 1; i + 1 < argc; i++)
        if (!std::strcmp(argv[i], name)) return std::strtoull(argv[i + 1], nullptr, 0);
    return fallback;
}

}  // namespace

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    std::signal(SIGPIPE, SIG_IGN);
    struct sigaction sa {};
    sa.sa_handler = on_stop;  // no SA_RESTART: poll() returns EINTR and the loop looks
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    sa.sa_handler = on_report;
    sigaction(SIGUSR1, &sa, nullptr);
    const pid_t parent = getppid();

    Board b;
    b.st.start_s = now_s();
    b.quiesce = arg_u64(argc, argv, "--quiesce", 1000000);
#if BOARD_UART
    b.divisor = uint32_t(arg_u64(argc, argv, "--divisor", 0));
    if (b.divisor < 2) {
        std::fprintf(stderr, "board: --divisor must be at least 2\n");
        return 2;
    }
    b.host_bit = arg_u64(argc, argv, "--host_bit", uint64_t(b.divisor) * ONE_CYCLE);
    if (b.host_bit < 2 * ONE_CYCLE) {
        std::fprintf(stderr, "board: --host_bit must be at least 2 cycles (131072)\n");
        return 2;
    }
#endif
    int listener = listen_on(int(arg_u64(argc, argv, "--port", 0)));
    set_nonblocking(listener);
    b.reset();

    int client = -1;
    while (!g_stop) {
        // Give the socket what the device produced.
        if (b.out_pos < b.out.size()) {
            if (client < 0) {
                b.out_pos = b.out.size();  // nobody to tell: the bytes are lost, as on a wire
            } else {
                ssize_t n = send(client, b.out.data() + b.out_pos, b.out.size() - b.out_pos,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) b.out_pos += size_t(n);
            }
            if (b.out_pos == b.out.size()) {
                b.out.clear();
                b.out_pos = 0;
            }
        }
        // Block only when the model has nothing to do: no input, not busy, quiet for long enough.
        bool active = b.active();
        pollfd fds[3];
        int nfds = 0;
        fds[nfds++] = {0, POLLIN, 0};
        int client_idx = -1;
        if (client >= 0) {
            short ev = 0;
            if (!b.pending_in()) ev |= POLLIN;  // read more only once the last bytes are in
            if (b.out_pos < b.out.size()) ev |= POLLOUT;
            client_idx = nfds;
            fds[nfds++] = {client, ev, 0};
        } else {
            fds[nfds++] = {listener, POLLIN, 0};  // one client at a time; others wait
        }
        // Asleep, wake up now and then to notice a parent that went away without closing stdin.
        int r = poll(fds, nfds, active || g_report ? 0 : 1000);
        if (r < 0) {
            if (errno != EINTR) die("poll");
            continue;  // a signal: look at the sockets again before reporting
        }
        if (getppid() != parent) break;
        if (r > 0) {
            if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                char junk[256];
                ssize_t n = read(0, junk, sizeof junk);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
            }
            if (client_idx < 0 && (fds[1].revents & POLLIN)) {
                int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd >= 0) {
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    client = fd;
                }
            } else if (client_idx >= 0 && fds[client_idx].revents) {
                short rev = fds[client_idx].revents;
                bool gone = rev & (POLLERR | POLLNVAL);
                if (!gone && (rev & (POLLIN | POLLHUP)) && !b.pending_in()) {
                    b.in.resize(IN_CHUNK);
                    b.in_pos = 0;
                    ssize_t n = recv(client, b.in.data(), IN_CHUNK, MSG_DONTWAIT);
                    if (n > 0) {
                        b.in.resize(size_t(n));
                    } else {
                        b.in.clear();
                        gone = n == 0 || (errno != EAGAIN && errno != EINTR);
                    }
                }
                if (gone) {
                    // The next client starts clean; the device drops any partial frame itself.
                    close(client);
                    client = -1;
                    b.in.clear();
                    b.in_pos = 0;
                    b.out.clear();
                    b.out_pos = 0;
                }
            }
        }
        if (g_report) {
            // After reading the socket: the stats cover every byte sent before they were asked.
            g_report = 0;
            b.report();
        }
        b.run(SLICE);
    }
    if (client >= 0) close(client);
    close(listener);
    b.report();
    b.top.final();
    return 0;
}
