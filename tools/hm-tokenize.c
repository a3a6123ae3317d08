/* hm-tokenize — text to token files (and back). contract §5 "Token files", §6. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "atomic_file.h"
#include "cli.h"
#include "text_source.h"
#include "tokenizer.h"
#include "tokfile.h"

static const char usage[] =
    "usage: hm-tokenize [OPTIONS] (--tokenizer FILE | --bytes) INPUT... -o OUT\n"
    "       hm-tokenize (--tokenizer FILE | --bytes) --print-ids [--bos] INPUT...\n"
    "       hm-tokenize --ids-in [--vocab-size N] INPUT... -o OUT\n"
    "       hm-tokenize (--tokenizer FILE | --bytes) --decode TOKENS...\n"
    "\n"
    "Tokenizes documents into a token file (docs/token-file.md): the ids of each\n"
    "document followed by the end-of-text id, or, with a llama2.c tokenizer, BOS\n"
    "followed by the ids of each document. INPUT is a text file (one document),\n"
    "a .jsonl file (the \"text\" of each line), an archive (tar, tar.gz, tar.xz, zip;\n"
    "each member a document, compressed members opened recursively) or '-' (stdin).\n"
    "\n"
    "Options:\n"
    "  --tokenizer FILE     HuggingFace tokenizer.json (BPE, e.g. GPT-NeoX) or llama2.c\n"
    "                       tokenizer.bin (encodes like llama2.c run.c; BOS 1, EOS 2),\n"
    "                       told apart by content\n"
    "  --bytes              byte-level vocabulary: ids 0-255 bytes, 256 end-of-text\n"
    "  -o, --output FILE    output token file ('-' = stdout)\n"
    "  --val-fraction F     send about a fraction F of whole documents to a second file;\n"
    "                       document i goes there when XXH3_64(i as u64 LE, seed S) / 2^64 < F\n"
    "  --val-output FILE    that file (default: OUT with .val before the extension)\n"
    "  --seed S             seed of the split (default 0)\n"
    "  --print-ids          print the ids of the inputs (concatenated bytes, one text,\n"
    "                       no end-of-text) as a JSON array on stdout\n"
    "  --bos                start with BOS: each document of a token file (implied, and\n"
    "                       the only framing, for a llama2.c tokenizer), or the\n"
    "                       --print-ids text; needs a tokenizer with a BOS\n"
    "  --ids-in             inputs are decimal ids (whitespace, commas or a JSON array)\n"
    "  --decode             print the text of token files (or of --ids-in ids); llama2.c:\n"
    "                       BOS and EOS print nothing, the space after BOS is dropped\n"
    "  --vocab-size N       vocabulary size of the output header (>= the tokenizer's;\n"
    "                       Pythia pads to 50304); required by --ids-in without a tokenizer\n"
    "  --eot-id N           end-of-text id (default: the tokenizer's, or 0; not with a\n"
    "                       llama2.c tokenizer, whose files hold BOS there)\n"
    "  -f, --force          replace existing outputs\n"
    "  --json               print a summary object on stdout: documents, bytes, tokens,\n"
    "                       val_documents, val_tokens, seconds, mb_per_s\n"
    "  -q, --quiet          fewer messages;  -v, --verbose  more\n"
    "  --progress, --no-progress   progress on stderr (default: when it is a terminal)\n"
    "  -h, --help           this text;  --version  the version\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 bad usage.\n";

enum {
    OPT_TOKENIZER = HM_OPT_FIRST_TOOL, OPT_BYTES, OPT_VAL_FRACTION, OPT_VAL_OUTPUT, OPT_SEED,
    OPT_PRINT_IDS, OPT_IDS_IN, OPT_DECODE, OPT_VOCAB_SIZE, OPT_EOT_ID, OPT_BOS,
};

struct opts {
    struct hm_cli_common common;
    const char *tokenizer, *output, *val_output;
    int bytes, print_ids, ids_in, decode, force, bos;
    double val_fraction;
    uint64_t seed;
    int64_t vocab_size, eot_id;
    char **inputs;
    int ninputs;
};

struct stats {
    int64_t docs, bytes, tokens, val_docs, val_tokens;
    double t0;
};

static struct hm_tokenizer *load_tokenizer(const struct opts *o)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    if (o->bytes) {
        if (hm_tokenizer_bytes(&tok, &err) != HM_OK)
            hm_die("%s", err.msg);
    } else if (o->tokenizer) {
        if (hm_tokenizer_load(o->tokenizer, &tok, &err) != HM_OK)
            hm_die_err("cannot read", o->tokenizer, &err);
    }
    return tok;
}

/* Reads a whole input (plain bytes, no archive handling). owned: free(). */
static char *read_raw(const char *path, size_t *len)
{
    FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!fp)
        hm_die("cannot read '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (!b)
            hm_die("cannot read '%s': out of memory", path);
        size_t r = fread(b + n, 1, cap - n, fp);
        n += r;
        if (r == 0)
            break;
        if (n == cap) {
            if (cap >= HM_TEXT_MAX_MEMBER)
                hm_die("cannot read '%s': larger than 1 GiB", path);
            cap *= 2;
            char *nb = realloc(b, cap + 1);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    if (ferror(fp) && fp == stdin && errno == EBADF) /* `<&-`: hm_cli_init holds fd 0 */
        hm_die("cannot read '-': stdin is closed");
    if (ferror(fp))
        hm_die("cannot read '%s': %s", path, strerror(errno));
    if (fp != stdin)
        fclose(fp);
    b[n] = 0;
    *len = n;
    return b;
}

/* Parses decimal ids separated by whitespace or commas (JSON array brackets
 * allowed) from every input, appending to ids. */
static void read_ids_text(const struct opts *o, struct hm_ids *ids)
{
    struct hm_error err;
    for (int i = 0; i < o->ninputs; i++) {
        size_t len;
        char *text = read_raw(o->inputs[i], &len);
        char *p = text, *end = text + len;
        int opened = 0, closed = 0;
        while (p < end) {
            char c = *p;
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
                p++;
            } else if (c == '[' && !opened && ids->n == 0) {
                opened = 1, p++;
            } else if (c == ']' && opened && !closed) {
                closed = 1, p++;
            } else if (c >= '0' && c <= '9' && !closed) {
                char *e;
                errno = 0;
                long long v = strtoll(p, &e, 10);
                if (errno == ERANGE || v > INT32_MAX)
                    hm_die("cannot read '%s': id at byte %td is too large", o->inputs[i],
                           p - text);
                int32_t id = (int32_t)v;
                if (hm_ids_append(ids, &id, 1, &err) != HM_OK)
                    hm_die_err("cannot read", o->inputs[i], &err);
                p = e;
            } else {
                hm_die("cannot read '%s': byte %td: expected a decimal id, got '%c'", o->inputs[i],
                       p - text, c);
            }
        }
        if (opened && !closed)
            hm_die("cannot read '%s': the JSON array is not closed", o->inputs[i]);
        free(text);
    }
}

