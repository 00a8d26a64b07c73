"""The requests both proxies carry and the filters both apply.

A request is (method, target, path, headers, body): target "plain" and
"plain-localhost" are the HTTP origin by 127.0.0.1 and by localhost, "tls" is
the TLS origin by localhost (intercepted by both), "dead" a port that refuses.
Each URL gets `n=NN` in its query so a captured row names its request."""

REQUESTS = [
    ("GET", "plain", "/echo", [], None),
    ("GET", "plain-localhost", "/echo?q=1&name=caf%C3%A9", [], None),
    ("POST", "plain", "/echo", ["Content-Type: application/x-www-form-urlencoded"], "token=abc123"),
    ("POST", "plain-localhost", "/api/items", ["Content-Type: application/json"], '{"name": "widget"}'),
    ("PUT", "plain", "/api/items/7", ["Content-Type: text/plain"], "replaced"),
    ("DELETE", "plain-localhost", "/api/items/7", [], None),
    ("PATCH", "plain", "/api/items/7", ["Content-Type: application/json"], '{"n": 2}'),
    ("HEAD", "plain", "/echo", [], None),
    ("OPTIONS", "plain-localhost", "/echo", [], None),
    ("GET", "plain", "/json", ["Accept: application/json"], None),
    ("GET", "plain-localhost", "/app.js", [], None),
    ("GET", "plain", "/style.css", [], None),
    ("GET", "plain-localhost", "/img.png", [], None),
    ("GET", "plain", "/font.woff2", [], None),
    ("GET", "plain", "/page", ["User-Agent: Mozilla/5.0 (peer test)", "Accept: text/html"], None),
    ("GET", "plain-localhost", "/gz", ["Accept-Encoding: gzip"], None),
    ("GET", "plain", "/status/404", [], None),
    ("POST", "plain-localhost", "/status/500", ["Content-Type: text/plain"], "boom"),
    ("GET", "plain", "/a%20b/caf%C3%A9", [], None),
    ("GET", "plain-localhost", "/admin", ["X-Role: admin"], None),
    ("GET", "plain", "/admin/users", [], None),
    ("GET", "plain", "/echo/beta", ["X-Beta: 1"], None),
    ("GET", "plain", "/close", [], None),
    ("GET", "dead", "/refused", [], None),
    ("GET", "tls", "/secure?x=1", [], None),
    ("POST", "tls", "/api/login", ["Content-Type: application/json"], '{"user": "u", "password": "secret-token"}'),
    ("GET", "tls", "/json", [], None),
]

# Filters a rule can use: decided on the request, or (a headers rule's
# response edits) on the response head. No bare words: in a Busymate rule a
# bare word is a URL pattern.
RULE_FILTERS = [
    "~m POST",
    "~m POST & ~u echo",
    '~m "^(PUT|PATCH)$"',
    "~u /api/",
    "~u caf%C3%A9",
    "~u q=1",
    "~u ^https://",
    "~u %20",
    "~d localhost",
    "~d ^127\\.0\\.0\\.1$",
    '~h "x-beta: 1"',
    '~hq "user-agent: mozilla"',
    "~hq accept:\\s*application/json",
    "~t json",
    "~tq form",
    "~m post & ~d LOCALHOST",
    '~hq "USER-AGENT: mozilla"',
    "!~m GET",
    "~m GET & !~u echo",
    "~m DELETE | ~m PUT",
    "(~m POST | ~m PUT) & ~d localhost",
    '~u /admin & !~hq "x-role: admin"',
    "~d localhost ~m GET",
    "!(~m GET | ~m HEAD) & ~u items",
    # These read the response: they edit its head, not the request.
    "~ts json",
    "~c 404",
    "!~c 200",
    "~s",
    "!~s",
    '~hs "content-type: text/css"',
    "~a",
    # Either message: the request's at first, the response's once it came.
    '~h "content-type: text/css"',
]

# Differences a rule filter may legitimately show, by filter: why.
RULE_DIFFERENCES = {
    "~u café": "~u also matches the percent-decoded URL in Busymate (docs/filters.md); mitmproxy's matches the URL as sent",
}
RULE_FILTERS.append("~u café")

# Failures once found here, said with the failure should they come back:
# docs/usage.md (Rules) has a headers rule's response edits apply "when it matches
# the exchange with its response head", and `~t`/`~h` read either message.
RULE_BUGS = {
    "~t json": "~t (either message) must be tested again on the response, as `busymate list '~t json'` selects it",
    '~h "content-type: text/css"': "~h (either message) must be tested again on the response head",
}

# Filters over the captured traffic: the rule filters, and what only a
# finished exchange has.
LIST_FILTERS = RULE_FILTERS + [
    "~q",
    "~e",
    "~bq token",
    "~bs secret-token",
    "~b widget",
    "~hs x-seen",
    "~ts html",
    "~a & ~d localhost",
    "~s & !~a",
    "~m GET & ~bs ok",
]

# Filters Busymate reads where mitmproxy has no such form: Busymate's
# filter, mitmproxy's equivalent, and why. (mitmproxy parses `~c 5xx` as
# `~c 5` and-ed with a bare word `xx`, `~c 200-299` as `~c 200` and `-299`:
# both select nothing, without an error.)
LIST_EXTENSIONS = {
    "~c 5xx": ("~c 500 | ~c 502 | ~c 503 | ~c 504", "a status class is Busymate's (docs/filters.md); mitmproxy's ~c takes one code"),
    "~c 200-299": ("~c 200 | ~c 204", "a status range is Busymate's (docs/filters.md); mitmproxy's ~c takes one code"),
}
LIST_FILTERS += list(LIST_EXTENSIONS) + ["admin", "api ~m POST", "~c 502", '~hq "x-role: admin" | ~d ^127', "!(~a | ~c 404)"]

# Filters also run as `mitmdump -nr FLOWS FILTER`, one start each (1.3 s),
# to show the addon (select_flows.py) selects as the command line does.
CLI_FILTERS = ["~m POST & ~u echo", "~u café", '~hq "x-role: admin" | ~d ^127', "~q", "~bs secret-token", "!(~a | ~c 404)"]

# Busymate records the answer it made itself for a failed upstream (502 with
# a body, docs/usage.md: Rules), where mitmproxy keeps the flow with an error and no
# response. The requests (by path) whose rows legitimately differ so, and the
# filters that read it.
LIST_DIFFERENCES = {
    "failed": ("/close", "/refused"),
    "filters": {"~s", "!~s", "~q", "~c 5xx", "~c 502", "!~c 200", "~s & !~a", "~hs x-seen"},
    "why": "over a failed upstream, Busymate's row has the 502 it answered, mitmproxy's flow only an error (docs/filters.md)",
}

# mitmproxy's block_list and Busymate's block (and, for status 444, drop) rules.
BLOCK_FILTERS = [
    ("~m DELETE", 403),
    ('~u /admin & !~hq "x-role: admin"', 451),
    ("~d localhost & ~t json", 444),
]
