/* test_tokenizer_llama2c.c — the llama2.c tokenizer.bin (contract §1b) against an
 * independent, deliberately naive transcription of llama2.c run.c encode()
 * written here (a linear scan of the vocabulary for every lookup, every pair
 * re-scored after every merge), on the real 512-token vocabulary
 * (../shared/data/llama2c_tok512.bin): the TinyStories sample split into
 * documents at "<|endoftext|>", edge cases and seeded random strings; facts
 * checked by hand against the vocabulary listing; decode round trips;
 * malformed tokenizer.bin files (library statuses, and hm-tokenize's
 * messages naming the path). Every test skips when ../shared/data is absent. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tokenizer.h"

#define TOK512 HM_SHARED_DATA "/llama2c_tok512.bin"
#define TINY HM_SHARED_DATA "/cs336_tinystories_sample.txt"
#define NEOX HM_SHARED_DATA "/gpt-neox-20b_tokenizer.json"

static void need_data(void)
{
    if (access(TOK512, R_OK) != 0)
        cr_skip_test("shared data '%s' is absent", TOK512);
}

static struct hm_tokenizer *load_tok(void)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    enum hm_status st = hm_tokenizer_load(TOK512, &tok, &err);
    cr_assert_eq(st, HM_OK, "cannot load %s: %s", TOK512, err.msg);
    return tok;
}

/* ---- the naive reference (run.c encode, transcribed plainly) ----------------- */

struct ref_vocab {
    int n;
    float score[4096];
    unsigned char *s[4096];
    int len[4096];
};

/* Reads a known-good tokenizer.bin (no validation: that is the loader's job). */
static struct ref_vocab *ref_load(const char *path)
{
    size_t size;
    unsigned char *d = (unsigned char *)tu_read_file(path, &size);
    struct ref_vocab *v = calloc(1, sizeof *v);
    size_t p = 4;
    while (p < size) {
        cr_assert(v->n < 4096);
        memcpy(&v->score[v->n], d + p, 4);
        int32_t len;
        memcpy(&len, d + p + 4, 4);
        v->len[v->n] = len;
        v->s[v->n] = malloc((size_t)len + 1);
        memcpy(v->s[v->n], d + p + 8, (size_t)len);
        p += 8 + (size_t)len;
        v->n++;
    }
    free(d);
    return v;
}

static void ref_free(struct ref_vocab *v)
{
    for (int i = 0; i < v->n; i++)
        free(v->s[i]);
    free(v);
}

static int ref_lookup(const struct ref_vocab *v, const unsigned char *s, int len)
{
    for (int i = 0; i < v->n; i++)
        if (v->len[i] == len && memcmp(v->s[i], s, (size_t)len) == 0)
            return i;
    return -1;
}

/* tokens: [*n] owned, free(). text is valid UTF-8. */
static int32_t *ref_encode(const struct ref_vocab *v, const char *text, size_t len, int bos,
                           int64_t *count)
{
    const unsigned char *t = (const unsigned char *)text;
    int32_t *tok = malloc((len + 2) * sizeof *tok);
    int64_t n = 0;
    if (bos)
        tok[n++] = 1;
    if (len > 0)
        tok[n++] = ref_lookup(v, (const unsigned char *)" ", 1);
    for (size_t i = 0; i < len;) {
        int k = t[i] < 0x80 ? 1 : t[i] >= 0xF0 ? 4 : t[i] >= 0xE0 ? 3 : 2;
        int id = ref_lookup(v, t + i, k);
        if (id != -1) {
            tok[n++] = id;
        } else {
            for (int j = 0; j < k; j++)
                tok[n++] = t[i + (size_t)j] + 3;
        }
        i += (size_t)k;
    }
    unsigned char buf[8192];
    for (;;) {
        float best = -1e10f;
        int64_t best_i = -1;
        int best_id = -1;
        for (int64_t i = 0; i + 1 < n; i++) {
            int la = v->len[tok[i]], lb = v->len[tok[i + 1]];
            memcpy(buf, v->s[tok[i]], (size_t)la);
            memcpy(buf + la, v->s[tok[i + 1]], (size_t)lb);
            int id = ref_lookup(v, buf, la + lb);
            if (id != -1 && v->score[id] > best) {
                best = v->score[id];
                best_i = i;
                best_id = id;
            }
        }
        if (best_i < 0)
            break;
        tok[best_i] = best_id;
        memmove(tok + best_i + 1, tok + best_i + 2, (size_t)(n - best_i - 2) * sizeof *tok);
        n--;
    }
    *count = n;
    return tok;
}

