#!/usr/bin/env bash
# Makes sure the Debian base images kiln's Dockerfiles start from exist in the local engine.
#
#   scripts/base-images.sh [SUITE...]     (default: bookworm)
#
# For each suite, `debian:<suite>` is pulled where a registry is reachable; where none is, it
# is built from Debian packages with debootstrap and `docker import`. Idempotent: images that
# exist are left alone. Runs as root on Debian (CI: after scripts/docker-engine.sh start).
#
# Environment:
#   KILN_DEBIAN_MIRROR  mirror for debootstrap (default http://deb.debian.org/debian)
#   KILN_PULL_TIMEOUT   seconds to give `docker pull` (default 120)
set -euo pipefail

MIRROR=${KILN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PULL_TIMEOUT=${KILN_PULL_TIMEOUT:-120}
ROOTFS=""

log() { echo "base-images: $*" >&2; }

# Removes a debootstrap directory. A failed debootstrap can leave /proc and /sys mounted inside
# it, and `rm -rf` through those would reach the host's; unmount first and stay on one file
# system.
cleanup() {
    [[ -n $ROOTFS && -d $ROOTFS ]] || return 0
    local mounts
    mounts=$(awk -v root="$ROOTFS" 'index($2, root "/") == 1 { print $2 }' /proc/mounts | sort -r)
    for m in $mounts; do umount -l "$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$ROOTFS"
    ROOTFS=""
}
trap cleanup EXIT

ensure() {
    local suite=$1 image=debian:$1 begin
    if docker image inspect "$image" >/dev/null 2>&1; then
        log "$image present"
        return 0
    fi
    begin=$(date +%s)
    if timeout "$PULL_TIMEOUT" docker pull "$image"; then
        log "$image pulled in $(($(date +%s) - begin))s"
        return 0
    fi
    log "cannot pull $image; building it with debootstrap from $MIRROR"
    if ! command -v debootstrap >/dev/null; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap debian-archive-keyring
    fi
    ROOTFS=$(mktemp -d /var/tmp/kiln-rootfs-"$suite".XXXXXX)
    debootstrap --variant=minbase "$suite" "$ROOTFS" "$MIRROR"
    # Downloaded packages and indexes only make the image bigger; images run apt-get update.
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
    tar -C "$ROOTFS" --numeric-owner -c . |
        docker import --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' - "$image"
    cleanup
    log "$image built in $(($(date +%s) - begin))s"
}

if (($# == 0)); then set -- bookworm; fi
for suite in "$@"; do
    ensure "$suite"
done
