/* sim.h: the simulation that makes training data and evaluations: sample
 * worlds (a user's calendars, mail, files, memories), requests and their
 * oracle runs through the real planner and tools (hearth datagen), the
 * agent evaluation's runs and checker, the persona of the personalization
 * proof and the hand-written evaluation (sim/handeval.h). Uses the agent
 * and what it uses. */
#ifndef HX_SIM_H
#define HX_SIM_H

#include "agent/agent.h"

/* ---- synthetic worlds (sim/world.c): a sample user's calendars,
 * mailbox, files, config and memories, generated from (seed, split), for
 * training data (hearth datagen) and the agent evaluation. The held-out
 * split draws names, topics, rooms and its year of dates from pools
 * disjoint from the training split's. ---- */
enum { HX_SPLIT_TRAIN = 0, HX_SPLIT_HELDOUT = 1 };

/* A small deterministic random generator (splitmix64). */
typedef struct hx_rng {
    uint64_t s;
} hx_rng;
void hx_rng_seed(hx_rng *r, uint64_t seed, uint64_t stream);
uint64_t hx_rng_next(hx_rng *r);
int hx_rng_below(hx_rng *r, int n); /* uniform in [0, n); 0 if n <= 0 */
int hx_rng_chance(hx_rng *r, double p);

#define HX_W_PEOPLE 8
#define HX_W_EVENTS 20
#define HX_W_MAILS 12
#define HX_W_FILES 10
#define HX_W_MEMS 4

typedef struct hx_wperson {
    char first[24], last[24], name[50], email[48];
} hx_wperson;

typedef struct hx_wevent {
    char uid[48], title[48], location[40];
    int64_t day;       /* local day number (days since 1970-01-01) */
    int start_min;     /* minutes after local midnight */
    int dur_min;
    int recur;         /* 0 once, 1 weekly, 2 every two weeks, 3 weekdays */
    int organizer;     /* -1: the user; else a people[] index */
    int att[3], n_att; /* people[] indexes */
    int personal;      /* 1: in calendars/personal.ics, 0: the work vdir */
    int cancelled;     /* STATUS:CANCELLED (training worlds only); no task
                        * acts on it, and lists leave it out */
} hx_wevent;

typedef struct hx_wmail {
    char id[48];       /* the Maildir name without flags (mail.search's id) */
    char subject[64], topic[32], fact[96];
    int from;          /* people[] index */
    int64_t t;         /* Unix seconds */
    int unread;
} hx_wmail;

typedef struct hx_wfile {
    char folder[32], name[40], topic[32], fact[96];
} hx_wfile;

typedef struct hx_wmem {
    char kind[16], text[96];
} hx_wmem;

typedef struct hx_world {
    uint64_t seed;
    int split;
    hx_wperson user;
    char tz[40];
    int work_start, work_end; /* minutes after midnight, Monday to Friday */
    int64_t now;              /* Unix seconds */
    int64_t today;            /* local day number of now */
    char now_iso[40];         /* for HEARTH_NOW */
    hx_wperson people[HX_W_PEOPLE];
    int n_people;
    hx_wevent events[HX_W_EVENTS];
    int n_events;
    int64_t busy_day;         /* a day holding several events, or 0 (only
                               * training worlds made with HX_WORLD_BUSY_DAYS
                               * have one: held-out worlds stay as they
                               * were, so evaluations compare) */
    hx_wmail mails[HX_W_MAILS];
    int n_mails;
    hx_wfile files[HX_W_FILES];
    int n_files;
    hx_wmem mems[HX_W_MEMS];
    int n_mems;
} hx_world;

/* Fills w from (seed, split, flags); the same arguments give the same
 * world. HX_WORLD_BUSY_DAYS: training worlds may get a busy day and a
 * cancelled event (world.c); off, none (so that worlds made without the
 * flag, such as the held-out ones, stay the same). */
