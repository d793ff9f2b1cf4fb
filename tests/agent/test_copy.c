/* test_copy.c: the copy bias (agent/copy.c) on hearth-tiny's vocabulary:
 * inside a call's argument values it lifts the tokens that copy from the
 * conversation from a word's start, and closing at a word's end; keys,
 * text outside calls and values that left the conversation get nothing.
 * Address values ("to", "cc", "attendees") are whole addresses of the
 * conversation: every other token is masked (with none in it, no bonus
 * there, and a known address is held to once its first part is spelled);
 * addresses the user's request names come first: only they get the
 * bonus. So is every token but the word's own inside a word being copied.
 * Keys of a tool's result start no copy. In the answer, a word of a
 * result's value being copied is finished as the value writes it, and a
 * list is walked in the result's order: the next item, whole, with its
 * own date and time. A value with one word broken off a copy is mended
 * (hx_copy_repair). The tool's own argument check comes first: a value
 * it accepts is not replaced, one it refuses is not closed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "test.h"
#include "stage_fixture.h"

#define BONUS 6.0f
#define TEXT "Could you get me the file on annual review please?\n"

static int setup_all(fixture *f, const char *text, const char *request, const char *known)
{
    if (fixture_open(f, 1)) return -1;
    return hx_copy_stage_new(f->v, text, request, known, BONUS, &f->in_call, &f->st) ? -1 : 0;
}

static int setup_known(fixture *f, const char *text, const char *known)
{
    return setup_all(f, text, NULL, known);
}

static int setup_text(fixture *f, const char *text) { return setup_known(f, text, NULL); }

static int setup(fixture *f) { return setup_text(f, TEXT); }

/* The bonus token a gets against a token x the model ranks 1 higher,
 * every other token masked. */
static float lift(fixture *f, int32_t a, int32_t x)
{
    for (int32_t i = 0; i < f->n; i++) f->logits[i] = -INFINITY;
    f->logits[a] = 0;
    f->logits[x] = 1;
    f->st.apply(f->st.ctx, f->logits, f->n);
    return f->logits[a];
}

static void test_value_start_and_end(void)
{
    fixture f;
    ASSERT(setup(&f) == 0);
    int32_t ann = tok(&f, "annual"), x = tok(&f, "x"), q = tok(&f, "\"");
    ASSERT(ann >= 0 && x >= 0 && q >= 0 && ann != x);
    feed(&f, "{\"name\": \"files.search\", \"arguments\": {\"");
    EXPECT(lift(&f, ann, x) == 0); /* a key: no copy */
    feed(&f, "content\": \"");
    EXPECT(lift(&f, ann, x) == BONUS);
    EXPECT(lift(&f, x, ann) == 0); /* 'x' starts no word of the text */
    EXPECT(lift(&f, q, x) == 0);   /* an empty value is no copy */
    feed(&f, "annual rev");
    EXPECT(lift(&f, q, x) == 0);   /* not at a word's end */
    feed(&f, "iew");
    EXPECT(lift(&f, q, x) == BONUS);
    EXPECT(lift(&f, tok(&f, " please"), x) == BONUS);
    teardown(&f);
}

static void test_no_bonus(void)
{
    fixture f;
    ASSERT(setup(&f) == 0);
    int32_t ann = tok(&f, "annual"), x = tok(&f, "x"), on = tok(&f, "on");
    f.in_call = 0; /* plain text */
    EXPECT(lift(&f, ann, x) == 0);
    f.in_call = 1;
    feed(&f, "{\"name\": \"files.search\", \"arguments\": {\"content\": \"x");
    EXPECT(lift(&f, on, ann) == 0); /* the value left the text */
    feed(&f, "\", \"limit\": [\"");
    EXPECT(lift(&f, ann, x) == BONUS); /* array items are values */
    /* a token far below the best is not looked at */
    for (int32_t i = 0; i < f.n; i++) f.logits[i] = -INFINITY;
    f.logits[ann] = -10;
    f.logits[x] = 0;
    f.st.apply(f.st.ctx, f.logits, f.n);
    EXPECT(f.logits[ann] == -10);
    teardown(&f);
}

#define MAIL_TEXT "Send it to Ann (ann.lee@corp.example.org) and bob@x.io. Thanks\n"

/* Token a's logit after apply, a ranked 1 below x (x's goes to *xl). */
static float lift2(fixture *f, int32_t a, int32_t x, float *xl)
{
    float l = lift(f, a, x);
    *xl = f->logits[x];
    return l;
}

static void test_address_whole(void)
{
    fixture f;
    ASSERT(setup_text(&f, MAIL_TEXT) == 0);
    int32_t ann = tok(&f, "ann"), bob = tok(&f, "bob"), x = tok(&f, "x"), q = tok(&f, "\"");
    int32_t word = tok(&f, "Thanks"), z = tok(&f, "z");
    float xl;
    ASSERT(ann >= 0 && bob >= 0 && x >= 0 && q >= 0 && word >= 0 && z >= 0);
    feed(&f, "{\"name\": \"mail.send\", \"arguments\": {\"to\": \"");
    EXPECT(lift2(&f, ann, x, &xl) == BONUS && xl == -INFINITY); /* 'x' starts no address */
    EXPECT(lift2(&f, bob, word, &xl) == BONUS && xl == -INFINITY); /* a word, not an address */
    EXPECT(lift2(&f, x, word, &xl) == 0 && xl == 1); /* none copies one: left as they were */
    feed(&f, "ann.lee@corp.example");
    EXPECT(lift2(&f, tok(&f, "."), q, &xl) == BONUS && xl == -INFINITY); /* not at its end */
    feed(&f, ".org");
    EXPECT(lift2(&f, q, x, &xl) == BONUS && xl == -INFINITY);
    feed(&f, "\", \"cc\": [\"bob@x.io");
    EXPECT(lift2(&f, q, x, &xl) == BONUS); /* the sentence's dot is not the address's */
    feed(&f, "\"], \"subject\": \"");
    EXPECT(lift2(&f, z, ann, &xl) == 0 && xl == 1 + BONUS); /* other keys: the bonus only */
    teardown(&f);
}

