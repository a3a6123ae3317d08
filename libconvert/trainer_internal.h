/* neox_train_internal.h — private: the trainer's state, shared by
 * neox_train.c (skeleton, loss, bookkeeping) and train_mixer.c (the
 * attention / linear attention / HedgeMamba mixer forward and backward). */
#ifndef HM_MODEL_TRAIN_INTERNAL_H
#define HM_MODEL_TRAIN_INTERNAL_H

#include "trainer.h"

struct layer_acts {
    float *h;              /* [N, d] residual stream entering the layer */
    float *mean1, *rstd1;  /* [N] */
    float *a;              /* [N, d] norm1 output */
    float *qkv;            /* [N, 3 n_h p] per-head q, k, v after rotary */
    float *att;            /* [N, n_h p] merged heads */
    float *lse;            /* [B, n_h, T] softmax log-sum-exp; linear/SSM: denominators */
    float *phiq, *phik;    /* [N, n_h, 2F] feature maps of q, k (hedgehog, hedgemamba) */
    float *xraw;           /* [N, qkv_dim] projection before the conv (hedgemamba) */
    float *dtz, *dt;       /* [N, n_h] Δ before / after softplus (hedgemamba) */
    float *z, *y;          /* [N, n_h p] gate pre-activation, scan output (hedgemamba) */
    float *t;              /* [N, d] sequential residual only: attn + h */
    float *mean2, *rstd2;  /* [N] */
    float *a2;             /* [N, d] LN2 output */
    float *mh;             /* [N, I] MLP pre-activation (llama: the up projection) */
    float *mg;             /* [N, I] llama: SwiGLU gate pre-activation */
};

struct hm_trainer {
    struct hm_model *m;              /* borrowed */
    const struct hm_backend *be;    /* borrowed */
    struct hm_train_opts opt;
    int64_t N;                      /* B·T rows */
    struct hm_model *g;              /* owned: gradients */
    struct layer_acts *la;          /* [L] */
    float *arena;                   /* owned: every activation buffer */
    float *hL, *meanf, *rstdf, *hf; /* final residual, LNf stats, LNf output */
    float *o, *gbuf, *dmh, *dmg;    /* [N, d], [N, I], [N, I], [N, I] (dmg: llama) */
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
    int32_t *in, *tg;               /* [N] */
    struct hm_tensor_view *views, *gviews;
    struct hm_opt_param *params;
    int64_t np;
};

/* Mixer of layer l on all B sequences: a->a → a->att (dense input), saving
 * what its backward needs. */
void hm_train_mixer_forward(struct hm_trainer *tr, int64_t l);
/* Mixer backward: tr->datt holds d(att) [N, n_h p]; on return tr->dt1 holds
 * d(a) [N, d], the gradient of the LN1 output (all mixer inputs summed).
 * Parameter gradients accumulate into tr->g's layer l. */
void hm_train_mixer_backward(struct hm_trainer *tr, int64_t l);

#endif