enum { HX_WORLD_BUSY_DAYS = 1u };
int hx_world_generate(uint64_t seed, int split, unsigned flags, hx_world *w, hx_err *err);
/* Writes w as a HEARTH_HOME at home (emptied first): home/config/
 * config.json, calendars/work/ (one .ics per event) and personal.ics
 * (only when some events are personal),
 * mail/ (Maildir), files/<folder>/, outbox/. Memories are not written
 * (hx_world_seed_memory does that once the database is open). */
int hx_world_write(const hx_world *w, const char *home, hx_err *err);
/* Stores w's memories in mem. */
int hx_world_seed_memory(const hx_world *w, hx_memory *mem, hx_err *err);
/* Removes a directory tree (no symlinks followed); a missing one is ok. */
int hx_world_rmtree(const char *dir, hx_err *err);

/* Pools (for requests and tests): a person, a topic ("budget review"), a
 * room, a pronounceable word, a city; each drawn only from split's pool. */
void hx_world_person(hx_rng *r, int split, hx_wperson *p);
void hx_world_topic(hx_rng *r, int split, char *buf, size_t n);
void hx_world_room(hx_rng *r, int split, char *buf, size_t n);
void hx_world_word(hx_rng *r, int split, char *buf, size_t n);
const char *hx_world_city(hx_rng *r, int split);
/* The split a generated word belongs to (pronounceable words are split by
 * a hash of their letters). */
int hx_world_word_split(const char *word);
/* Local day number and minutes -> Unix seconds in w's zone. */
int64_t hx_world_local(const hx_world *w, int64_t day, int minutes);
/* Local "YYYY-MM-DD" / "HH:MM" of a Unix time in w's zone. */
void hx_world_date(const hx_world *w, int64_t t, char *buf, size_t n);
void hx_world_hhmm(const hx_world *w, int64_t t, char *buf, size_t n);
/* A day number as people write it in a note: "March 25". */
void hx_world_month_day(int64_t day, char *buf, size_t n);
/* A phrase naming local day `day` relative to w's today that hx_when_parse
 * resolves to that day ("tomorrow", "on Friday", "Dec 3", ...); checked. */
void hx_world_day_phrase(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n);
/* phrase (a day, a part of one or a moment on one) said another way that
 * hx_when_parse reads as the same range ("Thursday the 16th", "at 2 pm on
 * wed"), drawn with r; phrase itself when no variant reads the same. */
void hx_world_resay_when(const hx_world *w, hx_rng *r, const char *phrase, char *buf, size_t n);

/* ---- trajectories and evaluation tasks (sim/datagen.c) ----
 * A task is a JSON object {"id", "split", "world_seed", "now", "category",
 * "kind", "request", "template" (its phrasing's index; i % 5 == 4 only in
 * the held-out split), "consent" ("yes"|"no"), "policy" (object or null),
 * "slots": {what the oracle copies}}. The oracle is an hx_source that
 * writes the intended assistant turns, looking at the planner's messages
 * so far; the real planner and tools run it in the task's world. */
enum { HX_CAT_SINGLE, HX_CAT_MULTI, HX_CAT_NONE, HX_CAT_REFUSAL, HX_CAT_ERROR,
       HX_CAT_MEMORY, HX_CAT_COUNT };
const char *hx_dg_category_name(int cat); /* "single", ...; static */
int hx_dg_category_parse(const char *name); /* -1 if unknown */

/* A world opened for runs: written at home, its config, tools (built-ins
 * and memory tools, as `hearth ask` registers them) and memory open.
 * Open sets HEARTH_HOME and HEARTH_NOW in the environment for the world's
 * tools and close puts both back as they were, unset if they were unset
 * (not thread-safe; worlds open at once close in reverse order). Close is
 * safe after any open, failed or not. */
