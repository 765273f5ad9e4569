/*
 * mpi_sendrecv_pingpong.c - Open MPI's point-to-point ping-pong
 * (MPI_Send / MPI_Recv), measured the way gaspi-bench measures its
 * write_notify ping-pong, for bench/tcp-netns.sh: with `--mca btl self,tcp`
 * between two network-namespace hosts it is the TCP peer our TCP transport
 * is compared with (issue 16).
 *
 * Usage (2 ranks):
 *   mpirun -np 2 mpi_sendrecv_pingpong [--sizes 8,4096,...] [--quick]
 *
 * Output (rank 0, stdout): one JSON object per size, the format of
 * gaspi-bench's --json output (bench/src/report.rs):
 *   {"bench":"pingpong","transport":"mpi-p2p","ranks":2,"size":8,
 *    "iters":N,"median_us":..,"p10_us":..,"p90_us":..}
 * median/p10/p90 are over SAMPLES batches; each batch's figure is its time
 * divided by twice its round trips (half a round trip), as gaspi-bench does.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SAMPLES 128
#define MAX_SIZES 32

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Round trips per batch: gaspi-bench's iters_for (256 MiB / size, within
 * [SAMPLES, 16384]; a sixteenth with --quick) over SAMPLES batches, so both
 * do the same work per size. */
static long batch_for(long size, int quick) {
    long total = (256L << 20) / size;
    if (total < SAMPLES) total = SAMPLES;
    if (total > 16384) total = 16384;
    if (quick) total = total / 16 > SAMPLES ? total / 16 : SAMPLES;
    long b = total / SAMPLES;
    return b > 0 ? b : 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi_sendrecv_pingpong: run with 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long sizes[MAX_SIZES] = {8, 4096, 65536, 1048576};
    int nsizes = 4, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = 0;
            for (char *tok = strtok(argv[++i], ","); tok && nsizes < MAX_SIZES; tok = strtok(NULL, ","))
                sizes[nsizes++] = atol(tok);
        }
    }
    long max = 1;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > max) max = sizes[i];
    char *buf = malloc(max);
    memset(buf, rank + 1, max);
    int peer = 1 - rank;
    for (int k = 0; k < nsizes; k++) {
        long n = sizes[k], batch = batch_for(n, quick);
        double samples[SAMPLES];
        MPI_Barrier(MPI_COMM_WORLD);
        /* One untimed batch first (warm caches, connections, buffers). */
        for (int s = 0; s <= SAMPLES; s++) {
            double t0 = now_us();
            for (long i = 0; i < batch; i++) {
                if (rank == 0) {
                    MPI_Send(buf, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)n, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
                }
            }
            if (s > 0) samples[s - 1] = (now_us() - t0) / (2.0 * batch);
        }
        if (rank == 0) {
            qsort(samples, SAMPLES, sizeof samples[0], cmp_double);
            printf("{\"bench\":\"pingpong\",\"transport\":\"mpi-p2p\",\"ranks\":2,\"size\":%ld,"
                   "\"iters\":%ld,\"median_us\":%.4f,\"p10_us\":%.4f,\"p90_us\":%.4f}\n",
                   n, batch * SAMPLES, samples[SAMPLES / 2], samples[SAMPLES / 10],
                   samples[SAMPLES - 1 - SAMPLES / 10]);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
