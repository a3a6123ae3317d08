/* verify_bundle.c — hm-verify bundle: every checksum of a bundle against its
 * manifest (hm_bundle_verify), printed as text or one JSON object. */
#include "verify_bundle.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "bundle.h"
#include "cli.h"
#include "json_out.h"

struct findings {
    int json;
    cJSON *arr;
};

static void on_finding(void *ctx, const char *member, const char *tensor, const char *msg)
{
    struct findings *f = ctx;
    if (f->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "member", member);
        if (tensor)
            cJSON_AddStringToObject(o, "tensor", tensor);
        else
            cJSON_AddNullToObject(o, "tensor");
        cJSON_AddStringToObject(o, "message", msg);
        cJSON_AddItemToArray(f->arr, o);
    } else if (tensor) {
        printf("'%s': tensor '%s': %s\n", member, tensor, msg);
    } else if (member[0]) {
        printf("'%s': %s\n", member, msg);
    } else {
        printf("%s\n", msg);
    }
}

int hm_verify_bundle_cli(const char *path, int json)
{
    struct findings f = {json, cJSON_CreateArray()};
    struct hm_bundle_verify_stats stats;
    struct hm_error err;
    hm_error_clear(&err);
    if (hm_bundle_verify(path, on_finding, &f, &stats, &err) != HM_OK) {
        hm_error("cannot check '%s': %s", path, err.msg);
        cJSON_Delete(f.arr);
        return 2;
    }
    if (json) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "version", 1);
        cJSON_AddStringToObject(r, "check", "bundle");
        cJSON_AddBoolToObject(r, "valid", stats.findings == 0);
        cJSON_AddNumberToObject(r, "files", (double)stats.files);
        cJSON_AddNumberToObject(r, "tensors", (double)stats.tensors);
        cJSON_AddItemToObject(r, "findings", f.arr);
        hm_json_put(r);
    } else {
        cJSON_Delete(f.arr);
        if (stats.findings)
            printf("NOT valid: %lld finding%s in '%s'\n", (long long)stats.findings,
                   stats.findings > 1 ? "s" : "", path);
        else
            printf("valid: %lld files and %lld tensors match the manifest\n",
                   (long long)stats.files, (long long)stats.tensors);
    }
    return stats.findings ? 1 : 0;
}
