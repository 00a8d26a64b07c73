#!/usr/bin/env bash
# Boots Debian's own systemd as PID 1 of a systemd-nspawn container, installs
# Busymate into it with `make install`, and checks the unit for real:
# Type=notify readiness, the STATUS= pill, journald fields, reload, watchdog,
# the tunnel outliving a supervisor crash, and a clean stop.
#
#   tests/systemd/run.sh          (as root; about 2 minutes the first time on
#                                  a machine, for the debootstrap)
#
# The container is named $BUSYMATE_BOX_NAME (default busymate-box) and its
# rootfs is kept in $BUSYMATE_BOX_DIR (default /var/tmp/$BUSYMATE_BOX_NAME)
# and reused; the container has its own network namespace with only loopback.
# Two runs on one machine need distinct names (nspawn locks the rootfs, and
# the name also names the box's cgroups):
#
#   BUSYMATE_BOX_NAME=busymate-box-mine tests/systemd/run.sh
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
name=${BUSYMATE_BOX_NAME:-busymate-box}
case "$name" in
  ''|*[!A-Za-z0-9_-]*) echo "systemd-test: BUSYMATE_BOX_NAME must be letters, digits, - and _ (got \"$name\")" >&2; exit 2 ;;
esac
box_dir=${BUSYMATE_BOX_DIR:-/var/tmp/$name}
root=$box_dir/rootfs
failures=0
passes=0

say() { printf 'systemd-test: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; failures=$((failures + 1)); }
pass() { say "ok: $*"; passes=$((passes + 1)); }

[ "$(id -u)" -eq 0 ] || { say "skipped: booting systemd in nspawn needs root"; exit 0; }

# What the installed binaries need at run time, besides systemd and glibc.
box_packages=systemd,systemd-sysv,dbus,procps,curl,busybox,libsystemd0,libsqlite3-0,libbrotli1,nftables
. "$top/tests/systemd/box.sh"

trap poweroff EXIT

ensure_tools
ensure_rootfs
# A fresh install every run: no state from the last one.
rm -rf "$root/var/lib/busymate" "$root/usr/local/bin/busymate"*
make -C "$top" --no-print-directory install DESTDIR="$root" PREFIX=/usr/local >/dev/null
mkdir -p "$root/srv/www" && echo "hello from the box" >"$root/srv/www/index.html"
cat >"$root/etc/systemd/system/box-origin.service" <<'UNIT'
[Service]
ExecStart=/bin/busybox httpd -f -p 127.0.0.1:8080 -h /srv/www
UNIT
# A stand-in for the account inside the box (its network is loopback only):
# the pairing function answers a claim with a device token for the uuid it
# was sent (unsigned: the appliance checks claims, not signatures), and the
# REST API takes every insert. What reached it is logged for the checks.
rm -rf "$root/srv/account" && mkdir -p "$root/srv/account/cgi-bin"
cat >"$root/srv/account/cgi-bin/account" <<'CGI'
#!/bin/sh
body=$(head -c "${CONTENT_LENGTH:-0}")
printf '%s %s %s\n' "$REQUEST_METHOD" "$PATH_INFO" "$(printf '%s' "$body" | head -c 400)" >>/srv/account/requests.log
b64url() { base64 | tr -d '\n=' | tr '/+' '_-'; }
case "$PATH_INFO" in
/functions/v1/device-pair)
  case "$body" in
  *'"claim"'*)
    uuid=$(printf '%s' "$body" | sed -n 's/.*"device_uuid" *: *"\([0-9a-fA-F-]*\)".*/\1/p')
    now=$(date +%s)
    header=$(printf '{"alg":"HS256","typ":"JWT"}' | b64url)
    claims=$(printf '{"role":"authenticated","sub":"0b5e55ed-0000-4000-8000-00000000b0c5","iat":%s,"exp":%s,"app_metadata":{"user_type":"device","device_uuid":"%s"}}' \
      "$now" "$((now + 31536000))" "$uuid" | b64url)
    printf 'Content-Type: application/json\r\n\r\n{"token":"%s.%s.Ym94LXNpZ25hdHVyZQ","jti":"box-jti-1","expires_at":"2099-01-01T00:00:00Z"}' "$header" "$claims" ;;
  *) printf 'Content-Type: application/json\r\n\r\n{"ok":true}' ;;
  esac ;;
