/* checkpoint.c — HF folders, sharded indexes and single files as one
 * logical checkpoint (see checkpoint.h). */
#include "checkpoint.h"

#include "sorted_names.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "bundle.h"
#include "dtype.h"
#include "fileio.h"
#include "provenance.h"
#include "st_index.h"

#define HM_MAX_JSON (100u << 20)

struct hm_ckpt {
    char *path;
    char *config_source;
    struct hm_config cfg;
    int nfiles;
    struct hm_st_file **files; /* [nfiles], owned */
    char **paths;              /* [nfiles], owned */
    int64_t n;
    struct hm_ckpt_tensor *t;  /* [n], sorted by name */
    int64_t *st_index;         /* [n], index of t[i] within its file */
    struct hm_bundle *bundle;  /* owned when ck is a bundle (files may borrow from it) */
    const void *tok;           /* the bundle's tokenizer bytes [tok_len], borrowed from bundle */
    size_t tok_len;
    char prov_foreign[512];    /* why hm.provenance is not hm's chain, or "" */
    char config_note[512];     /* config.json and hm.config disagree: which fields, or "" */
};

void hm_ckpt_close(struct hm_ckpt *ck)
{
    if (!ck)
        return;
    for (int i = 0; i < ck->nfiles; i++) {
        hm_st_close(ck->files[i]);
        free(ck->paths[i]);
    }
    free(ck->files);
    free(ck->paths);
    hm_bundle_close(ck->bundle);
    free(ck->t);
    free(ck->st_index);
    free(ck->config_source);
    free(ck->path);
    free(ck);
}

int hm_is_ignored_buffer(const char *name)
{
    static const char *suffix[] = {".attention.bias", ".attention.masked_bias",
                                   ".rotary_emb.inv_freq"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
        size_t k = strlen(suffix[i]);
        if (n >= k && strcmp(name + n - k, suffix[i]) == 0)
            return 1;
    }
    return 0;
}

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

/* Directory part of path ("." if none). owned. */
static char *path_dir(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return strdup(".");
    if (s == path)
        return strdup("/");
    return strndup(path, (size_t)(s - path));
}

