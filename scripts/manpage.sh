#!/bin/sh
# manpage.sh HEARTH: writes the man page hearth(1) on stdout, made from the
# program's own --help and each verb's, so that it says what the installed
# binary does (make install puts it in PREFIX/share/man/man1). The verbs
# run with HEARTH_HOME in a scratch folder: asking for help touches nothing.
set -e
hearth=${1:?usage: manpage.sh path/to/hearth}
home=$(mktemp -d "${TMPDIR:-/tmp}/hearth-man.XXXXXX")
trap 'rm -rf "$home"' EXIT
export HEARTH_HOME="$home"
# roff-safe text: backslashes, and a leading dot or quote made literal
esc() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
version=$("$hearth" --version 2>/dev/null || echo hearth)
cat <<EOF
.TH HEARTH 1 "" "$version" "User Commands"
.SH NAME
hearth \\- an on-device assistant and tool-calling runtime
.SH SYNOPSIS
.B hearth
.I verb
.RI [ options ]
.SH DESCRIPTION
.nf
EOF
"$hearth" --help 2>&1 | esc
echo ".fi"
echo ".SH VERBS"
"$hearth" --help 2>&1 | sed -n '/^verbs:/,/^$/p' | awk 'NR > 1 && NF { print $1 }' |
while read -r verb; do
    echo ".SS $verb"
    echo ".nf"
    "$hearth" "$verb" --help 2>&1 </dev/null | esc || true
    echo ".fi"
done
cat <<'EOF'
.SH EXIT STATUS
0 ok, 1 failure, 2 bad command line, 3 bad input, 4 denied, 130 interrupted.
.SH FILES
.TP
.I $XDG_CONFIG_HOME/hearth/
config.json and tools.d/ (default ~/.config/hearth)
.TP
.I $XDG_DATA_HOME/hearth/
memory.db, audit.jsonl and the LoRA adapters (default ~/.local/share/hearth)
.TP
.I $XDG_CACHE_HOME/hearth/
caches, safe to delete (default ~/.cache/hearth)
.TP
.I PREFIX/share/hearth/hearth-tiny.gguf
the default model, used without --model or "model" in config.json
.PP
HEARTH_HOME puts the three folders under one.
EOF
