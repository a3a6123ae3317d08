#include "provenance.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "hash.h"

static void iso_time(time_t t, char buf[32])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* What the fields of an entry must be when present; other fields are free
 * (numbers among them are shown as evaluations by the model card). */
static enum hm_status check_entry(const cJSON *e, int i, struct hm_error *err)
{
    static const char *const strings[] = {"tool", "version", "start", "end", "tokenizer"};
    if (!cJSON_IsObject(e))
        return hm_error_set(err, HM_ERR_FORMAT, "hm.provenance entry %d is not a JSON object", i);
    for (size_t k = 0; k < sizeof strings / sizeof *strings; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, strings[k]);
        if (v && !cJSON_IsString(v))
            return hm_error_set(err, HM_ERR_FORMAT, "hm.provenance entry %d: '%s' is not a string",
                                i, strings[k]);
    }
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args"), *x;
    if (args && !cJSON_IsArray(args))
        return hm_error_set(err, HM_ERR_FORMAT, "hm.provenance entry %d: 'args' is not an array", i);
    cJSON_ArrayForEach(x, args) if (!cJSON_IsString(x))
        return hm_error_set(err, HM_ERR_FORMAT,
                            "hm.provenance entry %d: 'args' holds something other than strings", i);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(e, "inputs");
    if (ins && !cJSON_IsArray(ins))
        return hm_error_set(err, HM_ERR_FORMAT, "hm.provenance entry %d: 'inputs' is not an array",
                            i);
    cJSON_ArrayForEach(x, ins) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(x, "path");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(x, "xxh3");
        if (!cJSON_IsObject(x) || (p && !cJSON_IsString(p)) || (h && !cJSON_IsString(h)))
            return hm_error_set(err, HM_ERR_FORMAT, "hm.provenance entry %d: an input is not "
                                "{\"path\": string, \"xxh3\": string}", i);
    }
    static const char *const numbers[] = {"tokens", "final_loss"};
    for (size_t k = 0; k < sizeof numbers / sizeof *numbers; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, numbers[k]);
        if (v && !cJSON_IsNumber(v))
            return hm_error_set(err, HM_ERR_FORMAT, "hm.provenance entry %d: '%s' is not a number",
                                i, numbers[k]);
    }
    return HM_OK;
}

enum hm_status hm_provenance_parse(const char *chain, cJSON **out, struct hm_error *err)
{
    *out = NULL;
    cJSON *arr = chain && chain[0] ? cJSON_Parse(chain) : cJSON_CreateArray();
    if (!arr || !cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return arr ? hm_error_set(err, HM_ERR_FORMAT, "hm.provenance is not a JSON array")
                   : hm_error_set(err, HM_ERR_FORMAT, "hm.provenance is not JSON");
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        enum hm_status st = check_entry(e, ++i, err);
        if (st != HM_OK) {
            cJSON_Delete(arr);
            return st;
        }
    }
    *out = arr;
    return HM_OK;
}

enum hm_status hm_provenance_check(const char *chain, struct hm_error *err)
{
    cJSON *arr;
    enum hm_status st = hm_provenance_parse(chain, &arr, err);
    cJSON_Delete(arr);
    return st;
}

enum hm_status hm_provenance_append(const char *prev, const struct hm_prov_entry *e,
                                    char **out, struct hm_error *err)
{
    *out = NULL;
    cJSON *arr;
    enum hm_status st = hm_provenance_parse(prev, &arr, err);
    if (st != HM_OK)
        return st;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, o);
    cJSON_AddStringToObject(o, "tool", e->tool);
    cJSON_AddStringToObject(o, "version", HM_VERSION);
    cJSON *args = cJSON_AddArrayToObject(o, "args");
    for (int i = 0; i < e->argc; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(e->argv[i]));
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < e->n_inputs; i++) {
        cJSON *in = cJSON_CreateObject();
        char hex[17];
        hm_xxh3_hex(e->inputs[i].xxh3, hex);
        cJSON_AddStringToObject(in, "path", e->inputs[i].path);
        cJSON_AddStringToObject(in, "xxh3", hex);
        cJSON_AddItemToArray(ins, in);
    }
    char t[32];
    iso_time(e->start, t);
    cJSON_AddStringToObject(o, "start", t);
    iso_time(e->end, t);
    cJSON_AddStringToObject(o, "end", t);
    if (e->tokens >= 0)
        cJSON_AddNumberToObject(o, "tokens", (double)e->tokens);
    if (!isnan(e->final_loss))
        cJSON_AddNumberToObject(o, "final_loss", e->final_loss);
    *out = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    return *out ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
}

int hm_provenance_count(const char *chain)
{
    cJSON *a;
    struct hm_error err;
    if (!chain || hm_provenance_parse(chain, &a, &err) != HM_OK)
        return -1;
    int n = cJSON_GetArraySize(a);
    cJSON_Delete(a);
    return n;
}
