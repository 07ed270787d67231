#!/bin/sh
# Generates the Python stubs of the OnceGuard contract into build/stubs/ (or $1): onceguard_pb2.py
# with Debian's protoc (protobuf-compiler, 3.21: proto3 `optional` works) and onceguard_pb2_grpc.py
# with gRPC's Python plugin (protobuf-compiler-grpc ships grpc_python_plugin). Nothing is downloaded.
#
#   ./generate.sh [OUT_DIR]
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
proto_root="${ONCEGUARD_PROTO_ROOT:-$here/../../proto/src/main/proto}"
out="${1:-$here/build/stubs}"
plugin="${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || true)}"
command -v protoc >/dev/null 2>&1 || { echo "generate.sh: protoc not found (apt-get install protobuf-compiler)" >&2; exit 2; }
[ -n "$plugin" ] || { echo "generate.sh: grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)" >&2; exit 2; }
[ -f "$proto_root/onceguard/v1/onceguard.proto" ] || { echo "generate.sh: no onceguard/v1/onceguard.proto under $proto_root (set ONCEGUARD_PROTO_ROOT)" >&2; exit 2; }
mkdir -p "$out"
protoc -I"$proto_root" --python_out="$out" --grpc_python_out="$out" --plugin=protoc-gen-grpc_python="$plugin" \
  "$proto_root/onceguard/v1/onceguard.proto"
# protoc writes onceguard/v1/*.py; make them importable as the package onceguard.v1
touch "$out/onceguard/__init__.py" "$out/onceguard/v1/__init__.py"
echo "generate.sh: stubs in $out" >&2
