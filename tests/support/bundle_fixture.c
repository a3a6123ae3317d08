/* bundle_fixture.c — see bundle_fixture.h. */
#include "bundle_fixture.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "archive_write.h"
#include "atomic_file.h"
#include "checkpoint.h"
#include "model.h"
#include "model_forward.h"
#include "model_views.h"
#include "presets.h"
#include "provenance.h"
#include "testutil.h"

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bundle_fixture: %s: %s\n", what, msg);
    abort();
}

static int64_t g_vocab;

void tu_bundle_vocab(int64_t vocab) { g_vocab = vocab; }

struct hm_config tu_bundle_config(enum hm_family family, enum hm_mixer mixer)
{
    struct hm_config c;
    struct hm_error err;
    const char *json =
        family == HM_FAMILY_LLAMA
            ? "{\"model_type\": \"llama\", \"vocab_size\": 257, \"hidden_size\": 32, "
              "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
              "\"intermediate_size\": 48, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-5}"
            : "{\"model_type\": \"gpt_neox\", \"vocab_size\": 257, \"hidden_size\": 32, "
              "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 64, "
              "\"max_position_embeddings\": 64, \"rotary_pct\": 0.5}";
    if (hm_config_parse(json, strlen(json), &c, &err) != HM_OK)
        die("config", err.msg);
    c.mixer = mixer;
    if (g_vocab)
        c.vocab_size = g_vocab;
    c.feature_dim = mixer == HM_MIXER_SOFTMAX ? 0 : 6;
    c.conv_width = 4;
    c.components = HM_COMP_ALL;
    if (hm_config_finish(&c, &err) != HM_OK)
        die("config", err.msg);
    return c;
}

void tu_bundle_model(const char *path, enum hm_family family, enum hm_mixer mixer,
                     enum hm_dtype dtype, const char *tokenizer, uint64_t seed)
{
    struct hm_config c = tu_bundle_config(family, mixer);
    struct hm_model *m;
    struct hm_error err;
    if (hm_model_new(&c, &m, &err) != HM_OK)
        die("model", err.msg);
    hm_model_init_random(m, seed, 0.2);
    /* no weight at a special value: norms and mixer extras move too */
    uint64_t s = seed + 7;
    for (int64_t i = 0; i < m->n_views; i++) {
        enum hm_param_group g = m->views[i].spec.group;
        if (g == HM_PG_NORM || g == HM_PG_FEATURE_MAP || g == HM_PG_SSM || g == HM_PG_CONV ||
            g == HM_PG_GATE)
            for (int64_t k = 0; k < m->views[i].numel; k++)
                m->views[i].data[k] += (float)(0.05 * tu_rand_normal(&s));
    }
    for (int64_t l = 0; mixer == HM_MIXER_HEDGEMAMBA && l < c.num_hidden_layers; l++)
        for (int64_t h = 0; h < c.num_attention_heads; h++)
            m->layers[l].A[h] = -fabsf(m->layers[l].A[h]);
    char *args[] = {"hm-fixture", "--tokenizer", (char *)tokenizer, "in.txt"};
    struct hm_prov_entry e = {"hm-fixture", tokenizer ? 4 : 1, args, NULL, 0, 0, 0, 1234, 2.5};
    char *prov = NULL;
    if (hm_provenance_append(NULL, &e, &prov, &err) != HM_OK ||
        hm_model_save(m, path, HM_AFILE_FORCE, prov, dtype, NULL, &err) != HM_OK)
        die(path, err.msg);
    free(prov);
    hm_model_free(m);
}

float *tu_bundle_logits(const char *ckpt, const int32_t *tok, int64_t T, int64_t *V)
{
    struct hm_ckpt *ck;
    struct hm_model *m;
    struct hm_error err;
    const struct hm_backend *be = hm_backend_get("ref");
    if (hm_ckpt_open(ckpt, &ck, &err) != HM_OK || hm_model_load(ck, &m, &err) != HM_OK)
        die(ckpt, err.msg);
    hm_ckpt_close(ck);
    if (hm_model_place(m, be, &err) != HM_OK)
        die(ckpt, err.msg);
    *V = m->cfg.vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)(T * *V));
    struct hm_model_ws ws;
    hm_model_ws_init(&ws);
    if (hm_model_forward(m, be, tok, T, lg, &ws, &err) != HM_OK)
        die(ckpt, err.msg);
    hm_model_ws_release(&ws);
    hm_model_free(m);
    return lg;
}