/* ---- helpers ------------------------------------------------------------------ */

static void expect_ids(struct hm_tokenizer *tok, const char *s, size_t len, unsigned flags,
                       const int32_t *want, int64_t nwant, const char *label)
{
    struct hm_ids ids = {0};
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_encode_ex(tok, s, len, flags, &ids, &err), HM_OK, "%s: %s", label,
                 err.msg);
    cr_expect_eq(ids.n, nwant, "%s: %lld tokens, want %lld", label, (long long)ids.n,
                 (long long)nwant);
    for (int64_t i = 0; i < ids.n && i < nwant; i++)
        cr_expect_eq(ids.v[i], want[i], "%s: token %lld is %d, want %d", label, (long long)i,
                     ids.v[i], want[i]);
    hm_ids_release(&ids);
}

static void expect_decode(struct hm_tokenizer *tok, const int32_t *ids, int64_t n,
                          const char *want, size_t wlen, const char *label)
{
    char *out = NULL;
    size_t len = 0;
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_decode(tok, ids, n, &out, &len, &err), HM_OK, "%s: %s", label,
                 err.msg);
    cr_expect(len == wlen && memcmp(out, want, wlen) == 0, "%s: decoded '%s' (%zu bytes)", label,
              out, len);
    cr_expect_eq(out[len], 0);
    free(out);
}

/* Encodes s with and without BOS, compares with the reference token for
 * token, and checks both round trips (unless roundtrip is 0). Returns the
 * number of mismatches. */
static int check_ref(struct hm_tokenizer *tok, const struct ref_vocab *v, const char *s,
                     size_t len, int roundtrip, const char *label)
{
    int bad = 0;
    for (int bos = 0; bos < 2; bos++) {
        struct hm_ids ids = {0};
        struct hm_error err;
        cr_assert_eq(hm_tokenizer_encode_ex(tok, s, len, bos ? HM_TOKENIZER_BOS : 0, &ids, &err),
                     HM_OK, "%s: %s", label, err.msg);
        int64_t nref;
        int32_t *ref = ref_encode(v, s, len, bos, &nref);
        int64_t first = -1;
        for (int64_t i = 0; i < nref || i < ids.n; i++)
            if (i >= nref || i >= ids.n || ids.v[i] != ref[i]) {
                first = i;
                break;
            }
        if (first >= 0) {
            bad++;
            cr_log_error("%s (bos %d): mismatch at token %lld (%lld tokens, reference %lld): "
                         "%d vs reference %d", label, bos, (long long)first, (long long)ids.n,
                         (long long)nref, first < ids.n ? ids.v[first] : -1,
                         first < nref ? ref[first] : -1);
        }
        for (int64_t i = 0; i < ids.n; i++)
            cr_assert(ids.v[i] >= 0 && ids.v[i] < v->n);
        /* decode(encode(x)): x after BOS (its leading space is stripped),
         * " " + x without it (the dummy prefix stays) */
        char *out = NULL;
        size_t olen = 0;
        cr_assert_eq(hm_tokenizer_decode(tok, ids.v, ids.n, &out, &olen, &err), HM_OK);
        int ok = !roundtrip ? 1 : bos ? olen == len && memcmp(out, s, len) == 0
                     : len == 0 ? olen == 0
                                : olen == len + 1 && out[0] == ' ' && memcmp(out + 1, s, len) == 0;
        if (!ok) {
            bad++;
            cr_log_error("%s (bos %d): decode(encode(x)) != x: '%s'", label, bos, out);
        }
        free(out);
        free(ref);
        hm_ids_release(&ids);
    }
    return bad;
}

static int check_against_ref(struct hm_tokenizer *tok, const struct ref_vocab *v, const char *s,
                             size_t len, const char *label)
{
    return check_ref(tok, v, s, len, 1, label);
}

/* ---- tests -------------------------------------------------------------------- */

