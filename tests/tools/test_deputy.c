/* test_deputy.c: the built-in tools used as deputies by someone who can
 * write near the user's folders: a root swapped for a link, links raced
 * into a path, FIFOs where files are read, in file roots, calendars and
 * Maildirs; each escape with its control (the same action where allowed).
 * The hostile pieces are made here. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "tools/calendar_int.h"
#include "tools/mail_int.h"

static char home[PATH_MAX];

__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
    char cmd[4 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* home/rel, in a static ring of buffers (a few live at once). */
static const char *at(const char *rel)
{
    static char bufs[8][PATH_MAX];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, PATH_MAX, "%s/%s", home, rel);
    return b;
}

static void put(const char *rel, const char *text)
{
    FILE *f = fopen(at(rel), "w");
    if (f) fputs(text, f), fclose(f);
}

static cJSON *call(hx_tools *reg, const char *name, const char *json, int *rc, hx_err *e)
{
    cJSON *args = cJSON_Parse(json), *res = NULL;
    memset(e, 0, sizeof *e);
    *rc = hx_tools_call(reg, name, args, &res, e);
    cJSON_Delete(args);
    return res;
}

static const char *text_of(const cJSON *r)
{
    const cJSON *t = cJSON_GetObjectItem(r, "text");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* A registry with the built-in tools on cfg. */
static hx_tools *tools_on(hx_config *cfg)
{
    hx_err e;
    hx_tools *reg = hx_tools_new(cfg);
    if (reg && hx_tools_register_builtins(reg, &e)) {
        printf("# register: %s\n", e.msg);
        hx_tools_free(reg);
        return NULL;
    }
    return reg;
}

/* A hang is a failure, not a stuck test run. */
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL a tool blocked (on a FIFO?)\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* ---- file roots ---- */

/* The tool holds the folder it opened: a root replaced by a link to
 * another folder (here one holding a "secret") does not move it, by a
 * relative or an absolute path; a new registry refuses the link, and the
 * real folder still works. */
static void test_files_root_swapped_for_link(void)
{
    ASSERT(sh("mkdir -p %s %s && echo mine > %s && echo SECRET > %s", at("docs"), at("vault"),
              at("docs/a.txt"), at("vault/secret.txt")) == 0);
    static hx_config cfg;
    static char *roots[1];
    roots[0] = (char *)at("docs");
    memcpy(cfg.file_roots, roots, sizeof roots);
    cfg.n_file_roots = 1;
    hx_tools *reg = tools_on(&cfg);
    ASSERT(reg);
    int rc;
    hx_err e;
    cJSON *r = call(reg, "files.read", "{\"path\":\"a.txt\"}", &rc, &e); /* control */
    ASSERT(rc == HX_OK);
    EXPECT_STR_EQ(text_of(r), "mine\n");
    cJSON_Delete(r);
    /* someone with write access beside the root swaps it for a link */
    ASSERT(rename(at("docs"), at("docs.orig")) == 0);
    ASSERT(symlink(at("vault"), at("docs")) == 0);
    r = call(reg, "files.read", "{\"path\":\"secret.txt\"}", &rc, &e);
    EXPECT(r == NULL && rc == HX_ERR_NOTFOUND);
    char json[PATH_MAX + 32];
    snprintf(json, sizeof json, "{\"path\":\"%s\"}", at("docs/secret.txt"));
    r = call(reg, "files.read", json, &rc, &e);
    EXPECT(r == NULL && rc != HX_OK);
    r = call(reg, "files.search", "{\"content\":\"SECRET\"}", &rc, &e);
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "files")), 0);
    cJSON_Delete(r);
    r = call(reg, "files.read", "{\"path\":\"a.txt\"}", &rc, &e); /* still the real folder */
    EXPECT(rc == HX_OK && !strcmp(text_of(r), "mine\n"));
    cJSON_Delete(r);
    hx_tools_free(reg);
    /* a new session: the link in place of the root is refused, clearly */
    reg = tools_on(&cfg);
    ASSERT(reg);
    r = call(reg, "files.read", "{\"path\":\"secret.txt\"}", &rc, &e);
    EXPECT(r == NULL && rc == HX_ERR_DENIED);
    EXPECT(strstr(e.msg, "symbolic link") && strstr(e.msg, "file_roots"));
    hx_tools_free(reg);
    /* control: the real folder configured works */
    roots[0] = (char *)at("docs.orig");
    memcpy(cfg.file_roots, roots, sizeof roots);
    reg = tools_on(&cfg);
    ASSERT(reg);
    r = call(reg, "files.read", "{\"path\":\"a.txt\"}", &rc, &e);
    EXPECT(rc == HX_OK && !strcmp(text_of(r), "mine\n"));
    cJSON_Delete(r);
    hx_tools_free(reg);
}