/* Adds an opened file f (owned from here on, closed on failure too) shown as path. */
static enum hm_status add_st(struct hm_ckpt *ck, const char *path, struct hm_st_file *f,
                             struct hm_error *err)
{
    struct hm_st_file **nf = realloc(ck->files, sizeof *nf * (size_t)(ck->nfiles + 1));
    if (nf)
        ck->files = nf;
    char **np = nf ? realloc(ck->paths, sizeof *np * (size_t)(ck->nfiles + 1)) : NULL;
    if (np)
        ck->paths = np;
    char *p = np ? strdup(path) : NULL;
    if (!p) {
        hm_st_close(f);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    ck->paths[ck->nfiles] = p;
    ck->files[ck->nfiles++] = f;
    return HM_OK;
}

static enum hm_status add_file(struct hm_ckpt *ck, const char *path, struct hm_error *err)
{
    struct hm_st_file *f;
    enum hm_status st = hm_st_open(path, &f, err);
    return st == HM_OK ? add_st(ck, path, f, err) : st;
}

static int cmp_tensor_name(const void *a, const void *b, void *ctx)
{
    const struct hm_ckpt_tensor *t = ctx;
    return strcmp(t[*(const int64_t *)a].name, t[*(const int64_t *)b].name);
}

/* Gather all tensors, sorted by name; a name in two files is an error. */
static enum hm_status gather(struct hm_ckpt *ck, struct hm_error *err)
{
    int64_t total = 0;
    for (int i = 0; i < ck->nfiles; i++)
        total += hm_st_n_tensors(ck->files[i]);
    struct hm_ckpt_tensor *tmp = calloc((size_t)total + 1, sizeof *tmp);
    int64_t *sti = calloc((size_t)total + 1, sizeof *sti);
    int64_t *order = calloc((size_t)total + 1, sizeof *order);
    enum hm_status st = HM_OK;
    if (!tmp || !sti || !order) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    int64_t k = 0;
    for (int i = 0; i < ck->nfiles; i++) {
        for (int64_t j = 0; j < hm_st_n_tensors(ck->files[i]); j++, k++) {
            const struct hm_st_tensor *s = hm_st_tensor_at(ck->files[i], j);
            tmp[k] = (struct hm_ckpt_tensor){s->name, s->dtype, s->ndim, s->shape,
                                             s->numel, s->nbytes, i};
            sti[k] = j;
            order[k] = k;
        }
    }
    qsort_r(order, (size_t)total, sizeof *order, cmp_tensor_name, tmp);
    ck->t = calloc((size_t)total + 1, sizeof *ck->t);
    ck->st_index = calloc((size_t)total + 1, sizeof *ck->st_index);
    if (!ck->t || !ck->st_index) {
        st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < total; i++) {
        ck->t[i] = tmp[order[i]];
        ck->st_index[i] = sti[order[i]];
        if (i > 0 && strcmp(ck->t[i].name, ck->t[i - 1].name) == 0) {
            st = hm_error_set(err, HM_ERR_FORMAT, "tensor '%s' is in both '%s' and '%s'",
                              ck->t[i].name, ck->paths[ck->t[i - 1].file],
                              ck->paths[ck->t[i].file]);
            goto out;
        }
    }
    ck->n = total;
out:
    free(tmp);
    free(sti);
    free(order);
    return st;
}

/* Where the shards of an index are: files in a folder, or a bundle's members. */
struct shard_src {
    const char *dir;     /* the index's folder */
    struct hm_bundle *b; /* or the bundle (its members) */
};

/* Adds shard name of src; the index is shown as ix_shown in messages. */
static enum hm_status open_shard(struct hm_ckpt *ck, const struct shard_src *src,
                                 const char *name, const char *ix_shown, struct hm_error *err)
{
    enum hm_status st;
    char *p = NULL;
    if (src->b) {
        struct hm_st_file *f;
        const char *disk = hm_bundle_file_disk_path(src->b, hm_bundle_find(src->b, name));
        size_t n = strlen(hm_bundle_path(src->b)) + strlen(name) + 2;
        if ((st = hm_bundle_open_member(src->b, name, &f, err)) != HM_OK)
            return st;
        if (!(p = malloc(n))) {
            hm_st_close(f);
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        }
        snprintf(p, n, "%s:%s", hm_bundle_path(src->b), name);
        st = add_st(ck, disk ? disk : p, f, err);
    } else {
        if (!(p = path_join(src->dir, name)))
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        if ((st = add_file(ck, p, err)) != HM_OK)
            hm_error_prefix(err, "shard '%s' named by %s: ", p, ix_shown);
    }
    free(p);
    return st;
}

static void first_problem(void *ctx, int shard, const char *tensor, const char *msg)
{
    struct hm_error *err = ctx;
    (void)shard, (void)tensor;
    if (err && err->status == HM_OK)
        hm_error_set(err, HM_ERR_FORMAT, "%s", msg);
}

/* The folder's file names (for hm_st_index_stray). owned: free each, then the array. */
static char **list_dir(const char *dir, int64_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    char **names = NULL;
    int64_t cap = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (*n == cap) {
            char **nn = realloc(names, sizeof *nn * (size_t)(cap = cap ? cap * 2 : 16));
            if (!nn)
                break;
            names = nn;
        }
        if (!(names[*n] = strdup(de->d_name)))
            break;
        (*n)++;
    }
    if (d)
        closedir(d);
    return names;
}

/* The sharded set of the index text: [len] (shown as ix_shown): every shard
 * opened from src, cross-checked against the index, and no shard of the
 * same set left out of it. */
