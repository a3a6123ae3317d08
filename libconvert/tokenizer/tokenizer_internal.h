/* tokenizer_internal.h — private layout shared by tokenizer.c (the public
 * API, added tokens), tokenizer_load.c (tokenizer.json), tokenizer_bpe.c
 * (pre-tokenizer, BPE, cache) and tokenizer_llama2c.c (tokenizer.bin).
 * Not installed; only libconvert/tokenizer/tokenizer*.c include it. It does not
 * include tokenizer.h (the API) so that tokenizer.c, which includes both, is
 * no ring: the types both need are in tokenizer_types.h. */
#ifndef HM_TOKENIZER_INTERNAL_H
#define HM_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "hm_error.h"
#include "tokenizer_types.h"

/* An added token (tokenizer.json "added_tokens"). */
struct hm_added_tok {
    uint8_t *s; /* content bytes (owned), [len]; for normalized tokens: NFC form */
    size_t len;
    int32_t id;
};

/* A set of added tokens matched leftmost-longest. t: [n], longest first. */
struct hm_added_set {
    struct hm_added_tok *t;
    int64_t n;
    uint8_t has_first[256];    /* some token starts with this byte */
    uint64_t pair_bits[1024];  /* 65536 bits: (b0 << 8 | b1) starts a token of len >= 2 */
    uint8_t single[256];       /* a 1-byte token equals this byte */
};

/* The word cache: raw word bytes -> ids, open addressing, cleared when full. */
struct hm_word_cache {
    uint64_t *hash;   /* [cap], 0 = empty */
    uint32_t *koff;   /* [cap] key offset in arena */
    uint32_t *klen;   /* [cap] */
    uint32_t *ioff;   /* [cap] ids offset in idarena */
    uint32_t *icount; /* [cap] */
    uint8_t *arena;   /* key bytes, [arena_len] of [arena_cap] */
    size_t arena_len, arena_cap;
    int32_t *idarena; /* [id_len] of [id_cap] */
    size_t id_len, id_cap;
    size_t cap, used;
};

struct hm_l2c; /* llama2.c vocabulary and encode scratch (tokenizer_llama2c.c) */

struct hm_tokenizer {
    enum hm_tokenizer_kind kind;
    int is_bytes;         /* kind == HM_TOKENIZER_KIND_BYTES */
    struct hm_l2c *l2c;   /* owned; kind == HM_TOKENIZER_KIND_LLAMA2C only */
    int nfc;              /* normalizer NFC */
    int add_prefix_space; /* ByteLevel pre-tokenizer */
    int use_regex;
    int64_t vocab_size;
    size_t src_len;          /* bytes of the tokenizer.json (bounds the ids it may define) */
    int32_t eot;
    int32_t byte_id[256]; /* id of the one-byte token of each byte */
    /* merges: key (a << 32 | b) -> rank, new id; open addressing, [mmask + 1] */
    uint64_t *mkey;       /* UINT64_MAX = empty */
    uint32_t *mrank;
    int32_t *mnew;
    uint64_t mmask;
    /* decoding (every kind): token id -> bytes dec + doff[id] .. doff[id + 1];
     * dvalid[id] */
    uint8_t *dec;
    uint64_t *doff;  /* [vocab_size + 1] */
    uint8_t *dvalid; /* [vocab_size] */
    struct hm_added_set raw;  /* normalized = false: matched on raw text */
    struct hm_added_set norm; /* normalized = true: matched on NFC text */
    uint8_t cls_bmp[65536];   /* character class of each BMP code point */
    struct hm_word_cache cache;
    /* scratch for BPE of long words */
    int32_t *scratch;
    size_t scratch_cap;
};

enum { HM_CLS_OTHER = 0, HM_CLS_LETTER = 1, HM_CLS_NUMBER = 2, HM_CLS_SPACE = 3 };

/* Class of code point cp for the GPT-2 regex. */
int hm_tok_class(const struct hm_tokenizer *tok, int32_t cp);
void hm_tok_init_classes(struct hm_tokenizer *tok);

/* Pre-tokenizes text: [len] (valid UTF-8, normalized, no added tokens) and
 * BPE-encodes every word, appending to out. */
enum hm_status hm_tok_encode_words(struct hm_tokenizer *tok, const uint8_t *text, size_t len,
                                   struct hm_ids *out, struct hm_error *err);

/* Looks up the merge (a, b): returns rank or UINT32_MAX, *new_id set. */
static inline uint32_t hm_tok_merge_find(const struct hm_tokenizer *tok, int32_t a, int32_t b,
                                         int32_t *new_id)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = (key * 0x9E3779B97F4A7C15ull) >> 17;
    for (uint64_t i = h & tok->mmask;; i = (i + 1) & tok->mmask) {
        uint64_t k = tok->mkey[i];
        if (k == key) {
            *new_id = tok->mnew[i];
            return tok->mrank[i];
        }
        if (k == UINT64_MAX)
            return UINT32_MAX;
    }
}

void hm_word_cache_free(struct hm_word_cache *c);

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0 if invalid. */
int hm_tok_utf8_valid_len(const uint8_t *p, size_t n);

/* Sorts a set longest first and fills its lookup bitmaps. */
void hm_tok_added_finish(struct hm_added_set *s);

/* ---- llama2.c (tokenizer_llama2c.c) ---- */

/* Reads a tokenizer.bin, data: [len]. sniffed = 1 when the kind was guessed
 * from the content (header errors then also say it is no tokenizer.json). */
enum hm_status hm_tok_l2c_load(const uint8_t *data, size_t len, int sniffed,
                               struct hm_tokenizer **out, struct hm_error *err);

/* run.c encode of text: [len] (valid UTF-8, checked by the caller); appends
 * to out. bos: prepend BOS (id 1). */
enum hm_status hm_tok_l2c_encode(struct hm_tokenizer *tok, const uint8_t *text, size_t len,
                                 int bos, struct hm_ids *out, struct hm_error *err);

/* run.c decode of ids: [n] (all already checked < vocab_size). *out: owned,
 * free(); NUL-terminated, *len bytes. */
enum hm_status hm_tok_l2c_decode(const struct hm_tokenizer *tok, const int32_t *ids, int64_t n,
                                 char **out, size_t *len, struct hm_error *err);

void hm_tok_l2c_free(struct hm_l2c *l); /* accepts NULL */

#endif
