// Command sealer-load drives a running sealer (or several replicas, or Vault
// Transit for comparison) over the network and prints a Markdown table:
// operations per second, p50, p99 and errors by reason.
//
// Operations (-ops):
//
//	seal-open      a Seal, then an Open of the state it returned (on the next
//	               target, when there are several: a cross-replica round trip),
//	               through the Go client, which sends the request's digest
//	seal-open-params  the same, sending the params as a Struct, as callers in
//	               other languages do
//	rest-seal-open the same over REST (-http-targets): JSON bodies with params,
//	               net/http with keep-alive
//	open           an Open of an ordinary state sealed before the clock started
//	open-onetime   an Open of a one-time state sealed beforehand (consumed in the ledger)
//	open-onetime-record  the same with record_outcome, then the Record of an
//	               outcome the size of the payload (README, "Recorded outcomes")
//	health         the gRPC health Check: the floor any gRPC service reaches here
//	vault-transit  a Vault Transit encrypt, then decrypt, of the same payload
//	               (VAULT_ADDR, VAULT_TOKEN, -vault-key)
//	flow-*         Seal+Open with plain states beside flows: flows.go
//	mcp-mrtr       an MCP round trip over Streamable HTTP through sealer-proxy
//	               (-mcp-url); mcp-mrtr@direct the same to the MCP server
//	               behind it (-mcp-direct-url), its floor
//
// An op named with the suffix @echo runs against the echo floors instead
// (-echo-grpc, -echo-http: bench/sealer-echo, the same API doing no work), and
// the table that follows the results gives each op's share of its floor.
//
// Closed loop by default: -c workers each run operations back to back. With
// -rate, operations are offered at that rate whatever the replies (open
// loop), at most -c in flight; an operation that finds no free slot counts
// as a CLIENT_BACKLOG error. Refused calls are counted by reason, with how
// long they took. With -repeat N the ops take turns N times per level and
// the run with the median throughput is reported. SEALER_LOAD_CPUPROFILE
// names a file for the generator's own CPU profile.
//
//	sealer-load -targets 127.0.0.1:7443 -c 1,16,64 -d 10s -warmup 2s -ops seal-open,health
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	vault "github.com/hashicorp/vault/api"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mcp-sealer/sealer/client"
	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
)

// op is one measured operation on target i.
type op func(ctx context.Context, i int) error

type flags struct {
	targets        []string
	httpTargets    []string
	echoGRPC       string
	echoHTTP       string
	levels         []int
	dur, warmup    time.Duration
	size, poolRate int
	rate           float64
	retry          bool
	tlsCA, token   string
	vaultKey       string
	timeline       string
	conns, repeat  int
	serverPID      int // CPU time of the sealer is reported when set
	echoPID        int // and of the echo floor
	oneTime        bool
	ops            []string
}

func main() {
	var f flags
	targets := flag.String("targets", "127.0.0.1:7443", "sealer gRPC addresses, comma separated")
	httpTargets := flag.String("http-targets", "127.0.0.1:7080", "sealer HTTP addresses for rest-* ops, comma separated")
	flag.StringVar(&f.echoGRPC, "echo-grpc", "127.0.0.1:7543", "gRPC address of the echo floor, for ops@echo")
	flag.StringVar(&f.echoHTTP, "echo-http", "127.0.0.1:7580", "HTTP address of the echo floor, for rest-*@echo")
	levels := flag.String("c", "1,16,64", "concurrency levels (closed loop) or in-flight caps (with -rate)")
	ops := flag.String("ops", "seal-open,health", "operations, comma separated")
	flag.DurationVar(&f.dur, "d", 10*time.Second, "measured duration per level")
	flag.DurationVar(&f.warmup, "warmup", 2*time.Second, "unmeasured warm-up per level")
	flag.IntVar(&f.size, "payload", 1024, "payload bytes")
	flag.IntVar(&f.poolRate, "pool-rate", 20000, "open-onetime: states sealed beforehand per second of warmup+duration")
	flag.Float64Var(&f.rate, "rate", 0, "offered operations per second (open loop); 0: closed loop")
	flag.BoolVar(&f.retry, "retry", false, "retry an operation on the next target when one is unavailable")
	flag.StringVar(&f.tlsCA, "tls-ca", "", "CA bundle to verify the sealer's TLS certificate (TLS when set)")
	flag.StringVar(&f.token, "token", "", "bearer token sent with every call")
	flag.StringVar(&f.vaultKey, "vault-key", "bench", "vault-transit: Transit key name")
	flag.StringVar(&f.timeline, "timeline", "", "write per-second counts (CSV) to this file")
	flag.BoolVar(&f.oneTime, "one-time", false, "seal-open: seal one-time states")
	flag.IntVar(&f.conns, "conns", 2, "gRPC connections per target")
	flag.IntVar(&f.repeat, "repeat", 1, "runs per op and level, ops taking turns; the median run is reported")
	flag.IntVar(&f.serverPID, "server-pid", 0, "PID of the sealer on this machine: report its CPU time per op")
	flag.IntVar(&f.echoPID, "echo-pid", 0, "PID of the echo floor on this machine: report its CPU time per op@echo")
	flag.Parse()
	// The generator shares the machine with what it measures: it collects
	// garbage as seldom as the sealer does (cmd/sealer), for every op alike.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	f.targets, f.httpTargets, f.ops = strings.Split(*targets, ","), strings.Split(*httpTargets, ","), strings.Split(*ops, ",")
	for _, l := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil || n < 1 {
			fail("bad concurrency %q", l)
		}
		f.levels = append(f.levels, n)
	}
	if p := os.Getenv("SEALER_LOAD_CPUPROFILE"); p != "" {
		out, err := os.Create(p)
		if err != nil {
			fail("%v", err)
		}
		pprof.StartCPUProfile(out)
		defer pprof.StopCPUProfile()
	}
	if err := run(f); err != nil {
		fail("%v", err)
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "sealer-load: "+format+"\n", a...)
	os.Exit(1)
}

