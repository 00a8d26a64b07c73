# Busymate: `make run` and `make test` are the two commands (see README.md).
# swift from PATH, else the toolchain's own place (sudo's PATH leaves it out).
SWIFT   ?= $(or $(shell command -v swift 2>/dev/null),/opt/swift/usr/bin/swift)
CONFIG  ?= debug
GROUP   ?= $(CURDIR)/shared-group
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR   = $(DESTDIR)$(PREFIX)/bin
SHAREDIR = $(DESTDIR)$(PREFIX)/share/busymate
UNITDIR ?= $(DESTDIR)/etc/systemd/system
SYSUSERSDIR ?= $(DESTDIR)/usr/lib/sysusers.d
TMPFILESDIR ?= $(DESTDIR)/usr/lib/tmpfiles.d
BUILD_BIN = .build/$(CONFIG)

# The commit `--version` names (Package.swift compiles it in). Given to every
# swift command here alike: SwiftPM keeps an evaluated manifest while its
# text and environment stay the same, so HEAD read from .git alone could be
# an older commit's.
export BUSYMATE_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)

# What swift-format (the toolchain's `swift format`, .swift-format) lays out.
SWIFT_SOURCES = Package.swift Sources Tests bench/Package.swift bench/Sources fuzz/Package.swift fuzz/Sources

FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 15

.PHONY: all deps build run test test-web test-faults test-devices test-h2 test-websocket test-peers test-cloud systemd-test test-package deb format format-check bench fuzz fuzz-smoke install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build -c $(CONFIG)

# The supervisor in the foreground on ./shared-group, proxy on 127.0.0.1:9090.
run: build
	$(BUILD_BIN)/busymate-app --group $(GROUP)

# Unit and end-to-end tests, then the unit in a real systemd (root only;
# skipped with a message otherwise). The box, the package (this build,
# packaged and installed with apt in a clean box) and the peers run while
# the cloud suite's second appliance sits out its ten-minute outage.
test: build format-check
	@scripts/install-deps.sh --test
	BUSYMATE_BIN_DIR=$(CURDIR)/$(BUILD_BIN) scripts/swift-test.sh $(SWIFT) test -c $(CONFIG)
	tests/faults/run.py --bin $(CURDIR)/$(BUILD_BIN) --report .build/faults-report.md
	tests/web/run.py --bin $(CURDIR)/$(BUILD_BIN) --shots .build/web-shots
	tests/devices/run.py --bin $(CURDIR)/$(BUILD_BIN)
	tests/h2/run.py --bin $(CURDIR)/$(BUILD_BIN)
	tests/websocket/run.py --bin $(CURDIR)/$(BUILD_BIN)
	tests/cloud/run.py --bin $(CURDIR)/$(BUILD_BIN) --meanwhile "rc=0; tests/systemd/run.sh || rc=1; \
	  tests/package/run.sh --bin $(CURDIR)/$(BUILD_BIN) || rc=1; tests/peers/run.py --bin $(CURDIR)/$(BUILD_BIN) || rc=1; exit \$$rc"

# The web page in a real Chromium alone (root; about a minute): screenshots
# of each step go to .build/web-shots.
test-web: build
	@scripts/install-deps.sh --test
	tests/web/run.py --bin $(CURDIR)/$(BUILD_BIN) --shots .build/web-shots

# The fault suite alone (about a minute; root): kills, restarts, broken
# settings, a full disk, a corrupt store, locks, CA files. Its report goes to
# .build/faults-report.md (RELIABILITY.md is written from it).
test-faults: build
	@scripts/install-deps.sh --test
	tests/faults/run.py --bin $(CURDIR)/$(BUILD_BIN) --report .build/faults-report.md

# Devices on the network alone (root; about 20 s): transparent gateway and
# output capture, DNS, QUIC, the nftables table's life, onboarding, device
# ports and presence, access control, IPv6, in network namespaces it makes.
test-devices: build
	@scripts/install-deps.sh --test
	tests/devices/run.py --bin $(CURDIR)/$(BUILD_BIN)

# HTTP/2 and gRPC with real peers alone (root; about three minutes): curl
# --http2, nghttp and h2load, Python's h2 (hostile clients too), hypercorn,
# an h2-only and an HTTP/1-only origin, grpcio's client and server, protoc.
test-h2: build
	@scripts/install-deps.sh --test
	tests/h2/run.py --bin $(CURDIR)/$(BUILD_BIN)

# WebSockets with real peers (root; under a minute): the Python websockets
# library as client and server, plain and intercepted, with and without
# permessage-deflate, and raw sockets for what no library sends.
test-websocket: build
	@scripts/install-deps.sh --test
	tests/websocket/run.py --bin $(CURDIR)/$(BUILD_BIN)

