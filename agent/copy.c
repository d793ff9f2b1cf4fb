/* copy.c: the copy bias, a sampler stage for tool calls. Argument values
 * are mostly copied from the conversation (a name, an address, a title, a
 * uid from a tool's result), and a small model that knows which argument
 * to write still misspells a word it has never seen ("onnual review" for
 * "annual review"). Inside a string value of a call's arguments, while
 * what was written of it so far occurs in the conversation (starting at a
 * word), the tokens that keep it a copy get a logit bonus: a token the
 * model ranks within the bonus of its best one wins over a token that
 * leaves every copy. Closing the string is such a token where the copy
 * ends at a word's end. A value that left the conversation (a mail body
 * the model composes) gets no bonus at all, and the grammar's mask comes
 * first: the stage only reorders tokens the grammar allows.
 *
 * Addresses are stricter: the value of a "to", "cc", "bcc" or "attendees"
 * argument is one of the mail addresses the conversation contains, copied
 * whole, or nothing the stage lets through (tokens that leave every
 * address, or close the value inside one, are masked). A recipient the
 * model made up, or an address with a letter lost, is never written; when
 * the grammar leaves no token that copies one, the stage falls back to
 * the bonus. When the conversation holds no address, an address value
 * gets no bonus at all: a word copied there ("go" of "to go over") is
 * never an address, while what the model writes may be one it knows (a
 * nickname's address that a LoRA adapter taught it). Once such a value
 * spells the first part of an address the user knows (one they exchanged
 * mail with: "robert" of robert.keller@northwind.com), it is held to the
 * known addresses it begins the way conversation addresses hold one:
 * what a small model knows is a spelling that drifts into the request's
 * words ("robert planning", "robert.kellertaign"), never an address.
 * When the user's request names addresses, they come first: only tokens
 * that copy one of them get the bonus until the call has them, while the
 * conversation's other addresses (one the memory recalled, a sender in a
 * tool's result) stay allowed without it: "Tell arjun.chen@stosin.co by
 * email ..." went to a colleague's address the memory had recalled. And
 * no address is written twice in one call (one attendee twice is never
 * what was asked).
 *
 * Paths are held the same way once a tool's result shows some: a "path"
 * value is one of the results' "path" values, whole, from its start or
 * from after a '/' in it (a form relative to a root: files.read takes
 * "personal/notes.md" of "/home/u/files/personal/notes.md"). A small model
 * otherwise writes the paths of the worlds it was trained on ("notes",
 * "work/furusato-nozei.md") and gets "does not exist" again and again.
 * With no path shown yet, the path is the model's own (the one the user
 * named).
 *
 * In the answer, outside calls, the stage only finishes a word of a tool
 * result's value the answer is copying (below). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

/* ---- the JSON value scanner (agent.h) ---- */

static void key_byte(hx_jscan *s, char c)
{
    if (s->key_len < 0) return;
    if (s->key_len + 1 >= HX_JSCAN_KEY) {
        s->key_len = -1, s->key[0] = 0;
        return;
    }
    s->key[s->key_len++] = c;
    s->key[s->key_len] = 0;
}

int hx_jscan_byte(hx_jscan *s, char c)
{
    if (s->in_str) {
        if (s->esc) s->esc = 0;
        else if (c == '\\') s->esc = 1;
        else if (c == '"') {
            s->in_str = 0;
            return s->is_val ? HX_JSCAN_CLOSE : HX_JSCAN_OTHER;
        }
        if (!s->is_val && s->depth >= 2) key_byte(s, c);
        return s->is_val ? HX_JSCAN_BYTE : HX_JSCAN_OTHER;
    }
    char top = s->depth > 0 && s->depth <= HX_JSCAN_DEPTH ? s->stack[s->depth - 1] : 0;
    switch (c) {
    case '{': case '[':
        if (s->depth < HX_JSCAN_DEPTH) s->stack[s->depth] = c;
        s->depth++;
        s->colon = 0;
        break;
    case '}': case ']':
        if (s->depth > 0) s->depth--;
        break;
    case ',': s->colon = 0; break;
    case ':': s->colon = 1; break;
    case '"':
        s->in_str = 1;
        s->is_val = s->depth >= 2 && (top == '[' || (top == '{' && s->colon));
        if (!s->is_val) s->key_len = 0, s->key[0] = 0;
        return s->is_val ? HX_JSCAN_OPEN : HX_JSCAN_OTHER;
    default: break;
    }
    return HX_JSCAN_OTHER;
}

typedef struct copy_stage {
    const hx_vocab *v;
    float bonus;
    const int *in_call;  /* the loop guard's: a call is being written */
    const int *defer;    /* the argument check's: the model's own value
                            stands (NULL: never) */
    int was_in_call;
    hx_jscan js;
    char *text;          /* the conversation, then known addresses (owned) */
    size_t n_text;
    int32_t n_conv_addrs; /* addrs[0, n_conv_addrs) are the conversation's */
    int32_t *starts;     /* where a copy may start: word starts (owned) */
    int32_t n_starts;
    int32_t *addrs;      /* where an address starts (owned) */
    int32_t n_addrs;
    int32_t *addr_end;   /* [start]: where that address or path ends (owned) */
    int32_t *paths;      /* where a path starts: a result's "path" value or
                            its part after a '/' (owned) */
    int32_t n_paths;
    unsigned char *mark; /* [start]: ASKED, USED (owned) */
    int32_t n_asked;     /* starts ASKED; those not USED yet: */
    int32_t n_asked_left;
    int all_used;         /* every address a value may copy is a value of the call (apply_strict's) */
    int32_t *match;      /* starts whose text continues the value so far */
    int32_t n_match;
    size_t len;          /* bytes of the value so far */
    signed char *verdict; /* apply's scratch, one per token (owned) */
    int32_t n_verdict;
    /* the answer (outside calls): finishing a word of a copied value */
    int32_t *vstarts;    /* where a JSON string value starts (owned) */
    int32_t n_vstarts;
    int32_t *vkey;       /* [vstart]: where its key starts, plus 1 (owned) */
    int32_t *amatch;     /* value starts the answer's copy continues (owned) */
    int32_t n_amatch;
    size_t alen;         /* bytes of that copy */
    int aspace;          /* it holds a word's end: a whole word is copied */
    char alast;          /* the answer's last byte (0: none yet) */
    /* the answer's walk through a result's list */
    int32_t walked;      /* value start the answer copied whole last; -1: none */
    size_t wend;         /* where that value ends in the text */
    int32_t named;       /* value start of the last item the walk named */
    int32_t wtime;       /* the walked item's date-time value; -1: none */
    int wused;           /* of it: 1 its date named, 2 its time */
    int32_t hold[2];     /* spans of the text the answer is held to: */
    int32_t hold_end[2]; /* [hold, hold_end), hold -1: none */
    size_t hlen;         /* bytes of them written */
    char atail[8];       /* the answer's last bytes, the last one last */
} copy_stage;

