/* onnx_graph.h — a small builder of ONNX graphs over the protobuf-c messages
 * of onnx_subset.proto (private to libconvert; onnx_export.c uses it).
 *
 * One struct og_builder owns every byte the messages point at (an arena of
 * allocations freed together by og_builder_free), except the raw data of
 * borrowed float initializers (og_init_f32_view), which must outlive the
 * packing. Builder calls never fail visibly: on an allocation failure they
 * return a placeholder name and og_failed() turns 1, so the caller builds
 * the whole graph and checks once before packing.
 *
 * Names: outputs are auto-named "<scope><op>_<n>" (og_scope sets the scope)
 * unless given; every node is named after its first output.
 * Attribute kinds follow AttributeProto (INT, FLOAT, INTS, GRAPH). */
#ifndef HM_ONNX_GRAPH_H
#define HM_ONNX_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "onnx_subset.pb-c.h"

#define OG_FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define OG_INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

struct og_builder;
struct og_graph;

enum og_attr_kind { OG_A_INT = 0, OG_A_FLOAT, OG_A_INTS, OG_A_GRAPH };

struct og_attr {
    const char *name;
    enum og_attr_kind kind;
    int64_t i;              /* OG_A_INT */
    float f;                /* OG_A_FLOAT */
    const int64_t *ints;    /* OG_A_INTS: [n] (copied) */
    int n;
    struct og_graph *g;     /* OG_A_GRAPH */
};

#define OG_AI(nm, v) ((struct og_attr){.name = (nm), .kind = OG_A_INT, .i = (v)})
#define OG_AF(nm, v) ((struct og_attr){.name = (nm), .kind = OG_A_FLOAT, .f = (v)})
#define OG_AG(nm, gr) ((struct og_attr){.name = (nm), .kind = OG_A_GRAPH, .g = (gr)})
#define OG_AINTS(nm, ...)                                                              \
    ((struct og_attr){.name = (nm), .kind = OG_A_INTS, .ints = (const int64_t[]){__VA_ARGS__}, \
                      .n = (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))})

/* A list of input names for og_node: og_node(g, "Add", OG_IN(a, b), ...). */
#define OG_IN(...)                                                                      \
    (const char *const[]){__VA_ARGS__},                                                 \
        (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

/* owned: free with og_builder_free(); NULL when out of memory. */
struct og_builder *og_builder_new(void);
void og_builder_free(struct og_builder *b); /* accepts NULL */
/* 1 once any allocation failed (the graph is then incomplete). */
int og_failed(const struct og_builder *b);
/* Marks the build failed (a caller's own allocation failed). */
void og_fail(struct og_builder *b);

/* A formatted string in the builder's arena (borrowed until og_builder_free). */
const char *og_strf(struct og_builder *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefix of auto-generated names from now on (copied). */
void og_scope(struct og_builder *b, const char *scope);

/* A new empty graph (main graph or a Scan/Loop body). Borrowed: lives until
 * og_builder_free. */
struct og_graph *og_graph_new(struct og_builder *b, const char *name);
/* The graph's message with its lists filled in (call after the last change;
 * borrowed until og_builder_free). */
Onnx__GraphProto *og_graph_proto(struct og_graph *g);

/* Graph inputs and outputs. rank < 0: the type without a shape (subgraph
 * values); else dims[i] ≥ 0 is a fixed size and params[i] (when params and
 * params[i] are non-NULL) a symbolic dimension name. */
void og_input(struct og_graph *g, const char *name, int elem_type, int rank,
              const int64_t *dims, const char *const *params);
void og_output(struct og_graph *g, const char *name, int elem_type, int rank,
               const int64_t *dims, const char *const *params);

/* A float initializer whose bytes stay at data (borrowed: must outlive the
 * packing, or with external data the writing of the data file;
 * little-endian host). dims: [rank]. Returns name. */
const char *og_init_f32_view(struct og_graph *g, const char *name, int rank,
                             const int64_t *dims, const float *data);

/* External data: from this call on, og_init_f32_view tensors of g keep their
 * bytes out of the graph, in one file named location (copied): data_location
 * EXTERNAL, external_data "location", "offset" (each rounded up to a
 * multiple of align, a power of two), "length"; no raw_data. */
void og_graph_external(struct og_graph *g, const char *location, uint64_t align);

/* One tensor of the external data file: data [length / 4] floats (borrowed
 * from og_init_f32_view's caller) at byte offset of the file. */
struct og_external {
    const float *data;
    uint64_t offset, length;
};

/* The external tensors of g in file order, *n of them (borrowed until
 * og_builder_free); *size: the bytes of the file (the last one's end). */
struct og_external *const *og_externals(const struct og_graph *g, size_t *n, uint64_t *size);
/* Constants (copied; auto-named "hm.const.<n>"): a 1-D int64 tensor of n
 * values, an int64 scalar, a 1-D float tensor, a float scalar (rank 0). */
const char *og_const_i64(struct og_graph *g, const int64_t *v, int64_t n);
const char *og_const_i64_scalar(struct og_graph *g, int64_t v);
const char *og_const_f32(struct og_graph *g, const float *v, int64_t n);
const char *og_const_scalar(struct og_graph *g, float v);

/* One node with n_in inputs ("" = an omitted optional input) and n_out
 * outputs; outs[i] NULL or outs NULL: auto-named. Returns the first output's
 * name; names[i] (when names is non-NULL, [n_out]) receive every output. */
const char *og_node_n(struct og_graph *g, const char *op, const char *const *in, int n_in,
                      int n_out, const char *const *outs, const char **names,
                      const struct og_attr *attrs, int n_attrs);
/* One output (out NULL: auto-named). */
const char *og_node(struct og_graph *g, const char *op, const char *const *in, int n_in,
                    const char *out, const struct og_attr *attrs, int n_attrs);

#endif
