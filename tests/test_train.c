/* Training runs end to end through the tools: determinism, resume
 * (--stop-after and a real SIGKILL) bit-exactness, the NaN guard, the log. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "model_views.h"
#include "optim.h"
#include "presets.h"
#include "safetensors.h"
#include "same_tensors.h"
#include "testutil.h"

static char *g_dir;

/* A tiny model (d 32) and a byte-level token file of real English text. */
static void setup(void)
{
    g_dir = tu_mkdtemp("train");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd %s && printf '{\"model_type\":\"gpt_neox\",\"vocab_size\":257,\"hidden_size\":32,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"intermediate_size\":64,"
             "\"max_position_embeddings\":64}' > cfg.json && "
             "%s/hm-init --config cfg.json --seed 3 -o init.st -q && "
             "%s/hm-tokenize --bytes %s/cs336_corpus.en -o data.tok -q",
             g_dir, HM_BIN_DIR, HM_BIN_DIR, HM_SHARED_DATA);
    char *err = NULL;
    int rc = tu_run(cmd, NULL, &err);
    cr_assert_eq(rc, 0, "setup failed: %s", err);
    free(err);
}

static int finetune(const char *args, char **err)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd %s && OMP_NUM_THREADS=2 %s/hm-finetune init.st --data data.tok --batch 4 "
             "--seq-len 32 --lr 3e-3 --warmup 2 --seed 7 --threads 2 -q %s",
             g_dir, HM_BIN_DIR, args);
    return tu_run(cmd, NULL, err);
}

TestSuite(train, .init = setup, .timeout = 600);

Test(train, deterministic_and_learns)
{
    char *err;
    cr_assert_eq(finetune("--steps 12 -o a.st --log a.jsonl --val-data data.tok --val-every 6 "
                          "--val-tokens 2048", &err), 0, "%s", err);
    free(err);
    cr_assert_eq(finetune("--steps 12 -o b.st", &err), 0, "%s", err);
    free(err);
    tu_assert_same_tensors(g_dir, "a.st", "b.st");
    tu_assert_same_tensors(g_dir, "a.st.state", "b.st.state");
    /* the log: one line per step with the promised keys; loss falls */
    char *lp = tu_path(g_dir, "a.jsonl");
    size_t n;
    char *text = tu_read_file(lp, &n), *line = text;
    int lines = 0;
    double first = NAN, last = NAN, val = NAN;
    while (*line) {
        char *nl = strchr(line, '\n');
        cr_assert_not_null(nl);
        *nl = 0;
        cJSON *j = cJSON_Parse(line);
        cr_assert_not_null(j, "bad log line %s", line);
        static const char *keys[] = {"step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s"};
        for (int k = 0; k < 6; k++)
            cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(j, keys[k])), "no %s in %s", keys[k], line);
        cr_assert_eq((int)cJSON_GetObjectItem(j, "step")->valuedouble, lines + 1);
        double l = cJSON_GetObjectItem(j, "loss")->valuedouble;
        if (lines == 0)
            first = l;
        last = l;
        if (cJSON_GetObjectItem(j, "val_loss"))
            val = cJSON_GetObjectItem(j, "val_loss")->valuedouble;
        cJSON_Delete(j);
        lines++;
        line = nl + 1;
    }
    cr_assert_eq(lines, 12);
    cr_assert(last < first - 0.5, "loss did not fall: %g -> %g", first, last);
    cr_assert(isfinite(val) && val < log(257.0), "val loss %g", val);
    free(text);
    free(lp);
    /* the last validation (after the last update) is hm-eval's mean NLL of
     * the saved weights on the same windows: one definition, batched alike */
    char cmd[4096], *out = NULL, *e = NULL;
    snprintf(cmd, sizeof cmd,
             "cd %s && OMP_NUM_THREADS=2 %s/hm-eval a.st --data data.tok --seq-len 32 "
             "--max-tokens 2048 --threads 2 --json",
             g_dir, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, &out, &e), 0, "%s", e);
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "hm-eval printed %s", out);
    double want = cJSON_GetObjectItem(j, "mean_nll")->valuedouble;
    cr_assert(fabs(val - want) <= 1e-9 * want, "val_loss %.17g vs hm-eval %.17g", val, want);
    cJSON_Delete(j);
    free(out), free(e);
}

