/* mixer.h — the token mixers (contract §1–§3), one unit per file:
 * mixer_softmax.c (the teacher's causal softmax attention, KV cache),
 * mixer_hedgehog.c (contract §2 feature maps + causal linear attention),
 * mixer_hedgemamba.c (contract §3 conv, feature maps, selective scan, gate);
 * mixer.c maps a mixer, or a layer of a (hybrid) config, to its unit.
 *
 * A unit holds everything that differs between mixers: its forward (used by
 * inference, training, stage 1 and decoding through the one skeleton in
 * forward.c), its backward, its one-token step and state, its identity
 * init, its post-update hook and its workspace/state sizes. The family
 * skeleton around it (norms, the q/k/v projection, rotary, dense, MLP,
 * residuals) is shared; units read and write the per-head layout
 * [N, n_h, 3, p] (row stride 3 n_h p, head stride 3p), so every mixer
 * exists for every family.
 *
 * Conventions (kernels/backend.h): parameter gradients accumulate (+=),
 * activation gradients are written, NULL skips. */
#ifndef HM_MIXER_H
#define HM_MIXER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "hm_error.h"

/* The model's types (model.h) are only pointed to here: model.c reads the
 * units (identity init, workspace sizes), so mixer.h does not include it. */
struct hm_backend;
struct hm_layer;
struct hm_layer_acts;
struct hm_model;

/* The per-layer recurrent state of decoding. Every buffer below lives in
 * the memory of the model's backend (the one the step runs on: x->be);
 * host code reaches it only by upload/download. recurrent.c allocates the
 * constant-size part (win, S; state_floats) and the vectors; the softmax
 * unit grows its KV cache itself on x->be (a new allocation, the filled
 * rows copied by hm_backend_copy2d; kc, vc, scores are owned by the state
 * and freed by recurrent.c). */
struct hm_mixer_state {
    float *win;              /* [K−1, Q] conv window (hedgemamba) */
    float *S;                /* [n_h, 2F, p + 1] (hedgehog, hedgemamba) */
    float *kc, *vc;          /* [kv_cap, n_kv, p] KV cache (softmax) */
    float *scores;           /* [scores_cap] attention scratch (softmax) */
    int64_t kv_cap, scores_cap;
    float *v;                /* [n_h p] the token's v, gathered per head */
    float *conv_in, *conv_out; /* [K−1 + chunk, Q] prefill scratch (hedgemamba; shared) */
    const float *one, *zero; /* [n_h] 1s and 0s (hedgehog as HedgeMamba at Λ = I) */
};

/* A mixer call: layer l of m on B sequences of T rows, positions pos0..
 * With st (decoding): T = 1 is one step of B sequences, each with its own
 * state and position (rows are sequences); T > 1 (B = 1) is a prefill chunk
 * that starts from the carried state, leaves the state after its last row
 * and needs a->lse (den [n_h, T]). */
struct hm_mix {
    const struct hm_model *m;
    const struct hm_backend *be;
    int64_t l, B, T, pos0;
    struct hm_layer_acts *a;
    void *ws;                    /* forward/backward workspace (ws_size bytes) */
    size_t ws_size;
    struct hm_mixer_state *const *st; /* decoding: [B] each sequence's [L] states, or NULL */
    const int64_t *pos;          /* decoding: [B] positions of the rows, or NULL: pos0 */
};

/* Sequence b's state of this layer (decoding). */
static inline struct hm_mixer_state *hm_mix_state(const struct hm_mix *x, int64_t b)
{
    return &x->st[b][x->l];
}

/* Position of sequence b's first row. */
static inline int64_t hm_mix_pos(const struct hm_mix *x, int64_t b)
{
    return x->pos ? x->pos[b] : x->pos0;
}

/* Gradients of one mixer call (all [N, ...] like the activations). */
struct hm_mix_grads {
    struct hm_layer *g;          /* parameter grads of layer l (+=); NULL members skip */
    unsigned active;             /* HM_COMP_* that train (hedgemamba) */
    const float *datt;           /* [N, Da] gradient of att */
    float *dqkv;                 /* [N, 3 Da] written: per-head q, k, v grads; NULL: none */
    float *dys, *dz;             /* [N, Da] scratch (hedgemamba) */
    float *ddt, *ddtz;           /* [N, n_h] scratch (hedgemamba) */
    float *dphiq, *dphik;        /* [T, n_h, 2F] scratch, one sequence */
    float *da_tmp;               /* [N, d] scratch */
};

