/* test_install.c: what the Makefile does to the machine, end to end:
 * scripts/deps.sh installs only the missing packages the README names
 * (--no-upgrade, apt's output in a log) and nothing when all are there
 * (make deps-browser: chromium, keeping a Node.js from elsewhere),
 * reading the Makefile installs nothing, the aarch64 runs are skipped
 * naming `make deps-aarch64` without their tools, and make install /
 * uninstall put and take hearth, its model and man page under PREFIX
 * (the installed hearth finding its model from any folder). apt-get,
 * dpkg-query, pkg-config and id are stand-ins that record their calls. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "test.h"
#include "cli_capture.h"

static char dir[PATH_MAX], root[PATH_MAX], hearth[PATH_MAX], build[PATH_MAX];
static int g_real; /* 1: the real tools on PATH, not the stand-ins */

/* Runs a shell command (printf-style) from the project root with the
 * stand-ins first on PATH and make's own variables cleared (this runs
 * under make test); stdout and stderr in dir/out and dir/err. */
__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
    char c[2048], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, sizeof c, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && unset MAKEFLAGS MFLAGS MAKELEVEL && export PATH='%s/%s':\"$PATH\" "
             "HEARTH_DEPS_LOG='%s/deps.log' CALLS='%s/calls' && %s >'%s/out' 2>'%s/err'",
             root, dir, g_real ? "none" : "fake", dir, dir, c, dir, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* dir/name's text ("" when absent); static, valid until the next call. */
static const char *text(const char *name)
{
    static char *t;
    char p[PATH_MAX];
    size_t n;
    free(t);
    t = NULL;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (hx_read_file(p, 0, &t, &n, NULL)) t = NULL;
    return t ? t : "";
}

static void fake(const char *name, const char *body)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/fake/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) return;
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    chmod(p, 0755);
}

/* The stand-ins: pkg-config finds the libraries when PKGS_OK is set,
 * dpkg-query says every package but those in $MISSING is installed (for
 * amd64, the machine's architecture as dpkg says it, or for arm64 only
 * where $FOREIGN_ONLY names it), id
 * says $AS_UID (default 0), apt-get records its arguments and fails when
 * APT_FAIL is set. */
static void make_fakes(void)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/fake", dir);
    mkdir(p, 0755);
    fake("pkg-config", "[ -n \"$PKGS_OK\" ]");
    fake("dpkg-query", "for a; do p=$a; done\n"
                       "case \" $MISSING \" in *\" $p \"*) exit 1;; esac\n"
                       "case $p in *:*) printf 'install ok installed\\n'; exit 0;; esac\n"
                       "arch=amd64\n"
                       "case \" $FOREIGN_ONLY \" in *\" $p \"*) arch=arm64;; esac\n"
                       "printf 'install ok installed %s\\n' $arch");
    fake("id", "echo ${AS_UID:-0}");
    fake("apt-get", "echo \"$*\" >>\"$CALLS\"; echo 'Reading package lists... (apt noise)'\n"
                    "[ -z \"$APT_FAIL\" ] || { echo 'E: Unable to locate package'; exit 100; }");
    fake("dpkg", "[ \"$1\" = --print-architecture ] && { echo amd64; exit 0; }\n"
                 "echo \"dpkg $*\" >>\"$CALLS\"");
}

static void test_deps_nothing_when_present(void)
{
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("PKGS_OK=1 sh scripts/deps.sh"), 0);
    EXPECT_STR_EQ(text("calls"), "");
    EXPECT_STR_EQ(text("err"), "");
    EXPECT_STR_EQ(text("out"), "");
    /* pkg-config absent but every package installed: nothing either */
    EXPECT_EQ_INT(sh("sh scripts/deps.sh"), 0);
    EXPECT_STR_EQ(text("calls"), "");
}

