/* test_ground.c: grounded answers (agent/ground.c) on hearth-tiny's
 * vocabulary: in the answer every fact (a time, a date, a number, an
 * address, a file name, a capitalised name, a day) is a copy of the
 * conversation or of an alias derived from it; ordinary words and a
 * sentence's first word are untouched; claim words need the planner's
 * licence or a negation; markup is masked; a scripted model that tries to
 * invent a time writes the time the tool returned; a clause's facts come
 * from one item of a result (not one event's title with another's time);
 * a result's names are said whole, an address too; an item's id is no
 * source. hx_strip_markup. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "test.h"
#include "stage_fixture.h"

#define RESULT                                                                           \
    "Now: 2027-03-10T08:40:00-05:00 (America/New_York)\n"                                \
    "what's on my calendar tomorrow?\n"                                                   \
    "{\"events\": [{\"title\": \"Q2 budget review\", \"start\": "                         \
    "\"2027-03-11T14:00:00-05:00\", \"location\": \"Conf room 4B\", \"organizer\": "      \
    "{\"email\": \"dana.okafor@harbourlight.org\", \"name\": \"Dana Okafor\"}}, "         \
    "{\"title\": \"Check-in with Tomás\", \"start\": \"2027-03-11T09:30:00-05:00\"}]," \
    " \"count\": 2}\n"                                                                    \
    "{\"files\": [{\"path\": \"/home/p/files/Notes/budget.md\", \"matches\": [{\"line\": " \
    "3, \"text\": \"Total Q2 $240,450\\nTravel is up\"}]}]}\n"

static int setup_with(fixture *f, const char *text, const char *claims, const char *trigger)
{
    if (fixture_open(f, 0)) return -1;
    return hx_ground_stage_new(f->v, text, claims, trigger, &f->in_call, &f->st) ? -1 : 0;
}

static int setup(fixture *f) { return setup_with(f, RESULT, NULL, "<tool_call>"); }

static int32_t tokens(const fixture *f, const char *s, int32_t *t, int32_t max)
{
    return hx_tokenize(f->v, s, strlen(s), t, max, 0, 0);
}

/* Whether token t is allowed next: every token offered, t ranked first. */
static int allowed(fixture *f, int32_t t)
{
    for (int32_t i = 0; i < f->n; i++) f->logits[i] = 0;
    f->logits[t] = 1;
    f->st.apply(f->st.ctx, f->logits, f->n);
    return isfinite(f->logits[t]);
}

/* Whether the text s can be written next, token by token; the stage is
 * left after s when it can (else partway). */
static int writes(fixture *f, const char *s)
{
    int32_t t[256];
    int32_t n = tokens(f, s, t, 256);
    for (int32_t i = 0; i < n; i++) {
        if (!allowed(f, t[i])) return 0;
        f->st.accept(f->st.ctx, t[i]);
    }
    return n > 0;
}

/* writes() from a fresh stage over text after the answer's start
 * `before`. */
static int writes_over(const char *text, const char *before, const char *s)
{
    fixture f;
    if (setup_with(&f, text, NULL, "<tool_call>")) return -1;
    feed(&f, before);
    int ok = writes(&f, s);
    teardown(&f);
    return ok;
}

static int writes_after(const char *before, const char *s) { return writes_over(RESULT, before, s); }

static void test_times_and_dates(void)
{
    EXPECT(writes_after("You have ", "2 events tomorrow") == 1);
    EXPECT(writes_after("Budget review at ", "14:00.") == 1);
    EXPECT(writes_after("Budget review at ", "15:30") == 0); /* invented */
    EXPECT(writes_after("Budget review at ", "14:3") == 0);  /* 14:30 is no copy */
    EXPECT(writes_after("It is on ", "2027-03-11 at 09:30") == 1);
    EXPECT(writes_after("It is on ", "2027-03-12") == 0);
    EXPECT(writes_after("You have ", "7 events") == 0); /* no such number */
    /* an hour and a colon reads as a time cut short ("at 12: more"); a
     * date's colon is punctuation */
    EXPECT(writes_after("Budget review at ", "14: more") == 0);
    EXPECT(writes_after("On ", "2027-03-11: two events") == 1);
    /* a time cut short is no copy of one: "14:0" cannot end */
    fixture f;
    ASSERT(setup(&f) == 0);
    feed(&f, "at 14:0");
    int32_t sp[4];
    ASSERT(tokens(&f, " ", sp, 4) == 1);
    EXPECT(!allowed(&f, sp[0]));
    EXPECT(hx_vocab_eos(f.v) < 0 || !allowed(&f, hx_vocab_eos(f.v)));
    teardown(&f);
}

