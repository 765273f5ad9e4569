/* mpi_init.c - the start-up peer of `gaspi-bench init` (bench/init-scale.sh):
 * every process times MPI_Init and MPI_Finalize; rank 0 gathers the
 * MPI_Init times and prints one JSON line like gaspi-bench's (median and
 * slowest rank, microseconds). The gather happens between the two and is
 * not timed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    double t0 = now_us();
    MPI_Init(&argc, &argv);
    double init_us = now_us() - t0;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *all = rank == 0 ? malloc(sizeof(double) * size) : NULL;
    MPI_Gather(&init_us, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double t1 = now_us();
    MPI_Finalize();
    double fin_us = now_us() - t1;
    if (rank == 0) {
        qsort(all, size, sizeof(double), cmp);
        printf("{\"bench\":\"init\",\"transport\":\"mpi\",\"ranks\":%d,\"median_us\":%.1f,"
               "\"max_us\":%.1f,\"note\":\"MPI_Init per rank; rank 0's MPI_Finalize %.1f us\"}\n",
               size, all[size / 2], all[size - 1], fin_us);
        free(all);
    }
    return 0;
}
