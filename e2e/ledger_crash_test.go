package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	byteorder "encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"google.golang.org/grpc/status"

	sealerv1 "github.com/mcp-sealer/sealer/gen/sealer/v1"
	"github.com/mcp-sealer/sealer/internal/testenv"
)

// The embedded ledger through crashes, against the real binary: a storm of
// one-time Opens and latest-only rounds from 16 callers, the sealer killed
// (SIGKILL) at a random moment, then started again on the same data
// directory. Every Open answered before the kill must stay consumed and
// every answered round must stay the latest: a second Open of each is
// refused. (R6, R9)

// crashWork is the states of one storm, sealed beforehand, and what the
// storm answered.
type crashWork struct {
	oneTime []string   // one-time states
	flows   [][]string // latest-only flows: the states of rounds 1, 2, 3

	killAt int
	kill   func()

	mu       sync.Mutex
	answered int
	opened   []string    // one-time states whose Open was answered OK
	latest   map[int]int // flow -> highest round answered OK
	refusals map[string]int
}

var crashDigest = &sealerv1.Binding{Digest: bytes.Repeat([]byte{0x5e}, 32)}

// sealCrashWork seals n one-time states and f latest-only flows of three
// rounds.
func sealCrashWork(t *testing.T, g sealerv1.SealerClient, n, f int) *crashWork {
	t.Helper()
	ctx := context.Background()
	w := &crashWork{latest: map[int]int{}, refusals: map[string]int{}}
	for range n {
		r, err := g.Seal(ctx, &sealerv1.SealRequest{Principal: "alice", Request: crashDigest, Payload: []byte("one-time"), OneTime: true})
		if err != nil {
			t.Fatal(err)
		}
		w.oneTime = append(w.oneTime, r.RequestState)
	}
	asked := &sealerv1.InputKeys{Keys: []string{"answer"}}
	for range f {
		var rounds []string
		continues := ""
		for range 3 {
			r, err := g.Seal(ctx, &sealerv1.SealRequest{Principal: "alice", Request: crashDigest, Payload: []byte("round"),
				Flow: &sealerv1.FlowRequest{Continues: continues, LatestOnly: true, Asked: asked}})
			if err != nil {
				t.Fatal(err)
			}
			rounds, continues = append(rounds, r.RequestState), r.RequestState
		}
		w.flows = append(w.flows, rounds)
	}
	return w
}

func openCrashState(t *testing.T, g sealerv1.SealerClient, state string) (string, error) {
	_, err := g.Open(context.Background(), &sealerv1.OpenRequest{RequestState: state, Principal: "alice", Request: crashDigest,
		Responded: &sealerv1.InputKeys{Keys: []string{"answer"}}})
	if err == nil {
		return "OK", nil
	}
	if r := reasonOf(t, status.Convert(err)); !strings.HasPrefix(r, "NO_ERROR_INFO:") {
		return r, nil
	}
	return "", err // no answer: the sealer is gone
}

// storm opens the work's states from c callers, each one-time state once
// and each flow's rounds in order, calling kill once killAt Opens are
// answered (0: never); it returns when every caller has stopped.
func (w *crashWork) storm(t *testing.T, g sealerv1.SealerClient, c int, killAt int, kill func()) {
	type task struct{ oneTime, flow int }
	tasks := make(chan task, len(w.oneTime)+len(w.flows))
	for i := range max(len(w.oneTime), len(w.flows)) {
		if i < len(w.oneTime) {
			tasks <- task{oneTime: i, flow: -1}
		}
		if i < len(w.flows) {
			tasks <- task{oneTime: -1, flow: i}
		}
	}
	close(tasks)
	w.killAt, w.kill = killAt, kill
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for tk := range tasks {
				if tk.oneTime >= 0 {
					state := w.oneTime[tk.oneTime]
					r, err := openCrashState(t, g, state)
					if err != nil {
						return
					}
					w.record(r, func() { w.opened = append(w.opened, state) })
					continue
				}
				for round, state := range w.flows[tk.flow] {
					r, err := openCrashState(t, g, state)
					if err != nil {
						return
					}
					w.record(r, func() { w.latest[tk.flow] = round + 1 })
				}
			}
		})
	}
	wg.Wait()
}

func (w *crashWork) record(reason string, ok func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.answered++; w.answered == w.killAt {
		go w.kill() // while the other callers' Opens are in flight
	}
	if reason == "OK" {
		ok()
		return
	}
	w.refusals[reason]++
}