/* The stage over logits where only the tokens of pieces (and the end of
 * the turn, eos) are finite, after before: which of them stay finite, a
 * bit each (the eos last). */
static int dead_end_kept(const char *before, const char *const *pieces, int n, int eos)
{
    fixture f;
    if (setup(&f)) return -1;
    feed(&f, before);
    int32_t t[8];
    for (int i = 0; i < n; i++)
        if (tokens(&f, pieces[i], &t[i], 1) != 1) return teardown(&f), -1;
    const int32_t e = hx_vocab_eos(f.v);
    if (e < 0) return teardown(&f), -1;
    for (int32_t i = 0; i < f.n; i++) f.logits[i] = -INFINITY;
    for (int i = 0; i < n; i++) f.logits[t[i]] = (float)i;
    if (eos) f.logits[e] = -1;
    f.st.apply(f.st.ctx, f.logits, f.n);
    int kept = 0;
    for (int i = 0; i < n; i++) kept |= isfinite(f.logits[t[i]]) << i;
    if (eos) kept |= isfinite(f.logits[e]) << n;
    teardown(&f);
    return kept;
}

/* Where the earlier stages leave no token the rules allow ("14:09" is no
 * copy), the turn ends rather than writing on ungrounded; controls: a
 * token that is allowed (the "0" of "14:00") is taken over the end, and
 * with no end to take the logits stay. */
static void test_dead_end(void)
{
    const char *nine[] = {"9"}, *zero[] = {"9", "0"};
    EXPECT_EQ_INT(dead_end_kept("at 14:0", nine, 1, 1), 2);
    EXPECT_EQ_INT(dead_end_kept("at 14:0", zero, 2, 1), 2);
    EXPECT_EQ_INT(dead_end_kept("at 14:0", nine, 1, 0), 1);
}

/* Aliases derived explicitly: the weekday and month name of a date, the
 * 12-hour forms of a time, "tomorrow" from "Now:". */
static void test_aliases(void)
{
    EXPECT(writes_after("It is on ", "Thursday, March 11 at 2 PM") == 1);
    EXPECT(writes_after("It is on ", "11 March at 2:00pm") == 1);
    EXPECT(writes_after("It is on ", "Friday") == 0);
    EXPECT(writes_after("It is ", "tomorrow at 9:30 AM") == 1);
    EXPECT(writes_after("It is on ", "April 11") == 0);
}

static void test_names_addresses_files(void)
{
    EXPECT(writes_after("You meet ", "Dana Okafor in Conf room 4B") == 1);
    EXPECT(writes_after("You meet ", "Tlinic") == 0);       /* no such name */
    EXPECT(writes_after("You meet ", "Dana Okaforx") == 0); /* a word made longer */
    EXPECT(writes_after("You meet ", "Dana's team") == 1);
    EXPECT(writes_after("You meet ", "Check-in with Tomás") == 1);
    EXPECT(writes_after("Mail ", "dana.okafor@harbourlight.org.") == 1);
    EXPECT(writes_after("Mail ", "dana.okafor@harbourlight.org.uk") == 0); /* a suffix added */
    EXPECT(writes_after("Mail ", "dana@harbourlight.org") == 0);
    EXPECT(writes_after("See ", "Notes/budget.md: Total Q2 $240,450") == 1);
    EXPECT(writes_after("See ", "budget.txt") == 0);
    EXPECT(writes_after("See ", "Travel is up") == 1); /* after a "\n" of the result */
}

/* The model's own words are free: lowercase words, a sentence's first
 * word, "I"; a word's case in the text does not matter. */
