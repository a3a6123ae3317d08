/* tokenizer_llama2c.c — the llama2.c tokenizer.bin (contract §1b; the layout and
 * the semantics are at the top of tokenizer.h): loading with every length
 * checked, encoding exactly like llama2.c run.c encode(), decoding like
 * run.c decode().
 *
 * run.c rescans every adjacent pair after each merge, O(n^2) per text. Here
 * the same choice (the highest score, the leftmost pair on ties, one merge at
 * a time) comes from a binary heap of candidate pairs over a linked list of
 * tokens; entries made stale by a merge are dropped when popped. List order
 * is the order of the node indices, so "leftmost" is "smallest left index".
 * O(n log n), the same tokens: tests/test_tokenizer_llama2c.c compares it
 * with a naive transcription of the run.c loop. A byte-fallback token that no
 * longer piece starts or ends with (in llama vocabularies: the newline
 * <0x0A>) can never merge, so the merges on either side of it are
 * independent; each such segment gets its own small heap, which changes
 * nothing in the result and keeps the heap in cache.
 *
 * Where run.c has undefined or C-string behaviour we choose, and say so:
 * pieces are compared by their bytes and lengths (run.c uses strcmp, so a
 * NUL inside a piece is refused at load); duplicate pieces resolve to the
 * lowest id (run.c's bsearch picks any); text is encoded to its full length
 * (run.c stops at a NUL); only the exact six-byte form "<0xNN>" decodes to a
 * raw byte (run.c's sscanf also takes e.g. "<0x4>").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tokenizer.h"
#include "tokenizer_internal.h"

enum { L2C_BOS = 1, L2C_EOS = 2, L2C_BYTE0 = 3, L2C_MIN_VOCAB = 259 };

/* run.c starts its search at best_score = -1e10 (a float) and takes a merge
 * only when its score is strictly greater. */
#define L2C_SCORE_FLOOR (-1e10f)

#define L2C_PAIR_CACHE_BITS 12

struct l2c_node {       /* one token of the text being merged */
    int32_t id;         /* -1 once merged into its left neighbour */
    int32_t prev, next; /* list links (node indices), -1 at the ends */
    uint32_t ver;       /* bumped whenever id changes */
};

struct l2c_cand {       /* a mergeable adjacent pair (left, right) */
    float score;        /* score of the merged piece id */
    int32_t left, right, id;
    uint32_t ver_left, ver_right;
};

struct hm_l2c {
    int32_t max_len;
    int64_t n;          /* vocabulary size */
    float *score;       /* [n] */
    uint8_t *piece;     /* piece i is piece + off[i] .. piece + off[i + 1] */
    uint64_t *off;      /* [n + 1] */
    uint8_t *lead_space; /* [n] the piece starts with ' ' (stripped after BOS) */
    /* piece bytes -> lowest id holding them: open addressing, [mask + 1] */
    int32_t *slot;      /* -1 = empty */
    uint64_t *slot_hash;
    uint64_t mask;
    int32_t single[256]; /* id of the one-byte piece of each byte, or -1 */
    uint8_t barrier[256]; /* byte fallback id 3 + b can never merge */
    int32_t space;       /* id of " " (the dummy prefix) */
    /* encode scratch, kept between calls */
    struct l2c_node *node; /* [node_cap] */
    size_t node_cap;
    struct l2c_cand *heap; /* [heap_cap], heap_n used */
    size_t heap_cap, heap_n;
    uint8_t *cat;          /* [2 * max_len] two pieces concatenated */
    /* direct-mapped cache (a << 32 | b) -> merged id or -1; UINT64_MAX = empty */
    uint64_t pc_key[1 << L2C_PAIR_CACHE_BITS];
    int32_t pc_val[1 << L2C_PAIR_CACHE_BITS];
};

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float rd_f32(const uint8_t *p)
{
    uint32_t u = rd_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static size_t piece_len(const struct hm_l2c *l, int32_t id)
{
    return (size_t)(l->off[id + 1] - l->off[id]);
}

/* The lowest id whose piece is s: [n], or -1. */
static int32_t l2c_find(const struct hm_l2c *l, const uint8_t *s, size_t n)
{
    uint64_t h = XXH3_64bits(s, n);
    for (uint64_t i = h & l->mask;; i = (i + 1) & l->mask) {
        int32_t id = l->slot[i];
        if (id < 0)
            return -1;
        if (l->slot_hash[i] == h && piece_len(l, id) == n &&
            memcmp(l->piece + l->off[id], s, n) == 0)
            return id;
    }
}

/* Inserts id unless a lower id has the same piece. */
static void l2c_insert(struct hm_l2c *l, int32_t id)
{
    const uint8_t *s = l->piece + l->off[id];
    size_t n = piece_len(l, id);
    uint64_t h = XXH3_64bits(s, n);
    for (uint64_t i = h & l->mask;; i = (i + 1) & l->mask) {
        int32_t o = l->slot[i];
        if (o < 0) {
            l->slot[i] = id;
            l->slot_hash[i] = h;
            return;
        }
        if (l->slot_hash[i] == h && piece_len(l, o) == n && memcmp(l->piece + l->off[o], s, n) == 0)
            return;
    }
}

/* The id of piece(a) + piece(b) when run.c would merge into it (the piece
 * exists with a score above the floor), else -1. */
static int32_t l2c_merge_id(struct hm_l2c *l, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t c = (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - L2C_PAIR_CACHE_BITS));
    if (l->pc_key[c] == key)
        return l->pc_val[c];
    size_t la = piece_len(l, a), lb = piece_len(l, b);
    memcpy(l->cat, l->piece + l->off[a], la);
    memcpy(l->cat + la, l->piece + l->off[b], lb);
    int32_t id = l2c_find(l, l->cat, la + lb);
    if (id >= 0 && !(l->score[id] > L2C_SCORE_FLOOR))
        id = -1;
    l->pc_key[c] = key;
    l->pc_val[c] = id;
    return id;
}

