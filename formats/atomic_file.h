/* atomic_file.h — outputs that appear whole or not at all.
 *
 * hm_afile_open() creates "<dir>/.<base>.tmp.<pid>.XXXXXX" next to the final
 * path (base shortened when the name would pass NAME_MAX: hm_side_path);
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

/* ---- names beside an output ----
 * "<dir>/<pre><base><post>", base = path's last component (trailing slashes
 * dropped). When that name plus `reserve` bytes would pass NAME_MAX (255),
 * base is cut at a UTF-8 character boundary and "~" + the 16 hex digits of
 * its xxh3 are appended, so temporary and lock names of long outputs fit and
 * stay distinct. owned: free(). NULL when out of memory. */
char *hm_side_path(const char *path, const char *pre, const char *post, size_t reserve);

/* The temporary name of path, "<dir>/.<base>.tmp.<pid>.XXXXXX" for
 * mkstemp/mkdtemp (fits NAME_MAX with 4 bytes to spare). owned: free(). */
char *hm_tmp_path(const char *path);

/* Removes the temporary files (trees = 0) or folders (1) that dead runs
 * (their pid gone) left for path; a live run's are left alone. */
void hm_tmp_remove_dead(const char *path, int trees);

/* Removes a folder and everything in it (no links followed). */
void hm_rm_tree(const char *path);

/* HM_OK when path's folder exists and is writable; else the error says
 * "directory 'D' does not exist", "'F' is not a directory" (a file where a
 * folder should be) or "directory 'D' is not writable: ...". */
enum hm_status hm_output_dir_check(const char *path, struct hm_error *err);

/* ---- holding an output for a run's whole life ----
 * Atomic renames make each write whole; they do not stop a second run from
 * writing the same output (with -f, or a training run's periodic saves).
 * hm_output_hold(path) takes an exclusive flock(2) on the sidecar
 * "<path>.lock" (named as hm_side_path does) and keeps it until
 * hm_output_release_all(), so a second run of the same output — with or
 * without -f or --resume — fails at once ("another run (pid N) is writing
 * it"). Holding the same path twice in one process is a no-op. The lock
 * file holds the holder's pid (for messages); a file there that is not
 * empty and not one pid line is not ours and is refused.
 *
 * What a killed run leaves: the lock file, holding no lock (the kernel drops
 * flock locks when the process ends, kill -9 included). The next run of the
 * same output locks that file and reuses it; nothing needs removing by hand.
 * Release unlinks the file while still holding it, then closes it; a run
 * that had opened the old file sees on its stat that the name moved on and
 * opens the new one, so two runs never both hold "the" lock.
 * Locks own their file: release unlinks the name only while it is still
 * the inode held (a file another put there since is left alone), and a lock
 * file with other hard links (another file's name too) is refused, never
 * written. An output that another process holds locked (a live run's lock
 * file) is refused, even with -f.
 * Refuses an existing path that is not a regular file or folder (a device,
 * FIFO, socket: nothing is created beside it), and a missing or unwritable
 * folder (hm_output_dir_check). "-" (stdout) holds nothing. */
enum hm_status hm_output_hold(const char *path, struct hm_error *err);

/* Releases every held output (unlink + close: async-signal-safe, for a
 * signal handler and atexit). */
void hm_output_release_all(void);

#endif