/rest/v1/*) printf 'Status: 201 Created\r\nContent-Type: application/json\r\n\r\n' ;;
*) printf 'Status: 404 Not Found\r\nContent-Type: application/json\r\n\r\n{"message":"not here"}' ;;
esac
CGI
chmod 755 "$root/srv/account/cgi-bin/account"
cat >"$root/etc/systemd/system/box-account.service" <<'UNIT'
[Service]
ExecStart=/bin/busybox httpd -f -p 127.0.0.1:8081 -h /srv/account
UNIT
boot

inbox systemd-sysusers
inbox systemd-tmpfiles --create
inbox systemctl daemon-reload
inbox systemctl start box-origin box-account

# 0. The unit's sandbox: systemd's own exposure score stays at most 3.0.
max_exposure=3.0
security=$(inbox systemd-analyze security busymate.service --no-pager 2>&1 || true)
overall=$(grep -m1 'Overall exposure level for busymate.service' <<<"$security" || true)
exposure=$(sed -n 's/.*Overall exposure level for busymate\.service: \([0-9][0-9]*\.[0-9]\).*/\1/p' <<<"$overall")
say "systemd-analyze security: ${overall:-no overall line}"
if [ -z "$exposure" ]; then
  fail "systemd-analyze security busymate.service printed no exposure:"
  printf '%s\n' "$security" | tail -n 5 >&2
elif awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }'; then
  pass "exposure $exposure <= $max_exposure"
else
  fail "exposure $exposure > $max_exposure; what it counts against the unit:"
  grep '✗' <<<"$security" >&2 || true
fi

# 1. Type=notify: start returns once the supervisor sent READY=1.
if inbox systemctl start busymate; then pass "systemctl start busymate returned"; else fail "systemctl start busymate"; fi
[ "$(inbox systemctl is-active busymate)" = active ] && pass "unit is active" || fail "unit is not active"

# 2. The STATUS= pill.
status_text=$(inbox systemctl show -p StatusText --value busymate)
case "$status_text" in
  *"proxy :9090"*" req/s · "*" flows · "*" devices · "*"web :9091"*"CA ok"*) pass "StatusText: $status_text" ;;
  *) fail "StatusText is \"$status_text\"" ;;
esac

# 3. Traffic through the proxy inside the box.
body=$(inbox curl -sS --max-time 5 -x http://127.0.0.1:9090 http://127.0.0.1:8080/index.html || true)
[ "$body" = "hello from the box" ] && pass "proxied a request" || fail "proxy answered \"$body\""

# 3b. It was captured: the CLI reads it back from the store.
sleep 0.3
captured=$(inbox /usr/local/bin/busymate list --json --group /var/lib/busymate/group || true)
case "$captured" in *'"url": "http://127.0.0.1:8080/index.html"'*|*'"url" : "http://127.0.0.1:8080/index.html"'*|*'"url":"http://127.0.0.1:8080/index.html"'*) pass "the request is in the capture store" ;; *) fail "busymate list --json: $captured" ;; esac

