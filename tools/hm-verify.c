/* hm-verify — prove a conversion (contract §7). Exit codes follow cmp(1):
 * 0 equivalent, 1 not equivalent, 2 could not check (bad usage, unreadable
 * input). Uses the same loaders and kernels as every other tool.
 *
 *   hm-verify mapping HEDGEHOG HEDGEMAMBA   logits and every layer's mixer
 *                                           output agree (1e-5 rel, fp32); a
 *                                           decay from teacher statistics
 *                                           (hm-map-ssm --decay-from) is
 *                                           checked finite and <= 0, the rest
 *                                           with A = 0
 *   hm-verify recurrent CKPT                chunked = token-by-token form
 *   hm-verify logits CKPT --reference FILE --data TOKENS
 *                                           logits equal a stored reference
 *   hm-verify bundle BUNDLE                 every checksum of the manifest holds */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "atomic_file.h"
#include "cli.h"
#include "fileio.h"
#include "hash.h"
#include "map_decay.h"
#include "model.h"
#include "model_forward.h"
#include "params.h"
#include "recurrent.h"
#include "threads.h"
#include "tokfile.h"
#include "verify_bundle.h"
#include "verify_report.h"

static const char usage[] =
    "usage: hm-verify mapping HEDGEHOG HEDGEMAMBA [--data TOKENS | --random-tokens N]\n"
    "       hm-verify recurrent CKPT [--data TOKENS | --random-tokens N]\n"
    "       hm-verify logits CKPT --reference LOGITS --data TOKENS\n"
    "       hm-verify bundle BUNDLE\n"
    "\n"
    "Check that two computations agree, with the same loaders and kernels as the\n"
    "other tools. Error = max |a - b| / max |b| over the compared values (b: the\n"
    "reference: the hedgehog model, the chunked form, the stored logits).\n"
    "  mapping    a hedgehog checkpoint and the hedgemamba checkpoint hm-map-ssm made\n"
    "             from it: the logits and every layer's mixer output (after dense);\n"
    "             when its A came from teacher statistics (--decay-from), every A\n"
    "             must be finite and <= 0 and the rest is checked with A = 0\n"
    "  recurrent  any model: chunked (training/prefill) form vs the token-by-token\n"
    "             decoding step (students: constant-size state; a softmax teacher:\n"
    "             its KV cache), logits at every position\n"
    "  logits     a model's logits vs a safetensors file with tensor 'logits'\n"
    "             [windows, L, V] (as hm-eval --dump-logits writes) on the same\n"
    "             windows of TOKENS (window w = tokens [wL, wL+L))\n"
    "  bundle     a bundle from hm-pack (folder or archive): every file's and every\n"
    "             tensor's bytes and XXH3 equal MANIFEST.json's, the manifest covers\n"
    "             every member and tensor, the provenance matches; exit 1 names each\n"
    "             tampered member and tensor, 2 when it cannot be read or is no bundle\n"
    "\n"
    "Options:\n"
    "      --data FILE          token file; sequences are windows of --seq-len\n"
    "      --random-tokens N    instead of --data: one sequence of N random tokens\n"
    "      --seq-len L          window length with --data (default 256)\n"
    "      --max-windows N      check at most N windows (default 4)\n"
    "      --seed S             seed of --random-tokens (default 0)\n"
    "      --reference FILE     logits reference (logits mode)\n"
    "      --tolerance X        relative tolerance (default 1e-5; logits: 1e-4)\n"
    "      --batch B            logits: windows per forward pass, as hm-eval --batch\n"
    "                           (default: hm-eval's default, so that a dump and its\n"
    "                           check batch the same windows and agree to the bit)\n"
    "      --backend NAME       ref|fast|cpu|checked|cuda (default fast)\n"
    "      --device cpu|cuda    cuda = --backend cuda (default cpu)\n"
    "      --threads N          CPU threads\n"
    "      --json               one JSON object: check, equivalent, tolerance,\n"
    "                           max_abs, max_rel, where, layers (bundle: check,\n"
    "                           valid, files, tensors, findings [{member, tensor,\n"
    "                           message}])\n"
    "  -q, --quiet  -v, --verbose  -h, --help  --version\n"
    "\n"
    "Exit status: 0 equivalent, 1 not equivalent, 2 could not check.\n";

