/* test_fold.c: the search folding (base/fold.c) code point class by
 * class, its stop words, and its SQLite function and FTS5 tokenizer
 * (base/fold_sql.c): accents, case, ß, decomposed text, Japanese. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "test.h"

static void expect_fold(const char *in, const char *want)
{
    char *got = hx_fold(in);
    if (!got || strcmp(got, want))
        test_fail_at(__FILE__, __LINE__, "fold '%s': got '%s', want '%s'", in,
                     got ? got : "(null)", want);
    free(got);
}

static void test_latin(void)
{
    expect_fold("Jürgen Weiß", "jurgen weiss");
    expect_fold("RÜCKFRAGEN", "ruckfragen");
    expect_fold("Fundación", "fundacion");
    expect_fold("ÉCOLE Ærø Œuvre", "ecole aero oeuvre");
    expect_fold("Łódź Đorđe ẞ þing", "lodz dorde ss thing");
    expect_fold("İstanbul ıi", "istanbul ii");
    expect_fold("Nguyễn Thị Ánh", "nguyen thi anh");  /* Latin Extended Additional */
    expect_fold("Ǆ ǅ ǆ Ǳ", "dz dz dz dz");             /* Latin Extended-B digraphs */
    expect_fold("Hello, World! 42", "hello, world! 42");
}

static void test_greek_cyrillic(void)
{
    expect_fold("ΆΘΗΝΑ Σοφία ς", "αθηνα σοφια σ");
    expect_fold("МОСКВА Ёлка", "москва елка");
    expect_fold("Йошкар-Ола", "йошкар-ола"); /* й is a letter of its own */
}

static void test_other_scripts(void)
{
    /* Japanese passes through unchanged; fullwidth ASCII becomes ASCII */
    expect_fold("会議の議事録", "会議の議事録");
    expect_fold("ＰＤＦの資料２０２７", "pdfの資料2027");
    expect_fold("ﬁnance ’quoted’ “double”", "finance 'quoted' \"double\"");
    expect_fold("a\xc2\xa0" "b", "a b");
    /* decomposed (NFD) text folds as the composed form does */
    expect_fold("U\xcc\x88" "bersicht", "ubersicht");
    /* invalid UTF-8 is copied byte for byte */
    expect_fold("a\xff\xc3(b\xe2\x82", "a\xff\xc3(b\xe2\x82");
    expect_fold("", "");
}

static void test_contains(void)
{
    EXPECT(hx_fold_contains("Jürgen Weiß <jw@example.de>", "jurgen weiss"));
    EXPECT(hx_fold_contains("Jürgen Weiß", "WEISS"));
    EXPECT(hx_fold_contains("Projects/Pilot Berlin/Übersicht.md", "übersicht"));
    EXPECT(hx_fold_contains("大阪の会議の議事録.txt", "議事録"));
    EXPECT(!hx_fold_contains("Jürgen", "jurgens"));
    EXPECT(hx_fold_contains("anything", ""));
    EXPECT(!hx_fold_contains(NULL, "x"));
}

static void test_stop_words(void)
{
    EXPECT(hx_fold_stop_word("the", 3));
    EXPECT(hx_fold_stop_word("der", 3));
    EXPECT(hx_fold_stop_word("les", 3));
    EXPECT(hx_fold_stop_word("para", 4));
    /* the tails an apostrophe splits off ("that's", "don't", "I'll") */
    EXPECT(hx_fold_stop_word("s", 1) && hx_fold_stop_word("t", 1) && hx_fold_stop_word("ll", 2));
    EXPECT(!hx_fold_stop_word("report", 6));
    EXPECT(!hx_fold_stop_word("thesis", 3 + 3));
    EXPECT(!hx_fold_stop_word("th", 2));
    EXPECT(!hx_fold_stop_word("", 0));
}

/* The NUL-separated terms of b joined with '|'. */
static void joined(const hx_buf *b, char *out, size_t n)
{
    out[0] = 0;
    for (size_t i = 0; b->data && i < b->len; i += strlen(b->data + i) + 1)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? "|" : "", b->data + i);
}

static void expect_terms(const char *text, int want_n, const char *want, const char *want_ignored)
{
    hx_buf t, ig;
    char a[256], b[256];
    hx_buf_init(&t);
    hx_buf_init(&ig);
    int n = hx_fold_terms(text, &t, &ig);
    joined(&t, a, sizeof a);
    joined(&ig, b, sizeof b);
    if (n != want_n || strcmp(a, want) || strcmp(b, want_ignored))
        test_fail_at(__FILE__, __LINE__, "terms of '%s': %d '%s' ignored '%s', want %d '%s' '%s'",
                     text, n, a, b, want_n, want, want_ignored);
    hx_buf_free(&t);
    hx_buf_free(&ig);
}