static void write_decoded(struct hm_tokenizer *tok, const int32_t *ids, int64_t n, FILE *out,
                          const char *what)
{
    char *text;
    size_t len;
    struct hm_error err;
    if (hm_tokenizer_decode(tok, ids, n, &text, &len, &err) != HM_OK)
        hm_die_err("cannot decode", what, &err);
    if (len && fwrite(text, 1, len, out) != len)
        hm_die("cannot write the output: %s", strerror(errno));
    free(text);
}

static int run_decode(const struct opts *o, struct hm_tokenizer *tok)
{
    struct hm_afile *af;
    struct hm_error err;
    const char *out_path = o->output ? o->output : "-";
    hm_cli_hold_output(out_path);
    if (hm_afile_open(out_path, o->force ? HM_AFILE_FORCE : 0, &af, &err) != HM_OK)
        hm_die_err("cannot write", out_path, &err);
    FILE *out = hm_afile_stream(af);
    if (o->ids_in) {
        struct hm_ids ids = {0};
        read_ids_text(o, &ids);
        write_decoded(tok, ids.v, ids.n, out, o->inputs[0]);
        hm_ids_release(&ids);
    } else {
        /* chunks end after an end-of-text id, or before a BOS where documents
         * start with one (so the space after it is still dropped): no
         * character is cut */
        const int64_t chunk = 1 << 20;
        int32_t bos = hm_tokenizer_bos_id(tok);
        int32_t *buf = malloc((size_t)chunk * sizeof *buf); /* [chunk] */
        if (!buf)
            hm_die("out of memory");
        for (int i = 0; i < o->ninputs; i++) {
            struct hm_tok_file *f;
            if (hm_tok_open(o->inputs[i], &f, &err) != HM_OK)
                hm_die_err("cannot read", o->inputs[i], &err);
            int32_t eot = (int32_t)hm_tok_eot(f);
            int64_t n = hm_tok_count(f), start = 0;
            while (start < n) {
                int64_t m = n - start < chunk ? n - start : chunk;
                if (hm_tok_read(f, start, m, buf, &err) != HM_OK)
                    hm_die_err("cannot read", o->inputs[i], &err);
                int64_t cut = m;
                if (start + m < n && bos >= 0) {
                    cut = m - 1;
                    while (cut > 0 && buf[cut] != bos)
                        cut--;
                    if (cut == 0)
                        cut = m; /* a document longer than a chunk */
                } else if (start + m < n) {
                    while (cut > 0 && buf[cut - 1] != eot)
                        cut--;
                    if (cut == 0)
                        cut = m; /* a document longer than a chunk */
                }
                write_decoded(tok, buf, cut, out, o->inputs[i]);
                start += cut;
            }
            hm_tok_close(f);
        }
        free(buf);
    }
    if (hm_afile_commit(af, &err) != HM_OK)
        hm_die_err("cannot write", out_path, &err);
    return HM_EXIT_OK;
}

