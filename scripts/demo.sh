#!/bin/sh
# demo.sh: the main job: sets up a sample world (Alice's calendar, mailbox,
# files and config from tests/fixtures/world) in a temporary HEARTH_HOME and
# runs the assistant on requests, showing the calls, the answer, the files
# the calls wrote, the audit log and the recorded episodes.
# MODEL=path picks the model; default: the project's own model
# (models/hearth-tiny.gguf) once it exists, else the tiny stories260K from
# the shared data directory as a stand-in (its words are nonsense, but every
# call it makes is valid against the tool's schema: the grammar sees to it).
set -e
hearth=${1:-build/hearth}
data=${HEARTH_SHARED_DATA:-../shared/data}
model=${MODEL:-}
standin=0
if [ -z "$model" ]; then
    if [ -f models/hearth-tiny.gguf ]; then model=models/hearth-tiny.gguf
    else model=$data/models/stories260K.gguf; standin=1; fi
fi
if [ ! -f "$model" ]; then
    echo "demo: no model at $model; run 'make demo MODEL=/path/to/model.gguf'" >&2
    exit 1
fi

home=$(mktemp -d "${TMPDIR:-/tmp}/hearth-demo.XXXXXX")
trap 'rm -rf "$home"' EXIT
world=$home/config
mkdir -p "$world"
cp -r tests/fixtures/world/. "$world/"
mkdir -p "$world/files/notes"
printf 'Budget 2027: travel -10%%, hardware +5%%. Review with Bob before Dec 15.\n' \
    >"$world/files/notes/budget.txt"
export HEARTH_HOME="$home"
export HEARTH_NOW=2026-12-01T09:00:00+01:00
touch "$home/.start"

echo "== Hearth demo: a sample world in $home (now: $HEARTH_NOW)"
echo "   calendar: $(find "$world/calendars" -name '*.ics' | wc -l) files," \
     "mail: $(find "$world/mail" -type f | wc -l) messages, files: $world/files"
# the model is checked once: a file that is no model stops the demo here
if ! info=$("$hearth" info -m "$model"); then
    echo "demo: $model cannot be loaded (above); run 'make demo MODEL=/path/to/model.gguf'" >&2
    exit 1
fi
echo "$info" | sed -n '1,3p'
if [ "$standin" = 1 ]; then
    echo
    echo "   Hearth's own small model (models/hearth-tiny.gguf) does not exist yet."
    echo "   Stand-in: stories260K, a 260K-parameter story model. It cannot plan:"
    echo "   its words are nonsense. What the demo shows is the machinery: each"
    echo "   call is forced valid by the tool-call grammar, checked by the policy,"
    echo "   run, audited and fed back; the model then answers in one line."
    opts="--tool-choice required --tools calendar.find_slots,calendar.create_event,calendar.list_events --temp 0.8 --seed 7 --max-steps 3 --max-tokens 400"
else
    opts="--max-steps 8 --max-tokens 400"
fi

ask() {
    echo
    echo "== hearth ask \"$1\""
    # shellcheck disable=SC2086
    "$hearth" ask "$1" --model "$model" --yes $opts || echo "   (exit code $?)"
}
ask "Remember that Bob's email is bob@example.org"
ask "Schedule a 30-minute meeting with Bob next Tuesday afternoon about the budget"
ask "What is on my calendar tomorrow?"

echo
echo "== what the calls wrote"
new=$(find "$world/calendars" "$world/outbox" -type f -newer "$home/.start" 2>/dev/null || true)
if [ -n "$new" ]; then
    for f in $new; do
        echo "-- ${f#$home/}"
        case $f in # an event file: its event (not the time zone's history)
        *.ics) sed -n '/^BEGIN:VEVENT/,/^END:VEVENT/p' "$f" | sed -n '1,30p' ;;
        *) sed '/^Content-Transfer-Encoding: base64/q' "$f" | sed -n '1,30p' ;;
        esac
    done
elif grep -q '"effect":"read"' "$home/data/audit.jsonl" 2>/dev/null &&
     ! grep -v '"effect":"read"' "$home/data/audit.jsonl" >/dev/null 2>&1; then
    echo "   nothing: every call only read (the audit log below); the model"
    echo "   answered without creating the event or sending an invitation"
else
    echo "   no event file and no queued invitation: no call that would write"
    echo "   one succeeded (see the errors fed back to the model above)"
fi
echo
echo "== audit log ($home/data/audit.jsonl)"
cat "$home/data/audit.jsonl" 2>/dev/null || echo "   (empty)"
echo
echo "== hearth feedback --reject (each run is an episode in memory; accepted"
echo "   and corrected ones are what the nightly fine-tuning learns from)"
"$hearth" feedback --reject
