/* ground.c: grounded answers, a sampler stage for the answer's text: every
 * fact an answer states (a number, a time, a date, an address, a file name,
 * a name, a day) is a copy of the conversation's text, and every action it
 * claims ("Added", "Sent") is one the turn's calls did; markup never
 * reaches the answer.
 *
 * Small models restate tool results wrongly: a calendar result held the
 * right five events and the answer invented titles and times; a file
 * search returned the line with the figure and the answer named a file
 * that does not exist. Large models do it too, less often. So outside tool
 * calls, the text is read as words (runs of letters, digits and the
 * punctuation inside names, times, dates, addresses and paths). A word is
 * a fact when it holds a digit, '@', '/', '_' or a '.' or ':' inside it,
 * or begins with a capital and does not begin a sentence ("I" aside); a
 * day word (today, tomorrow, a weekday, a capitalised month) is one
 * wherever it stands. Each such word must be a copy of a word of the
 * conversation (letters' case aside), starting where a word starts there
 * and ending where one ends (a time "14:00" ends inside "14:00:00"):
 * every token that would leave every copy, or end the word short of a
 * copy's end, is masked, so the model phrases without the fact it cannot
 * ground. The model's ordinary words are untouched. The conversation is
 * given with aliases derived explicitly: for an ISO date its weekday and
 * month name ("2027-03-11": "Thursday", "11 March", "March 11"), for a
 * time its 12-hour forms ("14:00": "2 PM", "2pm", "2:00 PM"), and for the
 * dates of "Now:" the words "today", "tomorrow" and "yesterday". A number
 * copied from before an "AM" or "PM" (an alias's or the text's own) must
 * be followed by it: "2:00" alone would read as 02:00, and "12:00" of
 * midnight's "12:00 AM" as noon.
 *
 * A name a tool result gives (an event's title, a mail's subject or
 * sender, a file's name or path, a place) is said whole: a copy that
 * begins with a fact word and runs on into such a name goes on, across
 * its blanks, to the name's end ("Check-in with Tomás", not "Check-in
 * with" nor "Check"), unless the same words stand elsewhere too, free
 * (the request's, a mail's text); a copy of a name ends with it, not on
 * into the result's syntax. A small model otherwise starts one title and
 * ends in another's words. A result's keys ("subject") are syntax, no
 * copy ("from Subject"). An address is copied whole, never to a shorter
 * domain ("kenta@kansai-robotics.co" of ".co.jp"), and the ids results
 * give their items (an event's uid, a mail's id) are no source at all.
 * An event a result marks cancelled is named only as "<title>
 * (cancelled)", and the words of a name copied whole are the name's, no
 * claim of the turn's. A name may end in a bracket ("Vendor visit
 * (Omron)"), and a copy of the bracket's words alone ends before it.
 *
 * Claim words ("added", "booked", "sent", "queued", "noted", ...,
 * "declined") are licensed by the planner from its trace: one the turn's
 * calls did not earn (a success; the user's refusal) stands only after a
 * negation in its clause ("nothing was added") or before one ("I booked
 * nothing"). Markup (a closing "</tool_call>", "<tool_response>",
 * "<think>", "<|...|>", special tokens, "<tool_call>" in a turn that may
 * not call, and a tool result's JSON syntax: '{"', '"}', '":', '}}', '["',
 * '"]') is masked in the answer.
 *
 * Only the GROUND_TOP best tokens are judged and the others masked (a
 * sampler draws from the best few; greedy decoding is exact); when none of
 * them is allowed, every token is judged, and when none at all is (a word
 * the rules let begin and then let neither go on nor end), the turn ends
 * there where the earlier stages let it; only where they do not either
 * do the logits stay as they were: let through, a model writes on
 * ungrounded from such a dead end ("22:145-08-08T08:00:00", a time no
 * result gives). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/agent.h"

#define GROUND_TOP 64      /* tokens judged first, best first */
#define WMAX 192          /* bytes of a word the stage follows */
#define SORT_CAP 256      /* bytes compared when sorting the starts */
#define END_SCAN 4096     /* starts looked at for a word's end */
#define TAIL 16
#define NO_DAY (-(1L << 40)) /* iso_day: no date there */
#define BIND_MAX 32       /* items a clause may still be about */

/* The state of the answer's text, copied per judged token. */
typedef struct wstate {
    int in;              /* inside a word */
    int initial;         /* the word begins a sentence */
    int sentence;        /* the next word begins a sentence */
    int len;             /* bytes of the word (may exceed WMAX) */
    int blen;            /* of them up to its last letter or digit */
    int32_t lo, hi;      /* sorted starts whose text begins with the word */
    int32_t blo, bhi;    /* the same for its first blen bytes */
    int inner;           /* a '.' or ':' inside it, before a letter or digit */
    int digit, sign;     /* it holds a digit; an '@', '/' or '_' */
    int punct;           /* its last byte is punctuation */
    int poss;            /* it ends in "'s" after a letter or digit: */
    int32_t plo, phi;    /* the starts of the word before it */
    int plen;
    int utf8_left;       /* continuation bytes of a code point to come */
    int utf8_word;       /* that code point is a letter (2 bytes) */
    int neg;             /* words since the last negation (99: none) */
    int n_bind;          /* the clause's items (-1: not bound to any) */
    int32_t bind[BIND_MAX];
    int meridiem;        /* the time just written has copies only before an
                            "AM" (1) or "PM" (2): the next word must be it */
    int pending;         /* a claim no call licensed: the next word must
                            be a negation ("I booked nothing") */
    int ph;              /* a phrase: 0 none, 1 its first word, 2 a fact's */
    int32_t qlo, qhi;    /* sorted starts whose text begins with the phrase */
    int qlen;            /* bytes of the phrase */
    int qalnum;          /* its last byte is a letter or digit */
    int qstop;           /* it may stop at its last word's end */
    char w[WMAX];
    char tail[TAIL];     /* the answer's last bytes, the last one last */
} wstate;

typedef struct ground {
    const hx_vocab *v;
    const int *in_call;  /* the loop guard's (borrowed), or NULL */
    const char *trigger; /* what begins a call in this turn, or NULL */
    char *text;          /* the conversation and the aliases (owned) */
    int32_t *item;       /* per byte of text: its result item; -1 in a result
                            outside its items; 0 outside every result (owned) */
    int32_t *name_end;   /* per byte of text: the end of the name it is in
                            (a result's title, subject, ...); -1 in a
                            result's key; else 0 (owned) */
    size_t n;
    int32_t *starts;     /* where a copy may start, by their folded text */
    int32_t n_starts;
    char *claims;        /* " added booked ... ": licensed claims (owned) */
    wstate s;
    int was_call;        /* the last token was in a call */
    int ends_ok;         /* apply's: whether the word written may end now */
    signed char *verdict; /* apply's scratch (owned) */
    int32_t n_verdict;
} ground;

