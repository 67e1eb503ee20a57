# stockd - see README.md. The two commands: `make demo` and `make test`;
# `make check` is the quick loop for contributors.

SHELL := /bin/bash
CC ?= cc
PKGS := libmicrohttpd jansson hiredis libmariadb libcurl
DEPS := scripts/deps.sh

# Everything below needs the build packages; pkg-config runs lazily so that
# `make` on a fresh machine can install them first.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
# ZooKeeper's multi-threaded C client (zk-lock); pkg-config does not know it.
PKG_CFLAGS += -DTHREADED
PKG_LIBS += -lzookeeper_mt
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wformat=2
# Every include names its layer ("core/result.h"), from server/.
CFLAGS_COMMON = -std=c11 -D_GNU_SOURCE $(WARN) -Iserver $(PKG_CFLAGS) -pthread -MMD -MP
RELEASE_CFLAGS = $(CFLAGS_COMMON) -O2 -g
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TEST_CFLAGS = $(CFLAGS_COMMON) -O1 -g $(SAN)

# server/ is laid in layers, each a folder (the map atop server/main.c); the strategies
# one level deeper, in server/sale/strategies/.
SERVER_SRC := $(sort $(wildcard server/*.c server/*/*.c server/*/*/*.c))
SERVER_HDR := $(sort $(wildcard server/*/*.h server/*/*/*.h))
LIB_SRC := $(filter-out server/main.c,$(SERVER_SRC))
# tests/ by kind (tests/README.md): the binaries keep flat names in build/test.
UNIT_SRC := $(wildcard tests/unit/unit_*.c)
IT_SRC := $(wildcard tests/it/it_*.c)
HARNESS_SRC := tests/it/harness.c
# The C that clang-format holds, whichever folder of tests/ it is in.
TEST_C := $(wildcard tests/*.c tests/*/*.c tests/*/*.h) lab/nemesis/clockshim.c

RELEASE_OBJ := $(SERVER_SRC:server/%.c=build/release/%.o)
TEST_LIB_OBJ := $(LIB_SRC:server/%.c=build/test/server/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=build/test/%)
IT_BIN := $(IT_SRC:tests/it/%.c=build/test/%)

# Settings `make run` and `make demo` pass on.
PORT ?= 8080
export PORT

.PHONY: all deps build test check unit integration gate run demo compare compose-test bench fuzz chaos \
        failover orders partition probe soak admission retry stream-chaos stream-bench reconcile \
        cluster cluster-short cluster-up audit audit-stockd redis-cluster-up redis-cluster \
        stack-up stack-down stack-status clean format format-check

all: build

# `make deps` checks (and installs) the build packages every time; a plain
# `make` checks them once, then again only when scripts/deps.sh changes, so
# that it stays fast and offline once they are there.
deps:
	@$(DEPS) build

build/.deps-build: scripts/deps.sh
	@$(DEPS) build
	@mkdir -p build && touch $@

build: build/.deps-build
	@$(MAKE) --no-print-directory build/stockd

# V=1 shows the full compiler command lines.
Q := $(if $(V),,@)

build/stockd: $(RELEASE_OBJ)
	@echo "  LINK  $@"
	$(Q)$(CC) $(RELEASE_CFLAGS) -o $@ $^ $(PKG_LIBS)

build/release/%.o: server/%.c
	@echo "  CC    $<"
	@mkdir -p $(@D)
	$(Q)$(CC) $(RELEASE_CFLAGS) -c -o $@ $<

build/test/server/%.o: server/%.c
	@echo "  CC    $< (sanitized)"
	@mkdir -p $(@D)
	$(Q)$(CC) $(TEST_CFLAGS) -c -o $@ $<

build/test/stockd: build/test/server/main.o $(TEST_LIB_OBJ)
	@echo "  LINK  $@"
	$(Q)$(CC) $(TEST_CFLAGS) -o $@ $^ $(PKG_LIBS)

build/test/unit_%: tests/unit/unit_%.c $(TEST_LIB_OBJ) | build/test
	@echo "  TEST  $@"
	$(Q)$(CC) $(TEST_CFLAGS) -o $@ $^ $(PKG_LIBS) $(shell pkg-config --libs cmocka)

build/test/it_%: tests/it/it_%.c $(HARNESS_SRC) tests/it/harness.h | build/test
	@echo "  TEST  $@"
	$(Q)$(CC) $(TEST_CFLAGS) -o $@ tests/it/it_$*.c $(HARNESS_SRC) \
		$(shell pkg-config --libs cmocka libcurl jansson)

# The lab page's files are compiled into assets.o (.incbin).
WEB := $(wildcard web/*)
build/release/api/assets.o build/test/server/api/assets.o build/fuzz/server/api/assets.o: $(WEB)

build/test:
	mkdir -p $@

# The libFuzzer harnesses (tests/fuzz/fuzz_*.c), built with clang into build/fuzz:
# the server objects with coverage and the sanitizers, the harness with
# libFuzzer's main. fuzz_request wraps params_parse to stop each handler
# after its parameters (the harness's top comment says why). Unlike gcc,
# clang's -Wformat-nonliteral also flags a vsnprintf of a va_list in a
# function without a format attribute (http/loop.c's libmicrohttpd logger).
FUZZ_CC := clang
FUZZ_CFLAGS = $(CFLAGS_COMMON) -Wno-format-nonliteral -O1 -g $(SAN)
FUZZ_LIB_OBJ := $(LIB_SRC:server/%.c=build/fuzz/server/%.o)
FUZZ_BIN := build/fuzz/fuzz_request
FUZZ_SECONDS ?= 300

build/fuzz/server/%.o: server/%.c
	@echo "  CC    $< (clang, fuzzing)"
	@mkdir -p $(@D)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build/fuzz/fuzz_request: tests/fuzz/fuzz_request.c $(FUZZ_LIB_OBJ)
	@echo "  FUZZ  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Wl,--wrap=params_parse -o $@ $< $(FUZZ_LIB_OBJ) \
		$(PKG_LIBS)

# make fuzz: run the harness for FUZZ_SECONDS (default 300); a finding is
# written to run/fuzz/request/findings and fails the target.
fuzz: deps
	@$(DEPS) fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BIN)
	tests/fuzz/run $(FUZZ_BIN) $(FUZZ_SECONDS)

# make test: unit tests, then integration tests against a private stack and a
# sanitized stockd over real HTTP, then the short oversell regression gate.
# The binaries are some thirty independent links over three sets of objects:
# built one job per core (BUILD_JOBS), since nothing else runs meanwhile.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test: deps
	@$(DEPS) stack zk jmeter chromium lint bench fuzz prometheus compose nginx partition cluster
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) build/stockd build/test/stockd $(UNIT_BIN) \
		$(IT_BIN) $(FUZZ_BIN)
	tests/run $(UNIT_BIN) $(FUZZ_BIN) -- $(IT_BIN)

# make check: the quick loop for contributors, what make test runs that needs
# no stack and no fuzzing: the formatting check, the unit binaries, the lab's
# Python tests, the OpenAPI lint and the layers check (tests/run given only
# unit binaries starts no stack). The integration tests and the gate stay
# make test's: they need the private stack and take minutes each. lint is the
# formatter and the OpenAPI linter; bench brings wrk, whose command line the
# lab's tests build. Those that need JMeter, Chromium or Node.js skip without.
check: build/.deps-build
	@$(DEPS) lint bench
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory $(UNIT_BIN)
	tests/run $(UNIT_BIN)

# make demo: the main job. Installs what is missing, starts the private
# stack and stockd, runs the JMeter comparison of every strategy (100 threads
# x 50 loops against 5000 units, as in the seed article), prints the table
# and the path of report.html, the URL of the live lab page (the stockd it
# started keeps running for it) and what it left running (make stack-down
# stops it). make compare is the same with knobs, and stops its stockd:
#   make compare STRATEGIES=nolock,sql THREADS=20 LOOPS=10 STOCK=100 QTY=1 \
#                HOLD_MS=0 INSTANCES=1 COMPARE_RETRYING_BUYERS=4
# (the variables reach python3 -m lab compare through the environment;
# COMPARE_RETRYING_BUYERS=4: during each row 4 buyers who retry every lost answer
# with an Idempotency-Key and 4 who retry without one, on products of their own,
# each try given 0.3 s: each row gains their double buys; off: 0).
demo compare: build
	@$(DEPS) stack zk jmeter prometheus
	@python3 -B -m lab compare $(if $(filter demo,$@),--keep-stockd); status=$$?; \
	 if [ "$@" = demo ]; then scripts/stack.sh left-running; fi; exit $$status

# make compose-test: docker-compose.yml run for real (tests/checks/compose-test) with
# Debian's Podman and docker-compose: builds every image from a debian:12 base
# made here (cached in run/podman/), runs `up --build --exit-code-from jmeter`,
# checks the comparison as the gate does and the state across down / up, and
# leaves nothing running. Ports: LAB_NGINX_PORT=30080 LAB_PROMETHEUS_PORT=30090.
compose-test:
	@$(DEPS) containers
	tests/checks/compose-test

# make bench: what each strategy costs (bench/README.md). Installs what is
# missing, starts the private stack and stockd when nothing answers at PORT,
# drives every strategy with wrk (keep-alive) next to the raw limits of the
# HTTP path, Redis and MariaDB, checks the ledger after each row, writes
# results/bench-<timestamp>/ and prints the table. Knobs (through the
# environment): CONNS=1,16,64,256 DURATION=2 WARMUP=1 STRATEGIES=
# DURABLE=fast,everysec,durable HOT_CONNS=16,64,256,512 (the stores made durable
# while they run, and the hot row: bench/README.md). The OpenResty peer's
# packages (openresty) and perf (the Redis rows' fsync counts) are its own.
# Then the order stream's costs (make stream-bench).
bench: build
	@$(DEPS) stack zk bench openresty perf chromium
	@python3 -B -m lab bench
	@python3 -B -m lab stream bench

# make chaos: faults injected under load (lab/runs/chaos.py): MariaDB, Redis and
# ZooKeeper killed with -9 and restarted, Redis frozen, one then two Redlock
# servers stopped, each under a safe strategy of each store and the lock zoo
# of the faulted backend. Starts its own stockd at PORT with short timeouts
# (nothing may answer there) and the stack; prints the table, writes
# results/chaos-<timestamp>/, exits 1 on a violation. Knobs: FAULTS=mysql-kill,... CHAOS_CONNS=4
# Then the order stream's fault rows (make stream-chaos).
chaos: build
	@$(DEPS) stack zk
	@python3 -B -m lab chaos
	@python3 -B -m lab stream chaos

# make stream-chaos: lua-stream's faults (lab/runs/stream.py): its consumer killed -9
# before its COMMIT and between COMMIT and XACK, MariaDB down, Redis killed -9;
# each row drains the stream and checks every 200's order id is in MySQL once.
# Knobs: STREAM_ROWS=none,kill-before-commit,... STREAM_PORT=23089
# STREAM_RETRYING_BUYERS=4: each row also runs 4 buyers who retry every lost answer
# with an Idempotency-Key and 4 who retry without one, through its fault; their
# double buys are read in MySQL once the stream drained (off: 0).
stream-chaos: build
	@$(DEPS) stack
	@python3 -B -m lab stream chaos

# make stream-bench: accepted sales/s of lua, sql-batch and lua-stream, the
# consumer's drain rate and the lag under load (docs/stream.md).
stream-bench: build
	@$(DEPS) stack bench
	@python3 -B -m lab stream bench

# make reconcile ORDERS=FILE PRODUCT=P: waits for the stream to drain, then checks
# every order id of FILE (the 200s a client saw) is in MySQL once, and nothing else.
reconcile: build
	@$(DEPS) stack
	@STREAM_ORDERS="$(ORDERS)" STREAM_PRODUCT="$(PRODUCT)" python3 -B -m lab stream reconcile

# make failover: Redis primary failover under every strategy that touches Redis
# (lab/runs/failover.py): a write lands on the group's primary but not its replica (the
# replica held back with CLIENT PAUSE WRITE), the primary is killed, Sentinel
# promotes the replica, a second client comes; each row is judged against its
# strategy's failover fact (loses_sales, two_holders, safe). Starts two stockds
# that follow the Sentinels at PORT and PORT+1 and the stack; prints the table,
# writes results/failover-<timestamp>/ (the debate table, timeline.svg), exits 1
# when a row contradicts its fact. Knobs: STRATEGIES=lua,fenced FAILOVER_SALES=5
# FAILOVER_RETRYING_BUYERS=4: each row also runs 4 buyers who retry every lost answer
# through the second stockd with an Idempotency-Key and 4 who retry without one,
# across the kill and the promotion: the row gains their double buys (off: 0).
failover: build
	@$(DEPS) stack zk
	@python3 -B -m lab failover

# make orders: holds that expire, payments that come late or twice, stock returned
# once (lab/runs/orders.py, docs/orders.md): buyers hold, pay around the deadline
# (callbacks repeated), cancel or abandon, under each expiry mechanism of GET /expiry
# and each fault (none, two sweepers, a sweeper off, every instance stopped, payments
# at the deadline, MariaDB restarted, stockd's clock jumped by build/clockshim.so);
# every order's life judged from the clients' history, its record and the accounting. Starts its stockds at PORT and PORT+1 and
# the stack; prints the table, writes results/orders-<timestamp>/, exits 1 when a row
# breaks a check. Knobs: ORDERS_FAULTS=none,stopped ORDERS_EXPIRY=... ORDERS_SECONDS=6
orders: build build/clockshim.so
	@$(DEPS) stack
	@python3 -B -m lab orders

# make partition: the Redlock debate's faults under the Redis locks (lab/runs/partition.py,
# docs/failover.md): a Redis server's clock jumps past the TTL (build/clockshim.so), a
# server restarts empty, a lock's grant is answered late, each while a lock is held,
# in a network namespace of its own (root only; only loopback). Each row is judged
# against its strategy's lease fact. Then Jepsen 2013's Sentinel partition
# (lab/runs/partition_sentinel.py): a primary and one stockd cut from the replica, the
# Sentinels and the other stockd, healed; each Redis row's acknowledged sales lost and
# oversold judged against its failover fact, and the sales rows again with
# min-replicas-to-write. Then MySQL's half (lab/runs/partition_galera.py, docs/cluster.md):
# one Galera node and its stockd cut from the other two under load, the node's stockd
# answering 503 while the majority sells on, the heal's IST, the ledger against the
# 200s. PARTITION_QUICK=1: the gate's short versions. PARTITION_RETRYING_BUYERS=N (the
# Redis runs) and PARTITION_GALERA_RETRYING_BUYERS=N (the Galera run): the retrying client
# mode, N buyers with keys and N without beside each row, its double buys per row
# (docs/retries.md); 0, the default, leaves every run as it was.
partition: build build/clockshim.so
	@$(DEPS) stack partition cluster
	@python3 -B -m lab partition $(if $(PARTITION_QUICK),--quick)
	@python3 -B -m lab partition_sentinel $(if $(PARTITION_QUICK),--quick)
	@python3 -B -m lab partition_galera $(if $(PARTITION_QUICK),--quick)

# The wall clock that can be moved per process (lab/nemesis/clockshim.c): LD_PRELOAD'ed into
# one Redis server at a time; no sanitizers (it runs inside redis-server).
build/clockshim.so: lab/nemesis/clockshim.c
	@echo "  CC    $< (shared)"
	@mkdir -p $(@D)
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE $(WARN) -O2 -fPIC -shared -o $@ $<

# make cluster: every strategy whose stock is in MySQL on the stack's three-node
# Galera cluster (lab/runs/cluster.py, docs/cluster.md): three stockd instances, each
# bound to its own node, sell out a product (as many buyers as units) and are
# compared with the same instances on one MariaDB; then one node is killed (-9)
# under load and restarted, and every node is killed within a second, with
# innodb_flush_log_at_trx_commit=2 and 1. Each row is judged against its
# strategy's cluster fact from the ledger; every request's answer goes to
# results/cluster-<timestamp>/history.jsonl. Exits 1 when a row contradicts its
# fact. Knobs: STRATEGIES=sql,cas CLUSTER_UNITS=200 CLUSTER_HOLD_MS=5
# make cluster-short: two instances, the first row of each fact and every
# conflicts_at_commit row (about 3 min).
# make cluster-up: the cluster's three nodes alone, added to the running stack.
cluster: build
	@$(DEPS) stack zk cluster
	@python3 -B -m lab cluster

cluster-short: build
	@$(DEPS) stack zk cluster
	@python3 -B -m lab cluster --quick

cluster-up:
	@$(DEPS) stack cluster
	@scripts/stack.sh start-one cluster

# make redis-cluster-up: a Redis Cluster of three primaries and three replicas
# (docs/redis-cluster.md), added to the running stack; point stockd at it with
# eval "$$(scripts/stack.sh rcluster-env)". make stack-down stops it.
redis-cluster-up:
	@$(DEPS) stack
	@scripts/stack.sh start-one rcluster

# make redis-cluster: faults on the Redis Cluster (lab/runs/redis_cluster.py,
# docs/redis-cluster.md), with two stockds given --redis-cluster at PORT and
# PORT+1 (nothing may answer there): the primary of the hot product's shard
# killed -9 under load, its replica promoted by the cluster, the killed node
# rejoining as a replica, each Redis row judged against its failover fact as
# make failover judges it; then the hot product's slot migrated to the next
# shard under load (MIGRATING/IMPORTING, MIGRATE key by key, SETSLOT NODE): 0
# oversold, 0 acknowledged sales lost, every answer a contract answer. Prints
# both tables, writes results/rcluster-<timestamp>/, exits 1 when a row fails.
# Knobs: STRATEGIES=lua,fenced RCLUSTER_ROWS=kill,move RCLUSTER_QUICK=1 (the
# gate's short version).
redis-cluster: build
	@$(DEPS) stack zk
	@python3 -B -m lab redis_cluster $(if $(RCLUSTER_QUICK),--quick)

# make probe: hostile clients (lab/runs/probe.py, docs/security.md): a rebinding Host,
# a same-site page, an encoded NUL, two body lengths, a flood of held sales whose
# clients went, nine addresses trickling a thousand heads each, half-sent requests
# closed by their clients, a trickled head,
# nginx clients across stockd's idle timeout, broken requests against the log.
# Starts two instances behind the stack's nginx at PORT (nothing may answer
# there) and the stack; prints probe, expected and answered; exits 1 on a
# mismatch. About 40 s.
probe: build
	@$(DEPS) stack nginx
	@python3 -B -m lab probe

# make soak: SOAK_S seconds (default 600) of a fixed rate (SOAK_RATE, 200/s)
# over every strategy; stockd's RSS and open fds, sampled every 10 s, must end
# within 5% of their value after the warm-up (60 s), and no answer may be a
# 5xx. Writes results/soak-<timestamp>/.
soak: build
	@$(DEPS) stack zk
	@python3 -B -m lab soak

# make retry: buyers who retry every lost answer (no answer, a 5xx) under each
# fault where retries happen (the store frozen 1.5 s, every reply held past the
# client's timeout, stockd killed -9 and restarted, the Redis group's primary
# failed over, a Galera node killed, the order stream's consumer killed), every
# row that claims keys with an Idempotency-Key per purchase, a safe row of each
# store without keys too: the double buys, from the ledger (lab/runs/retry.py).
# Its own stockd at PORT and the next two ports (nothing may answer there).
# Knobs: RETRY_STRATEGIES=lua,sql (each with and without keys)
# RETRY_FAULTS=freeze,drop,stockd-kill,failover,galera-kill,consumer-kill
# RETRY_BUYERS=40 RETRY_TIMEOUT_MS=300 RETRY_HOLD_S=1.5
retry: build
	@$(DEPS) stack cluster
	@python3 -B -m lab retry

# make admission: the token bucket (--admit-rate) and the sold-out flag
# (--sold-out-flag) in front of lua and sql, each mode on a stockd of its own
# at PORT (nothing may answer there, nor at PORT+1, where a second, plain
# stockd restocks): backend calls per request, 429s, sold_outs from memory,
# oversold, undersell, the buyers refused until a restock is seen. Writes
# results/admission-<timestamp>/ (docs/admission.md). Knobs: STRATEGIES=lua,sql
# ADMISSION_RATE=200 ADMISSION_RECHECK_MS=100 ADMISSION_S=3
admission: build
	@$(DEPS) stack
	@python3 -B -m lab admission

# make audit TARGET=file: a foreign service audited through its target file
# (lab/runs/audit.py, docs/audit.md): JMeter drives its purchase request, the run judges
# what the clients saw (oversold, lost updates, the history checker), prints the
# table, writes results/audit-<timestamp>/ (report.html, junit.xml) and exits 1 on a
# violation. Needs no stack unless the target does. Knobs: VARS=port=9000,...
# THREADS= LOOPS= STOCK= AUDIT_RUNS= BASELINE=results/audit-.../audit.json
# make audit-stockd: every strategy of stockd audited that way, each verdict
# checked against the same run's ledger (STRATEGIES=nolock,sql narrows it), and the
# bench's peers, which must pass: Node.js (bench/peer/; skipped without Node.js 20)
# and OpenResty (bench/openresty/).
audit:
	@$(DEPS) jmeter
	@test -n "$(TARGET)" || { echo "make audit TARGET=file (e.g. audit/targets/naive.toml)" >&2; exit 2; }
	@python3 -B -m lab audit --target "$(TARGET)"

audit-stockd: build
	@$(DEPS) stack zk jmeter openresty
	@python3 -B -m lab selfaudit --peer

run: build stack-up
	@eval "$$(scripts/stack.sh env)" && exec build/stockd --port $(PORT)

stack-up:
	@scripts/stack.sh up

stack-down:
	@scripts/stack.sh down

stack-status:
	@scripts/stack.sh status

clean:
	rm -rf build

format:
	clang-format -i $(SERVER_SRC) $(SERVER_HDR) $(TEST_C)

format-check:
	@clang-format --dry-run --Werror $(SERVER_SRC) $(SERVER_HDR) $(TEST_C) && \
		echo "  FORMAT ok (.clang-format)"

# Every object and binary depends on the headers it includes (-MMD): the
# test stockd's main.o and the test binaries too, or a changed struct in a
# header leaves them built against the old layout.
-include $(RELEASE_OBJ:.o=.d) $(TEST_LIB_OBJ:.o=.d) build/test/server/main.d \
	$(UNIT_BIN:=.d) $(IT_BIN:=.d) $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BIN:=.d)
