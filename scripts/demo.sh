#!/usr/bin/env bash
# Builds kvstream (installing what is missing) and runs its main job: `kvstream demo`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
kvstream=${KVSTREAM_BUILD_DIR:-build}/bin/kvstream
source scripts/openblas_env.sh
kvstream_openblas_core "$kvstream"
exec "$kvstream" demo "$@"
