# kiln's Node image: Debian's nodejs and npm (bookworm: Node 18, trixie: Node 20, chosen by the
# SUITE argument that kiln fills in from engines.node, .nvmrc or .node-version), plus yarn
# classic, which also runs a repository's own yarn 2+ release through its `yarnPath`.
ARG SUITE=bookworm
FROM debian:${SUITE}

ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    CI=true \
    NO_COLOR=1 \
    FORCE_COLOR=0 \
    npm_config_update_notifier=false \
    npm_config_fetch_retries=5 \
    npm_config_fetch_retry_mintimeout=20000 \
    npm_config_fetch_retry_maxtimeout=120000 \
    npm_config_fund=false \
    npm_config_audit=false

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      nodejs npm build-essential python3 git patch ca-certificates procps \
 && rm -rf /var/lib/apt/lists/*

# kiln:ca-bundle
# (An extra CA bundle is installed here, after apt has installed `ca-certificates` and before npm
# downloads anything; npm, running on node, reads it through NODE_EXTRA_CA_CERTS.)

RUN npm install -g yarn@1.22.22 \
 && node --version && npm --version && yarn --version
