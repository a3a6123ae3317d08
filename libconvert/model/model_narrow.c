/* model_narrow.c — frozen models at the width they need (model.h
 * hm_model_load_narrow): layer matrices kept in the checkpoint's bf16/f16 in
 * the backend's memory, one layer widened at a time by the widen_rows op.
 *
 * Gotchas: all layers' narrow views share one widened buffer at the same
 * offsets, so a pointer into it is only valid for the layer last widened;
 * llama's q, k, v share one slot and stay back to back in it (table order). */
#include "model.h"
#include "model_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixer.h"
#include "narrow.h"

/* The narrow kind of ck's tensor name, or −1 (fp32, absent). */
static int stored_kind(const struct hm_ckpt *ck, const char *name)
{
    const int64_t j = hm_ckpt_find(ck, name);
    const enum hm_dtype dt = j >= 0 ? hm_ckpt_tensor_at(ck, j)->dtype : HM_DTYPE_F32;
    return dt == HM_DTYPE_BF16 ? HM_NARROW_BF16 : dt == HM_DTYPE_F16 ? HM_NARROW_F16 : -1;
}

/* The narrow kind every teacher matrix of a layer (mixer and MLP groups)
 * in ck shares, or −1 (none, mixed, fp32, absent: the plain loader reports
 * what is wrong). mask [n] marks them. A student's own layer tensors
 * (feature maps, SSM, conv, gate: trained, fp32 as hm writes them) stay
 * fp32 whatever their dtype, so a bf16 teacher's hedgehog keeps its
 * teacher matrices narrow. Embeddings stored in that kind join them.
 * A trainee (hm_model_load_trainee): its embeddings alone, in their kind. */
static int narrow_kind(const struct hm_ckpt *ck, const struct hm_param_spec *specs, int64_t n,
                       int trainee, unsigned char *mask)
{
    int kind = -1;
    /* a trainee keeps only its (frozen) embeddings narrow: the kind is theirs */
    for (int64_t i = 0; trainee && kind < 0 && i < n; i++)
        if (specs[i].group == HM_PG_EMBED && specs[i].ndim == 2)
            kind = stored_kind(ck, specs[i].name);
    for (int64_t i = 0; !trainee && i < n; i++) {
        mask[i] = specs[i].ndim == 2 && specs[i].layer >= 0 &&
                  (specs[i].group == HM_PG_MIXER || specs[i].group == HM_PG_MLP);
        if (!mask[i])
            continue;
        const int k = stored_kind(ck, specs[i].name);
        if (k < 0 || (kind >= 0 && k != kind))
            return -1;
        kind = k;
    }
    /* the embeddings (and an untied head) join when stored in that kind:
     * mask 2, read by hm_model_embed / hm_model_head, never widened whole */
    for (int64_t i = 0; kind >= 0 && i < n; i++)
        if (specs[i].group == HM_PG_EMBED && specs[i].ndim == 2 &&
            stored_kind(ck, specs[i].name) == kind)
            mask[i] = 2;
    return kind;
}

/* Tensor i's bits from ck into its narrow slot on be (shape checked as
 * hm_ckpt_load_f32 does); notes the first non-finite value. */
static enum hm_status upload_narrow(struct hm_model *m, int64_t i, const struct hm_ckpt *ck,
                                    struct hm_error *err)
{
    const struct hm_tensor_view *v = &m->views[i];
    const int64_t j = hm_ckpt_find(ck, v->spec.name);
    const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, j);
    if (t->ndim != 2 || t->shape[0] != v->spec.shape[0] || t->shape[1] != v->spec.shape[1])
        return hm_error_set(err, HM_ERR_INVALID,
                            "tensor '%s' has %d dims [%lld, ...], expected [%lld, %lld]",
                            v->spec.name, t->ndim, (long long)(t->ndim ? t->shape[0] : 0),
                            (long long)v->spec.shape[0], (long long)v->spec.shape[1]);
    const uint16_t *bits = hm_ckpt_data_view(ck, j);
    const struct hm_model_narrow *nw = m->narrow;
    for (int64_t e = 0; m->bad_view < 0 && e < v->numel; e++) {
        const float x = nw->kind == HM_NARROW_F16 ? hm_f16_f32(bits[e]) : hm_bf16_f32(bits[e]);
        if (!isfinite(x))
            m->bad_view = i, m->bad_at = e;
    }
    hm_backend_upload(m->be, (void *)v->narrow, bits, sizeof(uint16_t) * (size_t)v->numel);
    hm_ckpt_data_release(ck, j);
    return HM_OK;
}

