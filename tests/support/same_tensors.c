/* same_tensors.c — see same_tensors.h. */
#include "same_tensors.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "testutil.h"

void tu_assert_same_tensors(const char *dir, const char *a, const char *b)
{
    char *pa = tu_path(dir, a), *pb = tu_path(dir, b);
    struct hm_st_file *fa, *fb;
    struct hm_error err;
    cr_assert_eq(hm_st_open(pa, &fa, &err), HM_OK, "%s: %s", pa, err.msg);
    cr_assert_eq(hm_st_open(pb, &fb, &err), HM_OK, "%s: %s", pb, err.msg);
    cr_assert_eq(hm_st_n_tensors(fa), hm_st_n_tensors(fb));
    for (int64_t i = 0; i < hm_st_n_tensors(fa); i++) {
        const struct hm_st_tensor *t = hm_st_tensor_at(fa, i);
        int64_t j = hm_st_find(fb, t->name);
        cr_assert_geq(j, 0, "%s lacks %s", b, t->name);
        cr_assert_eq(hm_st_tensor_at(fb, j)->nbytes, t->nbytes);
        cr_assert(memcmp(hm_st_data_view(fa, i), hm_st_data_view(fb, j), t->nbytes) == 0,
                  "tensor '%s' differs between %s and %s", t->name, a, b);
    }
    hm_st_close(fa);
    hm_st_close(fb);
    free(pa);
    free(pb);
}
