/* calendar_int.h: tools-internal API of the calendar: loading vdir
 * directories and .ics files (cal_store.c), expanding occurrences
 * (cal_expand.c), writing events (cal_write.c) and iTIP mail (cal_itip.c). */
#ifndef HX_CALENDAR_INT_H
#define HX_CALENDAR_INT_H

#include <sys/types.h>

#include "tools/tools_int.h"

#define HX_CAL_MAX_FILE (4u << 20) /* bytes per .ics file; larger ones are skipped */
#define HX_CAL_MAX_FILES 20000     /* .ics files per calendar directory */
#define HX_CAL_MAX_ITER 20000      /* recurrence steps per rule */
#define HX_CAL_MAX_OCC 5000        /* occurrences per query; the rest are cut */

typedef struct hx_cal_file {
    const hx_root *dir;  /* the folder holding it (borrowed from the registry) */
    char *name;          /* its name in that folder: one component, never a link */
    char *path;          /* the .ics file, shown in results and messages */
    char *calendar;      /* calendar name: the directory's or file's base name */
    int is_vdir;         /* 1: a file of a vdir directory */
    icalcomponent *root; /* VCALENDAR, owned */
    off_t size;          /* size and mtime at load, to detect changes */
    int64_t mtime_ns;
    int warned_tzid;     /* an unknown TZID was reported for this file */
    icalcomponent **events; /* the VEVENTs of root (owned array, borrowed
                               items): libical has one child cursor per
                               component, which nested lookups move, so
                               loops walk this instead */
    int n_events;
} hx_cal_file;

typedef struct hx_cal {
    const hx_tools *reg;  /* borrowed: its roots are where files are read and written */
    const hx_config *cfg; /* borrowed */
    icaltimezone *tz;     /* the user's zone (floating and all-day times) */
    hx_cal_file *files;
    int n_files, cap_files;
    cJSON *problems;      /* [{"file","error"}]: files skipped or read in part */
} hx_cal;

/* Loads every configured calendar of the registry's configuration,
 * beneath the registry's roots: regular .ics files only, no link
 * followed. A calendar that cannot be opened and files that cannot be
 * read or parsed are listed in problems and skipped; only allocation
 * failure is an error. */
