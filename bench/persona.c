/* persona.c: the personalization proof in one command: a persona's
 * accepted episodes, held-out requests before and after `hearth nightly
 * --force` (the real command, on a fresh data directory), and the generic
 * suite before and after as nightly's gate ran it (task by task), as a
 * table (make bench-persona).
 *
 *   build/bench/persona [--model FILE] [--hearth FILE] [--seed S]
 *       [--episodes N] [--heldout N] [--generic N] [--generic-seed S]
 *       [--threads T] [--dir DIR] [--log FILE] [--nightly "ARGS"]
 *       [--candidate-scales LIST] [--others PCT] [--stated PCT] [--keep]
 * --nightly: more hearth nightly options (default none: its defaults);
 * --candidate-scales: the trained adapter, adopted or discarded, is also
 * measured on the held-out requests at each of these scales (default 1);
 * --generic N: also run N generic tasks of --generic-seed here, before and
 * after (default 0: the gate's own suite is reported); --others, --stated:
 * the shares (percent) of the user's history that are meetings with other
 * people and that state a length (default the persona's: 50 and 25; 0 and
 * 0 is a user who only ever meets the colleague, as before 2026-12-01). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/sim.h"
#include "cli/cli.h"
#include "lora/lora.h"

typedef struct opts {
    const char *model, *hearth, *dir, *log, *nightly, *cand_scales;
    uint64_t seed, generic_seed;
    int episodes, heldout, generic, threads, keep, others, stated;
} opts;

/* Successes of one configuration (base, or base + adopted adapter). */
typedef struct score {
    int n, room, minutes, nickname, all, booked;
    int generic_n, generic_pass;
} score;

/* Nightly's generic gate as its report gives it (n 0: not run). */
typedef struct gate_line {
    int n, ref, cand, lost, gained;
    float scale;
} gate_line;

/* A share in percent, 0 to 100, strictly ("50x" refused). */
static int percent(const char *v, int *out)
{
    long x;
    if (hx_cli_parse_long(v, 0, 100, &x)) return 0;
    *out = (int)x;
    return 1;
}

static int parse(int argc, char **argv, opts *o)
{
    /* no --nightly: `hearth nightly --force` with its defaults, as a
     * user's night runs it */
    *o = (opts){"models/hearth-tiny.gguf", "build/hearth", NULL, "build/persona.jsonl",
                "", "1", 1, 1, 48, 20, 0, 2, 0, -1, -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--keep")) { o->keep = 1; continue; }
        if (!v) return 0;
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--hearth")) o->hearth = v;
        else if (!strcmp(a, "--dir")) o->dir = v;
        else if (!strcmp(a, "--log")) o->log = v;
        else if (!strcmp(a, "--nightly")) o->nightly = v;
        else if (!strcmp(a, "--candidate-scales")) o->cand_scales = v;
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--generic-seed")) o->generic_seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--episodes")) o->episodes = atoi(v);
        else if (!strcmp(a, "--heldout")) o->heldout = atoi(v);
        else if (!strcmp(a, "--generic")) o->generic = atoi(v);
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--others")) { if (!percent(v, &o->others)) return 0; }
        else if (!strcmp(a, "--stated")) { if (!percent(v, &o->stated)) return 0; }
        else return 0;
    }
    return o->episodes >= 5 && o->heldout > 0 && o->generic >= 0;
}

/* Held-out requests the oracle books with all three habits (so that the
 * right calls need them), n of them, after the training days. */
