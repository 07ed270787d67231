// Command go-business is an OnceGuard business container in Go, in push mode or in pull mode.
//
// push: serves onceguard.v1.MessageHandler/Handle; the sidecar calls it for every accepted record
// (route `mode: push`, `target:` pointing here). Prints "listening on <port>" once bound.
// pull: opens onceguard.v1.Deliveries/Subscribe on the sidecar (route `mode: pull`), receives the
// accepted records over the stream and acknowledges each by its delivery_id; reconnects when the
// stream breaks (unacknowledged deliveries come back flagged `redelivery`).
//
// Either way it appends every delivery to a JSON-lines file and answers OK, or REJECT / RETRY when
// the record's own value asks for it (test and demo knobs, see README.md), exactly like
// examples/node-business. Built offline by build.sh from Debian's Go packages.
//
//	./build.sh
//	build/go-business push --port 9001 --out deliveries.jsonl
//	build/go-business pull --sidecar 127.0.0.1:7700 --route orders --out deliveries.jsonl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "onceguard.dev/onceguard/v1"
)

const usage = `usage: go-business push [--host H] [--port P] [--out FILE]
       go-business pull [--sidecar HOST:PORT] --route NAME [--window N] [--subscriber NAME] [--out FILE]
flags (a flag wins over its environment variable):
`

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "go-business: "+format+"\n", args...)
	os.Exit(2)
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "go-business: "+format+"\n", args...)
}

type settings struct {
	mode, out, host, port, sidecar, route, subscriber string
	window                                            uint
}

