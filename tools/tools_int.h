/* tools_int.h: tools-internal helpers shared by the built-in tools: civil
 * dates and time zones (tz.c), JSON argument helpers (args.c). */
#ifndef HX_TOOLS_INT_H
#define HX_TOOLS_INT_H

#include <libical/ical.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/base.h"
#include "tools/tools.h"

/* ---- civil dates and time zones (tools/tz.c) ---- */
typedef struct hx_civil {
    int year, month, day; /* month 1..12, day 1..31 */
    int hour, min, sec;
} hx_civil;

/* (hx_days_from_civil and hx_civil_from_days are in base.h.) */
int hx_days_in_month(int y, int m);
/* Day of the week of a day number: 0 = Sunday. */
int hx_weekday(int64_t days);

/* The libical zone for an IANA name ("UTC", "Etc/UTC" and NULL/"" give
 * UTC); NULL if unknown. Zones are owned by libical and live for the
 * process. */
icaltimezone *hx_tz_find(const char *name);
/* Local civil time in zone z -> Unix seconds. A time in a DST gap or
 * overlap is resolved as libical does (see when.c's notes). */
int64_t hx_tz_to_utc(icaltimezone *z, const hx_civil *c);
/* Unix seconds -> local civil time in z; *off gets the UTC offset. */
void hx_tz_from_utc(icaltimezone *z, int64_t t, hx_civil *c, int *off);
/* Local day number (days since 1970-01-01 in z's calendar) of t. */
int64_t hx_tz_local_day(icaltimezone *z, int64_t t);
/* Unix seconds of local midnight starting day number `day` in z. */
int64_t hx_tz_day_start(icaltimezone *z, int64_t day);
/* ISO 8601 in z ("2026-12-03T14:00:00+01:00" or "2026-12-03"). */
void hx_tz_format(icaltimezone *z, int64_t t, int date_only, char *buf,
                  size_t n);

/* ---- the user's folders as capabilities (tools/root.c) ----
 * Built-in tools never open the user's data by path: each configured
 * folder is opened once as a directory descriptor (a link in its place is
 * refused) and every path beneath it is resolved without following a link
 * or leaving it. Functions returning a descriptor return it (>= 0, the
 * caller closes it) or minus an hx_rc with err filled. */
typedef struct hx_root {
    int fd;     /* the folder (O_RDONLY|O_DIRECTORY), -1 when not open */
    char *path; /* as configured, without trailing slashes */
    char *real; /* where fd pointed when it was opened */
    char *file; /* a calendar given as one .ics file: its name in the
                   folder fd (the root is then that folder); else NULL */
} hx_root;

typedef enum hx_root_kind {
    HX_ROOT_FILES,       /* file_roots[i] */
    HX_ROOT_CALENDAR,    /* calendars[i]: a folder, or one .ics file */
    HX_ROOT_CAL_DEFAULT, /* calendar_default, made when missing */
    HX_ROOT_MAILDIR,     /* maildir */
    HX_ROOT_OUTBOX,      /* outbox, made when missing */
} hx_root_kind;

/* hx_root_open flags (HX_ROOT_NO_CREATE: for hx_roots_get, open a folder
 * that is made when missing only if it exists) */
enum { HX_ROOT_CREATE = 1, HX_ROOT_FILE_OK = 2, HX_ROOT_NO_CREATE = 4 };

/* Opens the folder path (field: its setting in config.json, for
 * messages); HX_ROOT_CREATE makes it first if missing, HX_ROOT_FILE_OK
 * accepts a regular file (its folder becomes the root). A link, a missing
 * folder or anything else gives one message naming the setting to fix. */
int hx_root_open(hx_root *r, const char *path, const char *field, unsigned flags,
                 hx_err *err);
void hx_root_close(hx_root *r); /* a closed or never opened root is a no-op */

typedef struct hx_roots hx_roots;
/* The root of a configured folder in *rs (made on first use), opened on
 * first use and then kept until hx_roots_free: later changes on disk (a
 * link planted in its place) do not move it. A failed open is reported
 * each time it is asked for, and leaves the other roots usable. */
const hx_root *hx_roots_get(hx_roots **rs, const hx_config *cfg, hx_root_kind kind, int i,
                            unsigned flags, hx_err *err);
void hx_roots_free(hx_roots *rs); /* NULL is a no-op */
/* Opens every configured folder that exists now (none is made): the
 * point from which a link planted in place of one no longer matters. The
 * others are opened (or made) when first used. */
void hx_roots_open_all(hx_roots **rs, const hx_config *cfg);
/* The registry's roots (hx_roots_get on the registry's configuration);
 * valid while the registry lives. */
const hx_root *hx_tools_root(const hx_tools *reg, hx_root_kind kind, int i, unsigned flags,
                             hx_err *err);

/* hx_roots_open_all on the registry's roots: the built-in tools' folders
 * are opened when they are registered (hx_tools_register_builtins). */
void hx_tools_open_roots(hx_tools *reg);

/* rel (relative; "" is the root) opened beneath r with flags (O_NOFOLLOW
 * and O_CLOEXEC added): no link followed, no ".." out of it. */
