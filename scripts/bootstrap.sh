#!/usr/bin/env bash
# Create/refresh the virtual environment: torch (CPU build) first, then the pinned requirements.
# Re-running is cheap: nothing is installed again unless a requirements file changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
VENV="${VENV:-.venv}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "==> creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.requirements.sha256"
want=$(cat requirements-torch.txt requirements.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing requirements (torch first, so nothing pulls a CUDA build)"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip wheel
  "$VENV/bin/python" -m pip install --quiet -r requirements-torch.txt
  "$VENV/bin/python" -m pip install --quiet -r requirements.txt
  echo "$want" > "$stamp"
fi
