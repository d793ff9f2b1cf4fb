/* dgcompose.c: training requests composed from independently drawn parts
 * (openers, verbs and their synonyms, object phrases, word orders,
 * questions or orders, closers, case) and time phrases re-said in the
 * other ways the tools' time reader understands. */
#include <string.h>

#include "sim/sim.h"

/* Each pattern is literal text, {slot}s and [a|b|c] groups (one option
 * drawn, "" allowed, no nesting). Kinds with no grammar keep their
 * templates. Every free/busy pattern asks about free or busy time, never
 * "anything" (that asks for the events); no pattern says "room" (a
 * nightly adapter's habit its contrast tasks must not name). */
static const struct grammar {
    const char *kind;
    const char *const *pat;
    int n_pat;
} grammars[] = {
    {"list_events",
     (const char *const[]){
         "[What's|What is] [on|in] my [calendar|schedule|diary|agenda] {when}?",
         "What [do I have|have I got|is planned|is happening|is booked|am I doing] {when}?",
         "[Show|List|Give|Read|Pull up|Bring up|Display|Get] [me |]my [events|meetings|appointments|calendar|schedule|agenda] [for |]{when}",
         "[Any|Are there any|Do I have any] [meetings|events|appointments] {when}?",
         "[Is there|Have I got|Do I have] anything [on|planned|booked|scheduled|in my calendar] {when}?",
         "[I'd like to know|I want to know|Tell me|Let me know] what [I have|is on my calendar|meetings I have|my calendar says] {when}",
         "[Check|Look at|Go over|Run through] my [calendar|schedule|agenda|diary] [for |]{when}",
         "What does my [calendar|schedule|diary] look like {when}?",
         "{when}: what [is on|do I have|have I got]?",
         "[Which|What] [meetings|events|appointments] [are there|do I have|have I got] {when}?"},
     10},
    {"event_when",
     (const char *const[]){
         "[When is|When's|What time is|What day is|When do I have|When have I got] [the |my |]{name}?",
         "[Tell me|Let me know|Remind me|Check|Look up|Find out] [when|what time|what day] [the |my |]{name} is",
         "[Is|Is the|Is my] {name} still [on|happening|planned]?",
         "What time [does|will] [the |my |]{name} start?",
         "[When is|When's] [the |my |]next {name}?",
         "{name}[:|,|?] when [is it|is that|was that again]?"},
     6},
    {"free_busy",
     (const char *const[]){
         "[Am I|Will I be|Would I be] [free|busy|available|booked|tied up|open] {when}?",
         "[Do I have|Have I got|Is there] [any |some |]free time {when}?",
         "[Check|See|Find out|Tell me|Let me know] [if|whether] I'm [free|busy|available] {when}",
         "How [busy|free|booked] am I {when}?",
         "Is my [calendar|schedule|diary] [free|clear|open|busy|full] {when}?",
         "[Check|Show me|Tell me] my [availability|free time|busy times] {when}",
         "When am I busy {when}?",
         "{when}, am I [free|busy|available]?"},
     8},
    {"find_slots",
     (const char *const[]){
         "[Find|Get|Suggest|Look for|Search for|Show me] [me |][a free|an open|a] {durp} [slot|window|gap|opening|block] {when}",
         "[When am I free for|When can I fit in|When could I squeeze in|Where can I fit] {durn} {when}?",
         "[Is there|Do I have|Have I got] [a free|an open|a] {durp} [slot|window|gap] {when}?",
         "[I need|I'm looking for|I want] [a free|an open] {durp} [slot|window] {when}",
         "[Can|Could] I [fit|squeeze] [in |]a {durp} [meeting|call|slot] {when}?",
         "Find [me |]{durn} [of free time|free|open] {when}",
         "{when}, [where|when] [could|can|would] {durn} [fit|go]?",
         "[Find|Look for|Suggest] [a time|some time|a slot] for a {durp} [meeting|call|chat] {when}"},
     8},
    {"create_event",
     (const char *const[]){
         "[Add|Put|Create|Schedule|Book|Enter|Log|Make] [an event |an entry |]{title} [on my calendar |in my calendar |in my diary |]{at}[ for {durn}|, {durn}| lasting {durn}|]",
         "[Add|Put|Book|Pencil in] a {durp} {title} [on my calendar |in my diary |]{at}",
         "[Add|Create] [an event|an appointment|an entry] [called|named|titled] [{title}|\"{title}\"] {at}[ for {durn}|]",
         "{title} {at}[ for {durn}|, {durn}|], [add it|put it in my calendar|please add it|book it]",
         "[Can|Could] you [add|put|book|schedule] {title} {at}[ for {durn}|]?",
         "[Block|Hold|Reserve] {durn} {at} for {title}",
         "[Put|Add] \"{title}\" [in|on] my [calendar|diary] {at}[ for {durn}|, {durn} long|]",
         "[New event|New appointment|Calendar entry]: {title}, {at}[, {durn}|]",
         "[Remind me about|Set a reminder for|I need a reminder for] {title} {at}[, {durn}|]",
         "[Block|Hold|Reserve|Keep] {at} for {title}[, {durn}| ({durn})|]",
         "[Pencil in|Put down|Jot down|Stick] {title} [for |]{at}[, {durn}| for {durn}|]",
         "{at}[:| -] {title}[, {durn}| for {durn}|], [add it|on the calendar please|put it in]"},
     12},
    {"mail_search",
     (const char *const[]){
         "[Did {who} email|Did {who} write to|Has {who} written to|Has {who} emailed|Did {who} mail] me [about|on|regarding] {topic}?",
         "[Find|Search for|Look for|Show me|Get|Pull up|Dig out|Look up] [the |any |][mail|email|message|emails|messages] from {who} [about|on|regarding|re] {topic}",
         "[Find|Show me|Look up|Pull up] {who}'s [mail|email|message|note] [about|on|regarding] {topic}",
         "[Search|Check|Look through] my [mail|inbox|email] for {topic} from {who}",
         "[Any|Is there a|Is there any] [mail|email|message] from {who} [about|on|regarding] {topic}?",
         "[Did I get|Have I got|Have I received] [an email|a mail|a message|anything] from {who} [about|on|regarding] {topic}?",
         "[Find|Search for|Look for] [mail|emails|messages] about {topic} from {who}"},
     7},
    {"mail_read",
     (const char *const[]){
         "What [did {who} say|did {who} write|does {who} say] [about|on|regarding] {topic}?",
         "[Read|Open|Show me|Summarize|Read out|Go through] {who}'s [mail|email|message|note] [about|on|regarding] {topic}",
         "[Read|Open|Summarize] the [mail|email|message] [from {who} about {topic}|about {topic} from {who}]",
         "What's in {who}'s [mail|email|message] [about|on] {topic}?",
         "[Tell me|Let me know|I want to know] what {who} [said|wrote] [about|on|regarding] {topic}",
         "[Give me|I need] the [gist|contents|summary] of {who}'s [mail|email|message] [about|on] {topic}"},
     6},
    {"file_search",
     (const char *const[]){
         "[Where is my {topic} file|Where are my {topic} notes|Where's the {topic} document|Where is the file on {topic}]?",
         "[Find|Locate|Search for|Look for|Track down|Dig up|Hunt for] [my|the] {topic} [file|notes|document]",
         "[Find|Locate|Search for|Look for] [the |a |my |][file|document] [about|on|for|regarding] {topic}",
         "[Search|Look through|Check] my [files|documents|folders] for {topic}",
         "[Which|What] file [has|mentions|is about|covers] {topic}?",
         "[Do I have|Is there|Have I got] a [file|document] [about|on] {topic}?",
         "[Where did I save|Where did I put|Where did I keep|Where did I store] the {topic} [file|notes|document]?"},
     7},
    {"file_read",
     (const char *const[]){
         "[Read|Open|Show me|Read out|Go through|Display|Pull up] [my|the] {topic} [file|notes|document]",
         "[What does my {topic} file say|What do my {topic} notes say|What does the {topic} document say]?",
         "What's [in|inside|written in] [my|the] {topic} [file|notes|document]?",
         "[Read|Open|Show me] the [file|document|notes] [about|on] {topic}",
         "[Give me|Show me|Tell me] the [contents|text] of [my|the] {topic} [file|notes|document]",
         "What did I [write|note down|jot down] [about|on] {topic}?"},
     6},
    {"files_list",
     (const char *const[]){
         "[What's|What is|What files are|What do I have] in my {folder} folder?",
         "[List|Show me|Show|Give me|Browse] [the files in|the contents of|everything in|what's in] [my |the |]{folder}[ folder|]",
         "[Which|What] [files|documents|notes] are in [my |the |]{folder}[ folder|]?",
         "[List|Show] my {folder} [folder|files|documents]",
         "{folder} folder: [what's in it|list it|show me the files]"},
     5},
    {"send_mail",
     (const char *const[]){
         "[Email|Mail|Message|Write to|Send a mail to|Send an email to|Send a note to] {email} [about|on|regarding|re] {topic}[:|, saying| and say] {msg}",
         "Tell {email} [by email|by mail|in an email|over email] [about|on] {topic}: {msg}",
         "[Send|Write|Shoot] {email} [a mail|an email|a message|a note] [about|on|regarding] {topic}[:| saying| that says] {msg}",
         "[Email|Mail] {email} with [the |]subject {topic}[:|, saying] {msg}",
         "[Can|Could] you [email|mail|write to|message] {email} about {topic}? [Say|Tell them|Write] {msg}"},
     5},
    {"schedule",
     (const char *const[]){
         "[Schedule|Set up|Book|Arrange|Organise|Plan|Fix] a [{durp} |][meeting|call|chat|session] with {who} {when} [about|on|to discuss|regarding|to talk about] {topic}",
         "[Schedule|Set up|Book|Arrange] [{durn}|time] with {who} {when} [about|on|to discuss|regarding] {topic}",
         "[Meet|I'd like to meet|I want to meet|Find a time to meet] {who} {when} [about|on|to discuss|regarding] {topic}[ for {durn}|]",
         "[Can|Could] you [book|set up|schedule|arrange] a [{durp} |]{topic} [meeting|call] with {who} {when}?",
         "[Invite|Get] {who} to a [{durp} |][meeting|call|chat] [about|on] {topic} {when}",
         "{when}, [set up|book|schedule] a [{durp} |][meeting|call] with {who} [about|on] {topic}"},
     6},
    {"unread_mail",
     (const char *const[]){
         "[Any|Do I have any|Have I got any|Is there any] [new|unread] [mail|email|emails|messages][ in my inbox|]?",
         "[Show me|List|Check for|Get me] [new|unread] [mail|email|emails|messages]",
         "[What's|Anything] [new|unread] in my [inbox|mailbox|mail]?",
         "[Check|Look at|Go through] my [inbox|mail|email][ for new messages| for anything unread|]"},
     4},
    {"cancel_event",
     (const char *const[]){
         "[Cancel|Remove|Delete|Drop|Call off|Scrap] [the |my |]{title} [meeting |event |]{when}",
         "{when}, [cancel|drop|delete] [the |my |]{title}",
         "[Can|Could] you [cancel|remove|delete|call off] [the |my |]{title} {when}?",
         "Take [the |my |]{title} off my calendar {when}"},
     4},
    {"move_event",
     (const char *const[]){
         "[Move|Reschedule|Push|Shift|Bump] [the |my |]{title} [meeting |event |]{when} to {at}",
         "[Can|Could] you [move|reschedule|push|shift] [the |my |]{title} {when} to {at}?",
         "{title} {when}: [move|push|shift] it to {at}",
         "Make [the |my |]{title} {when} start {at} instead"},
     4},
    {"remember",
     (const char *const[]){
         "[Remember|Note|Keep in mind|Make a note|Don't forget|Bear in mind|Write down] [that |]{fact}",
         "[Please |Can you |Could you |]remember [that |this: ]{fact}",
         "[Note|Memo|For your memory|Something to remember]: {fact}",
         "[Save|Store|Record] this: {fact}",
         "[Keep|Make|Add] a note that {fact}",
         "[Update your memory|Correction|For the record|FYI][:|,] {fact}"},
     6},
    {"recall_known",
     (const char *const[]){
         "[What's|What is|Remind me, what's|Sorry, what's|Quick check: what's] {ask}[ again|]?",
         "[Do you know|Can you tell me|Could you remind me of|Do you remember] {ask}?",
         "[Tell me|Give me|Remind me of] {ask}",
         "I [forgot|can't remember|don't remember] {ask}[, what is it?|; can you tell me?|]"},
     4},
};

