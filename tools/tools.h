/* tools.h: the tools module's public API: the user's configuration, the
 * tool registry, and the built-in calendar, mail, files tools. Each tool is
 * a C function taking JSON arguments valid against its JSON Schema and
 * producing a JSON result. */
#ifndef HX_TOOLS_H
#define HX_TOOLS_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "base/base.h"

/* ---- configuration ($XDG_CONFIG_HOME/hearth/config.json, or
 * $HEARTH_HOME/config/config.json) ---- */
#define HX_MAX_ROOTS 16

typedef struct hx_config {
    char *user_name;           /* "Alice Martin" */
    char *user_email;          /* "alice@example.org" */
    char *timezone;            /* IANA name, e.g. "Europe/Paris" */
    int work_start_min;        /* working hours, minutes after midnight */
    int work_end_min;
    int work_days;             /* bit d set = weekday d works (0 = Sunday) */
    char *calendars[HX_MAX_ROOTS]; /* vdir directories or .ics files */
    int n_calendars;
    char *calendar_default;    /* where new events go (a vdir directory) */
    char *maildir;             /* the user's Maildir (with cur/ new/ tmp/) */
    char *outbox;              /* Maildir for queued outgoing mail */
    char *file_roots[HX_MAX_ROOTS];
    int n_file_roots;
    char *model;               /* default model path, may be NULL */
    cJSON *raw;                /* the whole parsed file (owned), for modules
                                  that read their own sections (policy, ...) */
    char *small_model;         /* "governor": {"small_model"}: the model the
                                  governor switches to on low battery or
                                  heat (path resolved), may be NULL */
    char *path;                /* the file loaded, or the one looked for */
    int missing;               /* no file at path: c holds the defaults */
} hx_config;

/* Default configuration for the environment (paths under the data dir,
 * 09:00-17:00 Monday to Friday, TZ from $TZ or UTC). Caller frees. */
hx_config *hx_config_default(void);
/* Loads config.json from path (NULL: the standard location). A missing
 * file gives the defaults; a malformed one HX_ERR_FORMAT naming the field. */
int hx_config_load(const char *path, hx_config **out, hx_err *err);
void hx_config_free(hx_config *c); /* NULL is a no-op */
/* Writes a commented default config (for `hearth init`); "//" comments are
 * allowed in the file and stripped on load. Refuses to overwrite. */
int hx_config_write_default(const char *path, hx_err *err);
/* Writes c as a commented config.json at path (for `hearth init`), making
 * its directory; refuses to overwrite an existing file (HX_ERR_STATE). */
int hx_config_write(const hx_config *c, const char *path, hx_err *err);
/* Checks that what c names is there: the file itself (not c->missing),
 * each calendar (a directory or an .ics file), the default calendar (a
 * directory), the Maildir (with cur/ and new/) and each file root (a
 * directory). Appends one line per problem to out, saying what is missing
 * and how to fix it; returns the number of problems. The outbox is made
 * when mail is first queued, so it is not checked. */
int hx_config_check(const hx_config *c, hx_buf *out);

/* ---- tools ---- */
typedef enum hx_effect {
    HX_EFFECT_READ = 0,  /* reads the user's data */
    HX_EFFECT_WRITE = 1, /* changes the user's data */
    HX_EFFECT_SEND = 2,  /* acts outside the device (mail, invitation) */
} hx_effect;
const char *hx_effect_name(int effect); /* "read", "write", "send" */

typedef struct hx_tools hx_tools;

/* A tool's implementation. args is valid against the tool's schema (the
 * registry checks required fields and types before calling; the function
 * still checks values). On success *result is a new cJSON object owned by
 * the caller. On failure it returns an hx_rc and fills err with a message
 * meant for the model to read (it is fed back as the tool's error). */
typedef int (*hx_tool_fn)(hx_tools *reg, void *user, const cJSON *args,
                          cJSON **result, hx_err *err);

#define HX_TOOL_API_VERSION 1
typedef struct hx_tool_def {
    int api_version;         /* HX_TOOL_API_VERSION */
    const char *name;        /* "calendar.find_slots" */
    const char *description; /* one or two sentences for the model */
    const char *schema_json; /* JSON Schema of the arguments (an object) */
    int effect;              /* hx_effect */
    hx_tool_fn call;
    void *user;              /* passed to call; owned by the registrant */
    unsigned flags;          /* HX_TOOL_* bits */
} hx_tool_def;

