//go:build unix

package server

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/ledger/embedded"
)

// cpuTime is the CPU time the process has used, user and system, all
// threads: on a shared machine, what an operation costs is read from it
// better than from the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFlows_SealOpen is a Seal and an Open through the gate, with a
// digest binding as the Go client sends, for a plain state and for flows:
// the server's cost of a flow, without the transport, in time and in the
// process's CPU time (cpu-ns/op, every thread, the collector's too).
// latest-only and one-time use the embedded ledger (Advance, Consume) on the
// test's disk.
func BenchmarkFlows_SealOpen(b *testing.B) {
	ctx := context.Background()
	binding := &sealerv1.Binding{Digest: bytes.Repeat([]byte{7}, 32)}
	payload := make([]byte, 1024)
	asked := &sealerv1.InputKeys{Keys: []string{"github_login"}}
	for _, bc := range []struct {
		name    string
		oneTime bool
		flow    *sealerv1.FlowRequest
	}{
		{"plain", false, nil},
		{"flow round 1", false, &sealerv1.FlowRequest{Asked: asked}},
		{"flow round 2", false, &sealerv1.FlowRequest{Asked: asked, Continues: "set below"}},
		{"latest-only flow round 1", false, &sealerv1.FlowRequest{LatestOnly: true, Asked: asked}},
		{"one-time", true, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := embedded.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			s := testService(&testing.T{}, l)
			open := &sealerv1.OpenRequest{Principal: "alice", Request: binding}
			if bc.flow != nil {
				open.Responded = asked
			}
			if bc.flow != nil && bc.flow.Continues != "" {
				first, r := flowCall(ctx, s, "Seal", s.Seal, &sealerv1.SealRequest{Principal: "alice", Request: binding, Flow: &sealerv1.FlowRequest{Asked: asked}})
				if r != "OK" {
					b.Fatal(r)
				}
				bc.flow.Continues = first.RequestState
			}
			seal := &sealerv1.SealRequest{Principal: "alice", Request: binding, Payload: payload, OneTime: bc.oneTime, Flow: bc.flow}
			b.ReportAllocs()
			before := cpuTime()
			for b.Loop() {
				resp, r := flowCall(ctx, s, "Seal", s.Seal, seal)
				if r != "OK" {
					b.Fatal(r)
				}
				open.RequestState = resp.RequestState
				if _, r := flowCall(ctx, s, "Open", s.Open, open); r != "OK" {
					b.Fatal(r)
				}
			}
			b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
		})
	}
}