static void test_deps_installs_only_what_is_missing(void)
{
    sh("rm -f \"$CALLS\" \"$HEARTH_DEPS_LOG\"");
    EXPECT_EQ_INT(sh("MISSING='libcjson-dev pkg-config' sh scripts/deps.sh"), 0);
    EXPECT_STR_EQ(text("calls"), "update\n"
                                 "install -y --no-upgrade --no-install-recommends "
                                 "libcjson-dev pkg-config\n");
    EXPECT(strstr(text("err"), "installing libcjson-dev pkg-config") != NULL);
    EXPECT(strstr(text("err"), "deps.log") != NULL);       /* says where apt's output is */
    EXPECT(strstr(text("err"), "apt noise") == NULL);      /* not on the terminal */
    EXPECT(strstr(text("deps.log"), "apt noise") != NULL); /* but in the log */
}

/* A library installed for another architecture only (libpcre2-dev:arm64,
 * which make deps-aarch64 adds) is not this machine's: make deps installs
 * the native one beside it. */
static void test_deps_wants_this_machines_build(void)
{
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("FOREIGN_ONLY=libpcre2-dev sh scripts/deps.sh"), 0);
    EXPECT_STR_EQ(text("calls"), "update\n"
                                 "install -y --no-upgrade --no-install-recommends "
                                 "libpcre2-dev\n");
    /* the cross tools' own arm64 package is found as it is named */
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("FOREIGN_ONLY=libpcre2-dev sh scripts/deps.sh --check aarch64"), 0);
    EXPECT_STR_EQ(text("calls"), "");
}

static void test_deps_failure_names_the_log(void)
{
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("MISSING=libical-dev APT_FAIL=1 sh scripts/deps.sh"), 1);
    EXPECT(strstr(text("err"), "could not install libical-dev") != NULL);
    EXPECT(strstr(text("err"), "deps.log") != NULL);
    EXPECT(strstr(text("err"), "Unable to locate package") != NULL); /* its last lines */
    /* not root: says what to run, installs nothing */
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("MISSING=libical-dev AS_UID=1000 sh scripts/deps.sh"), 1);
    EXPECT(strstr(text("err"), "make deps") != NULL);
    EXPECT_STR_EQ(text("calls"), "");
}

static void test_deps_check_only_looks(void)
{
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("MISSING=qemu-user sh scripts/deps.sh --check aarch64"), 1);
    EXPECT_STR_EQ(text("out"), " qemu-user\n");
    EXPECT_STR_EQ(text("calls"), ""); /* no apt-get, no dpkg --add-architecture */
    EXPECT_EQ_INT(sh("sh scripts/deps.sh --check aarch64"), 0);
}

/* make deps-browser: Debian's chromium, and Node.js only when no node
 * and npm are on the PATH: one from elsewhere is kept, never replaced by
 * Debian's (whose npm conflicts with it). */
static void test_deps_browser_keeps_node(void)
{
    sh("rm -f \"$CALLS\"");
    fake("node", "exit 0");
    fake("npm", "exit 0");
    EXPECT_EQ_INT(sh("MISSING='chromium nodejs npm' sh scripts/deps.sh browser"), 0);
    EXPECT_STR_EQ(text("calls"), "update\n"
                                 "install -y --no-upgrade --no-install-recommends chromium\n");
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("MISSING=chromium sh scripts/deps.sh --check browser"), 1);
    EXPECT_STR_EQ(text("out"), " chromium\n");
    EXPECT_STR_EQ(text("calls"), "");
    sh("rm -f '%s/fake/node' '%s/fake/npm'", dir, dir);
}

/* Reading the Makefile, or planning a build, runs no apt-get (in a
 * scratch build folder: make -n still runs the lines that call make). */
static void test_make_reads_without_installing(void)
{
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("MISSING='libsqlite3-dev qemu-user' make -n all BUILD='%s/b2'", dir), 0);
    EXPECT_EQ_INT(sh("MISSING='libsqlite3-dev qemu-user' make -n test BUILD='%s/b2'", dir), 0);
    EXPECT_STR_EQ(text("calls"), "");
}

/* Without the cross tools the aarch64 runs report a skip that names the
 * command installing them. */
