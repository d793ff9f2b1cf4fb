/* cmd_memory.c: `hearth memory list|search|show|forget|export|vacuum|audit`: the
 * user's view of what the assistant remembers, and the means to remove it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "memory/memory.h"

static void memory_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth memory <command> [options]\n\n"
        "What the assistant remembers about you, and the record of its past\n"
        "runs (episodes). The data is yours: look at it, take it, delete it.\n\n"
        "commands:\n"
        "  list [--kind K] [--limit N] [--all]   memories, newest first\n"
        "                                        (--all: with expired ones)\n"
        "  search TEXT [--limit N] [--episodes]  best matches for TEXT\n"
        "  show ID | show --episode ID           one memory or episode\n"
        "  forget ID... | forget --episode ID... delete for good\n"
        "  export [-o FILE]                      everything as JSON\n"
        "  audit [--limit N]                     the last N tool calls (50), one a\n"
        "                                        line: decision, who, outcome\n"
        "  vacuum                                drop expired memories, purge\n"
        "                                        deleted text, check the file\n\n"
        "options:\n"
        "  --db FILE   the database (default: the data directory's memory.db)\n"
        "  --json      machine-readable output (list, search, show, audit: an\n"
        "              array of objects, newest first, arguments as objects)\n");
}

typedef struct mem_args {
    const char *cmd, *db, *kind, *out;
    const char *pos[64]; /* positional arguments after the command */
    int n_pos, limit, all, json, episodes;
} mem_args;

static int need_value(int argc, char **argv, int *i, const char **v)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "hearth memory: %s needs a value\n", argv[*i]);
        return HX_EXIT_USAGE;
    }
    *v = argv[++*i];
    return 0;
}

/* Options that take a value; returns -1 if s is not one of them. */
static int value_option(int argc, char **argv, int *i, mem_args *a)
{
    const char *s = argv[*i], *v = NULL;
    const char **dst = !strcmp(s, "--db")                       ? &a->db
                       : !strcmp(s, "--kind")                   ? &a->kind
                       : !strcmp(s, "-o") || !strcmp(s, "--output") ? &a->out
                       : !strcmp(s, "--limit")                  ? &v
                                                                : NULL;
    if (!dst) return -1;
    if (need_value(argc, argv, i, dst)) return HX_EXIT_USAGE;
    long n;
    if (dst == &v && hx_cli_opt_long("memory", s, v, 1, 1 << 30, &n)) return HX_EXIT_USAGE;
    if (dst == &v) a->limit = (int)n;
    return 0;
}

static int parse_mem_args(int argc, char **argv, mem_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        int r = value_option(argc, argv, &i, a);
        if (r >= 0) {
            if (r) return r;
        } else if (!strcmp(s, "--json")) a->json = 1;
        else if (!strcmp(s, "--all")) a->all = 1;
        else if (!strcmp(s, "--episode") || !strcmp(s, "--episodes"))
            a->episodes = 1;
        else if (s[0] == '-' && s[1]) {
            return hx_cli_bad_word("memory", "option", s);
        } else if (!a->cmd) a->cmd = s;
        else if (a->n_pos < 64) a->pos[a->n_pos++] = s;
    }
    if (!a->cmd) {
        memory_usage(stderr);
        return HX_EXIT_USAGE;
    }
    return 0;
}

