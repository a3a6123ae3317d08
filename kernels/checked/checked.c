/* checked.c — the "checked" backend: ref's ops, bit for bit, on memory that
 * host code cannot touch (contract §10).
 *
 * Its memory is carved from one reserved region kept PROT_NONE except
 * while one of its own ops runs (the whole used range is opened for the
 * op and closed after it) or while upload/download copies bytes. So:
 *   - host code reading or writing backend memory outside an op faults;
 *     the SIGSEGV handler names the address and its allocation, prints a
 *     backtrace and aborts;
 *   - every pointer an op is handed must lie in one of its live
 *     allocations (the registry below); host memory aborts naming the op
 *     and the argument.
 * Both are deliberate, loud stops of a program with a placement bug: this
 * backend exists to prove placement in tests (it writes to stderr for that
 * reason, the one kernels/ file that does). Ops run one at a time (the
 * backend.h contract), so the region is open for one op at a time. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "backend_impl.h"

#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/cpu_ops_list.h"

#define CK_PAGE ((size_t)4096)
#define CK_MAX_ARENAS 8

struct ck_block {
    size_t off, len; /* page multiples */
    int live;
};

struct ck_arena {
    char *base;
    size_t reserve; /* bytes reserved */
    size_t top;     /* bytes in use from base (blocks cover [0, top)) */
    struct ck_block *blk; /* [n_blk] sorted by off */
    size_t n_blk, cap_blk;
};

static struct ck_arena *g_arenas[CK_MAX_ARENAS];
static struct sigaction g_old_segv;
static int g_handler_on;

/* ---- loud stops ---------------------------------------------------------- */

static void ck_write(const char *s) { (void)!write(2, s, strlen(s)); }

static void ck_die(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ck_write(buf);
    void *frames[32];
    int n = backtrace(frames, 32);
    backtrace_symbols_fd(frames, n, 2);
    signal(SIGABRT, SIG_DFL);
    abort();
}

static struct ck_arena *arena_of(const void *p)
{
    for (int i = 0; i < CK_MAX_ARENAS; i++) {
        struct ck_arena *a = g_arenas[i];
        if (a && (const char *)p >= a->base && (const char *)p < a->base + a->reserve)
            return a;
    }
    return NULL;
}

/* The live block holding p, or NULL. */
static const struct ck_block *block_of(const struct ck_arena *a, const void *p)
{
    size_t off = (size_t)((const char *)p - a->base);
    for (size_t i = 0; i < a->n_blk; i++)
        if (a->blk[i].live && off >= a->blk[i].off && off < a->blk[i].off + a->blk[i].len)
            return &a->blk[i];
    return NULL;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    struct ck_arena *a = arena_of(si->si_addr);
    if (a) {
        const struct ck_block *b = block_of(a, si->si_addr);
        char buf[256];
        snprintf(buf, sizeof buf,
                 "hm: checked backend: host code touched backend memory at %p (%s) outside "
                 "the backend's ops; read it with hm_backend_download\n",
                 si->si_addr, b ? "in a live allocation" : "not allocated");
        ck_die("%s", buf);
    }
    /* not ours: the previous handler, or the default action */
    if (g_old_segv.sa_flags & SA_SIGINFO && g_old_segv.sa_sigaction) {
        g_old_segv.sa_sigaction(sig, si, uc);
        return;
    }
    if (g_old_segv.sa_handler != SIG_DFL && g_old_segv.sa_handler != SIG_IGN &&
        g_old_segv.sa_handler) {
        g_old_segv.sa_handler(sig);
        return;
    }
    signal(SIGSEGV, SIG_DFL); /* the fault repeats with the default action */
}

/* ---- the guard ----------------------------------------------------------- */

static void ck_protect(struct ck_arena *a, size_t off, size_t len, int prot)
{
    if (len && mprotect(a->base + off, len, prot) != 0)
        ck_die("hm: checked backend: mprotect failed\n");
}

static void ck_open_all(struct ck_arena *a) { ck_protect(a, 0, a->top, PROT_READ | PROT_WRITE); }
static void ck_close_all(struct ck_arena *a) { ck_protect(a, 0, a->top, PROT_NONE); }