enum { OPT_DATA = HM_OPT_FIRST_TOOL, OPT_RANDOM, OPT_SEQ, OPT_MAXW, OPT_SEED, OPT_REF, OPT_TOL,
       OPT_THREADS, OPT_BATCH, OPT_BACKEND, OPT_DEVICE };

struct opts {
    struct hm_cli_common common;
    const char *mode, *a, *b, *data, *ref;
    int64_t random_tokens, seq_len, max_windows;
    int64_t batch; /* logits: windows per forward pass; 0 = hm-eval's default */
    uint64_t seed;
    double tol;
    const struct hm_backend *be; /* --backend: where the models compute */
};

/* ---- inputs ------------------------------------------------------------------- */

struct seqs {
    int64_t n, T;
    int32_t *tok; /* [n, T + 1] */
};

static int load_seqs(const struct opts *o, int64_t vocab, struct seqs *s)
{
    struct hm_error err;
    if (o->random_tokens) {
        s->n = 1;
        s->T = o->random_tokens;
        s->tok = malloc(sizeof(int32_t) * (size_t)(s->T + 1));
        uint64_t st = o->seed * 0x9E3779B97F4A7C15ull + 1;
        for (int64_t i = 0; i <= s->T; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            s->tok[i] = (int32_t)((st >> 33) % (uint64_t)vocab);
        }
        return 0;
    }
    struct hm_tok_file *tf;
    if (hm_tok_open(o->data, &tf, &err) != HM_OK) {
        hm_error("cannot read '%s': %s", o->data, err.msg);
        return -1;
    }
    s->T = o->seq_len;
    s->n = (hm_tok_count(tf) - 1) / s->T;
    if (s->n > o->max_windows)
        s->n = o->max_windows;
    if (s->n < 1) {
        hm_error("cannot read '%s': fewer than %lld tokens", o->data, (long long)(s->T + 1));
        hm_tok_close(tf);
        return -1;
    }
    s->tok = malloc(sizeof(int32_t) * (size_t)(s->n * (s->T + 1)));
    for (int64_t w = 0; w < s->n; w++)
        if (hm_tok_read(tf, w * s->T, s->T + 1, s->tok + w * (s->T + 1), &err) != HM_OK) {
            hm_error("cannot read '%s': %s", o->data, err.msg);
            hm_tok_close(tf);
            return -1;
        }
    hm_tok_close(tf);
    for (int64_t i = 0; i < s->n * (s->T + 1); i++)
        if (s->tok[i] < 0 || s->tok[i] >= vocab) {
            hm_error("cannot check '%s': token id %d is outside the model vocabulary (%lld)",
                     o->data, s->tok[i], (long long)vocab);
            return -1;
        }
    return 0;
}

/* dc (may be NULL): a model whose config records a decay from teacher
 * statistics gets its A checked and set to 0 before it is placed (an edit
 * in host memory: that model loads in fp32). Every other model loads
 * straight into be with its bf16/f16 weights kept narrow: the results are
 * the fp32 load's (widening is exact) in half the memory. */
static struct hm_model *load_model(const char *path, const struct hm_backend *be,
                                   struct hm_verify_decay *dc)
{
    struct hm_ckpt *ck;
    struct hm_model *m = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    int ok = hm_ckpt_open(path, &ck, &err) == HM_OK;
    const int edit = ok && dc && hm_ckpt_config(ck)->decay_init == HM_DECAY_TEACHER;
    if (ok && !edit) {
        ok = hm_model_load_narrow(ck, hm_ckpt_config(ck), be, &m, &err) == HM_OK;
    } else if (ok) {
        ok = hm_model_load(ck, &m, &err) == HM_OK;
        if (ok) {
            struct hm_error e2;
            dc->teacher = 1;
            if (hm_decay_reset(m, &dc->layer, &dc->head, &e2) != HM_OK)
                snprintf(dc->msg, sizeof dc->msg, "%s", e2.msg);
        }
    }
    if (!ok || hm_model_place(m, be, &err) != HM_OK) {
        hm_error("cannot read '%s': %s", path, err.msg);
        if (m)
            hm_model_free(m);
        m = NULL;
    }
    hm_ckpt_close(ck);
    return m;
}