static int is_word(char c) { return isalnum((unsigned char)c) || (c & 0x80); }

/* A copy may start at a word's first byte, or at any non-blank byte after
 * a blank or an opening quote or bracket ("/config/...", "<a@b.c>"); not
 * in the middle of "duration_minutes", nor after the apostrophe of
 * "Enzo's" (a search for "s message" finds nothing). */
static int can_start(const char *t, size_t i)
{
    if (isspace((unsigned char)t[i])) return 0;
    if (i == 0 || isspace((unsigned char)t[i - 1]) || strchr("\"(<[{", t[i - 1])) return 1;
    if (t[i - 1] == '\'' && i > 1 && is_word(t[i - 2])) return 0; /* "Enzo's": no word starts */
    return t[i - 1] == '\'' || (is_word(t[i]) && !is_word(t[i - 1]));
}

/* A copy may end before position i of the text: at its end or a word's. */
static int can_end(const char *t, size_t n, size_t i)
{
    return i >= n || !is_word(t[i]) || (i > 0 && !is_word(t[i - 1]));
}

static int is_addr_byte(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("._%+-@", c));
}

static int address_key(const char *k)
{
    return !strcmp(k, "to") || !strcmp(k, "cc") || !strcmp(k, "bcc") || !strcmp(k, "attendees");
}

enum { FREE = 0, ADDRESS = 1, PATH = 2 }; /* what a value is held to */

/* What a value under key k is held to: ADDRESS, one of the text's
 * addresses; PATH, one of the paths its results show; else FREE. */
static int held_to(const copy_stage *c, const char *k)
{
    if (address_key(k)) return c->n_addrs > 0 ? ADDRESS : FREE;
    return !strcmp(k, "path") && c->n_paths > 0 ? PATH : FREE;
}

/* Where a fresh value's copy may start (*n of them): for an address value
 * the conversation's addresses, or with none there the known ones; for a
 * path value the paths; else the word starts. */
static const int32_t *fresh_set(const copy_stage *c, int strict, int32_t *n)
{
    if (strict == PATH) return *n = c->n_paths, c->paths;
    *n = !strict ? c->n_starts : c->n_conv_addrs > 0 ? c->n_conv_addrs : c->n_addrs;
    return strict ? c->addrs : c->starts;
}

/* The end of the address starting at t[i] (a run of address bytes, not
 * the middle of one, with one '@', a local part and a dotted domain; a
 * trailing dot is the sentence's), or 0 when the run there is none. */
static size_t addr_at(const char *t, size_t n, size_t i)
{
    if (i > 0 && is_addr_byte(t[i - 1])) return 0;
    size_t j = i, at = 0, dot = 0;
    for (; j < n && is_addr_byte(t[j]); j++)
        if (t[j] == '@') {
            if (at) return 0;
            at = j;
        }
    while (j > i && (t[j - 1] == '.' || t[j - 1] == '-')) j--;
    for (size_t k = at + 1; at && k < j; k++)
        if (t[k] == '.') dot = k;
    return at > i && dot > at + 1 && dot + 1 < j ? j : 0;
}

enum { ASKED = 1, /* the user's request names the address there */
       USED = 2 /* a value of the call being written is that address */ };

/* Whether an address of set[0, k) is not yet a value of the call: with
 * each written once, another address value would be one made up. */
static int unused_address(const copy_stage *c, const int32_t *set, int32_t k)
{
    for (int32_t i = 0; i < k; i++)
        if (!(c->mark[set[i]] & USED)) return 1;
    return 0;
}

/* Whether some match (or, fresh, some start) continues with ext[0, n)
 * and, when closed, ends there: at a word's end, or for an address or
 * path value at its end, never past it. 2: such a match is an address the
 * request names; 1: only others are; 0: none. */
static int copies(const copy_stage *c, int fresh, int strict, const char *ext, size_t n,
                  int closed)
{
    int32_t k = c->n_match;
    const int32_t *set = !fresh ? c->match : fresh_set(c, strict, &k);
    size_t off = fresh ? 0 : c->len;
    if (n == 0 && (fresh || !closed || off == 0)) /* an address value's opening quote */
        return strict && fresh && !closed ? 1 + (c->n_asked_left > 0) : 0;
    const int again = strict == ADDRESS && c->all_used; /* one again rather than one made up */
    int found = 0;
    for (int32_t i = 0; i < k; i++) {
        size_t at = (size_t)set[i] + off, end = strict ? (size_t)c->addr_end[set[i]] : c->n_text;
        if (at + n > end || memcmp(c->text + at, ext, n)) continue;
        if (closed && !(strict ? at + n == end : can_end(c->text, c->n_text, at + n))) continue;
        if (strict != ADDRESS) return 1;
        if ((c->mark[set[i]] & USED) && !again) continue; /* no address twice */
        if (c->mark[set[i]] == ASKED) return 2;
        if (c->n_asked_left == 0) return 1; /* no need to look for one */
        found = 1;
    }
    return found;
}

