/* onnx_export.h — the ONNX graph of a student (contract §9): one graph per
 * hedgehog or hedgemamba model of either family, any sequence length, the
 * recurrent state carried in and out (past_conv.{l}, past_state.{l} →
 * present_conv.{l}, present_state.{l}), standard operators only, weights
 * as initializers. Written with protobuf-c from onnx_subset.proto. */
#ifndef HM_ONNX_EXPORT_H
#define HM_ONNX_EXPORT_H

#include <stddef.h>

#include "hm_error.h"

struct hm_model;

/* The serialized ModelProto of m into *out (owned: free with free()), *len
 * bytes. Softmax teachers give HM_ERR_UNSUPPORTED. */
enum hm_status hm_onnx_export(const struct hm_model *m, void **out, size_t *len,
                              struct hm_error *err);

#endif
