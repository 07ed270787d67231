#!/usr/bin/env bash
# Placeholder: the real end-to-end demo (Kafka -> OnceGuard proxy -> gRPC client) replaces this.
# `make demo` runs it with the stack's environment exported (ONCEGUARD_*, KAFKA_LIB).
set -euo pipefail
echo "demo not yet written"
exit 1
