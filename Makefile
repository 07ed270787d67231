# OnceGuard developer entry points. Local services come from scripts/stack.sh
# (MariaDB + Redis, usually already running; a private KRaft Kafka broker per checkout).
#
#   make build       compile + install all modules, no tests
#   make test        stack up, mvn verify with the stack's env, stack down (always)
#   make demo        build, stack up, scripts/demo.sh, stack down (always)
#   make bench       build, stack up, the benchmark (BENCH_ARGS), stack down (always)
#   make bench-quick the same, shorter (BENCH_QUICK_ARGS; SeedBench --quick)
#   make chaos       build, stack up, faults at random for CHAOS_SECONDS (ChaosIT), stack down
#   make soak        stack up, the soak (SOAK_SECONDS, default 900), stack down (always)
#   make failure-model  the fault model (FaultModelIT) alone, writing docs/failure-model.md again
#   make answers     the experiments behind docs/answers.md (layer ablation, a Redis failover, TTLs, FOR UPDATE vs the claim,
#                    upstream-only dedup, Kafka 3.5 and scale), page written again
#   make config-doc  write docs/configuration.md again from the settings' declarations
#   make stack-up    start the stack and keep it running (env in .stack/env)
#   make stack-down  stop what stack-up started
#   make cluster-up  start the local cluster stack (3 Kafka brokers, 3 Galera nodes, Redis
#                    Cluster; scripts/cluster.sh, env in .cluster/env) and keep it running
#   make cluster-down stop it and remove its data
#   make clean       stack and cluster down, mvn clean, remove .stack/
#
# Override Maven with e.g. `make test MVN=./mvnw`.

MVN ?= mvn
SHELL := /bin/bash

ROOT  := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
STACK := $(ROOT)/scripts/stack.sh
CLUSTER := $(ROOT)/scripts/cluster.sh
ENV   := $(ROOT)/.stack/env

.PHONY: build test demo bench bench-quick chaos soak failure-model config-doc answers stack-up stack-down cluster-up cluster-down clean

build:
	cd "$(ROOT)" && $(MVN) -B -q install -DskipTests

# The recipe is one shell so that `down` runs whatever happens before it:
# - a failing `up` or `mvn` only records its exit code;
# - `trap : INT TERM` lets Ctrl-C stop mvn but not this shell, so it still reaches `down`.
# The stack's env is exported (set -a) so it reaches Maven and the surefire/failsafe forks, with
# ONCEGUARD_REQUIRE_TOOLCHAINS=true: the example business containers' tests fail, never skip, when
# a toolchain that stack.sh installs is missing.
test:
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  ( set -a; . "$(ENV)"; ONCEGUARD_REQUIRE_TOOLCHAINS=true; set +a; $(MVN) -B verify ) || rc=$$?; \
	fi; \
	"$(STACK)" down || echo "[make] WARNING: stack down failed" >&2; \
	echo "[make] test finished with exit code $$rc in $$(( $$(date +%s) - start ))s"; \
	exit $$rc

demo: build
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  ( set -a; . "$(ENV)"; set +a; MVN="$(MVN)" "$(ROOT)/scripts/demo.sh" ) || rc=$$?; \
	fi; \
	"$(STACK)" down || echo "[make] WARNING: stack down failed" >&2; \
	echo "[make] demo finished with exit code $$rc in $$(( $$(date +%s) - start ))s"; \
	exit $$rc

# make bench         full run: 10,000 records per run, 3 runs per scenario (5-12 min, load-dependent);
#                    writes bench/target/results.json, docs/benchmarks.md, docs/benchmarks/*.png and
#                    docs/benchmarks/results-full.json (the committed page), then the price of
#                    consumer-side dedup that docs/answers.md (Q5) quotes from them (scripts/q5_price.py)
# make bench-quick   3,000 records, one run, SeedBench --quick (2-4 min after the build); writes
#                    bench/target/results.json and its page under bench/target/quick/, never over docs/
# Before either, the FOR UPDATE vs CAS microbenchmark (dev.onceguard.bench.seed.SeedBench, when the
# bench jar has it) writes bench/target/seed.json, which the bench merges in. e.g. make bench BENCH_ARGS="--records 50000 --repeats 5"
# Other JVM flags for the packaged sidecar process (guard_machine_process, sidecar RSS) than the image's:
#   java -Dbench.sidecar-jvm-flags="-XX:+UseG1GC -Xmx384m" -jar bench/target/onceguard-bench.jar \
#     --only guard_machine,guard_machine_process --paced-rate 1500   (stack up, .stack/env sourced)
BENCH_ARGS ?=
BENCH_QUICK_ARGS ?= --records 3000 --repeats 1 --paced-seconds 4 --warmup 1500 --docs bench/target/quick
SEED_ARGS ?=
BENCH_JAR := bench/target/onceguard-bench.jar
SEED_CLASS := dev/onceguard/bench/seed/SeedBench.class

