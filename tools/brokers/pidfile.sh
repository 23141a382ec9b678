# Sourced by the example-broker scripts (proton-c-broker.sh, proton-python-broker.sh): one
# background broker per port with its pid in $PIDFILE and its output in $LOGFILE, started by
# the caller's start(), which then calls wait_ready with a readiness test. Needs PIDFILE,
# LOGFILE, PORT, START_TIMEOUT and a log() function.

running_pid() {
    [ -s "$PIDFILE" ] || return 1
    local pid
    pid="$(cat "$PIDFILE")"
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

launch() {  # launch COMMAND...: in the background, output to $LOGFILE, pid to $PIDFILE
    : >"$LOGFILE"
    nohup "$@" >"$LOGFILE" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
}

wait_ready() {  # wait_ready TEST...: until TEST succeeds, the broker exits or START_TIMEOUT
    local pid deadline=$((SECONDS + START_TIMEOUT))
    pid="$(cat "$PIDFILE")"
    until "$@"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "broker exited:"; cat "$LOGFILE" >&2; rm -f "$PIDFILE"; exit 1
        fi
        if [ $SECONDS -ge $deadline ]; then
            log "not ready after ${START_TIMEOUT}s"; kill "$pid" 2>/dev/null || true; exit 1
        fi
        sleep 0.1
    done
    log "running: pid $pid on 127.0.0.1:$PORT"
}

stop() {
    local pid
    if pid="$(running_pid)"; then
        kill "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + 10))
        while kill -0 "$pid" 2>/dev/null; do
            if [ $SECONDS -ge $deadline ]; then kill -9 "$pid" 2>/dev/null || true; break; fi
            sleep 0.1
        done
        log "stopped (pid $pid)"
    else
        log "not running on $PORT"
    fi
    rm -f "$PIDFILE"
}

status() {
    if pid="$(running_pid)"; then
        echo "running pid=$pid port=$PORT"
    else
        echo "not running"
        exit 3
    fi
}
