#!/usr/bin/env python3
"""A contract double of the Supabase pieces Busymate talks to, writing into a
real PostgreSQL (pg.py, schema.sql):

  POST /functions/v1/device-pair          the pairing edge function (claim, unpair)
  /rest/v1/<table>, /rest/v1/rpc/<fn>      PostgREST: insert/upsert, select, update,
                                           delete, rpc, with JWT auth and RLS for real
  GET  /realtime/v1/websocket              Realtime (Phoenix channels, vsn 1.0.0 and
                                           2.0.0): join, heartbeat, broadcast, presence,
                                           access_token, leave, postgres_changes
  POST /realtime/v1/api/broadcast          Realtime's REST broadcast
  /_control, /_control/stats, ...          fault injection and counters for tests

It is checked against the official clients by contract_test.py; docs/cloud.md says
what it covers and what it does not. PostgREST and Realtime do not install on
these machines, hence the double.

    with Postgres() as pg:
        double = CloudDouble(pg, "secret", anon_key="anon-...")
        double.start()
        code = double.mint_code()
        ... double.url ...
        double.stop()

Standalone: python3 double.py --dsn DSN --secret S --port-file F [--anon-key K]

One thread runs an asyncio loop that serves HTTP/1.1 (keep-alive, chunked
bodies, 100-continue) and WebSockets on one port; the HTTP layer is our own
rather than a framework's because the fault modes need the raw socket (an
answer-less close, a reset, bytes that are not HTTP). WebSocket framing is
websockets' sans-I/O protocol.
"""
import argparse
import asyncio
import base64
import collections
import contextlib
import datetime
import http
import json
import os
import re
import secrets
import signal
import socket
import string
import struct
import threading
import time
import urllib.parse
import uuid
import zlib

import jwt
import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from websockets.frames import Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.utils import accept_key

TOKEN_DAYS = 365
JWT_LEEWAY = 30               # seconds of clock skew PostgREST allows
PAIRING_CODE_MINUTES = 10
REALTIME_IDLE_TIMEOUT = 60    # Phoenix closes a socket that sent nothing for this long
PRESENCE_CALLS_PER_WINDOW = (5, 30.0)  # Realtime's client presence rate limit: 5 per 30 s
FAULT_PATHS = ("/rest/v1/entries", "/rest/v1/device_status")
FAULT_MODES = ("ok", "down", "500", "413", "slow", "garbage", "401")
MAX_BODY = 64 << 20


# --- tokens -------------------------------------------------------------------------

def _now():
    return int(time.time())


def make_token(device_uuid, owner=None, exp_delta=TOKEN_DAYS * 86400, secret=None, jti=None, iat=None, extra=None):
    """A device JWT as the pairing function mints it (HS256): role and aud
    authenticated, sub the owner, app_metadata.{user_type: device, device_uuid}.
    A negative exp_delta makes an expired one. Pure: registers nothing."""
    if secret is None:
        raise ValueError("make_token needs the JWT secret")
    now = _now() if iat is None else iat
    claims = {
        "role": "authenticated",
        "aud": "authenticated",
        "sub": str(owner or uuid.uuid4()),
        "iat": now,
        "exp": now + int(exp_delta),
        "jti": jti or str(uuid.uuid4()),
        "app_metadata": {"user_type": "device", "device_uuid": str(device_uuid)},
    }
    claims.update(extra or {})
    return jwt.encode(claims, secret, algorithm="HS256")


def make_service_token(secret, exp_delta=3600):
    """A service_role JWT, as the dashboard's server side or an edge function holds."""
    now = _now()
    return jwt.encode({"role": "service_role", "iss": "supabase", "iat": now, "exp": now + exp_delta}, secret, algorithm="HS256")


def make_user_token(secret, sub=None, exp_delta=3600):
    """A signed-in dashboard user's JWT (role authenticated, no device claim)."""
    now = _now()
    return jwt.encode({"role": "authenticated", "aud": "authenticated", "sub": str(sub or uuid.uuid4()), "iat": now,
                       "exp": now + exp_delta, "app_metadata": {"provider": "email"}}, secret, algorithm="HS256")


def make_anon_key(secret):
    now = _now()
    return jwt.encode({"iss": "supabase", "ref": "double", "role": "anon", "iat": now, "exp": now + 10 * 365 * 86400},
                      secret, algorithm="HS256")


def iso_utc(seconds):
    """As JavaScript's Date.prototype.toISOString() writes it (the edge
    functions are TypeScript): milliseconds and a Z."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class AuthError(Exception):
    """A refused bearer token, with PostgREST's code and message."""

    def __init__(self, code, message, expired_by=None):
        super().__init__(message)
        self.code, self.message, self.expired_by = code, message, expired_by


def verify_jwt(token, secret, leeway=JWT_LEEWAY):
    """Claims of an HS256/384/512 token signed with secret, or AuthError:
    PGRST301 undecodable / bad signature, PGRST303 expired / not yet valid /
    issued in the future (PostgREST >= 13; <= 12 said PGRST301 for expiry)."""
    if not token:
        raise AuthError("PGRST301", "Empty JWT is sent in Authorization header")
    parts = token.split(".")
    if len(parts) != 3:
        raise AuthError("PGRST301", "Expected 3 parts in JWT; got %d" % len(parts))
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise AuthError("PGRST301", "JWT couldn't be decoded")
    if header.get("alg") not in ("HS256", "HS384", "HS512"):
        raise AuthError("PGRST301", "Wrong or unsupported encoding algorithm")
    try:
        claims = jwt.decode(token, secret, algorithms=["HS256", "HS384", "HS512"], leeway=leeway,
                            options={"verify_aud": False, "require": []})
    except jwt.ExpiredSignatureError:
        exp = jwt.decode(token, options={"verify_signature": False}).get("exp", 0)
        raise AuthError("PGRST303", "JWT expired", expired_by=_now() - int(exp))
    except jwt.ImmatureSignatureError as e:
        raise AuthError("PGRST303", "JWT issued at future" if "iat" in str(e) else "JWT not yet valid")
    except jwt.InvalidSignatureError:
        raise AuthError("PGRST301", "JWT cryptographic operation failed")
    except jwt.PyJWTError:
        raise AuthError("PGRST301", "JWT couldn't be decoded")
    if not isinstance(claims, dict):
        raise AuthError("PGRST303", "Parsing claims failed")
    return claims


def device_of(claims):
    meta = claims.get("app_metadata") if isinstance(claims, dict) else None
    if isinstance(meta, dict) and meta.get("device_uuid"):
        return str(meta["device_uuid"]).lower()
    return None


# --- small helpers ----------------------------------------------------------------------