static int run_print_ids(const struct opts *o, struct hm_tokenizer *tok)
{
    size_t total = 0;
    char *all = NULL;
    for (int i = 0; i < o->ninputs; i++) {
        size_t len;
        char *t = read_raw(o->inputs[i], &len);
        char *na = realloc(all, total + len + 1);
        if (!na)
            hm_die("out of memory");
        all = na;
        memcpy(all + total, t, len);
        total += len;
        free(t);
    }
    struct hm_ids ids = {0};
    struct hm_error err;
    if (hm_tokenizer_encode_ex(tok, all ? all : "", total, o->bos ? HM_TOKENIZER_BOS : 0, &ids,
                               &err) != HM_OK)
        hm_die_err("cannot read", o->ninputs == 1 ? o->inputs[0] : "input", &err);
    putchar('[');
    for (int64_t i = 0; i < ids.n; i++)
        printf(i ? ", %d" : "%d", ids.v[i]);
    puts("]");
    hm_ids_release(&ids);
    free(all);
    return hm_cli_finish(HM_EXIT_OK);
}

/* OUT with ".val" before the extension: train.tok -> train.val.tok. owned. */
static char *default_val_path(const char *out)
{
    size_t n = strlen(out);
    char *s = malloc(n + 5);
    if (!s)
        hm_die("out of memory");
    const char *slash = strrchr(out, '/');
    const char *dot = strrchr(out, '.');
    if (!dot || (slash && dot < slash) || dot == out || dot[-1] == '/') {
        snprintf(s, n + 5, "%s.val", out);
    } else {
        size_t k = (size_t)(dot - out);
        memcpy(s, out, k);
        snprintf(s + k, n + 5 - k, ".val%s", dot);
    }
    return s;
}

/* 1 if document index goes to the validation file. */
static int is_val_doc(uint64_t index, uint64_t seed, double fraction)
{
    if (fraction <= 0)
        return 0;
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(index >> (8 * i));
    uint64_t h = XXH3_64bits_withSeed(le, 8, seed);
    return ldexp((double)h, -64) < fraction;
}

