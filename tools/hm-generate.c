/* hm-generate — text generation and decoding benchmarks (contract §8): a chunked
 * prefill of the prompt, then one token at a time (the teacher's KV cache,
 * the students' constant-size state), each token chosen by the sampler of
 * libconvert/decode/sample.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batches.h"
#include "checkpoint.h"
#include "cli.h"
#include "gen_bench.h"
#include "gen_prompt.h"
#include "gen_text.h"
#include "json_out.h"
#include "model.h"
#include "procmem.h"
#include "recurrent.h"
#include "sample.h"
#include "threads.h"
#include "tokenizer.h"

static const char usage[] =
    "usage: hm-generate [OPTIONS] MODEL [--prompt TEXT | --prompt-ids LIST]\n"
    "       hm-generate --bench --context N [--batch B] [--decode-tokens M] MODEL\n"
    "\n"
    "Generates text from MODEL (a safetensors file, HuggingFace folder, index or\n"
    "bundle; '-' = stdin): the prompt is prefilled in chunks, then every new token\n"
    "is one step (a softmax teacher keeps a KV cache that grows with the context;\n"
    "Hedgehog and HedgeMamba students keep a constant-size state). The new text\n"
    "(not the prompt) is streamed to stdout as it is decoded, flushed per token,\n"
    "with no newline added (one is added on a terminal). Bytes that may still\n"
    "change are held back: an unfinished UTF-8 character, and a tail that could\n"
    "be the start of a --stop string; the next token settles them, or the end.\n"
    "\n"
    "Prompt:\n"
    "  --prompt TEXT        tokenized with the bundle's tokenizer or --tokenizer\n"
    "                       (llama2.c tokenizers prepend BOS, as run.c does); an\n"
    "                       empty prompt (the default) is just BOS, or the\n"
    "                       end-of-text id for tokenizers without a BOS\n"
    "  --prompt-ids LIST    token ids, comma-separated (\"1,403,407\"), each < vocab,\n"
    "                       used as given (no BOS added)\n"
    "  --tokenizer FILE     HuggingFace tokenizer.json or llama2.c tokenizer.bin\n"
    "  --bytes              the byte-level vocabulary (257 ids)\n"
    "                       Without any tokenizer only --prompt-ids works, and the\n"
    "                       new ids are printed (as --ids). Ids past the\n"
    "                       tokenizer's vocabulary (padded embedding rows) are\n"
    "                       never generated.\n"
    "Sampling (in this order):\n"
    "  --temperature T      z = logits / T, softmax in double (default 1); 0 =\n"
    "                       greedy: argmax, the lowest id on ties (no top-k/p);\n"
    "                       else T in [1e-30, 1e30]\n"
    "  --top-k K            keep the K most probable tokens (default 0 = all;\n"
    "                       K <= 2147483647)\n"
    "  --top-p P            then the smallest set of most probable tokens whose\n"
    "                       mass reaches P (default 1 = all); renormalize, draw\n"
    "  --seed S             seed of the generator (default 0): splitmix64 seeded\n"
    "                       with S; each sampled token draws one uniform\n"
    "                       u = (splitmix64() >> 11) * 2^-53 in [0, 1) and takes the\n"
    "                       first kept id (ascending ids) at which the running sum\n"
    "                       of exp(z_i - max z) exceeds u times the kept sum.\n"
    "                       Probability ties order by the lower id; greedy draws\n"
    "                       nothing. The same model, prompt and flags give the same\n"
    "                       tokens bit for bit (libconvert/decode/sample.h has every\n"
    "                       step).\n"
    "Stopping:\n"
    "  --max-new-tokens N   at most N new tokens (default 256; N in [0, 2^40])\n"
    "  --stop STRING        stop when STRING appears in the new text, which ends\n"
    "                       just before it (may repeat; needs a tokenizer)\n"
    "  --eot-id ID          end-of-text ids that stop generation (may repeat;\n"
    "                       default: the tokenizer's: NeoX <|endoftext|> 0, bytes\n"
    "                       256, llama2.c BOS 1 and EOS 2; without a tokenizer:\n"
    "                       llama 1 and 2, neox 256 for 257 ids, else 0); the id\n"
    "                       itself is not part of the output\n"
    "  --ignore-eot         never stop at an end-of-text id\n"
    "  A softmax teacher refuses a prompt plus --max-new-tokens longer than its\n"
    "  max_position_embeddings. Hedgehog and HedgeMamba students have no position\n"
    "  limit (their state does not grow): they take any length.\n"
    "Samples:\n"
    "  --samples N          N samples of the prompt, sample i with seed S + i\n"
    "                       (default 1): the prompt is prefilled once, its state\n"
    "                       copied to each sample, and up to --batch B (default 16)\n"
    "                       running samples step together (one pass, B rows).\n"
    "                       The same flags give the same bytes; a batch's rounding\n"
    "                       may differ from a lone run's in the last bit, so at a\n"
    "                       near-tie sample i may differ from --seed S+i alone.\n"
    "                       Output per sample, in order, once it is done: --ids a\n"
    "                       line of ids, --json one object per line (with\n"
    "                       \"sample\": i), else its text and a newline\n"
    "Output:\n"
    "  --ids                print the new ids, space-separated, instead of the text\n"
    "  --json               one object at the end instead of streaming: {\"version\":\n"
    "                       1, \"model\", \"arch\", \"family\", \"prompt_ids\",\n"
    "                       \"new_ids\", \"text\" (null without a tokenizer; invalid\n"
    "                       UTF-8 as U+FFFD), \"stop_reason\" (\"max_new_tokens\" |\n"
    "                       \"end_of_text\" | \"stop_string\"), \"end_id\",\n"
    "                       \"stop_string\", \"prompt_tokens\", \"tokens\" (new),\n"
    "                       \"prefill_s\", \"decode_s\", \"prefill_tokens_per_s\",\n"
    "                       \"decode_tokens_per_s\", \"seed\", \"threads\"}\n"
    "Benchmark:\n"
    "  --bench              time prefill and decoding of random prompts (ids\n"
    "                       splitmix64(seed) mod vocab) instead of generating text;\n"
    "                       --json for one object\n"
    "  --context N          prompt length of each sequence\n"
    "  --batch B            B independent sequences (each its own random prompt,\n"
    "                       prefilled on its own) decoded in lock-step: a step runs\n"
    "                       the B tokens as the rows of one pass (every weight read\n"
    "                       once), each row against its own state (default 1)\n"
    "  --shared-prompt      one random prompt for all B sequences: prefilled once,\n"
    "                       its state copied into each sequence's own memory (the\n"
    "                       steps cost the same; prefill_tokens_per_s is the one\n"
    "                       prefill's)\n"
    "  --decode-tokens M    greedy steps per sequence after the prefill (default 64)\n"
    "                       JSON: prefill_tokens_per_s, decode_tokens_per_s (B*M\n"
    "                       over the decode time), peak_rss_bytes (getrusage\n"
    "                       ru_maxrss, reset after loading where Linux allows: the\n"
    "                       loaded model plus what prefill and decoding add; the\n"
    "                       loading peak is load_peak_rss_bytes), rss_loaded_bytes,\n"
    "                       rss_end_bytes, state_bytes (all B states at the end: the\n"
    "                       KV caches' rows, or the constant states), weights_bytes,\n"
    "                       prefill_cpu_s, decode_cpu_s (process CPU time, steadier\n"
    "                       than wall time on a busy machine), context, batch,\n"
    "                       threads, ... The teacher's position\n"
    "                       limit holds here too: for a longer context make it with\n"
    "                       a larger max_position_embeddings (hm-init --config);\n"
    "                       the point is the cost.\n"
    "Run:\n"
    "  --prefill-chunk N    prompt rows per prefill chunk (default 256)\n"
    "  --threads N          threads for OpenMP and BLAS (default: OpenMP's)\n"
    "  --backend NAME       ref, fast (cpu = fast) or checked (ref's ops on guarded\n"
    "                       memory: proves every tensor is placed; default fast)\n"
    "  --device cpu|cuda    cuda = --backend cuda (default cpu)\n"
    "  -q, --quiet  -v, --verbose (timings on stderr)  -h, --help  --version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum {
    OPT_PROMPT = HM_OPT_FIRST_TOOL, OPT_PROMPT_IDS, OPT_TOKENIZER, OPT_BYTES, OPT_TEMP,
    OPT_TOPK, OPT_TOPP, OPT_SEED, OPT_MAXNEW, OPT_STOP, OPT_EOT, OPT_IGNORE_EOT, OPT_IDS,
    OPT_BENCH, OPT_CONTEXT, OPT_BATCH, OPT_DECODE, OPT_CHUNK, OPT_THREADS, OPT_BACKEND,
    OPT_SAMPLES, OPT_SHARED_PROMPT, OPT_DEVICE,
};

#define MAX_LIST HM_GEN_MAX_END /* --stop strings, --eot-id ids */

