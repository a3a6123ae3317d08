/* tokenizer.h — HuggingFace-exact BPE tokenizer (GPT-NeoX / Pythia), the
 * llama2.c tokenizer and a byte-level vocabulary (contract §5 "Tokenizer", §1b).
 * All three kinds sit behind one opaque struct hm_tokenizer and one API;
 * callers ask hm_tokenizer_kind() only where the kinds frame documents
 * differently (end-of-text after a document, or BOS before it).
 *
 * hm_tokenizer_load() tells the file kinds apart by content, not by name: a
 * tokenizer.json starts (after JSON whitespace) with '{' and has no NUL in
 * its first 4 bytes; anything else is read as a llama2.c tokenizer.bin.
 *
 * A HuggingFace tokenizer.json: model BPE (vocab
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
 * A llama2.c tokenizer.bin (karpathy/llama2.c tokenizer.py export):
 *
 *   int32 max_token_length                      (little-endian)
 *   then, for each token id 0, 1, ... until the end of the file:
 *     float32 score, int32 length, length bytes (the piece, no NUL)
 *
 * The vocabulary size is the number of records. Loading checks every byte:
 * 1 <= max_token_length <= HM_LLAMA2C_MAX_PIECE, 1 <= length <=
 * max_token_length, no truncated record or trailing bytes, no NaN score,
 * no NUL inside a piece, at least 259 tokens with ids 3..258 the byte pieces
 * <0x00>..<0xFF>, and a " " piece (the dummy prefix). Id 1 is BOS, 2 EOS.
 * Encoding is llama2.c run.c encode() token for token: optional BOS; when the
 * text is not empty the " " piece; each UTF-8 character as a piece, else its
 * bytes as ids byte + 3; then, one merge at a time, the adjacent pair whose
 * concatenated piece exists with the highest score (> -1e10, leftmost on
 * ties) is merged. No EOS is appended. Decoding concatenates piece bytes,
 * "<0xNN>" pieces give byte NN, BOS and EOS give nothing, and the piece right
 * after BOS loses its leading space (run.c decode). The output is raw bytes.
 *
 * hm_tokenizer_bytes() is the byte-level vocabulary: ids 0..255 are the
 * bytes, 256 is end-of-text, vocabulary 257. Encoding accepts any bytes;
 * decoding is exact (id 256 decodes to the text "<|endoftext|>").
 *
 * Threads: load/free are independent; encode uses a per-tokenizer word cache
 * (llama2.c: per-tokenizer scratch), so one hm_tokenizer must not be used by
 * two threads at once.
 */
#ifndef HM_TOKENIZER_H
#define HM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "hm_error.h"
#include "tokenizer_types.h"

struct hm_tokenizer;

/* Longest piece (and max_token_length) a tokenizer.bin may declare. */
#define HM_LLAMA2C_MAX_PIECE 65536

/* Loads a tokenizer.json or a llama2.c tokenizer.bin (told apart by
 * content). out: owned, free with hm_tokenizer_free(). Messages do not hold
 * the path (the caller prefixes it); err->offset is the byte offset of a bad
 * tokenizer.bin record. */
enum hm_status hm_tokenizer_load(const char *path, struct hm_tokenizer **out,
                                 struct hm_error *err);

/* Same, from a file's bytes data: [len] (borrowed; copied as needed). */
enum hm_status hm_tokenizer_load_memory(const void *data, size_t len, struct hm_tokenizer **out,
                                        struct hm_error *err);

/* A llama2.c tokenizer.bin held in memory, data: [len] (borrowed). out:
 * owned, free with hm_tokenizer_free(). */
enum hm_status hm_tokenizer_load_llama2c(const void *data, size_t len,
                                         struct hm_tokenizer **out, struct hm_error *err);

/* Same, from JSON text json: [len] bytes (tests and in-memory bundles). */
enum hm_status hm_tokenizer_load_json(const char *json, size_t len, struct hm_tokenizer **out,
                                      struct hm_error *err);

/* The byte-level vocabulary. out: owned, free with hm_tokenizer_free(). */
enum hm_status hm_tokenizer_bytes(struct hm_tokenizer **out, struct hm_error *err);

void hm_tokenizer_free(struct hm_tokenizer *tok); /* accepts NULL */

/* Encodes text: [len] bytes and appends the ids to out (nothing is appended
 * on failure). Invalid UTF-8 (every kind but bytes) gives HM_ERR_FORMAT with
 * err->offset = the byte offset of the first bad byte. */
enum hm_status hm_tokenizer_encode(struct hm_tokenizer *tok, const char *text, size_t len,
                                   struct hm_ids *out, struct hm_error *err);

/* Flags of hm_tokenizer_encode_ex(). */
enum hm_tokenizer_encode_flags {
    HM_TOKENIZER_BOS = 1, /* prepend BOS (tokenizers with one: llama2.c); for a
                             llama2.c tokenizer BOS takes part in the merges as
                             in run.c. Others give HM_ERR_INVALID. */
};

/* hm_tokenizer_encode() with flags (an OR of enum hm_tokenizer_encode_flags). */
enum hm_status hm_tokenizer_encode_ex(struct hm_tokenizer *tok, const char *text, size_t len,
                                      unsigned flags, struct hm_ids *out, struct hm_error *err);

/* Decodes ids: [n] into *out (owned: free with free(); NUL-terminated, *len
 * bytes without the NUL). HuggingFace semantics: the tokens' bytes are
 * concatenated and invalid UTF-8 is replaced by U+FFFD (BPE); bytes mode is
 * exact; llama2.c gives raw bytes as described at the top. An id outside the
 * vocabulary gives HM_ERR_INVALID. */
enum hm_status hm_tokenizer_decode(const struct hm_tokenizer *tok, const int32_t *ids,
                                   int64_t n, char **out, size_t *len, struct hm_error *err);

/* Max id + 1 over the vocabulary and the added tokens (257 for bytes). */
int64_t hm_tokenizer_vocab_size(const struct hm_tokenizer *tok);

/* The id of "<|endoftext|>" (256 for bytes), or -1 if the vocabulary has
 * none (always -1 for llama2.c, whose documents start with BOS instead). */
int32_t hm_tokenizer_eot_id(const struct hm_tokenizer *tok);

/* The beginning-of-sequence id (1 for llama2.c), or -1 when the tokenizer
 * has none. A tokenizer with a BOS starts documents with it in token files. */
int32_t hm_tokenizer_bos_id(const struct hm_tokenizer *tok);

/* The end-of-sequence id (2 for llama2.c), or -1 when there is none. */
int32_t hm_tokenizer_eos_id(const struct hm_tokenizer *tok);

/* 1 for the byte-level vocabulary, 0 otherwise. */
int hm_tokenizer_is_bytes(const struct hm_tokenizer *tok);

enum hm_tokenizer_kind hm_tokenizer_kind(const struct hm_tokenizer *tok);

/* "tokenizer.json", "bytes" or "llama2.c"; static storage. */
const char *hm_tokenizer_kind_name(enum hm_tokenizer_kind kind);

#endif
