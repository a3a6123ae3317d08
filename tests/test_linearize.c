/* Stage 1 (hm-linearize): the gradient of the layer-wise objective (cos,
 * mse and attn-ce) against finite differences of an independent double
 * implementation (tests/support/ref_neox.c), exposed by one SGD step, and
 * hm_linearizer_eval's loss against the training pass's; the tool end to end:
 * teacher tensors copied byte for byte, only feature maps change, the
 * per-layer loss is logged and falls, downstream tools accept the output. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "linearize.h"
#include "model_views.h"
#include "optim.h"
#include "presets.h"
#include "ref_neox.h"
#include "safetensors.h"
#include "testutil.h"

static struct hm_model *tiny_teacher(uint64_t seed, int parallel)
{
    struct hm_config c;
    hm_config_defaults(&c);
    c.vocab_size = 23;
    c.hidden_size = 8;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 2;
    c.intermediate_size = 16;
    c.rotary_pct = 0.5;
    c.use_parallel_residual = parallel;
    cr_assert_eq(hm_config_finish(&c, NULL), HM_OK);
    struct hm_model *m;
    cr_assert_eq(hm_model_new(&c, &m, NULL), HM_OK);
    hm_model_init_random(m, seed, 0.5);
    return m;
}

static void stage1_gradient(int parallel, int64_t F, enum hm_lin_objective obj)
{
    char *dir = tu_mkdtemp("lin-grad");
    char *path = tu_path(dir, "teacher.st");
    struct hm_model *tm = tiny_teacher(11 + (uint64_t)parallel, parallel);
    cr_assert_eq(hm_model_save(tm, path, 0, NULL, HM_DTYPE_F32, NULL, NULL), HM_OK);
    struct hm_ckpt *ck;
    struct hm_error err;
    cr_assert_eq(hm_ckpt_open(path, &ck, &err), HM_OK, "%s", err.msg);
    const int64_t T = 9;
    struct hm_linearizer *lz;
    cr_assert_eq(hm_linearizer_new(ck, F, NULL, hm_backend_get("fast"), 1, T, 1, &lz, &err), HM_OK,
                 "%s", err.msg);
    cr_assert_eq(hm_linearizer_set_objective(lz, obj, &err), HM_OK, "%s", err.msg);
    struct hm_run_model rm;
    hm_linearizer_run_model(lz, &rm);
    int64_t np;
    const struct hm_opt_param *p = rm.params(rm.ctx, &np);
    cr_assert_eq(np, 4 * tm->cfg.num_hidden_layers);
    /* move the maps away from the identity so the check is not special */
    uint64_t s = 99;
    for (int64_t i = 0; i < np; i++)
        for (int64_t j = 0; j < p[i].n; j++)
            p[i].w[j] += (float)(0.3 * tu_rand_normal(&s));
    int32_t tok[10] = {3, 17, 4, 4, 22, 0, 9, 13, 1, 8};
    double loss, aux[2], sums[64] = {0}; /* host memory: the fast backend's */
    cr_assert(rm.n_sums >= 1 && rm.n_sums <= 64, "n_sums %d", rm.n_sums);
    cr_assert_eq(rm.n_aux, 2);
    rm.zero_grad(rm.ctx);
    cr_assert_eq(rm.accumulate(rm.ctx, tok, sums, &err), HM_OK, "%s", err.msg);
    rm.loss_of(rm.ctx, sums, &loss, aux);

    /* independent: double teacher activations and double stage-1 loss */
    int64_t nw;
    double *w = tu_ref_params_from_model(tm, &nw);
    const struct hm_config *sc = &hm_linearizer_student(lz)->cfg;
    const int64_t L = sc->num_hidden_layers, d = sc->hidden_size;
    double *qkv = malloc(sizeof(double) * (size_t)(L * T * 3 * d));
    double *o = malloc(sizeof(double) * (size_t)(L * T * d));
    tu_ref_neox_layers(&tm->cfg, w, tok, T, qkv, o);
    int64_t nfm = 0;
    for (int64_t i = 0; i < np; i++)
        nfm += p[i].n;
    double *fm = malloc(sizeof(double) * (size_t)nfm), *g = malloc(sizeof(double) * (size_t)nfm);
    for (int64_t i = 0, k = 0; i < np; i++)
        for (int64_t j = 0; j < p[i].n; j++)
            fm[k++] = p[i].w[j];
    const int ko = (int)obj;
    double ref = tu_ref_stage1_loss_obj(sc, w, fm, qkv, o, T, ko);
    cr_expect(fabs(loss - ref) < 1e-5 * fmax(1, fabs(ref)),
              "%s: stage-1 loss %.9g vs independent %.9g", hm_lin_objective_name(obj), loss, ref);
    cr_expect(fabs((aux[0] + aux[1]) / 2 - loss) < 1e-12, "per-layer losses average to the loss");
    /* the no-gradient pass (tests, reports) measures the same loss */
    double ev[2];
    cr_assert_eq(hm_linearizer_eval(lz, tok, T, ev, &err), HM_OK, "%s", err.msg);
    cr_expect(fabs(ev[0] - aux[0]) <= 1e-6 * fmax(1e-3, aux[0]) &&
                  fabs(ev[1] - aux[1]) <= 1e-6 * fmax(1e-3, aux[1]),
              "%s: eval %.9g %.9g, training pass %.9g %.9g", hm_lin_objective_name(obj), ev[0],
              ev[1], aux[0], aux[1]);
    const double h = 1e-6;
    for (int64_t k = 0; k < nfm; k++) {
        double x0 = fm[k];
        fm[k] = x0 + h;
        double fp = tu_ref_stage1_loss_obj(sc, w, fm, qkv, o, T, ko);
        fm[k] = x0 - h;
        double fmn = tu_ref_stage1_loss_obj(sc, w, fm, qkv, o, T, ko);
        fm[k] = x0;
        g[k] = (fp - fmn) / (2 * h);
    }
    /* one SGD step exposes the gradient: (w0 − w1) / η */
    struct hm_optim_cfg oc;
    hm_optim_cfg_defaults(&oc, HM_OPTIM_SGD, 0);
    struct hm_optim opt;
    cr_assert_eq(hm_optim_init(&opt, &oc, hm_backend_get("fast"), p, np, NULL), HM_OK);
    const double eta = 0.25;
    double sq = 0;
    hm_grad_sqnorm(hm_backend_get("fast"), p, np, &sq);
    hm_optim_step(&opt, hm_backend_get("fast"), (struct hm_opt_param *)p, np, eta, sqrt(sq));
    double mx = 1e-3, errmax = 0;
    for (int64_t i = 0, k = 0; i < np; i++)
        for (int64_t j = 0; j < p[i].n; j++, k++) {
            double exposed = (fm[k] - (double)p[i].w[j]) / eta;
            mx = fabs(g[k]) > mx ? fabs(g[k]) : mx;
            errmax = fabs(exposed - g[k]) > errmax ? fabs(exposed - g[k]) : errmax;
        }
    /* fp32 forward/backward and the fp32 rounding of w1 (|w| ~ 1, /η):
     * observed 1.8e-6 and 4.3e-6 relative to the largest gradient */
    cr_expect(errmax <= 5e-5 * mx, "%s: exposed gradient off by %.3g (largest %.3g)",
              hm_lin_objective_name(obj), errmax, mx);
    cr_log_info("%s F=%lld: loss %.6g, largest gradient %.3g, exposed off by %.3g",
                hm_lin_objective_name(obj), (long long)F, loss, mx, errmax);
    hm_optim_release(&opt);
    free(fm); free(g); free(qkv); free(o); free(w);
    hm_linearizer_free(lz);
    hm_ckpt_close(ck);
    hm_model_free(tm);
    free(path);
    free(dir);
}

