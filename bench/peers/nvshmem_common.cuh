// nvshmem_common.cuh -- what the NVSHMEM reference programs share: start
// as one of two PEs (unique-id bootstrap, the id passed through a file),
// CUDA error checks, and the statistics of gaspi-bench's JSON records.
//
// Both programs are started twice, once per PE, by bench/peers/nvshmem-run.sh:
//   PROGRAM PE UID_FILE [options]
// PE 0 writes the unique id into UID_FILE, PE 1 waits for it; PE p uses
// GPU p. Output: PE 0 prints one JSON line per measurement, in the format
// of gaspi-bench --json (bench/src/report.rs), so that the comparison
// (bench/gpu/compare-nvshmem.py) reads both alike.
#ifndef NVSHMEM_COMMON_CUH
#define NVSHMEM_COMMON_CUH

#include <nvshmem.h>
#include <nvshmemx.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)

// Starts NVSHMEM as PE `pe` of 2 on GPU `pe`.
static void start_pe(int pe, const char* uid_file) {
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (pe == 0) {
        if (nvshmemx_get_uniqueid(&id) != 0) {
            fprintf(stderr, "nvshmemx_get_uniqueid failed\n");
            exit(2);
        }
        std::string tmp = std::string(uid_file) + ".tmp";
        FILE* f = fopen(tmp.c_str(), "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", tmp.c_str());
            exit(2);
        }
        if (rename(tmp.c_str(), uid_file) != 0) {
            perror("rename");
            exit(2);
        }
    } else {
        for (int tries = 0;; ++tries) {
            FILE* f = fopen(uid_file, "rb");
            if (f) {
                size_t n = fread(&id, sizeof id, 1, f);
                fclose(f);
                if (n == 1) break;
            }
            if (tries > 6000) {
                fprintf(stderr, "no unique id in %s after 60 s\n", uid_file);
                exit(2);
            }
            usleep(10000);
        }
    }
    CUDA_CHECK(cudaSetDevice(pe));
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    if (nvshmemx_set_attr_uniqueid_args(pe, 2, &id, &attr) != 0) {
        fprintf(stderr, "nvshmemx_set_attr_uniqueid_args failed\n");
        exit(2);
    }
    if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
        fprintf(stderr, "nvshmemx_init_attr failed\n");
        exit(2);
    }
    if (nvshmem_my_pe() != pe || nvshmem_n_pes() != 2) {
        fprintf(stderr, "PE %d of %d, expected %d of 2\n", nvshmem_my_pe(), nvshmem_n_pes(), pe);
        exit(2);
    }
}

// p-quantile of sorted samples, linear interpolation (report.rs's Samples).
static double quantile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0.0;
    double pos = p * (double)(sorted.size() - 1);
    size_t lo = (size_t)pos;
    size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

struct Stats {
    double median, p10, p90;
    size_t n;
};

static Stats stats(std::vector<double> s) {
    std::sort(s.begin(), s.end());
    return Stats{quantile(s, 0.5), quantile(s, 0.1), quantile(s, 0.9), s.size()};
}

static const char* nvshmem_version_string() {
    static char v[64];
    int major = 0, minor = 0;
    nvshmem_info_get_version(&major, &minor);
    // nvshmem_info_get_version gives the OpenSHMEM version the library
    // implements; the library's own is that of the headers built against.
    snprintf(v, sizeof v, "%d.%d.%d (OpenSHMEM %d.%d)", NVSHMEM_VENDOR_MAJOR_VERSION,
             NVSHMEM_VENDOR_MINOR_VERSION, NVSHMEM_VENDOR_PATCH_VERSION, major, minor);
    return v;
}

#endif
