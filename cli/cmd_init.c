/* cmd_init.c: `hearth init`: asks for (or takes as options) who the user is
 * and where their calendar, mail and files are, checks them, creates
 * Hearth's own empty calendar and Maildir where none is given, and writes
 * config.json. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tools/tools.h"

typedef struct init_opts {
    const char *config, *name, *email, *tz, *calendar, *maildir, *model;
    const char *files[HX_MAX_ROOTS];
    int n_files, ask; /* ask: prompt for what no option gave (a terminal) */
} init_opts;

static void init_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth init [options]\n\n"
        "Writes your configuration (by default $XDG_CONFIG_HOME/hearth/config.json,\n"
        "or $HEARTH_HOME/config/config.json); never overwrites an existing one. On\n"
        "a terminal it asks for what the options below did not give (Enter takes\n"
        "the default in brackets). It checks each folder: a calendar folder or\n"
        "Maildir that does not exist yet is created empty; file roots must exist.\n\n"
        "      --name NAME         your name (invitations and mail are sent in it)\n"
        "      --email ADDRESS     your mail address\n"
        "      --timezone ZONE     an IANA time zone, e.g. Europe/Paris\n"
        "      --calendar PATH     your calendar: a vdir folder (one .ics per event)\n"
        "                          or an .ics file (default: Hearth's own folder)\n"
        "      --maildir PATH      your Maildir (default: Hearth's own)\n"
        "      --files DIR         a folder the files tools may read (repeatable;\n"
        "                          default ~/Documents when it exists)\n"
        "      --model FILE        the model to load (default: Hearth's own)\n"
        "      --config PATH       where to write config.json\n\n"
        "Exit codes: 0 written, 1 failed (e.g. a config is already there),\n"
        "2 bad command line, 3 a bad value (time zone, address, missing folder).\n"
        "'hearth doctor' then checks the whole setup.\n");
}

static int parse_init(int argc, char **argv, init_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ask = isatty(0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **dst = NULL;
        if (!strcmp(a, "--config")) dst = &o->config;
        else if (!strcmp(a, "--name")) dst = &o->name;
        else if (!strcmp(a, "--email")) dst = &o->email;
        else if (!strcmp(a, "--timezone")) dst = &o->tz;
        else if (!strcmp(a, "--calendar")) dst = &o->calendar;
        else if (!strcmp(a, "--maildir")) dst = &o->maildir;
        else if (!strcmp(a, "--model")) dst = &o->model;
        else if (!strcmp(a, "--files") && o->n_files < HX_MAX_ROOTS) dst = &o->files[o->n_files++];
        else if (!strcmp(a, "--files")) {
            fprintf(stderr, "hearth init: at most %d --files\n", HX_MAX_ROOTS);
            return HX_EXIT_USAGE;
        } else if (a[0] == '-') return hx_cli_bad_word("init", "option", a);
        else {
            fprintf(stderr, "hearth init: unexpected argument '%s' (see 'hearth init --help')\n", a);
            return HX_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "hearth init: %s needs a value\n", a);
            return HX_EXIT_USAGE;
        }
        *dst = argv[++i];
    }
    return HX_EXIT_OK;
}

/* An absolute path for p as the user typed it: "~/" is $HOME, a relative
 * path is relative to the working directory. Caller frees. */
static char *absolute(const char *p)
{
    char cwd[PATH_MAX];
    return hx_path_expand(p, getcwd(cwd, sizeof cwd) ? cwd : NULL);
}

/* Replaces *dst with a copy of v (a path made absolute); 0 or -1. */
static int set_field(char **dst, const char *v, int is_path)
{
    char *s = is_path ? absolute(v) : hx_strdup(v);
    if (!s) return -1;
    free(*dst);
    *dst = s;
    return 0;
}

/* The value for a field: the option's, else on a terminal the answer to
 * "PROMPT [current]: " (Enter keeps the current value), else NULL. */
static const char *answer(const init_opts *o, const char *opt, const char *prompt,
                          const char *current, char *line, size_t n)
{
    if (opt) return opt;
    if (!o->ask) return NULL;
    printf("%s [%s]: ", prompt, current ? current : "");
    fflush(stdout);
    if (!fgets(line, (int)n, stdin)) return NULL;
    line[strcspn(line, "\r\n")] = 0;
    return line[0] ? line : NULL;
}

