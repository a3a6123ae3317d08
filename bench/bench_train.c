/* bench_train — training throughput (forward + backward + clip + AdamW +
 * post-update) of any mixer on the NeoX family, next to the same-run sgemm
 * peak (shared/BENCH.md), set up as ../shared/peers/perf_torch.py --bench
 * sets up its peer: same shapes, random weights, AdamW (0.9, 0.95, wd 0.1),
 * clip 1.0, CE, embeddings frozen for the students and trained for the
 * teacher by default.
 *
 * FLOPs per token: hm_train_flops_per_token (trainer.h), the count of
 * BENCH.md and of perf_torch.py, so that FLOP-rate ratios are tokens/s
 * ratios. Norms, activations, softmax, the loss and the optimizer are not
 * counted.
 *
 * --profile prints the per-op time table of the timed steps
 * (kernels/op_profile.h): each backend op's share of the step and its own
 * FLOP rate where it has one.
 *
 * usage: bench_train [--shape demo|tiny|70m|160m] [--mixer softmax|hedgehog|hedgemamba]
 *                    [--seq L] [--batch B] [--freeze-emb 0|1] [--steps N]
 *                    [--threads N] [--backend ref|fast] [--profile] [--json] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "op_profile.h"
#include "presets.h"
#include "threads.h"
#include "trainer.h"

/* The peer's shapes: demo is perf_torch.py's (vocab 257, d 256, 4 layers,
 * 4 heads, MLP 1024, 8 × 256), the others hm presets (1 × 512). */
static int bench_shape(const char *shape, struct hm_config *cfg, int64_t *T, int64_t *B)
{
    if (!strcmp(shape, "demo")) {
        hm_config_defaults(cfg);
        cfg->vocab_size = 257;
        cfg->hidden_size = 256;
        cfg->num_hidden_layers = 4;
        cfg->num_attention_heads = 4;
        cfg->intermediate_size = 1024;
        cfg->max_position_embeddings = 2048;
        *T = 256, *B = 8;
        return hm_config_finish(cfg, NULL) == HM_OK ? 0 : -1;
    }
    *T = 512, *B = 1;
    return hm_config_preset(shape, cfg);
}

