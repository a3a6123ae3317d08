/* onnx_export.c — placeholder until the exporter lands (onnx_export.h). */
#include "onnx_export.h"

enum hm_status hm_onnx_export(const struct hm_model *m, void **out, size_t *len,
                              struct hm_error *err)
{
    (void)m;
    *out = NULL;
    *len = 0;
    return hm_error_set(err, HM_ERR_UNSUPPORTED, "ONNX export is not built yet");
}