def split_top(text, sep=","):
    """Splits on sep outside double quotes and parentheses (PostgREST's lists)."""
    parts, current, quoted, depth, escaped = [], [], False, 0, False
    for ch in text:
        if escaped:
            current.append(ch)
            escaped = False
            continue
        if quoted and ch == "\\":
            current.append(ch)
            escaped = True
            continue
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == sep:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def unquote_ident(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def parse_prefer(values):
    """Prefer: return=minimal,resolution=ignore-duplicates (postgrest-py sends
    no space after the comma; others do): {name: value}."""
    prefs = {}
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if not item:
                continue
            name, _, val = item.partition("=")
            prefs[name.strip().lower()] = val.strip()
    return prefs


class Request:
    def __init__(self, method, target, version, headers, peer):
        self.method, self.target, self.version, self.peer = method, target, version, peer
        self.raw_headers = headers                      # [(name, value)] as sent
        self.headers = {}
        for name, value in headers:
            key = name.lower()
            self.headers[key] = self.headers[key] + ", " + value if key in self.headers else value
        parsed = urllib.parse.urlsplit(target)
        self.path = urllib.parse.unquote(parsed.path)
        self.query_string = parsed.query
        self.query = urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
        self.body = b""

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def header_values(self, name):
        return [v for n, v in self.raw_headers if n.lower() == name.lower()]

    def param(self, name, default=None):
        for key, value in self.query:
            if key == name:
                return value
        return default

    def json(self):
        return json.loads(self.body.decode("utf-8")) if self.body.strip() else None


class Response:
    def __init__(self, status, body=b"", headers=None, content_type="application/json; charset=utf-8"):
        if isinstance(body, (dict, list)) or body is None and status not in (201, 204):
            body = json.dumps(body, separators=(",", ":"))
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.status, self.body = status, body or b""
        self.headers = list(headers or [])
        if content_type and (self.body or status not in (201, 204)):
            self.headers.insert(0, ("Content-Type", content_type))


class Drop:
    """Close the connection without answering: with a RST or a plain FIN."""

    def __init__(self, reset):
        self.reset = reset


class Raw:
    """Write these bytes, then close."""

    def __init__(self, data):
        self.data = data


def pgrst_error(status, code, message, details=None, hint=None, headers=None):
    body = {"code": code, "details": details, "hint": hint, "message": message}
    return Response(status, body, [("Proxy-Status", "PostgREST; error=%s" % code)] + list(headers or []))


def auth_error_response(err):
    description = json.dumps(err.message)  # as Haskell's show writes a Text: quoted, escaped
    return pgrst_error(401, err.code, err.message,
                       headers=[("WWW-Authenticate", 'Bearer error="invalid_token", error_description=%s' % description)])


def sql_status(sqlstate, message, authed):
    """PostgREST's mapping of SQLSTATE to HTTP status (Error.hs, mapSQLtoHTTP)."""
    c = sqlstate or ""
    if c.startswith("08"):
        return 503
    if c.startswith("09"):
        return 500
    if c.startswith("0L") or c.startswith("0P"):
        return 403
    if c in ("23503", "23505"):
        return 409
    if c == "25006":
        return 405
    if c == "21000":
        return 400 if message.endswith("requires a WHERE clause") else 500
    if c == "22023":
        return 401 if message.startswith("role") and message.endswith("does not exist") else 400
    if c[:2] in ("25", "2D", "38", "39", "3B", "40", "54", "55", "58", "F0", "HV", "XX"):
        return 500
    if c.startswith("28"):
        return 403
    if c == "53400":
        return 500
    if c.startswith("53") or c == "57P01":
        return 503
    if c.startswith("57"):
        return 500
    if c == "P0001":
        return 400
    if c.startswith("P0"):
        return 500
    if c == "42883":
        return 404
    if c == "42P01":
        return 404
    if c == "42P17":
        return 500
    if c == "42501":
        return 403 if authed else 401
    return 400


def pg_error_response(e, authed):
    diag = e.diag
    message = diag.message_primary or str(e).strip()
    status = sql_status(e.sqlstate, message, authed)
    headers = [("WWW-Authenticate", "Bearer")] if status == 401 else []
    return pgrst_error(status, e.sqlstate or "PGRSTX00", message, diag.message_detail, diag.message_hint, headers)


# --- the schema cache -----------------------------------------------------------------------

class Table:
    def __init__(self, name, kind):
        self.name, self.kind = name, kind
        self.columns = {}     # name -> {"type": format_type, "typname": short, "has_default": bool}
        self.order = []
        self.pk = []

    @property
    def ident(self):
        return sql.Identifier("public", self.name)


class Function:
    def __init__(self, name, args, retset, rettype, rettyptype, volatile):
        self.name, self.args, self.retset = name, args, retset          # args: [(name, type, has_default)]
        self.rettype, self.rettyptype, self.volatile = rettype, rettyptype, volatile


def load_schema(conn):
    tables, functions = {}, {}
    rows = conn.execute("""
        SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod), t.typname, a.atthasdef, a.attnum
        FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid JOIN pg_type t ON t.oid = a.atttypid
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
          AND NOT c.relispartition AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY c.relname, a.attnum""").fetchall()
    for relname, relkind, attname, typ, typname, hasdef, _ in rows:
        table = tables.setdefault(relname, Table(relname, relkind))
        table.columns[attname] = {"type": typ, "typname": typname, "has_default": hasdef}
        table.order.append(attname)
    for relname, attname in conn.execute("""
        SELECT c.relname, a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
        JOIN LATERAL unnest(i.indkey) WITH ORDINALITY k(attnum, n) ON true
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
        WHERE i.indisprimary AND c.relnamespace = 'public'::regnamespace ORDER BY c.relname, k.n""").fetchall():
        if relname in tables:
            tables[relname].pk.append(attname)
    for proname, argnames, argtypes, nargdefaults, retset, rettype, typtype, volatile in conn.execute("""
        SELECT p.proname, p.proargnames, ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t),
               p.pronargdefaults, p.proretset, format_type(p.prorettype, NULL), rt.typtype, p.provolatile
        FROM pg_proc p JOIN pg_type rt ON rt.oid = p.prorettype
        WHERE p.pronamespace = 'public'::regnamespace AND p.prokind = 'f'""").fetchall():
        names = list(argnames or [])[:len(argtypes)]
        args = []
        for i, typ in enumerate(argtypes):
            args.append((names[i] if i < len(names) else "", typ, i >= len(argtypes) - (nargdefaults or 0)))
        functions.setdefault(proname, []).append(Function(proname, args, retset, rettype, typtype, volatile))
    return tables, functions


# --- the database side -----------------------------------------------------------------------

class Pool:
    """A few async connections for one role, made on demand, kept while idle."""

    def __init__(self, conninfo, size):
        self.conninfo, self.size = conninfo, size
        self.idle = []
        self.sem = None

    async def acquire(self):
        if self.sem is None:
            self.sem = asyncio.Semaphore(self.size)
        await self.sem.acquire()
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE:
                return conn
            await self._close(conn)
        try:
            conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
            await conn.execute("SET TimeZone TO 'UTC'")
            await conn.set_autocommit(False)
            return conn
        except BaseException:
            self.sem.release()
            raise

    async def release(self, conn, broken=False):
        try:
            if broken or conn.closed or conn.info.transaction_status != TransactionStatus.IDLE:
                await self._close(conn)
            else:
                self.idle.append(conn)
        finally:
            self.sem.release()

    @contextlib.asynccontextmanager
    async def connection(self):
        conn = await self.acquire()
        broken = False
        try:
            yield conn
        except psycopg.OperationalError:
            broken = True
            raise
        except BaseException:
            broken = conn.info.transaction_status != TransactionStatus.IDLE
            raise
        finally:
            await self.release(conn, broken)

    async def close(self):
        while self.idle:
            await self._close(self.idle.pop())

    @staticmethod
    async def _close(conn):
        with contextlib.suppress(Exception):
            await conn.close()


# --- the double ------------------------------------------------------------------------------------

class CloudDouble:
    """The double, on 127.0.0.1 and a port of its own (url). pg is a pg.Postgres
    or a superuser conninfo; PostgREST's part logs in as `authenticator`.

    anon_key: what apikey must be. A non-JWT string (like Supabase's
    sb_publishable_ keys) is accepted as the anon role wherever a bearer token
    goes; by default the double mints an anon JWT. Any JWT signed with the
    secret whose role is anon or service_role is a valid apikey too.

    expired_code: PostgREST >= 13 says PGRST303 for an expired token, <= 12
    (what hosted Supabase ran for long) PGRST301; a client must take both.
    """

    def __init__(self, pg, jwt_secret, anon_key=None, host="127.0.0.1", port=0, pool_size=8,
                 realtime_idle_timeout=REALTIME_IDLE_TIMEOUT, presence_limit=PRESENCE_CALLS_PER_WINDOW, log_size=2000,
                 expired_code="PGRST303"):
        if hasattr(pg, "dsn_for"):
            self.admin_dsn = pg.dsn
            self.rest_dsn = pg.dsn_for("authenticator")
        else:
            self.admin_dsn = pg
            self.rest_dsn = psycopg.conninfo.make_conninfo(pg, user="authenticator")
        self.secret = jwt_secret
        self.expired_code = expired_code
        self.anon_key = anon_key or make_anon_key(jwt_secret)
        self.host, self.port = host, port
        self.pool_size = pool_size
        self.realtime_idle_timeout = realtime_idle_timeout
        self.presence_limit = presence_limit
        self.url = None
        self.loop = None
        self.thread = None
        self.server = None
        self.tables, self.functions = {}, {}
        self.fault = {"mode": "ok", "max_rows": None, "slow_seconds": 0.0, "count": None}
        self.fault_turn = 0
        self.stats_by_status = collections.Counter()
        self.stats_by_path = collections.Counter()
        self.faults_injected = collections.Counter()
        self.request_log = collections.deque(maxlen=log_size)
        self.realtime_log = collections.deque(maxlen=log_size)
        self.realtime = Realtime(self)
        self._admin_sync = None
        self._admin_lock = threading.Lock()
        self._writers = set()
        self._ready = threading.Event()
        self._start_error = None

    # --- lifecycle ----------------------------------------------------------------

    def start(self, timeout=15):
        with self._admin() as conn:
            self.tables, self.functions = load_schema(conn)
        self.thread = threading.Thread(target=self._run, name="cloud-double", daemon=True)
        self.thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the cloud double did not start")
        if self._start_error:
            raise self._start_error
        return self

    def stop(self):
        if self.loop and self.thread and self.thread.is_alive():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop)
            with contextlib.suppress(Exception):
                fut.result(15)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(15)
        with self._admin_lock:
            if self._admin_sync is not None:
                with contextlib.suppress(Exception):
                    self._admin_sync.close()
                self._admin_sync = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _run(self):
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as e:  # surfaced by start()
            self._start_error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _serve(self):
        self.rest_pool = Pool(self.rest_dsn, self.pool_size)
        self.admin_pool = Pool(self.admin_dsn, 4)
        self.server = await asyncio.start_server(self._connection, self.host, self.port, limit=1 << 20)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = "http://%s:%d" % (self.host, self.port)
        # Ready only once LISTENing: a change made right after start() must not be missed.
        listening = asyncio.Event()
        self.listener = asyncio.create_task(self.realtime.listen_database(listening))
        await asyncio.wait_for(listening.wait(), 10)

    async def _shutdown(self):
        self.server.close()
        self.listener.cancel()
        await self.realtime.close_all()
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        await self.rest_pool.close()
        await self.admin_pool.close()
        for task in asyncio.all_tasks(self.loop):
            if task is not asyncio.current_task():
                task.cancel()

    # --- what tests call (any thread) -----------------------------------------------

    @contextlib.contextmanager
    def _admin(self):
        with self._admin_lock:
            if self._admin_sync is None or self._admin_sync.closed:
                self._admin_sync = psycopg.connect(self.admin_dsn, autocommit=True)
            yield self._admin_sync

    def mint_code(self, owner_uuid=None, minutes=PAIRING_CODE_MINUTES):
        """A fresh pairing code (XXXX-XXXX), as the dashboard hands one out."""
        alphabet = "".join(c for c in string.ascii_uppercase + string.digits if c not in "O0I1")
        code = "".join(secrets.choice(alphabet) for _ in range(4)) + "-" + "".join(secrets.choice(alphabet) for _ in range(4))
        with self._admin() as conn:
            conn.execute("INSERT INTO public.pairing_codes (code, owner, expires_at) VALUES (%s, %s, now() + %s * interval '1 minute')",
                         (code, str(owner_uuid or uuid.uuid4()), minutes))
        return code

    def make_token(self, device_uuid, owner=None, exp_delta=TOKEN_DAYS * 86400, register=True, **kwargs):
        """A device token signed with the double's secret. register: make it the
        device's current token in `devices` (else a paired device's row, holding
        another jti, makes the double refuse it as superseded)."""
        jti = kwargs.pop("jti", None) or str(uuid.uuid4())
        token = make_token(device_uuid, owner, exp_delta, secret=self.secret, jti=jti, **kwargs)
        if register:
            with self._admin() as conn:
                conn.execute("""INSERT INTO public.devices (device_uuid, owner, jti, revoked, paired_at) VALUES (%s, %s, %s, false, now())
                                ON CONFLICT (device_uuid) DO UPDATE SET jti = excluded.jti, revoked = false""",
                             (str(device_uuid), str(owner) if owner else None, jti))
        return token

    def service_token(self, exp_delta=3600):
        return make_service_token(self.secret, exp_delta)

    def user_token(self, sub=None, exp_delta=3600):
        return make_user_token(self.secret, sub, exp_delta)

    def control(self, **settings):
        """As POST /_control, from the test's thread."""
        return self._call(self._apply_control(settings))

    def stats(self):
        return self._call(self._stats())

    def requests(self, clear=False):
        """The requests seen so far (method, path, query, headers, status)."""
        items = list(self.request_log)
        if clear:
            self.request_log.clear()
        return items

    def realtime_messages(self, clear=False):
        items = list(self.realtime_log)
        if clear:
            self.realtime_log.clear()
        return items

    def broadcast(self, topic, event, payload, private=None):
        """A server-side broadcast on topic (without the realtime: prefix), as
        the dashboard sends one. private None: to public and private
        subscribers alike. Returns how many channels it reached."""
        return self._call(self.realtime.broadcast(topic, event, payload, private))

    def expire_realtime(self, topic=None, device=None):
        """Every channel (of topic, of a device's token, if given) hears
        "Token has expired" and is closed, as when its JWT runs out."""
        return self._call(self.realtime.expire(topic, device))

    def reload_schema(self):
        with self._admin() as conn:
            self.tables, self.functions = load_schema(conn)

    def _call(self, coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # --- HTTP/1.1 -------------------------------------------------------------------

    async def _connection(self, reader, writer):
        self._writers.add(writer)
        peer = writer.get_extra_info("peername")
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                except asyncio.LimitOverrunError:
                    await self._write(writer, Response(431, {"message": "Request Header Fields Too Large"}), close=True)
                    return
                request = self._parse_head(head, peer)
                if request is None:
                    await self._write(writer, Response(400, {"message": "Bad Request"}), close=True)
                    return
                if request.header("upgrade", "").lower() == "websocket":
                    self._log(request, "upgrade")
                    await self.realtime.serve(request, reader, writer)
                    return
                if request.header("expect", "").lower() == "100-continue":
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                try:
                    request.body = await self._read_body(request, reader)
                except ValueError as e:
                    await self._write(writer, Response(400, {"message": str(e)}), close=True)
                    return
                close = request.header("connection", "").lower() == "close" or (
                    request.version == "HTTP/1.0" and request.header("connection", "").lower() != "keep-alive")
                try:
                    response = await self._dispatch(request)
                except Exception as e:  # a bug of ours: say so, as a 500, and keep serving
                    response = Response(500, {"code": "PGRSTX00", "message": "double: %s: %s" % (type(e).__name__, e)})
                if isinstance(response, Drop):
                    self._count(request, "dropped")
                    sock = writer.get_extra_info("socket")
                    if response.reset and sock is not None:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        writer.transport.abort()
                    else:
                        writer.close()
                    return
                if isinstance(response, Raw):
                    self._count(request, "garbage")
                    writer.write(response.data)
                    with contextlib.suppress(Exception):
                        await writer.drain()
                    writer.close()
                    return
                self._count(request, response.status)
                await self._write(writer, response, close=close, head_only=request.method == "HEAD")
                if close:
                    return
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    def _parse_head(head, peer):
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            if not version.startswith("HTTP/1."):
                return None
            headers = []
            for line in lines[1:]:
                if not line:
                    continue
                name, sep, value = line.partition(":")
                if not sep or not name or name != name.strip():
                    return None
                headers.append((name, value.strip()))
            return Request(method, target, version, headers, peer)
        except ValueError:
            return None

    @staticmethod
    async def _read_body(request, reader):
        if "chunked" in request.header("transfer-encoding", "").lower():
            body = bytearray()
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass  # trailers
                    return bytes(body)
                if len(body) + size > MAX_BODY:
                    raise ValueError("body too large")
                body += await reader.readexactly(size)
                await reader.readexactly(2)
        length = request.header("content-length")
        if length is None:
            return b""
        if not length.isdigit() or int(length) > MAX_BODY:
            raise ValueError("bad Content-Length")
        return await reader.readexactly(int(length))

    @staticmethod
    async def _write(writer, response, close=False, head_only=False):
        reason = http.HTTPStatus(response.status).phrase if response.status in http.HTTPStatus._value2member_map_ else "Status"
        lines = ["HTTP/1.1 %d %s" % (response.status, reason),
                 "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
                 "Server: busymate-cloud-double"]
        lines += ["%s: %s" % (k, v) for k, v in response.headers]
        if response.status not in (204, 304) and not (100 <= response.status < 200):
            lines.append("Content-Length: %d" % len(response.body))
        if close:
            lines.append("Connection: close")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if not head_only and response.status not in (204, 304):
            data += response.body
        writer.write(data)
        await writer.drain()

    def _log(self, request, status):
        self.request_log.append({
            "t": time.time(), "method": request.method, "path": request.path, "query": request.query_string,
            "headers": {k: v for k, v in request.headers.items()}, "body_bytes": len(request.body), "status": status})

    def _count(self, request, status):
        self.stats_by_status[str(status)] += 1
        self.stats_by_path["%s %s" % (request.method, request.path)] += 1
        self._log(request, status)

    # --- routing ------------------------------------------------------------------------

    async def _dispatch(self, request):
        path = request.path
        if path == "/_control" or path.startswith("/_control/"):
            return await self._control_route(request)
        if path.startswith("/rest/v1") or path.startswith("/functions/v1/") or path.startswith("/realtime/v1/"):
            refusal = self._gateway(request)
            if refusal:
                return refusal
        if path.startswith("/rest/v1/") or path == "/rest/v1":
            if path in FAULT_PATHS:
                fault = await self._fault(request)
                if fault is not None:
                    return fault
            return await self._rest(request)
        if path == "/functions/v1/device-pair":
            return await self._device_pair(request)
        if path == "/realtime/v1/api/broadcast" or path.startswith("/realtime/v1/api/broadcast/"):
            return await self._rest_broadcast(request)
        return Response(404, {"message": "no route for %s %s" % (request.method, path)})

    def _gateway(self, request):
        """Supabase's API gateway: every /rest, /functions and /realtime call
        carries the project's key in apikey (header or query parameter)."""
        key = request.header("apikey") or request.param("apikey")
        if not key:
            return Response(401, {"message": "No API key found in request",
                                  "hint": "No `apikey` request header or url param was found."})
        if not self._valid_apikey(key):
            return Response(401, {"message": "Invalid API key",
                                  "hint": "Double check your Supabase `anon` or `service_role` API key."})
        return None

    def _valid_apikey(self, key):
        if key == self.anon_key:
            return True
        try:
            claims = jwt.decode(key, self.secret, algorithms=["HS256"], options={"verify_aud": False})
        except jwt.PyJWTError:
            return False
        return claims.get("role") in ("anon", "service_role")

    def _bearer(self, request):
        header = request.header("authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return ""
        return token.strip()

    async def _claims(self, token, check_revoked=True, leeway=JWT_LEEWAY):
        """The claims behind a bearer token: the anon key stands for the anon
        role (the gateway swaps a publishable key for an anon JWT); a device
        token must be its device's current, unrevoked one."""
        if token is None or token == self.anon_key:
            return {"role": "anon"}
        claims = verify_jwt(token, self.secret, leeway)
        device = device_of(claims)
        if check_revoked and device:
            problem = await self._revocation(device, claims.get("jti"))
            if problem:
                raise AuthError("PGRST301", problem)
        return claims

    async def _revocation(self, device, jti):
        """Stands in for the revocation check the real cloud makes of a device
        token: refused once unpaired (devices.revoked) or superseded by a
        re-pairing (devices.jti names another token). A device with no row
        (a token a test minted without registering it) passes."""
        async with self.admin_pool.connection() as conn:
            async with conn.transaction():
                row = await (await conn.execute("SELECT revoked, jti FROM public.devices WHERE device_uuid = %s::uuid",
                                                (device,))).fetchone()
        if row is None:
            return None
        revoked, current = row
        if revoked:
            return "JWT revoked: the device was unpaired"
        if current and jti != current:
            return "JWT revoked: superseded by a newer pairing"
        return None

    # --- fault injection ----------------------------------------------------------------

    async def _control_route(self, request):
        if request.path == "/_control/stats" and request.method == "GET":
            return Response(200, await self._stats())
        if request.path == "/_control/requests" and request.method == "GET":
            items = self.requests(clear=request.param("clear") in ("1", "true"))
            return Response(200, items)
        if request.path == "/_control/realtime" and request.method == "GET":
            return Response(200, self.realtime_messages(clear=request.param("clear") in ("1", "true")))
        if request.path == "/_control/pairing-code" and request.method == "POST":
            body = request.json() or {}
            code = await asyncio.get_running_loop().run_in_executor(None, self.mint_code, body.get("owner"))
            return Response(200, {"code": code})
        if request.path == "/_control/broadcast" and request.method == "POST":
            body = request.json() or {}
            n = await self.realtime.broadcast(body["topic"], body["event"], body.get("payload", {}), body.get("private"))
            return Response(200, {"delivered": n})
        if request.path == "/_control":
            if request.method == "GET":
                return Response(200, dict(self.fault))
            if request.method == "POST":
                try:
                    return Response(200, await self._apply_control(request.json() or {}))
                except (ValueError, TypeError) as e:
                    return Response(400, {"error": str(e)})
        return Response(404, {"message": "unknown control %s %s" % (request.method, request.path)})

    async def _apply_control(self, settings):
        """mode ok|down|500|413|slow|garbage|401; max_rows (413: the largest
        batch that passes; null: none); slow_seconds; count (the fault fires
        this many times, then the mode goes back to ok; null: until changed).
        realtime: "expire" (with an optional topic and device) ends channels
        as an expired token would."""
        if "realtime" in settings:
            if settings["realtime"] != "expire":
                raise ValueError("realtime: only \"expire\"")
            n = await self.realtime.expire(settings.get("topic"), settings.get("device"))
            return {"expired_channels": n}
        mode = str(settings.get("mode", self.fault["mode"]))
        if mode not in FAULT_MODES:
            raise ValueError("mode must be one of " + ", ".join(FAULT_MODES))
        self.fault = {
            "mode": mode,
            "max_rows": settings.get("max_rows"),
            "slow_seconds": float(settings.get("slow_seconds") or 0),
            "count": settings.get("count"),
        }
        return dict(self.fault)

    async def _stats(self):
        return {"by_status": dict(self.stats_by_status), "by_path": dict(self.stats_by_path),
                "faults_injected": dict(self.faults_injected), "total": sum(self.stats_by_status.values()),
                "fault": dict(self.fault), "realtime_sockets": len(self.realtime.sockets)}

    def _fault_fired(self, mode):
        self.faults_injected[mode] += 1
        count = self.fault.get("count")
        if count is not None:
            count = int(count) - 1
            self.fault["count"] = count
            if count <= 0:
                self.fault = {"mode": "ok", "max_rows": None, "slow_seconds": 0.0, "count": None}

    async def _fault(self, request):
        """The injected fault for this /rest/v1/entries or device_status call, or None."""
        mode = self.fault["mode"]
        if mode == "ok":
            return None
        if mode == "413":
            limit = self.fault.get("max_rows")
            try:
                body = request.json()
                rows = len(body) if isinstance(body, list) else 1
            except ValueError:
                rows = 1
            if limit is not None and rows <= int(limit):
                return None
            self._fault_fired(mode)
            # As a gateway in front of PostgREST answers (PostgREST never sends 413).
            return Response(413, "413 Request Entity Too Large: %d rows\n" % rows, content_type="text/plain; charset=utf-8")
        self.fault_turn += 1
        turn = self.fault_turn
        seconds = self.fault.get("slow_seconds") or 0
        self._fault_fired(mode)
        if mode == "down":
            # Alternately a reset and a plain close, after reading the request.
            return Drop(reset=turn % 2 == 1)
        if mode == "500":
            return pgrst_error(500, "XX000", "injected")
        if mode == "401":
            return auth_error_response(AuthError(self.expired_code, "JWT expired"))
        if mode == "garbage":
            if turn % 2 == 1:
                # The nastier one: a success status line whose body never
                # arrives in full. A client that trusts the status before the
                # body is complete thinks its rows went in; they did not.
                return Raw(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 512\r\n\r\n{\"code\":\"")
            return Raw(b"\x16\x03\x01\x00\xa5garbage, not HTTP\x00\xff\xfe\r\n\r\n")
        if mode == "slow":
            await asyncio.sleep(seconds)
            return None  # then processed normally: the rows go in even if the client gave up
        return None

    # --- the pairing edge function --------------------------------------------------------

    async def _device_pair(self, request):
        if request.method != "POST":
            return Response(405, {"error": "method not allowed"})
        token = self._bearer(request)
        if token is None:
            return Response(401, {"code": 401, "message": "Missing authorization header"})
        # The functions gateway's verify_jwt: the anon key or a JWT signed with the secret.
        if token != self.anon_key:
            try:
                verify_jwt(token, self.secret)
            except AuthError:
                return Response(401, {"code": 401, "message": "Invalid JWT"})
        try:
            body = request.json()
        except ValueError:
            return Response(400, {"error": "the body is not JSON"})
        if not isinstance(body, dict):
            return Response(400, {"error": "the body must be a JSON object"})
        action = body.get("action")
        if action == "claim":
            return await self._claim(body)
        if action == "unpair":
            return await self._unpair(body, token)
        return Response(400, {"error": "unknown action"})

    async def _claim(self, body):
        code, device = body.get("code"), body.get("device_uuid")
        if not isinstance(code, str) or not code:
            return Response(400, {"error": "invalid or expired pairing code"})
        try:
            device = str(uuid.UUID(str(device)))
        except ValueError:
            return Response(400, {"error": "device_uuid must be a UUID"})
        setup = body.get("setup")
        jti = str(uuid.uuid4())
        now = _now()
        async with self.admin_pool.connection() as conn:
            async with conn.transaction():
                row = await (await conn.execute(
                    """UPDATE public.pairing_codes SET used = true
                       WHERE code = %s AND NOT used AND expires_at > now() RETURNING owner""", (code.strip().upper(),))).fetchone()
                if row is None:
                    return Response(400, {"error": "invalid or expired pairing code"})
                owner = str(row[0])
                await conn.execute(
                    """INSERT INTO public.devices (device_uuid, owner, name, model, os_version, setup, jti, revoked, paired_at)
                       VALUES (%s, %s, %s, %s, %s, %s, %s, false, now())
                       ON CONFLICT (device_uuid) DO UPDATE SET owner = excluded.owner, name = excluded.name, model = excluded.model,
                         os_version = excluded.os_version, setup = excluded.setup, jti = excluded.jti, revoked = false,
                         paired_at = excluded.paired_at""",
                    (device, owner, body.get("name"), body.get("model"), body.get("os_version"),
                     psycopg.types.json.Jsonb(setup) if setup is not None else None, jti))
        exp = now + TOKEN_DAYS * 86400
        token = make_token(device, owner, TOKEN_DAYS * 86400, secret=self.secret, jti=jti, iat=now)
        return Response(200, {"token": token, "jti": jti, "expires_at": iso_utc(exp)})

    async def _unpair(self, body, token):
        try:
            device = str(uuid.UUID(str(body.get("device_uuid"))))
        except ValueError:
            return Response(400, {"error": "device_uuid must be a UUID"})
        if token == self.anon_key:
            return Response(401, {"error": "unpairing needs the device's token"})
        try:
            claims = verify_jwt(token, self.secret)
        except AuthError as e:
            return Response(401, {"error": e.message})
        if device_of(claims) != device:
            return Response(403, {"error": "the token was issued to another device"})
        async with self.admin_pool.connection() as conn:
            async with conn.transaction():
                row = await (await conn.execute("SELECT jti FROM public.devices WHERE device_uuid = %s", (device,))).fetchone()
                if row is not None and row[0] and row[0] != claims.get("jti"):
                    # An old token must not unpair the current pairing.
                    return Response(401, {"error": "JWT revoked: superseded by a newer pairing"})
                await conn.execute("UPDATE public.devices SET revoked = true WHERE device_uuid = %s", (device,))
        return Response(200, {"ok": True})

    # --- Realtime's REST broadcast ------------------------------------------------------------

    async def _rest_broadcast(self, request):
        if request.method != "POST":
            return Response(405, {"error": "method not allowed"})
        try:
            claims = await self._claims(self._bearer(request))
        except AuthError as e:
            return Response(401, {"error": e.message})
        messages = []
        if request.path == "/realtime/v1/api/broadcast":
            body = request.json() or {}
            for m in body.get("messages", []):
                messages.append((m.get("topic"), m.get("event"), m.get("payload", {}), bool(m.get("private"))))
        else:  # /api/broadcast/<topic>/events/<event>, the body the payload
            rest = request.path[len("/realtime/v1/api/broadcast/"):]
            topic, _, event = rest.partition("/events/")
            messages.append((topic, event, request.json(), request.param("private") == "true"))
        for topic, event, payload, private in messages:
            if private and not self.realtime.may_join(claims, topic):
                continue
            await self.realtime.broadcast(topic, event, payload, private)
        return Response(202, b"", content_type=None)

    # --- PostgREST --------------------------------------------------------------------------

    def _table(self, name):
        table = self.tables.get(name)
        if table is None:
            self.reload_schema()  # a test may have created it since: as PostgREST's schema cache reload
            table = self.tables.get(name)
        return table

    async def _rest(self, request):
        profile = request.header("accept-profile") if request.method in ("GET", "HEAD") else request.header("content-profile")
        if profile and profile != "public":
            return pgrst_error(406, "PGRST106", "Invalid schema: " + profile, hint="Only the following schemas are exposed: public")
        try:
            claims = await self._claims(self._bearer(request))
        except AuthError as e:
            if e.expired_by is not None:
                e.code = self.expired_code
            return auth_error_response(e)
        role = claims.get("role") or "anon"
        rest = request.path[len("/rest/v1/"):] if request.path.startswith("/rest/v1/") else ""
        if rest.startswith("rpc/"):
            return await self._rpc(request, rest[4:], claims, role)
        if not rest or "/" in rest:
            return pgrst_error(404, "PGRST125", "Invalid path specified in request URL")
        table = self._table(rest)
        if table is None:
            return pgrst_error(404, "PGRST205", "Could not find the table 'public.%s' in the schema cache" % rest)
        prefs = parse_prefer(request.header_values("prefer"))
        try:
            if request.method in ("GET", "HEAD"):
                return await self._select(request, table, claims, role, prefs)
            if request.method == "POST":
                return await self._insert(request, table, claims, role, prefs)
            if request.method == "PATCH":
                return await self._update(request, table, claims, role, prefs)
            if request.method == "DELETE":
                return await self._delete(request, table, claims, role, prefs)
        except QueryError as e:
            return e.response
        except psycopg.Error as e:
            if e.sqlstate is None:
                raise
            return pg_error_response(e, role != "anon")
        return pgrst_error(405, "PGRST117", "Unsupported HTTP method: " + request.method)

    @contextlib.asynccontextmanager
    async def _as(self, request, claims, role):
        """A transaction as PostgREST runs one: the JWT's role, its claims in
        request.jwt.claims, the method, path and headers in request.*."""
        async with self.rest_pool.connection() as conn:
            async with conn.transaction():
                await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
                await conn.execute(
                    "SELECT set_config('request.jwt.claims', %s, true), set_config('request.method', %s, true),"
                    " set_config('request.path', %s, true), set_config('request.headers', %s, true)",
                    (json.dumps(claims), request.method, request.path,
                     json.dumps({k: v for k, v in request.headers.items() if k not in ("authorization", "apikey")})))
                yield conn

    def _columns_list(self, table, text):
        names = [unquote_ident(c) for c in split_top(text) if c.strip()]
        for name in names:
            if name not in table.columns:
                raise QueryError(pgrst_error(400, "PGRST204", "Could not find the '%s' column of '%s' in the schema cache" % (name, table.name)))
        return names

    async def _insert(self, request, table, claims, role, prefs):
        try:
            body = request.json()
        except (ValueError, UnicodeDecodeError):
            return pgrst_error(400, "PGRST102", "Empty or invalid json")
        rows = body if isinstance(body, list) else [body]
        if body is None or not all(isinstance(r, dict) for r in rows):
            return pgrst_error(400, "PGRST102", "Empty or invalid json")
        if request.param("columns") is not None:
            columns = self._columns_list(table, request.param("columns"))
        else:
            columns = list(rows[0].keys()) if rows else []
            if any(set(r.keys()) != set(columns) for r in rows):
                return pgrst_error(400, "PGRST102", "All object keys must match")
            self._columns_list(table, ",".join('"%s"' % c.replace('"', '\\"') for c in columns))
        on_conflict = request.param("on_conflict")
        conflict = self._columns_list(table, on_conflict) if on_conflict else list(table.pk)
        resolution = prefs.get("resolution")
        returning = prefs.get("return", "minimal")
        # missing=default: a key a row lacks takes the column's default, so
        # rows are sent in runs of the same key set, each run naming only its
        # keys; otherwise a missing key is NULL (json_populate_recordset).
        if prefs.get("missing") == "default":
            runs = []
            for r in rows:
                keys = [c for c in columns if c in r]
                if runs and runs[-1][0] == keys:
                    runs[-1][1].append(r)
                else:
                    runs.append((keys, [r]))
        else:
            runs = [(columns, rows)] if rows else []
        inserted, out = 0, []
        async with self._as(request, claims, role) as conn:
            for cols, batch in runs:
                if not cols:
                    statement = sql.SQL("INSERT INTO {} DEFAULT VALUES").format(table.ident)
                    params = ()
                else:
                    idents = sql.SQL(", ").join(sql.Identifier(c) for c in cols)
                    statement = sql.SQL("INSERT INTO {t} ({cols}) SELECT {cols} FROM jsonb_populate_recordset(NULL::{t}, %s::jsonb)").format(
                        t=table.ident, cols=idents)
                    params = (json.dumps(batch),)
                if resolution in ("ignore-duplicates", "merge-duplicates") and conflict:
                    target = sql.SQL(", ").join(sql.Identifier(c) for c in conflict)
                    if resolution == "ignore-duplicates" or not cols:
                        statement += sql.SQL(" ON CONFLICT ({}) DO NOTHING").format(target)
                    else:
                        sets = sql.SQL(", ").join(sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in cols)
                        statement += sql.SQL(" ON CONFLICT ({}) DO UPDATE SET {}").format(target, sets)
                if returning == "representation":
                    statement = sql.SQL("WITH pgrst_source AS ({} RETURNING {}.*) SELECT coalesce(json_agg(pgrst_source), '[]')::text, count(*) FROM pgrst_source").format(
                        statement, table.ident)
                    text, n = await (await conn.execute(statement, params)).fetchone()
                    out.extend(json.loads(text))
                    inserted += n
                else:
                    cur = await conn.execute(statement, params)
                    inserted += max(cur.rowcount, 0)
        headers = [("Content-Range", "*/%d" % inserted if prefs.get("count") == "exact" else "*/*")]
        applied = [p for p in ("return=" + returning if "return" in prefs else None,
                               "resolution=" + resolution if resolution else None,
                               "missing=default" if prefs.get("missing") == "default" else None,
                               "count=exact" if prefs.get("count") == "exact" else None) if p]
        if applied:
            headers.append(("Preference-Applied", ", ".join(applied)))
        if returning == "representation":
            return self._rows_response(request, 201, out, headers)
        return Response(201, b"", headers, content_type=None)

    def _rows_response(self, request, status, rows, headers):
        accept = request.header("accept", "")
        if "application/vnd.pgrst.object+json" in accept:
            if len(rows) != 1:
                return pgrst_error(406, "PGRST116", "Cannot coerce the result to a single JSON object",
                                   "The result contains %d rows" % len(rows))
            return Response(status, rows[0], headers)
        return Response(status, rows, headers)

    def _where(self, request, table, alias=None):
        """PostgREST's horizontal filters, the simple ones: col=[not.]op.value with
        eq, neq, gt, gte, lt, lte, like, ilike, in, is."""
        clauses, params = [], []
        reserved = {"select", "order", "limit", "offset", "columns", "on_conflict"}
        for key, value in request.query:
            if key in reserved:
                continue
            if key in ("or", "and", "not.or", "not.and"):
                raise QueryError(pgrst_error(400, "PGRST100", "\"%s\" filters are not supported by the double" % key))
            name = unquote_ident(key)
            if name not in table.columns:
                raise QueryError(pgrst_error(400, "42703", "column %s.%s does not exist" % (table.name, name)))
            col = sql.Identifier(alias, name) if alias else sql.Identifier(name)
            typ = sql.SQL(table.columns[name]["type"])
            negate = value.startswith("not.")
            if negate:
                value = value[4:]
            op, dot, operand = value.partition(".")
            if not dot:
                raise QueryError(pgrst_error(400, "PGRST100", "failed to parse filter (%s)" % value, "unexpected end of input"))
            ops = {"eq": "=", "neq": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
            if op in ops:
                clause = sql.SQL("{} " + ops[op] + " %s::{}").format(col, typ)
                params.append(operand)
            elif op in ("like", "ilike"):
                clause = sql.SQL("{}::text " + op.upper() + " %s").format(col)
                params.append(operand.replace("*", "%"))
            elif op == "in":
                if not (operand.startswith("(") and operand.endswith(")")):
                    raise QueryError(pgrst_error(400, "PGRST100", "failed to parse filter (%s)" % value))
                items = [unquote_ident(v) for v in split_top(operand[1:-1])] if operand[1:-1] else []
                clause = sql.SQL("{} = ANY(%s::{}[])").format(col, typ)
                params.append(items)
            elif op == "is":
                word = {"null": "NULL", "not_null": "NOT NULL", "true": "TRUE", "false": "FALSE", "unknown": "UNKNOWN"}.get(operand.lower())
                if word is None:
                    raise QueryError(pgrst_error(400, "PGRST100", "failed to parse filter (%s)" % value))
                clause = sql.SQL("{} IS " + word).format(col)
            else:
                raise QueryError(pgrst_error(400, "PGRST100", "operator %s is not supported by the double" % op))
            clauses.append(sql.SQL("NOT ({})").format(clause) if negate else clause)
        where = sql.SQL(" WHERE ") + sql.SQL(" AND ").join(clauses) if clauses else sql.SQL("")
        return where, params

    def _select_list(self, table, text):
        if text is None or text.strip() in ("", "*"):
            return sql.SQL("*")
        items = []
        for raw in split_top(text):
            raw = raw.strip()
            if not raw:
                continue
            if raw == "*":
                items.append(sql.SQL("*"))
                continue
            if "(" in raw or "->" in raw:
                raise QueryError(pgrst_error(400, "PGRST100", "embedding and JSON paths are not supported by the double (%s)" % raw))
            alias, _, rest = raw.rpartition(":") if re.match(r'^[^:]+:[^:]', raw) else ("", "", raw)
            name, _, cast = rest.partition("::")
            name = unquote_ident(name)
            if name not in table.columns:
                raise QueryError(pgrst_error(400, "42703", "column %s.%s does not exist" % (table.name, name)))
            item = sql.Identifier(name)
            if cast:
                if not re.fullmatch(r"[a-z_][a-z0-9_ ]*(\[\])?", cast):
                    raise QueryError(pgrst_error(400, "PGRST100", "bad cast " + cast))
                item = sql.SQL("{}::{}").format(item, sql.SQL(cast))
            items.append(sql.SQL("{} AS {}").format(item, sql.Identifier(unquote_ident(alias) or name)))
        return sql.SQL(", ").join(items)

    def _order(self, table, text):
        if not text:
            return sql.SQL("")
        terms = []
        for term in split_top(text):
            parts = term.strip().split(".")
            name = unquote_ident(parts[0])
            if name not in table.columns:
                raise QueryError(pgrst_error(400, "42703", "column %s.%s does not exist" % (table.name, name)))
            piece = sql.Identifier(name)
            for modifier in parts[1:]:
                words = {"asc": "ASC", "desc": "DESC", "nullsfirst": "NULLS FIRST", "nullslast": "NULLS LAST"}
                if modifier not in words:
                    raise QueryError(pgrst_error(400, "PGRST100", "failed to parse order (%s)" % term))
                piece = sql.SQL("{} " + words[modifier]).format(piece)
            terms.append(piece)
        return sql.SQL(" ORDER BY ") + sql.SQL(", ").join(terms)

    @staticmethod
    def _int_param(request, name):
        value = request.param(name)
        if value is None:
            return None
        if not value.isdigit():
            raise QueryError(pgrst_error(400, "PGRST100", "failed to parse %s parameter (%s)" % (name, value)))
        return int(value)

    async def _select(self, request, table, claims, role, prefs):
        columns = self._select_list(table, request.param("select"))
        where, params = self._where(request, table)
        order = self._order(table, request.param("order"))
        limit, offset = self._int_param(request, "limit"), self._int_param(request, "offset") or 0
        statement = sql.SQL("SELECT {} FROM {}{}{}").format(columns, table.ident, where, order)
        if limit is not None:
            statement += sql.SQL(" LIMIT {}").format(sql.Literal(limit))
        if offset:
            statement += sql.SQL(" OFFSET {}").format(sql.Literal(offset))
        async with self._as(request, claims, role) as conn:
            text = (await (await conn.execute(
                sql.SQL("SELECT coalesce(json_agg(pgrst_rows), '[]')::text FROM ({}) pgrst_rows").format(statement), params)).fetchone())[0]
            total = None
            if prefs.get("count") == "exact":
                total = (await (await conn.execute(sql.SQL("SELECT count(*) FROM {}{}").format(table.ident, where), params)).fetchone())[0]
        rows = json.loads(text)
        total_text = str(total) if total is not None else "*"
        content_range = ("%d-%d/%s" % (offset, offset + len(rows) - 1, total_text)) if rows else "*/%s" % total_text
        return self._rows_response(request, 200, rows, [("Content-Range", content_range)])

    async def _update(self, request, table, claims, role, prefs):
        try:
            body = request.json()
        except (ValueError, UnicodeDecodeError):
            return pgrst_error(400, "PGRST102", "Empty or invalid json")
        if not isinstance(body, dict):
            return pgrst_error(400, "PGRST102", "Empty or invalid json")
        columns = self._columns_list(table, request.param("columns")) if request.param("columns") else list(body.keys())
        self._columns_list(table, ",".join('"%s"' % c.replace('"', '\\"') for c in columns))
        where, params = self._where(request, table, alias="pgrst_target")
        returning = prefs.get("return", "minimal")
        if not columns:
            return Response(204, b"", [("Content-Range", "*/*")], content_type=None)
        sets = sql.SQL(", ").join(sql.SQL("{c} = pgrst_body.{c}").format(c=sql.Identifier(c)) for c in columns)
        statement = sql.SQL("UPDATE {t} AS pgrst_target SET {sets} FROM (SELECT * FROM jsonb_populate_record(NULL::{t}, %s::jsonb)) pgrst_body{where}").format(
            t=table.ident, sets=sets, where=where)
        params = [json.dumps(body)] + params
        async with self._as(request, claims, role) as conn:
            if returning == "representation":
                text, n = await (await conn.execute(sql.SQL("WITH pgrst_source AS ({} RETURNING pgrst_target.*) SELECT coalesce(json_agg(pgrst_source), '[]')::text, count(*) FROM pgrst_source").format(statement), params)).fetchone()
                return self._rows_response(request, 200, json.loads(text), [("Content-Range", "0-%d/*" % (n - 1) if n else "*/*")])
            n = (await conn.execute(statement, params)).rowcount
        return Response(204, b"", [("Content-Range", "0-%d/*" % (n - 1) if n > 0 else "*/*")], content_type=None)

    async def _delete(self, request, table, claims, role, prefs):
        where, params = self._where(request, table)
        returning = prefs.get("return", "minimal")
        statement = sql.SQL("DELETE FROM {}{}").format(table.ident, where)
        async with self._as(request, claims, role) as conn:
            if returning == "representation":
                text, n = await (await conn.execute(sql.SQL("WITH pgrst_source AS ({} RETURNING *) SELECT coalesce(json_agg(pgrst_source), '[]')::text, count(*) FROM pgrst_source").format(statement), params)).fetchone()
                return self._rows_response(request, 200, json.loads(text), [("Content-Range", "*/*")])
            await conn.execute(statement, params)
        return Response(204, b"", [("Content-Range", "*/*")], content_type=None)

    async def _rpc(self, request, name, claims, role):
        if request.method not in ("GET", "HEAD", "POST"):
            return pgrst_error(405, "PGRST101", "Cannot use the %s method on RPC" % request.method)
        if request.method == "POST":
            try:
                args = request.json() or {}
            except (ValueError, UnicodeDecodeError):
                return pgrst_error(400, "PGRST102", "Empty or invalid json")
            if not isinstance(args, dict):
                return pgrst_error(400, "PGRST102", "Empty or invalid json")
        else:
            args = {k: v for k, v in request.query if k not in ("select", "order", "limit", "offset")}
        candidates = self.functions.get(name)
        if candidates is None:
            self.reload_schema()
            candidates = self.functions.get(name, [])
        keys = set(args)
        chosen = None
        for fn in candidates:
            names = {a[0] for a in fn.args}
            required = {a[0] for a in fn.args if not a[2]}
            if required <= keys <= names:
                chosen = fn
                break
        if chosen is None:
            listed = ", ".join(sorted(keys))
            return pgrst_error(404, "PGRST202",
                               "Could not find the function public.%s%s in the schema cache" % (name, "(%s)" % listed if keys else " without parameters"),
                               "Searched for the function public.%s with parameter%s %s or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache." % (name, "s" if len(keys) > 1 else "", listed))
        call_args = []
        for arg_name, typ, _ in chosen.args:
            if arg_name not in keys:
                continue
            if typ in ("json", "jsonb"):
                value = sql.SQL("(pgrst_args.j -> {})::{}").format(sql.Literal(arg_name), sql.SQL(typ))
            else:
                value = sql.SQL("(pgrst_args.j ->> {})::{}").format(sql.Literal(arg_name), sql.SQL(typ))
            call_args.append(sql.SQL("{} => {}").format(sql.Identifier(arg_name), value))
        call = sql.SQL("{}({})").format(sql.Identifier("public", name), sql.SQL(", ").join(call_args))
        if chosen.retset or chosen.rettyptype == "c":
            agg = "coalesce(json_agg(pgrst_call), '[]')::text" if chosen.retset else "to_json(pgrst_call)::text"
            statement = sql.SQL("SELECT " + agg + " FROM (SELECT %s::jsonb AS j) pgrst_args, {} pgrst_call").format(call)
        elif chosen.rettype == "void":
            statement = sql.SQL("SELECT {} FROM (SELECT %s::jsonb AS j) pgrst_args").format(call)
        else:
            statement = sql.SQL("SELECT to_json({})::text FROM (SELECT %s::jsonb AS j) pgrst_args").format(call)
        try:
            async with self._as(request, claims, role) as conn:
                row = await (await conn.execute(statement, (json.dumps(args),))).fetchone()
        except psycopg.Error as e:
            if e.sqlstate is None:
                raise
            return pg_error_response(e, role != "anon")
        if chosen.rettype == "void":
            return Response(204, b"", content_type=None)
        return Response(200, row[0] if row and row[0] is not None else "null")


class QueryError(Exception):
    def __init__(self, response):
        super().__init__(response.status)
        self.response = response


# --- Realtime -----------------------------------------------------------------------------------

class Channel:
    """One joined topic on one socket."""

    def __init__(self, sock, topic, join_ref, config, claims, token):
        self.sock, self.topic, self.join_ref = sock, topic, join_ref
        self.sub_topic = topic[len("realtime:"):]
        config = config or {}
        self.private = bool(config.get("private"))
        broadcast = config.get("broadcast") or {}
        self.self_broadcast = bool(broadcast.get("self"))
        self.ack = bool(broadcast.get("ack"))
        presence = config.get("presence") or {}
        key = presence.get("key")
        self.presence_key = key if isinstance(key, str) and key else str(uuid.uuid1())
        self.presence_enabled = bool(presence.get("enabled"))
        self.presence_meta = None
        self.presence_calls = []
        self.bindings = []
        for params in config.get("postgres_changes") or []:
            if isinstance(params, dict):
                canonical = json.dumps(params, sort_keys=True, separators=(",", ":"))
                self.bindings.append(dict(params, id=zlib.crc32(canonical.encode()) & 0x7FFFFFF))
        self.claims, self.token = claims, token
        self.expiry_timer = None

    @property
    def key(self):
        return (self.sub_topic, self.private)


class Socket:
    def __init__(self, rt, writer, vsn, apikey):
        self.rt, self.writer, self.vsn, self.apikey = rt, writer, vsn, apikey
        self.protocol = ServerProtocol(state=State.OPEN, max_size=8_000_000)
        self.channels = {}          # topic -> Channel
        self.closed = False
        self.last_seen = time.monotonic()

    def encode(self, topic, event, payload, ref=None, join_ref=None):
        # Phoenix's serializers: V1 a JSON object without join_ref, V2 an array
        # [join_ref, ref, topic, event, payload]; a server push has ref null.
        if self.vsn == "2.0.0":
            return json.dumps([join_ref, ref, topic, event, payload], separators=(",", ":"))
        return json.dumps({"topic": topic, "event": event, "payload": payload, "ref": ref}, separators=(",", ":"))

    def push(self, topic, event, payload, ref=None, join_ref=None):
        if self.closed or self.protocol.state is not State.OPEN:
            return  # the client is closing: what it asked for before goes unanswered, as with Phoenix
        text = self.encode(topic, event, payload, ref, join_ref)
        self.rt.double.realtime_log.append({"t": time.time(), "dir": "out", "text": text})
        self.protocol.send_text(text.encode("utf-8"))
        self.flush()

    def reply(self, topic, ref, status, response, join_ref=None):
        self.push(topic, "phx_reply", {"status": status, "response": response}, ref, join_ref)

    def flush(self):
        for data in self.protocol.data_to_send():
            if data:
                self.writer.write(data)
            else:
                self.closed = True
                with contextlib.suppress(Exception):
                    self.writer.close()


class Realtime:
    """Supabase Realtime's channel protocol, as the official clients use it
    (realtime-py's AsyncRealtimeClient; supabase-swift's RealtimeClientV2 at
    vsn 1.0.0). Message shapes follow supabase/realtime's RealtimeChannel,
    PresenceHandler and BroadcastHandler."""

    def __init__(self, double):
        self.double = double
        self.sockets = set()
        self.presence = {}     # (sub_topic, private) -> {channel: meta}

    # --- authorisation: the double's stand-in for realtime.messages RLS ---------------

    def may_join(self, claims, sub_topic):
        """Private channels need a signed-in role. A device token reaches its own
        device:<uuid>, devices:all, settings:global, ios:build and its owner's
        profile:<owner>; the dashboard's tokens (a user without a device claim,
        service_role) reach any topic."""
        role = claims.get("role")
        if role == "service_role":
            return True
        if role != "authenticated":
            return False
        device = device_of(claims)
        if device is None:
            return True
        if sub_topic in ("devices:all", "settings:global", "ios:build"):
            return True
        if sub_topic.startswith("device:"):
            return sub_topic[len("device:"):].lower() == device
        if sub_topic.startswith("profile:"):
            return sub_topic[len("profile:"):].lower() == str(claims.get("sub", "")).lower()
        return False

    async def check_token(self, token, sock):
        """(claims, None) or (None, reason) as Realtime's join says it."""
        if token is None:
            token = sock.apikey
        if token == self.double.anon_key:
            return {"role": "anon", "exp": _now() + 3600}, None
        try:
            claims = verify_jwt(token, self.double.secret, leeway=0)  # Realtime (Joken) allows no skew
        except AuthError as e:
            if e.code == "PGRST303" and e.expired_by is not None:
                return None, "InvalidJWTToken: Token has expired %d seconds ago" % max(e.expired_by, 0)
            if e.message in ("JWT cryptographic operation failed",):
                return None, "JwtSignatureError: Failed to validate JWT signature"
            if e.code == "PGRST303":
                return None, "InvalidJWTToken: Token expiration time is invalid"
            return None, "MalformedJWT: The token provided is not a valid JWT"
        if "role" not in claims or "exp" not in claims:
            return None, "InvalidJWTToken: Fields `role` and `exp` are required in JWT"
        device = device_of(claims)
        if device:
            problem = await self.double._revocation(device, claims.get("jti"))
            if problem:
                return None, "Unauthorized: " + problem
        return claims, None

    # --- the socket -------------------------------------------------------------------

    async def serve(self, request, reader, writer):
        double = self.double
        query = dict(request.query)
        apikey = query.get("apikey") or request.header("apikey")
        vsn = query.get("vsn", "1.0.0")
        key = request.header("sec-websocket-key")
        if request.method != "GET" or "upgrade" not in request.header("connection", "").lower() or not key \
                or request.header("sec-websocket-version") != "13" or request.path != "/realtime/v1/websocket":
            await double._write(writer, Response(400, {"message": "not a WebSocket upgrade to /realtime/v1/websocket"}), close=True)
            return
        refusal = double._gateway(request)
        if refusal is not None:
            await double._write(writer, refusal, close=True)
            return
        if vsn not in ("1.0.0", "2.0.0"):
            await double._write(writer, Response(400, {"message": "unsupported vsn " + vsn}), close=True)
            return
        accept = accept_key(key)
        writer.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Accept: %s\r\nServer: busymate-cloud-double\r\n\r\n" % accept).encode())
        sock = Socket(self, writer, vsn, apikey)
        self.sockets.add(sock)
        idle = asyncio.create_task(self._idle_watch(sock))
        fragments = []
        try:
            while not sock.closed:
                data = await reader.read(65536)
                if not data:
                    sock.protocol.receive_eof()
                    sock.flush()
                    break
                sock.last_seen = time.monotonic()
                sock.protocol.receive_data(data)
                for frame in sock.protocol.events_received():
                    if frame.opcode in (Opcode.TEXT, Opcode.BINARY) or frame.opcode == Opcode.CONT:
                        fragments.append(frame.data)
                        if frame.fin:
                            text = b"".join(fragments)
                            fragments = []
                            await self._message(sock, text)
                sock.flush()
                if sock.protocol.state == State.CLOSED:
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            idle.cancel()
            await self._drop_socket(sock)
            with contextlib.suppress(Exception):
                writer.close()

    async def _idle_watch(self, sock):
        timeout = self.double.realtime_idle_timeout
        while not sock.closed and timeout:
            await asyncio.sleep(min(timeout, 5))
            if time.monotonic() - sock.last_seen > timeout:
                sock.protocol.send_close(1000, "")
                sock.flush()
                with contextlib.suppress(Exception):
                    sock.writer.transport.abort()
                return

    async def _drop_socket(self, sock):
        sock.closed = True
        self.sockets.discard(sock)
        for channel in list(sock.channels.values()):
            self._remove_channel(channel)

    async def close_all(self):
        for sock in list(self.sockets):
            with contextlib.suppress(Exception):
                sock.protocol.send_close(1001, "")
                sock.flush()
                sock.writer.transport.abort()
            await self._drop_socket(sock)

    # --- messages ----------------------------------------------------------------------

    async def _message(self, sock, data):
        text = data.decode("utf-8", errors="replace")
        self.double.realtime_log.append({"t": time.time(), "dir": "in", "text": text})
        try:
            msg = json.loads(text)
            if sock.vsn == "2.0.0":
                join_ref, ref, topic, event, payload = msg
            else:
                topic, event, payload, ref = msg["topic"], msg["event"], msg.get("payload"), msg.get("ref")
                join_ref = msg.get("join_ref")
        except (ValueError, KeyError, TypeError):
            return  # Phoenix drops what it cannot decode
        payload = payload if isinstance(payload, dict) else {}
        if topic == "phoenix":
            if event == "heartbeat":
                sock.reply("phoenix", ref, "ok", {})
            return
        if event == "phx_join":
            await self._join(sock, topic, payload, ref)
            return
        channel = sock.channels.get(topic)
        if channel is None:
            sock.reply(topic, ref, "error", {"reason": "unmatched topic"}, join_ref)
            return
        if event == "phx_leave":
            sock.reply(topic, ref, "ok", {}, channel.join_ref)
            self._remove_channel(channel)
            sock.push(topic, "phx_close", {}, channel.join_ref, channel.join_ref)
        elif event == "heartbeat":
            sock.reply(topic, ref, "ok", {}, channel.join_ref)
        elif event == "access_token":
            await self._access_token(channel, payload.get("access_token"))
        elif event == "broadcast":
            await self._client_broadcast(channel, payload, ref)
        elif event == "presence":
            self._presence(channel, payload, ref)
        # anything else: Realtime logs it and does not answer

    async def _join(self, sock, topic, payload, ref):
        if not topic.startswith("realtime:") or topic == "realtime:":
            reason = "unmatched topic" if not topic.startswith("realtime:") else "TopicNameRequired: You must provide a topic name"
            sock.reply(topic, ref, "error", {"reason": reason}, ref)
            return
        old = sock.channels.get(topic)
        if old is not None:  # Phoenix: a second join of a topic closes the first
            self._remove_channel(old)
            sock.push(topic, "phx_close", {}, old.join_ref, old.join_ref)
        token = payload.get("access_token") or payload.get("user_token")
        claims, reason = await self.check_token(token, sock)
        if claims is not None:
            config = payload.get("config") if isinstance(payload.get("config"), dict) else {}
            if config.get("private") and not self.may_join(claims, topic[len("realtime:"):]):
                claims, reason = None, "Unauthorized: You do not have permissions to read from this Channel topic: " + topic[len("realtime:"):]
        if claims is None:
            sock.reply(topic, ref, "error", {"reason": reason}, ref)
            return
        channel = Channel(sock, topic, ref, payload.get("config"), claims, token or sock.apikey)
        sock.channels[topic] = channel
        self.presence.setdefault(channel.key, {})
        sock.reply(topic, ref, "ok", {"postgres_changes": channel.bindings}, ref)
        self._schedule_expiry(channel)
        if channel.bindings:
            self._system(channel, "postgres_changes", "ok", "Subscribed to PostgreSQL")
        if channel.presence_enabled:
            self._send_presence_state(channel)

    def _system(self, channel, extension, status, message):
        channel.sock.push(channel.topic, "system", {"extension": extension, "status": status, "message": message,
                                                    "channel": channel.sub_topic}, join_ref=channel.join_ref)

    def _shutdown(self, channel, message):
        """Realtime's shutdown_response: a system error, then the channel stops (phx_close)."""
        self._system(channel, "system", "error", message)
        self._remove_channel(channel)
        channel.sock.push(channel.topic, "phx_close", {}, channel.join_ref, channel.join_ref)

    def _schedule_expiry(self, channel):
        if channel.expiry_timer:
            channel.expiry_timer.cancel()
        exp = channel.claims.get("exp")
        if not isinstance(exp, (int, float)):
            return
        delay = min(max(exp - time.time(), 0), 3600)
        channel.expiry_timer = asyncio.get_running_loop().call_later(delay + 0.05, self._confirm_token, channel)

    def _confirm_token(self, channel):
        if channel.sock.channels.get(channel.topic) is not channel:
            return
        exp = channel.claims.get("exp")
        if isinstance(exp, (int, float)) and exp <= time.time():
            self._shutdown(channel, "Token has expired %d seconds ago" % int(time.time() - exp))
        else:
            self._schedule_expiry(channel)

    async def _access_token(self, channel, token):
        if token is None or token == channel.token or (isinstance(token, str) and token.startswith("sb_")):
            return
        claims, reason = await self.check_token(token, channel.sock)
        if claims is not None and channel.private and not self.may_join(claims, channel.sub_topic):
            claims, reason = None, "You do not have permissions to read from this Channel topic: " + channel.sub_topic
        if claims is None:
            # Realtime sends the message without its "Code: " prefix here.
            self._shutdown(channel, reason.split(": ", 1)[1] if ": " in reason else reason)
            return
        channel.claims, channel.token = claims, token
        self._schedule_expiry(channel)

    async def _client_broadcast(self, channel, payload, ref):
        if not channel.private or self.may_join(channel.claims, channel.sub_topic):
            self._relay(channel.key, payload, exclude=None if channel.self_broadcast else channel)
        if channel.ack:
            channel.sock.reply(channel.topic, ref, "ok", {}, channel.join_ref)

    def _relay(self, key, payload, exclude=None):
        n = 0
        for sock in list(self.sockets):
            for channel in list(sock.channels.values()):
                if channel.key == key and channel is not exclude:
                    sock.push(channel.topic, "broadcast", payload, join_ref=channel.join_ref)
                    n += 1
        return n

    async def broadcast(self, topic, event, payload, private=None):
        topic = topic[len("realtime:"):] if topic.startswith("realtime:") else topic
        message = {"type": "broadcast", "event": event, "payload": payload}
        n = 0
        for is_private in ((False, True) if private is None else (bool(private),)):
            n += self._relay((topic, is_private), message)
        return n

    async def expire(self, topic=None, device=None):
        n = 0
        for sock in list(self.sockets):
            for channel in list(sock.channels.values()):
                if (topic is None or topic in (channel.sub_topic, channel.topic)) and (device is None or device_of(channel.claims) == str(device).lower()):
                    self._shutdown(channel, "Token has expired 0 seconds ago")
                    n += 1
        return n

    # --- presence --------------------------------------------------------------------

    def _presence(self, channel, payload, ref):
        sock = channel.sock
        now = time.monotonic()
        calls, window = self.double.presence_limit or (0, 0)
        if calls:
            channel.presence_calls = [t for t in channel.presence_calls if now - t < window] + [now]
            if len(channel.presence_calls) > calls:
                self._shutdown(channel, "Client presence rate limit exceeded")
                return
        event = str(payload.get("event", "")).lower()
        if event == "track":
            meta = payload.get("payload", {})
            if not isinstance(meta, dict):
                sock.reply(channel.topic, ref, "error", {"reason": "Presence track payload must be a map"}, channel.join_ref)
                return
            if channel.private and not self.may_join(channel.claims, channel.sub_topic):
                sock.reply(channel.topic, ref, "error", {}, channel.join_ref)
                return
            sock.reply(channel.topic, ref, "ok", {}, channel.join_ref)
            resync = not channel.presence_enabled
            channel.presence_enabled = True
            old = channel.presence_meta
            if old is not None and {k: v for k, v in old.items() if not k.startswith("phx_ref")} == meta:
                return  # Realtime: no change, no diff
            new = dict(meta, phx_ref=self._phx_ref())
            if old is not None:
                new["phx_ref_prev"] = old["phx_ref"]
            channel.presence_meta = new
            self.presence.setdefault(channel.key, {})[channel] = new
            leaves = {channel.presence_key: {"metas": [old]}} if old else {}
            self._presence_diff(channel.key, {channel.presence_key: {"metas": [new]}}, leaves)
            if resync:
                self._send_presence_state(channel)
        elif event == "untrack":
            sock.reply(channel.topic, ref, "ok", {}, channel.join_ref)
            self._untrack(channel)
        else:
            sock.reply(channel.topic, ref, "error", {}, channel.join_ref)

    @staticmethod
    def _phx_ref():
        return base64.b32encode(os.urandom(10)).decode().rstrip("=")[:16]

    def _state(self, key):
        state = {}
        for channel, meta in self.presence.get(key, {}).items():
            state.setdefault(channel.presence_key, {"metas": []})["metas"].append(
                {k: v for k, v in meta.items() if k != "phx_ref_prev"})
        return state

    def _send_presence_state(self, channel):
        channel.sock.push(channel.topic, "presence_state", self._state(channel.key), join_ref=channel.join_ref)

    def _presence_diff(self, key, joins, leaves):
        # A public channel hears every diff; a private one once presence is on for it.
        for sock in list(self.sockets):
            for channel in list(sock.channels.values()):
                if channel.key == key and (not channel.private or channel.presence_enabled):
                    sock.push(channel.topic, "presence_diff", {"joins": joins, "leaves": leaves}, join_ref=channel.join_ref)

    def _untrack(self, channel):
        meta = self.presence.get(channel.key, {}).pop(channel, None)
        channel.presence_meta = None
        if meta is not None:
            self._presence_diff(channel.key, {}, {channel.presence_key: {"metas": [meta]}})

    def _remove_channel(self, channel):
        if channel.expiry_timer:
            channel.expiry_timer.cancel()
        if channel.sock.channels.get(channel.topic) is channel:
            del channel.sock.channels[channel.topic]
        self._untrack(channel)

    # --- the database's messages and changes -------------------------------------------------

    async def listen_database(self, listening):
        """LISTEN for realtime.send() messages and captured table changes; on a
        lost connection, try again."""
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.double.admin_dsn, autocommit=True)
                async with conn:
                    await conn.execute("SET TimeZone TO 'UTC'")
                    await conn.execute("LISTEN busymate_realtime")
                    await conn.execute("LISTEN busymate_changes")
                    listening.set()
                    reader = await psycopg.AsyncConnection.connect(self.double.admin_dsn, autocommit=True)
                    async with reader:
                        await reader.execute("SET TimeZone TO 'UTC'")
                        async for note in conn.notifies():
                            try:
                                if note.channel == "busymate_realtime":
                                    await self._db_message(reader, int(note.payload))
                                else:
                                    await self._db_change(reader, int(note.payload))
                            except (ValueError, psycopg.Error):
                                pass
            except asyncio.CancelledError:
                return
            except psycopg.Error:
                await asyncio.sleep(0.5)

    async def _db_message(self, conn, message_id):
        row = await (await conn.execute("SELECT topic, event, payload, private, extension FROM realtime.messages WHERE id = %s",
                                        (message_id,))).fetchone()
        if row and row[4] == "broadcast":
            topic, event, payload, private, _ = row
            await self.broadcast(topic, event, payload if payload is not None else {}, private)

    async def _db_change(self, conn, change_id):
        row = await (await conn.execute(
            """SELECT schema_name, table_name, type, record, old_record,
                      to_char(commit_timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
               FROM realtime.changes WHERE id = %s""", (change_id,))).fetchone()
        if not row:
            return
        schema, table_name, kind, record, old_record, stamp = row
        table = self.double.tables.get(table_name)
        if table is None:
            return
        columns = [{"name": c, "type": table.columns[c]["typname"]} for c in table.order]
        if old_record is not None and kind == "UPDATE":
            old_record = {k: old_record.get(k) for k in table.pk}  # replica identity default: the key only
        if kind == "DELETE":
            old_record = {k: old_record.get(k) for k in table.pk}
        for sock in list(self.sockets):
            for channel in list(sock.channels.values()):
                ids = [b["id"] for b in channel.bindings if self._binding_matches(b, schema, table_name, kind, record or old_record)]
                if not ids:
                    continue
                if kind != "DELETE" and not await self._can_see(conn, channel.claims, table, record):
                    continue
                data = {"schema": schema, "table": table_name, "commit_timestamp": stamp, "type": kind, "columns": columns,
                        "errors": None}
                if kind != "DELETE":
                    data["record"] = record
                if kind != "INSERT":
                    data["old_record"] = old_record
                sock.push(channel.topic, "postgres_changes", {"ids": ids, "data": data}, join_ref=channel.join_ref)

    @staticmethod
    def _binding_matches(binding, schema, table, kind, record):
        if binding.get("schema", "public") not in ("*", schema):
            return False
        if binding.get("table", "*") not in ("*", table):
            return False
        if str(binding.get("event", "*")).upper() not in ("*", kind):
            return False
        flt = binding.get("filter")
        if flt:
            column, _, rest = flt.partition("=")
            op, _, value = rest.partition(".")
            actual = (record or {}).get(column)
            actual = "" if actual is None else str(actual).lower() if not isinstance(actual, bool) else str(actual).lower()
            if op == "eq":
                return actual == value.lower()
            if op == "neq":
                return actual != value.lower()
            if op == "in":
                return actual in [v.strip().strip('"').lower() for v in value.strip("()").split(",")]
            return False  # other operators: not supported by the double
        return True

    async def _can_see(self, conn, claims, table, record):
        """Realtime delivers a change only to a subscriber whose RLS lets it
        select the row: ask PostgreSQL, as that subscriber."""
        if not table.pk or not record:
            return claims.get("role") == "service_role"
        role = claims.get("role") or "anon"
        try:
            async with conn.transaction():
                await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
                await conn.execute("SELECT set_config('request.jwt.claims', %s, true)", (json.dumps(claims),))
                cond = sql.SQL(" AND ").join(
                    sql.SQL("{} = (%s::jsonb ->> {})::{}").format(sql.Identifier(k), sql.Literal(k), sql.SQL(table.columns[k]["type"]))
                    for k in table.pk)
                row = await (await conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE {})").format(table.ident, cond),
                                                [json.dumps(record)] * len(table.pk))).fetchone()
                return bool(row[0])
        except psycopg.Error:
            return False


# --- standalone ------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description="The Supabase contract double, on its own.")
    parser.add_argument("--dsn", required=True, help="a superuser conninfo of a database with schema.sql loaded")
    parser.add_argument("--secret", required=True, help="the JWT secret")
    parser.add_argument("--anon-key", help="the project's anon key (default: an anon JWT minted with the secret)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", help="write the port here once listening")
    args = parser.parse_args()
    double = CloudDouble(args.dsn, args.secret, anon_key=args.anon_key, port=args.port)
    double.start()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % double.port)
        os.rename(tmp, args.port_file)
    print("cloud double on %s (anon key %s)" % (double.url, double.anon_key), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    double.stop()


if __name__ == "__main__":
    main()
