package e2e

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

// Attacks on the Java example server (examples/java), each beside its
// control: the same request against the same server on the SDK's own
// default codec (--sdk-codec: HmacRequestStateCodec, one key per process,
// no principal, no arguments, never one-time), where the attack reaches the
// handler. With the sealer every one is refused (-32602) before any handler
// runs, and the sealer logs the reason that fits. The server counts its
// handlers' runs (GET /calls) and payments (GET /payments).

// startJavaOutcomeMCP runs the Java example with alice's and bob's tokens.
func startJavaOutcomeMCP(t *testing.T, jar string, s *proc, flags ...string) *pyOutcomeMCP {
	t.Helper()
	url := startJavaMCP(t, jar, s, append([]string{"--tokens", "alice=" + pyAlice + ",bob=" + pyBob}, flags...)...)
	base := strings.TrimSuffix(url, "/mcp")
	return &pyOutcomeMCP{url: url, host: strings.TrimPrefix(base, "http://"), base: base}
}

// javaRound sends a round and returns its answer's state, failing unless it asks for input.
func javaRound(t *testing.T, url, token, tool string, args map[string]any, state string, responses map[string]any) string {
	t.Helper()
	r, err := callTool(url, token, tool, args, state, responses)
	got, _ := r.Result["requestState"].(string)
	if err != nil || r.Result["resultType"] != "input_required" || got == "" {
		t.Fatalf("a round of %s: got %v, %v; want input_required with a state", tool, r, err)
	}
	return got
}

// booking answers are the inputResponses of the booking tool's rounds.
func bookingConfirm() map[string]any {
	return map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
}

func bookingCard(card string) map[string]any {
	return map[string]any{"payment": map[string]any{"action": "accept", "content": map[string]any{"card": card}}}
}

// TestJavaMCP_AttacksRefused: a replay of a one-time round, another
// principal, other arguments, other input keys, a fork and a rewind of a
// flow. Each reaches the handler on the SDK's default codec, and is refused
// before the handler with the sealer.
func TestJavaMCP_AttacksRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	jar := javaExample(t)
	s := start(t, t.TempDir())
	sealed := startJavaOutcomeMCP(t, jar, s, "--no-record-outcomes")
	control := startJavaOutcomeMCP(t, jar, s, "--sdk-codec")
	args := map[string]any{"payee": "carol", "amount": 42}

	// attack sends round 2 of pay as token with args and responses, on the
	// state alice's round 1 got with the payment's own arguments.
	attack := func(m *pyOutcomeMCP, token string, args2, responses map[string]any) (pyReply, int, error) {
		state := javaRound(t, m.url, pyAlice, "pay", args, "", nil)
		before := m.count(t, "/calls", "pay")
		r, err := callTool(m.url, token, "pay", args2, state, responses)
		return r, m.count(t, "/calls", "pay") - before, err
	}
	for _, tc := range []struct {
		what, token string
		args        map[string]any
		responses   map[string]any
		reason      string
	}{
		{"another principal", pyBob, args, pyConfirm(), "PRINCIPAL_MISMATCH"},
		{"other arguments", pyAlice, map[string]any{"payee": "mallory", "amount": 4200}, pyConfirm(), "REQUEST_MISMATCH"},
		{"other input keys", pyAlice, args, pyConfirm("confirm", "admin"), "INPUT_MISMATCH"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			r, ran, err := attack(control, tc.token, tc.args, tc.responses)
			if err != nil || !strings.HasPrefix(r.text(), "paid") || ran != 1 {
				t.Fatalf("control (the SDK's codec): got %v, %v, the handler ran %d times; want it paid", r, err, ran)
			}
			r, ran, err = attack(sealed, tc.token, tc.args, tc.responses)
			if err != nil || !reflect.DeepEqual(r.Error, pyRefusal) || ran != 0 {
				t.Fatalf("with the sealer: got %v, %v, the handler ran %d times; want the refusal %v before it", r, err, ran, pyRefusal)
			}
			waitFor(t, "the sealer to refuse it "+tc.reason, 5*time.Second, func() bool {
				return strings.Contains(s.logs.String(), `"reason":"`+tc.reason+`"`)
			})
			t.Logf("control: paid, the handler ran once; with the sealer: %v, the handler ran %d times, the sealer's reason %s", r.Error, ran, tc.reason)
		})
	}

	t.Run("a replay of a one-time round", func(t *testing.T) {
		for _, m := range []*pyOutcomeMCP{control, sealed} {
			state := javaRound(t, m.url, pyAlice, "pay", map[string]any{"payee": "dan", "amount": 5}, "", nil)
			for range 2 {
				callTool(m.url, pyAlice, "pay", map[string]any{"payee": "dan", "amount": 5}, state, pyConfirm())
			}
		}
		if n := control.payments(t, "dan"); n != 2 {
			t.Errorf("control (the SDK's codec): the replay paid %d times in all, want 2", n)
		}
		if n := sealed.payments(t, "dan"); n != 1 {
			t.Errorf("with the sealer: the replay paid %d times in all, want 1", n)
		}
		t.Logf("control: paid %d times; with the sealer: paid %d time", control.payments(t, "dan"), sealed.payments(t, "dan"))
		waitFor(t, "the sealer to refuse it ALREADY_CONSUMED", 5*time.Second, func() bool {
			return strings.Contains(s.logs.String(), `"reason":"ALREADY_CONSUMED"`)
		})
	})

	// The booking tool's three rounds (confirm, card, booked) are one flow.
	// A fork answers round 1's state again once it was answered; a rewind
	// presents it once round 2's state has opened too.
	t.Run("a fork and a rewind of a flow", func(t *testing.T) {
		seat := map[string]any{"seat": "12A"}
		for _, m := range []*pyOutcomeMCP{control, sealed} {
			s1 := javaRound(t, m.url, pyAlice, "book_seat", seat, "", nil)
			s2 := javaRound(t, m.url, pyAlice, "book_seat", seat, s1, bookingConfirm())
			before := m.count(t, "/calls", "book_seat")
			fork, _ := callTool(m.url, pyAlice, "book_seat", seat, s1, bookingConfirm())
			done, err := callTool(m.url, pyAlice, "book_seat", seat, s2, bookingCard("4242"))
			if err != nil || done.text() != "booked 12A with card 4242" {
				t.Fatalf("round 3: got %v, %v", done, err)
			}
			rewind, _ := callTool(m.url, pyAlice, "book_seat", seat, s1, bookingConfirm())
			ran := m.count(t, "/calls", "book_seat") - before - 1
			if m == control {
				if fork.Result["resultType"] != "input_required" || rewind.Result["resultType"] != "input_required" || ran != 2 {
					t.Errorf("control (the SDK's codec): fork %v, rewind %v, the handler ran %d more times; want both served", fork, rewind, ran)
				}
				t.Logf("control: fork and rewind served (%v, %v), the handler ran %d more times", fork.Result["resultType"], rewind.Result["resultType"], ran)
				continue
			}
			if !reflect.DeepEqual(fork.Error, pyRefusal) || !reflect.DeepEqual(rewind.Error, pyRefusal) || ran != 0 {
				t.Errorf("with the sealer: fork %v, rewind %v, the handler ran %d more times; want both refused before it", fork, rewind, ran)
			}
			t.Logf("with the sealer: fork %v, rewind %v, the handler ran %d more times", fork.Error, rewind.Error, ran)
		}
	})
}

