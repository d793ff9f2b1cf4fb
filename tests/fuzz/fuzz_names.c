/* fuzz_names.c: fuzz target for the people of the mail (tools/names.c)
 * on any text, over a small Maildir written once: the first byte picks
 * the request's people (hx_tools_people_named: at most 5 lines "- word
 * <address>", the word the request's own, the address the mail's) or a
 * name to resolve as mail.send's "to" or an attendee of
 * calendar.create_event (hx_tools_resolve_names: no error or one that
 * says no one or several; every value resolved is one address the mail
 * gives, and the text not resolved is kept). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/tools_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const mails[] = {
    "From: Kenji Sato <kenji@example.jp>\nTo: alice@example.org\nSubject: a\n\nx\n",
    "From: =?UTF-8?Q?Chlo=C3=A9_Dubois?= <chloe@example.fr>\nTo: alice@example.org\nSubject: b\n\ny\n",
    "From: Sam Reed <sam@one.example>\nTo: alice@example.org, Sam Ortiz <sam.ortiz@two.example>\n"
    "Subject: c\n\nz\n",
};

static hx_tools *registry(void)
{
    static hx_tools *reg;
    static hx_config cfg;
    static char home[64], maildir[96];
    if (reg) return reg;
    snprintf(home, sizeof home, "/tmp/hx-fuzz-names-XXXXXX");
    if (!mkdtemp(home)) return NULL;
    setenv("HEARTH_HOME", home, 1);
    snprintf(maildir, sizeof maildir, "%s/Mail", home);
    char path[160];
    static const char *const subs[] = {"", "/tmp", "/new", "/cur"};
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
        snprintf(path, sizeof path, "%s%s", maildir, subs[i]);
        mkdir(path, 0700);
    }
    for (size_t i = 0; i < sizeof mails / sizeof *mails; i++) {
        snprintf(path, sizeof path, "%s/cur/179500000%zu.M%zuP1.host:2,S", maildir, i, i);
        FILE *f = fopen(path, "w");
        if (!f) return NULL;
        fputs(mails[i], f);
        fclose(f);
    }
    cfg.user_name = "Alice Martin";
    cfg.user_email = "alice@example.org";
    cfg.maildir = maildir;
    hx_err e;
    if (!(reg = hx_tools_new(&cfg)) || hx_tools_register_builtins(reg, &e)) return NULL;
    return reg;
}

/* Whether s is an address of the mail above ("Name <address>" or bare). */
static int mail_address(const char *s)
{
    char email[256];
    if (hx_parse_address(s, NULL, 0, email, sizeof email)) return 0;
    return strstr(mails[0], email) || strstr(mails[1], email) || strstr(mails[2], email);
}

static void check_people(hx_tools *reg, const char *text)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_err e = {0};
    const int n = hx_tools_people_named(reg, text, &b, &e);
    HX_CHECK(n >= 0 && n <= 5);
    int lines = 0;
    for (const char *l = b.data ? b.data : ""; *l; lines++) {
        const size_t len = strcspn(l, "\n");
        const char *lt = memchr(l, '<', len);
        HX_CHECK(!strncmp(l, "- ", 2) && lt && l[len - 1] == '>' && l[len] == '\n');
        char word[256], addr[256];
        snprintf(word, sizeof word, "%.*s", (int)(lt - l - 3), l + 2);
        snprintf(addr, sizeof addr, "%.*s", (int)(l + len - lt - 2), lt + 1);
        HX_CHECK(strstr(text, word) != NULL && mail_address(addr) && strcmp(addr, "alice@example.org"));
        l += len + 1;
    }
    HX_CHECK(lines == n);
    hx_buf_free(&b);
}

static void check_resolve(hx_tools *reg, const char *tool, cJSON *args, const char *key)
{
    cJSON *named = NULL, *found = NULL, *v;
    hx_err e = {0};
    const int rc = hx_tools_resolve_names(reg, tool, args, &named, &found, &e);
    HX_CHECK(rc == HX_OK || rc == HX_ERR_NOTFOUND || rc == HX_ERR_INVALID || rc == HX_ERR_NOMEM);
    HX_CHECK(rc == HX_OK || (!named && !found && e.msg[0]));
    HX_CHECK(!named == !found);
    cJSON_ArrayForEach(v, found) HX_CHECK(cJSON_IsString(v) && mail_address(v->valuestring));
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(named, key);
    HX_CHECK(!named || val);
    cJSON_Delete(named);
    cJSON_Delete(found);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hx_tools *reg = registry();
    if (!reg || size < 1 || size > 4096) return 0;
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    if (data[0] % 3 == 0) {
        check_people(reg, text);
    } else {
        cJSON *args = cJSON_CreateObject();
        if (data[0] % 3 == 1) cJSON_AddStringToObject(args, "to", text);
        else cJSON_AddItemToObject(args, "attendees", cJSON_CreateStringArray((const char *const[]){text}, 1));
        check_resolve(reg, data[0] % 3 == 1 ? "mail.send" : "calendar.create_event", args,
                      data[0] % 3 == 1 ? "to" : "attendees");
        cJSON_Delete(args);
    }
    free(text);
    return 0;
}
