/* base.h: what every Hearth module shares: result codes, per-handle error
 * messages, arenas, growable buffers, paths, time and terminal progress. */
#ifndef HX_BASE_H
#define HX_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- result codes: 0 is success; the list only grows ---- */
typedef enum hx_rc {
    HX_OK = 0,
    HX_ERR_NOMEM = 1,       /* an allocation failed */
    HX_ERR_IO = 2,          /* a read, write, open or mmap failed */
    HX_ERR_FORMAT = 3,      /* input is malformed (file, schema, message) */
    HX_ERR_INVALID = 4,     /* a caller passed an invalid argument */
    HX_ERR_UNSUPPORTED = 5, /* well-formed but not supported (type, arch) */
    HX_ERR_RANGE = 6,       /* a value or size is out of its allowed range */
    HX_ERR_FULL = 7,        /* a capacity (KV cache, memory cap) is reached */
    HX_ERR_CANCELLED = 8,   /* stopped by the caller's cancel check */
    HX_ERR_DENIED = 9,      /* refused by policy, sandbox or the user */
    HX_ERR_NOTFOUND = 10,   /* a named thing does not exist */
    HX_ERR_TIMEOUT = 11,    /* a time budget ran out */
    HX_ERR_STATE = 12,      /* the call is not valid in the current state */
    HX_ERR_INTERNAL = 13,   /* a bug: an invariant did not hold */
} hx_rc;

/* Static English name of a result code ("ok", "out of memory", ...). */
const char *hx_rc_str(int rc);

/* ---- per-handle error message ----
 * Handles embed an hx_err; functions that fail fill it and return the code.
 * The message is valid until the next failing call on the same handle. */
typedef struct hx_err {
    int rc;
    char msg[512];
} hx_err;

/* Formats the message into err (if not NULL) and returns rc, so that an
 * error path reads `return hx_err_set(&h->err, HX_ERR_FORMAT, "...", ...);`. */
