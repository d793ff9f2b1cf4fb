/* cmd_serve.c: `hearth serve`: the listeners first, then Hearth confines
 * itself and opens the assistant's session as ask does, then serves until
 * SIGINT or SIGTERM; `--install` writes a systemd user unit. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_session.h"
#include "serve/serve.h"

static void serve_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth serve [options]\n\n"
        "Hearth for other apps and for a person in a browser, on this device only:\n"
        "an OpenAI-compatible API (GET /v1/models, POST /v1/chat/completions), the\n"
        "assistant with its tools, consent, memory and audit trail (POST\n"
        "/v1/hearth/ask, /v1/hearth/consent/ID, /v1/hearth/memory, /v1/hearth/audit)\n"
        "and a page at /. The model is loaded once.\n\n"
        "  --socket PATH           the UNIX socket (default:\n"
        "                          $XDG_RUNTIME_DIR/hearth/hearth.sock; its folder\n"
        "                          must be yours alone, the socket is made 0600)\n"
        "  --no-socket             no UNIX socket (then --listen)\n"
        "  --listen ADDR           also on loopback TCP: 127.0.0.1:PORT, [::1]:PORT,\n"
        "                          localhost:PORT or PORT (0: any free port); any\n"
        "                          other address is refused. It asks for a bearer\n"
        "                          token, made on first start in the config folder's\n"
        "                          serve-token (0600)\n"
        "  --token-file PATH       the token's file instead\n"
        "  --slots N               conversations with a KV cache of their own,\n"
        "                          decoding in turn (default 2)\n"
        "  --queue N               requests that may wait; more get 503 (default 64)\n"
        "  --max-body SIZE         largest request body (default 4M)\n"
        "  --idle-timeout S        a silent connection is closed (default 30)\n"
        "  --consent-timeout S     an unanswered consent question is a no (default 300)\n"
        "  --install               write a systemd user unit that runs hearth serve\n"
        "                          with these options, and say how to start it\n\n"
        "The model and the assistant's defaults, as for hearth ask: -m/--model,\n"
        "--config, --style, -c/--ctx, -t/--threads, --adapter, --no-adapter,\n"
        "--no-memory, --max-memory, --kv, --no-prefix-cache, --max-steps,\n"
        "--max-tokens, --timeout, --temp, --seed, --copy-bias, --tool-choice, --tools.\n"
        "Consent comes from each request's client (its yes or no, and the\n"
        "questions it answers); a send after untrusted content always asks.\n\n"
        "Hearth confines itself once it listens: it can open no other socket.\n"
        "Exit codes: 0 stopped by SIGTERM, 130 by SIGINT, 1 failure, 2 bad command\n"
        "line, 3 bad input (a model or configuration missing), 4 refused (an\n"
        "address that is not loopback, a socket path that is not ours).\n");
}

typedef struct serve_opts {
    hx_serve_params p;
    int install, no_socket;
    char *rest[256]; /* the options for the session, argv[0] "serve" */
    int n_rest;
} serve_opts;

static int num(const char *a, const char *v, double lo, double hi, double *out)
{
    return hx_cli_opt_double("serve", a, v, lo, hi, out) ? -1 : 0;
}

/* One of serve's own options with its value v: 1 (ok 0 when bad), or 0. */
static int own_value(serve_opts *o, const char *a, const char *v, int *ok)
{
    double d = 0;
    if (!strcmp(a, "--socket")) o->p.socket_path = v;
    else if (!strcmp(a, "--listen")) o->p.listen = v;
    else if (!strcmp(a, "--token-file")) o->p.token_path = v;
    else if (!strcmp(a, "--slots")) *ok = !num(a, v, 1, 64, &d), o->p.slots = (int)d;
    else if (!strcmp(a, "--queue")) *ok = !num(a, v, 1, 100000, &d), o->p.max_queue = (int)d;
    else if (!strcmp(a, "--idle-timeout"))
        *ok = !num(a, v, 1, 86400, &d), o->p.idle_timeout_s = (unsigned)d;
    else if (!strcmp(a, "--consent-timeout"))
        *ok = !num(a, v, 1, 86400, &d), o->p.consent_timeout_s = d;
    else if (!strcmp(a, "--max-body")) *ok = !hx_cli_parse_size(v, &o->p.max_body) && o->p.max_body;
    else return 0;
    if (!*ok) fprintf(stderr, "hearth serve: %s: '%s' is not a valid value\n", a, v);
    return 1;
}

static const char *const own_with_value[] = {"--socket", "--listen", "--token-file",
                                             "--slots", "--queue", "--idle-timeout",
                                             "--consent-timeout", "--max-body"};

static int parse_serve(int argc, char **argv, serve_opts *o)
{
    o->p = hx_serve_default_params();
    o->rest[o->n_rest++] = "serve";
    for (int i = 1; i < argc; i++) {
        int ok = 1, own = 0;
        for (size_t k = 0; k < sizeof own_with_value / sizeof *own_with_value; k++)
            own |= !strcmp(argv[i], own_with_value[k]);
        if (own && i + 1 >= argc)
            return fprintf(stderr, "hearth serve: %s needs a value\n", argv[i]), HX_EXIT_USAGE;
        if (own && own_value(o, argv[i], argv[i + 1], &ok) && ok) i++;
        else if (own) return HX_EXIT_USAGE;
        else if (!strcmp(argv[i], "--install")) o->install = 1;
        else if (!strcmp(argv[i], "--no-socket")) o->no_socket = 1;
        else if (o->n_rest < (int)(sizeof o->rest / sizeof *o->rest)) o->rest[o->n_rest++] = argv[i];
        else return fprintf(stderr, "hearth serve: too many arguments\n"), HX_EXIT_USAGE;
    }
    if (o->no_socket) o->p.socket_path = "";
    if (o->no_socket && !o->p.listen)
        return fprintf(stderr, "hearth serve: --no-socket needs --listen\n"), HX_EXIT_USAGE;
    return HX_EXIT_OK;
}

