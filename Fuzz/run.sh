#!/usr/bin/env bash
# Builds the libFuzzer targets (Fuzz/Targets/*, docs/fuzzing.md) with the fuzzer and address sanitizers
# and runs each for a bounded time, one after the other (one core: others may be building).
#
#   Fuzz/run.sh TARGET|all SECONDS       e.g. Fuzz/run.sh record-path 300, Fuzz/run.sh all 30 (CI)
#   Fuzz/run.sh TARGET --replay FILE...  runs the target once on each file (a crash, a corpus entry)
#
# The build goes to .build-fuzz/ beside the normal .build/, which it never touches. Inputs the fuzzer
# finds go to .build-fuzz/corpus/TARGET/ (the committed seeds in Fuzz/corpus/TARGET/ are only read);
# a crash is kept as Fuzz/crashes/TARGET/crash-SHA1 and printed in base64, so that a CI log is enough
# to reproduce it. Exits 1 when any target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(config record-json tus-headers record-path)
usage() { echo "usage: Fuzz/run.sh TARGET|all SECONDS | Fuzz/run.sh TARGET --replay FILE... (targets: ${targets[*]})" >&2; exit 64; }
[ $# -ge 2 ] || usage
which="$1"
shift
if [ "$which" = all ]; then chosen=("${targets[@]}"); else
    [[ " ${targets[*]} " == *" $which "* ]] || usage
    chosen=("$which")
fi

# Longest input each target is given: paths and headers are short, config files and JSON pages longer.
max_len() {
    case "$1" in
        record-path) echo 8192 ;;
        tus-headers) echo 8192 ;;
        *) echo 65536 ;;
    esac
}

build_path=.build-fuzz
# SwiftPM's --sanitize keeps one sanitizer per compile when given two, so the pair goes through -Xswiftc
# (the last -sanitize wins); --sanitize fuzzer stays because it is what makes SwiftPM leave libFuzzer's
# main alone at link time. -enable-testing: the targets reach internal parsers with @testable import.
build() {
    SINKI_FUZZ=1 swift build -c release --build-path "$build_path" --product "fuzz-$1" \
        --sanitize fuzzer -Xswiftc -sanitize=fuzzer,address -Xswiftc -enable-testing >&2
    local binary="$build_path/release/fuzz-$1"
    # A fuzzer without coverage runs happily and finds nothing: refuse to run one. Instrumented code
    # brings its coverage counters' section and AddressSanitizer's module constructor; the runtimes alone
    # (linked either way) bring neither.
    local symbols sections
    symbols="$(nm "$binary")"
    sections="$(readelf -S "$binary")"
    if [[ "$sections" != *__sancov_cntrs* || "$symbols" != *asan.module_ctor* ]]; then
        echo "fuzz-$1 is not instrumented for coverage and AddressSanitizer; refusing to run it" >&2
        exit 1
    fi
    echo "$binary"
}

# The Swift runtime's own backtracer would hold a crashing run for many seconds; libFuzzer reports it.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:symbolize=1}"

if [ "${1:-}" = --replay ]; then
    shift
    [ $# -ge 1 ] || usage
    binary="$(build "${chosen[0]}")"
    exec "$binary" -runs=1 "$@"
fi
seconds="$1"
[[ "$seconds" =~ ^[0-9]+$ ]] || usage

failed=()
for target in "${chosen[@]}"; do
    binary="$(build "$target")"
    work="$build_path/corpus/$target"
    crashes="Fuzz/crashes/$target"
    mkdir -p "$work" "$crashes"
    dict=()
    [ -f "Fuzz/dict/$target.dict" ] && dict=("-dict=Fuzz/dict/$target.dict")
    echo "== fuzz $target for $seconds s"
    set +e
    "$binary" "$work" "Fuzz/corpus/$target" "${dict[@]}" -max_total_time="$seconds" -max_len="$(max_len "$target")" \
        -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$crashes/" -print_final_stats=1 2> "$build_path/$target.log"
    status=$?
    set -e
    grep -E '^#[0-9]+ +DONE|^stat::number_of_executed_units|^stat::peak_rss_mb|^INFO: seed corpus' "$build_path/$target.log" || true
    if [ "$status" -ne 0 ]; then
        failed+=("$target")
        echo "!! fuzz $target failed (exit $status); the end of its log:"
        tail -n 40 "$build_path/$target.log"
        for file in "$crashes"/*; do
            [ -f "$file" ] || continue
            echo "!! kept $file (base64 below; decode with base64 -d to replay with Fuzz/run.sh $target --replay FILE)"
            base64 -w 76 "$file"
        done
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashed: ${failed[*]}"
    exit 1
fi
echo "fuzz: ${chosen[*]}: no crash in $seconds s each"
