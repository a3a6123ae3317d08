/* ONNX export (contract §9, libconvert/export/onnx_export.h): for the four students
 * (hedgehog, hedgemamba × neox, llama) with random weights,
 *   - the bytes parse back with protobuf-c into the promised structure:
 *     IR/opset, standard-domain operators only, inputs/outputs with their
 *     names, types and shapes (only batch and seq symbolic), every model
 *     tensor as an initializer under its checkpoint name, shape and bytes,
 *     and a graph whose every node reads only values defined before it;
 *   - ONNX Runtime (tests/onnx/run_ort.mjs, npm onnxruntime-node) gives hm's
 *     logits within 1e-4 relative for a whole sequence at once, token by
 *     token with the carried state, and prefill + chunk + steps, on a batch
 *     of two sequences. Without node or onnxruntime-node that part skips
 *     visibly (HM_REQUIRE_ORT=1, as CI sets it, makes it fail instead).
 * Softmax teachers are refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "model_forward.h"
#include "onnx_export.h"
#include "onnx_subset.pb-c.h"
#include "safetensors.h"
#include "testutil.h"
#include "tokfile.h"

enum kind { NEOX_HEDGEHOG = 0, NEOX_HEDGEMAMBA, LLAMA_HEDGEHOG, LLAMA_HEDGEMAMBA, N_KINDS };
static const char *kind_names[N_KINDS] = {"neox-hedgehog", "neox-hedgemamba", "llama-hedgehog",
                                          "llama-hedgemamba"};

/* Each kind also varies the family's options (partial rotary, residual,
 * GELU form, GQA, tied head, llama3 rope scaling, biases, head_dim ≠ d/n_h,
 * F ≠ p, conv width). */
static struct hm_config kind_cfg(enum kind k)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.vocab_size = 53;
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 48;
    c.max_position_embeddings = 256;
    switch (k) {
    case NEOX_HEDGEHOG:
        c.mixer = HM_MIXER_HEDGEHOG;
        c.rotary_pct = 0.5;
        c.feature_dim = 6;
        break;
    case NEOX_HEDGEMAMBA:
        c.mixer = HM_MIXER_HEDGEMAMBA;
        c.rotary_pct = 0.25;
        c.use_parallel_residual = 0;
        c.hidden_act = HM_ACT_GELU_TANH;
        c.conv_width = 4;
        break;
    case LLAMA_HEDGEHOG:
        c.family = HM_FAMILY_LLAMA;
        c.mixer = HM_MIXER_HEDGEHOG;
        c.num_key_value_heads = 2;
        c.layer_norm_eps = 1e-5;
        c.tie_word_embeddings = 1;
        c.feature_dim = 5;
        c.rope_scaling.type = HM_ROPE_LLAMA3;
        c.rope_scaling.factor = 8;
        c.rope_scaling.low_freq_factor = 1;
        c.rope_scaling.high_freq_factor = 4;
        c.rope_scaling.original_max_position_embeddings = 64;
        break;
    case LLAMA_HEDGEMAMBA:
        c.family = HM_FAMILY_LLAMA;
        c.mixer = HM_MIXER_HEDGEMAMBA;
        c.hidden_size = 24;
        c.head_dim = 8; /* n_h p = 32 ≠ d */
        c.num_key_value_heads = 1;
        c.layer_norm_eps = 1e-6;
        c.attention_bias = 1;
        c.mlp_bias = 1;
        c.conv_width = 3;
        break;
    default: break;
    }
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s: %s", kind_names[k], err.msg);
    return c;
}

/* Random weights with O(1) logits; A ≤ 0 (contract §3), the mixer extras around
 * their identity values, feature maps eye + noise. */
static void fill_random(struct hm_model *m, uint64_t seed)
{
    for (int64_t i = 0; i < m->n_views; i++) {
        const struct hm_tensor_view *v = &m->views[i];
        for (int64_t k = 0; k < v->numel; k++) {
            const double r = tu_rand_normal(&seed);
            float *x = v->data + k;
            switch (v->spec.slot) {
            case HM_SLOT_LN1_W: case HM_SLOT_LN2_W: case HM_SLOT_NORMF_W:
                *x = (float)(1.0 + 0.1 * r); break;
            case HM_SLOT_A: *x = (float)(-0.1 - 0.4 * fabs(r)); break;
            case HM_SLOT_D: *x = (float)(0.3 * r); break;
            case HM_SLOT_DT_B: case HM_SLOT_GATE_B: *x += (float)(0.3 * r); break;
            case HM_SLOT_CONV_W: *x += (float)(0.3 * r); break;
            case HM_SLOT_FQ_W: case HM_SLOT_FK_W: *x += (float)(0.3 * r); break;
            default: *x = (float)(0.25 * r); break;
            }
        }
    }
}