/* ---- bytes ---- */
static unsigned char fold(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
static int is_alnum(unsigned char c) { return isalnum(c) || c >= 0x80; }

/* A byte inside words besides letters and digits: of times, dates,
 * addresses, paths, numbers and names ("O'Brien"). */
static int is_inner(unsigned char c) { return c && strchr(".:-/@_+'#%&=~$", c) != NULL; }

/* ---- the conversation's starts, sorted by their folded text ---- */
static int cmp_start(const void *a, const void *b, void *ctx)
{
    const ground *g = ctx;
    size_t i = (size_t)*(const int32_t *)a, j = (size_t)*(const int32_t *)b;
    for (int k = 0; k < SORT_CAP; k++, i++, j++) {
        int ci = i < g->n ? fold((unsigned char)g->text[i]) : -1;
        int cj = j < g->n ? fold((unsigned char)g->text[j]) : -1;
        if (ci != cj) return ci < cj ? -1 : 1;
        if (ci < 0) break;
    }
    return 0;
}

/* Whether t[i] begins a time's seconds ("00" of "14:00:00") or its UTC
 * offset ("05:00" of "14:00:00-05:00"): no time of its own. */
static int time_tail_at(const char *t, size_t i)
{
    if (i >= 2 && t[i - 1] == ':' && isdigit((unsigned char)t[i - 2])) return 1;
    if (i < 9 || (t[i - 1] != '+' && t[i - 1] != '-')) return 0;
    const char *h = t + i - 9; /* "14:00:00" before the sign */
    return isdigit((unsigned char)h[0]) && isdigit((unsigned char)h[1]) && h[2] == ':' &&
           isdigit((unsigned char)h[3]) && isdigit((unsigned char)h[4]) && h[5] == ':' &&
           isdigit((unsigned char)h[6]) && isdigit((unsigned char)h[7]);
}

/* Where a copied word may start: a letter or digit after anything but a
 * letter, a digit, '.' or '@' (not "jp" of "tanabe-design.jp"; a digit
 * also after the 'T' of a date-time; not a time's seconds or offset), or
 * '/', '.', '~', '@', '#', '+' or '$' after a blank, a quote or a
 * bracket. */
static int can_start(const char *t, size_t i)
{
    const unsigned char c = (unsigned char)t[i], p = i ? (unsigned char)t[i - 1] : ' ';
    if ((c & 0xC0) == 0x80) return 0; /* inside a code point */
    if (isdigit(c) && time_tail_at(t, i)) return 0;
    if (is_alnum(c))
        return (!is_alnum(p) && p != '.' && p != '@') ||
               (isdigit(c) && p == 'T' && i >= 2 && isdigit((unsigned char)t[i - 2]));
    return strchr("/.~@#+$", c) && (isspace(p) || strchr("\"'([<{", p));
}

/* What text at q is (case aside, a blank before it allowed): "AM" 1,
 * "PM" 2, with a word's end after it; else 0. */
static int meridiem_at(const ground *g, size_t q)
{
    if (q < g->n && g->text[q] == ' ') q++;
    if (q + 1 >= g->n || !strchr("aApP", g->text[q]) || fold((unsigned char)g->text[q + 1]) != 'm' ||
        (q + 2 < g->n && is_alnum((unsigned char)g->text[q + 2])))
        return 0;
    return fold((unsigned char)g->text[q]) == 'a' ? 1 : 2;
}

/* Whether the copy of len bytes from start is an address cut short: it
 * holds an '@' and the text goes on with a '.', '-', '_' or '+' and a
 * letter or digit ("kenta@kansai-robotics.co" of ".co.jp": another
 * domain, or none). */
static int cuts_address(const ground *g, size_t start, size_t len)
{
    const size_t q = start + len;
    return q + 1 < g->n && g->text[q] && strchr(".-_+", g->text[q]) &&
           is_alnum((unsigned char)g->text[q + 1]) && memchr(g->text + start, '@', len);
}

/* Whether a copy of len bytes from start may end there: where no letter
 * or digit goes on (after a digit, where no digit does: "2027-03-11" of
 * "2027-03-11T14:00"), never a number before its "AM" or "PM" ("2:00"
 * of "2:00 PM" is 02:00; "12:00" of midnight's "12:00 AM" is noon), and
 * never inside an address. */
static int can_end(const ground *g, size_t start, size_t len)
{
    const size_t q = start + len;
    if (len == 0) return 0; /* no copy at all ("$." is punctuation only) */
    if (q >= g->n) return 1;
    const unsigned char next = (unsigned char)g->text[q], last = (unsigned char)g->text[q - 1];
    if (cuts_address(g, start, len)) return 0;
    return isdigit(last) ? !isdigit(next) && !meridiem_at(g, q) : !is_alnum(next);
}

/* For a copy of len bytes from start that ends a number before an "AM"
 * or "PM": 1 for "AM", 2 for "PM"; else 0. */
static int meridiem_after(const ground *g, size_t start, size_t len)
{
    const size_t q = start + len;
    return len && q < g->n && isdigit((unsigned char)g->text[q - 1]) ? meridiem_at(g, q) : 0;
}

/* Narrows [*lo, *hi) (starts sharing the word's first k bytes) to those
 * whose byte k is b. */
static void narrow(const ground *g, int32_t *lo, int32_t *hi, int k, unsigned char b)
{
    const int key = fold(b);
    int32_t a = *lo, z = *hi;
    while (a < z) { /* first with byte k >= key */
        const int32_t m = a + (z - a) / 2;
        const size_t at = (size_t)g->starts[m] + (size_t)k;
        if ((at < g->n ? fold((unsigned char)g->text[at]) : -1) < key) a = m + 1;
        else z = m;
    }
    const int32_t first = a;
    z = *hi;
    while (a < z) { /* first with byte k > key */
        const int32_t m = a + (z - a) / 2;
        const size_t at = (size_t)g->starts[m] + (size_t)k;
        if ((at < g->n ? fold((unsigned char)g->text[at]) : -1) <= key) a = m + 1;
        else z = m;
    }
    *lo = first, *hi = a;
}

/* ---- a clause's items ----
 * A tool result's list holds items (an event, a message, a file's hits):
 * the facts one clause of the answer states come from one item, or from
 * outside every result (the request, a count). Each fact word
 * with copies in items only binds the clause to those items; the next
 * fact word of the clause must then have a copy in one of them or outside
 * every result ("Lunch with Sam at 12:30": not Lunch's title with another
 * event's time, nor with the midnight that starts the list's range, nor
 * with the clock's "Now:", which a clause of its own may say). A
 * clause ends at , ; : ! ? a sentence's end, a line's end and a joining
 * word ("and", "then"). */

/* Whether the copy at start may be said in the clause so far. */
static int in_bind(const ground *g, const wstate *s, int32_t start)
{
    const int32_t it = g->item[start];
    if (!it || s->n_bind < 0) return 1;
    for (int i = 0; i < s->n_bind; i++)
        if (s->bind[i] == it) return 1;
    return 0;
}

/* Whether some start of [lo, hi) begins a copy the clause may say: one of
 * len bytes that may end there (len < 0: any copy going on). */
static int some_copy(const ground *g, const wstate *s, int32_t lo, int32_t hi, int len)
{
    if (lo >= hi) return 0;
    if (hi - lo > END_SCAN || (len < 0 && s->n_bind < 0)) return 1; /* surely */
    for (int32_t i = lo; i < hi; i++) {
        const int32_t st = g->starts[i];
        if ((len < 0 || can_end(g, (size_t)st, (size_t)len)) && in_bind(g, s, st)) return 1;
    }
    return 0;
}

/* The meridiems ("AM" 1, "PM" 2) that follow the copies of [lo, hi) (len
 * bytes) the clause may say, or'd. */
static int meridiems(const ground *g, const wstate *s, int32_t lo, int32_t hi, int len)
{
    int m = 0;
    for (int32_t i = lo; i < hi && i - lo < END_SCAN && m != 3; i++)
        if (in_bind(g, s, g->starts[i])) m |= meridiem_after(g, (size_t)g->starts[i], (size_t)len);
    return m;
}

/* Binds the clause to the items of the copies of [lo, hi) (len bytes) it
 * may say; a word with a copy outside every item, or with copies in too
 * many items, binds nothing. */
static void bind_copies(const ground *g, wstate *s, int32_t lo, int32_t hi, int len)
{
    if (hi - lo > END_SCAN) return;
    int32_t found[BIND_MAX];
    int n = 0;
    for (int32_t i = lo; i < hi; i++) {
        const int32_t st = g->starts[i];
        if (!can_end(g, (size_t)st, (size_t)len) || !in_bind(g, s, st)) continue;
        const int32_t it = g->item[st];
        if (it <= 0) return;
        int k = 0;
        while (k < n && found[k] != it) k++;
        if (k < n) continue;
        if (n == BIND_MAX) return;
        found[n++] = it;
    }
    if (!n) return;
    memcpy(s->bind, found, (size_t)n * sizeof *found);
    s->n_bind = n;
}

/* ---- words ---- */
static const char *const day_words[] = {"today", "tomorrow", "tonight", "yesterday",
                                        "monday", "tuesday", "wednesday", "thursday",
                                        "friday", "saturday", "sunday"};
static const char *const month_words[] = {"january", "february", "march", "april", "may",
                                          "june", "july", "august", "september", "october",
                                          "november", "december"};
static const char *const claim_words[] = {
    "added", "created", "booked", "scheduled", "blocked", "invited", "sent", "queued",
    "emailed", "mailed", "replied", "answered", "forwarded", "drafted", "noted", "remembered",
    "saved", "stored", "moved", "rescheduled", "updated", "changed", "cancelled", "canceled",
    "deleted", "removed", "forgotten", "declined"};
static const char *const negations[] = {"not", "no", "never", "nothing", "none", "nor",
                                        "neither", "cannot", "without", "nobody"};
static const char *const after_claim[] = {"nothing", "no", "none", "neither"};
static const char *const joins[] = {"and", "or", "then", "but", "plus", "also", "while",
                                    "whereas"};

/* Whether w[0, n) begins one of the words a claim no call licensed may be
 * followed by (or, whole, is one). */
static int after_claim_ok(const char *w, size_t n, int whole)
{
    for (size_t i = 0; i < sizeof after_claim / sizeof *after_claim; i++)
        if (strlen(after_claim[i]) >= n && !strncasecmp(w, after_claim[i], n) &&
            (!whole || strlen(after_claim[i]) == n))
            return 1;
    return 0;
}

/* Whether the word so far (whole: the word), punctuation after it aside,
 * begins (is) the "AM" or "PM" the time before it needs, case aside. */
static int meridiem_ok(const wstate *s, int whole)
{
    if (s->blen > 2 || (whole && s->blen != 2)) return 0;
    const int first = s->blen < 1 ? 0 : fold((unsigned char)s->w[0]);
    if (first && !(first == 'a' ? s->meridiem & 1 : first == 'p' ? s->meridiem & 2 : 0)) return 0;
    return s->blen < 2 || fold((unsigned char)s->w[1]) == 'm';
}

static int in_list(const char *w, size_t n, const char *const *list, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (strlen(list[i]) == n && !strncasecmp(w, list[i], n)) return 1;
    return 0;
}
#define IN(w, n, list) in_list(w, n, list, sizeof list / sizeof *list)

int hx_ground_is_claim(const char *w, size_t n) { return IN(w, n, claim_words); }

static int upper_initial(const wstate *s)
{
    const unsigned char c = (unsigned char)s->w[0], d = (unsigned char)s->w[1];
    return (c >= 'A' && c <= 'Z') || (c == 0xC3 && d >= 0x80 && d <= 0x9E && d != 0x97);
}

/* "I", "I'm", "I'll": not a name. */
static int pronoun_i(const wstate *s) { return s->w[0] == 'I' && (s->len == 1 || s->w[1] == '\''); }

/* Whether the word so far is a fact whatever follows. */
static int fact_word(const wstate *s)
{
    if (s->digit || s->sign || s->inner) return 1;
    return upper_initial(s) && !s->initial && !pronoun_i(s);
}

/* The word without its trailing punctuation is a day word (a month only
 * capitalised: "may" is a verb). */
static int day_word(const wstate *s)
{
    const size_t n = (size_t)s->blen;
    return s->len <= WMAX && (IN(s->w, n, day_words) || (upper_initial(s) && IN(s->w, n, month_words)));
}

static int claim_word(const wstate *s)
{
    return s->len <= WMAX && IN(s->w, (size_t)s->blen, claim_words);
}

/* Whether the word just written is part of a fact's phrase every copy of
 * which lies in a result's name: a word of the name, no claim of the
 * turn's ("Pilates (cancelled)", a title "Cancelled: Q3 offsite"). */
static int in_name_copy(const ground *g, const wstate *s)
{
    if (s->ph != 2 || s->qhi <= s->qlo || s->qhi - s->qlo > END_SCAN) return 0;
    for (int32_t i = s->qlo; i < s->qhi; i++) {
        const int32_t st = g->starts[i];
        if (g->name_end[st] <= 0 || st + s->qlen > g->name_end[st]) return 0;
    }
    return 1;
}

static int licensed(const ground *g, const wstate *s)
{
    if (s->neg <= 3 || in_name_copy(g, s)) return 1; /* "nothing was added", "not sent" */
    char w[40];
    if (s->blen + 3 > (int)sizeof w) return 0;
    w[0] = ' ';
    for (int i = 0; i < s->blen; i++) w[i + 1] = (char)fold((unsigned char)s->w[i]);
    w[s->blen + 1] = ' ', w[s->blen + 2] = 0;
    return g->claims && strstr(g->claims, w) != NULL;
}

/* Whether the word is an hour and a colon ("12:", "9:"): a time cut
 * short, never a number and its sentence's colon. */
static int hour_colon(const wstate *s)
{
    if (s->len != s->blen + 1 || s->blen < 1 || s->blen > 2 || s->w[s->blen] != ':') return 0;
    return isdigit((unsigned char)s->w[0]) && isdigit((unsigned char)s->w[s->blen - 1]);
}

/* The copies that ground the word ended here, the clause allowing: of
 * the word whole, else without its trailing punctuation (the sentence's:
 * "14:00.", not "12:"), else without "'s" ("Dana's" of "Dana"): their
 * starts' range and length into *lo, *hi, *len; 0 when there are none. */
static int grounding(const ground *g, const wstate *s, int32_t *lo, int32_t *hi, int *len)
{
    if (some_copy(g, s, s->lo, s->hi, s->len)) return *lo = s->lo, *hi = s->hi, *len = s->len, 1;
    if (s->blen < s->len && !hour_colon(s) && some_copy(g, s, s->blo, s->bhi, s->blen))
        return *lo = s->blo, *hi = s->bhi, *len = s->blen, 1;
    if (s->poss && some_copy(g, s, s->plo, s->phi, s->plen))
        return *lo = s->plo, *hi = s->phi, *len = s->plen, 1;
    return 0;
}

/* Whether the word, ended here, is grounded (or needs not be). */
static int word_ends_ok(const ground *g, const wstate *s)
{
    if (s->len > WMAX) return 1; /* too long to follow */
    if (!fact_word(s) && !day_word(s)) return 1;
    int32_t lo, hi;
    int len;
    return grounding(g, s, &lo, &hi, &len);
}

/* Binds the clause to the items of the fact just ended (its grounding
 * copies). */
static void bind_word(const ground *g, wstate *s)
{
    int32_t lo, hi;
    int len;
    if (s->len <= WMAX && (fact_word(s) || day_word(s)) && grounding(g, s, &lo, &hi, &len))
        bind_copies(g, s, lo, hi, len);
}

/* Words that begin with a claim word and claim nothing. */
static const char *const claim_starts[] = {"sentences", "sentenced", "sentimental", "sentiments",
                                           "sentinels", "sentient", "sentries", "sentry"};

/* Whether b would glue a word on to a whole claim word ("Added" of
 * "Addeda in 14.", "Bookedstartam", "Booked're", "Noted-ish",
 * "Cancelled/voyage", "Sentdreonas"): a reader reads the claim. The word
 * so far begins with a claim word; with b it must be the start of one of
 * claim_starts ("sentence"). A sentence's '.' or a colon may follow it. */
static int glued_claim(const wstate *s, unsigned char b)
{
    if (s->len < 4 || s->len >= WMAX || !(isalnum(b) || (b && strchr("'-_/@", b)))) return 0;
    size_t c = 0;
    while (c < sizeof claim_words / sizeof *claim_words &&
           (fold((unsigned char)s->w[0]) != (unsigned char)claim_words[c][0] ||
            (size_t)s->len < strlen(claim_words[c]) ||
            strncasecmp(s->w, claim_words[c], strlen(claim_words[c]))))
        c++;
    if (c == sizeof claim_words / sizeof *claim_words) return 0;
    for (size_t i = 0; i < sizeof claim_starts / sizeof *claim_starts; i++)
        if ((size_t)s->len < strlen(claim_starts[i]) &&
            !strncasecmp(s->w, claim_starts[i], (size_t)s->len) &&
            fold(b) == (unsigned char)claim_starts[i][s->len])
            return 0;
    return 1;
}

/* Whether the word so far can still become a grounded one: a copy goes
 * on, or one punctuation byte follows a copy that ends there (the
 * sentence's: "14:00.", or an apostrophe: "Dana's"; not an hour's colon,
 * "12:", which a copy must go on from). */
static int word_goes_on(const ground *g, const wstate *s)
{
    if (s->len > WMAX || !fact_word(s) || some_copy(g, s, s->lo, s->hi, -1)) return 1;
    if (s->poss) return some_copy(g, s, s->plo, s->phi, -1);
    return s->punct && s->len == s->blen + 1 && !hour_colon(s) &&
           some_copy(g, s, s->blo, s->bhi, s->blen);
}

static void word_start(const ground *g, wstate *s)
{
    s->in = 1, s->initial = s->sentence, s->sentence = 0;
    s->len = s->blen = s->inner = s->digit = s->sign = s->punct = s->poss = 0;
    s->lo = s->blo = 0, s->hi = s->bhi = g->n_starts;
}

static void word_byte(const ground *g, wstate *s, unsigned char b)
{
    if (s->len < WMAX) {
        s->w[s->len] = (char)b;
        narrow(g, &s->lo, &s->hi, s->len, b);
    }
    s->len++;
    if (is_alnum(b)) {
        const int ps = (b == 's' || b == 'S') && s->len >= 3 && s->len <= WMAX &&
                       s->w[s->len - 2] == '\'' && s->blen == s->len - 2;
        if (ps) s->plo = s->blo, s->phi = s->bhi, s->plen = s->blen;
        s->poss = ps;
        if (s->punct && s->len > 1 && s->blen < WMAX)
            s->inner |= s->w[s->blen] == '.' || s->w[s->blen] == ':';
        s->blen = s->len, s->blo = s->lo, s->bhi = s->hi, s->punct = 0;
        s->digit |= isdigit(b) != 0;
    } else {
        s->sign |= b == '@' || b == '/' || b == '_';
        s->punct = 1;
    }
}

/* ---- names said whole ----
 * A phrase is the answer's text from a word's start on while it is a copy
 * of the conversation's (across blanks); one whose first word is a fact
 * may stop only where one of its copies may: at a word's end outside
 * every name, or at its name's end. */

/* Whether a copy from st to q of a name that ends at end ends the name:
 * there, or before the closing brackets that end it when the copy opened
 * none ("Omron" of "Vendor visit (Omron)"; not "Vendor visit (Omron"). */
static int ends_name(const ground *g, int32_t st, int32_t q, int32_t end)
{
    if (q >= end || !strchr(")]", g->text[q])) return q == end;
    int open = 0;
    for (int32_t i = st; i < q; i++)
        open += (g->text[i] == '(' || g->text[i] == '[') - (g->text[i] == ')' || g->text[i] == ']');
    while (open <= 0 && q < end && strchr(")]", g->text[q])) q++;
    return q == end;
}

/* Whether the phrase may stop after its qlen bytes: where one of its
 * copies ends a name, or (names_only 0) may end outside every name. A
 * name may end in punctuation ("Vendor visit (Omron)"), where only the
 * name's end is looked for. */
static int phrase_may_stop(const ground *g, const wstate *s, int names_only)
{
    if (s->qhi - s->qlo > END_SCAN) return 1; /* surely */
    for (int32_t i = s->qlo; i < s->qhi; i++) {
        const int32_t st = g->starts[i], end = g->name_end[st];
        if (end > 0 ? ends_name(g, st, st + s->qlen, end)
                    : !names_only && can_end(g, (size_t)st, (size_t)s->qlen))
            return 1;
    }
    return 0;
}

/* Whether some start of [lo, hi) begins a copy of len bytes that does
 * not run past the end of the name it is in: a name's copy ends with it
 * (not on into the result's syntax). */
static int some_within(const ground *g, int32_t lo, int32_t hi, int len)
{
    if (hi - lo > END_SCAN) return 1; /* surely */
    for (int32_t i = lo; i < hi; i++) {
        const int32_t st = g->starts[i], end = g->name_end[st];
        if (end <= 0 || st + len <= end) return 1;
    }
    return 0;
}

/* Whether the phrase may stop here, at the turn's end or before a byte
 * that does not go on with it (alnum: a letter or digit going on with
 * the word, which stops it at its last word's end); s has the word
 * before that byte. */
static int phrase_stops(const ground *g, const wstate *s, int alnum)
{
    const int fact = s->ph == 2 || (s->ph == 1 && s->in && s->len <= WMAX && fact_word(s));
    if (!fact) return 1;
    return s->qalnum && !alnum ? phrase_may_stop(g, s, 0) : s->qstop || phrase_may_stop(g, s, 1);
}

/* One byte of the answer for the phrase (word: whether b is a word's, as
 * step_byte has it; s has the word before b); 0 when it stops a fact's
 * phrase short of a name's end. */
static int phrase_byte(const ground *g, wstate *s, unsigned char b, int word)
{
    const int alnum = word && is_alnum(b);
    if (!s->ph) {
        if (!word || s->in) return 1; /* a phrase begins with a word */
        s->ph = 1, s->qlo = 0, s->qhi = g->n_starts, s->qlen = 0, s->qalnum = 0, s->qstop = 1;
    }
    if (s->qlen >= SORT_CAP) return s->ph = 0, 1; /* too long to follow */
    if (s->qalnum && !alnum) s->qstop = phrase_may_stop(g, s, 0); /* a word (or part) ends */
    if (s->ph == 1 && !word) s->ph = s->len <= WMAX && fact_word(s) ? 2 : 0; /* its first */
    if (!s->ph) return 1;
    int32_t lo = s->qlo, hi = s->qhi;
    narrow(g, &lo, &hi, s->qlen, b);
    if (some_within(g, lo, hi, s->qlen + 1)) {
        s->qlo = lo, s->qhi = hi, s->qlen++, s->qalnum = alnum;
        return 1;
    }
    /* a fact's first word that no copy goes on with here ends here:
     * "Pilates." of "Pilates (cancelled)", the '.' a sentence's */
    const int first_ends = s->ph == 1 && !alnum && s->in && s->len <= WMAX && fact_word(s);
    const int ok = (s->ph != 2 && !first_ends) || s->qstop || (!s->qalnum && phrase_may_stop(g, s, 1));
    const int begun = s->qlen > 0;
    s->ph = 0;
    return ok && (!word || s->in || !begun || phrase_byte(g, s, b, word)); /* b may begin one */
}

/* Whether the word just ended is a negation; a word longer than the
 * buffer (WMAX bytes kept) is none. */
static int negation(const wstate *s)
{
    const size_t n = (size_t)s->blen;
    if (s->len > WMAX || n > WMAX) return 0;
    return IN(s->w, n, negations) || (n > 3 && !strncasecmp(s->w + n - 3, "n't", 3));
}

/* The word ends (at a separator byte b, or the turn's end: 0); known:
 * whether it may end there when already known (else -1). A claim no call
 * licensed and no negation before it stands only before a blank and a
 * negation ("I booked nothing"). */
static int word_end(const ground *g, wstate *s, unsigned char b, int known)
{
    if (!s->in) return !(s->pending || s->meridiem) || b == ' ';
    int ok = known >= 0 ? known : word_ends_ok(g, s);
    if (s->meridiem && (s->len > WMAX || !meridiem_ok(s, 1))) ok = 0;
    s->meridiem = 0;
    if (!ok && b == ' ' && s->digit && s->len == s->blen && s->len <= WMAX)
        ok = (s->meridiem = meridiems(g, s, s->lo, s->hi, s->len)) != 0; /* "2:00" of "2:00 PM" */
    if (ok) bind_word(g, s);
    if (s->pending && (s->len > WMAX || !after_claim_ok(s->w, (size_t)s->blen, 1))) ok = 0;
    s->pending = 0;
    if (claim_word(s) && !licensed(g, s)) {
        if (b == ' ' && s->len == s->blen) s->pending = 1;
        else ok = 0;
    }
    s->in = 0;
    s->neg = negation(s) ? 0 : s->neg < 99 ? s->neg + 1 : 99;
    const char last = s->len && s->len <= WMAX ? s->w[s->len - 1] : 0;
    if (last == '.' || b == '!' || b == '?' || b == '\n') s->sentence = 1;
    if (s->sentence || b == ',' || b == ';' || b == ':' || last == ':') {
        s->neg = 99, s->n_bind = -1; /* a clause ends */
    }
    if (s->len <= WMAX && IN(s->w, (size_t)s->blen, joins)) s->n_bind = -1;
    return ok;
}

/* Whether the turn may end here: the word written ends grounded (known:
 * as word_end's) and nothing it began waits for a word (a negation after
 * an unlicensed claim, an AM or PM after a time). s is changed. */
static int may_end(const ground *g, wstate *s, int known)
{
    const int whole = phrase_stops(g, s, 0);
    return word_end(g, s, 0, known) && !s->pending && !s->meridiem && whole;
}

/* One byte of the answer; 0 when it makes an ungrounded fact. known: as
 * word_end's, for the word it may end. */
static int step_byte(const ground *g, wstate *s, unsigned char b, int known)
{
    int word;
    if (s->utf8_left) {
        s->utf8_left--;
        word = s->utf8_word;
    } else if (b >= 0xC0) {
        s->utf8_left = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
        s->utf8_word = b < 0xE0; /* Latin, Greek, Cyrillic letters; not CJK or quotes */
        word = s->utf8_word;
    } else {
        /* a ':' joins digits ("14:00"), not words ("files:notes.md") */
        const int colon_in = b != ':' || (s->len > 0 && s->len <= WMAX && isdigit((unsigned char)s->w[s->len - 1]));
        word = isalnum(b) || (s->in && is_inner(b) && colon_in) || (!s->in && strchr("/~@#$", b) && b);
    }
    memmove(s->tail, s->tail + 1, TAIL - 1);
    s->tail[TAIL - 1] = (char)b;
    if (!phrase_byte(g, s, b, word)) return 0;
    if (!word) {
        const int ok = word_end(g, s, b, known);
        if (b == '!' || b == '?' || b == '\n') s->sentence = 1;
        if (b && strchr(",;:!?&\n", b)) s->n_bind = -1; /* a clause ends */
        return ok;
    }
    if (s->in && glued_claim(s, b)) return 0;
    if (!s->in) word_start(g, s);
    word_byte(g, s, b);
    if (s->pending && (s->len > WMAX || !after_claim_ok(s->w, (size_t)s->blen, 0))) return 0;
    if (s->meridiem && (s->len > WMAX || !meridiem_ok(s, 0))) return 0;
    return word_goes_on(g, s);
}

/* ---- markup ---- */
static const char *const markup[] = {HX_TOOL_CALL_CLOSE, "<tool_response>", "</tool_response>",
                                     "<think>", "</think>", "<|", HX_TOOL_CALL_OPEN};

/* Pairs of JSON syntax that a tool result has and prose does not: an
 * answer copying a result's raw text ('queued"}} have 3 events', seen
 * from hearth-tiny) is masked like markup. */
static const char *const json_pairs[] = {"{\"", "\"}", "[\"", "\"]", "}}", "\":"};

/* Whether the token's bytes (buf[TAIL, len), the tail before them) close
 * such a pair; in a Llama turn that may call, only once the text has
 * begun (before it, a leading '{' begins a call). */
static int json_at(const ground *g, const char *buf, size_t len)
{
    size_t first = 0;
    while (first < TAIL && (!buf[first] || isspace((unsigned char)buf[first]))) first++;
    if (first == TAIL && g->trigger && !strcmp(g->trigger, HX_TOOL_CALL_PYTHON)) return 0;
    for (size_t i = TAIL - 1; i + 1 < len; i++)
        for (size_t k = 0; k < sizeof json_pairs / sizeof *json_pairs; k++)
            if (buf[i] == json_pairs[k][0] && buf[i + 1] == json_pairs[k][1]) return 1;
    return 0;
}

/* How the bytes at p (n of them, the answer's tail before them) stand to
 * markup: -1 they write some (or start it: two bytes or more of a tag),
 * 1 they begin the turn's call trigger (the grammar's business from
 * there), 0 neither. *upto gets how many bytes come before the trigger. */
static int markup_at(const ground *g, const char *tail, const char *p, size_t n, size_t *upto)
{
    char buf[TAIL + 64];
    const size_t k = n < 64 ? n : 64;
    memcpy(buf, tail, TAIL);
    memcpy(buf + TAIL, p, k);
    const size_t len = TAIL + k;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '<') continue;
        const size_t rest = len - i, tl = g->trigger ? strlen(g->trigger) : 0;
        if (tl && !strncmp(buf + i, g->trigger, rest < tl ? rest : tl) && (rest < tl || i + tl > TAIL)) {
            *upto = i >= TAIL ? i - TAIL : 0; /* the trigger, maybe begun before */
            return 1;
        }
        for (size_t m = 0; m < sizeof markup / sizeof *markup; m++) {
            const size_t ml = strlen(markup[m]), c = rest < ml ? rest : ml;
            if (c >= 2 && i + c > TAIL && !strncmp(buf + i, markup[m], c) && (c == ml || i + c == len))
                return -1;
        }
    }
    return json_at(g, buf, len) ? -1 : 0;
}