typedef struct hx_dg_world {
    hx_world w;
    char home[512];
    hx_config *cfg;
    hx_tools *reg;
    hx_memory *mem;
    int env_set;                     /* open changed the environment */
    char *saved_home, *saved_now;    /* owned: the values before, or NULL */
} hx_dg_world;
int hx_dg_world_open(uint64_t seed, int split, unsigned flags, const char *home, hx_dg_world *dw,
                     hx_err *err);
/* The same for a world already generated (and maybe changed: a persona). */
int hx_dg_world_open_w(const hx_world *w, const char *home, hx_dg_world *dw, hx_err *err);
/* The same for a world already written at dw->home (dw zeroed but for
 * home and w.now_iso): environment, config, tools and memory, no memories
 * stored (a world written by hand: sim/handrun.c). */
int hx_dg_world_open_written(hx_dg_world *dw, hx_err *err);
void hx_dg_world_close(hx_dg_world *dw);

/* A new task for world w (its category cat, or any with cat < 0), drawn
 * with r; used marks targets already taken in this world (may be NULL).
 * Caller frees with cJSON_Delete. NULL if none fits (try again). */
cJSON *hx_dg_task_new(const hx_world *w, hx_rng *r, int cat, unsigned *used);
/* The same with the phrasings of split phrase_split (HX_SPLIT_*) instead
 * of w's own: held-out worlds asked in training's phrasings separate
 * name and topic generalization from phrasing generalization. */
cJSON *hx_dg_task_new_phrased(const hx_world *w, hx_rng *r, int cat, unsigned *used, int phrase_split);
/* A task's "template": the index of its phrasing in its kind's list (every
 * fifth held out), or HX_DG_EXTRA_TEMPLATE + j for the j-th of the
 * training-only phrasings some kinds have. */
#define HX_DG_EXTRA_TEMPLATE 1000
/* ... or HX_DG_COMPOSED_TEMPLATE for a training request composed from
 * parts (hx_dg_compose). */
#define HX_DG_COMPOSED_TEMPLATE 2000
/* A phrasing as compared for held-out clashes: s with only its lower-cased
 * letters, digits and {slot} braces, into out (n bytes). */
void hx_dg_phrasing_key(const char *s, char *out, size_t n);
/* A request template ({slot}s as the kind's templates have) for kind,
 * composed from independently drawn parts: opener, verb and synonyms,
 * object phrase, word order, question or order, closer, case. 0 (tpl
 * untouched) for a kind with no grammar. */
int hx_dg_compose(const char *kind, hx_rng *r, char *tpl, size_t n);
/* Whether template i of a kind's n is held out: every fifth (i % 5 == 4)
 * of a kind with at least five. */
int hx_dg_template_heldout(int i, int n);
/* Kind i's phrasings (i from 0): its base templates (index % 5 == 4 held
 * out) and the training-only extras after them; all static. 0 past the
 * last kind. */
typedef struct hx_dg_phrasings {
    const char *kind;
    int train_only;           /* never in held-out tasks */
    const char *const *base;
    int n_base;
    const char *const *extra; /* NULL when n_extra is 0 */
    int n_extra;
} hx_dg_phrasings;
int hx_dg_phrasings_of(int i, hx_dg_phrasings *out);
/* A task object for w (its seed, split and now) with the given request;
 * takes slots. NULL on out of memory. */
cJSON *hx_dg_task_make(const hx_world *w, int cat, const char *kind, const char *request,
                       int template_i, cJSON *slots);
/* The request for template tpl ({slot}s from slots) in a drawn style:
 * politeness, extra context, case, a typo, end punctuation. */
void hx_dg_phrase(hx_rng *r, const char *tpl, const cJSON *slots, char *buf, size_t n);
/* A period on day that the tools read: "tomorrow afternoon", "on Friday". */
void hx_dg_range_phrase(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n);
/* A weekday between lo and hi days after w's today. */
int64_t hx_dg_future_weekday(const hx_world *w, hx_rng *r, int lo, int hi);

