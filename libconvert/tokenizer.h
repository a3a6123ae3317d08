/* tokenizer.h — HuggingFace-exact BPE tokenizer (GPT-NeoX / Pythia) and a
 * byte-level vocabulary (SPEC §5 "Tokenizer").
 *
 * hm_tokenizer_load() reads a HuggingFace tokenizer.json: model BPE (vocab
 * and merges, "a b" or ["a","b"] form), normalizer NFC / null / Sequence of
 * NFC, pre_tokenizer ByteLevel (or a Sequence of one ByteLevel), decoder
 * ByteLevel, added_tokens. Anything else is rejected with HM_ERR_UNSUPPORTED
 * naming the field. Encoding follows HuggingFace `tokenizers` exactly
 * (encode(text, addSpecialTokens = false)):
 *   1. added tokens with normalized = false (e.g. <|endoftext|>) are split
 *      out of the raw text, leftmost-longest;
 *   2. each remaining piece is NFC-normalized, then added tokens with
 *      normalized = true (the NeoX runs of 2..24 spaces) are split out of it;
 *   3. the rest is pre-tokenized with the GPT-2 regex
 *      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      and each word is BPE-merged by merge rank over its bytes.
 *
 * hm_tokenizer_bytes() is the byte-level vocabulary: ids 0..255 are the
 * bytes, 256 is end-of-text, vocabulary 257. Encoding accepts any bytes;
 * decoding is exact (id 256 decodes to the text "<|endoftext|>").
 *
 * Threads: load/free are independent; encode uses a per-tokenizer word cache,
 * so one hm_tokenizer must not be used by two threads at once.
 */
#ifndef HM_TOKENIZER_H
#define HM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "hm_error.h"

struct hm_tokenizer;

/* A growable array of token ids: v: [n] valid of [cap] allocated.
 * Zero-initialize ({0}); the caller owns v: free with hm_ids_release(). */
struct hm_ids {
    int32_t *v;
    int64_t n, cap;
};

void hm_ids_release(struct hm_ids *ids); /* frees v and zeroes the struct; NULL ok */
/* Makes room for extra more ids (HM_ERR_NOMEM on failure). */
enum hm_status hm_ids_reserve(struct hm_ids *ids, int64_t extra, struct hm_error *err);
/* Appends src: [n]. */
enum hm_status hm_ids_append(struct hm_ids *ids, const int32_t *src, int64_t n,
                             struct hm_error *err);

/* Loads a tokenizer.json. out: owned, free with hm_tokenizer_free(). */
enum hm_status hm_tokenizer_load(const char *path, struct hm_tokenizer **out,
                                 struct hm_error *err);

/* Same, from JSON text json: [len] bytes (tests and in-memory bundles). */
enum hm_status hm_tokenizer_load_json(const char *json, size_t len, struct hm_tokenizer **out,
                                      struct hm_error *err);

/* The byte-level vocabulary. out: owned, free with hm_tokenizer_free(). */
enum hm_status hm_tokenizer_bytes(struct hm_tokenizer **out, struct hm_error *err);

void hm_tokenizer_free(struct hm_tokenizer *tok); /* accepts NULL */

/* Encodes text: [len] bytes and appends the ids to out (nothing is appended
 * on failure). Invalid UTF-8 (BPE tokenizers only) gives HM_ERR_FORMAT with
 * err->offset = the byte offset of the first bad byte. */
enum hm_status hm_tokenizer_encode(struct hm_tokenizer *tok, const char *text, size_t len,
                                   struct hm_ids *out, struct hm_error *err);

/* Decodes ids: [n] into *out (owned: free with free(); NUL-terminated, *len
 * bytes without the NUL). HuggingFace semantics: the tokens' bytes are
 * concatenated and invalid UTF-8 is replaced by U+FFFD (BPE); bytes mode is
 * exact. An id outside the vocabulary gives HM_ERR_INVALID. */
enum hm_status hm_tokenizer_decode(const struct hm_tokenizer *tok, const int32_t *ids,
                                   int64_t n, char **out, size_t *len, struct hm_error *err);

/* Max id + 1 over the vocabulary and the added tokens (257 for bytes). */
int64_t hm_tokenizer_vocab_size(const struct hm_tokenizer *tok);

/* The id of "<|endoftext|>" (256 for bytes), or -1 if the vocabulary has none. */
int32_t hm_tokenizer_eot_id(const struct hm_tokenizer *tok);

/* 1 for the byte-level vocabulary, 0 for a tokenizer.json. */
int hm_tokenizer_is_bytes(const struct hm_tokenizer *tok);

#endif
