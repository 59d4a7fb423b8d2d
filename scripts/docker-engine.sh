#!/usr/bin/env bash
# Starts a Docker engine on a Debian machine that may have none, or stops the one it started.
#
#   scripts/docker-engine.sh start   install docker.io if dockerd is missing, start dockerd
#                                    unless an engine already answers, wait until it does
#   scripts/docker-engine.sh stop    stop the dockerd that `start` started (and only that one)
#
# Runs as root (CI: a fresh Debian 12 machine without systemd). Idempotent: `start` with an
# engine up and `stop` with nothing started do nothing.
#
# Environment:
#   KILN_DOCKERD_STATE  directory of the pid file (default: .kiln-dockerd/ in this checkout, so
#                       that a `stop` from another checkout never stops this one's engine;
#                       scripts/test.sh gives each of its runs a directory of its own)
#   KILN_DOCKERD_LOG    dockerd's log (default /var/log/kiln-dockerd.log)
#   KILN_DOCKERD_WAIT   seconds to wait for the engine (default 60)
#   KILN_DOCKERD_ARGS   extra dockerd arguments (e.g. another -H/--data-root/--exec-root, to try
#                       this script beside a running engine). Never `--bridge none` on a host
#                       where another engine runs: dockerd then deletes the shared docker0.
#   DOCKER_HOST         as for the docker CLI, used by the readiness check
set -euo pipefail

STATE_DIR=${KILN_DOCKERD_STATE:-$(cd "$(dirname "$0")/.." && pwd)/.kiln-dockerd}
PID_FILE=$STATE_DIR/dockerd.pid
LOG=${KILN_DOCKERD_LOG:-/var/log/kiln-dockerd.log}
WAIT=${KILN_DOCKERD_WAIT:-60}

log() { echo "docker-engine: $*" >&2; }

now_ms() { date +%s%3N; }

# Whether $1 is a live dockerd process: a pid file can outlive its process, pids are reused, and
# in a container whose pid 1 does not reap, an exited daemon stays behind as a zombie.
is_dockerd() {
    local stat
    [[ -n ${1:-} ]] || return 1
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    [[ $stat == "$1 (dockerd) "* && $stat != "$1 (dockerd) Z "* ]]
}

engine_answers() { docker info >/dev/null 2>&1; }

start() {
    local begin pid deadline
    begin=$(now_ms)
    if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
        log "installing docker.io"
        apt-get update
        # Recommended packages stay out, but apparmor: on a host whose kernel enforces
        # AppArmor, dockerd without apparmor_parser cannot load the profile every container
        # runs under.
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io apparmor
    fi
    pid=$(cat "$PID_FILE" 2>/dev/null || true)
    # A dockerd of another checkout that is still starting, or already shutting down, does not
    # answer, but holds the default pid file: a second one started now would exit on that file.
    # Wait until it answers (then it is the engine) or is gone.
    local other
    other=$(cat /var/run/docker.pid 2>/dev/null || true)
    if [[ -z ${KILN_DOCKERD_ARGS:-} && $other != "$pid" ]] && is_dockerd "$other" && ! engine_answers; then
        log "dockerd $other, not started here, does not answer; waiting for it to answer or exit"
        deadline=$(($(date +%s) + WAIT))
        while is_dockerd "$other" && ! engine_answers; do
            if (($(date +%s) >= deadline)); then
                log "dockerd $other neither answered nor exited in ${WAIT}s"
                return 1
            fi
            sleep 0.2
        done
    fi
    if engine_answers; then
        log "an engine already answers; nothing to start"
        return 0
    fi
    mkdir -p "$STATE_DIR" "$(dirname "$LOG")"
    if is_dockerd "$pid"; then
        # Started by an earlier call and still starting up: wait for it rather than start a
        # second daemon on the same data root.
        log "dockerd $pid (started earlier) is not answering yet; waiting for it"
    else
        # Detached from this shell and its terminal, all three streams redirected, so that CI
        # steps that wait for their output to close do not wait for the daemon. Without job
        # control a background job is never a process-group leader, so setsid execs dockerd in
        # place rather than forking, and $! is dockerd's own pid.
        # shellcheck disable=SC2086  # KILN_DOCKERD_ARGS is a list of words
        setsid dockerd ${KILN_DOCKERD_ARGS:-} >"$LOG" 2>&1 </dev/null &
        pid=$!
        echo "$pid" >"$PID_FILE"
        log "started dockerd (pid $pid, log $LOG)"
    fi
    deadline=$(($(date +%s) + WAIT))
    until engine_answers; do
        if ! is_dockerd "$pid"; then
            log "dockerd exited; the end of $LOG:"
            tail -n 30 "$LOG" >&2 || true
            rm -f "$PID_FILE"
            return 1
        fi
        if (($(date +%s) >= deadline)); then
            log "no answer from the engine after ${WAIT}s; the end of $LOG:"
            tail -n 30 "$LOG" >&2 || true
            return 1
        fi
        sleep 0.2
    done
    local took=$(($(now_ms) - begin))
    log "engine up in $((took / 1000)).$(printf '%03d' $((took % 1000)))s"
}

stop() {
    local pid waited=0
    pid=$(cat "$PID_FILE" 2>/dev/null || true)
    if [[ -z $pid ]]; then
        log "no dockerd started by this script; nothing to stop"
        return 0
    fi
    if ! is_dockerd "$pid"; then
        log "dockerd $pid is gone already"
        rm -f "$PID_FILE"
        return 0
    fi
    kill -TERM "$pid"
    # dockerd stops its containers (10 s grace each, in parallel) and its containerd first.
    while is_dockerd "$pid"; do
        if ((waited == 300)); then # 30 s
            log "dockerd $pid ignored SIGTERM for 30s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    rm -f "$PID_FILE"
    log "stopped dockerd $pid"
}

case ${1:-} in
start) start ;;
stop) stop ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
