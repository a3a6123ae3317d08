/* onnx_export.h — the ONNX graph of a student (contract §9): one graph per
 * hedgehog or hedgemamba model of either family, any sequence length, the
 * recurrent state carried in and out (past_conv.{l}, past_state.{l} →
 * present_conv.{l}, present_state.{l}), standard operators only, weights
 * as initializers. Written with protobuf-c from onnx_subset.proto.
 *
 * External data (contract §11): a protobuf file holds at most 2 GiB, so
 * when the initializers' bytes pass opts.external_above (default: 2 GiB
 * less a 64 MiB margin for the graph itself) every weight initializer keeps
 * its bytes in one file beside the graph, named opts.location
 * ("model.onnx.data"): data_location EXTERNAL, external_data "location",
 * "offset" (a multiple of 64), "length" (numel · 4), no raw_data — the
 * layout onnx.save_model(..., save_as_external_data=True,
 * all_tensors_to_one_file=True) writes. The graph's small constants
 * (hm.const.*: shapes, scalars) stay inline, as onnx's size_threshold keeps
 * small tensors. Below the threshold the graph is one self-contained file. */
#ifndef HM_ONNX_EXPORT_H
#define HM_ONNX_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hm_error.h"

struct hm_model;
struct hm_onnx;

#define HM_ONNX_MAX_BYTES ((uint64_t)INT32_MAX)      /* protobuf's 2 GiB message limit */
#define HM_ONNX_GRAPH_MARGIN ((uint64_t)64 << 20)    /* room left for the graph's nodes */
#define HM_ONNX_EXTERNAL_ABOVE (HM_ONNX_MAX_BYTES - HM_ONNX_GRAPH_MARGIN)
#define HM_ONNX_DATA_LOCATION "model.onnx.data"
#define HM_ONNX_DATA_ALIGN 64

struct hm_onnx_opts {
    /* initializer bytes above which the weights go to external data
     * (0: always external, the test hook of docs/onnx.md) */
    uint64_t external_above;
    /* the external data file's name, a plain file name beside the graph
     * (no '/'); NULL: HM_ONNX_DATA_LOCATION */
    const char *location;
};

#define HM_ONNX_OPTS_INIT {HM_ONNX_EXTERNAL_ABOVE, NULL}

/* The export of m (o NULL: HM_ONNX_OPTS_INIT). m is borrowed: the
 * external data are streamed from its weights by hm_onnx_write_data, so it
 * must outlive *out and stay on the host. Softmax teachers give
 * HM_ERR_UNSUPPORTED. out: owned, free with hm_onnx_free(). */
enum hm_status hm_onnx_build(const struct hm_model *m, const struct hm_onnx_opts *o,
                             struct hm_onnx **out, struct hm_error *err);
void hm_onnx_free(struct hm_onnx *x); /* accepts NULL */

/* The serialized ModelProto (model.onnx), *len bytes: borrowed, valid until
 * hm_onnx_free. Self-contained unless hm_onnx_data_location is non-NULL. */
const void *hm_onnx_graph(const struct hm_onnx *x, size_t *len);
/* The external data file's name the graph refers to (borrowed), or NULL
 * when the graph holds every byte itself. */
const char *hm_onnx_data_location(const struct hm_onnx *x);
/* Bytes of the external data file (0 when self-contained). */
uint64_t hm_onnx_data_size(const struct hm_onnx *x);

/* Streams the external data file into fp: the tensors in the graph's order,
 * each at its offset (zero bytes pad to it), hm_onnx_data_size bytes in
 * all, straight from the model's weights (no copy). Nothing is written when
 * the graph is self-contained. */
enum hm_status hm_onnx_write_data(const struct hm_onnx *x, FILE *fp, struct hm_error *err);

/* The external data file of a graph written to path: path's folder +
 * hm_onnx_data_location. owned: free(); NULL when self-contained or out of
 * memory. */
char *hm_onnx_data_path(const struct hm_onnx *x, const char *path);

/* Writes the graph to path and, with external data, the data file beside
 * it (the folder of path + hm_onnx_data_location), both atomically and
 * together (hm_afile_commit_all: both appear, or neither). An existing file
 * is replaced only with force. path "-": the graph on stdout (refused with
 * external data). */
enum hm_status hm_onnx_write_files(const struct hm_onnx *x, const char *path, int force,
                                   struct hm_error *err);

#endif