# 4. The tunnel runs as busymate, with no capabilities, not even in its
# bounding set (the unit gives the supervisor CAP_SETPCAP for that drop).
# Capabilities and no-new-privs are per thread: every thread is checked, so a
# thread started before the drop would show.
tunnel_pid=$(inbox pgrep -x busymate-tunnel | head -n1 || true)
if [ -n "$tunnel_pid" ]; then
  proc_status=$(inbox cat /proc/"$tunnel_pid"/status || true)
  field() { awk -v k="$1:" '$1 == k {print $2}' <<<"$proc_status"; }
  uid=$(field Uid)
  nnp=$(field NoNewPrivs)
  caps="CapEff $(field CapEff) CapPrm $(field CapPrm) CapInh $(field CapInh) CapAmb $(field CapAmb) CapBnd $(field CapBnd)"
  threads=$(inbox sh -c 'for s in /proc/$1/task/*/status; do awk '"'"'$1 ~ /^(Uid|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):$/ {printf "%s %s ", $1, $2} END {print ""}'"'"' "$s"; done' sh "$tunnel_pid" || true)
  n_threads=$(grep -c . <<<"$threads" || true)
  odd=$(grep -vx "Uid: $uid CapInh: 0000000000000000 CapPrm: 0000000000000000 CapEff: 0000000000000000 CapBnd: 0000000000000000 CapAmb: 0000000000000000 NoNewPrivs: 1 " <<<"$threads" || true)
  [ "$uid" != 0 ] && [ "$nnp" = 1 ] \
    && [ "$caps" = "CapEff 0000000000000000 CapPrm 0000000000000000 CapInh 0000000000000000 CapAmb 0000000000000000 CapBnd 0000000000000000" ] \
    && [ "$n_threads" -gt 0 ] && [ -z "$odd" ] \
    && pass "tunnel $tunnel_pid: uid $uid, $caps, NoNewPrivs $nnp (all $n_threads threads)" \
    || fail "tunnel privileges: uid $uid $caps NoNewPrivs $nnp; threads that differ: ${odd:-none} ($n_threads threads)"
else
  fail "no busymate-tunnel process"
fi

# 4a. The web front too: another uid, no capabilities, no new privileges.
web_pid=$(inbox pgrep -x busymate-web | head -n1 || true)
if [ -n "$web_pid" ]; then
  web_status=$(inbox cat /proc/"$web_pid"/status || true)
  wfield() { awk -v k="$1:" '$1 == k {print $2}' <<<"$web_status"; }
  [ "$(wfield Uid)" != 0 ] && [ "$(wfield CapEff)" = 0000000000000000 ] && [ "$(wfield CapBnd)" = 0000000000000000 ] && [ "$(wfield NoNewPrivs)" = 1 ] \
    && pass "web front $web_pid: uid $(wfield Uid), no capabilities, NoNewPrivs" \
    || fail "web front privileges: uid $(wfield Uid) CapEff $(wfield CapEff) CapBnd $(wfield CapBnd) NoNewPrivs $(wfield NoNewPrivs)"
else
  fail "no busymate-web process"
fi

# 4ab. The web front has a user of its own (sysusers): as that user and its
# group, the page's files open, the tunnel's secrets do not, and the tunnel
# cannot be signalled.
web_uid=$(inbox id -u busymate-web 2>/dev/null || echo none)
as_web() { inbox setpriv --reuid=busymate-web --regid=busymate --clear-groups -- "$@" >/dev/null 2>&1; }
g=/var/lib/busymate/group
denied=""
as_web cat $g/ca.key && denied="$denied ca.key"
as_web ls /var/lib/busymate/private && denied="$denied private"
as_web sh -c "kill -0 ${tunnel_pid:-1}" && denied="$denied kill-tunnel"
as_web cat $g/web-token $g/ca.pem || denied="$denied cannot-read-web-token-or-ca.pem"
# The tunnel still reads the key (through its ACL): interception is on.
grep -Eq '"interception" *: *"on"' <<<"$(inbox /usr/local/bin/busymate status --json --group $g || true)" || denied="$denied interception-off"
if [ "$(wfield Uid)" = "$web_uid" ] && [ "$web_uid" != "$(inbox id -u busymate)" ] && [ -z "$denied" ]; then
  pass "web front runs as busymate-web ($web_uid): no ca.key, no private directory, no signal to the tunnel"
else
  fail "web front as its own user: uid $(wfield Uid) (busymate-web is $web_uid); wrongly allowed or refused:$denied"