# Busymate against mitmdump 12.3.1 (about two minutes; root): the same
# requests through both, the same filter in rules, over the capture and over
# SOCKS5. mitmdump is installed once into .build/bench-venv (as make bench
# does); the suite fails, saying why, when it cannot be.
test-peers: build
	@scripts/install-deps.sh --test
	tests/peers/run.py --bin $(CURDIR)/$(BUILD_BIN)

# Pairing and the cloud sink (root; about eleven minutes, ten of them a
# second appliance's outage under load): a real PostgreSQL 15 started in a
# temporary directory, behind the contract double of PostgREST and Realtime
# (tests/cloud/double.py, checked first with the official Python clients).
test-cloud: build
	@scripts/install-deps.sh --test
	tests/cloud/run.py --bin $(CURDIR)/$(BUILD_BIN)

# The Swift sources laid out as swift-format writes them (make format does it).
format-check:
	$(SWIFT) format lint --strict --recursive --parallel $(SWIFT_SOURCES)

format:
	$(SWIFT) format format --in-place --recursive --parallel $(SWIFT_SOURCES)

systemd-test: build
	tests/systemd/run.sh

# The package of this build installed, upgraded, removed and purged with apt
# in a clean Debian 12 box (root; about two minutes).
test-package: build
	tests/package/run.sh --bin $(CURDIR)/$(BUILD_BIN)

# busymate_VERSION_ARCH.deb here, from a release build with the Swift
# runtime linked in (its own build directory, .build-deb: about twenty
# minutes the first time on two cores), bound at load time (full RELRO, as
# Debian's hardening asks), checked with lintian.
deb: deps
	@scripts/install-deps.sh --deb
	$(SWIFT) build -c release --static-swift-stdlib --scratch-path .build-deb -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
	@deb=$$(scripts/make-deb.sh --bin .build-deb/release --checkouts .build-deb/checkouts) && \
	  lintian --fail-on error,warning "$$deb" && echo "$$deb"

# Busymate against mitmdump 12.3.1 and the direct path, release build,
# servers on core 0 and the load generator on core 1; writes BENCHMARKS.md.
# The generator is a package of its own (bench/); its build makes the
# project's programs too (one release build of the dependencies, not two).
BENCH_PRODUCTS = busymate-app busymate-tunnel busymate-web busymate busymate-bench
bench:
	@scripts/install-deps.sh --bench
	@for product in $(BENCH_PRODUCTS); do $(SWIFT) build -c release --package-path bench --product $$product || exit 1; done
	@mkdir -p .build; mitm=$$(bench/install-mitmproxy.sh 2>.build/bench-mitmproxy.log) || { echo "bench: mitmdump could not be installed (see .build/bench-mitmproxy.log); measuring Busymate against direct only" >&2; mitm=""; }; \
	taskset -c 1 bench/.build/release/busymate-bench --binaries bench/.build/release --mitmdump "$$mitm" \
	  --mitmdump-missing "$$(tail -1 .build/bench-mitmproxy.log 2>/dev/null)" --output BENCHMARKS.md

# Coverage-guided fuzzing with libFuzzer (fuzz/, see fuzz/README.md): each
# harness runs FUZZ_SECONDS on a scratch copy of its corpus; fails on a crash.
fuzz:
	SWIFT=$(SWIFT) FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

# The same, FUZZ_SMOKE_SECONDS per harness (what CI can afford).
fuzz-smoke:
	SWIFT=$(SWIFT) FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) scripts/fuzz.sh

install: build
	install -d $(BINDIR) $(SHAREDIR)/skeleton $(UNITDIR) $(SYSUSERSDIR) $(TMPFILESDIR)
	install -m 0755 $(BUILD_BIN)/busymate-app $(BUILD_BIN)/busymate-tunnel $(BUILD_BIN)/busymate-web $(BUILD_BIN)/busymate $(BINDIR)/
	install -m 0644 shared-group/settings.json shared-group/README.md $(SHAREDIR)/skeleton/
	install -d $(SHAREDIR)/docs/images
	install -m 0644 README.md RELIABILITY.md BENCHMARKS.md $(SHAREDIR)/
	install -m 0644 docs/*.md $(SHAREDIR)/docs/
	install -m 0644 docs/images/* $(SHAREDIR)/docs/images/
	sed -e 's|@SBINDIR@|$(PREFIX)/bin|g' -e 's|@LIBEXECDIR@|$(PREFIX)/bin|g' -e 's|@DOCDIR@|$(PREFIX)/share/busymate|g' units/busymate.service > $(UNITDIR)/busymate.service
	chmod 0644 $(UNITDIR)/busymate.service
	install -m 0644 units/busymate.sysusers $(SYSUSERSDIR)/busymate.conf
	install -m 0644 units/busymate.tmpfiles $(TMPFILESDIR)/busymate.conf

clean:
	rm -rf .build .build-deb bench/.build
