/* import_llama2c.c — llama2.c legacy checkpoints → hm llama teachers.
 * The format and the conversion are specified in import_llama2c.h. */
#include "import_llama2c.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_write.h"
#include "safetensors.h"

struct hm_llama2c {
    int fd;                        /* -1 for a memory buffer */
    const unsigned char *mem;      /* borrowed, or NULL */
    struct hm_llama2c_header h;
    struct hm_config cfg;
    struct hm_llama2c_tensor *t;   /* [n] */
    int64_t n;
};

/* Byte offsets of the arrays, in file order (each the start of [L, ...]). */
struct layout {
    uint64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq, wcls, end;
};

static int32_t rd_i32(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* *acc += 4·a·b·c bytes, checked; the old value goes to *start. */
static int advance(uint64_t *acc, uint64_t *start, int64_t a, int64_t b, int64_t c)
{
    int64_t n, cur = (int64_t)*acc;
    if (hm_mul_i64(a, b, &n) || hm_mul_i64(n, c, &n) || hm_mul_i64(n, 4, &n) ||
        hm_add_i64(cur, n, &cur))
        return -1;
    *start = *acc;
    *acc = (uint64_t)cur;
    return 0;
}

static int make_layout(const struct hm_llama2c_header *h, struct layout *o)
{
    const int64_t d = h->dim, L = h->n_layers, I = h->hidden_dim, V = h->vocab_size;
    const int64_t qd = h->n_heads * h->head_size, kvd = h->n_kv_heads * h->head_size;
    uint64_t acc = HM_LLAMA2C_HEADER_BYTES;
    memset(o, 0, sizeof *o);
    if (advance(&acc, &o->emb, V, d, 1) || advance(&acc, &o->rms_att, L, d, 1) ||
        advance(&acc, &o->wq, L, qd, d) || advance(&acc, &o->wk, L, kvd, d) ||
        advance(&acc, &o->wv, L, kvd, d) || advance(&acc, &o->wo, L, d, qd) ||
        advance(&acc, &o->rms_ffn, L, d, 1) || advance(&acc, &o->w1, L, I, d) ||
        advance(&acc, &o->w2, L, d, I) || advance(&acc, &o->w3, L, I, d) ||
        advance(&acc, &o->rms_final, d, 1, 1) ||
        advance(&acc, &o->freq, 2 * h->seq_len, h->head_size / 2, 1) ||
        (!h->shared_classifier && advance(&acc, &o->wcls, V, d, 1)))
        return -1;
    o->end = acc;
    return 0;
}

enum hm_status hm_llama2c_parse_header(const void *buf, size_t len, uint64_t file_size,
                                       struct hm_llama2c_header *h, struct hm_error *err)
{
    static const char *const field[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                         "n_kv_heads", "vocab_size", "seq_len"};
    const unsigned char *p = buf;
    int64_t v[7];
    memset(h, 0, sizeof *h);
    if (file_size < HM_LLAMA2C_HEADER_BYTES || len < HM_LLAMA2C_HEADER_BYTES)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "file is %llu bytes, shorter than the %d-byte llama2.c header",
                            (unsigned long long)file_size, HM_LLAMA2C_HEADER_BYTES);
    if ((uint32_t)rd_i32(p) == HM_LLAMA2C_MAGIC)
        return hm_error_set(err, HM_ERR_UNSUPPORTED,
                            "llama2.c version %d export (magic \"ak42\"): only the legacy "
                            "version 0 format is supported (llama2.c export.py --version 0)",
                            (int)rd_i32(p + 4));
    for (int i = 0; i < 7; i++) {
        v[i] = rd_i32(p + 4 * i);
        if (i == 5 ? v[i] == 0 : v[i] <= 0)
            return hm_error_set_at(err, HM_ERR_FORMAT, 4 * i,
                                   "header field '%s' is %lld; it must be %s", field[i],
                                   (long long)v[i], i == 5 ? "non-zero" : "positive");
    }
    h->dim = v[0];
    h->hidden_dim = v[1];
    h->n_layers = v[2];
    h->n_heads = v[3];
    h->n_kv_heads = v[4];
    h->shared_classifier = v[5] > 0;
    h->vocab_size = v[5] > 0 ? v[5] : -v[5]; /* int64: |INT32_MIN| fits */
    h->seq_len = v[6];
    if (h->dim % h->n_heads)
        return hm_error_set(err, HM_ERR_FORMAT, "dim %lld is not a multiple of n_heads %lld",
                            (long long)h->dim, (long long)h->n_heads);
    if (h->n_kv_heads > h->n_heads || h->n_heads % h->n_kv_heads)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "n_heads %lld is not a multiple of n_kv_heads %lld",
                            (long long)h->n_heads, (long long)h->n_kv_heads);
    h->head_size = h->dim / h->n_heads;
    if (h->head_size % 2)
        return hm_error_set(err, HM_ERR_FORMAT,
                            "head size %lld (dim %lld / n_heads %lld) is odd: RoPE rotates pairs",
                            (long long)h->head_size, (long long)h->dim, (long long)h->n_heads);
    struct layout o;
    if (make_layout(h, &o))
        return hm_error_set(err, HM_ERR_FORMAT,
                            "header sizes overflow (dim %lld, hidden_dim %lld, n_layers %lld, "
                            "vocab_size %lld, seq_len %lld)",
                            (long long)h->dim, (long long)h->hidden_dim,
                            (long long)h->n_layers, (long long)h->vocab_size,
                            (long long)h->seq_len);
    h->file_bytes = o.end;
    if (file_size != o.end) {
        unsigned long long diff = file_size > o.end ? file_size - o.end : o.end - file_size;
        return hm_error_set(err, HM_ERR_FORMAT,
                            "file is %llu bytes but its header (dim %lld, hidden_dim %lld, "
                            "n_layers %lld, n_heads %lld, n_kv_heads %lld, vocab_size %lld%s, "
                            "seq_len %lld) implies %llu bytes: %llu %s",
                            (unsigned long long)file_size, (long long)h->dim,
                            (long long)h->hidden_dim, (long long)h->n_layers,
                            (long long)h->n_heads, (long long)h->n_kv_heads,
                            (long long)h->vocab_size,
                            h->shared_classifier ? " tied" : " untied",
                            (long long)h->seq_len, (unsigned long long)o.end, diff,
                            file_size > o.end ? "trailing bytes" : "bytes missing (truncated)");
    }
    return HM_OK;
}

