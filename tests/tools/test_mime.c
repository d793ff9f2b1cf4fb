/* test_mime.c: the mail parser and composer on the project's Maildir
 * fixtures (charsets, encoded words, multipart, HTML, broken MIME) and on
 * hostile input (truncation at every byte, deep nesting, lying lengths). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "tools/mail_int.h"
#include "tools/tools_int.h"

#define FIX "tests/fixtures/world/mail"

static hx_message *parse_fixture(const char *rel)
{
    char path[512], *raw;
    size_t len;
    hx_err e;
    hx_message *m = NULL;
    snprintf(path, sizeof path, "%s/%s", FIX, rel);
    if (hx_read_file(path, 0, &raw, &len, &e)) return NULL;
    if (hx_message_parse(raw, len, &m, &e)) m = NULL;
    free(raw);
    return m;
}

static void test_plain_qp_utf8(void)
{
    hx_message *m = parse_fixture("cur/1795000001.M1P100.alice-phone:2,S");
    ASSERT(m);
    EXPECT_STR_EQ(m->from, "Bob Lee <bob@example.org>");
    EXPECT_STR_EQ(m->subject, "Q1 budget review");
    EXPECT_STR_EQ(m->message_id, "<budget-1@example.org>");
    EXPECT(strstr(m->text, "about 30 minutes. Tuesday afternoon") != NULL);
    EXPECT(strstr(m->text, "me \xe2\x80\x94 anything") != NULL); /* em dash */
    EXPECT(m->date == 1795425120); /* 2026-11-23T09:12:00Z */
    EXPECT_STR_EQ(m->problems, "");
    hx_message_free(m);
}

static void test_latin1_alternative(void)
{
    hx_message *m = parse_fixture("new/1795000002.M2P100.alice-phone");
    ASSERT(m);
    EXPECT_STR_EQ(m->subject, "R\xc3\xa9union du comit\xc3\xa9");
    EXPECT_STR_EQ(m->from, "Chlo\xc3\xa9 Dubois <chloe@example.fr>");
    /* text/plain preferred over the HTML alternative */
    EXPECT(strstr(m->text, "salle Rivi\xc3\xa8re") != NULL);
    EXPECT(strstr(m->text, "<p>") == NULL);
    EXPECT_EQ_INT(m->n_att, 0);
    hx_message_free(m);
}

static void test_attachment_rfc2231(void)
{
    hx_message *m = parse_fixture("cur/1795000003.M3P100.alice-phone:2,RS");
    ASSERT(m);
    EXPECT_STR_EQ(m->from, "Zo\xc3\xab Keller <zoe@example.com>");
    EXPECT_STR_EQ(m->cc, "finance@example.org");
    EXPECT(strstr(m->text, "1 240,00 \xe2\x82\xac") != NULL);
    ASSERT(m->n_att == 1);
    EXPECT_STR_EQ(m->att[0].content_type, "application/pdf");
    EXPECT_STR_EQ(m->att[0].filename, "facture-novembre-\xc3\xa9t\xc3\xa9.pdf");
    EXPECT_EQ_INT(m->att[0].size, 45 + 256);
    hx_message_free(m);
}

static void test_html_cp1252(void)
{
    hx_message *m = parse_fixture("new/1795000004.M4P100.alice-phone");
    ASSERT(m);
    /* raw 8-bit header bytes read as Windows-1252 curly quotes */
    EXPECT_STR_EQ(m->subject, "Office move \xe2\x80\x9cnext week\xe2\x80\x9d");
    EXPECT(strstr(m->text, "Office move") != NULL);
    EXPECT(strstr(m->text, "Dec 7 \xe2\x80\x93 boxes") != NULL);
    EXPECT(strstr(m->text, "- Label & tape") != NULL);
    EXPECT(strstr(m->text, "alert") == NULL);  /* script dropped */
    EXPECT(strstr(m->text, "color") == NULL);  /* style dropped */
    EXPECT(strstr(m->text, "<") == NULL);
    hx_message_free(m);
}

