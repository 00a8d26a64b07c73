#!/usr/bin/env python3
"""The contract double against the official clients.

Starts PostgreSQL 15 (pg.py) and the double (double.py), then drives them with
the official PyPI clients, supabase (create_client, functions.invoke, .table,
.rpc), postgrest and realtime (AsyncRealtimeClient), exactly as an application
would: if the double misread what they send, or answered in a shape they do
not take, a check here fails. PostgreSQL's own tables are the judge of what
was written. One line per check; exit 0 when all pass. Under a minute.

Last, it prints what the clients actually sent (query strings, Prefer
headers, Realtime messages), for the Swift client to match.
"""
import asyncio
import faulthandler
import json
import os
import sys
import time
import uuid
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
warnings.filterwarnings("ignore", category=DeprecationWarning)

import httpx  # noqa: E402
import jwt  # noqa: E402
from postgrest import APIError, SyncPostgrestClient  # noqa: E402
from realtime import AsyncRealtimeClient, RealtimeSubscribeStates  # noqa: E402
from supabase import create_client  # noqa: E402
from supabase_functions.errors import FunctionsHttpError  # noqa: E402

from double import CloudDouble, make_token  # noqa: E402
from pg import Postgres  # noqa: E402

SECRET = "contract-secret-" + uuid.uuid4().hex      # 32+ bytes, as a real project's
ANON_KEY = "sb_publishable_" + uuid.uuid4().hex     # not a JWT, as Supabase's new keys
FAILURES = []


def check(what, condition, detail=""):
    if condition:
        print("ok   " + what, flush=True)
    else:
        FAILURES.append(what)
        print("FAIL " + what + (" (%s)" % (detail,) if detail != "" else ""), flush=True)
    return condition


def raises(fn, kind=Exception):
    try:
        fn()
    except kind as e:
        return e
    return None


def rest_client(url, token):
    """postgrest-py on its own, as a device would use it: apikey + the device JWT."""
    return SyncPostgrestClient(url + "/rest/v1", headers={"apikey": ANON_KEY}).auth(token)


BASE_TS = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())


def entry_rows(device, n, start=0):
    """n rows numbered from start: the same number is the same request_id and ts
    (a retry resends the same ts, or the partitioned table's key misses it)."""
    return [{"request_id": str(uuid.UUID(int=(uuid.UUID(device).int & ~0xFFFF) | (start + i))), "device_uuid": device,
             "ts": "%s.%03dZ" % (BASE_TS, (start + i) % 1000), "kind": "event",
             "payload": {"i": start + i, "url": "http://x/%d" % (start + i)}} for i in range(n)]


# --- pairing --------------------------------------------------------------------------------

def check_pairing(double, pg, client, device):
    code = double.mint_code()
    claim = {"action": "claim", "code": code, "device_uuid": device, "name": "contract-box", "model": "x86_64",
             "os_version": "Debian 12", "setup": {"mode": "proxy"}}
    answer = json.loads(client.functions.invoke("device-pair", {"body": claim}))
    check("functions.invoke(device-pair, claim) returns token, jti, expires_at",
          set(answer) == {"token", "jti", "expires_at"}, answer)
    claims = jwt.decode(answer["token"], SECRET, algorithms=["HS256"], audience="authenticated")
    check("the token: HS256, role/aud authenticated, sub the owner, app_metadata device claim, jti, 365 days",
          claims["role"] == "authenticated" and claims["app_metadata"] == {"user_type": "device", "device_uuid": device}
          and claims["jti"] == answer["jti"] and abs(claims["exp"] - claims["iat"] - 365 * 86400) < 5, claims)
    check("expires_at is ISO 8601 and matches exp", answer["expires_at"] == time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(claims["exp"])),
          answer["expires_at"])
    row = pg.query("SELECT name, model, os_version, setup, jti, revoked, owner::text FROM devices WHERE device_uuid = %s", device)
    check("PostgreSQL holds the device row from the claim",
          row == [("contract-box", "x86_64", "Debian 12", {"mode": "proxy"}, answer["jti"], False, claims["sub"])], row)
    check("the code is used up", pg.query("SELECT used FROM pairing_codes WHERE code = %s", code) == [(True,)])
    again = raises(lambda: client.functions.invoke("device-pair", {"body": claim}), FunctionsHttpError)
    check("the same code again: 400 invalid or expired pairing code",
          again is not None and again.status == 400 and again.message == "invalid or expired pairing code", again and again.to_dict())
    wrong = raises(lambda: client.functions.invoke("device-pair", {"body": dict(claim, code="NOPE-NOPE")}), FunctionsHttpError)
    check("a wrong code: 400", wrong is not None and wrong.status == 400)
    return answer["token"]


