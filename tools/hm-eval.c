/* hm-eval — perplexity and zero-shot multiple choice of a checkpoint of any
 * family and mixer
 * (contract §6, §7 "ppl / eval"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "checkpoint.h"
#include "cli.h"
#include "eval_mc.h"
#include "eval_quality.h"
#include "fileio.h"
#include "json_out.h"
#include "gen_prompt.h"
#include "model.h"
#include "model_forward.h"
#include "run.h"
#include "safetensors.h"
#include "threads.h"
#include "tokenizer.h"
#include "tokfile.h"

static const char usage[] =
    "usage: hm-eval [OPTIONS] CKPT --data TOKENS --seq-len L\n"
    "       hm-eval [OPTIONS] CKPT --mc FILE [--tokenizer FILE | --bytes]\n"
    "       hm-eval [OPTIONS] --unigram TRAIN_TOKENS --data TOKENS --seq-len L\n"
    "\n"
    "Evaluates a checkpoint of any family and mixer (safetensors file, HuggingFace\n"
    "folder, index or bundle). Perplexity: the token file is cut into\n"
    "non-overlapping windows, window w = tokens [wL, wL+L] (L inputs, L targets,\n"
    "positions from 0); an\n"
    "incomplete last window is dropped. PPL = exp(mean NLL over all targets),\n"
    "accumulated in double. For a byte-level token file (vocabulary 257) bits per\n"
    "byte = sum NLL / ln 2 / bytes, where bytes = targets that are not end-of-text.\n"
    "\n"
    "Multiple choice: each jsonl line {\"context\": str, \"choices\": [str, ...],\n"
    "\"label\": int}. Context and choice are tokenized separately and concatenated\n"
    "(an empty context becomes the end-of-text token); a choice scores the summed\n"
    "log-likelihood of its tokens. acc: the best score is the label; acc_norm: the\n"
    "best score divided by the choice's length in UTF-8 bytes (as lm-eval-harness\n"
    "acc_norm, which divides by the string length). Sequences longer than the\n"
    "model's max_position_embeddings lose tokens from the left of the context.\n"
    "\n"
    "Options:\n"
    "  --data FILE          token file (docs/token-file.md; '-' = stdin)\n"
    "  --seq-len L          window length (inputs per window)\n"
    "  --max-tokens N       count at most N targets (whole windows only)\n"
    "  --batch B            windows per forward pass (default: as many as fit in\n"
    "                       256 MiB of workspace, at most 8; the last batch may be\n"
    "                       partial). Results depend on B only in the last bits: the\n"
    "                       fast backend's products over B·L rows may round\n"
    "                       differently (--json's 17-digit numbers and --dump-logits\n"
    "                       can differ there; --backend ref is exact)\n"
    "  --dump-logits FILE   write safetensors with tensor 'logits' F32 [windows, L, V]\n"
    "                       (holds the whole tensor in memory while writing)\n"
    "  -f, --force          replace an existing --dump-logits file\n"
    "  --mc FILE            multiple-choice jsonl\n"
    "  --tokenizer FILE     HuggingFace tokenizer.json for --mc (default: the\n"
    "                       bundle's own when CKPT is a bundle, as hm-generate)\n"
    "  --bytes              byte-level vocabulary for --mc\n"
    "  --threads N          threads for OpenMP and BLAS (default: OpenMP's)\n"
    "  --backend NAME       ref (plain loops, slow), fast (default; cpu = fast),\n"
    "                       checked or cuda\n"
    "  --device cpu|cuda    cuda = --backend cuda (default cpu)\n"
    "  --teacher CKPT       also compare with CKPT on the --data windows (SPEC 11,\n"
    "                       libconvert/decode/quality.h): teacher-forced KL to it\n"
    "                       and top-1 agreement; from the first P windows' first p\n"
    "                       tokens, the teacher's mean NLL of n tokens this model\n"
    "                       samples (temperature 1, prompt i seed s + i) beside that\n"
    "                       of the teacher's own samples, and the mean common prefix\n"
    "                       of both greedy continuations\n"
    "  --prompts P          prompts for --teacher (default 16; 0: teacher-forced only)\n"
    "  --prompt-len p       prompt tokens (default 32, at most --seq-len)\n"
    "  --new-tokens n       continuation tokens (default 64)\n"
    "  --seed s             sampling seed (default 0)\n"
    "  --unigram FILE       instead of a checkpoint: the baseline of add-one smoothed\n"
    "                       token frequencies counted in FILE (a training token file)\n"
    "  --json               print one JSON object on stdout: {\"version\": 1, \"seq_len\",\n"
    "                       \"windows\", \"targets\", \"mean_nll\", \"ppl\", \"bits_per_byte\"\n"
    "                       (null unless byte-level), \"tokens_per_s\", and \"mc\": {\n"
    "                       \"questions\", \"acc\", \"acc_norm\"} with --mc, \"quality\": {\"teacher\",\n"
    "                       \"windows\", \"positions\", \"kl\", \"agreement\", \"prompts\",\n"
    "                       \"prompt_len\", \"new_tokens\", \"seed\", \"student_nll\",\n"
    "                       \"teacher_nll\", \"common_prefix\"} with --teacher}\n"
    "  -q, --quiet          fewer messages;  -v, --verbose  more\n"
    "  --progress, --no-progress   progress on stderr (default: when it is a terminal)\n"
    "  -h, --help           this text;  --version  the version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum {
    OPT_DATA = HM_OPT_FIRST_TOOL, OPT_SEQ_LEN, OPT_MAX_TOKENS, OPT_DUMP, OPT_MC, OPT_TOKENIZER,
    OPT_BYTES, OPT_THREADS, OPT_BACKEND, OPT_UNIGRAM, OPT_BATCH, OPT_DEVICE, OPT_TEACHER,
    OPT_PROMPTS, OPT_PROMPT_LEN, OPT_NEW_TOKENS, OPT_SEED,
};

struct opts {
    struct hm_cli_common common;
    const char *ckpt, *data, *dump, *mc, *tokenizer, *backend, *device, *unigram;
    int64_t seq_len, max_tokens, threads, batch; /* batch 0: the default */
    int bytes, force;
    struct hm_eval_quality quality; /* --teacher */
    int quality_flags;              /* --prompts, --prompt-len, --new-tokens or --seed given */
};

