/* bench_decode — the limits decoding runs against (shared/BENCH.md), for
 * bench/decode_table.sh to quote beside hm-generate --bench in the same run:
 *   read_gb_per_s   a plain OpenMP sum over a buffer far larger than the
 *                   caches (best of 5 passes): the memory read bandwidth;
 *   sgemv_gb_per_s  y = W x for one fp32 W of about the Pythia-70m decode
 *                   weights (rows × cols floats; cblas_sgemv, or the fast
 *                   backend's matmul at one row without OpenBLAS), as the
 *                   weight bytes it reads per second: what a batch-1 step
 *                   can reach;
 *   sgemm_gflops    the 2048³ sgemm of bench_common.
 * One JSON line on stdout. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "bench_common.h"
#include "threads.h"

#ifdef HM_HAVE_BLAS
#include <cblas.h>
#endif

static const char usage[] =
    "usage: bench_decode [--threads N] [--mib M] [--rows R --cols C]\n"
    "  --threads N   threads (default 2)\n"
    "  --mib M       MiB of the bandwidth buffer (default 1024)\n"
    "  --rows R, --cols C  the sgemv matrix (default 87168 x 512: 178.5 MB, the\n"
    "                Pythia-70m matrices a decoding step reads)\n";

static long parse(const char *s, const char *opt)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1) {
        fprintf(stderr, "bench_decode: error: %s '%s' is not a positive integer\n", opt, s);
        exit(2);
    }
    return v;
}

static double read_bandwidth(size_t n)
{
    float *x = malloc(sizeof(float) * n);
    if (!x)
        return -1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(i & 7);
    double best = 1e30, sink = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = hm_bench_now(), s = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : s)
        for (size_t i = 0; i < n; i++)
            s += x[i];
        double dt = hm_bench_now() - t0;
        sink += s;
        best = dt < best ? dt : best;
    }
    free(x);
    return sink < 0 ? -1 : (double)(sizeof(float) * n) / best * 1e-9;
}

static double sgemv_bandwidth(long rows, long cols)
{
    float *w = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
    float *x = malloc(sizeof(float) * (size_t)cols), *y = malloc(sizeof(float) * (size_t)rows);
    if (!w || !x || !y) {
        free(w), free(x), free(y);
        return -1;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < rows * cols; i++)
        w[i] = (float)((i * 7 % 13) - 6) * 0.01f;
    for (long i = 0; i < cols; i++)
        x[i] = 1.0f / (float)(i + 1);
    double best = 1e30;
    for (int r = 0; r <= 5; r++) { /* r = 0 is the warm-up */
        double t0 = hm_bench_now();
#ifdef HM_HAVE_BLAS
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)rows, (int)cols, 1.0f, w, (int)cols, x, 1,
                    0.0f, y, 1);
#else
        hm_backend_matmul_forward(hm_backend_get("fast"), y, x, w, NULL, 1, cols, rows);
#endif
        double dt = hm_bench_now() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    free(w), free(x), free(y);
    return (double)(sizeof(float) * (size_t)rows * (size_t)cols) / best * 1e-9;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"threads", required_argument, NULL, 't'}, {"mib", required_argument, NULL, 'm'},
        {"rows", required_argument, NULL, 'r'},    {"cols", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    long threads = 2, mib = 1024, rows = 87168, cols = 512;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = parse(optarg, "--threads"); break;
        case 'm': mib = parse(optarg, "--mib"); break;
        case 'r': rows = parse(optarg, "--rows"); break;
        case 'c': cols = parse(optarg, "--cols"); break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    hm_threads_set((int)threads);
    const double bw = read_bandwidth((size_t)mib << 18);
    const double gv = sgemv_bandwidth(rows, cols);
    const double gf = hm_bench_sgemm_gflops((int)threads);
    printf("{\"threads\": %ld, \"read_gb_per_s\": %.4g, \"sgemv_gb_per_s\": %.4g, "
           "\"sgemv_bytes\": %ld, \"sgemm_gflops\": %.4g}\n",
           threads, bw, gv, 4 * rows * cols, gf);
    return bw > 0 && gv > 0 && gf > 0 ? 0 : 1;
}