void hm_tok_l2c_free(struct hm_l2c *l)
{
    if (!l)
        return;
    free(l->score);
    free(l->piece);
    free(l->off);
    free(l->lead_space);
    free(l->slot);
    free(l->slot_hash);
    free(l->node);
    free(l->heap);
    free(l->cat);
    free(l);
}

/* ---- loading ----------------------------------------------------------------- */

/* The byte b of a piece spelled exactly "<0xNN>" (hex, either case), or -1. */
static int byte_piece_value(const uint8_t *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        uint8_t c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Writes s: [n] (at most 24 bytes of it) into buf: [128] for a message,
 * printable ASCII as is and every other byte as \xNN. */
static const char *quote_piece(const uint8_t *s, size_t n, char buf[128])
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < 24; i++) {
        if (s[i] >= 0x20 && s[i] < 0x7F && s[i] != '\\')
            buf[k++] = (char)s[i];
        else
            k += (size_t)snprintf(buf + k, 128 - k, "\\x%02X", s[i]);
    }
    if (n > 24)
        k += (size_t)snprintf(buf + k, 128 - k, "...");
    buf[k] = 0;
    return buf;
}

/* Checks every record of data: [len]; sets *count and *piece_bytes. */
static enum hm_status l2c_scan(const uint8_t *p, size_t len, int32_t max_len, int64_t *count,
                               size_t *piece_bytes, struct hm_error *err)
{
    size_t pos = 4, bytes = 0;
    int64_t n = 0;
    while (pos < len) {
        size_t left = len - pos;
        if (left < 8)
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)pos,
                                   "truncated record for token %lld: %zu bytes left, a record "
                                   "needs 8 + its length (a cut file or trailing bytes)",
                                   (long long)n, left);
        float score = rd_f32(p + pos);
        int32_t plen = (int32_t)rd_u32(p + pos + 4);
        if (isnan(score))
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)pos,
                                   "token %lld: the score is NaN", (long long)n);
        if (plen < 0)
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)pos + 4,
                                   "token %lld: negative length %d", (long long)n, plen);
        if (plen == 0)
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)pos + 4,
                                   "token %lld: empty piece", (long long)n);
        if (plen > max_len)
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)pos + 4,
                                   "token %lld: length %d exceeds max_token_length %d",
                                   (long long)n, plen, max_len);
        if ((size_t)plen > left - 8)
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)pos + 8,
                                   "truncated: token %lld has a %d-byte piece but only %zu bytes "
                                   "follow", (long long)n, plen, left - 8);
        const uint8_t *nul = memchr(p + pos + 8, 0, (size_t)plen);
        if (nul)
            return hm_error_set_at(err, HM_ERR_FORMAT, (int64_t)(nul - p),
                                   "token %lld: NUL byte inside the piece", (long long)n);
        pos += 8 + (size_t)plen;
        bytes += (size_t)plen;
        if (++n > INT32_MAX)
            return hm_error_set(err, HM_ERR_UNSUPPORTED, "more than %d tokens", INT32_MAX);
    }
    *count = n;
    *piece_bytes = bytes;
    return HM_OK;
}