/* hx_tool_def.flags:
 * HX_TOOL_UNTRUSTED: the tool's results and errors carry content from
 *   outside the user (a mail, a file or a file's name, a registered tool's
 *   or MCP server's output and error text), whether the call succeeded or
 *   failed, so the policy's taint rule applies after them. A tool whose
 *   results only sometimes carry such content (a calendar holding events
 *   others organised) calls hx_tools_mark_untrusted for those instead.
 * HX_TOOL_BUILTIN: one of Hearth's own tools. Only these may take a name
 *   under the reserved prefixes "calendar.", "mail.", "files." and
 *   "memory." (a user's rule "calendar.*" is about Hearth's calendar).
 * HX_TOOL_KEEPS: the tool keeps what it is given for later conversations
 *   (memory.remember): after untrusted content it asks as a send does.
 * HX_TOOL_SELF_DESCRIBED: the tool's name, description and schema come
 *   from its own process at run time (an MCP server's tools/list), not
 *   from a manifest the user installed: offered to the model, they are
 *   untrusted content in every prompt.
 * HX_TOOL_REMOVES: the tool removes what the user kept (memory.forget,
 *   calendar.cancel_event): the planner runs it only for a request that
 *   asks to remove or change something (hx_agent_asks_removal). */
enum {
    HX_TOOL_UNTRUSTED = 1,
    HX_TOOL_BUILTIN = 2,
    HX_TOOL_KEEPS = 4,
    HX_TOOL_SELF_DESCRIBED = 8,
    HX_TOOL_REMOVES = 16,
};

/* A registry bound to a configuration (borrowed; must outlive it). */
hx_tools *hx_tools_new(const hx_config *cfg);
void hx_tools_free(hx_tools *reg); /* NULL is a no-op */
const hx_config *hx_tools_config(const hx_tools *reg);
/* Registers a tool; the def's strings are copied. A name clash, a reserved
 * name without HX_TOOL_BUILTIN (HX_ERR_DENIED) or a schema that is not
 * valid JSON gives an error and leaves the registry unchanged. */
int hx_tools_register(hx_tools *reg, const hx_tool_def *def, hx_err *err);
/* Registers n definitions in order; stops at the first error. */
int hx_tools_register_all(hx_tools *reg, const hx_tool_def *defs, size_t n,
                          hx_err *err);
/* Registers every built-in tool (calendar.*, mail.*, files.*). */
int hx_tools_register_builtins(hx_tools *reg, hx_err *err);

int hx_tools_count(const hx_tools *reg);
/* The i-th tool (registration order); valid while the registry lives. */
const hx_tool_def *hx_tools_at(const hx_tools *reg, int i);
const hx_tool_def *hx_tools_find(const hx_tools *reg, const char *name);

/* Calls a tool by name with JSON arguments. *result (caller frees) is the
 * tool's result object on HX_OK; on failure err holds the message. */
int hx_tools_call(hx_tools *reg, const char *name, const cJSON *args,
                  cJSON **result, hx_err *err);
/* The provenance a call carries besides its arguments and result. */
typedef struct hx_call_trust {
    int tainted;   /* in: untrusted content is in the conversation that
                      makes the call (what memory.remember keeps is marked) */
    int untrusted; /* out: the result or the error holds content from
                      outside the user: the tool ran and is
                      HX_TOOL_UNTRUSTED, or it marked this call */
} hx_call_trust;
/* hx_tools_call with the call's provenance in and out (trust may be NULL:
 * an untainted caller that does not ask). */
int hx_tools_call_trust(hx_tools *reg, const char *name, const cJSON *args,
                        hx_call_trust *trust, cJSON **result, hx_err *err);
/* For a tool's function, during its call: whether the conversation making
 * it is tainted, and marking this call's result or error untrusted. */
int hx_tools_call_tainted(const hx_tools *reg);
void hx_tools_mark_untrusted(hx_tools *reg);
/* Whether name is under a prefix reserved for the built-in tools. */
int hx_tools_name_reserved(const char *name);
/* The tool list in the OpenAI/MCP shape: [{"type":"function","function":
 * {"name","description","parameters"}}]. Caller frees. */
cJSON *hx_tools_list_json(const hx_tools *reg);
/* Adds item to obj under key (key NULL: appends it to the array obj),
 * taking it: on failure (out of memory, or obj or item NULL) item is
 * deleted. 1 if added. cJSON's own add leaves the item to the caller when
 * it fails, which leaks it in the usual `add(obj, key, cJSON_Duplicate(...))`. */