static struct hm_model *make_model(enum kind k)
{
    struct hm_config c = kind_cfg(k);
    struct hm_model *m = NULL;
    struct hm_error err;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    fill_random(m, 100 + (uint64_t)k);
    return m;
}

static Onnx__ModelProto *export_parse(const struct hm_model *m, void **bytes, size_t *len)
{
    struct hm_error err;
    cr_assert_eq(hm_onnx_export(m, bytes, len, &err), HM_OK, "%s", err.msg);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, *len, *bytes);
    cr_assert_not_null(mp, "the exported bytes do not parse as an onnx.ModelProto");
    return mp;
}

/* ---- structure ------------------------------------------------------------------ */

static void check_value(const Onnx__ValueInfoProto *vi, const char *name, int elem,
                        const char *const *params, const int64_t *dims, int rank)
{
    cr_assert_str_eq(vi->name, name);
    cr_assert_not_null(vi->type);
    cr_assert_eq(vi->type->value_case, ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, "%s", name);
    const Onnx__TypeProto__Tensor *t = vi->type->tensor_type;
    cr_assert_eq(t->elem_type, elem, "%s elem type", name);
    cr_assert_not_null(t->shape, "%s has no shape", name);
    cr_assert_eq(t->shape->n_dim, (size_t)rank, "%s rank", name);
    for (int i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = t->shape->dim[i];
        if (params[i]) {
            cr_assert_eq(d->value_case, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM,
                         "%s dim %d is not symbolic", name, i);
            cr_assert_str_eq(d->dim_param, params[i], "%s dim %d", name, i);
        } else {
            cr_assert_eq(d->value_case, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE,
                         "%s dim %d is not static", name, i);
            cr_assert_eq(d->dim_value, dims[i], "%s dim %d: %lld, want %lld", name, i,
                         (long long)d->dim_value, (long long)dims[i]);
        }
    }
}

static const char *const standard_ops[] = {
    "Add", "Cast", "Concat", "Conv", "Cos", "Div", "Erf", "Exp", "Gather", "Gemm", "Identity",
    "LayerNormalization", "MatMul", "Mul", "Neg", "Pad", "ReduceMean", "Reshape", "Scan",
    "Shape", "Sigmoid", "Sin", "Slice", "Softmax", "Softplus", "Split", "Sqrt", "Sub", "Tanh",
    "Transpose", "Unsqueeze"};

struct names {
    const char **v;
    size_t n, cap;
};

static void names_add(struct names *s, const char *n)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        cr_assert_not_null(s->v);
    }
    s->v[s->n++] = n;
}

static int names_has(const struct names *s, const char *n)
{
    for (size_t i = s->n; i-- > 0;)
        if (strcmp(s->v[i], n) == 0)
            return 1;
    return 0;
}

/* Every node of g (and of its subgraphs) is a standard operator and reads
 * only values already defined (graph inputs, initializers, outer scope,
 * earlier outputs); every graph output is defined. Returns the node count. */
static size_t check_graph(const Onnx__GraphProto *g, struct names *defined)
{
    const size_t mark = defined->n;
    size_t nodes = g->n_node;
    for (size_t i = 0; i < g->n_input; i++)
        names_add(defined, g->input[i]->name);
    for (size_t i = 0; i < g->n_initializer; i++)
        names_add(defined, g->initializer[i]->name);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *nd = g->node[i];
        cr_assert(!nd->domain || !nd->domain[0], "node '%s' is in domain '%s'", nd->name,
                  nd->domain);
        int known = 0;
        for (size_t k = 0; k < sizeof standard_ops / sizeof *standard_ops; k++)
            known |= strcmp(nd->op_type, standard_ops[k]) == 0;
        cr_assert(known, "node '%s': unexpected operator '%s'", nd->name, nd->op_type);
        for (size_t k = 0; k < nd->n_input; k++)
            cr_assert(!nd->input[k][0] || names_has(defined, nd->input[k]),
                      "node '%s' (%s) reads '%s' before it is defined", nd->name, nd->op_type,
                      nd->input[k]);
        for (size_t k = 0; k < nd->n_attribute; k++)
            if (nd->attribute[k]->g)
                nodes += check_graph(nd->attribute[k]->g, defined);
        for (size_t k = 0; k < nd->n_output; k++) {
            cr_assert(!names_has(defined, nd->output[k]), "'%s' is defined twice", nd->output[k]);
            names_add(defined, nd->output[k]);
        }
    }
    for (size_t i = 0; i < g->n_output; i++)
        cr_assert(names_has(defined, g->output[i]->name), "graph output '%s' is not produced",
                  g->output[i]->name);
    defined->n = mark; /* a subgraph's values are not visible outside it */
    return nodes;
}

