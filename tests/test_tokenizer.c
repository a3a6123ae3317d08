/* test_tokenizer.c — the tokenizer against HuggingFace `tokenizers` 0.23.2
 * ground truth (shared 238 lines + tests/data/tokenizer/extra-groundtruth.jsonl,
 * made by tests/gen/make_tokenizer_groundtruth.js), round trips, bad files. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "testutil.h"
#include "tokenizer.h"

#define NEOX HM_SHARED_DATA "/gpt-neox-20b_tokenizer.json"
#define SHARED_GT HM_SHARED_DATA "/tokenizer-groundtruth.jsonl"
#define EXTRA_GT HM_SOURCE_DIR "/tests/data/tokenizer/extra-groundtruth.jsonl"

static struct hm_tokenizer *load_neox(void)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    enum hm_status st = hm_tokenizer_load(NEOX, &tok, &err);
    cr_assert_eq(st, HM_OK, "cannot load %s: %s", NEOX, err.msg);
    return tok;
}

/* Checks every line of a ground-truth jsonl; returns the number of lines.
 * Each mismatch is logged with its index and first differing position. */
static int check_groundtruth(const char *path, int want_lines, int check_roundtrip)
{
    struct hm_tokenizer *tok = load_neox();
    size_t len;
    char *all = tu_read_file(path, &len);
    int lines = 0, bad = 0, bad_rt = 0;
    char *save = NULL;
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        cr_assert(o, "%s: line %d is not JSON", path, lines + 1);
        const cJSON *text = cJSON_GetObjectItem(o, "text"), *ids = cJSON_GetObjectItem(o, "ids");
        const cJSON *index = cJSON_GetObjectItem(o, "index");
        cr_assert(cJSON_IsString(text) && cJSON_IsArray(ids));
        int64_t n = cJSON_GetArraySize(ids);
        struct hm_ids got = {0};
        struct hm_error err;
        const char *t = text->valuestring;
        enum hm_status st = hm_tokenizer_encode(tok, t, strlen(t), &got, &err);
        cr_assert_eq(st, HM_OK, "line %d: encode failed: %s", lines + 1, err.msg);
        int32_t *want = malloc(((size_t)n + 1) * sizeof *want); /* [n] */
        int64_t k = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, ids) want[k++] = (int32_t)it->valuedouble;
        int64_t first = -1;
        for (int64_t i = 0; i < n || i < got.n; i++) {
            if (i >= n || i >= got.n || got.v[i] != want[i]) {
                first = i;
                break;
            }
        }
        if (first >= 0) {
            bad++;
            cr_log_error("%s index %d: mismatch at token %lld (want %lld tokens, got %lld): "
                         "want %d got %d", path, index ? index->valueint : lines,
                         (long long)first, (long long)n, (long long)got.n,
                         first < n ? want[first] : -1,
                         first < got.n ? got.v[first] : -1);
        }
        if (check_roundtrip) {
            char *dec = NULL;
            size_t dlen = 0;
            st = hm_tokenizer_decode(tok, got.v, got.n, &dec, &dlen, &err);
            cr_assert_eq(st, HM_OK, "decode failed: %s", err.msg);
            utf8proc_uint8_t *nfc = NULL;
            utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)t,
                                              (utf8proc_ssize_t)strlen(t), &nfc,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            cr_assert(r >= 0);
            if ((size_t)r != dlen || memcmp(nfc, dec, dlen) != 0) {
                bad_rt++;
                cr_log_error("%s index %d: decode(encode(x)) != NFC(x)", path, lines);
            }
            free(nfc);
            free(dec);
        }
        free(want);
        hm_ids_release(&got);
        cJSON_Delete(o);
        lines++;
    }
    free(all);
    hm_tokenizer_free(tok);
    cr_expect_eq(bad, 0, "%s: %d of %d lines differ from HuggingFace", path, bad, lines);
    cr_expect_eq(bad_rt, 0, "%s: %d round trips differ", path, bad_rt);
    if (want_lines > 0)
        cr_expect_eq(lines, want_lines, "%s: %d lines", path, lines);
    return lines;
}

