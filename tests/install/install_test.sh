#!/bin/sh
# `meson install` into a temporary DESTDIR, then a program built against the
# installed tree alone (headers and uxds.pc; nothing from the source or build
# tree): once with the shared libuxds, once with the static one.
#   install_test.sh BUILD_DIR CHECK_SOURCE CXX
set -eu
build=$1
source=$2
cxx=$3  # may be several words ("ccache c++")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root

meson install -C "$build" --no-rebuild --quiet --destdir "$root" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; echo "FAIL: meson install"; exit 1; }

pc=$(find "$root" -name uxds.pc)
[ -n "$pc" ] || { echo "FAIL: no uxds.pc installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
prefix=$(pkg-config --variable=prefix uxds)
# The .pc names the final prefix; the files are under DESTDIR for now.
pkgconf() { pkg-config --define-variable=prefix="$root$prefix" "$@"; }
libdir=$(pkgconf --variable=libdir uxds)
for f in "$libdir/libuxds.a" "$libdir/libuxds.so" "$root$prefix/bin/uxds" \
         "$(pkgconf --variable=includedir uxds)/uxds/runtime.h"; do
  [ -e "$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
if grep -rlE '#include "(runtime|http2|tls|xds|lb|client|server)/|\.pb\.h"' \
     "$(pkgconf --variable=includedir uxds)/uxds"; then
  echo "FAIL: an installed header includes a header that is not installed"
  exit 1
fi

expected='loop: 42
bootstrap: node installed-node, server 127.0.0.1:18000
invalid bootstrap: refused
ring: 16 entries over 2 endpoints'

# Shared: -luxds finds libuxds.so first.
# shellcheck disable=SC2046,SC2086
$cxx -std=c++20 -o "$work/check_shared" "$source" $(pkgconf --cflags --libs uxds)
readelf -d "$work/check_shared" | grep -q 'NEEDED.*libuxds\.so' ||
  { echo "FAIL: check_shared does not load libuxds.so"; exit 1; }
out=$(LD_LIBRARY_PATH="$libdir" "$work/check_shared")
[ "$out" = "$expected" ] || { printf 'FAIL: shared output:\n%s\n' "$out"; exit 1; }

# Static: libuxds.a by name, and every private dependency from --static.
# shellcheck disable=SC2046,SC2086
$cxx -std=c++20 -o "$work/check_static" "$source" $(pkgconf --cflags uxds) \
  $(pkgconf --static --libs uxds | sed 's/\(^\| \)-luxds\( \|$\)/\1-l:libuxds.a\2/')
if readelf -d "$work/check_static" | grep -q 'libuxds'; then
  echo "FAIL: check_static loads libuxds.so"; exit 1
fi
out=$("$work/check_static")
[ "$out" = "$expected" ] || { printf 'FAIL: static output:\n%s\n' "$out"; exit 1; }

"$root$prefix/bin/uxds" help >/dev/null || { echo "FAIL: the installed uxds tool"; exit 1; }
echo "PASS: installed headers, libuxds.so, libuxds.a, uxds.pc and uxds"