Test(train, resume_after_stop_is_bit_exact)
{
    char *err;
    cr_assert_eq(finetune("--steps 10 -o straight.st", &err), 0, "%s", err);
    free(err);
    cr_assert_eq(finetune("--steps 10 -o chunked.st --stop-after 4 --log c.jsonl", &err), 0,
                 "%s", err);
    free(err);
    /* without --resume an existing output is refused */
    cr_assert_eq(finetune("--steps 10 -o chunked.st", &err), 1);
    cr_assert(strstr(err, "exists"), "%s", err);
    free(err);
    cr_assert_eq(finetune("--steps 10 -o chunked.st --resume --stop-after 3 --log c.jsonl", &err),
                 0, "%s", err);
    free(err);
    cr_assert_eq(finetune("--steps 10 -o chunked.st --resume --log c.jsonl", &err), 0, "%s", err);
    free(err);
    tu_assert_same_tensors(g_dir, "straight.st", "chunked.st");
    tu_assert_same_tensors(g_dir, "straight.st.state", "chunked.st.state");
    /* resume with different flags is refused, naming the difference */
    cr_assert_eq(finetune("--steps 10 -o chunked.st --resume --seq-len 16", &err), 1);
    cr_assert(strstr(err, "seq_len"), "%s", err);
    free(err);
    /* the log holds each step exactly once */
    char *lp = tu_path(g_dir, "c.jsonl");
    size_t n;
    char *log = tu_read_file(lp, &n);
    int lines = 0;
    for (char *p = log; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 10, "log has %d lines", lines);
    free(log);
    free(lp);
}

Test(train, resume_after_sigkill_is_bit_exact)
{
    char *err;
    cr_assert_eq(finetune("--steps 30 -o ref.st", &err), 0, "%s", err);
    free(err);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd %s && exec env OMP_NUM_THREADS=2 %s/hm-finetune init.st --data data.tok "
             "--batch 4 --seq-len 32 --lr 3e-3 --warmup 2 --seed 7 --threads 2 -q --steps 30 "
             "--save-every 2 -o killed.st",
             g_dir, HM_BIN_DIR);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    char *state = tu_path(g_dir, "killed.st.state");
    struct stat sb;
    for (int i = 0; i < 6000 && stat(state, &sb) != 0; i++)
        usleep(5000);
    usleep(20000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    /* the kill really fired, mid-run: the child died of SIGKILL (it did not
     * finish), and the state it left is short of the 30 steps */
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "the child was not killed (it %s)", WIFEXITED(status) ? "finished" : "stopped");
    cr_assert_eq(stat(state, &sb), 0, "no state was written before the kill");
    struct hm_st_file *sf = NULL;
    struct hm_error e;
    cr_assert_eq(hm_st_open(state, &sf, &e), HM_OK, "%s", e.msg);
    cJSON *run = cJSON_Parse(hm_st_metadata_get(sf, "hm.run"));
    const cJSON *step = cJSON_GetObjectItem(run, "step");
    cr_assert(cJSON_IsNumber(step) && step->valuedouble < 30, "the killed run had finished");
    fprintf(stderr, "killed after step %g of 30\n", step->valuedouble);
    cJSON_Delete(run);
    hm_st_close(sf);
    cr_assert_eq(finetune("--steps 30 -o killed.st --save-every 2 --resume", &err), 0, "%s", err);
    free(err);
    /* the temporary file the kill left behind was removed by the resumed run */
    DIR *dir = opendir(g_dir);
    struct dirent *de;
    while (dir && (de = readdir(dir)) != NULL)
        cr_expect(strncmp(de->d_name, ".killed.st.tmp.", 15) != 0 &&
                      strncmp(de->d_name, ".killed.st.state.tmp.", 21) != 0,
                  "leftover '%s'", de->d_name);
    if (dir)
        closedir(dir);
    tu_assert_same_tensors(g_dir, "ref.st", "killed.st");
    tu_assert_same_tensors(g_dir, "ref.st.state", "killed.st.state");
    free(state);
}

