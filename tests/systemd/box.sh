# The nspawn box both systemd-level suites boot (tests/systemd/run.sh, the
# unit installed with `make install`; tests/package/run.sh, the .deb
# installed with apt): Debian's own systemd as PID 1 of a systemd-nspawn
# container with only loopback, commands sent in through nsenter.
# Sourced, after setting: name (letters, digits, - and _), box_dir, root,
# box_packages (debootstrap's --include), and say(); box_bind_swift (set by
# default) binds the toolchain's /opt/swift for binaries that are not
# linked statically, empty for none.
box_bind_swift=${box_bind_swift-1}

box_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

ensure_tools() {
  local missing=()
  command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

mirror() {
  local u
  u=$(awk 'tolower($1)=="uris:" {for (i=2;i<=NF;i++) print $i}' /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | grep -v security | grep -i debian | head -n1 || true)
  [ -n "$u" ] || u=$(awk '$1=="deb" {print ($2 ~ /^\[/) ? $3 : $2}' /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1)
  echo "${u:-http://deb.debian.org/debian}"
}

marker=$root/.busymate-box-$(printf %s "$box_packages" | md5sum | cut -c1-8)

ensure_rootfs() {
  [ -f "$marker" ] && return 0
  rm -rf "$root"
  mkdir -p "$box_dir"
  . /etc/os-release
  say "debootstrap ${VERSION_CODENAME:-bookworm} into $root (once per machine)"
  debootstrap --variant=minbase --include="$box_packages" \
    "${VERSION_CODENAME:-bookworm}" "$root" "$(mirror)" >"$box_dir/debootstrap.log" 2>&1 \
    || { tail -n 20 "$box_dir/debootstrap.log" >&2; exit 1; }
  rm -f "$root"/var/cache/apt/archives/*.deb
  echo "$name" >"$root/etc/hostname"
  ln -sf /dev/null "$root/etc/systemd/system/console-getty.service"
  mkdir -p "$root/var/log/journal"
  touch "$marker"
}

# nspawn with --keep-unit on a host whose PID 1 is not systemd makes its
# cgroups under the caller's; give it cgroups of its own.
cgroup_dirs() {
  for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do [ -d "$h" ] && echo "$h"; done
  [ -f /sys/fs/cgroup/cgroup.controllers ] && echo /sys/fs/cgroup
  return 0
}
cgroup_cleanup() {
  for h in $(cgroup_dirs); do
    [ -d "$h/$name" ] && find "$h/$name" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

nspawn_pid=
leader() { pgrep -P "$nspawn_pid" -x systemd | head -n1; }
inbox() { nsenter -t "$(leader)" -a env -i PATH=$box_path HOME=/root LANG=C.UTF-8 "$@"; }
# This boot's entries of the unit. Captured, not piped into `grep -q`: with
# pipefail, grep leaving early would fail the pipeline through SIGPIPE.
journal() { inbox journalctl -b -u busymate --no-pager "$@"; }

boot() {
  cgroup_cleanup
  : >"$box_dir/console.log"
  (
    for h in $(cgroup_dirs); do mkdir -p "$h/$name" && echo "$BASHPID" >"$h/$name/cgroup.procs" || true; done
    exec setsid systemd-nspawn -D "$root" -b -M "$name" --register=no --keep-unit --console=passive \
      --private-network ${box_bind_swift:+--bind-ro=/opt/swift} </dev/null >>"$box_dir/console.log" 2>&1
  ) &
  nspawn_pid=$!
  local state=""
  for _ in $(seq 1 600); do
    kill -0 "$nspawn_pid" 2>/dev/null || { cat "$box_dir/console.log" >&2; say "nspawn exited during boot"; exit 1; }
    if [ -n "$(leader || true)" ]; then
      state=$(inbox systemctl is-system-running 2>/dev/null || true)
      case "$state" in running|degraded) break ;; esac
    fi
    sleep 0.1
  done
  case "$state" in running|degraded) say "booted ($state)" ;; *) say "boot did not finish: ${state:-no state}"; exit 1 ;; esac
}

poweroff() {
  [ -n "$nspawn_pid" ] || return 0
  if kill -0 "$nspawn_pid" 2>/dev/null; then
    kill -TERM "$nspawn_pid"
    for _ in $(seq 1 300); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$nspawn_pid" 2>/dev/null && kill -KILL "$nspawn_pid"
  fi
  wait "$nspawn_pid" 2>/dev/null || true
  cgroup_cleanup
}