struct opts {
    struct hm_cli_common common;
    const char *model, *prompt, *prompt_ids, *tokenizer, *backend, *device;
    struct hm_sample_params sp;
    uint64_t seed;
    int64_t max_new, context, batch, decode_tokens, chunk, threads, samples, gen_batch;
    const char *stop[MAX_LIST];
    int n_stop;
    int32_t eot[MAX_LIST];
    int n_eot, bytes, ignore_eot, ids, bench, shared_prompt;
};

struct run {
    const struct opts *o;
    struct hm_model *m;
    const struct hm_backend *be;
    struct hm_tokenizer *tok;     /* or NULL */
    int32_t end_ids[HM_GEN_MAX_END];
    int n_end;
    struct hm_ids ids;            /* the prompt */
    int64_t n_prompt;
    int stream_text, stream_ids;
    double rss_loaded;            /* resident bytes once the model is loaded */
    double load_peak;             /* peak RSS while loading */
    int peak_reset;               /* 1: the peak was reset after loading */
};

static void json_ids(const int32_t *v, int64_t n)
{
    putchar('[');
    for (int64_t i = 0; i < n; i++)
        printf(i ? ", %d" : "%d", v[i]);
    putchar(']');
}

static int is_end(const struct run *r, int32_t id)
{
    for (int i = 0; i < r->n_end; i++)
        if (r->end_ids[i] == id)
            return 1;
    return 0;
}

