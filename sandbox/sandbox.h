/* sandbox.h: the sandbox module's public API: running tool processes
 * confined by everything the kernel offers (a mount namespace holding only
 * the listed paths, Landlock, PID and network namespaces, seccomp-bpf,
 * no_new_privs, a session without a terminal, rlimits, a wall-clock
 * timeout and an output cap), and the permission policy that decides
 * whether a tool call may run. */
#ifndef HX_SANDBOX_H
#define HX_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* ---- confinement ---- */

/* What was applied to a child, as bits of hx_sandbox_result.applied. */
enum {
    HX_SB_LANDLOCK = 1 << 0,   /* file system confined to the listed paths */
    HX_SB_LANDLOCK_NET = 1 << 1, /* Landlock TCP bind/connect denied (ABI >= 4) */
    HX_SB_NETNS = 1 << 2,      /* a new, empty network namespace */
    HX_SB_PIDNS = 1 << 3,      /* a new PID namespace: killing it kills all */
    HX_SB_USERNS = 1 << 4,     /* a new user namespace (unprivileged caller) */
    HX_SB_SECCOMP = 1 << 5,    /* the seccomp-bpf deny list */
    HX_SB_NO_NEW_PRIVS = 1 << 6,
    HX_SB_RLIMITS = 1 << 7,
    HX_SB_DROPPED_ROOT = 1 << 8, /* ran as nobody because Hearth runs as root */
    HX_SB_MNTNS = 1 << 9,      /* a mount namespace: only the listed paths,
                                  the command file and the system's loader
                                  and libraries exist */
    HX_SB_MEMLIMIT = 1 << 10,  /* RLIMIT_AS (max_memory) */
};

#define HX_SANDBOX_MAX_PATHS 32

/* The paths a child gets: each listed path is reached without following a
 * symbolic link (checked in the parent, checked again in the child: the
 * same file or the spawn fails), is a folder or a regular file, lies
 * outside /dev, /proc and /sys, and is not inside a write path (where the
 * tool could replace it). The command file (argv[0], resolved once through
 * PATH and links) is granted alone, to read and execute, not its folder;
 * it may not lie inside a write path. Besides these the child reads the
 * system's loader, libraries and shells (/usr, /bin, /lib, ...) and the
 * null and random devices, and its own processes in /proc. */
typedef struct hx_sandbox_params {
    const char *const *argv;   /* argv[0] is a path or a name found in PATH */
    const char *const *env;    /* NULL-terminated "K=V" list added to the
                                  minimal environment (PATH, HOME, LANG) */
    const char *cwd;           /* NULL: the first write path, else "/" */
    const char *read_paths[HX_SANDBOX_MAX_PATHS];  /* readable trees */
    int n_read;
    const char *write_paths[HX_SANDBOX_MAX_PATHS]; /* readable and writable */
    int n_write;
    int allow_network;         /* 0: no network at all (default) */
    double timeout_s;          /* wall clock; the whole process tree is killed */
    double cpu_s;              /* RLIMIT_CPU */
    size_t max_memory;         /* RLIMIT_AS, bytes; 0: none */
    size_t max_file_size;      /* RLIMIT_FSIZE, bytes */
    int max_open_files;        /* RLIMIT_NOFILE */
    int max_procs;             /* RLIMIT_NPROC (in its own user namespace) */
    size_t max_output;         /* stdout bytes kept; more kills the child */
    size_t max_stderr;         /* stderr bytes kept (the rest is dropped) */
} hx_sandbox_params;

/* Defaults: no network, 10 s wall, 10 s CPU, 1 GiB address space, 64 MiB
 * files, 64 open files, 32 processes, 4 MiB of output, 64 KiB of stderr. */
hx_sandbox_params hx_sandbox_default_params(void);

