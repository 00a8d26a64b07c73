"""Rules on HTTP/2 streams: each stream of one connection is decided and
edited on its own (a connection's hooks are one list; each exchange has its
own flow), and each row names the rules that acted on it."""
import json

from harness import body_json, check
from stream_cases import h2_via_mitm

RULES = [
    {"name": "tag-h2", "match": "~u case=rule-h2-tagged", "action": "headers",
     "request": {"add": {"X-Rule": "tagged"}}, "response": {"add": {"X-Was-Tagged": "1"}}},
    {"name": "block-h2", "match": "~u case=rule-h2-blocked", "action": "block", "status": 418},
]


def rules_per_stream(w):
    """Three concurrent streams on one connection: one edited both ways, one blocked, one untouched."""
    w.busymate.write_settings(rules=RULES)
    w.busymate.wait_applied()
    client = None
    try:
        client = h2_via_mitm(w, "main_tls")
        if not client:
            return
        authority = "localhost:%d" % w.origins["main_tls"]
        tagged = client.request("GET", authority, "/echo?case=rule-h2-tagged")
        blocked = client.request("GET", authority, "/echo?case=rule-h2-blocked")
        plain = client.request("GET", authority, "/echo?case=rule-h2-plain")
        client.wait([tagged, blocked, plain], 10)
        t, b, p = client.streams[tagged], client.streams[blocked], client.streams[plain]
        sent = body_json(bytes(t.data)) or {}
        check(t.status == "200" and ["x-rule", "tagged"] in sent.get("headers", []), "the tagged stream's request went on with the rule's header",
              "status %s, body %r" % (t.status, bytes(t.data)[:300]))
        check(t.header("x-was-tagged") == "1", "the tagged stream's response has the rule's header", str(t.headers))
        check(b.status == "418", "the blocked stream is answered by its rule", "status %s" % b.status)
        seen = body_json(bytes(p.data)) or {}
        check(p.status == "200" and not any(h[0] == "x-rule" for h in seen.get("headers", [])) and p.header("x-was-tagged") is None,
              "the sibling stream is untouched by its siblings' rules", "status %s, headers %s, body %r" % (p.status, p.headers, bytes(p.data)[:300]))
    finally:
        if client:
            client.close()
        w.busymate.write_settings()
        w.busymate.wait_applied()
    rows = {r["url"].split("case=")[-1]: r for r in w.busymate.rows("~u case=rule-h2-", expect=3)}
    check(rows.get("rule-h2-tagged", {}).get("rule") == "tag-h2" and rows.get("rule-h2-blocked", {}).get("rule") == "block-h2"
          and rows.get("rule-h2-plain", {}).get("rule") is None and all(r.get("http_version") == "HTTP/2.0" for r in rows.values()),
          "each stream's row names the rules that acted on it, and only those", json.dumps(rows)[:800])


CASES = [("rules_per_stream", rules_per_stream)]