/* Fills the pieces, scores, lookup and decode tables from the checked
 * records of p. */
static enum hm_status l2c_build(struct hm_tokenizer *tok, const uint8_t *p, size_t bytes,
                                struct hm_error *err)
{
    struct hm_l2c *l = tok->l2c;
    size_t n = (size_t)l->n, cap = 1;
    while (cap < 2 * n)
        cap <<= 1;
    l->score = malloc(n * sizeof *l->score);
    l->piece = malloc(bytes + 1);
    l->off = malloc((n + 1) * sizeof *l->off);
    l->lead_space = calloc(n, 1);
    l->slot = malloc(cap * sizeof *l->slot);
    l->slot_hash = malloc(cap * sizeof *l->slot_hash);
    l->cat = malloc(2 * (size_t)l->max_len);
    tok->dec = malloc(bytes + 1);
    tok->doff = malloc((n + 1) * sizeof *tok->doff);
    tok->dvalid = malloc(n);
    if (!l->score || !l->piece || !l->off || !l->lead_space || !l->slot || !l->slot_hash ||
        !l->cat || !tok->dec || !tok->doff || !tok->dvalid)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %zu tokens", n);
    memset(l->slot, 0xFF, cap * sizeof *l->slot);
    memset(l->pc_key, 0xFF, sizeof l->pc_key);
    memset(tok->dvalid, 1, n);
    l->mask = cap - 1;
    size_t pos = 4, k = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        size_t plen = rd_u32(p + pos + 4);
        const uint8_t *s = p + pos + 8;
        l->score[i] = rd_f32(p + pos);
        l->off[i] = k;
        memcpy(l->piece + k, s, plen);
        k += plen;
        pos += 8 + plen;
        /* decoding: BOS and EOS give nothing, "<0xNN>" its byte */
        tok->doff[i] = d;
        int b = byte_piece_value(s, plen);
        if (i == L2C_BOS || i == L2C_EOS)
            continue;
        if (b >= 0) {
            tok->dec[d++] = (uint8_t)b;
        } else {
            memcpy(tok->dec + d, s, plen);
            d += plen;
            l->lead_space[i] = s[0] == ' ';
        }
    }
    l->off[n] = k;
    tok->doff[n] = d;
    for (int b = 0; b < 256; b++) {
        const uint8_t *s = l->piece + l->off[L2C_BYTE0 + b];
        size_t plen = piece_len(l, L2C_BYTE0 + b);
        char q[128];
        if (byte_piece_value(s, plen) != b)
            return hm_error_set(err, HM_ERR_UNSUPPORTED,
                                "token %d is '%s', not the byte piece <0x%02X> (byte fallback "
                                "needs ids 3..258 to be <0x00>..<0xFF>)", L2C_BYTE0 + b,
                                quote_piece(s, plen, q), b);
    }
    /* a byte piece can merge only into a longer piece that starts or ends
     * with it */
    memset(l->barrier, 1, sizeof l->barrier);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *s = l->piece + l->off[i];
        size_t plen = piece_len(l, (int32_t)i);
        int b;
        if (plen > 6 && (b = byte_piece_value(s, 6)) >= 0)
            l->barrier[b] = 0;
        if (plen > 6 && (b = byte_piece_value(s + plen - 6, 6)) >= 0)
            l->barrier[b] = 0;
    }
    for (size_t i = 0; i < n; i++)
        l2c_insert(l, (int32_t)i);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        l->single[b] = l2c_find(l, &c, 1);
    }
    l->space = l->single[' '];
    if (l->space < 0)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "the vocabulary has no \" \" piece (the dummy prefix run.c puts "
                            "before every text)");
    return HM_OK;
}