/* The report of one check, in the options' mode and format. */
static int report(const struct opts *o, const struct hm_verify_worst *lg,
                  const struct hm_verify_worst *layers, int64_t L, const char *what,
                  const struct hm_verify_decay *dc)
{
    const struct hm_verify_how how = {o->mode, o->tol, o->common.json, o->common.verbose};
    return hm_verify_report(&how, lg, layers, L, what, dc);
}

/* ---- mapping -------------------------------------------------------------------- */

struct capture {
    float *o; /* [L, T, d] host memory */
    int64_t T;
    const struct hm_backend *be;
};

static enum hm_status grab(void *ctx, int64_t l, const float *a_in, const float *qkv,
                           const float *o, int64_t T, int64_t d, struct hm_error *err)
{
    struct capture *c = ctx;
    (void)a_in;
    (void)qkv;
    (void)err;
    hm_backend_download(c->be, c->o + l * c->T * d, o, sizeof(float) * (size_t)(T * d));
    return HM_OK;
}

/* logits [T, V] (host) of one sequence, with the per-layer mixer outputs
 * captured; dl: [T, V] backend memory they are made in */
static enum hm_status run_seq(const struct hm_model *m, const int32_t *tok, int64_t T,
                              struct hm_model_ws *ws, struct capture *cap, float *dl,
                              float *logits, struct hm_error *err)
{
    struct hm_model_hooks hooks = {.on_layer = grab, .ctx = cap};
    const struct hm_backend *be = cap->be;
    enum hm_status st = hm_model_hidden(m, be, tok, T, ws, &hooks, err);
    if (st != HM_OK)
        return st;
    hm_model_head(m, dl, ws->hf, T);
    hm_backend_download(be, logits, dl, sizeof(float) * (size_t)(T * m->cfg.vocab_size));
    return hm_backend_sync(be, err);
}

static int same_skeleton(const struct hm_config *a, const struct hm_config *b)
{
    return a->family == b->family && a->vocab_size == b->vocab_size &&
           a->hidden_size == b->hidden_size && a->num_hidden_layers == b->num_hidden_layers &&
           a->num_attention_heads == b->num_attention_heads &&
           a->num_key_value_heads == b->num_key_value_heads && a->head_dim == b->head_dim &&
           a->intermediate_size == b->intermediate_size;
}

/* 1 when a and b are one input: the same file (also through links), or
 * files with the same bytes (xxh3 and size). A check of a thing against
 * itself proves nothing. */
static int same_input(const char *a, const char *b)
{
    if (strcmp(a, b) == 0 || hm_same_file(a, b))
        return 1;
    uint64_t ha, hb;
    struct hm_error e;
    return hm_is_file(a) && hm_is_file(b) && hm_xxh3_file(a, &ha, &e) == HM_OK &&
           hm_xxh3_file(b, &hb, &e) == HM_OK && ha == hb;
}

/* A hybrid mapping (contract §11): the same kept layers as a hybrid
 * hedgehog input (a teacher's are all softmax), and each tensor of a kept
 * layer stored in b with a's dtype, shape and bytes. 0, or 1 (said). */