static enum hm_status open_shards(struct hm_ckpt *ck, const char *text, size_t len,
                                  const char *ix_shown, const struct shard_src *src,
                                  struct hm_error *err)
{
    struct hm_st_index *ix;
    char msg_name[4200];
    snprintf(msg_name, sizeof msg_name, "index '%s'", ix_shown);
    enum hm_status st = hm_st_index_parse(text, len, msg_name, &ix, err);
    if (st != HM_OK)
        return st;
    int first = ck->nfiles;
    for (int i = 0; st == HM_OK && i < hm_st_index_n_shards(ix); i++)
        st = open_shard(ck, src, hm_st_index_shard(ix, i), msg_name, err);
    if (st == HM_OK) {
        if (err)
            hm_error_clear(err);
        if (hm_st_index_check(ix, ck->files + first, (const char *const *)ck->paths + first,
                              first_problem, err) > 0)
            st = err ? err->status : HM_ERR_FORMAT;
    }
    int64_t n = 0;
    char **names = NULL;
    const char *stray = NULL;
    if (st == HM_OK && src->b) {
        n = hm_bundle_n_files(src->b);
        names = calloc((size_t)n + 1, sizeof *names);
        for (int64_t i = 0; names && i < n; i++)
            names[i] = (char *)hm_bundle_file_name(src->b, i);
        stray = names ? hm_st_index_stray(ix, (const char *const *)names, n) : NULL;
        if (stray)
            st = hm_error_set(err, HM_ERR_FORMAT, "shard '%s' is not named by %s", stray,
                              msg_name);
        free(names);
    } else if (st == HM_OK) {
        names = list_dir(src->dir, &n);
        stray = hm_st_index_stray(ix, (const char *const *)names, n);
        if (stray)
            st = hm_error_set(err, HM_ERR_FORMAT, "shard '%s/%s' is not named by %s", src->dir,
                              stray, msg_name);
        for (int64_t i = 0; i < n; i++)
            free(names[i]);
        free(names);
    }
    hm_st_index_free(ix);
    return st;
}

static enum hm_status open_index(struct hm_ckpt *ck, const char *index_path,
                                 struct hm_error *err)
{
    char *text = NULL, *dir = path_dir(index_path);
    size_t len;
    enum hm_status st = dir ? hm_read_file(index_path, HM_MAX_JSON, &text, &len, err)
                            : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if (st != HM_OK && dir)
        hm_error_prefix(err, "index '%s': ", index_path);
    struct shard_src src = {dir, NULL};
    if (st == HM_OK)
        st = open_shards(ck, text, len, index_path, &src, err);
    free(text);
    free(dir);
    return st;
}

static enum hm_status load_config_json(struct hm_ckpt *ck, const char *cfg_path,
                                       struct hm_error *err)
{
    char *text;
    size_t len;
    enum hm_status st = hm_read_file(cfg_path, HM_MAX_JSON, &text, &len, err);
    if (st == HM_OK)
        st = hm_config_parse(text, len, &ck->cfg, err);
    free(text);
    if (st != HM_OK) {
        hm_error_prefix(err, "config '%s': ", cfg_path);
        return st;
    }
    ck->config_source = strdup(cfg_path);
    return ck->config_source ? HM_OK : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
}

/* The fields where config.json (at cfg_path) and the file's own hm.config
 * (meta) disagree, in ck->config_note; ck->cfg is the one in effect
 * (json_wins: config.json's). Nothing when they agree or the one not used
 * does not parse (it is not read). */
static void note_config_disagreement(struct hm_ckpt *ck, const char *meta, const char *cfg_path,
                                     int json_wins)
{
    struct hm_config other;
    struct hm_error e;
    char *text = NULL;
    size_t len = 0;
    enum hm_status st = json_wins ? hm_config_parse(meta, strlen(meta), &other, &e)
                                  : hm_read_file(cfg_path, HM_MAX_JSON, &text, &len, &e);
    if (st == HM_OK && !json_wins)
        st = hm_config_parse(text, len, &other, &e);
    free(text);
    if (st != HM_OK)
        return;
    char *ja = hm_config_to_json(&ck->cfg), *jb = hm_config_to_json(&other);
    cJSON *a = ja ? cJSON_Parse(ja) : NULL, *b = jb ? cJSON_Parse(jb) : NULL;
    char fields[384] = "";
    size_t at = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a) {
        const cJSON *y = cJSON_GetObjectItem(b, x->string);
        if (y && cJSON_Compare(x, y, 1))
            continue;
        at += (size_t)snprintf(fields + at, at < sizeof fields ? sizeof fields - at : 0, "%s%s",
                               at ? ", " : "", x->string);
        if (at >= sizeof fields)
            break;
    }
    if (fields[0])
        snprintf(ck->config_note, sizeof ck->config_note,
                 "'%s' and the weights' own hm.config disagree on %s: %s wins", cfg_path,
                 fields, json_wins ? "config.json (a folder is read as HuggingFace's)"
                                   : "hm.config (a file is read as hm wrote it)");
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(ja);
    free(jb);
}

