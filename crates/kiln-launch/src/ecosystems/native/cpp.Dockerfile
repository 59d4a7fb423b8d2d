# kiln's C/C++ image: a Debian suite's GCC, CMake, Ninja, Meson and autotools, with the test
# frameworks most projects expect from the system (GoogleTest, Catch2, doctest). kiln fills in
# SUITE from the base commit's era (bullseye: GCC 10, bookworm: GCC 12).
ARG SUITE=bookworm
FROM debian:${SUITE}

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    CTEST_OUTPUT_ON_FAILURE=1

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build meson pkg-config \
      autoconf automake libtool autoconf-archive \
      libgtest-dev libgmock-dev catch2 doctest-dev \
      git patch ca-certificates procps \
 && rm -rf /var/lib/apt/lists/*

# kiln:ca-bundle
# (An extra CA bundle is installed here, after apt has installed `ca-certificates`; plans that
# need -dev packages install them with apt over HTTP.)

RUN cmake --version && meson --version