static int check_kept(const char *a, const char *b, const struct hm_config *ca,
                      const struct hm_config *cb)
{
    if (ca->mixer != HM_MIXER_SOFTMAX && memcmp(ca->kept, cb->kept, sizeof ca->kept) != 0) {
        char ka[1024], kb[1024];
        hm_config_kept_str(ca, ka, sizeof ka);
        hm_config_kept_str(cb, kb, sizeof kb);
        hm_error("NOT equivalent: '%s' keeps softmax in layers [%s], '%s' in [%s]", a, ka, b,
                 kb);
        return 1;
    }
    if (hm_config_kept_count(cb) == 0)
        return 0;
    struct hm_ckpt *ka = NULL, *kb = NULL;
    struct hm_param_spec *sp = NULL;
    struct hm_error err;
    int bad = 0;
    const int64_t n = hm_ckpt_open(a, &ka, &err) == HM_OK && hm_ckpt_open(b, &kb, &err) == HM_OK
                          ? hm_param_specs(cb, &sp) : -1;
    if (n < 0) {
        hm_error("cannot read '%s' or '%s': %s", a, b, err.msg);
        bad = 1;
    }
    int64_t compared = 0;
    for (int64_t i = 0; i < n && !bad; i++) {
        if (sp[i].layer < 0 || hm_layer_mixer(cb, sp[i].layer) != HM_MIXER_SOFTMAX)
            continue;
        const int64_t ja = hm_ckpt_find(ka, sp[i].name), jb = hm_ckpt_find(kb, sp[i].name);
        const struct hm_ckpt_tensor *ta = ja >= 0 ? hm_ckpt_tensor_at(ka, ja) : NULL;
        const struct hm_ckpt_tensor *tb = jb >= 0 ? hm_ckpt_tensor_at(kb, jb) : NULL;
        const void *da = ta && tb && ta->dtype == tb->dtype && ta->nbytes == tb->nbytes
                             ? hm_ckpt_data_view(ka, ja) : NULL;
        const void *db = da ? hm_ckpt_data_view(kb, jb) : NULL;
        bad = !da || !db || memcmp(da, db, ta->nbytes) != 0;
        if (bad)
            hm_error("NOT equivalent: kept layer %lld's '%s' is not %s's, byte for byte",
                     (long long)sp[i].layer, sp[i].name, a);
        if (da)
            hm_ckpt_data_release(ka, ja);
        if (db)
            hm_ckpt_data_release(kb, jb);
        compared++;
    }
    if (!bad)
        fprintf(stderr, "kept softmax layers: %lld tensors byte-identical\n",
                (long long)compared);
    free(sp);
    hm_ckpt_close(ka);
    hm_ckpt_close(kb);
    return bad;
}