# --- PostgREST ------------------------------------------------------------------------------

def check_rest(double, pg, client, url, token, device, other):
    client.postgrest.auth(token)
    rows = entry_rows(device, 25)
    for attempt in (1, 2):
        client.table("entries").upsert(rows, returning="minimal", ignore_duplicates=True, on_conflict="request_id,ts",
                                       default_to_null=False).execute()
    n = pg.query("SELECT count(*), count(DISTINCT request_id) FROM entries WHERE device_uuid = %s", device)[0]
    check("upsert(ignore_duplicates, on_conflict=request_id,ts) twice: each row once in PostgreSQL", n == (25, 25), n)

    # the same through postgrest-py on its own, a partial overlap, default_to_null left on
    pgrst = rest_client(url, token)
    more = entry_rows(device, 10, start=20)
    pgrst.table("entries").upsert(more, returning="minimal", ignore_duplicates=True, on_conflict="request_id,ts").execute()
    n = pg.query("SELECT count(*) FROM entries WHERE device_uuid = %s", device)[0][0]
    check("postgrest-py: an overlapping batch adds only the new rows", n == 30, n)
    stored = pg.query("SELECT payload, to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM entries WHERE request_id = %s",
                      rows[3]["request_id"])
    check("a row's payload and ts are stored as sent", stored == [(rows[3]["payload"], rows[3]["ts"])], stored)

    dup = raises(lambda: pgrst.table("entries").insert(rows[:2], returning="minimal").execute(), APIError)
    check("a plain insert of a duplicate: the whole batch fails, 409 23505", dup is not None and dup.code == "23505", dup and dup.json())
    raw = httpx.post(url + "/rest/v1/entries", headers={"apikey": ANON_KEY, "Authorization": "Bearer " + token,
                                                          "Prefer": "return=minimal, resolution=ignore-duplicates", "Content-Type": "application/json"},
                     params={"columns": "request_id,device_uuid,ts,kind,payload", "on_conflict": "request_id,ts"},
                     content=json.dumps(rows[:3]))
    check("Prefer with a space after the comma (the Swift client's) works too: 201, empty body",
          raw.status_code == 201 and raw.content == b"", (raw.status_code, raw.text))

    unknown = raises(lambda: pgrst.table("entries").insert([dict(rows[0], request_id="u1", colour="red")], returning="minimal").execute(), APIError)
    check("an unknown column: 400 PGRST204", unknown is not None and unknown.code == "PGRST204", unknown and unknown.json())

    foreign = raises(lambda: pgrst.table("entries").insert(entry_rows(other, 1), returning="minimal").execute(), APIError)
    check("a row for another device: 403 42501 (row-level security)", foreign is not None and foreign.code == "42501", foreign and foreign.json())

    theirs = entry_rows(other, 4, start=100)
    for r in theirs:
        pg.query("INSERT INTO entries (request_id, device_uuid, ts, kind, payload) VALUES (%s, %s, %s, %s, %s::jsonb)",
                 r["request_id"], r["device_uuid"], r["ts"], r["kind"], json.dumps(r["payload"]))
    mine = client.table("entries").select("request_id", count="exact").eq("device_uuid", device).execute()
    check("select eq(device_uuid, mine): my 30 rows, count from Content-Range", len(mine.data) == 30 and mine.count == 30, (len(mine.data), mine.count))
    seen = client.table("entries").select("request_id,device_uuid").eq("device_uuid", other).execute()
    everything = client.table("entries").select("device_uuid").execute()
    check("another device's rows are invisible (RLS), filtered or not",
          seen.data == [] and {r["device_uuid"] for r in everything.data} == {device}, (len(seen.data), len(everything.data)))
    few = client.table("entries").select("request_id,payload").eq("device_uuid", device).in_("request_id", [rows[0]["request_id"], rows[1]["request_id"]]) \
        .order("request_id", desc=True).limit(1).execute()
    check("in_, order and limit", [r["request_id"] for r in few.data] == [max(rows[0]["request_id"], rows[1]["request_id"])], few.data)

    status = {"device_uuid": device, "online": True, "last_heartbeat_at": "2026-01-01T00:00:00Z", "vpn_state": "off", "source": "tunnel"}
    client.table("device_status").upsert(status, on_conflict="device_uuid", returning="minimal").execute()
    client.table("device_status").upsert(dict(status, online=False, vpn_state="on"), on_conflict="device_uuid", returning="minimal").execute()
    got = pg.query("SELECT online, vpn_state, source FROM device_status WHERE device_uuid = %s", device)
    check("device_status upsert(on_conflict=device_uuid) merges into one row", got == [(False, "on", "tunnel")], got)
    back = client.table("device_status").upsert(dict(status, country="DE"), on_conflict="device_uuid").execute()
    check("upsert with return=representation: 201 with the row", len(back.data) == 1 and back.data[0]["country"] == "DE", back.data)

    pg.query("UPDATE settings_global SET settings = %s::jsonb", json.dumps({"a": 1, "b": 2, "connection_type": "vpn", "ssl_proxy_domains": ["x.com"]}))
    pg.query("INSERT INTO settings_device (device_uuid, settings) VALUES (%s, %s::jsonb)", device, json.dumps({"b": 3, "connection_type": None}))
    pg.query("INSERT INTO settings_device (device_uuid, settings) VALUES (%s, %s::jsonb)", other, json.dumps({"a": 99}))
    merged = client.rpc("effective_settings_for_device", {"target_uuid": device}).execute()
    check("rpc effective_settings_for_device: global merged with the device's, the device winning, null inheriting",
          merged.data == {"a": 1, "b": 3, "connection_type": "vpn", "ssl_proxy_domains": ["x.com"]}, merged.data)
    foreign = client.rpc("effective_settings_for_device", {"target_uuid": other}).execute()
    check("rpc for another device: its settings stay hidden (RLS), the global ones come", foreign.data.get("a") == 1, foreign.data)

    expired = make_token(device, None, -3600, secret=SECRET)
    e = raises(lambda: rest_client(url, expired).table("entries").select("request_id").execute(), APIError)
    check("an expired token: APIError PGRST303", e is not None and e.code == "PGRST303", e and e.json())
    raw = httpx.get(url + "/rest/v1/entries", headers={"apikey": ANON_KEY, "Authorization": "Bearer " + expired})
    check("... as 401 with WWW-Authenticate: Bearer error=\"invalid_token\"",
          raw.status_code == 401 and raw.headers.get("www-authenticate", "").startswith('Bearer error="invalid_token"'), raw.headers)
    jti = jwt.decode(token, options={"verify_signature": False})["jti"]
    skewed = make_token(device, None, -10, secret=SECRET, jti=jti)  # same jti: the device's current token
    ok = rest_client(url, skewed).table("entries").select("request_id").limit(1).execute()
    check("a token expired 10 s ago still passes (30 s leeway)", len(ok.data) == 1)
    forged = make_token(device, None, 3600, secret=SECRET + "x")
    e = raises(lambda: rest_client(url, forged).table("entries").select("request_id").execute(), APIError)
    check("a bad signature: APIError PGRST301", e is not None and e.code == "PGRST301", e and e.json())
    e = raises(lambda: rest_client(url, "not-a-jwt").table("entries").select("request_id").execute(), APIError)
    check("an undecodable token: APIError PGRST301", e is not None and e.code == "PGRST301", e and e.json())
    raw = httpx.get(url + "/rest/v1/entries", headers={"Authorization": "Bearer " + token})
    check("no apikey: 401 from the gateway", raw.status_code == 401 and "API key" in raw.text, (raw.status_code, raw.text))
    anon = raises(lambda: create_client(url, ANON_KEY).table("entries").insert(entry_rows(device, 1, start=500), returning="minimal").execute(), APIError)
    check("the anon key alone cannot insert (401 42501)", anon is not None and anon.code == "42501", anon and anon.json())


