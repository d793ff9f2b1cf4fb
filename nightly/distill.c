/* distill.c: nightly's distillation replay: generic requests of hearth
 * datagen's training split run by the base model itself (greedy, through
 * the real planner and tools in their sample worlds, as the generic suite
 * runs it) and its own conversations rendered as the user's episodes are,
 * so that the adapter learns to keep what the base does on generic work
 * while it learns the user's habits (replaying the oracle's trajectories
 * instead pulls the adapter away from the base on them);
 * a share of them may be contrast tasks: calendar requests of the user's
 * episodes' kinds for other people, without the user's habits. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nightly/nightly.h"
#include "lora/lora.h"

cJSON *hx_dg_train_tasks(long n, uint64_t seed, hx_err *err)
{
    return hx_dg_tasks(HX_SPLIT_TRAIN, n, seed, -1, err); /* never the suite's held-out pools */
}

int hx_dg_model_trace(const hx_agent_eval *ae, const cJSON *task, const char *home,
                      cJSON **trace, cJSON **tools, hx_err *err)
{
    hx_dg_world dw;
    hx_source src = {0};
    *trace = *tools = NULL;
    memset(&dw, 0, sizeof dw);
    int rc = hx_dg_task_world(task, home, &dw, err);
    if (!rc) rc = hx_dg_engine_source(ae->model, dw.reg, ae->family, ae->n_threads, &src, err);
    if (!rc) {
        hx_err e2 = {0}; /* a run that failed still has its conversation */
        hx_planner_params pp = hx_dg_planner_params(ae->family);
        hx_dg_run(&dw, task, &src, NULL, &pp, trace, &e2);
        if (!(*tools = hx_tools_list_json(dw.reg))) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    hx_source_free(&src);
    hx_dg_world_close(&dw);
    hx_world_rmtree(home, NULL);
    return rc;
}

/* One task: the base's conversation rendered into out. */
static int distill_one(const hx_agent_eval *ae, const cJSON *task, const char *home,
                       hx_nightly_data *out, hx_err *err)
{
    cJSON *trace = NULL, *tools = NULL;
    int rc = hx_dg_model_trace(ae, task, home, &trace, &tools, err);
    const cJSON *msgs = cJSON_GetObjectItem(trace, "messages");
    if (!rc && cJSON_IsArray(msgs)) {
        hx_agent_render ar = {hx_model_vocab(ae->model), ae->family, tools};
        const int before = out->n_docs;
        rc = hx_agent_nightly_render(&ar, msgs, out, err);
        out->n_episodes += !rc && out->n_docs > before;
    }
    cJSON_Delete(trace);
    cJSON_Delete(tools);
    return rc;
}

/* ---- contrastive replay ---- */

static int add_term(hx_agent_contrast *c, const char *t, size_t len)
{
    if (len < 3) return HX_OK; /* "a", "jo": would match everything */
    for (int i = 0; i < c->n_terms; i++)
        if (strlen(c->terms[i]) == len && !strncasecmp(c->terms[i], t, len)) return HX_OK;
    if (c->n_terms == HX_CONTRAST_MAX_TERMS) return HX_OK; /* enough to filter by */
    if (!(c->terms[c->n_terms] = hx_strndup(t, len))) return HX_ERR_NOMEM;
    c->n_terms++;
    return HX_OK;
}

/* An attendee: the address and the name parts of its local part. */
static int add_address(hx_agent_contrast *c, const char *a)
{
    int rc = add_term(c, a, strlen(a));
    const size_t local = strcspn(a, "@");
    for (size_t i = 0; !rc && i < local;) {
        const size_t n = strcspn(a + i, "._-+@");
        rc = add_term(c, a + i, n < local - i ? n : local - i);
        i += n + 1;
    }
    return rc;
}

int hx_agent_contrast_add_call(hx_agent_contrast *c, const char *name, const char *arguments)
{
    if (!name || strncmp(name, "calendar.", 9)) return HX_OK;
    c->tools |= !strcmp(name, "calendar.find_slots") ? HX_CONTRAST_FIND_SLOTS
                : !strcmp(name, "calendar.create_event") ? HX_CONTRAST_CREATE : 0;
    cJSON *a = arguments ? cJSON_Parse(arguments) : NULL;
    const char *loc = cJSON_GetStringValue(cJSON_GetObjectItem(a, "location"));
    int rc = loc ? add_term(c, loc, strlen(loc)) : HX_OK;
    const cJSON *att = cJSON_GetObjectItem(a, "attendees");
    for (const cJSON *x = cJSON_IsArray(att) ? att->child : NULL; x && !rc; x = x->next)
        if (cJSON_IsString(x)) rc = add_address(c, x->valuestring);
    cJSON_Delete(a);
    return rc;
}

static int learn_one(void *user, const hx_episode *ep, int heldout)
{
    (void)heldout; /* held-out episodes are the user's too */
    int rc = HX_OK;
    for (int i = 0; i < ep->n_calls && !rc; i++)
        rc = hx_agent_contrast_add_call(user, ep->calls[i].name, ep->calls[i].arguments);
    return rc;
}

int hx_agent_contrast_learn(hx_agent_contrast *c, hx_memory *m, hx_err *err)
{
    hx_training_query q = {0, 0, 0};
    int rc = hx_memory_training_episodes(m, &q, learn_one, c, err);
    return rc == HX_ERR_NOMEM ? hx_err_set(err, rc, "contrast: out of memory") : rc;
}

void hx_agent_contrast_free(hx_agent_contrast *c)
{
    for (int i = 0; c && i < c->n_terms; i++) free(c->terms[i]);
    if (c) c->n_terms = 0;
}

/* Whether task's kind is the contrast's: one whose tools the episodes
 * all called, or (near) another calendar kind. */
static int contrast_kind(const hx_agent_contrast *c, const char *kind, int near)
{
    static const struct { const char *kind; unsigned tools; } kinds[] = {
        {"find_slots", HX_CONTRAST_FIND_SLOTS}, {"create_event", HX_CONTRAST_CREATE},
        {"schedule", HX_CONTRAST_FIND_SLOTS | HX_CONTRAST_CREATE}};
    static const char *const others[] = {"cancel_event", "move_event", "free_busy",
                                         "list_events", "not_organizer"};
    int ok = 0;
    for (size_t i = 0; kind && near && i < sizeof others / sizeof others[0]; i++)
        ok |= !strcmp(kind, others[i]);
    for (size_t i = 0; kind && !near && i < sizeof kinds / sizeof kinds[0]; i++)
        ok |= !strcmp(kind, kinds[i].kind) && (kinds[i].tools & c->tools) == kinds[i].tools;
    return ok;
}

/* Whether task is a contrast for c (contrast_kind), with no habit term in
 * its request or slots. */
static int contrast_fits(const hx_agent_contrast *c, const cJSON *task, int near)
{
    const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(task, "kind"));
    int ok = contrast_kind(c, kind, near);
    /* the request and its slots (not "expect": its results hold paths) */
    const char *req = cJSON_GetStringValue(cJSON_GetObjectItem(task, "request"));
    char *slots = ok && req ? cJSON_PrintUnformatted(cJSON_GetObjectItem(task, "slots")) : NULL;
    for (int i = 0; slots && ok && i < c->n_terms; i++)
        ok = !strcasestr(req, c->terms[i]) && !strcasestr(slots, c->terms[i]);
    cJSON_free(slots);
    return ok && slots;
}