/* Where the tokenizer came from, for messages. */
static const char *tok_source(const struct opts *o)
{
    return o->bytes ? "bytes" : o->tokenizer ? o->tokenizer : o->model;
}

/* Prefill rows per chunk. */
static int64_t prefill_chunk(const struct run *r)
{
    return r->o->chunk ? r->o->chunk : HM_PREFILL_CHUNK;
}

/* One sample: its state, generator, new ids and text. */
struct sample {
    struct hm_model_state *st;
    struct hm_sampler *smp;
    struct hm_ids ids;          /* the new ids */
    struct hm_gen_text *text;   /* with a tokenizer */
    const char *reason;         /* NULL while it runs */
    int32_t end_id;
    int stop_hit;
    uint64_t seed;
};

static void print_json(const struct run *r, const struct sample *q, double pre, double dec,
                       int64_t index)
{
    const struct opts *o = r->o;
    size_t len = 0;
    printf("{\"version\": 1, \"model\": ");
    hm_json_write_string(stdout, o->model, strlen(o->model));
    printf(", \"arch\": \"%s\", \"family\": \"%s\", ", hm_arch_name(&r->m->cfg),
           hm_family_name(r->m->cfg.family));
    if (o->samples > 1)
        printf("\"sample\": %lld, ", (long long)index);
    printf("\"prompt_ids\": ");
    json_ids(r->ids.v, r->n_prompt);
    printf(", \"new_ids\": ");
    json_ids(q->ids.v, q->ids.n);
    printf(", \"text\": ");
    if (q->text) {
        const char *t = hm_gen_text_view(q->text, &len);
        hm_json_write_string(stdout, t, len);
    } else {
        printf("null");
    }
    printf(", \"stop_reason\": \"%s\", \"end_id\": ", q->reason);
    printf(q->end_id >= 0 ? "%d" : "null", q->end_id);
    printf(", \"stop_string\": ");
    if (q->stop_hit >= 0)
        hm_json_write_string(stdout, o->stop[q->stop_hit], strlen(o->stop[q->stop_hit]));
    else
        printf("null");
    printf(", \"prompt_tokens\": %lld, \"tokens\": %lld, \"prefill_s\": %.6g, "
           "\"decode_s\": %.6g, \"prefill_tokens_per_s\": %.6g, \"decode_tokens_per_s\": "
           "%.6g, \"seed\": %llu, \"threads\": %d}\n",
           (long long)r->n_prompt, (long long)q->ids.n, pre, dec,
           pre > 0 ? (double)r->n_prompt / pre : 0, dec > 0 ? (double)q->ids.n / dec : 0,
           (unsigned long long)q->seed, hm_threads_get());
}