Test(tokenizer_llama2c, vocabulary_facts)
{
    need_data();
    struct hm_tokenizer *tok = load_tok();
    cr_expect_eq(hm_tokenizer_kind(tok), HM_TOKENIZER_KIND_LLAMA2C);
    cr_expect_str_eq(hm_tokenizer_kind_name(hm_tokenizer_kind(tok)), "llama2.c");
    cr_expect_eq(hm_tokenizer_vocab_size(tok), 512);
    cr_expect_eq(hm_tokenizer_bos_id(tok), 1);
    cr_expect_eq(hm_tokenizer_eos_id(tok), 2);
    cr_expect_eq(hm_tokenizer_eot_id(tok), -1);
    cr_expect_eq(hm_tokenizer_is_bytes(tok), 0);
    hm_tokenizer_free(tok);
}

/* Facts read off the vocabulary listing, independent of both encoders:
 * id 410 is " ", 261 " a" (score -2), 485 "é", 3 + b is <0xbb>; "\n", "\t",
 * "ß", "中" and the emoji are not pieces, and no piece holds "<0x". */
Test(tokenizer_llama2c, hand_checked)
{
    need_data();
    struct hm_tokenizer *tok = load_tok();
    const int32_t bos_only[] = {1};
    expect_ids(tok, "", 0, 0, NULL, 0, "empty");
    expect_ids(tok, "", 0, HM_TOKENIZER_BOS, bos_only, 1, "empty + BOS");
    /* [" ", "a"] -> " a" */
    const int32_t a[] = {261}, bos_a[] = {1, 261};
    expect_ids(tok, "a", 1, 0, a, 1, "a");
    expect_ids(tok, "a", 1, HM_TOKENIZER_BOS, bos_a, 2, "a + BOS");
    /* U+1F600 is no piece: the dummy prefix, then each byte + 3, no merges */
    const int32_t emoji[] = {410, 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3};
    expect_ids(tok, "\xF0\x9F\x98\x80", 4, 0, emoji, 5, "emoji");
    /* "ß" (C3 9F) and "\n" are absent as well */
    const int32_t eszett_nl[] = {410, 0xC3 + 3, 0x9F + 3, 0x0A + 3};
    expect_ids(tok, "\xC3\x9F\n", 3, 0, eszett_nl, 4, "eszett newline");
    /* "é" is piece 485; " é" is not a piece */
    const int32_t e_acute[] = {410, 485};
    expect_ids(tok, "\xC3\xA9", 2, 0, e_acute, 2, "e acute");
    /* "  " is not a piece: three separate spaces */
    const int32_t spaces[] = {410, 410, 410};
    expect_ids(tok, "  ", 2, 0, spaces, 3, "two spaces");
    /* ties: "ll" (306) can merge at two overlapping places; the leftmost
     * wins, leaving "l" (421); the newline (byte fallback 13) merges with
     * nothing, so the dummy prefix stays alone */
    const int32_t lll[] = {410, 13, 306, 421};
    expect_ids(tok, "\nlll", 4, 0, lll, 4, "leftmost on ties");

    const int32_t d1[] = {1, 261}, d2[] = {261}, d3[] = {1}, d4[] = {2}, d5[] = {1, 410};
    const int32_t d6[] = {3 + 'A'}, d7[] = {1, 3 + ' '}, d8[] = {1, 261, 1, 261, 2};
    expect_decode(tok, d1, 2, "a", 1, "BOS strips the space");
    expect_decode(tok, d2, 1, " a", 2, "no BOS keeps it");
    expect_decode(tok, d3, 1, "", 0, "BOS is nothing");
    expect_decode(tok, d4, 1, "", 0, "EOS is nothing");
    expect_decode(tok, d5, 2, "", 0, "BOS then the dummy prefix");
    expect_decode(tok, d6, 1, "A", 1, "byte piece");
    expect_decode(tok, d7, 2, " ", 1, "a byte piece keeps its space");
    expect_decode(tok, d8, 5, "aa", 2, "two documents");
    const int32_t nul[] = {3};
    expect_decode(tok, nul, 1, "\0", 1, "byte 0");
    /* ids outside the vocabulary */
    char *out = NULL;
    size_t len;
    struct hm_error err;
    const int32_t bad1[] = {512}, bad2[] = {-1};
    cr_expect_eq(hm_tokenizer_decode(tok, bad1, 1, &out, &len, &err), HM_ERR_INVALID);
    cr_expect_null(out);
    cr_expect_eq(hm_tokenizer_decode(tok, bad2, 1, &out, &len, &err), HM_ERR_INVALID);
    hm_tokenizer_free(tok);
}