enum { LEAVES = -1, UNTOUCHED = 0, KEEPS = 1, KEEPS_ASKED = 2 };

/* Whether s is in a list of addresses (an address key's '[') each of
 * whose conversation addresses is a value of the call already: a ','
 * there would open one more. */
static int list_done(const copy_stage *c, const hx_jscan *s)
{
    if (!address_key(s->key) || held_to(c, s->key) != ADDRESS || s->depth < 1 ||
        s->depth > HX_JSCAN_DEPTH || s->stack[s->depth - 1] != '[')
        return 0;
    return c->all_used;
}

/* What token t does to the value being written (or the one it opens),
 * from the current scanner state; *strict: that value is an address. */
static int judge(const copy_stage *c, int32_t t, int *strict)
{
    size_t n = 0;
    const char *p = hx_vocab_piece(c->v, t, &n);
    *strict = 0;
    if (!p || n == 0 || hx_vocab_is_special(c->v, t)) return UNTOUCHED;
    hx_jscan s = c->js;
    int fresh = 0, touched = s.in_str && s.is_val, closed = 0;
    size_t from = 0, to = 0;
    *strict = touched ? held_to(c, s.key) : FREE; /* the key stays while its value is open */
    for (size_t i = 0; i < n && !closed; i++) {
        switch (hx_jscan_byte(&s, p[i])) {
        case HX_JSCAN_OPEN:
            if (touched) return LEAVES; /* a second value: no copy of one */
            touched = fresh = 1;
            *strict = held_to(c, s.key);
            from = to = i + 1;
            break;
        case HX_JSCAN_BYTE: to = i + 1; break;
        case HX_JSCAN_CLOSE: closed = 1; break;
        default: /* structure before the value opens */
            if (p[i] == ',' && !touched && list_done(c, &s)) {
                *strict = ADDRESS;
                return LEAVES; /* another address could only be one made up */
            }
            from = to = i + 1;
            break;
        }
    }
    if (!touched) return UNTOUCHED;
    if (!fresh && c->n_match == 0) return LEAVES; /* the value left the text */
    static const int verdict[] = {LEAVES, KEEPS, KEEPS_ASKED};
    return verdict[copies(c, fresh, *strict, p + from, to - from, closed)];
}

/* Whether the next token may write a value under an address key: one is
 * open, or the key was read and the value (or another item) may follow. */
static int at_address_value(const copy_stage *c)
{
    return (!c->js.in_str || c->js.is_val) && address_key(c->js.key);
}

/* The same for a path value held to the results' paths. */
static int at_path_value(const copy_stage *c)
{
    return (!c->js.in_str || c->js.is_val) && held_to(c, c->js.key) == PATH;
}

/* Whether the value so far stops inside a word in every match: its last
 * byte and each match's next byte are word bytes. The copied word is then
 * finished as the text writes it: a small model that wrote "ex" of
 * "expense" or "dat" of "data" skips a piece ("exse", "dat cleanup") even
 * when the piece is lifted by the bonus. */
static int mid_word(const copy_stage *c)
{
    if (!c->js.in_str || !c->js.is_val || c->len == 0 || c->n_match == 0) return 0;
    for (int32_t i = 0; i < c->n_match; i++) {
        const size_t at = (size_t)c->match[i] + c->len;
        if (at >= c->n_text || !is_word(c->text[at]) || !is_word(c->text[at - 1])) return 0;
    }
    return 1;
}

/* Whether token t is white space only. */
static int blank(const hx_vocab *v, int32_t t)
{
    size_t n = 0;
    const char *p = hx_vocab_piece(v, t, &n);
    return p && n && strspn(p, " \t\r\n") >= n;
}

/* Address values (or, all, a word being copied): every allowed token is
 * judged; those leaving every address are masked (all: every token but
 * those that go on with the word, special ones too), unless none would be
 * left. 0: not applied. */
static int apply_strict(copy_stage *c, float *logits, int32_t n_vocab, int all)
{
    if (c->n_verdict < n_vocab) {
        signed char *v = hx_realloc(c->verdict, (size_t)n_vocab);
        if (!v) return 0;
        c->verdict = v, c->n_verdict = n_vocab;
    }
    int32_t kept = 0, n_set = 0;
    const int in_value = c->js.in_str && c->js.is_val;
    const int32_t *set = fresh_set(c, ADDRESS, &n_set);
    c->all_used = n_set > 0 && !unused_address(c, set, n_set);
    for (int32_t t = 0; t < n_vocab; t++) {
        int strict = 0;
        c->verdict[t] = isfinite(logits[t]) ? (signed char)judge(c, t, &strict) : UNTOUCHED;
        if (in_value && !all && hx_vocab_is_special(c->v, t) && isfinite(logits[t]))
            c->verdict[t] = LEAVES, strict = 1; /* "robert.kelle<tool_call>r@..." */
        if (c->verdict[t] == LEAVES && !strict && !all) c->verdict[t] = UNTOUCHED; /* another value */
        kept += (c->verdict[t] >= KEEPS && (strict || all)) ||
                (!in_value && !all && c->verdict[t] == UNTOUCHED && isfinite(logits[t]) && !blank(c->v, t)); /* "]" */
    }
    if (!kept) return 0;
    const int asked_first = !all && c->n_asked_left > 0 && address_key(c->js.key); /* the
                                                    request's addresses */
    for (int32_t t = 0; t < n_vocab; t++) {
        const int v = c->verdict[t];
        if (v == KEEPS_ASKED || (v == KEEPS && !asked_first)) logits[t] += c->bonus;
        else if (v == LEAVES || (all && v != KEEPS)) logits[t] = -INFINITY; /* all: a special too */
    }
    return 1;
}

/* With no address in the conversation, whether the value so far spells
 * a known address to the end of its first part or beyond ("robert" of
 * robert.keller@northwind.com, where a '.' follows): from there on it is
 * held to one. Before, it is the model's own: a known address is not
 * forced on "bob" unless the model goes on to spell one. */
