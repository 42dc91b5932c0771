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
	creds := insecure.NewCredentials()
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return err
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		creds = credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	}
	sealers, err := dial(f.targets, f.conns, creds)
	if err != nil {
		return err
	}
	defer sealers.close()
	var echoes *targets
	auth := func(ctx context.Context) context.Context {
		if f.token == "" {
			return ctx
		}
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
	}
	payload := make([]byte, f.size)
	// retrying runs o on target i, then on the following targets while they
	// are unavailable (a replica killed or draining).
	retrying := func(o op) op {
		if !f.retry {
			return o
		}
		return func(ctx context.Context, i int) error {
			var err error
			for k := range len(f.targets) {
				if err = o(ctx, i+k); status.Code(err) != codes.Unavailable {
					return err
				}
			}
			return err
		}
	}

	// build returns the operation called name and its label in the table.
	build := func(name string) (op, string, error) {
		if o, label, ok := mcpOp(name); ok {
			return o, label, nil
		}
		if o, label, ok, err := flowOp(name, sealers, auth, payload); ok {
			return o, label, err
		}
		base, onEcho := strings.CutSuffix(name, "@echo")
		ts, httpTargets := sealers, f.httpTargets
		if onEcho {
			if echoes == nil {
				if echoes, err = dial([]string{f.echoGRPC}, f.conns, insecure.NewCredentials()); err != nil {
					return nil, "", err
				}
			}
			ts, httpTargets = echoes, []string{f.echoHTTP}
		}
		seal := func(ctx context.Context, i int, oneTime bool) (string, error) {
			st, _, err := ts.client(i).Seal(auth(ctx), client.SealRequest{Principal: "alice", Request: toolCall, Payload: payload, OneTime: oneTime})
			return st, err
		}
		open := func(ctx context.Context, i int, state string) error {
			_, err := ts.client(i).Open(auth(ctx), client.OpenRequest{State: state, Principal: "alice", Request: toolCall})
			return err
		}
		// oneTimePool seals the one-time states the open-onetime ops spend,
		// -pool-rate for each second of warmup and run, before the clock
		// starts.
		oneTimePool := func() (chan string, error) {
			pool := make(chan string, int(float64(f.poolRate)*(f.warmup+f.dur).Seconds()))
			for len(pool) < cap(pool) {
				st, err := seal(context.Background(), len(pool), true)
				if err != nil {
					return nil, err
				}
				pool <- st
			}
			return pool, nil
		}
		var o op
		label := base
		switch base {
		case "seal-open":
			oneTime := f.oneTime
			o = retrying(func(ctx context.Context, i int) error {
				st, err := seal(ctx, i, oneTime)
				if err != nil {
					return err
				}
				return open(ctx, i+1, st)
			})
			label = fmt.Sprintf("Seal+Open (%d B)", f.size)
			if oneTime {
				label = fmt.Sprintf("Seal+Open one-time (%d B)", f.size)
			}
		case "seal-open-params":
			o = retrying(paramsSealOpen(ts, auth, payload))
			label = fmt.Sprintf("Seal+Open, params (%d B)", f.size)
		case "rest-seal-open":
			o = restSealOpen(httpTargets, f.token, f.size)
			label = fmt.Sprintf("REST Seal+Open, params (%d B)", f.size)
		case "open":
			st, err := seal(context.Background(), 0, false)
			if err != nil {
				return nil, "", err
			}
			o = retrying(func(ctx context.Context, i int) error { return open(ctx, i, st) })
			label = fmt.Sprintf("Open (%d B)", f.size)
		case "open-onetime":
			pool, err := oneTimePool()
			if err != nil {
				return nil, "", err
			}
			o = retrying(func(ctx context.Context, i int) error {
				select {
				case st := <-pool:
					return open(ctx, i, st)
				default:
					return errPoolEmpty
				}
			})
			label = fmt.Sprintf("Open one-time (%d B)", f.size)
		case "open-onetime-record":
			pool, err := oneTimePool()
			if err != nil {
				return nil, "", err
			}
			d, err := toolCall.RequestDigest()
			if err != nil {
				return nil, "", err
			}
			o = retrying(func(ctx context.Context, i int) error {
				var st string
				select {
				case st = <-pool:
				default:
					return errPoolEmpty
				}
				api := sealerv1.NewSealerClient(ts.conn(i))
				resp, err := api.Open(auth(ctx), &sealerv1.OpenRequest{RequestState: st, Principal: "alice",
					Request: &sealerv1.Binding{Digest: d[:]}, RecordOutcome: true})
				if err != nil {
					return err
				}
				if !resp.GetRecording() {
					return errNotRecording
				}
				_, err = api.Record(auth(ctx), &sealerv1.RecordRequest{RequestState: st, Outcome: payload})
				return err
			})
			label = fmt.Sprintf("Open one-time + Record (%d B)", f.size)
		case "health":
			o = func(ctx context.Context, i int) error {
				_, err := healthpb.NewHealthClient(ts.conn(i)).Check(ctx, &healthpb.HealthCheckRequest{})
				return err
			}
			label = "health Check"
		case "vault-transit":
			vc, err := vault.NewClient(vault.DefaultConfig())
			if err != nil {
				return nil, "", err
			}
			plaintext := base64.StdEncoding.EncodeToString(payload)
			o = func(ctx context.Context, _ int) error {
				enc, err := vc.Logical().WriteWithContext(ctx, "transit/encrypt/"+f.vaultKey, map[string]any{"plaintext": plaintext})
				if err != nil {
					return err
				}
				_, err = vc.Logical().WriteWithContext(ctx, "transit/decrypt/"+f.vaultKey, map[string]any{"ciphertext": enc.Data["ciphertext"]})
				return err
			}
			label = fmt.Sprintf("Vault Transit encrypt+decrypt (%d B)", f.size)
		default:
			return nil, "", fmt.Errorf("unknown op %q", name)
		}
		if onEcho {
			label = "floor: echo " + label
		}
		if f.rate > 0 {
			label += fmt.Sprintf(", offered %.0f/s", f.rate)
		}
		return o, label, nil
	}

	medians := map[string][]*result{} // op -> median run per level
	fmt.Printf("| call | concurrency | ops/s | p50 | p99 | errors |\n|---|---|---|---|---|---|\n")
	for _, n := range f.levels {
		// Each op runs -repeat times, the ops taking turns, and the run with
		// the median throughput is reported: one slow second of a shared
		// machine then moves no ratio.
		runs := make([][]*result, len(f.ops))
		labels := make([]string, len(f.ops))
		for range max(f.repeat, 1) {
			for k, name := range f.ops {
				o, label, err := build(name)
				if err != nil {
					return err
				}
				pid := f.serverPID
				if strings.HasSuffix(name, "@echo") {
					pid = f.echoPID
				}
				cpu := cpuDuring(pid, f.warmup, f.dur)
				var r *result
				if f.rate > 0 {
					r = openLoop(o, n, f.rate, f.warmup, f.dur)
				} else {
					r = closedLoop(o, n, f.warmup, f.dur)
				}
				r.serverCPU = cpu()
				if errors.Is(r.fatal, errPoolEmpty) {
					return errors.New("the pool of sealed states ran out: raise -pool-rate")
				}
				runs[k], labels[k] = append(runs[k], r), label
			}
		}
		for k, rs := range runs {
			slices.SortFunc(rs, func(a, b *result) int { return cmp.Compare(len(a.lat), len(b.lat)) })
			r := rs[len(rs)/2]
			r.report(labels[k], n)
			medians[f.ops[k]] = append(medians[f.ops[k]], r)
			if f.timeline != "" {
				if err := r.writeTimeline(f.timeline); err != nil {
					return err
				}
			}
		}
	}
	reportFloors(f.ops, f.levels, medians)
	reportFlows(f.levels, medians)
	return nil
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