/* The TinyStories sample, split at "<|endoftext|>" into its documents (the
 * separator itself dropped; each document keeps its surrounding newlines). */
Test(tokenizer_llama2c, tinystories_matches_reference, .timeout = 300)
{
    need_data();
    struct hm_tokenizer *tok = load_tok();
    struct ref_vocab *v = ref_load(TOK512);
    cr_assert_eq(v->n, 512);
    size_t size;
    char *all = tu_read_file(TINY, &size);
    const char *sep = "<|endoftext|>";
    int docs = 0, bad = 0;
    for (char *p = all; p;) {
        char *e = strstr(p, sep);
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char label[64];
        snprintf(label, sizeof label, "document %d", docs);
        bad += check_against_ref(tok, v, p, len, label);
        docs++;
        p = e ? e + strlen(sep) : NULL;
    }
    cr_expect_eq(docs, 6, "%d documents", docs);
    cr_expect_eq(bad, 0, "%d mismatches over %d documents", bad, docs);
    free(all);
    ref_free(v);
    hm_tokenizer_free(tok);
}

Test(tokenizer_llama2c, edge_cases_match_reference, .timeout = 120)
{
    need_data();
    struct hm_tokenizer *tok = load_tok();
    struct ref_vocab *v = ref_load(TOK512);
    static const char *const cases[] = {
        "", " ", "   ", "a", " a", "a ", "  leading", "trailing  ", "multiple   spaces  here",
        "\n", "\n\n", "line one\nline two\n", "tab\there", "\t\t", "\r\n", "crlf\r\nend",
        "caf\xC3\xA9", "\xC3\xA9\xC3\xA9\xC3\xA9", "Stra\xC3\x9F" "e", "\xE4\xB8\xAD\xE6\x96\x87",
        "\xF0\x9F\x98\x80", "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D end",
        "\xE2\x80\x9CWow!\xE2\x80\x9D", "\x01\x02\x7F", "<0x41>", "<s>", "\n<s>\n", "</s>",
        "Once upon a time, there was a little girl named Lily.", "the the the the",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaa", "!!!???...", "1234567890", "\xC2\xA0nbsp",
        "\xE2\x80\x8A", "\xEF\xBF\xBF", "\xF4\x8F\xBF\xBF",
        /* overlapping equal-score pairs ("ll", "oo", "pp" are pieces) */
        "\nlll", "\nooo", "\nppppp", "\tlllll", "\nloool",
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "case %zu", i);
        bad += check_against_ref(tok, v, cases[i], strlen(cases[i]), label);
    }
    /* a NUL inside the text is a character like any other (byte fallback 3) */
    bad += check_against_ref(tok, v, "a\0b", 3, "embedded NUL");
    cr_expect_eq(bad, 0, "%d mismatches", bad);
    ref_free(v);
    hm_tokenizer_free(tok);
}

/* Seeded random strings over an alphabet of pieces, non-pieces and merge
 * fodder (seed 12345, printed in each failure label). */
Test(tokenizer_llama2c, random_strings_match_reference, .timeout = 300)
{
    need_data();
    struct hm_tokenizer *tok = load_tok();
    struct ref_vocab *v = ref_load(TOK512);
    static const char *const alpha[] = {
        "a", "e", "t", "h", "n", "d", "s", "o", " ", " ", " ", "\n", "\t", "the", "and", "He",
        ".", ",", "!", "\xC3\xA9", "\xC3\x9F", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xE2\x80\x9C",
        "T", "Lily", "was", "<", ">", "0x", "\xC2\xA0", "\x01", "l", "ll", "o", "p", "pp",
    };
    const size_t na = sizeof alpha / sizeof alpha[0];
    uint64_t rng = 12345;
    int bad = 0;
    char buf[512];
    for (int c = 0; c < 400; c++) {
        size_t len = 0;
        int parts = (int)(tu_rand_u64(&rng) % 40);
        for (int k = 0; k < parts; k++) {
            const char *s = alpha[tu_rand_u64(&rng) % na];
            size_t m = strlen(s);
            memcpy(buf + len, s, m);
            len += m;
        }
        char label[64];
        snprintf(label, sizeof label, "seed 12345 string %d", c);
        bad += check_against_ref(tok, v, buf, len, label);
    }
    cr_expect_eq(bad, 0, "%d mismatches", bad);
    ref_free(v);
    hm_tokenizer_free(tok);
}

