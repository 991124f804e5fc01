#!/bin/sh
# Entrypoint of the PostgreSQL stand-in (postgres.Containerfile beside this file). As root it
# hands the data directory to the postgres user and runs itself again as that user; as
# postgres it initialises an empty data directory once (superuser POSTGRES_USER with
# POSTGRES_PASSWORD, database POSTGRES_DB, scram-sha-256 logins from any address, trust on the
# local socket only) and then becomes the server, as PID 1, with any arguments given.
set -eu
: "${POSTGRES_PASSWORD:?is not set: the stand-in, like the official image, needs a password}"
user=${POSTGRES_USER:-postgres}
database=${POSTGRES_DB:-$user}

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA"
  chown postgres:postgres "$PGDATA"
  chmod 0700 "$PGDATA"
  install -d -o postgres -g postgres -m 2775 /run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  password_file=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$password_file"
  initdb -D "$PGDATA" -U "$user" --pwfile="$password_file" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$password_file"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ "$database" != postgres ]; then
    # On the socket only, so nobody connects before the database exists.
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
    echo 'CREATE DATABASE :"database";' | psql -q -v ON_ERROR_STOP=1 -v database="$database" -U "$user" -d postgres
    pg_ctl -D "$PGDATA" -w -m fast stop >/dev/null
  fi
  echo "postgres-entrypoint: initialised $PGDATA (user $user, database $database)"
fi
exec postgres -D "$PGDATA" "$@"
