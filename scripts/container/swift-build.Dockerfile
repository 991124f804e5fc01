# A local stand-in for the official swift:6.3-bookworm image, for machines that cannot pull
# from Docker Hub. scripts/verify-container.sh builds it from the local debian:bookworm-slim
# and the host's Swift toolchain (the directory that holds bin/swift):
#   podman build --build-context swift=/opt/swift/usr -f swift-build.Dockerfile \
#     -t swift:6.3-bookworm -t docker.io/library/swift:6.3-bookworm scripts/container
# The packages are those the official image carries for building Swift code.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      binutils ca-certificates gcc git libc6-dev libcurl4-openssl-dev libncurses-dev \
      libpython3-dev libsqlite3-0 libstdc++-12-dev libxml2-dev pkg-config tzdata zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
# Laid out like the official image: the toolchain's usr/ merged into /usr.
COPY --from=swift . /usr/
RUN swift --version
