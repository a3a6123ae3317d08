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
 * The same with external data (contract §11, the threshold lowered to 0):
 * every weight's data_location, location, offset (a multiple of 64) and
 * length (numel · 4) and its bytes in the data file; ONNX Runtime reading it.
 * Softmax teachers are refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Exports m (external data when ext) and parses the graph back. *x: owned. */
static Onnx__ModelProto *export_parse(const struct hm_model *m, int ext, struct hm_onnx **x)
{
    struct hm_error err;
    struct hm_onnx_opts o = HM_ONNX_OPTS_INIT;
    if (ext)
        o.external_above = 0;
    cr_assert_eq(hm_onnx_build(m, &o, x, &err), HM_OK, "%s", err.msg);
    size_t len;
    const void *bytes = hm_onnx_graph(*x, &len);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
    cr_assert_not_null(mp, "the exported bytes do not parse as an onnx.ModelProto");
    return mp;
}

/* The value of key in t's external_data, or NULL. */
static const char *ext_entry(const Onnx__TensorProto *t, const char *key)
{
    for (size_t i = 0; i < t->n_external_data; i++)
        if (strcmp(t->external_data[i]->key, key) == 0)
            return t->external_data[i]->value;
    return NULL;
}

/* The external data file of x, in memory: *len bytes (owned: free()). */
static uint8_t *data_file(const struct hm_onnx *x, size_t *len)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, len);
    struct hm_error err;
    cr_assert_not_null(fp);
    cr_assert_eq(hm_onnx_write_data(x, fp, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(fclose(fp), 0);
    return (uint8_t *)buf;
}

/* t's data_location, offset and length: external data in the one file
 * HM_ONNX_DATA_LOCATION, the offset a multiple of 64 past the end *at of
 * the previous tensor (bytes between are zeros), the length numel · 4, and
 * the bytes those of want. */
static void check_external(const Onnx__TensorProto *t, const float *want, int64_t numel,
                           const uint8_t *data, size_t data_len, uint64_t *at)
{
    cr_assert(t->has_data_location &&
              t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL,
              "%s: data_location is not EXTERNAL", t->name);
    cr_assert(!t->has_raw_data, "%s: raw_data beside external data", t->name);
    cr_assert_eq(t->n_external_data, 3, "%s: %zu external_data entries", t->name,
                 t->n_external_data);
    const char *loc = ext_entry(t, "location"), *off = ext_entry(t, "offset"),
               *len = ext_entry(t, "length");
    cr_assert(loc && off && len, "%s: location, offset or length missing", t->name);
    cr_assert_str_eq(loc, HM_ONNX_DATA_LOCATION, "%s", t->name);
    char *end;
    const uint64_t o = strtoull(off, &end, 10);
    cr_assert(!*end, "%s: offset '%s'", t->name, off);
    const uint64_t n = strtoull(len, &end, 10);
    cr_assert(!*end, "%s: length '%s'", t->name, len);
    cr_assert_eq(o % 64, 0, "%s: offset %llu is not a multiple of 64", t->name,
                 (unsigned long long)o);
    cr_assert_eq(n, sizeof(float) * (uint64_t)numel, "%s: length %llu, numel %lld", t->name,
                 (unsigned long long)n, (long long)numel);
    cr_assert(o >= *at && o - *at < 64, "%s: offset %llu after %llu", t->name,
              (unsigned long long)o, (unsigned long long)*at);
    cr_assert_leq(o + n, data_len, "%s: past the end of the data file", t->name);
    for (uint64_t i = *at; i < o; i++)
        cr_assert_eq(data[i], 0, "padding byte %llu is not zero", (unsigned long long)i);
    cr_assert_eq(memcmp(data + o, want, n), 0, "%s: external bytes differ from the model's",
                 t->name);
    *at = o + n;
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

static void check_structure(enum kind k, int ext)
{
    struct hm_model *m = make_model(k);
    const struct hm_config *c = &m->cfg;
    struct hm_onnx *x = NULL;
    Onnx__ModelProto *mp = export_parse(m, ext, &x);
    size_t len = 0, data_len = 0;
    hm_onnx_graph(x, &len);
    uint8_t *data = NULL;
    uint64_t data_end = 0;
    if (ext) {
        cr_assert_str_eq(hm_onnx_data_location(x), HM_ONNX_DATA_LOCATION);
        data = data_file(x, &data_len);
        cr_assert_eq(data_len, hm_onnx_data_size(x));
    } else {
        cr_assert_null(hm_onnx_data_location(x));
        cr_assert_eq(hm_onnx_data_size(x), 0);
    }
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
            if (ext && strcmp(t->name, "hm.rotary.inv_freq") == 0) /* a view too: external */
                check_external(t, m->inv_freq, c->rotary_dims / 2, data, data_len, &data_end);
            else /* the graph's small constants stay inline */
                cr_assert(t->has_raw_data && !t->n_external_data, "%s", t->name);
            continue;
        }
        found++;
        cr_assert_eq(t->data_type, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "%s", t->name);
        cr_assert_eq(t->n_dims, (size_t)v->spec.ndim, "%s rank", t->name);
        for (int d = 0; d < v->spec.ndim; d++)
            cr_assert_eq(t->dims[d], v->spec.shape[d], "%s dim %d", t->name, d);
        if (ext) {
            check_external(t, v->data, v->numel, data, data_len, &data_end);
            continue;
        }
        cr_assert(!t->has_data_location && !t->n_external_data, "%s: external", t->name);
        cr_assert(t->has_raw_data && t->raw_data.len == sizeof(float) * (size_t)v->numel,
                  "%s: raw_data of %zu bytes", t->name, t->raw_data.len);
        cr_assert_eq(memcmp(t->raw_data.data, v->data, t->raw_data.len), 0,
                     "%s: bytes differ from the model's", t->name);
    }
    cr_assert_eq(data_end, data_len, "%s: the data file has %zu bytes, its tensors end at %llu",
                 kind_names[k], data_len, (unsigned long long)data_end);
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
    fprintf(stderr, "onnx %s%s: %zu bytes (+ %zu external), %zu nodes, %zu initializers "
            "(%zu constants)\n", kind_names[k], ext ? " external" : "", len, data_len, nodes,
            g->n_initializer, consts);
    onnx__model_proto__free_unpacked(mp, NULL);
    free(data);
    hm_onnx_free(x);
    hm_model_free(m);
}