Test(tokenizer, shared_groundtruth_exact, .timeout = 120)
{
    check_groundtruth(SHARED_GT, 238, 1);
}

Test(tokenizer, extra_groundtruth_exact, .timeout = 120)
{
    int n = check_groundtruth(EXTRA_GT, 0, 1);
    cr_expect_gt(n, 300);
}

Test(tokenizer, basics)
{
    struct hm_tokenizer *tok = load_neox();
    cr_expect_eq(hm_tokenizer_vocab_size(tok), 50277);
    cr_expect_eq(hm_tokenizer_eot_id(tok), 0);
    cr_expect_eq(hm_tokenizer_is_bytes(tok), 0);
    struct hm_ids ids = {0};
    struct hm_error err;
    const char *s = "Hello world<|endoftext|>  x";
    cr_assert_eq(hm_tokenizer_encode(tok, s, strlen(s), &ids, &err), HM_OK);
    cr_assert_eq(ids.n, 5);
    cr_expect_eq(ids.v[0], 12092);
    cr_expect_eq(ids.v[1], 1533);
    cr_expect_eq(ids.v[2], 0);
    cr_expect_eq(ids.v[3], 50276);
    cr_expect_eq(ids.v[4], 89);
    /* appends */
    cr_assert_eq(hm_tokenizer_encode(tok, "x", 1, &ids, &err), HM_OK);
    cr_expect_eq(ids.n, 6);
    int32_t bad = 50277;
    char *out = NULL;
    size_t len;
    cr_expect_eq(hm_tokenizer_decode(tok, &bad, 1, &out, &len, &err), HM_ERR_INVALID);
    cr_expect_null(out);
    hm_ids_release(&ids);
    hm_tokenizer_free(tok);
    hm_tokenizer_free(NULL);
}

