#!/usr/bin/env bash
# Installs what building and running Busymate needs, only what is missing,
# and only as root; otherwise says what to install.
set -euo pipefail
packages=(pkg-config libsqlite3-dev libsystemd-dev zlib1g-dev libbrotli-dev curl nftables)
# postgresql-15 for the cloud suite's real PostgreSQL.
# The tests also use ip(8), for a network namespace of their own, openssl(1)
# for certificates of their own, prlimit, setpriv and mount (util-linux)
# for the hostile-client and fault suites, and Chromium with its driver for
# the web page, dig(1) for the DNS forwarder, nghttp and h2load
# (nghttp2-client) and protoc (protobuf-compiler, for gRPC descriptor sets)
# for the HTTP/2 suite; the benchmark's origin is nginx,
# and h2load checks its direct HTTP/2 figures.
# nftables (nft) is what transparent mode runs.
[ "${1:-}" = "--test" ] && packages+=(dpkg-dev binutils iproute2 openssl util-linux python3 chromium chromium-driver bind9-dnsutils nghttp2-client protobuf-compiler postgresql-15)
# The benchmark's cloud cells run the cloud suite's PostgreSQL and contract double.
[ "${1:-}" = "--bench" ] && packages+=(nginx util-linux nghttp2-client chromium chromium-driver postgresql-15 python3 python3-pip python3-venv)
# make deb: dpkg-shlibdeps (dpkg-dev), strip (binutils) and lintian.
[ "${1:-}" = "--deb" ] && packages+=(dpkg-dev binutils lintian)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "busymate: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "busymate: missing packages: ${missing[*]}" >&2
    echo "busymate: install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
# Python packages come from pip into whichever python3 is first on the path.
# A stock Debian python refuses (PEP 668): say how to get one that takes them.
pip_install() {
  python3 -m pip install --quiet "$@" || {
    echo "busymate: pip could not install $* into $(command -v python3)." >&2
    echo "busymate: on Debian's own python, make a virtual environment first (python3 -m venv ~/.busymate-venv && . ~/.busymate-venv/bin/activate)," >&2
    echo "busymate: then run make again as root with that python first on the path: sudo env \"PATH=\$PATH\" make ..." >&2
    exit 1
  }
}
# The tests validate HAR exports with Python's jsonschema.
if [ "${1:-}" = "--test" ] && ! python3 -c 'import jsonschema' 2>/dev/null; then
  echo "busymate: installing jsonschema (pip) for the HAR check" >&2
  pip_install jsonschema
fi
# The web page's end-to-end test and the benchmark's page load drive Chromium with Selenium.
if { [ "${1:-}" = "--test" ] || [ "${1:-}" = "--bench" ]; } && ! python3 -c 'import selenium' 2>/dev/null; then
  echo "busymate: installing selenium (pip) for the web page's test and the benchmark's page load" >&2
  pip_install selenium
fi
# The HTTP/2 suite's peers: the h2 library (its clients, hostile ones too),
# hypercorn (an HTTP/2 origin) and grpcio (a gRPC client and server).
if [ "${1:-}" = "--test" ] && ! python3 -c 'import h2, hpack, hypercorn, grpc' 2>/dev/null; then
  echo "busymate: installing h2, hypercorn and grpcio (pip) for the HTTP/2 suite" >&2
  pip_install h2 hypercorn grpcio
fi
# The cloud suite: the official Supabase clients (run against the contract
# double), PyJWT for its tokens, psycopg for its PostgreSQL, websockets
# for Realtime.
if [ "${1:-}" = "--test" ] && ! python3 -c 'import supabase, postgrest, realtime, jwt, psycopg, websockets' 2>/dev/null; then
  echo "busymate: installing supabase, postgrest, realtime, PyJWT, psycopg and websockets (pip) for the cloud suite" >&2
  pip_install supabase postgrest realtime PyJWT "psycopg[binary]" websockets
fi
# The benchmark's cloud cells: the same double and PostgreSQL driver.
if [ "${1:-}" = "--bench" ] && ! python3 -c 'import jwt, psycopg, websockets, sys; sys.exit(int(websockets.__version__.split(".")[0]) < 15)' 2>/dev/null; then
  echo "busymate: installing PyJWT, psycopg and websockets (pip) for the benchmark's cloud cells" >&2
  pip_install PyJWT "psycopg[binary]" "websockets>=15"
fi
# The WebSocket suite: websockets 15 or later (its clients take a proxy).
if [ "${1:-}" = "--test" ] && ! python3 -c 'import websockets, sys; sys.exit(int(websockets.__version__.split(".")[0]) < 15)' 2>/dev/null; then
  echo "busymate: installing websockets 15 (pip) for the WebSocket suite" >&2
  pip_install "websockets>=15"
fi
# The devices suite evaluates the PAC files a device is given with a real
# PAC evaluator.
if [ "${1:-}" = "--test" ] && ! python3 -c 'import pacparser' 2>/dev/null; then
  echo "busymate: installing pacparser (pip) for the devices suite" >&2
  pip_install pacparser
fi
# The tunnel's user (units/busymate.sysusers does this on an installed system).
if [ "$(id -u)" -eq 0 ] && ! getent passwd busymate >/dev/null; then
  echo "busymate: creating system user and group busymate" >&2
  getent group busymate >/dev/null || groupadd --system busymate
  useradd --system --gid busymate --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin busymate
fi
# The web front's user: in group busymate (the store, settings.json,
# web-token), but another uid than the tunnel's, which cannot read ca.key.
if [ "$(id -u)" -eq 0 ] && ! getent passwd busymate-web >/dev/null; then
  echo "busymate: creating system user busymate-web" >&2
  useradd --system --user-group --groups busymate --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin busymate-web
fi
