/* bundle_prov.c — hm-pack's provenance entry (no wall-clock time) and the
 * tokenizer a provenance chain names (bundle.h). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "fileio.h"
#include "hash.h"
#include "provenance.h"

enum hm_status hm_bundle_provenance(const char *prev, const char *const *args, int nargs,
                                    const struct hm_prov_input *inputs, int n_inputs,
                                    char **out, struct hm_error *err)
{
    *out = NULL;
    cJSON *arr;
    enum hm_status st = hm_provenance_parse(prev, &arr, err);
    if (st != HM_OK)
        return st;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "tool", "hm-pack");
    cJSON_AddStringToObject(o, "version", HM_VERSION);
    cJSON *a = cJSON_AddArrayToObject(o, "args");
    for (int i = 0; i < nargs; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(args[i]));
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < n_inputs; i++) {
        cJSON *in = cJSON_CreateObject();
        char hex[17];
        hm_xxh3_hex(inputs[i].xxh3, hex);
        cJSON_AddStringToObject(in, "path", inputs[i].path);
        cJSON_AddStringToObject(in, "xxh3", hex);
        cJSON_AddItemToArray(ins, in);
    }
    *out = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return *out ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
}

/* The tokenizer path entry e names, or NULL. Borrowed from e. */
static const char *entry_tokenizer(const cJSON *e)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "tokenizer");
    if (cJSON_IsString(t) && hm_is_file(t->valuestring))
        return t->valuestring;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const char *found = NULL;
    const cJSON *a;
    int next = 0;
    cJSON_ArrayForEach(a, args) {
        if (!cJSON_IsString(a)) {
            next = 0;
            continue;
        }
        const char *s = a->valuestring, *cand = NULL;
        if (next)
            cand = s;
        else if (strncmp(s, "--tokenizer=", 12) == 0)
            cand = s + 12;
        next = strcmp(s, "--tokenizer") == 0;
        if (cand && hm_is_file(cand))
            found = cand; /* the last one given wins, as getopt would have it */
    }
    return found;
}

enum hm_status hm_bundle_tokenizer_from_provenance(const char *chain, char **out,
                                                   struct hm_error *err)
{
    *out = NULL;
    if (!chain)
        return HM_OK;
    cJSON *arr;
    enum hm_status st = hm_provenance_parse(chain, &arr, err);
    if (st != HM_OK)
        return st;
    for (int i = cJSON_GetArraySize(arr) - 1; i >= 0 && !*out; i--) {
        const char *p = entry_tokenizer(cJSON_GetArrayItem(arr, i));
        if (p && !(*out = strdup(p)))
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    cJSON_Delete(arr);
    return st;
}