static void test_words_untouched(void)
{
    EXPECT(writes_after("", "Sure, here is what I found: the budget review is tomorrow.") == 1);
    EXPECT(writes_after("", "Okay. Nothing else is planned, I think.") == 1);
    EXPECT(writes_after("", "I can't do that: I can only use your calendar.") == 1);
    EXPECT(writes_after("You have a ", "Budget Review") == 1);
    /* a word longer than the stage follows (192 bytes) is let through, and
     * its end is read within what was kept of it */
    char longw[400];
    memset(longw, 'a', 300);
    snprintf(longw + 300, sizeof longw - 300, "n't then ");
    EXPECT(writes_after("", longw) == 1);
}

/* Claims need the planner's licence, or a negation before them. */
static void test_claims(void)
{
    EXPECT(writes_after("I ", "booked it") == 0);
    EXPECT(writes_after("", "Nothing was added.") == 1);
    EXPECT(writes_after("The mail was ", "not sent.") == 1);
    EXPECT(writes_after("There is no slot, so I ", "booked nothing.") == 1);
    EXPECT(writes_after("There is no slot, so I ", "booked it.") == 0);
    EXPECT(writes_after("So I ", "booked. ") == 0);
    EXPECT(writes_after("", "Added \"Q2 budget review\" ") == 0);
    /* a claim glued to letters is read as the claim ("Addeda in 14.");
     * controls: "sentence", a claim's word before a blank */
    EXPECT(writes_after("", "Addeda in 14.") == 0);
    EXPECT(writes_after("", "Bookedstartam ") == 0);
    EXPECT(writes_after("", "Booked're me. ") == 0);
    EXPECT(writes_after("", "Noted-ish about it. ") == 0);
    EXPECT(writes_after("", "Cancelled/voyage. ") == 0);
    EXPECT(writes_after("In a ", "sentence. ") == 1);
    EXPECT(writes_after("", "Sentdreonas Keller wrote. ") == 0);
    EXPECT(writes_after("", "Senteach Keller wrote. ") == 0);
    EXPECT(writes_after("Two ", "sentences and a sentry. ") == 1);
    EXPECT(writes_after("", "Added nothing. ") == 1);
    fixture f;
    ASSERT(setup_with(&f, RESULT, "added created, booked", "<tool_call>") == 0);
    EXPECT(writes(&f, "Added \"Q2 budget review\"; booked."));
    EXPECT(!writes(&f, " Sent it"));
    teardown(&f);
    EXPECT(hx_ground_is_claim("Queued", 6) && !hx_ground_is_claim("queue", 5));
    /* "you declined" only when the user did, not for a missing terminal */
    EXPECT(writes_after("I did not send it: you ", "declined. ") == 0);
    ASSERT(setup_with(&f, RESULT, "declined", "<tool_call>") == 0);
    EXPECT(writes(&f, "I did not send it: you declined. "));
    teardown(&f);
}

/* Markup never reaches the answer; the call trigger is the grammar's
 * when the turn may call, masked when it may not. */
static void test_markup(void)
{
    fixture f;
    EXPECT(writes_after("Done ", "</tool_call>") == 0);
    EXPECT(writes_after("Done ", "<tool_response>") == 0);
    EXPECT(writes_after("Done ", "<|im_end|>") == 0);
    EXPECT(writes_after("Let me look. ", "<tool_call>") == 1);
    /* a result's JSON syntax copied into prose; the same words without it */
    EXPECT(writes_after("Budget review ", "is queued\"}} have 2 events") == 0);
    EXPECT(writes_after("You have ", "{\"count\": 2}") == 0);
    EXPECT(writes_after("", "{\"name\" is 2027-03-10.") == 0);
    ASSERT(setup_with(&f, RESULT, NULL, HX_TOOL_CALL_PYTHON) == 0); /* Llama: a call's '{' */
    EXPECT(writes(&f, "{\""));
    teardown(&f);
    EXPECT(writes_after("You have ", "2 events: \"Q2 budget review\" and \"Check-in with Tomás\".") == 1);
    ASSERT(setup_with(&f, RESULT, NULL, NULL) == 0); /* a turn that may not call */
    EXPECT(!writes(&f, "<tool_call>"));
    teardown(&f);
    ASSERT(setup(&f) == 0);
    EXPECT(writes(&f, "Mail <dana.okafor@harbourlight.org>")); /* a '<' that is no markup */
    /* inside a call the stage does nothing; after it the text is judged */
    f.in_call = 1;
    EXPECT(writes(&f, "{\"range\": \"next March 99\"}"));
    feed(&f, "</tool_call");
    f.in_call = 0; /* the loop guard's, at the closing tag's end */
    feed(&f, ">");
    EXPECT(!writes(&f, " at 15:30"));
    teardown(&f);
    char s[] = "Here<tool_call>{} it is</tool_call><|im_end|> now<|eot_id|>";
    hx_strip_markup(s);
    EXPECT_STR_EQ(s, "Here{} it is now");
    /* markup inside markup: taken out, the halves join and go too */
    char joined[] = "Done.</tool<think>_call> ok <<|x|>think>";
    EXPECT_EQ_INT(hx_strip_markup(joined), strlen("Done. ok "));
    EXPECT_STR_EQ(joined, "Done. ok ");
    EXPECT(hx_markup_prefix("ok </tool", 9) == 6 && hx_markup_prefix("a < b", 5) == 0);
}

