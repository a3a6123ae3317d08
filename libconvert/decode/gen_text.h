/* gen_text.h — the text of generated tokens, settled one token at a time
 * (contract §8; hm-generate's stream).
 *
 * The new text is the decode of prompt + new ids past the point where it
 * stops agreeing with the decode of the prompt alone, so the tokenizer's own
 * rules hold across the boundary (llama2.c: the piece after BOS loses its
 * leading space; multi-byte characters split over tokens). After each token
 * the bytes that can no longer change are released; held back are
 *   - an unfinished UTF-8 character at the end (and, for HuggingFace
 *     tokenizers, whose decoding replaces one by U+FFFD, a final U+FFFD);
 *   - then the longest tail of the rest that is the start of a stop string.
 * A stop string that appears ends the text just before its first occurrence
 * (the earliest of all stop strings); it is never released. finish releases
 * what is still held (an unfinished character as the decoder gives it).
 * Decoding is of the whole sequence each time: O(length) per token.
 */
#ifndef HM_GEN_TEXT_H
#define HM_GEN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "hm_error.h"
#include "tokenizer.h"

struct hm_gen_text;

/* tok, stops: borrowed, must outlive g (stops: [n_stops] non-empty strings);
 * prompt: [n] (copied). out: owned, free with hm_gen_text_free(). */
enum hm_status hm_gen_text_new(const struct hm_tokenizer *tok, const int32_t *prompt, int64_t n,
                               const char *const *stops, int n_stops, struct hm_gen_text **out,
                               struct hm_error *err);
void hm_gen_text_free(struct hm_gen_text *g); /* accepts NULL */

/* Appends token id. *out: the bytes newly settled, *len of them (borrowed
 * until the next call on g); *stop: the index of the stop string that ended
 * the text, or -1. After a stop, push must not be called again. */
enum hm_status hm_gen_text_push(struct hm_gen_text *g, int32_t id, const char **out, size_t *len,
                                int *stop, struct hm_error *err);

/* The bytes still held back (none after a stop). Borrowed as above. */
void hm_gen_text_finish(struct hm_gen_text *g, const char **out, size_t *len);

/* The new text so far, cut before a stop string (borrowed as above). */
const char *hm_gen_text_view(const struct hm_gen_text *g, size_t *len);

#endif