static cJSON *heldout_requests(const hx_persona *p, const opts *o, const char *home, hx_err *err)
{
    const int64_t day0 = p->w.today + o->episodes * 7 / 5 + 3;
    cJSON *cand = hx_persona_requests(p, HX_SPLIT_HELDOUT, o->heldout * 2, day0, o->seed);
    cJSON *keep = cJSON_CreateArray();
    hx_dg_eval_run orc = {NULL, HX_TPL_COMPACT, 1, 1, NULL, NULL, 0, 0, NULL, 0, NULL};
    for (cJSON *t = cand ? cand->child : NULL; t && cJSON_GetArraySize(keep) < o->heldout; t = t->next) {
        int habits = 0, booked = 0;
        if (hx_persona_eval(p, &orc, t, home, &habits, &booked, NULL, err)) break;
        if (habits == HX_HABIT_ALL && booked) cJSON_AddItemToArray(keep, cJSON_Duplicate(t, 1));
    }
    cJSON_Delete(cand);
    if (cJSON_GetArraySize(keep) < o->heldout)
        fprintf(stderr, "persona: only %d held-out requests the oracle books\n", cJSON_GetArraySize(keep));
    return keep;
}

static void log_line(FILE *log, const char *phase, cJSON *rec)
{
    if (!rec) return;
    cJSON_AddStringToObject(rec, "phase", phase);
    char *s = cJSON_PrintUnformatted(rec);
    if (s && log) fprintf(log, "%s\n", s), fflush(log);
    cJSON_free(s);
    cJSON_Delete(rec);
}

/* The held-out requests and the generic sample with run r, in the fixed
 * evaluation directory (its path is in tool results: a random one made
 * runs differ). */
static int measure(const hx_persona *p, const hx_dg_eval_run *r, const cJSON *heldout,
                   const cJSON *generic, const char *phase, FILE *log, score *s, hx_err *err)
{
    hx_progress pr;
    char base[300], home[320];
    int i = 0, lock = -1;
    memset(s, 0, sizeof *s);
    int rc = hx_eval_home_take(NULL, base, sizeof base, &lock, err);
    snprintf(home, sizeof home, "%s/world", base);
    hx_progress_start(&pr, phase, cJSON_GetArraySize(heldout) + cJSON_GetArraySize(generic));
    for (const cJSON *t = heldout->child; t && !rc; t = t->next) {
        int habits = 0, booked = 0;
        cJSON *rec = NULL;
        rc = hx_persona_eval(p, r, t, home, &habits, &booked, &rec, err);
        s->n++;
        s->room += !!(habits & HX_HABIT_ROOM);
        s->minutes += !!(habits & HX_HABIT_MINUTES);
        s->nickname += !!(habits & HX_HABIT_NICKNAME);
        s->all += habits == HX_HABIT_ALL;
        s->booked += booked;
        log_line(log, phase, rec);
        hx_progress_update(&pr, ++i, NULL);
    }
    hx_dg_validator *v = NULL;
    for (const cJSON *t = generic ? generic->child : NULL; t && !rc; t = t->next) {
        int pass = 0;
        cJSON *rec = NULL;
        rc = hx_dg_eval_task(r, t, home, &v, &pass, NULL, NULL, &rec, err);
        s->generic_n++;
        s->generic_pass += pass;
        log_line(log, phase, rec);
        hx_progress_update(&pr, ++i, NULL);
    }
    hx_progress_finish(&pr);
    hx_dg_validator_free(v);
    hx_eval_home_give(base, lock);
    return rc;
}

/* `hearth nightly --force` on the persona's data (HEARTH_HOME=home: its
 * memory.db, a fresh adapters/ store), the trained adapter also copied to
 * cand whatever the gate decides; output in log_path. */
static int run_nightly(const opts *o, const char *home, const char *cand,
                       const char *log_path)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "env -u HEARTH_NOW HEARTH_HOME='%s' '%s' nightly --force -m '%s' -t %d "
             "--keep-candidate '%s' %s > '%s' 2>&1", home, o->hearth, o->model, o->threads,
             cand, o->nightly, log_path);
    printf("persona: %s\n", cmd);
    fflush(stdout);
    return system(cmd);
}

/* Prints the nightly run's report lines (its stdout) from the log; the
 * generic gate's counts into g. */
