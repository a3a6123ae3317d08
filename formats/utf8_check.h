/* utf8_check.h — strict UTF-8 validation (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). */
#ifndef HM_UTF8_CHECK_H
#define HM_UTF8_CHECK_H

#include <stddef.h>

/* Offset of the first invalid byte in s[0, len), or (size_t)-1 if valid. */
size_t hm_utf8_invalid_at(const char *s, size_t len);

#endif
