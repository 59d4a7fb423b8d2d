# kiln's Go image: Debian's golang-go (bookworm 1.19 or trixie 1.24, chosen by the SUITE
# argument that kiln fills in from the go.mod `go` directive).
ARG SUITE=bookworm
FROM debian:${SUITE}

# GOTOOLCHAIN=local: a newer `go`/`toolchain` line must fail visibly, not download a toolchain
# (Go 1.21+ would otherwise fetch one from the module proxy).
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    GOPATH=/opt/go \
    GOCACHE=/opt/go-cache \
    GOTOOLCHAIN=local \
    PATH=/opt/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      golang-go build-essential git patch ca-certificates procps \
 && rm -rf /var/lib/apt/lists/*

# kiln:ca-bundle
# (An extra CA bundle is installed here, after apt has installed `ca-certificates`; Go reads the
# system bundle and SSL_CERT_FILE.)

# Go 1.20+ ships no compiled standard library; compiling it here, once, saves every launch
# about a minute of its first `go test`.
RUN go version && go build std