static const char *const openers[] = {"", "", "", "", "So ", "Okay, ", "Right, ", "Um, ",
                                      "Morning! ", "Sorry to bother you, ",
                                      "When you get a chance, ", "If you can, ", "Quick question: "};
static const char *const closers[] = {"", "", "", "", " when you can", " if possible",
                                      " for me", " asap", ", cheers", ", ta"};

/* Kinds asked as another kind is (refusals and recoveries): its grammar. */
static const char *const same_as[][2] = {
    {"declined_send", "send_mail"},     {"policy_deny", "send_mail"},
    {"send_fix", "send_mail"},          {"bad_send_address", "send_mail"},
    {"declined_create", "create_event"}, {"declined_schedule", "schedule"},
    {"schedule_fix", "schedule"},       {"bad_address", "schedule"},
    {"not_organizer", "cancel_event"},  {"bad_when", "list_events"},
    {"remember_related", "remember"},
};

static const struct grammar *grammar_of(const char *kind)
{
    for (size_t i = 0; i < sizeof same_as / sizeof *same_as; i++)
        if (!strcmp(same_as[i][0], kind)) kind = same_as[i][1];
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++)
        if (!strcmp(grammars[i].kind, kind)) return &grammars[i];
    return NULL;
}

/* pat with each [a|b] group replaced by one option drawn with r. */
static void draw_groups(hx_rng *r, const char *pat, hx_buf *out)
{
    for (const char *p = pat; *p; p++) {
        const char *e = *p == '[' ? strchr(p, ']') : NULL;
        if (!e) {
            hx_buf_putc(out, *p);
            continue;
        }
        int n = 1;
        for (const char *q = p + 1; q < e; q++) n += *q == '|';
        int k = hx_rng_below(r, n);
        const char *s = p + 1;
        for (; k; s++) k -= *s == '|';
        hx_buf_append(out, s, strcspn(s, "|]"));
        p = e;
    }
}