func parseArgs(args []string) settings {
	if len(args) == 0 || (args[0] != "push" && args[0] != "pull") {
		fmt.Fprint(os.Stderr, usage)
		fail("the first argument must be the mode: push or pull")
	}
	s := settings{mode: args[0]}
	fs := flag.NewFlagSet("go-business "+s.mode, flag.ExitOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	fs.StringVar(&s.out, "out", env("ONCEGUARD_BUSINESS_OUT", "deliveries.jsonl"), "JSON-lines file, appended to (ONCEGUARD_BUSINESS_OUT)")
	fs.StringVar(&s.host, "host", env("ONCEGUARD_BUSINESS_HOST", "127.0.0.1"), "push: address to bind (ONCEGUARD_BUSINESS_HOST)")
	fs.StringVar(&s.port, "port", env("ONCEGUARD_BUSINESS_PORT", "9001"), "push: port to bind, 0 picks a free one (ONCEGUARD_BUSINESS_PORT)")
	fs.StringVar(&s.sidecar, "sidecar", env("ONCEGUARD_SIDECAR", "127.0.0.1:7700"), "pull: the sidecar's grpc-listen (ONCEGUARD_SIDECAR)")
	fs.StringVar(&s.route, "route", env("ONCEGUARD_ROUTE", ""), "pull: route configured with mode: pull (ONCEGUARD_ROUTE)")
	fs.StringVar(&s.subscriber, "subscriber", env("ONCEGUARD_SUBSCRIBER", fmt.Sprintf("go-business-%d", os.Getpid())), "pull: name in the sidecar's logs (ONCEGUARD_SUBSCRIBER)")
	window, err := strconv.ParseUint(env("ONCEGUARD_WINDOW", "0"), 10, 32)
	if err != nil {
		fail("ONCEGUARD_WINDOW '%s' is not a number", os.Getenv("ONCEGUARD_WINDOW"))
	}
	fs.UintVar(&s.window, "window", uint(window), "pull: unacknowledged deliveries at most, 0: the sidecar's default (ONCEGUARD_WINDOW)")
	_ = fs.Parse(args[1:])
	if fs.NArg() > 0 {
		fail("unexpected argument '%s'", fs.Arg(0))
	}
	if p, err := strconv.Atoi(s.port); s.mode == "push" && (err != nil || p < 0 || p > 65535) {
		fail("port '%s' is not a TCP port (0 picks a free one)", s.port)
	}
	if s.mode == "pull" && s.route == "" {
		fail("pull mode needs --route (or ONCEGUARD_ROUTE): the route configured with mode: pull")
	}
	return s
}

// business decides on one delivery and appends its JSON line.
type business struct {
	mu                                  sync.Mutex
	out                                 *os.File
	handled                             int
	rejectField, retryField, delayField string
}

type headerLine struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// deliveryLine has the fields, in the order, of examples/node-business's lines.
type deliveryLine struct {
	ReceivedAt  string       `json:"received_at"`
	Route       string       `json:"route"`
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	TimestampMs int64        `json:"timestamp_ms"`
	Key         *string      `json:"key"`
	Value       *string      `json:"value"`
	Headers     []headerLine `json:"headers"`
	EntityID    string       `json:"entity_id"`
	Event       string       `json:"event"`
	FromState   string       `json:"from_state"`
	ToState     string       `json:"to_state"`
	DedupKey    string       `json:"dedup_key"`
	BusinessKey string       `json:"business_key"`
	Attempt     uint32       `json:"attempt"`
	Redelivery  bool         `json:"redelivery"`
	DeliveryID  string       `json:"delivery_id"`
	Outcome     string       `json:"outcome"`
	Message     string       `json:"message"`
}

// noticeLine is a pull-mode escalation notice: not a delivery, never acknowledged.
type noticeLine struct {
	ReceivedAt string `json:"received_at"`
	Escalation string `json:"escalation"`
	Layer      string `json:"layer"`
	Detail     string `json:"detail"`
	Route      string `json:"route"`
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Offset     int64  `json:"offset"`
	EntityID   string `json:"entity_id"`
	Event      string `json:"event"`
	DedupKey   string `json:"dedup_key"`
}

// text is bytes as UTF-8 text; nil when the proto3 optional field is absent (nil slice).
func text(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func now() string {
	return time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// handle returns the answer and how long to wait before giving it.
func (b *business) handle(d *pb.Delivery) (*pb.HandleResult, time.Duration) {
	r := d.GetRecord()
	var value map[string]interface{}
	if r.GetValue() != nil {
		if json.Unmarshal(r.GetValue(), &value) != nil {
			value = nil
		}
	}
	outcome, message := b.decide(d, value)
	headers := make([]headerLine, 0, len(r.GetHeaders()))
	for _, h := range r.GetHeaders() {
		headers = append(headers, headerLine{Key: h.GetKey(), Value: text(h.GetValue())})
	}
	b.write(deliveryLine{
		ReceivedAt: now(), Route: d.GetRoute(), Topic: r.GetTopic(), Partition: r.GetPartition(), Offset: r.GetOffset(),
		TimestampMs: r.GetTimestampMs(), Key: text(r.GetKey()), Value: text(r.GetValue()), Headers: headers,
		EntityID: d.GetEntityId(), Event: d.GetEvent(), FromState: d.GetFromState(), ToState: d.GetToState(),
		DedupKey: d.GetDedupKey(), BusinessKey: d.GetBusinessKey(), Attempt: d.GetAttempt(), Redelivery: d.GetRedelivery(),
		DeliveryID: d.GetDeliveryId(), Outcome: outcome.String(), Message: message,
	}, true) // before answering: once the sidecar confirms, the line is already on disk
	var wait time.Duration
	if n, ok := intField(value, b.delayField); ok && n > 0 {
		wait = time.Duration(n) * time.Millisecond
	}
	return &pb.HandleResult{Outcome: outcome, Message: message}, wait
}

func (b *business) decide(d *pb.Delivery, value map[string]interface{}) (pb.HandleResult_Outcome, string) {
	if b.rejectField != "" && value[b.rejectField] == true {
		why, ok := value["reject_reason"].(string)
		if !ok {
			why = fmt.Sprintf("'%s' is set", b.rejectField)
		}
		what := strings.TrimSpace(d.GetEntityId() + " " + d.GetEvent())
		if what == "" {
			what = "record"
		}
		return pb.HandleResult_REJECT, fmt.Sprintf("refused %s: %s", what, why)
	}
	if n, ok := intField(value, b.retryField); ok && int64(d.GetAttempt()) <= n {
		return pb.HandleResult_RETRY, fmt.Sprintf("not ready (attempt %d of %d refused)", d.GetAttempt(), n)
	}
	return pb.HandleResult_OK, "applied"
}

// intField is value[name] when it is a whole JSON number; a knob named "" is off.
func intField(value map[string]interface{}, name string) (int64, bool) {
	if name == "" {
		return 0, false
	}
	f, ok := value[name].(float64)
	if !ok || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

func (b *business) notice(d *pb.Delivery) {
	v, r := d.GetEscalation(), d.GetRecord()
	b.write(noticeLine{
		ReceivedAt: now(), Escalation: v.GetReason().String(), Layer: v.GetLayer().String(), Detail: v.GetDetail(),
		Route: d.GetRoute(), Topic: r.GetTopic(), Partition: r.GetPartition(), Offset: r.GetOffset(),
		EntityID: d.GetEntityId(), Event: d.GetEvent(), DedupKey: d.GetDedupKey(),
	}, false)
}

func (b *business) write(line interface{}, delivery bool) {
	data, err := json.Marshal(line)
	if err != nil {
		fail("cannot encode a line: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.out.Write(append(data, '\n')); err != nil {
		fail("cannot write %s: %v", b.out.Name(), err)
	}
	if delivery {
		b.handled++
	}
}

// handler serves MessageHandler (push mode).
type handler struct {
	pb.UnimplementedMessageHandlerServer
	b *business
}

func (h *handler) Handle(ctx context.Context, d *pb.Delivery) (*pb.HandleResult, error) {
	result, wait := h.b.handle(d)
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return result, nil
}

func runPush(s settings, b *business, stop <-chan struct{}) {
	lis, err := net.Listen("tcp", net.JoinHostPort(s.host, s.port))
	if err != nil {
		fail("cannot listen on %s:%s: %v", s.host, s.port, err)
	}
	server := grpc.NewServer()
	pb.RegisterMessageHandlerServer(server, &handler{b: b})
	port := lis.Addr().(*net.TCPAddr).Port
	fmt.Printf("listening on %d\n", port)
	logf("serving onceguard.v1.MessageHandler on %s:%d, deliveries -> %s", s.host, port, b.out.Name())
	go func() {
		<-stop
		// in-flight calls get up to 3 s to answer; then whatever is left is cut off
		done := make(chan struct{})
		go func() { server.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			server.Stop()
		}
	}()
	if err := server.Serve(lis); err != nil {
		fail("serving: %v", err)
	}
}

func runPull(s settings, b *business, stop <-chan struct{}) {
	logf("subscribing to route '%s' at %s, deliveries -> %s", s.route, s.sidecar, b.out.Name())
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := subscribeOnce(ctx, s, b, func() { backoff = 200 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		logf("stream ended: %v; reconnecting in %v", err, backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		if backoff *= 2; backoff > 5*time.Second {
			backoff = 5 * time.Second
		}
	}
}

// subscribeOnce runs one Subscribe stream until it breaks; received is called on every message.
func subscribeOnce(ctx context.Context, s settings, b *business, received func()) error {
	conn, err := grpc.DialContext(ctx, s.sidecar, grpc.WithInsecure())
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := pb.NewDeliveriesClient(conn).Subscribe(ctx)
	if err != nil {
		return err
	}
	sub := &pb.Subscription{Route: s.route, Window: uint32(s.window), Subscriber: s.subscriber, Escalations: true}
	if err := stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Subscription{Subscription: sub}}); err != nil {
		return err
	}
	for {
		d, err := stream.Recv()
		if err != nil {
			if status.Code(err) == codes.Canceled {
				return ctx.Err()
			}
			return err
		}
		received()
		if d.GetEscalation() != nil {
			b.notice(d)
			continue
		}
		result, wait := b.handle(d)
		if wait > 0 {
			time.Sleep(wait)
		}
		ack := &pb.Ack{DeliveryId: d.GetDeliveryId(), Result: result}
		if err := stream.Send(&pb.SubscribeRequest{Kind: &pb.SubscribeRequest_Ack{Ack: ack}}); err != nil {
			return err
		}
	}
}

func main() {
	s := parseArgs(os.Args[1:])
	out, err := os.OpenFile(s.out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fail("cannot open %s: %v", s.out, err)
	}
	b := &business{
		out:         out,
		rejectField: env("ONCEGUARD_REJECT_FIELD", "reject"),
		retryField:  env("ONCEGUARD_RETRY_FIELD", "retry_times"),
		delayField:  env("ONCEGUARD_DELAY_FIELD", "delay_ms"),
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	stop := make(chan struct{})
	go func() {
		sig := <-signals
		b.mu.Lock()
		logf("%v, shutting down after %d deliveries", sig, b.handled)
		b.mu.Unlock()
		close(stop)
	}()
	if s.mode == "push" {
		runPush(s, b, stop)
	} else {
		runPull(s, b, stop)
	}
	out.Close()
}
