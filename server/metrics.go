package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
	}
	m.registry.MustRegister(m.calls, m.latency, m.ledger, m.ledgerErr, m.swept,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// start times one call; the returned function records its outcome.
func (m *metrics) start(method string) func(reason string) {
	t := time.Now()
	return func(reason string) {
		m.latency.WithLabelValues(method).Observe(time.Since(t).Seconds())
		m.calls.WithLabelValues(method, reason).Inc()
	}
}