static enum hm_status make_config(const struct hm_llama2c_header *h, struct hm_config *cfg,
                                  struct hm_error *err)
{
    hm_config_defaults(cfg);
    cfg->family = HM_FAMILY_LLAMA;
    cfg->mixer = HM_MIXER_SOFTMAX;
    cfg->vocab_size = h->vocab_size;
    cfg->hidden_size = h->dim;
    cfg->intermediate_size = h->hidden_dim;
    cfg->num_hidden_layers = h->n_layers;
    cfg->num_attention_heads = h->n_heads;
    cfg->num_key_value_heads = h->n_kv_heads;
    cfg->head_dim = h->head_size;
    cfg->max_position_embeddings = h->seq_len;
    cfg->rotary_pct = 1.0;
    cfg->rotary_emb_base = 10000.0; /* run.c: 1 / 10000^(2i / p) */
    cfg->layer_norm_eps = 1e-5;     /* run.c rmsnorm: ss += 1e-5f */
    cfg->use_parallel_residual = 0;
    cfg->hidden_act = HM_ACT_SILU;
    cfg->attention_bias = 0;
    cfg->mlp_bias = 0;
    cfg->tie_word_embeddings = h->shared_classifier;
    cfg->rope_scaling.type = HM_ROPE_NONE;
    enum hm_status st = hm_config_finish(cfg, err);
    if (st != HM_OK)
        hm_error_prefix(err, "unsupported llama2.c header: ");
    return st;
}

