#!/usr/bin/env bash
# Builds kvstream (installing what is missing) and runs its main job: `kvstream demo`, streaming with the
# codec's predicted scheme. Its profile is learned the first time (from another text than the one streamed,
# about a minute) and cached; `build/bin/kvstream demo` alone runs without one.
#   KVSTREAM_PROFILE_CACHE  where the profile is kept (default ~/.cache/kvstream/profiles)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
kvstream=${KVSTREAM_BUILD_DIR:-build}/bin/kvstream
source scripts/openblas_env.sh
kvstream_openblas_core "$kvstream"
profiles=${KVSTREAM_PROFILE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kvstream/profiles}
profile=$profiles/smollm2-predicted.kvprofile
# A profile this build cannot read (another format version, a damaged file) is learned again.
if ! "$kvstream" inspect "$profile" >/dev/null 2>&1; then
  mkdir -p "$profiles"
  echo "learning SmolLM2's codec profile from /usr/share/common-licenses/GFDL-1.3 (once; kept in $profiles) ..."
  "$kvstream" profile --model smollm2 --predict --byte-predictors --contexts 8 --context-tokens 512 \
    --fine-fraction 0.12 --measure --text /usr/share/common-licenses/GFDL-1.3 --out "$profile.tmp" >/dev/null
  mv "$profile.tmp" "$profile"
fi
exec "$kvstream" demo --profile "$profile" --scheme predicted --fine-fraction 0.12 --decode-threads 2 "$@"