static void check_structure(enum kind k)
{
    struct hm_model *m = make_model(k);
    const struct hm_config *c = &m->cfg;
    void *bytes = NULL;
    size_t len = 0;
    Onnx__ModelProto *mp = export_parse(m, &bytes, &len);
    cr_assert(mp->has_ir_version && mp->ir_version >= 8);
    cr_assert_eq(mp->n_opset_import, 1);
    cr_assert(!mp->opset_import[0]->domain || !mp->opset_import[0]->domain[0]);
    cr_assert_geq(mp->opset_import[0]->version, 17);
    cr_assert_str_eq(mp->producer_name, "hm");
    const Onnx__GraphProto *g = mp->graph;
    cr_assert_not_null(g);

    /* inputs and outputs */
    const int ssm = c->mixer == HM_MIXER_HEDGEMAMBA;
    const int64_t L = c->num_hidden_layers, K = c->conv_width;
    const size_t per_layer = ssm ? 2 : 1;
    cr_assert_eq(g->n_input, 2 + per_layer * (size_t)L, "%s: %zu inputs", kind_names[k],
                 g->n_input);
    cr_assert_eq(g->n_output, 1 + per_layer * (size_t)L);
    static const char *const bsq[3] = {"batch", "seq", NULL};
    static const char *const b1[4] = {"batch", NULL, NULL, NULL};
    const int64_t none[3] = {0, 0, c->vocab_size};
    check_value(g->input[0], "input_ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, bsq, none, 2);
    check_value(g->input[1], "position_ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, bsq, none, 2);
    check_value(g->output[0], "logits", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, bsq, none, 3);
    const int64_t conv_dims[3] = {0, c->qkv_dim, K - 1};
    const int64_t state_dims[4] = {0, c->num_attention_heads, 2 * c->feature_dim,
                                   c->head_dim + 1};
    for (int64_t l = 0; l < L; l++) {
        char name[64];
        size_t at = 2 + per_layer * (size_t)l, ot = 1 + per_layer * (size_t)l;
        if (ssm) {
            snprintf(name, sizeof name, "past_conv.%lld", (long long)l);
            check_value(g->input[at], name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, b1, conv_dims, 3);
            snprintf(name, sizeof name, "present_conv.%lld", (long long)l);
            check_value(g->output[ot], name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, b1, conv_dims,
                        3);
            at++, ot++;
        }
        snprintf(name, sizeof name, "past_state.%lld", (long long)l);
        check_value(g->input[at], name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, b1, state_dims, 4);
        snprintf(name, sizeof name, "present_state.%lld", (long long)l);
        check_value(g->output[ot], name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, b1, state_dims, 4);
    }

    /* initializers: every model tensor once, by name, shape and bytes; the
     * rest are the graph's own constants (hm.*) */
    size_t found = 0, consts = 0;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        const struct hm_tensor_view *v = NULL;
        for (int64_t j = 0; j < m->n_views && !v; j++)
            if (strcmp(m->views[j].spec.name, t->name) == 0)
                v = &m->views[j];
        if (!v) {
            cr_assert(strncmp(t->name, "hm.", 3) == 0, "unexpected initializer '%s'", t->name);
            consts++;
            continue;
        }
        found++;
        cr_assert_eq(t->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "%s", t->name);
        cr_assert_eq(t->n_dims, (size_t)v->spec.ndim, "%s rank", t->name);
        for (int d = 0; d < v->spec.ndim; d++)
            cr_assert_eq(t->dims[d], v->spec.shape[d], "%s dim %d", t->name, d);
        cr_assert(t->has_raw_data && t->raw_data.len == sizeof(float) * (size_t)v->numel,
                  "%s: raw_data of %zu bytes", t->name, t->raw_data.len);
        cr_assert_eq(memcmp(t->raw_data.data, v->data, t->raw_data.len), 0,
                     "%s: bytes differ from the model's", t->name);
    }
    cr_assert_eq(found, (size_t)m->n_views, "%s: %zu of %lld model tensors are initializers",
                 kind_names[k], found, (long long)m->n_views);
    cr_assert_eq(g->n_initializer, (size_t)m->n_views + consts);

    /* the graph is well formed, standard operators only, one Scan per layer */
    struct names defined = {0};
    size_t nodes = check_graph(g, &defined);
    free(defined.v);
    size_t scans = 0, convs = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        scans += strcmp(g->node[i]->op_type, "Scan") == 0;
        convs += strcmp(g->node[i]->op_type, "Conv") == 0;
    }
    cr_assert_eq(scans, (size_t)L, "%s: %zu Scan nodes", kind_names[k], scans);
    cr_assert_eq(convs, ssm ? (size_t)L : 0);
    fprintf(stderr, "onnx %s: %zu bytes, %zu nodes, %zu initializers (%zu constants)\n",
            kind_names[k], len, nodes, g->n_initializer, consts);
    onnx__model_proto__free_unpacked(mp, NULL);
    free(bytes);
    hm_model_free(m);
}

