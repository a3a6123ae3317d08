/* same_tensors.h — a Criterion assertion shared by the training tests. */
#ifndef HM_SAME_TENSORS_H
#define HM_SAME_TENSORS_H

/* Asserts that the safetensors files dir/a and dir/b hold the same tensors:
 * each name in both, the same byte count and the same bytes. */
void tu_assert_same_tensors(const char *dir, const char *a, const char *b);

#endif