/* The memory recalled one address, the request names another: an
 * address value gets the bonus only for copying the request's, the
 * other stays allowed (the user may want both), words are masked; once
 * the call has the request's, every address gets it again, as with no
 * request (or one naming no address), but none is written twice in a
 * call. */
#define MEMORY "- Lithtesstai's email is lith.b@meastea.net\n"
#define ASKED "Tell arjun.chen@stosin.co by email about charity run\n"

static void test_address_asked(void)
{
    fixture f;
    ASSERT(setup_all(&f, MEMORY ASKED, ASKED, NULL) == 0);
    int32_t ar = tok(&f, "ar"), li = tok(&f, "li"), ch = tok(&f, "charity"), q = tok(&f, "\"");
    float xl;
    ASSERT(ar >= 0 && li >= 0 && ch >= 0 && q >= 0);
    feed(&f, "{\"name\": \"mail.send\", \"arguments\": {\"to\": ");
    EXPECT(lift(&f, q, ch) == BONUS); /* the opening quote may lead to the request's */
    feed(&f, "\"");
    EXPECT(lift2(&f, li, ar, &xl) == 0 && xl == 1 + BONUS);
    EXPECT(lift2(&f, ar, li, &xl) == BONUS && xl == 1);
    EXPECT(lift2(&f, ch, li, &xl) == -INFINITY && xl == 1); /* a word, not an address */
    feed(&f, "lith.b@meastea");
    EXPECT(lift2(&f, tok(&f, "."), q, &xl) == 0 && xl == -INFINITY); /* held to it, unlifted */
    teardown(&f);
    /* once a value of the call is the request's address, the others get
     * the bonus too: "with Lithtesstai and arjun.chen@..." */
    ASSERT(setup_all(&f, MEMORY ASKED, ASKED, NULL) == 0);
    feed(&f, "{\"name\": \"calendar.find_slots\", \"arguments\": {\"attendees\": [\"");
    EXPECT(lift2(&f, li, ar, &xl) == 0 && xl == 1 + BONUS);
    feed(&f, "arjun.chen@stosin.co\", \"");
    EXPECT(lift2(&f, li, ar, &xl) == BONUS && xl == -INFINITY); /* not twice */
    f.in_call = 0; /* the next call starts afresh */
    f.st.accept(f.st.ctx, q);
    f.in_call = 1;
    feed(&f, "{\"name\": \"calendar.create_event\", \"arguments\": {\"attendees\": [\"");
    EXPECT(lift2(&f, li, ar, &xl) == 0 && xl == 1 + BONUS);
    teardown(&f);
    ASSERT(setup_all(&f, MEMORY ASKED, "Thanks\n", NULL) == 0);
    feed(&f, "{\"name\": \"mail.send\", \"arguments\": {\"to\": \"");
    EXPECT(lift2(&f, li, ar, &xl) == BONUS && xl == 1 + BONUS);
    teardown(&f);
    ASSERT(setup_all(&f, MEMORY ASKED, NULL, NULL) == 0);
    feed(&f, "{\"name\": \"mail.send\", \"arguments\": {\"to\": \"");
    EXPECT(lift2(&f, li, ar, &xl) == BONUS && xl == 1 + BONUS);
    teardown(&f);
}

/* Once every address of the conversation is a value of the call, the
 * list does not go on: another address could only be one made up (a
 * second attendee "dana.okafor@harbourlight.co" after "...harbourlight.org").
 * The list may close. Where a ',' was written all the same, the value is
 * one of the addresses again, never a new one. Control: with an address
 * left, the list goes on. */
static void test_address_all_used(void)
{
    fixture f;
    ASSERT(setup_text(&f, MEMORY "Invite Lithtesstai to the sync\n") == 0);
    int32_t q = tok(&f, "\""), rb = tok(&f, "]"), comma = tok(&f, ","), li = tok(&f, "li"), x = tok(&f, "x");
    float xl;
    ASSERT(q >= 0 && rb >= 0 && comma >= 0 && li >= 0 && x >= 0);
    feed(&f, "{\"name\": \"calendar.find_slots\", \"arguments\": {\"attendees\": [");
    EXPECT(lift2(&f, q, rb, &xl) == BONUS && xl == 1); /* the first opens */
    feed(&f, "\"lith.b@meastea.net\"");
    EXPECT(lift2(&f, comma, rb, &xl) == -INFINITY && xl == 1);
    feed(&f, ", \"");
    EXPECT(lift2(&f, li, x, &xl) == BONUS && xl == -INFINITY); /* the same again, not a new one */
    teardown(&f);
    ASSERT(setup_text(&f, MEMORY ASKED) == 0);
    feed(&f, "{\"name\": \"calendar.find_slots\", \"arguments\": {\"attendees\": [\"lith.b@meastea.net\"");
    EXPECT(lift2(&f, comma, rb, &xl) == 0 && xl == 1); /* control */
    teardown(&f);
}

/* A key the scanner cut (too long) or another key that merely starts
 * like an address key is not an address key. */
