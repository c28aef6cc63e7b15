#!/usr/bin/env bash
# The whole test suite against real Postgres and Redis (and Chromium for page tests).
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
scripts/services.sh

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rlweb}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
export DATA_DIR="${DATA_DIR:-$PWD/var/test}"
export DB_CONN_MAX_AGE=0
export TOKENIZERS_PARALLELISM=false RAY_DISABLE_USAGE_STATS=1 RAY_USAGE_STATS_ENABLED=0 HF_HUB_OFFLINE=1
mkdir -p "$DATA_DIR"

set +e
.venv/bin/python -m pytest --durations=25 "$@"
status=$?
set -e
# pytest exits 5 when it collected no test: that is a failure of the suite, not a pass.
exit $status
