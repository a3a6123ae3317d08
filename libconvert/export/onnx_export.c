/* onnx_export.c — the ONNX graph of a student (contract §9, onnx_export.h;
 * docs/onnx.md describes the graph for its users).
 *
 * One ModelProto, opset 17 of the standard domain, IR version 8. Every
 * per-token computation runs on the flattened rows N = batch·seq at once
 * (Gemm with transB = 1 keeps the checkpoint's [out, in] weights as they
 * are); only the two recurrent parts see the [batch, seq] structure:
 *   - the causal depthwise conv (hedgemamba): Concat(past_conv, x^T) along
 *     time, then Conv(group = channels, no padding); the last K−1 columns of
 *     the concatenation are present_conv;
 *   - the state recurrence: a Scan over seq carrying S [batch, n_h, 2F, p+1],
 *     S_t = α_t S_{t−1} + (Δ_t B_t) [v_t; 1]^T, n_t = C_t^T S_t; everything
 *     else (α = exp(Δ A), Δ B, the ones channel, y = n[0:p] / (n[p] + ε) +
 *     D v) is per token outside the Scan.
 * Rotary angles are computed in the graph, θ = (float)position_ids ·
 * inv_freq (one fp32 product as hm's kernels; inv_freq is hm's own, llama3
 * scaling included), so any position works.
 *
 * Initializers: every tensor of the model under its checkpoint name and
 * shape (the raw fp32 bytes of hm's storage, borrowed until packing, or
 * with external data until the data file is written), then
 * the graph's constants "hm.const.<n>" and "hm.rotary.inv_freq".
 *
 * Gotchas that have caused bugs (or would):
 *   - llama's q/k/v_proj are three tensors behind one pointer: the graph
 *     concatenates the initializers (ORT folds it) to get hm's [q | k | v];
 *   - the conv reads the projection before the split into heads (llama: before
 *     the GQA expansion), in hm's channel order;
 *   - ε = 1e-6 is added to n[p] only (the normalizer), and D v after the
 *     division; the gate multiplies the merged heads;
 *   - protobuf messages are limited to 2 GiB: past HM_ONNX_EXTERNAL_ABOVE the
 *     weights go to external data (onnx_export.h); the graph never holds them
 *     then, and hm_onnx_write_data streams them from the model's own memory. */
#include "onnx_export.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "config.h"
#include "mixer.h"
#include "model.h"
#include "onnx_graph.h"

#define HM_ONNX_OPSET 17
#define HM_ONNX_IR_VERSION 8

#define N_SHAPES 16

struct ex {
    struct og_builder *b;
    struct og_graph *g;
    const struct hm_model *m;
    const struct hm_config *c;
    int64_t nh, nkv, p, r, F, Da, Q, K, V;
    const char *bs;          /* Shape(input_ids): [2] = [batch, seq] */
    const char *cos, *sin;   /* [N, 1, r/2] */
    const char *eps_lin;     /* ε of the normalizer */
    struct { int64_t tail[4]; int n; const char *name; } shapes[N_SHAPES];
    int n_shapes;
};

/* ---- small helpers ---------------------------------------------------------- */

/* Name of the k-th tensor of (layer, slot) (checkpoint name), or NULL. */
static const char *wname(const struct ex *e, int64_t layer, enum hm_slot slot, int k)
{
    for (int64_t i = 0; i < e->m->n_views; i++) {
        const struct hm_param_spec *s = &e->m->views[i].spec;
        if (s->slot == slot && s->layer == layer && k-- == 0)
            return s->name;
    }
    return NULL;
}

static const char *op1(struct ex *e, const char *op, const char *x)
{
    return og_node(e->g, op, OG_IN(x), NULL, NULL, 0);
}

static const char *op2(struct ex *e, const char *op, const char *x, const char *y)
{
    return og_node(e->g, op, OG_IN(x, y), NULL, NULL, 0);
}

static const char *ints(struct ex *e, const int64_t *v, int64_t n)
{
    return og_const_i64(e->g, v, n);
}