bench-quick: SEED_ARGS = --quick

# $(1): bench label, $(2): bench arguments. Same shape as `test`: `down` always runs; a failing
# SeedBench is reported in the exit code but does not keep the main bench from running. After a
# full bench that succeeded, the price docs/answers.md (Q5) quotes is rewritten from its results.
define bench_recipe
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  rm -f bench/target/seed.json; \
	  if { command -v unzip >/dev/null && unzip -l "$(BENCH_JAR)" "$(SEED_CLASS)"; } >/dev/null 2>&1 || \
	     { ! command -v unzip >/dev/null && jar tf "$(BENCH_JAR)" | grep -qx "$(SEED_CLASS)"; }; then \
	    echo "[make] FOR UPDATE vs CAS microbenchmark: SeedBench $(SEED_ARGS)"; \
	    ( set -a; . "$(ENV)"; set +a; java -cp "$(BENCH_JAR)" dev.onceguard.bench.seed.SeedBench $(SEED_ARGS) ) || rc=$$?; \
	  else \
	    echo "[make] no $(SEED_CLASS) in $(BENCH_JAR): no FOR UPDATE vs CAS microbenchmark"; \
	  fi; \
	  ( set -a; . "$(ENV)"; set +a; java -jar "$(BENCH_JAR)" --command "make $@" --label $(1) $(2) ) && \
	    { [ "$(1)" != full ] || python3 "$(ROOT)/scripts/q5_price.py" --rewrite; } || rc=$$?; \
	fi; \
	"$(STACK)" down || echo "[make] WARNING: stack down failed" >&2; \
	echo "[make] $@ finished with exit code $$rc in $$(( $$(date +%s) - start ))s"; \
	exit $$rc
endef

bench: build
	$(call bench_recipe,full,$(BENCH_ARGS))

bench-quick: build
	$(call bench_recipe,quick,$(BENCH_QUICK_ARGS))

# make failure-model: every outcome of every call, tried by FaultModelIT against the local MariaDB and
# Redis (no broker needed); writes the table of docs/failure-model.md, which make test checks.
# FAULT_PAIRS: pair schedules per scenario (make test runs the default, 120).
FAULT_PAIRS ?= 120
failure-model:
	cd "$(ROOT)" && $(MVN) -B -q verify -pl integration-tests -am -Dtest=none -Dit.test=FaultModelIT \
	  -Dsurefire.failIfNoSpecifiedTests=false -Dfailsafe.failIfNoSpecifiedTests=false \
	  -Dfaults.pairs=$(FAULT_PAIRS) -Dfaults.write-doc=true

# make config-doc: docs/configuration.md from the settings' declarations (proxy/.../config/*Settings.java);
# ConfigDocTest, in make test, fails while the page and the declarations differ. No services needed.
config-doc:
	cd "$(ROOT)" && $(MVN) -B -q test -pl proxy -am -Dtest=ConfigDocTest -Dsurefire.failIfNoSpecifiedTests=false \
	  -Dconfig.write-doc=true

# make chaos: rounds of the order scenario with sidecar processes while faults are injected at
# random (ChaosIT; one short fixed-seed round of it runs in make test). The seed is printed;
# CHAOS_SEED=<seed> injects the same faults in the same order again. Report:
# integration-tests/target/chaos/report.md. It runs on the local cluster stack (3 KRaft brokers,
# 3 Galera nodes, each sidecar on its own node; scripts/cluster.sh, started and stopped by the
# test); CHAOS_CLUSTER=false runs it on the single-node stack, CHAOS_CLUSTER=both on each in turn.
CHAOS_SECONDS ?= 600
ifeq ($(origin CHAOS_SEED),undefined)
CHAOS_SEED := $(shell date +%s)
endif
CHAOS_INSTANCES ?= 3
CHAOS_CLUSTER ?= true
# lines of the order scenario per round (make test's round has 500): more traffic under each fault.
CHAOS_LINES ?= 2000
# a round's records are produced over about this many seconds (make test's round: as fast as they
# are acknowledged), so that faults keep coming at random, under traffic, after the round's plan
CHAOS_ROUND_SECONDS ?= 120
chaos: build
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  ( set -a; . "$(ENV)"; set +a; $(MVN) -B verify -pl integration-tests -Dit.test=ChaosIT -Dtest=none \
	    -Dsurefire.failIfNoSpecifiedTests=false -Dfailsafe.failIfNoSpecifiedTests=false \
	    -Dchaos.seconds=$(CHAOS_SECONDS) -Dchaos.seed=$(CHAOS_SEED) -Dchaos.instances=$(CHAOS_INSTANCES) \
	    -Dchaos.cluster=$(CHAOS_CLUSTER) -Dchaos.lines=$(CHAOS_LINES) \
	    -Dchaos.round-seconds=$(CHAOS_ROUND_SECONDS) ) || rc=$$?; \
	  cat integration-tests/target/chaos/report.md 2>/dev/null; \
	fi; \
	"$(STACK)" down || echo "[make] WARNING: stack down failed" >&2; \
	echo "[make] chaos (seed $(CHAOS_SEED)) finished with exit code $$rc in $$(( $$(date +%s) - start ))s"; \
	exit $$rc