Test(tokenizer_llama2c, invalid_utf8_refused)
{
    need_data();
    struct hm_tokenizer *tok = load_tok();
    static const struct { const char *s; size_t len; int64_t off; } cases[] = {
        {"abc\xff", 4, 3},          {"ok \xed\xa0\x80", 6, 3}, /* surrogate */
        {"\xc0\xaf", 2, 0},         /* overlong */
        {"xy\xe2\x82", 4, 2},       /* truncated */
        {"\xf4\x90\x80\x80", 4, 0}, /* > U+10FFFF */
        {"a\x80", 2, 1},            {"\xf0\x9f\x98", 3, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hm_ids ids = {0};
        struct hm_error err;
        hm_error_clear(&err);
        enum hm_status st =
            hm_tokenizer_encode_ex(tok, cases[i].s, cases[i].len, HM_TOKENIZER_BOS, &ids, &err);
        cr_expect_eq(st, HM_ERR_FORMAT, "case %zu accepted", i);
        cr_expect_eq(err.offset, cases[i].off, "case %zu: offset %lld", i, (long long)err.offset);
        cr_expect(strstr(err.msg, "UTF-8") != NULL, "message: %s", err.msg);
        cr_expect_eq(ids.n, 0);
        hm_ids_release(&ids);
    }
    hm_tokenizer_free(tok);
}

Test(tokenizer_llama2c, bos_flag_needs_a_bos)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_bytes(&tok, &err), HM_OK);
    cr_expect_eq(hm_tokenizer_bos_id(tok), -1);
    cr_expect_eq(hm_tokenizer_eos_id(tok), -1);
    cr_expect_eq(hm_tokenizer_kind(tok), HM_TOKENIZER_KIND_BYTES);
    struct hm_ids ids = {0};
    cr_expect_eq(hm_tokenizer_encode_ex(tok, "x", 1, HM_TOKENIZER_BOS, &ids, &err),
                 HM_ERR_INVALID);
    cr_expect(strstr(err.msg, "BOS") != NULL, "%s", err.msg);
    cr_expect_eq(hm_tokenizer_encode_ex(tok, "x", 1, 0x80, &ids, &err), HM_ERR_INVALID);
    cr_expect_eq(ids.n, 0);
    hm_tokenizer_free(tok);
}

/* Detection is by content: the names below lie. */
Test(tokenizer_llama2c, detected_by_content)
{
    need_data();
    char *dir = tu_mkdtemp("l2c-detect");
    size_t size;
    char *bin = tu_read_file(TOK512, &size);
    char *p = tu_path(dir, "tokenizer.json");
    tu_write_file(p, bin, size);
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_load(p, &tok, &err), HM_OK, "%s", err.msg);
    cr_expect_eq(hm_tokenizer_kind(tok), HM_TOKENIZER_KIND_LLAMA2C);
    hm_tokenizer_free(tok);
    cr_assert_eq(hm_tokenizer_load_memory(bin, size, &tok, &err), HM_OK, "%s", err.msg);
    cr_expect_eq(hm_tokenizer_vocab_size(tok), 512);
    hm_tokenizer_free(tok);
    unlink(p);
    free(p);
    if (access(NEOX, R_OK) == 0) {
        size_t jsize;
        char *json = tu_read_file(NEOX, &jsize);
        p = tu_path(dir, "tokenizer.bin");
        tu_write_file(p, json, jsize);
        cr_assert_eq(hm_tokenizer_load(p, &tok, &err), HM_OK, "%s", err.msg);
        cr_expect_eq(hm_tokenizer_kind(tok), HM_TOKENIZER_KIND_HF_BPE);
        cr_expect_eq(hm_tokenizer_bos_id(tok), -1);
        struct hm_ids ids = {0};
        cr_expect_eq(hm_tokenizer_encode_ex(tok, "x", 1, HM_TOKENIZER_BOS, &ids, &err),
                     HM_ERR_INVALID);
        hm_tokenizer_free(tok);
        free(json);
        unlink(p);
        free(p);
    }
    /* text that is neither says so */
    cr_expect_eq(hm_tokenizer_load_memory("hello world", 11, &tok, &err), HM_ERR_FORMAT);
    cr_expect_null(tok);
    cr_expect(strstr(err.msg, "not a tokenizer.json") && strstr(err.msg, "tokenizer.bin"), "%s",
              err.msg);
    free(bin);
    rmdir(dir);
    free(dir);
}

