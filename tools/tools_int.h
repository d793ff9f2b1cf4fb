/* tools_int.h: tools-internal helpers shared by the built-in tools: civil
 * dates and time zones (tz.c), JSON argument helpers (args.c). */
#ifndef HX_TOOLS_INT_H
#define HX_TOOLS_INT_H

#include <libical/ical.h>
#include <stddef.h>
#include <stdint.h>

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

#endif /* HX_TOOLS_INT_H */