Test(onnx, structure_neox_hedgehog) { check_structure(NEOX_HEDGEHOG, 0); }
Test(onnx, structure_neox_hedgemamba) { check_structure(NEOX_HEDGEMAMBA, 0); }
Test(onnx, structure_llama_hedgehog) { check_structure(LLAMA_HEDGEHOG, 0); }
Test(onnx, structure_llama_hedgemamba) { check_structure(LLAMA_HEDGEMAMBA, 0); }
/* the same graphs with external data (the threshold lowered to 0) */
Test(onnx, structure_external_neox_hedgehog) { check_structure(NEOX_HEDGEHOG, 1); }
Test(onnx, structure_external_neox_hedgemamba) { check_structure(NEOX_HEDGEMAMBA, 1); }
Test(onnx, structure_external_llama_hedgehog) { check_structure(LLAMA_HEDGEHOG, 1); }
Test(onnx, structure_external_llama_hedgemamba) { check_structure(LLAMA_HEDGEMAMBA, 1); }

/* The external data are the only difference: the same initializers in the
 * same order, and the rest of the model (nodes, inputs, outputs, metadata)
 * byte for byte (both packed without their initializers). */
Test(onnx, external_differs_only_in_the_initializers)
{
    struct hm_model *m = make_model(LLAMA_HEDGEMAMBA);
    struct hm_onnx *xi = NULL, *xe = NULL;
    Onnx__ModelProto *mi = export_parse(m, 0, &xi), *me = export_parse(m, 1, &xe);
    const size_t n_init = mi->graph->n_initializer;
    cr_assert_eq(n_init, me->graph->n_initializer);
    for (size_t i = 0; i < n_init; i++)
        cr_assert_str_eq(mi->graph->initializer[i]->name, me->graph->initializer[i]->name);
    mi->graph->n_initializer = me->graph->n_initializer = 0;
    size_t ni = onnx__model_proto__get_packed_size(mi), ne = onnx__model_proto__get_packed_size(me);
    cr_assert_eq(ni, ne);
    uint8_t *bi = malloc(ni), *be = malloc(ne);
    onnx__model_proto__pack(mi, bi);
    onnx__model_proto__pack(me, be);
    cr_assert_eq(memcmp(bi, be, ni), 0, "the graphs differ beyond their initializers");
    mi->graph->n_initializer = me->graph->n_initializer = n_init; /* for free_unpacked */
    free(bi), free(be);
    onnx__model_proto__free_unpacked(mi, NULL);
    onnx__model_proto__free_unpacked(me, NULL);
    hm_onnx_free(xi);
    hm_onnx_free(xe);
    hm_model_free(m);
}

