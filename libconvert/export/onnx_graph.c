/* onnx_graph.c — the ONNX graph builder (onnx_graph.h).
 *
 * Every message and array is calloc'ed into the builder's arena (a list of
 * pointers freed at the end), so building is a sequence of appends with no
 * ownership bookkeeping. Growing lists (nodes, initializers, inputs,
 * outputs) double into a fresh arena block; the old block stays until the
 * end (at most 2× the final size). */
#include "onnx_graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct og_list {
    void **v;
    size_t n, cap;
};

struct og_graph {
    struct og_builder *b;
    Onnx__GraphProto *gp;
    struct og_list nodes, inits, inputs, outputs;
    struct og_list consts; /* the og_const_* tensors among inits (deduplicated) */
    const char *ext_location; /* og_graph_external: NULL while inline */
    uint64_t ext_align, ext_size;
    struct og_list ext;       /* struct og_external, in file order */
};

struct og_builder {
    void **blocks; /* every allocation */
    size_t n_blocks, cap_blocks;
    int failed;
    char scope[64];
    int64_t counter;
    char placeholder[2];
};

struct og_builder *og_builder_new(void) { return calloc(1, sizeof(struct og_builder)); }

void og_builder_free(struct og_builder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n_blocks; i++)
        free(b->blocks[i]);
    free(b->blocks);
    free(b);
}

int og_failed(const struct og_builder *b) { return b->failed; }

void og_fail(struct og_builder *b) { b->failed = 1; }

/* size bytes of zeroed arena memory, or NULL (b->failed set). */
static void *og_alloc(struct og_builder *b, size_t size)
{
    if (b->n_blocks == b->cap_blocks) {
        size_t cap = b->cap_blocks ? 2 * b->cap_blocks : 256;
        void **nb = realloc(b->blocks, cap * sizeof *nb);
        if (!nb) {
            b->failed = 1;
            return NULL;
        }
        b->blocks = nb;
        b->cap_blocks = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) {
        b->failed = 1;
        return NULL;
    }
    b->blocks[b->n_blocks++] = p;
    return p;
}