static void add_tensor(struct hm_llama2c *m, const char *name, const char *src, int64_t layer,
                       int64_t rows, int64_t cols, uint64_t offset, int64_t rope_heads)
{
    struct hm_llama2c_tensor *t = &m->t[m->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->src_name = src;
    t->layer = layer;
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 0;
    t->numel = rows * (cols > 0 ? cols : 1);
    t->offset = offset;
    t->rope_heads = rope_heads;
}

static enum hm_status build(struct hm_llama2c *m, struct hm_error *err)
{
    const struct hm_llama2c_header *h = &m->h;
    const int64_t d = h->dim, I = h->hidden_dim, L = h->n_layers, V = h->vocab_size;
    const int64_t qd = h->n_heads * h->head_size, kvd = h->n_kv_heads * h->head_size;
    struct layout o;
    enum hm_status st = make_config(h, &m->cfg, err);
    if (st != HM_OK)
        return st;
    if (make_layout(h, &o)) /* parse_header already proved it fits */
        return hm_error_set(err, HM_ERR_FORMAT, "header sizes overflow");
    m->t = calloc((size_t)(9 * L + 3), sizeof *m->t);
    if (!m->t)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for %lld layers", (long long)L);
    char nm[80];
    add_tensor(m, "model.embed_tokens.weight", "token_embedding", -1, V, d, o.emb, 0);
    for (int64_t l = 0; l < L; l++) {
        const uint64_t ll = (uint64_t)l;
#define NAME(suffix) (snprintf(nm, sizeof nm, "model.layers.%lld." suffix, (long long)l), nm)
        add_tensor(m, NAME("input_layernorm.weight"), "rms_att", l, d, 0,
                   o.rms_att + ll * 4 * (uint64_t)d, 0);
        add_tensor(m, NAME("self_attn.q_proj.weight"), "wq", l, qd, d,
                   o.wq + ll * 4 * (uint64_t)(qd * d), h->n_heads);
        add_tensor(m, NAME("self_attn.k_proj.weight"), "wk", l, kvd, d,
                   o.wk + ll * 4 * (uint64_t)(kvd * d), h->n_kv_heads);
        add_tensor(m, NAME("self_attn.v_proj.weight"), "wv", l, kvd, d,
                   o.wv + ll * 4 * (uint64_t)(kvd * d), 0);
        add_tensor(m, NAME("self_attn.o_proj.weight"), "wo", l, d, qd,
                   o.wo + ll * 4 * (uint64_t)(d * qd), 0);
        add_tensor(m, NAME("post_attention_layernorm.weight"), "rms_ffn", l, d, 0,
                   o.rms_ffn + ll * 4 * (uint64_t)d, 0);
        add_tensor(m, NAME("mlp.gate_proj.weight"), "w1", l, I, d,
                   o.w1 + ll * 4 * (uint64_t)(I * d), 0);
        add_tensor(m, NAME("mlp.up_proj.weight"), "w3", l, I, d,
                   o.w3 + ll * 4 * (uint64_t)(I * d), 0);
        add_tensor(m, NAME("mlp.down_proj.weight"), "w2", l, d, I,
                   o.w2 + ll * 4 * (uint64_t)(d * I), 0);
#undef NAME
    }
    add_tensor(m, "model.norm.weight", "rms_final", -1, d, 0, o.rms_final, 0);
    if (!h->shared_classifier)
        add_tensor(m, "lm_head.weight", "wcls", -1, V, d, o.wcls, 0);
    return HM_OK;
}

static enum hm_status open_common(struct hm_llama2c *m, const unsigned char *head, size_t len,
                                  uint64_t size, struct hm_llama2c **out, struct hm_error *err)
{
    enum hm_status st = hm_llama2c_parse_header(head, len, size, &m->h, err);
    if (st == HM_OK)
        st = build(m, err);
    if (st != HM_OK) {
        hm_llama2c_close(m);
        return st;
    }
    *out = m;
    return HM_OK;
}

enum hm_status hm_llama2c_open(const char *path, struct hm_llama2c **out, struct hm_error *err)
{
    *out = NULL;
    struct hm_llama2c *m = calloc(1, sizeof *m);
    if (!m)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    m->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (m->fd < 0) {
        int e = errno;
        free(m);
        return hm_error_set_errno(err, HM_ERR_IO, e, "cannot open");
    }
    struct stat sb;
    enum hm_status st = HM_OK;
    if (fstat(m->fd, &sb) != 0)
        st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot stat");
    else if (S_ISDIR(sb.st_mode))
        st = hm_error_set(err, HM_ERR_INVALID, "is a directory, not a llama2.c checkpoint");
    else if (!S_ISREG(sb.st_mode))
        st = hm_error_set(err, HM_ERR_INVALID,
                          "not a regular file (a llama2.c checkpoint is read by offset)");
    if (st != HM_OK) {
        hm_llama2c_close(m);
        return st;
    }
    int fl = fcntl(m->fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(m->fd, F_SETFL, fl & ~O_NONBLOCK);
    unsigned char head[HM_LLAMA2C_HEADER_BYTES];
    ssize_t got = pread(m->fd, head, sizeof head, 0);
    if (got < 0) {
        int e = errno;
        hm_llama2c_close(m);
        return hm_error_set_errno(err, HM_ERR_IO, e, "cannot read the header");
    }
    return open_common(m, head, (size_t)got, (uint64_t)sb.st_size, out, err);
}

enum hm_status hm_llama2c_open_memory(const void *data, size_t len, struct hm_llama2c **out,
                                      struct hm_error *err)
{
    *out = NULL;
    struct hm_llama2c *m = calloc(1, sizeof *m);
    if (!m)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    m->fd = -1;
    m->mem = data;
    return open_common(m, data, len, (uint64_t)len, out, err);
}

void hm_llama2c_close(struct hm_llama2c *m)
{
    if (!m)
        return;
    if (m->fd >= 0)
        close(m->fd);
    free(m->t);
    free(m);
}

const struct hm_llama2c_header *hm_llama2c_get_header(const struct hm_llama2c *m)
{
    return &m->h;
}

const struct hm_config *hm_llama2c_get_config(const struct hm_llama2c *m) { return &m->cfg; }

int64_t hm_llama2c_n_tensors(const struct hm_llama2c *m) { return m->n; }

const struct hm_llama2c_tensor *hm_llama2c_tensor_at(const struct hm_llama2c *m, int64_t i)
{
    return i >= 0 && i < m->n ? &m->t[i] : NULL;
}

int64_t hm_llama2c_n_params(const struct hm_llama2c *m)
{
    int64_t s = 0;
    for (int64_t i = 0; i < m->n; i++)
        s += m->t[i].numel;
    return s;
}

/* n floats at byte offset off into dst (host order). The range is inside
 * the validated file; a short read means the file changed under us. */
static enum hm_status read_floats(const struct hm_llama2c *m, uint64_t off, float *dst,
                                  int64_t n, struct hm_error *err)
{
    size_t bytes = (size_t)n * sizeof(float);
    if (m->fd < 0) {
        memcpy(dst, m->mem + off, bytes);
    } else {
        unsigned char *p = (unsigned char *)dst;
        size_t done = 0;
        while (done < bytes) {
            ssize_t r = pread(m->fd, p + done, bytes - done, (off_t)(off + done));
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return hm_error_set_errno(err, HM_ERR_IO, errno, "read failed at byte %llu",
                                          (unsigned long long)(off + done));
            if (r == 0)
                return hm_error_set_at(err, HM_ERR_IO, (int64_t)(off + done),
                                       "the file shrank while it was being read");
            done += (size_t)r;
        }
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &dst[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&dst[i], &u, 4);
    }
#endif
    return HM_OK;
}

static void describe(const struct hm_llama2c_tensor *t, char *buf, size_t size)
{
    if (t->layer >= 0)
        snprintf(buf, size, "llama2.c '%s' layer %lld", t->src_name, (long long)t->layer);
    else
        snprintf(buf, size, "llama2.c '%s'", t->src_name);
}

/* The first non-finite value of x[n] (element base + i of tensor t). */
static enum hm_status check_chunk(const struct hm_llama2c_tensor *t, const float *x, int64_t n,
                                  int64_t base, int name_it, struct hm_error *err)
{
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(x[i]))
            continue;
        char what[96];
        describe(t, what, sizeof what);
        const char *val = isnan(x[i]) ? "NaN" : x[i] > 0 ? "+Inf" : "-Inf";
        int64_t at = (int64_t)t->offset + 4 * (base + i);
        if (name_it)
            return hm_error_set_at(err, HM_ERR_NUMERIC,
                                   at, "tensor '%s' (%s) holds %s at element %lld", t->name,
                                   what, val, (long long)(base + i));
        return hm_error_set_at(err, HM_ERR_NUMERIC, at, "%s holds %s at element %lld", what,
                               val, (long long)(base + i));
    }
    return HM_OK;
}