typedef struct flipper {
    const char *dir, *link_to;
    volatile int stop;
} flipper;

/* Swaps dir with a link to link_to, atomically, back and forth, as fast
 * as it can; dir is the real folder again when it stops. */
static void *flip(void *arg)
{
    flipper *f = arg;
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.l", f->dir);
    unlink(tmp);
    if (symlink(f->link_to, tmp)) return NULL;
    int swapped = 0;
    while (!f->stop || swapped)
        if (!renameat2(AT_FDCWD, tmp, AT_FDCWD, f->dir, RENAME_EXCHANGE)) swapped = !swapped;
    unlink(tmp);
    return NULL;
}

/* A link raced into the middle of a path is never followed: the secret
 * never comes back, however the race falls; a read after it succeeds. */
static void test_files_race_link_in_path(void)
{
    ASSERT(sh("mkdir -p %s %s && echo mine > %s && echo SECRET > %s", at("race/sub"),
              at("racevault"), at("race/sub/f.txt"), at("racevault/f.txt")) == 0);
    static hx_config cfg;
    cfg.file_roots[0] = (char *)at("race");
    cfg.n_file_roots = 1;
    hx_tools *reg = tools_on(&cfg);
    ASSERT(reg);
    flipper f = {at("race/sub"), at("racevault"), 0};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, flip, &f) == 0);
    int leaked = 0, okc = 0;
    for (int i = 0; i < 10000; i++) {
        int rc;
        hx_err e;
        cJSON *r = call(reg, "files.read", "{\"path\":\"sub/f.txt\"}", &rc, &e);
        if (r && strstr(text_of(r), "SECRET")) leaked++;
        if (r && !strstr(text_of(r), "SECRET")) okc++;
        cJSON_Delete(r);
    }
    f.stop = 1;
    pthread_join(th, NULL);
    printf("# race: %d ok, %d leaked\n", okc, leaked);
    EXPECT_EQ_INT(leaked, 0);
    int rc;
    hx_err e;
    cJSON *r = call(reg, "files.read", "{\"path\":\"sub/f.txt\"}", &rc, &e); /* control */
    EXPECT(rc == HX_OK && !strcmp(text_of(r), "mine\n"));
    cJSON_Delete(r);
    hx_tools_free(reg);
}

/* A FIFO in a root is refused at once (read) or skipped and counted
 * (search), listed as "other"; a regular file beside it reads. */
static void test_files_fifo(void)
{
    ASSERT(sh("mkdir -p %s && echo budget > %s", at("fifo"), at("fifo/plain.txt")) == 0);
    ASSERT(mkfifo(at("fifo/pipe.txt"), 0644) == 0);
    static hx_config cfg;
    cfg.file_roots[0] = (char *)at("fifo");
    cfg.n_file_roots = 1;
    hx_tools *reg = tools_on(&cfg);
    ASSERT(reg);
    int rc;
    hx_err e;
    alarm(20);
    cJSON *r = call(reg, "files.read", "{\"path\":\"pipe.txt\"}", &rc, &e);
    EXPECT(r == NULL && rc == HX_ERR_INVALID && strstr(e.msg, "FIFO"));
    r = call(reg, "files.read", "{\"path\":\"plain.txt\"}", &rc, &e); /* control */
    EXPECT(rc == HX_OK && !strcmp(text_of(r), "budget\n"));
    cJSON_Delete(r);
    r = call(reg, "files.search", "{\"content\":\"budget\"}", &rc, &e);
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "files")), 1);
    EXPECT_EQ_INT(cJSON_GetObjectItem(r, "special_files_skipped")->valueint, 1);
    cJSON_Delete(r);
    r = call(reg, "files.search", "{\"name\":\"*.txt\"}", &rc, &e);
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "files")), 1);
    cJSON_Delete(r);
    alarm(0);
    hx_tools_free(reg);
}

