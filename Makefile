# OnceGuard developer entry points. Local services come from scripts/stack.sh
# (MariaDB + Redis, usually already running; a private KRaft Kafka broker per checkout).
#
#   make build       compile + install all modules, no tests
#   make test        stack up, mvn verify with the stack's env, stack down (always)
#   make demo        build, stack up, scripts/demo.sh, stack down (always)
#   make bench       build, stack up, the benchmark (BENCH_ARGS), stack down (always)
#   make stack-up    start the stack and keep it running (env in .stack/env)
#   make stack-down  stop what stack-up started
#   make clean       stack down, mvn clean, remove .stack/
#
# Override Maven with e.g. `make test MVN=./mvnw`.

MVN ?= mvn
SHELL := /bin/bash

ROOT  := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
STACK := $(ROOT)/scripts/stack.sh
ENV   := $(ROOT)/.stack/env

.PHONY: build test demo bench stack-up stack-down clean

build:
	cd "$(ROOT)" && $(MVN) -B -q install -DskipTests

# The recipe is one shell so that `down` runs whatever happens before it:
# - a failing `up` or `mvn` only records its exit code;
# - `trap : INT TERM` lets Ctrl-C stop mvn but not this shell, so it still reaches `down`.
# The stack's env is exported (set -a) so it reaches Maven and the surefire/failsafe forks.
test:
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  ( set -a; . "$(ENV)"; set +a; $(MVN) -B verify ) || rc=$$?; \
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

# e.g. make bench BENCH_ARGS="--records 50000 --repeats 5"
BENCH_ARGS ?=
bench: build
	@start=$$(date +%s); rc=0; trap : INT TERM; \
	cd "$(ROOT)"; \
	"$(STACK)" up || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  ( set -a; . "$(ENV)"; set +a; java -jar bench/target/onceguard-bench.jar $(BENCH_ARGS) ) || rc=$$?; \
	fi; \
	"$(STACK)" down || echo "[make] WARNING: stack down failed" >&2; \
	echo "[make] bench finished with exit code $$rc in $$(( $$(date +%s) - start ))s"; \
	exit $$rc

stack-up:
	"$(STACK)" up

stack-down:
	"$(STACK)" down

clean:
	"$(STACK)" down
	cd "$(ROOT)" && $(MVN) -B -q clean
	rm -rf "$(ROOT)/.stack"