Test(linearize, gradient_parallel_F3) { stage1_gradient(1, 3, HM_LIN_OBJECTIVE_COS); }
Test(linearize, gradient_sequential_F5) { stage1_gradient(0, 5, HM_LIN_OBJECTIVE_COS); }
Test(linearize, gradient_mse_parallel_F3) { stage1_gradient(1, 3, HM_LIN_OBJECTIVE_MSE); }
Test(linearize, gradient_mse_sequential_F5) { stage1_gradient(0, 5, HM_LIN_OBJECTIVE_MSE); }
Test(linearize, gradient_attn_ce_parallel_F3) { stage1_gradient(1, 3, HM_LIN_OBJECTIVE_ATTN_CE); }
Test(linearize, gradient_attn_ce_sequential_F5) { stage1_gradient(0, 5, HM_LIN_OBJECTIVE_ATTN_CE); }

Test(linearize, objective_names)
{
    for (int i = 0; i < 3; i++) {
        enum hm_lin_objective o;
        const char *name = hm_lin_objective_name((enum hm_lin_objective)i);
        cr_assert_eq(hm_lin_objective_parse(name, &o), 0, "%s", name);
        cr_expect_eq((int)o, i);
    }
    enum hm_lin_objective o = HM_LIN_OBJECTIVE_MSE;
    cr_expect_eq(hm_lin_objective_parse("cosine", &o), -1);
    cr_expect_eq(hm_lin_objective_parse("", &o), -1);
    cr_expect_eq((int)o, (int)HM_LIN_OBJECTIVE_MSE, "a failed parse leaves *out alone");
}

