/* test_outputs.c: the verbs' outputs through the binary, end to end: a
 * device (a private node standing in for /dev/null) is written through,
 * never replaced; an output that is an input is refused; a link updates
 * its file and stays; /dev/stdout and - are written through; an
 * interrupted run leaves no temporary; read commands create nothing; the
 * mail index's progress has a real total and few redraws. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "memory/memory.h"
#include "test.h"
#include "cli_capture.h"

static char dir[PATH_MAX], hearth[PATH_MAX], errf[PATH_MAX + 16];

/* Runs `hearth ARGS` (a shell fragment: redirections allowed) in dir with
 * stdout in dir/out unless ARGS redirects it, stderr in errf; the exit
 * code, or 128 + the signal. */
__attribute__((format(printf, 1, 2))) static int run(const char *fmt, ...)
{
    char args[2048], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && exec 2>'%s' && HEARTH_HOME='%s/home' '%s' %s %s", dir,
             errf, dir, hearth, args, strchr(args, '>') ? "" : ">out");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *path)
{
    char *t = NULL;
    size_t n;
    return hx_read_file(path, 0, &t, &n, NULL) ? NULL : t;
}

static int err_has(const char *s)
{
    char *t = slurp(errf);
    int has = t && strstr(t, s);
    if (!has) printf("# stderr: %s\n", t ? t : "(none)");
    free(t);
    return has;
}

/* dir/name into buf (PATH_MAX). */
static char *in(char *buf, const char *name)
{
    snprintf(buf, PATH_MAX, "%s/%s", dir, name);
    return buf;
}

static int same_bytes(const char *a, const char *b)
{
    char pa[PATH_MAX], pb[PATH_MAX], ha[65] = "a", hb[65] = "b";
    hx_sha256_file(in(pa, a), NULL, ha, NULL);
    hx_sha256_file(in(pb, b), NULL, hb, NULL);
    return !strcmp(ha, hb);
}

