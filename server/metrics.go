package server

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcp-sealer/sealer/keys"
)

// metrics are the service's Prometheus metrics. Labels hold method names and
// outcome reasons only: never a principal, tenant secret, state or payload.
type metrics struct {
	registry  *prometheus.Registry
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	ledger    *prometheus.HistogramVec
	ledgerErr prometheus.Counter
	swept     prometheus.Counter
	// unauthenticated counts refused callers; they make no audit event.
	unauthenticated *prometheus.CounterVec
	series          sync.Map // the series of calls and latency in use, by method and reason
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_calls_total",
			Help: "Seal and Open calls by method and outcome reason (OK or an ErrorInfo reason).",
		}, []string{"method", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sealer_call_duration_seconds",
			Help:    "Time spent in Seal and Open, by method.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 12),
		}, []string{"method"}),
		ledger: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sealer_ledger_consume_duration_seconds",
			Help:    "Time spent consuming one-time states in the ledger, by outcome.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 12),
		}, []string{"reason"}),
		ledgerErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sealer_ledger_errors_total",
			Help: "Ledger calls that failed (LEDGER_UNAVAILABLE): errors, timeouts, unexpected replies.",
		}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sealer_ledger_swept_total",
			Help: "Expired ledger entries deleted.",
		}),
		unauthenticated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_unauthenticated_total",
			Help: "Calls refused before their body was read, for want of valid credentials, by transport (grpc, rest).",
		}, []string{"transport"}),
	}
	m.registry.MustRegister(m.calls, m.latency, m.ledger, m.ledgerErr, m.swept, m.unauthenticated,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// watchKeys exports the state of the key ring: versions held, the sealing
// version, the age of the last good refresh and the failed refreshes.
func (m *metrics) watchKeys(r *keys.Refresher) {
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sealer_key_versions",
			Help: "Key versions in the ring (each may open).",
		}, func() float64 {
			if ring := r.Ring(); ring != nil {
				return float64(len(ring.Versions()))
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sealer_key_sealing_version",
			Help: "The key version that seals (0 before the first load).",
		}, func() float64 {
			if ring := r.Ring(); ring != nil {
				return float64(ring.SealingVersion())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sealer_key_refresh_age_seconds",
			Help: "Seconds since the key ring was last loaded successfully (-1 before the first load).",
		}, func() float64 {
			if t := r.LastGood(); !t.IsZero() {
				return time.Since(t).Seconds()
			}
			return -1
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sealer_key_refresh_errors_total",
			Help: "Failed loads of the key ring.",
		}, func() float64 { return float64(r.Errors()) }),
	)
}

// callTimer times one call of a method.
type callTimer struct {
	m      *metrics
	method string
	start  time.Time
}

// start times one call; done records its outcome.
func (m *metrics) start(method string) callTimer {
	return callTimer{m, method, time.Now()}
}

// done records the outcome of the call. The series of each method and
// reason are looked up once, then kept: WithLabelValues hashes and checks
// its labels on every call.
func (c callTimer) done(reason string) {
	type key struct{ method, reason string }
	lat, ok := c.m.series.Load(key{c.method, ""})
	if !ok {
		lat, _ = c.m.series.LoadOrStore(key{c.method, ""}, c.m.latency.WithLabelValues(c.method))
	}
	lat.(prometheus.Observer).Observe(time.Since(c.start).Seconds())
	n, ok := c.m.series.Load(key{c.method, reason})
	if !ok {
		n, _ = c.m.series.LoadOrStore(key{c.method, reason}, c.m.calls.WithLabelValues(c.method, reason))
	}
	n.(prometheus.Counter).Inc()
}