fi

# 4aa. The page: its URL with the token opens it; without, only the login.
web_url=$(inbox /usr/local/bin/busymate web url --group /var/lib/busymate/group || true)
page=$(inbox curl -sS -L --max-time 5 -c /root/jar "$web_url" || true)
refused=$(inbox curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:9091/api/status || true)
case "$web_url $page" in
  "http://127.0.0.1:9091/login?token="*"<title>Busymate"*) [ "$refused" = 401 ] && pass "busymate web url opens the page; without the token the API says $refused" || fail "the API without the token said $refused" ;;
  *) fail "busymate web url: \"$web_url\"; the page: $(head -c 200 <<<"$page")" ;;
esac

# 4b. The supervisor kept the group directory's modes (chmod drops the setgid
# bit of a directory whose group the caller is not in, without CAP_FSETID),
# so the sockets in notify/ are the group's.
modes=$(inbox sh -c 'cd /var/lib/busymate/group && stat -c "%n %a %U:%G" "$PWD" "$PWD/notify" "$PWD/bodies" "$PWD"/notify/*.sock' || true)
expected_dirs=$'/var/lib/busymate/group 3775 root:busymate\n/var/lib/busymate/group/notify 3770 root:busymate\n/var/lib/busymate/group/bodies 3770 root:busymate'
if [ "$(head -n 3 <<<"$modes")" = "$expected_dirs" ] && [ "$(tail -n +4 <<<"$modes" | grep -c .)" -ge 2 ] \
   && ! tail -n +4 <<<"$modes" | grep -qv ' 660 [a-z-]*:busymate$'; then
  pass "group directory modes kept; notify sockets: $(tail -n +4 <<<"$modes" | awk '{print $3 " " $2}' | sort -u | tr '\n' ' ')"
else
  fail "group directory modes:"$'\n'"$modes"
fi

# 5. journald fields.
supervisor_log=$(journal SUBSYSTEM=supervisor -o cat)
n=$(printf '%s\n' "$supervisor_log" | grep -c . || true)
[ "$n" -gt 0 ] && pass "journalctl -u busymate SUBSYSTEM=supervisor: $n entries" || fail "no SUBSYSTEM=supervisor entries"
tunnel_json=$(journal SYSLOG_IDENTIFIER=busymate-tunnel SUBSYSTEM=tunnel -o json)
if grep -q '"PRIORITY"' <<<"$tunnel_json" && grep -q '"MESSAGE":"ready"' <<<"$tunnel_json"; then
  pass "the tunnel logs to journald with SUBSYSTEM and PRIORITY"
else
  fail "no structured tunnel entries in the journal"
fi

web_log=$(journal SYSLOG_IDENTIFIER=busymate-web SUBSYSTEM=web -o cat)
grep -q "serving the web page" <<<"$web_log" && pass "the web front logs to journald (SYSLOG_IDENTIFIER=busymate-web SUBSYSTEM=web)" \
  || fail "no busymate-web entries in the journal"

# 6. Reload (SIGHUP): RELOADING=1, then READY=1; still active.
if inbox systemctl reload busymate && sleep 0.5 && [ "$(inbox systemctl is-active busymate)" = active ] \
   && grep -q "reloading (SIGHUP)" <<<"$(journal SUBSYSTEM=supervisor -o cat)"; then
  pass "systemctl reload"
else
  fail "systemctl reload"
fi

# 7. The watchdog is armed and fed.
wd=$(inbox systemctl show -p WatchdogUSec --value busymate)
sleep 1.5
fed=$(inbox systemctl show -p WatchdogTimestampMonotonic --value busymate)
[ "$wd" = 30s ] && [ "${fed:-0}" -gt 0 ] && pass "watchdog $wd, last ping at $fed" || fail "watchdog: WatchdogUSec=$wd WatchdogTimestampMonotonic=$fed"