enum hm_status hm_tok_l2c_load(const uint8_t *p, size_t len, int sniffed,
                               struct hm_tokenizer **out, struct hm_error *err)
{
    *out = NULL;
    const char *what = sniffed ? "not a tokenizer.json (it does not start with '{') nor a "
                                 "llama2.c tokenizer.bin: " : "";
    if (len < 4)
        return hm_error_set_at(err, HM_ERR_FORMAT, 0,
                               "%struncated: %zu bytes, no 4-byte max_token_length", what, len);
    int32_t max_len = (int32_t)rd_u32(p);
    if (max_len < 1 || max_len > HM_LLAMA2C_MAX_PIECE)
        return hm_error_set_at(err, HM_ERR_FORMAT, 0, "%smax_token_length %d is not in [1, %d]",
                               what, max_len, HM_LLAMA2C_MAX_PIECE);
    int64_t n = 0;
    size_t bytes = 0;
    enum hm_status st = l2c_scan(p, len, max_len, &n, &bytes, err);
    if (st != HM_OK)
        return st;
    if (n < L2C_MIN_VOCAB)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "only %lld tokens: a llama2.c vocabulary holds <unk>, BOS, EOS and "
                            "the 256 byte pieces (at least %d)", (long long)n, L2C_MIN_VOCAB);
    struct hm_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok || !(tok->l2c = calloc(1, sizeof *tok->l2c))) {
        hm_tokenizer_free(tok);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    tok->kind = HM_TOKENIZER_KIND_LLAMA2C;
    tok->vocab_size = n;
    tok->eot = -1;
    tok->l2c->n = n;
    tok->l2c->max_len = max_len;
    st = l2c_build(tok, p, bytes, err);
    if (st != HM_OK) {
        hm_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return HM_OK;
}

enum hm_status hm_tokenizer_load_llama2c(const void *data, size_t len,
                                         struct hm_tokenizer **out, struct hm_error *err)
{
    return hm_tok_l2c_load(data, len, 0, out, err);
}

/* ---- encode ------------------------------------------------------------------ */

/* 1 if candidate a is merged before b: higher score, then further left. */
static int cand_before(const struct l2c_cand *a, const struct l2c_cand *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static enum hm_status heap_push(struct hm_l2c *l, const struct l2c_cand *c, struct hm_error *err)
{
    if (l->heap_n == l->heap_cap) {
        size_t cap = l->heap_cap ? 2 * l->heap_cap : 1024;
        size_t bytes;
        struct l2c_cand *h = hm_mul_size(cap, sizeof *h, &bytes) ? NULL : realloc(l->heap, bytes);
        if (!h)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %zu merge candidates", cap);
        l->heap = h;
        l->heap_cap = cap;
    }
    size_t i = l->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_before(c, &l->heap[parent]))
            break;
        l->heap[i] = l->heap[parent];
        i = parent;
    }
    l->heap[i] = *c;
    return HM_OK;
}

static struct l2c_cand heap_pop(struct hm_l2c *l)
{
    struct l2c_cand top = l->heap[0], last = l->heap[--l->heap_n];
    size_t i = 0, n = l->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cand_before(&l->heap[c + 1], &l->heap[c]))
            c++;
        if (!cand_before(&l->heap[c], &last))
            break;
        l->heap[i] = l->heap[c];
        i = (size_t)c;
    }
    if (n)
        l->heap[i] = last;
    return top;
}

/* Pushes the pair (left, its next) if it merges. */
static enum hm_status push_pair(struct hm_l2c *l, int32_t left, struct hm_error *err)
{
    if (left < 0)
        return HM_OK;
    int32_t right = l->node[left].next;
    if (right < 0)
        return HM_OK;
    int32_t id = l2c_merge_id(l, l->node[left].id, l->node[right].id);
    if (id < 0)
        return HM_OK;
    struct l2c_cand c = {l->score[id], left, right, id, l->node[left].ver, l->node[right].ver};
    return heap_push(l, &c, err);
}

static void push_node(struct hm_l2c *l, int32_t *n, int32_t id)
{
    struct l2c_node *x = &l->node[*n];
    x->id = id;
    x->prev = *n - 1;
    x->next = *n + 1;
    x->ver = 0;
    (*n)++;
}

/* The run.c merges within nodes [from, to): the tokens just outside never
 * merge, and pairs with them are simply not looked at. */
