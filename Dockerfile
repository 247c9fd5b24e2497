# syntax=docker/dockerfile:1
# server-binder's image: a release build on Debian bookworm, run on distroless (no
# shell, no package manager) as the unprivileged user 65532. It is the in-cluster
# operator only: built with --no-default-features, it carries no embedded API server
# (no `dev`, `apiserver` or `bench`).
#
#   docker build -t server-binder:0.1.0 .
#
# The Deployment in manifests/base/deployment.yaml replaces CMD with its own args
# (`run --leader-elect ...`); tests/manifests.rs checks that the two agree.

FROM rust:1.95-bookworm AS builder
WORKDIR /src

# Dependencies first, in a layer of their own: it is rebuilt only when Cargo.toml or
# Cargo.lock change, not on every edit of the sources.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs \
    && cargo build --release --locked --no-default-features --bin server-binder \
    && rm -rf src

# Then the crate itself. COPY keeps the files' modification times, which may be older
# than the placeholder build: touch them so cargo rebuilds the crate. There is no .git
# here: `docker build --build-arg REVISION=$(git rev-parse --short=12 HEAD)` names the
# revision in server_binder_build_info.
ARG REVISION=unknown
ENV SERVER_BINDER_REVISION=$REVISION
COPY src ./src
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --no-default-features --bin server-binder \
    && cp target/release/server-binder /server-binder

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /server-binder /usr/local/bin/server-binder
# Numeric, so the kubelet can verify runAsNonRoot (the image's user is "nonroot").
USER 65532:65532
# /metrics, /healthz and /readyz (`run --metrics-addr`, default 0.0.0.0:8080).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/server-binder"]
CMD ["run"]