static void test_aarch64_skipped_naming_the_opt_in(void)
{
    char b[PATH_MAX + 8], w[PATH_MAX + 64];
    snprintf(b, sizeof b, "%s/b", dir);
    sh("rm -f \"$CALLS\"");
    EXPECT_EQ_INT(sh("MISSING=gcc-aarch64-linux-gnu make -s aarch64-build T=engine/kernels "
                     "BUILD='%s'", b), 0);
    EXPECT_STR_EQ(text("calls"), "");
    snprintf(w, sizeof w, "'%s/aarch64/tests/engine/test_kernels@max'", b);
    EXPECT_EQ_INT(sh("%s", w), 0);
    EXPECT(strstr(text("out"), "skip engine/kernels@max:") != NULL);
    EXPECT(strstr(text("out"), "make deps-aarch64") != NULL);
}

static void test_install_and_uninstall(void)
{
    char prefix[PATH_MAX + 8], p[PATH_MAX + 64];
    snprintf(prefix, sizeof prefix, "%s/prefix", dir);
    g_real = 1;
    int rc = sh("make -s install PREFIX='%s' BUILD='%s'", prefix, build);
    if (rc) printf("# %s\n", text("err"));
    ASSERT(rc == 0);
    static const char *const files[] = {"bin/hearth", "share/hearth/hearth-tiny.gguf",
                                        "share/man/man1/hearth.1"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", prefix, files[i]);
        EXPECT(access(p, R_OK) == 0);
    }
    snprintf(p, sizeof p, "%s/share/man/man1/hearth.1", prefix);
    char *man = NULL;
    size_t n;
    EXPECT(!hx_read_file(p, 0, &man, &n, NULL) && !strncmp(man, ".TH HEARTH 1", 12) &&
           strstr(man, ".SS quantize"));
    free(man);
    /* the printed cron and systemd lines run the installed program */
    EXPECT_EQ_INT(sh("'%s/bin/hearth' nightly --install", prefix), 0);
    snprintf(p, sizeof p, "\"%s/bin/hearth\" nightly >>", prefix);
    EXPECT(strstr(text("out"), p) != NULL);
    snprintf(p, sizeof p, "ExecStart=\"%s/bin/hearth\" nightly", prefix);
    EXPECT(strstr(text("out"), p) != NULL);
    /* from another folder, in a sample world with no "model": the
     * installed default model answers */
    rc = sh("cp -r tests/fixtures/world '%s/world' && cd '%s' && mkdir -p home && "
            "cp -r world home/config && mkdir -p home/config/files && HEARTH_HOME=home HEARTH_NOW=2026-12-01T09:00:00+01:00 "
            "'%s/bin/hearth' ask 'What is on my calendar tomorrow?'", dir, dir, prefix);
    EXPECT_EQ_INT(rc, 0);
    EXPECT(strstr(text("err"), "-> calendar.") != NULL);
    EXPECT_EQ_INT(sh("make -s uninstall PREFIX='%s' BUILD='%s'", prefix, build), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", prefix, files[i]);
        EXPECT(access(p, F_OK) != 0);
    }
    g_real = 0;
}

int main(void)
{
    const char *b = getenv("HEARTH_BUILD");
    snprintf(build, sizeof build, "%s", b && *b ? b : "build");
    if (cli_hearth_path(hearth)) return test_summary();
    if (!getcwd(root, sizeof root) || access("scripts/deps.sh", R_OK)) {
        printf("skip all: not run from the project root\n");
        return test_summary();
    }
    snprintf(dir, sizeof dir, "/tmp/hx-install-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    make_fakes();
    RUN(test_deps_nothing_when_present);
    RUN(test_deps_installs_only_what_is_missing);
    RUN(test_deps_wants_this_machines_build);
    RUN(test_deps_failure_names_the_log);
    RUN(test_deps_check_only_looks);
    RUN(test_deps_browser_keeps_node);
    RUN(test_make_reads_without_installing);
    RUN(test_aarch64_skipped_naming_the_opt_in);
    RUN(test_install_and_uninstall);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return test_summary();
}