static int known_part(const copy_stage *c)
{
    if (!c->js.in_str || !c->js.is_val || c->len == 0) return 0;
    for (int32_t i = 0; i < c->n_match; i++) {
        const size_t at = (size_t)c->match[i], end = at + c->len;
        if (end == (size_t)c->addr_end[at]) return 1;
        for (size_t j = at; j <= end; j++)
            if (c->text[j] && strchr(".-_+@", c->text[j])) return 1;
    }
    return 0;
}

/* The text starts in m[0, k) whose copy of len bytes goes on with byte
 * b, kept in m in order; returns how many. */
static int32_t narrow(const copy_stage *c, int32_t *m, int32_t k, size_t len, char b)
{
    int32_t kept = 0;
    for (int32_t i = 0; i < k; i++) {
        const size_t at = (size_t)m[i] + len;
        if (at < c->n_text && c->text[at] == b) m[kept++] = m[i];
    }
    return kept;
}

static float max_logit(const float *logits, int32_t n_vocab)
{
    float best = -INFINITY;
    for (int32_t t = 0; t < n_vocab; t++)
        if (logits[t] > best) best = logits[t];
    return best;
}

/* ---- the answer: a copied value's word finished ----
 * An answer names what the tools found (titles, subjects, file names,
 * senders), and a small model misspells a word it has never seen there
 * too ("Partner sumx" for "Partner summit", "Steu Sato" for "Stefan
 * Sato"). Once the answer has copied a JSON string value of the
 * conversation from its start, through at least one whole word or the
 * first three letters of its first, and stops inside a word the value
 * goes on with, the tokens that finish that word as the value writes it
 * get the bonus. Not a number's digits ("2028-07-1" would run on into a
 * raw timestamp). Nothing else: which value to name and what follows a
 * word are the model's (a bonus there ran an answer on from one copy into
 * the next: "Dinner at Chloe check-in at Chloe review ..."). */

/* Whether the answer's copy stops inside a word that some match goes on
 * with (an apostrophe before a letter is inside). */
static int answer_mid_word(const copy_stage *c)
{
    if (!c->n_amatch || !is_word(c->alast)) return 0;
    /* the first word: three letters in ("Ste" of "Stefan"), not a number */
    if (!c->aspace && (c->alen < 3 || !isalpha((unsigned char)c->text[c->amatch[0]]))) return 0;
    for (int32_t i = 0; i < c->n_amatch; i++) {
        const char *next = c->text + c->amatch[i] + c->alen, *end = c->text + c->n_text;
        if (next < end && (is_word(*next) || (*next == '\'' && next + 1 < end && is_word(next[1]))))
            return 1; /* "Chloé" goes on with "'s" */
    }
    return 0;
}

/* Whether p[0, n) goes on with some match, inside its value. */
static int answer_keeps(const copy_stage *c, const char *p, size_t n)
{
    if (memchr(p, '"', n)) return 0;
    for (int32_t i = 0; i < c->n_amatch; i++) {
        const size_t at = (size_t)c->amatch[i] + c->alen;
        if (at + n <= c->n_text && !memcmp(c->text + at, p, n)) return 1;
    }
    return 0;
}

static void answer_apply(copy_stage *c, float *logits, int32_t n_vocab)
{
    const float best = max_logit(logits, n_vocab);
    for (int32_t t = 0; isfinite(best) && t < n_vocab; t++) {
        size_t n = 0;
        const char *p = logits[t] > best - c->bonus ? hx_vocab_piece(c->v, t, &n) : NULL;
        if (p && n && !hx_vocab_is_special(c->v, t) && answer_keeps(c, p, n)) logits[t] += c->bonus;
    }
}

/* ---- the answer: a list walked in the result's order ----
 * An answer that lists what a tool found ("Team standup at 09:30, Vendor
 * demo at 11:00, ...") names the items in the order the result gives
 * them, and a small model loses its place in a long result: it names one
 * twice and skips the one between, or gives an item another's time
 * ("Dentist at 11:00, Dentist at 11:00"). Once the answer has copied a
 * value whole (a title), where it begins the next item of a list (after
 * a comma, a colon or "and", maybe a blank and a quote) and the model's
 * best token begins a value under the same key, the item is the next
 * value under that key in the text (not of a cancelled event, which
 * answers leave out): only tokens that begin it are left,
 * then only those that go on with it to its end. A number the answer
 * begins after an item so named is that item's: the date or the time of
 * day of the first date-time value after it in its object ("start"), held
 * to in the same way. Whether to name an item at all ("and 1 more"), and
 * the words between, stay the model's. */

/* The key of the value starting at v: its bytes at *k, and their count;
 * 0 when there is none. */
static size_t value_key(const copy_stage *c, int32_t v, const char **k)
{
    if (v < 0 || !c->vkey[v]) return 0;
    *k = c->text + c->vkey[v] - 1;
    return strcspn(*k, "\"");
}

static int same_key(const copy_stage *c, int32_t v, int32_t w)
{
    const char *a = NULL, *b = NULL;
    const size_t n = value_key(c, v, &a);
    return n && value_key(c, w, &b) == n && !memcmp(a, b, n);
}

/* Where the string value starting at v ends (its closing quote). */
static size_t value_end(const copy_stage *c, size_t v)
{
    while (v < c->n_text && c->text[v] != '"') v += c->text[v] == '\\' ? 2 : 1;
    return v < c->n_text ? v : c->n_text;
}

/* Whether a date-time ("2028-06-05T10:30") starts at text position i. */
static int date_time_at(const copy_stage *c, size_t i)
{
    static const char shape[] = "dddd-dd-ddTdd:dd";
    if (i + sizeof shape - 1 > c->n_text) return 0;
    for (size_t k = 0; k + 1 < sizeof shape; k++)
        if (shape[k] == 'd' ? !isdigit((unsigned char)c->text[i + k]) : c->text[i + k] != shape[k])
            return 0;
    return 1;
}