Test(tokenizer, invalid_utf8_rejected)
{
    struct hm_tokenizer *tok = load_neox();
    static const struct { const char *s; size_t len; int64_t off; } cases[] = {
        {"abc\xff", 4, 3},         {"ok \xed\xa0\x80", 6, 3}, /* surrogate */
        {"\xc0\xaf", 2, 0},        /* overlong */
        {"xy\xe2\x82", 4, 2},      /* truncated */
        {"\xf4\x90\x80\x80", 4, 0}, /* > U+10FFFF */
        {"a\x80", 2, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hm_ids ids = {0};
        struct hm_error err;
        hm_error_clear(&err);
        enum hm_status st = hm_tokenizer_encode(tok, cases[i].s, cases[i].len, &ids, &err);
        cr_expect_eq(st, HM_ERR_FORMAT, "case %zu accepted", i);
        cr_expect_eq(err.offset, cases[i].off, "case %zu: offset %lld", i, (long long)err.offset);
        cr_expect(strstr(err.msg, "UTF-8") != NULL, "message: %s", err.msg);
        cr_expect_eq(ids.n, 0);
        hm_ids_release(&ids);
    }
    hm_tokenizer_free(tok);
}

Test(tokenizer, decode_is_lossy_like_hf)
{
    struct hm_tokenizer *tok = load_neox();
    struct hm_ids ids = {0};
    struct hm_error err;
    /* "é" is two byte tokens or one; decoding only its first byte gives U+FFFD */
    cr_assert_eq(hm_tokenizer_encode(tok, "\xc3\xa9", 2, &ids, &err), HM_OK);
    char *out;
    size_t len;
    cr_assert_eq(hm_tokenizer_decode(tok, ids.v, ids.n, &out, &len, &err), HM_OK);
    cr_expect_str_eq(out, "\xc3\xa9");
    free(out);
    /* id 127 is byte 0xC3 alone, 66 is "a"; HF decode([127, 127, 66]) is
     * "\ufffd\ufffda" (String::from_utf8_lossy), checked with npm tokenizers */
    int32_t lone[3] = {127, 127, 66};
    cr_assert_eq(hm_tokenizer_decode(tok, lone, 3, &out, &len, &err), HM_OK);
    cr_expect_str_eq(out, "\xef\xbf\xbd\xef\xbf\xbd" "a");
    cr_expect_eq(len, 7);
    free(out);
    hm_ids_release(&ids);
    hm_tokenizer_free(tok);
}

Test(tokenizer, bytes_round_trip)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_bytes(&tok, &err), HM_OK);
    cr_expect_eq(hm_tokenizer_vocab_size(tok), 257);
    cr_expect_eq(hm_tokenizer_eot_id(tok), 256);
    cr_expect_eq(hm_tokenizer_is_bytes(tok), 1);
    unsigned char buf[4096];
    uint64_t rng = 7;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = i < 256 ? (unsigned char)i : (unsigned char)tu_rand_u64(&rng);
    struct hm_ids ids = {0};
    cr_assert_eq(hm_tokenizer_encode(tok, (const char *)buf, sizeof buf, &ids, &err), HM_OK);
    cr_assert_eq(ids.n, (int64_t)sizeof buf);
    for (size_t i = 0; i < sizeof buf; i++)
        cr_assert_eq(ids.v[i], buf[i]);
    char *out;
    size_t len;
    cr_assert_eq(hm_tokenizer_decode(tok, ids.v, ids.n, &out, &len, &err), HM_OK);
    cr_assert_eq(len, sizeof buf);
    cr_assert(memcmp(out, buf, len) == 0);
    free(out);
    int32_t eot = 256;
    cr_assert_eq(hm_tokenizer_decode(tok, &eot, 1, &out, &len, &err), HM_OK);
    cr_expect_str_eq(out, "<|endoftext|>");
    free(out);
    int32_t bad = 257;
    cr_expect_eq(hm_tokenizer_decode(tok, &bad, 1, &out, &len, &err), HM_ERR_INVALID);
    hm_ids_release(&ids);
    hm_tokenizer_free(tok);
}

static void expect_load_error(const char *json, enum hm_status want, const char *needle)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    hm_error_clear(&err);
    enum hm_status st = hm_tokenizer_load_json(json, strlen(json), &tok, &err);
    cr_expect_eq(st, want, "status %d for %s (%s)", st, json, err.msg);
    cr_expect_null(tok);
    cr_expect(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    hm_tokenizer_free(tok);
}

#define GOOD_HEAD \
    "{\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\"," \
    "\"add_prefix_space\":false},\"decoder\":{\"type\":\"ByteLevel\"},"

Test(tokenizer, bad_files)
{
    expect_load_error("{", HM_ERR_FORMAT, "JSON");
    expect_load_error("[]", HM_ERR_FORMAT, "object");
    expect_load_error(GOOD_HEAD "\"x\":1}", HM_ERR_FORMAT, "missing \"model\"");
    expect_load_error(GOOD_HEAD "\"model\":{\"type\":\"Unigram\"}}", HM_ERR_UNSUPPORTED,
                      "unsupported model type 'Unigram'");
    expect_load_error(GOOD_HEAD "\"model\":{\"type\":\"BPE\",\"vocab\":[],\"merges\":[]}}",
                      HM_ERR_FORMAT, "vocab is not an object");
    expect_load_error(GOOD_HEAD "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":1}}",
                      HM_ERR_FORMAT, "merges is not an array");
    expect_load_error(GOOD_HEAD "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}",
                      HM_ERR_FORMAT, "not a valid id");
    expect_load_error("{\"normalizer\":{\"type\":\"NFKC\"}}", HM_ERR_UNSUPPORTED,
                      "normalizer 'NFKC'");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"Whitespace\"}}", HM_ERR_UNSUPPORTED,
                      "pre_tokenizer 'Whitespace'");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"decoder\":"
                      "{\"type\":\"WordPiece\"}}", HM_ERR_UNSUPPORTED, "decoder 'WordPiece'");
    /* a vocabulary without the 256 byte tokens */
    expect_load_error(GOOD_HEAD "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
                      HM_ERR_UNSUPPORTED, "byte-level token");
}