#define INTS(e, ...) \
    ints(e, (const int64_t[]){__VA_ARGS__},                    \
         sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static const char *reshape(struct ex *e, const char *x, const char *shape)
{
    return op2(e, "Reshape", x, shape);
}

static const char *unsqueeze(struct ex *e, const char *x, int64_t axis)
{
    return op2(e, "Unsqueeze", x, INTS(e, axis));
}

static const char *transpose(struct ex *e, const char *x, const int64_t *perm, int n)
{
    const struct og_attr a = {.name = "perm", .kind = OG_A_INTS, .ints = perm, .n = n};
    return og_node(e->g, "Transpose", OG_IN(x), NULL, &a, 1);
}

/* The shape [batch, seq, tail...] (a cached Concat of Shape(input_ids)). */
static const char *shape_bs(struct ex *e, const int64_t *tail, int n)
{
    for (int i = 0; i < e->n_shapes; i++)
        if (e->shapes[i].n == n && !memcmp(e->shapes[i].tail, tail, sizeof(int64_t) * (size_t)n))
            return e->shapes[i].name;
    const struct og_attr ax = OG_AI("axis", 0);
    const char *s = og_node(e->g, "Concat", OG_IN(e->bs, ints(e, tail, n)), NULL, &ax, 1);
    if (e->n_shapes < N_SHAPES) {
        memcpy(e->shapes[e->n_shapes].tail, tail, sizeof(int64_t) * (size_t)n);
        e->shapes[e->n_shapes].n = n;
        e->shapes[e->n_shapes++].name = s;
    }
    return s;
}

#define SHAPE_BS(e, ...) \
    shape_bs(e, (const int64_t[]){__VA_ARGS__},                \
             (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

/* y = x W^T + b: x [N, in], W [out, in] (checkpoint layout), b [out] or NULL. */
static const char *linear(struct ex *e, const char *x, const char *w, const char *b)
{
    const struct og_attr t = OG_AI("transB", 1);
    if (b)
        return og_node(e->g, "Gemm", OG_IN(x, w, b), NULL, &t, 1);
    return og_node(e->g, "Gemm", OG_IN(x, w), NULL, &t, 1);
}

static const char *concat(struct ex *e, const char *const *in, int n, int64_t axis)
{
    const struct og_attr a = OG_AI("axis", axis);
    return og_node(e->g, "Concat", in, n, NULL, &a, 1);
}

/* Split x along axis into n parts of the given sizes. */
static void split(struct ex *e, const char *x, int64_t axis, const int64_t *sizes, int n,
                  const char **outs)
{
    const struct og_attr a = OG_AI("axis", axis);
    og_node_n(e->g, "Split", OG_IN(x, ints(e, sizes, n)), n, NULL, outs, &a, 1);
}

static const char *silu(struct ex *e, const char *x)
{
    return op2(e, "Mul", x, op1(e, "Sigmoid", x));
}

/* ---- family pieces ------------------------------------------------------------ */

/* The family's norm over the last dim of x [N, d]: LayerNorm (w, b) or
 * RMSNorm x / sqrt(mean(x²) + eps) · w. */
static const char *norm(struct ex *e, const char *x, const char *w, const char *b)
{
    const float eps = (float)e->c->layer_norm_eps;
    if (e->c->norm_kind == HM_NORM_LAYER) {
        const struct og_attr a[2] = {OG_AI("axis", -1), OG_AF("epsilon", eps)};
        return og_node(e->g, "LayerNormalization", OG_IN(x, w, b), NULL, a, 2);
    }
    const struct og_attr a[2] = {OG_AINTS("axes", -1), OG_AI("keepdims", 1)};
    const char *ms = og_node(e->g, "ReduceMean", OG_IN(op2(e, "Mul", x, x)), NULL, a, 2);
    const char *den = op1(e, "Sqrt", op2(e, "Add", ms, og_const_scalar(e->g, eps)));
    return op2(e, "Mul", op2(e, "Div", x, den), w);
}

static const char *gelu(struct ex *e, const char *x)
{
    const char *half_x = op2(e, "Mul", x, og_const_scalar(e->g, 0.5f));
    const char *one = og_const_scalar(e->g, 1.0f);
    if (e->c->hidden_act == HM_ACT_GELU_TANH) { /* 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³))) */
        const char *x3 = op2(e, "Mul", op2(e, "Mul", x, x), x);
        const char *in = op2(e, "Add", x, op2(e, "Mul", x3, og_const_scalar(e->g, 0.044715f)));
        const char *k = og_const_scalar(e->g, 0.7978845608028654f); /* √(2/π) */
        const char *t = op1(e, "Tanh", op2(e, "Mul", in, k));
        return op2(e, "Mul", half_x, op2(e, "Add", t, one));
    }
    /* exact: 0.5 x (1 + erf(x / √2)) */
    const char *er = op1(e, "Erf", op2(e, "Div", x, og_const_scalar(e->g, 1.4142135623730951f)));
    return op2(e, "Mul", half_x, op2(e, "Add", er, one));
}

static const char *mlp(struct ex *e, int64_t l, const char *x)
{
    const char *up = linear(e, x, wname(e, l, HM_SLOT_FC1_W, 0), wname(e, l, HM_SLOT_FC1_B, 0));
    const char *act;
    if (e->c->mlp_kind == HM_MLP_SWIGLU) {
        const char *gate =
            linear(e, x, wname(e, l, HM_SLOT_FCG_W, 0), wname(e, l, HM_SLOT_FCG_B, 0));
        act = op2(e, "Mul", up, silu(e, gate));
    } else {
        act = gelu(e, up);
    }
    return linear(e, act, wname(e, l, HM_SLOT_FC2_W, 0), wname(e, l, HM_SLOT_FC2_B, 0));
}

/* The q/k/v projection [N, Q] (neox: fused interleaved; llama: [q | k | v]). */
static const char *projection(struct ex *e, int64_t l, const char *a)
{
    if (e->c->qkv_layout == HM_QKV_FUSED)
        return linear(e, a, wname(e, l, HM_SLOT_QKV_W, 0), wname(e, l, HM_SLOT_QKV_B, 0));
    const char *w[3], *b[3];
    for (int k = 0; k < 3; k++) {
        w[k] = wname(e, l, HM_SLOT_QKV_W, k);
        b[k] = wname(e, l, HM_SLOT_QKV_B, k);
    }
    return linear(e, a, concat(e, w, 3, 0), b[0] ? concat(e, b, 3, 0) : NULL);
}

/* The causal depthwise conv of layer l over x [N, Q] with the carried
 * window past_conv.{l} [batch, Q, K−1]; writes present_conv.{l}. */
static const char *causal_conv(struct ex *e, int64_t l, const char *x)
{
    const int64_t Q = e->Q, K = e->K;
    const char *past = og_strf(e->b, "past_conv.%lld", (long long)l);
    const char *present = og_strf(e->b, "present_conv.%lld", (long long)l);
    const char *xt = transpose(e, reshape(e, x, SHAPE_BS(e, Q)), (const int64_t[]){0, 2, 1}, 3);
    const char *cat = K > 1 ? concat(e, OG_IN(past, xt), 2) : xt; /* [batch, Q, K−1+seq] */
    if (K > 1)
        og_node(e->g, "Slice", OG_IN(cat, INTS(e, -(K - 1)), INTS(e, INT64_MAX), INTS(e, 2)),
                present, NULL, 0);
    else
        og_node(e->g, "Identity", OG_IN(past), present, NULL, 0);
    const char *w = reshape(e, wname(e, l, HM_SLOT_CONV_W, 0), INTS(e, Q, 1, K));
    const struct og_attr a[2] = {OG_AI("group", Q), OG_AINTS("kernel_shape", K)};
    const char *c = og_node(e->g, "Conv", OG_IN(cat, w, wname(e, l, HM_SLOT_CONV_B, 0)), NULL,
                            a, 2); /* [batch, Q, seq] */
    return reshape(e, transpose(e, c, (const int64_t[]){0, 2, 1}, 3), INTS(e, -1, Q));
}

/* The per-query-head copies of k or v [..., n_kv, ...] along axis: head h
 * reads group h / (n_h / n_kv) (GQA). */
static const char *expand_kv(struct ex *e, const char *x, int64_t axis)
{
    const int64_t nh = e->nh, nkv = e->nkv;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)nh);
    if (!idx) {
        og_fail(e->b);
        return x;
    }
    for (int64_t h = 0; h < nh; h++)
        idx[h] = h / (nh / nkv);
    const char *g = ints(e, idx, nh);
    free(idx);
    const struct og_attr a = OG_AI("axis", axis);
    return og_node(e->g, "Gather", OG_IN(x, g), NULL, &a, 1);
}

/* proj [N, Q] → per query head q [N, n_h, p] and k, v: [N, n_h, p], or with
 * !expand llama's [N, n_kv, p] (a KV cache keeps the key/value heads). */
static void heads(struct ex *e, const char *proj, int expand, const char **q, const char **k,
                  const char **v)
{
    const int64_t nh = e->nh, nkv = e->nkv, p = e->p;
    if (e->c->qkv_layout == HM_QKV_FUSED) { /* column h·3p + s·p + i */
        const char *parts[3];
        split(e, reshape(e, proj, INTS(e, -1, nh, 3, p)), 2, (const int64_t[]){1, 1, 1}, 3,
              parts);
        const char *shape = INTS(e, -1, nh, p);
        *q = reshape(e, parts[0], shape);
        *k = reshape(e, parts[1], shape);
        *v = reshape(e, parts[2], shape);
        return;
    }
    const char *parts[3];
    split(e, proj, 1, (const int64_t[]){nh * p, nkv * p, nkv * p}, 3, parts);
    *q = reshape(e, parts[0], INTS(e, -1, nh, p));
    const char *kv_shape = INTS(e, -1, nkv, p);
    *k = reshape(e, parts[1], kv_shape);
    *v = reshape(e, parts[2], kv_shape);
    if (nkv != nh && expand) {
        *k = expand_kv(e, *k, 1);
        *v = expand_kv(e, *v, 1);
    }
}

/* NeoX rotate_half on the first r dims of x [N, n_h, p]. */
static const char *rotary(struct ex *e, const char *x)
{
    const int64_t r = e->r, p = e->p;
    const char *part[3];
    int n = p > r ? 3 : 2;
    split(e, x, 2, (const int64_t[]){r / 2, r / 2, p - r}, n, part);
    const char *y1 = op2(e, "Sub", op2(e, "Mul", part[0], e->cos), op2(e, "Mul", part[1], e->sin));
    const char *y2 = op2(e, "Add", op2(e, "Mul", part[1], e->cos), op2(e, "Mul", part[0], e->sin));
    const char *in[3] = {y1, y2, n == 3 ? part[2] : NULL};
    return concat(e, in, n, 2);
}

/* φ(x) = [softmax(u), softmax(−u)], u = x W_h + b_h: x [N, n_h, p] →
 * [N, n_h, 2F]. */
static const char *feature_map(struct ex *e, const char *x, const char *w, const char *b)
{
    static const int64_t swap01[3] = {1, 0, 2};
    const char *u = op2(e, "MatMul", transpose(e, x, swap01, 3), w); /* [n_h, N, F] */
    u = op2(e, "Add", u, unsqueeze(e, b, 1));
    const struct og_attr ax = OG_AI("axis", -1);
    const char *s1 = og_node(e->g, "Softmax", OG_IN(u), NULL, &ax, 1);
    const char *s2 = og_node(e->g, "Softmax", OG_IN(op1(e, "Neg", u)), NULL, &ax, 1);
    return transpose(e, concat(e, OG_IN(s1, s2), -1), swap01, 3);
}

/* The Scan body: state S [batch, n_h, 2F, p+1]; per step α [batch, n_h, 1, 1]
 * (hedgemamba only), ΔB [batch, n_h, 2F, 1], v̂ [batch, n_h, 1, p+1],
 * C [batch, n_h, 1, 2F]; out: S', n = C S' [batch, n_h, 1, p+1]. */
static struct og_graph *scan_body(struct ex *e, int decay)
{
    struct og_graph *g = og_graph_new(e->b, decay ? "ssm_step" : "linattn_step");
    if (!g)
        return NULL;
    const char *names[5] = {"S_in", "alpha_t", "dB_t", "v_t", "C_t"};
    for (int i = 0; i < 5; i++)
        if (decay || i != 1)
            og_input(g, names[i], OG_FLOAT, -1, NULL, NULL);
    const char *upd = og_node(g, "Mul", OG_IN("dB_t", "v_t"), "upd", NULL, 0);
    const char *prev = decay ? og_node(g, "Mul", OG_IN("alpha_t", "S_in"), "decayed", NULL, 0)
                             : "S_in";
    og_node(g, "Add", OG_IN(prev, upd), "S_out", NULL, 0);
    og_node(g, "MatMul", OG_IN("C_t", "S_out"), "n_t", NULL, 0);
    og_output(g, "S_out", OG_FLOAT, -1, NULL, NULL);
    og_output(g, "n_t", OG_FLOAT, -1, NULL, NULL);
    return g;
}

/* The mixer of layer l: rotated q, k and v [N, n_h, p], a [N, d] → [N, Da]. */
static const char *mixer(struct ex *e, int64_t l, const char *a, const char *q, const char *k,
                         const char *v)
{
    const int64_t nh = e->nh, p = e->p, F2 = 2 * e->F;
    const int ssm = hm_layer_mixer(e->c, l) == HM_MIXER_HEDGEMAMBA;
    const char *C = feature_map(e, q, wname(e, l, HM_SLOT_FQ_W, 0), wname(e, l, HM_SLOT_FQ_B, 0));
    const char *Bk = feature_map(e, k, wname(e, l, HM_SLOT_FK_W, 0), wname(e, l, HM_SLOT_FK_B, 0));
    const char *alpha = NULL;
    if (ssm) {
        const char *dt = op1(e, "Softplus", linear(e, a, wname(e, l, HM_SLOT_DT_W, 0),
                                                   wname(e, l, HM_SLOT_DT_B, 0))); /* [N, n_h] */
        alpha = op1(e, "Exp", op2(e, "Mul", dt, wname(e, l, HM_SLOT_A, 0)));
        alpha = reshape(e, alpha, SHAPE_BS(e, nh, 1, 1));
        Bk = op2(e, "Mul", Bk, unsqueeze(e, dt, 2));
    }
    /* v̂ = [v; 1]: pad the last dim with one constant 1 */
    const char *vh = og_node(e->g, "Pad",
                             OG_IN(v, INTS(e, 0, 0, 0, 0, 0, 1), og_const_scalar(e->g, 1.0f)),
                             NULL, NULL, 0);
    const char *in[6] = {og_strf(e->b, "past_state.%lld", (long long)l)};
    int n = 1;
    if (ssm)
        in[n++] = alpha;
    in[n++] = reshape(e, Bk, SHAPE_BS(e, nh, F2, 1));
    in[n++] = reshape(e, vh, SHAPE_BS(e, nh, 1, p + 1));
    in[n++] = reshape(e, C, SHAPE_BS(e, nh, 1, F2));
    const int64_t axes[4] = {1, 1, 1, 1};
    const struct og_attr attrs[4] = {
        OG_AG("body", scan_body(e, ssm)), OG_AI("num_scan_inputs", n - 1),
        {.name = "scan_input_axes", .kind = OG_A_INTS, .ints = axes, .n = n - 1},
        OG_AINTS("scan_output_axes", 1)};
    const char *outs[2] = {og_strf(e->b, "present_state.%lld", (long long)l), NULL};
    const char *res[2];
    og_node_n(e->g, "Scan", in, n, 2, outs, res, attrs, 4); /* res[1]: [batch, seq, n_h, 1, p+1] */
    const char *nd[2];
    split(e, reshape(e, res[1], INTS(e, -1, nh, p + 1)), 2, (const int64_t[]){p, 1}, 2, nd);
    const char *y = op2(e, "Div", nd[0], op2(e, "Add", nd[1], e->eps_lin));
    if (ssm)
        y = op2(e, "Add", y, op2(e, "Mul", v, unsqueeze(e, wname(e, l, HM_SLOT_D, 0), 1)));
    y = reshape(e, y, INTS(e, -1, e->Da));
    if (ssm) {
        const char *z =
            linear(e, a, wname(e, l, HM_SLOT_GATE_W, 0), wname(e, l, HM_SLOT_GATE_B, 0));
        y = op2(e, "Mul", y, silu(e, z));
    }
    return y;
}

/* A hybrid's kept layer l (SPEC §11): causal softmax attention with its KV
 * cache. q [N, n_h, p], k, v [N, n_kv, p] rotated; past_key.{l} and
 * past_value.{l} [batch, n_kv, past, p] gain this call's rows as
 * present_key.{l}, present_value.{l} [batch, n_kv, past + seq, p]; row i
 * (position past + i) attends to cache rows 0 .. past + i, scores scaled by
 * 1/sqrt(p). → [N, Da]. */
static const char *attention(struct ex *e, int64_t l, const char *q, const char *k,
                             const char *v)
{
    static const int64_t bhsp[4] = {0, 2, 1, 3}, keys_t[4] = {0, 1, 3, 2};
    const int64_t nh = e->nh, nkv = e->nkv, p = e->p;
    const char *pk = og_strf(e->b, "past_key.%lld", (long long)l);
    const char *pv = og_strf(e->b, "past_value.%lld", (long long)l);
    const struct og_attr ax2 = OG_AI("axis", 2), last = OG_AI("axis", -1);
    const char *kt = transpose(e, reshape(e, k, SHAPE_BS(e, nkv, p)), bhsp, 4);
    const char *vt = transpose(e, reshape(e, v, SHAPE_BS(e, nkv, p)), bhsp, 4);
    const char *K = og_node(e->g, "Concat", OG_IN(pk, kt),
                            og_strf(e->b, "present_key.%lld", (long long)l), &ax2, 1);
    const char *Vv = og_node(e->g, "Concat", OG_IN(pv, vt),
                             og_strf(e->b, "present_value.%lld", (long long)l), &ax2, 1);
    if (nkv != nh) {
        K = expand_kv(e, K, 1);
        Vv = expand_kv(e, Vv, 1);
    }
    const char *qt = transpose(e, reshape(e, q, SHAPE_BS(e, nh, p)), bhsp, 4);
    const char *s = op2(e, "MatMul", qt, transpose(e, K, keys_t, 4)); /* [batch, n_h, seq, T] */
    s = op2(e, "Mul", s, og_const_scalar(e->g, (float)(1.0 / sqrt((double)p))));
    /* causal: key j is masked for row i when j > past + i */
    const char *zero = og_const_i64_scalar(e->g, 0), *one = og_const_i64_scalar(e->g, 1);
    const char *past = op2(e, "Gather", op1(e, "Shape", pk), og_const_i64_scalar(e->g, 2));
    const char *seq = op2(e, "Gather", e->bs, one);
    const char *rows = op2(e, "Add", og_node(e->g, "Range", OG_IN(zero, seq, one), NULL, NULL, 0),
                           past);
    const char *cols = og_node(e->g, "Range", OG_IN(zero, op2(e, "Add", past, seq), one), NULL,
                               NULL, 0);
    const char *mask = op2(e, "Greater", unsqueeze(e, cols, 0), unsqueeze(e, rows, 1));
    s = og_node(e->g, "Where", OG_IN(mask, og_const_scalar(e->g, -INFINITY), s), NULL, NULL, 0);
    const char *w = og_node(e->g, "Softmax", OG_IN(s), NULL, &last, 1);
    const char *o = op2(e, "MatMul", w, Vv); /* [batch, n_h, seq, p] */
    return reshape(e, transpose(e, o, bhsp, 4), INTS(e, -1, e->Da));
}

static const char *layer(struct ex *e, int64_t l, const char *h)
{
    og_scope(e->b, og_strf(e->b, "l%lld/", (long long)l));
    const char *a = norm(e, h, wname(e, l, HM_SLOT_LN1_W, 0), wname(e, l, HM_SLOT_LN1_B, 0));
    const enum hm_mixer mx = hm_layer_mixer(e->c, l);
    const char *proj = projection(e, l, a);
    if (mx == HM_MIXER_HEDGEMAMBA)
        proj = causal_conv(e, l, proj);
    const char *q, *k, *v;
    heads(e, proj, mx != HM_MIXER_SOFTMAX, &q, &k, &v);
    if (e->r > 0) {
        q = rotary(e, q);
        k = rotary(e, k);
    }
    const char *att = mx == HM_MIXER_SOFTMAX ? attention(e, l, q, k, v) : mixer(e, l, a, q, k, v);
    const char *o =
        linear(e, att, wname(e, l, HM_SLOT_DENSE_W, 0), wname(e, l, HM_SLOT_DENSE_B, 0));
    const char *ln2w = wname(e, l, HM_SLOT_LN2_W, 0), *ln2b = wname(e, l, HM_SLOT_LN2_B, 0);
    if (e->c->use_parallel_residual) /* h + o(LN1 h) + mlp(LN2 h), as hm: (mlp + o) + h */
        return op2(e, "Add", op2(e, "Add", mlp(e, l, norm(e, h, ln2w, ln2b)), o), h);
    const char *t = op2(e, "Add", o, h);
    return op2(e, "Add", mlp(e, l, norm(e, t, ln2w, ln2b)), t);
}

/* ---- the model ------------------------------------------------------------------ */

static void graph_io(struct ex *e)
{
    static const char *const bsq[3] = {"batch", "seq", NULL};
    static const char *const b1[4] = {"batch", NULL, NULL, NULL};
    static const char *const kv_in[4] = {"batch", NULL, "past", NULL};
    static const char *const kv_out[4] = {"batch", NULL, "past_seq", NULL};
    const int64_t conv_dims[3] = {0, e->Q, e->K - 1};
    const int64_t state_dims[4] = {0, e->nh, 2 * e->F, e->p + 1};
    const int64_t kv_dims[4] = {0, e->nkv, 0, e->p};
    og_input(e->g, "input_ids", OG_INT64, 2, (const int64_t[]){0, 0}, bsq);
    og_input(e->g, "position_ids", OG_INT64, 2, (const int64_t[]){0, 0}, bsq);
    og_output(e->g, "logits", OG_FLOAT, 3, (const int64_t[]){0, 0, e->V}, bsq);
    for (int64_t l = 0; l < e->c->num_hidden_layers; l++) {
        if (hm_layer_mixer(e->c, l) == HM_MIXER_SOFTMAX) { /* a kept layer's KV cache */
            for (int kv = 0; kv < 2; kv++) {
                const char *what = kv ? "value" : "key";
                og_input(e->g, og_strf(e->b, "past_%s.%lld", what, (long long)l), OG_FLOAT, 4,
                         kv_dims, kv_in);
                og_output(e->g, og_strf(e->b, "present_%s.%lld", what, (long long)l), OG_FLOAT,
                          4, kv_dims, kv_out);
            }
            continue;
        }
        if (hm_layer_mixer(e->c, l) == HM_MIXER_HEDGEMAMBA) {
            og_input(e->g, og_strf(e->b, "past_conv.%lld", (long long)l), OG_FLOAT, 3, conv_dims,
                     b1);
            og_output(e->g, og_strf(e->b, "present_conv.%lld", (long long)l), OG_FLOAT, 3,
                      conv_dims, b1);
        }
        og_input(e->g, og_strf(e->b, "past_state.%lld", (long long)l), OG_FLOAT, 4, state_dims,
                 b1);
        og_output(e->g, og_strf(e->b, "present_state.%lld", (long long)l), OG_FLOAT, 4,
                  state_dims, b1);
    }
}

static void build(struct ex *e)
{
    const struct hm_model *m = e->m;
    for (int64_t i = 0; i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        og_init_f32_view(e->g, v->spec.name, v->spec.ndim, v->spec.shape, v->data);
    }
    graph_io(e);
    og_scope(e->b, "");
    e->bs = og_node(e->g, "Shape", OG_IN("input_ids"), "batch_seq", NULL, 0);
    e->eps_lin = og_const_scalar(e->g, HM_LINATTN_EPS);
    const char *flat = INTS(e, -1);
    if (e->r > 0) { /* θ = (float)pos · inv_freq[j], [N, 1, r/2] */
        const char *inv = og_init_f32_view(e->g, "hm.rotary.inv_freq", 1,
                                           (const int64_t[]){e->r / 2}, m->inv_freq);
        const struct og_attr to = OG_AI("to", OG_FLOAT);
        const char *pos = og_node(e->g, "Cast", OG_IN(reshape(e, "position_ids", flat)), NULL,
                                  &to, 1);
        const char *ang = op2(e, "Mul", unsqueeze(e, pos, 1), inv);
        e->cos = unsqueeze(e, op1(e, "Cos", ang), 1);
        e->sin = unsqueeze(e, op1(e, "Sin", ang), 1);
    }
    const struct og_attr ax0 = OG_AI("axis", 0);
    const char *h = og_node(e->g, "Gather",
                            OG_IN(wname(e, -1, HM_SLOT_EMBED, 0), reshape(e, "input_ids", flat)),
                            NULL, &ax0, 1); /* [N, d] */
    for (int64_t l = 0; l < e->c->num_hidden_layers; l++)
        h = layer(e, l, h);
    og_scope(e->b, "final/");
    const char *hf = norm(e, h, wname(e, -1, HM_SLOT_NORMF_W, 0), wname(e, -1, HM_SLOT_NORMF_B, 0));
    const char *head = wname(e, -1, HM_SLOT_HEAD, 0);
    if (!head) /* tied: lm_head is embed_tokens */
        head = wname(e, -1, HM_SLOT_EMBED, 0);
    og_node(e->g, "Reshape", OG_IN(linear(e, hf, head, NULL), SHAPE_BS(e, e->V)), "logits", NULL,
            0);
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

struct hm_onnx {
    uint8_t *graph;             /* owned: [graph_len] the ModelProto */
    size_t graph_len;
    char *location;             /* owned: the data file's name; NULL: self-contained */
    struct og_external *ext;    /* owned: [n_ext] copies; their data borrowed from the model */
    size_t n_ext;
    uint64_t data_size;
};

void hm_onnx_free(struct hm_onnx *x)
{
    if (!x)
        return;
    free(x->graph);
    free(x->location);
    free(x->ext);
    free(x);
}

const void *hm_onnx_graph(const struct hm_onnx *x, size_t *len)
{
    *len = x->graph_len;
    return x->graph;
}

const char *hm_onnx_data_location(const struct hm_onnx *x) { return x->location; }

uint64_t hm_onnx_data_size(const struct hm_onnx *x) { return x->data_size; }

/* The bytes of every initializer og_init_f32_view gets: the model's tensors
 * and the rotary inverse frequencies (the constants are in the margin). */
static int weight_bytes(const struct hm_model *m, uint64_t *out)
{
    size_t n = (size_t)(m->cfg.rotary_dims / 2), b;
    for (int64_t i = 0; i < m->n_views; i++)
        if (hm_add_size(n, (size_t)m->views[i].numel, &n))
            return -1;
    if (hm_mul_size(n, sizeof(float), &b))
        return -1;
    *out = b;
    return 0;
}

static enum hm_status pack_model(struct ex *e, struct hm_onnx *x, const char *cfg_json,
                                 struct hm_error *err)
{
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    Onnx__StringStringEntryProto meta[2] = {ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                            ONNX__STRING_STRING_ENTRY_PROTO__INIT};
    Onnx__StringStringEntryProto *metas[2] = {&meta[0], &meta[1]};
    opset.domain = (char *)"";
    opset.has_version = 1;
    opset.version = HM_ONNX_OPSET;
    meta[0].key = (char *)"hm.config";
    meta[0].value = (char *)cfg_json;
    meta[1].key = (char *)"hm.onnx.version";
    meta[1].value = (char *)"1";
    model.has_ir_version = 1;
    model.ir_version = HM_ONNX_IR_VERSION;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.producer_name = (char *)"hm";
    model.producer_version = (char *)HM_VERSION;
    model.doc_string = (char *)"hm student (SPEC 9): any sequence length; the recurrent state is "
                               "carried in past_conv.{l}/past_state.{l} and out in "
                               "present_conv.{l}/present_state.{l} (zeros for a fresh sequence)";
    model.graph = og_graph_proto(e->g);
    model.n_metadata_props = 2;
    model.metadata_props = metas;
    if (og_failed(e->b))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory building the ONNX graph");
    size_t n = onnx__model_proto__get_packed_size(&model);
    if (n > HM_ONNX_MAX_BYTES)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "the ONNX graph would be %zu bytes, over the 2 GiB limit of one "
                            "protobuf file%s", n,
                            x->location ? " even with its weights in external data" : "");
    if (!(x->graph = malloc(n ? n : 1)))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the %zu-byte ONNX graph", n);
    if (onnx__model_proto__pack(&model, x->graph) != n)
        return hm_error_set(err, HM_ERR_INVALID, "packing the ONNX graph gave an unexpected size");
    x->graph_len = n;
    if (x->location) { /* keep the data file's layout past the builder */
        struct og_external *const *v = og_externals(e->g, &x->n_ext, &x->data_size);
        if (!(x->ext = malloc(sizeof *x->ext * (x->n_ext ? x->n_ext : 1))))
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < x->n_ext; i++)
            x->ext[i] = *v[i];
    }
    return HM_OK;
}

