#!/usr/bin/env python3
"""An OnceGuard business container in Python, in push mode or in pull mode.

push: serves onceguard.v1.MessageHandler/Handle; the sidecar calls it for every accepted record
      (route `mode: push`, `target:` pointing here). Prints "listening on <port>" once bound.
pull: opens onceguard.v1.Deliveries/Subscribe on the sidecar (route `mode: pull`), receives the
      accepted records over the stream and acknowledges each by its delivery_id. Reconnects when
      the stream breaks (unacknowledged deliveries come back flagged `redelivery`).
http: an idempotent HTTP endpoint in front of the sidecar's Guard API: POST /<route> with the
      event as the JSON body. The first request is applied and its response stored with the
      claim (Guard.Complete); a retried request gets the first response again, byte for byte
      (Guard.Submit answers DUPLICATE with it). Prints "listening on <port>" once bound.

Either way it appends every delivery to a JSON-lines file and answers OK, or REJECT / RETRY when
the record's own value asks for it (test and demo knobs, see README.md), exactly like
examples/node-business. Uses Debian's python3-grpcio and python3-protobuf and the stubs that
generate.sh writes into build/stubs (nothing from PyPI).

  ./generate.sh
  /usr/bin/python3 business.py push --port 9001 --out deliveries.jsonl
  /usr/bin/python3 business.py pull --sidecar 127.0.0.1:7700 --route orders --out deliveries.jsonl
  /usr/bin/python3 business.py http --port 8080 --sidecar 127.0.0.1:7700 --route orders --out deliveries.jsonl
"""

import argparse
import datetime
import http.server
import math
import uuid
import json
import os
import queue
import signal
import sys
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))


def env(name, default):
    return os.environ.get(name, default)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="business.py", description="OnceGuard business container (Python)")
    p.add_argument("mode", choices=["push", "pull", "http"],
                   help="push: serve MessageHandler; pull: subscribe to the sidecar; http: idempotent HTTP endpoint on the Guard API")
    p.add_argument("--out", default=env("ONCEGUARD_BUSINESS_OUT", "deliveries.jsonl"),
                   help="JSON-lines file, appended to (ONCEGUARD_BUSINESS_OUT, default deliveries.jsonl)")
    p.add_argument("--stubs", default=env("ONCEGUARD_STUBS", os.path.join(HERE, "build", "stubs")),
                   help="directory generate.sh wrote the stubs into (ONCEGUARD_STUBS, default build/stubs)")
    push = p.add_argument_group("push and http mode")
    push.add_argument("--host", default=env("ONCEGUARD_BUSINESS_HOST", "127.0.0.1"),
                      help="address to bind (ONCEGUARD_BUSINESS_HOST, default 127.0.0.1)")
    push.add_argument("--port", default=env("ONCEGUARD_BUSINESS_PORT", "9001"),
                      help="port to bind; 0 picks a free one (ONCEGUARD_BUSINESS_PORT, default 9001)")
    pull = p.add_argument_group("pull and http mode")
    pull.add_argument("--sidecar", default=env("ONCEGUARD_SIDECAR", "127.0.0.1:7700"),
                      help="the sidecar's grpc-listen (ONCEGUARD_SIDECAR, default 127.0.0.1:7700)")
    pull.add_argument("--route", default=env("ONCEGUARD_ROUTE", ""),
                      help="route to subscribe to, configured with mode: pull (ONCEGUARD_ROUTE)")
    pull.add_argument("--window", type=int, default=int(env("ONCEGUARD_WINDOW", "0")),
                      help="unacknowledged deliveries at most; 0: the sidecar's default (ONCEGUARD_WINDOW)")
    pull.add_argument("--subscriber", default=env("ONCEGUARD_SUBSCRIBER", "python-business-%d" % os.getpid()),
                      help="name of this subscriber in the sidecar's logs (ONCEGUARD_SUBSCRIBER)")
    a = p.parse_args(argv)
    if a.mode in ("push", "http") and not (a.port.isdigit() and int(a.port) <= 65535):
        p.error("--port '%s' is not a TCP port (0 picks a free one)" % a.port)
    if a.mode == "pull" and not a.route:
        p.error("pull mode needs --route (or ONCEGUARD_ROUTE): the route configured with mode: pull")
    if a.mode == "http" and not a.route:
        p.error("http mode needs --route (or ONCEGUARD_ROUTE): the route whose extraction the Guard API applies")
    if a.window < 0:
        p.error("--window must be 0 (the sidecar's default) or more")
    return a


