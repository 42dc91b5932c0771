package proxy

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the proxy's Prometheus metrics. Labels hold method names,
// outcomes and reasons only: never a principal, state or payload.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inflight prometheus.Gauge
	buffered prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_proxy_requests_total",
			Help: "Requests by MCP method (tools/call, prompts/get, resources/read, other) and outcome (passed, forwarded, unavailable, seal_failed), or refused by why (overloaded_concurrency and overloaded_buffer answer 503, body_timeout 408).",
		}, []string{"method", "outcome"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_proxy_sealer_calls_total",
			Help: "Seal and Open calls to the sealer by outcome reason (OK or the sealer's reason).",
		}, []string{"op", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sealer_proxy_sealer_call_duration_seconds",
			Help:    "Time spent in Seal and Open calls to the sealer.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 12),
		}, []string{"op"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sealer_proxy_requests_in_flight",
			Help: "Requests being served (bounded by --max-concurrent-requests).",
		}),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sealer_proxy_buffered_request_bytes",
			Help: "Bytes reserved for request bodies being read or held (bounded by --max-buffered-bytes).",
		}),
	}
	m.registry.MustRegister(m.requests, m.calls, m.latency, m.inflight, m.buffered,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) request(method, outcome string) { m.requests.WithLabelValues(method, outcome).Inc() }

func (m *metrics) sealerCall(op, reason string, took time.Duration) {
	m.calls.WithLabelValues(op, reason).Inc()
	m.latency.WithLabelValues(op).Observe(took.Seconds())
}

// Metrics serves the proxy's metrics in the Prometheus text format.
func (p *Proxy) Metrics() http.Handler {
	return promhttp.HandlerFor(p.metrics.registry, promhttp.HandlerOpts{})
}
