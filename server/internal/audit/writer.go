package audit

import (
	"bufio"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The audit file's writer takes the work of an event off the call's path: a
// call hands its event to a bounded queue and goes on; one goroutine takes
// the queued events in batches every drainEvery, makes their lines (the
// principal's hash, the JSON) and writes them through a buffer flushed every
// flushEvery and on Close. A call that finds the queue full writes its
// own line at once, as every call did before the queue, and is counted in
// sealer_audit_queue_full_total: no event is ever dropped; the queue only
// bounds the memory, and when it is full the work moves back onto the call.
// Lines are then not in time order (each carries its time). A crash loses
// what was queued or buffered: at most the last drainEvery +
// flushEvery.
const (
	// queueLen is the events queued at most: 10 ms of 800,000 calls a
	// second, about 1 MiB.
	queueLen   = 8192
	drainEvery = 10 * time.Millisecond
	flushEvery = 200 * time.Millisecond
)

// writer writes audit events as JSON lines to w.
type writer struct {
	queue chan event
	// closing guards closed: add holds it for reading, so that stop, which
	// takes it for writing, sees every event queued before it.
	closing sync.RWMutex
	closed  bool

	mu   sync.Mutex // guards bw and line
	bw   *bufio.Writer
	line []byte

	queueFull atomic.Int64 // events written by their call, the queue being full
	failed    atomic.Int64 // failed writes and flushes of the file
}

func newWriter(w io.Writer, queue int) *writer {
	return &writer{queue: make(chan event, queue), bw: bufio.NewWriterSize(w, 64<<10)}
}

// add writes e: queued for the writer's goroutine, or at once when the queue
// is full or the writer stopped.
func (w *writer) add(e event) {
	w.closing.RLock()
	defer w.closing.RUnlock()
	if !w.closed {
		select {
		case w.queue <- e:
			return
		default:
			w.queueFull.Add(1)
		}
	}
	w.mu.Lock()
	w.write(&e)
	w.mu.Unlock()
}

// start runs the writer's goroutine: it writes the queued events every
// drainEvery and flushes every flushEvery. The returned stop ends it, after
// writing what is queued and flushing; events added after stop are written
// at once (and flushed by no one: the file is being closed).
func (w *writer) start(drainEvery, flushEvery time.Duration) (stop func() error) {
	done, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		drain, flush := time.NewTicker(drainEvery), time.NewTicker(flushEvery)
		defer drain.Stop()
		defer flush.Stop()
		for {
			select {
			case <-done:
				w.closing.Lock()
				w.closed = true
				w.closing.Unlock()
				w.drain()
				stopped <- w.flush()
				return
			case <-drain.C:
				w.drain()
			case <-flush.C:
				w.flush()
			}
		}
	}()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { close(done); err = <-stopped })
		return err
	}
}

// drain writes the events queued now, at most a queue's worth, so that a
// queue refilled as fast as it drains still lets the writer flush.
func (w *writer) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for range cap(w.queue) {
		select {
		case e := <-w.queue:
			w.write(&e)
		default:
			return
		}
	}
}

// write appends e's line to the buffer; w.mu is held.
func (w *writer) write(e *event) {
	w.line = e.appendLine(w.line[:0])
	if _, err := w.bw.Write(w.line); err != nil {
		w.failed.Add(1)
	}
}

func (w *writer) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.bw.Flush()
	if err != nil {
		w.failed.Add(1)
	}
	return err
}

// register exports the writer's counters.
func (w *writer) register(reg prometheus.Registerer) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sealer_audit_queue_full_total",
			Help: "Audit events that found the audit writer's queue full and were written by their call instead (none is dropped).",
		}, func() float64 { return float64(w.queueFull.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sealer_audit_write_errors_total",
			Help: "Failed writes and flushes of the audit file (--audit-log): events may be lost.",
		}, func() float64 { return float64(w.failed.Load()) }))
}