/* A scripted model that means to invent a time and a room: it ranks the
 * pieces of "... at 15:30 in Xylo hall 7." first and, second, the pieces
 * of what it read, while its text is still a prefix of each; greedy
 * decoding through the stage writes the time and room the tool returned. */
/* The answer greedy decoding through the stage writes (caller frees)
 * for a scripted model that prefers meant's pieces and then read's. */
static char *scripted(fixture *f, const char *meant, const char *read)
{
    hx_buf out;
    hx_buf_init(&out);
    for (int step = 0; step < 80; step++) {
        const size_t at = out.len;
        const int on_meant = !at || !strncmp(meant, out.data, at);
        const int on_read = !at || !strncmp(read, out.data, at);
        for (int32_t i = 0; i < f->n; i++) {
            size_t len = 0;
            const char *p = hx_vocab_piece(f->v, i, &len);
            f->logits[i] = -10;
            if (!p || !len || hx_vocab_is_special(f->v, i)) continue;
            if (on_meant && at + len <= strlen(meant) && !memcmp(meant + at, p, len)) f->logits[i] = 10;
            else if (on_read && at + len <= strlen(read) && !memcmp(read + at, p, len)) f->logits[i] = 5;
        }
        if (at == strlen(read)) f->logits[hx_vocab_eos(f->v)] = 10;
        f->st.apply(f->st.ctx, f->logits, f->n);
        int32_t best = 0;
        for (int32_t i = 1; i < f->n; i++)
            if (f->logits[i] > f->logits[best]) best = i;
        if (best == hx_vocab_eos(f->v) || !isfinite(f->logits[best])) break;
        size_t len = 0;
        const char *p = hx_vocab_piece(f->v, best, &len);
        hx_buf_append(&out, p, len);
        f->st.accept(f->st.ctx, best);
    }
    return hx_buf_steal(&out, NULL);
}

static void test_scripted_invented_time(void)
{
    fixture f;
    ASSERT(setup(&f) == 0);
    const char *meant = "Your Q2 budget review is tomorrow at 15:30 in Xylo hall 7.";
    const char *read = "Your Q2 budget review is tomorrow at 14:00 in Conf room 4B.";
    char *out = scripted(&f, meant, read);
    EXPECT_STR_EQ(out, read);
    free(out);
    teardown(&f);
}

/* RESULT with its two results marked as tool results: their items are
 * the two events and the one file. */
#define M "\x1e"
#define MARKED                                                                           \
    "Now: 2027-03-10T08:40:00-05:00 (America/New_York)\n"                                \
    "what's on my calendar tomorrow?\n" M                                                \
    "{\"events\": [{\"title\": \"Q2 budget review\", \"start\": "                         \
    "\"2027-03-11T14:00:00-05:00\", \"location\": \"Conf room 4B\", \"organizer\": "      \
    "{\"email\": \"dana.okafor@harbourlight.org\", \"name\": \"Dana Okafor\"}}, "         \
    "{\"title\": \"Check-in with Tomás\", \"start\": \"2027-03-12T09:30:00-05:00\"}]," \
    " \"count\": 2}" M "\n 2\n" M                                                         \
    "{\"files\": [{\"path\": \"/home/p/files/Notes/budget.md\", \"matches\": [{\"line\": " \
    "3, \"text\": \"Total Q2 $240,450\\nTravel is up\"}]}]}" M "\n"