/* hm.config of the first file wins for files hm wrote; else config.json in
 * dir. When both are there and disagree, ck->config_note says on what. */
static enum hm_status load_config(struct hm_ckpt *ck, const char *dir, int prefer_json,
                                  struct hm_error *err)
{
    const char *meta = ck->nfiles ? hm_st_metadata_get(ck->files[0], "hm.config") : NULL;
    char *cfg_path = dir ? path_join(dir, "config.json") : NULL;
    int have_json = cfg_path ? hm_folder_file(cfg_path, err) : 0;
    enum hm_status st;
    /* a config.json that is there but no regular file is an error where it
     * would be read: a folder's, or beside a file without hm.config */
    if (have_json < 0 && (!meta || prefer_json))
        st = err ? err->status : HM_ERR_INVALID;
    else if (meta && !(prefer_json && have_json)) {
        st = hm_config_parse(meta, strlen(meta), &ck->cfg, err);
        if (st != HM_OK)
            hm_error_prefix(err, "hm.config metadata of '%s': ", ck->paths[0]);
        else if (!(ck->config_source = strdup("hm.config")))
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        else if (have_json > 0)
            note_config_disagreement(ck, meta, cfg_path, 0);
    } else if (have_json) {
        st = load_config_json(ck, cfg_path, err);
        if (st == HM_OK && meta)
            note_config_disagreement(ck, meta, cfg_path, 1);
    } else {
        st = hm_error_set(err, HM_ERR_INVALID,
                          "no model config: no hm.config metadata and no config.json in '%s'",
                          dir ? dir : "(stdin)");
    }
    free(cfg_path);
    return st;
}

/* ck from the bundle in ck->bundle: its weights (model.safetensors, or the
 * shards its model.safetensors.index.json names), hm.config (else its
 * config.json) and its tokenizer. */
static enum hm_status open_bundle_parts(struct hm_ckpt *ck, struct hm_error *err)
{
    struct hm_bundle *b = ck->bundle;
    struct shard_src src = {NULL, b};
    enum hm_status st = hm_bundle_check(b, err);
    int64_t ii = hm_bundle_find(b, HM_BUNDLE_INDEX);
    if (st == HM_OK && ii >= 0) { /* sharded (bundle.h) */
        const void *text;
        size_t len;
        const char *disk = hm_bundle_file_disk_path(b, ii);
        size_t n = strlen(hm_bundle_path(b)) + sizeof HM_BUNDLE_INDEX + 2;
        char *shown = malloc(n);
        if (!shown)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        snprintf(shown, n, "%s:%s", hm_bundle_path(b), HM_BUNDLE_INDEX);
        if ((st = hm_bundle_file_data(b, ii, &text, &len, err)) == HM_OK)
            st = open_shards(ck, text, len, disk ? disk : shown, &src, err);
        free(shown);
    } else if (st == HM_OK) {
        st = open_shard(ck, &src, HM_BUNDLE_WEIGHTS, NULL, err);
    }
    if (st != HM_OK)
        return st;
    struct hm_st_file *f = ck->files[0];
    const char *meta = hm_st_metadata_get(f, "hm.config");
    int64_t ci = hm_bundle_find(b, "config.json");
    const void *text = meta;
    size_t len = meta ? strlen(meta) : 0;
    if (!meta && ci >= 0 && (st = hm_bundle_file_data(b, ci, &text, &len, err)) != HM_OK)
        return st;
    if (!text)
        return hm_error_set(err, HM_ERR_INVALID, "bundle has neither hm.config nor config.json");
    if ((st = hm_config_parse(text, len, &ck->cfg, err)) != HM_OK) {
        hm_error_prefix(err, "%s of the bundle: ", meta ? "hm.config" : "config.json");
        return st;
    }
    if (!(ck->config_source = strdup(meta ? "hm.config" : "config.json")))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    int64_t ti = hm_bundle_tokenizer_index(b);
    if (ti >= 0)
        st = hm_bundle_file_data(b, ti, &ck->tok, &ck->tok_len, err);
    return st;
}

