/* tokenizer_bpe.c — the GPT-2 pre-tokenizer regex by hand, byte-level BPE
 * merging by rank, and the word cache. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "tokenizer_internal.h"

/* ---- character classes ---------------------------------------------------- */

/* \s: Unicode White_Space (the regex crate's \s, Oniguruma's Unicode \s). */
static int is_white_space(int32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static int class_of(int32_t cp)
{
    if (is_white_space(cp))
        return HM_CLS_SPACE;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return HM_CLS_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return HM_CLS_NUMBER;
    default:
        return HM_CLS_OTHER;
    }
}

void hm_tok_init_classes(struct hm_tokenizer *tok)
{
    for (int32_t cp = 0; cp < 65536; cp++)
        tok->cls_bmp[cp] = (uint8_t)class_of(cp);
}

int hm_tok_class(const struct hm_tokenizer *tok, int32_t cp)
{
    return cp < 65536 ? tok->cls_bmp[cp] : class_of(cp);
}

/* Class and length of the (valid UTF-8) character at p. */
static inline int char_at(const struct hm_tokenizer *tok, const uint8_t *p, int *len)
{
    uint8_t c = p[0];
    if (c < 0x80) {
        *len = 1;
        return tok->cls_bmp[c];
    }
    int32_t cp;
    if (c < 0xE0) {
        cp = (c & 0x1F) << 6 | (p[1] & 0x3F);
        *len = 2;
    } else if (c < 0xF0) {
        cp = (c & 0x0F) << 12 | (p[1] & 0x3F) << 6 | (p[2] & 0x3F);
        *len = 3;
    } else {
        cp = (c & 0x07) << 18 | (p[1] & 0x3F) << 12 | (p[2] & 0x3F) << 6 | (p[3] & 0x3F);
        *len = 4;
    }
    return hm_tok_class(tok, cp);
}

/* End of the run of characters of class cls starting at i. */
static size_t run_end(const struct hm_tokenizer *tok, const uint8_t *p, size_t n, size_t i,
                      int cls)
{
    while (i < n) {
        int l;
        if (char_at(tok, p + i, &l) != cls)
            break;
        i += (size_t)l;
    }
    return i;
}

/* ---- BPE --------------------------------------------------------------------- */

#define SMALL_WORD 128

/* ids: [m] on entry the byte ids, on exit the merged ids; returns their count.
 * Lowest rank first, leftmost among equal ranks (= HF's heap order). */
static size_t bpe_small(const struct hm_tokenizer *tok, int32_t *ids, size_t m)
{
    uint32_t rk[SMALL_WORD];
    int32_t nw[SMALL_WORD];
    size_t n = m;
    for (size_t i = 0; i + 1 < n; i++)
        rk[i] = hm_tok_merge_find(tok, ids[i], ids[i + 1], &nw[i]);
    while (n > 1) {
        uint32_t best = UINT32_MAX;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (rk[i] < best) {
                best = rk[i];
                bi = i;
            }
        if (best == UINT32_MAX)
            break;
        ids[bi] = nw[bi];
        size_t tail = n - bi - 2; /* pairs after the merged one */
        memmove(ids + bi + 1, ids + bi + 2, tail * sizeof *ids);
        memmove(rk + bi + 1, rk + bi + 2, (tail > 0 ? tail - 1 : 0) * sizeof *rk);
        memmove(nw + bi + 1, nw + bi + 2, (tail > 0 ? tail - 1 : 0) * sizeof *nw);
        n--;
        if (bi > 0)
            rk[bi - 1] = hm_tok_merge_find(tok, ids[bi - 1], ids[bi], &nw[bi - 1]);
        if (bi + 1 < n)
            rk[bi] = hm_tok_merge_find(tok, ids[bi], ids[bi + 1], &nw[bi]);
    }
    return n;
}

struct merge_ent {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
};