static void show_nightly(const char *log_path, gate_line *g)
{
    char *text = NULL;
    size_t len = 0;
    memset(g, 0, sizeof *g);
    if (hx_read_file(log_path, 1 << 24, &text, &len, NULL)) return;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        /* "generic tasks: R/N with REF, C/N with the new adapter at scale S (L lost, G
         * gained; ...)" */
        const char *cand = strstr(l, " with the new adapter at scale ");
        while (cand && cand > l && cand[-1] != ' ') cand--;
        if (!strncmp(l, "generic tasks: ", 15) && cand &&
            (sscanf(l, "generic tasks: %d/%d", &g->ref, &g->n) != 2 ||
             sscanf(cand, "%d/%*d with the new adapter at scale %f (%d lost, %d gained",
                    &g->cand, &g->scale, &g->lost, &g->gained) != 4))
            memset(g, 0, sizeof *g);
        if (!strncmp(l, "episodes:", 9) || !strncmp(l, "replay:", 7) || !strncmp(l, "steps:", 6) || !strncmp(l, "sequences:", 10) || !strncmp(l, "generic tasks:", 14) ||
            !strncmp(l, "memory:", 7) || !strncmp(l, "adopted", 7) || !strncmp(l, "discarded", 9) ||
            !strncmp(l, "not started", 11) || !strncmp(l, "hearth nightly:", 15) ||
            !strncmp(l, "nightly: ", 9))
            printf("  | %s\n", l);
    }
    free(text);
}

/* The trained adapter, adopted or discarded, on the held-out requests at
 * each of --candidate-scales (what it learned, whatever the gate said). */
static void measure_candidate(const hx_persona *p, const opts *o, hx_dg_eval_run *run,
                              const char *cand, const cJSON *held, FILE *log)
{
    hx_adapter *ad = NULL;
    hx_err err = {0};
    if (access(cand, R_OK) || hx_adapter_load(run->model, cand, &ad, &err)) {
        printf("persona: no trained adapter to measure%s%s\n", err.msg[0] ? ": " : "", err.msg);
        return;
    }
    char phase[64];
    for (const char *s = o->cand_scales; s && *s;) {
        char *end;
        float sc = strtof(s, &end);
        if (end == s) break;
        s = *end == ',' ? end + 1 : end;
        hx_dg_eval_run r = *run;
        r.adapters = &ad, r.scales = &sc, r.n_adapters = 1;
        score c;
        snprintf(phase, sizeof phase, "candidate@%.2f", sc);
        if (measure(p, &r, held, NULL, phase, log, &c, &err)) {
            fprintf(stderr, "persona: %s\n", err.msg);
            break;
        }
        printf("persona: the trained adapter at scale %.2f: room %d/%d, %d minutes %d/%d, "
               "%s %d/%d, all three %d/%d, an event created %d/%d\n", sc, c.room, c.n,
               p->minutes, c.minutes, c.n, p->nickname, c.nickname, c.n, c.all, c.n, c.booked, c.n);
    }
    hx_adapter_free(ad);
}

static void row(const char *name, int a, int an, int b, int bn, int have_after)
{
    printf("  %-28s %3d/%-3d %5.1f%%", name, a, an, an ? 100.0 * a / an : 0.0);
    if (have_after) printf("   %3d/%-3d %5.1f%%", b, bn, bn ? 100.0 * b / bn : 0.0);
    printf("\n");
}

