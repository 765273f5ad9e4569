/*
 * mpi_put_pingpong.c - reference figures for gaspi-bench from MPI one-sided
 * communication (passive target), measured the way gaspi-bench measures our
 * runtime, so that bench/compare-mpi.sh can put both side by side.
 *
 * Usage (2 ranks):
 *   mpirun -np 2 mpi_put_pingpong pingpong [--json] [--quick]
 *   mpirun -np 2 mpi_put_pingpong write-bw [--json] [--quick]
 *
 * Output (rank 0, stdout): one JSON object per line, the format of
 * gaspi-bench's --json output (bench/src/report.rs):
 *   {"bench":"pingpong","transport":"mpi-osc","ranks":2,"size":8,"iters":N,
 *    "median_us":..,"p10_us":..,"p90_us":..}
 *   {"bench":"write-bw","transport":"mpi-osc","ranks":2,"size":..,"iters":..,
 *    "median_us":..,"p10_us":..,"p90_us":..,"gbps":..}
 * JSON is the only output format; --json is accepted for symmetry with
 * gaspi-bench. --quick cuts the iteration counts (smoke test).
 *
 * Window layout on every rank (MPI_Win_allocate, disp_unit 1):
 *   [0, 8)          flag word (uint64), written only by the peer
 *   [64, 64+MAX)    data area, written only by the peer
 * Both ranks hold MPI_Win_lock_all for the whole run (passive target).
 *
 * pingpong: for a message of `size` bytes rank 0 does
 *     MPI_Put(data -> rank 1); MPI_Win_flush(1);
 *     MPI_Put(flag = c -> rank 1); MPI_Win_flush(1);
 * then polls its own flag word (atomic acquire load + MPI_Win_sync) until
 * the peer has written c; rank 1 polls for c and replies the same way. The
 * counter c increases by one per round trip over the whole run, so flags
 * never need resetting. Round trips are timed in batches (clock_gettime
 * CLOCK_MONOTONIC around the batch); a sample is batch time / (2 * batch),
 * i.e. the mean half round trip of that batch. Reported: median, p10, p90
 * of the samples (linear interpolation); "iters" = timed round trips.
 * After the timed loop each rank checks that the last data it received
 * carries the last counter (outside the timing), which would catch a flag
 * overtaking its data.
 *
 * write-bw: rank 0 issues a window of 16 MPI_Put of `size` bytes to the same
 * offset of rank 1's data area and then one MPI_Win_flush(1); one sample is
 * the time of that window divided by 16, i.e. time per put. Reported:
 * median/p10/p90 of the per-put time (us), gbps = size / median (GB = 1e9
 * bytes), "iters" = timed puts. Rank 1 is passive (waits in a barrier).
 *
 * Written for this project; build: mpicc -O2 -o mpi_put_pingpong mpi_put_pingpong.c
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FLAG_OFF 0
#define DATA_OFF 64
#define MAX_SIZE (4u << 20)
#define BW_WINDOW 16
#define PP_SAMPLES 128

static const size_t pp_sizes[] = {8, 64, 512, 4096, 32768, 262144, 1048576, 4194304};
static const size_t bw_sizes[] = {4096, 32768, 262144, 1048576, 4194304};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p in [0,100] of sorted v[0..n), linear interpolation (as report.rs). */
static double percentile(const double *v, size_t n, double p)
{
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)rank;
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (rank - (double)lo);
}

static void clamp_u64(uint64_t *x, uint64_t lo, uint64_t hi)
{
    if (*x < lo)
        *x = lo;
    if (*x > hi)
        *x = hi;
}

struct ctx {
    int rank, peer;
    MPI_Win win;
    unsigned char *base; /* own window memory */
    unsigned char *src;  /* origin buffer for data puts */
    uint64_t counter;    /* last round-trip counter used */
    int quick;
};

static void put_and_flush(struct ctx *c, const void *buf, size_t len, MPI_Aint disp)
{
    MPI_Put(buf, (int)len, MPI_BYTE, c->peer, disp, (int)len, MPI_BYTE, c->win);
    MPI_Win_flush(c->peer, c->win);
}

/* Send `size` bytes then the flag `value` to the peer. */
static void send_msg(struct ctx *c, size_t size, uint64_t value)
{
    static uint64_t flag_out; /* origin buffer, stable until the flush */
    put_and_flush(c, c->src, size, DATA_OFF);
    flag_out = value;
    put_and_flush(c, &flag_out, sizeof flag_out, FLAG_OFF);
}

/* Spin until the peer has written `value` into our flag word. */
static void wait_flag(struct ctx *c, uint64_t value)
{
    uint64_t *flag = (uint64_t *)(c->base + FLAG_OFF);
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value)
        MPI_Win_sync(c->win);
}

/* One round trip, initiator (rank 0) or responder (rank 1) side. */
static void round_trip(struct ctx *c, size_t size)
{
    uint64_t v = ++c->counter;
    /* Stamp the first and last byte so the receiver can check the data. */
    c->src[0] = c->src[size - 1] = (unsigned char)v;
    if (c->rank == 0) {
        send_msg(c, size, v);
        wait_flag(c, v);
    } else {
        wait_flag(c, v);
        send_msg(c, size, v);
    }
}

static int check_last(struct ctx *c, size_t size, const char *what)
{
    const unsigned char *data = c->base + DATA_OFF;
    unsigned char want = (unsigned char)c->counter;
    if (data[0] != want || data[size - 1] != want) {
        fprintf(stderr, "rank %d: %s size %zu: data does not match flag %llu\n", c->rank, what,
                size, (unsigned long long)c->counter);
        return 1;
    }
    return 0;
}

