/* mail.c: benchmark of mail.search over a generated Maildir of N messages
 * (default 10,000): the first search (which builds the index), then warm
 * searches of each kind, median and worst of repeated runs.
 * Usage: bench/mail [N]. Writes the Maildir under a temporary HEARTH_HOME. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "tools/mail_int.h"

static const char *const people[] = {"Bob Lee", "Chloe Dubois", "Dan Wright", "Erin Park",
                                     "Fay Wong", "Gus Olsen", "Hana Sato", "Ivan Petrov",
                                     "Jo Martin", "Kim Novak", "Lea Roux", "Max Weber"};
static const char *const topics[] = {"budget", "roadmap", "offsite", "invoice", "hiring",
                                     "release", "security review", "design sync",
                                     "quarterly report", "travel", "onboarding", "contract"};
static const char *const words[] = {"please", "review", "the", "attached", "draft", "before",
                                    "Friday", "numbers", "meeting", "notes", "team", "plan",
                                    "update", "thanks", "question", "about", "schedule",
                                    "customer", "feedback", "deadline", "project", "costs"};

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static void make_message(hx_buf *b, int i)
{
    const char *who = people[rnd(12)], *topic = topics[rnd(12)];
    char date[64], addr[64];
    snprintf(addr, sizeof addr, "%.*s@example.org", (int)strcspn(who, " "), who);
    hx_mail_format_date(1764547200 + (int64_t)i * 3100 + rnd(3000), 3600, date, sizeof date);
    hx_buf_printf(b, "From: %s <%s>\nTo: Alice Martin <alice@example.org>\n"
                     "Subject: %s #%d\nDate: %s\nMessage-ID: <m%d@example.org>\n"
                     "MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n",
                  who, addr, topic, i, date, i);
    int n = 150 + (int)rnd(350);
    for (int w = 0; w < n; w++)
        hx_buf_printf(b, "%s%s", words[rnd(22)], w % 14 == 13 ? "\n" : " ");
    hx_buf_printf(b, "\nAbout the %s.\n", topic);
}

/* Writes the messages straight into cur/ and new/ (no fsync: this is the
 * benchmark's world, not a delivery test); 70% are read. */
static int fill(const char *md, int n)
{
    hx_buf b;
    hx_err e;
    hx_progress pr;
    char dir[PATH_MAX + 8], path[PATH_MAX + 64];
    static const char *const subs[] = {"cur", "new", "tmp"};
    for (int k = 0; k < 3; k++) {
        snprintf(dir, sizeof dir, "%s/%s", md, subs[k]);
        if (hx_mkdirs(dir, &e)) return 1;
    }
    hx_progress_start(&pr, "writing messages", n);
    for (int i = 0; i < n; i++) {
        hx_buf_init(&b);
        make_message(&b, i);
        int seen = rnd(10) < 7;
        snprintf(path, sizeof path, "%s/%s/17950%05d.M%dP1.bench%s", md, seen ? "cur" : "new",
                 i, i, seen ? ":2,S" : "");
        FILE *f = fopen(path, "w");
        int ok = f && fwrite(b.data, 1, b.len, f) == b.len;
        if (f) fclose(f);
        hx_buf_free(&b);
        if (!ok) return 1;
        hx_progress_update(&pr, i + 1, NULL);
    }
    hx_progress_finish(&pr);
    return 0;
}

/* Wall seconds of one search; its CPU seconds go into *cpu. */
static double time_call(hx_tools *reg, const char *json, int *hits, double *cpu)
{
    cJSON *args = cJSON_Parse(json), *res = NULL;
    hx_err e;
    double c0 = bench_cpu_seconds(), t0 = hx_time_mono();
    int rc = hx_tools_call(reg, "mail.search", args, &res, &e);
    double dt = hx_time_mono() - t0;
    *cpu = bench_cpu_seconds() - c0;
    *hits = rc ? -1 : (int)cJSON_GetObjectItem(res, "total")->valuedouble;
    if (rc) fprintf(stderr, "bench: %s\n", e.msg);
    cJSON_Delete(res);
    cJSON_Delete(args);
    return dt;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    char home[] = "/tmp/hx-bench-mail-XXXXXX", md[PATH_MAX];
    if (!mkdtemp(home)) return 1;
    setenv("HEARTH_HOME", home, 1);
    snprintf(md, sizeof md, "%s/Mail", home);
    if (fill(md, n)) return 1;
    hx_config cfg = {.maildir = md, .user_email = "alice@example.org"};
    hx_tools *reg = hx_tools_new(&cfg);
    hx_err e;
    if (!reg || hx_mail_register_tools(reg, &e)) return 1;
    int hits;
    double cpu, cold = time_call(reg, "{\"from\":\"bob\"}", &hits, &cpu);
    printf("mail.search over %d messages: median and worst wall time of 20 warm runs,\n"
           "and median CPU time (user+system; the wall time includes waiting for a\n"
           "core on a loaded machine)\n\n", n);
    printf("| query | hits | median ms | worst ms | CPU ms |\n|---|---:|---:|---:|---:|\n");
    printf("| first search, builds the index | %d | %.0f | | %.0f |\n", hits, cold * 1e3,
           cpu * 1e3);
    static const char *const queries[] = {
        "{\"from\":\"bob\"}", "{\"text\":\"budget deadline\"}",
        "{\"unread\":true,\"since\":\"2026-03-01\",\"until\":\"2026-04-01\"}",
        "{\"subject\":\"offsite\",\"limit\":5}", "{\"regex\":\"secur\\\\w+ review #12\\\\d\"}",
        /* nothing found, and what it nearly found: the sender's other mail;
         * the words' mail when no mail is from the "sender" */
        "{\"text\":\"zebra\",\"from\":\"bob\"}", "{\"text\":\"budget\",\"from\":\"much\"}"};
    for (size_t q = 0; q < sizeof queries / sizeof *queries; q++) {
        double t[20], c[20];
        for (int r = 0; r < 20; r++) t[r] = time_call(reg, queries[q], &hits, &c[r]);
        qsort(t, 20, sizeof *t, cmp_d);
        qsort(c, 20, sizeof *c, cmp_d);
        printf("| `%s` | %d | %.1f | %.1f | %.1f |\n", queries[q], hits, t[10] * 1e3,
               t[19] * 1e3, c[10] * 1e3);
    }
    hx_tools_free(reg);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", home);
    if (getenv("HX_BENCH_KEEP")) return 0;
    return system(cmd) ? 1 : 0;
}