/* files.list shows a link to a folder out of the root as a link and does
 * not follow it; listing through it is refused; a real subfolder lists. */
static void test_files_list_link_not_followed(void)
{
    ASSERT(sh("mkdir -p %s %s && echo x > %s && echo s > %s", at("lst/real"), at("lstout"),
              at("lst/real/in.txt"), at("lstout/out.txt")) == 0);
    ASSERT(symlink(at("lstout"), at("lst/away")) == 0);
    static hx_config cfg;
    cfg.file_roots[0] = (char *)at("lst");
    cfg.n_file_roots = 1;
    hx_tools *reg = tools_on(&cfg);
    ASSERT(reg);
    int rc;
    hx_err e;
    cJSON *r = call(reg, "files.list", "{\"path\":\"\"}", &rc, &e);
    ASSERT(r);
    int links = 0, dirs = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(r, "entries"))
    {
        const char *type = cJSON_GetObjectItem(it, "type")->valuestring;
        links += !strcmp(type, "link");
        dirs += !strcmp(type, "dir");
    }
    EXPECT_EQ_INT(links, 1);
    EXPECT_EQ_INT(dirs, 1);
    cJSON_Delete(r);
    r = call(reg, "files.list", "{\"path\":\"away\"}", &rc, &e);
    EXPECT(r == NULL && rc == HX_ERR_DENIED);
    r = call(reg, "files.list", "{\"path\":\"real\"}", &rc, &e); /* control */
    EXPECT(r && cJSON_GetArraySize(cJSON_GetObjectItem(r, "entries")) == 1);
    cJSON_Delete(r);
    r = call(reg, "files.search", "{\"name\":\"*.txt\"}", &rc, &e);
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "files")), 1);
    EXPECT_EQ_INT(cJSON_GetObjectItem(r, "links_not_followed")->valueint, 1);
    cJSON_Delete(r);
    hx_tools_free(reg);
}

/* One missing root is named with how to fix it; the others still work. */
static void test_files_missing_root(void)
{
    ASSERT(mkdir(at("present"), 0700) == 0);
    put("present/p.txt", "here\n");
    static hx_config cfg;
    cfg.file_roots[0] = (char *)at("absent");
    cfg.file_roots[1] = (char *)at("present");
    cfg.n_file_roots = 2;
    hx_tools *reg = tools_on(&cfg);
    ASSERT(reg);
    int rc;
    hx_err e;
    cJSON *r = call(reg, "files.list", "{}", &rc, &e);
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "entries")), 1);
    const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "problems"), 0);
    EXPECT(cJSON_IsString(p) && strstr(p->valuestring, "absent") &&
           strstr(p->valuestring, "does not exist") && strstr(p->valuestring, "file_roots"));
    cJSON_Delete(r);
    r = call(reg, "files.read", "{\"path\":\"p.txt\"}", &rc, &e);
    EXPECT(rc == HX_OK && !strcmp(text_of(r), "here\n"));
    cJSON_Delete(r);
    hx_tools_free(reg);
}

/* ---- calendars ---- */

static const char event_fmt[] =
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
    "UID:%s\r\nDTSTAMP:20261101T000000Z\r\nDTSTART:20261201T%02d0000Z\r\n"
    "DTEND:20261201T%02d3000Z\r\nSUMMARY:%s\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

static void put_event(const char *rel, const char *uid, int hour, const char *title)
{
    char text[1024];
    snprintf(text, sizeof text, event_fmt, uid, hour, hour, title);
    put(rel, text);
}

static int titles_have(const cJSON *r, const char *title)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(r, "events"))
    {
        const cJSON *t = cJSON_GetObjectItem(it, "title");
        if (cJSON_IsString(t) && !strcmp(t->valuestring, title)) return 1;
    }
    return 0;
}

