/* gint.h: internals of engine/grammar: hash-consed derivative regexes with
 * call leaves (rx), the stack/config matcher and the compiler's helpers. */
#ifndef HX_GRAMMAR_INT_H
#define HX_GRAMMAR_INT_H

#include <stdint.h>
#include <stdlib.h>

#include "base/base.h"
#include "engine/grammar/grammar.h"

/* Grows *p (an array of elt-byte items with capacity *cap) to hold at least
 * need items, doubling from 64; 0, or -1 (out of memory, *p unchanged). */
static inline int gint_grow(void **p, uint32_t *cap, uint32_t need, size_t elt)
{
    if (need <= *cap) return 0;
    uint32_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = hx_realloc(*p, (size_t)nc * elt);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* ---- regex nodes: an id indexes rx->nodes; ids 0 and 1 are fixed ---- */
enum {
    RX_EMPTY = 0, /* the empty language */
    RX_EPS,       /* the empty string */
    RX_CLASS,     /* one byte from a 256-bit set (a = class index) */
    RX_CALL,      /* a nonterminal (a = rule index) */
    RX_CAT,       /* a then b (b never a CAT's left operand after simplify) */
    RX_OR,        /* kids[a .. a+b) sorted, unique */
    RX_AND,       /* kids[a .. a+b) sorted, unique */
    RX_NOT,       /* complement of a (byte strings) */
    RX_REP,       /* a repeated min..max times (max RX_INF = unbounded) */
};
#define RX_NONE 0u
#define RX_NIL 1u
#define RX_INF 0xffffffffu
#define RX_DEAD UINT32_MAX
enum { RXI_BND_KNOWN = 1, RXI_BND = 2, RXI_FIN_KNOWN = 4, RXI_FIN = 8, RXI_UNS_KNOWN = 16, RXI_UNS = 32 };

typedef struct rx_node {
    uint8_t kind;
    uint8_t nullable;
    uint8_t has_call;   /* a CALL appears somewhere below */
    uint8_t calls_done; /* first-calls computed */
    uint8_t info;       /* RXI_* lazily computed facts */
    uint32_t a, b;
    uint32_t min, max;
    uint32_t hash;
    uint32_t calls_off, n_calls; /* (rule, continuation) pairs in pool */
    int32_t tab;                 /* index of a 256-entry step table, -1 */
} rx_node;

typedef struct hx_rx {
    rx_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *kids; /* OR/AND children */
    uint32_t n_kids, cap_kids;
    uint32_t *cls; /* 8 words per class */
    uint32_t n_cls, cap_cls;
    uint32_t *htab; /* node intern table (ids+1, 0 empty) */
    uint32_t hcap;
    uint32_t *ctab; /* class intern table */
    uint32_t ccap;
    uint64_t *dkey; /* derivative cache: key = node << 8 | byte, +1 */
    uint32_t *dval;
    uint32_t dcap, dn;
    uint32_t *calls; /* pairs (rule, continuation) */
    uint32_t n_calls, cap_calls;
    uint32_t *rules; /* rule bodies */
    uint32_t n_rules, cap_rules;
    int32_t *tabs;   /* step tables, 256 entries each, -1 unknown */
    uint32_t n_tabs, cap_tabs;
    uint32_t *tab_owner; /* node of each table */
    uint32_t cap_owner;
    uint32_t any_char;  /* cached hx_rx_enc_any, 0 until built */
    uint32_t max_nodes; /* budget; exceeding it sets oom-like failure */
    int failed;         /* budget exceeded or out of memory */
    int no_nul;         /* encoded strings never hold U+0000 (generation) */
} hx_rx;

int hx_rx_init(hx_rx *rx);
void hx_rx_free(hx_rx *rx);
uint32_t hx_rx_class(hx_rx *rx, const uint32_t bits[8]);
uint32_t hx_rx_byte(hx_rx *rx, int b);
uint32_t hx_rx_range(hx_rx *rx, int lo, int hi);
uint32_t hx_rx_lit(hx_rx *rx, const char *s, size_t n);
uint32_t hx_rx_call(hx_rx *rx, uint32_t rule);
uint32_t hx_rx_cat(hx_rx *rx, uint32_t a, uint32_t b);
uint32_t hx_rx_cat3(hx_rx *rx, uint32_t a, uint32_t b, uint32_t c);
uint32_t hx_rx_or(hx_rx *rx, uint32_t a, uint32_t b);
uint32_t hx_rx_orv(hx_rx *rx, const uint32_t *v, uint32_t n);
uint32_t hx_rx_and(hx_rx *rx, uint32_t a, uint32_t b);
uint32_t hx_rx_not(hx_rx *rx, uint32_t a);
uint32_t hx_rx_rep(hx_rx *rx, uint32_t a, uint32_t min, uint32_t max);
uint32_t hx_rx_opt(hx_rx *rx, uint32_t a);
/* Derivative by a byte (cached). */
uint32_t hx_rx_deriv(hx_rx *rx, uint32_t r, int byte);
/* The node's 256-entry step table index (allocated on first use), -1 on
 * OOM; entries are -1 until computed. */
int32_t hx_rx_tab(hx_rx *rx, uint32_t r);
static inline uint32_t rx_tab_owner(const hx_rx *rx, int32_t t)
{
    return rx->tab_owner[t];
}
/* Same, through the node's 256-entry table (for hot walks). */
uint32_t hx_rx_step(hx_rx *rx, uint32_t r, int byte);
/* The (rule, continuation) pairs that can start r; *n set. */
const uint32_t *hx_rx_first_calls(hx_rx *rx, uint32_t r, uint32_t *n);
uint32_t hx_rx_new_rule(hx_rx *rx);
void hx_rx_set_rule(hx_rx *rx, uint32_t rule, uint32_t body);
/* 1 if the language of r (no calls) is provably empty, 0 if not empty,
 * -1 if the search budget ran out. */
int hx_rx_is_empty(hx_rx *rx, uint32_t r, uint32_t budget);
/* 1 if a and b provably share no string (calls over-approximated). */
int hx_rx_disjoint(hx_rx *rx, uint32_t a, uint32_t b);
/* Schema compiler (schema.c); cJSON is forward-declared in grammar.h. */
int hx_schema_compile_rx(hx_rx *rx, const struct cJSON *schema,
                         const hx_grammar_params *p, uint32_t *out,
                         hx_err *err);
/* JSON whitespace as the params ask: none, bounded or unbounded. */
uint32_t hx_json_ws(hx_rx *rx, const hx_grammar_params *p);
/* 1 if r matches the whole string s. */
int hx_rx_matches(hx_rx *rx, uint32_t r, const char *s, size_t n);
void hx_rx_dump(const hx_rx *rx, uint32_t r, int depth, FILE *f);

static inline int rx_nullable(const hx_rx *rx, uint32_t r)
{
    return rx->nodes[r].nullable;
}

/* ---- JSON-string encoding of character-level regexes (rxparse.c) ---- */
/* Code point ranges, inclusive. */
typedef struct rx_cps {
    uint32_t (*r)[2];
    int n, cap;
} rx_cps;
/* The encoded form (inside a JSON string) of one character of the set. */
uint32_t hx_rx_enc_class(hx_rx *rx, const rx_cps *set);
/* Any one character, encoded. */
uint32_t hx_rx_enc_any(hx_rx *rx);
/* Compiles a Python-re pattern (search semantics) into the encoded string
 * content regex. HX_ERR_UNSUPPORTED with a message for what it cannot. */
int hx_rx_pattern(hx_rx *rx, const char *pat, uint32_t *out, hx_err *err);
/* Content regex for a JSON Schema format; 1 if known and compiled, 0 if the
 * format is unknown to the validators (ignored), -1 known but unsupported. */
int hx_rx_format(hx_rx *rx, const char *fmt, uint32_t *out);
/* The encoded content of a literal UTF-8 string (Python json.dumps). */
uint32_t hx_rx_enc_string(hx_rx *rx, const char *s, size_t n);

/* ---- the compiled grammar ---- */
struct hx_grammar {
    hx_rx rx;
    uint32_t root;  /* top regex */
    uint32_t quote; /* the class {'"'}, for the string fast path */
    int lazy;       /* tool-call grammar: free text until <tool_call> */
    uint32_t open_rx, close_rx; /* literal <tool_call> / </tool_call> */
};

/* ---- vocabulary: token trie in DFS order ---- */
typedef struct gnode {
    uint32_t tok;   /* token id, or UINT32_MAX for inner nodes */
    uint32_t size;  /* nodes in the subtree, this one included */
    uint32_t parent;
    uint8_t byte;
    uint8_t level;  /* 1 for children of the (implicit) root */
} gnode;

typedef struct gtrie {
    gnode *nd;
    uint32_t n;
} gtrie;

struct hx_gvocab {
    int32_t n_tokens;
    uint32_t n_words;
    char **piece;       /* into text */
    char *text;         /* every piece, each NUL-terminated */
    uint32_t *len;
    uint8_t *flags;
    uint32_t *dup_next; /* next token with the same bytes, UINT32_MAX */
    gtrie all;          /* every non-special token */
    gtrie rest;         /* tokens that are not string-safe */
    uint32_t *cum;      /* (max_cp + 1) bitsets: string-safe tokens with at
                           most k code points */
    uint32_t max_cp;
    void *map;           /* a mapped cache file that len, flags, dup_next,
                            text, the tries and cum point into, or NULL */
    size_t map_len;
    int32_t mark_tok[3]; /* special tokens spelling MARK_TEXT[i]
                            (<tool_call>, </tool_call>, <|python_tag|>),
                            -1 if none */
};
enum { N_MARKS = HX_GMARK_COUNT };
/* The mark text special token t spells (what a matcher accepts for it),
 * or NULL if t is no mark's token. */
static inline const char *hx_gmark_of(const hx_gvocab *v, int32_t t)
{
    for (int k = 0; k < N_MARKS; k++)
        if (t == v->mark_tok[k]) return hx_gmark_text[k];
    return NULL;
}
/* gvcache.c: unmaps v->map. */
void hx_gvocab_unmap(hx_gvocab *v);
/* For tests: recomputes the checksum of a cache file image, so that a
 * deliberately damaged file reaches the structural checks. */
int hx_gvcache_reseal(char *data, size_t len);
/* For tests: the cache file at path for v, or NULL if it is missing,
 * stale or damaged (nothing is rebuilt or written). */
struct hx_vocab;
hx_gvocab *hx_gvcache_load(const struct hx_vocab *v, const char *path);

/* ---- matcher: sets of hash-consed stacks ("configs") ---- */
typedef struct gstack {
    uint32_t rx;
    int32_t parent; /* -1: bottom */
    uint32_t hash;
} gstack;

typedef struct gcfg {
    uint32_t off, n; /* stack ids in m->pool */
    uint32_t hash;
    int32_t tab;     /* step table index, -1 none */
    int8_t end;      /* -1 unknown, 0, 1 */
} gcfg;

typedef struct gmemo {
    uint32_t rx;
    uint32_t n_bits;   /* listed tokens (when list) */
    uint32_t *bits;    /* bitset (n_words) or NULL */
    uint32_t *list;    /* token ids, when sparse */
    uint32_t *bnd;     /* boundary trie nodes (in v->all) */
    uint32_t n_bnd;
    int alias;         /* shares another entry's arrays (not freed here) */
} gmemo;

/* String-safe tokens made only of the bytes of one ASCII class, by length
 * (for masks inside strings restricted to a class, e.g. [a-z0-9_]{1,64}). */
typedef struct gclass_toks {
    uint32_t bits[8];
    uint32_t *toks;     /* sorted by length */
    uint32_t *by_len;   /* by_len[k] = tokens of length <= k (k <= 256) */
} gclass_toks;

struct hx_matcher {
    hx_grammar *g;
    gclass_toks *ctoks;
    uint32_t n_ctoks;
    hx_rx *rx;
    const hx_gvocab *v;
    gstack *stk;
    uint32_t n_stk, cap_stk;
    uint32_t *stk_h; uint32_t stk_hcap;
    gcfg *cfg;
    uint32_t n_cfg, cap_cfg;
    uint32_t *cfg_h; uint32_t cfg_hcap;
    uint32_t *pool;
    uint32_t n_pool, cap_pool;
    int32_t *tabs;
    uint32_t n_tabs, cap_tabs;
    gmemo *memo;
    uint32_t n_memo, cap_memo;
    uint32_t *memo_h; uint32_t memo_hcap;
    size_t memo_bytes;
    uint32_t *tmp; uint32_t n_tmp, cap_tmp; /* step scratch */
    uint32_t *stamp; uint32_t stamp_v;       /* boundary dedup per node */
    uint32_t cur;   /* current config */
    uint32_t start; /* start config */
    int ended;
    int lazy_on;    /* lazy grammars: constrained part entered */
    uint32_t text_tail; /* lazy: how much of "<tool_call>" was just seen */
    hx_err err;
};

/* match.c */
int hx_gm_init(hx_matcher *m);
void hx_gm_free(hx_matcher *m);
uint32_t hx_gm_config_of(hx_matcher *m, uint32_t rx);

#endif /* HX_GRAMMAR_INT_H */