static enum hm_status merge_segment(struct hm_l2c *l, int32_t from, int32_t to,
                                    struct hm_error *err)
{
    enum hm_status st = HM_OK;
    l->heap_n = 0;
    for (int32_t i = from; i + 1 < to && st == HM_OK; i++)
        st = push_pair(l, i, err);
    while (st == HM_OK && l->heap_n) {
        struct l2c_cand c = heap_pop(l);
        struct l2c_node *a = &l->node[c.left], *b = &l->node[c.right];
        if (a->id < 0 || b->id < 0 || a->next != c.right || a->ver != c.ver_left ||
            b->ver != c.ver_right)
            continue; /* stale: a neighbour merged since this pair was seen */
        a->id = c.id;
        a->ver++;
        b->id = -1;
        b->ver++;
        a->next = b->next;
        if (b->next >= 0)
            l->node[b->next].prev = c.left;
        if (a->prev >= from)
            st = push_pair(l, a->prev, err);
        if (st == HM_OK && a->next >= 0 && a->next < to)
            st = push_pair(l, c.left, err);
    }
    return st;
}

enum hm_status hm_tok_l2c_encode(struct hm_tokenizer *tok, const uint8_t *text, size_t len,
                                 int bos, struct hm_ids *out, struct hm_error *err)
{
    struct hm_l2c *l = tok->l2c;
    if (len > (size_t)INT32_MAX - 2)
        return hm_error_set(err, HM_ERR_NOMEM, "a text of %zu bytes is too large to encode at once",
                            len);
    size_t need = len + 2; /* BOS, the dummy prefix, at most one token per byte */
    if (need > l->node_cap) {
        size_t bytes;
        struct l2c_node *nd = hm_mul_size(need, sizeof *nd, &bytes) ? NULL
                                                                    : realloc(l->node, bytes);
        if (!nd)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory encoding %zu bytes", len);
        l->node = nd;
        l->node_cap = need;
    }
    int32_t n = 0;
    if (bos)
        push_node(l, &n, L2C_BOS);
    if (len)
        push_node(l, &n, l->space);
    for (size_t i = 0; i < len;) {
        size_t k = text[i] < 0x80 ? 1 : (size_t)hm_tok_utf8_valid_len(text + i, len - i);
        if (k == 0)
            k = 1; /* the caller checked UTF-8; never taken */
        int32_t id = k == 1 ? l->single[text[i]] : l2c_find(l, text + i, k);
        if (id >= 0)
            push_node(l, &n, id);
        else
            for (size_t j = 0; j < k; j++)
                push_node(l, &n, L2C_BYTE0 + text[i + j]);
        i += k;
    }
    if (n == 0)
        return HM_OK;
    l->node[n - 1].next = -1;
    enum hm_status st = HM_OK;
    for (int32_t seg = 0; seg < n && st == HM_OK;) {
        /* the segment [seg, end): up to and including the next barrier */
        int32_t end = seg;
        while (end < n) {
            int32_t id = l->node[end++].id;
            if (id >= L2C_BYTE0 && id < L2C_BYTE0 + 256 && l->barrier[id - L2C_BYTE0])
                break;
        }
        st = merge_segment(l, seg, end, err);
        seg = end;
    }
    if (st != HM_OK)
        return st;
    int64_t count = 0;
    for (int32_t i = 0; i >= 0; i = l->node[i].next)
        count++;
    if ((st = hm_ids_reserve(out, count, err)) != HM_OK)
        return st;
    for (int32_t i = 0; i >= 0; i = l->node[i].next)
        out->v[out->n++] = l->node[i].id;
    return HM_OK;
}

/* ---- decode ------------------------------------------------------------------ */

enum hm_status hm_tok_l2c_decode(const struct hm_tokenizer *tok, const int32_t *ids, int64_t n,
                                 char **out, size_t *len, struct hm_error *err)
{
    const struct hm_l2c *l = tok->l2c;
    *out = NULL;
    *len = 0;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += tok->doff[ids[i] + 1] - tok->doff[ids[i]];
    uint8_t *res = malloc(total + 1);
    if (!res)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory decoding %lld tokens", (long long)n);
    size_t k = 0;
    int32_t prev = -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        const uint8_t *s = tok->dec + tok->doff[id];
        size_t m = tok->doff[id + 1] - tok->doff[id];
        if (prev == L2C_BOS && l->lead_space[id]) { /* sentencepiece: no space after BOS */
            s++;
            m--;
        }
        memcpy(res + k, s, m);
        k += m;
        prev = id;
    }
    res[k] = 0;
    *out = (char *)res;
    *len = k;
    return HM_OK;
}