static void test_address_keys_only(void)
{
    fixture f;
    ASSERT(setup_text(&f, MAIL_TEXT) == 0);
    int32_t z = tok(&f, "z"), ann = tok(&f, "ann");
    float xl;
    feed(&f, "{\"name\": \"x\", \"arguments\": {\"attendees_of_the_whole_event\": \"");
    EXPECT(lift2(&f, z, ann, &xl) == 0 && xl == 1 + BONUS);
    feed(&f, "ann\", \"tox\": \"");
    EXPECT(lift2(&f, z, ann, &xl) == 0 && xl == 1 + BONUS);
    teardown(&f);
}

/* With no address in the text an address value copies nothing: a word
 * of the request is never an address, what the model writes may be one
 * it knows. The next key's value gets the bonus again. */
static void test_address_none(void)
{
    fixture f;
    ASSERT(setup(&f) == 0); /* no address in the text */
    int32_t x = tok(&f, "x"), ann = tok(&f, "annual");
    float xl;
    feed(&f, "{\"name\": \"calendar.find_slots\", \"arguments\": {\"attendees\": [\"");
    EXPECT(lift2(&f, x, ann, &xl) == 0 && xl == 1);
    feed(&f, "x@y.org\", \"");
    EXPECT(lift2(&f, x, ann, &xl) == 0 && xl == 1); /* the next item too */
    feed(&f, "z@y.org\"], \"title\": \"");
    EXPECT(lift2(&f, x, ann, &xl) == 0 && xl == 1 + BONUS);
    teardown(&f);
}

/* Known addresses (of the user's mail), with none in the conversation: a
 * value is the model's own until it spells one's first part ("robert" of
 * robert.keller@...), then held to it (the request's words, the string's
 * end inside it and special tokens masked); "jane" is never pushed to
 * one. With addresses in the conversation, known ones are not added. */
#define KNOWN "rita@corp.example.org\nrobert.keller@northwind.com\n"

static void test_address_known(void)
{
    fixture f;
    ASSERT(setup_known(&f, TEXT, KNOWN) == 0);
    int32_t x = tok(&f, "x"), ann = tok(&f, "annual"), dot = tok(&f, "."), q = tok(&f, "\"");
    int32_t review = tok(&f, " review"), special = -1;
    for (int32_t i = 0; i < f.n && special < 0; i++)
        if (hx_vocab_is_special(f.v, i) && !hx_vocab_is_eog(f.v, i)) special = i;
    ASSERT(x >= 0 && ann >= 0 && dot >= 0 && q >= 0 && review >= 0 && special >= 0);
    float xl;
    feed(&f, "{\"name\": \"calendar.find_slots\", \"arguments\": {\"attendees\": [\"");
    EXPECT(lift2(&f, x, ann, &xl) == 0 && xl == 1); /* the model's own */
    feed(&f, "rob");
    EXPECT(lift2(&f, x, ann, &xl) == 0 && xl == 1); /* "rob" may be "robin" */
    feed(&f, "ert");
    EXPECT(lift2(&f, dot, review, &xl) == BONUS && xl == -INFINITY);
    EXPECT(lift2(&f, dot, q, &xl) == BONUS && xl == -INFINITY);
    feed(&f, ".kel");
    EXPECT(lift2(&f, tok(&f, "ler"), special, &xl) == BONUS && xl == -INFINITY);
    feed(&f, "ler@northwind.com");
    EXPECT(lift2(&f, q, x, &xl) == BONUS && xl == -INFINITY);
    feed(&f, "\", \"jane");
    EXPECT(lift2(&f, x, ann, &xl) == 0 && xl == 1);
    teardown(&f);
    ASSERT(setup_known(&f, MAIL_TEXT, KNOWN) == 0);
    int32_t rob = tok(&f, "robert"), bob = tok(&f, "bob");
    ASSERT(rob >= 0 && bob >= 0);
    feed(&f, "{\"name\": \"mail.send\", \"arguments\": {\"to\": \"");
    EXPECT(lift2(&f, bob, rob, &xl) == BONUS && xl == -INFINITY);
    teardown(&f);
}

/* Inside a word that the value copies, the word is finished as the text
 * writes it: "ex" of "expense" goes on with "p", every other token
 * (another piece, the string's end, a special token) masked; at a word's
 * end the bonus alone applies again. */
#define WORD_TEXT "Locate the expense report document.\n"

/* Once a result shows paths, a path value is one of them, from its start
 * or from after a '/' in it (relative to the roots), copied whole: not one
 * the model makes up, nor the request's path a tool said does not exist,
 * nor a folder cut from one ("/dev" of "/dev/shm/..."); other values are
 * not held; with no path shown, a path is the model's own. */
#define PATH_ASKED "Read the file personal/charity-run.md, thank you!\n"
#define PATH_TEXT                                                                        \
    PATH_ASKED "{\"error\": \"'personal/charity-run.md' does not exist\"}\n"              \
    "{\"files\": [{\"name\": \"charity-run.txt\", \"path\": "                              \
    "\"/home/u/files/personal/charity-run.txt\", \"type\": \"file\"}]}\n"

/* The logit of token a after apply, a ranked 1 below x, the stage fed
 * the call so far; x's into *xl. */
static float path_lift(const char *call, const char *a, const char *x, float *xl)
{
    fixture f;
    if (setup_all(&f, PATH_TEXT, PATH_ASKED, NULL)) return NAN;
    feed(&f, call);
    const float l = lift2(&f, tok(&f, a), tok(&f, x), xl);
    teardown(&f);
    return l;
}