struct ppl {
    int64_t windows, targets, bytes;
    double sum_nll, seconds;
    int byte_level;
};

struct ctx {
    const struct opts *o;
    const struct hm_model *m;
    const struct hm_backend *be;
    struct hm_model_ws ws;
    struct hm_tok_file *tf;
    struct ppl r;
    struct hm_progress prog;
    int64_t batch;    /* windows per forward pass */
    int32_t *in, *tg; /* [batch, L] inputs and targets of a batch of windows (owned) */
    float *nll;       /* [batch, L] (owned) */
    double *uni_nll;  /* [uni_seen] −log p(token) of the --unigram baseline, or NULL */
    int64_t uni_seen; /* 1 + the largest id of the --unigram file */
    double uni_unseen; /* −log p of every id from uni_seen to V − 1 */
    int64_t uni_vocab;
    const struct hm_run_comm *comm; /* the processes sharing the windows */
    double *win;      /* [chunks · batch, 2] each window's NLL sum and bytes (owned) */
};

/* The unigram baseline: add-one smoothed token frequencies of a training
 * token file; uni_nll[v] = −log((count[v] + 1) / (N + V)). Memory follows
 * the ids the file holds, not its declared V (a 270-byte file may declare
 * 2^32): uni_nll has an entry per id up to the largest seen, and every
 * larger id (never seen, count 0) shares uni_unseen. */
static void load_unigram(struct ctx *c, const char *path)
{
    struct hm_tok_file *tf;
    struct hm_error err;
    if (hm_tok_open(path, &tf, &err) != HM_OK)
        hm_die_err("cannot read", path, &err);
    int64_t V = (int64_t)hm_tok_vocab(tf), n = hm_tok_count(tf), top = 0;
    for (int64_t i = 0; i < n; i++)
        if ((int64_t)hm_tok_get(tf, i) + 1 > top)
            top = (int64_t)hm_tok_get(tf, i) + 1;
    double *cnt = calloc((size_t)(top ? top : 1), sizeof(double)); /* [top] */
    if (!cnt)
        hm_die("cannot read '%s': out of memory counting %lld ids", path, (long long)top);
    for (int64_t i = 0; i < n; i++)
        cnt[hm_tok_get(tf, i)] += 1;
    const double denom = (double)n + (double)V;
    for (int64_t v = 0; v < top; v++)
        cnt[v] = -log((cnt[v] + 1) / denom);
    c->uni_nll = cnt;
    c->uni_seen = top;
    c->uni_unseen = -log(1 / denom);
    c->uni_vocab = V;
    hm_tok_close(tf);
}

