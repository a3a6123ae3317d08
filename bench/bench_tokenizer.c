/* bench_tokenizer.c — single-thread encode MB/s of hm's tokenizer against
 * HuggingFace `tokenizers` (node, bench/tokenizer_baseline.js), alternating
 * A B A B (shared/BENCH.md): medians, min–max and the ratio.
 *
 *   build/bench/bench_tokenizer [--tokenizer FILE] [--rounds N] [TEXT_FILE...]
 * Defaults: ../shared/data/gpt-neox-20b_tokenizer.json, the OpenWebText sample
 * and tiny Shakespeare, 3 rounds. Without bench/node_modules/tokenizers the
 * baseline is skipped with a message. Run from the repository root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(fp);
    if (b)
        b[n] = 0;
    *len = (size_t)n;
    return b;
}

/* One HF run of reps encodes; returns the median MB/s or -1. */
static double run_hf(const char *tok_path, const char *text_path, int reps, int para,
                     int64_t *tokens)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "node bench/tokenizer_baseline.js '%s' '%s' %d %s", tok_path,
             text_path, reps, para ? "para" : "whole");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[4096] = "";
    if (!fgets(line, sizeof line, p))
        line[0] = 0;
    pclose(p);
    const char *a = strstr(line, "[");
    const char *t = strstr(line, "\"tokens\":");
    if (!a || !t)
        return -1;
    double v[64];
    int n = 0;
    for (const char *s = a + 1; n < 64 && *s && *s != ']';) {
        char *end;
        v[n] = strtod(s, &end);
        if (end == s)
            break;
        n++;
        s = end + (*end == ',');
    }
    *tokens = strtoll(t + 9, NULL, 10);
    return n ? median(v, n) : -1;
}

/* Encodes text whole, or (para) each piece between "\n\n" separately. */
static void encode_all(struct hm_tokenizer *tok, const char *text, size_t len, int para,
                       struct hm_ids *ids)
{
    struct hm_error err;
    const char *p = text, *end = text + len;
    while (p <= end) {
        const char *q = para ? memmem(p, (size_t)(end - p), "\n\n", 2) : NULL;
        if (!q)
            q = end;
        if (hm_tokenizer_encode(tok, p, (size_t)(q - p), ids, &err) != HM_OK) {
            fprintf(stderr, "bench_tokenizer: encode failed: %s\n", err.msg);
            exit(1);
        }
        p = q + 2;
    }
}

static double run_hm(struct hm_tokenizer *tok, const char *text, size_t len, int reps, int para,
                     int64_t *tokens)
{
    double v[64];
    for (int r = 0; r < reps && r < 64; r++) {
        struct hm_ids ids = {0};
        double t0 = now_s();
        encode_all(tok, text, len, para, &ids);
        v[r] = (double)len / 1e6 / (now_s() - t0);
        *tokens = ids.n;
        hm_ids_release(&ids);
    }
    return median(v, reps);
}

int main(int argc, char **argv)
{
    const char *tok_path = "../shared/data/gpt-neox-20b_tokenizer.json";
    const char *files[16];
    int nfiles = 0, rounds = 3, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            tok_path = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 3;
        else if (nfiles < 16)
            files[nfiles++] = argv[i];
    }
    if (!nfiles) {
        files[nfiles++] = "../shared/data/openwebtext_sample.txt";
        files[nfiles++] = "../shared/data/tinyshakespeare_input.txt";
    }
    if (rounds > 32)
        rounds = 32;
    struct hm_tokenizer *tok;
    struct hm_error err;
    if (hm_tokenizer_load(tok_path, &tok, &err) != HM_OK) {
        fprintf(stderr, "bench_tokenizer: cannot read '%s': %s\n", tok_path, err.msg);
        return 1;
    }
    FILE *probe = fopen("bench/node_modules/tokenizers/package.json", "r");
    int have_hf = probe != NULL;
    if (probe)
        fclose(probe);
    if (!have_hf)
        fprintf(stderr, "bench_tokenizer: bench/node_modules/tokenizers is missing, skipping "
                        "the HuggingFace baseline (cd bench && npm install --no-save "
                        "tokenizers@0.23.2)\n");
    printf("tokenizer encode, single thread; %d rounds A B, "
           "median of %d encodes per run\n", rounds, reps);
    for (int f = 0; f < nfiles; f++) {
        size_t len;
        char *text = read_file(files[f], &len);
        if (!text) {
            fprintf(stderr, "bench_tokenizer: cannot read '%s'\n", files[f]);
            return 1;
        }
        for (int para = 1; para >= 0; para--) {
            double a[32], b[32];
            int64_t ta = 0, tb = 0;
            run_hm(tok, text, len, 1, para, &ta); /* warm the word cache, as HF warms its own */
            for (int r = 0; r < rounds; r++) {
                a[r] = run_hm(tok, text, len, reps, para, &ta);
                b[r] = have_hf ? run_hf(tok_path, files[f], reps, para, &tb) : -1;
            }
            double amin = a[0], amax = a[0], bmin = b[0], bmax = b[0];
            for (int r = 0; r < rounds; r++) {
                amin = a[r] < amin ? a[r] : amin, amax = a[r] > amax ? a[r] : amax;
                bmin = b[r] < bmin ? b[r] : bmin, bmax = b[r] > bmax ? b[r] : bmax;
            }
            double am = median(a, rounds), bm = median(b, rounds);
            printf("%s (%.2f MB, %lld tokens), %s\n", files[f], (double)len / 1e6, (long long)ta,
                   para ? "each paragraph (\\n\\n-separated piece) encoded separately"
                        : "the whole file as one string");
            printf("  hm            %8.2f MB/s  (min %.2f, max %.2f)\n", am, amin, amax);
            if (have_hf && bm > 0) {
                printf("  hf tokenizers %8.2f MB/s  (min %.2f, max %.2f)%s\n", bm, bmin, bmax,
                       tb == ta ? "" : "  [token counts differ!]");
                printf("  ratio hm/hf   %8.2f\n", am / bm);
            }
        }
        free(text);
    }
    hm_tokenizer_free(tok);
    return 0;
}