static void test_path_whole(void)
{
    const char *read = "{\"name\": \"files.read\", \"arguments\": {\"path\": \"";
    char call[256];
    float xl;
    EXPECT(path_lift(read, "personal", "work", &xl) == BONUS && xl == -INFINITY);
    EXPECT(path_lift(read, "/", "work", &xl) == BONUS && xl == -INFINITY);
    snprintf(call, sizeof call, "%spersonal/charity-run.", read);
    EXPECT(path_lift(call, "txt", "md", &xl) == BONUS && xl == -INFINITY); /* not the request's */
    snprintf(call, sizeof call, "%s/home/u/files/personal/charity-run.txt", read);
    EXPECT(path_lift(call, "\"", ".", &xl) == BONUS && xl == -INFINITY); /* not past its end */
    snprintf(call, sizeof call, "%s/home/u/files/personal", read); /* nor a folder */
    EXPECT(path_lift(call, "/", "\"", &xl) == BONUS && xl == -INFINITY);
    snprintf(call, sizeof call, "%s/home/u/files/pers", read); /* not inside a name */
    EXPECT(path_lift(call, "onal", "\"", &xl) == BONUS && xl == -INFINITY);
    /* controls: another key is not held; with no path shown, the model's own */
    EXPECT(path_lift("{\"name\": \"files.search\", \"arguments\": {\"name\": \"", "work",
                     "personal", &xl) == 0 && xl == 1 + BONUS);
    fixture f;
    ASSERT(setup_all(&f, PATH_ASKED, PATH_ASKED, NULL) == 0);
    feed(&f, read);
    EXPECT(lift2(&f, tok(&f, "work"), tok(&f, "personal"), &xl) == 0 && xl == 1 + BONUS);
    teardown(&f);
}

static void test_mid_word(void)
{
    fixture f;
    ASSERT(setup_text(&f, WORD_TEXT) == 0);
    /* single bytes, which every byte-level vocabulary has */
    const int32_t pen = tok(&f, "p"), se = tok(&f, "s"), q = tok(&f, "\""), x = tok(&f, "x");
    ASSERT(pen >= 0 && se >= 0 && q >= 0 && x >= 0);
    int32_t special = -1;
    for (int32_t i = 0; i < f.n && special < 0; i++)
        if (hx_vocab_is_special(f.v, i) && !hx_vocab_is_eog(f.v, i)) special = i;
    ASSERT(special >= 0);
    float xl;
    feed(&f, "{\"name\": \"files.search\", \"arguments\": {\"content\": \"ex");
    EXPECT(lift2(&f, pen, se, &xl) == BONUS && xl == -INFINITY);
    EXPECT(lift2(&f, pen, q, &xl) == BONUS && xl == -INFINITY);
    EXPECT(lift2(&f, pen, special, &xl) == BONUS && xl == -INFINITY);
    EXPECT(lift2(&f, se, x, &xl) == 0 && xl == 1); /* nothing goes on: left alone */
    feed(&f, "pense");
    EXPECT(lift2(&f, q, x, &xl) == BONUS && xl == 1); /* the word's end: the bonus */
    teardown(&f);
}

/* The keys of a tool's result are its structure: no copy starts in one
 * ("duration" of "duration_minutes" is not a title's word), its values
 * are copied. */
#define RESULT_TEXT "{\"duration_minutes\": 60, \"title\": \"data cleanup\"}\n"

static void test_result_keys(void)
{
    fixture f;
    ASSERT(setup_text(&f, RESULT_TEXT) == 0);
    const int32_t dur = tok(&f, "duration"), data = tok(&f, "data"), min = tok(&f, "minutes");
    const int32_t x = tok(&f, "x");
    ASSERT(dur >= 0 && data >= 0 && min >= 0 && x >= 0 && dur != data);
    feed(&f, "{\"name\": \"calendar.create_event\", \"arguments\": {\"title\": \"");
    EXPECT(lift(&f, data, x) == BONUS);
    EXPECT(lift(&f, dur, x) == 0);
    EXPECT(lift(&f, min, x) == 0);
    EXPECT(lift(&f, tok(&f, "title"), x) == 0);
    teardown(&f);
}

/* No copy starts after the apostrophe inside "Enzo's": a search for
 * "s message" finds nothing. A quote that opens a value still starts one. */
static void test_apostrophe(void)
{
    fixture f;
    ASSERT(setup_text(&f, "Search for Enzo's message on 'code freeze'\n") == 0);
    const int32_t s = tok(&f, "s"), msg = tok(&f, "message"), code = tok(&f, "code");
    const int32_t x = tok(&f, "x");
    ASSERT(s >= 0 && msg >= 0 && code >= 0 && x >= 0);
    feed(&f, "{\"name\": \"mail.search\", \"arguments\": {\"text\": \"");
    EXPECT(lift(&f, s, x) == 0);
    EXPECT(lift(&f, msg, x) == BONUS);
    EXPECT(lift(&f, code, x) == BONUS);
    teardown(&f);
}

/* The answer (outside calls): once it has copied a result's value from
 * its start through a whole word, or three letters of its first, and
 * stops inside a word the value goes on with, the tokens that finish the
 * word get the bonus (an apostrophe before a letter is inside it); not
 * after two letters, not at a word's end, not past the value. */
#define ANSWER_TEXT "User: What is on Friday?\nTool: {\"events\": [{\"title\": \"Partner summit\"}, " \
                    "{\"title\": \"Dinner at Chlo\xc3\xa9's\"}]}\n"

