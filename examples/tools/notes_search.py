#!/usr/bin/python3
"""A Hearth tool: finds the lines of the user's notes that mention a word.

Hearth runs it confined: it may read only the folders its manifest lists,
gets its arguments as one JSON object on stdin, and answers one JSON object
on stdout. A non-zero exit code with a message on stderr reports an error.
"""
import json
import os
import sys


def main():
    args = json.load(sys.stdin)
    word = args["word"].lower()
    limit = int(args.get("limit", 10))
    notes = sys.argv[1]  # the folder, given in the manifest's command
    hits = []
    for dirpath, _, files in os.walk(notes):
        for name in sorted(files):
            if not name.endswith((".md", ".txt")):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    if word in line.lower():
                        hits.append({"file": os.path.relpath(path, notes),
                                     "line": number, "text": line.strip()})
    json.dump({"matches": hits[:limit], "total": len(hits)}, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except (KeyError, ValueError) as e:
        print(f"bad arguments: {e}", file=sys.stderr)
        sys.exit(2)