static void fmt_time(char *buf, size_t n, int64_t t)
{
    if (!t) {
        snprintf(buf, n, "never");
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int fail(int rc, const hx_err *err)
{
    fprintf(stderr, "hearth memory: %s\n", err->msg[0] ? err->msg
                                                       : hx_rc_str(rc));
    return hx_cli_exit_code(rc);
}

/* Prints a list as text lines or as a JSON array. */
static void print_list(const hx_mem_list *l, int json)
{
    if (json) printf("[");
    for (int i = 0; i < l->n; i++) {
        const hx_mem_item *it = &l->items[i];
        if (json) {
            char *s = hx_mem_item_to_json(it, 0);
            printf("%s\n  %s", i ? "," : "", s ? s : "null");
            free(s);
            continue;
        }
        char upd[32];
        hx_buf kind;
        hx_buf_init(&kind);
        hx_term_escape(&kind, it->kind, strlen(it->kind), 0);
        fmt_time(upd, sizeof upd, it->updated_at);
        /* the text may quote a mail (provenance untrusted): escaped */
        printf("#%-6lld %-11s %-9s ", (long long)it->id, kind.data ? kind.data : "",
               hx_mem_provenance_name(it->provenance));
        hx_term_fputs(stdout, it->text, 0);
        printf("  (updated %s, used %lldx)\n", upd, (long long)it->use_count);
        hx_buf_free(&kind);
    }
    if (json) printf("%s]\n", l->n ? "\n" : "");
}

static int parse_id(const char *s, int64_t *id)
{
    char *end;
    long long v = strtoll(s ? s : "", &end, 10);
    if (!s || !*s || *end || v <= 0) {
        fprintf(stderr, "hearth memory: '%s' is not an id\n", s ? s : "");
        return HX_EXIT_USAGE;
    }
    *id = v;
    return 0;
}

/* ---- commands ---- */

static int do_list(hx_memory *m, const mem_args *a, hx_err *err)
{
    hx_mem_list *l = NULL;
    int rc = hx_memory_list(m, a->kind, a->limit, a->all, &l, err);
    if (rc) return fail(rc, err);
    if (!l->n && !a->json) printf("nothing remembered%s%s\n", a->kind ? " of kind " : "",
                                  a->kind ? a->kind : "");
    print_list(l, a->json);
    hx_mem_list_free(l);
    return HX_EXIT_OK;
}

static void join_pos(const mem_args *a, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < a->n_pos && len + 1 < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? " " : "",
                                a->pos[i]);
}

static int search_episodes(hx_memory *m, const mem_args *a, const char *q,
                           hx_err *err)
{
    int64_t *ids = NULL;
    int n = 0;
    int rc = hx_memory_episode_search(m, q, a->limit, &ids, &n, err);
    if (rc) return fail(rc, err);
    if (a->json) printf("[");
    for (int i = 0; i < n; i++) {
        hx_episode *ep = NULL;
        if (hx_memory_episode_get(m, ids[i], &ep, err)) continue;
        if (a->json) {
            char *s = hx_episode_to_json(ep, 0);
            printf("%s\n  %s", i ? "," : "", s ? s : "null");
            free(s);
        } else {
            printf("episode %-6lld %-9s ", (long long)ep->id, hx_verdict_name(ep->verdict));
            hx_term_fputs(stdout, ep->request, 0);
            putchar('\n');
        }
        hx_episode_free(ep);
    }
    if (a->json) printf("%s]\n", n ? "\n" : "");
    else if (!n) printf("no episode matches '%s'\n", q);
    free(ids);
    return HX_EXIT_OK;
}

static int do_search(hx_memory *m, const mem_args *a, hx_err *err)
{
    char q[4096];
    join_pos(a, q, sizeof q);
    if (!*q) {
        fprintf(stderr, "hearth memory search: what to search for?\n");
        return HX_EXIT_USAGE;
    }
    if (a->episodes) return search_episodes(m, a, q, err);
    hx_mem_list *l = NULL;
    int rc = hx_memory_search(m, q, a->limit, &l, err);
    if (rc) return fail(rc, err);
    if (!l->n && !a->json) printf("no memory matches '%s'\n", q);
    print_list(l, a->json);
    hx_mem_list_free(l);
    return HX_EXIT_OK;
}

/* The governor's decisions the episode ran under, a line each: "governor:
 * after N slices, M turns: why: choice". */
static void print_governor(const hx_episode *ep)
{
    cJSON *arr = ep->governor ? cJSON_Parse(ep->governor) : NULL, *d;
    cJSON_ArrayForEach(d, arr)
    {
        printf("governor: after %.0f slices, %.0f turns: ",
               cJSON_GetNumberValue(cJSON_GetObjectItem(d, "slice")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(d, "turn")));
        hx_term_fputs(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(d, "why")), 0);
        fputs(": ", stdout);
        hx_term_fputs(stdout, cJSON_GetStringValue(cJSON_GetObjectItem(d, "choice")), 0);
        putchar('\n');
    }
    cJSON_Delete(arr);
}

/* An episode holds the tools' results and the model's words: every
 * field is escaped (hx_term_escape). */
