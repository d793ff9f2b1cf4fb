/* mail_int.h: tools-internal API of the mail tools: RFC 5322 / MIME
 * parsing into UTF-8 text, Maildir listing and delivery, message
 * composition, and the search index. */
#ifndef HX_MAIL_INT_H
#define HX_MAIL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "tools/tools.h"

/* ---- parsing (tools/mime.c; hx_message_parse in tools.h) ---- */
/* Decodes an RFC 2047 header value (encoded words, folding) to UTF-8.
 * Caller frees. */
char *hx_mail_decode_header(const char *value, size_t len);
/* Converts len bytes in charset to UTF-8 (iconv; unknown charsets are
 * taken as UTF-8 then Latin-1). Caller frees. */
char *hx_mail_to_utf8(const char *charset, const char *s, size_t len,
                      size_t *out_len);
/* Reduces HTML to readable text. Caller frees. */
char *hx_mail_html_to_text(const char *html, size_t len);
/* Parses an RFC 5322 date ("Tue, 1 Dec 2026 09:00:00 +0100"); 0 if bad. */
int64_t hx_mail_parse_date(const char *s);
/* Formats Unix time t at UTC offset off (seconds) as an RFC 5322 date. */
void hx_mail_format_date(int64_t t, int off, char *buf, size_t n);

/* ---- composition and delivery (tools/maildir.c) ---- */
struct hx_root; /* tools_int.h */
typedef struct hx_mail_draft {
    const char *from, *to, *cc, *subject, *body; /* UTF-8 */
    const char *in_reply_to, *references;        /* may be NULL */
    /* optional extra part, e.g. an iTIP invitation */
    const char *attach_type;     /* "text/calendar; method=REQUEST" */
    const char *attach_name;     /* "invite.ics" */
    const char *attach_data;
    size_t attach_len;
} hx_mail_draft;

/* Composes an RFC 5322 message (MIME 1.0, UTF-8, encoded-word headers where
 * needed, a fresh Message-ID, Date from hx_now). Caller frees *out. The
 * Message-ID (without brackets) goes into msgid if not NULL. */
int hx_mail_compose(const hx_mail_draft *d, char **out, size_t *len,
                    char *msgid, size_t msgid_n, hx_err *err);
/* Delivers a message into the Maildir folder `folder` ("" for the
 * Maildir itself, ".Drafts" for a Maildir++ subfolder) beneath md: tmp/
 * written (a new file, created, never opened through a link) and fsynced,
 * then linked into new/ or, with flags, cur/NAME:2,FLAGS. Makes the
 * folders where missing, without following links. The unique name goes
 * into name (>= 128 bytes) if not NULL. */
int hx_maildir_deliver(const struct hx_root *md, const char *folder, const char *msg,
                       size_t len, const char *flags, char *name, size_t name_n,
                       hx_err *err);

/* One message file of a Maildir. */
typedef struct hx_maildir_entry {
    char *id;     /* unique name without the ":2,flags" suffix */
    char *path;   /* beneath the Maildir's root: "cur/NAME", ".Work/new/NAME" */
    char *flags;  /* "" or e.g. "RS" */
    int64_t mtime;
    int64_t size;
} hx_maildir_entry;

/* Lists the regular files of cur/ and new/ of the Maildir folder `folder`
 * beneath md (links and special files are no messages). Caller frees with
 * hx_maildir_list_free. */
int hx_maildir_list(const struct hx_root *md, const char *folder, hx_maildir_entry **out,
                    int *n, hx_err *err);
void hx_maildir_list_free(hx_maildir_entry *e, int n);

/* ---- tool registration (tools/mail.c, tools/files.c) ---- */
int hx_mail_register_tools(hx_tools *reg, hx_err *err);
int hx_files_register_tools(hx_tools *reg, hx_err *err);

#endif /* HX_MAIL_INT_H */