/* The oracle source for task over planner *pl (set *pl before running);
 * reg gives the schemas (arguments are written in their order).
 * hx_dg_oracle_failed tells whether the oracle gave up (and why). */
int hx_dg_oracle_new(const cJSON *task, const hx_world *w, const hx_tools *reg,
                     hx_planner **pl, hx_source *out);
const char *hx_dg_oracle_failed(const hx_source *s);
/* The oracle's deliberate slips: bit k set when its k-th assistant turn
 * is a wrong call the recovery kinds (schedule_fix, send_fix) make so
 * that the tool refuses it; training leaves such turns out of the loss
 * ("loss": false on the message). */
unsigned hx_dg_oracle_mistakes(const hx_source *s);
/* The prompts the planner gave the oracle, in order (borrowed). */
int hx_dg_oracle_prompts(const hx_source *s, const char ***prompts);

/* Runs task in dw with src (the oracle, or a model's source): policy and
 * consent from the task, a fresh planner with params (NULL:
 * hx_dg_planner_params(HX_TPL_COMPACT)). *trace as hx_planner_run's.
 * *plp, if not NULL, gets the planner (set before the run, for the
 * oracle); freed here. */
int hx_dg_run(hx_dg_world *dw, const cJSON *task, hx_source *src, hx_planner **plp,
              const hx_planner_params *params, cJSON **trace, hx_err *err);
/* The same with no model: the tool tier's call tool(args)
 * (hx_planner_run_call). */
int hx_dg_run_call(hx_dg_world *dw, const cJSON *task, const char *tool, const cJSON *args,
                   cJSON **trace, hx_err *err);
/* The planner's parameters as `hearth ask` sets them, in style family. */
hx_planner_params hx_dg_planner_params(int family);
/* The planner's parameters of an evaluation run o: its family's, and
 * the answer o asks for (struct below). */
struct hx_dg_eval_run;
hx_planner_params hx_dg_eval_params(const struct hx_dg_eval_run *o);

/* Validates calls against the tools' schemas (tools: hx_tools_list_json's
 * shape, copied), members in the schema's order as the grammar writes
 * them. */
typedef struct hx_dg_validator hx_dg_validator;
hx_dg_validator *hx_dg_validator_new(const cJSON *tools, hx_err *err);
/* The same over tool specs (as hx_agent_tool_specs gives; copied). */
hx_dg_validator *hx_dg_validator_for(const hx_tool_spec *specs, int n, hx_err *err);
void hx_dg_validator_free(hx_dg_validator *v); /* NULL is a no-op */
/* 1 if the call is valid against its schema, else 0 with why. */
int hx_dg_call_valid(hx_dg_validator *v, const char *name, const cJSON *args, char *why,
                     size_t n);
/* 1 if compact_json decoding (models without a declared style) could
 * write args too: strings of at most 40 bytes, a few round numbers, at
 * most 3 items; else 0 with why. Training data keeps to it. */
int hx_dg_call_compact(const cJSON *args, char *why, size_t n);

/* Checks an oracle trajectory: answered, every call valid (v), statuses
 * as the category expects, and the compact rendering of the conversation
 * extends every prompt the planner gave the oracle. 1 if good, else 0
 * with why. */
int hx_dg_verify(const cJSON *task, const cJSON *trace, const hx_source *oracle,
                 hx_dg_validator *v, const cJSON *tools, char *why, size_t n);

/* ---- the evaluation's checker (sim/evalcheck.c): final state, not
 * wording. task is a --tasks line (with "expect", the oracle's calls). */
/* What the check needs from the world before the run (outbox, busy times
 * in the asked period). Caller frees. */
cJSON *hx_dg_check_before(const cJSON *task, hx_dg_world *dw);
/* 1 if the run (trace) reached the task's expected final state in dw,
 * else 0; why gets the reason ("ok" on success). Adds the run's calls
 * valid against their schemas to *n_valid and all its calls to *n_calls
 * (both may be NULL). */
