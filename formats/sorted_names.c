#include "sorted_names.h"

#include <string.h>

int64_t hm_find_sorted_name(const void *base, int64_t n, size_t stride, size_t name_offset,
                            const char *name)
{
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const char *at = *(const char *const *)((const char *)base + (size_t)mid * stride +
                                                name_offset);
        const int c = strcmp(at, name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}