cJSON *hx_dg_contrast_tasks(const hx_agent_contrast *c, long n, uint64_t seed, int near,
                            hx_err *err)
{
    cJSON *out = cJSON_CreateArray();
    if (!out) return hx_err_set(err, HX_ERR_NOMEM, "out of memory"), NULL;
    /* about a fifth of the training mix is of these kinds: batches of the
     * mix, each from its own seed, filtered, until there are n */
    for (int round = 0; round < 16 && cJSON_GetArraySize(out) < n && (near || c->tools);
         round++) {
        const uint64_t s = seed * 1000003u + 7919u * (uint64_t)(round + 1) + (near ? 104729u : 0);
        cJSON *batch = hx_dg_train_tasks(8 * n + 16, s, err);
        if (!batch) return cJSON_Delete(out), NULL;
        while (batch->child && cJSON_GetArraySize(out) < n) {
            cJSON *t = cJSON_DetachItemViaPointer(batch, batch->child);
            if (contrast_fits(c, t, near)) cJSON_AddItemToArray(out, t);
            else cJSON_Delete(t);
        }
        cJSON_Delete(batch);
    }
    return out;
}

cJSON *hx_agent_replay_tasks(const hx_agent_contrast *c, int n, uint64_t seed, hx_err *err)
{
    const int nc = c && c->share > 0 ? (int)(c->share * n + 0.5) : 0;
    const int nn = c && c->near > 0 ? (int)(c->near * n + 0.5) : 0;
    if (!nc && !nn) return hx_dg_train_tasks(n, seed, err);
    cJSON *con = hx_dg_contrast_tasks(c, nc, seed, 0, err);
    cJSON *nr = con && nn ? hx_dg_contrast_tasks(c, nn, seed, 1, err) : NULL;
    if (nn && !nr) return cJSON_Delete(con), NULL;
    while (nr && nr->child) /* the near ones after the contrast ones */
        cJSON_AddItemToArray(con, cJSON_DetachItemViaPointer(nr, nr->child));
    cJSON_Delete(nr);
    const int nk = cJSON_GetArraySize(con);
    cJSON *gen = con ? hx_dg_train_tasks(n - nk, seed, err) : NULL;
    cJSON *all = gen ? cJSON_CreateArray() : NULL;
    const int ng = cJSON_GetArraySize(gen);
    for (int ig = 0, ik = 0; all && (ig < ng || ik < nk);) {
        const int from_con = ig == ng || (ik < nk && (ik + 1) * (ng + nk) <= (ig + ik + 1) * nk);
        cJSON *src = from_con ? con : gen;
        cJSON_AddItemToArray(all, cJSON_DetachItemViaPointer(src, src->child));
        from_con ? ik++ : ig++;
    }
    if (gen && !all) hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    cJSON_Delete(gen);
    cJSON_Delete(con);
    return all;
}

int hx_agent_nightly_distill(void *user, int n, uint64_t seed, hx_nightly_data *out,
                             hx_err *err)
{
    const hx_agent_eval *ae = user;
    char base[300] = "", home[320]; /* each world puts the environment back */
    cJSON *tasks = hx_agent_replay_tasks(ae->contrast, n, seed, err);
    int fd = -1;
    int rc = !tasks ? (err->rc ? err->rc : HX_ERR_INTERNAL)
             : !ae->model ? hx_err_set(err, HX_ERR_INVALID, "distillation needs the base model")
             : hx_eval_home_take(ae->dir, base, sizeof base, &fd, err);
    snprintf(home, sizeof home, "%s/world", base);
    hx_progress pr;
    int i = 0;
    hx_progress_start(&pr, "replay: the base's own runs", rc ? 0 : cJSON_GetArraySize(tasks));
    for (const cJSON *t = rc ? NULL : tasks->child; t && !rc; t = t->next) {
        rc = distill_one(ae, t, home, out, err);
        hx_progress_update(&pr, ++i, NULL);
    }
    hx_progress_finish(&pr);
    hx_eval_home_give(base, fd);
    cJSON_Delete(tasks);
    return rc;
}
