#!/bin/sh
# Build librdkafka's rdkafka_performance from Debian's librdkafka source package.
# Idempotent: every step is skipped when its result is already there.
# Prints the path of the binary on its last line.
#   RDKAFKA_BUILD_DIR  where the source is unpacked (default ~/.cache/moldau/rdkafka)
set -eu
dir="${RDKAFKA_BUILD_DIR:-$HOME/.cache/moldau/rdkafka}"
src_list=/etc/apt/sources.list.d/moldau-deb-src.sources
mkdir -p "$dir"
cd "$dir"
bin="$(ls -d "$dir"/librdkafka-*/examples/rdkafka_performance 2>/dev/null | head -n 1 || true)"
if [ -n "$bin" ] && [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
if ! ls -d librdkafka-*/configure >/dev/null 2>&1; then
    if ! apt-get source --print-uris librdkafka >/dev/null 2>&1; then
        . /etc/os-release
        cat > "$src_list" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $VERSION_CODENAME $VERSION_CODENAME-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        apt-get update -qq
    fi
    apt-get source -qq librdkafka
fi
srcdir="$(ls -d librdkafka-*/ | head -n 1)"
cd "$srcdir"
# Only what the benchmark needs: plaintext, no compression libraries beyond the bundled ones.
if [ ! -f Makefile.config ]; then
    ./configure --disable-ssl --disable-gssapi --disable-sasl --disable-curl \
        --disable-zstd --disable-lz4-ext >/dev/null
fi
make -j2 -C src lib >/dev/null
make -C examples rdkafka_performance >/dev/null
echo "$PWD/examples/rdkafka_performance"
