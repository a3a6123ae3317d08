/* tokenizer_load.c — reading a HuggingFace tokenizer.json (cJSON) into
 * struct hm_tokenizer, and telling it from a llama2.c tokenizer.bin by
 * content; see tokenizer.h for what is supported. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "fileio.h"
#include "tokenizer.h"
#include "tokenizer_internal.h"

/* ---- byte-level table (GPT-2 bytes_to_unicode) ------------------------------- */

/* cp_of_byte[b]: the code point byte b maps to; all < 324. */
static void byte_level_table(int32_t cp_of_byte[256])
{
    int next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        cp_of_byte[b] = printable ? b : next++;
    }
}

/* Decodes one code point from valid UTF-8 at p; returns its length. */
static int utf8_next(const uint8_t *p, int32_t *cp)
{
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    if (p[0] < 0xE0) {
        *cp = (p[0] & 0x1F) << 6 | (p[1] & 0x3F);
        return 2;
    }
    if (p[0] < 0xF0) {
        *cp = (p[0] & 0x0F) << 12 | (p[1] & 0x3F) << 6 | (p[2] & 0x3F);
        return 3;
    }
    *cp = (p[0] & 0x07) << 18 | (p[1] & 0x3F) << 12 | (p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    return 4;
}

/* ---- loading ----------------------------------------------------------------- */

/* Token string -> id, for resolving merges while loading. */
struct str_map {
    const char **key; /* borrowed from the cJSON tree; [cap] */
    int32_t *id;
    size_t mask;
};

static uint64_t str_hash(const char *s, size_t n) { return XXH3_64bits(s, n); }

static int str_map_put(struct str_map *m, const char *s, int32_t id)
{
    size_t n = strlen(s);
    for (size_t i = str_hash(s, n) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->key[i]) {
            m->key[i] = s;
            m->id[i] = id;
            return 0;
        }
        if (strcmp(m->key[i], s) == 0)
            return -1;
    }
}

static int32_t str_map_get(const struct str_map *m, const char *s, size_t n)
{
    for (size_t i = str_hash(s, n) & m->mask;; i = (i + 1) & m->mask) {
        if (!m->key[i])
            return -1;
        if (strncmp(m->key[i], s, n) == 0 && m->key[i][n] == 0)
            return m->id[i];
    }
}

static int is_type(const cJSON *obj, const char *type)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) && strcmp(t->valuestring, type) == 0;
}

static const char *type_of(const cJSON *obj)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(t) ? t->valuestring : "(no type)";
}

static int get_bool(const cJSON *obj, const char *key, int dflt)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsBool(b) ? cJSON_IsTrue(b) : dflt;
}

static enum hm_status load_normalizer(struct hm_tokenizer *tok, const cJSON *n,
                                      struct hm_error *err)
{
    if (!n || cJSON_IsNull(n))
        return HM_OK;
    if (is_type(n, "NFC")) {
        tok->nfc = 1;
        return HM_OK;
    }
    if (is_type(n, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        const cJSON *it;
        cJSON_ArrayForEach(it, list) {
            if (!is_type(it, "NFC"))
                return hm_error_set(err, HM_ERR_UNSUPPORTED,
                                    "unsupported normalizer '%s' in Sequence (only NFC)",
                                    type_of(it));
            tok->nfc = 1;
        }
        return HM_OK;
    }
    return hm_error_set(err, HM_ERR_UNSUPPORTED, "unsupported normalizer '%s' (only NFC)",
                        type_of(n));
}

static enum hm_status load_byte_level(struct hm_tokenizer *tok, const cJSON *p, int *seen,
                                      struct hm_error *err)
{
    if (!is_type(p, "ByteLevel"))
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "unsupported pre_tokenizer '%s' (only ByteLevel)", type_of(p));
    if (*seen)
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "more than one ByteLevel pre_tokenizer");
    *seen = 1;
    tok->add_prefix_space = get_bool(p, "add_prefix_space", 1);
    tok->use_regex = get_bool(p, "use_regex", 1);
    return HM_OK;
}

