/* bundle_verify_shards.c — hm-verify bundle on sharded weights: the index
 * against the shards the bundle holds (bundle_internal.h). The index is
 * parsed and cross-checked by the one reader of HF indexes (st_index.h),
 * the shards' headers by the safetensors reader, through the scan. */
#include <stdlib.h>
#include <string.h>

#include "bundle_internal.h"
#include "st_index.h"

void hm_bundle_weights_release(struct hm_bundle_weights *w)
{
    for (int k = 0; w->names && k < w->n; k++)
        free((char *)w->names[k]);
    free(w->names);
    free(w->f);
    memset(w, 0, sizeof *w);
}

static void index_problem(void *ctx, int shard, const char *tensor, const char *msg)
{
    (void)shard, (void)tensor; /* the message names both */
    hm_bundle_finding(ctx, HM_BUNDLE_INDEX, NULL, "%s", msg);
}

struct named {
    const char *tensor;
    int shard;
};

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const struct named *)a)->tensor, ((const struct named *)b)->tensor);
}

/* A tensor in two shards; the bytes of all; shards whose hm.config differs. */
static uint64_t check_across(struct hm_bundle_vctx *v, const struct hm_bundle_weights *w)
{
    int64_t total = 0, k = 0;
    uint64_t bytes = 0;
    for (int s = 0; s < w->n; s++)
        total += w->f[s] ? hm_st_n_tensors(w->f[s]->st) : 0;
    struct named *all = calloc((size_t)total + 1, sizeof *all);
    const char *cfg0 = NULL, *name0 = NULL;
    for (int s = 0; s < w->n; s++) {
        if (!w->f[s])
            continue;
        const struct hm_st_file *st = w->f[s]->st;
        for (int64_t i = 0; i < hm_st_n_tensors(st); i++) {
            bytes += hm_st_tensor_at(st, i)->nbytes;
            if (all)
                all[k++] = (struct named){hm_st_tensor_at(st, i)->name, s};
        }
        const char *cfg = hm_st_metadata_get(st, "hm.config");
        if (!name0) {
            cfg0 = cfg;
            name0 = w->names[s];
        } else if (cfg && cfg0 && strcmp(cfg, cfg0) != 0) {
            hm_bundle_finding(v, w->names[s], NULL, "its hm.config differs from that of '%s'",
                              name0);
        }
    }
    if (k > 1)
        qsort(all, (size_t)k, sizeof *all, cmp_named);
    for (int64_t i = 1; i < k; i++)
        if (strcmp(all[i].tensor, all[i - 1].tensor) == 0)
            hm_bundle_finding(v, w->names[all[i].shard], all[i].tensor,
                              "is in two shards: also in '%s'", w->names[all[i - 1].shard]);
    free(all);
    return bytes;
}

void hm_bundle_verify_shards(struct hm_bundle_vctx *v, struct hm_bundle *b,
                             struct hm_bundle_weights *w)
{
    memset(w, 0, sizeof *w);
    w->sharded = 1;
    const void *text;
    size_t len;
    struct hm_error e;
    struct hm_st_index *ix = NULL;
    if (hm_bundle_file_data(b, hm_bundle_find(b, HM_BUNDLE_INDEX), &text, &len, &e) != HM_OK) {
        hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "cannot be read: %s", e.msg);
        return;
    }
    if (hm_st_index_parse(text, len, "the index", &ix, &e) != HM_OK) {
        hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "%s", e.msg);
        return;
    }
    int n = hm_st_index_n_shards(ix), usable = 1;
    w->names = calloc((size_t)n, sizeof *w->names);
    w->f = calloc((size_t)n, sizeof *w->f);
    struct hm_st_file **files = calloc((size_t)n, sizeof *files);
    if (!w->names || !w->f || !files) {
        hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "out of memory");
        goto out;
    }
    for (int k = 0; k < n; k++) {
        const char *name = hm_st_index_shard(ix, k);
        if (!(w->names[k] = strdup(name))) {
            hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "out of memory");
            goto out;
        }
        w->n = k + 1;
        if (hm_bundle_find(b, name) < 0)
            hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "names shard '%s', which the bundle lacks",
                              name);
        else if ((w->f[k] = hm_bundle_weights_file(v, name)))
            files[k] = w->f[k]->st;
        usable &= w->f[k] != NULL;
    }
    /* (with a shard missing, its tensors would all be reported again) */
    if (usable)
        hm_st_index_check(ix, files, w->names, index_problem, v);
    uint64_t bytes = check_across(v, w), total;
    int has = hm_st_index_total_size(ix, &total);
    if (has == 0)
        hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "has no metadata.total_size");
    else if (has < 0)
        hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "metadata.total_size is not a byte count");
    else if (usable && total != bytes)
        hm_bundle_finding(v, HM_BUNDLE_INDEX, NULL, "metadata.total_size is %llu, the shards' "
                          "tensors hold %llu bytes", (unsigned long long)total,
                          (unsigned long long)bytes);
    for (int64_t j = 0; j < hm_bundle_n_files(b); j++) {
        const char *name = hm_bundle_file_name(b, j);
        if (hm_st_index_stray(ix, &name, 1))
            hm_bundle_finding(v, name, NULL, "is a shard that %s does not name", HM_BUNDLE_INDEX);
    }
out:
    free(files);
    hm_st_index_free(ix);
}
