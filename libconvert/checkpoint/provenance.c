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

enum hm_status hm_provenance_append(const char *prev, const struct hm_prov_entry *e,
                                    char **out, struct hm_error *err)
{
    *out = NULL;
    cJSON *arr = prev && prev[0] ? cJSON_Parse(prev) : cJSON_CreateArray();
    if (!arr || !cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return hm_error_set(err, HM_ERR_FORMAT, "hm.provenance is not a JSON array");
    }
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
    cJSON *a = cJSON_Parse(chain);
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    cJSON_Delete(a);
    return n;
}
