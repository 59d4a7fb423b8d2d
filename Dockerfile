# The kiln image the cluster jobs run (`kiln deploy k8s --image`, or a Slurm node without a
# Rust toolchain): the `kiln` binary and what it calls on its host (git for clones, bash,
# ca-certificates), on Debian 12. kiln talks to a container engine through DOCKER_HOST (a
# Docker-in-Docker or rootless Podman sidecar); the image holds no engine.
#
#   docker build -t REGISTRY/kiln:TAG .
#
# RUST_IMAGE is any Debian 12 image with Rust 1.95 or later and cargo (the official
# rust:1.95-bookworm by default); BASE_IMAGE any Debian 12 image: where no registry answers,
# scripts/base-images.sh makes debian:bookworm with debootstrap, and a builder is that image
# with a Rust toolchain copied in.
ARG RUST_IMAGE=rust:1.95-bookworm
ARG BASE_IMAGE=debian:bookworm

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
# Only the binary; release profile from the workspace's Cargo.toml.
RUN cargo build --release --locked -p kiln-cli --bin kiln \
    && install -m 0755 target/release/kiln /usr/local/bin/kiln \
    && rm -rf target

FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates git \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/local/bin/kiln /usr/local/bin/kiln
# The shared dataset root is mounted here by the jobs `kiln deploy` writes (`--mount`).
WORKDIR /data
ENTRYPOINT ["kiln"]
CMD ["--help"]
