/* cli.h: internal header of the `hearth` command line: one function per
 * verb, each taking the verb's own argv (argv[0] is the verb name) and
 * returning the process exit code (see EXIT_* below). */
#ifndef HX_CLI_H
#define HX_CLI_H

#include <stddef.h>
#include <stdio.h>

/* Exit codes that mean something to scripts. */
enum {
    HX_EXIT_OK = 0,
    HX_EXIT_FAIL = 1,    /* the operation failed (message on stderr) */
    HX_EXIT_USAGE = 2,   /* bad command line */
    HX_EXIT_INPUT = 3,   /* bad input file or data */
    HX_EXIT_DENIED = 4,  /* refused by policy or the user */
    HX_EXIT_CANCEL = 130 /* interrupted */
};

typedef struct hx_verb {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} hx_verb;

/* Hearth's own default model, used without --model or the config's
 * "model": $HEARTH_DEFAULT_MODEL when set (empty: none), else
 * CLI_DEFAULT_MODEL in the working directory (a checkout), else beside the
 * program: <dir>/../share/hearth/hearth-tiny.gguf (make install), or
 * <dir>/../models, <dir>/../../models (build/hearth, build/<name>/hearth).
 * The path found (in buf, n bytes, or static), or NULL. */
#define CLI_DEFAULT_MODEL "models/hearth-tiny.gguf"
const char *hx_cli_default_model(char *buf, size_t n);
/* The running program's absolute path (/proc/self/exe) into buf; "hearth"
 * when unknown. */
const char *hx_cli_self_path(char *buf, size_t n);

/* Maps a library result code to an exit code. */
int hx_cli_exit_code(int rc);
/* True if argv holds -h or --help; the verb then prints its usage. */
int hx_cli_wants_help(int argc, char **argv);
/* Says "hearth VERB: unknown WHAT 'WORD' (see 'hearth VERB --help')" on
 * stderr (WHAT: "option", "command", ...); returns HX_EXIT_USAGE. */
int hx_cli_bad_word(const char *verb, const char *what, const char *word);
/* Prints j (takes it; NULL: out of memory) as the one JSON value on stdout,
 * then frees it; HX_EXIT_OK, or HX_EXIT_FAIL when it cannot be printed. */
struct cJSON;
int hx_cli_json_out(struct cJSON *j);
/* A byte size: "1500000", "512M", "2G", "2GiB", "1.5GB" (K, M, G, T are
 * powers of 1024). 0 and *out set, or -1 if malformed. */
int hx_cli_parse_size(const char *s, size_t *out);
/* An option's number, strictly: all of s, in lo..hi ("12abc", "", "1e99"
 * and out-of-range values refused). 0 and *out set, or -1. */
int hx_cli_parse_long(const char *s, long lo, long hi, long *out);
int hx_cli_parse_double(const char *s, double lo, double hi, double *out);
/* The same, saying on stderr "hearth VERB: OPT: 'S' is not ..." when
 * refused: the option parsers' one-line check. */
int hx_cli_opt_long(const char *verb, const char *opt, const char *s, long lo, long hi,
                    long *out);
int hx_cli_opt_double(const char *verb, const char *opt, const char *s, double lo, double hi,
                      double *out);

/* The model a verb loads: opt (--model) when given, else cfg's "model"
 * (cfg may be NULL), else Hearth's own default model (hx_cli_default_model).
 * NULL when there is none (say CLI_NO_MODEL); borrowed from opt, cfg or buf
 * (n bytes, PATH_MAX + 64 is enough). */
#define CLI_NO_MODEL                                                               \
    "no model: Hearth's own default model (" CLI_DEFAULT_MODEL ") is not in this " \
    "directory or beside the program (make tiny-model builds it); pass one with "  \
    "--model FILE.gguf or set \"model\" in config.json"
struct hx_config;
const char *hx_cli_find_model(const char *opt, const struct hx_config *cfg, char *buf,
                              size_t n);
/* The consent question on the terminal (/dev/tty): 'y', 'n' or 'a' (always);
 * 'n' when there is none. The consent's ask function (hx_consent_new) of
 * ask, chat and tools call. */
int hx_cli_ask_consent(void *user, const char *tool, const char *args, const char *why);
/* The tools of reg, one a line: name and effect, with describe their
 * descriptions and any schema the model cannot use, and with x (NULL:
 * none) the paths each registered tool is granted; names and
 * descriptions come from outside and are escaped (hx_term_escape). */
struct hx_tools;
struct hx_extools;
void hx_cli_print_tools(const struct hx_tools *reg, const struct hx_extools *x, int describe);
/* The "-> name {arguments}" line of a call and the status line of its
 * result (an error or refusal cut to 300 bytes), escaped, on f. */
void hx_cli_show_call(FILE *f, const char *name, const char *args);
void hx_cli_show_result(FILE *f, const char *status, const char *detail);

