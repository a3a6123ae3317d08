/* bundle_fixture.h — models, archives and logits for the bundle tests
 * (tests/test_bundle*.c). Everything aborts the test on failure. */
#ifndef HM_BUNDLE_FIXTURE_H
#define HM_BUNDLE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "safetensors.h"

/* A small random model of family × mixer (vocab 257 unless tu_bundle_vocab
 * says otherwise, d 32, 2 layers; llama: 4 heads over 2 kv heads) saved at
 * path in dtype. Its provenance holds one
 * entry; when tokenizer is not NULL that entry's args name it
 * ("--tokenizer PATH"), as a tool that read it would record. */
void tu_bundle_model(const char *path, enum hm_family family, enum hm_mixer mixer,
                     enum hm_dtype dtype, const char *tokenizer, uint64_t seed);

/* The config tu_bundle_model uses (finished). */
struct hm_config tu_bundle_config(enum hm_family family, enum hm_mixer mixer);
/* The vocabulary of the next tu_bundle_model / tu_bundle_config calls (0: 257). */
void tu_bundle_vocab(int64_t vocab);

/* logits [T, V] of the checkpoint (any path hm_ckpt_open takes) on tok: [T].
 * owned: free(); *V set to the vocabulary. */
float *tu_bundle_logits(const char *ckpt, const int32_t *tok, int64_t T, int64_t *V);

/* One archive entry for tu_write_archive. */
struct tu_entry {
    const char *name;
    const void *data; /* regular files: [len] bytes */
    size_t len;
    int type;         /* 0 regular file, 'l' symlink, 'h' hard link, 'c' char device,
                         'b' block device, 'p' FIFO, 'd' folder */
    const char *target; /* symlink / hard link target */
};

/* Writes entries e[n] as an archive of format (an enum hm_archive_format) at path. */
void tu_write_archive(const char *path, int format, const struct tu_entry *e, int n);

/* The files of a folder bundle (sorted; data owned by the returned array:
 * free with tu_free_entries). *n set to the count. */
struct tu_entry *tu_read_dir_entries(const char *dir, int *n);
void tu_free_entries(struct tu_entry *e, int n);

#endif