# 8. Invalid settings reach the STATUS= line; the last good ones stay.
inbox sh -c 'cp /var/lib/busymate/group/settings.json /root/good.json && printf "{\n  \"mode\": \"proxy\",,\n}\n" > /var/lib/busymate/group/settings.json'
sleep 1
status_text=$(inbox systemctl show -p StatusText --value busymate)
case "$status_text" in *"settings.json invalid at 2:19"*) pass "StatusText shows the error: $status_text" ;; *) fail "StatusText with invalid settings: \"$status_text\"" ;; esac
inbox sh -c 'cat /root/good.json > /var/lib/busymate/group/settings.json'

# 8b. Pairing under the unit: the claim made by the supervisor's child
# (the unit's sandbox lets it reach the account), the private copy where
# the unit may write it, the mirror for the tunnel's user only (an ACL on
# the unit's file system), the running tunnel sending to the account.
account=http://127.0.0.1:8081/cgi-bin/account
pair_out=$(inbox /usr/local/bin/busymate pair BOX-CODE --api $account --anon-key box-anon-key --name box --group $g 2>&1 || true)
private_facts=$(inbox stat -c '%a %U' /var/lib/busymate/private/device-jwt.json 2>&1 || true)
mirror_facts=$(inbox stat -c '%U' $g/device-jwt.json 2>&1 || true)
as_tunnel() { inbox setpriv --reuid=busymate --regid=busymate --clear-groups -- "$@" >/dev/null 2>&1; }
if grep -q '^paired as "box"' <<<"$pair_out" && [ "$private_facts" = "600 root" ] && [ "$mirror_facts" = root ] \
   && as_tunnel cat $g/device-jwt.json && ! as_web cat $g/device-jwt.json; then
  pass "busymate pair under the unit: private copy 600 root, the mirror root's and the tunnel's only ($pair_out)"
else
  fail "busymate pair: \"$pair_out\"; private: $private_facts; mirror owner: $mirror_facts"
fi
inbox curl -sS --max-time 5 -x http://127.0.0.1:9090 http://127.0.0.1:8080/index.html?paired >/dev/null || true
for _ in $(seq 1 50); do grep -q 'index.html?paired' "$root/srv/account/requests.log" 2>/dev/null && break; sleep 0.2; done
cloud_out=$(inbox /usr/local/bin/busymate cloud status --group $g 2>&1 || true)
status_text=$(inbox systemctl show -p StatusText --value busymate)
if grep -q 'POST /rest/v1/entries .*index.html?paired' "$root/srv/account/requests.log" 2>/dev/null \
   && grep -q 'paired, expires in' <<<"$cloud_out" && grep -q '· paired ·' <<<"$status_text"; then
  pass "the tunnel took the token live and sent the exchange to the account; StatusText: $status_text"
else
  fail "after pairing: cloud status \"$cloud_out\"; StatusText \"$status_text\"; the account saw: $(tail -n 5 "$root/srv/account/requests.log" 2>/dev/null)"
fi

# DESIGN's subsystems: the cloud sink and the rules have their own.
cloud_log=$(journal SUBSYSTEM=cloud -o cat)
grep -q 'paired' <<<"$cloud_log" && pass "journalctl SUBSYSTEM=cloud: the pairing ($(grep -c . <<<"$cloud_log") entries)" \
  || fail "no SUBSYSTEM=cloud entry for the pairing: \"$(tail -n 3 <<<"$cloud_log")\""
inbox /usr/local/bin/busymate rules add box-block --match '127.0.0.1:8080/blocked*' --action block --group $g >/dev/null 2>&1 || true
for _ in $(seq 1 50); do grep -q '1 rule in force' <<<"$(journal SUBSYSTEM=rules -o cat)" && break; sleep 0.2; done
rules_log=$(journal SUBSYSTEM=rules -o cat)
grep -q '1 rule in force' <<<"$rules_log" && pass "journalctl SUBSYSTEM=rules: the rule set in force" \
  || fail "no SUBSYSTEM=rules entry after busymate rules add: \"$(tail -n 3 <<<"$rules_log")\""