/* Names holding ".tmp." in dir/sub (the writer's temporaries). */
static int tmp_count(const char *sub)
{
    char p[PATH_MAX];
    DIR *d = opendir(in(p, sub));
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* A private character device with /dev/null's numbers, or -1 (not root). */
static int make_null(const char *name)
{
    char p[PATH_MAX];
    unlink(in(p, name));
    return mknod(p, S_IFCHR | 0666, makedev(1, 3));
}

static int is_null(const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    return !lstat(in(p, name), &st) && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

static void put(const char *name, const char *text)
{
    char p[PATH_MAX];
    FILE *f = fopen(in(p, name), "w");
    if (f) fputs(text, f), fclose(f);
}

static void test_quantize_to_a_device(void)
{
    if (make_null("null")) SKIP("mknod needs root");
    EXPECT_EQ_INT(run("quantize m.gguf null --type Q8_0"), 0);
    EXPECT(is_null("null")); /* still the device: written through */
    EXPECT_EQ_INT(tmp_count("."), 0);
}

static void test_quantize_refuses_its_input(void)
{
    char p[PATH_MAX], q[PATH_MAX];
    put("keep.gguf", "");
    ASSERT(run("mkmodel -o own.gguf --seed 5") == 0);
    ASSERT(run("quantize own.gguf keep.gguf --type Q8_0") == 0); /* keep: a copy to compare */
    ASSERT(run("quantize own.gguf own-q.gguf --type Q8_0") == 0);
    link(in(p, "own.gguf"), in(q, "own-hard.gguf"));
    symlink("own.gguf", in(q, "own-sym.gguf"));
    const char *names[] = {"own.gguf", "own-hard.gguf", "own-sym.gguf"};
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ_INT(run("quantize own.gguf %s --type Q8_0", names[i]), 2);
        EXPECT(err_has("is the input own.gguf itself"));
    }
    /* the input as -o /dev/stdout redirected onto it: refused too */
    EXPECT_EQ_INT(run("quantize own.gguf /dev/stdout --type Q8_0 >>own.gguf"), 2);
    EXPECT_EQ_INT(run("quantize own-q.gguf own-q2.gguf --type Q8_0"), 0); /* control */
    EXPECT(run("info -m own.gguf") == 0); /* the input is intact */
    EXPECT_EQ_INT(tmp_count("."), 0);
}

/* -o LINK: the file the link names gets the output; the link stays. */
static void test_quantize_through_a_link(void)
{
    char p[PATH_MAX], to[PATH_MAX];
    mkdir(in(p, "models"), 0755);
    put("models/current.gguf", "an older model");
    symlink("models/current.gguf", in(p, "current.gguf"));
    EXPECT_EQ_INT(run("quantize m.gguf current.gguf --type Q8_0"), 0);
    struct stat st;
    EXPECT(!lstat(p, &st) && S_ISLNK(st.st_mode));
    ssize_t n = readlink(p, to, sizeof to - 1);
    EXPECT(n == 19 && !memcmp(to, "models/current.gguf", 19));
    EXPECT(same_bytes("models/current.gguf", "ref.gguf"));
    EXPECT_EQ_INT(tmp_count("models"), 0);
}

/* /dev/stdout and - write the GGUF to standard output (a file or a pipe),
 * whole and alone: the report goes to stderr. */
static void test_quantize_to_standard_output(void)
{
    EXPECT_EQ_INT(run("quantize m.gguf /dev/stdout --type Q8_0 >piped1.gguf"), 0);
    EXPECT(same_bytes("piped1.gguf", "ref.gguf"));
    EXPECT(err_has("total"));
    EXPECT_EQ_INT(run("quantize m.gguf - --type Q8_0 | cat >piped2.gguf"), 0);
    EXPECT(same_bytes("piped2.gguf", "ref.gguf"));
    EXPECT_EQ_INT(run("quantize m.gguf /dev/stdout --type Q8_0 | cat >piped3.gguf"), 0);
    EXPECT(same_bytes("piped3.gguf", "ref.gguf"));
    struct stat st;
    EXPECT(!lstat("/dev/stdout", &st) && S_ISLNK(st.st_mode)); /* the link is untouched */
}

/* Every other verb's output, to a private device: written through. */
static void test_every_writer_to_a_device(void)
{
    if (make_null("dev")) SKIP("mknod needs root");
    static const char *const cmds[] = {
        "mkmodel -o dev",
        "model diff m.gguf m2.gguf -o dev",
        "model patch m.gguf delta.gguf -o dev",
        "memory export --db mem.db -o dev",
        "train data.txt --out dev --steps 2 --layers 1 --embd 16 --heads 2 --kv-heads 1 "
        "--head-dim 8 --ff 32 --ctx 32 --seq 16 --batch 1",
        "train data.txt --out small.gguf --svg dev --ckpt dev --steps 2 --layers 1 --embd 16 "
        "--heads 2 --kv-heads 1 --head-dim 8 --ff 32 --ctx 32 --seq 16 --batch 1",
        "vocab train data.txt -o dev --size 300",
        "datagen --n 2 -o dev --dir dg",
        "quantize mv.gguf q.gguf --type Q8_0 --calibrate data.txt --imatrix-out dev",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        int rc = run("%s", cmds[i]);
        if (rc) printf("# %s: exit %d\n", cmds[i], rc);
        EXPECT_EQ_INT(rc, 0);
        EXPECT(is_null("dev"));
    }
    char p[PATH_MAX];
    EXPECT(access(in(p, "dev.svg"), F_OK) != 0); /* no loss curve beside a device */
    EXPECT_EQ_INT(tmp_count("."), 0);
}

static void test_memory_export_refuses_the_database(void)
{
    char p[PATH_MAX];
    ASSERT(run("memory export --db mem.db -o copy.db") == 0); /* control, and a copy */
    EXPECT_EQ_INT(run("memory export --db mem.db -o mem.db"), 2);
    EXPECT(err_has("is the input"));
    EXPECT_EQ_INT(run("memory list --db mem.db"), 0);
    char *out = slurp(in(p, "out"));
    EXPECT(out && strstr(out, "the boiler is serviced in May"));
    free(out);
    struct stat st;
    EXPECT(!stat(in(p, "copy.db"), &st) && (st.st_mode & 0777) == 0600); /* private */
}

static void test_read_commands_create_nothing(void)
{
    char p[PATH_MAX];
    static const char *const cmds[] = {"list", "search boiler", "show 1", "export",
                                       "audit", "forget 1", "vacuum"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        EXPECT_EQ_INT(run("memory %s --db none/x.db", cmds[i]), 3);
        EXPECT(err_has("no such database"));
    }
    EXPECT(access(in(p, "none"), F_OK) != 0);
    EXPECT_EQ_INT(run("memory list"), 3); /* the default database, in HEARTH_HOME */
    EXPECT(access(in(p, "home/data"), F_OK) != 0);
}

/* A run killed by sig while writing: no temporary, the old file intact. */
static void interrupted(int sig)
{
    char p[PATH_MAX];
    put("gen.jsonl", "old");
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        if (chdir(dir)) _exit(126);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1), dup2(null, 2);
        execl(hearth, "hearth", "datagen", "--n", "1000000", "-o", "gen.jsonl", "--dir", "dgi",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 10000 && tmp_count(".") == 0; i++) usleep(1000);
    EXPECT_EQ_INT(tmp_count("."), 1);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == sig); /* a shell says 128 + sig */
    EXPECT_EQ_INT(tmp_count("."), 0);
    char *t = slurp(in(p, "gen.jsonl"));
    EXPECT(t && !strcmp(t, "old"));
    free(t);
}

static void test_interrupted_run_leaves_no_temporary(void)
{
    interrupted(SIGINT);
    interrupted(SIGTERM);
}

