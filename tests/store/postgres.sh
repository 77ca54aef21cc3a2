#!/usr/bin/env bash
# The PostgreSQL server of the tests, a CTest fixture (tests/store/CMakeLists.txt):
#   postgres.sh start DIR   a fresh cluster, listening on a unix socket only; its URL in DIR/url
#   postgres.sh stop DIR    stops that cluster and removes it
# Tests read DIR/url through tests/fixtures/postgres.h and skip without it. Without
# PostgreSQL's server binaries (apt-get install postgresql) `start` writes nothing and
# succeeds. The cluster lives in /tmp/attune-pg.XXXXXX: a unix socket's path must stay under
# ~107 bytes, and when run as root the server runs as the `postgres` user (initdb and
# postgres refuse root), which must reach its directory; DIR only holds the url and the
# cluster's location. `start` first removes a cluster an earlier run left in DIR.
set -euo pipefail

usage="usage: postgres.sh start|stop DIR"
cmd=${1:?$usage}
dir=${2:?$usage}

# Runs a server binary as the cluster's owner: ourselves, or `postgres` when we are root.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

stop() {
  local root bin
  root=$(cat "$dir/cluster" 2>/dev/null || true)
  bin=$(cat "$dir/bin" 2>/dev/null || true)
  rm -f "$dir/url"
  if [ -n "$root" ] && [ -d "$root/data" ] && [ -x "$bin/pg_ctl" ]; then
    as_owner "$bin/pg_ctl" -D "$root/data" -m fast -w -t 60 stop >/dev/null 2>&1 ||
      as_owner "$bin/pg_ctl" -D "$root/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  case "$root" in
    /tmp/attune-pg.*) rm -rf "$root" ;;  # never anything else, whatever the file says
  esac
  rm -f "$dir/cluster" "$dir/bin"
}

start() {
  stop
  local bin root
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ] || [ ! -x "$bin/pg_ctl" ]; then
    echo "postgres.sh: no PostgreSQL server (no /usr/lib/postgresql/*/bin/initdb): the tests that need one skip;" \
      "apt-get install postgresql (scripts/setup.sh) to run them"
    return 0
  fi
  if [ "$(id -u)" -eq 0 ] && ! id -u postgres >/dev/null 2>&1; then
    echo "postgres.sh: running as root, and there is no postgres user to run the server as" >&2
    return 1
  fi
  mkdir -p "$dir"
  root=$(mktemp -d /tmp/attune-pg.XXXXXX)
  echo "$root" >"$dir/cluster"
  echo "$bin" >"$dir/bin"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$root"; fi

  # trust: the socket is reachable only through a directory of the cluster's owner.
  # --no-sync and fsync off: a throwaway cluster, speed over durability.
  if ! as_owner "$bin/initdb" -D "$root/data" -A trust -U attune -E UTF8 --locale=C --no-sync \
    >"$root/initdb.log" 2>&1; then
    echo "postgres.sh: initdb failed:" >&2
    cat "$root/initdb.log" >&2
    return 1
  fi
  cat >>"$root/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$root'
port = 5432
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  if ! as_owner "$bin/pg_ctl" -D "$root/data" -l "$root/data/server.log" -w -t 60 start >/dev/null; then
    echo "postgres.sh: the server did not start:" >&2
    cat "$root/data/server.log" >&2 || true
    return 1
  fi
  echo "postgresql://attune@/postgres?host=$root&port=5432" >"$dir/url.tmp"
  mv "$dir/url.tmp" "$dir/url"
  echo "postgres.sh: PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') at $(cat "$dir/url")"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