static void print_episode_text(const hx_episode *ep)
{
    char t0[32], t1[32];
    fmt_time(t0, sizeof t0, ep->started_at);
    fmt_time(t1, sizeof t1, ep->finished_at);
    printf("episode %lld  %s .. %s\nrequest: ", (long long)ep->id, t0, t1);
    hx_term_fputs(stdout, ep->request, 0);
    fputs("\nmodel:   ", stdout);
    hx_term_fputs(stdout, ep->model ? ep->model : "-", 0);
    if (ep->adapter) fputs(" + ", stdout), hx_term_fputs(stdout, ep->adapter, 0);
    putchar('\n');
    print_governor(ep);
    for (int i = 0; i < ep->n_calls; i++) {
        printf("call %d:  ", i + 1);
        hx_term_fputs(stdout, ep->calls[i].name, 0);
        putchar(' ');
        hx_term_fputs(stdout, ep->calls[i].arguments, 0);
        fputs(" -> ", stdout);
        hx_term_fputs(stdout, ep->calls[i].result ? ep->calls[i].result : "(no result)", 0);
        printf("%s\n", ep->calls[i].confirmed ? " [confirmed]" : "");
    }
    fputs("outcome: ", stdout);
    hx_term_fputs(stdout, ep->outcome ? ep->outcome : "-", 0);
    printf("\nverdict: %s%s", hx_verdict_name(ep->verdict), ep->corrected ? ": " : "");
    hx_term_fputs(stdout, ep->corrected, 0);
    putchar('\n');
}

static int do_show(hx_memory *m, const mem_args *a, hx_err *err)
{
    int64_t id;
    if (a->n_pos != 1) {
        fprintf(stderr, "hearth memory show: give one id\n");
        return HX_EXIT_USAGE;
    }
    if (parse_id(a->pos[0], &id)) return HX_EXIT_USAGE;
    if (a->episodes) {
        hx_episode *ep = NULL;
        int rc = hx_memory_episode_get(m, id, &ep, err);
        if (rc) return fail(rc, err);
        char *s = a->json ? hx_episode_to_json(ep, 1) : NULL;
        if (a->json) printf("%s\n", s ? s : "null");
        else print_episode_text(ep);
        free(s);
        hx_episode_free(ep);
        return HX_EXIT_OK;
    }
    hx_mem_list *l = NULL;
    int rc = hx_memory_get(m, id, &l, err);
    if (rc) return fail(rc, err);
    char *s = hx_mem_item_to_json(&l->items[0], 1);
    if (a->json) printf("%s\n", s ? s : "null");
    else print_list(l, 0);
    free(s);
    hx_mem_list_free(l);
    return HX_EXIT_OK;
}

static int do_forget(hx_memory *m, const mem_args *a, hx_err *err)
{
    if (!a->n_pos) {
        fprintf(stderr, "hearth memory forget: which id?\n");
        return HX_EXIT_USAGE;
    }
    int64_t id;
    for (int i = 0; i < a->n_pos; i++)
        if (parse_id(a->pos[i], &id)) return HX_EXIT_USAGE;
    for (int i = 0; i < a->n_pos; i++) {
        parse_id(a->pos[i], &id);
        int rc = a->episodes ? hx_memory_episode_forget(m, id, err)
                             : hx_memory_forget(m, id, err);
        if (rc) return fail(rc, err);
        printf("forgot %s %lld\n", a->episodes ? "episode" : "memory",
               (long long)id);
    }
    return HX_EXIT_OK;
}

static int do_export(hx_memory *m, const mem_args *a, hx_err *err)
{
    if (!a->out) {
        int rc = hx_memory_export(m, stdout, err);
        return rc ? fail(rc, err) : HX_EXIT_OK;
    }
    hx_out o;
    const char *inputs[] = {hx_memory_path(m), NULL};
    int rc = hx_out_open(&o, a->out, inputs, 0600, err); /* private data */
    FILE *f = rc ? NULL : hx_out_stdio(&o);
    if (!rc && !f) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!rc) rc = hx_memory_export(m, f, err);
    if ((rc = hx_out_end(&o, rc, err))) return fail(rc, err);
    fprintf(stderr, "hearth memory: exported to %s\n", a->out);
    return HX_EXIT_OK;
}

static int do_vacuum(hx_memory *m, hx_err *err)
{
    int rc = hx_memory_vacuum(m, err);
    if (rc == HX_OK) rc = hx_memory_check(m, err);
    if (rc) return fail(rc, err);
    printf("vacuumed %s: %lld memories, %lld episodes, integrity ok\n",
           hx_memory_path(m), (long long)hx_memory_count(m),
           (long long)hx_memory_episode_count(m));
    return HX_EXIT_OK;
}

