#!/usr/bin/env bash
# Measures what the launch agent's snapshots and rollbacks cost, against a copy of the
# directories a build changes, taken inside the container (the alternative that needs no engine
# support: overlay2 on ext4 has no reflink, so a copy is a full copy-up).
#
#   scripts/bench-snapshot.sh [IMAGE]
#
# For each size of change (nothing, 10 MB, 100 MB, 400 MB written under /opt/build), in a
# container of IMAGE (default debian:bookworm):
#   commit    `docker commit` of the container (what the agent does before a command that may
#             change the container, when something changed since the last snapshot)
#   rollback  `docker create` + `docker start` of a container from the snapshot, and the old one
#             removed (what the agent does after such a command fails)
#   copy      `cp -a /opt/build /opt/build.snap` inside the container (the in-container snapshot)
#   restore   `rm -rf /opt/build && cp -a /opt/build.snap /opt/build` (its rollback)
# and the ratio of commit+rollback to copy+restore. Each figure is the median of 3 runs.
#
# Measured here (2 cores, ext4, overlay2; 2026-12): commit 0.08/0.13/0.50/1.79 s, rollback
# 0.35/0.35/0.52/1.08 s, copy+restore 0.14/0.14/0.22/0.77 s: the copy is 3-5x cheaper, but only
# for the directories it names, while an agent's `apt-get`, `pip` or `make install` writes
# anywhere in the file system. So the agent commits the whole container, and only when it
# changed since the last snapshot (a run of failed installs costs one commit, reading costs
# none).
#
# Needs: a running Docker engine with IMAGE present.
set -euo pipefail
IMAGE=${1:-debian:bookworm}
SIZES=(0 10 100 400)
RUNS=3

now() { date +%s.%N; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cleanup() {
  docker rm -f "${CONTAINERS[@]}" >/dev/null 2>&1 || true
  docker rmi -f kiln-bench/snapshot:latest >/dev/null 2>&1 || true
}
CONTAINERS=()
trap cleanup EXIT

printf '%-8s %10s %10s %10s %10s %8s\n' "MB" "commit s" "rollback s" "copy s" "restore s" "ratio"
for mb in "${SIZES[@]}"; do
  commits=(); rollbacks=(); copies=(); restores=()
  for _ in $(seq "$RUNS"); do
    id=$(docker run -d "$IMAGE" sleep 600)
    CONTAINERS+=("$id")
    docker exec "$id" sh -c "mkdir -p /opt/build && \
      for i in \$(seq $mb); do head -c 1048576 /dev/urandom > /opt/build/f\$i; done"

    t0=$(now); docker commit "$id" kiln-bench/snapshot:latest >/dev/null; t1=$(now)
    commits+=("$(echo "$t1 - $t0" | bc)")

    t0=$(now)
    fresh=$(docker create kiln-bench/snapshot:latest sleep 600)
    docker start "$fresh" >/dev/null
    docker rm -f "$id" >/dev/null
    t1=$(now)
    CONTAINERS+=("$fresh")
    rollbacks+=("$(echo "$t1 - $t0" | bc)")

    t0=$(now); docker exec "$fresh" cp -a /opt/build /opt/build.snap; t1=$(now)
    copies+=("$(echo "$t1 - $t0" | bc)")
    t0=$(now); docker exec "$fresh" sh -c 'rm -rf /opt/build && cp -a /opt/build.snap /opt/build'; t1=$(now)
    restores+=("$(echo "$t1 - $t0" | bc)")

    docker rm -f "$fresh" >/dev/null
    docker rmi -f kiln-bench/snapshot:latest >/dev/null
  done
  c=$(median "${commits[@]}"); r=$(median "${rollbacks[@]}")
  p=$(median "${copies[@]}"); s=$(median "${restores[@]}")
  ratio=$(echo "scale=2; ($c + $r) / ($p + $s + 0.001)" | bc)
  printf '%-8s %10.2f %10.2f %10.2f %10.2f %8s\n' "$mb" "$c" "$r" "$p" "$s" "$ratio"
done