/* n messages in a Maildir under dir/mail/config. */
static int make_mailbox(int n)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/mail/config/mail/cur", dir);
    if (hx_mkdirs(p, NULL)) return -1;
    snprintf(p, sizeof p, "%s/mail/config/mail/new", dir);
    hx_mkdirs(p, NULL);
    snprintf(p, sizeof p, "%s/mail/config/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return -1;
    fputs("{\"maildir\": \"mail\"}\n", f);
    fclose(f);
    for (int i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s/mail/config/mail/cur/1795%06d.M%dP1.host:2,S", dir, i, i);
        if (!(f = fopen(p, "w"))) return -1;
        fprintf(f, "From: a%d@example.org\nTo: me@example.org\nSubject: note %d\n"
                   "Date: Mon, 7 Dec 2026 09:00:00 +0100\nMessage-ID: <%d@x>\n\nbody %d\n",
                i, i, i, i);
        fclose(f);
    }
    return 0;
}

/* The index of n messages built under a terminal: its output. */
static char *index_on_a_terminal(double *secs)
{
    hx_buf b;
    hx_buf_init(&b);
    int m;
    double t0 = hx_time_mono();
    pid_t pid = forkpty(&m, NULL, NULL, NULL);
    if (pid < 0) return NULL;
    if (pid == 0) {
        char home[PATH_MAX + 8];
        snprintf(home, sizeof home, "%s/mail", dir);
        setenv("HEARTH_HOME", home, 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1); /* the result; stderr stays the terminal */
        execl(hearth, "hearth", "tools", "call", "mail.search", "{\"text\": \"note\", \"limit\": 1}",
              (char *)NULL);
        _exit(127);
    }
    char buf[4096];
    for (ssize_t k; (k = read(m, buf, sizeof buf)) > 0;) hx_buf_append(&b, buf, (size_t)k);
    waitpid(pid, NULL, 0);
    close(m);
    *secs = hx_time_mono() - t0;
    return hx_buf_steal(&b, NULL);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

static void test_mail_index_progress(void)
{
    const int n = 20000;
    char cmd[PATH_MAX + 64];
    ASSERT(make_mailbox(n) == 0);
    double secs = 0;
    char *out = index_on_a_terminal(&secs);
    ASSERT(out);
    int draws = count_of(out, "\r\033[K");
    printf("# %d messages indexed in %.1f s under a terminal: %d redraws, %zu bytes\n", n, secs,
           draws, strlen(out));
    EXPECT(draws <= (int)(secs * 4) + 2);
    EXPECT(strlen(out) < 4096);
    EXPECT(strstr(out, "/0 ") == NULL);
    if (draws) EXPECT(strstr(out, "/20000") != NULL); /* the real total */
    free(out);
    /* on a pipe: nothing but, for long work, one final line */
    snprintf(cmd, sizeof cmd, "rm -rf '%s/mail/cache'", dir);
    ASSERT(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "HEARTH_HOME=mail '%s' tools call mail.search "
             "'{\"text\": \"note\", \"limit\": 1}' >/dev/null 2>'%s'", hearth, errf);
    char cwd[PATH_MAX];
    ASSERT(getcwd(cwd, sizeof cwd) && chdir(dir) == 0);
    EXPECT(system(cmd) == 0);
    ASSERT(chdir(cwd) == 0);
    char *err = slurp(errf);
    EXPECT(err && count_of(err, "\r") == 0 && count_of(err, "\n") <= 1);
    if (err && *err) EXPECT(strstr(err, "indexing mail  20000/20000  done in") == err);
    free(err);
}

/* The inputs the tests share: two small models, a delta, a reference
 * quantization, a text, a vocabulary and a model with it (calibration
 * reads text), and a memory database. */
static int setup(void)
{
    char p[PATH_MAX];
    FILE *f = fopen(in(p, "data.txt"), "w");
    if (!f) return -1;
    for (int i = 0; i < 200; i++) fprintf(f, "the boiler is serviced in May, line %d.\n", i);
    fclose(f);
    hx_memory_params mp = hx_memory_default_params();
    mp.path = in(p, "mem.db");
    hx_memory *m = NULL;
    hx_mem_new nm = {.kind = "fact", .text = "the boiler is serviced in May"};
    if (hx_memory_open(&mp, &m, NULL) || hx_memory_remember(m, &nm, NULL, NULL, NULL)) return -1;
    hx_memory_close(m);
    return run("mkmodel -o m.gguf") || run("mkmodel -o m2.gguf --seed 2") ||
           run("vocab train data.txt -o vocab.gguf --size 300") ||
           run("mkmodel -o mv.gguf --vocab vocab.gguf") ||
           run("model diff m.gguf m2.gguf -o delta.gguf") ||
           run("quantize m.gguf ref.gguf --type Q8_0");
}

int main(void)
{
    if (cli_hearth_path(hearth)) return test_summary();
    snprintf(dir, sizeof dir, "/tmp/hx-outputs-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(errf, sizeof errf, "%s/err", dir);
    if (setup()) {
        printf("FAIL setup: %s\n", slurp(errf));
        return 1;
    }
    RUN(test_quantize_to_a_device);
    RUN(test_quantize_refuses_its_input);
    RUN(test_quantize_through_a_link);
    RUN(test_quantize_to_standard_output);
    RUN(test_every_writer_to_a_device);
    RUN(test_memory_export_refuses_the_database);
    RUN(test_read_commands_create_nothing);
    RUN(test_interrupted_run_leaves_no_temporary);
    RUN(test_mail_index_progress);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return test_summary();
}
