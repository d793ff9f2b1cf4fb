/* cmd_ask.c: the assistant's verbs: `hearth ask TEXT` (one request),
 * `hearth chat` (a session with history) and `hearth feedback`. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_session.h"

static void ask_usage(FILE *f, const char *verb)
{
    if (!strcmp(verb, "chat"))
        fprintf(f, "usage: hearth chat [options]\n\n"
                   "A session with history: type a request per line. Commands: /tools\n"
                   "(the tools), /memory (what is remembered), /undo (forget the last\n"
                   "exchange), /quit.\n\n");
    else
        fprintf(f, "usage: hearth ask TEXT [options]\n\n"
                   "Plans with the local model, calls tools (each shown as\n"
                   "'-> name {arguments}' with its result status on stderr) and streams\n"
                   "the answer to stdout. The run is recorded in memory as an episode\n"
                   "(see 'hearth feedback').\n\n");
    fprintf(f,
        "  -m, --model FILE        GGUF model (default: the config's \"model\", then\n"
        "                          " CLI_DEFAULT_MODEL ")\n"
        "                          (on low battery or heat the governor may load\n"
        "                          the config's governor.small_model instead)\n"
        "      --config FILE       config.json (default: the standard location)\n"
        "  -y, --yes               answer yes where the policy asks (not for sends\n"
        "                          after untrusted content: see below)\n"
        "      --no                answer no to every question\n"
        "      --allow-tainted-send  allow sends (and memories kept) after\n"
        "                          untrusted content entered the conversation: a\n"
        "                          mail, an invitation, a file or its name, a tool's\n"
        "                          output or error, a memory that is not yours\n"
        "      --json              print the whole trace as JSON (no streaming)\n"
        "      --max-steps N       model turns per request (default 8)\n"
        "      --max-tokens N      generated tokens per request (default 1024)\n"
        "      --timeout S         wall-clock seconds per request (default 300)\n"
        "      --temp T            sampling temperature; 0 = greedy (default 0)\n"
        "      --seed S            sampling seed\n"
        "      --copy-bias B       logit bonus for call arguments copied from the\n"
        "                          conversation; 0 = none (default 6 in the\n"
        "                          compact and brief styles of small models,\n"
        "                          else 0)\n"
        "      --answer A          who writes the answer: model (its words, each\n"
        "                          fact copied from the conversation), results\n"
        "                          (the model only calls tools; the answer lists\n"
        "                          what they did and found, in fixed words) or auto\n"
        "                          (default: results in the compact and brief styles\n"
        "                          of small models, else model)\n"
        "      --tool-choice C     auto (default), required (the first turn must\n"
        "                          call a tool) or none\n"
        "      --tools LIST        offer only these tools: names or prefix.*,\n"
        "                          comma-separated (default: all)\n"
        "      --style S           prompt style: qwen3, chatml, llama3, compact,\n"
        "                          brief\n"
        "                          (default: from the model)\n"
        "  -c, --ctx N             context size (default min(trained, 4096))\n"
        "  -t, --threads N         0 = all cores (default)\n"
        "      --adapter FILE[:SCALE]  apply this LoRA adapter (repeatable)\n"
        "                          instead of the active ones (hearth lora)\n"
        "      --no-adapter        apply no adapter\n"
        "      --no-memory         neither recall nor record\n"
        "      --max-memory SIZE   bound on weights (mapped) + KV cache + scratch,\n"
        "                          e.g. 2G; beyond it the oldest KV pages go to a\n"
        "                          file in $XDG_CACHE_HOME/hearth/spill and are read\n"
        "                          back, so the conversation keeps its history up to\n"
        "                          the context size; past that (or when no spill file\n"
        "                          can be written) the oldest exchanges are dropped\n"
        "      --kv q8             8-bit KV cache (half the memory of f16)\n"
        "      --no-prefix-cache   do not keep the system prompt's and tool list's\n"
        "                          KV cache on disk ($XDG_CACHE_HOME/hearth/prefix)\n\n"
        "Hearth confines itself before it starts: it can open no network socket.\n"
        "After the answer, on stderr, from what the tools returned and not from\n"
        "the model's words: 'read:' lines (the events, messages and file lines\n"
        "the answer names) and one line for each write or send: what it did\n"
        "('added: ...', 'queued: ...'), or that it did not happen, and why;\n"
        "after a results answer, which says what was read and done, only the\n"
        "last.\n"
        "Facts in the answer are copies of what the request and the tools said.\n"
        "Exit codes: 0 answered, 1 failed (a call that did not\n"
        "get done, or a limit reached), 2 bad command line, 3 bad input (no model\n"
        "file, a configuration that is missing or names folders that are not\n"
        "there: hearth doctor), 4 a write or send was refused, 130 interrupted.\n");
}

static int fail(hx_err *err, const char *what)
{
    fprintf(stderr, "hearth: %s%s", what ? what : "", what ? ": " : "");
    hx_term_fputs(stderr, err->msg, 0); /* may quote a tool or server */
    fputc('\n', stderr);
    return hx_cli_exit_code(err->rc ? err->rc : HX_ERR_INTERNAL);
}