/* Whether token t keeps the answer grounded, from state s (not changed). */
static int judge(const ground *g, int32_t t)
{
    size_t n = 0;
    const char *p = hx_vocab_piece(g->v, t, &n);
    wstate s = g->s;
    if (hx_vocab_is_eog(g->v, t)) return may_end(g, &s, g->ends_ok);
    size_t upto = n;
    const int m = p ? markup_at(g, s.tail, p, n, &upto) : -1;
    if (m < 0 || (hx_vocab_is_special(g->v, t) && m != 1)) return 0;
    for (size_t i = 0; i < upto; i++)
        if (!step_byte(g, &s, (unsigned char)p[i], i ? -1 : g->ends_ok)) return 0;
    if (m == 1) /* the trigger: a word before it ends at its '<' */
        return upto < n && p[upto] == '<'
                   ? phrase_stops(g, &s, 0) && word_end(g, &s, '<', upto ? -1 : g->ends_ok)
                   : 1;
    /* a day word written whole: judged now, not at its end */
    return !s.in || s.utf8_left || !day_word(&s) || word_ends_ok(g, &s);
}

/* The k best finite tokens of logits, best first, into top; how many. */
static int top_tokens(const float *logits, int32_t n_vocab, int32_t *top, int k)
{
    int n = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        if (!isfinite(logits[t]) || (n == k && logits[t] <= logits[top[n - 1]])) continue;
        int i = n < k ? n++ : n - 1;
        for (; i > 0 && logits[top[i - 1]] < logits[t]; i--) top[i] = top[i - 1];
        top[i] = t;
    }
    return n;
}

