/* sorted_names.h — the one binary search by name over arrays of structs
 * sorted by a `char *` (or `const char *`) name member (checkpoint tensors,
 * archive entries, bundle files). */
#ifndef HM_SORTED_NAMES_H
#define HM_SORTED_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* Index of the element of base [n] (each `stride` bytes, its name pointer at
 * byte `name_offset`, sorted by strcmp) whose name is `name`; −1 if absent. */
int64_t hm_find_sorted_name(const void *base, int64_t n, size_t stride, size_t name_offset,
                            const char *name);

#endif