/* "-": a safetensors file or a bundle archive on stdin. */
static enum hm_status open_stdin(struct hm_ckpt *ck, struct hm_error *err)
{
    char *buf;
    size_t len;
    enum hm_status st = hm_read_fd(0, HM_ST_STDIN_MAX, &buf, &len, err);
    if (st != HM_OK)
        return st;
    if (hm_bundle_sniff((const unsigned char *)buf, len)) {
        st = hm_bundle_open_memory(buf, len, "-", &ck->bundle, err);
        free(buf);
        return st == HM_OK ? open_bundle_parts(ck, err) : st;
    }
    struct hm_st_file *f;
    if ((st = hm_st_open_memory(buf, len, 1, &f, err)) != HM_OK)
        return st;
    if ((st = add_st(ck, "-", f, err)) != HM_OK)
        return st;
    return load_config(ck, NULL, 0, err);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

enum hm_status hm_ckpt_open(const char *path, struct hm_ckpt **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_ckpt *ck = calloc(1, sizeof *ck);
    if (!ck || !(ck->path = strdup(path))) {
        free(ck);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    enum hm_status st;
    char *dir = NULL, *p = NULL;
    int kind;
    if (strcmp(path, "-") == 0) {
        st = open_stdin(ck, err);
    } else if (hm_bundle_detect(path)) {
        st = hm_bundle_open(path, &ck->bundle, err);
        if (st == HM_OK)
            st = open_bundle_parts(ck, err);
    } else if (hm_is_dir(path)) {
        dir = strdup(path);
        p = path_join(path, "model.safetensors.index.json");
        if (!dir || !p) {
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        } else if ((kind = hm_folder_file(p, err)) != 0) {
            st = kind > 0 ? open_index(ck, p, err) : err ? err->status : HM_ERR_INVALID;
        } else {
            free(p);
            p = path_join(path, "model.safetensors");
            if (!p)
                st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
            else if ((kind = hm_folder_file(p, err)) < 0)
                st = err ? err->status : HM_ERR_INVALID;
            else if (kind == 0)
                st = hm_error_set(err, HM_ERR_INVALID,
                                  "folder has neither model.safetensors nor "
                                  "model.safetensors.index.json");
            else
                st = add_file(ck, p, err);
        }
        if (st == HM_OK)
            st = load_config(ck, dir, 1, err);
    } else if (ends_with(path, ".json")) {
        dir = path_dir(path);
        st = dir ? open_index(ck, path, err) : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        if (st == HM_OK)
            st = load_config(ck, dir, 1, err);
    } else {
        dir = path_dir(path);
        st = dir ? add_file(ck, path, err) : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        if (st == HM_OK)
            st = load_config(ck, dir, 0, err);
    }
    if (st == HM_OK)
        st = gather(ck, err);
    /* hm.provenance is input like the rest: its shape is checked here, for
     * every tool that copies it forward or shows it */
    /* a chain of another shape is another tool's: kept verbatim, shown as
     * foreign (hm_ckpt_provenance_foreign), never a reason to refuse the
     * weights (the readers need no provenance) */
    struct hm_error pe;
    hm_error_clear(&pe);
    if (st == HM_OK && hm_provenance_check(hm_ckpt_metadata_get(ck, "hm.provenance"), &pe) != HM_OK)
        snprintf(ck->prov_foreign, sizeof ck->prov_foreign, "%s",
                 pe.msg[0] ? pe.msg : "not an hm provenance chain");
    free(dir);
    free(p);
    if (st != HM_OK) {
        hm_ckpt_close(ck);
        return st;
    }
    *out = ck;
    return HM_OK;
}

const struct hm_config *hm_ckpt_config(const struct hm_ckpt *ck) { return &ck->cfg; }
const char *hm_ckpt_config_source(const struct hm_ckpt *ck) { return ck->config_source; }
int64_t hm_ckpt_n_tensors(const struct hm_ckpt *ck) { return ck->n; }

const struct hm_ckpt_tensor *hm_ckpt_tensor_at(const struct hm_ckpt *ck, int64_t i)
{
    return (i >= 0 && i < ck->n) ? &ck->t[i] : NULL;
}

int64_t hm_ckpt_find(const struct hm_ckpt *ck, const char *name)
{
    return hm_find_sorted_name(ck->t, ck->n, sizeof *ck->t, offsetof(struct hm_ckpt_tensor, name),
                               name);
}

const void *hm_ckpt_data_view(const struct hm_ckpt *ck, int64_t i)
{
    if (i < 0 || i >= ck->n)
        return NULL;
    return hm_st_data_view(ck->files[ck->t[i].file], ck->st_index[i]);
}

static void release_written(const void *ctx, int64_t i, size_t off, size_t len)
{
    const struct hm_ckpt *ck = ctx;
    if (i >= 0 && i < ck->n)
        hm_st_data_release_range(ck->files[ck->t[i].file], ck->st_index[i], off, len);
}

enum hm_status hm_ckpt_writer_add_tensor(struct hm_st_writer *w, const char *name,
                                         const struct hm_ckpt *ck, int64_t i,
                                         struct hm_error *err)
{
    const struct hm_ckpt_tensor *t = hm_ckpt_tensor_at(ck, i);
    return hm_st_writer_add_done(w, name, t->dtype, t->ndim, t->shape, hm_ckpt_data_view(ck, i),
                                 release_written, ck, i, err);
}

void hm_ckpt_data_release(const struct hm_ckpt *ck, int64_t i)
{
    if (i >= 0 && i < ck->n)
        hm_st_data_release(ck->files[ck->t[i].file], ck->st_index[i]);
}

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, size - k, "[");
    for (int d = 0; d < ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < size)
        snprintf(buf + k, size - k, "]");
}

