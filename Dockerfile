# navd container image: a release build with the Swift runtime linked statically, run on
# debian:bookworm-slim as an unprivileged user. navd imports no Foundation at all, so no ICU
# data comes along. Only glibc, libstdc++ and the system libraries navd links through
# system-library targets stay dynamic: libcurl (the fact client, called directly), libsqlite3
# (the session store), libpq (the PostgreSQL store) and libcrypto (token hashes). The runtime stage needs no Swift toolchain.
# scripts/verify-container.sh builds and checks this file with podman.

FROM swift:6.3-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates libcurl4-openssl-dev libpq-dev libsqlite3-dev libssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only the manifest and the sources, so edits to docs, tests or scripts keep the build cached.
# SwiftPM refuses a manifest whose targets lack their directories, test targets included (even
# with --product), and an empty directory satisfies it: .dockerignore lets in Tests/ without
# its .swift files, so this copies just the test targets' directories.
# openapi.yaml too: the binary serves it (Sources/WebClient/Resources/openapi.yaml links to it).
COPY Package.swift openapi.yaml ./
COPY Tests ./Tests
COPY Sources ./Sources
# Linked with the toolchain's lld instead of SwiftPM's default gold so that the PIE's ~77,000
# relative relocations are packed as DT_RELR (-z pack-relative-relocs): .rela.dyn shrinks from
# 1.9 MB to 34 kB, the binary stays position-independent (ASLR kept), and bookworm's glibc 2.36
# understands DT_RELR. --gc-sections needs no flag: SwiftPM passes it to every release link.
# Stripped: the symbol table and DWARF are about half of the binary; 8 MB are left (it was
# 57.7 MB, 34 MB of it ICU data, while navd imported Foundation). Crash backtraces show
# addresses; symbolicate them against an unstripped build of the same commit and flags.
# `navd --help` proves the binary loads and runs before it leaves the build stage.
# Optimised for size (`-Osize`): the image must stay under 100 MB.
RUN swift build -c release --static-swift-stdlib --product navd \
      -Xswiftc -Osize -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
 && install -D -m 0755 "$(swift build -c release --static-swift-stdlib -Xswiftc -Osize --show-bin-path)/navd" /out/navd \
 && strip --strip-all /out/navd \
 && /out/navd --help >/dev/null

FROM debian:bookworm-slim
# Nothing to trim: the slim base's dpkg configuration (/etc/dpkg/dpkg.cfg.d/) already keeps
# docs, man pages and locales from landing; only each package's copyright file does (0.6 MB,
# kept for the licence notices). This layer is 13.2 MB: libcurl and the libraries it needs
# (libcrypto alone is 4.7 MB, Kerberos and LDAP 2 MB), libsqlite3 (1.4 MB) and dpkg's and
# debconf's bookkeeping (templates.dat is rewritten whole: 0.75 MB). No ca-certificates
# package: it would bring openssl's CLI and 2 MB more for one file, the CA bundle, copied
# below from the build stage instead (refreshed whenever the image is rebuilt).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libcurl4 libpq5 libsqlite3-0 libssl3 \
 && rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/dpkg.log /var/cache/debconf/*-old /var/lib/dpkg/status-old \
 && groupadd --gid 10001 navd \
 && useradd --uid 10001 --gid navd --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin navd \
 && install -d -m 0700 -o 10001 -g 10001 /var/lib/navd
# Where Debian's libcurl looks for it (curl-config --ca); for https fact services.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/navd /usr/local/bin/navd
# Numeric, so orchestrators can tell it is not root without reading /etc/passwd.
USER 10001:10001
# Sessions live in an SQLite database on this volume: mount it to keep them across containers.
ENV NAVD_HOST=0.0.0.0 PORT=8080 NAVD_DATA_DIR=/var/lib/navd
VOLUME /var/lib/navd
EXPOSE 8080
# `navd --check-health` GETs http://127.0.0.1:$PORT/healthz and exits 0 on 200, 1 otherwise.
# Docker honours HEALTHCHECK as is; podman only with `podman build --format docker`.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 CMD ["/usr/local/bin/navd", "--check-health"]
# Exec form: navd is PID 1 and gets SIGTERM itself; it is expected to exit 0 within 5 s.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/navd"]