/* Where the object (or array) holding text position from ends. */
static size_t item_end(const copy_stage *c, size_t from)
{
    int depth = 0;
    size_t i = from;
    for (; i < c->n_text && depth >= 0; i++) {
        if (c->text[i] == '"') i = value_end(c, i + 1);
        depth += c->text[i] == '{' || c->text[i] == '[';
        depth -= c->text[i] == '}' || c->text[i] == ']';
    }
    return i < c->n_text ? i : c->n_text;
}

/* The first date-time value after position from inside its object; -1. */
static int32_t item_time(const copy_stage *c, size_t from)
{
    const size_t end = item_end(c, from);
    for (size_t i = from; i + 1 < end; i++)
        if (c->text[i] == '"' && date_time_at(c, i + 1)) return (int32_t)i + 1;
    return -1;
}

/* Whether the item of the value starting at v is cancelled (its object
 * says "status": "cancelled" after v): answers leave such events out. */
static int item_cancelled(const copy_stage *c, int32_t v)
{
    static const char says[] = "\"status\": \"cancelled\"";
    const size_t end = item_end(c, value_end(c, (size_t)v) + 1);
    return memmem(c->text + v, end - (size_t)v, says, sizeof says - 1) != NULL;
}

/* Whether the answer so far ends where a list's next item begins: a
 * comma, "and", or a colon not of a time, then maybe a blank, a quote. */
static int at_item(const copy_stage *c)
{
    const char *t = c->atail;
    size_t n = sizeof c->atail;
    if (t[n - 1] == '"') n--;
    if (t[n - 1] == ' ') n--;
    return t[n - 1] == ',' || (t[n - 1] == ':' && !isdigit((unsigned char)t[n - 2])) ||
           (n >= 4 && !memcmp(t + n - 4, " and", 4));
}

/* Whether token piece p[0, n) goes on with the text from pos, by one byte
 * at least and not past end; with lead (nothing of the span written yet),
 * after a blank (which it must have unless the answer ends with one or a
 * quote: not "andServer") and a quote. */
static int goes_on(const copy_stage *c, const char *p, size_t n, size_t pos, size_t end, int lead)
{
    const char last = c->atail[sizeof c->atail - 1];
    if (lead && last != ' ' && last != '"') {
        if (!n || *p != ' ') return 0;
        p++, n--;
    }
    if (lead && n && p[0] == '"') p++, n--;
    return n && pos + n <= end && !memcmp(c->text + pos, p, n);
}

/* Whether token t goes on with one of the held spans. */
static int holds(const copy_stage *c, int32_t t)
{
    size_t n = 0;
    const char *p = hx_vocab_is_special(c->v, t) ? NULL : hx_vocab_piece(c->v, t, &n);
    for (int i = 0; p && i < 2; i++)
        if (c->hold[i] >= 0 &&
            goes_on(c, p, n, (size_t)c->hold[i] + c->hlen, (size_t)c->hold_end[i], c->hlen == 0))
            return 1;
    return 0;
}

/* Masks every token that goes on with no held span, unless none is left. */
static void walk_hold(const copy_stage *c, float *logits, int32_t n_vocab)
{
    int32_t t = 0;
    while (t < n_vocab && !(isfinite(logits[t]) && holds(c, t))) t++;
    if (t == n_vocab) return;
    for (t = 0; t < n_vocab; t++)
        if (!holds(c, t)) logits[t] = -INFINITY;
}

/* Holds the answer to [a, a_end) and [b, b_end) (b -1: one span). */
static void hold_spans(copy_stage *c, float *logits, int32_t n_vocab, int32_t a, int32_t a_end,
                       int32_t b, int32_t b_end)
{
    c->hold[0] = a, c->hold_end[0] = a_end, c->hold[1] = b, c->hold_end[1] = b_end, c->hlen = 0;
    walk_hold(c, logits, n_vocab);
}

/* The model's best token, its piece at *p (*n bytes); -1 when it is
 * special or every token is masked. */
static int32_t best_piece(const copy_stage *c, const float *logits, int32_t n_vocab,
                          const char **p, size_t *n)
{
    int32_t top = 0;
    for (int32_t t = 1; t < n_vocab; t++)
        if (logits[t] > logits[top]) top = t;
    *n = 0, *p = "";
    if (!isfinite(logits[top]) || hx_vocab_is_special(c->v, top)) return -1;
    *p = hx_vocab_piece(c->v, top, n);
    return top;
}

/* At an item's start the model names some value under the walked key:
 * the next one it is. */
static void walk_item(copy_stage *c, float *logits, int32_t n_vocab)
{
    const char *p;
    size_t n;
    if (best_piece(c, logits, n_vocab, &p, &n) < 0) return;
    int names = 0;
    for (int32_t i = 0; i < c->n_vstarts && !names; i++)
        names = same_key(c, c->vstarts[i], c->walked) &&
                goes_on(c, p, n, (size_t)c->vstarts[i], value_end(c, (size_t)c->vstarts[i]), 1);
    for (int32_t i = 0; names && i < c->n_vstarts; i++) {
        const int32_t v = c->vstarts[i];
        if ((size_t)v >= c->wend && same_key(c, v, c->walked) && !item_cancelled(c, v)) {
            hold_spans(c, logits, n_vocab, v, (int32_t)value_end(c, (size_t)v), -1, -1);
            return;
        }
    }
}

/* After an item is named the model begins a number: the item's date or
 * time of day, whichever is not named yet. */