static int check_mapping(const struct opts *o)
{
    if (same_input(o->a, o->b)) {
        hm_error("cannot check '%s' against '%s': they are the same file (or the same bytes); "
                 "a mapping check compares a stage-1 checkpoint with its mapping", o->a, o->b);
        return 2;
    }
    struct hm_verify_decay dc = {0, -1, -1, ""};
    struct hm_model *ref = load_model(o->a, o->be, NULL);
    struct hm_model *m = ref ? load_model(o->b, o->be, &dc) : NULL;
    struct seqs s = {0};
    if (!ref || !m)
        goto fail;
    if (!same_skeleton(&ref->cfg, &m->cfg)) {
        hm_error("cannot compare '%s' and '%s': different model shapes", o->a, o->b);
        goto fail;
    }
    /* stage 1 (or the teacher: the skip-stage-1 baseline) → stage 2 */
    if (ref->cfg.mixer == HM_MIXER_HEDGEMAMBA || m->cfg.mixer != HM_MIXER_HEDGEMAMBA) {
        hm_error("cannot check '%s' against '%s': they are %s and %s models, not a stage-1 "
                 "(hedgehog, or a teacher) checkpoint and its hedgemamba mapping", o->a, o->b,
                 hm_arch_name(&ref->cfg), hm_arch_name(&m->cfg));
        goto fail;
    }
    if (check_kept(o->a, o->b, &ref->cfg, &m->cfg)) {
        hm_model_free(ref);
        hm_model_free(m);
        return 1;
    }
    if (dc.layer >= 0) { /* an A that no decay can be: nothing to run */
        int bad = report(o, NULL, NULL, 0, "A", &dc);
        hm_model_free(ref);
        hm_model_free(m);
        return bad;
    }
    if (load_seqs(o, ref->cfg.vocab_size, &s) != 0)
        goto fail;
    const int64_t L = ref->cfg.num_hidden_layers, d = ref->cfg.hidden_size, T = s.T;
    const int64_t V = ref->cfg.vocab_size;
    struct capture ca = {malloc(sizeof(float) * (size_t)(L * T * d)), T, o->be};
    struct capture cb = {malloc(sizeof(float) * (size_t)(L * T * d)), T, o->be};
    float *la = malloc(sizeof(float) * (size_t)(T * V)), *lb = malloc(sizeof(float) * (size_t)(T * V));
    float *dl = hm_backend_alloc(o->be, sizeof(float) * (size_t)(T * V));
    struct hm_verify_worst lg = {0}, *layers = calloc((size_t)L, sizeof *layers);
    struct hm_model_ws wa, wb;
    hm_model_ws_init(&wa);
    hm_model_ws_init(&wb);
    struct hm_error err;
    int rc = 0;
    for (int64_t q = 0; q < s.n && rc == 0; q++) {
        const int32_t *tok = s.tok + q * (T + 1);
        if (!ca.o || !cb.o || !la || !lb || !dl) {
            hm_error("cannot run the models: out of memory");
            rc = 2;
            break;
        }
        if (run_seq(ref, tok, T, &wa, &ca, dl, la, &err) != HM_OK ||
            run_seq(m, tok, T, &wb, &cb, dl, lb, &err) != HM_OK) {
            hm_error("cannot run the models: %s", err.msg);
            rc = 2;
            break;
        }
        for (int64_t l = 0; l < L; l++)
            hm_verify_worst_update(&layers[l], cb.o + l * T * d, ca.o + l * T * d, T, d, q);
        hm_verify_worst_update(&lg, lb, la, T, V, q);
    }
    if (rc == 0)
        rc = report(o, &lg, layers, L, "logits", &dc);
    free(ca.o), free(cb.o), free(la), free(lb), free(layers), free(s.tok);
    hm_backend_free(o->be, (void **)&dl);
    hm_model_ws_release(&wa);
    hm_model_ws_release(&wb);
    hm_model_free(ref);
    hm_model_free(m);
    return rc;
fail:
    free(s.tok);
    hm_model_free(ref);
    hm_model_free(m);
    return 2;
}

/* ---- recurrent ------------------------------------------------------------------ */

static int check_recurrent(const struct opts *o)
{
    struct hm_model *m = load_model(o->a, o->be, NULL);
    struct seqs s = {0};
    struct hm_error err;
    struct hm_model_state *st = NULL;
    if (!m || load_seqs(o, m->cfg.vocab_size, &s) != 0) {
        free(s.tok);
        hm_model_free(m);
        return 2;
    }
    const int64_t T = s.T, V = m->cfg.vocab_size;
    const struct hm_backend *be = o->be;
    if (hm_model_state_new(m, &st, &err) != HM_OK) {
        hm_error("cannot check '%s': %s", o->a, err.msg);
        free(s.tok);
        hm_model_free(m);
        return 2;
    }
    float *chunked = malloc(sizeof(float) * (size_t)(T * V));
    float *rec = malloc(sizeof(float) * (size_t)(T * V));
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    struct hm_verify_worst lg = {0};
    int rc = 0;
    for (int64_t q = 0; q < s.n && rc == 0; q++) {
        const int32_t *tok = s.tok + q * (T + 1);
        if (hm_model_forward(m, be, tok, T, chunked, &ws, &err) != HM_OK) {
            hm_error("cannot run '%s': %s", o->a, err.msg);
            rc = 2;
            break;
        }
        hm_model_state_reset(st);
        for (int64_t t = 0; t < T && rc == 0; t++)
            if (hm_model_step(m, be, st, tok[t], rec + t * V, &err) != HM_OK) {
                hm_error("cannot run '%s': %s", o->a, err.msg);
                rc = 2;
            }
        if (rc == 0)
            hm_verify_worst_update(&lg, rec, chunked, T, V, q);
    }
    if (rc == 0)
        rc = report(o, &lg, NULL, 0, "recurrent vs chunked logits", NULL);
    free(chunked), free(rec), free(s.tok);
    hm_model_ws_release(&ws);
    hm_model_state_free(st);
    hm_model_free(m);
    return rc;
}