int hx_cli_ask_consent(void *user, const char *tool, const char *args, const char *why)
{
    (void)user;
    FILE *tty = fopen("/dev/tty", "r+");
    if (!tty) return 'n';
    /* the arguments may carry a mail's words: shown, never obeyed */
    fputs("\nhearth wants to run ", tty);
    hx_term_fputs(tty, tool, 0);
    fputc(' ', tty);
    hx_term_fputs(tty, args, 0);
    fprintf(tty, "\n  (%s)\nallow? [y]es / [n]o / [a]lways: ", why);
    fflush(tty);
    char line[32] = "";
    if (!fgets(line, sizeof line, tty)) line[0] = 'n';
    fclose(tty);
    return line[0] == 'y' || line[0] == 'Y' ? 'y' : line[0] == 'a' || line[0] == 'A' ? 'a' : 'n';
}

/* ---- Ctrl-C: the first stops generation, the second kills ---- */
static volatile sig_atomic_t g_sigint;
static void on_sigint(int sig)
{
    (void)sig;
    g_sigint = 1;
}
static void catch_sigint(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* the second Ctrl-C gets the default */
    sigaction(SIGINT, &sa, NULL);
    g_sigint = 0;
}
static int cancelled(void *user)
{
    (void)user;
    return g_sigint;
}

/* ---- what the user sees ---- */
/* What the model writes and what the tools say may quote a mail or a
 * tool's output: every piece is escaped (hx_term_escape) before it
 * reaches the terminal. */
static void show_text(void *user, const char *s, size_t n)
{
    (void)user;
    hx_buf b;
    hx_buf_init(&b);
    hx_term_escape(&b, s, n, 1);
    if (b.data) fputs(b.data, stdout);
    hx_buf_free(&b);
    fflush(stdout);
}
void hx_cli_show_call(FILE *f, const char *name, const char *args)
{
    fputs("-> ", f);
    hx_term_fputs(f, name, 0);
    fputc(' ', f);
    hx_term_fputs(f, args, 0);
    fputc('\n', f);
}

void hx_cli_show_result(FILE *f, const char *status, const char *detail)
{
    if (!strcmp(status, "ok")) {
        fprintf(f, "   ok (%zu bytes of result)\n", strlen(detail));
        return;
    }
    hx_buf b;
    hx_buf_init(&b);
    hx_term_escape(&b, detail, strnlen(detail, 300), 0);
    fprintf(f, "   %s: %s\n", status, b.data ? b.data : "");
    hx_buf_free(&b);
}

static void show_call(void *user, const char *name, const char *args)
{
    (void)user;
    fflush(stdout);
    hx_cli_show_call(stderr, name, args);
}
static void show_result(void *user, const char *name, const char *status, const char *detail)
{
    (void)user;
    (void)name;
    hx_cli_show_result(stderr, status, detail);
}

static void remember_last(int64_t id)
{
    char dir[4096], path[4200], txt[32];
    if (id <= 0 || hx_path_data(dir, sizeof dir) < 0) return;
    snprintf(path, sizeof path, "%s/last-episode", dir);
    int n = snprintf(txt, sizeof txt, "%lld\n", (long long)id);
    hx_err err = {0};
    if (!hx_mkdirs(dir, &err)) hx_write_file_atomic(path, txt, (size_t)n, &err);
}