/* Activation buffers a unit needs beyond the skeleton's (hm_mixer_unit.bufs). */
enum hm_mixer_bufs {
    HM_MIX_FMAP = 1u << 0, /* phiq, phik [N, n_h, 2F] */
    HM_MIX_SSM = 1u << 1,  /* xraw [N, Q], dtz/dt [N, n_h], z/y [N, n_h p], conv window */
    HM_MIX_LSAVE = 1u << 2, /* lsave (training only): hm_mixer_lsave_floats per sequence */
};

struct hm_mixer_unit {
    const char *name;
    unsigned bufs;         /* enum hm_mixer_bufs */
    /* bytes of forward / backward workspace for sequences of T */
    size_t (*ws_size)(const struct hm_config *c, const struct hm_backend *be, int64_t T);
    size_t (*backward_ws_size)(const struct hm_config *c, const struct hm_backend *be,
                               int64_t T);
    /* (optional) a->a → a->proj through the projection (default: the
     * family's matmul); hedgemamba runs its conv here */
    void (*proj_forward)(const struct hm_mix *x);
    /* a->qkv (rotated) → a->att, saving a->lse etc. when non-NULL; with
     * x->st, one decoding step against the state */
    enum hm_status (*forward)(const struct hm_mix *x, struct hm_error *err);
    /* d(att) → d(qkv) (per head, before the rotary backward) */
    void (*backward)(const struct hm_mix *x, const struct hm_mix_grads *g);
    /* (optional) d(proj) [N, Q] → d(projection output) in place of the
     * conv (hedgemamba: d(xraw) into dxraw); returns the gradient the
     * projection matmul reads */
    const float *(*proj_backward)(const struct hm_mix *x, const struct hm_mix_grads *g,
                                  const float *dproj, float *dxraw);
    /* (optional) input-gradient terms besides the projection, added to da
     * [N, d] (hedgemamba: Δ and gate); da NULL: their parameter gradients
     * only */
    void (*backward_tail)(const struct hm_mix *x, const struct hm_mix_grads *g, float *da);
    /* (optional) identity values of the mixer's own tensors (contract §2, §3) */
    void (*identity)(struct hm_model *m, int64_t l);
    /* (optional) after every optimizer update, per layer (hedgemamba: A ≤ 0) */
    void (*post_update)(struct hm_model *m, const struct hm_backend *be, int64_t l);
    /* floats of one layer's constant-size state (0 for the KV cache) */
    int64_t (*state_floats)(const struct hm_config *c);
    /* forward FLOPs per token of one layer's mixer beyond the q/k/v and
     * dense products, counted as shared/BENCH.md and perf_torch.py do
     * (sequences of T; training is 3× this: backward = 2× forward) */
    double (*flops_per_token)(const struct hm_config *c, int64_t T);
};

/* Hedgehog's chunked linear attention per token (shared with hedgemamba):
 * per head, feature maps 4pF, the C×C intra-chunk products 2C·2F +
 * 2C(p+1), the chunk state and the carried-in state 4·2F(p+1); C = min(T,
 * the chunk). */
double hm_mixer_linattn_flops(const struct hm_config *c, int64_t T);

const struct hm_mixer_unit *hm_mixer_unit(enum hm_mixer mixer);

/* Layer l's unit (hm_layer_mixer: a hybrid's kept layers are softmax). */
const struct hm_mixer_unit *hm_layer_unit(const struct hm_config *c, int64_t l);
/* Over the units of all of c's layers: the union of their bufs, the
 * largest forward workspace (backward: the largest of forward and backward),
 * and the FLOPs per token of all layers' mixers together. */
unsigned hm_mixers_bufs(const struct hm_config *c);
size_t hm_mixers_ws_size(const struct hm_config *c, const struct hm_backend *be, int64_t T,
                         int backward);
double hm_mixers_flops(const struct hm_config *c, int64_t T);

/* Floats of one sequence's lsave (HM_MIX_LSAVE) at length T. */
int64_t hm_mixer_lsave_floats(const struct hm_config *c, int64_t T);

extern const struct hm_mixer_unit hm_mixer_softmax, hm_mixer_hedgehog, hm_mixer_hedgemamba;

/* Shared by the hedgehog and hedgemamba units (mixer_hedgehog.c): the
 * feature maps φq = C, φk = B of one sequence's rotated heads, and their
 * backward (into dqkv's q and k slots, W/b grads +=). */
void hm_mixer_featuremaps_forward(const struct hm_mix *x, const float *qkv, float *phiq,
                                  float *phik, int64_t T);
void hm_mixer_featuremaps_backward(const struct hm_mix *x, const struct hm_mix_grads *g,
                                   const float *qkv, const float *phiq, const float *phik,
                                   float *dq, int64_t T);
void hm_mixer_featuremaps_identity(struct hm_model *m, int64_t l);

#endif