enum hm_status hm_ckpt_load_f32(const struct hm_ckpt *ck, const char *name, int ndim,
                                const int64_t *shape, float *dst, struct hm_error *err)
{
    int64_t i = hm_ckpt_find(ck, name);
    if (i < 0)
        return hm_error_set(err, HM_ERR_INVALID, "tensor '%s' is missing", name);
    const struct hm_ckpt_tensor *t = &ck->t[i];
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char want[128], got[128];
        shape_str(ndim, shape, want, sizeof want);
        shape_str(t->ndim, t->shape, got, sizeof got);
        return hm_error_set(err, HM_ERR_INVALID, "tensor '%s' has shape %s, expected %s",
                            name, got, want);
    }
    enum hm_status st = hm_to_f32(hm_ckpt_data_view(ck, i), t->dtype, t->numel, dst, err);
    hm_ckpt_data_release(ck, i); /* the file's pages are not a second copy of the model */
    if (st != HM_OK)
        hm_error_prefix(err, "tensor '%s': ", name);
    return st;
}

int hm_ckpt_n_files(const struct hm_ckpt *ck) { return ck->nfiles; }
const char *hm_ckpt_file_path(const struct hm_ckpt *ck, int i) { return ck->paths[i]; }
size_t hm_ckpt_file_size(const struct hm_ckpt *ck, int i) { return hm_st_file_size(ck->files[i]); }
const char *hm_ckpt_path(const struct hm_ckpt *ck) { return ck->path; }

const char *hm_ckpt_metadata_get(const struct hm_ckpt *ck, const char *key)
{
    return ck->nfiles ? hm_st_metadata_get(ck->files[0], key) : NULL;
}

const void *hm_ckpt_bundle_tokenizer(const struct hm_ckpt *ck, size_t *len)
{
    *len = ck->tok ? ck->tok_len : 0;
    return ck->tok;
}

struct hm_bundle *hm_ckpt_bundle(const struct hm_ckpt *ck) { return ck->bundle; }

const char *hm_ckpt_provenance(const struct hm_ckpt *ck)
{
    return ck->prov_foreign[0] ? NULL : hm_ckpt_metadata_get(ck, "hm.provenance");
}

const char *hm_ckpt_config_note(const struct hm_ckpt *ck)
{
    return ck->config_note[0] ? ck->config_note : NULL;
}

const char *hm_ckpt_provenance_foreign(const struct hm_ckpt *ck)
{
    return ck->prov_foreign[0] ? ck->prov_foreign : NULL;
}
