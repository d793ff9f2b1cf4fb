#!/bin/sh
# demo.sh: the main job until the agent exists: streams a continuation from
# a real GGUF model with `hearth generate`. MODEL=path picks the model;
# by default the tiny stories260K model from the shared data directory.
set -e
hearth=${1:-build/hearth}
data=${HEARTH_SHARED_DATA:-../shared/data}
model=${MODEL:-$data/models/stories260K.gguf}
if [ ! -f "$model" ]; then
    echo "demo: no model at $model; run 'make demo MODEL=/path/to/model.gguf'" >&2
    exit 1
fi
"$hearth" info -m "$model"
echo
"$hearth" generate -m "$model" -p "Once upon a time" -n 120 --temp 0
