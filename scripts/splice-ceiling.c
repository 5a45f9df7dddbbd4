// The ceiling of a relay between two AF_UNIX sockets (issue 25, item 6).
//
// Same bytes, same run, both directions at once:
//   pair   writer -> socketpair -> reader (the floor: two copies a byte)
//   copy   writer -> socketpair -> relay read()/write() -> socketpair -> reader
//   splice writer -> socketpair -> relay recv(12-byte header), write(header),
//          splice(socket -> pipe), splice(pipe -> socket) -> reader
// Frames as the daemon's: a 12-byte header ("HU", kind, flags, channel,
// length, big-endian) then a 64 KiB payload whose first 8 bytes count the
// frames (-f: another payload size). Readers check every header and count;
// -v also compares every byte.
// The relays are non-blocking and poll()-driven like an event loop: one
// thread for both directions (-t 2: a thread each).
//
// Build and run: scripts/splice-ceiling.sh [-g GiB each way] [-r rounds] ...
// Results and what they decided: BENCHMARKS.md, "Splicing DATA past user space".
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { HDR = 12, BATCH = 16, RELAY_BUF = 1 << 20 };
static int PAYLOAD = 64 << 10, FRAME = HDR + (64 << 10);  // -f KiB changes them

static long long frames_each_way;
static int verify_all;
static int pipe_kib = 0;  // 0: the kernel's default (64 KiB)
static int relay_threads = 1;
static int modes = 7;  // bit 0 pair, 1 copy relay, 2 splice relay (the ratios need the pair)

