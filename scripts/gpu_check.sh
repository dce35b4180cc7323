#!/usr/bin/env bash
# The GPU decoder's check and benchmark on a machine with a CUDA GPU and nothing but a C++ compiler,
# CMake, ninja and CUDA (the lent GPU machines: no Boost, UCX, OpenBLAS or GoogleTest, no registries).
#
#   scripts/gpu_check.sh prepare   here, with the model: writes the chunk folder build-gpu-chunks/
#                                  (SmolLM2 chunks of every scheme and level kind, their profile and the CPU
#                                  decoder's hashes; about 57 MiB, within the 64 MiB the device tool carries)
#   scripts/gpu_check.sh           there: builds KVSTREAM_ONLY=codec into build-gpu/, runs kvstream_gpu_check
#                                  (the golden chunks in every layout and dtype against the CPU decoder,
#                                  directly and through the device pipeline), kvstream_gpu_bench (decode
#                                  throughput) and kvstream_gpu_bench --pipeline (paced KV-ready, GPU and CPU
#                                  rows) on build-gpu-chunks/; figures to $OUT (or build-gpu/)
#
#   KVSTREAM_PROFILE   the profile to encode with (prepare; default the demo's cached one)
#   KVSTREAM_CUDA_ARCH CMake CUDA architectures (default 90: H100 and H200)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
chunks=build-gpu-chunks

if [ "${1:-}" = prepare ]; then
  profile=${KVSTREAM_PROFILE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvstream/profiles/smollm2-predicted.kvprofile}
  [ -f "$profile" ] || { echo "gpu_check: no profile at $profile: run scripts/demo.sh once, or set KVSTREAM_PROFILE" >&2; exit 1; }
  scripts/bootstrap.sh
  source scripts/openblas_env.sh
  rm -rf "$chunks"
  # fp16 and int8 on the lossy sets' whole context, so that the pipeline benchmark compares like with like.
  build/bin/kvstream bench gpu --model smollm2 --profile "$profile" --passthrough-tokens 512 --write-chunks "$chunks"
  exit 0
fi

out=${OUT:-build-gpu}
mkdir -p "$out"
{
  echo "== $(date -u +%FT%TZ) $(uname -n)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  nvcc --version | tail -1
} | tee "$out/gpu_machine.txt"
echo "== build (KVSTREAM_ONLY=codec)"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSTREAM_ONLY=codec \
  -DCMAKE_CUDA_ARCHITECTURES="${KVSTREAM_CUDA_ARCH:-90}" >/dev/null
cmake --build build-gpu -j "$(nproc)"
status=0
echo "== kvstream_gpu_check"
build-gpu/bin/kvstream_gpu_check | tee "$out/gpu_check.txt" || status=$?
echo "== kvstream_gpu_bench"
if [ -f "$chunks/MANIFEST" ]; then
  build-gpu/bin/kvstream_gpu_bench --chunks "$chunks" | tee "$out/gpu_bench.txt" || status=$?
  build-gpu/bin/kvstream_gpu_bench --chunks "$chunks" --json > "$out/gpu_bench.jsonl" || status=$?
  echo "== kvstream_gpu_bench --pipeline"
  build-gpu/bin/kvstream_gpu_bench --pipeline --chunks "$chunks" --device both --json | tee "$out/pipeline_bench.jsonl" ||
    status=$?
else
  echo "gpu_check: no $chunks/MANIFEST (run scripts/gpu_check.sh prepare where the model is)"
  status=1
fi
echo "gpu_check: exit $status (77: no CUDA device)"
exit "$status"