/* Keeps the tokens judged allowed, masks the others (none left: all stay). */
static void keep_allowed(ground *g, float *logits, int32_t n_vocab, const int32_t *top, int n_top)
{
    float kept[GROUND_TOP];
    int any = 0;
    for (int i = 0; i < n_top; i++) any |= g->verdict[i] = (signed char)judge(g, top[i]);
    if (any) {
        for (int i = 0; i < n_top; i++) kept[i] = logits[top[i]];
        for (int32_t t = 0; t < n_vocab; t++) logits[t] = -INFINITY;
        for (int i = 0; i < n_top; i++)
            if (g->verdict[i]) logits[top[i]] = kept[i];
        return;
    }
    int32_t left = 0; /* none of the best: every token is judged */
    for (int32_t t = 0; t < n_vocab; t++)
        left += g->verdict[t] = (signed char)(isfinite(logits[t]) && judge(g, t));
    for (int32_t t = 0; !left && t < n_vocab; t++) /* none at all: the turn ends */
        left += g->verdict[t] = (signed char)(isfinite(logits[t]) && hx_vocab_is_eog(g->v, t));
    for (int32_t t = 0; left && t < n_vocab; t++)
        if (!g->verdict[t]) logits[t] = -INFINITY;
}

static int ground_apply(void *ctx, float *logits, int32_t n_vocab)
{
    ground *g = ctx;
    if (g->in_call && *g->in_call) return HX_OK;
    if (g->n_verdict < n_vocab) {
        signed char *v = hx_realloc(g->verdict, (size_t)n_vocab);
        if (!v) return HX_ERR_NOMEM;
        g->verdict = v, g->n_verdict = n_vocab;
    }
    int32_t top[GROUND_TOP];
    const int n_top = top_tokens(logits, n_vocab, top, GROUND_TOP);
    if (!n_top) return HX_OK;
    g->ends_ok = !g->s.in || g->s.utf8_left || word_ends_ok(g, &g->s); /* once, not per token */
    keep_allowed(g, logits, n_vocab, top, n_top);
    return HX_OK;
}

