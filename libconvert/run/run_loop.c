/* run_loop.c — hm_run_train (run.h): the step loop.
 *
 * A step has three parts, in this order:
 *   compute   every process: gradients of its micro-batches, the gradient
 *             all-reduce hook, Σ g², and ONE download of the step's scalar
 *             block (each micro-batch's loss sums, then Σ g²);
 *   decide    from those scalars only: the non-finite flags, made every
 *             process's (run_agree) before anyone acts on them;
 *   act       every process updates (or everyone stops with the same
 *             error); validation, --stop-after and --save-every follow the
 *             step number; the primary alone logs, reports and saves. */
#include "run_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fileio.h"

/* What the loop holds besides struct run. */
struct loop {
    struct hm_tok_file *data, *val;
    struct hm_batcher bat;
    FILE *logf;             /* the log: the primary's, NULL elsewhere or without --log */
    int32_t *tokens;        /* [batch, seq_len + 1] host: one micro-batch */
    double *aux, *aux_sum;  /* [n_aux] host: a micro-batch's, the step's mean */
    int64_t n_scal;         /* accum · n_sums + 1, or + np with ZeRO-1 (Σ g² per tensor) */
    double *scal;           /* [n_scal] backend: the step's scalar block */
    double *hscal;          /* [n_scal] host: its one download a step */
    double *sums;           /* [processes, n_scal] host: every process's scalar
                               block of the step (run_allgather) */
};

/* What a step's compute leaves for the decision. */
struct step {
    double t_start, lr;
    double loss;       /* mean over the micro-batches */
    double grad_norm;  /* sqrt(Σ g²) */
};

/* The step's decision flags (0/1), reduced by max across processes. */
enum { FLAG_LOSS_NONFINITE, FLAG_GRAD_NONFINITE, N_FLAGS };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- setup ------------------------------------------------------------------ */

static enum hm_status open_token_file(const char *path, int64_t V, struct hm_tok_file **out,
                                      struct hm_error *err)
{
    enum hm_status st = hm_tok_open(path, out, err);
    if (st != HM_OK) {
        hm_error_prefix(err, "cannot read '%s': ", path);
        return st;
    }
    if (hm_tok_vocab(*out) > (uint64_t)V)
        return hm_error_set(err, HM_ERR_INVALID,
                            "token file '%s' has vocabulary %llu, larger than the model's %lld",
                            path, (unsigned long long)hm_tok_vocab(*out), (long long)V);
    return HM_OK;
}

/* Data, validation data, batches, the optimizer: every process. The checks
 * of what only the primary writes (an existing state) are the primary's. */
static enum hm_status open_inputs(struct run *r, struct loop *l, struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    const int64_t V = r->model->cfg->vocab_size;
    enum hm_status st;
    if ((st = open_token_file(o->data_path, V, &l->data, err)) != HM_OK)
        return st;
    r->data_hash = hm_tok_checksum(l->data);
    r->base_hash = run_base_checkpoint_hash(o->in_path);
    if (r->primary && !o->resume && !o->force && hm_is_file(r->state_path))
        return hm_error_set(err, HM_ERR_INVALID,
                            "state '%s' exists (use -f to replace it or --resume to continue)",
                            r->state_path);
    if (o->val_path && (st = open_token_file(o->val_path, V, &l->val, err)) != HM_OK)
        return st;
    if ((st = hm_batcher_init(&l->bat, l->data, o->batch, o->seq_len, o->order, o->seed, err)) !=
        HM_OK) {
        hm_error_prefix(err, "'%s': ", o->data_path);
        return st;
    }
    r->p = r->model->params(r->model->ctx, &r->np);
    if ((st = run_shares_init(r, err)) != HM_OK)
        return st;
    /* several processes: one agreement on inputs, flags and state before
     * any other collective */
    return run_agree_start(r, l->val ? hm_tok_checksum(l->val) : 0, err);
}

/* --resume: every process loads the state; the primary trims the log to
 * it. Then the primary opens the log. */
static enum hm_status resume_and_open_log(struct run *r, struct loop *l, struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    enum hm_status st;
    if (o->resume) {
        if ((st = run_load_state(r, err)) != HM_OK)
            return st;
        if (r->primary && o->log_path && (st = run_trim_log(o->log_path, r->step, err)) != HM_OK) {
            hm_error_prefix(err, "log '%s': ", o->log_path);
            return st;
        }
    } else if (r->primary && o->log_path && hm_is_file(o->log_path) && !o->force) {
        return hm_error_set(err, HM_ERR_INVALID,
                            "log '%s' exists (use -f to replace it or --resume to continue)",
                            o->log_path);
    }
    if (r->primary && o->log_path && !(l->logf = fopen(o->log_path, o->resume ? "a" : "w")))
        return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot open log '%s'", o->log_path);
    return HM_OK;
}