Test(onnx, structure_neox_hedgehog) { check_structure(NEOX_HEDGEHOG); }
Test(onnx, structure_neox_hedgemamba) { check_structure(NEOX_HEDGEMAMBA); }
Test(onnx, structure_llama_hedgehog) { check_structure(LLAMA_HEDGEHOG); }
Test(onnx, structure_llama_hedgemamba) { check_structure(LLAMA_HEDGEMAMBA); }

Test(onnx, softmax_teachers_are_refused)
{
    struct hm_config c = kind_cfg(NEOX_HEDGEHOG);
    c.mixer = HM_MIXER_SOFTMAX;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    void *bytes = (void *)1;
    size_t len = 1;
    cr_assert_eq(hm_onnx_export(m, &bytes, &len, &err), HM_ERR_UNSUPPORTED);
    cr_assert_null(bytes);
    cr_assert_eq(len, 0);
    cr_assert(strstr(err.msg, "students"), "%s", err.msg);
    hm_model_free(m);
}

/* Over protobuf's 2 GiB: refused with a message before anything is built.
 * (The 2.2 GB of weights are calloc'ed and never touched: zero pages.) */
Test(onnx, models_over_2_gib_are_refused)
{
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("a 2.2 GB allocation under ASan");
#endif
    struct hm_config c = kind_cfg(LLAMA_HEDGEHOG);
    c.vocab_size = 540000;
    c.hidden_size = 1024;
    c.num_hidden_layers = 1;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 8;
    c.intermediate_size = 16;
    c.feature_dim = 4;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    void *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(hm_onnx_export(m, &bytes, &len, &err), HM_ERR_UNSUPPORTED);
    cr_assert_null(bytes);
    cr_assert(strstr(err.msg, "2 GiB"), "%s", err.msg);
    fprintf(stderr, "over 2 GiB: %s\n", err.msg);
    hm_model_free(m);
}

/* ---- ONNX Runtime ------------------------------------------------------------------ */

#define W_SEQS 2
#define L_TOKENS 40 /* crosses no chunk boundary of hm's own forms; see onnx_long */

/* Writes DIR/model.onnx, DIR/tokens.tok (W windows of L random tokens) and
 * DIR/logits.safetensors (hm's logits [W, L, V], ref backend: m is placed
 * on it), then runs run_ort.mjs on them. */
