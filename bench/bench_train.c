/* bench_train — training throughput of the GPT-NeoX engine (forward +
 * backward + AdamW) next to the same-run sgemm peak (shared/BENCH.md).
 *
 * FLOPs per token (hm_train_flops_per_token): 6N for every trainable
 * weight matrix entry (2N forward, 4N backward; embed_out included, embed_in
 * a lookup: 0), plus causal attention 4·T·d per layer forward and twice that
 * backward (the full T×T square). Norms, activations, softmax, the loss and
 * the optimizer are not counted.
 *
 * usage: bench_train [--shape tiny|70m|160m] [--seq L] [--batch B]
 *                    [--steps N] [--threads N] [--backend ref|fast] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "trainer.h"
#include "presets.h"
#include "threads.h"

int main(int argc, char **argv)
{
    const char *shape = "70m", *bename = "fast";
    int64_t T = 512, B = 4, steps = 3;
    int threads = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--shape")) shape = argv[i + 1];
        else if (!strcmp(argv[i], "--seq")) T = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) B = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--backend")) bename = argv[i + 1];
        else {
            fprintf(stderr, "bench_train: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    struct hm_config cfg;
    char name[64];
    snprintf(name, sizeof name, "%s", strcmp(shape, "tiny") ? shape : "tiny");
    if (hm_config_preset(name, &cfg) != 0) {
        fprintf(stderr, "bench_train: unknown shape '%s'\n", shape);
        return 2;
    }
    const struct hm_backend *be = hm_backend_get(bename);
    hm_threads_set(threads);
    double peak = hm_bench_sgemm_gflops(threads);

    struct hm_model *m;
    struct hm_error err;
    if (hm_model_new(&cfg, &m, &err) != HM_OK) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    hm_model_init_random(m, 1, 0.02);
    hm_rotary_inv_freq(m->inv_freq, cfg.rotary_dims, cfg.rotary_emb_base);
    struct hm_train_opts o = {.B = B, .T = T, .accum = 1};
    struct hm_trainer *tr;
    if (hm_trainer_new(m, be, &o, &tr, &err) != HM_OK) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    int64_t np;
    const struct hm_opt_param *p = hm_trainer_params(tr, &np);
    struct hm_optim_cfg oc;
    hm_optim_cfg_defaults(&oc, HM_OPTIM_ADAMW, 0.1);
    struct hm_optim opt;
    hm_optim_init(&opt, &oc, p, np, &err);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    uint64_t s = 7;
    for (int64_t i = 0; i < B * (T + 1); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)cfg.vocab_size);
    }
    double *times = malloc(sizeof(double) * (size_t)(steps + 1));
    for (int64_t k = -1; k < steps; k++) { /* one warm-up step */
        double t0 = hm_bench_now();
        struct hm_train_loss loss;
        hm_trainer_zero_grad(tr);
        hm_trainer_accumulate(tr, tok, &loss, &err);
        hm_optim_step(&opt, be, (struct hm_opt_param *)p, np, 1e-4, hm_grad_global_norm(be, p, np));
        if (k >= 0)
            times[k] = hm_bench_now() - t0;
    }
    struct hm_bench_stats st = hm_bench_stats(times, (int)steps);
    double fpt = hm_train_flops_per_token(&cfg, T, 0);
    double tps = (double)(B * T) / st.median;
    double gf = fpt * tps / 1e9;
    printf("bench_train: shape %s (%lld params), batch %lld x seq %lld, %d threads, backend %s\n",
           shape, (long long)m->n_params, (long long)B, (long long)T, threads, be->name);
    printf("  sgemm peak (2048^3, same run):  %8.1f GFLOP/s\n", peak);
    printf("  training step: median %.3f s (min %.3f, max %.3f, %d steps)\n", st.median, st.min,
           st.max, st.n);
    printf("  tokens/s:                        %8.0f\n", tps);
    printf("  training FLOP rate:              %8.1f GFLOP/s (%.2f GFLOP/token counted)\n", gf,
           fpt / 1e9);
    printf("  ratio to sgemm peak:             %8.2f\n", gf / peak);
    free(times);
    free(tok);
    hm_optim_release(&opt);
    hm_trainer_free(tr);
    hm_model_free(m);
    return 0;
}