static enum hm_status alloc_buffers(struct run *r, struct loop *l, struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    const struct hm_run_model *m = r->model;
    l->tokens = malloc(sizeof(int32_t) * (size_t)(o->batch * (o->seq_len + 1)));
    l->aux = calloc((size_t)m->n_aux + 1, sizeof(double));
    l->aux_sum = calloc((size_t)m->n_aux + 1, sizeof(double));
    l->n_scal = o->accum * m->n_sums + (r->zero1 ? r->np : 1);
    l->scal = hm_backend_alloc(m->be, sizeof(double) * (size_t)l->n_scal);
    l->hscal = calloc((size_t)l->n_scal, sizeof(double));
    l->sums = calloc((size_t)(hm_run_size(o->comm) * l->n_scal), sizeof(double));
    if (!l->tokens || !l->aux || !l->aux_sum || !l->scal || !l->hscal || !l->sums)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    /* one process summing several micro-batches keeps the sum itself */
    if (run_micro_batches(r) > 1 && hm_run_size(o->comm) == 1 &&
        !(r->acc = hm_backend_alloc(m->be, sizeof(float) * (size_t)(r->off[r->np] + 1))))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory for the gradient sum");
    return HM_OK;
}

static void loop_release(struct run *r, struct loop *l)
{
    free(l->tokens);
    free(l->aux);
    free(l->aux_sum);
    free(l->hscal);
    free(l->sums);
    hm_backend_free(r->model->be, (void **)&l->scal);
    hm_backend_free(r->model->be, (void **)&r->acc);
    hm_batcher_release(&l->bat);
    hm_tok_close(l->data);
    hm_tok_close(l->val);
}

/* ---- one step ----------------------------------------------------------------- */

/* Step s's gradients and scalars: the one read of backend memory a step. */
static enum hm_status step_compute(struct run *r, struct loop *l, int64_t s, struct step *sp,
                                   struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    const struct hm_run_model *m = r->model;
    const size_t scal_bytes = sizeof(double) * (size_t)l->n_scal;
    const int N = hm_run_size(o->comm), rank = o->comm ? o->comm->rank : 0;
    const int64_t G = run_micro_batches(r), A = o->accum, ns = m->n_sums;
    enum hm_status st;
    sp->t_start = now_s();
    sp->loss = 0;
    sp->lr = hm_lr_at(o->lr, s, o->steps, o->warmup);
    memset(l->aux_sum, 0, sizeof(double) * (size_t)m->n_aux);
    memset(l->hscal, 0, scal_bytes);
    hm_backend_upload(m->be, l->scal, l->hscal, scal_bytes);
    /* this process's micro-batches: a-th is m = a·N + rank of the step's G */
    for (int64_t a = 0; a < A; a++) {
        if (a == 0 || G > 1)
            m->zero_grad(m->ctx);
        if ((st = hm_batcher_get(&l->bat, s * G + a * N + rank, l->tokens, err)) != HM_OK)
            return st;
        if ((st = m->accumulate(m->ctx, l->tokens, l->scal + a * ns, err)) != HM_OK ||
            (st = run_fold_grads(r, a, err)) != HM_OK)
            return st;
    }
    double *sq = l->scal + A * ns; /* Σ g²: one slot, or one per tensor (ZeRO-1) */
    if (!r->zero1) {
        if ((st = run_gather_grads(r, err)) != HM_OK)
            return st;
        hm_grad_sqnorm(m->be, r->p, r->np, sq);
    } else {
        /* each owner its tensors' sums, added below in tensor order as
         * hm_grad_sqnorm adds them */
        if ((st = run_own_grads(r, err)) != HM_OK)
            return st;
        for (int64_t i = r->own0; i < r->own1; i++)
            hm_grad_sqnorm(m->be, r->p + i, 1, sq + i);
    }
    hm_backend_download(m->be, l->hscal, l->scal, scal_bytes);
    if ((st = hm_backend_sync(m->be, err)) != HM_OK ||
        (st = run_allgather(r, l->hscal, l->n_scal, l->sums, err)) != HM_OK)
        return st;
    /* the losses in the order of m, as one process with --grad-accum G */
    for (int64_t mb = 0; mb < G; mb++) {
        double loss = 0;
        m->loss_of(m->ctx, l->sums + (mb % N) * l->n_scal + (mb / N) * ns, &loss, l->aux);
        sp->loss += loss / (double)G;
        for (int i = 0; i < m->n_aux; i++)
            l->aux_sum[i] += l->aux[i] / (double)G;
    }
    double sumsq = l->hscal[A * ns];
    if (r->zero1) {
        sumsq = 0;
        for (int q = 0; q < N; q++)
            for (int64_t i = r->first[q]; i < r->first[q + 1]; i++)
                sumsq += l->sums[q * l->n_scal + A * ns + i];
    }
    sp->grad_norm = sqrt(sumsq);
    return HM_OK;
}

/* The NaN guard's stop, taken by every process once the flags agree: name
 * the tensor that went non-finite, the primary writes the last good state
 * (the weights before this step), everyone fails with the same message. */