// TestJavaMCP_AnotherTenantsStateRefused: two Java servers on one sealer,
// each its own tenant (a bearer token of its own). A state one server got
// opens on a second server of the same tenant (the control: it is a good
// state), and is refused INVALID_STATE by the server of the other tenant,
// whose handler never runs.
func TestJavaMCP_AnotherTenantsStateRefused(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	jar := javaExample(t)
	dir := t.TempDir()
	tenants := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenants, fmt.Sprintf("tenants:\n  one:\n    tokens: [%q]\n  two:\n    tokens: [%q]\n",
		tokenHash("tenant-one-token"), tokenHash("tenant-two-token")))
	s := start(t, t.TempDir(), "--tenants", tenants)
	one := startJavaOutcomeMCP(t, jar, s, "--sealer-token", "tenant-one-token")
	oneAgain := startJavaOutcomeMCP(t, jar, s, "--sealer-token", "tenant-one-token")
	two := startJavaOutcomeMCP(t, jar, s, "--sealer-token", "tenant-two-token")
	args := map[string]any{"payee": "erin", "amount": 3}

	state := javaRound(t, one.url, pyAlice, "pay", args, "", nil)
	r, err := callTool(two.url, pyAlice, "pay", args, state, pyConfirm())
	if err != nil || !reflect.DeepEqual(r.Error, pyRefusal) || two.runs(t) != 0 {
		t.Fatalf("tenant two: got %v, %v, its handler ran %d times; want the refusal before it", r, err, two.runs(t))
	}
	waitFor(t, "the sealer to refuse it INVALID_STATE", 5*time.Second, func() bool {
		return strings.Contains(s.logs.String(), `"reason":"INVALID_STATE"`)
	})
	if r, err := callTool(oneAgain.url, pyAlice, "pay", args, state, pyConfirm()); err != nil || r.text() != "paid 3 to erin: payment 1" {
		t.Fatalf("control (tenant one, another replica): got %v, %v; want it paid", r, err)
	}
}

// TestOutcomes_Java: the answer to round 2 of a payment is lost after the
// handler paid; then 32 retries at once all get that answer under their own
// ids, and the handler paid once. With --no-record-outcomes (the control)
// the retries are refused, the payment made once all the same.
func TestOutcomes_Java(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	jar := javaExample(t)
	for _, flags := range [][]string{nil, {"--rest"}} {
		t.Run(map[bool]string{false: "grpc", true: "rest"}[len(flags) > 0], func(t *testing.T) {
			s := start(t, t.TempDir())
			m := startJavaOutcomeMCP(t, jar, s, flags...)
			args := map[string]any{"payee": "dave", "amount": 7}
			state := javaRound(t, m.url, pyAlice, "pay", args, "", nil)
			pyLosePayment(t, m, args, state)
			paysOnceForParallelRetries(t, m, args, state)
		})
	}
	t.Run("control: recording off", func(t *testing.T) {
		s := start(t, t.TempDir())
		m := startJavaOutcomeMCP(t, jar, s, "--no-record-outcomes")
		args := map[string]any{"payee": "frank", "amount": 42}
		state := javaRound(t, m.url, pyAlice, "pay", args, "", nil)
		pyLosePayment(t, m, args, state)
		r, err := pyPay(m.url, pyAlice, args, state, pyConfirm())
		if err != nil || !reflect.DeepEqual(r.Error, pyRefusal) {
			t.Fatalf("the retry: got %v, %v; want the refusal %v", r, err, pyRefusal)
		}
		if n := m.payments(t, "frank"); n != 1 {
			t.Errorf("the handler paid %d times, want 1", n)
		}
	})
}