/* m's view named name of numel values, or NULL. */
static const struct hm_tensor_view *named_view(const struct hm_model *m, const char *name,
                                               int64_t numel)
{
    for (int64_t i = 0; m && i < m->n_views; i++)
        if (m->views[i].numel == numel && strcmp(m->views[i].spec.name, name) == 0)
            return &m->views[i];
    return NULL;
}

/* share's narrow view named name of numel values, or NULL. */
static const struct hm_tensor_view *shared_view(const struct hm_model *share, const char *name,
                                                int64_t numel)
{
    const struct hm_tensor_view *v = named_view(share, name, numel);
    return v && v->narrow ? v : NULL;
}

/* 1 when ck's tensor name is stored in share's narrow kind with the very
 * bits share keeps narrow under that name (compared through one bounded
 * host buffer: share's bits may be in device memory). */
static int same_bits(const struct hm_model *share, int kind, const struct hm_ckpt *ck,
                     const char *name)
{
    const int64_t j = hm_ckpt_find(ck, name);
    const struct hm_ckpt_tensor *t = j >= 0 ? hm_ckpt_tensor_at(ck, j) : NULL;
    if (!t || !share->narrow || (int)share->narrow->kind != kind || t->ndim != 2)
        return 0;
    const struct hm_tensor_view *v = shared_view(share, name, t->shape[0] * t->shape[1]);
    enum { PIECE = 1 << 21 }; /* uint16 values: 4 MiB */
    uint16_t *buf = v ? malloc(sizeof(uint16_t) * PIECE) : NULL;
    const uint16_t *bits = buf ? hm_ckpt_data_view(ck, j) : NULL;
    int same = bits != NULL;
    for (int64_t e = 0; same && e < v->numel; e += PIECE) {
        const size_t n = (size_t)(v->numel - e < PIECE ? v->numel - e : PIECE);
        hm_backend_download(share->be, buf, v->narrow + e, sizeof(uint16_t) * n);
        same = memcmp(buf, bits + e, sizeof(uint16_t) * n) == 0;
    }
    if (bits)
        hm_ckpt_data_release(ck, j);
    free(buf);
    return same;
}

/* A narrow head's buffers: *wide grows to hold min(V, HM_HEAD_MIN_ROWS)
 * rows of d; *tmp, its logits' scratch, holds one row of logits at least. */
static void head_sizes(const struct hm_config *c, int64_t *wide, int64_t *tmp)
{
    const int64_t d = c->hidden_size, V = c->vocab_size;
    const int64_t rows = V < HM_HEAD_MIN_ROWS ? V : HM_HEAD_MIN_ROWS;
    *wide = rows * d > *wide ? rows * d : *wide;
    *tmp = V > HM_HEAD_TMP_FLOATS ? V : HM_HEAD_TMP_FLOATS;
}

/* A trainee's head backward widens [V, col_w] columns at a time: col_w the
 * largest divisor of d up to HM_HEAD_BW_COLS; *wide grows to hold them. */
static int64_t head_bw_cols(const struct hm_config *c, int64_t *wide)
{
    const int64_t d = c->hidden_size, V = c->vocab_size;
    int64_t w = d < HM_HEAD_BW_COLS ? d : HM_HEAD_BW_COLS;
    while (d % w)
        w--;
    *wide = V * w > *wide ? V * w : *wide;
    return w;
}

/* Carves m->narrow's bits and widened buffer over the masked views and
 * points the views and slots at them; allocates both on m->be (a trainee's
 * also the head backward's column ids). Views of mask 3 point at share's
 * bits of the same name instead (load_narrow). */