static void table(const hx_persona *p, const score *b, const score *a, const gate_line *g,
                  int adopted)
{
    char nick[80];
    snprintf(nick, sizeof nick, "%s -> %s", p->nickname, p->w.people[0].email);
    printf("\n  %-28s %-16s   %s\n", "held-out requests", "before (base)",
           adopted ? "after (adopted adapter)" : "after: no adapter adopted");
    row("room (location)", b->room, b->n, a->room, a->n, adopted);
    row("45 minutes", b->minutes, b->n, a->minutes, a->n, adopted);
    row(nick, b->nickname, b->n, a->nickname, a->n, adopted);
    row("all three habits", b->all, b->n, a->all, a->n, adopted);
    row("an event was created", b->booked, b->n, a->booked, a->n, adopted);
    if (b->generic_n) row("generic agent-eval (here)", b->generic_pass, b->generic_n, a->generic_pass, a->generic_n, adopted);
    if (g->n) { /* the gate ran the candidate whether or not it was adopted */
        row("generic suite (nightly gate)", g->ref, g->n, g->cand, g->n, 1);
        printf("  %-28s the candidate at scale %.2f lost %d tasks the base passes and gained "
               "%d%s\n", "", g->scale, g->lost, g->gained,
               adopted ? "" : " (discarded: the user keeps the base)");
    }
}

/* Each habit, and all three together, in >= 80% of the held-out requests
 * after; the generic drop (the gate's suite, task by task, and this
 * run's own sample when asked) at most 2 points; no adapter adopted: the
 * user keeps the base, nothing dropped, nothing learned. */
static int verdict(const score *b, const score *a, const gate_line *g, int adopted)
{
    const double need = 0.8 * a->n;
    const int habits = adopted && a->room >= need && a->minutes >= need && a->nickname >= need &&
                       a->all >= need;
    const double drop = b->generic_n && adopted ? 100.0 * (b->generic_pass - a->generic_pass) / b->generic_n : 0;
    const double gdrop = g->n && adopted ? 100.0 * (g->lost - g->gained) / g->n : 0;
    printf("\n  each habit and all three right in >= 80%% of held-out requests after: %s\n",
           habits ? "yes" : "no");
    if (g->n)
        printf("  generic suite drop %.1f points (at most 2 allowed): %s\n", gdrop,
               gdrop <= 2.0 + 1e-9 ? "yes" : "no");
    if (b->generic_n)
        printf("  generic sample here: drop %.1f points (at most 2 allowed): %s\n", drop,
               drop <= 2.0 + 1e-9 ? "yes" : "no");
    const int ok = habits && drop <= 2.0 + 1e-9 && gdrop <= 2.0 + 1e-9;
    printf("persona proof: %s\n", ok ? "PASS" : "FAIL");
    return ok;
}

