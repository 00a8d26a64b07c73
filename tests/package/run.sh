#!/usr/bin/env bash
# The Debian package in a clean Debian 12 with systemd as PID 1 (an nspawn
# box, tests/systemd/box.sh): `apt install ./busymate_*.deb` to a running
# appliance, an upgrade from an older version under load without a refused
# connection, remove (the data stays), reinstall, purge (the data goes),
# and install again.
#
#   tests/package/run.sh --bin DIR      (as root; about two minutes, plus
#                                        one debootstrap per machine)
#
# DIR's binaries are packaged with scripts/make-deb.sh twice: as version V
# and as an older one (V with ~old appended, which dpkg orders first). A
# debug build loads the Swift runtime from /opt/swift, which the box mounts;
# `--deb FILE` tests a package `make deb` built instead (static runtime, no
# mount), upgrading to it from an older package of the same binaries.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
bin="" given_deb=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$(cd "$2" && pwd); shift 2 ;;
    --deb) given_deb=$(realpath "$2"); shift 2 ;;
    *) echo "package-test: unknown argument $1" >&2; exit 64 ;;
  esac
done
name=${BUSYMATE_PKGBOX_NAME:-busymate-pkgbox}
box_dir=${BUSYMATE_PKGBOX_DIR:-/var/tmp/$name}
failures=0
passes=0
say() { printf 'package-test: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; failures=$((failures + 1)); }
pass() { say "ok: $*"; passes=$((passes + 1)); }

[ "$(id -u)" -eq 0 ] || { say "skipped: apt and systemd in nspawn need root"; exit 0; }
[ -n "$bin$given_deb" ] || { say "usage: tests/package/run.sh --bin DIR | --deb FILE"; exit 64; }

# What a minimal Debian 12 has, plus the test's own tools (curl, busybox's
# httpd as the origin) and what the package depends on, so apt installs it
# with no network (the box has only loopback).
box_packages=systemd,systemd-sysv,dbus,procps,curl,busybox,libsystemd0,libsqlite3-0,libbrotli1,zlib1g,nftables,apt
root=$box_dir/pristine
. "$top/tests/systemd/box.sh"
trap poweroff EXIT
ensure_tools
ensure_rootfs
# A clean container every run: a copy of the pristine one.
root=$box_dir/rootfs
rm -rf "$root"
cp -a "$box_dir/pristine" "$root"

work=$(mktemp -d /tmp/busymate-pkgtest.XXXXXX)
if [ -n "$given_deb" ]; then
  new=$given_deb
  version=$(dpkg-deb -f "$new" Version)
  staged=$work/extract && dpkg-deb -x "$new" "$staged"
  # The older package carries the same programs (the box mounts no toolchain).
  mkdir -p "$work/bin"
  cp "$staged/usr/bin/busymate" "$staged/usr/sbin/busymate-app" "$staged"/usr/lib/busymate/busymate-* "$work/bin/"
  old=$("$top/scripts/make-deb.sh" --quick --bin "$work/bin" --out "$work" --version "${version}~old")
  box_bind_swift=
else
  new=$("$top/scripts/make-deb.sh" --quick --bin "$bin" --out "$work" --shared-runtime ${BUSYMATE_SETTINGS_DOC:+--settings-doc $BUSYMATE_SETTINGS_DOC})
  version=$(dpkg-deb -f "$new" Version)
  old=$("$top/scripts/make-deb.sh" --quick --bin "$bin" --out "$work" --shared-runtime ${BUSYMATE_SETTINGS_DOC:+--settings-doc $BUSYMATE_SETTINGS_DOC} --version "${version}~old")
fi
cp "$new" "$old" "$root/root/"
new_in=/root/$(basename "$new")
old_in=/root/$(basename "$old")

mkdir -p "$root/srv/www" && echo "hello from the box" >"$root/srv/www/index.html"
cat >"$root/etc/systemd/system/box-origin.service" <<'UNIT'
[Service]
ExecStart=/bin/busybox httpd -f -p 127.0.0.1:8080 -h /srv/www
UNIT
boot
inbox systemctl start box-origin

g=/var/lib/busymate/group
apt_in() { inbox env DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Use-Pty=0 "$@" 2>&1; }
active() { [ "$(inbox systemctl is-active busymate 2>/dev/null || true)" = active ]; }
via_proxy() { inbox curl -sS --max-time 5 -x http://127.0.0.1:9090 "http://127.0.0.1:8080/index.html?$1" 2>&1 || true; }
exe_of() { inbox readlink "/proc/$1/exe" 2>/dev/null || echo gone; }
pid_of() { inbox pgrep -x "$1" | head -n1 || true; }
# The first request's row (the load after it fills the newest page).
first_exchange() { inbox busymate list --search 'index.html?first' --json 2>&1 || true; }

# 1. A first install: the service runs, status is green, traffic is captured, the page answers.
out=$(apt_in install "$old_in" || true)
if active; then pass "apt install ./$(basename "$old"): the service is active"; else fail "not active after install: $(tail -n 15 <<<"$out")"; fi
grep -q "The web page is at http://127.0.0.1:9091/" <<<"$out" && grep -q "sudo busymate web url" <<<"$out" \
  && pass "postinst says where the page is and how to get its URL" || fail "postinst's message: $(grep -i busymate <<<"$out" | tail -n 5)"
status=$(inbox busymate status 2>&1) && rc=0 || rc=$?
[ "$rc" = 0 ] && grep -q "version $version" <<<"$status" \
  && pass "busymate status is green and shows the version ($(grep -o "version [^,]*" <<<"$status" | head -n1))" \
  || fail "busymate status (exit $rc): $status"
[ "$(via_proxy first)" = "hello from the box" ] && pass "a request through the proxy is answered" || fail "through the proxy: $(via_proxy first)"
sleep 1
listed=$(inbox busymate list --json 2>&1 || true)
grep -q 'index.html?first' <<<"$listed" && pass "the request is captured (busymate list)" || fail "not captured: $listed"
url=$(inbox busymate web url 2>/dev/null || true)
page=$(inbox curl -sS -L --max-time 5 -c /root/jar "$url" 2>&1 || true)
grep -q "<title>Busymate" <<<"$page" && pass "the page answers at $(sed 's/[?#].*//' <<<"$url")" || fail "the page: $(head -c 300 <<<"$page")"
facts=$(inbox sh -c 'id -nG busymate; id -nG busymate-web; stat -c "%n %a %U:%G" /var/lib/busymate/group; ls /usr/share/man/man1/busymate.1.gz /usr/share/man/man5/busymate-settings.5.gz /usr/share/man/man8/busymate-app.8.gz /usr/share/bash-completion/completions/busymate /usr/share/zsh/vendor-completions/_busymate /usr/share/fish/vendor_completions.d/busymate.fish /usr/share/doc/busymate/copyright' 2>&1 || true)
if grep -q "^/var/lib/busymate/group 3775 root:busymate" <<<"$facts" && grep -q "busymate-web busymate" <<<"$facts" && ! grep -q "No such" <<<"$facts"; then
  pass "users, the group directory, man pages, completions and the copyright are in place"
else
  fail "installed facts: $facts"
fi
versions=""
for p in busymate busymate-app busymate-tunnel busymate-web; do
  path=$(inbox sh -c "command -v $p || ls /usr/lib/busymate/$p" 2>/dev/null || true)
  v=$(inbox "$path" --version 2>&1 || true)
  [[ "$v" == *"$version (commit "* ]] || versions="$versions $p: \"$v\";"
done
[ -z "$versions" ] && pass "the four programs print the version and commit" || fail "--version:$versions"
# Arming a handover is root's: a member of group busymate is refused.
refused=$(inbox setpriv --reuid=busymate-web --regid=busymate --clear-groups -- busymate tunnel handover 2>&1 || true)
grep -q "permission denied" <<<"$refused" && pass "a group member cannot arm a handover: $refused" || fail "handover as busymate-web: $refused"
inbox busymate ssl-proxying add upgrade.test >/dev/null 2>&1 || true

# 2. An upgrade under load: no connection is refused while every process is replaced.
ca_before=$(inbox sha256sum $g/ca.pem | cut -c1-64)
token_before=$(inbox cat $g/web-token 2>/dev/null || true)
pids_before="$(pid_of busymate-app) $(pid_of busymate-tunnel) $(pid_of busymate-web)"
inbox sh -c 'rm -f /root/load.log /root/load.stop; (while [ ! -e /root/load.stop ]; do curl -s -o /dev/null -w "%{http_code}\n" --max-time 5 -x http://127.0.0.1:9090 http://127.0.0.1:8080/index.html?load >>/root/load.log; done) >/dev/null 2>&1 </dev/null &'
sleep 1
out=$(apt_in install "$new_in" || true)
sleep 3
inbox touch /root/load.stop
sleep 1
codes=$(inbox sh -c 'sort /root/load.log | uniq -c' 2>&1 || true)
total=$(inbox sh -c 'wc -l </root/load.log' 2>/dev/null || echo 0)
if [ "$total" -gt 20 ] && ! grep -vq " 200$" <<<"$codes"; then
  pass "upgrade under load: $total requests, every one answered 200"
else
  fail "upgrade under load: answers were: $codes"
fi
# The handover path ran, not a plain restart that happened to miss the load.
journal=$(inbox journalctl -b -u busymate --no-pager -o cat 2>&1 || true)
if grep -q "stopping without the tunnel" <<<"$journal" && grep -q "adopted the running tunnel" <<<"$journal" \
   && grep -q "tunnel restarting" <<<"$out" && ! grep -qi "could not hand over\|was not restarted" <<<"$out"; then
  pass "the upgrade handed over: the old supervisor left, the new one adopted the tunnel and replaced it"
else
  fail "no handover: postinst said $(grep -i "busymate\|restart" <<<"$out" | tail -n 5)"
fi
pids_after="$(pid_of busymate-app) $(pid_of busymate-tunnel) $(pid_of busymate-web)"
stale=""
for p in $pids_after; do [[ "$(exe_of "$p")" == *"(deleted)"* ]] && stale="$stale $p"; done
if active && [ -z "$stale" ] && [ "$(wc -w <<<"$pids_after")" = 3 ]; then
  pass "after the upgrade the supervisor, the tunnel and the web front run the new files (pids $pids_before -> $pids_after)"
else
  fail "after the upgrade: pids $pids_before -> $pids_after, stale:$stale; postinst: $(tail -n 10 <<<"$out")"
fi
inbox dpkg-query -W -f '${Version}' busymate | grep -qx "$version" && pass "dpkg has $version" || fail "dpkg's version: $(inbox dpkg-query -W busymate 2>&1)"
kept=""
[ "$(inbox sha256sum $g/ca.pem | cut -c1-64)" = "$ca_before" ] || kept="$kept ca"
[ "$(inbox cat $g/web-token 2>/dev/null || true)" = "$token_before" ] || kept="$kept web-token"
grep -q upgrade.test <<<"$(inbox cat $g/settings.json)" || kept="$kept settings"
grep -q 'index.html?first' <<<"$(first_exchange)" || kept="$kept capture"
[ -z "$kept" ] && pass "the upgrade kept the CA, the web token, settings and the capture" || fail "the upgrade lost:$kept"
status=$(inbox busymate status 2>&1) && pass "busymate status is green after the upgrade" || fail "status after the upgrade: $status"

# 3. remove: stopped, programs gone, /var/lib/busymate kept.
out=$(apt_in remove busymate || true)
left=$(inbox sh -c "pgrep -f 'busymate-(app|tunnel|web)' || echo none" 2>&1 || true)
state=$(inbox sh -c 'systemctl is-active busymate; [ -e /usr/bin/busymate ] || echo programs-gone; [ -s '$g'/ca.pem ] && [ -e '$g'/settings.json ] && echo data-kept' 2>&1 || true)
if [ "$left" = none ] && [ "$state" = "$(printf 'inactive\nprograms-gone\ndata-kept')" ]; then
  pass "apt remove: stopped, no process left, programs gone, /var/lib/busymate kept"
else
  fail "apt remove: left \"$left\"; $(tail -n 5 <<<"$out")"
fi

# 4. Reinstalled after a remove: the kept data is used again.
out=$(apt_in install "$new_in" || true)
if active && [ "$(inbox sha256sum $g/ca.pem | cut -c1-64)" = "$ca_before" ] && grep -q 'index.html?first' <<<"$(first_exchange)"; then
  pass "reinstalled after remove: active, same CA, the capture still there"
else
  fail "reinstall after remove: $(tail -n 10 <<<"$out")"
fi

# 5. purge: /var/lib/busymate goes.
out=$(apt_in purge busymate || true)
left=$(inbox sh -c "pgrep -f 'busymate-(app|tunnel|web)' || echo none" 2>&1 || true)
state=$(inbox sh -c '[ -e /var/lib/busymate ] || echo data-gone; [ -e /lib/systemd/system/busymate.service ] || echo unit-gone' 2>&1 || true)
if [ "$left" = none ] && [ "$state" = "$(printf 'data-gone\nunit-gone')" ]; then
  pass "apt purge: /var/lib/busymate and the unit are gone, no process left"
else
  fail "apt purge: $(inbox ls -la /var/lib/busymate 2>&1 | head -n 5); left \"$left\"; $(tail -n 5 <<<"$out")"
fi

# 6. Installed again after a purge: a new appliance (a new CA), working.
out=$(apt_in install "$new_in" || true)
ca_now=$(inbox sha256sum $g/ca.pem | cut -c1-64 || true)
if active && [ -n "$ca_now" ] && [ "$ca_now" != "$ca_before" ] && [ "$(via_proxy again)" = "hello from the box" ]; then
  pass "installed again after purge: active, a new CA, traffic flows"
else
  fail "install after purge: $(tail -n 10 <<<"$out")"
fi

# 7. A handover armed, then disarmed (the restart it was for did not come):
# the next stop stops everything.
armed=$(inbox busymate tunnel handover 2>&1 || true)
disarmed=$(inbox busymate tunnel handover --cancel 2>&1 || true)
inbox systemctl stop busymate || true
left=$(inbox sh -c "pgrep -f 'busymate-(app|tunnel|web)' || echo none" 2>&1 || true)
if grep -q "leaves the tunnel" <<<"$armed" && [ "$disarmed" = "handover disarmed" ] && [ "$left" = none ]; then
  pass "a disarmed handover: systemctl stop left no process"
else
  fail "disarmed handover: \"$armed\" / \"$disarmed\"; left: $left"
fi

if [ "$failures" -gt 0 ]; then
  say "journal of the unit:"
  inbox journalctl -b -u busymate --no-pager -o short-precise | tail -n 40 >&2 || true
fi
rm -rf "$work"
echo "package: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
