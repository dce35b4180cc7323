# Sourced by the scripts that run kvstream (demo.sh, test.sh, .ci/run): kvstream_openblas_core BINARY.
# Debian 12's OpenBLAS (0.3.21) does not know CPUs newer than itself (Intel's Emerald Rapids, model 0xCF,
# for one) and falls back to its Prescott (SSE3) kernels, with which the model's prefill ran 2.2x slower
# on such a host; this names the kernels of an older CPU with the same vector units instead. OpenBLAS
# reads OPENBLAS_CORETYPE when it is loaded, so it must be set before kvstream starts; a value already set
# wins. BINARY is any program linked with OpenBLAS (it is run with --help to see which kernels it picks).
kvstream_openblas_core() {
  [ -z "${OPENBLAS_CORETYPE:-}" ] || return 0
  local core
  core=$(OPENBLAS_VERBOSE=2 "$1" --help 2>&1 | sed -n 's/^Core: //p' | head -n 1) || true
  [ "$core" = "Prescott" ] || return 0
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  else
    return 0
  fi
  echo "openblas: this OpenBLAS does not know the CPU (it picked Prescott); OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" >&2
}
