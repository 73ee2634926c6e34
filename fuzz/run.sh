#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) and prints the
# executions of each: `make fuzz` runs 60 s each, CI's short pass
# `fuzz/run.sh 3` builds every target and runs each a few seconds.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install --locked
# cargo-fuzz --version 0.13.1`). Builds into fuzz/target; the working corpus
# is fuzz/target/corpus/<target> (seeded from tests/data by fuzz/seeds.py,
# kept between runs), crashes go to fuzz/target/artifacts/<target>/.
# Options: FUZZ_TARGETS="a b" runs only those; FUZZ_JOBS (default 2) caps
# the build's jobs; FUZZ_BUILD_ARGS are added to `cargo fuzz build` (CI's
# short pass uses "--sanitizer none": a shorter cold build; the targets
# check panics and properties, and the suite's crates forbid unsafe code). Exits non-zero when a target fails (a crash or a
# property broken), after running the others.
set -euo pipefail
seconds="${1:-60}"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export CARGO_INCREMENTAL=0 CARGO_BUILD_JOBS="${FUZZ_JOBS:-2}"
fuzz=(cargo +nightly fuzz)
targets="${FUZZ_TARGETS:-$("${fuzz[@]}" list)}"
corpus="$here/target/corpus"
python3 "$here/seeds.py" "$corpus" >/dev/null
start=$(date +%s)
# shellcheck disable=SC2086 # FUZZ_BUILD_ARGS is a list of words
"${fuzz[@]}" build ${FUZZ_BUILD_ARGS:-}
echo "built every target in $(( $(date +%s) - start )) s"
failed=()
printf '%-24s %12s %8s  %s\n' target executions exec/s result
for target in $targets; do
  log="$here/target/logs/$target.log"
  mkdir -p "$(dirname "$log")" "$here/target/artifacts/$target"
  # -jobs=1 runs the fuzzer in a child process whose log, fuzz-0.log, is
  # written to the working directory: keep it under target/.
  cd "$here/target/logs"
  result=ok
  # The binary cargo fuzz built, run directly (`cargo fuzz run` would build again).
  if ! "$here/target/x86_64-unknown-linux-gnu/release/$target" "$corpus/$target" \
      -max_total_time="$seconds" -jobs=1 -workers=1 -print_final_stats=1 \
      -artifact_prefix="$here/target/artifacts/$target/" -rss_limit_mb=2048 -timeout=10 \
      >"$log" 2>&1; then
    result="FAILED (see $log)"
    failed+=("$target")
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  printf '%-24s %12s %8s  %s\n' "$target" "${runs:-?}" "${rate:-?}" "$result"
done
echo "total $(( $(date +%s) - start )) s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