/* Pieces appended to the real vocabulary that run.c would merge into: a byte
 * piece's string glued to a letter ("<0x0A>a"), BOS's string glued to the
 * dummy prefix ("\n<s>\n "), and a duplicate of " a" with a higher score
 * (the lowest id, 261, and its score still win). */
Test(tokenizer_llama2c, run_c_corners_match_reference, .timeout = 60)
{
    need_data();
    size_t size;
    char *good = tu_read_file(TOK512, &size);
    static const struct { float score; const char *piece; } extra[] = {
        {10.0f, "<0x0A>a"}, {5.0f, "\n<s>\n "}, {100.0f, " a"},
    };
    char *d = malloc(size + 64);
    memcpy(d, good, size);
    size_t n = size;
    for (size_t i = 0; i < 3; i++) {
        int32_t len = (int32_t)strlen(extra[i].piece);
        memcpy(d + n, &extra[i].score, 4);
        memcpy(d + n + 4, &len, 4);
        memcpy(d + n + 8, extra[i].piece, (size_t)len);
        n += 8 + (size_t)len;
    }
    char *dir = tu_mkdtemp("l2c-corners");
    char *path = tu_path(dir, "tok515.bin");
    tu_write_file(path, d, n);
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_load(path, &tok, &err), HM_OK, "%s", err.msg);
    cr_assert_eq(hm_tokenizer_vocab_size(tok), 515);
    struct ref_vocab *v = ref_load(path);
    static const char *const cases[] = {
        "\na", "x\nab\na", "\n\na\n", "a", "a a", "\nlll\na", "", "\n",
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char label[64];
        snprintf(label, sizeof label, "corner case %zu", i);
        bad += check_ref(tok, v, cases[i], strlen(cases[i]), 0, label);
    }
    cr_expect_eq(bad, 0, "%d mismatches", bad);
    /* by hand: BOS + " " merge into 513, then <0x0A> + "a" into 512 */
    const int32_t want[] = {513, 512};
    expect_ids(tok, "\na", 2, HM_TOKENIZER_BOS, want, 2, "corner by hand");
    const int32_t want_a[] = {261};
    expect_ids(tok, "a", 1, 0, want_a, 1, "duplicate piece");
    ref_free(v);
    hm_tokenizer_free(tok);
    unlink(path);
    free(path);
    rmdir(dir);
    free(dir);
    free(d);
    free(good);
}

/* ---- malformed tokenizer.bin files ---------------------------------------------- */

static void wr32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void expect_bad(const unsigned char *d, size_t n, enum hm_status want, const char *needle,
                       const char *label)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_tokenizer_load_llama2c(d, n, &tok, &err);
    cr_expect_eq(st, want, "%s: status %d (%s)", label, st, err.msg);
    cr_expect_null(tok, "%s: a tokenizer came back", label);
    cr_expect(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", label, err.msg,
              needle);
    hm_tokenizer_free(tok);
    /* the sniffing loader agrees */
    st = hm_tokenizer_load_memory(d, n, &tok, &err);
    cr_expect_neq(st, HM_OK, "%s: load_memory accepted it", label);
    cr_expect_null(tok);
}