int hx_dg_check(const cJSON *task, const cJSON *before, const cJSON *trace, hx_dg_world *dw,
                hx_dg_validator *v, int *n_valid, int *n_calls, char *why, size_t n);

/* A file's path as the model passes it on and answers give it: from the
 * file root on (after "/files/"), else p itself (sim/oracle.c). */
const char *hx_dg_rel_path(const char *p);
/* A message body's first paragraph after the greeting, the fact an answer
 * about a mail read states, into b (n bytes) (sim/oracle.c). */
void hx_dg_body_fact(const char *text, char *b, size_t n);

/* Whether the answer of a run (trace) of a read task states what its read
 * found, as the oracle's answer does: for list_events the count of events
 * (cancelled ones left out) and the first four's titles and start times;
 * free_busy each busy period's start and end (more than five: their
 * count); find_slots each slot's time; mail_search the first message's
 * subject, or when the run went on to read a message (mail.read), that
 * body's first paragraph, as a mail_read answer gives it; unread_mail the
 * first three subjects; file_search the first three
 * paths; files_list the first five names. 1 or 0; -1 when there is
 * nothing to say (another kind, no successful read, an empty result).
 * Reported beside the state check, which for a read checks that the right
 * thing was read, not the answer. */
int hx_dg_answer_faithful(const cJSON *task, const cJSON *trace);

/* Opens the task's world (its world_seed and split) at home. */
int hx_dg_task_world(const cJSON *task, const char *home, hx_dg_world *dw, hx_err *err);
/* A source over model m for reg's tools as `hearth ask` makes it for the
 * prompt style family (compact: bounded values, repeat penalty 1.3, 8192
 * context). Free with hx_source_free. */
int hx_dg_engine_source(hx_model *m, const hx_tools *reg, int family, int n_threads,
                        hx_source *out, hx_err *err);
/* The same as an evaluation run asks: its model, family, threads, LoRA
 * adapters (borrowed: must outlive the source) and plain_decode. */
struct hx_dg_eval_run;
int hx_dg_engine_source_run(const struct hx_dg_eval_run *o, const hx_tools *reg,
                            hx_source *out, hx_err *err);
/* The evaluation log's line for a run: {"id", "category", "kind",
 * "request", "pass", "reason", "calls": [{"name", "arguments", "status"}],
 * "not_run" (the trace's),
 * "answer", "status", "steps", "tokens", "seconds", and "answer_ok"
 * (hx_dg_answer_faithful, when not -1)}. Caller frees. */
cJSON *hx_dg_eval_record(const cJSON *task, const cJSON *trace, int pass, const char *why);
/* Writes a readable transcript of one evaluated run to f: the task, the
 * per-request system text, every assistant turn (its text and calls),
 * every tool result with its status, a turn cut by a limit, the calls not
 * run, the oracle's expected calls (with the first one's result) and the
 * verdict with its reason (bench/agent-eval --trace). */
void hx_dg_transcript(FILE *f, const cJSON *task, const cJSON *trace, int pass, const char *why);
/* The run part of it: every message after the system text, the
 * assistant's calls and each tool result with its status, a cut turn, the
 * calls not run, and the status. */
void hx_dg_transcript_run(FILE *f, const cJSON *trace);

typedef struct hx_dg_params {
    int split;          /* HX_SPLIT_* */
    uint64_t seed;
    long n;             /* trajectories (or tasks) to write */
    int per_world;      /* requests per world (trajectories); default 8 */
    int category;       /* -1: the default mix; else only this one */
    int tasks;          /* 1: evaluation tasks, each in a fresh world */
    const char *home;   /* work directory for worlds; NULL: a temporary one */
    int phrasings;      /* HX_SPLIT_* of the request phrasings; -1: split's */
    unsigned world_flags; /* HX_WORLD_* of trajectories' worlds (tasks: 0,
                           * as a task file's worlds are opened again) */
} hx_dg_params;
hx_dg_params hx_dg_default_params(void);