/* Lower-cases the literal text of tpl, never a {slot}'s name. */
static void lower_literals(char *s)
{
    for (int in_slot = 0; *s; s++) {
        in_slot = *s == '{' ? 1 : *s == '}' ? 0 : in_slot;
        if (!in_slot && *s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
    }
}

int hx_dg_compose(const char *kind, hx_rng *r, char *tpl, size_t n)
{
    const struct grammar *g = grammar_of(kind);
    if (!g) return 0;
    hx_buf b;
    hx_buf_init(&b);
    const char *open = openers[hx_rng_below(r, (int)(sizeof openers / sizeof *openers))];
    hx_buf_puts(&b, open);
    size_t body = b.len;
    draw_groups(r, g->pat[hx_rng_below(r, g->n_pat)], &b);
    char *s = b.data ? b.data : "";
    if (*open && s[body] >= 'A' && s[body] <= 'Z' && s[body + 1] != ' ' && s[body + 1] != '\'')
        s[body] = (char)(s[body] - 'A' + 'a'); /* "So what's ...", not "So I'd" lowered */
    size_t l = strlen(s);
    int question = l && s[l - 1] == '?';
    if (question) s[--l] = 0, b.len--;
    if (!question || hx_rng_chance(r, 0.3))
        hx_buf_puts(&b, closers[hx_rng_below(r, (int)(sizeof closers / sizeof *closers))]);
    static const char *const ends[] = {"", ".", "!"};
    hx_buf_puts(&b, question ? (hx_rng_chance(r, 0.8) ? "?" : "") : ends[hx_rng_below(r, 3)]);
    s = b.data ? b.data : "";
    if (hx_rng_chance(r, 0.2)) lower_literals(s);
    snprintf(tpl, n, "%s", s);
    hx_buf_free(&b);
    return 1;
}
