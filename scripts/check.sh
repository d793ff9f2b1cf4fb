#!/bin/sh
# check.sh BUILD "mod:dep dep ... mod:dep ...": the layering checks of
# `make check`, on the sources and the built libraries:
#  1. a module's sources include another module's headers only through its
#     public header (engine.h, engine_ext.h for the trainer and the
#     model-file tools, grammar.h, tools.h, ...), and only of the modules
#     it depends on (the Makefile's deps_* lists); never another module's
#     *_int.h. engine/grammar is the engine's own part: the engine includes
#     only its grammar.h, and it includes the engine headers it builds on.
#     Tests and benchmarks are harnesses, exempt.
#  2. every symbol the libraries export starts with hx_ (nm).
#  3. every symbol a library uses from another library comes from one it
#     depends on (nm): the link follows the same layering.
# Prints each violation and exits 1 if there is any.
set -u
build=$1
deps=$2
fail=0

# the module of a source path: its folder (engine/grammar a part of engine)
public_of() {
    case $1 in
    base) echo "base/base.h" ;;
    engine) echo "engine/engine.h engine/engine_ext.h" ;;
    cli) echo "" ;;
    *) echo "$1/$1.h" ;;
    esac
}
deps_of() {
    for e in $deps; do
        case $e in "$1":*) echo "${e#*:}" | tr ',' ' '; return ;; esac
    done
}

# ---- 1. includes ----
for mod_deps in $deps; do
    mod=${mod_deps%%:*}
    for f in $(find "$mod" -name '*.[ch]' | sort); do
        case $f in engine/grammar/*) src=grammar ;; *) src=$mod ;; esac
        grep -n '^#include "' "$f" | while IFS= read -r line; do
            inc=${line#*\"}
            inc=${inc%%\"*}
            case $inc in */*) ;; *) continue ;; esac
            tmod=${inc%%/*}
            case $inc in engine/grammar/*) tmod=grammar ;; esac
            [ "$tmod" = "$src" ] && continue
            # the engine and its grammar
            if [ "$src" = engine ] && [ "$tmod" = grammar ]; then
                [ "$inc" = engine/grammar/grammar.h ] && continue
                echo "check: $f:${line%%:*}: includes $inc (the engine uses engine/grammar/grammar.h only)"
                echo x >> "$build/.check-fail"; continue
            fi
            if [ "$src" = grammar ] && [ "$tmod" = engine ]; then
                case $inc in *_int.h)
                    echo "check: $f:${line%%:*}: includes $inc, the engine's internals"
                    echo x >> "$build/.check-fail" ;;
                esac
                continue
            fi
            [ "$tmod" = grammar ] && tmod=engine
            if [ "$src" = grammar ]; then src_deps=$(deps_of engine); else src_deps=$(deps_of "$mod"); fi
            case " $src_deps " in
            *" $tmod "*) ;;
            *) echo "check: $f:${line%%:*}: includes $inc, but $mod does not depend on $tmod"
               echo x >> "$build/.check-fail"; continue ;;
            esac
            ok=0
            for p in $(public_of "$tmod"); do
                [ "$inc" = "$p" ] && ok=1
            done
            # the extension API is the trainer's and the model-file tools'
            case $inc:$mod in engine/engine_ext.h:lora | engine/engine_ext.h:modelfile) ;;
            engine/engine_ext.h:*) ok=0 ;;
            esac
            [ $ok = 1 ] && continue
            if [ "$inc" = engine/engine_ext.h ]; then
                echo "check: $f:${line%%:*}: includes engine/engine_ext.h, the engine's extension API (lora and modelfile only)"
            else
                echo "check: $f:${line%%:*}: includes $inc, not the public header of $tmod ($(public_of "$tmod" | cut -d' ' -f1))"
            fi
            echo x >> "$build/.check-fail"
        done
    done
done
[ -s "$build/.check-fail" ] && fail=1
rm -f "$build/.check-fail"

# ---- 2. and 3. the libraries' symbols ----
defs=$build/.check-defs
uses=$build/.check-uses
: > "$defs"
: > "$uses"
for mod_deps in $deps; do
    mod=${mod_deps%%:*}
    lib=$build/lib$mod.a
    [ -f "$lib" ] || { echo "check: $lib missing (build first)"; fail=1; continue; }
    nm -g --defined-only "$lib" | awk -v m="$mod" 'NF == 3 && $2 ~ /[TDBRCSV]/ {print $3, m}' >> "$defs"
    nm -u "$lib" | awk -v m="$mod" 'NF == 2 {print $2, m}' >> "$uses"
done
bad=$(awk '$1 !~ /^hx_/ {print "check: lib" $2 ".a exports " $1 " (not hx_-prefixed)"}' "$defs")
[ -n "$bad" ] && { echo "$bad"; fail=1; }
sort -u "$defs" -o "$defs"
sort -u "$uses" -o "$uses"
for mod_deps in $deps; do
    mod=${mod_deps%%:*}
    allowed=" $(deps_of "$mod") "
    bad=$(awk -v m="$mod" '$2 == m {print $1}' "$uses" | join - "$defs" |
        awk -v m="$mod" -v ok="$allowed" '$2 != m && index(ok, " " $2 " ") == 0 {
            print "check: lib" m ".a uses " $1 " of lib" $2 ".a, which it does not depend on" }')
    [ -n "$bad" ] && { echo "$bad"; fail=1; }
done
rm -f "$defs" "$uses"

[ $fail = 0 ] && echo "check: includes follow the layering, every exported symbol is hx_-prefixed, every library links only what it depends on"
exit $fail