static enum hm_status carve_narrow(struct hm_model *m, const unsigned char *mask, int kind,
                                   int trainee, const struct hm_model *share,
                                   struct hm_error *err)
{
    struct hm_model_narrow *nw = calloc(1, sizeof *nw);
    if (!nw)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    m->narrow = nw;
    *nw = (struct hm_model_narrow){.kind = (enum hm_narrow)kind, .layer = -1};
    int64_t cur = -1, in_layer = 0, head = 0;
    for (int64_t i = 0; i < m->n_views; i++) {
        if (!mask[i])
            continue;
        nw->n_bits += mask[i] == 3 ? 0 : m->views[i].numel; /* 3: borrowed bits */
        if (mask[i] >= 2) {
            head = 1;
            continue;
        }
        if (m->views[i].spec.layer != cur)
            cur = m->views[i].spec.layer, in_layer = 0;
        in_layer += m->views[i].numel;
        nw->n_wide = in_layer > nw->n_wide ? in_layer : nw->n_wide;
    }
    if (head) /* the head is widened a tile of rows at a time, into wide */
        head_sizes(&m->cfg, &nw->n_wide, &nw->n_tmp);
    if (head && trainee)
        nw->col_w = head_bw_cols(&m->cfg, &nw->n_wide);
    nw->bits = hm_backend_alloc(m->be, sizeof(uint16_t) * (size_t)nw->n_bits);
    nw->wide = hm_backend_alloc(m->be, sizeof(float) * (size_t)nw->n_wide);
    nw->tmp = nw->n_tmp ? hm_backend_alloc(m->be, sizeof(float) * (size_t)nw->n_tmp) : NULL;
    const int64_t V = m->cfg.vocab_size, per_row = nw->col_w ? m->cfg.hidden_size / nw->col_w : 0;
    if (nw->col_w) {
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)V);
        nw->col_ids = ids ? hm_backend_alloc(m->be, sizeof(int32_t) * (size_t)V) : NULL;
        for (int64_t v = 0; nw->col_ids && v < V; v++)
            ids[v] = (int32_t)(v * per_row);
        if (nw->col_ids)
            hm_backend_upload(m->be, nw->col_ids, ids, sizeof(int32_t) * (size_t)V);
        free(ids);
    }
    if (!nw->bits || !nw->wide || (nw->n_tmp && !nw->tmp) || (nw->col_w && !nw->col_ids))
        return hm_error_set(err, HM_ERR_NOMEM,
                            "out of memory for %.2f GB of narrow weights and %.2f GB for a "
                            "widened layer on backend '%s'", 2e-9 * (double)nw->n_bits,
                            4e-9 * (double)(nw->n_wide + nw->n_tmp), hm_backend_name(m->be));
    int64_t boff = 0, woff = 0;
    cur = -1;
    for (int64_t i = 0; i < m->n_views; i++) {
        struct hm_tensor_view *v = &m->views[i];
        if (!mask[i])
            continue;
        if (mask[i] == 3) {
            v->narrow = shared_view(share, v->spec.name, v->numel)->narrow;
        } else {
            v->narrow = nw->bits + boff;
            boff += v->numel;
        }
        if (mask[i] >= 2) { /* no fp32 copy anywhere: the slot stays NULL */
            v->data = NULL;
            if (v->spec.slot == HM_SLOT_EMBED)
                nw->embed = v->narrow;
            else
                nw->head = v->narrow;
            continue;
        }
        if (v->spec.layer != cur)
            cur = v->spec.layer, woff = 0;
        v->data = nw->wide + woff;
        woff += v->numel;
        float **slot = hm_model_slot(m, &v->spec);
        if (!*slot)
            *slot = v->data;
    }
    if (m->cfg.tie_word_embeddings)
        nw->head = nw->embed;
    return HM_OK;
}

/* Records m's first non-finite fp32 weight while m is in host memory (the
 * narrow ones are scanned as they upload): hm_model_first_nonfinite answers
 * from it once the weights are on the backend. */