enum hm_status hm_onnx_build(const struct hm_model *m, const struct hm_onnx_opts *o,
                             struct hm_onnx **out, struct hm_error *err)
{
    static const struct hm_onnx_opts defaults = HM_ONNX_OPTS_INIT;
    *out = NULL;
    if (!o)
        o = &defaults;
    const struct hm_config *c = &m->cfg;
    if (c->mixer != HM_MIXER_HEDGEHOG && c->mixer != HM_MIXER_HEDGEMAMBA)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "ONNX export is for students (hedgehog, hedgemamba); a %s teacher "
                            "has no constant-size state",
                            hm_arch_name(c));
    if (!host_is_little_endian())
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "ONNX export needs a little-endian host (raw_data is little-endian)");
    const char *location = o->location ? o->location : HM_ONNX_DATA_LOCATION;
    if (!*location || strchr(location, '/') || !strcmp(location, ".") || !strcmp(location, ".."))
        return hm_error_set(err, HM_ERR_INVALID,
                            "the external data file '%s' is not a plain file name", location);
    uint64_t wb;
    if (weight_bytes(m, &wb))
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "the model's %lld weights overflow a size",
                            (long long)m->n_params);
    struct ex e = {.m = m, .c = c, .nh = c->num_attention_heads,
                   .nkv = c->num_key_value_heads, .p = c->head_dim, .r = c->rotary_dims,
                   .F = c->feature_dim, .Da = c->attn_dim, .Q = c->qkv_dim,
                   .K = c->conv_width, .V = c->vocab_size};
    enum hm_status st = HM_OK;
    char *cfg_json = hm_config_to_json(c);
    struct hm_onnx *x = calloc(1, sizeof *x);
    e.b = og_builder_new();
    if (!e.b || !cfg_json || !x || !(e.g = og_graph_new(e.b, "hm_student"))) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory building the ONNX graph");
        goto out;
    }
    if (wb > o->external_above) { /* contract §11: the weights beside the graph */
        if (!(x->location = strdup(location))) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            goto out;
        }
        og_graph_external(e.g, location, HM_ONNX_DATA_ALIGN);
    }
    build(&e);
    st = pack_model(&e, x, cfg_json, err);