typedef struct hx_dg_stats {
    long written, rejected, per_cat[HX_CAT_COUNT], calls, chars, worlds;
    double seconds;
    char last_reject[256];
} hx_dg_stats;
/* Writes p->n JSON lines to out: trajectories {"id", "split", "category",
 * "kind", "messages", "tools", "style": "compact"} or tasks. */
int hx_datagen_run(const hx_dg_params *p, FILE *out, hx_dg_stats *st, hx_err *err);

/* ---- the evaluation's runs (sim/evalrun.c; bench/agent_eval.c and the
 * nightly gate share them) ---- */
/* n evaluation tasks of split (HX_SPLIT_*; category -1: the default mix)
 * from seed, as a JSON array (caller frees); NULL with err set. */
cJSON *hx_dg_tasks(int split, long n, uint64_t seed, int category, hx_err *err);
/* hx_dg_tasks of the held-out split. */
cJSON *hx_dg_eval_tasks(long n, uint64_t seed, int category, hx_err *err);
typedef struct hx_dg_eval_run {
    hx_model *model;             /* NULL with oracle */
    int family, n_threads, oracle;
    hx_adapter *const *adapters; /* attached to the model's context */
    const float *scales;
    int n_adapters;
    int plain_decode;            /* 1: one token per forward pass */
    hx_gen_stats *gen;           /* NULL, or the runs' generation counters
                                    are added to it */
    float copy_bias;             /* 0: the prompt style's (HX_COPY_BIAS for
                                    small models); > 0: this; < 0: none */
    hx_spec_memo *spec_memo;     /* NULL, or shared by the runs' decoders
                                    (hx_source_engine_params) */
    int answer;                  /* 0: the model's kind decides
                                    (hx_agent_answer_for); else
                                    HX_ANSWER_* + 1 */
} hx_dg_eval_run;
/* One task in a fresh world at home (removed after): the state before, the
 * run (the model or the oracle), the check. *pass 1 if it succeeded; *v
 * the schema validator (made on first use; caller frees); the run's calls
 * added to *n_valid, *n_calls (may be NULL); *record (or NULL) its log
 * line (hx_dg_eval_record; caller frees). */
int hx_dg_eval_task(const hx_dg_eval_run *o, const cJSON *task, const char *home,
                    hx_dg_validator **v, int *pass, int *n_valid, int *n_calls,
                    cJSON **record, hx_err *err);
/* The same, also giving the planner's whole trace in *trace (or NULL;
 * caller frees) for hx_dg_transcript. */
int hx_dg_eval_task_traced(const hx_dg_eval_run *o, const cJSON *task, const char *home,
                           hx_dg_validator **v, int *pass, int *n_valid, int *n_calls,
                           cJSON **record, cJSON **trace, hx_err *err);
/* How a task runs besides its model: with the tool tier on, a request it
 * takes (hx_agent_tool_tier) runs with no model (hx_dg_run_call); tools
 * (as hx_planner_params.tools; NULL: all) is the tool list the prompt
 * offers, as the governor's cut trims it. */
typedef struct hx_dg_run_opts {
    int tool_tier;
    const char *tools;
} hx_dg_run_opts;
/* hx_dg_eval_task_traced's run so; *tier 1 when the tool tier took the
 * request (may be NULL). */
int hx_dg_eval_task_with(const hx_dg_eval_run *o, const hx_dg_run_opts *ro, const cJSON *task,
                         const char *home, hx_dg_validator **v, int *pass, int *tier,
                         cJSON **record, cJSON **trace, hx_err *err);

/* The directory evaluation worlds go in (sim/evalhome.c): always
 * DIR/hearth-eval (DIR NULL: /dev/shm, else /tmp), because its path is in
 * tool results and a random one made the same task end differently from
 * run to run; taken under an exclusive lock (DIR/hearth-eval.lock, waited
 * for), emptied, created. base gets the path, *fd the lock. Give it back
 * (removed, unlocked) with hx_eval_home_give; fd < 0 is a no-op. */