static int problems_have(const cJSON *r, const char *needle)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(r, "problems"))
    {
        char *s = cJSON_PrintUnformatted(it);
        int hit = s && strstr(s, needle);
        free(s);
        if (hit) return 1;
    }
    return 0;
}

static hx_config *cal_config(const char *dir)
{
    static hx_config cfg;
    static char *cal;
    free(cal);
    cal = hx_strdup(at(dir));
    memset(&cfg, 0, sizeof cfg);
    cfg.user_email = "alice@example.org";
    cfg.timezone = "UTC";
    cfg.calendars[0] = cal;
    cfg.n_calendars = 1;
    cfg.calendar_default = cal;
    cfg.outbox = (char *)at("cal-outbox");
    return &cfg;
}

/* A calendar folder swapped for a link to someone else's: reads and new
 * events stay in the folder opened; a new registry refuses the link. */
static void test_calendar_folder_swapped_for_link(void)
{
    ASSERT(sh("mkdir -p %s %s", at("cal"), at("othercal")) == 0);
    put_event("cal/mine.ics", "mine@x", 9, "Mine");
    put_event("othercal/theirs.ics", "theirs@x", 10, "Theirs");
    hx_config *cfg = cal_config("cal");
    hx_tools *reg = tools_on(cfg);
    ASSERT(reg);
    int rc;
    hx_err e;
    const char *range = "{\"range\":\"2026-12-01\"}";
    cJSON *r = call(reg, "calendar.list_events", range, &rc, &e); /* control */
    ASSERT(r);
    EXPECT(titles_have(r, "Mine"));
    cJSON_Delete(r);
    ASSERT(rename(at("cal"), at("cal.orig")) == 0);
    ASSERT(symlink(at("othercal"), at("cal")) == 0);
    r = call(reg, "calendar.list_events", range, &rc, &e);
    ASSERT(r);
    EXPECT(titles_have(r, "Mine") && !titles_have(r, "Theirs"));
    cJSON_Delete(r);
    r = call(reg, "calendar.create_event", "{\"title\":\"New\",\"start\":\"2026-12-01T14:00:00Z\"}",
             &rc, &e);
    EXPECT(rc == HX_OK);
    cJSON_Delete(r);
    EXPECT(sh("grep -q SUMMARY:New %s/*.ics", at("cal.orig")) == 0);
    EXPECT(sh("grep -q SUMMARY:New %s/*.ics", at("othercal")) != 0);
    hx_tools_free(reg);
    reg = tools_on(cfg); /* a new session */
    ASSERT(reg);
    r = call(reg, "calendar.list_events", range, &rc, &e);
    ASSERT(r);
    EXPECT(!titles_have(r, "Theirs") && problems_have(r, "symbolic link"));
    cJSON_Delete(r);
    r = call(reg, "calendar.create_event", "{\"title\":\"New2\",\"start\":\"2026-12-01T15:00:00Z\"}",
             &rc, &e);
    EXPECT(r == NULL && rc == HX_ERR_DENIED && strstr(e.msg, "calendar_default"));
    EXPECT(sh("grep -q SUMMARY:New2 %s/*.ics", at("othercal")) != 0);
    hx_tools_free(reg);
}

/* In a calendar folder, a .ics link (to a file out of it) and a .ics
 * FIFO are skipped with a problem each, at once; the real event lists. */
static void test_calendar_link_and_fifo_skipped(void)
{
    ASSERT(sh("mkdir -p %s", at("cal2")) == 0);
    put_event("cal2/real.ics", "real@x", 9, "Real");
    put_event("outside.ics", "outside@x", 11, "Outside");
    ASSERT(symlink(at("outside.ics"), at("cal2/link.ics")) == 0);
    ASSERT(mkfifo(at("cal2/pipe.ics"), 0644) == 0);
    hx_tools *reg = tools_on(cal_config("cal2"));
    ASSERT(reg);
    int rc;
    hx_err e;
    alarm(20);
    cJSON *r = call(reg, "calendar.list_events", "{\"range\":\"2026-12-01\"}", &rc, &e);
    alarm(0);
    ASSERT(r);
    EXPECT(titles_have(r, "Real"));
    EXPECT(!titles_have(r, "Outside"));
    EXPECT(problems_have(r, "link.ics") && problems_have(r, "symbolic link"));
    EXPECT(problems_have(r, "pipe.ics") && problems_have(r, "FIFO"));
    cJSON_Delete(r);
    hx_tools_free(reg);
}