/* Chooses sample q's next token from logits [V] and settles its text;
 * stream: print as it comes (one sample). Returns 1 if q ended here. */
static int next_token(struct run *r, struct sample *q, float *logits, int stream, int32_t *tok)
{
    const struct opts *o = r->o;
    const int64_t V = r->m->cfg.vocab_size;
    /* ids the tokenizer cannot decode (padding rows) are never generated */
    const int64_t Vtok = r->tok ? hm_tokenizer_vocab_size(r->tok) : V;
    struct hm_error err;
    for (int64_t v = Vtok; v < V; v++)
        logits[v] = -INFINITY;
    if (hm_sampler_sample(q->smp, logits, tok, &err) != HM_OK)
        hm_die("cannot generate from '%s': token %lld: %s", o->model, (long long)q->ids.n,
               err.msg);
    if (is_end(r, *tok)) {
        q->reason = "end_of_text";
        q->end_id = *tok;
        return 1;
    }
    if (hm_ids_append(&q->ids, tok, 1, NULL) != HM_OK)
        hm_die("out of memory");
    if (stream && r->stream_ids) {
        printf(q->ids.n > 1 ? " %d" : "%d", *tok);
        hm_cli_flush_stdout();
    }
    if (q->text) {
        const char *bytes;
        size_t n;
        if (hm_gen_text_push(q->text, *tok, &bytes, &n, &q->stop_hit, &err) != HM_OK)
            hm_die("cannot decode the generated ids with '%s': %s", tok_source(o), err.msg);
        if (stream && r->stream_text && n) {
            fwrite(bytes, 1, n, stdout);
            hm_cli_flush_stdout();
        }
        if (q->stop_hit >= 0) {
            q->reason = "stop_string";
            return 1;
        }
    }
    if (q->ids.n == o->max_new) {
        q->reason = "max_new_tokens"; /* the last token is not fed */
        return 1;
    }
    return 0;
}

/* A finished sample's output (one sample streams: only the rest). */
static void finish_sample(struct run *r, struct sample *q, double pre, double dec, int64_t index)
{
    const struct opts *o = r->o;
    size_t len = 0;
    const char *bytes = "";
    if (q->text)
        hm_gen_text_finish(q->text, &bytes, &len);
    if (o->common.json) {
        print_json(r, q, pre, dec, index);
    } else if (r->stream_ids) {
        for (int64_t i = o->samples > 1 ? 0 : q->ids.n; i < q->ids.n; i++)
            printf(i ? " %d" : "%d", q->ids.v[i]);
        putchar('\n');
    } else if (o->samples > 1) {
        const char *t = hm_gen_text_view(q->text, &len);
        fwrite(t, 1, len, stdout);
        putchar('\n');
    } else {
        fwrite(bytes, 1, len, stdout);
        hm_gen_text_view(q->text, &len);
        if (isatty(STDOUT_FILENO) && len)
            putchar('\n');
    }
    hm_cli_flush_stdout();
}

/* --samples N from one prompt, seeds seed, seed + 1, ...: the prompt is
 * prefilled once, its state copied to each sample of a batch, and the
 * batch's running samples step together (hm_model_step_batch). */
