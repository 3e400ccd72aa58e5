# syntax=docker/dockerfile:1
#
# Oka's container image: a release build of the `oka` binary on Debian bookworm-slim.
#
#   docker build -t oka:0.1.0 .
#   docker run --rm -p 1122:1122 -p 9122:9122 oka:0.1.0          # serve --demo
#   docker run --rm oka:0.1.0 serve --help
#
# Build and push to ECR: docs/deploy.md ("Build and push the image").
#
# Runtime choices (docs/deploy.md, "The image"):
# - bookworm-slim rather than distroless: Kubernetes' preStop hook needs `sleep`, the
#   HEALTHCHECK below and the Helm test need `curl` and `sh`, Redis over TLS needs the
#   system CA bundle. About 30 MB more than distroless.
# - Runs as uid/gid 10001, writes nothing to its filesystem: works with
#   `readOnlyRootFilesystem: true`.
# - Python UDFs (docs/python-udfs.md) run in worker processes of Debian's python3
#   (CPython 3.11, standard library only; about 25 MB). To give them libraries, build on
#   this image: install them into a virtual environment and set OKA_PYTHON to its python
#   (docs/deploy.md, "Python UDFs"). The workers write only under /tmp (an emptyDir in
#   the Helm chart).
# - tini is PID 1: it forwards SIGTERM (graceful shutdown) and SIGHUP (reload) to `oka`,
#   and reaps what a UDF's own subprocesses leave behind (`oka` reaps its workers).

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY . .
# The cache mounts keep the crate registry and the target directory between builds
# (BuildKit). The binary is copied out of the cached target directory in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p oka-cli \
    && install -m 0755 target/release/oka /usr/local/bin/oka

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl python3 tini \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 oka \
    && useradd --system --uid 10001 --gid oka --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin oka
COPY --from=build /usr/local/bin/oka /usr/local/bin/oka
COPY examples/seed/spec.yaml /etc/oka/seed-spec.yaml
USER 10001:10001
# 1122: feature requests; 9122: admin (/healthz, /readyz, /metrics, /stats, /admin/reload).
# Oka's admin port defaults to loopback; in a container it must listen on the container's
# own addresses to be published or probed. Guard it with the network (and an `admin`
# API key for reload); set OKA_ADMIN_LISTEN=127.0.0.1:9122 to keep it inside.
ENV OKA_ADMIN_LISTEN=0.0.0.0:9122
EXPOSE 1122 9122
# Liveness on the admin port, whatever port OKA_ADMIN_LISTEN picks (default 9122).
# Kubernetes ignores HEALTHCHECK and uses the chart's probes instead.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD a="${OKA_ADMIN_LISTEN:-0.0.0.0:9122}"; curl -fsS -o /dev/null "http://127.0.0.1:${a##*:}/healthz" || exit 1
ENTRYPOINT ["tini", "--", "oka"]
CMD ["serve", "--demo"]