/* An event file swapped for a link between read and write is refused,
 * and the link's target is left as it was; a save without it works. */
static void test_calendar_save_refuses_link(void)
{
    ASSERT(sh("mkdir -p %s", at("cal3")) == 0);
    put_event("cal3/ev.ics", "ev@x", 9, "Event");
    put("victim.txt", "untouched\n");
    hx_tools *reg = tools_on(cal_config("cal3"));
    ASSERT(reg);
    hx_cal *c;
    hx_cal_file *f;
    hx_err e;
    ASSERT(hx_cal_load(reg, &c, &e) == HX_OK);
    icalcomponent *ev = hx_cal_find_uid(c, "ev@x", &f);
    ASSERT(ev);
    icalcomponent_set_summary(ev, "Changed");
    EXPECT_EQ_INT(hx_cal_save(c, f, &e), HX_OK); /* control */
    ASSERT(rename(at("cal3/ev.ics"), at("cal3/ev.orig")) == 0);
    ASSERT(symlink(at("victim.txt"), at("cal3/ev.ics")) == 0);
    icalcomponent_set_summary(ev, "Through the link");
    EXPECT_EQ_INT(hx_cal_save(c, f, &e), HX_ERR_STATE);
    EXPECT(sh("grep -q untouched %s", at("victim.txt")) == 0);
    hx_cal_free(c);
    hx_tools_free(reg);
}

/* ---- mail ---- */

static hx_config *mail_config(void)
{
    static hx_config cfg;
    cfg.user_name = "Alice";
    cfg.user_email = "alice@example.org";
    cfg.maildir = (char *)at("Mail");
    cfg.outbox = (char *)at("Outbox");
    return &cfg;
}

static const char msg_fmt[] = "From: %s <%s@example.org>\nSubject: %s\n\n%s\n";

static void put_msg(const char *rel, const char *who, const char *subject)
{
    char text[512];
    snprintf(text, sizeof text, msg_fmt, who, who, subject, "body");
    put(rel, text);
}

static int search_count(hx_tools *reg, const char *json)
{
    int rc;
    hx_err e;
    cJSON *r = call(reg, "mail.search", json, &rc, &e);
    if (!r) printf("# mail.search %s: %s\n", json, e.msg);
    int n = r ? cJSON_GetArraySize(cJSON_GetObjectItem(r, "messages")) : -1;
    cJSON_Delete(r);
    return n;
}

/* In a Maildir, a message file that is a link to a secret, a FIFO, and a
 * Maildir++ folder that is a link are not read; real messages are. */
static void test_maildir_links_and_fifo(void)
{
    ASSERT(sh("mkdir -p %s/cur %s/new %s/tmp %s/cur %s/new", at("Mail"), at("Mail"),
              at("Mail"), at("elsewhere/.Secret"), at("elsewhere/.Secret")) == 0);
    put_msg("Mail/cur/1.a:2,S", "bob", "real one");
    put_msg("secret.eml", "eve", "root secret");
    ASSERT(symlink(at("secret.eml"), at("Mail/cur/2.b:2,S")) == 0);
    ASSERT(mkfifo(at("Mail/new/3.c"), 0644) == 0);
    put_msg("elsewhere/.Secret/cur/4.d:2,S", "mallory", "other secret");
    ASSERT(symlink(at("elsewhere/.Secret"), at("Mail/.Secret")) == 0);
    hx_tools *reg = tools_on(mail_config());
    ASSERT(reg);
    alarm(20);
    EXPECT_EQ_INT(search_count(reg, "{\"from\":\"bob\"}"), 1); /* control */
    EXPECT_EQ_INT(search_count(reg, "{\"from\":\"eve\"}"), 0);
    EXPECT_EQ_INT(search_count(reg, "{\"from\":\"mallory\"}"), 0);
    EXPECT_EQ_INT(search_count(reg, "{}"), 1);
    alarm(0);
    hx_tools_free(reg);
}