static void open_writer(const char *path, const struct opts *o, uint64_t vocab, uint32_t eot,
                        struct hm_tok_writer **w)
{
    struct hm_error err;
    for (int i = 0; i < o->ninputs; i++)
        if (hm_same_file(path, o->inputs[i]))
            hm_die("cannot write '%s': it is also an input", path);
    hm_cli_hold_output(path);
    if (hm_tok_writer_open(path, vocab, eot, o->force ? HM_TOK_FORCE : 0, w, &err) != HM_OK)
        hm_die_err("cannot write", path, &err);
}

static int run_encode(const struct opts *o, struct hm_tokenizer *tok)
{
    struct hm_error err;
    int64_t tv = tok ? hm_tokenizer_vocab_size(tok) : 0;
    if (o->vocab_size > 0 && o->vocab_size < tv)
        hm_usage_error("--vocab-size %lld is smaller than the tokenizer's %lld",
                       (long long)o->vocab_size, (long long)tv);
    uint64_t vocab = (uint64_t)(o->vocab_size > 0 ? o->vocab_size : tv);
    if (vocab == 0)
        hm_usage_error("--ids-in needs --vocab-size N (or --tokenizer/--bytes)");
    /* a tokenizer with a BOS (llama2.c) starts every document with it, and the
     * header's separator field holds BOS; the others end documents with eot */
    int32_t bos = tok ? hm_tokenizer_bos_id(tok) : -1;
    if (bos >= 0 && o->eot_id >= 0)
        hm_usage_error("--eot-id does not apply to a llama2.c tokenizer: its documents start "
                       "with BOS (id %d)", bos);
    int64_t eot = bos >= 0 ? bos : o->eot_id >= 0 ? o->eot_id
                : tok && hm_tokenizer_eot_id(tok) >= 0 ? hm_tokenizer_eot_id(tok) : -1;
    if (eot < 0 && !o->ids_in)
        hm_usage_error("the tokenizer has no <|endoftext|>; give --eot-id N");
    if (eot < 0)
        eot = 0;
    if ((uint64_t)eot >= vocab)
        hm_usage_error("--eot-id %lld is not below the vocabulary size %llu", (long long)eot,
                       (unsigned long long)vocab);
    char *val_path = NULL;
    if (o->val_fraction > 0) {
        if (o->val_output)
            val_path = strdup(o->val_output);
        else if (strcmp(o->output, "-") == 0)
            hm_usage_error("--val-fraction with '-o -' needs --val-output FILE");
        else
            val_path = default_val_path(o->output);
        if (strcmp(val_path, o->output) == 0 || hm_same_file(val_path, o->output))
            hm_usage_error("--val-output must differ from the output");
    }
    struct hm_tok_writer *w = NULL, *wv = NULL;
    open_writer(o->output, o, vocab, (uint32_t)eot, &w);
    if (val_path)
        open_writer(val_path, o, vocab, (uint32_t)eot, &wv);
    struct stats st = {.t0 = hm_now()};
    struct hm_progress prog;
    hm_progress_start(&prog, &o->common, "tokenizing");
    struct hm_ids ids = {0};
    int32_t eot32 = (int32_t)eot;
    if (o->ids_in) {
        read_ids_text(o, &ids);
        if (hm_tok_writer_append(w, ids.v, ids.n, &err) != HM_OK)
            hm_die_err("cannot read", o->inputs[0], &err);
        st.tokens = ids.n;
    }
    for (int i = 0; !o->ids_in && i < o->ninputs; i++) {
        struct hm_text_source *src;
        const char *path = o->inputs[i];
        if (hm_text_source_open(path, &src, &err) != HM_OK)
            hm_die_err("cannot read", path, &err);
        uint64_t base_bytes = (uint64_t)st.bytes;
        const char *doc, *name;
        size_t len;
        int r;
        while ((r = hm_text_source_next(src, &doc, &len, &name, &err)) == 1) {
            ids.n = 0;
            if (hm_tokenizer_encode_ex(tok, doc, len, bos >= 0 ? HM_TOKENIZER_BOS : 0, &ids,
                                       &err) != HM_OK ||
                (bos < 0 && hm_ids_append(&ids, &eot32, 1, &err) != HM_OK)) {
                hm_error_prefix(&err, "document '%s': ", name);
                hm_die_err("cannot read", path, &err);
            }
            int val = is_val_doc((uint64_t)st.docs, o->seed, o->val_fraction);
            if (hm_tok_writer_append(val ? wv : w, ids.v, ids.n, &err) != HM_OK)
                hm_die_err("cannot write", val ? val_path : o->output, &err);
            st.docs++;
            st.bytes += (int64_t)len;
            st.tokens += ids.n;
            if (val) {
                st.val_docs++;
                st.val_tokens += ids.n;
            }
            double dt = hm_now() - st.t0;
            hm_progress_update(&prog, "%lld docs, %.1f MB in (%.1f MB read), %.2f MB/s, %lld tokens",
                               (long long)st.docs, st.bytes / 1e6,
                               (base_bytes + hm_text_source_bytes_read(src)) / 1e6,
                               dt > 0 ? st.bytes / 1e6 / dt : 0.0, (long long)st.tokens);
        }
        if (r < 0)
            hm_die_err("cannot read", path, &err);
        hm_text_source_close(src);
    }
    hm_ids_release(&ids);
    /* both outputs or neither */
    struct hm_tok_writer *ws[2] = {w, wv};
    int failed = 0;
    if (hm_tok_writer_commit_all(ws, wv ? 2 : 1, &failed, &err) != HM_OK)
        hm_die_err("cannot write", failed ? val_path : o->output, &err);
    double dt = hm_now() - st.t0;
    double mbs = dt > 0 ? st.bytes / 1e6 / dt : 0.0;
    hm_progress_done(&prog, "%lld docs, %.1f MB, %lld tokens", (long long)st.docs,
                     st.bytes / 1e6, (long long)st.tokens);
    if (o->common.json) {
        printf("{\"documents\": %lld, \"bytes\": %lld, \"tokens\": %lld, \"val_documents\": %lld, "
               "\"val_tokens\": %lld, \"seconds\": %.6f, \"mb_per_s\": %.3f}\n",
               (long long)st.docs, (long long)st.bytes, (long long)st.tokens,
               (long long)st.val_docs, (long long)st.val_tokens, dt, mbs);
    } else if (o->common.verbose) {
        hm_info(&o->common, "%lld documents, %lld bytes, %lld tokens (%lld documents, %lld "
                "tokens to validation), %.2f s, %.2f MB/s", (long long)st.docs,
                (long long)st.bytes, (long long)st.tokens, (long long)st.val_docs,
                (long long)st.val_tokens, dt, mbs);
    }
    free(val_path);
    return hm_cli_finish(HM_EXIT_OK);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        HM_CLI_COMMON_LONGOPTS,
        {"output", required_argument, NULL, 'o'},
        {"force", no_argument, NULL, 'f'},
        {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
        {"bytes", no_argument, NULL, OPT_BYTES},
        {"val-fraction", required_argument, NULL, OPT_VAL_FRACTION},
        {"val-output", required_argument, NULL, OPT_VAL_OUTPUT},
        {"seed", required_argument, NULL, OPT_SEED},
        {"print-ids", no_argument, NULL, OPT_PRINT_IDS},
        {"ids-in", no_argument, NULL, OPT_IDS_IN},
        {"decode", no_argument, NULL, OPT_DECODE},
        {"vocab-size", required_argument, NULL, OPT_VOCAB_SIZE},
        {"eot-id", required_argument, NULL, OPT_EOT_ID},
        {"bos", no_argument, NULL, OPT_BOS},
        {NULL, 0, NULL, 0},
    };
    struct opts o = {.common = {.progress = -1}, .eot_id = -1};
    hm_cli_init("hm-tokenize", usage, argv);
    int c;
    while ((c = getopt_long(argc, argv, HM_CLI_COMMON_SHORTOPTS "o:f", longopts, NULL)) != -1) {
        switch (c) {
        HM_CLI_COMMON_CASES(&o.common);
        case 'o': o.output = optarg; break;
        case 'f': o.force = 1; break;
        case OPT_TOKENIZER: o.tokenizer = optarg; break;
        case OPT_BYTES: o.bytes = 1; break;
        case OPT_VAL_FRACTION:
            o.val_fraction = hm_parse_f64(optarg, "--val-fraction", 0.0, 1.0);
            break;
        case OPT_VAL_OUTPUT: o.val_output = optarg; break;
        case OPT_SEED:
            o.seed = (uint64_t)hm_parse_i64(optarg, "--seed", 0, INT64_MAX);
            break;
        case OPT_PRINT_IDS: o.print_ids = 1; break;
        case OPT_IDS_IN: o.ids_in = 1; break;
        case OPT_DECODE: o.decode = 1; break;
        case OPT_VOCAB_SIZE:
            o.vocab_size = hm_parse_i64(optarg, "--vocab-size", 1, (int64_t)INT32_MAX + 1);
            break;
        case OPT_EOT_ID:
            o.eot_id = hm_parse_i64(optarg, "--eot-id", 0, INT32_MAX);
            break;
        case OPT_BOS: o.bos = 1; break;
        }
    }
    o.inputs = argv + optind;
    o.ninputs = argc - optind;
    if (o.ninputs < 1)
        hm_usage_error("no input given (use '-' for stdin)");
    if (o.bytes && o.tokenizer)
        hm_usage_error("--tokenizer and --bytes cannot be combined");
    if (o.print_ids + o.decode > 1 || (o.print_ids && o.ids_in))
        hm_usage_error("--print-ids, --decode and --ids-in --print-ids cannot be combined");
    int need_tok = o.print_ids || o.decode || !o.ids_in;
    if (need_tok && !o.bytes && !o.tokenizer)
        hm_usage_error("give --tokenizer FILE or --bytes");
    int stdin_uses = 0;
    for (int i = 0; i < o.ninputs; i++)
        stdin_uses += strcmp(o.inputs[i], "-") == 0;
    if (stdin_uses > 1)
        hm_usage_error("'-' (stdin) can be given only once");
    if ((o.val_fraction > 0 || o.val_output) && (o.print_ids || o.decode || o.ids_in))
        hm_usage_error("--val-fraction/--val-output only apply when tokenizing text");
    if (o.bos && (o.decode || o.ids_in))
        hm_usage_error("--bos only applies when tokenizing text");
    if (o.val_output && o.val_fraction <= 0)
        hm_usage_error("--val-output needs --val-fraction F > 0");
    if (!o.print_ids && !o.decode && !o.output)
        hm_usage_error("no output given (-o FILE, or -o - for stdout)");
    if (o.common.json && (o.print_ids || o.decode || (o.output && !strcmp(o.output, "-"))))
        hm_usage_error("--json needs a file output (stdout carries the data)");
    if (o.output && (o.print_ids || o.decode))
        for (int i = 0; i < o.ninputs; i++)
            if (hm_same_file(o.output, o.inputs[i]))
                hm_die("cannot write '%s': it is also an input", o.output);
    /* the tokenizer is an input too: never an output, with or without -f */
    const char *outs[2] = {o.output, o.val_output};
    for (int k = 0; k < 2 && o.tokenizer; k++)
        if (outs[k] && hm_output_clobbers(outs[k], o.tokenizer))
            hm_die("cannot write '%s': it is the --tokenizer", outs[k]);
    struct hm_tokenizer *tok = load_tokenizer(&o);
    if (o.bos && hm_tokenizer_bos_id(tok) < 0)
        hm_usage_error("--bos needs a tokenizer with a BOS token (a llama2.c tokenizer.bin), "
                       "not %s", o.bytes ? "--bytes" : "a tokenizer.json");
    int rc = o.print_ids ? run_print_ids(&o, tok)
           : o.decode    ? run_decode(&o, tok)
                         : run_encode(&o, tok);
    hm_tokenizer_free(tok);
    return hm_cli_finish(rc);
}