def load_stubs(stubs):
    """The generated modules; a clear message when generate.sh has not run or a package is missing."""
    sys.path.insert(0, stubs)
    try:
        import grpc
        from onceguard.v1 import onceguard_pb2, onceguard_pb2_grpc
    except ImportError as e:
        sys.exit("python-business: %s. Needs Debian's python3-grpcio and python3-protobuf (run with /usr/bin/python3) "
                 "and the stubs in %s (run ./generate.sh)" % (e, stubs))
    return grpc, onceguard_pb2, onceguard_pb2_grpc


class Business:
    """What the business does with one delivery: decide, write the JSON line, return the answer."""

    def __init__(self, pb, out_path):
        self.pb = pb
        self.out = open(out_path, "a", encoding="utf-8")
        self.lock = threading.Lock()
        self.handled = 0
        self.reject_field = env("ONCEGUARD_REJECT_FIELD", "reject")
        self.retry_field = env("ONCEGUARD_RETRY_FIELD", "retry_times")
        self.delay_field = env("ONCEGUARD_DELAY_FIELD", "delay_ms")

    def handle(self, d):
        """Returns (HandleResult, seconds to wait before answering)."""
        r = d.record
        value_text = text(r, "value")
        value = parse_object(value_text)
        outcome, message = self.decide(d, value)
        line = {
            "received_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "route": d.route,
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp_ms": r.timestamp_ms,
            "key": text(r, "key"),
            "value": value_text,
            "headers": [{"key": h.key, "value": text(h, "value")} for h in r.headers],
            "entity_id": d.entity_id,
            "event": d.event,
            "from_state": d.from_state,
            "to_state": d.to_state,
            "dedup_key": d.dedup_key,
            "business_key": d.business_key,
            "attempt": d.attempt,
            "redelivery": d.redelivery,
            "delivery_id": d.delivery_id,
            "outcome": outcome,
            "message": message,
        }
        self.write(line)  # before answering: once the sidecar confirms, the line is already on disk
        delay = value.get(self.delay_field) if self.delay_field and value else None
        wait = max(0, delay) / 1000.0 if is_int(delay) else 0.0
        result = self.pb.HandleResult(outcome=self.pb.HandleResult.Outcome.Value(outcome), message=message)
        return result, wait

    def decide(self, d, value):
        if self.reject_field and value and value.get(self.reject_field) is True:
            why = value.get("reject_reason")
            why = why if isinstance(why, str) else "'%s' is set" % self.reject_field
            what = " ".join(s for s in (d.entity_id, d.event) if s) or "record"
            return "REJECT", "refused %s: %s" % (what, why)
        times = value.get(self.retry_field) if self.retry_field and value else None
        if is_int(times) and d.attempt <= times:
            return "RETRY", "not ready (attempt %d of %d refused)" % (d.attempt, times)
        return "OK", "applied"

    def notice(self, d):
        """A pull-mode escalation notice: written as its own line, with the verdict, never acked."""
        v = d.escalation
        r = d.record
        self.write({
            "received_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds"),
            "escalation": self.pb.Reason.Name(v.reason),
            "layer": self.pb.Layer.Name(v.layer),
            "detail": v.detail,
            "route": d.route,
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "entity_id": d.entity_id,
            "event": d.event,
            "dedup_key": d.dedup_key,
        })

    def write(self, line):
        with self.lock:
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()
            if "escalation" not in line:
                self.handled += 1

    def close(self):
        with self.lock:
            self.out.close()


def text(msg, field):
    """Bytes as UTF-8 text; None when the proto3 optional field is absent (null key, tombstone)."""
    if not msg.HasField(field):
        return None
    return getattr(msg, field).decode("utf-8", errors="replace")