static int ground_accept(void *ctx, int32_t token)
{
    ground *g = ctx;
    size_t n = 0;
    const char *p = hx_vocab_is_special(g->v, token) ? NULL : hx_vocab_piece(g->v, token, &n);
    const int call = g->in_call && *g->in_call;
    if (call || g->was_call) { /* a call (its closing tag too): text goes on after it */
        g->was_call = call;
        g->s.in = g->s.ph = 0, g->s.sentence = 1, g->s.n_bind = -1;
        memset(g->s.tail, 0, TAIL);
        return HX_OK;
    }
    for (size_t i = 0; p && i < n; i++) step_byte(g, &g->s, (unsigned char)p[i], -1);
    return HX_OK;
}

static void ground_free(void *ctx)
{
    ground *g = ctx;
    if (!g) return;
    free(g->text);
    free(g->item);
    free(g->name_end);
    free(g->starts);
    free(g->claims);
    free(g->verdict);
    free(g);
}

/* ---- the text and its aliases ---- */

/* Blanks the JSON escapes of tool results ("\n" of a file's text, "\""
 * of a quoted title): "\nTravel" starts the word "Travel". */
static void unescape_blank(char *t, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (t[i] != '\\') continue;
        if (strchr("ntrbf", t[i + 1])) t[i] = t[i + 1] = ' ', i++;
        else if (t[i + 1] == '"' || t[i + 1] == '\\' || t[i + 1] == '/') t[i] = ' ', i++;
    }
}