static char *og_strdup(struct og_builder *b, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = og_alloc(b, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

const char *og_strf(struct og_builder *b, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf) { /* names are short; refuse rather than truncate */
        b->failed = 1;
        return b->placeholder;
    }
    char *p = og_strdup(b, buf);
    return p ? p : b->placeholder;
}

void og_scope(struct og_builder *b, const char *scope)
{
    snprintf(b->scope, sizeof b->scope, "%s", scope);
}

static void og_push(struct og_builder *b, struct og_list *l, void *item)
{
    if (!item)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        void **nv = og_alloc(b, cap * sizeof *nv);
        if (!nv)
            return;
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = item;
}

struct og_graph *og_graph_new(struct og_builder *b, const char *name)
{
    struct og_graph *g = og_alloc(b, sizeof *g);
    Onnx__GraphProto *gp = og_alloc(b, sizeof *gp);
    if (!g || !gp)
        return NULL;
    onnx__graph_proto__init(gp);
    gp->name = og_strdup(b, name);
    g->b = b;
    g->gp = gp;
    return g;
}

Onnx__GraphProto *og_graph_proto(struct og_graph *g)
{
    Onnx__GraphProto *gp = g->gp;
    gp->n_node = g->nodes.n;
    gp->node = (Onnx__NodeProto **)g->nodes.v;
    gp->n_initializer = g->inits.n;
    gp->initializer = (Onnx__TensorProto **)g->inits.v;
    gp->n_input = g->inputs.n;
    gp->input = (Onnx__ValueInfoProto **)g->inputs.v;
    gp->n_output = g->outputs.n;
    gp->output = (Onnx__ValueInfoProto **)g->outputs.v;
    return gp;
}

static Onnx__ValueInfoProto *og_value_info(struct og_builder *b, const char *name, int elem_type,
                                           int rank, const int64_t *dims,
                                           const char *const *params)
{
    Onnx__ValueInfoProto *vi = og_alloc(b, sizeof *vi);
    Onnx__TypeProto *tp = og_alloc(b, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = og_alloc(b, sizeof *tt);
    if (!vi || !tp || !tt)
        return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    vi->name = og_strdup(b, name);
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = elem_type;
    if (rank < 0)
        return vi;
    Onnx__TensorShapeProto *sp = og_alloc(b, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dv = og_alloc(b, sizeof *dv * (size_t)(rank ? rank : 1));
    if (!sp || !dv)
        return NULL;
    onnx__tensor_shape_proto__init(sp);
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = og_alloc(b, sizeof *d);
        if (!d)
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d);
        if (params && params[i]) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = og_strdup(b, params[i]);
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        dv[i] = d;
    }
    sp->n_dim = (size_t)rank;
    sp->dim = dv;
    tt->shape = sp;
    return vi;
}

void og_input(struct og_graph *g, const char *name, int elem_type, int rank,
              const int64_t *dims, const char *const *params)
{
    og_push(g->b, &g->inputs, og_value_info(g->b, name, elem_type, rank, dims, params));
}

void og_output(struct og_graph *g, const char *name, int elem_type, int rank,
               const int64_t *dims, const char *const *params)
{
    og_push(g->b, &g->outputs, og_value_info(g->b, name, elem_type, rank, dims, params));
}

static Onnx__TensorProto *og_tensor(struct og_builder *b, const char *name, int elem_type,
                                    int rank, const int64_t *dims)
{
    Onnx__TensorProto *t = og_alloc(b, sizeof *t);
    int64_t *d = og_alloc(b, sizeof *d * (size_t)(rank ? rank : 1));
    if (!t || !d)
        return NULL;
    onnx__tensor_proto__init(t);
    if (rank)
        memcpy(d, dims, sizeof *d * (size_t)rank);
    t->n_dims = (size_t)rank;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = elem_type;
    t->name = og_strdup(b, name);
    return t;
}

static Onnx__StringStringEntryProto *og_entry(struct og_builder *b, const char *key,
                                              const char *value)
{
    Onnx__StringStringEntryProto *e = og_alloc(b, sizeof *e);
    if (!e)
        return NULL;
    onnx__string_string_entry_proto__init(e);
    e->key = og_strdup(b, key);
    e->value = og_strdup(b, value);
    return e->key && e->value ? e : NULL;
}

/* t's bytes data: [len] go to the external data file at the next aligned
 * offset. */
static void og_set_external(struct og_graph *g, Onnx__TensorProto *t, const float *data,
                            uint64_t len)
{
    struct og_builder *b = g->b;
    struct og_external *x = og_alloc(b, sizeof *x);
    Onnx__StringStringEntryProto **kv = og_alloc(b, 3 * sizeof *kv);
    if (!x || !kv)
        return;
    x->data = data;
    x->offset = (g->ext_size + g->ext_align - 1) & ~(g->ext_align - 1);
    x->length = len;
    g->ext_size = x->offset + len;
    char num[24];
    kv[0] = og_entry(b, "location", g->ext_location);
    snprintf(num, sizeof num, "%llu", (unsigned long long)x->offset);
    kv[1] = og_entry(b, "offset", num);
    snprintf(num, sizeof num, "%llu", (unsigned long long)x->length);
    kv[2] = og_entry(b, "length", num);
    if (!kv[0] || !kv[1] || !kv[2]) {
        b->failed = 1;
        return;
    }
    t->n_external_data = 3;
    t->external_data = kv;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    og_push(b, &g->ext, x);
}

const char *og_init_f32_view(struct og_graph *g, const char *name, int rank,
                             const int64_t *dims, const float *data)
{
    Onnx__TensorProto *t = og_tensor(g->b, name, OG_FLOAT, rank, dims);
    if (!t)
        return g->b->placeholder;
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    if (g->ext_location) {
        og_set_external(g, t, data, n * sizeof(float));
    } else {
        t->has_raw_data = 1;
        t->raw_data.len = n * sizeof(float);
        t->raw_data.data = (uint8_t *)(uintptr_t)data; /* packing only reads it */
    }
    og_push(g->b, &g->inits, t);
    return t->name;
}

void og_graph_external(struct og_graph *g, const char *location, uint64_t align)
{
    g->ext_location = og_strdup(g->b, location);
    g->ext_align = align;
    if (!g->ext_location)
        g->b->failed = 1;
}

struct og_external *const *og_externals(const struct og_graph *g, size_t *n, uint64_t *size)
{
    *n = g->ext.n;
    *size = g->ext_size;
    return (struct og_external *const *)g->ext.v;
}

static const char *og_const_raw(struct og_graph *g, int elem_type, int rank, int64_t n,
                                const void *v, size_t elem_size)
{
    struct og_builder *b = g->b;
    for (size_t i = 0; i < g->consts.n; i++) { /* the same constant again: reuse it */
        const Onnx__TensorProto *c = g->consts.v[i];
        if (c->data_type == elem_type && (int)c->n_dims == rank &&
            c->raw_data.len == elem_size * (size_t)n &&
            !memcmp(c->raw_data.data, v, c->raw_data.len))
            return c->name;
    }
    char name[32];
    snprintf(name, sizeof name, "hm.const.%lld", (long long)b->counter++);
    Onnx__TensorProto *t = og_tensor(b, name, elem_type, rank, &n);
    uint8_t *data = og_alloc(b, elem_size * (size_t)(n ? n : 1));
    if (!t || !data)
        return b->placeholder;
    memcpy(data, v, elem_size * (size_t)n);
    t->has_raw_data = 1;
    t->raw_data.len = elem_size * (size_t)n;
    t->raw_data.data = data;
    og_push(b, &g->inits, t);
    og_push(b, &g->consts, t);
    return t->name;
}

const char *og_const_i64(struct og_graph *g, const int64_t *v, int64_t n)
{
    return og_const_raw(g, OG_INT64, 1, n, v, sizeof(int64_t));
}

const char *og_const_i64_scalar(struct og_graph *g, int64_t v)
{
    return og_const_raw(g, OG_INT64, 0, 1, &v, sizeof(int64_t));
}

const char *og_const_f32(struct og_graph *g, const float *v, int64_t n)
{
    return og_const_raw(g, OG_FLOAT, 1, n, v, sizeof(float));
}

const char *og_const_scalar(struct og_graph *g, float v)
{
    return og_const_raw(g, OG_FLOAT, 0, 1, &v, sizeof(float));
}

static Onnx__AttributeProto *og_attribute(struct og_builder *b, const struct og_attr *a)
{
    Onnx__AttributeProto *p = og_alloc(b, sizeof *p);
    if (!p)
        return NULL;
    onnx__attribute_proto__init(p);
    p->name = og_strdup(b, a->name);
    p->has_type = 1;
    switch (a->kind) {
    case OG_A_INT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        p->has_i = 1;
        p->i = a->i;
        break;
    case OG_A_FLOAT:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        p->has_f = 1;
        p->f = a->f;
        break;
    case OG_A_INTS: {
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        int64_t *v = og_alloc(b, sizeof *v * (size_t)(a->n ? a->n : 1));
        if (!v)
            return NULL;
        memcpy(v, a->ints, sizeof *v * (size_t)a->n);
        p->n_ints = (size_t)a->n;
        p->ints = v;
        break;
    }
    case OG_A_GRAPH:
        p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        p->g = a->g ? og_graph_proto(a->g) : NULL;
        if (!p->g)
            b->failed = 1;
        break;
    }
    return p;
}

const char *og_node_n(struct og_graph *g, const char *op, const char *const *in, int n_in,
                      int n_out, const char *const *outs, const char **names,
                      const struct og_attr *attrs, int n_attrs)
{
    struct og_builder *b = g->b;
    Onnx__NodeProto *nd = og_alloc(b, sizeof *nd);
    char **iv = og_alloc(b, sizeof *iv * (size_t)(n_in ? n_in : 1));
    char **ov = og_alloc(b, sizeof *ov * (size_t)(n_out ? n_out : 1));
    Onnx__AttributeProto **av = og_alloc(b, sizeof *av * (size_t)(n_attrs ? n_attrs : 1));
    if (!nd || !iv || !ov || !av)
        goto fail;
    onnx__node_proto__init(nd);
    for (int i = 0; i < n_in; i++)
        if (!in[i] || !(iv[i] = og_strdup(b, in[i]))) /* NULL: a missing tensor (a bug) */
            goto fail;
    for (int i = 0; i < n_out; i++) {
        const char *o = outs ? outs[i] : NULL;
        ov[i] = o ? og_strdup(b, o)
                  : (char *)og_strf(b, "%s%s_%lld", b->scope, op, (long long)b->counter++);
        if (!ov[i] || ov[i] == b->placeholder)
            goto fail;
        if (names)
            names[i] = ov[i];
    }
    for (int i = 0; i < n_attrs; i++)
        if (!(av[i] = og_attribute(b, &attrs[i])))
            goto fail;
    nd->n_input = (size_t)n_in;
    nd->input = iv;
    nd->n_output = (size_t)n_out;
    nd->output = ov;
    nd->n_attribute = (size_t)n_attrs;
    nd->attribute = av;
    nd->op_type = og_strdup(b, op);
    nd->name = ov[0];
    og_push(b, &g->nodes, nd);
    return ov[0];
fail:
    b->failed = 1;
    for (int i = 0; names && i < n_out; i++)
        names[i] = b->placeholder;
    return b->placeholder;
}

const char *og_node(struct og_graph *g, const char *op, const char *const *in, int n_in,
                    const char *out, const struct og_attr *attrs, int n_attrs)
{
    const char *outs[1] = {out};
    return og_node_n(g, op, in, n_in, 1, outs, NULL, attrs, n_attrs);
}
