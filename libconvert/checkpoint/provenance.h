/* provenance.h — the `hm.provenance` chain (contract §5): a JSON array with one
 * entry per tool run that produced a file:
 *   {"tool": "hm-linearize", "version": "0.1.0", "args": [...],
 *    "inputs": [{"path": "...", "xxh3": "16 hex digits"}, ...],
 *    "start": "2026-11-30T12:00:00Z", "end": "...",
 *    "tokens": 123, "final_loss": 1.25}            (tokens/final_loss optional)
 * A tool copies its input's chain and appends its own entry. */
#ifndef HM_PROVENANCE_H
#define HM_PROVENANCE_H

#include <stdint.h>
#include <time.h>
#include "hm_error.h"

struct hm_prov_input {
    const char *path;
    uint64_t xxh3;   /* of the file's bytes (for a sharded set: of the index) */
};

struct hm_prov_entry {
    const char *tool;
    int argc;
    char *const *argv;                 /* argv[0..argc) as given */
    const struct hm_prov_input *inputs;
    int n_inputs;
    time_t start, end;
    int64_t tokens;                    /* < 0: omitted */
    double final_loss;                 /* NaN: omitted */
};

struct cJSON;

/* The chain as read from a file, checked: a JSON array of objects whose
 * known fields have their types (tool, version, start, end, tokenizer:
 * strings; args: strings; inputs: {path, xxh3} objects; tokens,
 * final_loss: numbers). NULL or "" is the empty chain. Every reader of a
 * chain goes through this (hm_ckpt_open checks hm.provenance with it).
 * *out: owned, free with cJSON_Delete(). */
enum hm_status hm_provenance_parse(const char *chain, struct cJSON **out, struct hm_error *err);
/* Same, only the verdict. */
enum hm_status hm_provenance_check(const char *chain, struct hm_error *err);

/* Append e to the chain `prev` (JSON array text, or NULL/"" for none).
 * *out: owned, free with free(). A malformed prev is an error. */
enum hm_status hm_provenance_append(const char *prev, const struct hm_prov_entry *e,
                                    char **out, struct hm_error *err);

/* Number of entries of a chain, or -1 if it is not a valid chain (hm_provenance_parse). */
int hm_provenance_count(const char *chain);

#endif
