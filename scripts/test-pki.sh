#!/usr/bin/env bash
# Throwaway certificates for tests and local trials: never use them in production.
#
#   scripts/test-pki.sh DIR
#
# Writes into DIR (created if missing), all PEM, keys unencrypted PKCS#8 (EC P-256):
#   ca.crt ca.key              a test CA
#   server.crt server.key      signed by ca: CN=localhost, SAN DNS:localhost, IP:127.0.0.1
#   client.crt client.key      signed by ca: CN=guard-client (a client certificate for mTLS)
#   other-ca.crt other-ca.key  a second, unrelated CA
#   other-server.crt/.key      like server, signed by other-ca
#   other-client.crt/.key      like client, signed by other-ca
# Needs the openssl CLI (Debian package openssl).
set -euo pipefail
dir=${1:?usage: $0 DIR}
command -v openssl >/dev/null || { echo "$0: the openssl CLI is missing (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() { # name CN
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 2 -sha256 -out "$1.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}

leaf() { # name CN ca extensions
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial -days 2 -sha256 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

server_ext='subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth
keyUsage=critical,digitalSignature'
client_ext='subjectAltName=DNS:guard-client
extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature'

ca ca "OnceGuard test CA"
ca other-ca "Other test CA"
leaf server localhost ca "$server_ext"
leaf client guard-client ca "$client_ext"
leaf other-server localhost other-ca "$server_ext"
leaf other-client guard-client other-ca "$client_ext"
rm -f ./*.srl