/* Windows w0..w0+n−1 into slots 0..n−1 of the batch: window w has inputs
 * tokens [wL, wL+L), targets [wL+1, wL+L]. */
static enum hm_status load_batch(struct ctx *c, int64_t w0, int64_t n, struct hm_error *err)
{
    int64_t L = c->o->seq_len;
    enum hm_status st = HM_OK;
    for (int64_t k = 0; st == HM_OK && k < n; k++) {
        st = hm_tok_read(c->tf, (w0 + k) * L, L, c->in + k * L, err);
        if (st == HM_OK)
            st = hm_tok_read(c->tf, (w0 + k) * L + 1, L, c->tg + k * L, err);
    }
    return st;
}

/* Window w, in slot k of the batch: its NLL sum (in target order) and its
 * bytes into c->win[w]. The totals add the windows in window order
 * (totals()), so they are the same for any batch size and any number of
 * processes. */
static void account(struct ctx *c, int64_t w, int64_t k)
{
    int64_t L = c->o->seq_len;
    uint32_t eot = hm_tok_eot(c->tf);
    const float *nll = c->nll + k * L;
    const int32_t *tg = c->tg + k * L;
    double sum = 0, bytes = 0;
    for (int64_t t = 0; t < L; t++) {
        sum += (double)nll[t];
        if (c->r.byte_level && (uint32_t)tg[t] != eot)
            bytes++;
    }
    c->win[2 * w] = sum;
    c->win[2 * w + 1] = bytes;
    double dt = hm_now() - c->r.seconds;
    hm_progress_update(&c->prog, "window %lld/%lld, %.0f tokens/s", (long long)(w + 1),
                       (long long)c->r.windows, (double)((w + 1) * L) / (dt > 0 ? dt : 1e-9));
}

static void totals(struct ctx *c)
{
    for (int64_t w = 0; w < c->r.windows; w++) {
        c->r.sum_nll += c->win[2 * w];
        c->r.bytes += (int64_t)c->win[2 * w + 1];
    }
    c->r.targets = c->r.windows * c->o->seq_len;
}

/* hm_st_fill_fn: runs every window, writing logits straight into dst. */
static enum hm_status fill_logits(void *vctx, int64_t index, size_t off, void *dst, size_t nbytes,
                                  struct hm_error *err)
{
    (void)off; /* added whole (hm_st_writer_add_fill): off is 0 */
    struct ctx *c = vctx;
    int64_t L = c->o->seq_len, V = c->m->cfg.vocab_size;
    float *out = dst;
    (void)index;
    (void)nbytes;
    for (int64_t w0 = 0; w0 < c->r.windows; w0 += c->batch) {
        const int64_t n = c->r.windows - w0 < c->batch ? c->r.windows - w0 : c->batch;
        float *lg = out + w0 * L * V; /* [n, L, V] */
        enum hm_status st = load_batch(c, w0, n, err);
        if (st == HM_OK)
            st = hm_model_forward_batch(c->m, c->be, c->in, c->tg, n, L, lg, c->nll, &c->ws,
                                        err);
        if (st != HM_OK) {
            hm_error_prefix(err, "window %lld: ", (long long)w0);
            return st;
        }
        for (int64_t k = 0; k < n; k++)
            account(c, w0 + k, k);
    }
    return HM_OK;
}

/* --batch (at most the number of windows: one partial batch), or the
 * default, hm_model_eval_batch. */
static int64_t pick_batch(const struct ctx *c)
{
    const int64_t L = c->o->seq_len, W = c->r.windows;
    if (c->o->batch > 0)
        return c->o->batch < W ? c->o->batch : W;
    if (!c->m)
        return 1; /* --unigram: no model, nothing to batch */
    return hm_model_eval_batch(&c->m->cfg, c->be, L, W);
}

