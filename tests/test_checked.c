/* test_checked.c — the "checked" backend proves placement (contract §10):
 * its ops compute ref's bits; host code touching its memory outside an op,
 * and an op handed host memory, both stop the program loudly. Criterion runs
 * each test in its own process, so an expected abort is a passing test (and
 * a test that expects an abort fails if none happens). Also: one training
 * step reads backend memory once (the loop's scalar block), whatever the
 * number of tensors. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "model_forward.h"
#include "presets.h"

static const struct hm_backend *checked(void)
{
    const struct hm_backend *be = hm_backend_get("checked");
    cr_assert(be, "the checked backend is registered");
    return be;
}

Test(checked, computes_refs_bits_through_upload_and_download)
{
    const struct hm_backend *ck = checked(), *ref = hm_backend_get("ref");
    enum { T = 7, IN = 13, OUT = 5 };
    float x[T * IN], w[OUT * IN], b[OUT], want[T * OUT], got[T * OUT];
    for (int i = 0; i < T * IN; i++)
        x[i] = sinf(0.37f * (float)i);
    for (int i = 0; i < OUT * IN; i++)
        w[i] = cosf(0.11f * (float)i);
    for (int i = 0; i < OUT; i++)
        b[i] = 0.1f * (float)i;
    hm_backend_matmul_forward(ref, want, x, w, b, T, IN, OUT);
    float *dx = hm_backend_alloc_copy(ck, x, sizeof x), *dw = hm_backend_alloc_copy(ck, w, sizeof w);
    float *db = hm_backend_alloc_copy(ck, b, sizeof b), *dy = hm_backend_alloc(ck, sizeof got);
    cr_assert(dx && dw && db && dy);
    hm_backend_matmul_forward(ck, dy, dx, dw, db, T, IN, OUT);
    hm_backend_download(ck, got, dy, sizeof got);
    cr_expect_eq(memcmp(got, want, sizeof got), 0, "checked = ref, bit for bit");
    /* a scalar result lands in backend memory */
    double *acc = hm_backend_alloc(ck, sizeof(double)), zero = 0, s = 0, want_s = 0;
    hm_backend_upload(ck, acc, &zero, sizeof zero);
    hm_backend_sqnorm(ck, acc, dx, T * IN);
    hm_backend_download(ck, &s, acc, sizeof s);
    hm_backend_sqnorm(ref, &want_s, x, T * IN);
    cr_expect_eq(s, want_s);
    void *bufs[] = {dx, dw, db, dy, acc};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        hm_backend_free(ck, &bufs[i]);
    struct hm_error err;
    cr_expect_eq(hm_backend_sync(ck, &err), HM_OK);
}

/* A planted host read of backend memory: the SIGSEGV handler aborts. */
Test(checked, host_read_of_backend_memory_is_caught, .signal = SIGABRT)
{
    float *p = hm_backend_alloc(checked(), 64 * sizeof(float));
    cr_assert(p);
    volatile float v = p[3]; /* the bug this backend exists to find */
    (void)v;
    cr_log_error("the host read was not caught");
}

Test(checked, host_write_of_backend_memory_is_caught, .signal = SIGABRT)
{
    float *p = hm_backend_alloc(checked(), 64 * sizeof(float));
    cr_assert(p);
    ((volatile float *)p)[0] = 1.0f;
}

/* An op handed host memory: the argument check aborts before it runs. */
Test(checked, op_handed_host_memory_is_caught, .signal = SIGABRT)
{
    const struct hm_backend *ck = checked();
    float host[16] = {0};
    float *dev = hm_backend_alloc(ck, sizeof host);
    cr_assert(dev);
    hm_backend_add_forward(ck, dev, dev, host, 16); /* `b` is host memory */
}

/* The same op with backend memory runs, and a freed buffer is no longer
 * backend memory. */
Test(checked, freed_memory_is_not_backend_memory, .signal = SIGABRT)
{
    const struct hm_backend *ck = checked();
    float *a = hm_backend_alloc(ck, 16 * sizeof(float));
    float *b = hm_backend_alloc(ck, 16 * sizeof(float));
    hm_backend_add_forward(ck, a, a, b, 16); /* fine */
    float *stale = b;
    hm_backend_free(ck, (void **)&b);
    hm_backend_add_forward(ck, a, a, stale, 16); /* use after free */
}

Test(checked, download_past_an_allocation_is_caught, .signal = SIGABRT)
{
    const struct hm_backend *ck = checked();
    float *a = hm_backend_alloc(ck, 10 * sizeof(float)), host[2048];
    hm_backend_download(ck, host, a, sizeof host); /* 8 KiB from a 40-byte buffer */
}

/* A model's weights must be placed before its ops run. */
Test(checked, an_unplaced_model_is_refused)
{
    struct hm_config c;
    struct hm_error err;
    cr_assert_eq(hm_config_preset("tiny", &c), 0);
    struct hm_model *m;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK);
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    int32_t tok[4] = {1, 2, 3, 4};
    float nll[3];
    cr_expect_eq(hm_model_nll(m, checked(), tok, tok + 1, 3, nll, &ws, &err), HM_ERR_INVALID);
    cr_expect(strstr(err.msg, "host memory"), "%s", err.msg);
    cr_assert_eq(hm_model_place(m, checked(), &err), HM_OK);
    cr_expect_eq(hm_model_nll(m, checked(), tok, tok + 1, 3, nll, &ws, &err), HM_OK, "%s",
                 err.msg);
    hm_model_ws_release(&ws);
    hm_model_free(m);
}