int main(int argc, char **argv)
{
    opts o;
    hx_err err = {0};
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines show as they come */
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "usage: persona [--model FILE] [--hearth FILE] [--seed S] [--episodes N>=5] "
                        "[--heldout N] [--generic N] [--generic-seed S] [--threads T] [--dir DIR] "
                        "[--log FILE] [--nightly \"ARGS\"] [--candidate-scales LIST] [--others PCT] "
                        "[--stated PCT] [--keep]\n");
        return 2;
    }
    static hx_persona p;
    char base[512], home[600], world[600], nlog[600], adir[700];
    snprintf(base, sizeof base, "%s/hearth-persona-XXXXXX",
             o.dir ? o.dir : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(base)) {
        fprintf(stderr, "persona: cannot create a work directory in %s: %s\n",
                o.dir ? o.dir : "/dev/shm or /tmp", strerror(errno));
        return 1;
    }
    if (hx_persona_generate(o.seed, &p, &err)) {
        fprintf(stderr, "persona: %s\n", err.msg);
        return 1;
    }
    if (o.others >= 0) p.others_pct = o.others;
    if (o.stated >= 0) p.stated_pct = o.stated;
    snprintf(home, sizeof home, "%s/home", base);
    snprintf(world, sizeof world, "%s/eval", base);
    snprintf(nlog, sizeof nlog, "%s/nightly.log", base);
    snprintf(adir, sizeof adir, "%s/data/adapters", home);
    char sha[65] = "?";
    hx_sha256_file(o.model, NULL, sha, &err);
    printf("persona: %s, who calls %s \"%s\"; meetings in %s, %d minutes; model %s (sha256 %s)\n",
           p.w.user.name, p.w.people[0].name, p.nickname, p.room, p.minutes, o.model, sha);

    /* the user's accepted episodes */
    cJSON *train = hx_persona_requests(&p, HX_SPLIT_TRAIN, o.episodes, p.w.today, o.seed);
    int n_acc = 0;
    if (!train || hx_persona_write_episodes(&p, train, home, &n_acc, &err)) {
        fprintf(stderr, "persona: episodes: %s\n", err.msg);
        return 1;
    }
    printf("persona: %d accepted episodes in %s/data/memory.db (e.g. \"%s\"; %d%% of the requests "
           "with other people, %d%% stating a length)\n", n_acc, home,
           cJSON_GetStringValue(cJSON_GetObjectItem(train->child, "request")), p.others_pct, p.stated_pct);

    /* held-out requests, the generic sample, the base model */
    cJSON *held = heldout_requests(&p, &o, world, &err);
    cJSON *generic = o.generic ? hx_dg_eval_tasks(o.generic, o.generic_seed, -1, &err) : cJSON_CreateArray();
    hx_model *m = NULL;
    if (!generic || hx_model_load(o.model, NULL, &m, &err)) {
        fprintf(stderr, "persona: %s\n", err.msg);
        return 1;
    }
    printf("persona: %d held-out requests (e.g. \"%s\"), %d generic tasks (seed %llu)\n",
           cJSON_GetArraySize(held), cJSON_GetStringValue(cJSON_GetObjectItem(held->child, "request")),
           cJSON_GetArraySize(generic), (unsigned long long)o.generic_seed);
    FILE *log = fopen(o.log, "w");
    if (!log) {
        fprintf(stderr, "persona: cannot write the per-request log %s: %s\n", o.log,
                strerror(errno));
        hx_model_free(m);
        return 1;
    }
    const int family = hx_tpl_detect(hx_model_gguf(m), hx_model_vocab(m));
    hx_dg_eval_run run = {m, family, o.threads, 0, NULL, NULL, 0, 0, NULL, 0, NULL};
    score before, after;
    memset(&after, 0, sizeof after);
    if (measure(&p, &run, held, generic, "before", log, &before, &err)) {
        fprintf(stderr, "persona: %s\n", err.msg);
        return 1;
    }

    /* the real nightly run, then its adopted adapter, if any */
    char cand[700];
    snprintf(cand, sizeof cand, "%s/candidate.gguf", base);
    const int nrc = run_nightly(&o, home, cand, nlog);
    printf("persona: hearth nightly exited with %d; its report:\n", WEXITSTATUS(nrc));
    gate_line gl;
    show_nightly(nlog, &gl);
    hx_lora_store *st = NULL;
    hx_adapter *ads[HX_ADAPTER_MAX];
    float scales[HX_ADAPTER_MAX];
    int n_ads = 0;
    if (hx_lora_store_open(adir, &st, &err) ||
        hx_lora_store_load_active(st, m, ads, scales, &n_ads, &err))
        fprintf(stderr, "persona: adapters: %s\n", err.msg);
    if (n_ads) {
        run.adapters = ads, run.scales = scales, run.n_adapters = n_ads;
        if (measure(&p, &run, held, generic, "after", log, &after, &err))
            fprintf(stderr, "persona: %s\n", err.msg);
    }
    measure_candidate(&p, &o, &run, cand, held, log);
    fclose(log);
    table(&p, &before, &after, &gl, n_ads > 0);
    const int ok = verdict(&before, &after, &gl, n_ads > 0);
    printf("  per-request results: %s; nightly log: %s\n", o.log, o.keep ? nlog : "(removed; --keep)");
    for (int i = 0; i < n_ads; i++) hx_adapter_free(ads[i]);
    hx_lora_store_free(st);
    hx_model_free(m);
    cJSON_Delete(train), cJSON_Delete(held), cJSON_Delete(generic);
    if (!o.keep) hx_world_rmtree(base, NULL);
    return ok ? 0 : 3;
}