/* verbs, one per file cli/cmd_<group>.c */
int hx_cmd_model(int argc, char **argv);
int hx_cmd_version(int argc, char **argv);
int hx_cmd_memory(int argc, char **argv); /* cmd_memory.c */
int hx_cmd_generate(int argc, char **argv); /* cmd_engine.c */
int hx_cmd_info(int argc, char **argv);
int hx_cmd_mkmodel(int argc, char **argv);
int hx_cmd_tokenize(int argc, char **argv); /* cmd_tokenize.c */
int hx_cmd_tools(int argc, char **argv); /* cmd_tools.c */
int hx_cmd_init(int argc, char **argv); /* cmd_init.c */
int hx_cmd_doctor(int argc, char **argv);
int hx_cmd_ask(int argc, char **argv); /* cmd_ask.c */
int hx_cmd_chat(int argc, char **argv);
int hx_cmd_feedback(int argc, char **argv);
int hx_cmd_quantize(int argc, char **argv); /* cmd_quantize.c */
int hx_cmd_train(int argc, char **argv); /* cmd_train.c */
int hx_cmd_lora(int argc, char **argv); /* cmd_lora.c */
int hx_cmd_nightly(int argc, char **argv); /* cmd_nightly.c */
/* The nightly run's options and run for verb ("nightly", or "lora train"
 * with force: no governor check); an exit code. */
int hx_cli_nightly_run(int argc, char **argv, const char *verb, int force);
/* Loads the adapters of --adapter FILE[:SCALE] options (n_specs) for m
 * into ads[0..*n) and scales (HX_ADAPTER_MAX entries each; the caller
 * frees each adapter); with no option and active != 0, the adapter
 * store's active set (a set that does not fit m is skipped with a
 * warning on stderr). Errors: an --adapter file's (e.g. another base). */
struct hx_model;
struct hx_adapter;
struct hx_err;
int hx_cli_load_adapters(const struct hx_model *m, const char *const *specs,
                         int n_specs, int active, struct hx_adapter **ads,
                         float *scales, int *n, struct hx_err *err);
/* The governor (cli_power.c): reads the device once and decides threads
 * and context cap under the policy in cfg (config.json's "governor"
 * object, NULL: defaults; "enabled": false turns it off). pw may be NULL.
 * Prints a malformed reading's problem on stderr. */
struct hx_power;
struct hx_gov_decision;
void hx_cli_governor(const struct cJSON *cfg, struct hx_gov_decision *d,
                     struct hx_power *pw);
/* The "power" and "governor" lines of `hearth info`. */
void hx_cli_print_power(FILE *f, const struct hx_power *pw,
                        const struct hx_gov_decision *d);
/* The model to load under decision d: path (the one chosen, may be NULL),
 * or cfg's governor.small_model when set, readable and d's level is at
 * least governor.small_model_level ("saving", the default, or
 * "critical"); a switch, or a small model that cannot be read, is said
 * on stderr. Borrowed from path or cfg. */
const char *hx_cli_gov_model(const struct hx_config *cfg,
                             const struct hx_gov_decision *d, const char *path);
/* The closed loop for a session under cfg (config.json's "governor":
 * the policy, and "ttft_ms", "decode_floor", "reread_slices" for its
 * targets); NULL when "enabled" is false or out of memory. Free with
 * hx_loop_free. */
struct hx_loop;
struct hx_loop *hx_cli_loop_new(const struct cJSON *cfg);
/* Its latency state is carried from session to session in the data
 * directory's governor-loop.json: hx_cli_loop_new reads it, this writes it
 * (a failure is said on stderr). */
void hx_cli_loop_save(struct hx_loop *k);
/* The loop's decisions after number *seen (updating it), each a line
 * "hearth: governor: ..." on f, and when trace is given an array
 * "governor" of them in it. */
void hx_cli_loop_report(FILE *f, struct hx_loop *k, int *seen, struct cJSON *trace);
/* The loop's decisions from number from on (the one in force then
 * first, where kept), as a JSON array of {"slice", "turn", "why",
 * "choice"} (caller frees; NULL: no loop, or out of memory). */
struct cJSON *hx_cli_loop_since(struct hx_loop *k, int from);
/* Lowers the calling thread's priority to config governor.nice (0..19;
 * default 10; 0 or the governor off: unchanged; never raises it), before
 * the inference threads are made: they inherit it, and the device's
 * interface keeps the CPU when both want it (bench-slices measures it). */
void hx_cli_lower_priority(const struct cJSON *cfg);
/* The "loop" line of `hearth info`: targets and the current choice. */
void hx_cli_print_loop(FILE *f, struct hx_loop *k);
int hx_cmd_datagen(int argc, char **argv); /* cmd_datagen.c */
int hx_cmd_vocab(int argc, char **argv); /* cmd_vocab.c */
int hx_cmd_serve(int argc, char **argv); /* cmd_serve.c */

#endif /* HX_CLI_H */