def check_faults(double, pg, url, token, device):
    pgrst = rest_client(url, token)
    before = pg.query("SELECT count(*) FROM entries WHERE device_uuid = %s", device)[0][0]
    double.control(mode="500", count=1)
    e = raises(lambda: pgrst.table("entries").insert(entry_rows(device, 2, start=700), returning="minimal").execute(), APIError)
    check("fault 500: APIError XX000, nothing written", e is not None and e.code == "XX000"
          and pg.query("SELECT count(*) FROM entries WHERE device_uuid = %s", device)[0][0] == before, e and e.json())
    ok = pgrst.table("entries").insert(entry_rows(device, 2, start=700), returning="minimal").execute()
    check("count=1: the next call is served again", ok is not None and double.control()["mode"] == "ok")
    double.control(mode="413", max_rows=5)
    small = pgrst.table("entries").upsert(entry_rows(device, 5, start=710), returning="minimal", ignore_duplicates=True, on_conflict="request_id,ts").execute()
    big = raises(lambda: pgrst.table("entries").upsert(entry_rows(device, 6, start=720), returning="minimal", ignore_duplicates=True,
                                                       on_conflict="request_id,ts").execute(), APIError)
    check("fault 413 max_rows=5: 5 rows pass, 6 get 413 (text/plain, as a gateway)", small is not None and big is not None and big.code == "413",
          big and big.json())
    double.control(mode="401")
    e = raises(lambda: pgrst.table("device_status").select("*").execute(), APIError)
    check("fault 401: reads as an expired token (PGRST303)", e is not None and e.code == "PGRST303")
    double.control(mode="down", count=2)
    for turn in ("reset", "close"):
        e = raises(lambda: httpx.post(url + "/rest/v1/entries", headers={"apikey": ANON_KEY, "Authorization": "Bearer " + token},
                                      json=entry_rows(device, 1, start=730)), httpx.TransportError)
        check("fault down: the connection ends without an answer (%s)" % turn, e is not None, repr(e))
    double.control(mode="garbage", count=2)
    e1 = raises(lambda: httpx.post(url + "/rest/v1/entries", headers={"apikey": ANON_KEY, "Authorization": "Bearer " + token},
                                   json=entry_rows(device, 1, start=740)), httpx.TransportError)
    e2 = raises(lambda: httpx.post(url + "/rest/v1/entries", headers={"apikey": ANON_KEY, "Authorization": "Bearer " + token},
                                   json=entry_rows(device, 1, start=741)), httpx.TransportError)
    check("fault garbage: a 201 cut short and non-HTTP bytes both fail the call", e1 is not None and e2 is not None, (repr(e1), repr(e2)))
    double.control(mode="slow", slow_seconds=0.5, count=1)
    started = time.monotonic()
    pgrst.table("entries").insert(entry_rows(device, 1, start=750), returning="minimal").execute()
    took = time.monotonic() - started
    written = pg.query("SELECT count(*) FROM entries WHERE payload->>'i' = '750'")[0][0]
    check("fault slow: answered after slow_seconds, row written", took >= 0.5 and written == 1, (took, written))
    paired = pgrst.table("entries").select("request_id").limit(1).execute()
    stats = httpx.get(url + "/_control/stats").json()
    check("back to ok; /_control/stats counts by status", paired.data and stats["fault"]["mode"] == "ok"
          and stats["by_status"].get("413") == 1 and stats["by_status"].get("dropped") == 2 and stats["by_status"].get("garbage") == 2, stats)
    after = pg.query("SELECT count(*) FROM entries WHERE payload->>'i' IN ('730', '740', '741')")[0][0]
    check("dropped and garbled calls wrote nothing", after == 0, after)