/* One line on stderr for a write or send that did not happen (an item of
 * the trace's "done"); the result code it stands for: HX_ERR_DENIED
 * (refused), HX_ERR_IO (failed, or stopped before it ran). */
static int say_undone(const cJSON *d)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(d, "status"));
    const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(d, "error"));
    char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(d, "arguments"));
    fprintf(stderr, "hearth: %s: %s %.200s%s", cJSON_GetStringValue(cJSON_GetObjectItem(d, "action")),
            cJSON_GetStringValue(cJSON_GetObjectItem(d, "tool")), args ? args : "", args ? " " : "");
    free(args);
    if (!strcmp(st, "refused")) {
        fprintf(stderr, "%s\n", hx_agent_refusal_reason(cJSON_GetStringValue(cJSON_GetObjectItem(d, "by"))));
        return HX_ERR_DENIED;
    }
    fprintf(stderr, "%s%.300s\n", strcmp(st, "not run") ? "failed: " : "", e ? e : st);
    return HX_ERR_IO;
}

/* After the answer, from the trace and not from the model's words: what
 * the answer rests on (the items of the results it names, or the first
 * few when it names none), then a line for each write or send: what it
 * did ("added: ...", "queued: ..."), or that it did not happen and why;
 * with json (the trace printed holds the rest), or after a results
 * answer (which says the rest), only the last. Tools' words are escaped.
 * HX_ERR_DENIED when one was refused, else HX_ERR_IO when one failed,
 * else HX_OK. */
#define READ_SHOWN 5
static int report_trace(const cJSON *trace, int json)
{
    const cJSON *read = cJSON_GetObjectItem(trace, "read"), *it;
    int cited = 0, shown = 0, rc = HX_OK;
    cJSON_ArrayForEach(it, read) cited += cJSON_IsTrue(cJSON_GetObjectItem(it, "cited"));
    hx_buf b;
    hx_buf_init(&b);
    /* a results answer lists what was read itself */
    const int listed = json || cJSON_IsTrue(cJSON_GetObjectItem(trace, "results_answer"));
    const cJSON *shown_list = listed ? NULL : read;
    cJSON_ArrayForEach(it, shown_list)
    {
        if (cited ? !cJSON_IsTrue(cJSON_GetObjectItem(it, "cited")) : shown >= READ_SHOWN) continue;
        b.len = 0;
        hx_agent_read_line(it, &b);
        fputs("   read: ", stderr);
        hx_term_fputs(stderr, b.data ? b.data : "", 1);
        fputc('\n', stderr);
        shown++;
    }
    if (!listed && !cited && cJSON_GetArraySize(read) > shown)
        fprintf(stderr, "   read: (%d more)\n", cJSON_GetArraySize(read) - shown);
    hx_buf_free(&b);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(trace, "done"))
    {
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(it, "status"));
        if (st && !strcmp(st, "ok")) {
            if (listed) continue; /* --json's trace, or the results answer, says it */
            fprintf(stderr, "hearth: %s: ", cJSON_GetStringValue(cJSON_GetObjectItem(it, "action")));
            hx_term_fputs(stderr, cJSON_GetStringValue(cJSON_GetObjectItem(it, "text")), 0);
            fputc('\n', stderr);
            continue;
        }
        const int r = say_undone(it);
        if (rc != HX_ERR_DENIED) rc = r;
    }
    return rc;
}