/* An op argument that must be backend memory (NULL: an absent optional). */
static void ck_ptr(struct ck_arena *a, const char *op, const char *arg, const void *p)
{
    if (p && !(arena_of(p) == a && block_of(a, p)))
        ck_die("hm: checked backend: op '%s' was handed host memory: argument '%s' = %p is "
               "not a live allocation of this backend\n",
               op, arg, p);
}

/* Any other argument (sizes, scalars, the AdamW constants struct). */
static void ck_skip(struct ck_arena *a, const char *op, const char *arg, ...)
{
    (void)a, (void)op, (void)arg;
}

#define CK_ARG(a, op, x)                                                                 \
    _Generic((x), float *: ck_ptr, const float *: ck_ptr, double *: ck_ptr,               \
             int32_t *: ck_ptr, const int32_t *: ck_ptr, int64_t *: ck_ptr, void *: ck_ptr,        \
             const uint16_t *: ck_ptr, \
             default: ck_skip)(a, op, #x, x);

/* CK_EACH(a, op, args...): CK_ARG on each of up to 26 arguments. */
#define CK_N(...) CK_N_(__VA_ARGS__, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, \
                        12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define CK_N_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17,    \
              _18, _19, _20, _21, _22, _23, _24, _25, _26, n, ...) n
#define CK_CAT(a, b) CK_CAT_(a, b)
#define CK_CAT_(a, b) a##b
#define CK_EACH(a, op, ...) CK_CAT(CK_E, CK_N(__VA_ARGS__))(a, op, __VA_ARGS__)
#define CK_E1(a, op, x) CK_ARG(a, op, x)
#define CK_E2(a, op, x, ...) CK_ARG(a, op, x) CK_E1(a, op, __VA_ARGS__)
#define CK_E3(a, op, x, ...) CK_ARG(a, op, x) CK_E2(a, op, __VA_ARGS__)
#define CK_E4(a, op, x, ...) CK_ARG(a, op, x) CK_E3(a, op, __VA_ARGS__)
#define CK_E5(a, op, x, ...) CK_ARG(a, op, x) CK_E4(a, op, __VA_ARGS__)
#define CK_E6(a, op, x, ...) CK_ARG(a, op, x) CK_E5(a, op, __VA_ARGS__)
#define CK_E7(a, op, x, ...) CK_ARG(a, op, x) CK_E6(a, op, __VA_ARGS__)
#define CK_E8(a, op, x, ...) CK_ARG(a, op, x) CK_E7(a, op, __VA_ARGS__)
#define CK_E9(a, op, x, ...) CK_ARG(a, op, x) CK_E8(a, op, __VA_ARGS__)
#define CK_E10(a, op, x, ...) CK_ARG(a, op, x) CK_E9(a, op, __VA_ARGS__)
#define CK_E11(a, op, x, ...) CK_ARG(a, op, x) CK_E10(a, op, __VA_ARGS__)
#define CK_E12(a, op, x, ...) CK_ARG(a, op, x) CK_E11(a, op, __VA_ARGS__)
#define CK_E13(a, op, x, ...) CK_ARG(a, op, x) CK_E12(a, op, __VA_ARGS__)
#define CK_E14(a, op, x, ...) CK_ARG(a, op, x) CK_E13(a, op, __VA_ARGS__)
#define CK_E15(a, op, x, ...) CK_ARG(a, op, x) CK_E14(a, op, __VA_ARGS__)
#define CK_E16(a, op, x, ...) CK_ARG(a, op, x) CK_E15(a, op, __VA_ARGS__)
#define CK_E17(a, op, x, ...) CK_ARG(a, op, x) CK_E16(a, op, __VA_ARGS__)
#define CK_E18(a, op, x, ...) CK_ARG(a, op, x) CK_E17(a, op, __VA_ARGS__)
#define CK_E19(a, op, x, ...) CK_ARG(a, op, x) CK_E18(a, op, __VA_ARGS__)
#define CK_E20(a, op, x, ...) CK_ARG(a, op, x) CK_E19(a, op, __VA_ARGS__)
#define CK_E21(a, op, x, ...) CK_ARG(a, op, x) CK_E20(a, op, __VA_ARGS__)
#define CK_E22(a, op, x, ...) CK_ARG(a, op, x) CK_E21(a, op, __VA_ARGS__)
#define CK_E23(a, op, x, ...) CK_ARG(a, op, x) CK_E22(a, op, __VA_ARGS__)
#define CK_E24(a, op, x, ...) CK_ARG(a, op, x) CK_E23(a, op, __VA_ARGS__)
#define CK_E25(a, op, x, ...) CK_ARG(a, op, x) CK_E24(a, op, __VA_ARGS__)
#define CK_E26(a, op, x, ...) CK_ARG(a, op, x) CK_E25(a, op, __VA_ARGS__)
#define CK_EACH_(a, op, ...) CK_EACH(a, op, __VA_ARGS__)

