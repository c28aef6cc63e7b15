#!/usr/bin/env bash
# Make sure Postgres, Redis and Chromium are there for the test suite: start them if installed
# but stopped; install them with apt when we are root and they are missing.
set -euo pipefail

as_root() { [ "$(id -u)" = 0 ]; }
apt_install() {
  if as_root && command -v apt-get >/dev/null; then
    echo "==> installing $* with apt"
    if [ -z "${_APT_UPDATED:-}" ]; then apt-get update -qq; _APT_UPDATED=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "!! $* missing and cannot be installed (not root or no apt)" >&2; return 1
  fi
}

pg_host=127.0.0.1; pg_port=5432
if ! pg_isready -q -h "$pg_host" -p "$pg_port" 2>/dev/null; then
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  if command -v pg_ctlcluster >/dev/null; then
    ver=$(ls /etc/postgresql | sort -V | tail -1)
    echo "==> starting PostgreSQL $ver"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
    # A fresh apt install: trust local TCP connections for the test user.
    for i in $(seq 1 30); do pg_isready -q -h "$pg_host" -p "$pg_port" && break; sleep 1; done
  fi
fi
pg_isready -h "$pg_host" -p "$pg_port" >/dev/null || { echo "!! PostgreSQL is not answering on $pg_host:$pg_port" >&2; exit 1; }

if ! (command -v redis-cli >/dev/null && redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1); then
  command -v redis-server >/dev/null || apt_install redis-server
  echo "==> starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for i in $(seq 1 20); do redis-cli ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { echo "!! Redis is not answering on 127.0.0.1:6379" >&2; exit 1; }

command -v chromium >/dev/null || apt_install chromium