/* The outbox's new/ swapped for a link: mail.send refuses and writes
 * nothing there; the Maildir's .Drafts as a link: mail.draft refuses;
 * with real folders both work. */
static void test_outbox_and_drafts_links(void)
{
    ASSERT(sh("mkdir -p %s/tmp %s/cur %s", at("Outbox"), at("Outbox"), at("dropbox")) == 0);
    ASSERT(symlink(at("dropbox"), at("Outbox/new")) == 0);
    ASSERT(symlink(at("dropbox"), at("Mail/.Drafts")) == 0);
    hx_tools *reg = tools_on(mail_config());
    ASSERT(reg);
    const char *mail = "{\"to\":\"bob@example.org\",\"subject\":\"hi\",\"body\":\"x\"}";
    int rc;
    hx_err e;
    cJSON *r = call(reg, "mail.send", mail, &rc, &e);
    EXPECT(r == NULL && rc == HX_ERR_DENIED && strstr(e.msg, "symbolic link"));
    r = call(reg, "mail.draft", mail, &rc, &e);
    EXPECT(r == NULL && rc == HX_ERR_DENIED);
    EXPECT(sh("[ -z \"$(ls -A %s)\" ]", at("dropbox")) == 0);
    ASSERT(unlink(at("Outbox/new")) == 0 && unlink(at("Mail/.Drafts")) == 0);
    r = call(reg, "mail.send", mail, &rc, &e); /* control */
    EXPECT(rc == HX_OK);
    cJSON_Delete(r);
    r = call(reg, "mail.draft", mail, &rc, &e);
    EXPECT(rc == HX_OK);
    cJSON_Delete(r);
    EXPECT(sh("[ \"$(ls %s/new | wc -l)\" = 1 ]", at("Outbox")) == 0);
    hx_tools_free(reg);
}

/* ---- denial of service from content ---- */

static const char flood_ics[] =
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
    "UID:flood@x\r\nDTSTAMP:20261101T000000Z\r\nDTSTART:%s\r\nDURATION:%s\r\n"
    "RRULE:FREQ=%s\r\nSUMMARY:Flood\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

static void put_flood(const char *rel, const char *start, const char *dur, const char *freq)
{
    char text[1024];
    snprintf(text, sizeof text, flood_ics, start, dur, freq);
    put(rel, text);
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* A SECONDLY rule starting today: list_events gives the first events in
 * order and says where it stopped and how to get the rest, instead of
 * failing; the events before the cut are all there. */
static void test_calendar_flood_listed_in_part(void)
{
    ASSERT(sh("mkdir -p %s", at("flood")) == 0);
    put_flood("flood/flood.ics", "20261201T080000Z", "PT1S", "SECONDLY");
    put_event("flood/meeting.ics", "meeting@x", 9, "Meeting");
    hx_tools *reg = tools_on(cal_config("flood"));
    ASSERT(reg);
    int rc;
    hx_err e;
    cJSON *r = call(reg, "calendar.list_events", "{\"range\":\"2026-12-01\",\"limit\":500}",
                    &rc, &e);
    ASSERT(r);
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItem(r, "truncated")));
    const cJSON *more = cJSON_GetObjectItem(r, "more");
    /* 5000 kept: the meeting and 4999 seconds of the flood from 08:00:00 */
    EXPECT_STR_EQ(str_of(more, "complete_until"), "2026-12-01T09:23:19+00:00");
    EXPECT(strstr(str_of(more, "note"), "ask again with a range starting at"));
    const cJSON *evs = cJSON_GetObjectItem(r, "events");
    EXPECT_EQ_INT(cJSON_GetArraySize(evs), 500);
    EXPECT_STR_EQ(str_of(cJSON_GetArrayItem(evs, 0), "start"), "2026-12-01T08:00:00+00:00");
    EXPECT_EQ_INT(cJSON_GetObjectItem(r, "count")->valueint, 5000);
    cJSON_Delete(r);
    /* the rest, from where it stopped: the meeting before the cut is there */
    r = call(reg, "calendar.list_events",
             "{\"start\":\"2026-12-01T09:00:00Z\",\"end\":\"2026-12-01T09:10:00Z\",\"query\":\"Meeting\"}",
             &rc, &e);
    ASSERT(r);
    EXPECT(titles_have(r, "Meeting"));
    cJSON_Delete(r);
    hx_tools_free(reg);
}