/* Every op: check its pointers, open the region, run ref's op, close it. */
#define HM_OP(name, fast, flops, params, args)                                           \
    static void ck_##name(void *ctx, HM_UNPAREN params)                                  \
    {                                                                                     \
        struct ck_arena *ck_a_ = ctx;                                                     \
        CK_EACH_(ck_a_, #name, HM_UNPAREN args)                                           \
        ck_open_all(ck_a_);                                                               \
        hm_ref_##name(NULL, HM_UNPAREN args);                                             \
        ck_close_all(ck_a_);                                                              \
    }
#define HM_OP_SIZE(name, fast, params, args)                                             \
    static size_t ck_##name(void *ctx, HM_UNPAREN params)                                \
    {                                                                                     \
        (void)ctx;                                                                        \
        return hm_ref_##name(NULL, HM_UNPAREN args);                                      \
    }
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE

/* ---- memory -------------------------------------------------------------- */

static int ck_insert(struct ck_arena *a, size_t at, struct ck_block b)
{
    if (a->n_blk == a->cap_blk) {
        size_t cap = a->cap_blk ? 2 * a->cap_blk : 64;
        struct ck_block *nb = realloc(a->blk, cap * sizeof *nb);
        if (!nb)
            return -1;
        a->blk = nb;
        a->cap_blk = cap;
    }
    memmove(a->blk + at + 1, a->blk + at, (a->n_blk - at) * sizeof *a->blk);
    a->blk[at] = b;
    a->n_blk++;
    return 0;
}

static void *ck_alloc(void *ctx, size_t bytes)
{
    struct ck_arena *a = ctx;
    size_t len = (bytes + CK_PAGE - 1) / CK_PAGE * CK_PAGE;
    if (len == 0)
        len = CK_PAGE;
    for (size_t i = 0; i < a->n_blk; i++) { /* first fit among freed blocks */
        struct ck_block *b = &a->blk[i];
        if (b->live || b->len < len)
            continue;
        if (b->len > len &&
            ck_insert(a, i + 1, (struct ck_block){b->off + len, b->len - len, 0}) != 0)
            return NULL;
        b = &a->blk[i];
        b->len = len;
        b->live = 1;
        return a->base + b->off;
    }
    if (len > a->reserve - a->top)
        return NULL;
    if (ck_insert(a, a->n_blk, (struct ck_block){a->top, len, 1}) != 0)
        return NULL;
    void *p = a->base + a->top;
    a->top += len;
    return p;
}

static void ck_free(void *ctx, void *p)
{
    struct ck_arena *a = ctx;
    size_t off = (size_t)((char *)p - a->base);
    size_t i = 0;
    while (i < a->n_blk && !(a->blk[i].live && a->blk[i].off == off))
        i++;
    if (i == a->n_blk)
        ck_die("hm: checked backend: free of %p, which is not a live allocation\n", p);
    a->blk[i].live = 0;
    /* drop the pages: the next allocation there starts zeroed, memory returns */
    madvise(a->base + a->blk[i].off, a->blk[i].len, MADV_DONTNEED);
    if (i + 1 < a->n_blk && !a->blk[i + 1].live) { /* merge with the next free block */
        a->blk[i].len += a->blk[i + 1].len;
        memmove(a->blk + i + 1, a->blk + i + 2, (a->n_blk - i - 2) * sizeof *a->blk);
        a->n_blk--;
    }
    if (i > 0 && !a->blk[i - 1].live) { /* and with the previous one */
        a->blk[i - 1].len += a->blk[i].len;
        memmove(a->blk + i, a->blk + i + 1, (a->n_blk - i - 1) * sizeof *a->blk);
        a->n_blk--;
        i--;
    }
    if (i + 1 == a->n_blk) { /* a free tail returns to the top */
        a->top = a->blk[i].off;
        a->n_blk--;
    }
}

/* The bytes [p, p + n) must lie in one live allocation. */
static void ck_range(struct ck_arena *a, const char *what, const void *p, size_t n)
{
    const struct ck_block *b = arena_of(p) == a ? block_of(a, p) : NULL;
    size_t off = b ? (size_t)((const char *)p - a->base) : 0;
    if (!b || n > b->off + b->len - off)
        ck_die("hm: checked backend: %s of %zu bytes at %p is not inside one live allocation\n",
               what, n, p);
}

static void ck_copy(struct ck_arena *a, const char *what, void *dst, const void *src, size_t n,
                    const void *mine)
{
    ck_range(a, what, mine, n);
    size_t lo = (size_t)((const char *)mine - a->base) / CK_PAGE * CK_PAGE;
    size_t hi = (size_t)((const char *)mine - a->base) + n;
    hi = (hi + CK_PAGE - 1) / CK_PAGE * CK_PAGE;
    ck_protect(a, lo, hi - lo, PROT_READ | PROT_WRITE);
    memcpy(dst, src, n);
    ck_protect(a, lo, hi - lo, PROT_NONE);
}

static void ck_upload(void *ctx, void *dst, const void *src, size_t n)
{
    ck_copy(ctx, "upload", dst, src, n, dst);
}

static void ck_download(void *ctx, void *dst, const void *src, size_t n)
{
    ck_copy(ctx, "download", dst, src, n, src);
}

/* ---- lifecycle ----------------------------------------------------------- */

static enum hm_status ck_open(void **ctx, struct hm_error *err)
{
    int slot = 0;
    while (slot < CK_MAX_ARENAS && g_arenas[slot])
        slot++;
    if (slot == CK_MAX_ARENAS)
        return hm_error_set(err, HM_ERR_BACKEND, "too many checked backends open (at most %d)",
                            CK_MAX_ARENAS);
    struct ck_arena *a = calloc(1, sizeof *a);
    if (!a)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory opening the checked backend");
    /* address space only (PROT_NONE, no reserve): pages exist once touched */
    static const size_t sizes[] = {(size_t)64 << 30, (size_t)16 << 30, (size_t)4 << 30};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes && !a->base; i++) {
        void *p = mmap(NULL, sizes[i], PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (p != MAP_FAILED) {
            a->base = p;
            a->reserve = sizes[i];
        }
    }
    if (!a->base) {
        free(a);
        return hm_error_set(err, HM_ERR_NOMEM, "cannot reserve the checked backend's memory");
    }
    if (!g_handler_on) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_old_segv);
    }
    g_handler_on++;
    g_arenas[slot] = a;
    *ctx = a;
    return HM_OK;
}

static void ck_close(void *ctx)
{
    struct ck_arena *a = ctx;
    if (!a)
        return;
    for (int i = 0; i < CK_MAX_ARENAS; i++)
        if (g_arenas[i] == a)
            g_arenas[i] = NULL;
    if (--g_handler_on == 0)
        sigaction(SIGSEGV, &g_old_segv, NULL);
    munmap(a->base, a->reserve);
    free(a->blk);
    free(a);
}

static const struct hm_backend_ops g_checked_ops = {
    .close = ck_close,
#define HM_OP(name, fast, flops, params, args) .name = ck_##name,
#define HM_OP_SIZE(name, fast, params, args) .name = ck_##name,
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE
    .mem_alloc = ck_alloc,
    .mem_free = ck_free,
    .mem_upload = ck_upload,
    .mem_download = ck_download,
};

const struct hm_backend_desc hm_backend_desc_checked = {
    .name = "checked", .ops = &g_checked_ops, .open = ck_open};
