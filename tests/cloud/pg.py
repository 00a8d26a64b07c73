"""A throwaway PostgreSQL 15 for the cloud tests.

    with Postgres() as pg:
        pg.query("SELECT count(*) FROM entries WHERE device_uuid = %s", uuid)

initdb's a cluster into a temporary directory, starts `postgres` on
127.0.0.1 on a port the OS handed out (never a fixed one: other servers run on
these machines), creates the database `busymate` and loads schema.sql beside
this file. Durability is off (fsync, full_page_writes, synchronous_commit): a
test cluster lives for one run. Everything is stopped and removed on exit, on
an exception too.

The server runs as the user `postgres` when we are root (PostgreSQL refuses to
run as root), as ourselves otherwise. It is started directly (Popen with
user=) rather than through runuser, so that the pid we hold is the
postmaster's own and a signal reaches it; it gets SIGINT (a fast shutdown)
should the thread that started it die without stopping it, so start it from
a thread that outlives it (normally the main thread).
"""
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "schema.sql")
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")

_PR_SET_PDEATHSIG = 1


def free_port():
    """A port the OS considers free right now (bind to port 0, read it back,
    let it go). Someone may take it before we do: callers retry."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    # Runs in the child between fork and exec: the postmaster gets a fast
    # shutdown if the thread that started it goes away without stopping it.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)
    except OSError:
        pass


def _reap_stale(age=600):
    """Removes what a killed run left behind (SIGKILL/SIGTERM skip our exit):
    a bm-pg- directory whose server is gone (no postmaster.pid; the server
    itself stopped on its parent's death) and untouched for ten minutes."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        path = os.path.join(base, name)
        if not name.startswith("bm-pg-") or os.path.exists(os.path.join(path, "data", "postmaster.pid")):
            continue
        try:
            if time.time() - os.stat(path).st_mtime > age:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


class Postgres:
    """A PostgreSQL 15 cluster of its own, with the database `busymate`.

    .dsn is the superuser's conninfo, .port the TCP port, .dir the temporary
    directory, .dsn_for(role) a conninfo for another role (trust auth: no
    passwords). .query(sql, *args) runs one statement in autocommit with %s
    placeholders and returns its rows as tuples ([] when it returns none).
    """

    dbname = "busymate"

    def __init__(self, schema=SCHEMA, dbname=None, start_timeout=10.0):
        self.schema = schema
        if dbname:
            self.dbname = dbname
        self.start_timeout = start_timeout
        self.dir = None
        self.port = None
        self.proc = None
        self._conn = None
        self._lock = threading.Lock()

    # --- lifecycle -----------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        started = time.monotonic()
        _reap_stale()
        self.dir = tempfile.mkdtemp(prefix="bm-pg-")
        as_root = os.geteuid() == 0
        user = pwd.getpwnam("postgres") if as_root else pwd.getpwuid(os.geteuid())
        self._user = user
        data = os.path.join(self.dir, "data")
        self.socket_dir = os.path.join(self.dir, "sock")
        os.makedirs(self.socket_dir)
        if as_root:
            for path in (self.dir, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(self.dir, 0o755)
        self.log_path = os.path.join(self.dir, "postgres.log")
        self._run([os.path.join(PG_BIN, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                   "--locale=C", "--no-sync", "--no-instructions"])
        last_error = None
        for _ in range(5):  # the free port may be taken between asking and binding
            self.port = free_port()
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [os.path.join(PG_BIN, "postgres"), "-D", data, "-p", str(self.port), "-k", self.socket_dir,
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
                 "-c", "synchronous_commit=off", "-c", "shared_buffers=16MB", "-c", "max_connections=200",
                 "-c", "TimeZone=UTC", "-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic",
                 "-c", "logging_collector=off"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.dir, **self._as_user(),
                preexec_fn=_die_with_parent)
            log.close()
            last_error = self._wait_ready()
            if last_error is None:
                break
            self._stop_server()
        else:
            raise RuntimeError("PostgreSQL did not start: %s\n%s" % (last_error, self.log_tail()))
        with psycopg.connect(self.dsn_for("postgres", "postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE %s" % self.dbname)
        with open(self.schema) as f:
            schema_sql = f.read()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(schema_sql)
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self):
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:
                    pass
                self._conn = None
        self._stop_server()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # --- use -----------------------------------------------------------------

    @property
    def dsn(self):
        return self.dsn_for("postgres")

    def dsn_for(self, role, dbname=None):
        return "host=127.0.0.1 port=%d dbname=%s user=%s connect_timeout=10" % (self.port, dbname or self.dbname, role)

    def connect(self, role="postgres", **kwargs):
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(self.dsn_for(role), **kwargs)

    def query(self, sql, *args):
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.dsn, autocommit=True)
            cur = self._conn.execute(sql, args or None)
            return cur.fetchall() if cur.description else []

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except (OSError, TypeError):
            return ""

    # --- internals -------------------------------------------------------------

    def _as_user(self):
        if os.geteuid() != 0:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def _run(self, command):
        r = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=self.dir,
                           **self._as_user(), timeout=60)
        if r.returncode != 0:
            raise RuntimeError("%s failed (%d): %s%s" % (os.path.basename(command[0]), r.returncode, r.stdout, r.stderr))

    def _wait_ready(self):
        deadline = time.monotonic() + self.start_timeout
        error = "timed out"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "postgres exited with %s" % self.proc.returncode
            try:
                psycopg.connect(self.dsn_for("postgres", "postgres"), connect_timeout=2).close()
                return None
            except psycopg.OperationalError as e:
                error = str(e).strip()
            time.sleep(0.05)
        return error

    def _stop_server(self):
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)  # fast shutdown: disconnects clients, no checkpoint wait worth noting
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGQUIT)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    with Postgres() as pg:
        print("started in %.2f s on port %d" % (pg.startup_seconds, pg.port))
        print(pg.query("SELECT version()")[0][0])
        print(pg.query("SELECT relname FROM pg_class WHERE relkind IN ('r', 'p') AND relnamespace = 'public'::regnamespace ORDER BY 1"))
