#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

char *tu_mkdtemp(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/hm-test-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        abort();
    }
    return p;
}

char *tu_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || (len && fwrite(data, 1, len, fp) != len) || fclose(fp) != 0) {
        perror(path);
        abort();
    }
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        perror(path);
        abort();
    }
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, fp) != (size_t)n)
        abort();
    b[n] = 0;
    fclose(fp);
    if (len)
        *len = (size_t)n;
    return b;
}

static char *slurp_fp(FILE *fp)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t r;
    while ((r = fread(b + n, 1, cap - n - 1, fp)) > 0) {
        n += r;
        if (cap - n - 1 == 0)
            b = realloc(b, cap *= 2);
    }
    b[n] = 0;
    return b;
}

int tu_run(const char *cmd, char **out, char **err)
{
    char errpath[] = "/tmp/hm-test-stderr-XXXXXX";
    int efd = mkstemp(errpath);
    if (efd < 0)
        abort();
    size_t n = strlen(cmd) + strlen(errpath) + 16;
    char *full = malloc(n);
    snprintf(full, n, "(%s) 2>%s", cmd, errpath);
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        abort();
    char *o = slurp_fp(p);
    int status = pclose(p);
    FILE *ef = fdopen(efd, "r");
    char *e = slurp_fp(ef);
    fclose(ef);
    unlink(errpath);
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    int code = WEXITSTATUS(status);
    return code;
}

uint64_t tu_rand_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tu_rand_uniform(uint64_t *s)
{
    return (double)(tu_rand_u64(s) >> 11) * 0x1p-53;
}

double tu_rand_normal(uint64_t *s)
{
    double u1 = tu_rand_uniform(s), u2 = tu_rand_uniform(s);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