static int ent_less(const struct merge_ent *a, const struct merge_ent *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(struct merge_ent *h, size_t *n, struct merge_ent e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ent_less(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static struct merge_ent heap_pop(struct merge_ent *h, size_t *n)
{
    struct merge_ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && ent_less(&h[c + 1], &h[c]))
            c++;
        if (!ent_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

/* The same merge order with a heap and a linked list (HF Word::merge_all),
 * O(m log m) for long words. work: [4 * m] ints plus heap space [3 * m]
 * merge entries. Returns the count; ids compacted in place. */
static enum hm_status bpe_large(struct hm_tokenizer *tok, int32_t *ids, size_t m, size_t *count,
                                struct hm_error *err)
{
    size_t need = m * 2 * sizeof(int32_t) + 3 * m * sizeof(struct merge_ent);
    if (need > tok->scratch_cap) {
        void *s = realloc(tok->scratch, need);
        if (!s)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for a %zu-byte word", m);
        tok->scratch = s;
        tok->scratch_cap = need;
    }
    int32_t *prev = tok->scratch, *next = prev + m;
    struct merge_ent *heap = (struct merge_ent *)(next + m);
    size_t hn = 0;
    for (size_t i = 0; i < m; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < m; i++) {
        int32_t nid;
        uint32_t r = hm_tok_merge_find(tok, ids[i], ids[i + 1], &nid);
        if (r != UINT32_MAX)
            heap_push(heap, &hn, (struct merge_ent){r, (uint32_t)i, nid});
    }
    while (hn) {
        struct merge_ent top = heap_pop(heap, &hn);
        size_t pos = top.pos;
        if (ids[pos] < 0 || next[pos] < 0)
            continue;
        size_t nx = (size_t)next[pos];
        int32_t nid;
        if (hm_tok_merge_find(tok, ids[pos], ids[nx], &nid) == UINT32_MAX || nid != top.new_id)
            continue; /* stale entry */
        ids[pos] = nid;
        ids[nx] = -1;
        next[pos] = next[nx];
        if (next[nx] >= 0)
            prev[next[nx]] = (int32_t)pos;
        if (prev[pos] >= 0) {
            uint32_t r = hm_tok_merge_find(tok, ids[prev[pos]], ids[pos], &nid);
            if (r != UINT32_MAX && hn < 3 * m)
                heap_push(heap, &hn, (struct merge_ent){r, (uint32_t)prev[pos], nid});
        }
        if (next[pos] >= 0) {
            uint32_t r = hm_tok_merge_find(tok, ids[pos], ids[next[pos]], &nid);
            if (r != UINT32_MAX && hn < 3 * m)
                heap_push(heap, &hn, (struct merge_ent){r, (uint32_t)pos, nid});
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (ids[i] >= 0)
            ids[k++] = ids[i];
    *count = k;
    return HM_OK;
}

/* ---- word cache -------------------------------------------------------------- */

#define CACHE_SLOTS ((size_t)1 << 17)
#define CACHE_MAX_WORD 256
#define CACHE_ARENA ((size_t)8 << 20)

void hm_word_cache_free(struct hm_word_cache *c)
{
    free(c->hash);
    free(c->koff);
    free(c->klen);
    free(c->ioff);
    free(c->icount);
    free(c->arena);
    free(c->idarena);
    memset(c, 0, sizeof *c);
}

static int cache_init(struct hm_word_cache *c)
{
    c->cap = CACHE_SLOTS;
    c->hash = calloc(c->cap, sizeof *c->hash);
    c->koff = malloc(c->cap * sizeof *c->koff);
    c->klen = malloc(c->cap * sizeof *c->klen);
    c->ioff = malloc(c->cap * sizeof *c->ioff);
    c->icount = malloc(c->cap * sizeof *c->icount);
    c->arena_cap = CACHE_ARENA;
    c->arena = malloc(c->arena_cap);
    c->id_cap = CACHE_ARENA / 4;
    c->idarena = malloc(c->id_cap * sizeof *c->idarena);
    if (!c->hash || !c->koff || !c->klen || !c->ioff || !c->icount || !c->arena || !c->idarena) {
        hm_word_cache_free(c);
        return -1;
    }
    return 0;
}

/* Slot of the word, or of the empty slot where it would go. */
static size_t cache_slot(const struct hm_word_cache *c, uint64_t h, const uint8_t *w, size_t m)
{
    size_t mask = c->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        if (c->hash[i] == 0)
            return i;
        if (c->hash[i] == h && c->klen[i] == m && memcmp(c->arena + c->koff[i], w, m) == 0)
            return i;
    }
}

static void cache_put(struct hm_word_cache *c, size_t slot, uint64_t h, const uint8_t *w,
                      size_t m, const int32_t *ids, size_t n)
{
    if (c->used >= c->cap / 2 || c->arena_len + m > c->arena_cap || c->id_len + n > c->id_cap) {
        memset(c->hash, 0, c->cap * sizeof *c->hash); /* full: start over */
        c->used = c->arena_len = c->id_len = 0;
        slot = cache_slot(c, h, w, m);
    }
    c->hash[slot] = h;
    c->koff[slot] = (uint32_t)c->arena_len;
    c->klen[slot] = (uint32_t)m;
    c->ioff[slot] = (uint32_t)c->id_len;
    c->icount[slot] = (uint32_t)n;
    memcpy(c->arena + c->arena_len, w, m);
    memcpy(c->idarena + c->id_len, ids, n * sizeof *ids);
    c->arena_len += m;
    c->id_len += n;
    c->used++;
}

/* BPE-encodes one pre-token w: [m] bytes, appending to out. */
static enum hm_status encode_word(struct hm_tokenizer *tok, const uint8_t *w, size_t m,
                                  struct hm_ids *out, struct hm_error *err)
{
    enum hm_status st = hm_ids_reserve(out, (int64_t)m, err);
    if (st != HM_OK)
        return st;
    int32_t *dst = out->v + out->n;
    if (m == 1) {
        dst[0] = tok->byte_id[w[0]];
        out->n++;
        return HM_OK;
    }
    struct hm_word_cache *c = &tok->cache;
    uint64_t h = 0;
    size_t slot = 0;
    int cacheable = m <= CACHE_MAX_WORD && (c->hash || cache_init(c) == 0);
    if (cacheable) {
        h = XXH3_64bits(w, m) | 1;
        slot = cache_slot(c, h, w, m);
        if (c->hash[slot]) {
            memcpy(dst, c->idarena + c->ioff[slot], c->icount[slot] * sizeof *dst);
            out->n += c->icount[slot];
            return HM_OK;
        }
    }
    for (size_t i = 0; i < m; i++)
        dst[i] = tok->byte_id[w[i]];
    size_t n = 0;
    if (m <= SMALL_WORD) {
        n = bpe_small(tok, dst, m);
    } else if ((st = bpe_large(tok, dst, m, &n, err)) != HM_OK) {
        return st;
    }
    if (cacheable)
        cache_put(c, slot, h, w, m, dst, n);
    out->n += (int64_t)n;
    return HM_OK;
}

/* ---- pre-tokenizer ------------------------------------------------------------ */

/* Length of the GPT-2 regex match at p[i..n) (always >= 1):
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_at(const struct hm_tokenizer *tok, const uint8_t *p, size_t n, size_t i)
{
    if (p[i] == '\'' && i + 1 < n) {
        uint8_t a = p[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd')
            return 2;
        if (i + 2 < n) {
            uint8_t b = p[i + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return 3;
        }
    }
    size_t j = i;
    if (p[j] == ' ' && j + 1 < n)
        j++;
    int l;
    int cls = char_at(tok, p + j, &l);
    if (cls != HM_CLS_SPACE && (j == i || p[i] == ' '))
        return run_end(tok, p, n, j + (size_t)l, cls) - i;
    /* here p[i] is white space (possibly ' ' followed by white space) */
    int l0;
    char_at(tok, p + i, &l0);
    size_t e = run_end(tok, p, n, i, HM_CLS_SPACE);
    if (e == n)
        return e - i;
    /* followed by \S: \s+(?!\S) backs off one character if it can */
    if (e - i > (size_t)l0) {
        size_t k = e - 1;
        while ((p[k] & 0xC0) == 0x80)
            k--;
        return k - i;
    }
    return e - i; /* a single \s: matched by \s+ */
}

enum hm_status hm_tok_encode_words(struct hm_tokenizer *tok, const uint8_t *text, size_t len,
                                   struct hm_ids *out, struct hm_error *err)
{
    enum hm_status st = HM_OK;
    uint8_t *tmp = NULL;
    if (tok->add_prefix_space && len && text[0] != ' ') {
        tmp = malloc(len + 1);
        if (!tmp)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        tmp[0] = ' ';
        memcpy(tmp + 1, text, len);
        text = tmp;
        len++;
    }
    if (!tok->use_regex) {
        st = encode_word(tok, text, len, out, err);
    } else {
        for (size_t i = 0; i < len && st == HM_OK;) {
            size_t m = match_at(tok, text, len, i);
            st = encode_word(tok, text + i, m, out, err);
            i += m;
        }
    }
    free(tmp);
    return st;
}
