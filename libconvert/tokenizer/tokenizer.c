/* tokenizer.c — added tokens, normalization, encode, decode,
 * the byte-level vocabulary. Token arrays (struct hm_ids) are in
 * tokenizer_types.c; loading tokenizer.json is in tokenizer_load.c;
 * the pre-tokenizer, BPE and the word cache are in tokenizer_bpe.c; the
 * llama2.c tokenizer.bin (load, encode, decode) in tokenizer_llama2c.c. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "tokenizer_internal.h"

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0 if invalid. */
int hm_tok_utf8_valid_len(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && p[1] < 0xA0)
            return 0; /* overlong */
        if (c == 0xED && p[1] > 0x9F)
            return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && p[1] < 0x90)
            return 0;
        if (c == 0xF4 && p[1] > 0x8F)
            return 0;
        return 4;
    }
    return 0;
}

/* Offset of the first invalid byte, or len if text is valid UTF-8. */
static size_t utf8_check(const uint8_t *p, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        int k = hm_tok_utf8_valid_len(p + i, len - i);
        if (!k)
            return i;
        i += (size_t)k;
    }
    return len;
}

/* ---- added tokens ---------------------------------------------------------- */

static int cmp_added_len_desc(const void *a, const void *b)
{
    const struct hm_added_tok *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

void hm_tok_added_finish(struct hm_added_set *s)
{
    qsort(s->t, (size_t)s->n, sizeof *s->t, cmp_added_len_desc);
    for (int64_t i = 0; i < s->n; i++) {
        const uint8_t *c = s->t[i].s;
        s->has_first[c[0]] = 1;
        if (s->t[i].len == 1)
            s->single[c[0]] = 1;
        else {
            unsigned pair = (unsigned)c[0] << 8 | c[1];
            s->pair_bits[pair >> 6] |= 1ull << (pair & 63);
        }
    }
}

static void added_set_free(struct hm_added_set *s)
{
    for (int64_t i = 0; i < s->n; i++)
        free(s->t[i].s);
    free(s->t);
}

/* Finds the leftmost-longest match in p: [n] at or after from. Returns the
 * token index or -1; *at = match start. */
static int64_t added_find(const struct hm_added_set *s, const uint8_t *p, size_t n, size_t from,
                          size_t *at)
{
    if (s->n == 0)
        return -1;
    for (size_t i = from; i < n; i++) {
        uint8_t c = p[i];
        if (!s->has_first[c])
            continue;
        int pair_ok = 0;
        if (i + 1 < n) {
            unsigned pair = (unsigned)c << 8 | p[i + 1];
            pair_ok = (s->pair_bits[pair >> 6] >> (pair & 63)) & 1;
        }
        if (!pair_ok && !s->single[c])
            continue;
        for (int64_t k = 0; k < s->n; k++) {
            const struct hm_added_tok *t = &s->t[k];
            if (t->len <= n - i && t->s[0] == c && memcmp(t->s, p + i, t->len) == 0) {
                *at = i;
                return k;
            }
        }
    }
    return -1;
}

/* ---- encode ---------------------------------------------------------------- */

/* Splits a normalized piece on normalized added tokens, encodes the rest. */
static enum hm_status encode_normalized(struct hm_tokenizer *tok, const uint8_t *p, size_t n,
                                        struct hm_ids *out, struct hm_error *err)
{
    size_t pos = 0;
    while (pos < n) {
        size_t at;
        int64_t k = added_find(&tok->norm, p, n, pos, &at);
        size_t end = k >= 0 ? at : n;
        if (end > pos) {
            enum hm_status st = hm_tok_encode_words(tok, p + pos, end - pos, out, err);
            if (st != HM_OK)
                return st;
        }
        if (k < 0)
            break;
        enum hm_status st = hm_ids_append(out, &tok->norm.t[k].id, 1, err);
        if (st != HM_OK)
            return st;
        pos = at + tok->norm.t[k].len;
    }
    return HM_OK;
}

static enum hm_status encode_piece(struct hm_tokenizer *tok, const uint8_t *p, size_t n,
                                   struct hm_ids *out, struct hm_error *err)
{
    int ascii = 1;
    for (size_t i = 0; i < n; i++)
        if (p[i] >= 0x80) {
            ascii = 0;
            break;
        }
    if (!tok->nfc || ascii)
        return encode_normalized(tok, p, n, out, err);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t r = utf8proc_map(p, (utf8proc_ssize_t)n, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0)
        return hm_error_set(err, HM_ERR_FORMAT, "NFC normalization failed: %s",
                            utf8proc_errmsg(r));
    enum hm_status st = encode_normalized(tok, nfc, (size_t)r, out, err);
    free(nfc);
    return st;
}

enum hm_status hm_tokenizer_encode(struct hm_tokenizer *tok, const char *text, size_t len,
                                   struct hm_ids *out, struct hm_error *err)
{
    return hm_tokenizer_encode_ex(tok, text, len, 0, out, err);
}

enum hm_status hm_tokenizer_encode_ex(struct hm_tokenizer *tok, const char *text, size_t len,
                                      unsigned flags, struct hm_ids *out, struct hm_error *err)
{
    const uint8_t *p = (const uint8_t *)text;
    int64_t n0 = out->n;
    enum hm_status st = HM_OK;
    if (flags & ~(unsigned)HM_TOKENIZER_BOS)
        return hm_error_set(err, HM_ERR_INVALID, "unknown encode flags 0x%x", flags);
    if ((flags & HM_TOKENIZER_BOS) && hm_tokenizer_bos_id(tok) < 0)
        return hm_error_set(err, HM_ERR_INVALID, "this tokenizer (%s) has no BOS token",
                            hm_tokenizer_kind_name(tok->kind));
    if (tok->is_bytes) {
        if (len > (size_t)INT64_MAX)
            return hm_error_set(err, HM_ERR_NOMEM, "text too large");
        st = hm_ids_reserve(out, (int64_t)len, err);
        if (st != HM_OK)
            return st;
        for (size_t i = 0; i < len; i++)
            out->v[out->n++] = p[i];
        return HM_OK;
    }
    size_t bad = utf8_check(p, len);
    if (bad != len)
        return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)bad,
                               "invalid UTF-8 at byte offset %zu (byte 0x%02x)", bad, p[bad]);
    if (tok->kind == HM_TOKENIZER_KIND_LLAMA2C)
        return hm_tok_l2c_encode(tok, p, len, (flags & HM_TOKENIZER_BOS) != 0, out, err);
    size_t pos = 0;
    while (pos < len) {
        size_t at;
        int64_t k = added_find(&tok->raw, p, len, pos, &at);
        size_t end = k >= 0 ? at : len;
        if (end > pos && (st = encode_piece(tok, p + pos, end - pos, out, err)) != HM_OK)
            goto out;
        if (k < 0)
            break;
        if ((st = hm_ids_append(out, &tok->raw.t[k].id, 1, err)) != HM_OK)
            goto out;
        pos = at + tok->raw.t[k].len;
    }
