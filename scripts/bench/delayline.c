/*
 * A userspace delay line between two TAP devices: the same job and options as delayline.py, in C.
 *
 * The benchmark (scripts/bench/lossy.py) compiles it with `cc -O2` when it can and falls back to delayline.py
 * when it cannot. The Python line spends most of a core on per-frame work and caps the link at 40-70 MB/s on a
 * 2-core machine, so the clients it joins crowd under that ceiling and share the other core with nginx. This one
 * forwards the same frames with a fraction of the CPU.
 *
 * It creates two TAP devices (IFF_TAP | IFF_NO_PI) in the network namespace it is started in and copies every
 * Ethernet frame the kernel sends out of one device into the other, after holding it for --delay-ms and dropping
 * a --loss fraction at random (each direction on its own, so the round trip is twice the delay, as with `netem
 * delay` on both ends of a veth pair). --loss-from-a / --loss-from-b give each direction its own loss. A frame
 * that finds its direction's queue full (--queue-limit frames) is dropped, as a router's tail drop would.
 *
 * It prints "ready" on standard output once both devices exist, stops on SIGTERM / SIGINT or after --max-seconds,
 * and prints what it did on standard error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { SLOT = 2048, READ_BURST = 256 };

struct frame {
    int64_t due_ns;
    uint16_t len;
    unsigned char data[SLOT];
};

/* Frames on their way to one device: a ring in arrival order, so the head is always the next one due. */
struct queue {
    struct frame *slots;
    size_t cap, head, count;
};

static volatile sig_atomic_t running = 1;

