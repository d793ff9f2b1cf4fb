/* maildir.c: Maildir listing (cur/ new/, flags in names) and delivery
 * (tmp/, fsync, link into new/), beneath the Maildir's root descriptor
 * without following links, and RFC 5322 message composition with MIME,
 * encoded-word headers and a fresh Message-ID. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/mail_int.h"
#include "tools/tools_int.h"

/* ---- composition ---- */

static int is_ascii(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80 || *s == '\r' || *s == '\n') return 0;
    return 1;
}

static void put_b64(hx_buf *b, const unsigned char *s, size_t n, int wrap)
{
    static const char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t col = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < n) v |= (unsigned)s[i + 1] << 8;
        if (i + 2 < n) v |= s[i + 2];
        char q[4] = {tbl[v >> 18], tbl[(v >> 12) & 63],
                     i + 1 < n ? tbl[(v >> 6) & 63] : '=',
                     i + 2 < n ? tbl[v & 63] : '='};
        hx_buf_append(b, q, 4);
        col += 4;
        if (wrap && col >= 76) hx_buf_puts(b, "\r\n"), col = 0;
    }
    if (wrap && col) hx_buf_puts(b, "\r\n");
}

/* RFC 2047 B-encoding of s in chunks that keep UTF-8 sequences whole. */
static void put_encoded_word(hx_buf *b, const char *s)
{
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t k = n - i > 45 ? 45 : n - i;
        while (k < n - i && ((unsigned char)s[i + k] & 0xc0) == 0x80) k--;
        if (i) hx_buf_puts(b, "\r\n ");
        hx_buf_puts(b, "=?UTF-8?B?");
        put_b64(b, (const unsigned char *)s + i, k, 0);
        hx_buf_puts(b, "?=");
        i += k;
    }
}

/* "Name <addr>, ..." with non-ASCII display names encoded. */
static void put_address_list(hx_buf *b, const char *v)
{
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char *one = hx_strndup(p, len);
        char *lt = one ? strchr(one, '<') : NULL;
        if (one && lt && !is_ascii(one)) {
            *lt = '\0';
            char *name = one;
            while (*name == ' ') name++;
            size_t nl = strlen(name);
            while (nl && name[nl - 1] == ' ') name[--nl] = '\0';
            put_encoded_word(b, name);
            hx_buf_puts(b, " <");
            hx_buf_puts(b, lt + 1);
        } else if (one) {
            hx_buf_puts(b, one);
        }
        free(one);
        if (!comma) break;
        hx_buf_putc(b, ',');
        p = comma + 1;
    }
}

static void put_header(hx_buf *b, const char *name, const char *v, int addr)
{
    if (!v || !*v) return;
    hx_buf_printf(b, "%s: ", name);
    if (addr) put_address_list(b, v);
    else if (is_ascii(v)) hx_buf_puts(b, v);
    else put_encoded_word(b, v);
    hx_buf_puts(b, "\r\n");
}

/* Quoted-printable body with CRLF line ends and soft breaks at 76. */
static void put_qp(hx_buf *b, const char *s)
{
    size_t col = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\r') continue;
        if (*p == '\n') {
            hx_buf_puts(b, "\r\n");
            col = 0;
            continue;
        }
        int plain = (*p >= 33 && *p <= 126 && *p != '=') ||
                    (*p == ' ' && p[1] != '\n' && p[1] != '\r' && p[1]);
        size_t w = plain ? 1 : 3;
        if (col + w > 75) hx_buf_puts(b, "=\r\n"), col = 0;
        if (plain) hx_buf_putc(b, (char)*p);
        else hx_buf_printf(b, "=%02X", *p);
        col += w;
    }
    hx_buf_puts(b, "\r\n");
}

/* 2 * nbytes hex digits of hx_unique_bytes(salt, k). */
static void unique_hex(const char *salt, unsigned k, char *out, size_t nbytes)
{
    unsigned char r[32];
    if (nbytes > sizeof r) nbytes = sizeof r;
    hx_unique_bytes(salt, salt ? strlen(salt) : 0, k, r, nbytes);
    for (size_t i = 0; i < nbytes; i++) sprintf(out + 2 * i, "%02x", r[i]);
}

/* The domain part of the first address in from, or "hearth.local". */
static void from_domain(const char *from, char *out, size_t n)
{
    const char *at = from ? strchr(from, '@') : NULL;
    size_t k = 0;
    if (at)
        for (at++; *at && *at != '>' && *at != ' ' && *at != ',' && k + 1 < n; at++)
            out[k++] = *at;
    out[k] = '\0';
    if (!k) snprintf(out, n, "hearth.local");
}