/* ---- logits vs reference -------------------------------------------------------- */

static int check_logits(const struct opts *o)
{
    struct hm_st_file *rf;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_st_open(o->ref, &rf, &err) != HM_OK) {
        hm_error("cannot read '%s': %s", o->ref, err.msg);
        return 2;
    }
    int64_t i = hm_st_find(rf, "logits");
    const struct hm_st_tensor *t = i >= 0 ? hm_st_tensor_at(rf, i) : NULL;
    if (!t || t->dtype != HM_DTYPE_F32 || t->ndim != 3) {
        hm_error("cannot read '%s': no F32 tensor 'logits' of shape [windows, L, V]", o->ref);
        hm_st_close(rf);
        return 2;
    }
    struct hm_model *m = load_model(o->a, o->be, NULL);
    struct seqs s = {0};
    const int64_t W = t->shape[0], T = t->shape[1], V = t->shape[2];
    struct opts o2 = *o;
    o2.seq_len = T;
    o2.max_windows = W;
    if (!m)
        goto fail;
    if (V != m->cfg.vocab_size) {
        hm_error("cannot compare: '%s' has %lld logits per position, the model %lld", o->ref,
                 (long long)V, (long long)m->cfg.vocab_size);
        goto fail;
    }
    if (load_seqs(&o2, V, &s) != 0)
        goto fail;
    if (s.n < W) {
        hm_error("cannot compare: '%s' holds %lld windows of %lld, the data only %lld", o->ref,
                 (long long)W, (long long)T, (long long)s.n);
        goto fail;
    }
    const float *ref = hm_st_data_view(rf, i);
    const struct hm_backend *be = o->be;
    int64_t B = o->batch > 0 ? o->batch : hm_model_eval_batch(&m->cfg, be, T, W);
    B = B < W ? B : W;
    float *lg = malloc(sizeof(float) * (size_t)(B * T * V));
    float *rw = malloc(sizeof(float) * (size_t)(T * V));
    int32_t *in = malloc(sizeof(int32_t) * (size_t)(B * T));
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    struct hm_verify_worst w = {0};
    int rc = 0;
    if (!lg || !rw || !in) {
        hm_error("cannot compare: out of memory for %lld windows of %lld logits", (long long)B,
                 (long long)(T * V));
        rc = 2;
    }
    for (int64_t q0 = 0; q0 < W && rc == 0; q0 += B) {
        int64_t n = W - q0 < B ? W - q0 : B;
        for (int64_t b = 0; b < n; b++)
            memcpy(in + b * T, s.tok + (q0 + b) * (T + 1), sizeof(int32_t) * (size_t)T);
        if (hm_model_forward_batch(m, be, in, NULL, n, T, lg, NULL, &ws, &err) != HM_OK) {
            hm_error("cannot run '%s': %s", o->a, err.msg);
            rc = 2;
            break;
        }
        for (int64_t b = 0; b < n; b++) {
            /* the mapped reference may be unaligned: copy one window */
            memcpy(rw, (const char *)ref + sizeof(float) * (size_t)((q0 + b) * T * V),
                   sizeof(float) * (size_t)(T * V));
            hm_verify_worst_update(&w, lg + b * T * V, rw, T, V, q0 + b);
        }
    }
    free(rw), free(in);
    if (rc == 0)
        rc = report(o, &w, NULL, 0, "logits vs reference", NULL);
    free(lg), free(s.tok);
    hm_model_ws_release(&ws);
    hm_model_free(m);
    hm_st_close(rf);
    return rc;
