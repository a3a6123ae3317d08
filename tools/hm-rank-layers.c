/* hm-rank-layers — which layers a hybrid should keep softmax: the KL gain
 * of restoring each layer of a student to its teacher's attention (SPEC
 * §11; libconvert/decode/layer_gain.h), the ranking and the k to keep. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "cli.h"
#include "json_out.h"
#include "layer_gain.h"
#include "model.h"
#include "threads.h"
#include "tokfile.h"

static const char usage[] =
    "usage: hm-rank-layers [OPTIONS] STUDENT --teacher TEACHER --data TOKENS --seq-len L\n"
    "\n"
    "Ranks the layers of a STUDENT (hedgehog or hedgemamba, pure or hybrid) by how\n"
    "much its teacher-forced KL to TEACHER falls when that layer alone is restored\n"
    "to the teacher's softmax attention (SPEC 11, KL-guided layer choice): KL(S) is\n"
    "the mean over the windows' positions of KL(softmax z_T || softmax z_S); S(l) is\n"
    "S with layer l's attention tensors the teacher's and layer l softmax; the gain\n"
    "of l is KL(S) - KL(S(l)). Largest gain first (ties: the lower layer); --keep k\n"
    "layers are the first k, ready for hm-map-ssm / hm-linearize --keep-attention.\n"
    "Cost: L + 1 comparisons of the windows (2 W window forwards each); memory: both\n"
    "models in fp32 on the host, and one restored student and the teacher on the\n"
    "backend.\n"
    "\n"
    "Options:\n"
    "  --teacher CKPT       the student's softmax teacher\n"
    "  --data FILE          held-out token file (windows [wL, wL+L], as hm-eval)\n"
    "  --seq-len L          window length\n"
    "  --windows W          windows compared (default 16; fewer if the file is short)\n"
    "  --keep K             layers to keep (default 1)\n"
    "  --backend NAME       ref, fast (default) or checked;  --device cpu|cuda\n"
    "  --threads N          CPU threads\n"
    "  --json               one object: {\"version\": 1, \"student\", \"teacher\", \"windows\",\n"
    "                       \"seq_len\", \"kl\", \"layers\": [{\"layer\", \"kl\", \"gain\"}],\n"
    "                       \"ranking\": [l, ...], \"keep\": [l, ...]}\n"
    "  -q, --quiet  -v, --verbose  -h, --help  --version\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum { OPT_TEACHER = HM_OPT_FIRST_TOOL, OPT_DATA, OPT_SEQ_LEN, OPT_WINDOWS, OPT_KEEP,
       OPT_BACKEND, OPT_DEVICE, OPT_THREADS };

/* An fp32 host copy of path's model and its config note. */
static struct hm_model *load_host(const char *path)
{
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_ckpt *ck;
    struct hm_model *m;
    if (hm_ckpt_open(path, &ck, &err) != HM_OK || hm_model_load(ck, &m, &err) != HM_OK)
        hm_die_err("cannot read", path, &err);
    hm_cli_ckpt_notes(ck, path);
    hm_ckpt_close(ck);
    hm_warn_nonfinite(path, m);
    return m;
}