int hx_err_set(hx_err *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hx_err_setv(hx_err *err, int rc, const char *fmt, va_list ap);
/* Copies src's message into dst, prefixed with "prefix: " if prefix != NULL. */
int hx_err_wrap(hx_err *dst, const hx_err *src, const char *prefix);
void hx_err_clear(hx_err *err);

/* Always-on assertion for states that must never happen, even in release
 * builds; prints the location and aborts. Use for invariants only, never
 * for anything input can cause. */
#define HX_CHECK(cond)                                                       \
    do {                                                                     \
        if (!(cond)) hx_check_failed(__FILE__, __LINE__, #cond);             \
    } while (0)
void hx_check_failed(const char *file, int line, const char *what)
    __attribute__((noreturn));

/* ---- allocation helpers ----
 * Every allocation of Hearth's own code goes through these (and the
 * buffers and arenas below), so that a test can make any one of them fail
 * (hx_fault_alloc). Free with free(). */
void *hx_malloc(size_t size);
void *hx_realloc(void *p, size_t size); /* on failure p is left as it was */
/* calloc/malloc that return NULL on overflow of n*size. */
void *hx_calloc(size_t n, size_t size);
void *hx_malloc_array(size_t n, size_t size);
/* Aligned allocation (align a power of two >= sizeof(void*)); free with free(). */
void *hx_aligned_alloc(size_t align, size_t size);
/* n * size bytes (NULL on overflow), 64-byte aligned; from 2 MiB on, 2 MiB
 * aligned and advised as huge pages (MADV_HUGEPAGE: the kernel's
 * transparent huge pages in their "madvise" mode), so big arrays walked
 * in strides (a KV cache, training activations) take fewer TLB misses.
 * Contents undefined. Free with free(). */
void *hx_huge_alloc(size_t n, size_t size);
/* strdup that returns NULL on NULL input. Free with free(). */
char *hx_strdup(const char *s);
char *hx_strndup(const char *s, size_t n);
/* The first character of s that drives a terminal: a C0 control (but
 * tab, newline and carriage return when allow_space), DEL, or a C1
 * control (U+0080..U+009F, as UTF-8); NULL if there is none. */
const char *hx_find_control(const char *s, int allow_space);
/* Allocation failure injection, for tests (SQLite's discipline: every
 * failure a clean error, no leak, no crash): from the call on, allocation
 * number n (1: the next one) fails, and with sticky every later one too;
 * n <= 0 turns failures off. hx_fault_alloc_count: allocations since the
 * last call (a run that made fewer than n saw no failure). Process-wide;
 * off unless a test turns it on. */
void hx_fault_alloc(long n, int sticky);
long hx_fault_alloc_count(void);
/* Overflow-checked size arithmetic: return 0 and set *out, or -1 on overflow. */
int hx_mul_size(size_t a, size_t b, size_t *out);
int hx_add_size(size_t a, size_t b, size_t *out);

/* ---- arena: bump allocation for per-turn scratch; the error path is
 * "drop the arena". Memory is 16-byte aligned and lives until reset/free. ---- */
typedef struct hx_arena hx_arena;
hx_arena *hx_arena_new(size_t chunk_size); /* chunk_size 0 = 64 KiB */
void hx_arena_free(hx_arena *a);           /* NULL is a no-op */
void *hx_arena_alloc(hx_arena *a, size_t size);   /* NULL on OOM */
void *hx_arena_calloc(hx_arena *a, size_t n, size_t size);
char *hx_arena_strdup(hx_arena *a, const char *s);
char *hx_arena_strndup(hx_arena *a, const char *s, size_t n);
void hx_arena_reset(hx_arena *a);          /* keeps the first chunk */
size_t hx_arena_used(const hx_arena *a);

/* ---- growable byte buffer, always NUL-terminated ---- */
typedef struct hx_buf {
    char *data; /* owned; NULL until the first append */
    size_t len;
    size_t cap;
    int oom;    /* set once an append failed; later appends are no-ops */
} hx_buf;
void hx_buf_init(hx_buf *b);
void hx_buf_free(hx_buf *b);
int hx_buf_reserve(hx_buf *b, size_t extra);
int hx_buf_append(hx_buf *b, const void *p, size_t n);
int hx_buf_puts(hx_buf *b, const char *s);
int hx_buf_putc(hx_buf *b, char c);
int hx_buf_printf(hx_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Takes ownership of the data (caller frees); the buffer is left empty. */
char *hx_buf_steal(hx_buf *b, size_t *len);

/* ---- folding text for search (base/fold.c) ----
 * The one folding every search filter uses, so that each finds what the
 * others find: case and accents removed for Latin (ASCII, Latin-1,
 * Extended-A, -B, Additional: "Ü" u, "ß" ss, "Æ" ae, "ø" o), Greek and
 * Cyrillic; combining marks dropped; fullwidth ASCII made ASCII; other
 * scripts (Japanese, ...) and invalid bytes copied unchanged. The full
 * list is at the top of base/fold.c. */
/* Appends the folding of n bytes of s to out; HX_OK or HX_ERR_NOMEM. */
int hx_fold_append(hx_buf *out, const char *s, size_t n);
/* The folding of s (NULL: "") as a malloc'd string (caller frees); NULL
 * when out of memory. */
char *hx_fold(const char *s);
/* Whether needle, folded, is a substring of hay, folded; an empty or NULL
 * needle is found anywhere, a NULL hay holds nothing else. */
int hx_fold_contains(const char *hay, const char *needle);
/* Whether the folded word w (n bytes) is a function word ("the", "der",
 * "les", "para", ...) that says nothing about what is searched for. */
int hx_fold_stop_word(const char *w, size_t n);
/* Whether cp belongs to a script written without spaces between words
 * (kana, CJK ideographs, Hangul). */
int hx_fold_spaceless(int32_t cp);
/* Calls emit with the pieces of the folded word w (n bytes): a run of a
 * spaceless script as its overlapping character pairs ("議事録" 議事
 * 事録; one character alone as itself), the rest of w as it is. Stops
 * at emit's first nonzero return, which it returns; else 0. */
int hx_fold_pieces(const char *w, size_t n, int (*emit)(void *u, const char *p, size_t n),
                   void *u);
/* The search terms of text: its words (split at spaces and punctuation)
 * folded, each once, function words left out (and appended to ignored
 * when not NULL) unless there is nothing else, a run of a spaceless
 * script as its overlapping character pairs (as the "hx_fold" tokenizer
 * indexes it); at most HX_FOLD_MAX_TERMS. Each term is appended to terms
 * with its NUL. Returns how many, or -1 when out of memory. */
#define HX_FOLD_MAX_TERMS 16
int hx_fold_terms(const char *text, hx_buf *terms, hx_buf *ignored);
/* The words of a filter (a sender, a subject, a title, a file name): text
 * folded, split at white space, the punctuation around each word left
 * out ("(Lyon)," lyon; "1:1" and "bob@x.org" stay whole), each once,
 * function words left out when drop_stop unless there is nothing else;
 * appended to words with their NULs. Returns how many, -1 when out of
 * memory. */
int hx_fold_words(const char *text, int drop_stop, hx_buf *words);
/* Whether the folded text holds every term of terms (as hx_fold_terms or
 * hx_fold_words wrote them) as a substring; an empty list is in any text. */
int hx_fold_has_terms(const char *folded, const hx_buf *terms);
/* How many of the terms the folded text holds, as hx_fold_has_terms
 * reads them; how many terms there are. */
int hx_fold_count_terms(const char *folded, const hx_buf *terms);
int hx_fold_n_terms(const hx_buf *terms);
/* Registers on an open SQLite connection (base/fold_sql.c): the SQL
 * function hx_fold(text), and the FTS5 tokenizer "hx_fold" (unicode61
 * with remove_diacritics 2, its arguments passed on, then each token
 * folded as above), so that an index and its queries fold as the filters
 * do. A connection that reads or writes a table using the tokenizer must
 * register it first. HX_OK, or HX_ERR_IO with err set. */
struct sqlite3;
int hx_fold_sql_register(struct sqlite3 *db, hx_err *err);

/* ---- text from outside, shown to a person ----
 * Appends n bytes of s to out with everything a terminal would act on, or
 * that would make the text look other than it is, made visible: C0
 * control bytes (ESC, CR, BS, ...) and DEL as \xHH, the C1 controls
 * U+0080..U+009F and the bidirectional controls (U+200E, U+200F, U+061C,
 * U+202A..U+202E, U+2066..U+2069) as \uHHHH, and bytes that are not
 * valid UTF-8 as \xHH. Line feeds and tabs are kept when keep_lines,
 * else written \n and \t (one line of a list stays one line). Used
 * wherever Hearth prints names, descriptions, arguments, errors or
 * memories as human text; JSON output is left to the JSON printer.
 * Returns HX_OK or HX_ERR_NOMEM (out->oom). */
int hx_term_escape(hx_buf *out, const char *s, size_t n, int keep_lines);
/* hx_term_escape of the C string s (NULL: "") written to f. */
void hx_term_fputs(FILE *f, const char *s, int keep_lines);
/* Where text streamed in pieces may be cut: upto moved back to the start
 * of the UTF-8 code point of s it falls inside, but not before from. A
 * piece is escaped (or put in a JSON string) on its own, and a code point
 * split across two shows as "\xc3" "\xa9". */
size_t hx_utf8_cut(const char *s, size_t upto, size_t from);

/* ---- files ---- */
/* Reads a whole file into a malloc'd NUL-terminated buffer (caller frees).
 * Fails with HX_ERR_RANGE if larger than max_size (0 = no limit). */
int hx_read_file(const char *path, size_t max_size, char **out, size_t *len,
                 hx_err *err);
/* Reads all of an open descriptor the same way (name labels errors). */
int hx_read_fd(int fd, const char *name, size_t max_size, char **out,
               size_t *len, hx_err *err);
/* Atomic replace of a file in Hearth's own folders (config, caches,
 * adapters): writes to a new path.tmp.PID (never through a file or link
 * planted at that name), fsyncs, renames over path (a link at path is
 * replaced, not followed) and fsyncs the directory. On failure the old
 * file is untouched; a SIGINT/SIGTERM/SIGHUP meanwhile removes the
 * temporary (see hx_out). Files the user names go through hx_out. */
int hx_write_file_atomic(const char *path, const void *data, size_t len,
                         hx_err *err);
/* The same with path relative to the directory descriptor dirfd (or
 * AT_FDCWD); a link at path is replaced, never followed. */
int hx_write_file_atomic_at(int dirfd, const char *path, const void *data,
                            size_t len, hx_err *err);
/* mkdir -p with mode 0700 for new directories. */
int hx_mkdirs(const char *path, hx_err *err);
/* A path as a user writes it, made absolute: "~" and "~/x" are under
 * $HOME, a relative path is under base_dir (NULL: left relative). A
 * malloc'd string (caller frees), NULL when out of memory. */
char *hx_path_expand(const char *p, const char *base_dir);

/* ---- output files the user names (base/out.c) ----
 * Every file written at a path the user gave (-o FILE, OUT.gguf, --svg)
 * goes through hx_out, so that writing an output never destroys what the
 * path names:
 *   "-", /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: written
 *       through that open descriptor (its offset and append mode kept);
 *   a device or a FIFO (/dev/null): opened and written through, never
 *       replaced;
 *   a new path or a regular file: written to PATH.tmp.PID beside it and,
 *       on commit, fsynced and renamed over it (until then the old file is
 *       intact; its mode and, under root, its owner are kept);
 *   a symbolic link: followed to the file it names, which is then written
 *       as above; the link itself stays. A link (or a file to replace) in a
 *       sticky world-writable folder such as /tmp that belongs to another
 *       user than us or the folder's owner is refused (HX_ERR_DENIED), as
 *       the kernel's protected_symlinks / protected_regular do for `>`;
 *   the same file (device and inode) as one of the inputs: refused
 *       (HX_ERR_INVALID), as are folders and sockets; a file we may not
 *       write (read-only) is refused (HX_ERR_DENIED), not replaced.
 * A missing folder is not created. Until commit or abort the temporary
 * file is on a list that a handler of SIGINT, SIGTERM and SIGHUP removes
 * before the process dies of the signal (a shell then reports 130 for
 * Ctrl-C); the handler is installed only where the action is the default,
 * so a program that handles a signal itself aborts its outputs itself.
 * The struct lives on the caller's stack; one thread uses it. */
#define HX_PATH_MAX 4096
typedef struct hx_out {
    int fd;           /* the descriptor written (owned), -1 once closed */
    FILE *f;          /* hx_out_stdio's stream (owns fd), or NULL */
    int slot;         /* the signal list's entry, -1 when written through */
    uint64_t written; /* bytes written through hx_out_write */
    char path[HX_PATH_MAX]; /* the file written, links followed */
    char tmp[HX_PATH_MAX];  /* the temporary, "" when written through */
} hx_out;
/* Opens path for writing. inputs: the files the run reads, NULL-terminated
 * (or NULL); mode: the permission bits of a new file, before the umask
 * (0666 for a model, 0600 for private data). Errors as above, and
 * HX_ERR_IO when the folder is missing or not writable; nothing is
 * created then. Every successful open ends in hx_out_commit or abort. */
int hx_out_open(hx_out *o, const char *path, const char *const *inputs, unsigned mode,
                hx_err *err);
/* Writes n bytes (counted in o->written). */
int hx_out_write(hx_out *o, const void *p, size_t n, hx_err *err);
/* A stdio stream over the output (owned by o; NULL when out of memory):
 * for writers that take a FILE *. Commit flushes and closes it. */
FILE *hx_out_stdio(hx_out *o);
/* Makes the output final: a temporary is fsynced and renamed over the
 * path, its folder fsynced; a descriptor is closed. On failure the
 * temporary is removed and the old file is left as it was. */
int hx_out_commit(hx_out *o, hx_err *err);
/* Closes, removes the temporary; the path is left as it was. */
void hx_out_abort(hx_out *o);
/* hx_out_commit when rc is HX_OK, else hx_out_abort; the resulting code. */
int hx_out_end(hx_out *o, int rc, hx_err *err);
/* The refusals of hx_out_open without creating anything: for a command
 * line to check its outputs before long work. */
int hx_out_check(const char *path, const char *const *inputs, hx_err *err);
/* What writing path would write: HX_OUT_FILE a new or regular file
 * (atomically); HX_OUT_STDOUT standard output ("-", /dev/stdout, or the
 * file or device fd 1 is: a verb then prints its report on stderr);
 * HX_OUT_DEVICE another descriptor, a device or a FIFO; 0 when refused. */
enum { HX_OUT_FILE = 1, HX_OUT_STDOUT = 2, HX_OUT_DEVICE = 3 };
int hx_out_kind(const char *path);
/* hx_out_open, one write, hx_out_end. */
int hx_out_write_file(const char *path, const char *const *inputs, const void *data,
                      size_t len, unsigned mode, hx_err *err);

/* ---- paths (XDG; HEARTH_HOME overrides all for tests) ----
 * Each writes into buf (size n) and returns the length, or -1 if too small.
 *   config: $HEARTH_HOME/config or $XDG_CONFIG_HOME/hearth or ~/.config/hearth
 *   data:   $HEARTH_HOME/data   or $XDG_DATA_HOME/hearth   or ~/.local/share/hearth
 *   cache:  $HEARTH_HOME/cache  or $XDG_CACHE_HOME/hearth  or ~/.cache/hearth */
int hx_path_config(char *buf, size_t n);
int hx_path_data(char *buf, size_t n);
int hx_path_cache(char *buf, size_t n);
/* Whether path is dir or lies beneath it, comparing names only (both
 * absolute, without "//", "." or ".." and without a trailing '/'):
 * "/a/b" is within "/a" and "/", "/ab" is not within "/a".
 * Async-signal-safe. */
int hx_path_within(const char *path, const char *dir);
/* Where the tests and benchmarks find ../shared/data: $HEARTH_SHARED_DATA,
 * default "../shared/data" relative to the project root. Static string. */
const char *hx_shared_data_dir(void);

/* ---- time ---- */
/* Monotonic seconds, for measuring. */
double hx_time_mono(void);
/* Wall-clock "now" as Unix seconds and the UTC offset in seconds that goes
 * with it. HEARTH_NOW (ISO 8601 with offset, e.g. 2026-12-01T09:00:00+01:00)
 * replaces the clock so that runs can be replayed. */
int64_t hx_now(int *utc_offset_seconds);
/* n bytes for a name that must not repeat (base/unique.c): random; under
 * a pinned clock (HEARTH_NOW set) a function of HEARTH_NOW, salt and k
 * instead, so that a replayed run (tests, sample worlds, the evaluation)
 * sees the same names: the caller tries k = 0, 1, ... until the name is
 * free where it goes. hx_unique_pinned: 1 under a pinned clock. */
void hx_unique_bytes(const void *salt, size_t salt_n, unsigned k, void *buf, size_t n);
int hx_unique_pinned(void);

/* Days since 1970-01-01 of a proleptic Gregorian date, and back
 * (month 1..12, day 1..31). */
int64_t hx_days_from_civil(int64_t y, int m, int d);
void hx_civil_from_days(int64_t days, int *y, int *m, int *d);

/* ---- progress on a terminal ----
 * When stderr is a terminal, redraws "label  done/total  pct  ETA" (with
 * total <= 0, unknown: "label  done  elapsed", no percentage) at most 4
 * times a second, the first time a quarter second in, so quick work draws
 * nothing; finish ends a drawn line with the time taken. On a pipe or a
 * file: nothing while working, and one final line for work that lasted
 * 2 seconds or more. total may be changed between updates. */
typedef struct hx_progress {
    const char *label;
    double total;
    double done;
    double t_start;
    double t_last;
    int tty;
    int drawn;
} hx_progress;
void hx_progress_start(hx_progress *p, const char *label, double total);
void hx_progress_update(hx_progress *p, double done, const char *extra);
void hx_progress_finish(hx_progress *p);

/* ---- logging: to stderr; HEARTH_LOG=debug shows debug lines ---- */
void hx_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hx_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- half precision conversions (IEEE fp16 and bfloat16) ---- */
float hx_fp16_to_fp32(uint16_t h);
uint16_t hx_fp32_to_fp16(float f);
float hx_bf16_to_fp32(uint16_t h);
uint16_t hx_fp32_to_bf16(float f);

/* ---- non-cryptographic hashing and random numbers (base/hash.c) ---- */
/* FNV-1a 64's offset basis, and that number with its last digit lost
 * (1469598103934665603), which the names of existing mail indexes and the
 * ids made under a pinned clock were computed from: kept for them so that
 * they stay the same. */
#define HX_FNV1A_BASIS 0xcbf29ce484222325ull
#define HX_FNV1A_BASIS_SHORT 1469598103934665603ull
/* FNV-1a 64 of the n bytes at p, from h (a basis, or a running hash to
 * continue). Not for input an attacker picks to collide (hash tables of
 * untrusted keys mix a random seed in). */
uint64_t hx_fnv1a(uint64_t h, const void *p, size_t n);
/* splitmix64: adds the golden-ratio step to *state and returns its mix; a
 * small generator for reproducible streams (worlds, seeds, random weights). */
uint64_t hx_splitmix64(uint64_t *state);

/* ---- SHA-256 (FIPS 180-4), for file identities and integrity ---- */
typedef struct hx_sha256 {
    uint32_t h[8];
    uint64_t len;       /* bytes so far */
    unsigned char buf[64];
    size_t n;           /* bytes in buf */
} hx_sha256;
void hx_sha256_init(hx_sha256 *s);
void hx_sha256_update(hx_sha256 *s, const void *data, size_t n);
void hx_sha256_final(hx_sha256 *s, unsigned char out[32]);
/* Lower-case hex of a digest into out (65 bytes). */
void hx_sha256_hex(const unsigned char d[32], char out[65]);
/* Hashes a whole file (read in chunks; progress on a tty with label when
 * label != NULL). */
int hx_sha256_file(const char *path, const char *label, char out_hex[65],
                   hx_err *err);

#endif /* HX_BASE_H */
