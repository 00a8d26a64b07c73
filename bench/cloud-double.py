#!/usr/bin/env python3
"""The cloud suite's PostgreSQL 15 and contract double, for `make bench`'s
cloud cells: started here, driven one line at a time on stdin.

First line out: {"url", "anon_key", "team_url"} as JSON. Then, per line in:
  code                      a pairing code           -> the code
  control ok|down           the double's fault mode  -> ok
  count UUID                entries of that device   -> the count
  team-count                entries in the team database -> the count
  team-connections on|off   the team database takes connections or not -> ok
End of input stops everything.
"""
import json, os, random, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cloud"))
import psycopg  # noqa: E402
from pg import Postgres  # noqa: E402
from double import CloudDouble  # noqa: E402


def main():
    anon = "anon-%032x" % random.getrandbits(128)
    secret = "bench-secret-%032x" % random.getrandbits(128)
    with Postgres() as pg:
        pg.query("CREATE DATABASE team")
        team_dsn = pg.dsn_for("postgres", "team")
        with psycopg.connect(team_dsn, autocommit=True) as conn, open(os.path.join(HERE, "..", "tests", "cloud", "schema.sql")) as f:
            conn.execute(f.read())
        double = CloudDouble(pg, secret, anon_key=anon)
        double.start()
        try:
            print(json.dumps({"url": double.url, "anon_key": anon,
                              "team_url": "postgres://postgres@127.0.0.1:%d/team?sslmode=disable" % pg.port}), flush=True)
            for line in sys.stdin:
                words = line.split()
                if not words:
                    continue
                if words[0] == "code":
                    answer = double.mint_code()
                elif words[0] == "control":
                    double.control(mode=words[1])
                    answer = "ok"
                elif words[0] == "count":
                    answer = str(pg.query("SELECT count(*) FROM entries WHERE device_uuid::text = %s", words[1])[0][0])
                elif words[0] == "team-count":
                    with psycopg.connect(team_dsn, autocommit=True) as conn:
                        answer = str(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
                elif words[0] == "team-connections":
                    allow = words[1] == "on"
                    pg.query("ALTER DATABASE team ALLOW_CONNECTIONS %s" % ("true" if allow else "false"))
                    if not allow:
                        pg.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'team'")
                    answer = "ok"
                else:
                    answer = "unknown: " + words[0]
                print(answer, flush=True)
        finally:
            double.stop()


if __name__ == "__main__":
    main()