static void test_terms(void)
{
    expect_terms("the report", 1, "report", "the");
    expect_terms("The Report, the REPORT!", 1, "report", "the");
    expect_terms("Rückfragen zum Angebot von Jürgen", 4, "ruckfragen|zum|angebot|jurgen", "von");
    expect_terms("the", 1, "the", ""); /* nothing else: kept */
    expect_terms("議事録を送って", 6, "議事|事録|録を|を送|送っ|って", "");
    expect_terms("「会議」のメモ", 3, "会議|のメ|メモ", "");
    expect_terms("", 0, "", "");
    expect_terms("a b c d e f g h i j k l m n o p q r s t u v w x y z", 16,
                 "b|c|e|f|g|h|j|k|l|n|o|p|q|r|u|v", "a|d|i|m|s|t"); /* at most 16 */
}

static void expect_words(const char *text, int drop_stop, const char *want)
{
    hx_buf w;
    char a[256];
    hx_buf_init(&w);
    hx_fold_words(text, drop_stop, &w);
    joined(&w, a, sizeof a);
    if (strcmp(a, want))
        test_fail_at(__FILE__, __LINE__, "words of '%s': '%s', want '%s'", text, a, want);
    hx_buf_free(&w);
}

static void test_words(void)
{
    expect_words("Weiß, Jürgen", 0, "weiss|jurgen");
    expect_words("<JW@Example.de> (Lyon). 1:1", 0, "jw@example.de|lyon|1:1");
    expect_words("the Q3 report", 1, "q3|report");
    expect_words("the Q3 report", 0, "the|q3|report");
    expect_words("the", 1, "the"); /* only function words: kept */
    expect_words("定例会議 議事録", 1, "定例会議|議事録");
    expect_words("  ,; ", 1, "");
    /* how many of a query's words a folded text holds */
    hx_buf w;
    hx_buf_init(&w);
    hx_fold_words("Lunch with Carmen", 1, &w);
    EXPECT_EQ_INT(hx_fold_n_terms(&w), 2);
    EXPECT_EQ_INT(hx_fold_count_terms("meeting with carmen ruiz", &w), 1);
    EXPECT(!hx_fold_has_terms("meeting with carmen ruiz", &w));
    EXPECT(hx_fold_has_terms("lunch: carmen", &w));
    EXPECT_EQ_INT(hx_fold_count_terms(NULL, &w), 0);
    hx_buf_free(&w);
}

/* Rows of an FTS5 table with the tokenizer that a query matches. */
static int fts_count(sqlite3 *db, const char *query)
{
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE t MATCH ?", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(st, 1, query, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return n;
}

static void test_sqlite(void)
{
    sqlite3 *db = NULL;
    hx_err err = {0};
    ASSERT(sqlite3_open(":memory:", &db) == SQLITE_OK);
    ASSERT(hx_fold_sql_register(db, &err) == HX_OK);
    sqlite3_stmt *st = NULL;
    ASSERT(sqlite3_prepare_v2(db, "SELECT hx_fold('Jürgen WEIß'), hx_fold(NULL)", -1, &st,
                              NULL) == SQLITE_OK);
    ASSERT(sqlite3_step(st) == SQLITE_ROW);
    EXPECT_STR_EQ((const char *)sqlite3_column_text(st, 0), "jurgen weiss");
    EXPECT(sqlite3_column_type(st, 1) == SQLITE_NULL);
    sqlite3_finalize(st);
    ASSERT(sqlite3_exec(db,
                        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='hx_fold');"
                        "INSERT INTO t VALUES ('Grüße von Jürgen Weiß');"
                        "INSERT INTO t VALUES ('定例会議の議事録を送ります');"
                        "INSERT INTO t VALUES ('the quarterly report');",
                        NULL, NULL, NULL) == SQLITE_OK);
    EXPECT_EQ_INT(fts_count(db, "\"weiss\""), 1);
    EXPECT_EQ_INT(fts_count(db, "\"WEIß\""), 1);
    EXPECT_EQ_INT(fts_count(db, "\"GRUSSE\""), 1);
    EXPECT_EQ_INT(fts_count(db, "\"議事録\""), 1); /* a word inside a run */
    EXPECT_EQ_INT(fts_count(db, "\"会議\""), 1);
    EXPECT_EQ_INT(fts_count(db, "\"議事会\""), 0); /* its pairs, but not in a row */
    EXPECT_EQ_INT(fts_count(db, "\"REPORT\""), 1);
    /* with porter in front, as the memory's index has it */
    ASSERT(sqlite3_exec(db,
                        "CREATE VIRTUAL TABLE p USING fts5(x, tokenize='porter hx_fold');"
                        "INSERT INTO p VALUES ('Meetings with Jürgen');",
                        NULL, NULL, NULL) == SQLITE_OK);
    ASSERT(sqlite3_prepare_v2(db, "SELECT count(*) FROM p WHERE p MATCH '\"meeting\" AND \"JURGEN\"'",
                              -1, &st, NULL) == SQLITE_OK);
    ASSERT(sqlite3_step(st) == SQLITE_ROW);
    EXPECT_EQ_INT(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

int main(void)
{
    RUN(test_latin);
    RUN(test_greek_cyrillic);
    RUN(test_other_scripts);
    RUN(test_contains);
    RUN(test_stop_words);
    RUN(test_terms);
    RUN(test_words);
    RUN(test_sqlite);
    return test_summary();
}