int hx_root_openat(const hx_root *r, const char *rel, int flags, hx_err *err);
/* rel opened for reading if it is a regular file (O_NONBLOCK: a FIFO or a
 * device is refused, never waited on); *st (may be NULL) gets its fstat. */
int hx_root_open_file(const hx_root *r, const char *rel, struct stat *st, hx_err *err);
/* HX_OK if fd is a regular file (*st, may be NULL, gets its fstat); else
 * HX_ERR_INVALID saying what shown is instead. */
int hx_fd_regular(int fd, const char *shown, struct stat *st, hx_err *err);
/* A whole regular file beneath r (hx_read_fd's limits; caller frees). */
int hx_root_read(const hx_root *r, const char *rel, size_t max, char **out, size_t *len,
                 struct stat *st, hx_err *err);
/* fstat of rel beneath r, of any type, a link at its end not followed. */
int hx_root_stat(const hx_root *r, const char *rel, struct stat *st, hx_err *err);
/* The folder rel beneath r as a descriptor; with create, made one
 * component at a time ("." and ".." refused) where missing. */
int hx_root_dir(const hx_root *r, const char *rel, int create, hx_err *err);
/* Replaces rel beneath r atomically (hx_write_file_atomic_at in its
 * folder, which must exist). */
int hx_root_write_atomic(const hx_root *r, const char *rel, const char *data, size_t len,
                         hx_err *err);
/* "root path/rel" for messages and results, into buf (n bytes). */
void hx_root_join(const hx_root *r, const char *rel, char *buf, size_t n);
/* The part of the absolute path abs beneath r (by its configured or its
 * real path): "" for the root itself, NULL if abs is not beneath it. */
const char *hx_root_under(const hx_root *r, const char *abs);

/* ---- argument checking (tools/schema.c) ---- */
/* Checks args (must be an object) against the JSON Schema subset the
 * built-in tools use; HX_ERR_INVALID with a message naming the argument. */
int hx_schema_check(const cJSON *schema, const cJSON *args, hx_err *err);

/* ---- built-in tool groups, each registered by hx_tools_register_builtins
 * (tools/builtins.c) ---- */
int hx_cal_register(hx_tools *reg, hx_err *err); /* calendar.* */

/* ---- JSON arguments (tools/args.c) ---- */
/* The string member `key` of args, or NULL if absent. */
const char *hx_arg_str(const cJSON *args, const char *key);
/* The number member `key` as an int, or dflt if absent. */
int hx_arg_int(const cJSON *args, const char *key, int dflt);
int hx_arg_bool(const cJSON *args, const char *key, int dflt);
/* Splits one address, "Bob Smith <bob@example.org>", "\"Smith, Bob\"
 * <bob@example.org>", "bob@example.org" or "mailto:bob@example.org", into
 * the display name (may be empty; name may be NULL when nn is 0) and the
 * address; -1 if s is not exactly one plausible address (one '@' inside,
 * no spaces or brackets in it, nothing after "<...>"). */
int hx_parse_address(const char *s, char *name, size_t nn, char *email, size_t en);
/* The next non-blank piece of a comma-separated address list into piece
 * (n bytes, cut to fit): commas inside a quoted name do not split; *s
 * moves past it. 0 when the list has no more. */
int hx_address_list_next(const char **s, char *piece, size_t n);
/* The people of the newest messages of the configured Maildir (From, To
 * and Cc, as the known addresses), "address\tdisplay name\n" each (the
 * name may be empty; a pair may repeat), appended to out. No Maildir
 * configured: none, HX_OK. */
int hx_tools_correspondents(const hx_tools *reg, hx_buf *out, hx_err *err);
/* HX_ERR_INVALID "argument 'key': 'value' is not an address like ...": the
 * one message every tool taking addresses gives (value NULL: not a string). */
int hx_address_error(const char *key, const char *value, hx_err *err);
/* Checks the addresses in argument `key` when present: an array of
 * strings, each one address (calendar attendees), or one string holding a
 * comma-separated list (mail "to", "cc"). The error is hx_address_error's. */
int hx_arg_addresses(const cJSON *args, const char *key, hx_err *err);
/* Reads a time argument: ISO 8601 or a time expression (hx_when_parse) in
 * the configured time zone, now from hx_now(). The error names the key. */
int hx_arg_when(const hx_tools *reg, const cJSON *args, const char *key,
                hx_when_range *out, hx_err *err);
/* The configured time zone's libical zone (UTC if unset or unknown). */
icaltimezone *hx_tools_tz(const hx_tools *reg);

/* ---- a search by words (mail.search's text, files.search's content) ----
 * The terms are hx_fold_terms's list. */
/* The i-th term of terms. */
const char *hx_term_at(const hx_buf *terms, int i);
/* The terms whose bits mask has (-1: all n), as a JSON array. */
cJSON *hx_terms_json(const hx_buf *terms, int n, int mask);
/* How the words matched, added to out: the function words left out
 * ("ignored_words"), and a "note" when no item (noun: "message", "file")
 * has any of them, or none has them all (best: the most any item has)
 * and the result holds those with some, best match first. */
void hx_text_notes(const hx_buf *terms, int n_terms, const hx_buf *ignored, int best,
                   int total, const char *noun, cJSON *out);

#endif /* HX_TOOLS_INT_H */