def parse_object(s):
    if s is None:
        return None
    try:
        v = json.loads(s)
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def log(msg):
    sys.stderr.write("python-business: %s\n" % msg)
    sys.stderr.flush()


def run_push(args, grpc, pb, pb_grpc, business, stop):
    class Handler(pb_grpc.MessageHandlerServicer):
        def Handle(self, request, context):
            result, wait = business.handle(request)
            if wait:
                time.sleep(wait)
            return result

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_MessageHandlerServicer_to_server(Handler(), server)
    port = server.add_insecure_port("%s:%s" % (args.host, args.port))
    if port == 0:
        sys.exit("python-business: cannot listen on %s:%s" % (args.host, args.port))
    server.start()
    print("listening on %d" % port, flush=True)
    log("serving onceguard.v1.MessageHandler on %s:%d, deliveries -> %s" % (args.host, port, os.path.abspath(args.out)))
    stop.wait()
    # in-flight calls get up to 3 s to answer; then whatever is left is cut off
    server.stop(3).wait()


def run_pull(args, grpc, pb, pb_grpc, business, stop):
    log("subscribing to route '%s' at %s, deliveries -> %s" % (args.route, args.sidecar, os.path.abspath(args.out)))
    current = [None]  # the open stream, cancelled on stop so that the loop below ends

    def cancel_on_stop():
        stop.wait()
        if current[0] is not None:
            current[0].cancel()

    threading.Thread(target=cancel_on_stop, name="stop-watch", daemon=True).start()
    backoff = 0.2
    while not stop.is_set():
        acks = queue.Queue()
        channel = grpc.insecure_channel(args.sidecar)
        try:
            call = current[0] = pb_grpc.DeliveriesStub(channel).Subscribe(requests(pb, args, acks, stop))
            if stop.is_set():
                call.cancel()
            for d in call:
                backoff = 0.2
                if d.HasField("escalation"):
                    business.notice(d)
                    continue
                result, wait = business.handle(d)
                if wait:
                    time.sleep(wait)
                acks.put(pb.Ack(delivery_id=d.delivery_id, result=result))
            log("the sidecar ended the stream")
        except grpc.RpcError as e:
            if stop.is_set():
                break
            log("stream broke: %s %s; reconnecting in %.1f s" % (e.code().name, e.details(), backoff))
        finally:
            acks.put(None)
            channel.close()
        stop.wait(backoff)
        backoff = min(backoff * 2, 5.0)


