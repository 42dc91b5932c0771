package server

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/reasons"
)

// reasons are the values of the enum that the sealer sends, all but
// REASON_UNSPECIFIED.
func enumReasons() []sealerv1.Reason {
	values := sealerv1.Reason(0).Descriptor().Values()
	var rs []sealerv1.Reason
	for i := range values.Len() {
		if r := sealerv1.Reason(values.Get(i).Number()); r != sealerv1.Reason_REASON_UNSPECIFIED {
			rs = append(rs, r)
		}
	}
	return rs
}

// codeOf is the gRPC code the server sends with each reason it sends for
// some error: its rule's, in the proto.
func codeOf(t *testing.T) map[sealerv1.Reason]codes.Code {
	t.Helper()
	m := map[sealerv1.Reason]codes.Code{}
	for _, o := range append(reasons.Table, internalFailure) {
		m[o.Reason] = reasons.Code(o.Reason)
	}
	return m
}

// Every reason the sealer sends has its rule in the proto: a code other
// than OK, and at most one of rejects and retryable.
func TestReasonRules(t *testing.T) {
	for _, r := range enumReasons() {
		rule := reasons.Rule(r)
		if reasons.Code(r) == codes.OK || rule.GetRejects() && rule.GetRetryable() {
			t.Errorf("%v: rule %v, want a gRPC code and at most one of rejects and retryable", r, rule)
		}
	}
	if !reasons.Rejects(sealerv1.Reason_REASON_EXPIRED) || !reasons.Retryable(sealerv1.Reason_REASON_LEDGER_UNAVAILABLE) ||
		reasons.Code(sealerv1.Reason_REASON_PRINCIPAL_MISMATCH) != codes.PermissionDenied {
		t.Error("the rules of EXPIRED, LEDGER_UNAVAILABLE or PRINCIPAL_MISMATCH are not read from the proto")
	}
}

// The wire carries the names the README documents, whatever buf lint makes
// the enum's values be called.
func TestReasonText(t *testing.T) {
	if got := reasonText(sealerv1.Reason_REASON_EXPIRED); got != "EXPIRED" {
		t.Errorf("got %q, want EXPIRED", got)
	}
	seen := map[string]bool{reasonOK: true}
	for _, r := range enumReasons() {
		text := reasonText(r)
		if !strings.HasPrefix(r.String(), "REASON_") || text == "" || seen[text] {
			t.Errorf("%v: wire text %q, want a unique name after REASON_, not %s", r, text, reasonOK)
		}
		seen[text] = true
	}
}

// Every reason of the enum is sent for some error, with one code, and
// statusOf sends it as the table says.
func TestStatusOf_EveryReason(t *testing.T) {
	byReason := codeOf(t)
	for _, r := range enumReasons() {
		if _, ok := byReason[r]; !ok {
			t.Errorf("%v: in the enum, but no error is sent with it", r)
		}
	}
	for _, o := range append(reasons.Table, internalFailure) {
		t.Run(fmt.Sprint(o.Err), func(t *testing.T) {
			err := fmt.Errorf("%w: the detail", o.Err)
			if o == internalFailure {
				err = errors.New("disk on fire")
			}
			st, reason := statusOf(err)
			s := status.Convert(st)
			var info *errdetails.ErrorInfo
			for _, d := range s.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			switch {
			case s.Code() != reasons.Code(o.Reason):
				t.Errorf("got code %v, want %v", s.Code(), reasons.Code(o.Reason))
			case info == nil || info.Reason != reasonText(o.Reason) || info.Domain != errorDomain || reason != info.Reason:
				t.Errorf("got ErrorInfo %v and reason %q, want %s in %s", info, reason, reasonText(o.Reason), errorDomain)
			case o.Detail && s.Message() != err.Error():
				t.Errorf("got message %q, want %q", s.Message(), err.Error())
			case !o.Detail && s.Message() != o.Err.Error():
				t.Errorf("got message %q, want only %q", s.Message(), o.Err.Error())
			}
		})
	}
}

// The README's error table lists exactly the reasons of the enum, each with
// the gRPC code the server sends it with and the HTTP status grpc-gateway
// maps that code to.
func TestREADME_ErrorTable(t *testing.T) {
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct {
		code codes.Code
		http int
	}
	rows := map[string]row{}
	section, table := false, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			section = strings.TrimSpace(strings.TrimLeft(line, "#")) == "Errors"
			continue
		}
		if !section || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("README error table: %q has fewer than four columns", line)
		}
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		if !table { // the header and the delimiter row
			table = cells[1] == "reason"
			continue
		}
		if strings.HasPrefix(cells[1], "---") {
			continue
		}
		var code codes.Code
		if err := code.UnmarshalJSON([]byte(strconv.Quote(cells[2]))); err != nil {
			t.Errorf("README error table: %s: gRPC code %q: %v", cells[1], cells[2], err)
		}
		httpStatus, err := strconv.Atoi(cells[3])
		if err != nil {
			t.Errorf("README error table: %s: HTTP status %q: %v", cells[1], cells[3], err)
		}
		if _, dup := rows[cells[1]]; dup {
			t.Errorf("README error table: %s listed twice", cells[1])
		}
		rows[cells[1]] = row{code, httpStatus}
	}
	if len(rows) == 0 {
		t.Fatal("README: no error table in a section named Errors")
	}
	byReason := codeOf(t)
	for _, r := range enumReasons() {
		code, sent := byReason[r]
		want := row{code, runtime.HTTPStatusFromCode(code)}
		got, ok := rows[reasonText(r)]
		switch {
		case !sent:
			t.Errorf("%v: in the enum, but no error is sent with it", r)
		case !ok:
			t.Errorf("README error table: %s missing; want it with %v and HTTP %d", reasonText(r), want.code, want.http)
		case got != want:
			t.Errorf("README error table: %s: got %v and HTTP %d, want %v and HTTP %d", reasonText(r), got.code, got.http, want.code, want.http)
		}
		delete(rows, reasonText(r))
	}
	for name := range rows {
		t.Errorf("README error table: %s is no reason the sealer sends", name)
	}
}