def check_unpair(double, pg, client, url, token, device):
    answer = json.loads(client.functions.invoke("device-pair", {"body": {"action": "unpair", "device_uuid": device},
                                                                "headers": {"Authorization": "Bearer " + token}}))
    check("functions.invoke(device-pair, unpair) with the device token: ok", answer == {"ok": True}, answer)
    check("PostgreSQL marks the device revoked", pg.query("SELECT revoked FROM devices WHERE device_uuid = %s", device) == [(True,)])
    e = raises(lambda: rest_client(url, token).table("entries").select("request_id").execute(), APIError)
    check("the revoked token: 401 PGRST301", e is not None and e.code == "PGRST301", e and e.json())
    code = double.mint_code()
    fresh = json.loads(client.functions.invoke("device-pair", {"body": {"action": "claim", "code": code, "device_uuid": device,
                                                                        "name": "contract-box", "model": "x", "os_version": "y"}}))["token"]
    ok = rest_client(url, fresh).table("entries").select("request_id").limit(1).execute()
    e = raises(lambda: rest_client(url, token).table("entries").select("request_id").execute(), APIError)
    check("re-pairing: the new token works, the old one stays refused", len(ok.data) == 1 and e is not None and e.code == "PGRST301")
    return fresh


# --- Realtime ---------------------------------------------------------------------------------

