#!/usr/bin/env bash
# Start a throw-away PostgreSQL server for the storage tests and print its SQLAlchemy URL.
# Installs the Debian package when the server binaries are missing. Prints nothing (and exits 0)
# when no server can be started, so the PostgreSQL tests skip instead of failing the build.
set -uo pipefail
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$PGBIN" ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
        >/dev/null 2>&1
    PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
fi
[ -n "$PGBIN" ] || exit 0
DIR=$(mktemp -d /tmp/headstart-pg.XXXXXX)
# A free port, so a server left running by an earlier run cannot make this one skip.
PORT=${HEADSTART_PG_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432)}
RUN=()
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd -r postgres
    chown postgres "$DIR"
    RUN=(runuser -u postgres --)
fi
"${RUN[@]}" "$PGBIN/initdb" -D "$DIR/data" -U headstart --auth=trust >/dev/null 2>&1 || exit 0
"${RUN[@]}" "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w \
    -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null 2>&1 || exit 0
# How to stop it: .ci/run calls this script on exit.
printf '#!/usr/bin/env bash\n%s -D %q stop -m fast >/dev/null 2>&1\n' \
    "${RUN[*]} $PGBIN/pg_ctl" "$DIR/data" > "$DIR/stop"
# How to restart it (the storage tests check that a study carries on across a server restart).
# - One restart at a time (flock on a file next to the data): two pg_ctl calls that overlap start
#   two postmasters, and the loser fails with 'lock file "postmaster.pid" already exists' (seen in
#   CI). pg_ctl does not get the lock's descriptor (9>&-), or the postmaster would hold it forever.
# - timeout bounds each attempt and signals runuser and pg_ctl together (its process group), never
#   the postmaster (pg_ctl starts that in a session of its own): no pg_ctl outlives the script, as
#   one did when a caller's timeout killed only the script.
# - A failed attempt is retried; the server being up afterwards counts as restarted.
PGCTL="${RUN[*]} $PGBIN/pg_ctl -D $(printf %q "$DIR/data")"
cat > "$DIR/restart" <<EOF_RESTART
#!/usr/bin/env bash
exec 9>$(printf %q "$DIR/restart.lock")
flock 9
for attempt in 1 2 3; do
    timeout -k 5 25 $PGCTL -l $(printf %q "$DIR/log") -w restart -m fast >/dev/null 2>&1 9>&- && exit 0
    sleep 1
    $PGCTL status >/dev/null 2>&1 9>&- && exit 0
done
exit 1
EOF_RESTART
chmod +x "$DIR/stop" "$DIR/restart"
[ -n "${HEADSTART_PG_STOP_FILE:-}" ] && echo "$DIR/stop" > "$HEADSTART_PG_STOP_FILE"
echo "postgresql+psycopg://headstart@127.0.0.1:$PORT/postgres"