static void test_iso2022jp(void)
{
    hx_message *m = parse_fixture("cur/1795000005.M5P100.alice-phone:2,S");
    ASSERT(m);
    EXPECT_STR_EQ(m->subject, "\xe4\xbc\x9a\xe8\xad\xb0\xe3\x81\xae\xe4\xbb\xb6");
    EXPECT(strstr(m->text, "\xe7\x81\xab\xe6\x9b\x9c\xe6\x97\xa5") != NULL); /* 火曜日 */
    hx_message_free(m);
}

static void test_broken_mime(void)
{
    hx_message *m = parse_fixture("cur/1795000007.M7P100.alice-phone:2,S");
    ASSERT(m);
    EXPECT(strstr(m->text, "closing boundary of this message is missing") != NULL);
    EXPECT(strstr(m->problems, "not closed") != NULL);
    hx_message_free(m);
}

/* Every prefix of every fixture parses without error or overread (the
 * asan build checks the reads); strings stay valid. */
static void test_truncation_everywhere(void)
{
    static const char *const files[] = {
        "cur/1795000003.M3P100.alice-phone:2,RS",
        "new/1795000002.M2P100.alice-phone",
        "cur/1795000005.M5P100.alice-phone:2,S",
    };
    int bad = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[512], *raw;
        size_t len;
        hx_err e;
        snprintf(path, sizeof path, "%s/%s", FIX, files[f]);
        ASSERT(hx_read_file(path, 0, &raw, &len, &e) == HX_OK);
        for (size_t n = 0; n <= len; n++) {
            char *copy = malloc(n ? n : 1);
            memcpy(copy, raw, n);
            hx_message *m = NULL;
            if (hx_message_parse(copy, n, &m, &e) != HX_OK || !m) bad++;
            hx_message_free(m);
            free(copy);
        }
        free(raw);
    }
    EXPECT_EQ_INT(bad, 0);
}

static void test_deep_nesting(void)
{
    hx_buf b;
    hx_buf_init(&b);
    for (int i = 0; i < 200; i++)
        hx_buf_printf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\n\n--b%d\n", i, i);
    hx_buf_puts(&b, "Content-Type: text/plain\n\ndeep text\n");
    hx_message *m = NULL;
    hx_err e;
    ASSERT(hx_message_parse(b.data, b.len, &m, &e) == HX_OK);
    EXPECT(strstr(m->problems, "too large or deep") != NULL);
    hx_message_free(m);
    hx_buf_free(&b);
}

static void test_no_headers_and_garbage(void)
{
    hx_message *m = NULL;
    hx_err e;
    const char garbage[] = "\xff\xfe\x00\x01 not a mail at all\n\n=?x?Q?";
    ASSERT(hx_message_parse(garbage, sizeof garbage - 1, &m, &e) == HX_OK);
    EXPECT_STR_EQ(m->subject, "");
    hx_message_free(m);
    ASSERT(hx_message_parse("", 0, &m, &e) == HX_OK);
    EXPECT_STR_EQ(m->text, "");
    hx_message_free(m);
}

static void test_encoded_words(void)
{
    const char *in = " =?UTF-8?Q?caf=C3=A9?= =?UTF-8?B?IGNyw6htZQ==?=\r\n\tend";
    char *s = hx_mail_decode_header(in, strlen(in));
    EXPECT_STR_EQ(s, "caf\xc3\xa9 cr\xc3\xa8me\tend");
    free(s);
    s = hx_mail_decode_header("=?bogus?Q?x?= plain", 19);
    EXPECT_STR_EQ(s, "x plain");
    free(s);
    s = hx_mail_decode_header("=?UTF-8?B?broken", 16); /* unterminated */
    EXPECT_STR_EQ(s, "=?UTF-8?B?broken");
    free(s);
}

static void test_dates(void)
{
    EXPECT(hx_mail_parse_date("Tue, 1 Dec 2026 09:00:00 +0100") == 1796112000);
    EXPECT(hx_mail_parse_date("1 Dec 2026 08:00 GMT") == 1796112000);
    EXPECT(hx_mail_parse_date("garbage") == 0);
    char buf[64];
    hx_mail_format_date(1796112000, 3600, buf, sizeof buf);
    EXPECT_STR_EQ(buf, "Tue, 1 Dec 2026 09:00:00 +0100");
    EXPECT(hx_mail_parse_date(buf) == 1796112000);
}