static void print_record(const char *bench, size_t size, uint64_t iters, double *samples,
                         size_t n, int with_gbps)
{
    qsort(samples, n, sizeof *samples, cmp_double);
    double med = percentile(samples, n, 50.0);
    printf("{\"bench\":\"%s\",\"transport\":\"mpi-osc\",\"ranks\":2,\"size\":%zu,\"iters\":%llu,"
           "\"median_us\":%.6g,\"p10_us\":%.6g,\"p90_us\":%.6g",
           bench, size, (unsigned long long)iters, med, percentile(samples, n, 10.0),
           percentile(samples, n, 90.0));
    if (with_gbps)
        printf(",\"gbps\":%.6g", (double)size / (med * 1e3));
    printf("}\n");
    fflush(stdout);
}

static int run_pingpong(struct ctx *c)
{
    int errors = 0;
    double samples[PP_SAMPLES];
    for (size_t s = 0; s < NELEM(pp_sizes); s++) {
        size_t size = pp_sizes[s];
        /* ~256 MiB moved each way per size, between 128 and 16384 round trips. */
        uint64_t iters = (256u << 20) / size;
        clamp_u64(&iters, PP_SAMPLES, c->quick ? 1024 : 16384);
        uint64_t batch = iters / PP_SAMPLES;
        iters = batch * PP_SAMPLES;
        uint64_t warmup = iters / 10 < 10 ? 10 : iters / 10;

        MPI_Barrier(MPI_COMM_WORLD);
        for (uint64_t i = 0; i < warmup; i++)
            round_trip(c, size);
        for (size_t k = 0; k < PP_SAMPLES; k++) {
            double t0 = now_us();
            for (uint64_t i = 0; i < batch; i++)
                round_trip(c, size);
            samples[k] = (now_us() - t0) / (2.0 * (double)batch);
        }
        errors += check_last(c, size, "pingpong");
        if (c->rank == 0)
            print_record("pingpong", size, iters, samples, PP_SAMPLES, 0);
    }
    return errors;
}

static int run_write_bw(struct ctx *c)
{
    for (size_t s = 0; s < NELEM(bw_sizes); s++) {
        size_t size = bw_sizes[s];
        /* ~1 GiB per size, between 20 and 1000 windows of 16 puts. */
        uint64_t reps = (1u << 30) / (BW_WINDOW * (uint64_t)size);
        clamp_u64(&reps, 20, c->quick ? 100 : 1000);
        uint64_t warmup = reps / 10 < 2 ? 2 : reps / 10;

        MPI_Barrier(MPI_COMM_WORLD);
        if (c->rank == 0) {
            double *samples = malloc(reps * sizeof *samples);
            if (!samples) {
                fprintf(stderr, "out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            for (uint64_t r = 0; r < warmup + reps; r++) {
                double t0 = now_us();
                for (int w = 0; w < BW_WINDOW; w++)
                    MPI_Put(c->src, (int)size, MPI_BYTE, c->peer, DATA_OFF, (int)size, MPI_BYTE,
                            c->win);
                MPI_Win_flush(c->peer, c->win);
                double t = (now_us() - t0) / BW_WINDOW;
                if (r >= warmup)
                    samples[r - warmup] = t;
            }
            print_record("write-bw", size, reps * BW_WINDOW, samples, reps, 1);
            free(samples);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return 0;
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: mpirun -np 2 %s pingpong|write-bw [--json] [--quick]\n", argv0);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct ctx c = {0};
    int nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    const char *mode = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            continue;
        else if (strcmp(argv[i], "--quick") == 0)
            c.quick = 1;
        else if (!mode && argv[i][0] != '-')
            mode = argv[i];
        else
            mode = "";
    }
    int pingpong = mode && strcmp(mode, "pingpong") == 0;
    int writebw = mode && strcmp(mode, "write-bw") == 0;
    if ((!pingpong && !writebw) || nranks != 2) {
        if (c.rank == 0) {
            usage(argv[0]);
            if (nranks != 2)
                fprintf(stderr, "needs exactly 2 ranks, got %d\n", nranks);
        }
        MPI_Finalize();
        return 2;
    }
    c.peer = 1 - c.rank;

    MPI_Info info;
    MPI_Info_create(&info);
    /* Only MPI_Put is used: lets the implementation skip accumulate ordering. */
    MPI_Info_set(info, "accumulate_ordering", "none");
    MPI_Info_set(info, "same_disp_unit", "true");
    MPI_Win_allocate(DATA_OFF + MAX_SIZE, 1, info, MPI_COMM_WORLD, &c.base, &c.win);
    MPI_Info_free(&info);
    memset(c.base, 0, DATA_OFF + MAX_SIZE);
    c.src = malloc(MAX_SIZE);
    if (!c.src) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(c.src, 0x5a, MAX_SIZE);

    MPI_Win_lock_all(MPI_MODE_NOCHECK, c.win);
    MPI_Win_sync(c.win);
    MPI_Barrier(MPI_COMM_WORLD);

    int errors = pingpong ? run_pingpong(&c) : run_write_bw(&c);

    MPI_Win_unlock_all(c.win);
    int all_errors = 0;
    MPI_Allreduce(&errors, &all_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Win_free(&c.win);
    free(c.src);
    MPI_Finalize();
    return all_errors ? 1 : 0;
}