Test(tokenizer_llama2c, malformed_files)
{
    need_data();
    size_t size;
    unsigned char *good = (unsigned char *)tu_read_file(TOK512, &size);
    unsigned char *d = malloc(size + 64);
    /* offsets of the records: rec[i] = byte offset of token i's score */
    size_t rec[513], p = 4;
    for (int i = 0; i < 512; i++) {
        rec[i] = p;
        int32_t len;
        memcpy(&len, good + p + 4, 4);
        p += 8 + (size_t)len;
    }
    rec[512] = p;
    cr_assert_eq(p, size);
    const size_t last = rec[511];

    /* truncated at several points */
    expect_bad(good, 0, HM_ERR_FORMAT, "truncated", "empty file");
    expect_bad(good, 3, HM_ERR_FORMAT, "truncated", "cut in max_token_length");
    expect_bad(good, 4, HM_ERR_FORMAT, "only 0 tokens", "header only");
    expect_bad(good, 10, HM_ERR_FORMAT, "truncated record for token 0", "cut in a record head");
    expect_bad(good, rec[0] + 8, HM_ERR_FORMAT, "truncated: token 0", "cut before a piece");
    expect_bad(good, rec[300] + 10, HM_ERR_FORMAT, "truncated", "cut in piece 300");
    expect_bad(good, last + 5, HM_ERR_FORMAT, "truncated record for token 511", "cut last head");
    expect_bad(good, size - 1, HM_ERR_FORMAT, "truncated: token 511", "last byte missing");
    expect_bad(good, rec[100], HM_ERR_FORMAT, "only 100 tokens", "cut at a record boundary");
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    hm_tokenizer_load_llama2c(good, rec[300] + 10, &tok, &err);
    cr_expect_eq(err.offset, (int64_t)rec[300] + 8, "offset %lld", (long long)err.offset);

    /* lengths */
    memcpy(d, good, size);
    wr32(d + rec[5] + 4, (uint32_t)-1);
    expect_bad(d, size, HM_ERR_FORMAT, "token 5: negative length -1", "negative length");
    memcpy(d, good, size);
    wr32(d + rec[5] + 4, 0x7FFFFFFFu);
    expect_bad(d, size, HM_ERR_FORMAT, "exceeds max_token_length 7", "huge length");
    memcpy(d, good, size);
    wr32(d + rec[5] + 4, 8);
    expect_bad(d, size, HM_ERR_FORMAT, "length 8 exceeds max_token_length 7", "length > max");
    memcpy(d, good, size);
    wr32(d + rec[5] + 4, 0);
    expect_bad(d, size, HM_ERR_FORMAT, "empty piece", "zero length");
    /* max_token_length */
    const uint32_t bad_max[] = {0, (uint32_t)-5, 0x7FFFFFFFu, HM_LLAMA2C_MAX_PIECE + 1};
    for (size_t i = 0; i < sizeof bad_max / sizeof bad_max[0]; i++) {
        memcpy(d, good, size);
        wr32(d, bad_max[i]);
        expect_bad(d, size, HM_ERR_FORMAT, "max_token_length", "bad max_token_length");
    }
    memcpy(d, good, size);
    wr32(d, 6); /* smaller than the longest piece (7) */
    expect_bad(d, size, HM_ERR_FORMAT, "exceeds max_token_length 6", "max too small");
    /* trailing garbage */
    memcpy(d, good, size);
    memcpy(d + size, "xyz", 3);
    expect_bad(d, size + 3, HM_ERR_FORMAT, "truncated record for token 512", "3 trailing bytes");
    memcpy(d + size, "garbage!", 8);
    expect_bad(d, size + 8, HM_ERR_FORMAT, "token 512: length", "8 trailing bytes");
    memset(d + size, 0, 8);
    expect_bad(d, size + 8, HM_ERR_FORMAT, "token 512: empty piece", "8 trailing zeros");
    /* scores, NULs, the byte pieces, the dummy prefix */
    memcpy(d, good, size);
    wr32(d + rec[7], 0x7FC00000u);
    expect_bad(d, size, HM_ERR_FORMAT, "token 7: the score is NaN", "NaN score");
    memcpy(d, good, size);
    d[rec[300] + 8] = 0;
    expect_bad(d, size, HM_ERR_FORMAT, "token 300: NUL byte", "NUL in a piece");
    memcpy(d, good, size);
    d[rec[100] + 8] = 'x'; /* "<0x61>" -> "x0x61>" */
    expect_bad(d, size, HM_ERR_UNSUPPORTED, "not the byte piece <0x61>", "bad byte piece");
    memcpy(d, good, size);
    d[rec[410] + 8] = '~'; /* " " -> "~" */
    expect_bad(d, size, HM_ERR_UNSUPPORTED, "no \" \" piece", "no dummy prefix");
    /* still the good file */
    cr_assert_eq(hm_tokenizer_load_llama2c(good, size, &tok, &err), HM_OK, "%s", err.msg);
    hm_tokenizer_free(tok);
    free(d);
    free(good);
}