static void walk_number(copy_stage *c, float *logits, int32_t n_vocab)
{
    const char *p;
    size_t n;
    if (best_piece(c, logits, n_vocab, &p, &n) < 0 || isdigit((unsigned char)c->alast)) return;
    while (n && (*p == ' ' || *p == '"')) p++, n--;
    if (!n || !isdigit((unsigned char)*p)) return;
    const int32_t d = c->wused & 1 ? -1 : c->wtime, t = c->wused & 2 ? -1 : c->wtime + 11;
    if (d >= 0) hold_spans(c, logits, n_vocab, d, d + 10, t, t + 5);
    else if (t >= 0) hold_spans(c, logits, n_vocab, t, t + 5, -1, -1);
}

static void walk_apply(copy_stage *c, float *logits, int32_t n_vocab)
{
    if (c->hlen > 0) { /* inside a span: to its end */
        walk_hold(c, logits, n_vocab);
        return;
    }
    c->hold[0] = c->hold[1] = -1;
    if (c->walked < 0) return;
    if (at_item(c)) walk_item(c, logits, n_vocab);
    else if (c->wtime >= 0) walk_number(c, logits, n_vocab);
}

/* The answer's byte b for the walk: a held span goes on (after its lead:
 * a blank, a quote) or is left; one written to its end is let go. */
static void walk_byte(copy_stage *c, char b)
{
    int kept = 0, done = 0;
    for (int i = 0; i < 2; i++) {
        if (c->hold[i] < 0) continue;
        const size_t at = (size_t)c->hold[i] + c->hlen;
        if (c->hlen == 0 && (b == ' ' || b == '"')) {
            kept = -1; /* the lead: nothing written yet */
        } else if (at < (size_t)c->hold_end[i] && c->text[at] == b) {
            kept = 1;
            if (at + 1 < (size_t)c->hold_end[i]) continue;
            done = 1; /* written whole: the item's date, its time, or the item */
            if (c->hold[i] == c->wtime) c->wused |= 1;
            else if (c->hold[i] == c->wtime + 11) c->wused |= 2;
            else c->named = c->hold[i];
        } else {
            c->hold[i] = -1;
        }
    }
    if (kept > 0) c->hlen++;
    if (!kept || done) c->hold[0] = c->hold[1] = -1, c->hlen = 0;
    if (b == ',' || (b == 'd' && !memcmp(c->atail + sizeof c->atail - 3, " an", 3)))
        c->wtime = -1; /* the next item: the last one's numbers are done */
}

/* The answer's copy has a value whole and byte b ends it: the walk goes on
 * from there; of several such values (one title on many days), from the
 * first past the walk's place. */
static void walk_on(copy_stage *c, char b)
{
    if (is_word(b) || c->alen == 0) return;
    int32_t pick = -1;
    for (int32_t i = 0; i < c->n_amatch; i++) {
        const int32_t m = c->amatch[i];
        if ((size_t)m + c->alen >= c->n_text || c->text[m + c->alen] != '"') continue;
        if (pick < 0 || ((size_t)pick < c->wend && (size_t)m >= c->wend)) pick = m;
    }
    if (pick < 0) return;
    c->walked = pick, c->wend = (size_t)pick + c->alen;
    c->wtime = pick == c->named ? item_time(c, c->wend + 1) : -1, c->wused = 0;
}

/* The answer's byte b: narrows its copy, or starts one at a word's start. */
static void answer_byte(copy_stage *c, char b)
{
    walk_on(c, b);
    walk_byte(c, b);
    memmove(c->atail, c->atail + 1, sizeof c->atail - 1);
    c->atail[sizeof c->atail - 1] = b;
    /* a quote ends the value being copied */
    int32_t k = b == '"' ? 0 : narrow(c, c->amatch, c->n_amatch, c->alen, b);
    c->n_amatch = k, c->alen++;
    /* a blank, or a hyphen or underscore after a letter ("partner-" of
     * "partner-summit.md", not "2028-" of a date) */
    c->aspace |= b == ' ' || ((b == '-' || b == '_') && isalpha((unsigned char)c->alast));
    if (!k && is_word(b) && !is_word(c->alast)) {
        for (int32_t i = 0; i < c->n_vstarts; i++)
            if (c->text[c->vstarts[i]] == b) c->amatch[k++] = c->vstarts[i];
        c->n_amatch = k, c->alen = 1, c->aspace = 0;
    }
    c->alast = b;
}

static int copy_apply(void *ctx, float *logits, int32_t n_vocab)
{
    copy_stage *c = ctx;
    if (c->n_text == 0) return HX_OK;
    if (!*c->in_call) {
        if (c->hlen == 0 && answer_mid_word(c)) answer_apply(c, logits, n_vocab);
        else walk_apply(c, logits, n_vocab);
        return HX_OK;
    }
    if (c->defer && *c->defer) return HX_OK; /* a value the tool accepts stands */
    if (at_address_value(c)) {
        if (c->n_addrs == 0) return HX_OK; /* no address to copy: the model's own */
        if (c->n_conv_addrs == 0 && !known_part(c)) return HX_OK;
        if (apply_strict(c, logits, n_vocab, 0)) return HX_OK;
    }
    if (at_path_value(c) && apply_strict(c, logits, n_vocab, 0)) return HX_OK;
    if (mid_word(c) && apply_strict(c, logits, n_vocab, 1)) return HX_OK;
    const float best = max_logit(logits, n_vocab);
    if (!isfinite(best)) return HX_OK;
    /* only tokens the bonus can lift to the top are looked at */
    for (int32_t t = 0; t < n_vocab; t++) {
        int strict;
        if (logits[t] > best - c->bonus && judge(c, t, &strict) >= KEEPS) logits[t] += c->bonus;
    }
    return HX_OK;
}

void hx_copy_stage_defer(hx_sampler_stage *st, const int *defer)
{
    ((copy_stage *)st->ctx)->defer = defer;
}

/* Narrows the matches to those continuing with byte b. */
static void copy_byte(copy_stage *c, char b)
{
    c->n_match = narrow(c, c->match, c->n_match, c->len++, b);
}

