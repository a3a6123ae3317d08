/* json_out.h — a tool's JSON output: strings written by hand where a tool
 * streams its own objects, and whole cJSON results. */
#ifndef HM_JSON_OUT_H
#define HM_JSON_OUT_H

#include <stddef.h>
#include <stdio.h>

/* Writes s: [n] bytes as a JSON string (quotes included) to f: '"', '\\'
 * and control characters escaped, and every byte that is not part of valid
 * UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated sequences)
 * written as \ufffd, so the output is always valid JSON in UTF-8. */
void hm_json_write_string(FILE *f, const char *s, size_t n);

/* Writes v as a JSON number of 17 significant digits, or null when it is
 * NaN or infinite (JSON has neither). */
void hm_json_write_number(FILE *f, double v);

struct cJSON;
/* Prints j as one line of JSON on stdout and deletes it (a tool's --json
 * result); out of memory ends the tool (hm_die). */
void hm_json_put(struct cJSON *j);

#endif
