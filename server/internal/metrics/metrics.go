// Package metrics holds the sealer's Prometheus metrics (docs/OPERATIONS.md
// lists them) behind methods named for what happened: a call started and
// ended, a ledger consume took so long, a reload failed. Labels hold tenant
// names (bounded by the tenants file), gRPC service and method names and
// outcome reasons only: never a principal, token, state or payload.
package metrics

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-sealer/sealer/internal/version"
	"github.com/mcp-sealer/sealer/keys"
)

// A Set is the metrics of one sealer, in a registry of its own.
type Set struct {
	registry  *prometheus.Registry
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	inFlight  prometheus.Gauge
	ledger    *prometheus.HistogramVec
	ledgerErr prometheus.Counter
	swept     prometheus.Counter
	outcomes  *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	// unauthenticated counts refused callers; they make no audit event.
	unauthenticated *prometheus.CounterVec
	series          sync.Map // the series of calls and latency in use, by tenant, method and reason
}

// ledgerBuckets are the ledger latency buckets: 100 µs doubling up to past
// the ledger timeout, so that calls cut short by it land in a finite bucket.
func ledgerBuckets(timeout time.Duration) []float64 {
	b := prometheus.ExponentialBuckets(100e-6, 2, 12) // 0.1 ms to 205 ms
	for last := b[len(b)-1]; last < 2*timeout.Seconds(); last *= 2 {
		b = append(b, last*2)
	}
	if t := timeout.Seconds(); !slices.Contains(b, t) {
		b = append(b, t)
		slices.Sort(b)
	}
	return b
}

// New returns the metrics of a sealer whose ledger calls time out after
// ledgerTimeout (the consume histogram's buckets reach past it).
func New(ledgerTimeout time.Duration) *Set {
	m := &Set{
		registry: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_calls_total",
			Help: "Seal and Open calls by tenant, gRPC service and method, and outcome reason (OK or an ErrorInfo reason).",
		}, []string{"tenant", "service", "method", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sealer_call_duration_seconds",
			Help:    "Time spent in Seal and Open, by tenant, gRPC service and method.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2.5, 14),
		}, []string{"tenant", "service", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sealer_calls_in_flight",
			Help: "Seal and Open calls being served now, past authentication.",
		}),
		ledger: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sealer_ledger_consume_duration_seconds",
			Help:    "Time spent consuming one-time states in the ledger, by outcome; the buckets reach past the ledger timeout.",
			Buckets: ledgerBuckets(ledgerTimeout),
		}, []string{"reason"}),
		ledgerErr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sealer_ledger_errors_total",
			Help: "Ledger calls that failed (LEDGER_UNAVAILABLE): errors, timeouts, unexpected replies.",
		}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_outcomes_total",
			Help: "Recorded outcomes by tenant and result: recorded, none, too_large, refused, record_failed (Record); replayed, in_progress, unreadable, conflict (retries).",
		}, []string{"tenant", "result"}),
		swept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sealer_ledger_swept_total",
			Help: "Expired ledger entries deleted.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_reloads_total",
			Help: "Reloads of the tenants file (SIGHUP) and of the TLS files (on change), by what and result (ok, error).",
		}, []string{"what", "result"}),
		unauthenticated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_unauthenticated_total",
			Help: "Calls refused before their body was read, for want of valid credentials, by transport (grpc, rest).",
		}, []string{"transport"}),
	}
	v := version.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sealer_build_info",
		Help:        "Always 1; the labels say which build runs.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.Revision, "goversion": v.GoVersion},
	})
	build.Set(1)
	m.registry.MustRegister(m.calls, m.latency, m.inFlight, m.ledger, m.ledgerErr, m.swept, m.outcomes, m.reloads, m.unauthenticated, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Set) Handler() http.Handler { return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}) }

// Registerer takes the collectors of other parts of the sealer (the audit
// file's writer).
func (m *Set) Registerer() prometheus.Registerer { return m.registry }

// Gatherer reads the metrics as a scrape would.
func (m *Set) Gatherer() prometheus.Gatherer { return m.registry }