static int writes_marked(const char *before, const char *s) { return writes_over(MARKED, before, s); }

/* An answer's text after its start, over MARKED, and whether it may be
 * written. */
typedef struct marked_case {
    const char *before, *text;
    int want;
} marked_case;

static void check_marked(const marked_case *cases, size_t n, int line)
{
    for (size_t i = 0; i < n; i++)
        if (writes_marked(cases[i].before, cases[i].text) != cases[i].want)
            test_fail_at(__FILE__, line, "%s%s: not %d", cases[i].before, cases[i].text,
                         cases[i].want);
}

/* MARKED, a result that is no list (an event created) and a search whose
 * range is outside its list's items. */
#define CREATED                                                                          \
    MARKED "add that on friday at noon\n" M "{\"uid\": \"e7\", \"title\": \"Dentist\", " \
    "\"start\": \"2027-03-12T12:00:00-05:00\"}" M "\n" M "{\"range\": {\"start\": "        \
    "\"2027-03-16T16:30:00-05:00\"}, \"slots\": [{\"start\": \"2027-03-16T17:00:00-05:00\"}]}" M "\n"

/* A clause's facts come from one item of a result, or from outside
 * every item; the same words pass unmarked, in another clause, or paired
 * as the result pairs them. */
static void test_items(void)
{
    static const marked_case cases[] = {
        {"Your ", "Q2 budget review is at 14:00 in Conf room 4B.", 1},
        {"Your ", "Q2 budget review is at 09:30", 0}, /* the other's time */
        {"You have ", "Check-in with Tomás at 09:30", 1},
        {"You have ", "Check-in with Tomás at 14:00", 0},
        {"You have ", "Check-in with Tomás on Friday at 9:30 AM", 1},
        {"You have ", "Check-in with Tomás on Thursday", 0}, /* the 11th's */
        {"You have ", "Check-in with Dana Okafor", 0},
        {"You have ", "Q2 budget review with Dana Okafor at 2 PM", 1},
        /* a new clause is free of the last one's item */
        {"", "Q2 budget review at 14:00 and Check-in with Tomás at 09:30.", 1},
        {"", "Q2 budget review at 14:00, Check-in with Tomás at 09:30.", 1},
        {"", "Q2 budget review at 14:00. Tomás at 09:30.", 1},
        {"", "Tomorrow: Q2 budget review at 14:00", 1},
        {"", "On Thursday you have Check-in", 0}, /* the 12th's */
        {"", "On Friday you have Check-in", 1},
        /* facts outside every item bind nothing: the request, a count */
        {"You have ", "2 events tomorrow", 1},
        {"In ", "Notes/budget.md: Total Q2 $240,450", 1},
        {"In ", "Notes/budget.md at 14:00", 0},
    };
    check_marked(cases, sizeof cases / sizeof *cases, __LINE__);
    /* the control: unmarked, the pairing is not known */
    EXPECT(writes_after("Your ", "Q2 budget review is at 09:30") == 1);
    /* a result with no list is one item: the event created */
    EXPECT(writes_over(CREATED, "You have ", "Dentist on Friday at 12:00.") == 1);
    EXPECT(writes_over(CREATED, "You have ", "Dentist at 09:30") == 0);
    EXPECT(writes_over(CREATED, "You have ", "Check-in with Tomás at 12:00") == 0);
    EXPECT(writes_over(CREATED, "", "Dentist at 12:00 and Check-in with Tomás at 09:30") == 1);
    /* a 12-hour time keeps its AM or PM: "2:00" is not 14:00 */
    EXPECT(writes_marked("Your ", "Q2 budget review is at 2:00 PM.") == 1);
    EXPECT(writes_marked("Your ", "Q2 budget review is at 2:00.") == 0);
    EXPECT(writes_marked("Your ", "Q2 budget review is at 2:00 pm") == 1);
    EXPECT(writes_marked("Your ", "Q2 budget review is at 2:00 AM") == 0);
    EXPECT(writes_marked("Your ", "Q2 budget review is at 14:00.") == 1);
    /* nor is a time's seconds or UTC offset a time: "14:00:00-05:00" */
    EXPECT(writes_marked("Your ", "Q2 budget review is at 00:00.") == 0);
    EXPECT(writes_marked("Your ", "Q2 budget review is at 05:00.") == 0);
    EXPECT(writes_marked("Your ", "Q2 budget review is at 12:00 AM.") == 0);
    /* a result's words outside its items (a range's midnight) are said of
     * no item */
    EXPECT(writes_over(CREATED, "You have ", "Check-in with Tomás at 16:30") == 0);
    EXPECT(writes_over(CREATED, "You are free at ", "17:00 from 16:30") == 0);
    EXPECT(writes_over(CREATED, "You are free at ", "17:00, from 16:30") == 1);
    EXPECT(writes_over(CREATED, "From ", "16:30 you have Check-in with Tomás") == 1);
}