static void put_envelope(hx_buf *b, const hx_mail_draft *d, const char *msgid)
{
    int off;
    int64_t now = hx_now(&off);
    char date[64];
    hx_mail_format_date(now, off, date, sizeof date);
    put_header(b, "From", d->from, 1);
    put_header(b, "To", d->to, 1);
    put_header(b, "Cc", d->cc, 1);
    put_header(b, "Subject", d->subject ? d->subject : "", 0);
    hx_buf_printf(b, "Date: %s\r\nMessage-ID: <%s>\r\n", date, msgid);
    put_header(b, "In-Reply-To", d->in_reply_to, 0);
    put_header(b, "References", d->references, 0);
    hx_buf_puts(b, "MIME-Version: 1.0\r\nUser-Agent: Hearth\r\n");
}

static void put_text_part_headers(hx_buf *b)
{
    hx_buf_puts(b, "Content-Type: text/plain; charset=UTF-8\r\n"
                   "Content-Transfer-Encoding: quoted-printable\r\n");
}

int hx_mail_compose(const hx_mail_draft *d, char **out, size_t *len,
                    char *msgid, size_t msgid_n, hx_err *err)
{
    char rnd[33], dom[128], id[200], boundary[48];
    /* under a pinned clock the same draft gets the same Message-ID */
    hx_buf salt;
    hx_buf_init(&salt);
    hx_buf_printf(&salt, "%s\n%s\n%s\n%s", d->from ? d->from : "", d->to ? d->to : "",
                  d->subject ? d->subject : "", d->body ? d->body : "");
    unique_hex(salt.data, 0, rnd, 16);
    hx_buf_free(&salt);
    from_domain(d->from, dom, sizeof dom);
    snprintf(id, sizeof id, "%s@%s", rnd, dom);
    if (msgid) snprintf(msgid, msgid_n, "%s", id);
    hx_buf b;
    hx_buf_init(&b);
    put_envelope(&b, d, id);
    const char *body = d->body ? d->body : "";
    if (!d->attach_data) {
        put_text_part_headers(&b);
        hx_buf_puts(&b, "\r\n");
        put_qp(&b, body);
    } else {
        snprintf(boundary, sizeof boundary, "=_hearth_%.16s", rnd);
        hx_buf_printf(&b, "Content-Type: multipart/mixed; boundary=\"%s\"\r\n\r\n"
                          "--%s\r\n", boundary, boundary);
        put_text_part_headers(&b);
        hx_buf_puts(&b, "\r\n");
        put_qp(&b, body);
        hx_buf_printf(&b, "--%s\r\nContent-Type: %s; charset=UTF-8\r\n"
                          "Content-Transfer-Encoding: base64\r\n",
                      boundary, d->attach_type ? d->attach_type : "application/octet-stream");
        if (d->attach_name)
            hx_buf_printf(&b, "Content-Disposition: attachment; filename=\"%s\"\r\n",
                          d->attach_name);
        hx_buf_puts(&b, "\r\n");
        put_b64(&b, (const unsigned char *)d->attach_data, d->attach_len, 1);
        hx_buf_printf(&b, "--%s--\r\n", boundary);
    }
    if (b.oom) {
        hx_buf_free(&b);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory composing mail");
    }
    *out = hx_buf_steal(&b, len);
    return HX_OK;
}

/* ---- delivery ---- */

/* The folder sub (tmp, new, cur) of the Maildir folder `folder` beneath
 * md, made where missing, as a descriptor (or minus an hx_rc). */
static int maildir_sub(const hx_root *md, const char *folder, const char *sub, int create,
                       hx_err *err)
{
    char rel[512];
    if ((size_t)snprintf(rel, sizeof rel, "%s%s%s", folder, *folder ? "/" : "", sub) >= sizeof rel)
        return -hx_err_set(err, HX_ERR_RANGE, "Maildir folder name too long");
    return hx_root_dir(md, rel, create, err);
}

/* Writes a new file name in the folder dfd: created, never opened through
 * something planted there, fsynced. */
static int write_fsync(int dfd, const char *name, const char *data, size_t len)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        off += (size_t)n;
    }
    int ok = off == len && fsync(fd) == 0;
    close(fd);
    if (!ok) unlinkat(dfd, name, 0);
    return ok ? 0 : -1;
}

/* A unique name (uniq, 128 bytes) and the name it gets in new/ or cur/. */
static void unique_name(int tmp, int dst, const char *flags, unsigned k, char *uniq, char *dname,
                        size_t n)
{
    static unsigned counter;
    char rnd[17];
    /* under a pinned clock (a replayed run) the name is the first free one
     * of a fixed sequence: no pid, no count of earlier deliveries */
    const int pinned = hx_unique_pinned();
    struct stat st;
    for (;; k++) {
        unique_hex("maildir", k, rnd, 8);
        snprintf(uniq, 128, "%lld.P%ldQ%u.%s.hearth", (long long)hx_now(NULL),
                 pinned ? 0L : (long)getpid(),
                 pinned ? k : __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), rnd);
        if (flags) snprintf(dname, n, "%s:2,%s", uniq, flags);
        else snprintf(dname, n, "%s", uniq);
        if (!pinned || k > 1000 ||
            (fstatat(tmp, uniq, &st, AT_SYMLINK_NOFOLLOW) &&
             fstatat(dst, dname, &st, AT_SYMLINK_NOFOLLOW)))
            break;
    }
}