static int digits(const char *t, size_t n, size_t i, int k)
{
    for (int j = 0; j < k; j++)
        if (i + (size_t)j >= n || !isdigit((unsigned char)t[i + j])) return 0;
    return 1;
}

static int num(const char *t, int k)
{
    int v = 0;
    for (int j = 0; j < k; j++) v = v * 10 + t[j] - '0';
    return v;
}

/* Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
static long days_of(int y, int m, int d)
{
    y -= m <= 2;
    const long era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153u * (unsigned)(m + (m > 2 ? -3 : 9)) + 2) / 5 + (unsigned)d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long)doe - 719468;
}

static const char *const wdays[] = {"Thursday", "Friday", "Saturday", "Sunday", "Monday",
                                    "Tuesday", "Wednesday"}; /* 1970-01-01 was a Thursday */
static const char *const months[] = {"January", "February", "March", "April", "May", "June",
                                     "July", "August", "September", "October", "November",
                                     "December"};

/* The day of an ISO date at t[i] ("2027-03-11"), or LONG_MIN. */
static long iso_day(const char *t, size_t n, size_t i, int *m, int *d)
{
    if (!digits(t, n, i, 4) || i + 10 > n || t[i + 4] != '-' || !digits(t, n, i + 5, 2) ||
        t[i + 7] != '-' || !digits(t, n, i + 8, 2) || digits(t, n, i + 10, 1) ||
        (i > 0 && isdigit((unsigned char)t[i - 1])))
        return NO_DAY;
    *m = num(t + i + 5, 2), *d = num(t + i + 8, 2);
    if (*m < 1 || *m > 12 || *d < 1 || *d > 31) return NO_DAY;
    return days_of(num(t + i, 4), *m, *d);
}

static const char *ordinal(int d)
{
    return d % 10 == 1 && d != 11 ? "st" : d % 10 == 2 && d != 12 ? "nd" : d % 10 == 3 && d != 13 ? "rd" : "th";
}

/* Numbers the items of the tool results in t[0, n) (each result between
 * two HX_GROUND_RESULT bytes, made line ends here) into item[0, n): an
 * item is an object that is an element of a result's outermost list at
 * whatever depth ({"events": [{...}, {...}]}), or a result with no such
 * list whole (an event created, a mail read); its bytes get its number,
 * from 1, the other bytes of a result -1, all others 0. */
static void number_items(char *t, size_t n, int32_t *item)
{
    int32_t last = 0, cur = 0, at_start = 0;
    int result = 0, str = 0, esc = 0, depth = 0, list = -1, obj = -1;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        const char c = t[i];
        if (c == HX_GROUND_RESULT) {
            if (result && last == at_start && i > start) /* no list: the result is one */
                for (++last; start < i; start++) item[start] = last;
            t[i] = '\n', item[i] = 0;
            result = !result, str = esc = depth = 0, list = obj = -1, cur = 0;
            start = i + 1, at_start = last;
            continue;
        }
        item[i] = result ? (cur ? cur : -1) : 0;
        if (!result) continue;
        if (str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') str = 0;
            continue;
        }
        if (c == '"') str = 1;
        else if (c == '[' && ++depth && list < 0) list = depth;
        else if (c == '{' && ++depth == list + 1 && list >= 0 && obj < 0) obj = depth, item[i] = cur = ++last;
        else if (c == '}' || c == ']') {
            if (depth == obj) obj = -1, cur = 0;
            if (depth == list) list = -1;
            depth -= depth > 0;
        }
    }
}

