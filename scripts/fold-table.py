#!/usr/bin/env python3
"""fold-table.py: prints base/fold_table.h, the per-code-point table of
hx_fold (base/fold.c), from Python's Unicode database.

A letter folds to its NFKD decomposition without combining marks, case
folded (so "É" -> "e", "ǅ" -> "dz", "ß" -> "ss", "Ά" -> "α", "Й" -> "и");
a Latin letter with no decomposition ("ø", "ł", "đ", "ƀ") folds to the
base letter its Unicode name gives ("LATIN SMALL LETTER O WITH STROKE");
anything else keeps its case-folded self. Run it as
    python3 scripts/fold-table.py > base/fold_table.h
"""
import re
import sys
import unicodedata

BLOCKS = [  # (name, first, last): the ranges the table covers
    ("latin", 0x00C0, 0x024F),      # Latin-1 Supplement letters, Extended-A and -B
    ("greek", 0x0370, 0x03FF),      # Greek and Coptic
    ("cyrillic", 0x0400, 0x04FF),   # Cyrillic
    ("latin_add", 0x1E00, 0x1EFF),  # Latin Extended Additional (Vietnamese, ...)
]
SPECIAL = {"ð": "d", "Ð": "d", "þ": "th", "Þ": "th", "ı": "i", "ĸ": "k", "ŉ": "n",
           "Й": "й", "й": "й"}  # Russian's short i is a letter of its own
NAME = re.compile(r"LATIN (SMALL|CAPITAL) (LETTER|LIGATURE) ([A-Z]{1,2})( WITH .*)?$")


def fold(c):
    if c in SPECIAL:
        return SPECIAL[c]
    d = "".join(x for x in unicodedata.normalize("NFKD", c) if not unicodedata.combining(x))
    d = d.casefold()
    if not d.strip():  # a spacing mark ("΄" -> " "): kept
        return c.casefold()
    if d and all(ord(x) < 0x80 for x in d):
        return d
    m = NAME.match(unicodedata.name(c, ""))
    if m:
        return m.group(3).lower()
    return d if len(d) == 1 else c.casefold()


def c_str(s):
    return '"' + "".join(ch if 0x20 <= ord(ch) < 0x7F and ch not in '"\\' else
                         "".join("\\x%02x" % b for b in ch.encode()) for ch in s) + '"'


def main():
    out = sys.stdout
    out.write("/* fold_table.h: what hx_fold (base/fold.c) turns each code point of\n"
              " * its blocks into, as UTF-8 (\"\" keeps it); made by\n"
              " * scripts/fold-table.py from Unicode %s. Do not edit. */\n"
              % unicodedata.unidata_version)
    for name, lo, hi in BLOCKS:
        out.write("\n#define FOLD_%s_FIRST 0x%04X\n#define FOLD_%s_LAST 0x%04X\n"
                  % (name.upper(), lo, name.upper(), hi))
        out.write("static const char fold_%s[%d][4] = {\n" % (name, hi - lo + 1))
        row = []
        for cp in range(lo, hi + 1):
            c = chr(cp)
            f = fold(c) if unicodedata.category(c) not in ("Cn",) else c
            s = "" if f == c else f
            assert len(s.encode()) <= 3, (hex(cp), s)
            row.append(c_str(s))
            if len(row) == 8:
                out.write("    " + ", ".join(row) + ", /* %04X */\n" % (cp - 7))
                row = []
        if row:
            out.write("    " + ", ".join(row) + ",\n")
        out.write("};\n")


main()