int hx_json_add(cJSON *obj, const char *key, cJSON *item);

/* A person named where a built-in tool takes an address ("attendees",
 * "to", "cc", "bcc": ["Dana"]) resolved to the one address the user's
 * mail (hx_tools_known_addresses' messages) gives a person of that name:
 * every word of the name a word of the display name or of the address's
 * local part, folded as searches fold ("tomas" is Tomás), the user's own
 * address left out. Values that are addresses stay as they are. With a
 * name resolved, *named is a copy of args with "Name <address>" in its
 * place and *resolved {"Dana": "Dana Okafor <dana@...>"} (both the
 * caller's); with none, both NULL. A name no one of the mail has
 * (HX_ERR_NOTFOUND) or several have (HX_ERR_INVALID, each listed) is an
 * error that names the argument and says to write the address. */
int hx_tools_resolve_names(const hx_tools *reg, const char *tool, const cJSON *args, cJSON **named,
                           cJSON **resolved, hx_err *err);

/* The people of the user's mail a request names (a word of the request,
 * folded, a word of their display name or the first word of their
 * address: "dana", "Tomás", "kenta" of kenta.mori@), newest first, each
 * once, at most 5, the user not one: "- word <address>" lines appended to
 * out, the word as the request writes it (a display name is another's
 * text, and stays out of the prompt). Returns how many, or minus an
 * error code (err set). */
int hx_tools_people_named(const hx_tools *reg, const char *request, hx_buf *out, hx_err *err);

/* Addresses the user has exchanged mail with: the From, To and Cc of the
 * newest KNOWN_MESSAGES (2,000) messages of the configured Maildir,
 * through its index, each once (compared without case), one a line,
 * appended to out. No Maildir configured: none, HX_OK. */
int hx_tools_known_addresses(const hx_tools *reg, hx_buf *out, hx_err *err);

/* ---- a mail message, parsed (tools/mime.c): what the mail tools read,
 * and what checks of the outbox read back ---- */
typedef struct hx_mail_att {
    char *filename;     /* UTF-8, may be "" */
    char *content_type; /* lower case, "application/pdf" */
    size_t size;        /* decoded bytes */
} hx_mail_att;

typedef struct hx_message {
    char *message_id, *from, *to, *cc, *subject, *in_reply_to, *references;
    char *date_raw;
    int64_t date;       /* Unix seconds; 0 if missing or unparsable */
    char *text;         /* the body as UTF-8 text (text/plain preferred,
                           else text/html reduced to text) */
    hx_mail_att *att;
    int n_att;
    char *problems;     /* "" or what was wrong but recovered (broken MIME) */
} hx_message;

/* Parses a raw message (any bytes; never reads past len). Every string in
 * the result is valid UTF-8 (invalid input bytes become U+FFFD). A message
 * with no header/body separator or garbage is still parsed as far as it
 * goes; only allocation failure is an error. Free with hx_message_free. */
int hx_message_parse(const char *raw, size_t len, hx_message **out,
                     hx_err *err);
void hx_message_free(hx_message *m);

/* ---- time expressions (tools/when.c) ----
 * A deterministic reader of the times people type ("tomorrow", "next
 * Tuesday afternoon", "Dec 3 at 2pm", "in two hours", "between 9 and 11
 * tomorrow", "2026-12-03T14:00:00+01:00"), resolved in an IANA time zone
 * (libical's copy of the system tzdata; no process-global TZ). The choices
 * (morning 08-12, afternoon 12-17, "next Tuesday" = the first Tuesday after
 * today, ...) are listed at the top of tools/when.c. */
typedef struct hx_when_range {
    int64_t start;  /* Unix seconds, inclusive */
    int64_t end;    /* exclusive; == start for a point */
    int is_point;   /* 1: a moment ("at 3pm"); 0: a period ("tomorrow") */
    int whole_days; /* 1: the period is whole local days ("Dec 3", "next week") */
} hx_when_range;

/* Parses expr relative to now (Unix seconds, usually hx_now()) in time zone
 * tz (IANA name; NULL or "" = UTC). HX_ERR_FORMAT with a message quoting
 * the part not understood; HX_ERR_RANGE for an expression read whole that
 * names a day there is not ("April 31", "2027-02-29"), saying so;
 * HX_ERR_NOTFOUND for an unknown time zone. */
