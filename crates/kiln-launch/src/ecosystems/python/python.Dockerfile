# kiln's Python base image: Debian's Python (bookworm 3.11 or trixie 3.13, chosen by the SUITE
# argument that kiln fills in from the repository's declared Python version) plus uv, which kiln
# uses to resolve dependencies as of a date (`uv pip install --exclude-newer`).
ARG SUITE=bookworm
FROM debian:${SUITE}

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    PIP_RETRIES=5 \
    UV_HTTP_RETRIES=5 \
    UV_HTTP_TIMEOUT=120

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-venv python3-pip python3-dev build-essential \
      git patch ca-certificates procps \
 && rm -rf /var/lib/apt/lists/*

# kiln:ca-bundle
# (An extra CA bundle is installed here, after apt has installed `ca-certificates`, which
# rewrites /etc/ssl/certs/ca-certificates.crt, and before the first HTTPS download below.)

# uv lives in its own venv so that it never shares packages with the project under test; only
# the `uv` binary is put on PATH (the venv's bin/ would shadow the system python3 and pip).
RUN python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --no-cache-dir uv==0.13.9 \
 && ln -s /opt/uv/bin/uv /usr/local/bin/uv \
 && uv --version