static enum hm_status load_pre_tokenizer(struct hm_tokenizer *tok, const cJSON *p,
                                         struct hm_error *err)
{
    int seen = 0;
    if (!p || cJSON_IsNull(p))
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "missing pre_tokenizer (a ByteLevel BPE needs ByteLevel)");
    if (is_type(p, "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(p, "pretokenizers")) {
            enum hm_status st = load_byte_level(tok, it, &seen, err);
            if (st != HM_OK)
                return st;
        }
        if (!seen)
            return hm_error_set(err, HM_ERR_UNSUPPORTED, "pre_tokenizer Sequence has no ByteLevel");
        return HM_OK;
    }
    return load_byte_level(tok, p, &seen, err);
}

/* Adds the decoded bytes of token string s (byte-level mapped) for id. */
static void decoded_bytes(const char *s, const int16_t byte_of_cp[324], uint8_t *dst,
                          size_t *n)
{
    size_t len = strlen(s), k = 0;
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        int m = hm_tok_utf8_valid_len(p + i, len - i);
        if (!m)
            goto raw;
        utf8_next(p + i, &cp);
        if (cp >= 324 || byte_of_cp[cp] < 0)
            goto raw;
        dst[k++] = (uint8_t)byte_of_cp[cp];
        i += (size_t)m;
    }
    *n = k;
    return;
raw:
    memcpy(dst, s, len);
    *n = len;
}

static enum hm_status load_added(struct hm_tokenizer *tok, const cJSON *list,
                                 struct hm_error *err)
{
    int64_t n = cJSON_GetArraySize(list);
    tok->raw.t = calloc((size_t)n + 1, sizeof *tok->raw.t);
    tok->norm.t = calloc((size_t)n + 1, sizeof *tok->norm.t);
    if (!tok->raw.t || !tok->norm.t)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    int64_t i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > INT32_MAX - 1 ||
            id->valuedouble != (double)(int32_t)id->valuedouble || !cJSON_IsString(content) ||
            !content->valuestring[0])
            return hm_error_set(err, HM_ERR_FORMAT,
                                "added_tokens[%lld] needs an integer id and a non-empty content",
                                (long long)i);
        if (get_bool(it, "single_word", 0) || get_bool(it, "lstrip", 0) ||
            get_bool(it, "rstrip", 0))
            return hm_error_set(err, HM_ERR_UNSUPPORTED,
                                "added_tokens[%lld]: single_word/lstrip/rstrip are not supported",
                                (long long)i);
        int normalized = get_bool(it, "normalized", !get_bool(it, "special", 0));
        struct hm_added_set *s = normalized ? &tok->norm : &tok->raw;
        struct hm_added_tok *t = &s->t[s->n];
        const char *c = content->valuestring;
        size_t len = strlen(c);
        if (normalized && tok->nfc) {
            utf8proc_uint8_t *nfc = NULL;
            utf8proc_ssize_t r = utf8proc_map((const uint8_t *)c, (utf8proc_ssize_t)len, &nfc,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (r <= 0)
                return hm_error_set(err, HM_ERR_FORMAT,
                                    "added_tokens[%lld]: content is not valid UTF-8", (long long)i);
            t->s = nfc;
            t->len = (size_t)r;
        } else {
            t->s = malloc(len);
            if (!t->s)
                return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            memcpy(t->s, c, len);
            t->len = len;
        }
        t->id = (int32_t)id->valuedouble;
        s->n++;
        i++;
    }
    hm_tok_added_finish(&tok->raw);
    hm_tok_added_finish(&tok->norm);
    return HM_OK;
}