/* Rows of each head of x [heads·p, cols]: row 2i + s → row i + s·p/2.
 * tmp: [p, cols]. */
static void permute_rope_rows(float *x, int64_t heads, int64_t p, int64_t cols, float *tmp)
{
    const size_t row = (size_t)cols * sizeof(float);
    for (int64_t hh = 0; hh < heads; hh++) {
        float *blk = x + hh * p * cols;
        memcpy(tmp, blk, (size_t)p * row);
        for (int64_t j = 0; j < p; j++) {
            int64_t i = j / 2, s = j % 2;
            memcpy(blk + (i + s * (p / 2)) * cols, tmp + j * cols, row);
        }
    }
}

static enum hm_status read_tensor(const struct hm_llama2c *m, int64_t idx, float *dst,
                                  int name_it, struct hm_error *err)
{
    if (idx < 0 || idx >= m->n)
        return hm_error_set(err, HM_ERR_INVALID, "tensor index %lld is out of range",
                            (long long)idx);
    const struct hm_llama2c_tensor *t = &m->t[idx];
    enum hm_status st = read_floats(m, t->offset, dst, t->numel, err);
    if (st == HM_OK)
        st = check_chunk(t, dst, t->numel, 0, name_it, err);
    if (st != HM_OK || t->rope_heads == 0)
        return st;
    const int64_t p = m->h.head_size, cols = t->shape[1];
    float *tmp = malloc((size_t)(p * cols) * sizeof *tmp); /* [p, cols] */
    if (!tmp)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    permute_rope_rows(dst, t->rope_heads, p, cols, tmp);
    free(tmp);
    return HM_OK;
}