/* A name a result gives (a title, a path, a person's) is said whole, or
 * from one of its words to its end, unless the words stand free elsewhere
 * (the request's); a result's keys are syntax, not facts. */
static void test_names_whole(void)
{
    static const marked_case cases[] = {
        {"You have ", "Check at 09:30", 0}, /* of "Check-in with Tomás" */
        {"You have ", "Check-in at 09:30", 0},
        {"You have ", "Check-in with at 09:30", 0},
        {"You have ", "Check-in with Tomás at 09:30", 1},
        {"You have ", "Tomás at 09:30", 1},
        {"You have ", "Q2 budget at 14:00", 0},
        {"You have ", "Q2 budget review at 14:00", 1},
        {"It is in ", "Conf room.", 0},
        {"It is in ", "Conf room 4B.", 1},
        {"In ", "Notes/budget, Total Q2 $240,450", 0},
        {"In ", "Notes/budget.md, Total Q2 $240,450", 1},
        {"Your ", "Q2 budget review is with Dana Okafor.", 1},
        /* a key is no copy */
        {"It is in the ", "Location", 0},
        {"It is in the ", "Location of Conf room 4B", 0},
    };
    check_marked(cases, sizeof cases / sizeof *cases, __LINE__);
    /* controls: the same words free in the request, or unmarked */
    EXPECT(writes_over(MARKED "is the Q2 budget on? check the Location\\n", "You have ",
                       "Q2 budget at 14:00") == 1);
    EXPECT(writes_over(MARKED "is the Q2 budget on? check the Location\\n", "It is in the ",
                       "Location") == 1);
    EXPECT(writes_after("You have ", "Check at 09:30") == 1);
    /* a scripted model that means to cut the title writes it whole */
    fixture f;
    ASSERT(setup_with(&f, MARKED, NULL, "<tool_call>") == 0);
    char *out = scripted(&f, "You have Check at 09:30.", "You have Check-in with Tomás at 09:30.");
    EXPECT_STR_EQ(out, "You have Check-in with Tomás at 09:30.");
    free(out);
    teardown(&f);
    /* an answer cut short is cut before a name it would leave half said */
    size_t end = 0;
    const char *cut = "You have Check-in with";
    EXPECT_EQ_INT(hx_ground_end(MARKED, NULL, cut, strlen(cut), &end), HX_OK);
    EXPECT_EQ_INT(end, strlen("You have"));
    cut = "You have Check-in with Tomás at";
    EXPECT_EQ_INT(hx_ground_end(MARKED, NULL, cut, strlen(cut), &end), HX_OK);
    EXPECT_EQ_INT(end, strlen(cut));
}

/* A result with an address whose domain goes on past a shorter one and
 * an event whose uid is shaped like an address. */
#define IDS                                                                                 \
    M "{\"events\": [{\"uid\": \"tobi-geburtstag@privat.lena\", \"title\": "                \
      "\"Tobis Geburtstag\", \"start\": \"2027-10-30T10:00:00+02:00\", \"organizer\": "       \
      "{\"email\": \"kenta.mori@kansai-robotics.co.jp\"}}]}" M "\n"

/* An address is said whole, not to a shorter domain; an item's id (an
 * event's uid, a mail's id) is no source of a fact, while the same text
 * under another key is. */