fail:
    free(s.tok);
    hm_model_free(m);
    hm_st_close(rf);
    return 2;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"data", required_argument, NULL, OPT_DATA},
        {"random-tokens", required_argument, NULL, OPT_RANDOM},
        {"seq-len", required_argument, NULL, OPT_SEQ},
        {"max-windows", required_argument, NULL, OPT_MAXW},
        {"seed", required_argument, NULL, OPT_SEED},
        {"reference", required_argument, NULL, OPT_REF},
        {"tolerance", required_argument, NULL, OPT_TOL},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"batch", required_argument, NULL, OPT_BATCH},
        {NULL, 0, NULL, 0},
    };
    const char *backend = NULL, *device = NULL;
    struct opts o = {.common = {.progress = -1}, .seq_len = 256, .max_windows = 4, .tol = -1,
                   .be = NULL};
    int c;
    hm_cli_init("hm-verify", usage, argv);
    hm_cli_set_write_failure_code(2); /* cmp(1): could not report = could not check */
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS, longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&o.common);
        case OPT_DATA: o.data = optarg; break;
        case OPT_RANDOM: o.random_tokens = hm_parse_i64(optarg, "--random-tokens", 1, 1 << 24); break;
        case OPT_SEQ: o.seq_len = hm_parse_i64(optarg, "--seq-len", 1, 1 << 24); break;
        case OPT_MAXW: o.max_windows = hm_parse_i64(optarg, "--max-windows", 1, 1 << 30); break;
        case OPT_SEED: o.seed = (uint64_t)hm_parse_i64(optarg, "--seed", 0, INT64_MAX); break;
        case OPT_REF: o.ref = optarg; break;
        case OPT_TOL: o.tol = hm_parse_f64(optarg, "--tolerance", 0, 1); break;
        case OPT_THREADS: hm_threads_set((int)hm_parse_i64(optarg, "--threads", 1, 4096)); break;
        case OPT_BACKEND: backend = optarg; break;
        case OPT_DEVICE: device = optarg; break;
        case OPT_BATCH: o.batch = hm_parse_i64(optarg, "--batch", 1, 65536); break;
        }
    }
    int nargs = argc - optind;
    if (nargs < 1)
        hm_usage_error("missing the check: mapping, recurrent, logits or bundle");
    o.mode = argv[optind];
    int want = strcmp(o.mode, "mapping") == 0 ? 2 : 1;
    if (strcmp(o.mode, "mapping") && strcmp(o.mode, "recurrent") && strcmp(o.mode, "logits") &&
        strcmp(o.mode, "bundle"))
        hm_usage_error("unknown check '%s' (mapping, recurrent, logits or bundle)", o.mode);
    if (nargs - 1 != want)
        hm_usage_error("'%s' takes %d %s%s", o.mode, want,
                       strcmp(o.mode, "bundle") ? "checkpoint" : "bundle", want > 1 ? "s" : "");
    o.a = argv[optind + 1];
    o.b = want == 2 ? argv[optind + 2] : NULL;
    if (strcmp(o.mode, "bundle") == 0) {
        if (o.data || o.random_tokens || o.ref)
            hm_usage_error("bundle takes no --data, --random-tokens or --reference");
        return hm_cli_finish(hm_verify_bundle_cli(o.a, o.common.json));
    }
    if (!!o.data == !!o.random_tokens && strcmp(o.mode, "logits") != 0)
        hm_usage_error("give one of --data or --random-tokens");
    if (strcmp(o.mode, "logits") == 0 && (!o.ref || !o.data || o.random_tokens))
        hm_usage_error("logits needs --reference and --data");
    if (o.tol < 0)
        o.tol = strcmp(o.mode, "logits") == 0 ? 1e-4 : 1e-5;
    o.be = hm_cli_backend(device, backend);
    int rc = strcmp(o.mode, "mapping") == 0 ? check_mapping(&o)
             : strcmp(o.mode, "recurrent") == 0 ? check_recurrent(&o)
                                                : check_logits(&o);
    return hm_cli_finish(rc);
}
