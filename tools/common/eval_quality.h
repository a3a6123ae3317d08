/* eval_quality.h — hm-eval --teacher: the generation-quality figures of
 * libconvert/decode/quality.h for the checkpoint against a teacher, on the
 * same windows as its perplexity. */
#ifndef HM_EVAL_QUALITY_H
#define HM_EVAL_QUALITY_H

#include <stdio.h>

#include "quality.h"

struct hm_eval_quality {
    const char *teacher;        /* --teacher, or NULL: nothing to do */
    struct hm_quality_opts o;   /* windows and seq_len from hm-eval's run */
    struct hm_quality q;        /* the figures, once run */
};

/* Defaults of --prompts, --prompt-len (at most the window), --new-tokens. */
#define HM_EVAL_QUALITY_PROMPTS 16
#define HM_EVAL_QUALITY_PROMPT_LEN 32
#define HM_EVAL_QUALITY_NEW 64

/* Loads e->teacher narrow onto be, reads the windows' tokens of data and
 * measures student against it. Exits naming the file on failure. */
void hm_eval_quality_run(struct hm_eval_quality *e, const struct hm_model *student,
                         const struct hm_backend *be, const char *data);

/* The figures as text lines, or (json) as `, "quality": {...}` inside the
 * caller's object. */
void hm_eval_quality_print(FILE *fp, const struct hm_eval_quality *e, int json);

#endif