// check opens again every state answered OK, and the round before each
// flow's latest: each must be refused ALREADY_CONSUMED. It returns how
// many it checked.
func (w *crashWork) check(t *testing.T, g sealerv1.SealerClient) int {
	t.Helper()
	checked, reopened := 0, 0
	expect := func(what, state string) {
		r, err := openCrashState(t, g, state)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checked++
		if r != "ALREADY_CONSUMED" {
			reopened++
			t.Errorf("%s after the restart: got %s, want ALREADY_CONSUMED", what, r)
		}
	}
	for _, state := range w.opened {
		expect("a one-time state answered before the kill", state)
	}
	for f, round := range w.latest {
		for r := 1; r <= round; r++ {
			expect(fmt.Sprintf("round %d of a flow answered at round %d before the kill", r, round), w.flows[f][r-1])
		}
	}
	if reopened > 0 {
		t.Fatalf("%d of %d answered states opened again", reopened, checked)
	}
	return checked
}

// killAndRestart runs one storm on a sealer on dir, kills it at a random
// moment, lets damage harm the directory, starts the sealer again and
// checks.
func killAndRestart(t *testing.T, dir string, damage func(t *testing.T)) {
	t.Helper()
	p := start(t, dir)
	g := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	const oneTime, flows = 1500, 150
	w := sealCrashWork(t, g, oneTime, flows)
	killAt := 100 + mrand.IntN(oneTime+3*flows-200)
	w.storm(t, g, 16, killAt, p.kill)
	p.kill()
	if damage != nil {
		damage(t)
	}
	p = start(t, dir)
	defer p.kill()
	checked := w.check(t, sealerv1.NewSealerClient(dialGRPC(t, p.GRPC)))
	rounds := 0
	for _, r := range w.latest {
		rounds += r
	}
	t.Logf("killed at answer %d of %d: %d one-time Opens and %d latest-only rounds answered OK (refusals %v); after the restart %d checked, 0 opened again",
		killAt, oneTime+3*flows, len(w.opened), rounds, w.refusals, checked)
	if w.answered >= oneTime+3*flows {
		t.Fatalf("every Open was answered: the kill came after the storm")
	}
}

func TestLedger_R6_KilledMidStormLosesNoAnsweredOpen(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	for i := range 20 {
		t.Run(strconv.Itoa(i), func(t *testing.T) { killAndRestart(t, dir, nil) })
	}
}

// A crash while the log's last record was being written leaves it torn:
// the restart must take the log up to it and keep every answered Open.
func TestLedger_R6_TornLastRecordLosesNoAnsweredOpen(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	for i := range 5 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			killAndRestart(t, dir, func(t *testing.T) { tearLog(t, filepath.Join(dir, "ledger")) })
		})
	}
}

// tearLog writes, at the end of the newest write-ahead log in dir, the
// first part of a record that was never finished: a chunk header that
// promises more bytes than follow. It checks that the log now reads as
// ending mid-record.
func tearLog(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatalf("no write-ahead log in %s", dir)
	}
	slices.Sort(logs)
	path := logs[len(logs)-1]
	num, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	end, typ, _ := readLog(t, f, num)
	if typ == 0 {
		t.Fatalf("%s holds no record", path)
	}
	// The header of a chunk of the log's own format (the type of its first
	// chunk), with the log's number, promising 512 bytes of which 40 follow.
	hdr := make([]byte, 11, 19)
	rand.Read(hdr[:4])
	byteorder.LittleEndian.PutUint16(hdr[4:], 512)
	hdr[6] = typ
	byteorder.LittleEndian.PutUint32(hdr[7:], uint32(num))
	if typ >= 9 { // with the log's synced offset
		hdr = byteorder.LittleEndian.AppendUint64(hdr, uint64(end))
	}
	torn := append(hdr, make([]byte, 40)...)
	rand.Read(torn[len(hdr):])
	if _, err := f.WriteAt(torn, end); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(end + int64(len(torn))); err != nil {
		t.Fatal(err)
	}
	got, _, err := readLog(t, f, num)
	if got != end {
		t.Fatalf("the torn record moved the log's end from %d to %d", end, got)
	}
	if errors.Is(err, io.EOF) || err == nil {
		t.Fatalf("the log reads to a clean end after the torn record (%v)", err)
	}
}

