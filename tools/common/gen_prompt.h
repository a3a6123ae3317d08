/* gen_prompt.h — hm-generate's prompt side: the tokenizer it was given,
 * the prompt's ids and the end-of-text ids (its usage text has the rules). */
#ifndef HM_GEN_PROMPT_H
#define HM_GEN_PROMPT_H

#include <stdint.h>

#include "checkpoint.h"
#include "config.h"
#include "tokenizer.h"

#define HM_GEN_MAX_END 64 /* end-of-text ids at most (--eot-id may repeat) */

/* "1,2, 3" → ids appended to out (a syntax error is a usage error). */
void hm_gen_parse_ids(const char *s, struct hm_ids *out);

/* The byte-level tokenizer (bytes), the file tokenizer, or the bundle's of
 * ck; NULL when there is none. Exits naming the source on failure (model:
 * ck's path). The caller owns the result. */
struct hm_tokenizer *hm_gen_load_tokenizer(const struct hm_ckpt *ck, const char *model,
                                           const char *tokenizer, int bytes);

/* The end-of-text ids into out [HM_GEN_MAX_END]; returns their count: none
 * with ignore, else the n_eot given, else the tokenizer's (end of text, EOS,
 * a llama2.c BOS), else the family's defaults (llama 1 and 2; neox 256 for
 * 257 ids, else 0). */
int hm_gen_end_ids(const struct hm_tokenizer *tok, const struct hm_config *c, const int32_t *eot,
                   int n_eot, int ignore, int32_t *out);

/* The prompt into ids: the list prompt_ids as given, or prompt (NULL: "")
 * tokenized with tok (BOS first when tok has one; an empty result becomes
 * the end-of-text id). Exits on failure, naming tok_source or model, and
 * when an id is not below the vocabulary size V. */
void hm_gen_make_prompt(struct hm_ids *ids, const char *prompt, const char *prompt_ids,
                        struct hm_tokenizer *tok, const char *tok_source,
                        const char *model, int64_t V);

#endif