out:
    og_builder_free(e.b);
    free(cfg_json);
    if (st == HM_OK)
        *out = x;
    else
        hm_onnx_free(x);
    return st;
}

enum hm_status hm_onnx_write_data(const struct hm_onnx *x, FILE *fp, struct hm_error *err)
{
    static const char zeros[HM_ONNX_DATA_ALIGN];
    uint64_t at = 0;
    for (size_t i = 0; i < x->n_ext; i++) {
        const struct og_external *t = &x->ext[i];
        size_t pad = (size_t)(t->offset - at); /* < HM_ONNX_DATA_ALIGN */
        if ((pad && fwrite(zeros, 1, pad, fp) != pad) ||
            (t->length && fwrite(t->data, 1, (size_t)t->length, fp) != t->length))
            return hm_error_set_errno(err, HM_ERR_IO, errno, "write failed at byte %llu",
                                      (unsigned long long)at);
        at = t->offset + t->length;
    }
    return HM_OK;
}

char *hm_onnx_data_path(const struct hm_onnx *x, const char *path)
{
    if (!x->location)
        return NULL;
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0, size = dl + strlen(x->location) + 1;
    char *p = malloc(size);
    if (p)
        snprintf(p, size, "%.*s%s", (int)dl, path, x->location);
    return p;
}

