/* eval_quality.c — hm-eval --teacher (eval_quality.h). */
#include "eval_quality.h"

#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "json_out.h"
#include "tokfile.h"

void hm_eval_quality_run(struct hm_eval_quality *e, const struct hm_model *student,
                         const struct hm_backend *be, const char *data)
{
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_ckpt *ck;
    struct hm_model *t;
    if (hm_ckpt_open(e->teacher, &ck, &err) != HM_OK ||
        hm_model_load_narrow(ck, hm_ckpt_config(ck), be, &t, &err) != HM_OK)
        hm_die_err("cannot read", e->teacher, &err);
    hm_cli_ckpt_notes(ck, e->teacher);
    hm_ckpt_close(ck);
    hm_warn_nonfinite(e->teacher, t);
    const struct hm_quality_opts *o = &e->o;
    if (o->prompts > o->windows)
        hm_die("cannot score generations on '%s': --prompts %lld needs as many windows of %lld, "
               "it holds %lld", data, (long long)o->prompts, (long long)o->seq_len,
               (long long)o->windows);
    struct hm_tok_file *tf;
    const int64_t n = o->windows * o->seq_len + 1;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    if (!tok)
        hm_die("out of memory for %lld tokens of '%s'", (long long)n, data);
    if (hm_tok_open(data, &tf, &err) != HM_OK || hm_tok_read(tf, 0, n, tok, &err) != HM_OK)
        hm_die_err("cannot read", data, &err);
    hm_tok_close(tf);
    if (hm_quality_measure(student, t, be, tok, n, o, &e->q, &err) != HM_OK)
        hm_die("cannot compare with the teacher '%s' on '%s': %s", e->teacher, data, err.msg);
    free(tok);
    hm_model_free(t);
}

/* , "key": v (hm_json_write_number). */
static void num(FILE *fp, const char *key, double v)
{
    fprintf(fp, ", \"%s\": ", key);
    hm_json_write_number(fp, v);
}

void hm_eval_quality_print(FILE *fp, const struct hm_eval_quality *e, int json)
{
    const struct hm_quality_opts *o = &e->o;
    const struct hm_quality *q = &e->q;
    if (json) {
        fprintf(fp, ", \"quality\": {\"teacher\": ");
        hm_json_write_string(fp, e->teacher, strlen(e->teacher));
        fprintf(fp, ", \"windows\": %lld, \"positions\": %lld", (long long)o->windows,
                (long long)(o->windows * o->seq_len));
        num(fp, "kl", q->kl);
        num(fp, "agreement", q->agreement);
        fprintf(fp, ", \"prompts\": %lld, \"prompt_len\": %lld, \"new_tokens\": %lld, "
                "\"seed\": %llu", (long long)o->prompts, (long long)o->prompt_len,
                (long long)o->new_tokens, (unsigned long long)o->seed);
        num(fp, "student_nll", q->student_nll);
        num(fp, "teacher_nll", q->teacher_nll);
        num(fp, "common_prefix", q->common_prefix);
        fprintf(fp, "}");
        return;
    }
    fprintf(fp, "teacher: %s\n", e->teacher);
    fprintf(fp, "kl to the teacher: %.6f (teacher-forced, %lld positions)\n", q->kl,
            (long long)(o->windows * o->seq_len));
    fprintf(fp, "top-1 agreement: %.4f\n", q->agreement);
    if (o->prompts == 0)
        return;
    fprintf(fp, "teacher-scored nll: %.6f of its samples, %.6f of the teacher's own (%lld "
            "prompts of %lld tokens, %lld new, temperature 1, seed %llu)\n", q->student_nll,
            q->teacher_nll, (long long)o->prompts, (long long)o->prompt_len,
            (long long)o->new_tokens, (unsigned long long)o->seed);
    fprintf(fp, "greedy common prefix: %.2f of %lld tokens\n", q->common_prefix,
            (long long)o->new_tokens);
}