func run(f flags) error {
	l, err := setUp(f)
	if err != nil {
		return err
	}
	defer l.close()
	medians := map[string][]*result{}
	fmt.Printf("| call | concurrency | ops/s | p50 | p99 | errors |\n|---|---|---|---|---|---|\n")
	for _, n := range f.levels {
		level, err := l.measureLevel(n)
		if err != nil {
			return err
		}
		if err := l.reportLevel(n, level, medians); err != nil {
			return err
		}
	}
	reportFloors(f.ops, f.levels, medians)
	reportFlows(f.levels, medians)
	return nil
}

// load is what the ops of a run share: the sealers, the echo floor once an
// op@echo needs it, and the payload they seal.
type load struct {
	flags
	sealers *targets
	echoes  *targets
	payload []byte
}

// setUp dials the sealers, over TLS when -tls-ca names a CA bundle.
func setUp(f flags) (*load, error) {
	creds := insecure.NewCredentials()
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, err
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		creds = credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	}
	sealers, err := dial(f.targets, f.conns, creds)
	if err != nil {
		return nil, err
	}
	return &load{flags: f, sealers: sealers, payload: make([]byte, f.size)}, nil
}

func (l *load) close() {
	l.sealers.close()
	if l.echoes != nil {
		l.echoes.close()
	}
}

// opRuns are the runs of one op at one level, and its label in the table.
type opRuns struct {
	label string
	runs  []*result
}

// measureLevel runs each op at concurrency n -repeat times, the ops taking
// turns, for reportLevel to report each op's run with the median
// throughput: one slow second of a shared machine then moves no ratio.
func (l *load) measureLevel(n int) ([]opRuns, error) {
	level := make([]opRuns, len(l.ops))
	for range max(l.repeat, 1) {
		for k, name := range l.ops {
			r, label, err := l.measure(name, n)
			if err != nil {
				return nil, err
			}
			level[k].label, level[k].runs = label, append(level[k].runs, r)
		}
	}
	return level, nil
}

// measure builds the op called name anew and runs it once at concurrency
// n, with the CPU time of the server it calls when its PID was given.
func (l *load) measure(name string, n int) (*result, string, error) {
	o, label, err := l.build(name)
	if err != nil {
		return nil, "", err
	}
	pid := l.serverPID
	if strings.HasSuffix(name, "@echo") {
		pid = l.echoPID
	}
	cpu := cpuDuring(pid, l.warmup, l.dur)
	var r *result
	if l.rate > 0 {
		r = openLoop(o, n, l.rate, l.warmup, l.dur)
	} else {
		r = closedLoop(o, n, l.warmup, l.dur)
	}
	r.serverCPU = cpu()
	if errors.Is(r.fatal, errPoolEmpty) {
		return nil, "", errors.New("the pool of sealed states ran out: raise -pool-rate")
	}
	return r, label, nil
}