# make soak: the sidecar (packaged jar, own process) under steady load with duplicates while a
# private redis-server is killed and restarted; fails on memory growth or on a fact lost or
# delivered twice. Writes integration-tests/target/soak/{summary.txt,memory.png,samples.csv}.
# `make test` runs the same SoakIT for 60 s. e.g. make soak SOAK_SECONDS=300 SOAK_RATE=80
SOAK_SECONDS ?= 900
SOAK_RATE ?= 40
SOAK_SEED ?= 20261201

soak:
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  ( set -a; . "$(ENV)"; set +a; $(MVN) -B verify -pl proto,proxy,client-java,integration-tests \
	      -Dtest=none -Dsurefire.failIfNoSpecifiedTests=false -Dit.test=SoakIT -Dfailsafe.failIfNoSpecifiedTests=false \
	      -Dsoak.seconds=$(SOAK_SECONDS) -Dsoak.rate=$(SOAK_RATE) -Dsoak.seed=$(SOAK_SEED) ) || rc=$$?; \
	  cat integration-tests/target/soak/summary.txt 2>/dev/null; \
	fi; \
	"$(STACK)" down || echo "[make] WARNING: stack down failed" >&2; \
	echo "[make] soak finished with exit code $$rc in $$(( $$(date +%s) - start ))s"; \
	exit $$rc

# make answers: the experiments behind docs/answers.md (the questions a reference team asks):
# the layer ablation on a seeded five-node order stream (LayerAblation: all three layers, L1 off,
# L1 with a 7-day TTL, a narrow business key, no state machine; about 3 min), a real Redis Cluster
# failover under load (RedisFailoverIT with ANSWERS_FAILOVER_FACTS facts per phase), the TTL
# distribution (TtlAnswerTest), the sidecar on Kafka 3.5 brokers (Kafka35IT), a plain
# at-least-once consumer against the sidecar through five faults (UpstreamOnly, 10,000 records
# per fault; ANSWERS_Q5_ARGS e.g. -Dq5.records=5000), 1 and 4 sidecar processes on three Kafka
# 3.5 brokers at 0, 2 and 10 ms of added RTT to MySQL and Kafka (ScaleAnswer, about 4 min) and FOR
# UPDATE against OnceGuard's claim with 4 instance processes (ContentionBench, ANSWERS_Q3_ARGS);
# each writes its table into integration-tests/target/answers/, then scripts/answers.sh writes the
# page (date, commit, machine load, command). Stack down always runs.
ANSWERS_FAILOVER_FACTS ?= 400
ANSWERS_Q3_ARGS ?=
ANSWERS_Q5_ARGS ?=
answers:
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; load="$$(cut -d' ' -f1-3 /proc/loadavg)"; \
	rm -rf integration-tests/target/answers; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  ( set -a; . "$(ENV)"; set +a; $(MVN) -B verify -pl integration-tests,bench -am \
	    -Dtest=TtlAnswerTest -Dit.test=RedisFailoverIT,Kafka35IT,UpstreamOnly,ScaleAnswer,LayerAblation \
	    -Dsurefire.failIfNoSpecifiedTests=false -Dfailsafe.failIfNoSpecifiedTests=false \
	    -Dfailover.facts=$(ANSWERS_FAILOVER_FACTS) -Dfailover.out=target/answers/q2-failover.md \
	    -Danswers.ttl-out=target/answers/q2-ttl.md -Danswers.kafka35-out=target/answers/kafka35.md \
	    -Danswers.q5-out=target/answers/q5.md $(ANSWERS_Q5_ARGS) -Danswers.scale-out=target/answers/scale.md \
	    -Danswers.q1-out=target/answers/q1.md ) || rc=$$?; \
	  ( set -a; . "$(ENV)"; set +a; java -cp "$(BENCH_JAR)" dev.onceguard.bench.contention.ContentionBench \
	    --out integration-tests/target/answers/q3.md $(ANSWERS_Q3_ARGS) ) || rc=$$?; \
	  scripts/answers.sh "make answers" "$$load" || rc=$$?; \
	fi; \
	"$(STACK)" down || echo "[make] WARNING: stack down failed" >&2; \
	echo "[make] answers finished with exit code $$rc in $$(( $$(date +%s) - start ))s"; \
	exit $$rc

stack-up:
	"$(STACK)" up

stack-down:
	"$(STACK)" down

cluster-up:
	"$(CLUSTER)" up

cluster-down:
	"$(CLUSTER)" down

clean:
	"$(STACK)" down
	"$(CLUSTER)" down
	cd "$(ROOT)" && $(MVN) -B -q clean
	rm -rf "$(ROOT)/.stack"