static enum hm_status nonfinite_stop(struct run *r, const int *flags, int64_t s,
                                     struct hm_error *err)
{
    const struct hm_run_opts *o = r->o;
    const struct hm_run_model *m = r->model;
    const int to_file = strcmp(o->out_path, "-") != 0;
    /* a weight (what makes the loss NaN), else the first gradient; one
     * download per tensor, on this rare path only */
    const char *bad = hm_params_first_nonfinite(m->be, r->p, r->np, 0);
    struct hm_error e2;
    if (r->zero1) /* every gradient, not only the owned ones */
        run_gather_grads(r, &e2);
    if (!bad)
        bad = hm_params_first_nonfinite(m->be, r->p, r->np, 1);
    int save_failed = 0;
    if (to_file)
        save_failed = run_save_state(r, &e2) != HM_OK;
    run_agree(r, &save_failed, 1);
    return hm_error_set(err, HM_ERR_NUMERIC, "non-finite %s at step %lld%s%s%s; %s",
                        flags[FLAG_LOSS_NONFINITE] ? "loss" : "gradient", (long long)(s + 1),
                        bad ? " (first in tensor '" : "", bad ? bad : "", bad ? "')" : "",
                        !save_failed && to_file ? "the last good state was saved (see --resume)"
                                                : "no state was saved");
}

/* ---- the loop ------------------------------------------------------------------ */

enum hm_status hm_run_train(const struct hm_run_model *model, const struct hm_run_opts *o,
                            hm_run_progress_fn progress, void *pctx,
                            struct hm_run_report *final, struct hm_error *err)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.model = model;
    r.o = o;
    r.primary = hm_run_is_primary(o->comm);
    struct loop l;
    memset(&l, 0, sizeof l);
    const time_t t0 = time(NULL);
    enum hm_status st;

    size_t n = strlen(o->out_path);
    r.state_path = malloc(n + 8);
    if (!r.state_path)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    snprintf(r.state_path, n + 8, "%s.state", o->out_path);
    if ((st = open_inputs(&r, &l, err)) != HM_OK ||
        (st = resume_and_open_log(&r, &l, err)) != HM_OK ||
        (st = alloc_buffers(&r, &l, err)) != HM_OK)
        goto out;

    struct hm_run_report rep = {.step = r.step, .steps = o->steps, .tokens = r.tokens,
                                .val_loss = NAN, .loss = NAN};
    double last_loss = NAN;
    const int64_t start_step = r.step;
    const int64_t step_tokens = o->batch * o->seq_len * run_micro_batches(&r);
    for (int64_t s = r.step; s < o->steps; s++) {
        /* compute */
        struct step sp;
        if ((st = step_compute(&r, &l, s, &sp, err)) != HM_OK)
            goto out;
        /* decide: from the downloaded scalars, the same on every process */
        int flags[N_FLAGS] = {[FLAG_LOSS_NONFINITE] = !isfinite(sp.loss),
                              [FLAG_GRAD_NONFINITE] = !isfinite(sp.grad_norm)};
        run_agree(&r, flags, N_FLAGS);
        if (flags[FLAG_LOSS_NONFINITE] || flags[FLAG_GRAD_NONFINITE]) {
            st = nonfinite_stop(&r, flags, s, err);
            goto out;
        }
        /* act: every process updates */
        hm_optim_step(&r.opt, model->be, (struct hm_opt_param *)r.p + r.own0,
                      r.own1 - r.own0, sp.lr, sp.grad_norm);
        if (r.zero1 && (st = run_share_weights(&r, err)) != HM_OK)
            goto out;
        if (model->post_update)
            model->post_update(model->ctx);
        r.step = s + 1;
        r.tokens += step_tokens;
        last_loss = sp.loss;
        rep = (struct hm_run_report){.step = r.step, .steps = o->steps, .tokens = r.tokens,
                                     .loss = sp.loss, .lr = sp.lr, .grad_norm = sp.grad_norm,
                                     .val_loss = NAN};
        const int last = r.step == o->steps;
        const int validate = l.val && model->val_sum &&
                             ((o->val_every > 0 && r.step % o->val_every == 0) || last);
        const int stop = !last && o->stop_after > 0 && r.step - start_step >= o->stop_after;
        const int save = !last && o->save_every > 0 && r.step % o->save_every == 0;
        if (validate && (st = hm_run_validate(model, l.val, o->seq_len, o->val_tokens,
                                              o->comm, &rep.val_loss, err)) != HM_OK)
            goto out;
        rep.tokens_per_s = (double)step_tokens / (now_s() - sp.t_start);
        if (r.primary) {
            if ((st = run_log_line(l.logf, o->log_path, model, &rep,
                                   model->n_aux ? l.aux_sum : NULL, err)) != HM_OK)
                goto out;
            if (progress)
                progress(pctx, &rep);
        }
        if (stop)
            break;
        if (save && (st = run_save_all(&r, last_loss, t0, err)) != HM_OK)
            goto out;
    }
    st = run_save_all(&r, last_loss, t0, err);
    if (final)
        *final = rep;
out:
    if (l.logf && fclose(l.logf) != 0 && st == HM_OK)
        st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot write log '%s'", o->log_path);
    loop_release(&r, &l);
    free(r.state_path);
    hm_optim_release(&r.opt);
    run_shares_release(&r);
    return st;
}