void tu_write_archive(const char *path, int format, const struct tu_entry *e, int n)
{
    struct archive *a = archive_write_new();
    if (format == HM_ARCHIVE_ZIP)
        archive_write_set_format_zip(a);
    else
        archive_write_set_format_pax_restricted(a);
    if (format == HM_ARCHIVE_TAR_GZ)
        archive_write_add_filter_gzip(a);
    if (format == HM_ARCHIVE_TAR_XZ)
        archive_write_add_filter_xz(a);
    if (format == HM_ARCHIVE_TAR_ZST)
        archive_write_add_filter_zstd(a);
    if (archive_write_open_filename(a, path) != ARCHIVE_OK)
        die(path, archive_error_string(a));
    for (int i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_copy_pathname(ae, e[i].name);
        archive_entry_set_perm(ae, 0644);
        archive_entry_set_mtime(ae, 0, 0);
        switch (e[i].type) {
        case 'l':
            archive_entry_set_filetype(ae, AE_IFLNK);
            archive_entry_copy_symlink(ae, e[i].target);
            break;
        case 'h':
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_copy_hardlink(ae, e[i].target);
            break;
        case 'c': archive_entry_set_filetype(ae, AE_IFCHR); archive_entry_set_rdev(ae, 0x0103); break;
        case 'b': archive_entry_set_filetype(ae, AE_IFBLK); archive_entry_set_rdev(ae, 0x0801); break;
        case 'p': archive_entry_set_filetype(ae, AE_IFIFO); break;
        case 'd': archive_entry_set_filetype(ae, AE_IFDIR); archive_entry_set_perm(ae, 0755); break;
        default:
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_size(ae, (la_int64_t)e[i].len);
        }
        if (archive_write_header(a, ae) != ARCHIVE_OK)
            die(e[i].name, archive_error_string(a));
        if (e[i].type == 0 && e[i].len &&
            archive_write_data(a, e[i].data, e[i].len) != (la_ssize_t)e[i].len)
            die(e[i].name, archive_error_string(a));
        archive_entry_free(ae);
    }
    if (archive_write_close(a) != ARCHIVE_OK)
        die(path, archive_error_string(a));
    archive_write_free(a);
}

static void read_dir(const char *root, const char *rel, struct tu_entry **e, int *n, int *cap)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
    struct dirent **names;
    int k = scandir(dir, &names, NULL, alphasort);
    if (k < 0)
        die(dir, "cannot list");
    for (int i = 0; i < k; i++) {
        const char *nm = names[i]->d_name;
        if (strcmp(nm, ".") && strcmp(nm, "..")) {
            char r[4096], full[8192];
            snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", nm);
            snprintf(full, sizeof full, "%s/%s", root, r);
            struct stat sb;
            if (stat(full, &sb) == 0 && S_ISDIR(sb.st_mode)) {
                read_dir(root, r, e, n, cap);
            } else {
                if (*n == *cap)
                    *e = realloc(*e, sizeof **e * (size_t)(*cap = *cap * 2 + 8));
                size_t len;
                char *data = tu_read_file(full, &len);
                (*e)[(*n)++] = (struct tu_entry){strdup(r), data, len, 0, NULL};
            }
        }
        free(names[i]);
    }
    free(names);
}

struct tu_entry *tu_read_dir_entries(const char *dir, int *n)
{
    struct tu_entry *e = NULL;
    int cap = 0;
    *n = 0;
    read_dir(dir, "", &e, n, &cap);
    return e;
}

void tu_free_entries(struct tu_entry *e, int n)
{
    for (int i = 0; i < n; i++) {
        free((void *)e[i].name);
        free((void *)e[i].data);
    }
    free(e);
}