/* A complete tiny byte-level BPE: the 256 byte tokens, plus merges. */
static char *tiny_tokenizer(const char *extra_vocab, const char *merges)
{
    size_t cap = 65536;
    char *s = malloc(cap);
    size_t k = (size_t)snprintf(s, cap, GOOD_HEAD "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    int id = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        static int next = 256;
        int cp = printable ? b : next++;
        if (b == 255)
            next = 256;
        char u[8];
        int m = (int)utf8proc_encode_char(cp, (utf8proc_uint8_t *)u);
        u[m] = 0;
        if (cp == '"' || cp == '\\')
            k += (size_t)snprintf(s + k, cap - k, "\"\\%s\":%d,", u, id++);
        else
            k += (size_t)snprintf(s + k, cap - k, "\"%s\":%d,", u, id++);
    }
    snprintf(s + k, cap - k, "%s},\"merges\":%s}}", extra_vocab, merges);
    return s;
}

Test(tokenizer, merges_both_forms_and_unknown)
{
    struct hm_tokenizer *tok = NULL;
    struct hm_error err;
    char *j = tiny_tokenizer("\"ab\":256,\"abc\":257", "[\"a b\",[\"ab\",\"c\"]]");
    cr_assert_eq(hm_tokenizer_load_json(j, strlen(j), &tok, &err), HM_OK, "%s", err.msg);
    struct hm_ids ids = {0};
    cr_assert_eq(hm_tokenizer_encode(tok, "abcab", 5, &ids, &err), HM_OK);
    cr_assert_eq(ids.n, 2);
    cr_expect_eq(ids.v[0], 257);
    cr_expect_eq(ids.v[1], 256);
    cr_expect_eq(hm_tokenizer_eot_id(tok), -1);
    hm_ids_release(&ids);
    hm_tokenizer_free(tok);
    free(j);
    j = tiny_tokenizer("\"ab\":256", "[\"a b\",\"ab zz\"]");
    expect_load_error(j, HM_ERR_FORMAT, "merges[1] names a token not in model.vocab: \"zz\"");
    free(j);
    j = tiny_tokenizer("\"ab\":256", "[\"a b c\"]");
    expect_load_error(j, HM_ERR_FORMAT, "merges[0]");
    free(j);
    j = tiny_tokenizer("\"ab\":256", "[\"a c\"]");
    expect_load_error(j, HM_ERR_FORMAT, "\"ac\"");
    free(j);
    j = tiny_tokenizer("\"ab\":256", "[3]");
    expect_load_error(j, HM_ERR_FORMAT, "neither");
    free(j);
}

Test(tokenizer, long_words_no_hang, .timeout = 30)
{
    /* one 1 MB "word": the heap path, O(n log n) */
    struct hm_tokenizer *tok = load_neox();
    size_t n = 1 << 20;
    char *s = malloc(n);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)('a' + (i * 7 + i / 13) % 26);
    struct hm_ids ids = {0};
    struct hm_error err;
    cr_assert_eq(hm_tokenizer_encode(tok, s, n, &ids, &err), HM_OK);
    char *out;
    size_t len;
    cr_assert_eq(hm_tokenizer_decode(tok, ids.v, ids.n, &out, &len, &err), HM_OK);
    cr_assert_eq(len, n);
    cr_assert(memcmp(out, s, n) == 0);
    free(out);
    free(s);
    hm_ids_release(&ids);
    hm_tokenizer_free(tok);
}
