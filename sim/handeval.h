/* handeval.h: the hand-written agent evaluation (bench/handeval/): worlds
 * written by hand opened for runs, and the checker of a run's calls, final
 * state and answer against the outcome written by hand for each request.
 * Independent of the generator's checker (sim/evalcheck.c). Part of
 * sim.h. */
#ifndef HX_HANDEVAL_H
#define HX_HANDEVAL_H

#include "sim/sim.h"

/* ---- facts in text (sim/handfacts.c) ----
 * Text is folded first (hx_he_fold): lower case, accents off, typographic
 * quotes, dashes and spaces made plain, full-width digits made ASCII; the
 * facts people state are then read from it in the forms they take: times
 * ("14:00", "2 pm", "2:30pm", "14h30", "15 Uhr", "午後3時", "noon", the time
 * of an ISO date-time), dates ("2027-03-11", "March 11", "11 March",
 * "11. März", "11 de marzo", "3/11", "11.03.", "3月11日", "today",
 * "tomorrow"), weekdays, mail addresses, file names (by their extension),
 * and numbers ("12,400", "48.500", "12 400", "287.40"). */
enum { HX_HE_TIME, HX_HE_DATE, HX_HE_WEEKDAY, HX_HE_ADDR, HX_HE_FILE, HX_HE_NUMBER };

typedef struct hx_he_mention {
    int kind;        /* HX_HE_* */
    int at, end;     /* byte span in the folded text */
    int minutes;     /* TIME: minutes after midnight */
    int minutes2;    /* TIME: the afternoon reading of a clock written
                        without am/pm that may be a 12-hour one ("3:00":
                        15:00), else minutes */
    int y, m, d;     /* DATE: y 0 when the text names no year */
    int m2, d2;      /* DATE read from "3/11": the other reading (0: none) */
    int wday;        /* WEEKDAY: 0 Sunday .. 6 Saturday */
    double value;    /* NUMBER */
    double value2;   /* NUMBER: the other reading ("940,11": 940), else value */
    char s[96];      /* ADDR: the address; FILE: the name from its last word */
} hx_he_mention;

/* Folded text and what it states. */
typedef struct hx_he_text {
    char *text;        /* folded, NUL-terminated (owned) */
    size_t len;
    hx_he_mention *m;  /* owned */
    int n, cap;
} hx_he_text;

/* Appends the folded form of s to out (a JSON escape of a line break or
 * a tab, as tool results hold them, becomes white space). */
void hx_he_fold(const char *s, hx_buf *out);
/* Folds s and reads its mentions into *out (free with hx_he_text_free);
 * today (local days since 1970-01-01) resolves "today", "tomorrow".
 * HX_OK or HX_ERR_NOMEM. */
int hx_he_scan(const char *s, int64_t today, hx_he_text *out);
void hx_he_text_free(hx_he_text *t);

/* Whether answer states the task's facts and nothing wrong: every entry
 * of "facts" is stated (a group of a text and a time or date: stated
 * near each other, the time or date closer to its text than to any other
 * fact's), and every time, date, weekday, address or file name the
 * answer states is one of the facts, of "allow", or of sources (what the
 * run was entitled to say: the request, the system text, the tools'
 * results), and none is in "forbid". 1, or 0 with why ("missing: ...;
 * wrong: ..."). today: as hx_he_scan's. */
int hx_he_check_answer(const cJSON *task, const char *answer, const char *sources,
                       int64_t today, char *why, size_t n);
/* Whether every part of every entry of the task's "facts" is in text
 * (the request and the results of the ideal calls): the facts are
 * reachable by the tools. Entries of a "say" (a conclusion: "nothing
 * found", "can't") in place of a "text" are left out; the others are
 * added to *n_facts, those found to *n_found. 1, or 0 with the first
 * missing one in why. */
int hx_he_facts_in(const cJSON *task, const char *text, int64_t today, int *n_found, int *n_facts,
                   char *why, size_t n);
/* A fact entry (a string, or an object of "text" or "say", "time",
 * "date", "addr", "file", "number") as one line of text into buf. */
void hx_he_fact_str(const cJSON *fact, char *buf, size_t n);