/* Writing both files: -o - is refused with external data, a location with a
 * '/' is refused, and an existing data file without force leaves nothing
 * new behind (the graph is not written either). */
Test(onnx, external_files_are_written_together)
{
    struct hm_model *m = make_model(NEOX_HEDGEMAMBA);
    struct hm_onnx *x = NULL;
    struct hm_error err;
    struct hm_onnx_opts o = {0, "../evil.data"};
    cr_assert_eq(hm_onnx_build(m, &o, &x, &err), HM_ERR_INVALID);
    cr_assert(strstr(err.msg, "../evil.data"), "%s", err.msg);
    o.location = NULL;
    cr_assert_eq(hm_onnx_build(m, &o, &x, &err), HM_OK, "%s", err.msg);
    cr_assert_neq(hm_onnx_write_files(x, "-", 0, &err), HM_OK);
    cr_assert(strstr(err.msg, "stdout"), "%s", err.msg);
    char *dir = tu_mkdtemp("onnx_ext");
    char *model = tu_path(dir, "model.onnx"), *data = tu_path(dir, HM_ONNX_DATA_LOCATION);
    char *path = hm_onnx_data_path(x, model);
    cr_assert_str_eq(path, data);
    free(path);
    tu_write_file(data, "x", 1);
    cr_assert_neq(hm_onnx_write_files(x, model, 0, &err), HM_OK);
    cr_assert(strstr(err.msg, data), "%s", err.msg);
    cr_assert(access(model, F_OK) != 0, "a refused export left '%s'", model);
    cr_assert_eq(hm_onnx_write_files(x, model, 1, &err), HM_OK, "%s", err.msg);
    size_t len;
    char *got = tu_read_file(data, &len);
    cr_assert_eq(len, hm_onnx_data_size(x));
    free(got);
    hm_onnx_free(x);
    hm_model_free(m);
    free(model), free(data), free(dir);
}

Test(onnx, softmax_teachers_are_refused)
{
    struct hm_config c = kind_cfg(NEOX_HEDGEHOG);
    c.mixer = HM_MIXER_SOFTMAX;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    struct hm_model *m = NULL;
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    struct hm_onnx *x = (struct hm_onnx *)1;
    cr_assert_eq(hm_onnx_build(m, NULL, &x, &err), HM_ERR_UNSUPPORTED);
    cr_assert_null(x);
    cr_assert(strstr(err.msg, "students"), "%s", err.msg);
    hm_model_free(m);
}

/* Over protobuf's 2 GiB: the weights go to external data by default, and
 * the graph stays small (it holds no weight). (The 2.2 GB of weights are
 * calloc'ed and never touched: zero pages; the data file is not written.) */
Test(onnx, models_over_2_gib_get_external_data)
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
    struct hm_onnx *x = NULL;
    cr_assert_eq(hm_onnx_build(m, NULL, &x, &err), HM_OK, "%s", err.msg);
    cr_assert_str_eq(hm_onnx_data_location(x), HM_ONNX_DATA_LOCATION);
    size_t len;
    hm_onnx_graph(x, &len);
    const uint64_t want = sizeof(float) * (uint64_t)(m->n_params + c.rotary_dims / 2);
    cr_assert_geq(hm_onnx_data_size(x), want);
    cr_assert_lt(hm_onnx_data_size(x), want + 64 * (uint64_t)(m->n_views + 1));
    cr_assert_lt(len, 1 << 20, "the graph is %zu bytes", len);
    fprintf(stderr, "over 2 GiB: graph %zu bytes, external data %llu bytes\n", len,
            (unsigned long long)hm_onnx_data_size(x));
    hm_onnx_free(x);
    hm_model_free(m);
}