// reportLevel prints each op's run at concurrency n with the median
// throughput, and adds it to medians (op -> median run per level) for the
// tables after the last level.
func (l *load) reportLevel(n int, level []opRuns, medians map[string][]*result) error {
	for k, measured := range level {
		slices.SortFunc(measured.runs, func(a, b *result) int { return cmp.Compare(len(a.lat), len(b.lat)) })
		r := measured.runs[len(measured.runs)/2]
		r.report(measured.label, n)
		medians[l.ops[k]] = append(medians[l.ops[k]], r)
		if l.timeline != "" {
			if err := r.writeTimeline(l.timeline); err != nil {
				return err
			}
		}
	}
	return nil
}

// build returns the op called name and its label in the table.
func (l *load) build(name string) (op, string, error) {
	if o, label, ok := mcpOp(name); ok {
		return o, label, nil
	}
	if o, label, ok, err := flowOp(name, l.sealers, l.auth, l.payload); ok {
		return o, label, err
	}
	base, onEcho := strings.CutSuffix(name, "@echo")
	ts, httpTargets := l.sealers, l.httpTargets
	if onEcho {
		if l.echoes == nil {
			echoes, err := dial([]string{l.echoGRPC}, l.conns, insecure.NewCredentials())
			if err != nil {
				return nil, "", err
			}
			l.echoes = echoes
		}
		ts, httpTargets = l.echoes, []string{l.echoHTTP}
	}
	o, label, ok, err := l.sealerOp(base, ts, httpTargets)
	switch {
	case !ok:
		return nil, "", fmt.Errorf("unknown op %q", name)
	case err != nil:
		return nil, "", err
	}
	if onEcho {
		label = "floor: echo " + label
	}
	if l.rate > 0 {
		label += fmt.Sprintf(", offered %.0f/s", l.rate)
	}
	return o, label, nil
}

// sealerOp returns the op called name on ts, the sealers or the echo floor
// (httpTargets for the REST ops), if it is one.
func (l *load) sealerOp(name string, ts *targets, httpTargets []string) (o op, label string, ok bool, err error) {
	size := fmt.Sprintf(" (%d B)", l.size)
	switch name {
	case "seal-open":
		if l.oneTime {
			return l.retrying(l.sealOpen(ts, true)), "Seal+Open one-time" + size, true, nil
		}
		return l.retrying(l.sealOpen(ts, false)), "Seal+Open" + size, true, nil
	case "seal-open-params":
		return l.retrying(paramsSealOpen(ts, l.auth, l.payload)), "Seal+Open, params" + size, true, nil
	case "rest-seal-open":
		return restSealOpen(httpTargets, l.token, l.size), "REST Seal+Open, params" + size, true, nil
	case "open":
		o, err := l.openSealedBeforehand(ts)
		return l.retrying(o), "Open" + size, true, err
	case "open-onetime":
		o, err := l.openOneTime(ts)
		return l.retrying(o), "Open one-time" + size, true, err
	case "open-onetime-record":
		o, err := l.openOneTimeAndRecord(ts)
		return l.retrying(o), "Open one-time + Record" + size, true, err
	case "health":
		return health(ts), "health Check", true, nil
	case "vault-transit":
		o, err := vaultTransit(l.vaultKey, l.payload)
		return o, "Vault Transit encrypt+decrypt" + size, true, err
	}
	return nil, "", false, nil
}

// auth adds the bearer token of -token to ctx.
func (l *load) auth(ctx context.Context) context.Context {
	if l.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+l.token)
}

// retrying runs o on target i, then with -retry on the following targets
// while they are unavailable (a replica killed or draining).
func (l *load) retrying(o op) op {
	if !l.retry {
		return o
	}
	return func(ctx context.Context, i int) error {
		var err error
		for k := range len(l.targets) {
			if err = o(ctx, i+k); status.Code(err) != codes.Unavailable {
				return err
			}
		}
		return err
	}
}

func (l *load) seal(ctx context.Context, ts *targets, i int, oneTime bool) (string, error) {
	st, _, err := ts.client(i).Seal(l.auth(ctx), client.SealRequest{Principal: "alice", Request: toolCall, Payload: l.payload, OneTime: oneTime})
	return st, err
}

func (l *load) open(ctx context.Context, ts *targets, i int, state string) error {
	_, err := ts.client(i).Open(l.auth(ctx), client.OpenRequest{State: state, Principal: "alice", Request: toolCall})
	return err
}