/* Writes msg as tmp/UNIQ and links it as new/ or cur/ (dst); the name
 * UNIQ goes into uniq (128 bytes). */
static int deliver_into(const hx_root *md, int tmp, int dst, const char *msg, size_t len,
                        const char *flags, char *uniq, hx_err *err)
{
    char dname[256];
    unique_name(tmp, dst, flags, 0, uniq, dname, sizeof dname);
    if (write_fsync(tmp, uniq, msg, len))
        return hx_err_set(err, HX_ERR_IO, "%s: tmp/%s: %s", md->path, uniq, strerror(errno));
    /* linkat without AT_SYMLINK_FOLLOW: the new name never goes through a link */
    int rc = HX_OK;
    if (linkat(tmp, uniq, dst, dname, 0) && renameat(tmp, uniq, dst, dname))
        rc = hx_err_set(err, HX_ERR_IO, "%s: %s: %s", md->path, dname, strerror(errno));
    unlinkat(tmp, uniq, 0);
    return rc;
}

int hx_maildir_deliver(const hx_root *md, const char *folder, const char *msg, size_t len,
                       const char *flags, char *name, size_t name_n, hx_err *err)
{
    int fds[3] = {-1, -1, -1}, rc = HX_OK; /* tmp, new, cur */
    static const char *const subs[3] = {"tmp", "new", "cur"};
    for (int i = 0; i < 3 && !rc; i++)
        if ((fds[i] = maildir_sub(md, folder, subs[i], 1, err)) < 0) rc = -fds[i];
    char uniq[128];
    if (!rc) rc = deliver_into(md, fds[0], flags ? fds[2] : fds[1], msg, len, flags, uniq, err);
    if (!rc && name) snprintf(name, name_n, "%s", uniq);
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0) close(fds[i]);
    return rc;
}

/* ---- listing ---- */

typedef struct entries {
    hx_maildir_entry *e;
    int n, cap;
} entries;

/* A regular file fname of the folder dfd (a link, FIFO or folder is not a
 * message), as the path rel/fname beneath the Maildir. */
static int add_entry(entries *es, int dfd, const char *rel, const char *fname)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", rel, fname);
    struct stat st;
    if (fstatat(dfd, fname, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) return 0;
    if (es->n == es->cap) {
        int cap = es->cap ? es->cap * 2 : 64;
        hx_maildir_entry *e = hx_realloc(es->e, (size_t)cap * sizeof *e);
        if (!e) return -1;
        es->e = e;
        es->cap = cap;
    }
    const char *colon = strchr(fname, ':');
    hx_maildir_entry *e = &es->e[es->n];
    e->id = colon ? hx_strndup(fname, (size_t)(colon - fname)) : hx_strdup(fname);
    e->flags = hx_strdup(colon && !strncmp(colon, ":2,", 3) ? colon + 3 : "");
    e->path = hx_strdup(path);
    e->mtime = st.st_mtime;
    e->size = st.st_size;
    if (!e->id || !e->flags || !e->path) {
        free(e->id), free(e->flags), free(e->path);
        return -1;
    }
    es->n++;
    return 0;
}

static int list_sub(entries *es, const hx_root *md, const char *folder, const char *sub,
                    hx_err *err)
{
    char rel[512];
    hx_err e;
    snprintf(rel, sizeof rel, "%s%s%s", folder, *folder ? "/" : "", sub);
    int fd = hx_root_dir(md, rel, 0, &e);
    if (fd == -HX_ERR_NOTFOUND) return HX_OK;
    if (fd < 0) return hx_err_set(err, e.rc, "%s", e.msg);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return hx_err_set(err, HX_ERR_IO, "%s/%s: %s", md->path, rel, strerror(errno));
    }
    struct dirent *de;
    int rc = HX_OK;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.' && add_entry(es, dirfd(d), rel, de->d_name)) {
            rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory listing %s/%s", md->path, rel);
            break;
        }
    closedir(d);
    return rc;
}

int hx_maildir_list(const hx_root *md, const char *folder, hx_maildir_entry **out, int *n,
                    hx_err *err)
{
    entries es = {0};
    *out = NULL;
    *n = 0;
    int rc = list_sub(&es, md, folder, "cur", err);
    if (!rc) rc = list_sub(&es, md, folder, "new", err);
    if (rc) {
        hx_maildir_list_free(es.e, es.n);
        return rc;
    }
    *out = es.e;
    *n = es.n;
    return HX_OK;
}

void hx_maildir_list_free(hx_maildir_entry *e, int n)
{
    for (int i = 0; i < n; i++) {
        free(e[i].id);
        free(e[i].path);
        free(e[i].flags);
    }
    free(e);
}