typedef struct hx_sandbox_result {
    int exited;             /* 1: exited normally with exit_code */
    int exit_code;
    int term_signal;        /* signal that ended it, 0 if none */
    int timed_out;          /* killed by the wall-clock timeout */
    int output_exceeded;    /* killed for writing more than max_output */
    char *out;              /* stdout (owned; NUL-terminated) */
    size_t out_len;
    char *err;              /* stderr, capped (owned; NUL-terminated) */
    size_t err_len;
    unsigned applied;       /* HX_SB_* bits */
    double wall_s;
} hx_sandbox_result;

/* Runs argv confined, feeding input on stdin, and waits for it (or kills
 * it: timeout, output cap). Returns HX_OK when the process ran, whatever
 * its exit (see r); an error only if it could not be started. Free r's
 * buffers with hx_sandbox_result_free. */
int hx_sandbox_run(const hx_sandbox_params *p, const void *input,
                   size_t input_len, hx_sandbox_result *r, hx_err *err);
void hx_sandbox_result_free(hx_sandbox_result *r);

/* Checks p's command and paths as a spawn would (see above) without
 * starting anything; err names the path at fault. */
int hx_sandbox_check(const hx_sandbox_params *p, hx_err *err);
/* Appends to out what a child of p may touch: "runs EXE; reads A, B;
 * writes C". With p NULL: what every child reads besides its own paths. */
void hx_sandbox_describe_grants(const hx_sandbox_params *p, hx_buf *out);

/* A long-lived confined child speaking over pipes (MCP servers). */
typedef struct hx_sandbox_proc hx_sandbox_proc;
int hx_sandbox_spawn(const hx_sandbox_params *p, hx_sandbox_proc **out,
                     hx_err *err);
/* Writes all of data to the child's stdin within timeout_ms. */
int hx_sandbox_proc_write(hx_sandbox_proc *c, const void *data, size_t len,
                          int timeout_ms, hx_err *err);
/* Reads one line (without the newline) into line; HX_ERR_TIMEOUT if none
 * within timeout_ms, HX_ERR_RANGE if longer than max, HX_ERR_IO at EOF. */
int hx_sandbox_proc_read_line(hx_sandbox_proc *c, hx_buf *line, size_t max,
                              int timeout_ms, hx_err *err);
/* Kills the child's whole tree (if running), reaps it and frees c. */
void hx_sandbox_proc_free(hx_sandbox_proc *c);
unsigned hx_sandbox_proc_applied(const hx_sandbox_proc *c);
/* The child's stderr so far (capped); valid until the next call on c. */
const char *hx_sandbox_proc_stderr(hx_sandbox_proc *c);

/* Describes the applied bits ("landlock, landlock-net, netns, pidns,
 * mntns, seccomp, no_new_privs, rlimits, memory-limit") into buf;
 * returns buf. */
const char *hx_sandbox_describe(unsigned applied, char *buf, size_t n);
/* What this kernel and process can apply (namespaces probed once with a
 * child that exits at once, cached). */
unsigned hx_sandbox_available(void);
/* The Landlock ABI version, or 0 if Landlock is unavailable. */
int hx_sandbox_landlock_abi(void);

/* Installs a seccomp filter on every thread of the calling process (used
 * by Hearth to prove it opens no network socket itself): after it,
 * socket() of every family fails with EACCES, io_uring with EPERM,
 * socketpair() makes stream and seqpacket pairs only, TIOCSTI and
 * TIOCLINUX fail, and so do ptrace (but in sanitizer builds), process_vm_*,
 * modules, keys, bpf and the rest of the tools' deny list; what the sandbox
 * needs to start a tool (namespaces, mounts) stays allowed. Irreversible.
 * A no-op when HEARTH_SANDBOX_DISABLE lists "seccomp" (qemu-user has no
 * seccomp). */
int hx_sandbox_confine_self_no_network(hx_err *err);
/* Whether HEARTH_SANDBOX_DISABLE (a comma list of "landlock",
 * "namespaces", "seccomp", "memory") switches mechanism what off, so a
 * caller can say so to the user. */
int hx_sandbox_mechanism_disabled(const char *what);

