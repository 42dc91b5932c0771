package server

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcp-sealer/sealer/internal/version"
	"github.com/mcp-sealer/sealer/keys"
)

// metrics are the service's Prometheus metrics. Labels hold tenant names
// (bounded by the tenants file), gRPC service and method names and outcome
// reasons only: never a principal, token, state or payload.
type metrics struct {
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

func newMetrics(ledgerTimeout time.Duration) *metrics {
	m := &metrics{
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
			Help: "Recorded outcomes by tenant and result: recorded, none, too_large, refused, record_failed (Record); replayed, in_progress, unreadable (retries).",
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

// gauge registers a gauge read from f at every scrape.
func (m *metrics) gauge(name, help string, f func() float64) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// seconds is t as Unix seconds, 0 for the zero time.
func seconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// watchKeys exports the state of the key ring: versions held, the sealing
// version, when it last loaded and the failed loads.
func (m *metrics) watchKeys(r *keys.Refresher) {
	m.gauge("sealer_key_versions", "Key versions in the ring (each may open).", func() float64 {
		if ring := r.Ring(); ring != nil {
			return float64(len(ring.Versions()))
		}
		return 0
	})
	m.gauge("sealer_key_sealing_version", "The key version that seals (0 before the first load).", func() float64 {
		if ring := r.Ring(); ring != nil {
			return float64(ring.SealingVersion())
		}
		return 0
	})
	m.gauge("sealer_key_refresh_last_success_timestamp_seconds",
		"Unix time of the last successful load of the key ring (0 before the first: time() minus it is then huge).",
		func() float64 { return seconds(r.LastGood()) })
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sealer_key_refresh_errors_total",
		Help: "Failed loads of the key ring.",
	}, func() float64 { return float64(r.Errors()) }))
}

// zero creates the counters' series at 0 before their first event, so that
// a rate or an alert on them has a series from the start: the refusals of
// both transports, and the reloads of what is configured.
func (m *metrics) zero(tenants, tls bool) {
	m.unauthenticated.WithLabelValues("grpc")
	m.unauthenticated.WithLabelValues("rest")
	for what, on := range map[string]bool{"tenants": tenants, "tls": tls} {
		if on {
			m.reloads.WithLabelValues(what, "ok")
			m.reloads.WithLabelValues(what, "error")
		}
	}
}

// reloaded counts a reload of what (tenants, tls).
func (m *metrics) reloaded(what string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reloads.WithLabelValues(what, result).Inc()
}

// callTimer times one call of a method.
type callTimer struct {
	m              *metrics
	tenant, method string
	start          time.Time
}

// start times one call of a tenant; done records its outcome.
func (m *metrics) start(tenant, method string) callTimer {
	m.inFlight.Inc()
	return callTimer{m, tenant, method, time.Now()}
}

// done records the outcome of the call. The series of each tenant, method
// and reason are looked up once, then kept: WithLabelValues hashes and
// checks its labels on every call.
func (c callTimer) done(reason string) {
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
