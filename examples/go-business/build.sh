#!/bin/sh
# Builds build/go-business offline from Debian's packages only: protoc (protobuf-compiler),
# protoc-gen-go (protoc-gen-go), protoc-gen-go-grpc (protoc-gen-go-grpc), and the Go sources of
# google.golang.org/grpc, google.golang.org/protobuf and github.com/golang/protobuf under
# /usr/share/gocode (golang-google-grpc-dev, golang-google-protobuf-dev,
# golang-github-golang-protobuf-1-5-dev), in GOPATH mode: no module proxy, no network.
#
#   ./build.sh            -> build/go-business
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
proto_root="${ONCEGUARD_PROTO_ROOT:-$here/../../proto/src/main/proto}"
gopath="$here/build/gopath"
for tool in go protoc protoc-gen-go protoc-gen-go-grpc; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "build.sh: $tool not found (apt-get install golang-go protobuf-compiler protoc-gen-go protoc-gen-go-grpc)" >&2
    exit 2
  }
done
gocode=/usr/share/gocode/src
[ -d "$gocode/google.golang.org/grpc" ] && [ -d "$gocode/google.golang.org/protobuf" ] || {
  echo "build.sh: $gocode/google.golang.org/{grpc,protobuf} missing (apt-get install golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev)" >&2
  exit 2
}
# grpc-go's default codec marshals through github.com/golang/protobuf. Debian's 1.3 of it predates
# the protobuf API that protoc-gen-go 1.28 generates for, and panics on the first call ("protobuf
# tag not enough fields"); its 1.5 (golang-github-golang-protobuf-1-5-dev) delegates to that API.
[ -f "$gocode/github.com/golang/protobuf/proto/registry.go" ] || {
  echo "build.sh: $gocode/github.com/golang/protobuf is older than 1.4 (apt-get install golang-github-golang-protobuf-1-5-dev)" >&2
  exit 2
}
# The stubs land at the proto's go_package import path, onceguard.dev/onceguard/v1, inside build/gopath.
mkdir -p "$gopath/src"
protoc -I"$proto_root" --go_out="$gopath/src" --go-grpc_out="$gopath/src" "$proto_root/onceguard/v1/onceguard.proto"
cd "$here"
GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOPROXY=off GOFLAGS= go build -o build/go-business .
echo "build.sh: built $here/build/go-business" >&2