int hx_cal_load(const hx_tools *reg, hx_cal **out, hx_err *err);
void hx_cal_free(hx_cal *c); /* NULL is a no-op */
void hx_cal_problem(hx_cal *c, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fills f->events from f->root; HX_ERR_NOMEM on failure. */
int hx_cal_file_index(hx_cal_file *f);
/* Parses one file's text into f->root; HX_ERR_FORMAT names the problem. */
int hx_cal_parse(const char *text, icalcomponent **root, hx_err *err);

/* The Unix time of a date or date-time value of property p (DTSTART, ...)
 * of file f: UTC, TZID (the file's VTIMEZONE, else the IANA zone of that
 * name), floating and dates in the user's zone. */
int64_t hx_cal_prop_time(hx_cal *c, hx_cal_file *f, icalproperty *p,
                         struct icaltimetype t);
/* The zone a value of p is in (as above). */
icaltimezone *hx_cal_prop_zone(hx_cal *c, hx_cal_file *f, icalproperty *p,
                               struct icaltimetype t);
/* Local civil time of t in zone z as a libical time (no zone attached). */
struct icaltimetype hx_cal_ical_time(icaltimezone *z, int64_t t, int is_date);

/* The master VEVENT with this UID (not a RECURRENCE-ID override) and the
 * file holding it, or NULL. */
icalcomponent *hx_cal_find_uid(hx_cal *c, const char *uid, hx_cal_file **file);

/* ---- occurrences ---- */
typedef struct hx_cal_occ {
    icalcomponent *ev;  /* the VEVENT (master or override); borrowed */
    hx_cal_file *file;  /* borrowed */
    int64_t start, end; /* Unix seconds, end exclusive */
    int all_day;
    int recurring;      /* part of a recurring series */
    int64_t rid;        /* the occurrence's RECURRENCE-ID (start), if recurring */
} hx_cal_occ;

/* The occurrences overlapping [from, to), sorted by start (*out: caller
 * frees), bounded: *complete_to is to when every one is there; else the
 * list holds exactly those starting before *complete_to (at most
 * HX_CAL_MAX_OCC, or what a rule repeating too often let be known) and
 * nothing is known of the ones starting from it on. HX_ERR_NOMEM only. */
int hx_cal_occurrences(hx_cal *c, int64_t from, int64_t to, hx_cal_occ **out,
                       int *n, int64_t *complete_to, hx_err *err);
/* {"complete_until", "note"} for a result cut at complete_to; what names
 * what is not known ("events", "busy times", "free slots"). */
cJSON *hx_cal_cut_json(hx_cal *c, int64_t complete_to, const char *what);
/* An occurrence as the tools' JSON (uid, title, start, end, ...). */
cJSON *hx_cal_occ_json(hx_cal *c, const hx_cal_occ *o);
/* True if o's event is cancelled (STATUS:CANCELLED). */
int hx_cal_occ_cancelled(const hx_cal_occ *o);
/* True if o blocks time (not cancelled, not TRANSPARENT). */
int hx_cal_occ_busy(const hx_cal_occ *o);
/* True if email (no "mailto:") organizes or attends o without declining. */
int hx_cal_occ_involves(const hx_cal_occ *o, const char *email);

/* ---- writing (cal_write.c) ---- */
/* Serializes f->root and replaces the file atomically after checking that
 * it did not change on disk since it was loaded and that the new text
 * parses back with the same events. */
int hx_cal_save(hx_cal *c, hx_cal_file *f, hx_err *err);
/* A fresh UID ("<32 hex>@hearth") that no event of c has: random, or
 * under a pinned clock the first free one of a fixed sequence, so that a
 * replayed run gets the same UIDs (hx_unique_bytes). */
void hx_cal_new_uid(hx_cal *c, char *buf, size_t n);
/* Writes root (taken over by c on success) as UID.ics, a new file of the
 * vdir folder dir, and adds it to c (*out). Refuses to replace an existing
 * file or a link, and a uid that is not one plain file name. */
int hx_cal_add_file(hx_cal *c, const hx_root *dir, const char *uid, icalcomponent *root,
                    hx_cal_file **out, hx_err *err);
/* A new VCALENDAR (*root, caller owns) holding one VEVENT with uid,
 * returned (owned by *root). */
icalcomponent *hx_cal_new_event(hx_cal *c, const char *uid, icalcomponent **root);

#define HX_CAL_KEEP_ALARM (-1) /* reminder_min: leave alarms as they are */
#define HX_CAL_NO_ALARM (-2)   /* reminder_min: remove alarms */
/* A change to an event; NULL / 0 fields are left as they are. */
typedef struct hx_cal_edit {
    const char *title, *location, *description; /* "" clears location/description */
    int has_times;         /* set start and end */
    int64_t start, end;
    int all_day;
    const cJSON *attendees; /* array of "bob@x" / "Bob <bob@x>"; replaces all */
    int reminder_min;       /* minutes before; or HX_CAL_KEEP/NO_ALARM */
    int cancel;             /* STATUS:CANCELLED */
    int bump_sequence;      /* SEQUENCE + 1 (a change attendees must see) */
} hx_cal_edit;
/* Applies e to ev (in root: a VTIMEZONE for the user's zone is added when
 * times are written), and stamps DTSTAMP / LAST-MODIFIED with hx_now.
 * Unknown properties of ev are kept. */
int hx_cal_apply_edit(hx_cal *c, icalcomponent *root, icalcomponent *ev,
                      const hx_cal_edit *e, hx_err *err);
/* The start, end and all-day flag of an event's first occurrence. */
void hx_cal_event_times(hx_cal *c, hx_cal_file *f, icalcomponent *ev, int64_t *start,
                        int64_t *end, int *all_day);

/* ---- iTIP (cal_itip.c) ---- */
/* Queues an iTIP message (method "REQUEST" or "CANCEL") for ev's
 * attendees as a MIME mail in the outbox Maildir. The file name under
 * new/ goes into name if not NULL. Does nothing (HX_OK, name "") if ev
 * has no attendees other than the user. */
int hx_cal_itip_queue(hx_cal *c, hx_cal_file *f, icalcomponent *ev,
                      const char *method, char *name, size_t name_n,
                      hx_err *err);

/* ---- tool helpers (cal_tools.c) ---- */
int hx_cal_tool_open(hx_tools *reg, hx_cal **c, hx_err *err);
/* The period of the "range" argument, or "start"/"end", or of the
 * expression dflt; at most 400 days. */
int hx_cal_arg_range(hx_tools *reg, const cJSON *args, const char *dflt, int64_t *from,
                     int64_t *to, hx_err *err);
cJSON *hx_cal_range_json(hx_cal *c, int64_t from, int64_t to);
/* Adds "problems" (files skipped or read in part) to a result if any;
 * they quote the files (names, titles, time zone ids), so they mark the
 * call under way untrusted. */
void hx_cal_add_problems(hx_tools *reg, hx_cal *c, cJSON *result);
/* Whether someone other than the user organised ev: it has an ORGANIZER
 * that is not the configured user.email (none configured: any). Its
 * title, description, location, attendees and uid are then that
 * person's words, as an invitation's are. An event without an ORGANIZER
 * is the user's own (what a calendar writes for a personal event). */
int hx_cal_by_other(const hx_cal *c, icalcomponent *ev);
/* Marks the call under way untrusted (hx_tools_mark_untrusted) when ev
 * is by another: its result or error is about to quote it. Free/busy
 * times and slots carry no words of the events they come from and are
 * not marked. */
void hx_cal_note_author(hx_tools *reg, const hx_cal *c, icalcomponent *ev);

/* Tool functions (hx_tool_fn) of cal_slots.c and cal_cancel.c. */
int hx_cal_free_busy(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                     hx_err *err);
int hx_cal_find_slots(hx_tools *reg, void *user, const cJSON *args, cJSON **result,
                      hx_err *err);
/* The busy events of the user (not cancelled, transparent or declined)
 * overlapping [start, end), but the one with uid skip_uid (may be NULL):
 * [{"start", "end", "title", "uid"}], or NULL when there is none (or no
 * memory). A title by another marks the call untrusted. */
cJSON *hx_cal_conflicts(hx_tools *reg, hx_cal *c, int64_t start, int64_t end, const char *skip_uid);
/* Cancels the one occurrence of ev named by args' "occurrence": an EXDATE
 * on the series and an iTIP CANCEL with its RECURRENCE-ID. */
int hx_cal_cancel_occurrence(hx_tools *reg, hx_cal *c, hx_cal_file *f, icalcomponent *ev,
                             const cJSON *args, cJSON **result, hx_err *err);
/* For an update of the one occurrence args' "occurrence" names: *ev (a
 * recurring event in *f) becomes that occurrence's override, made (in the
 * series' file, not yet saved) if there is none. */
int hx_cal_detach_occurrence(hx_tools *reg, hx_cal *c, hx_cal_file **f, icalcomponent **ev,
                             const cJSON *args, hx_err *err);

#endif /* HX_CALENDAR_INT_H */
