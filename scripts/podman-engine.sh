#!/usr/bin/env bash
# Rootless Podman's Docker-compatible API, for running kiln where no Docker daemon is allowed
# (and for the test that runs the demo on it): Debian's podman (installed when missing) run by an
# unprivileged user, its service on a unix socket, its storage the kernel's rootless overlay, and
# the Debian base image copied in from the Docker engine (no registry can be pulled from here).
#
#   scripts/podman-engine.sh start   # prints the DOCKER_HOST value (unix:///run/user/UID/...)
#   scripts/podman-engine.sh stop    # stops the service and empties the user's storage
#
# KILN_PODMAN_USER names the user (default kiln-podman). kiln runs every container with an init
# process, which Podman takes from catatonit.
set -euo pipefail

log() { echo "podman-engine: $*" >&2; }

user=${KILN_PODMAN_USER:-kiln-podman}
action=${1:-}

as_user() {
    local uid
    uid=$(id -u "$user")
    su -s /bin/bash "$user" -c "cd ~ && export XDG_RUNTIME_DIR=/run/user/$uid && $1"
}

stop() {
    id "$user" >/dev/null 2>&1 || return 0
    local uid pidfile
    uid=$(id -u "$user")
    pidfile=/run/user/$uid/kiln-podman.pid
    if [[ -s $pidfile ]]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    # What the containers and images held goes with them: the storage is the test's.
    as_user "podman system reset --force" >/dev/null 2>&1 || true
    pkill -u "$user" 2>/dev/null || true
}

case $action in
stop)
    stop
    exit 0
    ;;
start) ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac

need=()
command -v podman >/dev/null || need+=(podman)
[[ -x /usr/libexec/podman/catatonit ]] || need+=(catatonit)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
if ((${#need[@]})); then
    log "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
if ! id "$user" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/bash "$user"
fi
# Rootless containers map their users onto the user's subordinate ids.
if ! grep -q "^$user:" /etc/subuid; then
    usermod --add-subuids 300000-365535 --add-subgids 300000-365535 "$user"
fi
# slirp4netns, which gives rootless containers their network, opens /dev/net/tun as the user:
# udev makes it 0666 on a booted Debian, but a minimal machine or a container may leave it
# root's alone (seen: `open("/dev/net/tun"): Permission denied`, HTTP 500 on every start).
if [[ ! -c /dev/net/tun ]]; then
    mkdir -p /dev/net
    mknod -m 0666 /dev/net/tun c 10 200
fi
if ! as_user "test -r /dev/net/tun -a -w /dev/net/tun"; then
    log "making /dev/net/tun usable by $user (mode 0666, as udev sets it)"
    chmod 0666 /dev/net/tun
fi
uid=$(id -u "$user")
runtime=/run/user/$uid
mkdir -p "$runtime"
chown "$user:" "$runtime"
chmod 700 "$runtime"
# Every key of the storage table: a file that sets the driver alone leaves `runroot` unset, and
# Podman 4.3's commit then fails ("runroot must be set").
as_user "mkdir -p ~/.config/containers && printf '[storage]\ndriver = \"overlay\"\nrunroot = \"$runtime/containers\"\ngraphroot = \"%s/.local/share/containers/storage\"\n' ~ > ~/.config/containers/storage.conf"

stop
socket=$runtime/podman/podman.sock
as_user "mkdir -p $runtime/podman && rm -f $socket && (setsid podman system service --time=0 unix://$socket </dev/null >$runtime/kiln-podman.log 2>&1 & echo \$! > $runtime/kiln-podman.pid)"
for _ in $(seq 100); do
    if curl -sf --unix-socket "$socket" http://podman/_ping >/dev/null 2>&1; then
        break
    fi
    sleep 0.2
done
if ! curl -sf --unix-socket "$socket" http://podman/_ping >/dev/null 2>&1; then
    log "the service did not answer on $socket:"
    tail -n 20 "$runtime/kiln-podman.log" >&2 || true
    exit 1
fi

# The base image, from the Docker engine (scripts/base-images.sh makes it there).
if ! as_user "podman image exists debian:bookworm"; then
    if ! docker image inspect debian:bookworm >/dev/null 2>&1; then
        bash "$(dirname "$0")/base-images.sh" >&2
    fi
    docker save debian:bookworm | as_user "podman load" >/dev/null
fi
log "rootless Podman $(podman --version | awk '{print $3}') answers on $socket (user $user)"
echo "unix://$socket"