out:
    if (st != HM_OK)
        out->n = n0;
    return st;
}

/* ---- decode ---------------------------------------------------------------- */

enum hm_status hm_tokenizer_decode(const struct hm_tokenizer *tok, const int32_t *ids,
                                   int64_t n, char **out, size_t *len, struct hm_error *err)
{
    *out = NULL;
    *len = 0;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= tok->vocab_size || !tok->dvalid[id])
            return hm_error_set(err, HM_ERR_INVALID,
                                "token %lld: id %d is not in the vocabulary", (long long)i, id);
        total += tok->doff[id + 1] - tok->doff[id];
    }
    if (tok->kind == HM_TOKENIZER_KIND_LLAMA2C)
        return hm_tok_l2c_decode(tok, ids, n, out, len, err);
    /* lossy replacement can grow a bad byte (1) into U+FFFD (3) */
    size_t cap;
    if (hm_mul_size(total, 3, &cap) != 0 || hm_add_size(cap, 1, &cap) != 0)
        return hm_error_set(err, HM_ERR_NOMEM, "decoded text too large");
    uint8_t *raw = malloc(total + 1);
    uint8_t *res = tok->is_bytes ? NULL : malloc(cap);
    if (!raw || (!tok->is_bytes && !res)) {
        free(raw);
        free(res);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory decoding %lld tokens",
                            (long long)n);
    }
    size_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t m = tok->doff[ids[i] + 1] - tok->doff[ids[i]];
        memcpy(raw + k, tok->dec + tok->doff[ids[i]], m);
        k += m;
    }
    raw[k] = 0;
    if (tok->is_bytes) {
        *out = (char *)raw;
        *len = k;
        return HM_OK;
    }
    /* String::from_utf8_lossy: each maximal invalid subpart -> U+FFFD */
    size_t j = 0;
    for (size_t i = 0; i < k;) {
        int v = hm_tok_utf8_valid_len(raw + i, k - i);
        if (v) {
            memcpy(res + j, raw + i, (size_t)v);
            j += (size_t)v;
            i += (size_t)v;
            continue;
        }
        /* skip the maximal prefix of a valid sequence (at least one byte) */
        size_t skip = 1;
        uint8_t c = raw[i];
        int need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        for (int t = 1; t < need && i + (size_t)t < k; t++) {
            uint8_t d = raw[i + (size_t)t];
            uint8_t lo = 0x80, hi = 0xBF;
            if (t == 1) {
                if (c == 0xE0) lo = 0xA0;
                if (c == 0xED) hi = 0x9F;
                if (c == 0xF0) lo = 0x90;
                if (c == 0xF4) hi = 0x8F;
            }
            if (d < lo || d > hi)
                break;
            skip++;
        }
        memcpy(res + j, "\xEF\xBF\xBD", 3);
        j += 3;
        i += skip;
    }
    res[j] = 0;
    free(raw);
    *out = (char *)res;
    *len = j;
    return HM_OK;
}

