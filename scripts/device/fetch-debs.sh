#!/usr/bin/env bash
# Downloads (does not install) the Debian 12 packages that scripts/device/build-cuda.sh
# unpacks on a machine without them: attune's -dev packages and the libraries they need
# at run time, except libtorch (that machine's Python torch gives a CUDA one).
#   PACK=1 scripts/device/fetch-debs.sh DEBS   (the same, packed into DEBS/deps.tar.xz)
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
  libmbedx509-1 libssh2-1-dev libssh2-1 \
  libpq-dev libpq5 libldap-2.5-0 libsasl2-2 libsasl2-modules-db \
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2 \
  libblas-dev libblas3
# PACK=1: travel lighter (about 24 MB against 44): one deps.tar.xz of the unpacked trees, without
# documentation and static libraries (libfaiss.a, which libfaiss-dev ships alone, is kept), in
# place of the .deb files; build-cuda.sh takes either.
if [ "${PACK:-0}" = 1 ]; then
  T=$(mktemp -d)
  for f in ./*.deb; do dpkg-deb -x "$f" "$T"; done
  rm -rf "$T/usr/share/doc" "$T/usr/share/man" "$T/usr/share/lintian"
  find "$T" -name '*.a' ! -name libfaiss.a -delete
  tar -C "$T" -cf - . | xz -6 -T0 > deps.tar.xz
  rm -rf "$T" ./*.deb
fi