static enum hm_status load_model(struct hm_tokenizer *tok, const cJSON *root,
                                 struct hm_error *err)
{
    enum hm_status st = HM_OK;
    struct str_map map = {0};
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model))
        return hm_error_set(err, HM_ERR_FORMAT, "missing \"model\" object");
    if (!is_type(model, "BPE"))
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "unsupported model type '%s' (only BPE)",
                            type_of(model));
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    const cJSON *cont = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
    if ((dropout && !cJSON_IsNull(dropout)) || (cont && !cJSON_IsNull(cont) &&
        !(cJSON_IsString(cont) && !cont->valuestring[0])) ||
        (suffix && !cJSON_IsNull(suffix) && !(cJSON_IsString(suffix) && !suffix->valuestring[0])) ||
        get_bool(model, "ignore_merges", 0))
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "BPE dropout, continuing_subword_prefix, end_of_word_suffix and "
                            "ignore_merges are not supported");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab))
        return hm_error_set(err, HM_ERR_FORMAT, "model.vocab is not an object");
    if (!cJSON_IsArray(merges))
        return hm_error_set(err, HM_ERR_FORMAT, "model.merges is not an array");
    int64_t nv = cJSON_GetArraySize(vocab);
    if (nv < 1)
        return hm_error_set(err, HM_ERR_FORMAT, "model.vocab is empty");
    size_t cap = 1;
    while (cap < (size_t)nv * 2)
        cap <<= 1;
    map.key = calloc(cap, sizeof *map.key);
    map.id = calloc(cap, sizeof *map.id);
    map.mask = cap - 1;
    if (!map.key || !map.id) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    int32_t max_id = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > INT32_MAX - 1 ||
            it->valuedouble != (double)(int32_t)it->valuedouble) {
            st = hm_error_set(err, HM_ERR_FORMAT, "model.vocab[\"%.40s\"] is not a valid id",
                              it->string);
            goto out;
        }
        if (str_map_put(&map, it->string, (int32_t)it->valuedouble) != 0) {
            st = hm_error_set(err, HM_ERR_FORMAT, "model.vocab has \"%.40s\" twice", it->string);
            goto out;
        }
        if ((int32_t)it->valuedouble > max_id)
            max_id = (int32_t)it->valuedouble;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added)) {
        st = hm_error_set(err, HM_ERR_FORMAT, "added_tokens is not an array");
        goto out;
    }
    if ((st = load_added(tok, added, err)) != HM_OK)
        goto out;
    for (int64_t i = 0; i < tok->raw.n; i++)
        if (tok->raw.t[i].id > max_id)
            max_id = tok->raw.t[i].id;
    for (int64_t i = 0; i < tok->norm.n; i++)
        if (tok->norm.t[i].id > max_id)
            max_id = tok->norm.t[i].id;
    tok->vocab_size = (int64_t)max_id + 1;
    /* a file cannot define more ids than it has bytes: a huge id in a small
     * file would only make us allocate tables for nothing */
    if ((uint64_t)tok->vocab_size > (uint64_t)tok->src_len) {
        st = hm_error_set(err, HM_ERR_FORMAT,
                          "token id %lld is larger than a file of %zu bytes can define "
                          "(ids must be dense)",
                          (long long)max_id, tok->src_len);
        goto out;
    }

    /* byte ids and decode table */
    int32_t cp_of_byte[256];
    int16_t byte_of_cp[324];
    byte_level_table(cp_of_byte);
    memset(byte_of_cp, -1, sizeof byte_of_cp);
    for (int b = 0; b < 256; b++) {
        byte_of_cp[cp_of_byte[b]] = (int16_t)b;
        char u[5];
        int m = (int)utf8proc_encode_char(cp_of_byte[b], (utf8proc_uint8_t *)u);
        tok->byte_id[b] = str_map_get(&map, u, (size_t)m);
        /* bytes that never occur in UTF-8 may be missing (the NeoX vocab lacks them) */
        if (tok->byte_id[b] < 0 && !(b == 0xC0 || b == 0xC1 || b >= 0xF5)) {
            st = hm_error_set(err, HM_ERR_UNSUPPORTED,
                              "model.vocab lacks the byte-level token for byte 0x%02x", b);
            goto out;
        }
    }
    size_t vs = (size_t)tok->vocab_size;
    const char **tstr = calloc(vs, sizeof *tstr); /* [vs] borrowed token strings */
    size_t dec_cap = 0;
    if (!tstr) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    cJSON_ArrayForEach(it, vocab) {
        tstr[(int32_t)it->valuedouble] = it->string;
    }
    struct hm_added_set *sets[2] = {&tok->raw, &tok->norm};
    for (int s = 0; s < 2; s++) /* added tokens decode as their content (HF id_to_token) */
        for (int64_t i = 0; i < sets[s]->n; i++)
            tstr[sets[s]->t[i].id] = NULL;
    for (size_t i = 0; i < vs; i++)
        dec_cap += tstr[i] ? strlen(tstr[i]) : 0;
    cJSON_ArrayForEach(it, added) {
        dec_cap += strlen(cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring);
    }
    tok->dec = malloc(dec_cap + 1);
    tok->doff = calloc(vs + 1, sizeof *tok->doff);
    tok->dvalid = calloc(vs, 1);
    if (!tok->dec || !tok->doff || !tok->dvalid) {
        free(tstr);
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* added contents by id (the JSON content, before normalization) */
    const char **acont = calloc(vs, sizeof *acont);
    if (!acont) {
        free(tstr);
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    cJSON_ArrayForEach(it, added) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
        acont[id] = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
    }
    size_t k = 0;
    for (size_t i = 0; i < vs; i++) {
        tok->doff[i] = k;
        const char *s = acont[i] ? acont[i] : tstr[i];
        if (s) {
            size_t m;
            decoded_bytes(s, byte_of_cp, tok->dec + k, &m);
            k += m;
            tok->dvalid[i] = 1;
        }
    }
    tok->doff[vs] = k;
    free(acont);
    free(tstr);
    tok->eot = str_map_get(&map, "<|endoftext|>", 13);
    for (int64_t i = 0; i < tok->raw.n; i++)
        if (tok->raw.t[i].len == 13 && memcmp(tok->raw.t[i].s, "<|endoftext|>", 13) == 0)
            tok->eot = tok->raw.t[i].id;

    /* merges */
    int64_t nm = cJSON_GetArraySize(merges);
    size_t mcap = 1;
    while (mcap < (size_t)nm * 2 + 2)
        mcap <<= 1;
    tok->mkey = malloc(mcap * sizeof *tok->mkey);
    tok->mrank = malloc(mcap * sizeof *tok->mrank);
    tok->mnew = malloc(mcap * sizeof *tok->mnew);
    if (!tok->mkey || !tok->mrank || !tok->mnew) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    memset(tok->mkey, 0xFF, mcap * sizeof *tok->mkey);
    tok->mmask = mcap - 1;
    int64_t rank = 0;
    char *buf = NULL;
    size_t buf_cap = 0;
    cJSON_ArrayForEach(it, merges) {
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(it)) {
            const char *s = it->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ') || sp == s || !sp[1]) {
                st = hm_error_set(err, HM_ERR_FORMAT,
                                  "merges[%lld] \"%.40s\" is not two tokens separated by one space",
                                  (long long)rank, s);
                break;
            }
            a = s, la = (size_t)(sp - s), b = sp + 1, lb = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring, la = strlen(a);
            b = cJSON_GetArrayItem(it, 1)->valuestring, lb = strlen(b);
        } else {
            st = hm_error_set(err, HM_ERR_FORMAT,
                              "merges[%lld] is neither \"a b\" nor [\"a\", \"b\"]", (long long)rank);
            break;
        }
        int32_t ia = str_map_get(&map, a, la), ib = str_map_get(&map, b, lb);
        if (la + lb + 1 > buf_cap) {
            buf_cap = 2 * (la + lb + 1);
            char *nb = realloc(buf, buf_cap);
            if (!nb) {
                st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
                break;
            }
            buf = nb;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        int32_t inew = str_map_get(&map, buf, la + lb);
        if (ia < 0 || ib < 0 || inew < 0) {
            st = hm_error_set(err, HM_ERR_FORMAT,
                              "merges[%lld] names a token not in model.vocab: \"%.*s\"",
                              (long long)rank, (int)(ia < 0 ? la : ib < 0 ? lb : la + lb),
                              ia < 0 ? a : ib < 0 ? b : buf);
            break;
        }
        uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
        uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 17;
        for (uint64_t i = h & tok->mmask;; i = (i + 1) & tok->mmask) {
            if (tok->mkey[i] == key)
                break; /* duplicate merge: the first (lowest rank) wins, as in HF */
            if (tok->mkey[i] == UINT64_MAX) {
                tok->mkey[i] = key;
                tok->mrank[i] = (uint32_t)rank;
                tok->mnew[i] = inew;
                break;
            }
        }
        rank++;
    }
    free(buf);