async def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.02)
    return condition()


async def subscribe(client, topic, config, **callbacks):
    states = []
    channel = client.channel(topic, {"config": config})
    for name, args in callbacks.items():
        getattr(channel, name)(*args)
    await channel.subscribe(lambda state, err: states.append((state, err)))
    return channel, states


async def check_realtime(double, pg, url, token, device, other):
    base = url + "/realtime/v1"
    box = AsyncRealtimeClient(base, ANON_KEY, auto_reconnect=False)
    dash = AsyncRealtimeClient(base, ANON_KEY, auto_reconnect=False)
    await box.set_auth(token)
    await dash.set_auth(double.user_token())
    await box.connect()
    await dash.connect()
    try:
        # presence on devices:all
        seen = []
        dash_all, states = await subscribe(dash, "devices:all", {"private": True, "broadcast": {"self": False}, "presence": {"key": "dashboard"}},
                                           on_presence_sync=(lambda: seen.append(time.monotonic()),))
        check("the dashboard joins private devices:all: SUBSCRIBED", states and states[-1][0] == RealtimeSubscribeStates.SUBSCRIBED, states)
        box_all, states = await subscribe(box, "devices:all", {"private": True, "broadcast": {"self": False},
                                                               "presence": {"key": device, "enabled": True}})
        check("the device joins devices:all with its presence key", states and states[-1][0] == RealtimeSubscribeStates.SUBSCRIBED, states)
        await box_all.track({"source": "main", "online_at": "now"})
        got = await wait_for(lambda: device in dash_all.presence_state() and dash_all.presence_state()[device][0].get("source") == "main")
        check("track: another client's presence sync shows the device, keyed by its presence key",
              got and len(seen) >= 2, (seen, dash_all.presence_state()))
        _, states = await subscribe(box, "breakpoint_events:all", {"private": True, "presence": {"key": device}})
        check("a device token is refused a private topic outside its own (breakpoint_events:all)",
              states and states[-1][0] == RealtimeSubscribeStates.CHANNEL_ERROR and "Unauthorized" in str(states[-1][1]), states)
        await box_all.track({"source": "tunnel"})
        got = await wait_for(lambda: dash_all.presence_state().get(device, [{}])[0].get("source") == "tunnel"
                             and len(dash_all.presence_state()[device]) == 1)
        check("track again: the presence is updated in place (one entry)", got, dash_all.presence_state())

        # broadcasts on device:<uuid>
        heard = []
        box_dev, states = await subscribe(box, "device:" + device, {"private": True, "broadcast": {"self": False}, "presence": {"key": device}},
                                          on_broadcast=("breakpoint-continue", lambda m: heard.append(m)),
                                          on_postgres_changes=("UPDATE", lambda m: heard.append(m), "settings_device", "public",
                                                               "device_uuid=eq." + device))
        check("the device joins private device:<own uuid> with a postgres_changes binding: SUBSCRIBED",
              states and states[-1][0] == RealtimeSubscribeStates.SUBSCRIBED, states)
        own = []
        dash_dev, states = await subscribe(dash, "device:" + device, {"private": True, "broadcast": {"self": False, "ack": True}},
                                           on_broadcast=("breakpoint-continue", lambda m: own.append(m["payload"].get("requestId"))))
        await dash_dev.send_broadcast("breakpoint-continue", {"requestId": "r-1", "rawHttp": "GET / HTTP/1.1\r\n\r\n"})
        got = await wait_for(lambda: any(m.get("event") == "breakpoint-continue" and m["payload"].get("requestId") == "r-1" for m in heard))
        check("breakpoint-continue sent by another official client reaches the device", got, heard)
        n = double.broadcast("device:" + device, "breakpoint-continue", {"requestId": "r-2", "abort": True})
        got = await wait_for(lambda: any(m.get("event") == "breakpoint-continue" and m["payload"].get("requestId") == "r-2" for m in heard))
        check("double.broadcast reaches the device (%d channels)" % n, got and n >= 1, heard)
        check("broadcast self:false: the sender does not hear its own, but hears the server's", own == ["r-2"], own)
        await dash_dev.http_send("breakpoint-continue", {"requestId": "r-3"})
        got = await wait_for(lambda: any(m["payload"].get("requestId") == "r-3" for m in heard if m.get("event") == "breakpoint-continue"))
        check("Realtime's REST broadcast (channel.http_send, 202) reaches the device", got, heard)
        pg.query("UPDATE settings_device SET settings = settings || '{\"b\": 4}' WHERE device_uuid = %s", device)
        got = await wait_for(lambda: any(m.get("data", {}).get("table") == "settings_device" for m in heard))
        change = next((m for m in heard if m.get("data", {}).get("table") == "settings_device"), {})
        check("postgres_changes: an UPDATE of settings_device reaches the device's binding",
              got and change["data"]["type"] == "UPDATE" and change["data"]["record"]["settings"]["b"] == 4, change)
        pg.query("UPDATE settings_device SET settings = settings || '{\"b\": 5}' WHERE device_uuid = %s", other)
        await asyncio.sleep(0.3)
        check("... not another device's (filter and RLS)", sum(1 for m in heard if m.get("data", {}).get("table") == "settings_device") == 1)

        bp = []
        box_dev.on_broadcast("INSERT", lambda m: bp.append(m))
        rest_client(url, token).table("breakpoint_events").insert({"device_uuid": device, "kind": "request", "request_id": "r-9",
                                                                   "raw_http_initial": "GET /x HTTP/1.1\r\n\r\n"}, returning="minimal").execute()
        got = await wait_for(lambda: bp)
        check("a breakpoint_events insert is broadcast on device:<uuid> by the trigger (realtime.send)",
              got and bp[0]["payload"]["record"]["request_id"] == "r-9", bp)

        # joins that must fail
        intruder, states = await subscribe(box, "device:" + other, {"private": True})
        check("the device cannot join another device's private channel",
              states and states[-1][0] == RealtimeSubscribeStates.CHANNEL_ERROR and "Unauthorized" in str(states[-1][1]), states)
        stale = AsyncRealtimeClient(base, ANON_KEY, auto_reconnect=False)
        await stale.set_auth(make_token(device, None, -60, secret=SECRET))
        _, states = await subscribe(stale, "device:" + device, {"private": True})
        check("an expired token at join: error InvalidJWTToken: Token has expired",
              states and states[-1][0] == RealtimeSubscribeStates.CHANNEL_ERROR and "InvalidJWTToken: Token has expired" in str(states[-1][1]), states)
        await stale.close()
        forged = AsyncRealtimeClient(base, ANON_KEY, auto_reconnect=False)
        await forged.set_auth(make_token(device, None, 3600, secret=SECRET + "x"))
        _, states = await subscribe(forged, "device:" + device, {"private": True})
        check("a bad signature at join: error JwtSignatureError",
              states and states[-1][0] == RealtimeSubscribeStates.CHANNEL_ERROR and "JwtSignatureError" in str(states[-1][1]), states)
        await forged.close()

        # token refresh, then expiry from the server
        await box.set_auth(double.make_token(device, exp_delta=3600))
        await asyncio.sleep(0.2)
        check("access_token refresh with a good token: the channels stay joined", box_dev.is_joined and box_all.is_joined)
        system = []
        box_all.on_system(lambda p: system.append(p))
        n = double.expire_realtime("devices:all", device=device)
        got = await wait_for(lambda: box_all.is_closed and device not in dash_all.presence_state())
        check("expire_realtime: system \"Token has expired\" + phx_close; the device's presence leaves (%d channels)" % n,
              got and any('"system"' in m["text"] and "Token has expired" in m["text"] for m in double.realtime_messages()),
              (box_all.state, dash_all.presence_state()))
        check("... the dashboard's channel on the same topic stays joined", dash_all.is_joined)
        await box_dev.unsubscribe()
        got = await wait_for(lambda: box_dev.is_closed)
        check("unsubscribe: phx_leave answered, channel closed", got, box_dev.state)
        settings_channel, states = await subscribe(box, "settings:global", {"private": True})
        await box.set_auth(make_token(device, None, -5, secret=SECRET))
        got = await wait_for(lambda: settings_channel.is_closed)
        check("access_token refresh with an expired token: system error \"Token has expired\", channel closed",
              got and any("settings:global" in m["text"] and "Token has expired" in m["text"] for m in double.realtime_messages()),
              settings_channel.state)
    finally:
        await box.close()
        await dash.close()


