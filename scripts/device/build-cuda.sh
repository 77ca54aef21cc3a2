#!/usr/bin/env bash
# Builds attune against the CUDA libtorch of a Python torch install, on a machine that has
# a compiler, CMake, ninja and CUDA but none of the Debian -dev packages (the lent GPU
# machine: bench/RESULTS.md and docs/RESULTS.md name the numbers taken with it).
#
#   scripts/device/fetch-debs.sh DEBS          (here, on Debian 12: download the .debs)
#   scripts/device/build-cuda.sh DEBS [BUILD]  (there: unpack them into a prefix, build)
# ATTUNE_CMAKE_ARGS adds CMake options; ATTUNE_CONFIGURE_ONLY=1 stops after configuring.
#
# The .debs are unpacked into PREFIX (never into /), their pkg-config and CMake files are
# pointed at PREFIX, and the binaries get PREFIX's library folders as their run path.
set -euo pipefail
DEBS=$(cd "${1:?usage: build-cuda.sh DEBS [BUILD]}" && pwd)
BUILD=${2:-build-cuda}
PREFIX=${ATTUNE_DEB_PREFIX:-/tmp/attune-deb}
cd "$(dirname "$0")/../.."

mkdir -p "$PREFIX"
# The folder holds .deb files, or (to travel lighter) .tar.xz files of their unpacked trees.
shopt -s nullglob
for f in "$DEBS"/*.deb; do dpkg-deb -x "$f" "$PREFIX"; done
for f in "$DEBS"/*.tar.xz; do tar -C "$PREFIX" -xJf "$f"; done
L=$PREFIX/usr/lib/x86_64-linux-gnu
# Debian's alternatives, which dpkg-deb -x does not make: BLAS's pkg-config file, its library
# (OpenBLAS, as an installed system routes it) and the CBLAS header.
[ -e "$L/pkgconfig/blas.pc" ] || ln -s blas-netlib.pc "$L/pkgconfig/blas.pc"
[ -e "$L/libblas.so" ] || ln -s openblas-openmp/libblas.so.3 "$L/libblas.so"
[ -e "$PREFIX/usr/include/x86_64-linux-gnu/cblas.h" ] || ln -s cblas-netlib.h "$PREFIX/usr/include/x86_64-linux-gnu/cblas.h"
# prefix=/usr (and any other absolute /usr path a .pc names) -> PREFIX/usr; idempotent.
sed -i -E "s#^([A-Za-z_]+) ?= ?/usr#\1=$PREFIX/usr#" "$L"/pkgconfig/*.pc "$PREFIX"/usr/share/pkgconfig/*.pc
# faiss's exported target names /usr's BLAS and LAPACK by absolute path: use the carried OpenBLAS.
sed -i "s#/usr/lib/x86_64-linux-gnu/libblas.so#$L/openblas-openmp/libblas.so.3#g; s#/usr/lib/x86_64-linux-gnu/liblapack.so#$L/openblas-openmp/liblapack.so.3#g" \
  "$L"/cmake/faiss/faiss-targets.cmake

export PKG_CONFIG_LIBDIR=$L/pkgconfig:$PREFIX/usr/share/pkgconfig
TORCH_PREFIX=${TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}
RPATH="$L:$L/openblas-openmp"
# DT_RPATH, not RUNPATH (--disable-new-dtags): the carried libraries' own dependencies
# (libicuuc -> libicudata) are found through it too.
LINK="-Wl,--disable-new-dtags -Wl,-rpath-link,$RPATH -Wl,-rpath,$RPATH"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DATTUNE_BUILD_TESTS=OFF -DATTUNE_BUILD_BENCHMARKS=OFF \
  -DCMAKE_PREFIX_PATH="$PREFIX/usr;$L/cmake;$PREFIX/usr/share/cmake;$TORCH_PREFIX" \
  -DCMAKE_EXE_LINKER_FLAGS="$LINK" \
  ${ATTUNE_CMAKE_ARGS:-}
[ "${ATTUNE_CONFIGURE_ONLY:-}" = 1 ] || cmake --build "$BUILD" --target attune attune-torch -- -k 0