static int run_one(cli_session *s, const cli_ask_opts *o, const char *text)
{
    hx_planner_io io = {NULL, show_text, show_call, show_result, cancelled};
    hx_planner_io quiet = {NULL, NULL, NULL, NULL, cancelled};
    cJSON *trace = NULL;
    hx_err err = {0};
    catch_sigint();
    const hx_planner_io *shown = o->json ? &quiet : &io;
    const char *tool;
    cJSON *args = NULL;
    int rc = hx_cli_session_request(s, text, &err);
    if (!rc && hx_cli_session_tool_tier(s, text, &tool, &args)) {
        fprintf(stderr, "hearth: governor: a plain read (governor.tool_tier): %s, no model\n",
                tool);
        rc = hx_planner_run_call(s->pl, text, tool, args, shown, &trace, &err);
    } else if (!rc) {
        rc = hx_planner_run(s->pl, text, shown, &trace, &err);
    }
    cJSON_Delete(args);
    signal(SIGINT, SIG_DFL);
    const int64_t episode = trace ? (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(trace, "episode")) : 0;
    remember_last(episode);
    hx_source_engine_end_turn(&s->src);
    hx_cli_session_record(s, episode);
    hx_cli_loop_report(stderr, s->loop, &s->loop_seen, o->json ? trace : NULL);
    if (o->json && trace) {
        char *j = cJSON_Print(trace);
        if (j) printf("%s\n", j);
        cJSON_free(j);
    } else {
        printf("\n");
    }
    fflush(stdout); /* the answer's end before what did not happen */
    if (rc) {
        fputs("hearth: ", stderr);
        hx_term_fputs(stderr, err.msg, 0);
        fputc('\n', stderr);
    }
    const char *answer = trace ? cJSON_GetStringValue(cJSON_GetObjectItem(trace, "answer")) : NULL;
    if (!rc && !o->json && answer && !answer[strspn(answer, " \t\r\n")])
        fputs("hearth: the model gave no answer it could ground; what the tools returned "
              "is below\n", stderr);
    int undone = trace ? report_trace(trace, o->json) : HX_OK;
    cJSON_Delete(trace);
    return rc ? rc : undone;
}

/* The start `hearth ask` and `hearth chat` share: help, options, session.
 * Returns -1 with *s open (the caller closes it), else the exit code. */
static int ask_start(int argc, char **argv, const char *verb, cli_ask_opts *o,
                     cli_session *s)
{
    if (hx_cli_wants_help(argc, argv)) {
        ask_usage(stdout, verb);
        return HX_EXIT_OK;
    }
    int ex = hx_cli_ask_parse(argc, argv, o);
    if (ex) return ex;
    o->ep.cancelled = cancelled; /* Ctrl-C during a long prefill */
    hx_err err = {0};
    if (hx_cli_session_open(s, o, &err)) {
        hx_cli_session_close(s);
        return fail(&err, NULL);
    }
    return -1;
}

int hx_cmd_ask(int argc, char **argv)
{
    cli_ask_opts o;
    cli_session s;
    int ex = ask_start(argc, argv, "ask", &o, &s);
    if (ex >= 0) return ex;
    int rc = run_one(&s, &o, o.text);
    hx_cli_session_close(&s);
    return hx_cli_exit_code(rc);
}

/* ---- chat ---- */
static void chat_memory(cli_session *s)
{
    hx_mem_list *l = NULL;
    hx_err err = {0};
    if (!s->mem || hx_memory_list(s->mem, NULL, 20, 0, &l, &err)) {
        printf("(no memory%s%s)\n", err.msg[0] ? ": " : "", err.msg);
        return;
    }
    if (!l->n) printf("(nothing remembered yet)\n");
    for (int i = 0; i < l->n; i++) {
        const hx_mem_item *it = &l->items[i];
        printf("#%lld [", (long long)it->id);
        hx_term_fputs(stdout, it->kind, 0);
        printf("%s%s] ", hx_mem_untrusted(it) ? ", " : "",
               hx_mem_untrusted(it) ? hx_mem_provenance_name(it->provenance) : "");
        hx_term_fputs(stdout, it->text, 0);
        putchar('\n');
    }
    hx_mem_list_free(l);
}

static int chat_command(cli_session *s, const char *line)
{
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return 1;
    if (!strcmp(line, "/tools"))
        hx_cli_print_tools(s->reg, NULL, 0);
    else if (!strcmp(line, "/memory")) chat_memory(s);
    else if (!strcmp(line, "/undo"))
        printf(hx_planner_undo(s->pl) ? "(forgot the last exchange)\n" : "(nothing to undo)\n");
    else printf("commands: /tools /memory /undo /quit\n");
    return 0;
}

/* A line (or the end) is there to read at once: a script's next request
 * does not wait for work done ahead of it. */
