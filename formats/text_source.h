/* text_source.h — documents from an input path, one at a time.
 *
 * Inputs (read with libarchive: its formats, and only the compressions it
 * decodes in-process on this build: gzip, bzip2, compress, xz, lzma, lzip,
 * zstd, lz4 as linked; a stream starting with the magic of one that would
 * need an external program (lrzip, grzip, lzop, ...) is refused by name, and
 * no program is ever run):
 *   - a plain text file, optionally compressed (.gz, .xz, ...): one document;
 *   - "-": stdin, the same rules;
 *   - NAME.jsonl (optionally compressed): each non-blank line is a JSON object
 *     whose string "text" is one document (anything else is an error naming
 *     the line number);
 *   - an archive (tar, tar.gz, tar.xz, zip, ...): each regular member is one
 *     document, or one per line for *.jsonl members; members named like an
 *     archive or a compressed stream (.tar .tgz .zip .gz .xz .bz2 .zst .lz4
 *     .7z) are opened recursively from memory (OpenWebText: a tar of .xz
 *     members, each an xz-compressed tar of .txt files), up to 4 levels.
 * Names ending in a text extension (.txt .jsonl .json .text .md .csv .tsv .en
 * .raw .tokens, before any compression extension) are read as one raw stream
 * without archive detection (libarchive's mtree reader would otherwise take
 * jsonl lines for entries); other names get tar/zip/7z/cpio/... detection,
 * falling back to raw. An empty plain file yields no document.
 * A tar followed by anything but zero padding (`cat a.tar b.tar`) is
 * refused, at any level. A jsonl "text" holding \u0000 is returned whole
 * (the NUL is a byte of the document). Empty input, a FIFO without a writer
 * and a closed stdin are errors that say so.
 * Order is archive order. Memory is bounded: one member at a time (jsonl is
 * streamed line by line); a member over 1 GiB is refused with a message.
 */
#ifndef HM_TEXT_SOURCE_H
#define HM_TEXT_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include "hm_error.h"

#define HM_TEXT_MAX_MEMBER ((size_t)1 << 30)

struct hm_text_source;

/* Opens path ("-" = stdin). out: owned, free with hm_text_source_close(). */
enum hm_status hm_text_source_open(const char *path, struct hm_text_source **out,
                                   struct hm_error *err);

/* Same over a buffer data: [size] (borrowed: must outlive src); name is used
 * in messages and to detect .jsonl. */
enum hm_status hm_text_source_open_memory(const void *data, size_t size, const char *name,
                                          struct hm_text_source **out, struct hm_error *err);

/* The next document. Returns 1 and sets *doc: [*len] bytes (borrowed: valid
 * until the next call; not NUL-terminated) and *name_view (borrowed, same
 * lifetime: "member" or "outer/inner" or "file:LINE" for jsonl); 0 at the
 * end; -1 on error (err filled, naming the member). */
int hm_text_source_next(struct hm_text_source *src, const char **doc, size_t *len,
                        const char **name_view, struct hm_error *err);

/* Input bytes consumed so far (compressed bytes of the outer file), for progress. */
uint64_t hm_text_source_bytes_read(const struct hm_text_source *src);

/* Documents returned so far. */
int64_t hm_text_source_docs(const struct hm_text_source *src);

void hm_text_source_close(struct hm_text_source *src); /* accepts NULL */

#endif
