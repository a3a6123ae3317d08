/* gen_bench.h — hm-generate --bench: the cost of prefill and decoding of a
 * model (contract §8), and the teacher's position limit shared with generation. */
#ifndef HM_GEN_BENCH_H
#define HM_GEN_BENCH_H

#include <stdint.h>

#include "backend.h"
#include "model.h"

struct hm_gen_bench {
    const char *model;            /* its path, for messages and the JSON */
    const struct hm_model *m;     /* borrowed */
    const struct hm_backend *be;
    int64_t context, batch, decode_tokens;
    int64_t chunk;                /* prefill rows per chunk (0: the default) */
    uint64_t seed;                /* of the random prompts */
    int shared_prompt, json;
    double rss_loaded, load_peak; /* resident bytes after loading; its peak */
    int peak_reset;               /* 1: the peak RSS was reset after loading */
};

/* B sequences of random prompts of `context` tokens (one shared prompt with
 * shared_prompt), each prefilled in chunks, then decode_tokens greedy steps
 * of all B together (hm_model_step_batch); prints the result (one JSON
 * object with json). Exits on failure, naming the model. */
void hm_gen_bench_run(const struct hm_gen_bench *o);

/* Exits naming model when a softmax teacher cannot hold n_prompt + n_new
 * positions (what: the prompt's name in the message); students have no limit. */
void hm_gen_check_positions(const struct hm_model *m, const char *model, int64_t n_prompt,
                            int64_t n_new, const char *what);

#endif