static int is_dir(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static int is_file(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* Keeps the first n file roots of c, freeing the others. */
static void keep_roots(hx_config *c, int n)
{
    for (int i = n; i < c->n_file_roots; i++) {
        free(c->file_roots[i]);
        c->file_roots[i] = NULL;
    }
    c->n_file_roots = n;
}

/* Whether p names an .ics file (not a folder). */
static int is_ics(const char *p)
{
    size_t n = strlen(p);
    return n >= 4 && !strcmp(p + n - 4, ".ics");
}

/* Fills c from the options and answers. */
static int gather(const init_opts *o, hx_config *c)
{
    char line[4096];
    const char *v;
    int bad = 0;
    if ((v = answer(o, o->name, "Your name", c->user_name, line, sizeof line)))
        bad |= set_field(&c->user_name, v, 0);
    if ((v = answer(o, o->email, "Your mail address", c->user_email, line, sizeof line)))
        bad |= set_field(&c->user_email, v, 0);
    if ((v = answer(o, o->tz, "Your time zone", c->timezone, line, sizeof line)))
        bad |= set_field(&c->timezone, v, 0);
    if ((v = answer(o, o->calendar, "Your calendar (a folder or .ics file)", c->calendars[0],
                    line, sizeof line))) {
        bad |= set_field(&c->calendars[0], v, 1);
        if (!bad && !is_ics(c->calendars[0])) /* a folder: new events go there */
            bad |= set_field(&c->calendar_default, c->calendars[0], 0);
    }
    if ((v = answer(o, o->maildir, "Your Maildir", c->maildir, line, sizeof line)))
        bad |= set_field(&c->maildir, v, 1);
    if (o->model) bad |= set_field(&c->model, o->model, 1);
    for (int i = 0; i < o->n_files; i++) bad |= set_field(&c->file_roots[i], o->files[i], 1);
    if (o->n_files) c->n_file_roots = o->n_files;
    else if ((v = answer(o, NULL, "A folder the files tools may read (- for none)",
                         c->n_file_roots ? c->file_roots[0] : "none", line, sizeof line))) {
        keep_roots(c, strcmp(v, "-") ? 1 : 0);
        if (c->n_file_roots) bad |= set_field(&c->file_roots[0], v, 1);
    }
    return bad ? HX_ERR_NOMEM : HX_OK;
}

/* A folder the user names that init may not create: it must be there. */
static int must_exist(const char *what, const char *p, hx_err *err)
{
    if (is_dir(p)) return HX_OK;
    return hx_err_set(err, HX_ERR_NOTFOUND, "%s %s is not a folder: create it first, or "
                      "leave it out", what, p);
}

/* Creates dir (and for a Maildir its cur/ new/ tmp/) when missing, saying
 * so; a folder that is there but not a Maildir is refused, not changed. */
static int make_folder(const char *what, const char *dir, int maildir, hx_err *err)
{
    static const char *const subs[] = {"cur", "new", "tmp"};
    char sub[PATH_MAX + 8];
    int existed = is_dir(dir), rc = hx_mkdirs(dir, err);
    for (int i = 0; !rc && maildir && i < 3; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, subs[i]);
        if (existed && i < 2 && !is_dir(sub))
            return hx_err_set(err, HX_ERR_FORMAT, "%s is a folder but not a Maildir (it has no "
                              "%s/): give your Maildir with --maildir", dir, subs[i]);
        rc = hx_mkdirs(sub, err);
    }
    if (!rc && !existed) printf("created %s %s (empty)\n", what, dir);
    return rc;
}

/* The file roots must be there; the calendar (unless an .ics file that
 * is there), the default calendar and the Maildir are made when missing. */
static int make_folders(const hx_config *c, hx_err *err)
{
    const char *cal = c->calendars[0];
    int rc = HX_OK;
    for (int i = 0; !rc && i < c->n_file_roots; i++)
        rc = must_exist("file root", c->file_roots[i], err);
    if (!rc && !is_file(cal) && is_ics(cal))
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "calendar file %s does not exist", cal);
    if (!rc && !is_file(cal)) rc = make_folder("calendar folder", cal, 0, err);
    if (!rc) rc = make_folder("calendar folder", c->calendar_default, 0, err);
    if (!rc) rc = make_folder("Maildir", c->maildir, 1, err);
    return rc;
}

/* Writes c to path.new, loads it back (the checks every later command
 * makes: time zone, address), makes the folders, then puts it in place. */
static int write_checked(const hx_config *c, const char *path, hx_err *err)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    unlink(tmp);
    hx_config *back = NULL;
    int rc = hx_config_write(c, tmp, err);
    if (!rc && (rc = hx_config_load(tmp, &back, err))) {
        char why[sizeof err->msg];
        const char *field = strstr(err->msg, ": '");
        snprintf(why, sizeof why, "%s", field ? field + 2 : err->msg); /* not the .new name */
        hx_err_set(err, rc, "%s", why);
    }
    hx_config_free(back);
    if (!rc) rc = make_folders(c, err);
    if (!rc && rename(tmp, path))
        rc = hx_err_set(err, HX_ERR_IO, "cannot rename %s to %s", tmp, path);
    if (rc) unlink(tmp);
    return rc;
}

int hx_cmd_init(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) return init_usage(stdout), HX_EXIT_OK;
    init_opts o;
    int ex = parse_init(argc, argv, &o);
    if (ex) return ex;
    char std[4096];
    const char *path = o.config;
    if (!path && hx_path_config(std, sizeof std - 16) >= 0) {
        strcat(std, "/config.json");
        path = std;
    }
    hx_err err = {0};
    if (!path) return fprintf(stderr, "hearth init: no configuration folder\n"), HX_EXIT_FAIL;
    if (!access(path, F_OK)) {
        fprintf(stderr, "hearth init: %s already exists; not overwriting it (edit it, or "
                "move it away to start again; 'hearth doctor' checks it)\n", path);
        return HX_EXIT_FAIL;
    }
    hx_config *c = hx_config_default();
    if (c && c->n_file_roots && !is_dir(c->file_roots[0])) keep_roots(c, 0);
    int rc = c ? gather(&o, c) : HX_ERR_NOMEM;
    if (!rc) rc = write_checked(c, path, &err);
    hx_config_free(c);
    if (rc) {
        fprintf(stderr, "hearth init: %s\n", rc == HX_ERR_NOMEM ? "out of memory" : err.msg);
        return hx_cli_exit_code(rc);
    }
    printf("wrote %s\nnext: 'hearth doctor' checks the whole setup\n", path);
    return HX_EXIT_OK;
}
