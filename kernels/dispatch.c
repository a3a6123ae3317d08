/* dispatch.c — the backend registry, the lifecycle, the op wrappers
 * (generated from ops.def) and the memory interface. */
#include "backend_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_profile.h"

/* An opened backend. The handle is const for callers; what changes (the
 * first failure, the download count) sits behind `st`. */
struct hm_backend_state {
    enum hm_status status; /* first failure since the last sync */
    struct hm_error err;
    int64_t downloads;
};

struct hm_backend {
    const char *name; /* the descriptor's (borrowed, static) */
    const struct hm_backend_ops *ops;
    void *ctx;
    struct hm_backend_state *st; /* owned */
};

#define HM_BACKEND_MAX 8
static const struct hm_backend_desc *g_registry[HM_BACKEND_MAX] = {
    &hm_backend_desc_ref, &hm_backend_desc_fast, &hm_backend_desc_checked};
static int g_n_registry = 3;

/* The device libraries: loaded (once) when a device backend is named or the
 * registry is enumerated past the CPU backends. g_device_why: why the CUDA
 * backend is not there ("" once it is). */
static char g_device_why[512];

#ifdef HM_HAVE_CUDA
#include <dlfcn.h>
#include <unistd.h>

/* lib/libhm_cuda.so beside the program's bin/ (or $HM_CUDA_LIBRARY). */
static void load_device_libraries(void)
{
    static int tried;
    if (tried++)
        return;
    char path[4096];
    const char *env = getenv("HM_CUDA_LIBRARY");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
        if (n <= 0) {
            snprintf(g_device_why, sizeof g_device_why,
                     "cannot find the CUDA backend's library: /proc/self/exe is unreadable");
            return;
        }
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        snprintf(slash ? slash : path, sizeof path - (size_t)(slash ? slash - path : 0),
                 "/../lib/libhm_cuda.so");
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const struct hm_backend_desc *d = h ? dlsym(h, "hm_backend_desc_cuda") : NULL;
    if (!d) {
        snprintf(g_device_why, sizeof g_device_why, "cannot load the CUDA backend '%s': %s",
                 path, dlerror());
        return;
    }
    hm_backend_register(d);
    g_device_why[0] = '\0';
}
#else
static void load_device_libraries(void)
{
    snprintf(g_device_why, sizeof g_device_why,
             "this build has no CUDA backend (nvcc was not found when it was configured: "
             "install the CUDA toolkit and configure with -DHM_CUDA=ON)");
}
#endif

static void load_device_libraries(void);

void hm_backend_register(const struct hm_backend_desc *desc)
{
    load_device_libraries(); /* the device libraries keep their place before later ones */
    for (int i = 0; i < g_n_registry; i++)
        if (g_registry[i] == desc)
            return;
    if (g_n_registry < HM_BACKEND_MAX)
        g_registry[g_n_registry++] = desc;
}

static const struct hm_backend_desc *find_desc(const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "cpu") == 0)
        name = "fast";
    if (strcmp(name, "cuda") == 0)
        load_device_libraries();
    for (int i = 0; i < g_n_registry; i++)
        if (strcmp(g_registry[i]->name, name) == 0)
            return g_registry[i];
    return NULL;
}

const char *hm_backend_names(void) { return "ref|fast|cpu|checked|cuda"; }

const char *hm_backend_name(const struct hm_backend *be) { return be->name; }

const char *hm_backend_name_at(int i)
{
    if (i >= g_n_registry)
        load_device_libraries();
    return i >= 0 && i < g_n_registry ? g_registry[i]->name : NULL;
}

enum hm_status hm_backend_open(const char *name, struct hm_backend **out, struct hm_error *err)
{
    *out = NULL;
    const struct hm_backend_desc *d = find_desc(name);
    if (!d && name && strcmp(name, "cuda") == 0)
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "%s", g_device_why);
    if (!d)
        return hm_error_set(err, HM_ERR_INVALID, "unknown backend '%s' (known: %s)",
                            name ? name : "(null)", hm_backend_names());
    struct hm_backend *be = calloc(1, sizeof *be);
    struct hm_backend_state *st = calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory opening backend '%s'", d->name);
    }
    be->name = d->name;
    be->ops = d->ops;
    be->st = st;
    if (d->open) {
        enum hm_status s = d->open(&be->ctx, err);
        if (s != HM_OK) {
            free(st);
            free(be);
            return s;
        }
    }
    *out = be;
    return HM_OK;
}

void hm_backend_close(struct hm_backend *be)
{
    if (!be)
        return;
    if (be->ops->close)
        be->ops->close(be->ctx);
    free(be->st);
    free(be);
}

/* The shared instances of hm_backend_get, closed at exit in the reverse
 * order of their opening, each by an atexit handler registered right
 * after it opened. atexit handlers run last-registered first, and a device
 * runtime registers its own teardown while the backend's open initializes
 * it (libcudart does, at its first call): so each instance closes before
 * the runtime it was opened on is torn down, whatever order the backends
 * were opened in. g_open_order: slot indices in the order they opened. */
static struct hm_backend *g_shared[HM_BACKEND_MAX];
static int g_open_order[HM_BACKEND_MAX];
static int g_n_open;

static void close_last_shared(void)
{
    if (g_n_open == 0)
        return;
    int i = g_open_order[--g_n_open];
    hm_backend_close(g_shared[i]);
    g_shared[i] = NULL;
}

