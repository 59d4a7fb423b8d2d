#!/usr/bin/env bash
# Checks a kiln release's Harbor tasks (`harbor/` in the release directory, written when the
# export's `formats` lists "harbor") with Harbor itself: `harbor` 0.25.0 from PyPI, run in a
# `debian:trixie` container (Harbor needs Python 3.12 or newer; trixie has 3.13) with the
# engine's socket mounted, against the local Docker engine. scripts/harbor-check.py then
#   - compares the task directories with the tasks release.json lists (Harbor skips an invalid
#     task directory without a word, so a missing task would only show as one trial less);
#   - runs `harbor lint --ignore shared-verifier` on every task (a SWE-style verifier has to
#     share the agent's container: it judges the agent's edits);
#   - checks that each task's image is on the engine with the id its row recorded;
#   - runs the `oracle` agent (applies the gold patch) and the `nop` agent (changes nothing) on
#     every task: one trial per task, oracle reward 1 and nop reward 0 on every one, no error;
# and prints the counts. Exits 1 when any check fails, 2 on a usage error.
#
#   scripts/harbor-check.sh RELEASE_DIR [--work DIR] [--concurrency N]
#
# --work keeps Harbor's job directories (trial logs, verifier output) there; without it they go
# to a temporary directory that is removed at the end. The trials run without network: Harbor's
# own `no-network` mode needs images from Docker Hub, so a compose overlay gives the task
# container `network_mode: none` (and `init: true`, without which each trial waits 10 s for
# `sleep infinity` to ignore SIGTERM). The same overlay labels the trial containers, and every
# container of this check is removed at the end, whatever happened.
#
# Everything is installed in the container by this script: python3, docker-cli and
# docker-compose from Debian, Harbor from PyPI, or from a wheelhouse when
# $KILN_HARBOR_WHEELHOUSE (default /var/cache/harbor-pip/wheelhouse) holds harbor 0.25.0's
# wheels (`pip download harbor==0.25.0 -d DIR` on Python 3.13 makes one).
set -euo pipefail
cd "$(dirname "$0")/.."

HARBOR_VERSION=0.25.0
IMAGE=${KILN_HARBOR_IMAGE:-debian:trixie}
WHEELHOUSE=${KILN_HARBOR_WHEELHOUSE:-/var/cache/harbor-pip/wheelhouse}

log() { echo "harbor-check: $*" >&2; }
usage() {
    echo "usage: scripts/harbor-check.sh RELEASE_DIR [--work DIR] [--concurrency N]" >&2
    exit 2
}

release=
work=
concurrency=2
while (($#)); do
    case $1 in
    --work) work=${2:?--work needs a directory}; shift 2 ;;
    --concurrency) concurrency=${2:?--concurrency needs a number}; shift 2 ;;
    -h | --help) usage ;;
    -*) usage ;;
    *) [[ -z $release ]] || usage; release=$1; shift ;;
    esac
done
[[ -n $release ]] || usage
[[ $concurrency =~ ^[1-9][0-9]*$ ]] || usage
release=$(realpath "$release")
if [[ ! -f $release/release.json || ! -d $release/harbor ]]; then
    log "$release has no release.json and harbor/ directory: export it with formats = [\"parquet\", \"harbor\"]"
    exit 1
fi
docker info >/dev/null 2>&1 || { log "no Docker engine answers"; exit 1; }

started=$(date +%s)
keep_work=1
if [[ -z $work ]]; then
    work=$(mktemp -d -t kiln-harbor-check.XXXXXX)
    keep_work=
fi
mkdir -p "$work"
work=$(realpath "$work")
# One name for the runner and the label of every trial container, so that the clean-up finds
# exactly this check's containers on an engine others share.
check_id=kiln-harbor-check-$$-$(date +%s%N | tail -c 7)
cleanup() {
    local left
    docker rm -f "$check_id" >/dev/null 2>&1 || true
    left=$(docker ps -aq --filter "label=kiln.harbor-check=$check_id" 2>/dev/null || true)
    if [[ -n $left ]]; then
        # shellcheck disable=SC2086
        docker rm -f $left >/dev/null 2>&1 || true
    fi
    if [[ -z $keep_work ]]; then
        rm -rf "$work"
    fi
}
trap cleanup EXIT

socket=/var/run/docker.sock
if [[ ${DOCKER_HOST:-} == unix://* ]]; then
    socket=${DOCKER_HOST#unix://}
fi
mounts=(
    -v "$socket:/var/run/docker.sock"
    -v "$release/harbor:/check/tasks:ro"
    -v "$release/release.json:/check/release.json:ro"
    -v "$PWD/scripts:/check/scripts:ro"
    -v "$work:/check/work"
)
environment=(-e HARBOR_TELEMETRY=0 -e LITELLM_LOCAL_MODEL_COST_MAP=True -e "HARBOR_VERSION=$HARBOR_VERSION")
if [[ -f $WHEELHOUSE/harbor-$HARBOR_VERSION-py3-none-any.whl ]]; then
    mounts+=(-v "$WHEELHOUSE:/check/wheelhouse:ro")
fi
# A TLS-inspecting proxy's CA, where the host trusts one: pip inside must trust it too.
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    mounts+=(-v /etc/ssl/certs/ca-certificates.crt:/check/host-ca.crt:ro)
    environment+=(-e PIP_CERT=/check/host-ca.crt)
fi
for proxy in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    if [[ -n ${!proxy:-} ]]; then
        environment+=(-e "$proxy=${!proxy}")
    fi
done

log "installing Harbor $HARBOR_VERSION in a $IMAGE container"
docker run -d --name "$check_id" --label "kiln.harbor-check=$check_id" \
    "${mounts[@]}" "${environment[@]}" --entrypoint sleep "$IMAGE" infinity >/dev/null
setup_log=$work/setup.log
if ! docker exec -i "$check_id" bash -s >"$setup_log" 2>&1 <<'SETUP'; then
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
    apt-get update -q && break
    sleep $((attempt * 5))
done
apt-get install -y -q --no-install-recommends python3 python3-venv ca-certificates docker-cli docker-compose
python3 -m venv /opt/harbor
if [[ -d /check/wheelhouse ]] &&
    /opt/harbor/bin/pip install -q --no-index --find-links /check/wheelhouse "harbor==$HARBOR_VERSION"; then
    echo "installed harbor from the wheelhouse"
else
    /opt/harbor/bin/pip install -q "harbor==$HARBOR_VERSION"
fi
/opt/harbor/bin/harbor --version
SETUP
    log "installing Harbor failed; the end of $setup_log:"
    tail -n 30 "$setup_log" >&2
    exit 1
fi
setup_seconds=$(($(date +%s) - started))
log "Harbor $(docker exec "$check_id" /opt/harbor/bin/harbor --version) ready in ${setup_seconds} s"

status=0
docker exec "$check_id" /opt/harbor/bin/python /check/scripts/harbor-check.py \
    --tasks /check/tasks --release-json /check/release.json --work /check/work \
    --concurrency "$concurrency" --label "kiln.harbor-check=$check_id" || status=$?
echo "harbor-check: $( ((status == 0)) && echo passed || echo FAILED) in $(($(date +%s) - started)) s (Harbor's installation ${setup_seconds} s)"
exit "$status"