/* ---- ONNX Runtime ------------------------------------------------------------------ */

#define W_SEQS 2
#define L_TOKENS 40 /* crosses no chunk boundary of hm's own forms; see onnx_long */

/* Writes DIR/model.onnx, DIR/tokens.tok (W windows of L random tokens) and
 * DIR/logits.safetensors (hm's logits [W, L, V], ref backend: m is placed
 * on it), then runs run_ort.mjs on them. */
static void check_ort(struct hm_model *m, const char *tag, int64_t Lt, const char *extra,
                      int ext)
{
    char *out = NULL;
    if (tu_run("command -v node", NULL, NULL) != 0) {
        cr_assert(!getenv("HM_REQUIRE_ORT"), "HM_REQUIRE_ORT is set but node is missing");
        fprintf(stderr, "HM-SKIP: ONNX Runtime check of %s: node is not installed\n", tag);
        cr_skip_test("node is not installed: ONNX Runtime check of %s skipped", tag);
    }
    const int64_t V = m->cfg.vocab_size, n = W_SEQS * Lt;
    struct hm_error err;
    char *dir = tu_mkdtemp("onnx");
    char *model = tu_path(dir, "model.onnx"), *tokp = tu_path(dir, "tokens.tok");
    char *refp = tu_path(dir, "logits.safetensors");
    struct hm_onnx *x = NULL;
    struct hm_onnx_opts o = HM_ONNX_OPTS_INIT;
    if (ext) /* ONNX Runtime reads model.onnx.data beside model.onnx */
        o.external_above = 0;
    cr_assert_eq(hm_onnx_build(m, &o, &x, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_onnx_write_files(x, model, 0, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(!!hm_onnx_data_location(x), !!ext);
    hm_onnx_free(x);

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
        fprintf(stderr, "HM-SKIP: ONNX Runtime check of %s: onnxruntime-node is missing\n", tag);
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
    check_ort(m, kind_names[k], L_TOKENS, NULL, 0);
    hm_model_free(m);
}

static void ort_external(enum kind k)
{
    struct hm_model *m = make_model(k);
    char tag[64];
    snprintf(tag, sizeof tag, "%s external", kind_names[k]);
    check_ort(m, tag, 16, NULL, 1);
    hm_model_free(m);
}

Test(onnx, ort_neox_hedgehog, .timeout = 300) { ort_kind(NEOX_HEDGEHOG); }
Test(onnx, ort_neox_hedgemamba, .timeout = 300) { ort_kind(NEOX_HEDGEMAMBA); }
Test(onnx, ort_llama_hedgehog, .timeout = 300) { ort_kind(LLAMA_HEDGEHOG); }
Test(onnx, ort_llama_hedgemamba, .timeout = 300) { ort_kind(LLAMA_HEDGEMAMBA); }
Test(onnx, ort_external_neox_hedgemamba, .timeout = 300) { ort_external(NEOX_HEDGEMAMBA); }
Test(onnx, ort_external_llama_hedgehog, .timeout = 300) { ort_external(LLAMA_HEDGEHOG); }

/* hm's chunked forms (SSM chunks of 32, linear attention of 64) against the
 * Scan over a longer sequence, with prefill and chunk lengths that cross
 * them; and a conv of width 1 (an empty conv window). */
Test(onnx, ort_long_and_conv_width_1, .timeout = 300)
{
    struct hm_model *m = make_model(NEOX_HEDGEMAMBA);
    check_ort(m, "neox-hedgemamba T=150", 150, "--prefill 70 --chunk 66", 0);
    hm_model_free(m);
    struct hm_config c = kind_cfg(LLAMA_HEDGEMAMBA);
    c.conv_width = 1;
    struct hm_error err;
    cr_assert_eq(hm_config_finish(&c, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_model_new(&c, &m, &err), HM_OK, "%s", err.msg);
    fill_random(m, 77);
    check_ort(m, "llama-hedgemamba K=1", 12, NULL, 0);
    hm_model_free(m);
}
