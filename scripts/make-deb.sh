#!/usr/bin/env bash
# Builds busymate_VERSION_ARCH.deb from built binaries: the four programs,
# the unit, sysusers.d and tmpfiles.d, man pages, shell completions and
# /usr/share/doc/busymate, with the maintainer scripts of packaging/deb.
#
#   scripts/make-deb.sh --bin DIR [--out DIR] [--version V] [--checkouts DIR]
#                       [--shared-runtime] [--settings-doc FILE] [--quick]
#
# `make deb` passes a release build linked with --static-swift-stdlib; its
# dependencies are read off the binaries by dpkg-shlibdeps. --shared-runtime
# packages a build that loads the Swift runtime from the toolchain (the test
# suite's debug build, run where /opt/swift is mounted): the runtime's
# libraries belong to no Debian package and are left out of Depends.
# --version sets the package's version instead of the one the binaries
# report (the upgrade test's older package; the programs still say theirs). --quick compresses with gzip -1 instead of xz (the test
# packages: xz takes minutes over a debug build).
set -euo pipefail
# The package's modes are the files' own: 0755 directories and programs, 0644 the rest.
umask 022

top=$(cd "$(dirname "$0")/.." && pwd)
bin="" out=$top version="" checkouts=$top/.build/checkouts shared=0 settings_doc=$top/docs/settings.md compression=(-Zxz)
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --checkouts) checkouts=$2; shift 2 ;;
    --shared-runtime) shared=1; shift ;;
    --settings-doc) settings_doc=$2; shift 2 ;;
    --quick) compression=(-Zgzip -z1); shift ;;
    *) echo "make-deb: unknown argument $1" >&2; exit 64 ;;
  esac
done
[ -n "$bin" ] || { echo "make-deb: --bin DIR is needed (the built binaries)" >&2; exit 64; }
for p in busymate busymate-app busymate-tunnel busymate-web; do
  [ -x "$bin/$p" ] || { echo "make-deb: $bin/$p is missing; build first" >&2; exit 1; }
done
for tool in dpkg-deb dpkg-shlibdeps strip gzip; do
  command -v "$tool" >/dev/null || { echo "make-deb: $tool is missing (apt-get install dpkg-dev binutils)" >&2; exit 1; }
done

reported=$("$bin/busymate" --version)
[ -n "$version" ] || version=${reported%% *}
arch=$(dpkg --print-architecture)
name=busymate_${version}_${arch}
mkdir -p "$top/.build"
work=$(mktemp -d "$top/.build/deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/$name
mkdir -p "$stage/DEBIAN"
# Reproducible: file times, and the man pages' dates, are the changelog's.
SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l "$top/packaging/deb/changelog" -STimestamp)
export SOURCE_DATE_EPOCH

say() { printf 'make-deb: %s\n' "$*" >&2; }

# The programs: the CLI for users, the supervisor for the unit, the two
# children where only the supervisor starts them.
install -d "$stage/usr/bin" "$stage/usr/sbin" "$stage/usr/lib/busymate"
install -m 0755 "$bin/busymate" "$stage/usr/bin/"
install -m 0755 "$bin/busymate-app" "$stage/usr/sbin/"
install -m 0755 "$bin/busymate-tunnel" "$bin/busymate-web" "$stage/usr/lib/busymate/"
# Debug information and symbols go; what Swift reads at run time (its
# metadata and reflection sections) stays.
for f in "$stage/usr/bin/busymate" "$stage/usr/sbin/busymate-app" "$stage"/usr/lib/busymate/*; do
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$f"
done

# systemd: the unit, its users and its directories.
install -d "$stage/lib/systemd/system" "$stage/usr/lib/sysusers.d" "$stage/usr/lib/tmpfiles.d"
sed -e 's|@SBINDIR@|/usr/sbin|g' -e 's|@LIBEXECDIR@|/usr/lib/busymate|g' -e 's|@DOCDIR@|/usr/share/doc/busymate|g' \
  "$top/units/busymate.service" >"$stage/lib/systemd/system/busymate.service"
chmod 0644 "$stage/lib/systemd/system/busymate.service"
install -m 0644 "$top/units/busymate.sysusers" "$stage/usr/lib/sysusers.d/busymate.conf"
install -m 0644 "$top/units/busymate.tmpfiles" "$stage/usr/lib/tmpfiles.d/busymate.conf"

# Man pages: busymate(1) from the CLI's own description of itself, the
# settings from docs/settings.md (whose keys a test checks against the
# reader), busymate-app(8) written by hand and checked against its usage.
install -d "$stage/usr/share/man/man1" "$stage/usr/share/man/man5" "$stage/usr/share/man/man8"
"$bin/busymate" --experimental-dump-help | python3 "$top/scripts/manpage.py" cli --version "$version" >"$stage/usr/share/man/man1/busymate.1"
python3 "$top/scripts/manpage.py" settings --version "$version" <"$settings_doc" >"$stage/usr/share/man/man5/busymate-settings.5"
sed -e "s|@VERSION@|$version|g" "$top/packaging/deb/busymate-app.8" >"$stage/usr/share/man/man8/busymate-app.8"
described=$(grep -o '\\-\\-[a-z\\-]*[a-z]' "$stage/usr/share/man/man8/busymate-app.8" | sed 's/\\//g' | sort -u)
for option in $("$bin/busymate-app" --help | grep -o -- '--[a-z-]*[a-z]' | sort -u); do
  grep -qx -- "$option" <<<"$described" \
    || { say "busymate-app(8) does not describe $option (packaging/deb/busymate-app.8)"; exit 1; }
done
gzip -9n "$stage"/usr/share/man/man*/*