static int input_waiting(void)
{
    struct pollfd p = {0, POLLIN, 0};
    return poll(&p, 1, 0) != 0;
}

int hx_cmd_chat(int argc, char **argv)
{
    cli_ask_opts o;
    cli_session s;
    int ex = ask_start(argc, argv, "chat", &o, &s);
    if (ex >= 0) return ex;
    int rc = 0, tty = isatty(0);
    char line[8192];
    for (;;) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        if (!input_waiting()) hx_cli_session_prepare(&s);
        if (!fgets(line, sizeof line, stdin)) break;
        line[strcspn(line, "\n")] = 0;
        if (!line[0]) continue;
        if (line[0] == '/') {
            if (chat_command(&s, line)) break;
            continue;
        }
        rc = run_one(&s, &o, line);
    }
    hx_cli_session_close(&s);
    return rc == HX_ERR_CANCELLED ? HX_EXIT_CANCEL : HX_EXIT_OK;
}

/* ---- feedback ---- */
static int64_t last_episode(void)
{
    char dir[4096], path[4200], *s = NULL;
    size_t n;
    if (hx_path_data(dir, sizeof dir) < 0) return 0;
    snprintf(path, sizeof path, "%s/last-episode", dir);
    if (hx_read_file(path, 64, &s, &n, NULL)) return 0;
    int64_t id = strtoll(s, NULL, 10);
    free(s);
    return id;
}

static void feedback_usage(FILE *f)
{
    fprintf(f, "usage: hearth feedback [EPISODE] --accept | --correct TEXT | --reject [--json]\n\n"
               "Marks the last episode (or the given one) accepted, corrected with the\n"
               "right answer, or rejected. Accepted and corrected episodes are what the\n"
               "nightly fine-tuning learns from. --json prints {\"episode\", \"verdict\",\n"
               "\"correction\"}.\n");
}

int hx_cmd_feedback(int argc, char **argv)
{
    int verdict = -1;
    const char *corrected = NULL;
    int64_t id = 0;
    if (hx_cli_wants_help(argc, argv)) return feedback_usage(stdout), HX_EXIT_OK;
    int json = 0, n_verdicts = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        const char *a = argv[i];
        if (!strcmp(a, "--accept")) verdict = HX_VERDICT_ACCEPTED, n_verdicts++;
        else if (!strcmp(a, "--reject")) verdict = HX_VERDICT_REJECTED, n_verdicts++;
        else if (!strcmp(a, "--correct") && i + 1 < argc)
            verdict = HX_VERDICT_CORRECTED, corrected = argv[++i], n_verdicts++;
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] != '-' && !id && (id = strtoll(a, &end, 10)) > 0 && !*end) {}
        else if (a[0] == '-' && strcmp(a, "--correct")) return hx_cli_bad_word("feedback", "option", a);
        else return fprintf(stderr, "hearth feedback: %s: %s (see 'hearth feedback --help')\n", a,
                            a[0] == '-' ? "needs the right answer" : "not an episode number"),
                    HX_EXIT_USAGE;
    }
    if (n_verdicts != 1) {
        fprintf(stderr, "hearth feedback: give one of --accept, --correct TEXT, --reject%s\n",
                n_verdicts ? " (not several)" : "");
        return HX_EXIT_USAGE;
    }
    if (!id && !(id = last_episode())) {
        fprintf(stderr, "hearth feedback: no episode yet (run 'hearth ask' first)\n");
        return HX_EXIT_FAIL;
    }
    hx_memory *m = NULL;
    hx_memory_params mp = hx_memory_default_params();
    hx_err err = {0};
    int rc = hx_memory_open(&mp, &m, &err);
    if (!rc) rc = hx_memory_episode_set_verdict(m, id, verdict, corrected, &err);
    hx_memory_close(m);
    if (rc) return fail(&err, "feedback");
    if (!json) return printf("episode %lld: %s\n", (long long)id, hx_verdict_name(verdict)), 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "episode", (double)id);
    cJSON_AddStringToObject(o, "verdict", hx_verdict_name(verdict));
    if (corrected) cJSON_AddStringToObject(o, "correction", corrected);
    return hx_cli_json_out(o);
}