// readLog reads the log f numbered num from its start and returns the
// offset after its last whole record, the type byte of its first chunk (0:
// none), and the error that ended the reading.
func readLog(t *testing.T, f *os.File, num uint64) (int64, byte, error) {
	t.Helper()
	var first [7]byte
	if _, err := f.ReadAt(first[:], 0); err != nil {
		return 0, 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	r := logReader(f, num)
	end := int64(0)
	for {
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		if err != nil {
			return end, first[6], err
		}
		end = r.Offset()
	}
}

// With the file system full, Opens are refused LEDGER_UNAVAILABLE and none
// is answered as won that a restart does not keep; with room again, the
// sealer takes one-time Opens without a restart.
func TestLedger_R6_DiskFullRefusesAndLosesNoAnsweredOpen(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	mnt := testenv.Tmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	p := start(t, dir)
	g := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	w := sealCrashWork(t, g, 3000, 10)
	filler := testenv.Fill(t, mnt)
	w.storm(t, g, 16, 0, nil)
	if w.refusals["LEDGER_UNAVAILABLE"] == 0 {
		t.Fatalf("on a full disk: %d Opens answered OK and no LEDGER_UNAVAILABLE (refusals %v)", len(w.opened), w.refusals)
	}
	for reason, n := range w.refusals {
		if reason != "LEDGER_UNAVAILABLE" && reason != "ALREADY_CONSUMED" {
			t.Errorf("on a full disk: %d refused %s, want LEDGER_UNAVAILABLE", n, reason)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// With room again the ledger reopens itself.
	fresh := sealCrashWork(t, g, 1, 0)
	var r string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var err error
		if r, err = openCrashState(t, g, fresh.oneTime[0]); err != nil {
			t.Fatal(err)
		}
		if r == "OK" {
			break
		}
	}
	if r != "OK" {
		t.Fatalf("with room again: a one-time Open got %s, want OK", r)
	}
	p.kill()
	p = start(t, dir)
	defer p.kill()
	checked := w.check(t, sealerv1.NewSealerClient(dialGRPC(t, p.GRPC)))
	t.Logf("on the full disk: %d one-time Opens answered OK (in room set aside), refusals %v; healed without a restart; after a restart %d checked, 0 opened again",
		len(w.opened), w.refusals, checked)
}

// A data directory written by the release before the Pebble ledger (a
// bbolt file, ledger.db) is imported at start: every state it consumed and
// every flow round it advanced stays so.
func TestLedger_R6_UpgradeFromBoltKeepsEveryEntry(t *testing.T) {
	testenv.Lane(t, testenv.LaneE2E)
	dir := t.TempDir()
	p := startPrevious(t, dir)
	g := sealerv1.NewSealerClient(dialGRPC(t, p.GRPC))
	w := sealCrashWork(t, g, 200, 20)
	w.storm(t, g, 16, 0, nil)
	if len(w.opened) != 200 || len(w.latest) != 20 {
		t.Fatalf("the previous release answered %d of 200 one-time Opens and %d of 20 flows", len(w.opened), len(w.latest))
	}
	p.kill()
	if _, err := os.Stat(filepath.Join(dir, "ledger.db")); err != nil {
		t.Fatalf("the previous release wrote no ledger.db: %v", err)
	}
	p = start(t, dir)
	defer p.kill()
	if !strings.Contains(p.logs.String(), `"msg":"ledger imported"`) {
		t.Errorf("no import logged:\n%s", p.logs)
	}
	checked := w.check(t, sealerv1.NewSealerClient(dialGRPC(t, p.GRPC)))
	if _, err := os.Stat(filepath.Join(dir, "ledger.db.imported")); err != nil {
		t.Errorf("the old file was not kept as ledger.db.imported: %v", err)
	}
	t.Logf("a data directory of the previous release: %d entries checked after the upgrade, 0 opened again", checked)
}

// previousRelease is the commit of the last release with the bbolt ledger.
const previousRelease = "928f21f"

var previous struct {
	once sync.Once
	bin  string
	err  error
}

// startPrevious starts the previous release's sealer, built from the
// repository's history, on dataDir.
func startPrevious(t *testing.T, dataDir string) *proc {
	t.Helper()
	previous.once.Do(func() {
		dir, err := os.MkdirTemp("", "sealer-previous-")
		if err != nil {
			previous.err = err
			return
		}
		src := filepath.Join(dir, "src")
		script := fmt.Sprintf("mkdir -p %[1]s && git -C .. archive %[2]s | tar -x -C %[1]s && cd %[1]s && go build -o ../sealer ./cmd/sealer", src, previousRelease)
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			previous.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		previous.bin = filepath.Join(dir, "sealer")
	})
	if previous.err != nil {
		testenv.Missing(t, "no build of the previous release %s (the repository's history is needed): %v", previousRelease, previous.err)
	}
	return startBinary(t, previous.bin, nil, dataDir)
}

// logReader reads the write-ahead log f numbered num. Pebble's reader
// takes the number as a type of an internal package, made here by
// reflection.
func logReader(f io.Reader, num uint64) *record.Reader {
	fn := reflect.ValueOf(record.NewReader)
	n := reflect.New(fn.Type().In(1)).Elem()
	n.SetUint(num)
	return fn.Call([]reflect.Value{reflect.ValueOf(f), n})[0].Interface().(*record.Reader)
}