static void generate(struct run *r)
{
    const struct opts *o = r->o;
    const int64_t V = r->m->cfg.vocab_size, N = o->samples;
    const int64_t Bmax = N < o->gen_batch ? N : o->gen_batch;
    struct hm_error err;
    hm_gen_make_prompt(&r->ids, o->prompt, o->prompt_ids, r->tok, tok_source(o), o->model, V);
    r->n_prompt = r->ids.n;
    hm_gen_check_positions(r->m, o->model, r->n_prompt, o->max_new, "the prompt");
    struct sample *q = calloc((size_t)Bmax, sizeof *q);
    struct hm_model_state *st0 = NULL, **run = calloc((size_t)Bmax, sizeof *run);
    float *last = malloc(sizeof(float) * (size_t)V);
    float *logits = malloc(sizeof(float) * (size_t)(Bmax * V));
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)Bmax);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)Bmax);
    if (!q || !run || !last || !logits || !toks || !idx)
        hm_die("out of memory");
    if (hm_model_state_new(r->m, &st0, &err) != HM_OK)
        hm_die("cannot generate from '%s': %s", o->model, err.msg);
    for (int64_t b = 0; b < Bmax; b++)
        if (hm_model_state_new(r->m, &q[b].st, &err) != HM_OK)
            hm_die("cannot generate from '%s': %s", o->model, err.msg);
    double t0 = hm_now();
    if (hm_model_prefill(r->m, r->be, st0, r->ids.v, r->n_prompt, prefill_chunk(r), NULL, last,
                         &err) != HM_OK)
        hm_die("cannot generate from '%s': prefill: %s", o->model, err.msg);
    const double pre = hm_now() - t0;
    const int stream = N == 1;
    for (int64_t s0 = 0; s0 < N; s0 += Bmax) {
        const int64_t B = N - s0 < Bmax ? N - s0 : Bmax;
        double t1 = hm_now();
        int64_t n = 0; /* samples still running: their rows of logits */
        for (int64_t b = 0; b < B; b++) {
            struct sample *x = &q[b];
            x->seed = o->seed + (uint64_t)(s0 + b);
            x->ids.n = 0;
            x->reason = NULL;
            x->end_id = -1;
            x->stop_hit = -1;
            hm_sampler_free(x->smp);
            hm_gen_text_free(x->text);
            x->smp = NULL;
            x->text = NULL;
            if (hm_model_state_copy(x->st, st0, &r->m->cfg, &err) != HM_OK ||
                hm_sampler_new(V, &o->sp, x->seed, &x->smp, &err) != HM_OK)
                hm_die("cannot generate from '%s': %s", o->model, err.msg);
            if (r->tok && hm_gen_text_new(r->tok, r->ids.v, r->ids.n, o->stop, o->n_stop,
                                          &x->text, &err) != HM_OK)
                hm_die("cannot decode the prompt with '%s': %s", tok_source(o), err.msg);
            memcpy(logits + b * V, last, sizeof(float) * (size_t)V);
            if (o->max_new == 0)
                x->reason = "max_new_tokens";
            else
                idx[n++] = b;
        }
        while (n > 0) {
            int64_t m = 0;
            for (int64_t i = 0; i < n; i++) {
                struct sample *x = &q[idx[i]];
                if (next_token(r, x, logits + i * V, stream, &toks[m]))
                    continue;
                run[m] = x->st;
                idx[m++] = idx[i];
            }
            n = m;
            if (n > 0 && hm_model_step_batch(r->m, r->be, run, n, toks, logits, &err) != HM_OK)
                hm_die("cannot generate from '%s': %s", o->model, err.msg);
        }
        const double dec = hm_now() - t1;
        for (int64_t b = 0; b < B; b++)
            finish_sample(r, &q[b], pre, dec, s0 + b);
        if (o->common.verbose)
            hm_info(&o->common, "samples %lld..%lld: %lld prompt tokens (%.1f tokens/s), "
                    "decoding %.3f s", (long long)s0, (long long)(s0 + B - 1),
                    (long long)r->n_prompt, pre > 0 ? (double)r->n_prompt / pre : 0, dec);
    }
    for (int64_t b = 0; b < Bmax; b++) {
        hm_model_state_free(q[b].st);
        hm_sampler_free(q[b].smp);
        hm_gen_text_free(q[b].text);
        hm_ids_release(&q[b].ids);
    }
    hm_model_state_free(st0);
    free(q), free(run), free(last), free(logits), free(toks), free(idx);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"prompt", required_argument, NULL, OPT_PROMPT},
        {"prompt-ids", required_argument, NULL, OPT_PROMPT_IDS},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"bytes", no_argument, NULL, OPT_BYTES},
        {"temperature", required_argument, NULL, OPT_TEMP},
        {"top-k", required_argument, NULL, OPT_TOPK},
        {"top-p", required_argument, NULL, OPT_TOPP},
        {"seed", required_argument, NULL, OPT_SEED},
        {"max-new-tokens", required_argument, NULL, OPT_MAXNEW},
        {"stop", required_argument, NULL, OPT_STOP},
        {"eot-id", required_argument, NULL, OPT_EOT},
        {"ignore-eot", no_argument, NULL, OPT_IGNORE_EOT},
        {"ids", no_argument, NULL, OPT_IDS},
        {"bench", no_argument, NULL, OPT_BENCH},
        {"context", required_argument, NULL, OPT_CONTEXT},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"decode-tokens", required_argument, NULL, OPT_DECODE},
        {"prefill-chunk", required_argument, NULL, OPT_CHUNK},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"samples", required_argument, NULL, OPT_SAMPLES},
        {"shared-prompt", no_argument, NULL, OPT_SHARED_PROMPT},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {.common = {.progress = -1}, .max_new = 256,
                     .sp = {.temperature = 1, .top_k = 0, .top_p = 1}, .decode_tokens = 64,
                     .context = -1, .batch = 0, .samples = 1};
    hm_cli_init("hm-generate", usage, argv);
    int c;
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS, longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&o.common);
        case OPT_PROMPT: o.prompt = optarg; break;
        case OPT_PROMPT_IDS: o.prompt_ids = optarg; break;
        case OPT_TOKENIZER: o.tokenizer = optarg; break;
        case OPT_BYTES: o.bytes = 1; break;
        /* numbers here; their ranges below, in hm_sample_params_check */
        case OPT_TEMP: o.sp.temperature = hm_parse_f64(optarg, "--temperature", -HUGE_VAL, HUGE_VAL); break;
        case OPT_TOPK: o.sp.top_k = hm_parse_i64(optarg, "--top-k", INT64_MIN, INT64_MAX); break;
        case OPT_TOPP: o.sp.top_p = hm_parse_f64(optarg, "--top-p", -HUGE_VAL, HUGE_VAL); break;
        case OPT_SEED: o.seed = (uint64_t)hm_parse_i64(optarg, "--seed", 0, INT64_MAX); break;
        case OPT_MAXNEW:
            o.max_new = hm_parse_i64(optarg, "--max-new-tokens", 0, (int64_t)1 << 40);
            break;
        case OPT_STOP:
            if (o.n_stop == MAX_LIST)
                hm_usage_error("at most %d --stop strings", MAX_LIST);
            if (!optarg[0])
                hm_usage_error("--stop: the string is empty");
            o.stop[o.n_stop++] = optarg;
            break;
        case OPT_EOT:
            if (o.n_eot == MAX_LIST)
                hm_usage_error("at most %d --eot-id ids", MAX_LIST);
            o.eot[o.n_eot++] = (int32_t)hm_parse_i64(optarg, "--eot-id", 0, INT32_MAX);
            break;
        case OPT_IGNORE_EOT: o.ignore_eot = 1; break;
        case OPT_IDS: o.ids = 1; break;
        case OPT_BENCH: o.bench = 1; break;
        case OPT_CONTEXT: o.context = hm_parse_i64(optarg, "--context", 1, (int64_t)1 << 30); break;
        case OPT_BATCH: o.batch = hm_parse_i64(optarg, "--batch", 1, 1 << 16); break;
        case OPT_DECODE:
            o.decode_tokens = hm_parse_i64(optarg, "--decode-tokens", 0, (int64_t)1 << 30);
            break;
        case OPT_CHUNK: o.chunk = hm_parse_i64(optarg, "--prefill-chunk", 1, 1 << 20); break;
        case OPT_THREADS: o.threads = hm_parse_i64(optarg, "--threads", 1, 1024); break;
        case OPT_BACKEND: o.backend = optarg; break;
        case OPT_DEVICE: o.device = optarg; break;
        case OPT_SHARED_PROMPT: o.shared_prompt = 1; break;
        case OPT_SAMPLES: o.samples = hm_parse_i64(optarg, "--samples", 1, (int64_t)1 << 30); break;
        }
    }
    if (argc - optind == 0)
        hm_usage_error("missing model");
    if (argc - optind > 1)
        hm_usage_error("expected one model, got %d arguments", argc - optind);
    o.model = argv[optind];
    if (o.prompt && o.prompt_ids)
        hm_usage_error("--prompt and --prompt-ids exclude each other");
    if (o.tokenizer && o.bytes)
        hm_usage_error("--tokenizer and --bytes exclude each other");
    if (o.ids && o.common.json)
        hm_usage_error("--ids and --json exclude each other");
    if (o.ignore_eot && o.n_eot)
        hm_usage_error("--ignore-eot and --eot-id exclude each other");
    struct hm_error perr;
    if (hm_sample_params_check(&o.sp, &perr) != HM_OK)
        hm_usage_error("%s", perr.msg);
    if (o.bench) {
        if (o.context < 0)
            hm_usage_error("--bench needs --context N");
        if (o.prompt || o.prompt_ids || o.n_stop || o.ids || o.samples > 1)
            hm_usage_error("--bench takes no prompt, --stop, --ids or --samples");
        if (!o.batch)
            o.batch = 1;
    } else if (o.context >= 0) {
        hm_usage_error("--context needs --bench");
    }
    if (o.shared_prompt && !o.bench)
        hm_usage_error("--shared-prompt needs --bench");
    o.gen_batch = o.batch ? o.batch : 16;
    const struct hm_backend *be = hm_cli_backend(o.device, o.backend);
    if (o.threads)
        hm_threads_set((int)o.threads);

    struct hm_error err;
    struct hm_ckpt *ck = NULL;
    struct run r = {.o = &o, .be = be};
    if (hm_ckpt_open(o.model, &ck, &err) != HM_OK ||
        hm_model_load_narrow(ck, hm_ckpt_config(ck), be, &r.m, &err) != HM_OK)
        hm_die_err("cannot read", o.model, &err);
    hm_cli_ckpt_notes(ck, o.model);
    if (!o.bench)
        r.tok = hm_gen_load_tokenizer(ck, o.model, o.tokenizer, o.bytes);
    hm_ckpt_close(ck);
    r.rss_loaded = hm_procmem_rss();
    if (o.bench) { /* the cells' peak is prefill + decode, not the file next to its copy */
        r.load_peak = hm_procmem_peak_rss();
        r.peak_reset = hm_procmem_reset_peak();
    }
    if (o.bench) {
        const struct hm_gen_bench gb = {
            .model = o.model, .m = r.m, .be = be, .context = o.context, .batch = o.batch,
            .decode_tokens = o.decode_tokens, .chunk = o.chunk, .seed = o.seed,
            .shared_prompt = o.shared_prompt, .json = o.common.json, .rss_loaded = r.rss_loaded,
            .load_peak = r.load_peak, .peak_reset = r.peak_reset};
        hm_gen_bench_run(&gb);
    } else {
        if (!r.tok && !o.prompt_ids)
            hm_usage_error("'%s' carries no tokenizer: give --tokenizer FILE or --bytes, or "
                           "--prompt-ids", o.model);
        if (!r.tok && o.n_stop)
            hm_usage_error("--stop needs a tokenizer (--tokenizer FILE or --bytes)");
        r.stream_ids = !o.common.json && (o.ids || !r.tok);
        r.stream_text = !o.common.json && !r.stream_ids;
        r.n_end = hm_gen_end_ids(r.tok, &r.m->cfg, o.eot, o.n_eot, o.ignore_eot, r.end_ids);
        generate(&r);
    }
    hm_ids_release(&r.ids);
    hm_tokenizer_free(r.tok);
    hm_model_free(r.m);
    return hm_cli_finish(HM_EXIT_OK);
}