// sealOpen seals, then opens the state on the next target: a cross-replica
// round trip when there are several.
func (l *load) sealOpen(ts *targets, oneTime bool) op {
	return func(ctx context.Context, i int) error {
		st, err := l.seal(ctx, ts, i, oneTime)
		if err != nil {
			return err
		}
		return l.open(ctx, ts, i+1, st)
	}
}

// openSealedBeforehand opens, again and again, an ordinary state sealed
// before the clock starts.
func (l *load) openSealedBeforehand(ts *targets) (op, error) {
	st, err := l.seal(context.Background(), ts, 0, false)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, i int) error { return l.open(ctx, ts, i, st) }, nil
}

// openOneTime opens one-time states sealed before the clock starts, each
// once.
func (l *load) openOneTime(ts *targets) (op, error) {
	return l.eachOneTimeState(ts, func(ctx context.Context, i int, st string) error {
		return l.open(ctx, ts, i, st)
	})
}

// eachOneTimeState is the op that hands each call one of the one-time
// states sealed before the clock starts, for what to do with it.
func (l *load) eachOneTimeState(ts *targets, what func(ctx context.Context, i int, st string) error) (op, error) {
	pool, err := l.oneTimePool(ts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, i int) error {
		st, err := take(pool)
		if err != nil {
			return err
		}
		return what(ctx, i, st)
	}, nil
}

// openOneTimeAndRecord is openOneTime with record_outcome, then the Record
// of an outcome the size of the payload.
func (l *load) openOneTimeAndRecord(ts *targets) (op, error) {
	d, err := toolCall.RequestDigest()
	if err != nil {
		return nil, err
	}
	return l.eachOneTimeState(ts, func(ctx context.Context, i int, st string) error {
		api := sealerv1.NewSealerClient(ts.conn(i))
		resp, err := api.Open(l.auth(ctx), &sealerv1.OpenRequest{RequestState: st, Principal: "alice",
			Request: &sealerv1.Binding{Digest: d[:]}, RecordOutcome: true})
		if err != nil {
			return err
		}
		if !resp.GetRecording() {
			return errNotRecording
		}
		_, err = api.Record(l.auth(ctx), &sealerv1.RecordRequest{RequestState: st, Outcome: l.payload})
		return err
	})
}

// oneTimePool seals the one-time states the open-onetime ops spend,
// -pool-rate for each second of warmup and run, before the clock starts.
func (l *load) oneTimePool(ts *targets) (chan string, error) {
	pool := make(chan string, int(float64(l.poolRate)*(l.warmup+l.dur).Seconds()))
	for len(pool) < cap(pool) {
		st, err := l.seal(context.Background(), ts, len(pool), true)
		if err != nil {
			return nil, err
		}
		pool <- st
	}
	return pool, nil
}

// take returns a state from pool, or errPoolEmpty at once when none is
// left: waiting would measure the pool, not the sealer.
func take(pool chan string) (string, error) {
	select {
	case st := <-pool:
		return st, nil
	default:
		return "", errPoolEmpty
	}
}

func health(ts *targets) op {
	return func(ctx context.Context, i int) error {
		_, err := healthpb.NewHealthClient(ts.conn(i)).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
}

// vaultTransit encrypts, then decrypts, payload with Vault Transit's key
// (VAULT_ADDR, VAULT_TOKEN), for comparison.
func vaultTransit(key string, payload []byte) (op, error) {
	vc, err := vault.NewClient(vault.DefaultConfig())
	if err != nil {
		return nil, err
	}
	plaintext := base64.StdEncoding.EncodeToString(payload)
	return func(ctx context.Context, _ int) error {
		enc, err := vc.Logical().WriteWithContext(ctx, "transit/encrypt/"+key, map[string]any{"plaintext": plaintext})
		if err != nil {
			return err
		}
		_, err = vc.Logical().WriteWithContext(ctx, "transit/decrypt/"+key, map[string]any{"ciphertext": enc.Data["ciphertext"]})
		return err
	}, nil
}

var errPoolEmpty = errors.New("pool of sealed states is empty")

// errNotRecording is an open-onetime-record whose Open did not claim the
// state for an outcome (a sealer with --outcome-limit 0, or older).
var errNotRecording = errors.New("the open is not recording")

// reason names an error: the sealer's ErrorInfo reason, or the gRPC code.
func reason(err error) string {
	if errors.Is(err, errBacklog) {
		return "CLIENT_BACKLOG"
	}
	st, ok := status.FromError(err)
	if !ok {
		return "ERROR"
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return strings.ToUpper(st.Code().String())
}