/* Consent is each request's: the terminal's answers do not apply. */
static int session_opts(serve_opts *so, cli_ask_opts *o)
{
    int ex = hx_cli_ask_parse(so->n_rest, so->rest, o);
    if (ex) return ex;
    if (o->yes || o->no || o->allow_tainted || o->json) {
        fprintf(stderr, "hearth serve: --yes, --no, --allow-tainted-send and --json are each "
                        "request's own (\"yes\", \"no\" in POST /v1/hearth/ask)\n");
        return HX_EXIT_USAGE;
    }
    o->ep.cancelled = hx_serve_prefill_check;
    return HX_EXIT_OK;
}

/* ---- --install: a systemd user unit ---- */
/* One ExecStart word, quoted for systemd (specifiers and variables kept
 * literal). */
static void unit_word(hx_buf *b, const char *w)
{
    hx_buf_putc(b, '"');
    for (const char *p = w; *p; p++) {
        if (*p == '"' || *p == '\\') hx_buf_putc(b, '\\');
        if (*p == '%' || *p == '$') hx_buf_putc(b, *p);
        hx_buf_putc(b, *p);
    }
    hx_buf_putc(b, '"');
}

static void unit_text(int argc, char **argv, hx_buf *b)
{
    char self[4096];
    hx_buf_puts(b, "[Unit]\n"
                   "Description=Hearth, the device's assistant for apps (hearth serve)\n"
                   "Documentation=man:hearth(1)\n\n"
                   "[Service]\n"
                   "ExecStart=");
    unit_word(b, hx_cli_self_path(self, sizeof self));
    hx_buf_puts(b, " serve");
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--install")) hx_buf_putc(b, ' '), unit_word(b, argv[i]);
    hx_buf_puts(b, "\nRestart=on-failure\n"
                   "Nice=5\n\n"
                   "[Install]\n"
                   "WantedBy=default.target\n");
}

static int install_unit(int argc, char **argv)
{
    char dir[4096], path[4200];
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s/systemd/user", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.config/systemd/user", home);
    else return fprintf(stderr, "hearth serve: neither XDG_CONFIG_HOME nor HOME is set\n"), HX_EXIT_FAIL;
    snprintf(path, sizeof path, "%s/hearth-serve.service", dir);
    hx_buf b;
    hx_buf_init(&b);
    unit_text(argc, argv, &b);
    char *old = NULL;
    size_t n = 0;
    hx_err err = {0};
    int rc = HX_EXIT_OK;
    if (!hx_read_file(path, 1 << 16, &old, &n, NULL) && (n != b.len || memcmp(old, b.data, n))) {
        fprintf(stderr, "hearth serve: %s exists with other contents; it is left as it is: "
                        "remove it and run --install again\n", path);
        rc = HX_EXIT_FAIL;
    } else if (!old && (hx_mkdirs(dir, &err) || hx_write_file_atomic(path, b.data, b.len, &err))) {
        fprintf(stderr, "hearth serve: %s\n", err.msg);
        rc = HX_EXIT_FAIL;
    } else {
        printf("%s%s\n%s\nthen: systemctl --user daemon-reload && systemctl --user enable --now "
               "hearth-serve.service\n", old ? "already there: " : "wrote ", path, b.data);
    }
    free(old);
    hx_buf_free(&b);
    return rc;
}

/* ---- serving until a signal ---- */
static volatile sig_atomic_t g_stop;
static void on_stop(int sig) { g_stop = sig; }

static void catch_stop(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static int fail(const hx_err *err)
{
    fputs("hearth serve: ", stderr);
    hx_term_fputs(stderr, err->msg, 0);
    fputc('\n', stderr);
    return hx_cli_exit_code(err->rc ? err->rc : HX_ERR_INTERNAL);
}

static int serve(hx_server *srv, const cli_session *s)
{
    hx_serve_deps d = {s->model, s->model_name, s->pp.family, s->ep, (hx_source *)&s->src,
                       s->pp, s->reg, s->x, s->policy, s->audit, s->mem};
    hx_err err = {0};
    catch_stop();
    if (hx_serve_start(srv, &d, &err)) return fail(&err);
    hx_buf where;
    hx_buf_init(&where);
    hx_serve_describe(srv, &where);
    fprintf(stderr, "hearth serve: %s (%s) on\n%s", s->model_name, hx_tpl_name(s->pp.family),
            where.data ? where.data : "");
    hx_buf_free(&where);
    while (!g_stop) {
        struct timespec t = {0, 200 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    fprintf(stderr, "hearth serve: stopping\n");
    return g_stop == SIGINT ? HX_EXIT_CANCEL : HX_EXIT_OK;
}

int hx_cmd_serve(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) return serve_usage(stdout), HX_EXIT_OK;
    serve_opts so;
    cli_ask_opts o;
    memset(&so, 0, sizeof so);
    int ex = parse_serve(argc, argv, &so);
    if (!ex) ex = session_opts(&so, &o);
    if (ex) return ex;
    if (so.install) return install_unit(argc, argv);
    hx_server *srv = NULL;
    cli_session s;
    hx_err err = {0};
    memset(&s, 0, sizeof s);
    /* the sockets before the confinement: accepted connections come from
     * them, and from here on no socket() succeeds */
    if (hx_serve_listen(&so.p, &srv, &err) || hx_cli_session_open(&s, &o, &err)) ex = fail(&err);
    else ex = serve(srv, &s);
    hx_serve_free(srv);
    hx_cli_session_close(&s);
    return ex;
}