enum hm_status hm_backend_acquire(const char *name, const struct hm_backend **out,
                                  struct hm_error *err)
{
    *out = NULL;
    const struct hm_backend_desc *d = find_desc(name);
    if (!d) /* the open's message: unknown, or a backend this build lacks */
        return hm_backend_open(name, (struct hm_backend **)out, err);
    int i = 0;
    while (i < g_n_registry && g_registry[i] != d)
        i++;
    if (!g_shared[i]) {
        enum hm_status st = hm_backend_open(d->name, &g_shared[i], err);
        if (st != HM_OK)
            return st;
        g_open_order[g_n_open++] = i; /* at most HM_BACKEND_MAX: one per slot */
        atexit(close_last_shared);
    }
    *out = g_shared[i];
    return HM_OK;
}

const struct hm_backend *hm_backend_get(const char *name)
{
    const struct hm_backend *be;
    struct hm_error e;
    return hm_backend_acquire(name, &be, &e) == HM_OK ? be : NULL;
}

static const char *const g_op_names[HM_OP_COUNT] = {
#define HM_OP(name, fast, flops, params, args) #name,
#define HM_OP_SIZE(name, fast, params, args) #name,
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE
};

const char *hm_op_name(enum hm_op op)
{
    return (int)op >= 0 && op < HM_OP_COUNT ? g_op_names[op] : NULL;
}

/* The member of op in be's vtable (NULL when missing). */
static int has_member(const struct hm_backend *be, enum hm_op op)
{
    switch (op) {
#define HM_OP(name, fast, flops, params, args)                                           \
    case HM_OP_##name:                                                                    \
        return be->ops->name != NULL;
#define HM_OP_SIZE(name, fast, params, args)                                             \
    case HM_OP_##name:                                                                    \
        return be->ops->name != NULL;
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE
    default:
        return 0;
    }
}

int hm_backend_supports(const struct hm_backend *be, enum hm_op op, int64_t numel)
{
    if ((int)op < 0 || op >= HM_OP_COUNT || !has_member(be, op))
        return 0;
    return be->ops->supports ? be->ops->supports(be->ctx, op, numel) : 1;
}

enum hm_status hm_backend_sync(const struct hm_backend *be, struct hm_error *err)
{
    enum hm_status s = be->st->status;
    if (s != HM_OK) {
        if (err)
            *err = be->st->err;
        be->st->status = HM_OK;
        return s;
    }
    return be->ops->sync ? be->ops->sync(be->ctx, err) : HM_OK;
}

int64_t hm_backend_downloads(const struct hm_backend *be) { return be->st->downloads; }

/* A call of an op be lacks: the first such failure is kept for sync. */
static void missing_op(const struct hm_backend *be, const char *op)
{
    if (be->st->status == HM_OK)
        be->st->status = hm_error_set(&be->st->err, HM_ERR_BACKEND,
                                      "backend '%s' does not implement op '%s'", be->name, op);
}

void hm_rotary_inv_freq(float *inv_freq, int64_t r, double base)
{
    for (int64_t j = 0; j < r / 2; j++) {
        float e = (float)(2 * j) / (float)r;        /* torch: arange(0, r, 2).float() / r */
        float pw = (float)pow(base, (double)e);     /* base ** e, fp32 result */
        inv_freq[j] = 1.0f / pw;                    /* 1.0 / (...) in fp32 */
    }
}

/* The wrappers: the backend's member, timed while op profiling is on
 * (op_profile.h), with the FLOPs ops.def counts for the call. */
#define HM_OP(name, fast, flops, params, args)                                           \
    void hm_backend_##name(const struct hm_backend *be, HM_UNPAREN params)                \
    {                                                                                     \
        if (!be->ops->name) {                                                             \
            missing_op(be, #name);                                                        \
            return;                                                                       \
        }                                                                                 \
        struct hm_op_timer hm_t_;                                                         \
        hm_op_timer_begin(&hm_t_, #name);                                                 \
        be->ops->name(be->ctx, HM_UNPAREN args);                                          \
        hm_op_timer_end(&hm_t_, (flops));                                                 \
    }
#define HM_OP_SIZE(name, fast, params, args)                                             \
    size_t hm_backend_##name(const struct hm_backend *be, HM_UNPAREN params)              \
    {                                                                                     \
        if (!be->ops->name) {                                                             \
            missing_op(be, #name);                                                        \
            return 0;                                                                     \
        }                                                                                 \
        return be->ops->name(be->ctx, HM_UNPAREN args);                                   \
    }
#include "ops.def"
#undef HM_OP
#undef HM_OP_SIZE

int64_t hm_backend_attention_cached_scratch_floats(int64_t T, int64_t n, int64_t n_h)
{
    return n * (T > n_h ? T : n_h);
}

/* ---- memory ---------------------------------------------------------------- */

void *hm_backend_alloc(const struct hm_backend *be, size_t bytes)
{
    if (be->ops->mem_alloc)
        return be->ops->mem_alloc(be->ctx, bytes);
    return malloc(bytes ? bytes : 1);
}

void *hm_backend_alloc_copy(const struct hm_backend *be, const void *src, size_t bytes)
{
    void *p = hm_backend_alloc(be, bytes);
    if (p && bytes)
        hm_backend_upload(be, p, src, bytes);
    return p;
}

int hm_backend_host_memory(const struct hm_backend *be)
{
    return !be->ops->mem_alloc && !be->ops->mem_free && !be->ops->mem_upload &&
           !be->ops->mem_download;
}

void hm_backend_free(const struct hm_backend *be, void **p)
{
    if (!p || !*p)
        return;
    if (be->ops->mem_free)
        be->ops->mem_free(be->ctx, *p);
    else
        free(*p);
    *p = NULL;
}

void hm_backend_upload(const struct hm_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    if (be->ops->mem_upload)
        be->ops->mem_upload(be->ctx, dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

void hm_backend_download(const struct hm_backend *be, void *dst, const void *src, size_t bytes)
{
    be->st->downloads++;
    if (!bytes)
        return;
    if (be->ops->mem_download)
        be->ops->mem_download(be->ctx, dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}