def run_http(args, grpc, pb, pb_grpc, business, stop):
    """An idempotent HTTP endpoint: POST /<route>, the event as the JSON body.

    Guard.Submit decides, and its outcome is the HTTP answer:
      PROCEED     apply the event, Complete with the response (stored with the claim), 201
      DUPLICATE   the stored response of the first request, byte for byte, with Idempotent-Replayed: true
      IN_PROGRESS 409 with Retry-After: another request holds the same event right now
      CONFLICT    422: the same key with different content (the differing fields in the body)
      ESCALATED   422: not applicable (illegal transition, missing field, unreadable body)
    A busy or unreachable sidecar is 503 with Retry-After. An Idempotency-Key header, when given,
    becomes the Guard API request_id: a client that resends after a lost answer takes its own claim back.
    """
    channel = grpc.insecure_channel(args.sidecar)
    guard = pb_grpc.GuardStub(channel)
    path = "/" + args.route
    outcomes = pb.SubmitResponse.Outcome

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass  # one line per delivery goes to --out; the access log would only repeat it

        def answer(self, status, body, content_type="application/json", headers=()):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def problem(self, status, what, headers=(), **more):
            self.answer(status, json.dumps(dict(error=what, **more)).encode("utf-8"), headers=headers)

        def do_POST(self):
            if self.path != path:
                return self.problem(404, "POST %s only" % path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            request = pb.SubmitRequest(route=args.route, value=body, request_id=self.headers.get("Idempotency-Key") or "")
            try:
                r = guard.Submit(request, timeout=10)
            except grpc.RpcError as e:
                return self.unavailable(e)
            v = r.verdict
            if r.outcome == outcomes.Value("PROCEED"):
                return self.apply(r, body)
            if r.outcome == outcomes.Value("DUPLICATE"):
                replayed = [("Idempotent-Replayed", "true")]
                if r.original_at_ms:
                    replayed.append(("Original-Date", datetime.datetime.fromtimestamp(
                        r.original_at_ms / 1000.0, datetime.timezone.utc).isoformat(timespec="milliseconds")))
                if r.HasField("response"):
                    return self.answer(201, r.response.body, r.response.content_type or "application/octet-stream", replayed)
                return self.problem(200, "applied before; no response was stored", replayed, detail=v.detail)
            if r.outcome == outcomes.Value("IN_PROGRESS"):
                wait = [("Retry-After", str(max(1, math.ceil(r.retry_after_ms / 1000.0))))]
                return self.problem(409, "the same request is in progress", wait, retry_after_ms=r.retry_after_ms)
            fields = [f.pointer for f in v.differing_fields]
            return self.problem(422, pb.Reason.Name(v.reason), detail=v.detail, differing_fields=fields)

        def apply(self, r, body):
            """The business's work for an accepted event: its effect, then the response it stores."""
            v = r.verdict
            d = pb.Delivery(record=pb.KafkaRecord(topic="http:" + path, value=body), route=args.route, entity_id=v.entity_id,
                            event=v.event, from_state=r.from_state, to_state=r.to_state, dedup_key=v.dedup_key,
                            attempt=1, redelivery=r.redelivery)
            result, wait = business.handle(d)
            if wait:
                time.sleep(wait)
            if result.outcome != pb.HandleResult.Outcome.Value("OK"):
                guard.Complete(pb.CompleteRequest(claim_token=r.claim_token, outcome=pb.HandleResult.Outcome.Value("REJECT"),
                                                  message=result.message), timeout=10)
                return self.problem(422, "BUSINESS_REJECTED", detail=result.message)
            response = json.dumps({"receipt": str(uuid.uuid4()), "entity_id": v.entity_id, "event": v.event,
                                   "state": r.to_state}).encode("utf-8")
            try:
                guard.Complete(pb.CompleteRequest(
                    claim_token=r.claim_token, outcome=pb.HandleResult.Outcome.Value("OK"),
                    response=pb.StoredResponse(body=response, content_type="application/json")), timeout=10)
            except grpc.RpcError as e:
                return self.unavailable(e)
            self.answer(201, response)

        def unavailable(self, e):
            code = e.code()
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                return self.problem(400, e.details())
            pushback = dict(e.trailing_metadata() or ()).get("grpc-retry-pushback-ms")
            seconds = max(1, math.ceil(int(pushback) / 1000.0)) if pushback and pushback.isdigit() else 1
            return self.problem(503, "%s: %s" % (code.name, e.details()), [("Retry-After", str(seconds))])

    server = http.server.ThreadingHTTPServer((args.host, int(args.port)), Handler)
    server.daemon_threads = True
    print("listening on %d" % server.server_address[1], flush=True)
    log("serving POST %s on %s:%d through the Guard API at %s, deliveries -> %s"
        % (path, args.host, server.server_address[1], args.sidecar, os.path.abspath(args.out)))
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    stop.wait()
    server.shutdown()
    channel.close()


def requests(pb, args, acks, stop):
    """The client half of the stream: the Subscription, then one Ack per handled delivery."""
    sub = pb.Subscription(route=args.route, window=args.window, subscriber=args.subscriber, escalations=True)
    yield pb.SubscribeRequest(subscription=sub)
    while True:
        ack = acks.get()
        if ack is None or stop.is_set():
            return
        yield pb.SubscribeRequest(ack=ack)


def main(argv):
    args = parse_args(argv)
    grpc, pb, pb_grpc = load_stubs(args.stubs)
    business = Business(pb, args.out)
    stop = threading.Event()

    def on_signal(signum, frame):
        log("%s, shutting down after %d deliveries" % (signal.Signals(signum).name, business.handled))
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        if args.mode == "push":
            run_push(args, grpc, pb, pb_grpc, business, stop)
        elif args.mode == "http":
            run_http(args, grpc, pb, pb_grpc, business, stop)
        else:
            run_pull(args, grpc, pb, pb_grpc, business, stop)
    finally:
        business.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
