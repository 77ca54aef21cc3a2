#!/usr/bin/env bash
# Downloads (does not install) the Debian 12 packages that scripts/device/build-cuda.sh
# unpacks on a machine without them: attune's -dev packages and the libraries they need
# at run time, except libtorch (that machine's Python torch gives a CUDA one).
set -euo pipefail
DEBS=${1:?usage: fetch-debs.sh DEBS}
mkdir -p "$DEBS" && cd "$DEBS"
apt-get download \
  nlohmann-json3-dev libcli11-dev libsqlite3-dev libsqlite3-0 \
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
  libicu-dev libicu72 libssl-dev libssl3 \
  libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1 zlib1g-dev \
  libfaiss-dev libopenblas0-openmp libgfortran5 libquadmath0 \
  libgit2-dev libgit2-1.5 libhttp-parser-dev libhttp-parser2.9 libmbedtls-dev libmbedtls14 libmbedcrypto7 \
  libmbedx509-1 libssh2-1-dev libssh2-1