static void scan(struct hm_model *m)
{
    const char *bad = hm_model_first_nonfinite(m, &m->bad_at);
    m->bad_view = -1;
    for (int64_t i = 0; bad && i < m->n_views; i++)
        if (m->views[i].spec.name == bad)
            m->bad_view = i;
    m->scanned = 1;
}

/* hm_model_load_narrow (trainee 0, share NULL), hm_model_load_trainee (1)
 * and hm_model_load_teacher (0, share: narrow embeddings that are share's
 * bytes are borrowed, mask 3). */
static enum hm_status load_narrow(const struct hm_ckpt *ck, const struct hm_config *cfg,
                                  const struct hm_backend *be, int trainee,
                                  const struct hm_model *share, struct hm_model **out,
                                  struct hm_error *err)
{
    *out = NULL;
    struct hm_param_spec *specs = NULL;
    struct hm_model *m = NULL;
    const int64_t n = hm_param_specs(cfg, &specs);
    unsigned char *mask = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    enum hm_status st = mask ? hm_model_check_tensors(ck, err)
                             : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    const int kind = st == HM_OK ? narrow_kind(ck, specs, n, trainee, mask) : -1;
    for (int64_t i = 0; share && kind >= 0 && i < n; i++)
        if (mask[i] == 2 && same_bits(share, kind, ck, specs[i].name))
            mask[i] = 3;
    free(specs);
    if (st == HM_OK && kind < 0) { /* nothing to keep narrow */
        free(mask);
        if ((st = hm_model_load_as(ck, cfg, &m, err)) == HM_OK)
            scan(m);
        if (st == HM_OK && (st = hm_model_place(m, be, err)) == HM_OK)
            *out = m;
        else
            hm_model_free(m);
        return st;
    }
    if (st == HM_OK)
        st = hm_model_build(cfg, mask, &m, err);
    for (int64_t i = 0; st == HM_OK && i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        if (!mask[i])
            st = hm_ckpt_load_f32(ck, v->spec.name, v->spec.ndim, v->spec.shape, v->data, err);
    }
    if (st == HM_OK)
        scan(m); /* the fp32 part, while it is in host memory */
    if (st == HM_OK)
        st = hm_model_place(m, be, err); /* the fp32 part: adopted on host memory */
    if (st == HM_OK)
        st = carve_narrow(m, mask, kind, trainee, share, err);
    for (int64_t i = 0; st == HM_OK && i < m->n_views; i++)
        if (mask[i] && mask[i] != 3)
            st = upload_narrow(m, i, ck, err);
    free(mask);
    if (st != HM_OK) {
        hm_model_free(m);
        return st;
    }
    *out = m;
    return HM_OK;
}

enum hm_status hm_model_load_narrow(const struct hm_ckpt *ck, const struct hm_config *cfg,
                                    const struct hm_backend *be, struct hm_model **out,
                                    struct hm_error *err)
{
    return load_narrow(ck, cfg, be, 0, NULL, out, err);
}

enum hm_status hm_model_load_teacher(const struct hm_ckpt *ck, const struct hm_model *trainee,
                                     const struct hm_backend *be, struct hm_model **out,
                                     struct hm_error *err)
{
    return load_narrow(ck, hm_ckpt_config(ck), be, 0, trainee, out, err);
}

enum hm_status hm_model_load_trainee(const struct hm_ckpt *ck, const struct hm_backend *be,
                                     struct hm_model **out, struct hm_error *err)
{
    return load_narrow(ck, hm_ckpt_config(ck), be, 1, NULL, out, err);
}