static void test_compose_roundtrip(void)
{
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    hx_mail_draft d = {.from = "Zo\xc3\xab Keller <zoe@example.com>",
                       .to = "Bob Lee <bob@example.org>",
                       .subject = "Caf\xc3\xa9 \xe2\x98\x95 meeting",
                       .body = "Line one\nA very long line that goes on and on "
                               "and on past seventy-six characters so that it "
                               "needs soft breaks = signs too.\n",
                       .attach_type = "text/calendar; method=REQUEST",
                       .attach_name = "invite.ics",
                       .attach_data = "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
                       .attach_len = 32};
    char *msg, id[256];
    size_t len;
    hx_err e;
    ASSERT(hx_mail_compose(&d, &msg, &len, id, sizeof id, &e) == HX_OK);
    EXPECT(strstr(id, "@example.com") != NULL);
    hx_message *m = NULL;
    ASSERT(hx_message_parse(msg, len, &m, &e) == HX_OK);
    EXPECT_STR_EQ(m->subject, d.subject);
    EXPECT_STR_EQ(m->from, d.from);
    EXPECT(strstr(m->text, "needs soft breaks = signs too.") != NULL);
    ASSERT(m->n_att == 1);
    EXPECT_STR_EQ(m->att[0].filename, "invite.ics");
    EXPECT_EQ_INT(m->att[0].size, 32);
    EXPECT(m->date == 1796112000);
    for (size_t i = 0, col = 0; i < len; i++, col++) { /* RFC 5322 line limit */
        if (msg[i] == '\n') col = 0;
        EXPECT(col < 998);
    }
    hx_message_free(m);
    free(msg);
    unsetenv("HEARTH_NOW");
}

static void test_deliver_and_list(void)
{
    char dir[] = "/tmp/hx-maildir-XXXXXX";
    ASSERT(mkdtemp(dir));
    char name[256], name2[256];
    hx_err e;
    hx_root md;
    ASSERT(hx_root_open(&md, dir, "maildir", 0, &e) == HX_OK);
    ASSERT(hx_maildir_deliver(&md, "", "Subject: a\n\nx\n", 14, NULL, name, sizeof name, &e) == HX_OK);
    ASSERT(hx_maildir_deliver(&md, "", "Subject: b\n\ny\n", 14, "S", name2, sizeof name2, &e) == HX_OK);
    EXPECT(strcmp(name, name2) != 0);
    hx_maildir_entry *es;
    int n;
    ASSERT(hx_maildir_list(&md, "", &es, &n, &e) == HX_OK);
    EXPECT_EQ_INT(n, 2);
    int seen = 0;
    for (int i = 0; i < n; i++) seen += !strcmp(es[i].flags, "S") && !strcmp(es[i].id, name2);
    EXPECT_EQ_INT(seen, 1);
    hx_maildir_list_free(es, n);
    hx_root_close(&md);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/tmp", dir);
    EXPECT(rmdir(tmp) == 0); /* tmp/ left empty */
    snprintf(tmp, sizeof tmp, "rm -rf %s", dir);
    EXPECT(system(tmp) == 0);
    EXPECT(hx_root_open(&md, "/nonexistent/maildir", "maildir", 0, &e) == HX_ERR_NOTFOUND);
    EXPECT(strstr(e.msg, "does not exist") && strstr(e.msg, "\"maildir\""));
}

int main(void)
{
    RUN(test_plain_qp_utf8);
    RUN(test_latin1_alternative);
    RUN(test_attachment_rfc2231);
    RUN(test_html_cp1252);
    RUN(test_iso2022jp);
    RUN(test_broken_mime);
    RUN(test_truncation_everywhere);
    RUN(test_deep_nesting);
    RUN(test_no_headers_and_garbage);
    RUN(test_encoded_words);
    RUN(test_dates);
    RUN(test_compose_roundtrip);
    RUN(test_deliver_and_list);
    return test_summary();
}