enum hm_status hm_tokenizer_bytes(struct hm_tokenizer **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    tok->kind = HM_TOKENIZER_KIND_BYTES;
    tok->is_bytes = 1;
    tok->vocab_size = 257;
    tok->eot = 256;
    tok->dec = malloc(256 + 13);
    tok->doff = malloc(258 * sizeof *tok->doff);
    tok->dvalid = malloc(257);
    if (!tok->dec || !tok->doff || !tok->dvalid) {
        hm_tokenizer_free(tok);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    for (int b = 0; b < 256; b++) {
        tok->dec[b] = (uint8_t)b;
        tok->doff[b] = (uint64_t)b;
        tok->byte_id[b] = b;
    }
    memcpy(tok->dec + 256, "<|endoftext|>", 13);
    tok->doff[256] = 256;
    tok->doff[257] = 256 + 13;
    memset(tok->dvalid, 1, 257);
    *out = tok;
    return HM_OK;
}

void hm_tokenizer_free(struct hm_tokenizer *tok)
{
    if (!tok)
        return;
    added_set_free(&tok->raw);
    added_set_free(&tok->norm);
    free(tok->mkey);
    free(tok->mrank);
    free(tok->mnew);
    free(tok->dec);
    free(tok->doff);
    free(tok->dvalid);
    free(tok->scratch);
    hm_word_cache_free(&tok->cache);
    hm_tok_l2c_free(tok->l2c);
    free(tok);
}

int64_t hm_tokenizer_vocab_size(const struct hm_tokenizer *tok) { return tok->vocab_size; }
int32_t hm_tokenizer_eot_id(const struct hm_tokenizer *tok) { return tok->eot; }
int hm_tokenizer_is_bytes(const struct hm_tokenizer *tok) { return tok->is_bytes; }
enum hm_tokenizer_kind hm_tokenizer_kind(const struct hm_tokenizer *tok) { return tok->kind; }

int32_t hm_tokenizer_bos_id(const struct hm_tokenizer *tok)
{
    return tok->kind == HM_TOKENIZER_KIND_LLAMA2C ? 1 : -1;
}

int32_t hm_tokenizer_eos_id(const struct hm_tokenizer *tok)
{
    return tok->kind == HM_TOKENIZER_KIND_LLAMA2C ? 2 : -1;
}

const char *hm_tokenizer_kind_name(enum hm_tokenizer_kind kind)
{
    switch (kind) {
    case HM_TOKENIZER_KIND_HF_BPE: return "tokenizer.json";
    case HM_TOKENIZER_KIND_BYTES: return "bytes";
    case HM_TOKENIZER_KIND_LLAMA2C: return "llama2.c";
    }
    return "unknown";
}