/* Marks the clock's line ("Now: 2026-12-01T09:00:00+01:00 ...") as a
 * result's bytes outside its items (-1): its time and date may be said
 * in a clause of their own ("It is 09:00"), not of an item's ("Dentist
 * at 09:00" of a dentist at 16:00). */
static void mark_clock(const char *t, size_t n, int32_t *item)
{
    const char *now = strstr(t, "Now: ");
    if (!now || item[now - t]) return;
    for (size_t i = (size_t)(now - t); i < n && t[i] != '\n'; i++) item[i] = -1;
}

/* The keys of a result's names, said whole; of them those that hold
 * addresses ("Kwame Mensah <kwame@example.org>": the name and the
 * address are two). */
static const char *const name_keys[] = {"title", "subject", "name", "filename", "path",
                                        "location", "from", "to", "cc"};
static const char *const address_keys[] = {"from", "to", "cc"};

/* Marks the name t[a, z) (blanks around it aside) with its end. */
static void mark_name(const char *t, size_t a, size_t z, int32_t *name_end)
{
    while (a < z && isspace((unsigned char)t[a])) a++;
    while (z > a && isspace((unsigned char)t[z - 1])) z--;
    for (size_t i = a; i < z; i++) name_end[i] = (int32_t)z;
}

/* Marks the bytes of the names in t[0, n)'s results (item[] nonzero)
 * with where each name ends in name_end[] (the string values of
 * name_keys, an address key's split at '<', '>' and ','), the bytes of
 * the results' keys with -1 (no copy starts there: "from Subject"), and
 * leaves the others 0. */
static void mark_names(const char *t, size_t n, const int32_t *item, int32_t *name_end)
{
    hx_jstr s = {.t = t, .n = n};
    while (hx_jstr_next(&s)) {
        if (!item[s.start - 1] || !item[s.end]) continue; /* not a result's */
        if (s.is_key) { /* syntax, no fact */
            for (size_t q = s.start; q < s.end; q++) name_end[q] = -1;
        } else if (IN(t + s.key, s.key_len, name_keys)) {
            const int addresses = IN(t + s.key, s.key_len, address_keys);
            size_t a = s.start;
            for (size_t q = s.start; q <= s.end; q++)
                if (q == s.end || (addresses && strchr("<>,", t[q]))) mark_name(t, a, q, name_end), a = q + 1;
        }
    }
}

/* The keys whose values name an item to the tools (an event's uid, a
 * mail's id): no fact to tell the user, and no source of one. A uid
 * shaped like an address ("tobi-geburtstag@privat.lena") made the title
 * "Tobis Geburtstag" an address in an answer. */
static const char *const id_keys[] = {"uid", "id"};

/* Blanks the values of id_keys in t[0, n)'s results (item[] nonzero). */
static void blank_ids(char *t, size_t n, const int32_t *item)
{
    hx_jstr s = {.t = t, .n = n};
    while (hx_jstr_next(&s))
        if (s.is_value && item[s.start - 1] && IN(t + s.key, s.key_len, id_keys))
            memset(t + s.start, ' ', s.end - s.start);
}

/* An event a result marks cancelled ("status": "cancelled") is named
 * only as such: its title's source is a line "<title> (cancelled)" after
 * the text, one name said whole, and the title in the result is blanked:
 * named alone, a cancelled event reads as one that takes place ("You have
 * Pilates" of a day whose only event is cancelled). Appends the lines to
 * out (their items to items, their spans as int32_t pairs to spans) and
 * blanks the titles in t[0, n) and in out, which begins with its copy; a
 * blanked title is no name. */
#define CANCELLED_MAX 64 /* cancelled items followed per text */
static const char cancelled_mark[] = " (cancelled)";
static void name_cancelled(char *t, size_t n, const int32_t *item, int32_t *name_end, hx_buf *out,
                           hx_buf *items, hx_buf *spans)
{
    int32_t gone[CANCELLED_MAX];
    int n_gone = 0;
    hx_jstr s = {.t = t, .n = n};
    while (hx_jstr_next(&s))
        if (s.is_value && item[s.start - 1] > 0 && n_gone < CANCELLED_MAX &&
            hx_jstr_under(&s, "status") && s.end - s.start == 9 && !memcmp(t + s.start, "cancelled", 9))
            gone[n_gone++] = item[s.start - 1];
    s = (hx_jstr){.t = t, .n = n};
    while (n_gone && hx_jstr_next(&s)) {
        int k = 0;
        while (k < n_gone && gone[k] != item[s.start - 1]) k++;
        if (!s.is_value || k == n_gone || !hx_jstr_under(&s, "title") || s.escaped || s.end == s.start)
            continue;
        hx_buf_putc(out, '\n');
        hx_buf_append(items, &item[s.start], sizeof *item);
        const int32_t span[2] = {(int32_t)out->len,
                                 (int32_t)(out->len + s.end - s.start + sizeof cancelled_mark - 1)};
        hx_buf_append(out, t + s.start, s.end - s.start);
        hx_buf_puts(out, cancelled_mark);
        for (int32_t q = span[0]; q < span[1]; q++) hx_buf_append(items, &item[s.start], sizeof *item);
        hx_buf_append(spans, span, sizeof span);
        memset(t + s.start, ' ', s.end - s.start);
        memset(name_end + s.start, 0, (s.end - s.start) * sizeof *name_end);
        if (!out->oom) memset(out->data + s.start, ' ', s.end - s.start);
    }
}

/* Appends to out the aliases of the dates and times in t[0, n) (item[]
 * gives each byte's item): each once per item, its bytes' items to
 * items (int32_t each). */
static void add_aliases(const char *t, size_t n, const int32_t *item, hx_buf *out, hx_buf *items)
{
    long today = NO_DAY;
    const char *now = strstr(t, "Now: ");
    int m, d;
    if (now) today = iso_day(t, n, (size_t)(now - t) + 5, &m, &d);
    hx_buf seen;
    hx_buf_init(&seen);
    for (size_t i = 0; i + 5 <= n; i++) {
        char key[32];
        const size_t before = out->len;
        const long day = iso_day(t, n, i, &m, &d);
        if (day > NO_DAY) {
            snprintf(key, sizeof key, "|%d %.10s", (int)item[i], t + i);
            if (seen.data && strstr(seen.data, key)) continue;
            hx_buf_puts(&seen, key);
            hx_buf_printf(out, "\n%s, %d %s, %s %d, %d%s", wdays[((day % 7) + 7) % 7], d,
                          months[m - 1], months[m - 1], d, d, ordinal(d));
            if (day == today) hx_buf_puts(out, " today");
            if (day == today + 1) hx_buf_puts(out, " tomorrow");
            if (day == today - 1) hx_buf_puts(out, " yesterday");
        } else {
            if (!digits(t, n, i, 2) || t[i + 2] != ':' || !digits(t, n, i + 3, 2) ||
                digits(t, n, i + 5, 1) || (i > 0 && isdigit((unsigned char)t[i - 1])) ||
                time_tail_at(t, i))
                continue;
            const int h = num(t + i, 2), mi = num(t + i + 3, 2);
            if (h > 23 || mi > 59) continue;
            snprintf(key, sizeof key, "|%d %.5s", (int)item[i], t + i);
            if (seen.data && strstr(seen.data, key)) continue;
            hx_buf_puts(&seen, key);
            const int h12 = h % 12 ? h % 12 : 12;
            const char *ap = h < 12 ? "AM" : "PM", *apl = h < 12 ? "am" : "pm";
            hx_buf_printf(out, "\n%d:%02d %s %d:%02d%s", h12, mi, ap, h12, mi, apl);
            if (!mi) hx_buf_printf(out, " %d %s %d%s", h12, ap, h12, apl);
            if (h < 10) hx_buf_printf(out, " %d:%02d", h, mi); /* "9:30" of "09:30" */
        }
        for (size_t k = before; k < out->len; k++) hx_buf_append(items, &item[i], sizeof *item);
    }
    hx_buf_free(&seen);
}