Test(train, nan_guard_names_step_and_tensor)
{
    /* a checkpoint with one NaN weight */
    struct hm_config c;
    cr_assert_eq(hm_config_preset("tiny", &c), 0);
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 64;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    struct hm_model *m;
    cr_assert_eq(hm_model_new(&c, &m, NULL), HM_OK);
    hm_model_init_random(m, 1, 0.02);
    m->layers[1].fc1_w[5] = NAN;
    char *p = tu_path(g_dir, "nan.st");
    cr_assert_eq(hm_model_save(m, p, 1, NULL, HM_DTYPE_F32, NULL, NULL), HM_OK);
    hm_model_free(m);
    char cmd[8192], *err;
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-finetune nan.st --data data.tok --batch 2 --seq-len 16 --steps 3 "
             "-o nan-out.st", g_dir, HM_BIN_DIR);
    int rc = tu_run(cmd, NULL, &err);
    cr_assert_eq(rc, 1, "rc %d: %s", rc, err);
    cr_assert(strstr(err, "non-finite loss at step 1"), "%s", err);
    cr_assert(strstr(err, "last good state was saved"), "%s", err);
    free(err);
    char *out = tu_path(g_dir, "nan-out.st"), *st = tu_path(g_dir, "nan-out.st.state");
    struct stat sb;
    cr_assert_neq(stat(out, &sb), 0, "a failed run must not write the output");
    cr_assert_eq(stat(st, &sb), 0, "the last good state is kept");
    free(out);
    free(st);
    free(p);
}

Test(train, bad_usage_and_inputs)
{
    char *err;
    cr_assert_eq(finetune("-o x.st", &err), 2);
    cr_assert(strstr(err, "missing --steps or --tokens"), "%s", err);
    free(err);
    cr_assert_eq(finetune("--steps 2 --tokens 100 -o x.st", &err), 2);
    free(err);
    cr_assert_eq(finetune("--steps 2 --optimizer adam -o x.st", &err), 2);
    free(err);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-finetune init.st --data missing.tok --steps 2 --seq-len 32 -o x.st",
             g_dir, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, NULL, &err), 1);
    cr_assert(strstr(err, "'missing.tok'"), "%s", err);
    free(err);
    cr_assert_eq(finetune("--steps 2 --seq-len 32 -n", &err), 0, "%s", err);
    free(err);
}

/* --optimizer sgd --clip X clips (issue: the clip was dropped): the same
 * global-norm scale as AdamW, w1 = w0 − lr·s·g with s = min(1, X / (‖g‖ +
 * 1e-6)); SGD's default clip is 0 (contract §4), which is exactly w0 − lr·g. */
Test(train, sgd_clips_through_the_one_clipping_path)
{
    const struct hm_backend *be = hm_backend_get("ref");
    const float w0[4] = {1, 2, 3, 4}, g0[4] = {3, 4, 0, -4};
    const double norm = sqrt(9.0 + 16 + 16), lr = 0.5;
    for (int clipped = 0; clipped < 2; clipped++) {
        float w[4], g[4];
        memcpy(w, w0, sizeof w);
        memcpy(g, g0, sizeof g);
        struct hm_opt_param p = {"w", w, g, 4, 1};
        struct hm_optim_cfg c;
        hm_optim_cfg_defaults(&c, HM_OPTIM_SGD, 0);
        cr_assert_eq(c.clip, 0.0, "sgd's default clip is %g, want 0", c.clip);
        if (clipped)
            c.clip = 1.0;
        struct hm_optim o;
        struct hm_error err;
        cr_assert_eq(hm_optim_init(&o, &c, be, &p, 1, &err), HM_OK, "%s", err.msg);
        hm_optim_step(&o, be, &p, 1, lr, norm);
        const float step = clipped ? (float)(lr * (double)(float)(1.0 / (norm + 1e-6))) : (float)lr;
        for (int i = 0; i < 4; i++)
            cr_assert_eq(w[i], w0[i] - step * g0[i], "clip %d: w[%d] = %.9g, want %.9g", clipped, i,
                         w[i], w0[i] - step * g0[i]);
        hm_optim_release(&o);
    }
}