/* ---- permission policy ----
 * Each tool has an effect class (0 read, 1 write, 2 send: the numbers of
 * hx_effect in tools.h). The policy maps tools (exact names or "prefix.*")
 * and classes to allow / ask / deny; default: read allow, write and send
 * ask. The taint rule: once content from outside the user (a mail, a
 * calendar event someone else organised, a file or its name, a registered
 * tool's result or error, a recalled memory that is not the user's own)
 * is in the conversation, a send always asks, whatever the policy or
 * --yes says (deny stays deny); so does a tool that keeps what it is
 * given for later conversations (memory.remember), which would otherwise
 * carry the taint past the conversation's end. */
typedef enum hx_decision {
    HX_ALLOW = 0,
    HX_ASK = 1,
    HX_DENY = 2,
} hx_decision;

typedef struct hx_policy hx_policy;

/* Builds a policy from the "policy" object of config.json (NULL: the
 * defaults): {"read": "allow", "write": "ask", "send": "ask",
 *  "tools": {"mail.send": "deny", "calendar.*": "allow"}}.
 * A bad value is HX_ERR_FORMAT naming it. Free with hx_policy_free. */
int hx_policy_new(const char *policy_json, hx_policy **out, hx_err *err);
void hx_policy_free(hx_policy *p);

typedef struct hx_policy_verdict {
    hx_decision decision;
    int forced_by_taint;   /* the taint rule turned allow into ask */
    char rule[96];         /* what decided: "tool mail.send", "class send" */
} hx_policy_verdict;
/* The taint argument of hx_policy_decide: bits. */
enum {
    HX_TAINTED = 1,     /* untrusted content is in the conversation */
    HX_TAINT_KEEPS = 2, /* the tool keeps what it is given for later
                           conversations: the taint rule applies to it as
                           to a send */
};
hx_policy_verdict hx_policy_decide(const hx_policy *p, const char *tool, int effect,
                                   int taint);

/* How a question is answered when the policy says ask. */
typedef struct hx_consent {
    int yes;                  /* --yes: answers ordinary questions yes */
    int no;                   /* --no: answers every question no */
    int allow_tainted_send;   /* the explicit option for the taint rule */
    int interactive;          /* a terminal to ask on */
    /* asks the user; returns 'y', 'n' or 'a' (always: allow for the rest
     * of the session); NULL where there is no terminal */
    int (*ask)(void *user, const char *tool, const char *args_json,
               const char *why);
    void *user;
} hx_consent;

/* A consent (caller frees with free()); ask may be NULL (no terminal to
 * ask on). NULL when out of memory. */
hx_consent *hx_consent_new(int yes, int no, int allow_tainted_send,
                           int (*ask)(void *user, const char *tool,
                                      const char *args_json, const char *why),
                           void *user);

/* Resolves a verdict into allowed (1) or refused (0); *by says who
 * decided ("policy", "user", "--yes", "--no", "taint rule", "no terminal",
 * "--allow-tainted-send"). "always" answers are remembered in p for the
 * tool (not for taint-forced questions). */
int hx_policy_resolve(hx_policy *p, const hx_policy_verdict *v, const char *tool,
                      const char *args_json, const hx_consent *c,
                      const char **by);

/* ---- audit log ----
 * One JSON object per line, appended and flushed to disk per record:
 * {"time","tool","effect","args","decision","by","status","detail",
 *  "sandbox"}. */
typedef struct hx_audit hx_audit;
/* Opens (creating) the log at path (NULL: data dir/audit.jsonl). */
int hx_audit_open(const char *path, hx_audit **out, hx_err *err);
void hx_audit_close(hx_audit *a);
typedef struct hx_audit_rec {
    const char *tool, *effect, *args_json, *decision, *by;
    const char *status;  /* "ok", "error", "refused", "timeout", "killed" */
    const char *detail;  /* error message, signal, what was stopped */
    unsigned sandbox;    /* HX_SB_* applied, 0 for in-process tools */
} hx_audit_rec;
int hx_audit_write(hx_audit *a, const hx_audit_rec *r, hx_err *err);

#endif /* HX_SANDBOX_H */