out:
    free(map.key);
    free(map.id);
    return st;
}

static enum hm_status load_root(struct hm_tokenizer *tok, const cJSON *root,
                                struct hm_error *err)
{
    if (!cJSON_IsObject(root))
        return hm_error_set(err, HM_ERR_FORMAT, "tokenizer.json is not a JSON object");
    enum hm_status st = load_normalizer(tok, cJSON_GetObjectItemCaseSensitive(root, "normalizer"),
                                        err);
    if (st == HM_OK)
        st = load_pre_tokenizer(tok, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), err);
    if (st != HM_OK)
        return st;
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (!dec || !is_type(dec, "ByteLevel"))
        return hm_error_set(err, HM_ERR_UNSUPPORTED, "unsupported decoder '%s' (only ByteLevel)",
                            dec && !cJSON_IsNull(dec) ? type_of(dec) : "null");
    st = load_model(tok, root, err);
    if (st != HM_OK)
        return st;
    hm_tok_init_classes(tok);
    return HM_OK;
}

enum hm_status hm_tokenizer_load_json(const char *json, size_t len, struct hm_tokenizer **out,
                                      struct hm_error *err)
{
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int64_t off = at && at >= json && at <= json + len ? (int64_t)(at - json) : -1;
        return hm_error_set_at(err, HM_ERR_FORMAT, off, "not valid JSON (near byte %lld)",
                               (long long)off);
    }
    struct hm_tokenizer *tok = calloc(1, sizeof *tok);
    if (tok)
        tok->src_len = len;
    enum hm_status st = tok ? load_root(tok, root, err)
                            : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    cJSON_Delete(root);
    if (st != HM_OK) {
        hm_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return HM_OK;
}