inbox /usr/local/bin/busymate rules remove box-block --group $g >/dev/null 2>&1 || true

# 9. A crashed supervisor: systemd restarts it, the tunnel lives on and is adopted.
inbox systemctl kill -s SIGKILL --kill-whom=main busymate
# Active once the new supervisor is ready, which is before it has adopted the
# web front: wait for both adoptions to be logged too.
for _ in $(seq 1 50); do
  [ "$(inbox systemctl show -p NRestarts --value busymate)" = 1 ] && [ "$(inbox systemctl is-active busymate)" = active ] \
    && grep -q "adopted the running tunnel" <<<"$(journal SUBSYSTEM=supervisor -o cat)" \
    && grep -q "adopted the running web front" <<<"$(journal SUBSYSTEM=web -o cat)" && break
  sleep 0.2
done
after=$(inbox pgrep -x busymate-tunnel | tr '\n' ' ')
web_after=$(inbox pgrep -x busymate-web | tr '\n' ' ')
if [ "$(inbox systemctl show -p NRestarts --value busymate)" = 1 ] && [ "$after" = "$tunnel_pid " ] && [ "$web_after" = "$web_pid " ] \
   && grep -q "adopted the running tunnel" <<<"$(journal SUBSYSTEM=supervisor -o cat)" \
   && grep -q "adopted the running web front" <<<"$(journal SUBSYSTEM=web -o cat)"; then
  pass "supervisor restarted by systemd and adopted tunnel $tunnel_pid and web front $web_pid"
else
  fail "after killing the supervisor: NRestarts=$(inbox systemctl show -p NRestarts --value busymate), tunnels: $after, web fronts: $web_after"
fi
body=$(inbox curl -sS --max-time 5 -x http://127.0.0.1:9090 http://127.0.0.1:8080/index.html || true)
[ "$body" = "hello from the box" ] && pass "proxied after the supervisor restart" || fail "proxy after restart answered \"$body\""

# 10. Transparent mode inside the unit's sandbox (the box has a network of
# its own): the supervisor installs its nftables table, and stop removes it.
mode_out=$(inbox busymate mode transparent --group /var/lib/busymate/group 2>&1 || true)
# The table is named per group directory (busymate-<hash>): read the whole ruleset.
table=$(inbox nft list ruleset 2>&1 || true)
if grep -q "redirect to :9180" <<<"$table" && grep -q "meta skuid $(inbox id -u busymate) return" <<<"$table"; then
  pass "busymate mode transparent: the table is installed, sparing the tunnel's uid ($mode_out)"
else
  fail "busymate mode transparent: \"$mode_out\"; table: $table"
fi

# 10b. Unpairing under the unit: both copies go, the account is told.
unpair_out=$(inbox /usr/local/bin/busymate unpair --group $g 2>&1 || true)
if grep -q "^unpaired; the server was told" <<<"$unpair_out" && ! inbox test -e /var/lib/busymate/private/device-jwt.json && ! inbox test -e $g/device-jwt.json \
   && grep -q '"unpair"' "$root/srv/account/requests.log"; then
  pass "busymate unpair under the unit: $unpair_out"
else
  fail "busymate unpair: \"$unpair_out\""
fi

# 11. Stop leaves nothing behind: no process, no table.
inbox systemctl stop busymate
left=$(inbox pgrep -f 'busymate-(app|tunnel|web)' || true)
[ -z "$left" ] && [ "$(inbox systemctl is-active busymate || true)" = inactive ] && pass "systemctl stop left no process" || fail "processes left after stop: $left"
tables=$(inbox nft list tables 2>&1 || true)
grep -q busymate <<<"$tables" && fail "the table is left after stop: $tables" || pass "systemctl stop removed the table"

if [ "$failures" -gt 0 ]; then
  say "journal of the unit:"
  journal -o short-precise | tail -n 40 >&2 || true
fi
echo "systemd: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