static void test_answer_words(void)
{
    fixture f;
    ASSERT(setup_text(&f, ANSWER_TEXT) == 0);
    const int32_t m = tok(&f, "m"), t = tok(&f, "t"), x = tok(&f, "x"), ap = tok(&f, "'");
    ASSERT(m >= 0 && t >= 0 && x >= 0 && ap >= 0);
    f.in_call = 0;
    feed(&f, "You have 2 events: Pa");
    EXPECT(lift(&f, tok(&f, "r"), x) == 0); /* two letters: the model's own */
    feed(&f, "r");
    EXPECT(lift(&f, t, x) == BONUS); /* three: "Partner" is finished */
    feed(&f, "tner sum");
    EXPECT(lift(&f, m, x) == BONUS);
    EXPECT(lift(&f, x, m) == 0);
    feed(&f, "mit");
    EXPECT(lift(&f, tok(&f, " at"), x) == 0); /* the value ends: the model's own */
    feed(&f, " and Dinner at Chlo\xc3\xa9");
    EXPECT(lift(&f, ap, x) == BONUS);
    teardown(&f);
    /* a word that only begins like a value's ("Pa" of "Partner") gets nothing */
    ASSERT(setup_text(&f, ANSWER_TEXT) == 0);
    f.in_call = 0;
    feed(&f, "Partly done sum");
    EXPECT(lift(&f, tok(&f, "m"), tok(&f, "x")) == 0);
    teardown(&f);
}

/* A hyphen or underscore after a letter ends a word as a blank does, so
 * a file name's second word gets finished ("partner-sum" -> "mit"); after
 * a digit it does not: a date's "2028-07-1" is not pushed on into
 * "14T09:00", the raw timestamp. */
#define FILES_TEXT "User: Which files are in notes?\nTool: {\"entries\": [{\"name\": " \
                   "\"partner-summit.md\", \"modified\": \"2028-07-14T09:00:00Z\"}]}\n"

static void test_answer_file_names(void)
{
    fixture f;
    ASSERT(setup_text(&f, FILES_TEXT) == 0);
    const int32_t m = tok(&f, "m"), x = tok(&f, "x"), four = tok(&f, "4");
    ASSERT(m >= 0 && x >= 0 && four >= 0);
    f.in_call = 0;
    feed(&f, "Your notes folder has 1 file: partner-sum");
    EXPECT(lift(&f, m, x) == BONUS);
    teardown(&f);
    ASSERT(setup_text(&f, FILES_TEXT) == 0);
    f.in_call = 0;
    feed(&f, "It was changed on 2028-07-1");
    EXPECT(lift(&f, four, x) == 0);
    teardown(&f);
}

/* A list answer walks the result: after "Team standup" the item the
 * model names is the next title ("Vendor demo", not "Dentist"), held to
 * its end, and the time it begins is that item's (11:00, not 16:00).
 * Not naming an item ("and 1 more") is left alone, as is the first item
 * (no title copied whole yet) and a number after a value the walk did
 * not name (a file's content after its name). */
#define LIST_TEXT "User: What is on June 5?\nTool: {\"events\": [" \
    "{\"title\": \"Team standup\", \"start\": \"2028-06-05T09:30:00+03:00\"}, " \
    "{\"title\": \"Vendor demo\", \"start\": \"2028-06-05T11:00:00+03:00\"}, " \
    "{\"title\": \"Dentist\", \"start\": \"2028-06-05T16:00:00+03:00\"}]}\n"

#define CANCELLED_TEXT "User: What is on June 5?\nTool: {\"events\": [" \
    "{\"title\": \"Team standup\", \"start\": \"2028-06-05T09:30:00+03:00\"}, " \
    "{\"title\": \"Vendor demo\", \"start\": \"2028-06-05T11:00:00+03:00\", \"status\": \"cancelled\"}, " \
    "{\"title\": \"Dentist\", \"start\": \"2028-06-05T16:00:00+03:00\"}]}\n"

static void test_answer_walk(void)
{
    fixture f;
    ASSERT(setup_text(&f, LIST_TEXT) == 0);
    const int32_t sp = tok(&f, " "), v = tok(&f, "V"), d = tok(&f, "D"), x = tok(&f, "x");
    const int32_t one = tok(&f, "1"), six = tok(&f, "6"), zero = tok(&f, "0");
    ASSERT(sp >= 0 && v >= 0 && d >= 0 && x >= 0 && one >= 0 && six >= 0 && zero >= 0);
    float xl = 0;
    f.in_call = 0;
    feed(&f, "You have 3 events on June 5:");
    EXPECT(lift2(&f, v, d, &xl) == 0 && xl == 1); /* no title copied yet */
    feed(&f, " Team standup at ");
    EXPECT(lift2(&f, zero, one, &xl) == 0 && xl == 1); /* not named by the walk: its own */
    feed(&f, "09:30,");
    EXPECT(lift2(&f, x, sp, &xl) == 0 && xl == 1); /* a blank: the model's */
    feed(&f, " ");
    EXPECT(lift2(&f, v, d, &xl) == 0 && xl == -INFINITY); /* "Dentist" is not next */
    feed(&f, "Ven");
    EXPECT(lift2(&f, tok(&f, "d"), x, &xl) == 0 && xl == -INFINITY); /* held to "Vendor demo" */
    feed(&f, "dor demo at ");
    EXPECT(lift2(&f, one, six, &xl) == 0 && xl == -INFINITY); /* its time: 11:00 */
    feed(&f, "1");
    EXPECT(lift2(&f, one, zero, &xl) == 0 && xl == -INFINITY);
    feed(&f, "1:00 and ");
    EXPECT(lift2(&f, d, one, &xl) == 0 && xl == 1); /* "1 more": the model's */
    EXPECT(lift2(&f, d, v, &xl) == 0 && xl == -INFINITY); /* naming one: "Dentist" */
    teardown(&f);
    /* a cancelled event is not walked to */
    ASSERT(setup_text(&f, CANCELLED_TEXT) == 0);
    f.in_call = 0;
    feed(&f, "You have 2 events on June 5: Team standup at 09:30, ");
    EXPECT(lift2(&f, d, v, &xl) == 0 && xl == -INFINITY);
    teardown(&f);
}

/* Repairs the one string value of {key: value} against text; the value
 * after (static buffer). */