static void check_ort(struct hm_model *m, const char *tag, int64_t Lt, const char *extra)
{
    char *out = NULL;
    if (tu_run("command -v node", NULL, NULL) != 0) {
        cr_assert(!getenv("HM_REQUIRE_ORT"), "HM_REQUIRE_ORT is set but node is missing");
        cr_skip_test("node is not installed: ONNX Runtime check of %s skipped", tag);
    }
    const int64_t V = m->cfg.vocab_size, n = W_SEQS * Lt;
    struct hm_error err;
    char *dir = tu_mkdtemp("onnx");
    char *model = tu_path(dir, "model.onnx"), *tokp = tu_path(dir, "tokens.tok");
    char *refp = tu_path(dir, "logits.safetensors");
    void *bytes = NULL;
    size_t len = 0;
    cr_assert_eq(hm_onnx_export(m, &bytes, &len, &err), HM_OK, "%s", err.msg);
    tu_write_file(model, bytes, len);
    free(bytes);

    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    float *logits = malloc(sizeof(float) * (size_t)(n * V));
    uint64_t seed = 7;
    for (int64_t i = 0; i < n; i++)
        tok[i] = (int32_t)(tu_rand_u64(&seed) % (uint64_t)V);
    struct hm_tok_writer *tw = NULL;
    cr_assert_eq(hm_tok_writer_open(tokp, (uint64_t)V, 0, 0, &tw, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tok_writer_append(tw, tok, n, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tok_writer_commit(tw, &err), HM_OK, "%s", err.msg);
    const struct hm_backend *be = hm_backend_get("ref");
    cr_assert_eq(hm_model_place(m, be, &err), HM_OK, "%s", err.msg); /* after the export */
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    for (int w = 0; w < W_SEQS; w++) /* each window from position 0, as hm-eval */
        cr_assert_eq(hm_model_forward(m, be, tok + w * Lt, Lt, logits + w * Lt * V, &ws, &err),
                     HM_OK, "%s", err.msg);
    hm_model_ws_release(&ws);
    struct hm_st_writer *sw = hm_st_writer_new();
    const int64_t shape[3] = {W_SEQS, Lt, V};
    cr_assert_eq(hm_st_writer_add(sw, "logits", HM_DTYPE_F32, 3, shape, logits, &err), HM_OK);
    cr_assert_eq(hm_st_writer_write_path(sw, refp, 0, &err), HM_OK, "%s", err.msg);
    hm_st_writer_free(sw);

    char cmd[4096];
    snprintf(cmd, sizeof cmd, "node '%s/tests/onnx/run_ort.mjs' --model '%s' --tokens '%s' "
             "--ref '%s' --tol 1e-4 %s", HM_SOURCE_DIR, model, tokp, refp, extra ? extra : "");
    char *errs = NULL;
    int rc = tu_run(cmd, &out, &errs);
    fprintf(stderr, "onnx runtime %s:\n%s%s", tag, out ? out : "", errs ? errs : "");
    if (rc == 77) {
        cr_assert(!getenv("HM_REQUIRE_ORT"),
                  "HM_REQUIRE_ORT is set but onnxruntime-node is missing: %s", out);
        cr_skip_test("%s", out);
    }
    cr_assert_eq(rc, 0, "%s: ONNX Runtime differs from hm (rc %d):\n%s%s", tag, rc, out, errs);
    cr_assert(strstr(out, "3 passed, 0 failed"), "%s: %s", tag, out);
    free(out), free(errs);
    free(tok), free(logits);
    free(model), free(tokp), free(refp), free(dir);
}

static void ort_kind(enum kind k)
{
    struct hm_model *m = make_model(k);
    check_ort(m, kind_names[k], L_TOKENS, NULL);
    hm_model_free(m);
}

Test(onnx, ort_neox_hedgehog, .timeout = 300) { ort_kind(NEOX_HEDGEHOG); }
Test(onnx, ort_neox_hedgemamba, .timeout = 300) { ort_kind(NEOX_HEDGEMAMBA); }
Test(onnx, ort_llama_hedgehog, .timeout = 300) { ort_kind(LLAMA_HEDGEHOG); }
Test(onnx, ort_llama_hedgemamba, .timeout = 300) { ort_kind(LLAMA_HEDGEMAMBA); }

/* hm's chunked forms (SSM chunks of 32, linear attention of 64) against the
 * Scan over a longer sequence, with prefill and chunk lengths that cross
 * them; and a conv of width 1 (an empty conv window). */
Test(onnx, ort_long_and_conv_width_1, .timeout = 300)
{
    struct hm_model *m = make_model(NEOX_HEDGEMAMBA);
    check_ort(m, "neox-hedgemamba T=150", 150, "--prefill 70 --chunk 66");
    hm_model_free(m);
    struct hm_config c = kind_cfg(LLAMA_HEDGEMAMBA);
    c.conv_width = 1;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    fill_random(m, 77);
    check_ort(m, "llama-hedgemamba K=1", 12, NULL);
    hm_model_free(m);
}