/* What a user sees: hm-tokenize names the file and the cause, never crashes. */
Test(tokenizer_llama2c, malformed_files_cli, .timeout = 60)
{
    need_data();
    const char *bin = HM_BIN_DIR "/hm-tokenize";
    if (access(bin, X_OK) != 0)
        cr_skip_test("'%s' is not built", bin);
    size_t size;
    unsigned char *good = (unsigned char *)tu_read_file(TOK512, &size);
    char *dir = tu_mkdtemp("l2c-cli");
    char *text = tu_path(dir, "in.txt");
    tu_write_file(text, "hello", 5);
    struct { size_t cut; uint32_t max; const char *needle; } cases[] = {
        {1000, 0, "truncated"}, {size, 0x7FFFFFFFu, "max_token_length"}, {2, 0, "truncated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.bin", i);
        char *path = tu_path(dir, name);
        unsigned char *d = malloc(size);
        memcpy(d, good, size);
        if (cases[i].max)
            wr32(d, cases[i].max);
        tu_write_file(path, d, cases[i].cut);
        char cmd[1024], *out = NULL, *errs = NULL;
        snprintf(cmd, sizeof cmd, "'%s' --tokenizer '%s' --print-ids '%s'", bin, path, text);
        int rc = tu_run(cmd, &out, &errs);
        cr_expect_eq(rc, 1, "%s: exit %d", name, rc);
        char want[600];
        snprintf(want, sizeof want, "hm-tokenize: error: cannot read '%s': ", path);
        cr_expect(strstr(errs, want) && strstr(errs, cases[i].needle), "%s: stderr '%s'", name,
                  errs);
        cr_expect_str_empty(out);
        free(out);
        free(errs);
        free(d);
        unlink(path);
        free(path);
    }
    unlink(text);
    free(text);
    rmdir(dir);
    free(dir);
    free(good);
}

/* MBs of text: one 1.1 MB text (tiny Shakespeare) and long runs encode in
 * O(n log n) and round-trip. */
Test(tokenizer_llama2c, large_text, .timeout = 60)
{
    need_data();
    const char *shakes = HM_SHARED_DATA "/tinyshakespeare_input.txt";
    if (access(shakes, R_OK) != 0)
        cr_skip_test("'%s' is absent", shakes);
    struct hm_tokenizer *tok = load_tok();
    size_t size;
    char *s = tu_read_file(shakes, &size);
    size_t n = 4 * size + 4096;
    char *big = malloc(n);
    /* 4.4 MB: the text four times */
    for (int k = 0; k < 4; k++)
        memcpy(big + (size_t)k * size, s, size);
    n = 4 * size;
    struct hm_ids ids = {0};
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_encode_ex(tok, big, n, HM_TOKENIZER_BOS, &ids, &err), HM_OK, "%s",
                 err.msg);
    cr_expect_gt(ids.n, (int64_t)(n / 4));
    char *out;
    size_t len;
    cr_assert_eq(hm_tokenizer_decode(tok, ids.v, ids.n, &out, &len, &err), HM_OK);
    cr_expect(len == n && memcmp(out, big, n) == 0, "4.4 MB round trip differs");
    free(out);
    /* runs: one character, one emoji (byte fallback), one merge chain */
    const char *units[] = {"a", "\xF0\x9F\x98\x80", " the"};
    for (int u = 0; u < 3; u++) {
        size_t m = strlen(units[u]), k = 0;
        while (k + m <= (1u << 20)) {
            memcpy(big + k, units[u], m);
            k += m;
        }
        ids.n = 0;
        cr_assert_eq(hm_tokenizer_encode_ex(tok, big, k, HM_TOKENIZER_BOS, &ids, &err), HM_OK);
        cr_assert_eq(hm_tokenizer_decode(tok, ids.v, ids.n, &out, &len, &err), HM_OK);
        cr_expect(len == k && memcmp(out, big, k) == 0, "run %d round trip differs", u);
        free(out);
    }
    hm_ids_release(&ids);
    free(big);
    free(s);
    hm_tokenizer_free(tok);
}
