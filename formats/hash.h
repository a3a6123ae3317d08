/* hash.h — xxh3 (64-bit, seed 0) of files, buffers and tensors, printed as
 * 16 lowercase hex digits. Uses libxxhash. */
#ifndef HM_HASH_H
#define HM_HASH_H

#include <stddef.h>
#include <stdint.h>
#include "hm_error.h"

uint64_t hm_xxh3(const void *data, size_t len);
/* Streams the file; "-" is not accepted (hash what you read instead). */
enum hm_status hm_xxh3_file(const char *path, uint64_t *out, struct hm_error *err);
/* Writes 16 hex digits and a NUL into buf[17]. */
void hm_xxh3_hex(uint64_t h, char buf[17]);

#endif