static void new_call(copy_stage *c)
{
    memset(&c->js, 0, sizeof c->js);
    c->walked = c->named = c->wtime = c->hold[0] = c->hold[1] = -1, c->wend = c->hlen = 0;
    for (int32_t i = 0; i < c->n_conv_addrs; i++) c->mark[c->addrs[i]] &= (unsigned char)~USED;
    c->n_asked_left = c->n_asked;
}

/* An address value just closed: that address (wherever the text has it)
 * is not written again in this call (two attendees were one person
 * twice), and if the request names it, it comes first no more: the
 * second attendee's address may be elsewhere in the text (the memory's,
 * a result's). */
static void address_used(copy_stage *c)
{
    for (int32_t k = 0; k < c->n_match; k++) {
        const int32_t m = c->match[k];
        if ((size_t)c->addr_end[m] != (size_t)m + c->len) continue;
        for (int32_t i = 0; i < c->n_conv_addrs; i++) {
            const int32_t a = c->addrs[i];
            if ((c->mark[a] & USED) || (size_t)(c->addr_end[a] - a) != c->len ||
                memcmp(c->text + a, c->text + m, c->len))
                continue;
            c->n_asked_left -= c->mark[a] == ASKED;
            c->mark[a] |= USED;
        }
    }
}

static int copy_accept(void *ctx, int32_t token)
{
    copy_stage *c = ctx;
    size_t n = 0;
    const char *p = hx_vocab_is_special(c->v, token) ? NULL : hx_vocab_piece(c->v, token, &n);
    if (!*c->in_call) {
        c->was_in_call = 0;
        for (size_t i = 0; p && i < n; i++) answer_byte(c, p[i]);
        return HX_OK;
    }
    if (!c->was_in_call) new_call(c);
    c->was_in_call = 1;
    if (!p) return HX_OK;
    for (size_t i = 0; i < n; i++) {
        int what = hx_jscan_byte(&c->js, p[i]);
        if (what == HX_JSCAN_OPEN) {
            const int32_t *set = fresh_set(c, held_to(c, c->js.key), &c->n_match);
            memcpy(c->match, set, (size_t)c->n_match * sizeof *c->match);
            c->len = 0;
        } else if (what == HX_JSCAN_BYTE) {
            copy_byte(c, p[i]);
        } else if (what == HX_JSCAN_CLOSE && held_to(c, c->js.key) == ADDRESS) {
            address_used(c);
        }
    }
    return HX_OK;
}

static void copy_free(void *ctx)
{
    copy_stage *c = ctx;
    if (!c) return;
    free(c->text);
    free(c->starts);
    free(c->addrs);
    free(c->addr_end);
    free(c->paths);
    free(c->mark);
    free(c->match);
    free(c->verdict);
    free(c->vstarts);
    free(c->vkey);
    free(c->amatch);
    free(c);
}

/* Whether the text r names the address a[0, n) (as a whole address). */
static int names_address(const char *r, const char *a, size_t n)
{
    const size_t nr = r ? strlen(r) : 0;
    for (size_t i = 0; i + n <= nr; i++)
        if (!memcmp(r + i, a, n) && addr_at(r, nr, i) == i + n) return 1;
    return 0;
}

/* The paths of the conversation text[0, n) into c->paths, their ends into
 * addr_end: the values of its results' "path" keys, from their start or
 * from after any '/' in them ("personal/notes.md" of
 * "/home/u/files/personal/notes.md": the roots' relative forms). */
static void find_paths(copy_stage *c, size_t n)
{
    hx_jstr s = {.t = c->text, .n = n};
    while (hx_jstr_next(&s)) {
        if (!s.is_value || !hx_jstr_under(&s, "path")) continue;
        for (size_t j = s.start; j < s.end; j++)
            if ((j == s.start || (c->text[j - 1] == '/' && c->text[j] != '/')) && !c->addr_end[j])
                c->paths[c->n_paths++] = (int32_t)j, c->addr_end[j] = (int32_t)s.end;
    }
}

/* The JSON strings of the text: the values of the conversation text[0, n)
 * into vstarts, each with its key into vkey, and the bytes of every key
 * (its quotes too) marked in in_key. A key is the result's structure, not
 * a value to copy: "duration" of "duration_minutes" made "data cleanup" a
 * "duration cleanup". */
static void find_values(copy_stage *c, size_t n, unsigned char *in_key)
{
    hx_jstr s = {.t = c->text, .n = c->n_text};
    while (hx_jstr_next(&s)) {
        if (s.is_key) memset(in_key + s.start - 1, 1, s.end - s.start + 2);
        if (s.is_value && s.end > s.start && s.end <= n) {
            c->vstarts[c->n_vstarts++] = (int32_t)s.start; /* a tool result's value */
            c->vkey[s.start] = (int32_t)s.key + 1;
        }
    }
}

