#!/usr/bin/env python3
"""Small helpers for scripts/stack.sh that would be slow or awkward in bash or with a JVM.

  stackutil.py free-ports N            print N distinct free TCP ports on 127.0.0.1
  stackutil.py free-ports N --bus      the same, each with port + 10000 free too (a Redis
                                       Cluster node's bus port)
  stackutil.py cluster-id              print a random Kafka cluster id (base64url UUID)
  stackutil.py ready HOST:PORT [SECS [MIN]]
                                       exit 0 iff a Kafka broker there answers a Metadata
                                       request listing at least MIN (default 1) unfenced brokers

`ready` speaks the Kafka wire protocol directly (Metadata v4, non-flexible encoding, still
supported by Kafka 4.x) so a health probe costs milliseconds instead of a 2-3 s JVM start of
TopicCommand. A KRaft broker only lists itself once it has caught up with the metadata log and
been unfenced, i.e. once topics can actually be created and written.
"""
import base64
import socket
import struct
import sys
import uuid


def free_ports(n):
    # Keep all sockets open until every port is chosen so the N ports are distinct.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_bus_ports(n):
    # A Redis Cluster node also listens on port + 10000: both must be free and below 65536.
    socks = []
    try:
        while len(socks) < 2 * n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port + 10000 >= 65536:
                s.close()
                continue
            bus = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                s.close()
                bus.close()
                continue
            socks += [s, bus]
        return [s.getsockname()[1] for s in socks[0::2]]
    finally:
        for s in socks:
            s.close()


def cluster_id():
    # Same format as org.apache.kafka.common.Uuid.randomUuid().toString(): 16 random bytes,
    # URL-safe base64 without padding; Kafka avoids ids starting with '-' (CLI-unfriendly).
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not s.startswith("-"):
            return s


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return buf


def broker_ready(host, port, timeout, min_brokers=1):
    client_id = b"onceguard-stack"
    corr = 4242
    # Request header v1: api_key=3 (Metadata), api_version=4, correlation id, client id.
    # Body v4: topics = null (int32 -1, "all topics"), allow_auto_topic_creation = false.
    body = struct.pack(">hhih", 3, 4, corr, len(client_id)) + client_id + struct.pack(">ib", -1, 0)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        resp = _recv_exact(s, size)
    # Response header v0: correlation id. Body v4: throttle_time_ms, brokers array, ...
    got_corr, _throttle, n_brokers = struct.unpack(">iii", resp[:12])
    return got_corr == corr and n_brokers >= min_brokers


def main(argv):
    if len(argv) >= 2 and argv[1] == "free-ports":
        n = int(argv[2]) if len(argv) > 2 else 1
        ports = free_bus_ports(n) if argv[3:] == ["--bus"] else free_ports(n)
        print(" ".join(str(p) for p in ports))
        return 0
    if len(argv) == 2 and argv[1] == "cluster-id":
        print(cluster_id())
        return 0
    if len(argv) in (3, 4, 5) and argv[1] == "ready":
        host, _, port = argv[2].rpartition(":")
        timeout = float(argv[3]) if len(argv) >= 4 else 2.0
        min_brokers = int(argv[4]) if len(argv) == 5 else 1
        try:
            return 0 if broker_ready(host, int(port), timeout, min_brokers) else 1
        except (OSError, ValueError, struct.error):
            return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