/* The largest tokenizer file read (the GPT-NeoX one is 2.4 MB). */
#define HM_TOKENIZER_FILE_MAX ((size_t)1 << 31)

enum hm_status hm_tokenizer_load(const char *path, struct hm_tokenizer **out,
                                 struct hm_error *err)
{
    *out = NULL;
    char *buf = NULL;
    size_t n = 0;
    /* a regular file (or '-'); never blocks on a FIFO, never reads a device */
    enum hm_status st = hm_read_file(path, HM_TOKENIZER_FILE_MAX, &buf, &n, err);
    if (st == HM_OK)
        st = hm_tokenizer_load_memory(buf, n, out, err);
    free(buf);
    return st;
}

/* A tokenizer.json starts with '{' after JSON whitespace. A tokenizer.bin
 * starts with max_token_length <= HM_LLAMA2C_MAX_PIECE as int32 LE, so its
 * bytes 2..3 are NUL, which JSON text never holds. */
static int looks_like_json(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && i < 4; i++)
        if (p[i] == 0)
            return 0;
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    return i < n && p[i] == '{';
}

enum hm_status hm_tokenizer_load_memory(const void *data, size_t len, struct hm_tokenizer **out,
                                        struct hm_error *err)
{
    *out = NULL;
    if (looks_like_json(data, len))
        return hm_tokenizer_load_json(data, len, out, err);
    return hm_tok_l2c_load(data, len, 1, out, err);
}