/* ---- the final state and the calls (sim/handcheck.c) ---- */
/* What the check compares against after the run: every file of the
 * world's tree (path, size, modification time) and every memory. Caller
 * frees. */
cJSON *hx_he_snapshot(hx_dg_world *dw);
/* Whether the world now holds what the task's "state" expects, and was
 * written nowhere else: new events ("events": title, start, minutes,
 * attendees), queued mail ("outbox": recipients, words, invitation or
 * not), new memories ("memories": words); an absent "state" expects
 * nothing written. A message moved in the Maildir (read, answered) is not
 * a write. 1, or 0 with why. */
int hx_he_check_state(const cJSON *task, const cJSON *before, hx_dg_world *dw, char *why,
                      size_t n);
/* Whether the run's calls (a trace's "calls": name, arguments, status,
 * result) include each of the task's "calls": the tool (one name or a
 * list), the status ("ok" unless said), the arguments given and words
 * its result holds. 1, or 0 with why. */
int hx_he_check_calls(const cJSON *task, const cJSON *calls, char *why, size_t n);

/* ---- worlds and runs (sim/handrun.c) ---- */
/* World name of the evaluation at dir (bench/handeval): its world.json
 * (caller frees) with "now" and "memories". NULL with err set. */
cJSON *hx_he_world_json(const char *dir, const char *name, hx_err *err);
/* Opens world name at home: dir/worlds/name/config copied to home/config
 * (regular files and folders only, every file modified a day before the
 * world's now, so runs replay), opened as generated worlds are
 * (hx_dg_world_open_written) with HEARTH_NOW the world's now, and its
 * memories stored. Close with hx_dg_world_close. */
int hx_he_world_open(const char *dir, const char *name, const char *home, hx_dg_world *dw,
                     hx_err *err);
/* The local day number of the world's now (for hx_he_scan). */
int64_t hx_he_today(const hx_dg_world *dw);

/* One run's outcome, checked. */
typedef struct hx_he_outcome {
    int answered;             /* the planner answered */
    int calls_ok, state_ok, answer_ok;
    int success;              /* all of the above */
    int n_calls, n_valid;     /* calls made, schema-valid */
    int n_facts, n_found;     /* ideal runs: the facts asked, those the
                                 tools' results hold */
    char why_calls[300], why_state[300], why_answer[600];
} hx_he_outcome;

/* Runs task's ideal calls (its "ideal": name and arguments) straight
 * through the tools in a fresh world at home (removed after), and checks
 * them as a run: the calls, the final state, and that the facts are in
 * the request or their results (hx_he_facts_in). *record (may be NULL;
 * caller frees) the log line: the calls with their results. */
int hx_he_run_ideal(const char *dir, const cJSON *task, const char *home, hx_he_outcome *out,
                    cJSON **record, hx_err *err);
/* The text of the ideal calls' results in a fresh world at home (removed
 * after): what the world holds for this request, which an answer may
 * state. Caller frees; NULL with err set. */
char *hx_he_ideal_text(const char *dir, const cJSON *task, const char *home, hx_err *err);
/* Runs task with o's model (o->oracle is not used) in a fresh world at
 * home (removed after) and checks it; *v the schema validator (made on
 * first use; caller frees). *record (may be NULL; caller frees) the log
 * line; *trace (may be NULL; caller frees) the planner's trace. */
int hx_he_run_model(const hx_dg_eval_run *o, const char *dir, const cJSON *task,
                    const char *home, hx_dg_validator **v, hx_he_outcome *out, cJSON **record,
                    cJSON **trace, hx_err *err);
/* The same run so (ro: sim.h's hx_dg_run_opts); *tier 1 when the tool
 * tier took the request (may be NULL; o->model is not used then). */
int hx_he_run_with(const hx_dg_eval_run *o, const hx_dg_run_opts *ro, const char *dir,
                   const cJSON *task, const char *home, hx_dg_validator **v,
                   hx_he_outcome *out, int *tier, cJSON **record, cJSON **trace,
                   hx_err *err);
/* A readable transcript of a run to f: the request, the conversation,
 * the verdicts with their reasons, and the facts expected. */
void hx_he_transcript(FILE *f, const cJSON *task, const cJSON *trace, const hx_he_outcome *o);

#endif /* HX_HANDEVAL_H */
