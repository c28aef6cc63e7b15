#!/usr/bin/env bash
# Run the service with its demo on embedded defaults (SQLite, local broker; no Postgres/Redis
# needed): set up, create the demo admin, start the worker and the web server, launch a demo run.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh

export DATA_DIR="${DATA_DIR:-$PWD/var}"
export TOKENIZERS_PARALLELISM=false RAY_DISABLE_USAGE_STATS=1 RAY_USAGE_STATS_ENABLED=0 HF_HUB_OFFLINE=1
PORT="${PORT:-8000}"
ADMIN_USER="${RLWEB_ADMIN_USER:-admin}"
ADMIN_PASSWORD="${RLWEB_ADMIN_PASSWORD:-rlweb-demo}"
PY=.venv/bin/python
mkdir -p "$DATA_DIR/logs"

$PY manage.py migrate --noinput
$PY manage.py ensure_admin --username "$ADMIN_USER" --password "$ADMIN_PASSWORD"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

echo "==> starting the worker (log: $DATA_DIR/logs/worker.log)"
$PY -m celery -A rlweb worker -B --loglevel=INFO --concurrency=1 -s "$DATA_DIR/celerybeat-schedule" \
  >>"$DATA_DIR/logs/worker.log" 2>&1 &
pids+=($!)

$PY manage.py launch_demo --user "$ADMIN_USER"

echo "==> starting the web server"
$PY -m daphne -b 127.0.0.1 -p "$PORT" rlweb.asgi:application >>"$DATA_DIR/logs/web.log" 2>&1 &
pids+=($!)
for i in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  sleep 0.5
done

cat <<MSG

  rlweb is running:  http://127.0.0.1:$PORT/
  log in as:         $ADMIN_USER / $ADMIN_PASSWORD
  a demo run (tiny model learning 2-digit addition) is training: open Runs to watch its reward climb.
  logs:              $DATA_DIR/logs/   (Ctrl-C stops everything)

MSG
wait