int hx_when_parse(const char *expr, int64_t now, const char *tz,
                  hx_when_range *out, hx_err *err);
/* Whether the word w[0, n) (any case) only says what follows ("at",
 * "the", "before", "for") or joins a range ("to", "and"): an expression
 * that ends with it says no more than the same without it. */
int hx_when_dangles(const char *w, size_t n);
/* Formats t as ISO 8601 in tz: "2026-12-03T14:00:00+01:00", or with
 * date_only "2026-12-03". Returns the length, or -1 if tz is unknown or
 * buf (n bytes, 32 is enough) is too small. */
int hx_when_format(int64_t t, const char *tz, int date_only, char *buf,
                   size_t n);
/* The English name of the weekday of t in tz ("Tuesday"), a static
 * string; "" for an unknown zone. */
const char *hx_when_weekday(int64_t t, const char *tz);
/* UTC offset in seconds of tz at t; 0 for an unknown zone. */
int hx_when_utc_offset(const char *tz, int64_t t);
/* True if tz names a time zone hx_when_* knows. */
int hx_when_tz_known(const char *tz);

/* ---- registered tools: manifests in tools.d (tools/extools.c, mcp.c) ----
 * A manifest is a JSON file naming a plain command or an MCP server:
 *   {"name": "weather.forecast", "description": "...",
 *    "input_schema": {JSON Schema}, "command": ["/usr/bin/forecast"],
 *    "effect": "read", "read_paths": ["~/weather"], "write_paths": [],
 *    "timeout_s": 10, "max_memory_mb": 1024}
 *   {"name": "notes", "mcp": {"command": ["/usr/bin/notes-mcp"]},
 *    "effect": "write", "read_paths": [...], "write_paths": [...]}
 * A command gets the arguments as JSON on stdin and answers a JSON object
 * on stdout; an MCP server's tools appear as "<name>.<tool>". Every one
 * runs confined by the sandbox with only its manifest's paths and its
 * command file. */
typedef struct hx_extools hx_extools;

/* Loads every *.json of dir (NULL: <config>/tools.d) into reg, checked as
 * hx_manifest_check does against reg's configuration, and against each
 * other: no write path may hold another tool's command. A broken or refused
 * manifest, a name clash or a server that fails or answers garbage is
 * reported as one line in problems (may be NULL) and skipped; the others
 * load. *out owns what the registered tools use: free it after the last
 * call through reg (hx_extools_free(NULL) is a no-op). */
int hx_extools_load(hx_tools *reg, const char *dir, hx_extools **out,
                    hx_buf *problems, hx_err *err);
void hx_extools_free(hx_extools *x);
/* Validates a manifest file without running anything; its name goes into
 * name (n bytes). Errors name the field. Refused: unknown fields, a key
 * twice in one object, control characters, limits out of bounds
 * (timeout_s 0.1..600, max_memory_mb 16..65536), paths the sandbox would
 * refuse (hx_sandbox_check: links, devices, /dev /proc /sys, nesting in a
 * write path), a listed path overlapping Hearth's own configuration, data,
 * cache or outbox, and a write path holding one of cfg's roots (Maildir,
 * calendars, file roots; cfg NULL: Hearth's own folders only). */
int hx_manifest_check(const char *path, const hx_config *cfg, char *name,
                      size_t n, hx_err *err);
/* Validates (as hx_manifest_check) and installs a manifest into dir (NULL:
 * <config>/tools.d) as NAME.json, atomically; an existing one is replaced
 * only with replace. */
int hx_manifest_install(const char *path, const hx_config *cfg,
                        const char *dir, int replace, hx_err *err);
/* Whether the registered tool's results always carry untrusted content
 * (HX_TOOL_UNTRUSTED); 0 for an unknown name. */
int hx_tools_untrusted_output(const hx_tools *reg, const char *name);
/* The sandbox bits (HX_SB_*) applied to the last call of an external tool
 * by this name, 0 for in-process tools. */
unsigned hx_extools_last_sandbox(const hx_extools *x, const char *name);
/* Appends what the registered tool name may touch to out ("runs EXE;
 * reads A; writes B", hx_sandbox_describe_grants); returns 0 if name is
 * not a registered tool (nothing appended). */
int hx_extools_describe_grants(const hx_extools *x, const char *name, hx_buf *out);

#endif /* HX_TOOLS_H */