static void run_ppl(struct ctx *c)
{
    const struct opts *o = c->o;
    struct hm_error err;
    int64_t L = o->seq_len, V = c->uni_nll ? c->uni_vocab : c->m->cfg.vocab_size;
    if (hm_tok_open(o->data, &c->tf, &err) != HM_OK)
        hm_die_err("cannot read", o->data, &err);
    int64_t n = hm_tok_count(c->tf);
    c->r.windows = n > 0 ? (n - 1) / L : 0;
    if (o->max_tokens >= 0 && c->r.windows > o->max_tokens / L)
        c->r.windows = o->max_tokens / L;
    if (c->r.windows == 0)
        hm_die("cannot evaluate '%s': %lld tokens give no whole window of %lld inputs + 1 "
               "(with --max-tokens %lld)", o->data, (long long)n, (long long)L,
               (long long)o->max_tokens);
    c->r.byte_level = hm_tok_vocab(c->tf) == 257;
    /* every id used must exist in the model */
    int64_t used = c->r.windows * L + 1;
    for (int64_t i = 0; i < used; i++) {
        uint32_t id = hm_tok_get(c->tf, i);
        if ((int64_t)id >= V)
            hm_die("cannot read '%s': token id %u at position %lld is outside the model "
                   "vocabulary (%lld)", o->data, id, (long long)i, (long long)V);
    }
    c->batch = pick_batch(c);
    int64_t BL;
    if (hm_mul_i64(c->batch, L, &BL) || (uint64_t)BL > SIZE_MAX / sizeof(int32_t))
        hm_die("cannot evaluate '%s': a batch of %lld windows of %lld is too large", o->data,
               (long long)c->batch, (long long)L);
    if (c->m && o->common.verbose)
        hm_info(&o->common, "%lld windows per pass (%.1f MiB of workspace)",
                (long long)c->batch,
                (double)hm_model_ws_bytes(&c->m->cfg, c->be, c->batch, L) / (1 << 20));
    c->in = malloc(sizeof(int32_t) * (size_t)BL);
    c->tg = malloc(sizeof(int32_t) * (size_t)BL);
    c->nll = malloc(sizeof(float) * (size_t)BL);
    const int64_t chunks = (c->r.windows + c->batch - 1) / c->batch;
    c->win = calloc((size_t)(chunks * c->batch * 2), sizeof(double));
    if (!c->in || !c->tg || !c->nll || !c->win)
        hm_die("out of memory");
    hm_progress_start(&c->prog, &o->common, "eval");
    c->r.seconds = hm_now();
    if (o->dump) {
        int64_t shape[3] = {c->r.windows, L, V}, numel;
        if (hm_mul_i64(shape[0], L, &numel) || hm_mul_i64(numel, V, &numel) ||
            (uint64_t)numel > SIZE_MAX / 8)
            hm_die("cannot write '%s': logits tensor too large", o->dump);
        struct hm_st_writer *w = hm_st_writer_new();
        char meta[256];
        snprintf(meta, sizeof meta, "{\"tool\":\"hm-eval\",\"seq_len\":%lld,\"windows\":%lld}",
                 (long long)L, (long long)c->r.windows);
        if (!w || hm_st_writer_add_fill(w, "logits", HM_DTYPE_F32, 3, shape, fill_logits, c,
                                        &err) != HM_OK ||
            hm_st_writer_set_metadata(w, "hm.eval", meta, &err) != HM_OK ||
            hm_st_writer_write_path(w, o->dump, o->force ? HM_AFILE_FORCE : 0, &err) != HM_OK)
            hm_die_err("cannot write", o->dump, &err);
        hm_st_writer_free(w);
    } else {
        /* chunks of one batch each, shared among the processes */
        for (int64_t w0 = 0; w0 < c->r.windows; w0 += c->batch) {
            const int64_t nb = c->r.windows - w0 < c->batch ? c->r.windows - w0 : c->batch;
            if (!hm_run_owns_chunk(c->comm, w0 / c->batch))
                continue;
            if (c->uni_nll && load_batch(c, w0, nb, &err) == HM_OK) {
                for (int64_t t = 0; t < nb * L; t++)
                    c->nll[t] = (float)(c->tg[t] < c->uni_seen ? c->uni_nll[c->tg[t]]
                                                               : c->uni_unseen);
            } else if (load_batch(c, w0, nb, &err) != HM_OK ||
                       hm_model_nll_batch(c->m, c->be, c->in, c->tg, nb, L, c->nll, &c->ws,
                                          &err) != HM_OK) {
                if (nb == 1)
                    hm_die("cannot evaluate '%s': window %lld: %s", o->data, (long long)w0,
                           err.msg);
                hm_die("cannot evaluate '%s': windows %lld-%lld: %s", o->data, (long long)w0,
                       (long long)(w0 + nb - 1), err.msg);
            }
            for (int64_t k = 0; k < nb; k++)
                account(c, w0 + k, k);
        }
        if (hm_run_share_chunks(c->comm, c->win, chunks, 2 * c->batch, &err) != HM_OK)
            hm_die("cannot evaluate '%s': %s", o->data, err.msg);
    }
    totals(c);
    c->r.seconds = hm_now() - c->r.seconds;
    hm_progress_done(&c->prog, "%lld targets, %.0f tokens/s", (long long)c->r.targets,
                     (double)c->r.targets / (c->r.seconds > 0 ? c->r.seconds : 1e-9));
    free(c->in), free(c->tg), free(c->nll), free(c->win);
    hm_tok_close(c->tf);
    c->tf = NULL;
}