int hx_eval_home_take(const char *dir, char *base, size_t n, int *fd, hx_err *err);
void hx_eval_home_give(const char *base, int fd);

/* ---- a persona (sim/persona.c): a sample user with habits no base
 * model can know, for the personalization proof. Their meetings
 * are in one room, last 45 minutes unless said otherwise, and one
 * colleague (people[0] of the world; for seed 1 Robert Keller,
 * robert.keller@northwind.com) is called by a nickname ("Bobby") that
 * only the user's accepted episodes tie to that address. Held-out
 * requests name the nickname and never the length, the room, the
 * colleague's name or address; of the training ones (the user's history)
 * some are meetings with other people of the world, named by address,
 * and some state a length (others_pct, stated_pct), none names the room. ---- */
enum { HX_HABIT_ROOM = 1, HX_HABIT_MINUTES = 2, HX_HABIT_NICKNAME = 4, HX_HABIT_ALL = 7 };
typedef struct hx_persona {
    hx_world w;        /* the user's world (held-out pools); people[0] is the colleague */
    char nickname[24]; /* what the user calls people[0] */
    char room[40];     /* where the user's meetings are */
    int minutes;       /* their usual length: 45 */
    int others_pct;    /* % of training meetings with others, by address (50) */
    int stated_pct;    /* % of training requests that state a length (25) */
    int first_day;     /* local day of the first episode (w.today) */
} hx_persona;
/* Fills p from seed; the same seed gives the same persona. */
int hx_persona_generate(uint64_t seed, hx_persona *p, hx_err *err);
/* n meeting requests of p, request i on the i-th weekday from day0 (a
 * local day; the task's "now" is then): split HX_SPLIT_TRAIN draws the
 * episodes' phrasings and topics, HX_SPLIT_HELDOUT others (pools
 * disjoint). Kind "persona_meeting": the oracle finds a slot and books
 * it with the habits. A JSON array (caller frees); NULL on out of memory. */
cJSON *hx_persona_requests(const hx_persona *p, int split, int n, int64_t day0, uint64_t seed);
/* Runs the training requests through the oracle, the real planner and
 * tools in p's world written at home (emptied first), its memory at
 * home/data/memory.db where `hearth nightly` with HEARTH_HOME=home finds
 * it: each verified run (hx_dg_verify, a booking made) is the planner's
 * episode marked accepted, as `hearth feedback --accept` does; others are
 * marked rejected. *n_accepted (may be NULL) gets how many were accepted. */
int hx_persona_write_episodes(const hx_persona *p, const cJSON *requests, const char *home,
                              int *n_accepted, hx_err *err);
/* Which habits (HX_HABIT_* bits) a run's calls (a trace's "calls":
 * name, arguments, status, result) got right, judged on its last
 * calendar.create_event call: location the room; length the usual
 * minutes (the created event's end - start, else duration_minutes); the
 * attendees exactly the colleague's address. Without one, on its last
 * calendar.find_slots call (length and attendees; the room is missed);
 * 0 without either. why gets the first miss ("ok" when all are right). */
int hx_persona_check(const hx_persona *p, const cJSON *calls, char *why, size_t n);
/* One request in p's world freshly written at home (removed after), run
 * by o (a model with its adapters, or the oracle) as the agent-eval runs
 * tasks: *habits gets hx_persona_check's bits, *booked 1 if a
 * create_event call succeeded; *record (or NULL) the hx_dg_eval_record
 * line with "habits" added (caller frees). */
int hx_persona_eval(const hx_persona *p, const hx_dg_eval_run *o, const cJSON *request,
                    const char *home, int *habits, int *booked, cJSON **record, hx_err *err);

#include "sim/handeval.h"

#endif /* HX_SIM_H */
