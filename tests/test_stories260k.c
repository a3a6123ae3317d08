/* test_stories260k.c — a really pretrained teacher end to end: llama2.c's
 * stories260K (../shared/data) imported with hm-import's library, then
 *  - greedy decoding from BOS with the KV-cache step reproduces, token for
 *    token, the sample llama2.c documents for `run -t 0.0` (doc/stories260K.md,
 *    copied byte for byte to tests/data/stories260K_greedy.txt; see its .md);
 *  - the same tokens through the chunked forward give the step's logits;
 *  - hm's logits agree with the independent double-precision reference
 *    (tests/support/ref_llama.c) on the sampled story.
 * Skips (visibly) without the shared data. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
#include "import_llama2c.h"
#include "model.h"
#include "model_forward.h"
#include "recurrent.h"
#include "ref_llama.h"
#include "testutil.h"
#include "tokenizer.h"

#define MODEL HM_SHARED_DATA "/llama2c_stories260K.bin"
#define TOKENIZER HM_SHARED_DATA "/llama2c_tok512.bin"
#define STEPS 256 /* run.c's default -n */

static FILE *try_open(const char *p) { return fopen(p, "rb"); }

static char *import_teacher(void)
{
    FILE *f = try_open(MODEL), *g = try_open(TOKENIZER);
    if (f)
        fclose(f);
    if (g)
        fclose(g);
    if (!f || !g)
        cr_skip_test("no shared data at %s", HM_SHARED_DATA);
    char *dir = tu_mkdtemp("stories");
    char *out = tu_path(dir, "teacher.safetensors");
    struct hm_llama2c *l = NULL;
    struct hm_error err;
    cr_assert_eq(hm_llama2c_open(MODEL, &l, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_llama2c_write(l, out, 0, NULL, &err), HM_OK, "%s", err.msg);
    hm_llama2c_close(l);
    free(dir);
    return out;
}

static int32_t argmax(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) /* lowest id on ties */
            best = (int32_t)i;
    return best;
}

Test(stories260k, greedy_sample_matches_llama2c_token_for_token)
{
    char *path = import_teacher();
    struct hm_error err;
    struct hm_ckpt *ck = NULL;
    struct hm_model *m = NULL;
    cr_assert_eq(hm_ckpt_open(path, &ck, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_load(ck, &m, &err), HM_OK, "%s", err.msg);
    const int64_t V = m->cfg.vocab_size;
    cr_assert_eq(V, 512);
    cr_assert_eq(m->cfg.num_key_value_heads, 4);
    cr_assert(m->cfg.tie_word_embeddings);

    /* run.c's loop: token = BOS at pos 0; next = argmax; stop at BOS */
    int32_t seq[STEPS + 1];
    int64_t n = 0;
    seq[n++] = 1;
    float *logits = malloc(sizeof(float) * (size_t)(STEPS * V));
    struct hm_model_state *st = NULL;
    const struct hm_backend *be = hm_backend_get("fast");
    cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg);
    cr_assert(m->embed_out == m->embed_in, "tied: still one tensor once placed");
    cr_assert_eq(hm_model_state_new(m, &st, &err), HM_OK, "%s", err.msg);
    for (int64_t pos = 0; pos < STEPS; pos++) {
        cr_assert_eq(hm_model_step(m, be, st, seq[pos], logits + pos * V, &err), HM_OK, "%s",
                     err.msg);
        int32_t next = argmax(logits + pos * V, V);
        if (next == 1)
            break;
        seq[n++] = next;
    }
    hm_model_state_free(st);

    struct hm_tokenizer *tok = NULL;
    cr_assert_eq(hm_tokenizer_load(TOKENIZER, &tok, &err), HM_OK, "%s", err.msg);
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(hm_tokenizer_decode(tok, seq, n, &text, &len, &err), HM_OK, "%s", err.msg);
    size_t wlen = 0;
    char *want = tu_read_file(HM_SOURCE_DIR "/tests/data/stories260K_greedy.txt", &wlen);
    cr_assert(wlen > 1 && want[wlen - 1] == '\n');
    wlen--; /* run.c's closing printf("\n") is not a token */
    size_t same = 0;
    while (same < len && same < wlen && text[same] == want[same])
        same++;
    cr_expect(len == wlen && same == len,
              "greedy sample differs from llama2.c's at byte %zu (got %zu bytes, want %zu):\n"
              "got:  ...%.60s\nwant: ...%.60s",
              same, len, wlen, text + (same > 20 ? same - 20 : 0),
              want + (same > 20 ? same - 20 : 0));
    /* token for token: the documented text re-encoded by llama2.c's encode
     * (the tokenizer of test_tokenizer_llama2c) is exactly our sequence */
    struct hm_ids ids = {0};
    cr_assert_eq(hm_tokenizer_encode_ex(tok, want, wlen, HM_TOKENIZER_BOS, &ids, &err), HM_OK,
                 "%s", err.msg);
    int64_t agree = 0;
    while (agree < n && agree < ids.n && ids.v[agree] == seq[agree])
        agree++;
    fprintf(stderr, "re-encoded sample agrees with the greedy ids for %lld of %lld tokens\n",
            (long long)agree, (long long)n);
    cr_expect(agree == n && ids.n == n, "re-encoded sample: %lld of %lld ids agree (%lld ids)",
              (long long)agree, (long long)n, (long long)ids.n);
    fprintf(stderr, "stories260K greedy: %lld tokens generated, %zu bytes\n", (long long)(n - 1),
            len);

    /* the chunked forward over the same tokens gives the step's logits */
    float *full = malloc(sizeof(float) * (size_t)(STEPS * V));
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    const int64_t T = n < STEPS ? n : STEPS;
    cr_assert_eq(hm_model_forward(m, be, seq, T, full, &ws, &err), HM_OK, "%s", err.msg);
    double worst = 0, mx = 0;
    for (int64_t i = 0; i < T * V; i++) {
        worst = fmax(worst, fabs((double)full[i] - logits[i]));
        mx = fmax(mx, fabs((double)full[i]));
    }
    cr_expect(worst <= 1e-5 * mx, "step vs forward: %.3g of %.3g", worst, mx);

    /* the independent double reference on the first 96 tokens */
    struct tu_ref_table *tab = tu_ref_table_from_file(path);
    cr_assert(tab);
    const int64_t Tr = 96;
    double *ref = malloc(sizeof(double) * (size_t)(Tr * V));
    tu_ref_llama_logits(&m->cfg, tu_ref_table_get, tab, seq, Tr, ref);
    worst = 0, mx = 0;
    for (int64_t i = 0; i < Tr * V; i++) {
        worst = fmax(worst, fabs((double)full[i] - ref[i]));
        mx = fmax(mx, fabs(ref[i]));
    }
    fprintf(stderr, "stories260K vs double reference: max|d| %.3g of max|ref| %.3g\n", worst, mx);
    cr_expect(worst <= 1e-4 * mx, "logits vs double reference: %.3g of %.3g", worst, mx);
    free(ref);
    tu_ref_table_free(tab);
    hm_model_ws_release(&ws);
    free(full);
    hm_ids_release(&ids);
    free(want);
    free(text);
    hm_tokenizer_free(tok);
    free(logits);
    hm_model_free(m);
    hm_ckpt_close(ck);
    free(path);
}