static void stop(int signum) {
    (void)signum;
    running = 0;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* xorshift64*: the loss draws. Seeded from /dev/urandom unless --seed is given: a fixed seed would drop the same
 * frames of every case, such as the SYN-ACK of the first client's third connection. */
static uint64_t rng_state = 0;
static double rand_unit(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

static int open_tap(const char *name) {
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        perror("open /dev/net/tun");
        exit(1);
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        perror("TUNSETIFF");
        exit(1);
    }
    return fd;
}

static void usage(void) {
    fprintf(stderr, "usage: delayline --a DEV --b DEV [--delay-ms MS] [--loss F] [--loss-from-a F] "
                    "[--loss-from-b F] [--queue-limit FRAMES] [--seed N] [--max-seconds S]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *name_a = NULL, *name_b = NULL;
    double delay_ms = 50.0, loss = 0.005, loss_a = -1, loss_b = -1, max_seconds = 6 * 3600.0;
    size_t queue_limit = 32768;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *opt = argv[i], *val = argv[++i];
        if (!strcmp(opt, "--a")) name_a = val;
        else if (!strcmp(opt, "--b")) name_b = val;
        else if (!strcmp(opt, "--delay-ms")) delay_ms = atof(val);
        else if (!strcmp(opt, "--loss")) loss = atof(val);
        else if (!strcmp(opt, "--loss-from-a")) loss_a = atof(val);
        else if (!strcmp(opt, "--loss-from-b")) loss_b = atof(val);
        else if (!strcmp(opt, "--queue-limit")) queue_limit = (size_t)atol(val);
        else if (!strcmp(opt, "--seed")) rng_state = (uint64_t)atoll(val) * 2654435761ULL + 1; /* never 0 for a small seed */
        else if (!strcmp(opt, "--max-seconds")) max_seconds = atof(val);
        else usage();
    }
    if (!name_a || !name_b || queue_limit == 0) usage();
    if (rng_state == 0) {
        int ur = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (ur < 0 || read(ur, &rng_state, sizeof rng_state) != (ssize_t)sizeof rng_state) rng_state = (uint64_t)now_ns();
        if (ur >= 0) close(ur);
        if (rng_state == 0) rng_state = 0x9E3779B97F4A7C15ULL;
    }
    if (loss_a < 0) loss_a = loss;
    if (loss_b < 0) loss_b = loss;

    int fd[2] = {open_tap(name_a), open_tap(name_b)};
    double loss_from[2] = {loss_a, loss_b};
    /* q[i] holds the frames to be written to fd[i], read from the other device. */
    struct queue q[2];
    for (int i = 0; i < 2; i++) {
        q[i].slots = calloc(queue_limit, sizeof(struct frame));
        if (!q[i].slots) {
            perror("calloc");
            return 1;
        }
        q[i].cap = queue_limit;
        q[i].head = q[i].count = 0;
    }
    unsigned long long forwarded = 0, dropped_loss = 0, dropped_queue = 0, dropped_write = 0, dropped_size = 0;
    int64_t second = 0, second_bytes = 0, peak = 0;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    printf("ready\n");
    fflush(stdout);
    const int64_t delay = (int64_t)(delay_ms * 1e6);
    const int64_t deadline = now_ns() + (int64_t)(max_seconds * 1e9);
    unsigned char scratch[65536];

    while (running) {
        int64_t now = now_ns();
        if (now > deadline) break;
        /* Send whatever is due. */
        int64_t next = -1;
        for (int d = 0; d < 2; d++) {
            struct queue *qq = &q[d];
            while (qq->count > 0 && qq->slots[qq->head].due_ns <= now) {
                struct frame *f = &qq->slots[qq->head];
                if (write(fd[d], f->data, f->len) == (ssize_t)f->len) {
                    forwarded++;
                    int64_t s = now / 1000000000;
                    if (s != second) {
                        if (second_bytes > peak) peak = second_bytes;
                        second = s;
                        second_bytes = 0;
                    }
                    second_bytes += f->len;
                } else {
                    /* EAGAIN, or EIO while the device is down: the frame is lost. */
                    dropped_write++;
                }
                qq->head = (qq->head + 1) % qq->cap;
                qq->count--;
            }
            if (qq->count > 0 && (next < 0 || qq->slots[qq->head].due_ns < next)) next = qq->slots[qq->head].due_ns;
        }
        struct timespec timeout = {1, 0};
        if (next >= 0) {
            int64_t wait = next - now_ns();
            if (wait < 0) wait = 0;
            timeout.tv_sec = wait / 1000000000;
            timeout.tv_nsec = wait % 1000000000;
        }
        struct pollfd pfd[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};
        int n = ppoll(pfd, 2, &timeout, NULL);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("ppoll");
            break;
        }
        now = now_ns();
        for (int s = 0; s < 2; s++) {
            if (!(pfd[s].revents & POLLIN)) continue;
            struct queue *qq = &q[1 - s];
            for (int k = 0; k < READ_BURST; k++) {
                size_t tail = (qq->head + qq->count) % qq->cap;
                int full = qq->count >= qq->cap;
                unsigned char *buf = full ? scratch : qq->slots[tail].data;
                ssize_t len = read(fd[s], full ? scratch : buf, full ? sizeof scratch : SLOT);
                if (len <= 0) break; /* EAGAIN: nothing more now. */
                if (loss_from[s] > 0 && rand_unit() < loss_from[s]) {
                    dropped_loss++;
                    continue;
                }
                if (full) {
                    dropped_queue++;
                    continue;
                }
                if (len >= SLOT) {
                    /* A frame too large for a slot (the read was cut): the devices' MTU is larger than 1500. */
                    dropped_size++;
                    continue;
                }
                qq->slots[tail].len = (uint16_t)len;
                qq->slots[tail].due_ns = now + delay;
                qq->count++;
            }
        }
    }

    if (second_bytes > peak) peak = second_bytes;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr,
            "delayline: forwarded=%llu dropped_loss=%llu dropped_queue=%llu dropped_write=%llu dropped_size=%llu "
            "peak_1s_MB=%.1f cpu_user_s=%.1f cpu_sys_s=%.1f\n",
            forwarded, dropped_loss, dropped_queue, dropped_write, dropped_size, peak / 1e6,
            ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    close(fd[0]);
    close(fd[1]);
    return 0;
}