enum hm_status hm_llama2c_read_tensor(const struct hm_llama2c *m, int64_t i, float *dst,
                                      struct hm_error *err)
{
    return read_tensor(m, i, dst, 1, err);
}

enum hm_status hm_llama2c_check_finite(const struct hm_llama2c *m, struct hm_error *err)
{
    enum { CHUNK = 1 << 16 };
    float *buf = malloc(CHUNK * sizeof *buf); /* [CHUNK] */
    enum hm_status st = HM_OK;
    if (!buf)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < m->n && st == HM_OK; i++) {
        const struct hm_llama2c_tensor *t = &m->t[i];
        for (int64_t e = 0; e < t->numel && st == HM_OK; e += CHUNK) {
            int64_t k = t->numel - e < CHUNK ? t->numel - e : CHUNK;
            st = read_floats(m, t->offset + 4 * (uint64_t)e, buf, k, err);
            if (st == HM_OK)
                st = check_chunk(t, buf, k, e, 1, err);
        }
    }
    free(buf);
    return st;
}

static enum hm_status fill(void *ctx, int64_t index, size_t off, void *dst, size_t nbytes,
                           struct hm_error *err)
{
    (void)off; /* added whole (hm_st_writer_add_fill): off is 0 */
    const struct hm_llama2c *m = ctx;
    if (index < 0 || index >= m->n || nbytes != (size_t)m->t[index].numel * sizeof(float))
        return hm_error_set(err, HM_ERR_INVALID, "internal error: tensor %lld size mismatch",
                            (long long)index);
    /* the writer prefixes the tensor's name */
    return read_tensor(m, index, dst, 0, err);
}

enum hm_status hm_llama2c_write(const struct hm_llama2c *m, const char *path, int flags,
                                const char *provenance, struct hm_error *err)
{
    enum hm_status st = hm_llama2c_check_finite(m, err);
    if (st != HM_OK)
        return st;
    struct hm_st_writer *w = hm_st_writer_new();
    if (!w)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < m->n && st == HM_OK; i++)
        st = hm_st_writer_add_fill(w, m->t[i].name, HM_DTYPE_F32, m->t[i].ndim, m->t[i].shape,
                                   fill, (void *)m, err);
    if (st == HM_OK)
        st = hm_ckpt_write_writer(w, &m->cfg, provenance, NULL, path, flags, err);
    hm_st_writer_free(w);
    return st;
}