static void die(const char *what) { perror(what); exit(1); }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu_seconds(int who) {
    struct rusage u;
    getrusage(who, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static uint8_t pattern(long long frame, int i) { return (uint8_t)(frame * 31 + i); }

static void put_header(uint8_t *h, uint32_t channel, uint32_t length) {
    h[0] = 'H'; h[1] = 'U'; h[2] = 0x05; h[3] = 0;
    h[4] = channel >> 24; h[5] = channel >> 16; h[6] = channel >> 8; h[7] = channel;
    h[8] = length >> 24; h[9] = length >> 16; h[10] = length >> 8; h[11] = length;
}

static uint32_t header_length(const uint8_t *h) {
    return (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
}

// ---- endpoints ----

static void *writer(void *arg) {
    int fd = (int)(intptr_t)arg;
    uint8_t *buf = malloc((size_t)FRAME * BATCH);
    for (int k = 0; k < BATCH; k++) {
        put_header(buf + (size_t)k * FRAME, 7, PAYLOAD);
        for (int i = 0; i < PAYLOAD; i++) buf[(size_t)k * FRAME + HDR + i] = pattern(k, i);
    }
    for (long long f = 0; f < frames_each_way; f += BATCH) {
        int n = frames_each_way - f < BATCH ? (int)(frames_each_way - f) : BATCH;
        for (int k = 0; k < n; k++) {
            long long seq = f + k;
            uint8_t *p = buf + (size_t)k * FRAME + HDR;
            memcpy(p, &seq, 8);
            if (verify_all)
                for (int i = 8; i < PAYLOAD; i++) p[i] = pattern(seq, i);
        }
        size_t len = (size_t)n * FRAME, done = 0;
        while (done < len) {
            ssize_t w = write(fd, buf + done, len - done);
            if (w < 0) { if (errno == EINTR) continue; die("writer write"); }
            done += w;
        }
    }
    free(buf);
    return NULL;
}

static void *reader(void *arg) {
    int fd = (int)(intptr_t)arg;
    uint8_t *buf = malloc(RELAY_BUF);
    long long total = frames_each_way * FRAME, pos = 0;
    uint8_t head[HDR + 8];
    while (pos < total) {
        ssize_t r = read(fd, buf, RELAY_BUF);
        if (r < 0) { if (errno == EINTR) continue; die("reader read"); }
        if (r == 0) { fprintf(stderr, "reader: early end at %lld\n", pos); exit(1); }
        for (ssize_t i = 0; i < r; i++, pos++) {
            long long frame = pos / FRAME;
            int off = (int)(pos % FRAME);
            if (off < HDR + 8) {
                head[off] = buf[i];
                if (off == HDR + 7) {
                    long long seq;
                    memcpy(&seq, head + HDR, 8);
                    if (head[0] != 'H' || head[1] != 'U' || header_length(head) != (uint32_t)PAYLOAD || seq != frame) {
                        fprintf(stderr, "reader: bad frame %lld (seq %lld)\n", frame, seq);
                        exit(1);
                    }
                }
            } else if (verify_all) {
                if (buf[i] != pattern(frame, off - HDR)) { fprintf(stderr, "reader: byte %lld differs\n", pos); exit(1); }
            } else {
                // Skip to the next frame's start inside this read.
                long long skip = FRAME - off - 1;
                if (skip > r - i - 1) skip = r - i - 1;
                i += skip; pos += skip;
            }
        }
    }
    free(buf);
    return NULL;
}

// ---- relays ----

struct direction {
    int src, dst;
    // copy relay
    uint8_t *buf;
    size_t have, sent;
    long long frame_left;  // bytes of the current frame still to pass (header checks)
    uint8_t hdr[HDR];
    int hdr_got;
    // splice relay
    int pipe_r, pipe_w;
    size_t pipe_cap;
    int state;  // 0 reading header, 1 writing header, 2 payload
    int hdr_sent;
    size_t in_left, in_pipe;
    long long moved, total;
    short want;  // POLLIN on src or POLLOUT on dst
};

// Walks the frame headers in what a read brought: the relay knows the framing.
static void copy_parse(struct direction *d, const uint8_t *p, size_t n) {
    while (n > 0) {
        if (d->frame_left > 0) {
            size_t take = d->frame_left < (long long)n ? (size_t)d->frame_left : n;
            d->frame_left -= take; p += take; n -= take;
            continue;
        }
        size_t need = (size_t)(HDR - d->hdr_got), take = need < n ? need : n;
        memcpy(d->hdr + d->hdr_got, p, take);
        d->hdr_got += take; p += take; n -= take;
        if (d->hdr_got == HDR) {
            if (d->hdr[0] != 'H' || d->hdr[1] != 'U') { fprintf(stderr, "copy relay: bad header\n"); exit(1); }
            d->frame_left = header_length(d->hdr);
            d->hdr_got = 0;
        }
    }
}

// One step; returns 1 if it made progress, sets d->want when it must wait.
static int copy_step(struct direction *d) {
    if (d->sent < d->have) {
        ssize_t w = write(d->dst, d->buf + d->sent, d->have - d->sent);
        if (w < 0) {
            if (errno == EAGAIN) { d->want = POLLOUT; return 0; }
            die("copy relay write");
        }
        d->sent += w; d->moved += w;
        return 1;
    }
    d->have = d->sent = 0;
    ssize_t r = read(d->src, d->buf, RELAY_BUF);
    if (r < 0) {
        if (errno == EAGAIN) { d->want = POLLIN; return 0; }
        die("copy relay read");
    }
    if (r == 0) { fprintf(stderr, "copy relay: early end\n"); exit(1); }
    copy_parse(d, d->buf, r);
    d->have = r;
    return 1;
}

static int splice_step(struct direction *d) {
    if (d->state == 0) {
        ssize_t r = recv(d->src, d->hdr + d->hdr_got, HDR - d->hdr_got, 0);
        if (r < 0) {
            if (errno == EAGAIN) { d->want = POLLIN; return 0; }
            die("splice relay recv");
        }
        if (r == 0) { fprintf(stderr, "splice relay: early end\n"); exit(1); }
        d->hdr_got += r;
        if (d->hdr_got == HDR) {
            if (d->hdr[0] != 'H' || d->hdr[1] != 'U') { fprintf(stderr, "splice relay: bad header\n"); exit(1); }
            d->in_left = header_length(d->hdr);
            d->hdr_got = 0; d->hdr_sent = 0; d->state = 1;
        }
        return 1;
    }
    if (d->state == 1) {
        ssize_t w = write(d->dst, d->hdr + d->hdr_sent, HDR - d->hdr_sent);
        if (w < 0) {
            if (errno == EAGAIN) { d->want = POLLOUT; return 0; }
            die("splice relay header write");
        }
        d->hdr_sent += w; d->moved += w;
        if (d->hdr_sent == HDR) d->state = 2;
        return 1;
    }
    int progress = 0;
    if (d->in_left > 0 && d->in_pipe < d->pipe_cap) {
        size_t want = d->pipe_cap - d->in_pipe < d->in_left ? d->pipe_cap - d->in_pipe : d->in_left;
        ssize_t r = splice(d->src, NULL, d->pipe_w, NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (r < 0) {
            if (errno != EAGAIN) die("splice socket -> pipe");
            if (d->in_pipe == 0) { d->want = POLLIN; return 0; }
        } else if (r == 0) {
            fprintf(stderr, "splice relay: early end\n"); exit(1);
        } else {
            d->in_left -= r; d->in_pipe += r; progress = 1;
        }
    }
    if (d->in_pipe > 0) {
        ssize_t w = splice(d->pipe_r, NULL, d->dst, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (w < 0) {
            if (errno != EAGAIN) die("splice pipe -> socket");
            if (!progress) { d->want = POLLOUT; return 0; }
        } else {
            d->in_pipe -= w; d->moved += w; progress = 1;
        }
    }
    if (d->in_left == 0 && d->in_pipe == 0) d->state = 0;
    return progress;
}

struct relay_job {
    struct direction *dirs;
    int count;
    int use_splice;
    double cpu;
};

static void *relay(void *arg) {
    struct relay_job *job = arg;
    struct pollfd pfd[2];
    for (;;) {
        int open = 0, waiting = 0;
        for (int k = 0; k < job->count; k++) {
            struct direction *d = &job->dirs[k];
            if (d->moved >= d->total) continue;
            open++;
            d->want = 0;
            // A bounded burst per direction, as an event loop serves each channel in turn.
            for (int n = 0; n < 64 && d->moved < d->total; n++)
                if (!(job->use_splice ? splice_step(d) : copy_step(d))) break;
            if (d->want) {
                pfd[waiting].fd = d->want == POLLIN ? d->src : d->dst;
                pfd[waiting].events = d->want;
                waiting++;
            }
        }
        if (open == 0) break;
        if (waiting == open && poll(pfd, waiting, -1) < 0 && errno != EINTR) die("poll");
    }
    job->cpu = cpu_seconds(RUSAGE_THREAD);
    return NULL;
}

static void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static void init_direction(struct direction *d, int src, int dst, int use_splice) {
    memset(d, 0, sizeof *d);
    d->src = src; d->dst = dst;
    d->total = frames_each_way * FRAME;
    if (use_splice) {
        int p[2];
        if (pipe2(p, O_NONBLOCK) != 0) die("pipe2");
        if (pipe_kib > 0 && fcntl(p[1], F_SETPIPE_SZ, pipe_kib << 10) < 0) die("F_SETPIPE_SZ");
        d->pipe_r = p[0]; d->pipe_w = p[1];
        d->pipe_cap = fcntl(p[1], F_GETPIPE_SZ);
    } else {
        d->buf = malloc(RELAY_BUF);
    }
}

// mode 0: pair, 1: copy relay, 2: splice relay. Returns seconds; *cpu all threads, *relay_cpu the relay's.
static double run(int mode, double *cpu, double *relay_cpu) {
    int phone[2], car[2];  // phone[0]: the phone's end; car[0]: the accessory's end
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, phone) != 0) die("socketpair");
    if (mode == 0) { car[0] = phone[1]; car[1] = -1; }
    else if (socketpair(AF_UNIX, SOCK_STREAM, 0, car) != 0) die("socketpair");
    struct direction dirs[2];
    struct relay_job jobs[2];
    int njobs = 0;
    if (mode > 0) {
        set_nonblocking(phone[1]);
        set_nonblocking(car[1]);
        init_direction(&dirs[0], phone[1], car[1], mode == 2);
        init_direction(&dirs[1], car[1], phone[1], mode == 2);
        if (relay_threads == 2) {
            jobs[0] = (struct relay_job){ &dirs[0], 1, mode == 2, 0 };
            jobs[1] = (struct relay_job){ &dirs[1], 1, mode == 2, 0 };
            njobs = 2;
        } else {
            jobs[0] = (struct relay_job){ dirs, 2, mode == 2, 0 };
            njobs = 1;
        }
    }
    double cpu0 = cpu_seconds(RUSAGE_SELF), t0 = now();
    pthread_t th[6];
    int n = 0;
    pthread_create(&th[n++], NULL, writer, (void *)(intptr_t)phone[0]);
    pthread_create(&th[n++], NULL, reader, (void *)(intptr_t)car[0]);
    pthread_create(&th[n++], NULL, writer, (void *)(intptr_t)car[0]);
    pthread_create(&th[n++], NULL, reader, (void *)(intptr_t)phone[0]);
    for (int k = 0; k < njobs; k++) pthread_create(&th[n++], NULL, relay, &jobs[k]);
    for (int k = 0; k < n; k++) pthread_join(th[k], NULL);
    double seconds = now() - t0;
    *cpu = cpu_seconds(RUSAGE_SELF) - cpu0;
    *relay_cpu = 0;
    for (int k = 0; k < njobs; k++) *relay_cpu += jobs[k].cpu;
    close(phone[0]); close(phone[1]);
    if (mode > 0) {
        close(car[0]); close(car[1]);
        for (int k = 0; k < 2; k++) {
            free(dirs[k].buf);
            if (mode == 2) { close(dirs[k].pipe_r); close(dirs[k].pipe_w); }
        }
    }
    return seconds;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double gib = 1;
    int rounds = 3, opt;
    while ((opt = getopt(argc, argv, "g:r:p:t:m:f:v")) != -1) {
        switch (opt) {
        case 'g': gib = atof(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'p': pipe_kib = atoi(optarg); break;
        case 't': relay_threads = atoi(optarg); break;
        case 'm': modes = atoi(optarg) | 1; break;
        case 'f': PAYLOAD = atoi(optarg) << 10; FRAME = HDR + PAYLOAD; break;
        case 'v': verify_all = 1; break;
        default:
            fprintf(stderr, "usage: %s [-g GiB each way] [-r rounds] [-p pipe KiB] [-t relay threads 1|2] [-m modes: 1 pair, 3 +copy, 5 +splice, 7 all] [-f payload KiB] [-v]\n", argv[0]);
            return 2;
        }
    }
    frames_each_way = (long long)(gib * (1LL << 30) / FRAME);
    double bytes = 2.0 * frames_each_way * FRAME;  // both directions
    const char *names[3] = { "pair", "copy relay", "splice relay" };
    double rate[3][64], cpu_gib[3][64], relay_gib[3][64], ratio[3][64];
    if (rounds > 64) rounds = 64;
    printf("%lld frames of 12 + %d bytes each way (%.2f GiB both ways), relay threads %d, pipe %d KiB, verify %s\n",
           frames_each_way, PAYLOAD, bytes / (1 << 30), relay_threads, pipe_kib ? pipe_kib : 64, verify_all ? "every byte" : "headers");
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < 3; m++) {
            rate[m][r] = cpu_gib[m][r] = relay_gib[m][r] = 0;
            if (!(modes & 1 << m)) continue;
            double cpu, rcpu, s = run(m, &cpu, &rcpu);
            rate[m][r] = bytes / s / (1 << 20);
            cpu_gib[m][r] = cpu / (bytes / (1 << 30));
            relay_gib[m][r] = rcpu / (bytes / (1 << 30));
            printf("round %d %-12s %8.1f MiB/s  %.3f CPU-s/GiB (relay thread %.3f)\n", r + 1, names[m], rate[m][r], cpu_gib[m][r], relay_gib[m][r]);
            fflush(stdout);
        }
        for (int m = 0; m < 3; m++) ratio[m][r] = rate[m][r] / rate[0][r];
    }
    printf("median over %d rounds:\n", rounds);
    for (int m = 0; m < 3; m++) {
        qsort(rate[m], rounds, sizeof(double), cmp_double);
        qsort(cpu_gib[m], rounds, sizeof(double), cmp_double);
        qsort(relay_gib[m], rounds, sizeof(double), cmp_double);
        qsort(ratio[m], rounds, sizeof(double), cmp_double);
        printf("  %-12s %8.1f MiB/s  ratio to pair (same round) %5.1f%% [%.1f-%.1f]  %.3f CPU-s/GiB (relay thread %.3f)\n",
               names[m], rate[m][rounds / 2], 100 * ratio[m][rounds / 2], 100 * ratio[m][0], 100 * ratio[m][rounds - 1],
               cpu_gib[m][rounds / 2], relay_gib[m][rounds / 2]);
    }
    return 0;
}
