# navd container image: a release build with the Swift runtime and Foundation linked
# statically, run on debian:bookworm-slim as an unprivileged user. Only glibc, libstdc++ and
# libcurl (FoundationNetworking's HTTP client) stay dynamic, so the runtime stage needs no
# Swift toolchain. scripts/verify-container.sh builds and checks this file with podman.

FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only the manifest and the sources, so edits to docs, tests or scripts keep the build cached.
# SwiftPM refuses a manifest whose targets lack their directories, test targets included (even
# with --product), and an empty directory satisfies it: .dockerignore lets in Tests/ without
# its .swift files, so this copies just the test targets' directories.
COPY Package.swift ./
COPY Tests ./Tests
COPY Sources ./Sources
# Stripped: the symbol table is about 13 MB of a 70 MB binary (34 MB of it is the ICU data
# Foundation links in), and the image has to stay under 150 MB. Crash backtraces then show
# addresses; symbolicate them against an unstripped build of the same commit.
RUN swift build -c release --static-swift-stdlib --product navd \
 && install -D -m 0755 "$(swift build -c release --static-swift-stdlib --show-bin-path)/navd" /out/navd \
 && strip --strip-all /out/navd

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates libcurl4 \
 && rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/dpkg.log /var/cache/debconf/*-old \
 && groupadd --gid 10001 navd \
 && useradd --uid 10001 --gid navd --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin navd
COPY --from=build /out/navd /usr/local/bin/navd
# Numeric, so orchestrators can tell it is not root without reading /etc/passwd.
USER 10001:10001
ENV NAVD_HOST=0.0.0.0 PORT=8080
EXPOSE 8080
# `navd --check-health` GETs http://127.0.0.1:$PORT/healthz and exits 0 on 200, 1 otherwise.
# Docker honours HEALTHCHECK as is; podman only with `podman build --format docker`.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/usr/local/bin/navd", "--check-health"]
# Exec form: navd is PID 1 and gets SIGTERM itself; it is expected to exit 0 within 5 s.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/navd"]