static const char *mend(const char *text, const char *key, const char *value, int *n)
{
    static char out[256];
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, key, value);
    *n = hx_copy_repair(text, a);
    snprintf(out, sizeof out, "%s", cJSON_GetStringValue(cJSON_GetObjectItem(a, key)));
    cJSON_Delete(a);
    return out;
}

#define LOG_TEXT "Small favour. Please log Moving day workshop next Monday at 11am\n"

static void test_repair(void)
{
    int n = 0;
    /* the first word from elsewhere, the rest copied from inside "Moving" */
    EXPECT_STR_EQ(mend(LOG_TEXT, "title", "Pleaseing day workshop", &n), "Moving day workshop");
    EXPECT(n == 1);
    /* the value starts inside a word */
    EXPECT_STR_EQ(mend("Schedule annual review review at 9\n", "title", "al review review", &n),
               "annual review review");
    EXPECT(n == 1);
    /* a later word broken, the words before it copied up to it */
    EXPECT_STR_EQ(mend("Please calendar: Code freeze sync June 6\n", "title", "Code ze sync", &n),
                  "Code freeze sync");
    EXPECT(n == 1);
    EXPECT_STR_EQ(mend("Shift my Code freeze review on May 1\n", "query", "my Code ze", &n),
                  "my Code freeze");
    EXPECT_STR_EQ(mend(LOG_TEXT, "title", "Moving day wxshop", &n), "Moving day workshop");
    /* ... but not when those words are not right before it, or two words fit */
    EXPECT_STR_EQ(mend("Code review, then freeze sync\n", "title", "Code ze sync", &n), "Code ze sync");
    EXPECT_STR_EQ(mend("Code freeze or Code breeze\n", "title", "Code ze", &n), "Code ze");
    EXPECT(n == 0);
    /* copies, composed values, addresses, one broken word alone: kept */
    EXPECT_STR_EQ(mend(LOG_TEXT, "title", "day workshop", &n), "day workshop");
    EXPECT(n == 0);
    EXPECT_STR_EQ(mend(LOG_TEXT, "body", "Pleaseing day workshop", &n), "Pleaseing day workshop");
    EXPECT_STR_EQ(mend(LOG_TEXT, "title", "Pleaseing", &n), "Pleaseing");
    EXPECT_STR_EQ(mend(LOG_TEXT, "title", "wener sumwn", &n), "wener sumwn");
    EXPECT_STR_EQ(mend("mail al.b@x.org and cal.b@x.org\n", "to", "zal.b@x.org", &n), "zal.b@x.org");
    EXPECT(n == 0);
    /* two words the rest could come from, or a copy ending inside a word */
    EXPECT_STR_EQ(mend("moving day or loving day\n", "title", "Xoving day", &n), "Xoving day");
    EXPECT_STR_EQ(mend("Log Moving day workshops\n", "title", "Xing day workshop", &n), "Xing day workshop");
    EXPECT(n == 0);
    /* only string values: numbers and arrays stay */
    cJSON *a = cJSON_Parse("{\"attendees\": [\"Xing day workshop\"], \"duration_minutes\": 45}");
    EXPECT(hx_copy_repair(LOG_TEXT, a) == 0);
    EXPECT(hx_copy_repair(NULL, a) == 0 && hx_copy_repair(LOG_TEXT, NULL) == 0);
    cJSON_Delete(a);
}

/* A value shaped like an address that is none of the text's becomes the
 * text's one address with its domain; an address of the text, a domain
 * two or none have, no domain, words besides the address (a fact to
 * remember) and address values are kept. */
