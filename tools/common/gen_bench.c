/* gen_bench.c — see gen_bench.h. */
#include "gen_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batches.h"
#include "cli.h"
#include "json_out.h"
#include "procmem.h"
#include "recurrent.h"
#include "sample.h"
#include "threads.h"

void hm_gen_check_positions(const struct hm_model *m, const char *model, int64_t n_prompt,
                            int64_t n_new, const char *what)
{
    const struct hm_config *c = &m->cfg;
    if (c->mixer == HM_MIXER_SOFTMAX && c->max_position_embeddings > 0 &&
        n_prompt + n_new > c->max_position_embeddings)
        hm_die("cannot generate from '%s': %s (%lld tokens) plus %lld new tokens exceed the "
               "teacher's position limit, max_position_embeddings %lld (students have none)",
               model, what, (long long)n_prompt, (long long)n_new,
               (long long)c->max_position_embeddings);
    if (hm_config_kept_count(c) > 0 && c->max_position_embeddings > 0 &&
        n_prompt + n_new > c->max_position_embeddings)
        hm_warning("'%s': %s (%lld tokens) plus %lld new tokens pass the %lld positions its "
                   "kept softmax layers were trained on: positions past them are untrained",
                   model, what, (long long)n_prompt, (long long)n_new,
                   (long long)c->max_position_embeddings);
}

void hm_gen_bench_run(const struct hm_gen_bench *o)
{
    const struct hm_config *c = &o->m->cfg;
    const int64_t V = c->vocab_size, B = o->batch, N = o->context, M = o->decode_tokens;
    const int64_t chunk = o->chunk ? o->chunk : HM_PREFILL_CHUNK;
    struct hm_error err;
    hm_gen_check_positions(o->m, o->model, N, M, "--context");
    struct hm_model_state **st = calloc((size_t)B, sizeof *st);
    float *logits = malloc(sizeof(float) * (size_t)(B * V));
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)N);
    if (!st || !logits || !prompt)
        hm_die("out of memory");
    uint64_t rng = o->seed;
    double pre = 0, pre_cpu = 0, dec;
    int64_t n_pre = 0; /* prompts prefilled */
    for (int64_t b = 0; b < B; b++) {
        if (hm_model_state_new(o->m, &st[b], &err) != HM_OK)
            hm_die("cannot benchmark '%s': %s", o->model, err.msg);
        if (b > 0 && o->shared_prompt) { /* sequence 0's state, in memory of its own */
            if (hm_model_state_copy(st[b], st[0], c, &err) != HM_OK)
                hm_die("cannot benchmark '%s': %s", o->model, err.msg);
            memcpy(logits + b * V, logits, sizeof(float) * (size_t)V);
            continue;
        }
        n_pre++;
        for (int64_t i = 0; i < N; i++)
            prompt[i] = (int32_t)(hm_splitmix64(&rng) % (uint64_t)V);
        double t0 = hm_now(), c0 = hm_procmem_cpu_seconds();
        if (hm_model_prefill(o->m, o->be, st[b], prompt, N, chunk, NULL, logits + b * V,
                             &err) != HM_OK)
            hm_die("cannot benchmark '%s': prefill: %s", o->model, err.msg);
        pre += hm_now() - t0;
        pre_cpu += hm_procmem_cpu_seconds() - c0;
    }
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)B);
    if (!toks)
        hm_die("out of memory");
    double t1 = hm_now(), c1 = hm_procmem_cpu_seconds();
    for (int64_t i = 0; i < M; i++) {
        for (int64_t b = 0; b < B; b++)
            toks[b] = hm_sample_argmax(logits + b * V, V);
        if (hm_model_step_batch(o->m, o->be, st, B, toks, logits, &err) != HM_OK)
            hm_die("cannot benchmark '%s': step %lld: %s", o->model, (long long)i, err.msg);
    }
    dec = hm_now() - t1;
    free(toks);
    const double dec_cpu = hm_procmem_cpu_seconds() - c1;
    const int64_t nkv = c->num_key_value_heads ? c->num_key_value_heads : c->num_attention_heads;
    double state = 0;
    for (int64_t b = 0; b < B; b++)
        state += 4.0 * (double)hm_model_state_floats(st[b], nkv, c->head_dim);
    const double rss = hm_procmem_peak_rss(), rss_end = hm_procmem_rss();
    const double ptps = pre > 0 ? (double)(n_pre * N) / pre : 0;
    const double dtps = dec > 0 ? (double)(B * M) / dec : 0;
    if (o->json) {
        printf("{\"version\": 1, \"bench\": true, \"model\": ");
        hm_json_write_string(stdout, o->model, strlen(o->model));
        printf(", \"arch\": \"%s\", \"family\": \"%s\", \"mixer\": \"%s\", \"context\": %lld, "
               "\"batch\": %lld, \"decode_tokens\": %lld, \"threads\": %d, \"prefill_chunk\": "
               "%lld, \"prefill_s\": %.6g, \"prefill_tokens_per_s\": %.6g, \"decode_s\": %.6g, "
               "\"decode_tokens_per_s\": %.6g, \"ms_per_step\": %.6g, \"prefill_cpu_s\": %.6g, "
               "\"decode_cpu_s\": %.6g, \"peak_rss_bytes\": %.0f, "
               "\"peak_rss_includes_load\": %s, \"load_peak_rss_bytes\": %.0f, "
               "\"rss_end_bytes\": %.0f, \"rss_loaded_bytes\": %.0f, \"weights_bytes\": %.0f, "
               "\"state_bytes\": %.0f, \"shared_prompt\": %s}\n",
               hm_arch_name(c), hm_family_name(c->family), hm_mixer_name(c->mixer),
               (long long)N, (long long)B, (long long)M, hm_threads_get(),
               (long long)chunk, pre, ptps, dec, dtps,
               M > 0 ? 1e3 * dec / (double)M : 0, pre_cpu, dec_cpu, rss,
               o->peak_reset ? "false" : "true",
               o->load_peak, rss_end, o->rss_loaded,
               4.0 * (double)o->m->n_params, state, o->shared_prompt ? "true" : "false");
    } else {
        printf("model: %s (%s, %s)\ncontext: %lld  batch: %lld  decode tokens: %lld  threads: %d\n"
               "prefill: %.1f tokens/s (%.3f s)\ndecode: %.1f tokens/s (%.3f s)\n"
               "peak RSS: %.1f MiB (at the end %.1f MiB)  state: %.1f MiB  weights: %.1f MiB\n",
               o->model, hm_arch_name(c), hm_family_name(c->family), (long long)N, (long long)B,
               (long long)M, hm_threads_get(), ptps, pre, dtps, dec, rss / 1048576.0,
               rss_end / 1048576.0, state / 1048576.0, 4.0 * (double)o->m->n_params / 1048576.0);
    }
    for (int64_t b = 0; b < B; b++)
        hm_model_state_free(st[b]);
    free(st);
    free(logits);
    free(prompt);
}