/* Free slots are never offered where the expansion was cut: with the
 * flood, none (the rule keeps the day busy) and a note; free_busy marks
 * the rest of the range unknown. Control: without the flood, slots. */
static void test_calendar_flood_no_false_free_slot(void)
{
    hx_tools *reg = tools_on(cal_config("flood"));
    ASSERT(reg);
    int rc;
    hx_err e;
    const char *q = "{\"duration_minutes\":30,\"range\":\"2026-12-01\",\"working_hours_only\":false}";
    cJSON *r = call(reg, "calendar.find_slots", q, &rc, &e);
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "slots")), 0);
    EXPECT(cJSON_GetObjectItem(r, "more") != NULL);
    cJSON_Delete(r);
    r = call(reg, "calendar.free_busy", "{\"range\":\"2026-12-01\"}", &rc, &e);
    ASSERT(r);
    EXPECT_STR_EQ(str_of(cJSON_GetObjectItem(r, "unknown"), "start"), "2026-12-01T09:23:19+00:00");
    EXPECT_STR_EQ(str_of(cJSON_GetObjectItem(r, "unknown"), "end"), "2026-12-02T00:00:00+00:00");
    cJSON_Delete(r);
    ASSERT(unlink(at("flood/flood.ics")) == 0);
    r = call(reg, "calendar.find_slots", q, &rc, &e); /* control */
    ASSERT(r);
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "slots")), 5);
    EXPECT(cJSON_GetObjectItem(r, "more") == NULL);
    cJSON_Delete(r);
    hx_tools_free(reg);
}

/* A rule too dense to reach the range within the step limit: a problem
 * names it and nothing after where it stopped is claimed. */
static void test_calendar_rule_too_dense(void)
{
    ASSERT(sh("mkdir -p %s", at("dense")) == 0);
    put_flood("dense/dense.ics", "20261101T000000Z", "PT1M", "MINUTELY");
    hx_tools *reg = tools_on(cal_config("dense"));
    ASSERT(reg);
    int rc;
    hx_err e;
    cJSON *r = call(reg, "calendar.list_events", "{\"range\":\"2026-12-01\"}", &rc, &e);
    ASSERT(r);
    EXPECT(problems_have(r, "repeats too often"));
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItem(r, "truncated")));
    EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r, "events")), 0);
    cJSON_Delete(r);
    hx_tools_free(reg);
}

/* ---- MCP tool listings ---- */

static const char flood_server[] =
    "import json, sys\n"
    "n, page, desc = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    if 'id' not in m: continue\n"
    "    if m['method'] == 'initialize':\n"
    "        r = {'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}}}\n"
    "    elif m['method'] == 'tools/list':\n"
    "        a = int((m.get('params') or {}).get('cursor') or 0); b = min(n, a + page)\n"
    "        r = {'tools': [{'name': 't%05d' % i, 'description': 'd' * desc,\n"
    "              'inputSchema': {'type': 'object'}} for i in range(a, b)]}\n"
    "        if b < n: r['nextCursor'] = str(b)\n"
    "    else:\n"
    "        r = {'content': [{'type': 'text', 'text': 'ok'}]}\n"
    "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n";

/* Loads one MCP server listing n tools (pages of page, descriptions of
 * desc bytes) into a fresh registry; its problems go into probs. */
