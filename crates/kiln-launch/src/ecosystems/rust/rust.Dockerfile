# kiln's Rust image: Debian trixie's rustc and cargo (1.85), with the C toolchain, the build
# tools that -sys crates run (cmake, libclang for bindgen, protoc) and the -dev packages the most
# common ones link against, and Python for kiln's date cut-off of Cargo resolution
# (cargo-cutoff.py).
FROM debian:trixie

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    CARGO_HOME=/opt/cargo \
    CARGO_TERM_COLOR=never \
    CARGO_NET_GIT_FETCH_WITH_CLI=true \
    CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback \
    PATH=/opt/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      rustc cargo build-essential pkg-config libssl-dev zlib1g-dev \
      cmake clang libclang-dev protobuf-compiler libsqlite3-dev libfontconfig-dev \
      git patch ca-certificates procps python3 \
 && rm -rf /var/lib/apt/lists/*

# kiln:ca-bundle
# (An extra CA bundle is installed here, after apt has installed `ca-certificates`; cargo reads
# it through CARGO_HTTP_CAINFO.)

COPY cargo-cutoff.py /usr/local/lib/kiln/cargo-cutoff.py
RUN mkdir -p /opt/cargo && rustc --version && cargo --version \
 && python3 /usr/local/lib/kiln/cargo-cutoff.py --self-test