/* The audit trail as the database gives it, each call's arguments
 * parsed into an object (the trail keeps them as text); NULL if the text
 * is not a JSON array. */
static cJSON *audit_array(const char *text)
{
    cJSON *arr = cJSON_Parse(text), *row;
    if (!cJSON_IsArray(arr)) return cJSON_Delete(arr), NULL;
    cJSON_ArrayForEach(row, arr)
    {
        cJSON *args = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(row, "args")));
        if (args) cJSON_ReplaceItemInObject(row, "args", args);
    }
    return arr;
}

/* One call a line, oldest first: when, tool and effect, who decided what,
 * how it ended, the arguments. */
static void print_audit(const cJSON *arr)
{
    for (int i = cJSON_GetArraySize(arr) - 1; i >= 0; i--) {
        const cJSON *r = cJSON_GetArrayItem(arr, i);
        char when[32], *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(r, "args"));
        const char *detail = cJSON_GetStringValue(cJSON_GetObjectItem(r, "detail"));
        fmt_time(when, sizeof when, (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(r, "at")));
#define F(k) (cJSON_GetStringValue(cJSON_GetObjectItem(r, k)) ? cJSON_GetStringValue(cJSON_GetObjectItem(r, k)) : "")
        char who[96] = "not decided";
        if (*F("decision")) snprintf(who, sizeof who, "%s by %s", F("decision"), F("by"));
        printf("%s  %-24s %-5s  %s  %s%s%s  %s\n", when, F("tool"), F("effect"), who,
               F("status"), detail ? ": " : "", detail ? detail : "", args ? args : "");
#undef F
        free(args);
    }
    if (!cJSON_GetArraySize(arr)) printf("no tool calls recorded\n");
}

static int do_audit(hx_memory *m, const mem_args *a, hx_err *err)
{
    char *j = NULL;
    int rc = hx_memory_audit_json(m, a->limit ? a->limit : 50, &j, err);
    if (rc) return fail(rc, err);
    cJSON *arr = audit_array(j);
    free(j);
    if (!arr) return fprintf(stderr, "hearth memory: the audit trail is not readable\n"), 1;
    if (a->json) return hx_cli_json_out(arr);
    print_audit(arr);
    cJSON_Delete(arr);
    return HX_EXIT_OK;
}

static int run(hx_memory *m, const mem_args *a, hx_err *err)
{
    if (!strcmp(a->cmd, "audit")) return do_audit(m, a, err);
    if (!strcmp(a->cmd, "list")) return do_list(m, a, err);
    if (!strcmp(a->cmd, "search")) return do_search(m, a, err);
    if (!strcmp(a->cmd, "show")) return do_show(m, a, err);
    if (!strcmp(a->cmd, "forget")) return do_forget(m, a, err);
    if (!strcmp(a->cmd, "export")) return do_export(m, a, err);
    return do_vacuum(m, err);
}

int hx_cmd_memory(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        memory_usage(stdout);
        return HX_EXIT_OK;
    }
    mem_args a = {0};
    int r = parse_mem_args(argc, argv, &a);
    if (r) return r;
    static const char *const cmds[] = {"list", "search", "show", "forget",
                                       "export", "vacuum", "audit"};
    int known = 0;
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++)
        known |= !strcmp(a.cmd, cmds[i]);
    if (!known) return hx_cli_bad_word("memory", "command", a.cmd);
    hx_memory_params p = hx_memory_default_params();
    p.path = a.db;
    /* none of these makes a database: the reading ones open it read-only */
    p.mode = !strcmp(a.cmd, "forget") || !strcmp(a.cmd, "vacuum") ? HX_MEMORY_EXISTING
                                                                   : HX_MEMORY_READONLY;
    hx_memory *m = NULL;
    hx_err err = {0};
    int rc = hx_memory_open(&p, &m, &err);
    if (rc == HX_ERR_NOTFOUND) {
        fail(rc, &err);
        return HX_EXIT_INPUT;
    }
    if (rc) return fail(rc, &err);
    r = run(m, &a, &err);
    hx_memory_close(m);
    return r;
}
