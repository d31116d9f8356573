# Reckon's container image: ONE image holding both binaries, /usr/local/bin/server and
# /usr/local/bin/reactor, on an empty base (scratch) plus CA certificates and a passwd entry for
# the non-root user it runs as (uid 65532).
#
# Why one image and not one per binary: a deployment must run `server migrate up`, the servers and
# the reactors of the same release (a reactor refuses a schema its migrations do not match), and
# one image tag makes that impossible to get wrong; it is one build, one scan, one thing to pin;
# and the two binaries share most of their code, so two images would not be much smaller than one.
# It is small anyway: static binaries and nothing else (no shell, no package manager).
#
#   docker build -t reckon .                      # needs BuildKit (Docker 23+ default; older: DOCKER_BUILDKIT=1)
#   docker run --rm reckon server version
#   docker run --rm -e DATABASE_URL=… reckon server migrate up
#   docker run -d -p 8080:8080 -e DATABASE_URL=… reckon              # the server (CMD)
#   docker run -d -e DATABASE_URL=… reckon reactor
#
# Target `demo` is the same image plus /usr/local/bin/demo, the `make run` tour with its fake bank
# (deploy/compose.yaml, profile "demo"); the default target is the runtime image, without it.
#
# Building without a registry (CI on a machine that reaches none; scripts/compose-test): the
# binaries are built on the host, static, into bin/docker (same layout as stage binaries-build),
# and `--build-arg RECKON_BINARIES=host` takes them from there. BuildKit skips the stages a target
# does not need, so neither golang:… is pulled nor Go run in a container, and scratch needs no
# pull. (A BuildKit named context, `--build-context binaries=DIR`, would override stage
# `binaries` the same way, but it needs buildx and Dockerfile frontend 1.4+, which Debian 12's
# docker.io 20.10 does not have; the build argument works with both.) No `# syntax=` line either:
# it would pull the frontend image; this file uses only what BuildKit's built-in frontend knows.

# build (the default) or host: where stage `binaries` comes from.
ARG RECKON_BINARIES=build
# The Go toolchain's image: go.mod's Go version, on Debian 12 (git included, for the VCS stamp). A
# mirror's copy of it may be named instead.
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
# The context includes .git (see .dockerignore), so that `go build` stamps the VCS revision that
# `server version`, reckon_build_info and the traces report. A context without a repository (an
# unpacked tarball, or a git worktree, whose .git file points outside the context) builds without
# the stamp, and says so, rather than failing.
COPY . .
RUN set -eu; \
    buildvcs=true; \
    if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
      echo "no git repository in the build context: building without VCS information (server version shows no revision)"; \
      buildvcs=false; \
    fi; \
    CGO_ENABLED=0 go build -buildvcs="$buildvcs" -trimpath -ldflags "-s -w" -o /out/ ./cmd/server ./cmd/reactor ./cmd/demo; \
    mkdir -p /out/rootfs/etc/ssl/certs /out/rootfs/tmp; \
    chmod 1777 /out/rootfs/tmp; \
    cp /etc/ssl/certs/ca-certificates.crt /out/rootfs/etc/ssl/certs/; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/out/rootfs/etc/passwd; \
    printf 'root:x:0:\nnonroot:x:65532:\n' >/out/rootfs/etc/group

# What the image is made of: /server, /reactor, /demo and /rootfs (CA certificates, /etc/passwd and
# /etc/group with the user nonroot, an empty /tmp).
FROM scratch AS binaries-build
COPY --from=build /out/ /

# The same, built on the host into bin/docker by scripts/compose-test.
FROM scratch AS binaries-host
COPY bin/docker/ /

FROM binaries-${RECKON_BINARIES} AS binaries

FROM scratch AS base
COPY --from=binaries /rootfs/ /
COPY --from=binaries /server /reactor /usr/local/bin/
ENV PATH=/usr/local/bin \
    RECKON_SERVER_ADDR=:8080 \
    RECKON_REACTOR_ADDR=:9090
EXPOSE 8080 9090
USER 65532:65532
CMD ["server"]

FROM base AS demo
COPY --from=binaries /demo /usr/local/bin/

# The default target: server and reactor, nothing else.
FROM base AS runtime