enum hm_status hm_onnx_write_files(const struct hm_onnx *x, const char *path, int force,
                                   struct hm_error *err)
{
    const int flags = force ? HM_AFILE_FORCE : 0;
    if (x->location && strcmp(path, "-") == 0)
        return hm_error_set(err, HM_ERR_INVALID,
                            "a graph with external data ('%s') cannot go to stdout", x->location);
    struct hm_afile *af[2] = {NULL, NULL};
    char *data_path = NULL;
    int n = 0;
    enum hm_status st = HM_OK;
    if (x->location) {
        if (!(data_path = hm_onnx_data_path(x, path))) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            goto out;
        }
        if (strcmp(data_path, path) == 0) {
            st = hm_error_set(err, HM_ERR_INVALID, "the graph and its external data would both "
                              "be '%s'", path);
            goto out;
        }
        if ((st = hm_afile_open(data_path, flags, &af[n], err)) != HM_OK) {
            hm_error_prefix(err, "'%s': ", data_path);
            goto out;
        }
        n++;
    }
    /* both opened before the gigabytes are written: an existing graph
     * without force fails first */
    if ((st = hm_afile_open(path, flags, &af[n], err)) != HM_OK)
        goto out;
    n++;
    if (x->location && (st = hm_onnx_write_data(x, hm_afile_stream(af[0]), err)) != HM_OK) {
        hm_error_prefix(err, "'%s': ", data_path);
        goto out;
    }
    if (fwrite(x->graph, 1, x->graph_len, hm_afile_stream(af[n - 1])) != x->graph_len) {
        st = hm_error_set_errno(err, HM_ERR_IO, errno, "write failed");
        goto out;
    }
    int failed = 0;
    st = hm_afile_commit_all(af, n, &failed, err); /* the graph last: it may be stdout */
    n = 0;
    if (st != HM_OK && x->location)
        hm_error_prefix(err, "'%s': ", failed == 0 ? data_path : path);
out:
    for (int i = 0; i < n; i++)
        hm_afile_abort(af[i]);
    free(data_path);
    return st;
}