int hm_model_narrow_plan(const struct hm_ckpt *ck, const struct hm_config *cfg, int trainee,
                         int head, double *f32, double *narrow, double *wide,
                         enum hm_dtype *kind)
{
    struct hm_param_spec *specs = NULL;
    const int64_t n = hm_param_specs(cfg, &specs);
    unsigned char *mask = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    *f32 = *narrow = *wide = 0;
    *kind = HM_DTYPE_F32;
    if (!mask) {
        free(specs);
        return -1;
    }
    const int k = narrow_kind(ck, specs, n, trainee, mask);
    int64_t cur = -1, in_layer = 0, most = 0, narrow_head = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t e = 1;
        for (int d = 0; d < specs[i].ndim; d++)
            e *= specs[i].shape[d];
        if (k < 0 || !mask[i]) {
            *f32 += 4.0 * (double)e;
            continue;
        }
        *narrow += 2.0 * (double)e;
        if (mask[i] == 2) { /* as carve_narrow: no widened copy, the head by tiles */
            narrow_head = head;
            continue;
        }
        if (specs[i].layer != cur)
            cur = specs[i].layer, in_layer = 0;
        in_layer += e;
        most = in_layer > most ? in_layer : most;
    }
    if (k >= 0 && narrow_head) {
        int64_t tmp;
        head_sizes(cfg, &most, &tmp);
        if (trainee) /* the backward's column blocks and their ids (as carve_narrow) */
            head_bw_cols(cfg, &most), tmp += cfg->vocab_size;
        most += tmp;
    }
    *wide = 4.0 * (double)most;
    if (k >= 0)
        *kind = k == HM_NARROW_F16 ? HM_DTYPE_F16 : HM_DTYPE_BF16;
    free(mask);
    free(specs);
    return 0;
}

/* The view of base named like v with v's size, or NULL. */
static const struct hm_tensor_view *base_view(const struct hm_model *base,
                                              const struct hm_tensor_view *v)
{
    return named_view(base, v->spec.name, v->numel);
}