def summarise_wire(double):
    """What the official clients put on the wire, for the Swift side to match."""
    print("\n--- what the official clients sent ---")
    seen = set()
    for r in double.requests():
        key = (r["method"], r["path"], r["query"].split("=")[0] if r["query"] else "", r["headers"].get("prefer"))
        if r["path"].startswith("/_control") or key in seen:
            continue
        seen.add(key)
        headers = {k: v for k, v in r["headers"].items() if k in ("prefer", "content-profile", "accept-profile", "accept", "content-type")}
        print("%s %s%s  %s -> %s" % (r["method"], r["path"], "?" + r["query"] if r["query"] else "", json.dumps(headers), r["status"]))
    shapes = {}
    for m in double.realtime_messages():
        try:
            msg = json.loads(m["text"])
        except ValueError:
            continue
        key = (m["dir"], msg.get("event"), (msg.get("payload") or {}).get("event") if isinstance(msg.get("payload"), dict) else None)
        if key not in shapes:
            if isinstance(msg.get("payload"), dict) and "access_token" in msg["payload"]:
                msg["payload"] = dict(msg["payload"], access_token="<jwt>")
            shapes[key] = msg
    for (direction, event, sub), msg in shapes.items():
        text = json.dumps(msg)
        print("realtime %s %s: %s" % (direction, event, text if len(text) < 400 else text[:400] + "..."))


def main():
    faulthandler.dump_traceback_later(58, exit=True)
    started = time.monotonic()
    with Postgres() as pg:
        check("PostgreSQL 15 starts in under 5 s (%.2f s)" % pg.startup_seconds, pg.startup_seconds < 5)
        double = CloudDouble(pg, SECRET, anon_key=ANON_KEY)
        double.start()
        try:
            url = double.url
            device, other = str(uuid.uuid4()), str(uuid.uuid4())
            client = create_client(url, ANON_KEY)
            token = check_pairing(double, pg, client, device)
            check_rest(double, pg, client, url, token, device, other)
            check_faults(double, pg, url, token, device)
            token = check_unpair(double, pg, client, url, token, device)
            asyncio.run(check_realtime(double, pg, url, token, device, other))
            summarise_wire(double)
        finally:
            double.stop()
    print("contract test: %d failure(s) in %.1f s" % (len(FAILURES), time.monotonic() - started))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
