/* layer_gain.h — the KL-guided choice of the layers a hybrid keeps (SPEC §11
 * "KL-guided layer choice"; fla-org/hybrid-distillation's selection).
 *
 * For a student S, its teacher T and held-out windows W: KL(S) is the mean
 * over W's target positions of KL(softmax z_T ‖ softmax z_S) at τ = 1
 * (quality.h's teacher-forced kl). S⁽ˡ⁾ is S with layer l's mixer replaced
 * by T's attention layer l: T's attention tensors (group "attention":
 * q/k/v and dense), every other tensor S's, layer l kept softmax. The gain
 * of l is KL(S) − KL(S⁽ˡ⁾); layers rank by gain, largest first (ties: the
 * lower l first); keeping k layers keeps the first k.
 *
 * Cost: L + 1 teacher-forced comparisons of W windows (each 2·W window
 * forwards: the student's and the teacher's); memory: S and T in fp32 on
 * the host, one S⁽ˡ⁾ at a time on be, and T on be. */
#ifndef HM_LAYER_GAIN_H
#define HM_LAYER_GAIN_H

#include <stdint.h>

#include "model.h"
#include "quality.h"

/* S⁽ˡ⁾ from host models s and t (hm_model_load; the same skeleton), on the
 * host; l < 0: a copy of s. out: owned, free with hm_model_free(). */
enum hm_status hm_model_restore_layer(const struct hm_model *s, const struct hm_model *t,
                                      int64_t l, struct hm_model **out, struct hm_error *err);

struct hm_layer_gains {
    double kl;      /* KL(S) */
    double *kl_l;   /* [L] KL(S⁽ˡ⁾); NaN for a layer S already keeps softmax */
    double *gain;   /* [L] KL(S) − KL(S⁽ˡ⁾); NaN likewise */
    int64_t *rank;  /* [n_rank] the layers S can restore, by gain (see above) */
    int64_t n_rank;
};

/* The gains of every layer of s (host) against t (host) and tp (t placed
 * on be) on tokens ([n_tokens] host, at least W·L + 1, each < V); o's
 * windows and seq_len (prompts are ignored: teacher-forced only). out's
 * arrays: owned, free with hm_layer_gains_free(). */
enum hm_status hm_layer_gains_measure(const struct hm_model *s, const struct hm_model *t,
                                      const struct hm_model *tp, const struct hm_backend *be,
                                      const int32_t *tokens, int64_t n_tokens,
                                      const struct hm_quality_opts *o,
                                      struct hm_layer_gains *out, struct hm_error *err);
void hm_layer_gains_free(struct hm_layer_gains *g);

#endif