/* The report on fp: stdout, or stderr when the logits go to stdout. */
static void report(FILE *fp, const struct opts *o, const struct ppl *r,
                   const struct hm_eval_mc *mc)
{
    const int quality = o->quality.teacher && r->windows > 0;
    double mean = r->targets ? r->sum_nll / (double)r->targets : NAN;
    double bpb = r->bytes ? r->sum_nll / log(2.0) / (double)r->bytes : NAN;
    double tps = r->seconds > 0 ? (double)r->targets / r->seconds : 0;
    if (o->data && r->targets && !isfinite(mean))
        hm_warning("the mean NLL is not finite (non-finite weights or logits?); reported as null");
    if (o->common.json) {
        fprintf(fp, "{\"version\": 1");
        if (o->data) {
            fprintf(fp, ", \"seq_len\": %lld, \"windows\": %lld, \"targets\": %lld, \"mean_nll\": ",
                   (long long)o->seq_len, (long long)r->windows, (long long)r->targets);
            hm_json_write_number(fp, mean);
            fprintf(fp, ", \"ppl\": ");
            hm_json_write_number(fp, exp(mean));
            fprintf(fp, ", \"bits_per_byte\": ");
            hm_json_write_number(fp, r->byte_level && r->bytes ? bpb : NAN);
            fprintf(fp, ", \"tokens_per_s\": %.6g", tps);
        }
        if (o->mc)
            fprintf(fp, ", \"mc\": {\"questions\": %lld, \"acc\": %.17g, \"acc_norm\": %.17g}",
                   (long long)mc->questions, (double)mc->correct / (double)mc->questions,
                   (double)mc->correct_norm / (double)mc->questions);
        if (quality)
            hm_eval_quality_print(fp, &o->quality, 1);
        fprintf(fp, "}\n");
        return;
    }
    if (o->data) {
        fprintf(fp, "windows: %lld of %lld tokens\n", (long long)r->windows, (long long)o->seq_len);
        fprintf(fp, "targets: %lld\n", (long long)r->targets);
        fprintf(fp, "mean nll: %.6f\n", mean);
        fprintf(fp, "ppl: %.4f\n", exp(mean));
        if (r->byte_level && r->bytes)
            fprintf(fp, "bits per byte: %.6f (%lld bytes)\n", bpb, (long long)r->bytes);
    }
    if (o->mc)
        fprintf(fp, "multiple choice: %lld questions, acc %.4f, acc_norm %.4f\n",
               (long long)mc->questions, (double)mc->correct / (double)mc->questions,
               (double)mc->correct_norm / (double)mc->questions);
    if (quality)
        hm_eval_quality_print(fp, &o->quality, 0);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"force", no_argument, NULL, 'f'},
        {"data", required_argument, NULL, OPT_DATA},
        {"seq-len", required_argument, NULL, OPT_SEQ_LEN},
        {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
        {"dump-logits", required_argument, NULL, OPT_DUMP},
        {"mc", required_argument, NULL, OPT_MC},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"bytes", no_argument, NULL, OPT_BYTES},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"unigram", required_argument, NULL, OPT_UNIGRAM},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"teacher", required_argument, NULL, OPT_TEACHER},
        {"prompts", required_argument, NULL, OPT_PROMPTS},
        {"prompt-len", required_argument, NULL, OPT_PROMPT_LEN},
        {"new-tokens", required_argument, NULL, OPT_NEW_TOKENS},
        {"seed", required_argument, NULL, OPT_SEED},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {.common = {.progress = -1}, .max_tokens = -1,
                     .quality.o = {.prompts = HM_EVAL_QUALITY_PROMPTS, .prompt_len = -1,
                                   .new_tokens = HM_EVAL_QUALITY_NEW}};
    struct hm_quality_opts *qo = &o.quality.o;
    hm_cli_init("hm-eval", usage, argv);
    int c;
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "f", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&o.common);
        case 'f': o.force = 1; break;
        case OPT_DATA: o.data = optarg; break;
        case OPT_SEQ_LEN: o.seq_len = hm_parse_i64(optarg, "--seq-len", 1, 1 << 24); break;
        case OPT_MAX_TOKENS:
            o.max_tokens = hm_parse_i64(optarg, "--max-tokens", 1, INT64_MAX);
            break;
        case OPT_DUMP: o.dump = optarg; break;
        case OPT_MC: o.mc = optarg; break;
        case OPT_TOKENIZER: o.tokenizer = optarg; break;
        case OPT_BYTES: o.bytes = 1; break;
        case OPT_THREADS: o.threads = hm_parse_i64(optarg, "--threads", 1, 1024); break;
        case OPT_BACKEND: o.backend = optarg; break;
        case OPT_DEVICE: o.device = optarg; break;
        case OPT_UNIGRAM: o.unigram = optarg; break;
        case OPT_BATCH: o.batch = hm_parse_i64(optarg, "--batch", 1, 1 << 16); break;
        case OPT_TEACHER: o.quality.teacher = optarg; break;
        case OPT_PROMPTS: qo->prompts = hm_parse_i64(optarg, "--prompts", 0, 1 << 20); break;
        case OPT_PROMPT_LEN: qo->prompt_len = hm_parse_i64(optarg, "--prompt-len", 1, 1 << 24); break;
        case OPT_NEW_TOKENS: qo->new_tokens = hm_parse_i64(optarg, "--new-tokens", 1, 1 << 24); break;
        case OPT_SEED: qo->seed = (uint64_t)hm_parse_i64(optarg, "--seed", 0, INT64_MAX); break;
        }
        o.quality_flags |= c >= OPT_PROMPTS && c <= OPT_SEED;
    }
    if (o.unigram) {
        if (argc - optind > 0)
            hm_usage_error("--unigram replaces the checkpoint; got '%s'", argv[optind]);
        if (!o.data || o.mc || o.dump)
            hm_usage_error("--unigram needs --data (and no --mc or --dump-logits)");
    } else if (argc - optind == 0) {
        hm_usage_error("missing checkpoint");
    } else if (argc - optind > 1) {
        hm_usage_error("expected one checkpoint, got %d arguments", argc - optind);
    }
    o.ckpt = o.unigram ? o.unigram : argv[optind];
    if (!o.data && !o.mc)
        hm_usage_error("nothing to do: give --data or --mc");
    if (o.data && o.seq_len <= 0)
        hm_usage_error("--data needs --seq-len");
    if (!o.data && (o.seq_len || o.max_tokens >= 0 || o.dump || o.batch))
        hm_usage_error("--seq-len, --max-tokens, --dump-logits and --batch need --data");
    if (o.mc && o.tokenizer && o.bytes)
        hm_usage_error("--tokenizer and --bytes cannot be combined");
    if (!o.mc && (o.tokenizer || o.bytes))
        hm_usage_error("--tokenizer and --bytes need --mc");
    if (o.quality.teacher && (!o.data || o.unigram))
        hm_usage_error("--teacher compares on the --data windows: it needs --data and a checkpoint");
    if (o.quality_flags && !o.quality.teacher)
        hm_usage_error("--prompts, --prompt-len, --new-tokens and --seed need --teacher");
    if (qo->prompt_len < 0)
        qo->prompt_len = o.seq_len < HM_EVAL_QUALITY_PROMPT_LEN ? o.seq_len
                                                                : HM_EVAL_QUALITY_PROMPT_LEN;
    if (o.quality.teacher && qo->prompt_len > o.seq_len)
        hm_usage_error("--prompt-len %lld is longer than a window (--seq-len %lld)",
                       (long long)qo->prompt_len, (long long)o.seq_len);
    if (o.dump && strcmp(o.dump, "-") != 0 &&
        (hm_same_file(o.dump, o.data) || hm_output_clobbers(o.dump, o.ckpt)))
        hm_usage_error("--dump-logits '%s' is an input", o.dump);
    if (o.dump && strcmp(o.dump, "-") == 0 && o.common.json)
        hm_usage_error("--json and --dump-logits - both want stdout");
    const struct hm_backend *be = hm_cli_backend(o.device, o.backend);
    /* several processes under a launcher share the windows (--data);
     * --dump-logits and --mc run on process 0 */
    struct hm_run_comm comm;
    hm_cli_dist_open(&comm);
    const char *ins[] = {o.ckpt, o.data, o.mc, o.tokenizer, o.quality.teacher};
    const char *ins_what[] = {"the checkpoint", "--data", "--mc", "--tokenizer", "--teacher"};
    hm_cli_check_stdin(ins, ins_what, 5, &comm);
    if (o.quality.teacher && strcmp(o.data, "-") == 0)
        hm_usage_error("--teacher reads the --data windows twice: give a file, not '-'");
    /* every process evaluates the same model on the same windows */
    const int64_t fv[] = {o.seq_len, o.batch, o.max_tokens, o.dump != NULL};
    hm_cli_agree(&comm, ins_what, ins, 2, (const char *const[]){"--seq-len", "--batch",
                 "--max-tokens", "--dump-logits"}, fv, 4);
    hm_threads_set(o.threads ? (int)o.threads : hm_cli_default_threads());
    const int primary = hm_run_is_primary(&comm);
    if (primary)
        hm_cli_hold_output(o.dump);

    struct hm_error err;
    struct hm_ckpt *ck = NULL;
    struct hm_model *m = NULL;
    struct ctx cx = {.o = &o, .be = be, .comm = &comm};
    struct hm_tokenizer *mc_tok = NULL;
    if (o.unigram) {
        load_unigram(&cx, o.unigram);
    } else {
        /* straight into the backend, bf16/f16 layer weights kept narrow */
        if (hm_ckpt_open(o.ckpt, &ck, &err) != HM_OK ||
            hm_model_load_narrow(ck, hm_ckpt_config(ck), be, &m, &err) != HM_OK)
            hm_die_err("cannot read", o.ckpt, &err);
        hm_cli_ckpt_notes(ck, o.ckpt);
        const struct hm_config *pc = hm_ckpt_config(ck); /* evaluation past it: a warning */
        if (pc->mixer == HM_MIXER_SOFTMAX && pc->max_position_embeddings > 0 &&
            o.seq_len > pc->max_position_embeddings)
            hm_warning("'%s': --seq-len %lld exceeds its position limit, max_position_embeddings "
                       "%lld: positions past it are untrained", o.ckpt, (long long)o.seq_len,
                       (long long)pc->max_position_embeddings);
        /* --mc: the tokenizer given, else the bundle's own (hm-generate's rule) */
        if (o.mc && !(mc_tok = hm_gen_load_tokenizer(ck, o.ckpt, o.tokenizer, o.bytes)))
            hm_die("cannot evaluate '%s' on '%s': it holds no tokenizer; give --tokenizer FILE "
                   "or --bytes", o.ckpt, o.mc);
        hm_ckpt_close(ck);
        hm_warn_nonfinite(o.ckpt, m);
    }
    cx.m = m;
    struct hm_eval_mc mc = {0};
    hm_model_ws_init(&cx.ws);
    if (o.data && (primary || !o.dump))
        run_ppl(&cx);
    if (o.mc && primary)
        hm_eval_mc_run(cx.m, cx.be, &cx.ws, mc_tok, o.mc, &mc);
    if (o.quality.teacher && primary && cx.r.windows > 0) { /* the windows ppl read */
        qo->seq_len = o.seq_len;
        qo->windows = cx.r.windows;
        hm_eval_quality_run(&o.quality, m, be, o.data);
    }
    if (primary)
        report(o.dump && strcmp(o.dump, "-") == 0 ? stderr : stdout, &o, &cx.r, &mc);
    hm_model_ws_release(&cx.ws);
    hm_model_free(m);
    free(cx.uni_nll);
    return hm_cli_finish(HM_EXIT_OK);
}