static void print_json(const char *student, const char *teacher, int64_t W, int64_t L,
                       const struct hm_layer_gains *g, int64_t layers, int64_t keep)
{
    printf("{\"version\": 1, \"student\": ");
    hm_json_write_string(stdout, student, strlen(student));
    printf(", \"teacher\": ");
    hm_json_write_string(stdout, teacher, strlen(teacher));
    printf(", \"windows\": %lld, \"seq_len\": %lld, \"kl\": ", (long long)W, (long long)L);
    hm_json_write_number(stdout, g->kl);
    printf(", \"layers\": [");
    for (int64_t l = 0, n = 0; l < layers; l++) {
        if (isnan(g->gain[l]))
            continue;
        printf("%s{\"layer\": %lld, \"kl\": ", n++ ? ", " : "", (long long)l);
        hm_json_write_number(stdout, g->kl_l[l]);
        printf(", \"gain\": ");
        hm_json_write_number(stdout, g->gain[l]);
        printf("}");
    }
    printf("], \"ranking\": [");
    for (int64_t i = 0; i < g->n_rank; i++)
        printf("%s%lld", i ? ", " : "", (long long)g->rank[i]);
    printf("], \"keep\": [");
    for (int64_t i = 0; i < keep; i++)
        printf("%s%lld", i ? ", " : "", (long long)g->rank[i]);
    printf("]}\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"teacher", required_argument, NULL, OPT_TEACHER},
        {"data", required_argument, NULL, OPT_DATA},
        {"seq-len", required_argument, NULL, OPT_SEQ_LEN},
        {"windows", required_argument, NULL, OPT_WINDOWS},
        {"keep", required_argument, NULL, OPT_KEEP},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {NULL, 0, NULL, 0},
    };
    struct hm_cli_common common = {.progress = -1};
    const char *teacher = NULL, *data = NULL, *backend = NULL, *device = NULL;
    int64_t seq_len = 0, windows = 16, keep = 1, threads = 0;
    int c;
    hm_cli_init("hm-rank-layers", usage, argv);
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS, longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&common);
        case OPT_TEACHER: teacher = optarg; break;
        case OPT_DATA: data = optarg; break;
        case OPT_SEQ_LEN: seq_len = hm_parse_i64(optarg, "--seq-len", 1, (int64_t)1 << 24); break;
        case OPT_WINDOWS: windows = hm_parse_i64(optarg, "--windows", 1, (int64_t)1 << 24); break;
        case OPT_KEEP: keep = hm_parse_i64(optarg, "--keep", 0, HM_KEPT_MAX); break;
        case OPT_BACKEND: backend = optarg; break;
        case OPT_DEVICE: device = optarg; break;
        case OPT_THREADS: threads = hm_parse_i64(optarg, "--threads", 1, 1024); break;
        }
    }
    if (argc - optind != 1)
        hm_usage_error(argc == optind ? "missing STUDENT" : "expected one STUDENT");
    if (!teacher || !data || !seq_len)
        hm_usage_error("--teacher, --data and --seq-len are required");
    const char *student = argv[optind];
    if (!strcmp(student, "-") || !strcmp(teacher, "-") || !strcmp(data, "-"))
        hm_usage_error("every input is read more than once: give files, not '-'");
    const struct hm_backend *be = hm_cli_backend(device, backend);
    hm_threads_set(threads ? (int)threads : hm_cli_default_threads());
    struct hm_error err;
    hm_error_clear(&err);
    struct hm_tok_file *tf;
    if (hm_tok_open(data, &tf, &err) != HM_OK)
        hm_die_err("cannot read", data, &err);
    const int64_t avail = (hm_tok_count(tf) - 1) / seq_len;
    if (avail < 1)
        hm_die("'%s' holds no window of %lld tokens", data, (long long)seq_len);
    const int64_t W = windows < avail ? windows : avail, n = W * seq_len + 1;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    if (!tok || hm_tok_read(tf, 0, n, tok, &err) != HM_OK)
        hm_die_err("cannot read", data, &err);
    hm_tok_close(tf);
    struct hm_model *s = load_host(student), *t = load_host(teacher), *tp = NULL;
    const int64_t L = s->cfg.num_hidden_layers;
    struct hm_ckpt *tck;
    if (hm_ckpt_open(teacher, &tck, &err) != HM_OK ||
        hm_model_load_narrow(tck, hm_ckpt_config(tck), be, &tp, &err) != HM_OK)
        hm_die_err("cannot read", teacher, &err);
    hm_ckpt_close(tck);
    const struct hm_quality_opts qo = {.seq_len = seq_len, .windows = W, .prompt_len = 1,
                                       .new_tokens = 1};
    struct hm_layer_gains g;
    if (hm_layer_gains_measure(s, t, tp, be, tok, n, &qo, &g, &err) != HM_OK)
        hm_die("cannot rank the layers of '%s' against '%s': %s", student, teacher, err.msg);
    if (keep > g.n_rank) {
        hm_warning("--keep %lld: '%s' has only %lld layers to restore", (long long)keep, student,
                   (long long)g.n_rank);
        keep = g.n_rank;
    }
    if (common.json) {
        print_json(student, teacher, W, seq_len, &g, L, keep);
    } else {
        printf("student: %s\nteacher: %s\nwindows: %lld of %lld tokens\n", student, teacher,
               (long long)W, (long long)seq_len);
        printf("kl to the teacher: %.6g\n", g.kl);
        printf("rank  layer  kl restored  gain\n");
        for (int64_t i = 0; i < g.n_rank; i++)
            printf("%4lld  %5lld  %11.6g  %+.6g\n", (long long)i + 1, (long long)g.rank[i],
                   g.kl_l[g.rank[i]], g.gain[g.rank[i]]);
        printf("keep %lld: ", (long long)keep);
        for (int64_t i = 0; i < keep; i++)
            printf("%s%lld", i ? "," : "", (long long)g.rank[i]);
        printf("\n");
    }
    hm_layer_gains_free(&g);
    free(tok);
    hm_model_free(s);
    hm_model_free(t);
    hm_model_free(tp);
    return hm_cli_finish(HM_EXIT_OK);
}