static void test_addresses_whole_ids_none(void)
{
    EXPECT(writes_over(IDS, "It is from ", "kenta.mori@kansai-robotics.co and") == 0);
    EXPECT(writes_over(IDS, "It is from ", "kenta.mori@kansai-robotics.co. Then") == 0);
    EXPECT(writes_over(IDS, "It is from ", "kenta.mori@kansai-robotics.co.jp and") == 1);
    EXPECT(writes_over(IDS, "It is from ", "kenta.mori@kansai-robotics.co.jp. Then") == 1);
    EXPECT(writes_over(IDS, "You have ", "Tobis Geburtstag@privat.lena at 10:00") == 0);
    EXPECT(writes_over(IDS, "You have ", "Tobis Geburtstag at 10:00") == 1);
    EXPECT(writes_over(M "{\"location\": \"tobi-geburtstag@privat.lena\"}" M "\n", "It is at ",
                       "tobi-geburtstag@privat.lena") == 1);
    EXPECT(writes_over(M "{\"id\": \"1811853000.M8P2207.aiko-pc\"}" M "\n", "It is ",
                       "1811853000") == 0);
}

/* A file the tools found, and the same name's tail asked about. */
#define DAL                                                                       \
    M "{\"files\": [{\"name\": \"dal-makhani.md\", \"path\": "                      \
      "\"Recipes/dal-makhani.md\"}]}" M "\n"

/* A copy starts inside a name only after a blank or a '/': the tail of a
 * file name ("makhani.md" of "dal-makhani.md") names no file; the whole
 * name, its path's part after a '/', and the same words outside a name
 * do. */
static void test_name_tails(void)
{
    EXPECT(writes_over(DAL, "It is ", "makhani.md.") == 0);
    EXPECT(writes_over(DAL, "It is ", "dal-makhani.md.") == 1);
    EXPECT(writes_over(DAL, "It is in ", "Recipes/dal-makhani.md.") == 1);
    EXPECT(writes_over("is makhani.md there?\n" DAL, "It is ", "makhani.md.") == 1);
}

static void test_scripted_paired_time(void)
{
    fixture f;
    ASSERT(setup_with(&f, MARKED, NULL, "<tool_call>") == 0);
    const char *meant = "Your Q2 budget review is at 9:30 AM.";
    const char *read = "Your Q2 budget review is at 2 PM.";
    char *out = scripted(&f, meant, read);
    EXPECT_STR_EQ(out, read);
    free(out);
    teardown(&f);
    ASSERT(setup(&f) == 0); /* control: unmarked, the pairing is not known */
    out = scripted(&f, meant, read);
    EXPECT_STR_EQ(out, meant);
    free(out);
    teardown(&f);
}

/* hx_ground_end: where an answer cut short may end. */
static size_t end_over(const char *text, const char *claims, const char *answer)
{
    size_t end = (size_t)-1;
    EXPECT_EQ_INT(hx_ground_end(text, claims, answer, strlen(answer), &end), HX_OK);
    return end;
}

static size_t end_of(const char *claims, const char *answer) { return end_over(RESULT, claims, answer); }

static void test_end(void)
{
    /* the escape: a claim no call licensed is not left as the answer */
    EXPECT_EQ_INT(end_of(NULL, "Sent. Sent. Sent"), 0);
    EXPECT_EQ_INT(end_of(NULL, "I booked"), 1);
    /* nor a fact the stage would not have let through, nor half a word */
    EXPECT_EQ_INT(end_of(NULL, "Q2 budget review at 14:00 and Lunch at 12:30"),
                  strlen("Q2 budget review at 14:00 and"));
    EXPECT_EQ_INT(end_of(NULL, "Q2 budget review at 14:0"), strlen("Q2 budget review at"));
    EXPECT_EQ_INT(end_of(NULL, "Q2 budget review at 2:00"), strlen("Q2 budget review at"));
    EXPECT_EQ_INT(end_of(NULL, "Q2 budget review at 2:00 PM"), strlen("Q2 budget review at 2:00 PM"));
    /* controls: the same claim licensed, a negation after it, a grounded
     * answer: whole */
    EXPECT_EQ_INT(end_of("sent queued", "Sent. Sent. Sent"), strlen("Sent. Sent. Sent"));
    EXPECT_EQ_INT(end_of(NULL, "I booked nothing"), strlen("I booked nothing"));
    EXPECT_EQ_INT(end_of(NULL, "Q2 budget review at 14:00. "), strlen("Q2 budget review at 14:00."));
}