static hx_tools *load_server(const char *name, int n, int page, int desc, hx_buf *probs,
                             hx_extools **x)
{
    char json[2048], dir[64];
    snprintf(dir, sizeof dir, "mcp-%s", name);
    if (sh("mkdir -p %s && chmod 755 %s", at(dir), home)) return NULL;
    snprintf(json, sizeof json,
             "{\"name\":\"%s\",\"effect\":\"read\",\"timeout_s\":60,\"read_paths\":[\"%s\"],"
             "\"mcp\":{\"command\":[\"/usr/bin/python3\",\"%s\",\"%d\",\"%d\",\"%d\"]}}",
             name, at("mcp-srv"), at("mcp-srv/server.py"), n, page, desc);
    snprintf(dir, sizeof dir, "mcp-%s/%s.json", name, name);
    put(dir, json);
    snprintf(dir, sizeof dir, "mcp-%s", name);
    hx_tools *reg = hx_tools_new(NULL);
    hx_err e;
    if (reg && hx_extools_load(reg, at(dir), x, probs, &e)) {
        printf("# extools: %s\n", e.msg);
        hx_tools_free(reg);
        return NULL;
    }
    return reg;
}

/* A server listing 12,800 tools (64 pages) adds its first 32 and the
 * listing stops there, with one problem line saying so; one with long
 * descriptions stops at 12 KiB. Control: a server with 5 tools adds all
 * 5 and no problem. */
static void test_mcp_listing_capped(void)
{
    if (access("/usr/bin/python3", X_OK)) SKIP("/usr/bin/python3 not installed");
    ASSERT(sh("mkdir -p %s && chmod 755 %s", at("mcp-srv"), at("mcp-srv")) == 0);
    put("mcp-srv/server.py", flood_server);
    hx_buf probs;
    hx_buf_init(&probs);
    hx_extools *x = NULL;
    hx_tools *reg = load_server("flood", 12800, 200, 10, &probs, &x);
    ASSERT(reg);
    EXPECT_EQ_INT(hx_tools_count(reg), 32);
    EXPECT(hx_tools_find(reg, "flood.t00031") && !hx_tools_find(reg, "flood.t00032"));
    EXPECT(probs.data && strstr(probs.data, "MCP server flood lists more than 32 tools; only its "
                                            "first 32 tools are used"));
    hx_extools_free(x), hx_tools_free(reg), hx_buf_free(&probs), x = NULL;
    hx_buf_init(&probs);
    reg = load_server("wordy", 20, 20, 4000, &probs, &x);
    ASSERT(reg);
    EXPECT_EQ_INT(hx_tools_count(reg), 3); /* 3 x 4 KiB fit in 12 KiB, the 4th does not */
    EXPECT(probs.data && strstr(probs.data, "descriptions and schemas over 12288 bytes"));
    hx_extools_free(x), hx_tools_free(reg), hx_buf_free(&probs), x = NULL;
    hx_buf_init(&probs);
    reg = load_server("small", 5, 5, 10, &probs, &x); /* control */
    ASSERT(reg);
    EXPECT_EQ_INT(hx_tools_count(reg), 5);
    EXPECT_EQ_INT((int)probs.len, 0);
    hx_extools_free(x), hx_tools_free(reg), hx_buf_free(&probs);
}

int main(void)
{
    snprintf(home, sizeof home, "/tmp/hx-deputy-XXXXXX");
    if (!mkdtemp(home)) {
        printf("FAIL setup: mkdtemp\n");
        return 1;
    }
    setenv("HEARTH_HOME", home, 1);
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    signal(SIGALRM, on_alarm);
    RUN(test_files_root_swapped_for_link);
    RUN(test_files_race_link_in_path);
    RUN(test_files_fifo);
    RUN(test_files_list_link_not_followed);
    RUN(test_files_missing_root);
    RUN(test_calendar_folder_swapped_for_link);
    RUN(test_calendar_link_and_fifo_skipped);
    RUN(test_calendar_save_refuses_link);
    RUN(test_maildir_links_and_fifo);
    RUN(test_outbox_and_drafts_links);
    RUN(test_calendar_flood_listed_in_part);
    RUN(test_calendar_flood_no_false_free_slot);
    RUN(test_calendar_rule_too_dense);
    RUN(test_mcp_listing_capped);
    sh("rm -rf %s", home);
    return test_summary();
}