Test(linearize, tool_end_to_end, .timeout = 300)
{
    char *dir = tu_mkdtemp("lin-tool");
    char cmd[8192], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd,
             "cd %s && printf '{\"model_type\":\"gpt_neox\",\"vocab_size\":257,\"hidden_size\":32,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"intermediate_size\":64}' > c.json"
             " && %s/hm-init --config c.json --seed 4 --dtype bf16 -o teacher.st -q"
             " && %s/hm-tokenize --bytes %s/cs336_corpus.en -o data.tok -q"
             " && %s/hm-linearize teacher.st -o hh.st --data data.tok --steps 15 --batch 2"
             " --seq-len 32 --lr 3e-2 --warmup 0 --log lin.jsonl -q",
             dir, HM_BIN_DIR, HM_BIN_DIR, HM_SHARED_DATA, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, NULL, &err), 0, "%s", err);
    free(err);
    /* teacher tensors byte for byte, in their BF16 dtype; feature maps added */
    char *tp = tu_path(dir, "teacher.st"), *hp = tu_path(dir, "hh.st");
    struct hm_st_file *a, *b;
    cr_assert_eq(hm_st_open(tp, &a, NULL), HM_OK);
    cr_assert_eq(hm_st_open(hp, &b, NULL), HM_OK);
    for (int64_t i = 0; i < hm_st_n_tensors(a); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(a, i);
        int64_t j = hm_st_find(b, t->name);
        cr_assert_geq(j, 0, "output lacks '%s'", t->name);
        cr_assert_eq(hm_st_tensor_at(b, j)->dtype, t->dtype);
        cr_assert(memcmp(hm_st_data_view(a, i), hm_st_data_view(b, j), t->nbytes) == 0,
                  "frozen tensor '%s' changed", t->name);
    }
    cr_assert_eq(hm_st_n_tensors(b), hm_st_n_tensors(a) + 8);
    cr_assert_geq(hm_st_find(b, "gpt_neox.layers.1.attention.feature_map_k.bias"), 0);
    cJSON *cfg = cJSON_Parse(hm_st_metadata_get(b, "hm.config"));
    cr_assert_str_eq(cJSON_GetObjectItem(cfg, "arch")->valuestring, "hedgehog");
    cr_assert_eq(cJSON_GetObjectItem(cfg, "feature_dim")->valuedouble, 16);
    cJSON_Delete(cfg);
    hm_st_close(a);
    hm_st_close(b);
    /* the log: per-layer losses, and the loss falls */
    char *lp = tu_path(dir, "lin.jsonl");
    size_t n;
    char *text = tu_read_file(lp, &n), *line = text;
    double first = NAN, last = NAN;
    int lines = 0;
    while (*line) {
        char *nl = strchr(line, '\n');
        *nl = 0;
        cJSON *j = cJSON_Parse(line);
        cJSON *ll = cJSON_GetObjectItem(j, "layer_loss");
        cr_assert(cJSON_IsArray(ll) && cJSON_GetArraySize(ll) == 2, "%s", line);
        double l = cJSON_GetObjectItem(j, "loss")->valuedouble;
        first = lines ? first : l;
        last = l;
        lines++;
        cJSON_Delete(j);
        line = nl + 1;
    }
    cr_assert_eq(lines, 15);
    cr_assert(last < 0.7 * first, "stage-1 loss did not fall: %g -> %g", first, last);
    free(text);
    free(lp);
    /* downstream: hm-eval and hm-inspect accept a hedgehog checkpoint */
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/hm-eval hh.st --data data.tok --seq-len 32 --max-tokens 256 --json && "
             "%s/hm-inspect --json hh.st", dir, HM_BIN_DIR, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, &out, &err), 0, "%s", err);
    cr_assert(strstr(out, "\"arch\":\t\"hedgehog\"") || strstr(out, "\"arch\": \"hedgehog\""),
              "%s", out);
    cr_assert(strstr(out, "\"feature_maps\""), "%s", out);
    free(out);
    free(err);
    /* a hedgehog input is not a teacher */
    snprintf(cmd, sizeof cmd, "cd %s && %s/hm-linearize hh.st -o x.st --data data.tok --steps 1",
             dir, HM_BIN_DIR);
    cr_assert_eq(tu_run(cmd, NULL, &err), 1);
    cr_assert(strstr(err, "needs a gpt_neox teacher"), "%s", err);
    free(err);
    free(tp);
    free(hp);
    free(dir);
}
