#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz, writes seed corpora (real chunks,
# profiles and KV dumps; valid rANS streams; one control message of every type), and runs every fuzzer for a
# bounded time, then the Python package's llama.cpp state parser under atheris (when build/ has the
# package). Exits non-zero if a fuzzer finds a crash.
#   KVSTREAM_FUZZ_SECONDS   seconds per fuzzer (default 60)
#   KVSTREAM_FUZZ_BUILD_DIR build folder (default build-fuzz)
#   KVSTREAM_FUZZ_JOBS      build parallelism (default: nproc)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${KVSTREAM_FUZZ_SECONDS:-60}
build_dir=${KVSTREAM_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${KVSTREAM_FUZZ_JOBS:-$(nproc)}

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DKVSTREAM_FUZZ=ON -DKVSTREAM_SANITIZE=ON -DKVSTREAM_CUDA=OFF \
    -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link >/dev/null
fi
targets=(chunk_decode_fuzz chunk_fuzz_seeds rans_decode_fuzz rans_fuzz_seeds kv_dump_fuzz control_message_fuzz control_fuzz_seeds)
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"

out="$build_dir/fuzz"
mkdir -p "$out/chunk_corpus" "$out/chunk_seeds" "$out/rans_corpus" "$out/rans_seeds" "$out/kv_dump_corpus" "$out/kv_dump_seeds" \
  "$out/control_corpus" "$out/control_seeds" "$out/artifacts"
# The seed generator runs a real model; leaks in it are not what is being fuzzed.
ASAN_OPTIONS=detect_leaks=0 "$build_dir/bin/chunk_fuzz_seeds" "$out/chunk_seeds" "$out/kv_dump_seeds"
"$build_dir/bin/rans_fuzz_seeds" "$out/rans_seeds"
"$build_dir/bin/control_fuzz_seeds" "$out/control_seeds"

status=0
run() {
  local name=$1; shift
  echo "fuzz.sh: running $name for ${seconds}s"
  if ! "$build_dir/bin/$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$out/artifacts/$name-" "$@"; then
    echo "fuzz.sh: $name FAILED (crash input in $out/artifacts/)" >&2
    status=1
  fi
}
run chunk_decode_fuzz "$out/chunk_corpus" "$out/chunk_seeds"
run rans_decode_fuzz "$out/rans_corpus" "$out/rans_seeds"
run kv_dump_fuzz "$out/kv_dump_corpus" "$out/kv_dump_seeds"
run control_message_fuzz "$out/control_corpus" "$out/control_seeds"

# The Python package's parser of llama.cpp states (atheris), against the extension in build/.
python_build=${KVSTREAM_BUILD_DIR:-build}
if [ -d "$python_build/python/kvstream" ]; then
  scripts/python_env.sh bindings/requirements-test.txt
  mkdir -p "$out/llamacpp_state_corpus" "$out/llamacpp_state_seeds"
  fuzz_python() { PYTHONPATH="$python_build/python" build-deps/python/bin/python tests/fuzz/llamacpp_state_fuzz.py "$@"; }
  fuzz_python --write-seeds "$out/llamacpp_state_seeds"
  echo "fuzz.sh: running llamacpp_state_fuzz for ${seconds}s"
  if ! fuzz_python "$out/llamacpp_state_corpus" "$out/llamacpp_state_seeds" -max_total_time="$seconds" -rss_limit_mb=2048 \
      -timeout=10 -artifact_prefix="$out/artifacts/llamacpp_state_fuzz-" > "$out/llamacpp_state_fuzz.log" 2>&1; then
    tail -40 "$out/llamacpp_state_fuzz.log" >&2
    echo "fuzz.sh: llamacpp_state_fuzz FAILED (crash input in $out/artifacts/)" >&2
    status=1
  else
    tail -1 "$out/llamacpp_state_fuzz.log"
  fi
fi
exit $status