enum hm_status hm_model_extend(const struct hm_model *base, const struct hm_config *cfg,
                               struct hm_model **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_param_spec *specs = NULL;
    const int64_t n = hm_param_specs(cfg, &specs);
    unsigned char *shared = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    if (!shared) {
        free(specs);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    int64_t n_shared = 0;
    for (int64_t i = 0; i < n; i++) {
        struct hm_tensor_view v = {.spec = specs[i], .numel = 1};
        for (int k = 0; k < specs[i].ndim; k++)
            v.numel *= specs[i].shape[k];
        shared[i] = base_view(base, &v) != NULL;
        n_shared += shared[i];
    }
    free(specs);
    struct hm_model *m = NULL;
    enum hm_status st = n_shared ? hm_model_build(cfg, shared, &m, err)
                                 : hm_error_set(err, HM_ERR_INVALID, "%s shares no tensor with "
                                                "%s", hm_arch_name(cfg), hm_arch_name(&base->cfg));
    if (st != HM_OK) {
        free(shared);
        return st;
    }
    /* the owned part: identity values in host memory, then onto base's backend
     * (adopted there on host memory); the shared pointers come after, so the
     * move does not touch them */
    for (int64_t l = 0; l < cfg->num_hidden_layers; l++) {
        const struct hm_mixer_unit *u = hm_layer_unit(cfg, l);
        if (u->identity)
            u->identity(m, l);
    }
    if ((st = hm_model_place(m, base->be, err)) != HM_OK) {
        free(shared);
        hm_model_free(m);
        return st;
    }
    for (int64_t i = 0; i < m->n_views; i++) {
        struct hm_tensor_view *v = &m->views[i];
        if (!shared[i])
            continue;
        const struct hm_tensor_view *b = base_view(base, v);
        v->data = b->data;
        v->narrow = b->narrow;
        float **slot = hm_model_slot(m, &v->spec);
        if (!*slot)
            *slot = v->data;
    }
    free(shared);
    if (cfg->tie_word_embeddings)
        m->embed_out = m->embed_in;
    m->base = base;
    m->narrow = base->narrow; /* borrowed, with its widened layer */
    *out = m;
    return HM_OK;
}

void hm_model_widen_layer(const struct hm_model *m, int64_t l)
{
    struct hm_model_narrow *nw = m->narrow;
    if (!nw || nw->layer == l)
        return;
    for (int64_t i = 0; i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        if (v->narrow && v->spec.layer == l)
            hm_backend_widen_rows(m->be, v->data, NULL, v->narrow, v->spec.shape[0],
                                  v->spec.shape[1], nw->kind);
    }
    nw->layer = l;
}

void hm_model_embed(const struct hm_model *m, float *y, const int32_t *tokens, int64_t N)
{
    const int64_t d = m->cfg.hidden_size;
    if (m->narrow && m->narrow->embed)
        hm_backend_widen_rows(m->be, y, tokens, m->narrow->embed, N, d, m->narrow->kind);
    else
        hm_backend_embedding_forward(m->be, y, tokens, m->embed_in, N, d);
}

/* Parts of n of at most most each, as even as can be (sizes differ by one
 * at most): a product never shrinks to a single row or column (BLAS may
 * route those to another kernel) unless n itself is 1. */
static int64_t even_part(int64_t n, int64_t most)
{
    const int64_t k = (n + most - 1) / most;
    return (n + k - 1) / k;
}

void hm_model_head(const struct hm_model *m, float *y, const float *h, int64_t N)
{
    const int64_t d = m->cfg.hidden_size, V = m->cfg.vocab_size;
    struct hm_model_narrow *nw = m->narrow;
    if (!nw || !nw->head) {
        hm_backend_matmul_forward(m->be, y, h, m->embed_out, NULL, N, d, V);
        return;
    }
    /* wide holds >= min(V, HM_HEAD_MIN_ROWS) rows; tmp >= HM_HEAD_TMP_FLOATS */
    const int64_t tile = even_part(V, nw->n_wide / d < V ? nw->n_wide / d : V);
    const int64_t most = nw->n_tmp / tile > 1 ? nw->n_tmp / tile : 1;
    const int64_t chunk = even_part(N, most);
    nw->layer = -1; /* wide now holds the head's tile */
    for (int64_t v0 = 0; v0 < V; v0 += tile) {
        const int64_t nv = V - v0 < tile ? V - v0 : tile;
        hm_backend_widen_rows(m->be, nw->wide, NULL, nw->head + v0 * d, nv, d, nw->kind);
        for (int64_t r0 = 0; r0 < N; r0 += chunk) {
            const int64_t nr = N - r0 < chunk ? N - r0 : chunk;
            hm_backend_matmul_forward(m->be, nw->tmp, h + r0 * d, nw->wide, NULL, nr, d, nv);
            hm_backend_copy2d(m->be, y + r0 * V + v0, V, nw->tmp, nv, nr, nv);
        }
    }
}

void hm_model_head_backward(const struct hm_model *m, float *dx, const float *dy, int64_t N)
{
    const int64_t d = m->cfg.hidden_size, V = m->cfg.vocab_size;
    struct hm_model_narrow *nw = m->narrow;
    if (!nw || !nw->head) {
        hm_backend_matmul_backward(m->be, dx, NULL, NULL, dy, NULL, m->embed_out, N, d, V);
        return;
    }
    if (!nw->col_w)
        abort(); /* a programmer error: only a trainee's narrow head runs backward */
    const int64_t w = nw->col_w, chunk = even_part(N, nw->n_tmp / w);
    nw->layer = -1; /* wide now holds the head's column block */
    for (int64_t c0 = 0; c0 < d; c0 += w) {
        /* columns [c0, c0 + w) of every row: rows v·(d/w) of the bits at c0, viewed [.., w] */
        hm_backend_widen_rows(m->be, nw->wide, nw->col_ids, nw->head + c0, V, w, nw->kind);
        for (int64_t r0 = 0; r0 < N; r0 += chunk) {
            const int64_t nr = N - r0 < chunk ? N - r0 : chunk;
            hm_backend_matmul_backward(m->be, nw->tmp, NULL, NULL, dy + r0 * V, NULL, nw->wide,
                                       nr, w, V);
            hm_backend_copy2d(m->be, dx + r0 * d + c0, d, nw->tmp, w, nr, w);
        }
    }
}

double hm_model_weight_bytes(const struct hm_model *m)
{
    const struct hm_model_narrow *nw = m->narrow;
    return 4.0 * (double)m->n_params +
           (nw ? 2.0 * (double)nw->n_bits + 4.0 * (double)(nw->n_wide + nw->n_tmp) +
                     (nw->col_w ? 4.0 * (double)m->cfg.vocab_size : 0.0)
               : 0.0);
}