int hx_copy_stage_new(const hx_vocab *v, const char *text, const char *request,
                      const char *known, float bonus, const int *in_call,
                      hx_sampler_stage *out)
{
    copy_stage *c = hx_calloc(1, sizeof *c);
    if (!c) return HX_ERR_NOMEM;
    c->v = v;
    c->bonus = bonus;
    c->in_call = in_call;
    const size_t n_conv = text ? strlen(text) : 0; /* then "\n" and known */
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "%s\n%s", text ? text : "", known ? known : "");
    c->n_text = b.oom ? 0 : b.len;
    c->text = b.oom ? NULL : hx_buf_steal(&b, NULL);
    hx_buf_free(&b);
    size_t cap = c->n_text ? c->n_text : 1;
    c->starts = hx_calloc(cap, sizeof *c->starts);
    c->addrs = hx_calloc(cap, sizeof *c->addrs);
    c->addr_end = hx_calloc(cap, sizeof *c->addr_end);
    c->paths = hx_calloc(cap, sizeof *c->paths);
    c->mark = hx_calloc(cap, sizeof *c->mark);
    c->match = hx_calloc(cap, sizeof *c->match);
    c->vstarts = hx_calloc(cap, sizeof *c->vstarts);
    c->amatch = hx_calloc(cap, sizeof *c->amatch);
    c->vkey = hx_calloc(cap, sizeof *c->vkey);
    unsigned char *in_key = hx_calloc(cap, 1);
    if (!c->text || !c->starts || !c->addrs || !c->addr_end || !c->paths || !c->mark || !c->match ||
        !c->vstarts || !c->amatch || !c->vkey || !in_key || c->n_text > INT32_MAX) {
        free(in_key);
        copy_free(c);
        return HX_ERR_NOMEM;
    }
    find_values(c, n_conv, in_key);
    for (size_t i = 0; i < c->n_text; i++) {
        if (i < n_conv && !in_key[i] && can_start(c->text, i))
            c->starts[c->n_starts++] = (int32_t)i;
        const size_t end = addr_at(c->text, c->n_text, i);
        if (end) c->addrs[c->n_addrs++] = (int32_t)i, c->addr_end[i] = (int32_t)end;
        if (end && i < n_conv) {
            c->n_conv_addrs = c->n_addrs;
            if (names_address(request, c->text + i, end - i)) c->mark[i] = ASKED, c->n_asked++;
        }
    }
    free(in_key);
    find_paths(c, n_conv);
    c->n_asked_left = c->n_asked;
    c->walked = c->named = c->wtime = c->hold[0] = c->hold[1] = -1;
    *out = (hx_sampler_stage){HX_SAMPLER_STAGE_API, "copy bias", c, copy_apply,
                              copy_accept, NULL, NULL, copy_free};
    return HX_OK;
}

/* ---- repair: a value with one word broken off a copy ---- */

/* The one word of the text v's word at s (v[s] begins it) was meant to
 * be: v[0, s) copied up to it, v from h on (h >= s, starting inside the
 * word) copied from inside it. 1 with the mended value in out, 0 when the
 * text has no such word, -1 when it has two. */
static int mend_word(const char *t, size_t n, const char *v, size_t s, size_t h, char *out,
                     size_t cap)
{
    const char *tail = v + h, *blank = strchr(tail, ' ');
    const size_t m = strlen(v), k = m - h;
    if (!is_word(tail[0])) return 0;
    if (!s && (!blank || !is_word(blank[1]))) return 0; /* one broken word alone */
    int found = 0;
    for (size_t p = 1; p + k <= n; p++) {
        if (!is_word(t[p - 1]) || !is_word(t[p]) || memcmp(t + p, tail, k) || !can_end(t, n, p + k)) continue;
        size_t w = p;
        while (w > 0 && is_word(t[w - 1])) w--;
        if (w < s || memcmp(t + w - s, v, s) || !can_start(t, w - s)) continue;
        if (p - (w - s) + k + 1 > cap) return -1;
        char cand[256];
        snprintf(cand, sizeof cand, "%.*s%s", (int)(p - (w - s)), t + w - s, tail);
        if (found && strcmp(cand, out)) return -1; /* two words it could be */
        snprintf(out, cap, "%s", cand);
        found = 1;
    }
    return found;
}

/* The one value the text gives for v, one of whose words the model broke
 * while copying the rest (see hx_copy_repair), written into out; 0 when
 * v is a copy already or no single such value exists. */
static int repaired(const char *t, size_t n, const char *v, char *out, size_t cap)
{
    const size_t m = strlen(v);
    for (size_t i = 0; i < n; i++) /* a copy already: nothing to mend */
        if (can_start(t, i) && i + m <= n && !memcmp(t + i, v, m) && can_end(t, n, i + m)) return 0;
    for (size_t s = 0; s < m; s++) {
        if (s && v[s - 1] != ' ') continue; /* s begins a word of v */
        for (size_t h = s; h < m && !isspace((unsigned char)v[h]); h++) {
            const int r = mend_word(t, n, v, s, h, out, cap);
            if (r) return r > 0;
        }
    }
    return 0;
}

/* The one address of the text with v's domain, when v is shaped like an
 * address (address bytes only, one '@', a dotted domain after it) but is
 * none of the text's: the model copied the domain and broke the part
 * before it ("emailmada@stycho.org" for ayamada@stycho.org), written
 * into out; 0 when v is an address of the text, or the text has no
 * single one with that domain. A sentence with an address in it ("Dan's
 * email is dan@x.de", to remember) is no address. */
static int address_repaired(const char *t, size_t n, const char *v, char *out, size_t cap)
{
    const char *at = strchr(v, '@');
    if (!at || strchr(at + 1, '@') || !strchr(at + 1, '.')) return 0;
    for (const char *p = v; *p; p++)
        if (!is_addr_byte(*p)) return 0;
    const size_t m = strlen(v), dn = m - (size_t)(at - v); /* "@domain" */
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t end = addr_at(t, n, i);
        if (!end || end - i <= dn || memcmp(t + end - dn, at, dn)) continue;
        if (end - i == m && !memcmp(t + i, v, m)) return 0; /* v is one */
        if (end - i >= cap) return 0;
        if (found && (strlen(out) != end - i || memcmp(out, t + i, end - i))) return 0; /* two */
        snprintf(out, cap, "%.*s", (int)(end - i), t + i);
        found = 1;
    }
    return found;
}

int hx_copy_repair(const char *text, cJSON *args)
{
    int fixed = 0;
    const size_t n = text ? strlen(text) : 0;
    for (cJSON *a = args ? args->child : NULL; n && a; a = a->next) {
        const char *k = a->string ? a->string : "";
        if (!cJSON_IsString(a) || !strcmp(k, "body") || !strcmp(k, "to") || !strcmp(k, "cc") ||
            !strcmp(k, "bcc") || strlen(a->valuestring) >= 200)
            continue;
        char out[256];
        if ((address_repaired(text, n, a->valuestring, out, sizeof out) ||
             repaired(text, n, a->valuestring, out, sizeof out)) &&
            cJSON_SetValuestring(a, out))
            fixed++;
    }
    return fixed;
}