int main(int argc, char **argv)
{
    const char *shape = "70m", *bename = "fast", *mixer = "softmax";
    int64_t T = 0, B = 0, steps = 3;
    int threads = 2, freeze = -1, profile = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--profile")) profile = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!v) {
            fprintf(stderr, "bench_train: '%s' needs a value\n", a);
            return 2;
        } else if (i++, !strcmp(a, "--shape")) shape = v;
        else if (!strcmp(a, "--mixer")) mixer = v;
        else if (!strcmp(a, "--seq")) T = atoll(v);
        else if (!strcmp(a, "--batch")) B = atoll(v);
        else if (!strcmp(a, "--freeze-emb")) freeze = atoi(v);
        else if (!strcmp(a, "--steps")) steps = atoll(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--backend")) bename = v;
        else {
            fprintf(stderr, "bench_train: unknown option '%s'\n", a);
            return 2;
        }
    }
    struct hm_config cfg;
    int64_t T0, B0;
    int fam;
    if (bench_shape(shape, &cfg, &T0, &B0) != 0) {
        fprintf(stderr, "bench_train: unknown shape '%s'\n", shape);
        return 2;
    }
    if (hm_arch_parse(strcmp(mixer, "softmax") ? mixer : "gpt_neox", &fam, &cfg.mixer) != 0) {
        fprintf(stderr, "bench_train: unknown mixer '%s'\n", mixer);
        return 2;
    }
    cfg.feature_dim = 0; /* = head_dim, as hm-linearize's default */
    if (hm_config_finish(&cfg, NULL) != HM_OK) {
        fprintf(stderr, "bench_train: mixer '%s' does not fit shape '%s'\n", mixer, shape);
        return 2;
    }
    T = T ? T : T0, B = B ? B : B0;
    if (freeze < 0)
        freeze = cfg.mixer != HM_MIXER_SOFTMAX;
    const struct hm_backend *be = hm_backend_get(bename);
    if (!be || steps < 1 || T < 1 || B < 1) {
        fprintf(stderr, "bench_train: bad --backend, --steps, --seq or --batch\n");
        return 2;
    }
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
    if (hm_model_place(m, be, &err) != HM_OK) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    struct hm_train_opts o = {.B = B, .T = T, .accum = 1, .freeze_embeddings = freeze,
                              .kd_temperature = 1, .ce_weight = 1};
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
    if (hm_optim_init(&opt, &oc, be, p, np, &err) != HM_OK) {
        fprintf(stderr, "bench_train: %s\n", err.msg);
        return 1;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(B * (T + 1)));
    double *times = malloc(sizeof(double) * (size_t)steps);
    double *sq = hm_backend_alloc(be, sizeof(double)); /* the gradient norm², backend memory */
    if (!tok || !times || !sq) {
        fprintf(stderr, "bench_train: out of memory\n");
        return 1;
    }
    uint64_t s = 7;
    for (int64_t i = 0; i < B * (T + 1); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)cfg.vocab_size);
    }
    double loss0 = 0, loss1 = 0;
    for (int64_t k = -2; k < steps; k++) { /* two warm-up steps */
        if (k == 0 && profile)
            hm_op_profile_start();
        double t0 = hm_bench_now();
        struct hm_train_loss loss;
        hm_trainer_zero_grad(tr);
        if (hm_trainer_accumulate(tr, tok, NULL, &loss, &err) != HM_OK) {
            fprintf(stderr, "bench_train: %s\n", err.msg);
            return 1;
        }
        const double zero = 0;
        double sq_host;
        hm_backend_upload(be, sq, &zero, sizeof zero);
        hm_grad_sqnorm(be, p, np, sq);
        hm_backend_download(be, &sq_host, sq, sizeof sq_host);
        hm_optim_step(&opt, be, (struct hm_opt_param *)p, np, 1e-4, sqrt(sq_host));
        hm_trainer_post_update(tr);
        if (k >= 0)
            times[k] = hm_bench_now() - t0;
        loss1 = loss.ce;
        if (k == -2)
            loss0 = loss.ce;
    }
    double total = 0;
    for (int64_t k = 0; k < steps; k++)
        total += times[k];
    if (profile)
        hm_op_profile_stop();
    double peak_after = hm_bench_sgemm_gflops(threads);
    struct hm_bench_stats st = hm_bench_stats(times, (int)steps);
    double fpt = hm_train_flops_per_token(&cfg, T, freeze);
    double tps = (double)(B * T) / st.median;
    double gf = fpt * tps / 1e9;
    printf("bench_train: shape %s, mixer %s (%lld params), batch %lld x seq %lld, embeddings %s, "
           "%d threads, backend %s\n",
           shape, mixer, (long long)m->n_params, (long long)B, (long long)T,
           freeze ? "frozen" : "trained", threads, hm_backend_name(be));
    printf("  sgemm peak (2048^3, same run):  %8.1f GFLOP/s (after: %.1f)\n", peak, peak_after);
    printf("  training step: median %.4f s (min %.4f, max %.4f, %d steps); loss %.4f -> %.4f\n",
           st.median, st.min, st.max, st.n, loss0, loss1);
    printf("  tokens/s:                        %8.0f\n", tps);
    printf("  training FLOP rate:              %8.1f GFLOP/s (%.1f MFLOP/token counted)\n", gf,
           fpt / 1e6);
    printf("  ratio to sgemm peak:             %8.2f\n", gf / peak);
    if (profile)
        hm_op_profile_print(stdout, total, (int)steps);
    if (json)
        printf("{\"shape\":\"%s\",\"mixer\":\"%s\",\"batch\":%lld,\"seq_len\":%lld,"
               "\"frozen_embeddings\":%s,\"threads\":%d,\"train_tok_s\":%.1f,"
               "\"step_s_median\":%.5f,\"step_s_min\":%.5f,\"step_s_max\":%.5f,"
               "\"flops_per_token_train\":%.0f,\"train_gflops\":%.2f,\"sgemm_gflops\":%.1f,"
               "\"sgemm_gflops_after\":%.1f}\n",
               shape, mixer, (long long)B, (long long)T, freeze ? "true" : "false", threads, tps,
               st.median, st.min, st.max, fpt, gf, peak, peak_after);
    free(times);
    free(tok);
    hm_backend_free(be, (void **)&sq);
    hm_optim_release(&opt);
    hm_trainer_free(tr);
    hm_model_free(m);
    return 0;
}