static void test_repair_address(void)
{
    static const struct { const char *key, *value, *want; } cases[] = {
        {"from", "emailmada@stycho.org", "ayamada@stycho.org"},
        {"from", "I forget@stycho.org", "I forget@stycho.org"},
        {"text", "Aya's email is aya@stycho.org", "Aya's email is aya@stycho.org"},
        {"from", "@stycho.org", "ayamada@stycho.org"},
        {"from", "bo@x.org", "bo@x.org"},
        {"from", "c@x.org", "c@x.org"},
        {"from", "c@y.org", "c@y.org"},
        {"from", "c@stycho", "c@stycho"},
        {"to", "emailmada@stycho.org", "emailmada@stycho.org"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = -1;
        const char *got = mend("look up ayamada@stycho.org's email, cc bo@x.org and al@x.org\n",
                               cases[i].key, cases[i].value, &n);
        EXPECT_STR_EQ(got, cases[i].want);
        EXPECT_EQ_INT(n, strcmp(cases[i].value, cases[i].want) != 0);
    }
}

/* ---- the tools' own argument checks come first ---- */
static int when_check(void *user, const char *tool, const char *key, const char *value)
{
    (void)user;
    if (strcmp(tool, "calendar.list_events") || strcmp(key, "range")) return -1;
    hx_when_range r;
    hx_err e = {0};
    const int rc = hx_when_parse(value, 1796000000, "UTC", &r, &e);
    return rc == HX_OK || rc == HX_ERR_RANGE; /* as hx_agent_arg_check */
}

#define WHEN_TEXT "what's on my calendar, Thursday?\n"
#define WHEN_CALL "{\"name\": \"calendar.list_events\", \"arguments\": {\"range\": \"on"

/* The model wrote "on" and ranks " Thursday" first: "on Thursday" is a
 * range the tool reads, so the bias does not replace it with " my" (a
 * copy of the request's "on my"); the copy stage alone does. A value the
 * tool refuses ("on my") cannot be closed while another token can be
 * written; one it reads can. */
static void test_copy_keeps_valid_argument(void)
{
    fixture f;
    ASSERT(setup_text(&f, WHEN_TEXT) == 0);
    hx_sampler_stage ac;
    const int *defer = NULL;
    ASSERT(hx_argcheck_stage_new(f.v, when_check, NULL, &f.in_call, &ac, &defer) == HX_OK);
    const int32_t thu = tok(&f, " Thursday"), my = tok(&f, " my"), q = tok(&f, "\""), x = tok(&f, "x");
    ASSERT(thu >= 0 && my >= 0 && q >= 0 && x >= 0);
    ASSERT(when_check(NULL, "calendar.list_events", "range", "on Thursday") == 1);
    ASSERT(when_check(NULL, "calendar.list_events", "range", "on my") == 0);
    int32_t t[64];
    const int32_t n = hx_tokenize(f.v, WHEN_CALL, strlen(WHEN_CALL), t, 64, 0, 0);
    for (int32_t i = 0; i < n; i++) f.st.accept(f.st.ctx, t[i]), ac.accept(ac.ctx, t[i]);
    for (int32_t i = 0; i < f.n; i++) f.logits[i] = -INFINITY;
    f.logits[thu] = 1, f.logits[my] = 0;
    f.st.apply(f.st.ctx, f.logits, f.n); /* control: the bias alone */
    EXPECT(f.logits[my] == BONUS && f.logits[thu] == 1);
    hx_copy_stage_defer(&f.st, defer);
    f.logits[thu] = 1, f.logits[my] = 0;
    ac.apply(ac.ctx, f.logits, f.n);
    EXPECT(*defer == 1);
    f.st.apply(f.st.ctx, f.logits, f.n);
    EXPECT(f.logits[thu] == 1 && f.logits[my] == 0); /* the model's value stands */
    /* closing: refused for "on my", allowed for "on Thursday" */
    fixture g;
    ASSERT(setup_text(&g, WHEN_TEXT) == 0);
    hx_sampler_stage ac2;
    ASSERT(hx_argcheck_stage_new(g.v, when_check, NULL, &g.in_call, &ac2, &defer) == HX_OK);
    for (int32_t i = 0; i < n; i++) ac2.accept(ac2.ctx, t[i]);
    ac2.accept(ac2.ctx, my);
    for (int32_t i = 0; i < g.n; i++) g.logits[i] = -INFINITY;
    g.logits[q] = 1, g.logits[x] = 0;
    ac2.apply(ac2.ctx, g.logits, g.n);
    EXPECT(!isfinite(g.logits[q]) && g.logits[x] == 0);
    g.logits[q] = 1; /* the only token left: allowed */
    g.logits[x] = -INFINITY;
    ac2.apply(ac2.ctx, g.logits, g.n);
    EXPECT(g.logits[q] == 1);
    ac.accept(ac.ctx, thu);
    for (int32_t i = 0; i < f.n; i++) f.logits[i] = -INFINITY;
    f.logits[q] = 1, f.logits[x] = 0;
    ac.apply(ac.ctx, f.logits, f.n);
    EXPECT(f.logits[q] == 1);
    ac.free(ac.ctx);
    ac2.free(ac2.ctx);
    teardown(&g);
    teardown(&f);
}

/* ---- a range held to the request's phrases ---- */
#define RANGE_CALL "{\"name\": \"calendar.list_events\", \"arguments\": {\"range\": \""

/* Whether token a is allowed (and x, ranked above it, is not) by the
 * argument check stage holding values to request and text, after call.
 * hold: give the stage the texts. */
static int held_keeps(const char *request, const char *text, int hold, const char *call,
                      const char *a, const char *x)
{
    fixture f;
    const int *defer = NULL;
    if (fixture_open(&f, 1)) return -1;
    if (hx_argcheck_stage_new(f.v, when_check, NULL, &f.in_call, &f.st, &defer) ||
        (hold && hx_argcheck_stage_hold(&f.st, request, text)))
        return teardown(&f), -1;
    feed(&f, call);
    const int32_t ta = tok(&f, a), tx = tok(&f, x);
    for (int32_t i = 0; i < f.n; i++) f.logits[i] = -INFINITY;
    f.logits[ta] = 0, f.logits[tx] = 1;
    f.st.apply(f.st.ctx, f.logits, f.n);
    const int kept = isfinite(f.logits[ta]) && !isfinite(f.logits[tx]);
    teardown(&f);
    return kept;
}

static int range_keeps(const char *request, int hold, const char *call, const char *a,
                       const char *x)
{
    return held_keeps(request, request, hold, call, a, x);
}

/* A small model wrote "invite 30 in this morning, so I booked nothing" for
 * the range of "set up 30 minutes with Dana tomorrow morning": held, the
 * range is a phrase of the request the tool reads, the longest one
 * ("tomorrow morning", not "tomorrow"), never one ending in a word the
 * reader passes over ("next week before"), nor one past a move's "to",
 * nor one short of a day there is not ("on april" of "on april 31").
 * Controls: not held without the texts, nor when the request has no such
 * phrase; a "to" of a request that moves nothing. */
static void test_range_held(void)
{
    const char *r = "set up 30 minutes with Dana tomorrow morning to go over the Q2 numbers";
    EXPECT(range_keeps(r, 1, RANGE_CALL, "tomorrow", "invite") == 1);
    EXPECT(range_keeps(r, 1, RANGE_CALL "tomorrow", " morning", "\"") == 1);
    EXPECT(range_keeps(r, 1, RANGE_CALL "tomorrow morning", "\"", " to") == 1);
    EXPECT(range_keeps("what's on next week before the review", 1, RANGE_CALL "next week", "\"",
                       " before") == 1);
    EXPECT(range_keeps(r, 0, RANGE_CALL, "tomorrow", "invite") == 0);
    EXPECT(range_keeps("hello there, how are you", 1, RANGE_CALL, "tomorrow", "invite") == 0);
    /* a move's "to" names where to: the range stops before it; elsewhere
     * it ends a period */
    const char *mv = "Shift my Lunch with Anton 2026-12-22 to Dec 22 at 12:00";
    ASSERT(when_check(NULL, "calendar.list_events", "range", "2026-12-22 to Dec 22 at 12:00") == 1);
    EXPECT(range_keeps(mv, 1, RANGE_CALL "2026-12-22", "\"", " to") == 1);
    EXPECT(range_keeps("show me 2026-12-22 to Dec 22 at 12:00", 1, RANGE_CALL "2026-12-22", " to",
                       "\"") == 1);
    /* a day there is not is the user's to hear of, not cut to its month
     * ("on april" listed all of April) */
    EXPECT(range_keeps("what's on my calendar on april 31?", 1, RANGE_CALL "on april", " 31", "\"") == 1);
    EXPECT(range_keeps("what's on my calendar on april 3?", 1, RANGE_CALL "on april", " 3", "\"") == 1);
    EXPECT(hx_agent_asks_move(mv) && hx_agent_asks_move("can we reschedule the review?"));
    EXPECT(!hx_agent_asks_move("show me the 16th to the 18th") && !hx_agent_asks_move("movie night"));
}

/* An item's uid is held whole to those the results gave: cut short
 * ("f6aec107-0" of "f6aec107-0b2c@hearth") it names no event. Controls:
 * not held without the texts, nor where the results give no uid. */
#define UIDS "{\"events\": [{\"uid\": \"f6aec107-0b2c@hearth\", \"title\": \"Sprint\"}]}"
#define CANCEL_CALL "{\"name\": \"calendar.cancel_event\", \"arguments\": {\"uid\": \""
static void test_ids_held(void)
{
    EXPECT(held_keeps("drop the sprint", UIDS, 1, CANCEL_CALL "f6aec107-0", "b", "\"") == 1);
    EXPECT(held_keeps("drop the sprint", UIDS, 1, CANCEL_CALL "f6aec107-0b2c@hearth", "\"", "x") == 1);
    EXPECT(held_keeps("drop the sprint", UIDS, 0, CANCEL_CALL "f6aec107-0", "b", "\"") == 0);
    EXPECT(held_keeps("drop the sprint", "{\"events\": []}", 1, CANCEL_CALL "f6aec107-0", "b", "\"") == 0);
}

/* ---- a failed call is not written again ---- */
#define READ_CALL "{\"name\": \"files.read\", \"arguments\": {\"path\": \"notes/plan.md"

/* The stage's view after the tokens of call: is the closing quote masked
 * (the other token, "x", always stays)? alone: the quote is the only
 * token left. */
static int quote_masked(const char *refused, const char *call, int alone)
{
    fixture f;
    if (fixture_open(&f, 1)) return -1;
    const int *defer = NULL;
    if (hx_argcheck_stage_new(f.v, NULL, NULL, &f.in_call, &f.st, &defer) ||
        hx_argcheck_stage_refuse(&f.st, refused))
        return teardown(&f), -1;
    feed(&f, call);
    const int32_t q = tok(&f, "\""), x = tok(&f, "x");
    for (int32_t i = 0; i < f.n; i++) f.logits[i] = -INFINITY;
    f.logits[q] = 1;
    if (!alone) f.logits[x] = 0;
    f.st.apply(f.st.ctx, f.logits, f.n);
    int masked = !isfinite(f.logits[q]);
    if (!alone && f.logits[x] != 0) masked = -1;
    teardown(&f);
    return masked;
}

/* The same tool with the same arguments cannot be finished (blanks aside:
 * the line is compact); the value may grow into another, another path or
 * another tool closes (controls), and so does the quote when nothing else
 * is left. */
static void test_refused_call(void)
{
    hx_buf line;
    hx_buf_init(&line);
    cJSON *args = cJSON_Parse("{\"path\":\"notes/plan.md\"}");
    ASSERT(args && hx_argcheck_refused_line("files.read", args, &line) == HX_OK);
    cJSON_Delete(args);
    EXPECT_STR_EQ(line.data, "files.read\t{\"path\":\"notes/plan.md\"\n");
    EXPECT_EQ_INT(quote_masked(line.data, READ_CALL, 0), 1);
    EXPECT_EQ_INT(quote_masked(line.data, READ_CALL, 1), 0);
    EXPECT_EQ_INT(quote_masked(line.data, READ_CALL "x", 0), 0);
    EXPECT_EQ_INT(quote_masked(line.data, "{\"name\": \"files.read\", \"arguments\": {\"path\": \"notes/plan.txt", 0), 0);
    EXPECT_EQ_INT(quote_masked(line.data, "{\"name\": \"files.search\", \"arguments\": {\"path\": \"notes/plan.md", 0), 0);
    EXPECT_EQ_INT(quote_masked("", READ_CALL, 0), 0);
    hx_buf_free(&line);
}

int main(void)
{
    RUN(test_value_start_and_end);
    RUN(test_refused_call);
    RUN(test_no_bonus);
    RUN(test_address_whole);
    RUN(test_address_asked);
    RUN(test_address_all_used);
    RUN(test_address_keys_only);
    RUN(test_address_none);
    RUN(test_address_known);
    RUN(test_path_whole);
    RUN(test_range_held);
    RUN(test_ids_held);
    RUN(test_mid_word);
    RUN(test_result_keys);
    RUN(test_apostrophe);
    RUN(test_answer_words);
    RUN(test_answer_file_names);
    RUN(test_answer_walk);
    RUN(test_repair);
    RUN(test_repair_address);
    RUN(test_copy_keeps_valid_argument);
    return test_summary();
}