/* The claims, one ' '-separated lowercase line with blanks at both ends. */
static char *claim_line(const char *claims)
{
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_putc(&b, ' ');
    for (const char *c = claims ? claims : ""; *c; c++)
        hx_buf_putc(&b, isspace((unsigned char)*c) || *c == ',' ? ' ' : (char)fold((unsigned char)*c));
    hx_buf_putc(&b, ' ');
    return b.oom ? (hx_buf_free(&b), NULL) : hx_buf_steal(&b, NULL);
}

/* Reads the conversation's text into g: the text and its aliases, each
 * byte's item and name's end; -1 when out of memory. */
static int read_text(ground *g, const char *text)
{
    const size_t n0 = text ? strlen(text) : 0;
    char *t0 = hx_malloc(n0 + 1);
    int32_t *i0 = hx_calloc(n0 + 1, sizeof *i0);
    int32_t *e0 = hx_calloc(n0 + 1, sizeof *e0);
    hx_buf b, items, spans;
    hx_buf_init(&b);
    hx_buf_init(&items);
    hx_buf_init(&spans);
    if (t0 && i0 && e0) {
        memcpy(t0, text ? text : "", n0 + 1);
        number_items(t0, n0, i0);
        mark_clock(t0, n0, i0);
        blank_ids(t0, n0, i0);
        mark_names(t0, n0, i0, e0);
        hx_buf_append(&b, t0, n0);
        hx_buf_append(&items, i0, n0 * sizeof *i0);
        if (!b.oom) name_cancelled(t0, n0, i0, e0, &b, &items, &spans);
        add_aliases(t0, n0, i0, &b, &items);
        hx_buf_putc(&b, '\n');
        hx_buf_append(&items, &i0[n0], sizeof *i0); /* 0 */
    }
    const int ok = t0 && i0 && e0 && !b.oom && !items.oom && !spans.oom &&
                   b.len * sizeof(int32_t) == items.len;
    g->n = ok ? b.len : 0;
    g->text = ok ? hx_buf_steal(&b, NULL) : NULL;
    g->item = ok ? (int32_t *)(void *)hx_buf_steal(&items, NULL) : NULL;
    g->name_end = ok ? hx_calloc(g->n, sizeof *g->name_end) : NULL; /* the aliases': 0 */
    if (g->name_end) {
        memcpy(g->name_end, e0, n0 * sizeof *e0);
        const int32_t *sp = (const int32_t *)(void *)spans.data;
        for (size_t k = 0; k + 1 < spans.len / sizeof *sp; k += 2)
            for (int32_t q = sp[k]; q < sp[k + 1]; q++) g->name_end[q] = sp[k + 1];
    }
    free(t0);
    free(i0);
    free(e0);
    hx_buf_free(&b);
    hx_buf_free(&items);
    hx_buf_free(&spans);
    return g->text && g->item && g->name_end ? 0 : -1;
}

/* Whether a copy may start at text position i as far as names go:
 * outside them, at a name's start, or after a blank, a '/' or an opening
 * bracket in one ("Tomás" of "Check-in with Tomás", "notes.md" of a
 * path, "Omron" of "Vendor visit (Omron)"); not after a '-', '_' or '.'
 * inside a word ("makhani.md" of "dal-makhani.md" is no file the tools
 * know). */
static int name_start_ok(const ground *g, size_t i)
{
    const int32_t e = g->name_end[i];
    if (e <= 0 || i == 0 || g->name_end[i - 1] != e) return 1;
    return strchr(" /([", g->text[i - 1]) != NULL;
}

/* The check of answers against text and claims (copied), in its first
 * state; NULL when out of memory. */
static ground *ground_build(const char *text, const char *claims)
{
    ground *g = hx_calloc(1, sizeof *g);
    if (!g) return NULL;
    const int read = read_text(g, text);
    g->claims = claim_line(claims);
    g->starts = hx_calloc(g->n ? g->n : 1, sizeof *g->starts);
    if (read || !g->claims || !g->starts || g->n > INT32_MAX) {
        ground_free(g);
        return NULL;
    }
    unescape_blank(g->text, g->n);
    for (size_t i = 0; i < g->n; i++) /* no copy starts in a result's key */
        if (can_start(g->text, i) && g->name_end[i] >= 0 && name_start_ok(g, i))
            g->starts[g->n_starts++] = (int32_t)i;
    qsort_r(g->starts, (size_t)g->n_starts, sizeof *g->starts, cmp_start, g);
    g->s.sentence = 1, g->s.neg = 99, g->s.n_bind = -1;
    return g;
}

int hx_ground_stage_new(const hx_vocab *v, const char *text, const char *claims,
                        const char *trigger, const int *in_call, hx_sampler_stage *out)
{
    ground *g = ground_build(text, claims);
    if (!g) return HX_ERR_NOMEM;
    g->v = v, g->in_call = in_call, g->trigger = trigger;
    *out = (hx_sampler_stage){HX_SAMPLER_STAGE_API, "grounded answer", g, ground_apply,
                              ground_accept, NULL, NULL, ground_free};
    return HX_OK;
}

int hx_ground_end(const char *text, const char *claims, const char *answer, size_t n,
                  size_t *end)
{
    ground *g = ground_build(text, claims);
    if (!g) return HX_ERR_NOMEM;
    size_t best = 0;
    for (size_t i = 0; i <= n; i++) {
        wstate next = g->s, at = g->s;
        const int ok = i == n || step_byte(g, &next, (unsigned char)answer[i], -1);
        /* the turn may end before byte i when no word goes on through it */
        if (i && (i == n || !next.in) && may_end(g, &at, -1)) best = i;
        if (i == n || !ok) break;
        g->s = next;
    }
    while (best && isspace((unsigned char)answer[best - 1])) best--;
    *end = best;
    ground_free(g);
    return HX_OK;
}

/* ---- markup out of text the user reads ---- */
/* One pass over s: each markup it holds taken out; its new length. */
static size_t strip_once(char *s)
{
    size_t w = 0;
    for (size_t r = 0; s[r];) {
        size_t skip = 0;
        if (s[r] == '<') {
            for (size_t m = 0; m < sizeof markup / sizeof *markup && !skip; m++)
                if (!strncmp(s + r, markup[m], strlen(markup[m])))
                    skip = m == 5 ? (strstr(s + r, "|>") ? (size_t)(strstr(s + r, "|>") - (s + r)) + 2
                                                         : strlen(s + r))
                                  : strlen(markup[m]);
        }
        if (skip) {
            r += skip;
            continue;
        }
        s[w++] = s[r++];
    }
    s[w] = 0;
    return w;
}

/* Until nothing is taken out: markup taken from inside markup joins its
 * halves ("</tool<think>_call>" is "</tool_call>" once "<think>" is out). */
size_t hx_strip_markup(char *s)
{
    size_t n = strlen(s), m;
    while ((m = strip_once(s)) < n) n = m;
    return n;
}

size_t hx_markup_prefix(const char *s, size_t n)
{
    for (size_t k = n < 32 ? n : 32; k >= 2; k--) /* "<|im_e" of "<|im_end|>" */
        if (!strncmp(s + n - k, "<|", 2) && !memmem(s + n - k, k, "|>", 2)) return k;
    for (size_t k = n < 16 ? n : 16; k > 0; k--)
        for (size_t m = 0; m < sizeof markup / sizeof *markup; m++)
            if (k < strlen(markup[m]) && !strncmp(s + n - k, markup[m], k)) return k;
    return 0;
}
