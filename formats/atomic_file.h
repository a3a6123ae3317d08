/* atomic_file.h — outputs that appear whole or not at all.
 *
 * hm_afile_open() creates "<dir>/.<base>.tmp.XXXXXX" next to the final path;
 * writes go to that temp file; hm_afile_commit() flushes, fsyncs and renames
 * it over the final path; hm_afile_abort() (or any failure) unlinks it.
 * The path "-" means stdout: no temp file, commit only flushes.
 *
 * Every live temp file is on a process-wide list so that a tool's signal
 * handler can call hm_afile_cleanup_all() (async-signal-safe: unlink only),
 * like git's tempfile.h. This is the one global of the libraries, kept
 * because a signal handler has no other way to reach the temp files.
 */
#ifndef HM_ATOMIC_FILE_H
#define HM_ATOMIC_FILE_H

#include <stdio.h>
#include "hm_error.h"

struct hm_afile;

enum hm_afile_flags {
    HM_AFILE_FORCE = 1, /* replace an existing final path */
};

/* Opens a temp file for path. Fails (HM_ERR_INVALID) if path exists and
 * HM_AFILE_FORCE is not given. out: owned, release with commit or abort. */
enum hm_status hm_afile_open(const char *path, int flags, struct hm_afile **out,
                             struct hm_error *err);

/* Borrowed: the stream to write to, valid until commit/abort. */
FILE *hm_afile_stream(struct hm_afile *af);

/* Borrowed: the final path as given. */
const char *hm_afile_path(const struct hm_afile *af);

/* Flush, fsync, rename. Frees af in all cases; on failure the temp file is
 * removed and the final path is untouched. */
enum hm_status hm_afile_commit(struct hm_afile *af, struct hm_error *err);

/* Commits afs: [n] together: every output appears, or none does. Temp
 * files are completed first (flush, fsync), stdout flushed, then each is
 * renamed in turn; when a rename fails, those done are taken back (a path
 * that was new is removed, a replaced one gets its previous file back: -f
 * exchanges, never overwrites). Frees every af in all cases; on failure
 * *failed (if not NULL) is the index of the output that failed. Output to
 * stdout cannot be taken back: put it last, or avoid mixing. */
enum hm_status hm_afile_commit_all(struct hm_afile **afs, int n, int *failed,
                                   struct hm_error *err);

/* Remove the temp file and free af. Accepts NULL. */
void hm_afile_abort(struct hm_afile *af);

/* Unlink every live temp file (signal-safe). */
void hm_afile_cleanup_all(void);

/* 1 when writing `out` would overwrite the input `in`: the same file (also
 * through links); when in is a bundle folder (it holds MANIFEST.json), any
 * path inside it at any depth (a new file there is one its manifest does
 * not cover); when in is another folder (an HF model folder), a file in it
 * with a name the folder's loader reads, existing or not:
 * model*.safetensors (model.safetensors and its shards), the index
 * model.safetensors.index.json, config.json, MANIFEST.json. Other new files
 * in such a folder (e.g. dumped logits) are not inputs. */
int hm_output_clobbers(const char *out, const char *in);
/* 1 if a and b name the same existing file (same device and inode). */
int hm_same_file(const char *a, const char *b);
/* 1 when path (existing or not: its deepest existing folder is resolved)
 * lies inside the folder dir or is dir itself, symlinks resolved. */
int hm_path_inside(const char *path, const char *dir);

#endif