/* A day whose only event was cancelled, and one that is on. */
#define CANCELLED                                                                           \
    M "{\"events\": [{\"uid\": \"pilates-1108@privat.lena\", \"title\": \"Pilates\", "       \
      "\"start\": \"2027-11-08T18:00:00+01:00\", \"status\": \"cancelled\"}, {\"title\": "   \
      "\"Yoga\", \"start\": \"2027-11-09T07:00:00+01:00\", \"attendees\": [{\"status\": "   \
      "\"accepted\"}]}]}" M "\n"

/* A cancelled event is named only as cancelled: "Pilates at 18:00" says
 * it is on (the word "cancelled" there is the name's, no claim of the
 * turn's). Controls: the event that is on, and the user's own word for it
 * (the request's) said freely. */
static void test_cancelled_named_so(void)
{
    EXPECT(writes_over(CANCELLED, "You have ", "Pilates at 18:00.") == 0);
    EXPECT(writes_over(CANCELLED, "You have ", "Pilates. It is on.") == 0);
    EXPECT_EQ_INT(end_over(CANCELLED, NULL, "You have Pilates."), strlen("You have"));
    EXPECT_EQ_INT(end_over(CANCELLED, NULL, "I cancelled Yoga."), strlen("I"));
    EXPECT(writes_over(CANCELLED, "You had ", "Pilates (cancelled) at 18:00.") == 1);
    EXPECT_EQ_INT(end_over(CANCELLED, NULL, "You had Pilates (cancelled)."),
                  strlen("You had Pilates (cancelled)."));
    EXPECT(writes_over(CANCELLED, "Then ", "Yoga at 07:00.") == 1);
    EXPECT(writes_over("is Pilates on?\n" CANCELLED, "No, ", "Pilates was cancelled.") == 1);
}

/* The clock and a result: tomorrow's dentist at 16:00, now 09:00. */
#define CLOCK                                                                               \
    "Now: 2026-12-01T09:00:00+01:00 (Tuesday, Europe/Paris)\n" M "{\"events\": [{\"title\": "  \
    "\"Dentist\", \"start\": \"2026-12-02T16:00:00+01:00\"}]}" M "\n"

/* The clock's time is no item's: "Dentist at 09:00" would give a
 * dentist at 16:00 the time it is now. Controls: the dentist's own time,
 * and the clock's in a clause of its own. */
static void test_clock_no_items(void)
{
    EXPECT(writes_over(CLOCK, "You have ", "Dentist at 09:00.") == 0);
    EXPECT(writes_over(CLOCK, "You have ", "Dentist at 16:00 tomorrow.") == 1);
    EXPECT(writes_over(CLOCK, "It is ", "09:00 now, and you have Dentist at 16:00.") == 1);
}

/* A title that ends in a bracket: said whole it ends there, and the word
 * in the brackets alone is the name's tail ("Omron"); neither may be a
 * dead end, where nothing is allowed. */
#define BRACKET M "{\"events\": [{\"title\": \"Vendor visit (Omron)\"}]}" M "\n"
static void test_bracket_names(void)
{
    EXPECT_EQ_INT(end_over(BRACKET, NULL, "You have Vendor visit (Omron)."),
                  strlen("You have Vendor visit (Omron)."));
    EXPECT_EQ_INT(end_over(BRACKET, NULL, "It is Omron."), strlen("It is Omron."));
    EXPECT_EQ_INT(end_over(BRACKET, NULL, "You have Vendor visit."), strlen("You have"));
    EXPECT_EQ_INT(end_over(BRACKET, NULL, "You have Vendor visit (Omron at 11."), strlen("You have"));
}



int main(void)
{
    RUN(test_times_and_dates);
    RUN(test_dead_end);
    RUN(test_aliases);
    RUN(test_names_addresses_files);
    RUN(test_words_untouched);
    RUN(test_claims);
    RUN(test_markup);
    RUN(test_scripted_invented_time);
    RUN(test_items);
    RUN(test_scripted_paired_time);
    RUN(test_names_whole);
    RUN(test_addresses_whole_ids_none);
    RUN(test_name_tails);
    RUN(test_cancelled_named_so);
    RUN(test_bracket_names);
    RUN(test_clock_no_items);
    RUN(test_end);
    return test_summary();
}
