/* trainer_internal.h — private: the trainer's state (trainer.c). The
 * forward is the one skeleton (forward.h); the mixers' forward and
 * backward are their units (mixer.h). */
#ifndef HM_MODEL_TRAIN_INTERNAL_H
#define HM_MODEL_TRAIN_INTERNAL_H

#include "forward.h"
#include "trainer.h"

struct hm_trainer {
    struct hm_model *m;              /* borrowed */
    const struct hm_backend *be;    /* borrowed */
    struct hm_train_opts opt;
    int64_t N;                      /* B·T rows */
    struct hm_model *g;              /* owned: gradients */
    struct hm_layer_acts *la;       /* [L] saved activations */
    float *arena;                   /* owned: every activation buffer */
    float *hL, *meanf, *rstdf, *hf; /* final residual, LNf stats, LNf output */
    float *o, *mo;                  /* [N, d] attention output, MLP output */
    float *gbuf, *dmh, *dmg;        /* [N, I] (dmg: llama) */
    float *dh, *dt1, *dt2, *dt3;    /* [N, d] */
    float *datt;                    /* [N, n_h p] gradient of the merged heads */
    float *dqkv;                    /* [N, 3 n_h p] per-head q, k, v grads */
    float *proj, *dproj;            /* llama: [N, qkv_dim] projection and its grad
                                     * (neox: both alias qkv / dqkv) */
    float *dhf;                     /* [N, d] */
    float *dphiq, *dphik;           /* [T, n_h, 2F] one sequence (hedgehog, hedgemamba) */
    float *dys, *dz;                /* [N, n_h p] hedgemamba: scan output and gate grads */
    float *dxraw;                   /* [N, qkv_dim] hedgemamba: grad of the pre-conv qkv */
    float *ddt, *ddtz;              /* [N, n_h] hedgemamba: grads of Δ and its pre-act */
    unsigned active;                /* HM_COMP_* that train (hedgemamba) */
    float *logits, *dlogits;        /* [CE_ROWS, V] */
    float *tlogits, *thf;           /* teacher: [CE_ROWS, V], [N, d] */
    struct hm_model_ws tws;          /* teacher workspace */
    void *att_ws;
    size_t att_ws_size, attb_ws_size;
    int32_t *in, *tg;               /* [N] token ids, targets (backend memory) */
    int32_t *hin, *htg;             /* [N] their host copies (checked, then uploaded) */
    double *sums;                   /* [2] backend: CE and KL sums when the caller gives none */
    struct hm_tensor_view *views, *gviews;
    struct hm_opt_param *params;
    int64_t np;
};

#endif