# Completions, as swift-argument-parser writes them.
install -d "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
  "$stage/usr/share/fish/vendor_completions.d"
# bash's is sourced, not run: without the #! line argument-parser starts it with.
"$bin/busymate" --generate-completion-script bash | sed '1{/^#!/d}' >"$stage/usr/share/bash-completion/completions/busymate"
"$bin/busymate" --generate-completion-script zsh >"$stage/usr/share/zsh/vendor-completions/_busymate"
"$bin/busymate" --generate-completion-script fish >"$stage/usr/share/fish/vendor_completions.d/busymate.fish"
chmod 0644 "$stage"/usr/share/bash-completion/completions/busymate "$stage"/usr/share/zsh/vendor-completions/_busymate \
  "$stage"/usr/share/fish/vendor_completions.d/busymate.fish

# /usr/share/doc/busymate: the README and the docs, the changelog, the copyright, and the
# licence and notice files of what is linked in.
doc=$stage/usr/share/doc/busymate
install -d "$doc/licenses"
install -m 0644 "$top/packaging/deb/copyright" "$doc/copyright"
# The README's links resolve here: docs/, the reports.
install -m 0644 "$top/README.md" "$top/RELIABILITY.md" "$top/BENCHMARKS.md" "$doc/"
install -d "$doc/docs/images"
install -m 0644 "$top"/docs/*.md "$doc/docs/"
install -m 0644 "$top"/docs/images/* "$doc/docs/images/"
gzip -9n -c "$top/packaging/deb/changelog" >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
if [ -d "$checkouts" ]; then
  for package in "$checkouts"/*; do
    files=$(find "$package" -maxdepth 1 -type f \( -iname 'LICENSE*' -o -iname 'NOTICE*' \) | sort)
    [ -n "$files" ] || continue
    install -d "$doc/licenses/$(basename "$package")"
    for f in $files; do install -m 0644 "$f" "$doc/licenses/$(basename "$package")/"; done
  done
else
  say "no package checkouts at $checkouts: the licences of what is linked in are left out"
fi
swift_license=$(dirname "$(dirname "$(command -v swift 2>/dev/null || echo /opt/swift/usr/bin/swift)")")/share/swift/LICENSE.txt
if [ -f "$swift_license" ]; then
  install -d "$doc/licenses/swift" && install -m 0644 "$swift_license" "$doc/licenses/swift/"
fi

# What the binaries load, as dpkg-shlibdeps reads it off them.
shlibs=$work/shlibs
rm -rf "$shlibs" && mkdir -p "$shlibs/debian"
printf 'Source: busymate\n\nPackage: busymate\nArchitecture: any\n' >"$shlibs/debian/control"
ignore=()
[ "$shared" = 1 ] && ignore=(--ignore-missing-info -l/opt/swift/usr/lib/swift/linux)
depends=$(cd "$shlibs" && dpkg-shlibdeps -O "${ignore[@]}" "$stage/usr/bin/busymate" "$stage/usr/sbin/busymate-app" \
  "$stage/usr/lib/busymate/busymate-tunnel" "$stage/usr/lib/busymate/busymate-web" 2>"$work/shlibdeps.log" \
  | sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.log" >&2; say "dpkg-shlibdeps failed"; exit 1; }
[ -n "$depends" ] || { cat "$work/shlibdeps.log" >&2; say "dpkg-shlibdeps found no dependencies"; exit 1; }
if [ "$shared" = 1 ]; then
  say "the Swift runtime is not in this package: it runs only where /opt/swift is (a test build)"
fi

install -d "$stage/usr/share/lintian/overrides"
install -m 0644 "$top/packaging/deb/lintian-overrides" "$stage/usr/share/lintian/overrides/busymate"

install -m 0755 "$top/packaging/deb/postinst" "$top/packaging/deb/prerm" "$top/packaging/deb/postrm" "$stage/DEBIAN/"
size=$(du -s --apparent-size --block-size=1024 --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<CONTROL
Package: busymate
Version: $version
Architecture: $arch
Maintainer: Busymate developers <packages@busymate.invalid>
Installed-Size: $size
Depends: $depends, systemd
Recommends: nftables
Section: net
Priority: optional
Homepage: https://busymate.invalid/
Description: network debugger appliance: capturing HTTP(S) proxy
 Busymate captures HTTP, HTTPS, HTTP/2, gRPC and WebSocket traffic as a
 man-in-the-middle proxy (in the class of mitmproxy, Charles and Proxyman),
 decrypts HTTPS for the hosts on an SSL-proxying list, and keeps every
 exchange in a SQLite store read by the busymate command and a web page.
 .
 It runs as a systemd service: a root supervisor, a capture tunnel and a
 web front that give up root. Phones, virtual machines and containers use it
 as their proxy, or as their gateway in transparent mode.
CONTROL
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums" "$stage/DEBIAN/control"

mkdir -p "$out"
dpkg-deb --root-owner-group "${compression[@]}" --build "$stage" "$out/$name.deb" >/dev/null
say "built $out/$name.deb ($reported; Depends: $depends, systemd)"
echo "$out/$name.deb"
