/* world.c: synthetic sample worlds for training data and evaluation: a user,
 * people, calendars with recurring meetings, a Maildir, files, memories. */
#include <ctype.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim.h"

/* ---- random numbers (splitmix64) ---- */
void hx_rng_seed(hx_rng *r, uint64_t seed, uint64_t stream)
{
    r->s = seed * 0x9e3779b97f4a7c15ull ^ (stream + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
    hx_rng_next(r);
}

uint64_t hx_rng_next(hx_rng *r)
{
    return hx_splitmix64(&r->s);
}

int hx_rng_below(hx_rng *r, int n)
{
    return n <= 0 ? 0 : (int)(hx_rng_next(r) % (uint64_t)n);
}

int hx_rng_chance(hx_rng *r, double p)
{
    return (double)(hx_rng_next(r) >> 11) * (1.0 / 9007199254740992.0) < p;
}

/* ---- pools: entry i is held out when i % 4 == 3 ---- */
static const char *const first_names[] = {
    "Alice", "Bob", "Carla", "Dan", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas",
    "Kenji", "Laura", "Mateo", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Samir", "Tanya",
    "Umar", "Vera", "Walter", "Ximena", "Yusuf", "Zoe", "Amara", "Bruno", "Chloe", "Dmitri",
    "Esther", "Felix", "Gemma", "Hamza", "Irene", "Jakob", "Keiko", "Liam", "Maya", "Nils",
    "Olga", "Pablo", "Rania", "Stefan", "Tomas", "Ulla", "Viktor", "Wanda", "Yara", "Zane",
    "Aiko", "Boris", "Celia", "Diego", "Emil", "Fatima", "Gustav", "Hana", "Ivan", "Julia",
    "Karim", "Lena", "Marco", "Nora", "Omar", "Paula", "Rafael", "Sofia", "Theo", "Uma",
    "Vikram", "Wendy", "Xavier", "Yuki", "Zara", "Anton", "Bianca", "Cyrus", "Daria", "Enzo",
    "Freya", "Gabriel", "Helga", "Idris", "Jana", "Kofi", "Leila", "Milan", "Noor", "Otto",
    "Petra", "Ravi", "Selma", "Tariq", "Ursula", "Valentin", "Willa", "Yann", "Zelda", "Arjun",
    "Beatriz", "Colin", "Dalia", "Elias", "Flora", "Goran", "Hiro", "Ilse", "Joel", "Kira",
    "Luca", "Mira", "Nico", "Orla", "Pia", "Reza", "Sanna", "Tobias", "Vesna", "Wilhelm",
};
static const char *const last_names[] = {
    "Martin", "Lee", "Keller", "Wright", "Novak", "Haddad", "Okafor", "Schmidt", "Rossi",
    "Tanaka", "Garcia", "Dubois", "Kowalski", "Nguyen", "Larsen", "Petrov", "Silva", "Cohen",
    "Moreau", "Fischer", "Ivanova", "Lindqvist", "Mendes", "Sato", "Brennan", "Costa", "Jansen",
    "Weber", "Horvat", "Ali", "Becker", "Nakamura", "Ortega", "Popescu", "Quinn", "Richter",
    "Santos", "Toivonen", "Varga", "Walsh", "Yilmaz", "Zimmer", "Andersen", "Baptiste",
    "Castillo", "Dietrich", "Eriksen", "Ferreira", "Gallo", "Hansen", "Ibrahim", "Jovanovic",
    "Kaur", "Lambert", "Mori", "Nielsen", "Olsen", "Pereira", "Rahman", "Schulz", "Torres",
    "Ueda", "Vogel", "Wagner", "Young", "Abe", "Blanc", "Carter", "Duarte", "Engel", "Fontaine",
    "Gruber", "Hoffman", "Ito", "Jensen", "Klein", "Lopez", "Meyer", "Nowak", "Oliveira",
    "Park", "Ramos", "Suzuki", "Thomsen", "Urban", "Vidal", "Weiss", "Yamada", "Zhou", "Arnaud",
    "Bauer", "Chen", "Dalton", "Evans", "Frank", "Greco", "Holm", "Ishii", "Jordan", "Kraus",
};
static const char *const topics[] = {
    "budget", "roadmap", "hiring plan", "server migration", "design review", "offsite",
    "vendor contract", "quarterly report", "launch plan", "security audit", "onboarding",
    "marketing campaign", "product demo", "sales forecast", "team retro", "code freeze",
    "customer feedback", "pricing", "office move", "training day", "release notes",
    "press release", "board meeting", "data cleanup", "website redesign", "user research",
    "support backlog", "annual review", "travel plans", "holiday schedule", "conference talk",
    "partner summit", "grant proposal", "tax filing", "insurance renewal", "lab results",
    "course outline", "exam schedule", "thesis draft", "book club", "garden project",
    "kitchen renovation", "school trip", "charity run", "wedding plans", "car repair",
    "apartment lease", "moving day", "birthday party", "newsletter", "podcast episode",
    "photo shoot", "app store listing", "api redesign", "database upgrade", "cloud costs",
    "backup policy", "incident report", "on-call rota", "sprint planning", "style guide",
    "translation", "accessibility audit", "legal review", "privacy policy", "invoice batch",
    "payroll", "expense report", "supplier visit", "warehouse tour", "fleet update",
    "safety drill", "volunteer day", "open house", "science fair", "museum visit",
    "film night", "choir rehearsal", "tennis lessons", "dog training", "piano recital",
};
static const char *const room_words[] = {
    "Jupiter", "Saturn", "Orion", "Vega", "Atlas", "Cedar", "Maple", "Willow", "Aspen", "Birch",
    "Coral", "Amber", "Jade", "Onyx", "Ruby", "Topaz", "Delta", "Summit", "Harbor", "Meadow",
    "Lantern", "Compass", "Beacon", "Falcon", "Heron", "Otter", "Lynx", "Sparrow", "Pine", "Elm",
    "Nova", "Zenith", "Polaris", "Sirius", "Mercury", "Neptune", "Pluto", "Mars", "Venus", "Luna",
};
static const char *const cities[] = {
    "Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Denver", "Krakow", "Porto", "Hanoi",
    "Quito", "Tunis", "Perth", "Bergen", "Seville", "Leeds", "Accra", "Zagreb", "Cusco",
    "Malmo", "Graz", "Dakar", "Cork", "Busan", "Tromso",
};
static const char *const zones[] = {
    "Europe/Paris", "Europe/London", "Europe/Berlin", "America/New_York", "America/Chicago",
    "America/Los_Angeles", "Asia/Tokyo", "Asia/Kolkata", "Australia/Sydney", "UTC",
    "America/Sao_Paulo", "Africa/Nairobi", "Asia/Singapore", "Europe/Madrid", "Europe/Helsinki",
    "America/Toronto",
};
static const char *const tlds[] = {"com", "org", "net", "io", "eu", "de", "fr", "co"};
static const char *const folders[] = {"notes", "docs", "projects", "reports", "personal", "work"};

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

static int idx_split(int i) { return i % 4 == 3 ? HX_SPLIT_HELDOUT : HX_SPLIT_TRAIN; }

/* An entry of pool v (n entries) of the given split. */
static const char *pick_split(hx_rng *r, const char *const *v, int n, int split)
{
    for (;;) {
        int i = hx_rng_below(r, n);
        if (idx_split(i) == split) return v[i];
    }
}

/* ---- pronounceable words ---- */
static const char *const onsets[] = {"b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r",
                                     "s", "t", "v", "z", "br", "tr", "st", "kl", "sh", "ch", "dr"};
static const char *const vowels[] = {"a", "e", "i", "o", "u", "ai", "ea", "ou", "y"};
static const char *const codas[] = {"", "", "", "n", "r", "l", "s", "m", "th", "k"};

/* Training words also take English-like onsets, vowels and codas the
 * pools above lack (c, w, j, qu, sp...; words starting with a vowel), so
 * that the word-initial pieces a model must copy after a JSON quote ("c"
 * of "code", "char" of "charity") are training targets often, not only
 * the few the narrow inventory makes. Held-out words keep the narrow
 * inventory, so held-out tasks are the same as before. */
static const char *const wide_onsets[] = {
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "qu", "r", "s", "t", "v", "w",
    "x", "y", "z", "bl", "br", "ch", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "ph", "pl", "pr",
    "sc", "sh", "sk", "sl", "sm", "sn", "sp", "st", "str", "sw", "th", "tr", "tw", "wh", "wr",
    "", "", "", ""};
static const char *const wide_vowels[] = {"a", "e", "i", "o", "u", "a", "e", "i", "o", "u", "ai",
                                          "ea", "ee", "oo", "ou", "ie", "au", "oi", "ay", "y"};
static const char *const wide_codas[] = {"", "", "", "", "n", "r", "l", "s", "m", "t", "d",
                                         "ck", "nd", "nt", "st", "ng", "rt", "x", "ld", "mp",
                                         "ft", "ct", "sh", "th", "k", "p", "ve", "ge", "ce", "te"};

int hx_world_word_split(const char *word)
{
    uint32_t h = 2166136261u;
    for (const char *p = word; *p; p++) {
        char c = *p >= 'A' && *p <= 'Z' ? (char)(*p + 32) : *p;
        h = (h ^ (unsigned char)c) * 16777619u;
    }
    return h % 4 == 3 ? HX_SPLIT_HELDOUT : HX_SPLIT_TRAIN;
}

/* Whether word (any case) is a word of a held-out entry of a fixed pool:
 * a made-up training word must not be one ("Priya", "freeze"). */
static int heldout_pool_word(const char *word)
{
    static const struct {
        const char *const *v;
        int n;
    } pools[] = {{first_names, N_OF(first_names)}, {last_names, N_OF(last_names)},
                 {topics, N_OF(topics)},           {room_words, N_OF(room_words)},
                 {cities, N_OF(cities)}};
    size_t wl = strlen(word);
    for (size_t k = 0; k < sizeof pools / sizeof *pools; k++)
        for (int i = 3; i < pools[k].n; i += 4) /* idx_split: the held-out entries */
            for (const char *e = pools[k].v[i]; *e;) {
                size_t l = strcspn(e, " -");
                if (l == wl && !strncasecmp(e, word, l)) return 1;
                e += l + (e[l] != 0);
            }
    return 0;
}

/* Capitalized, 2 or 3 syllables, at most 12 letters, of the split. */
void hx_world_word(hx_rng *r, int split, char *buf, size_t n)
{
    int wide = split == HX_SPLIT_TRAIN && hx_rng_chance(r, 0.6);
    const char *const *on = wide ? wide_onsets : onsets, *const *vo = wide ? wide_vowels : vowels;
    const char *const *co = wide ? wide_codas : codas;
    int n_on = wide ? N_OF(wide_onsets) : N_OF(onsets), n_vo = wide ? N_OF(wide_vowels) : N_OF(vowels);
    int n_co = wide ? N_OF(wide_codas) : N_OF(codas);
    for (;;) {
        char w[64] = "";
        int syl = 2 + hx_rng_chance(r, 0.35);
        for (int i = 0; i < syl; i++) {
            strcat(w, on[hx_rng_below(r, n_on)]);
            strcat(w, vo[hx_rng_below(r, n_vo)]);
            if (i == syl - 1 || hx_rng_chance(r, 0.3)) strcat(w, co[hx_rng_below(r, n_co)]);
        }
        if (strlen(w) > 12 || strlen(w) < 4 || hx_world_word_split(w) != split) continue;
        if (split == HX_SPLIT_TRAIN && heldout_pool_word(w)) continue;
        w[0] = (char)(w[0] >= 'a' && w[0] <= 'z' ? w[0] - 32 : w[0]);
        snprintf(buf, n, "%s", w);
        return;
    }
}

static void lower_ascii(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z') *s = (char)(*s + 32);
}

/* How often a name, topic or room comes from the fixed lists rather than
 * being made up. Training uses fewer list entries than the held-out split,
 * so that a small model learns to copy unseen words instead of recalling
 * the few hundred list entries it saw many times. */
static double list_share(int split) { return split == HX_SPLIT_TRAIN ? 0.35 : 0.6; }

void hx_world_person(hx_rng *r, int split, hx_wperson *p)
{
    memset(p, 0, sizeof *p);
    for (;;) {
        if (hx_rng_chance(r, list_share(split))) snprintf(p->first, sizeof p->first, "%s", pick_split(r, first_names, N_OF(first_names), split));
        else hx_world_word(r, split, p->first, sizeof p->first);
        if (hx_rng_chance(r, list_share(split))) snprintf(p->last, sizeof p->last, "%s", pick_split(r, last_names, N_OF(last_names), split));
        else hx_world_word(r, split, p->last, sizeof p->last);
        char dom[24], f[24], l[24];
        hx_world_word(r, split, dom, sizeof dom);
        lower_ascii(dom);
        snprintf(f, sizeof f, "%s", p->first);
        snprintf(l, sizeof l, "%s", p->last);
        lower_ascii(f);
        lower_ascii(l);
        const char *tld = tlds[hx_rng_below(r, N_OF(tlds))];
        int style = hx_rng_below(r, 3);
        if (style == 0) snprintf(p->email, sizeof p->email, "%s.%s@%s.%s", f, l, dom, tld);
        else if (style == 1) snprintf(p->email, sizeof p->email, "%c%s@%s.%s", f[0], l, dom, tld);
        else snprintf(p->email, sizeof p->email, "%s@%s.%s", f, dom, tld);
        snprintf(p->name, sizeof p->name, "%s %s", p->first, p->last);
        if (strlen(p->email) <= 36) return;
    }
}

/* Whether s is an entry of the topic list (of either split). */
static int is_list_topic(const char *s)
{
    for (int i = 0; i < N_OF(topics); i++)
        if (!strcmp(topics[i], s)) return 1;
    return 0;
}

/* English words for training topics ("harvest lantern", "pottery plan").
 * Held-out topics are mostly list entries made of real words the
 * training split never shows, and a model that only ever copied made-up
 * syllables and the training entries writes "meal review" for "annual
 * review": on tasks-s4, held-out tasks with a list topic failed 45% of
 * the time, those with a made-up one 25%. A word of a
 * held-out entry, or one the held-out split could make up, is never
 * drawn (lexicon_word). */
static const char *const lexicon[] = {
    "account", "action", "advice", "agenda", "airport", "alarm", "album", "anchor", "animal",
    "answer", "apple", "archive", "arena", "army", "arrow", "artist", "autumn", "avenue",
    "award", "baby", "badge", "bakery", "balance", "balcony", "ballet", "banner", "barn",
    "basket", "battery", "beach", "bean", "bear", "bell", "bench", "bicycle", "bird", "blanket",
    "blossom", "boat", "bonus", "bottle", "bowl", "bracelet", "bread", "breakfast", "bridge",
    "brief", "brush", "bucket", "buffet", "builder", "bulletin", "bus", "butter", "button",
    "cabin", "cable", "cafe", "cake", "calendar", "camera", "camp", "canal", "candle", "canvas",
    "captain", "card", "cargo", "carpet", "castle", "casual", "catalog", "ceiling", "cellar",
    "chair", "chalk", "champion", "channel", "chapter", "cheese", "chef", "cherry", "chess",
    "chicken", "chimney", "chocolate", "church", "circle", "circus", "citizen", "clay", "cliff",
    "clinic", "clock", "closet", "coach", "coast", "coffee", "coin", "collar", "college",
    "colour", "comedy", "comic", "concert", "copper", "corner", "costume", "cottage", "cotton",
    "council", "country", "county", "courage", "cousin", "craft", "crane", "credit", "crew",
    "cricket", "crown", "crystal", "culture", "cupboard", "curtain", "cushion", "dance",
    "danger", "deadline", "debate", "desert", "desk", "dessert", "diamond", "diary", "digital",
    "dinner", "doctor", "dolphin", "donkey", "door", "dragon", "drawer", "dream", "dress",
    "driver", "drum", "eagle", "early", "earth", "editor", "elephant", "engine", "essay",
    "evening", "exhibit", "factory", "fairy", "family", "farm", "feather", "fence", "festival",
    "fever", "fiddle", "field", "final", "finance", "fire", "fish", "flag", "flower", "flute",
    "folder", "forest", "formal", "fossil", "fountain", "frame", "friend", "frog", "fruit",
    "furniture", "galaxy", "gallery", "game", "garage", "gate", "giant", "gift", "ginger",
    "glacier", "glass", "global", "glove", "goat", "gold", "golf", "grammar", "grape", "grass",
    "guitar", "hammer", "harbour", "harvest", "hat", "health", "helmet", "hero", "highway",
    "hobby", "hockey", "honey", "horizon", "horse", "hospital", "hotel", "hunger", "island",
    "ivory", "jacket", "jazz", "jelly", "jewel", "journal", "journey", "judge", "juice",
    "jungle", "kettle", "kingdom", "kite", "knight", "ladder", "lake", "lamp", "language",
    "laptop", "late", "laundry", "lawn", "leather", "lecture", "lemon", "letter", "library",
    "lighthouse", "lily", "lion", "lobby", "local", "locker", "lunch", "machine", "magazine",
    "magnet", "mango", "manual", "marble", "market", "mask", "meadow", "medal", "melody",
    "memo", "menu", "mirror", "mission", "monkey", "monster", "monthly", "morning", "mountain",
    "mural", "mushroom", "music", "napkin", "nature", "needle", "nephew", "network", "noodle",
    "novel", "nurse", "ocean", "olive", "onion", "opera", "orange", "orchard", "orchestra",
    "oven", "owl", "paint", "palace", "panel", "paper", "parade", "parcel", "park", "parrot",
    "pasta", "pastry", "patch", "patio", "peach", "peanut", "pencil", "pepper", "piano",
    "picnic", "pillow", "pilot", "pirate", "pizza", "planet", "plaster", "pocket", "poem",
    "poetry", "pony", "popcorn", "portrait", "poster", "potato", "pottery", "private", "public",
    "puppet", "puzzle", "quiet", "quilt", "rabbit", "radio", "rain", "ranch", "recipe",
    "reunion", "ribbon", "rice", "riddle", "river", "robot", "rocket", "roof", "rope", "rough",
    "rugby", "rural", "saddle", "sailing", "salad", "salmon", "sandwich", "satellite", "sauce",
    "scarf", "science", "scooter", "sculpture", "season", "shelter", "shower", "signal",
    "silver", "sketch", "skiing", "soccer", "sofa", "solar", "soup", "spare", "spice", "spider",
    "sponsor", "spring", "stadium", "stamp", "statue", "stove", "studio", "sugar", "suitcase",
    "summer", "sunset", "supper", "surfing", "sweater", "swimming", "symphony", "table",
    "tablet", "tailor", "teacher", "temple", "tent", "theatre", "ticket", "tiger", "timber",
    "toast", "tomato", "tower", "toy", "tractor", "traffic", "trail", "train", "treasure",
    "tulip", "tunnel", "turkey", "umbrella", "uniform", "urgent", "valley", "vase", "velvet",
    "village", "violin", "vitamin", "volcano", "voyage", "wagon", "wallet", "walnut", "water",
    "weather", "weekly", "whale", "wheel", "window", "winter", "wizard", "workshop", "yacht",
    "yearly", "yoga", "zebra",
};

/* The last word of a training topic list entry ("review" of "design
 * review"). */
static const char *training_tail(hx_rng *r)
{
    const char *y = pick_split(r, topics, N_OF(topics), HX_SPLIT_TRAIN), *yl = strrchr(y, ' ');
    return yl ? yl + 1 : y;
}

static const char *lexicon_word(hx_rng *r)
{
    for (;;) {
        const char *w = lexicon[hx_rng_below(r, N_OF(lexicon))];
        if (!heldout_pool_word(w) && hx_world_word_split(w) == HX_SPLIT_TRAIN) return w;
    }
}

/* Two lexicon words, or one and the last word of a training topic. */
static void lexicon_topic(hx_rng *r, char *buf, size_t n)
{
    do {
        const char *a = lexicon_word(r);
        const char *b = hx_rng_chance(r, 0.7) ? lexicon_word(r) : training_tail(r);
        snprintf(buf, n, "%s %s", a, b);
    } while (is_list_topic(buf));
}

/* A training topic of another shape than "<word> project": two made-up
 * words, or the first word of one training topic with the last of
 * another ("security shoot"), never a list entry. Held-out topics are
 * list entries or "<word> project", so a model that only ever copied
 * "<word> project" turns "legal review" into "legal plan". */
static void mixed_topic(hx_rng *r, char *buf, size_t n)
{
    char a[24], b[24];
    do {
        if (hx_rng_chance(r, 0.5)) {
            hx_world_word(r, HX_SPLIT_TRAIN, a, sizeof a);
            hx_world_word(r, HX_SPLIT_TRAIN, b, sizeof b);
        } else {
            const char *x = pick_split(r, topics, N_OF(topics), HX_SPLIT_TRAIN), *sp = strchr(x, ' ');
            snprintf(a, sizeof a, "%.*s", sp ? (int)(sp - x) : (int)strlen(x), x);
            snprintf(b, sizeof b, "%s", training_tail(r));
        }
        lower_ascii(a);
        lower_ascii(b);
        snprintf(buf, n, "%s %s", a, b);
    } while (is_list_topic(buf) || !strcmp(a, b));
}

void hx_world_topic(hx_rng *r, int split, char *buf, size_t n)
{
    if (hx_rng_chance(r, list_share(split) + 0.1)) {
        snprintf(buf, n, "%s", pick_split(r, topics, N_OF(topics), split));
        return;
    }
    if (split == HX_SPLIT_TRAIN && hx_rng_chance(r, 0.4)) {
        lexicon_topic(r, buf, n);
        return;
    }
    if (split == HX_SPLIT_TRAIN && hx_rng_chance(r, 0.5)) {
        mixed_topic(r, buf, n);
        return;
    }
    char w[24];
    hx_world_word(r, split, w, sizeof w);
    lower_ascii(w);
    snprintf(buf, n, "%s %s", w, hx_rng_chance(r, 0.5) ? "project" : "plan");
}

void hx_world_room(hx_rng *r, int split, char *buf, size_t n)
{
    char w[24];
    if (hx_rng_chance(r, list_share(split))) snprintf(w, sizeof w, "%s", pick_split(r, room_words, N_OF(room_words), split));
    else hx_world_word(r, split, w, sizeof w);
    snprintf(buf, n, "Room %s", w);
}

const char *hx_world_city(hx_rng *r, int split)
{
    return pick_split(r, cities, N_OF(cities), split);
}

/* ---- time in the world's zone ---- */
int64_t hx_world_local(const hx_world *w, int64_t day, int minutes)
{
    int y, m, d;
    char iso[40];
    hx_when_range rg;
    hx_civil_from_days(day, &y, &m, &d);
    snprintf(iso, sizeof iso, "%04d-%02d-%02dT%02d:%02d:00", y, m, d, minutes / 60, minutes % 60);
    if (hx_when_parse(iso, 0, w->tz, &rg, NULL)) return day * 86400 + minutes * 60;
    return rg.start;
}

static int64_t local_day(const hx_world *w, int64_t t)
{
    return (t + hx_when_utc_offset(w->tz, t)) / 86400 - ((t + hx_when_utc_offset(w->tz, t)) < 0);
}

void hx_world_date(const hx_world *w, int64_t t, char *buf, size_t n)
{
    char d[40]; /* hx_when_format wants room for a whole timestamp */
    hx_when_format(t, w->tz, 1, d, sizeof d);
    snprintf(buf, n, "%s", d);
}

void hx_world_hhmm(const hx_world *w, int64_t t, char *buf, size_t n)
{
    char iso[40];
    hx_when_format(t, w->tz, 0, iso, sizeof iso);
    snprintf(buf, n, "%.5s", iso + 11);
}

static const char *const wday_names[7] = {"Sunday", "Monday", "Tuesday", "Wednesday",
                                          "Thursday", "Friday", "Saturday"};
static const char *const month_abbr[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const month_full[12] = {"January", "February", "March", "April", "May", "June",
                                           "July", "August", "September", "October",
                                           "November", "December"};

void hx_world_month_day(int64_t day, char *buf, size_t n)
{
    int y, m, d;
    hx_civil_from_days(day, &y, &m, &d);
    snprintf(buf, n, "%s %d", month_full[m - 1], d);
}

static int weekday(int64_t day) { return (int)(((day + 4) % 7 + 7) % 7); } /* 0 = Sunday */
/* day, or the Monday after it when it falls on a weekend. */
static int64_t workday(int64_t day) { return day + (weekday(day) == 6 ? 2 : weekday(day) == 0); }

/* Candidate phrases for a day; returns how many were written. */
static int day_candidates(const hx_world *w, int64_t day, char c[6][40])
{
    int k = 0, y, m, d;
    int64_t off = day - w->today;
    hx_civil_from_days(day, &y, &m, &d);
    const char *wd = wday_names[weekday(day)];
    if (off == 0) snprintf(c[k++], 40, "today");
    if (off == 1) snprintf(c[k++], 40, "tomorrow");
    if (off == -1) snprintf(c[k++], 40, "yesterday");
    if (off >= 1 && off <= 6) snprintf(c[k++], 40, "on %s", wd);
    if (off >= 1 && off <= 7) snprintf(c[k++], 40, "next %s", wd);
    if (off <= -1 && off >= -7) snprintf(c[k++], 40, "last %s", wd);
    if (off >= 0 && off < 300) {
        snprintf(c[k++], 40, "%s %d", month_abbr[m - 1], d);
        snprintf(c[k++], 40, "on %s %d", month_full[m - 1], d);
    }
    return k;
}

void hx_world_day_phrase(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n)
{
    char c[6][40];
    int k = day_candidates(w, day, c), y, m, d;
    for (int tries = 0; k && tries < 8 && !hx_rng_chance(r, 0.08); tries++) {
        const char *p = c[hx_rng_below(r, k)];
        hx_when_range rg;
        if (!hx_when_parse(p, w->now, w->tz, &rg, NULL) && local_day(w, rg.start) == day) {
            snprintf(buf, n, "%s", p);
            return;
        }
    }
    hx_civil_from_days(day, &y, &m, &d); /* the ISO date always reads */
    snprintf(buf, n, "%04d-%02d-%02d", y, m, d);
}

static const char *ordinal(int d)
{
    return d % 10 == 1 && d != 11 ? "st" : d % 10 == 2 && d != 12 ? "nd" : d % 10 == 3 && d != 13 ? "rd" : "th";
}

/* Another way to name day: a weekday ("this Thursday", "wed"), a day of
 * the month ("the 16th", "Thursday the 16th", "16 December"), an offset
 * ("in 2 days"); unchecked, the caller checks. */
static void day_variant(const hx_world *w, hx_rng *r, int64_t day, char *buf, size_t n)
{
    int y, m, d, off = (int)(day - w->today);
    hx_civil_from_days(day, &y, &m, &d);
    const char *wd = wday_names[weekday(day)], *th = ordinal(d);
    switch (hx_rng_below(r, 10)) {
    case 0: snprintf(buf, n, "this %s", wd); break;
    case 1: snprintf(buf, n, "this coming %s", wd); break;
    case 2: snprintf(buf, n, "on %.3s", wd); break;
    case 3: snprintf(buf, n, "the %d%s", d, th); break;
    case 4: snprintf(buf, n, "on the %d%s", d, th); break;
    case 5: snprintf(buf, n, "%s the %d%s", wd, d, th); break;
    case 6: snprintf(buf, n, "%d %s", d, month_full[m - 1]); break;
    case 7: snprintf(buf, n, "%s %d%s", month_full[m - 1], d, th); break;
    case 8: snprintf(buf, n, off == 2 ? "the day after tomorrow" : "in %d days", off); break;
    default: snprintf(buf, n, "%s", wd);
    }
}

/* One way to say time (minutes of the day): "2pm", "2 pm", "14:00". */
static void time_variant(hx_rng *r, int minutes, char *buf, size_t n)
{
    int h = minutes / 60, mm = minutes % 60, h12 = h > 12 ? h - 12 : h;
    const char *ap = h >= 12 ? "pm" : "am";
    switch (hx_rng_below(r, 3)) {
    case 0: snprintf(buf, n, "%02d:%02d", h, mm); break;
    case 1:
        if (mm) snprintf(buf, n, "%d:%02d %s", h12, mm, ap);
        else snprintf(buf, n, "%d %s", h12, ap);
        break;
    default:
        if (mm) snprintf(buf, n, "%d:%02d%s", h12, mm, ap);
        else snprintf(buf, n, "%d%s", h12, ap);
    }
}

static int same_range(const hx_world *w, const char *p, const hx_when_range *want)
{
    hx_when_range rg;
    return !hx_when_parse(p, w->now, w->tz, &rg, NULL) && rg.start == want->start &&
           rg.end == want->end && rg.is_point == want->is_point;
}

/* A candidate for what phrase names: its day said another way, with the
 * part of the day or the time it had, in one of the orders people use. */
static void when_variant(const hx_world *w, hx_rng *r, const char *phrase, const hx_when_range *rg,
                         char *buf, size_t n)
{
    static const char *const parts[] = {"morning", "afternoon", "evening"};
    int64_t day = local_day(w, rg->start);
    char dv[48], t[24];
    day_variant(w, r, day, dv, sizeof dv);
    if (rg->is_point) {
        int minutes = (int)((rg->start - hx_world_local(w, day, 0)) / 60);
        time_variant(r, minutes, t, sizeof t);
        const char *bare = strncmp(dv, "on ", 3) ? dv : dv + 3;
        if (hx_rng_chance(r, 0.5)) snprintf(buf, n, "%s at %s", bare, t);
        else snprintf(buf, n, "at %s %s", t, dv);
        return;
    }
    for (int i = 0; i < 3; i++)
        if (strstr(phrase, parts[i])) {
            const char *bare = strncmp(dv, "on ", 3) ? dv : dv + 3;
            if (hx_rng_chance(r, 0.5)) snprintf(buf, n, "%s %s", bare, parts[i]);
            else snprintf(buf, n, "%s in the %s", bare, parts[i]);
            return;
        }
    snprintf(buf, n, "%s", dv);
}

void hx_world_resay_when(const hx_world *w, hx_rng *r, const char *phrase, char *buf, size_t n)
{
    hx_when_range want;
    char c[64];
    snprintf(buf, n, "%s", phrase);
    if (hx_when_parse(phrase, w->now, w->tz, &want, NULL) || want.end - want.start > 86400) return;
    for (int tries = 0; tries < 6; tries++) {
        when_variant(w, r, phrase, &want, c, sizeof c);
        if (same_range(w, c, &want)) {
            snprintf(buf, n, "%s", c);
            return;
        }
    }
}

/* ---- generation ---- */
static void gen_user(hx_world *w, hx_rng *r)
{
    hx_world_person(r, w->split, &w->user);
    snprintf(w->tz, sizeof w->tz, "%s", zones[hx_rng_below(r, N_OF(zones))]);
    w->work_start = 8 * 60 + 30 * hx_rng_below(r, 4); /* 08:00 .. 09:30 */
    w->work_end = w->work_start + 8 * 60 + 30 * hx_rng_below(r, 3);
}

/* Years: the held-out split has 2028 only; training has 2021..2035 but 2028. */
static void gen_now(hx_world *w, hx_rng *r)
{
    int year = 2028;
    if (w->split == HX_SPLIT_TRAIN)
        do year = 2021 + hx_rng_below(r, 15); while (year == 2028);
    int64_t day = hx_days_from_civil(year, 1, 1) + hx_rng_below(r, 365);
    if (workday(day) != day && !hx_rng_chance(r, 0.15)) day = workday(day);
    int minutes = w->work_start - 60 + 15 * hx_rng_below(r, (w->work_end - w->work_start + 60) / 15);
    w->today = day;
    w->now = hx_world_local(w, day, minutes);
    hx_when_format(w->now, w->tz, 0, w->now_iso, sizeof w->now_iso);
}

static void gen_people(hx_world *w, hx_rng *r)
{
    w->n_people = 5 + hx_rng_below(r, HX_W_PEOPLE - 4);
    for (int i = 0; i < w->n_people; i++) {
        hx_world_person(r, w->split, &w->people[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(w->people[j].first, w->people[i].first) ||
                !strcmp(w->people[j].email, w->people[i].email)) {
                i--;
                break;
            }
    }
}

static void title_case(char *s)
{
    if (*s >= 'a' && *s <= 'z') *s = (char)(*s - 32);
}

/* form with its one "%s" replaced by arg (forms are not printf formats). */
static void subst(char *buf, size_t n, const char *form, const char *arg)
{
    const char *at = strstr(form, "%s");
    if (!at) {
        snprintf(buf, n, "%s", form);
        return;
    }
    snprintf(buf, n, "%.*s%s%s", (int)(at - form), form, arg, at + 2);
}

static void event_people(hx_world *w, hx_rng *r, hx_wevent *e, int max)
{
    /* few attendees: each one lengthens every listing of the event */
    e->n_att = hx_rng_chance(r, 0.5) ? 0 : 1 + hx_rng_below(r, max);
    for (int i = 0; i < e->n_att; i++) {
        e->att[i] = hx_rng_below(r, w->n_people);
        for (int j = 0; j < i; j++)
            if (e->att[j] == e->att[i]) e->att[i--] = -1;
    }
    e->organizer = e->n_att && hx_rng_chance(r, 0.35) ? e->att[0] : -1;
}

static void event_uid(hx_world *w, hx_rng *r, hx_wevent *e, int i)
{
    snprintf(e->uid, sizeof e->uid, "%08x-%d@%s", (unsigned)hx_rng_next(r), i,
             strchr(w->user.email, '@') + 1);
}

static void gen_recurring(hx_world *w, hx_rng *r, hx_wevent *e)
{
    static const char *const forms[] = {"Weekly %s", "%s sync", "%s check-in", "%s meeting"};
    char topic[32];
    hx_world_topic(r, w->split, topic, sizeof topic);
    e->recur = 1 + hx_rng_below(r, 3);
    if (e->recur == 3) snprintf(e->title, sizeof e->title, "%s", hx_rng_chance(r, 0.5) ? "Team standup" : "Daily sync");
    else subst(e->title, sizeof e->title, forms[hx_rng_below(r, N_OF(forms))], topic);
    title_case(e->title);
    e->day = w->today - 7 * (2 + hx_rng_below(r, 30)) + hx_rng_below(r, 5) + 1 - weekday(w->today);
    e->dur_min = e->recur == 3 ? 15 : 30 * (1 + hx_rng_below(r, 2));
    e->start_min = w->work_start + 30 * hx_rng_below(r, (w->work_end - w->work_start) / 30 - 2);
    event_people(w, r, e, 2);
}

static void gen_once(hx_world *w, hx_rng *r, hx_wevent *e)
{
    static const char *const forms[] = {"%s", "%s review", "%s workshop", "Call about %s",
                                        "%s planning", "Lunch with %s"};
    static const int durs[] = {30, 45, 60, 60, 90, 120};
    char topic[32];
    hx_world_topic(r, w->split, topic, sizeof topic);
    int f = hx_rng_below(r, N_OF(forms));
    event_people(w, r, e, 1);
    subst(e->title, sizeof e->title, forms[f], f == 5 ? w->people[hx_rng_below(r, w->n_people)].first : topic);
    title_case(e->title);
    e->day = w->today - 2 + hx_rng_below(r, 19);
    e->day = workday(e->day);
    e->dur_min = durs[hx_rng_below(r, N_OF(durs))];
    int span = (w->work_end - w->work_start - e->dur_min) / 15;
    e->start_min = w->work_start + 15 * hx_rng_below(r, span > 0 ? span : 1);
    e->personal = hx_rng_chance(r, 0.15);
}

/* Training worlds only, with HX_WORLD_BUSY_DAYS (held-out ones draw
 * nothing more and stay as they were): half get a busy day, two or three
 * one-off events moved to one working day of the coming week, so that a
 * day's list has more than one or two things to name (asked about such a
 * day, the demo's five events, the model named one and repeated another);
 * 35% get a cancelled event, on the busy day when there is one, which
 * lists leave out. Its own random stream, drawn after everything else:
 * without the flag a world is what it was before busy days existed. */
static void gen_busy_day(hx_world *w, hx_rng *r)
{
    if (w->split != HX_SPLIT_TRAIN) return;
    if (hx_rng_chance(r, 0.5)) {
        const int64_t day = workday(w->today + 1 + hx_rng_below(r, 6));
        int want = 2 + hx_rng_below(r, 2), moved = 0;
        for (int i = 0; i < w->n_events && moved < want; i++) {
            hx_wevent *e = &w->events[i];
            if (e->recur) continue;
            e->day = day;
            e->start_min = w->work_start + 60 + 150 * moved++; /* two hours apart at least */
        }
        if (moved) w->busy_day = day;
    }
    if (!hx_rng_chance(r, 0.35)) return;
    for (int i = 0; i < w->n_events; i++) {
        hx_wevent *e = &w->events[i];
        if (!e->recur && (!w->busy_day || e->day == w->busy_day)) {
            e->cancelled = 1;
            return;
        }
    }
}

static void gen_events(hx_world *w, hx_rng *r)
{
    int n_rec = 2 + hx_rng_below(r, 2), n = n_rec + 5 + hx_rng_below(r, 7);
    if (n > HX_W_EVENTS) n = HX_W_EVENTS;
    for (int i = 0; i < n; i++) {
        hx_wevent *e = &w->events[i];
        memset(e, 0, sizeof *e);
        if (i < n_rec) gen_recurring(w, r, e);
        else gen_once(w, r, e);
        int dup = 0; /* titles name events in requests: one event per title */
        for (int j = 0; j < i; j++) dup |= !strcasecmp(w->events[j].title, e->title);
        if (dup) {
            i--;
            continue;
        }
        if (hx_rng_chance(r, 0.5)) hx_world_room(r, w->split, e->location, sizeof e->location);
        event_uid(w, r, e, i);
    }
    w->n_events = n;
}

/* A fact with a value worth copying. */
static void gen_fact(hx_world *w, hx_rng *r, const char *topic, char *buf, size_t n)
{
    char room[40], date[16];
    int y, m, d;
    hx_civil_from_days(w->today + 3 + hx_rng_below(r, 40), &y, &m, &d);
    snprintf(date, sizeof date, "%s %d", month_abbr[m - 1], d);
    /* a count and a sum in training worlds only: held-out worlds draw as before */
    switch (hx_rng_below(r, w->split == HX_SPLIT_TRAIN ? 8 : 6)) {
    case 0: snprintf(buf, n, "The %s deadline is %s.", topic, date); break;
    case 6: snprintf(buf, n, "%d people signed up for the %s.", 3 + hx_rng_below(r, 80), topic); break;
    case 7:
        snprintf(buf, n, "The %s total is %d,%03d euros.", topic, 1 + hx_rng_below(r, 90), 10 * hx_rng_below(r, 100));
        break;
    case 1: snprintf(buf, n, "The %s budget is %d euros.", topic, 500 * (1 + hx_rng_below(r, 90))); break;
    case 2:
        hx_world_room(r, w->split, room, sizeof room);
        snprintf(buf, n, "The %s moved to %s.", topic, room);
        break;
    case 3: snprintf(buf, n, "The access code for the %s is %04d.", topic, hx_rng_below(r, 10000)); break;
    case 4:
        snprintf(buf, n, "%s approved the %s.", w->people[hx_rng_below(r, w->n_people)].first, topic);
        break;
    default: snprintf(buf, n, "The %s is ready for review on %s.", topic, date); break;
    }
}

static void gen_mails(hx_world *w, hx_rng *r)
{
    static const char *const subj[] = {"%s", "Re: %s", "Update on the %s", "Question about the %s",
                                       "%s next steps", "Notes from the %s"};
    char host[24];
    hx_world_word(r, w->split, host, sizeof host);
    lower_ascii(host);
    w->n_mails = 6 + hx_rng_below(r, HX_W_MAILS - 5);
    int64_t t = w->now - 3600 * (1 + hx_rng_below(r, 5));
    for (int i = 0; i < w->n_mails; i++) {
        hx_wmail *m = &w->mails[i];
        memset(m, 0, sizeof *m);
        m->from = hx_rng_below(r, w->n_people);
        hx_world_topic(r, w->split, m->topic, sizeof m->topic);
        subst(m->subject, sizeof m->subject, subj[hx_rng_below(r, N_OF(subj))], m->topic);
        title_case(m->subject);
        gen_fact(w, r, m->topic, m->fact, sizeof m->fact);
        m->t = t;
        t -= 1800 + hx_rng_below(r, 3 * 86400);
        m->unread = i < 3 && hx_rng_chance(r, 0.6);
        snprintf(m->id, sizeof m->id, "%lld.M%dP%d.%s", (long long)m->t, i + 1,
                 100 + hx_rng_below(r, 900), host);
    }
}

static void slug(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (; *s && k + 1 < n; s++) out[k++] = *s == ' ' ? '-' : *s;
    out[k] = 0;
}

/* A folder of the six stock names; in a training world, half the time a
 * name of the user's own (capitalised, a year, or one level down), as
 * people name folders, so a model learns to copy the folder asked for
 * rather than recite the stock names. Held-out worlds draw as before. */
static void gen_folder(const hx_world *w, hx_rng *r, char *buf, size_t n)
{
    if (w->split != HX_SPLIT_TRAIN || hx_rng_chance(r, 0.5)) {
        snprintf(buf, n, "%s", folders[hx_rng_below(r, N_OF(folders))]);
        return;
    }
    char word[24];
    hx_world_word(r, w->split, word, sizeof word);
    word[0] = (char)toupper((unsigned char)word[0]);
    switch (hx_rng_below(r, 4)) {
    case 0: snprintf(buf, n, "%s/%s", folders[hx_rng_below(r, N_OF(folders))], word); break;
    case 1: snprintf(buf, n, "%s/%d", word, 2020 + hx_rng_below(r, 8)); break;
    default: snprintf(buf, n, "%s", word);
    }
}

/* A note of everyday life, as people keep them beside their work: a
 * recipe, a list, a checklist (training worlds only). */
static void everyday_topic(hx_rng *r, char *buf, size_t n)
{
    static const char *const dishes[] = {"banana bread", "pad thai", "minestrone", "chili", "pancake",
                                         "risotto", "falafel", "ramen", "goulash", "paella"};
    static const char *const notes[] = {"shopping list", "packing list", "gift ideas", "reading list",
                                        "moving checklist", "tax checklist", "garden plan", "workout plan",
                                        "wedding guest list", "car service log"};
    if (hx_rng_chance(r, 0.4)) snprintf(buf, n, "%s recipe", dishes[hx_rng_below(r, N_OF(dishes))]);
    else snprintf(buf, n, "%s", notes[hx_rng_below(r, N_OF(notes))]);
}

static void gen_files(hx_world *w, hx_rng *r)
{
    static const char *const exts[] = {".txt", ".md", ".txt"};
    w->n_files = 4 + hx_rng_below(r, HX_W_FILES - 3);
    for (int i = 0; i < w->n_files; i++) {
        hx_wfile *f = &w->files[i];
        char s[32];
        memset(f, 0, sizeof *f);
        if (w->split == HX_SPLIT_TRAIN && hx_rng_chance(r, 0.3)) everyday_topic(r, f->topic, sizeof f->topic);
        else hx_world_topic(r, w->split, f->topic, sizeof f->topic);
        gen_folder(w, r, f->folder, sizeof f->folder);
        slug(f->topic, s, sizeof s);
        snprintf(f->name, sizeof f->name, "%s%s", s, exts[hx_rng_below(r, N_OF(exts))]);
        if (w->split == HX_SPLIT_TRAIN && strlen(f->folder) + 1 + strlen(f->name) > 40) /* a value's bound */
            snprintf(f->folder, sizeof f->folder, "%s", folders[hx_rng_below(r, N_OF(folders))]);
        gen_fact(w, r, f->topic, f->fact, sizeof f->fact);
        for (int j = 0; j < i; j++)
            if (!strcmp(w->files[j].name, f->name) || !strcmp(w->files[j].topic, f->topic)) {
                i--;
                break;
            }
    }
}

static void gen_mems(hx_world *w, hx_rng *r)
{
    w->n_mems = hx_rng_below(r, HX_W_MEMS + 1);
    for (int i = 0; i < w->n_mems; i++) {
        hx_wmem *m = &w->mems[i];
        /* a copy: gcc's -Wrestrict (under -fsanitize=undefined) takes a
         * pointer into w for one that may overlap m->text */
        const hx_wperson p = w->people[hx_rng_below(r, w->n_people)];
        char room[40];
        switch (hx_rng_below(r, 4)) {
        case 0:
            snprintf(m->kind, sizeof m->kind, "person");
            snprintf(m->text, sizeof m->text, "%s's email is %s", p.first, p.email);
            break;
        case 1:
            snprintf(m->kind, sizeof m->kind, "preference");
            snprintf(m->text, sizeof m->text, "prefers meetings in the %s",
                     hx_rng_chance(r, 0.5) ? "morning" : "afternoon");
            break;
        case 2:
            snprintf(m->kind, sizeof m->kind, "person");
            snprintf(m->text, sizeof m->text, "%s is the user's manager", p.name);
            break;
        default:
            hx_world_room(r, w->split, room, sizeof room);
            snprintf(m->kind, sizeof m->kind, "place");
            snprintf(m->text, sizeof m->text, "the user's desk is in %s", room);
        }
    }
}

int hx_world_generate(uint64_t seed, int split, unsigned flags, hx_world *w, hx_err *err)
{
    if (split != HX_SPLIT_TRAIN && split != HX_SPLIT_HELDOUT)
        return hx_err_set(err, HX_ERR_INVALID, "split must be train or heldout");
    hx_rng r;
    memset(w, 0, sizeof *w);
    w->seed = seed;
    w->split = split;
    hx_rng_seed(&r, seed, (uint64_t)split + 1);
    gen_user(w, &r);
    gen_now(w, &r);
    gen_people(w, &r);
    gen_events(w, &r);
    gen_mails(w, &r);
    gen_files(w, &r);
    gen_mems(w, &r);
    if (flags & HX_WORLD_BUSY_DAYS) {
        hx_rng_seed(&r, seed, (uint64_t)split + 101);
        gen_busy_day(w, &r);
    }
    return HX_OK;
}

/* ---- writing ---- */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int hx_world_rmtree(const char *dir, hx_err *err)
{
    struct stat st;
    if (lstat(dir, &st)) return HX_OK;
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS))
        return hx_err_set(err, HX_ERR_IO, "%s: cannot remove", dir);
    return HX_OK;
}

static int put_file(const char *home, const char *rel, const hx_buf *b, hx_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config/%s", home, rel);
    char *slash = strrchr(path, '/');
    *slash = 0;
    int rc = hx_mkdirs(path, err);
    *slash = '/';
    if (rc) return rc;
    FILE *f = fopen(path, "wb");
    if (!f) return hx_err_set(err, HX_ERR_IO, "%s: cannot write", path);
    size_t n = b->len ? fwrite(b->data, 1, b->len, f) : 0;
    if (fclose(f) || n != b->len) return hx_err_set(err, HX_ERR_IO, "%s: write failed", path);
    return HX_OK;
}

static void ics_time(const hx_world *w, hx_buf *b, const char *key, int64_t day, int minutes)
{
    int y, m, d;
    hx_civil_from_days(day + minutes / 1440, &y, &m, &d);
    minutes %= 1440;
    if (!strcmp(w->tz, "UTC"))
        hx_buf_printf(b, "%s:%04d%02d%02dT%02d%02d00Z\r\n", key, y, m, d, minutes / 60, minutes % 60);
    else
        hx_buf_printf(b, "%s;TZID=%s:%04d%02d%02dT%02d%02d00\r\n", key, w->tz, y, m, d, minutes / 60,
                      minutes % 60);
}

static void ics_person(hx_buf *b, const char *key, const hx_wperson *p, int attendee)
{
    hx_buf_printf(b, "%s;CN=%s%s:mailto:%s\r\n", key, p->name, attendee ? ";PARTSTAT=ACCEPTED" : "",
                  p->email);
}

static void ics_event(const hx_world *w, const hx_wevent *e, hx_buf *b)
{
    static const char *const byday[7] = {"SU", "MO", "TU", "WE", "TH", "FR", "SA"};
    hx_buf_printf(b, "BEGIN:VEVENT\r\nUID:%s\r\nDTSTAMP:20200101T000000Z\r\nSUMMARY:%s\r\n", e->uid,
                  e->title);
    ics_time(w, b, "DTSTART", e->day, e->start_min);
    ics_time(w, b, "DTEND", e->day, e->start_min + e->dur_min);
    if (e->recur == 3) hx_buf_puts(b, "RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR\r\n");
    else if (e->recur) hx_buf_printf(b, "RRULE:FREQ=WEEKLY;INTERVAL=%d;BYDAY=%s\r\n", e->recur, byday[weekday(e->day)]);
    if (e->location[0]) hx_buf_printf(b, "LOCATION:%s\r\n", e->location);
    if (e->cancelled) hx_buf_puts(b, "STATUS:CANCELLED\r\n");
    if (e->n_att) {
        ics_person(b, "ORGANIZER", e->organizer < 0 ? &w->user : &w->people[e->organizer], 0);
        if (e->organizer >= 0) ics_person(b, "ATTENDEE", &w->user, 1);
        for (int i = 0; i < e->n_att; i++) ics_person(b, "ATTENDEE", &w->people[e->att[i]], 1);
    }
    hx_buf_puts(b, "END:VEVENT\r\n");
}

static const char ics_head[] = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Hearth//world//EN\r\n";

/* Whether the world has a personal calendar: only with events in it, since
 * the calendar tools report an .ics without events as a problem (with the
 * world's path) in every result that reads the calendar. */
static int has_personal(const hx_world *w)
{
    for (int i = 0; i < w->n_events; i++)
        if (w->events[i].personal) return 1;
    return 0;
}

static int write_calendars(const hx_world *w, const char *home, hx_err *err)
{
    hx_buf personal, b;
    hx_buf_init(&personal);
    hx_buf_puts(&personal, ics_head);
    int rc = HX_OK;
    for (int i = 0; i < w->n_events && !rc; i++) {
        const hx_wevent *e = &w->events[i];
        if (e->personal) {
            ics_event(w, e, &personal);
            continue;
        }
        char rel[128];
        hx_buf_init(&b);
        hx_buf_puts(&b, ics_head);
        ics_event(w, e, &b);
        hx_buf_puts(&b, "END:VCALENDAR\r\n");
        snprintf(rel, sizeof rel, "calendars/work/%.*s.ics", (int)strcspn(e->uid, "@"), e->uid);
        rc = put_file(home, rel, &b, err);
        hx_buf_free(&b);
    }
    hx_buf_puts(&personal, "END:VCALENDAR\r\n");
    if (!rc && has_personal(w)) rc = put_file(home, "calendars/personal.ics", &personal, err);
    hx_buf_free(&personal);
    return rc;
}

static void rfc_date(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    static const char *const wd[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    snprintf(buf, n, "%s, %02d %s %04d %02d:%02d:%02d +0000", wd[tm.tm_wday], tm.tm_mday,
             month_abbr[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static int write_mail(const hx_world *w, const char *home, hx_err *err)
{
    static const char *const signs[] = {"Best,", "Thanks,", "Cheers,", "Regards,"};
    int rc = HX_OK;
    hx_buf b;
    hx_buf empty = {0};
    if ((rc = put_file(home, "mail/tmp/.keep", &empty, err)) ||
        (rc = put_file(home, "mail/new/.keep", &empty, err)) ||
        (rc = put_file(home, "mail/cur/.keep", &empty, err)) ||
        (rc = put_file(home, "outbox/new/.keep", &empty, err)))
        return rc;
    for (int i = 0; i < w->n_mails && !rc; i++) {
        const hx_wmail *m = &w->mails[i];
        const hx_wperson *p = &w->people[m->from];
        char date[64], rel[128];
        rfc_date(m->t, date, sizeof date);
        hx_buf_init(&b);
        hx_buf_printf(&b, "From: %s <%s>\r\nTo: %s <%s>\r\nSubject: %s\r\nDate: %s\r\n"
                          "Message-ID: <%s@%s>\r\nMIME-Version: 1.0\r\n"
                          "Content-Type: text/plain; charset=utf-8\r\n\r\n"
                          "Hi %s,\r\n\r\n%s\r\n\r\n%s\r\n%s\r\n",
                      p->name, p->email, w->user.name, w->user.email, m->subject, date, m->id,
                      strchr(p->email, '@') + 1, w->user.first, m->fact,
                      signs[(m->t / 7) % N_OF(signs)], p->first);
        snprintf(rel, sizeof rel, "mail/%s/%s%s", m->unread ? "new" : "cur", m->id,
                 m->unread ? "" : ":2,S");
        rc = put_file(home, rel, &b, err);
        hx_buf_free(&b);
    }
    return rc;
}

static int write_files(const hx_world *w, const char *home, hx_err *err)
{
    int rc = HX_OK;
    for (int i = 0; i < w->n_files && !rc; i++) {
        const hx_wfile *f = &w->files[i];
        char rel[128], path[4200];
        hx_buf b;
        hx_buf_init(&b);
        hx_buf_printf(&b, "%s\n\n%s\nOwner: %s\n", f->topic, f->fact, w->user.name);
        snprintf(rel, sizeof rel, "files/%s/%s", f->folder, f->name);
        rc = put_file(home, rel, &b, err);
        hx_buf_free(&b);
        snprintf(path, sizeof path, "%s/config/%s", home, rel);
        struct timespec ts[2] = {{w->now - 86400 * (i + 1), 0}, {w->now - 86400 * (i + 1), 0}};
        if (!rc) utimensat(AT_FDCWD, path, ts, 0);
    }
    /* the folders too, once all is written: a listing shows a folder's
     * time, and the world's data is the same whenever it is made */
    const struct timespec ts[2] = {{w->now - 86400 * (w->n_files + 1), 0}, {w->now - 86400 * (w->n_files + 1), 0}};
    for (int i = 0; i < w->n_files && !rc; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/config/files/%s", home, w->files[i].folder);
        for (char *slash = path + strlen(path); slash; slash = strrchr(path, '/')) {
            if (strlen(path) <= strlen(home) + strlen("/config/files")) break;
            utimensat(AT_FDCWD, path, ts, 0);
            *slash = 0;
        }
    }
    return rc;
}

static int write_config(const hx_world *w, const char *home, hx_err *err)
{
    cJSON *c = cJSON_CreateObject(), *u = cJSON_AddObjectToObject(c, "user");
    cJSON_AddStringToObject(u, "name", w->user.name);
    cJSON_AddStringToObject(u, "email", w->user.email);
    cJSON_AddStringToObject(c, "timezone", w->tz);
    cJSON *wh = cJSON_AddObjectToObject(c, "working_hours");
    char t[8];
    snprintf(t, sizeof t, "%02d:%02d", w->work_start / 60, w->work_start % 60);
    cJSON_AddStringToObject(wh, "start", t);
    snprintf(t, sizeof t, "%02d:%02d", w->work_end / 60, w->work_end % 60);
    cJSON_AddStringToObject(wh, "end", t);
    const char *days[] = {"mon", "tue", "wed", "thu", "fri"};
    cJSON_AddItemToObject(wh, "days", cJSON_CreateStringArray(days, 5));
    const char *cals[] = {"calendars/work", "calendars/personal.ics"};
    cJSON_AddItemToObject(c, "calendars", cJSON_CreateStringArray(cals, has_personal(w) ? 2 : 1));
    cJSON_AddStringToObject(c, "calendar_default", "calendars/work");
    cJSON_AddStringToObject(c, "maildir", "mail");
    cJSON_AddStringToObject(c, "outbox", "outbox");
    const char *roots[] = {"files"};
    cJSON_AddItemToObject(c, "file_roots", cJSON_CreateStringArray(roots, 1));
    cJSON_AddNullToObject(c, "model");
    hx_buf b;
    hx_buf_init(&b);
    char *s = cJSON_Print(c);
    hx_buf_printf(&b, "%s\n", s ? s : "{}");
    cJSON_free(s);
    cJSON_Delete(c);
    int rc = put_file(home, "config.json", &b, err);
    hx_buf_free(&b);
    return rc;
}

int hx_world_write(const hx_world *w, const char *home, hx_err *err)
{
    int rc = hx_world_rmtree(home, err);
    if (!rc) rc = hx_mkdirs(home, err);
    if (!rc) rc = write_config(w, home, err);
    if (!rc) rc = write_calendars(w, home, err);
    if (!rc) rc = write_mail(w, home, err);
    if (!rc) rc = write_files(w, home, err);
    return rc;
}

int hx_world_seed_memory(const hx_world *w, hx_memory *mem, hx_err *err)
{
    for (int i = 0; i < w->n_mems; i++) {
        hx_mem_new n = {.kind = w->mems[i].kind, .text = w->mems[i].text};
        int64_t id;
        int merged;
        int rc = hx_memory_remember(mem, &n, &id, &merged, err);
        if (rc) return rc;
    }
    return HX_OK;
}