// Gauge registers a gauge read from f at every scrape.
func (m *Set) Gauge(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// TimeGauge registers a gauge of the time f returns at every scrape, as
// Unix seconds (0 for the zero time).
func (m *Set) TimeGauge(name, help string, f func() time.Time) {
	m.Gauge(name, help, func() float64 {
		if t := f(); !t.IsZero() {
			return float64(t.UnixNano()) / 1e9
		}
		return 0
	})
}

// WatchKeys exports the state of the key ring: versions held, the sealing
// version, when it last loaded and the failed loads.
func (m *Set) WatchKeys(r *keys.Refresher) {
	m.Gauge("sealer_key_versions", "Key versions in the ring (each may open).", func() float64 {
		if ring := r.Ring(); ring != nil {
			return float64(len(ring.Versions()))
		}
		return 0
	})
	m.Gauge("sealer_key_sealing_version", "The key version that seals (0 before the first load).", func() float64 {
		if ring := r.Ring(); ring != nil {
			return float64(ring.SealingVersion())
		}
		return 0
	})
	m.TimeGauge("sealer_key_refresh_last_success_timestamp_seconds",
		"Unix time of the last successful load of the key ring (0 before the first: time() minus it is then huge).", r.LastGood)
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sealer_key_refresh_errors_total",
		Help: "Failed loads of the key ring.",
	}, func() float64 { return float64(r.Errors()) }))
}

// SeriesFromZero creates the counters' series at 0 before their first
// event, so that a rate or an alert on them has a series from the start:
// the refusals of both transports, and the reloads of what is configured
// (the tenants file, the TLS files).
func (m *Set) SeriesFromZero(tenants, tls bool) {
	m.unauthenticated.WithLabelValues("grpc")
	m.unauthenticated.WithLabelValues("rest")
	for what, on := range map[string]bool{"tenants": tenants, "tls": tls} {
		if on {
			m.reloads.WithLabelValues(what, "ok")
			m.reloads.WithLabelValues(what, "error")
		}
	}
}

// Reloaded counts a reload of what (tenants, tls).
func (m *Set) Reloaded(what string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reloads.WithLabelValues(what, result).Inc()
}

// A Call times one call of a method.
type Call struct {
	m              *Set
	tenant, method string
	start          time.Time
}

// Start times one call of a tenant; Done records its outcome.
func (m *Set) Start(tenant, method string) Call {
	m.inFlight.Inc()
	return Call{m, tenant, method, time.Now()}
}

// Done records the outcome of the call. The series of each tenant, method
// and reason are looked up once, then kept: WithLabelValues hashes and
// checks its labels on every call.
func (c Call) Done(reason string) {
	c.m.inFlight.Dec()
	type key struct{ tenant, method, reason string }
	lat, ok := c.m.series.Load(key{c.tenant, c.method, ""})
	if !ok {
		service, method := splitMethod(c.method)
		lat, _ = c.m.series.LoadOrStore(key{c.tenant, c.method, ""}, c.m.latency.WithLabelValues(c.tenant, service, method))
	}
	lat.(prometheus.Observer).Observe(time.Since(c.start).Seconds())
	n, ok := c.m.series.Load(key{c.tenant, c.method, reason})
	if !ok {
		service, method := splitMethod(c.method)
		n, _ = c.m.series.LoadOrStore(key{c.tenant, c.method, reason}, c.m.calls.WithLabelValues(c.tenant, service, method, reason))
	}
	n.(prometheus.Counter).Inc()
}

// splitMethod splits "/sealer.v1.Sealer/Seal" into its service and method.
func splitMethod(full string) (service, method string) {
	service, method, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return "", full
	}
	return service, method
}

// Unauthenticated counts a call refused for want of valid credentials, on
// transport (grpc, rest).
func (m *Set) Unauthenticated(transport string) {
	m.unauthenticated.WithLabelValues(transport).Inc()
}

// Outcome counts what became of a recorded outcome (recorded, none,
// too_large, refused, record_failed; replayed, in_progress, unreadable,
// conflict).
func (m *Set) Outcome(tenant, result string) {
	m.outcomes.WithLabelValues(tenant, result).Inc()
}

// LedgerCall records how long a consume or an advance took, by its
// outcome's reason.
func (m *Set) LedgerCall(reason string, took time.Duration) {
	m.ledger.WithLabelValues(reason).Observe(took.Seconds())
}

// LedgerFailed counts a ledger call that failed (LEDGER_UNAVAILABLE).
func (m *Set) LedgerFailed() { m.ledgerErr.Inc() }

// Swept counts expired ledger entries deleted.
func (m *Set) Swept(n int) { m.swept.Add(float64(n)) }
