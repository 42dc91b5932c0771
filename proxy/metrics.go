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
	outcomes *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inflight prometheus.Gauge
	buffered *prometheus.GaugeVec
	cut      prometheus.Counter
	spec     *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_proxy_requests_total",
			Help: "Requests by MCP method (tools/call, prompts/get, resources/read, other) and outcome (passed, forwarded, unavailable, seal_failed, flow_ended, replayed, in_progress, replay_failed, and answer_overloaded: an answer dropped for want of room in --max-buffered-bytes), or refused by why (overloaded_concurrency and overloaded_buffer answer 503, body_timeout 408).",
		}, []string{"method", "outcome"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_proxy_sealer_calls_total",
			Help: "Seal, Open and Record calls to the sealer by outcome reason (OK or the sealer's reason).",
		}, []string{"op", "reason"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealer_proxy_outcomes_total",
			Help: "Recorded outcomes by MCP method and result: recorded, none (the client got no answer from the upstream), too_large, record_failed (logged; retries of the state are refused), replayed (a retry answered without the upstream), in_progress (a retry while the call still ran, answered retryable), unreadable.",
		}, []string{"method", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sealer_proxy_sealer_call_duration_seconds",
			Help:    "Time spent in Seal, Open and Record calls to the sealer.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 12),
		}, []string{"op"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sealer_proxy_requests_in_flight",
			Help: "Requests being served (bounded by --max-concurrent-requests).",
		}),
		buffered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sealer_proxy_buffered_bytes",
			Help: "Bytes the proxy holds, by kind: request (bodies read, and the copies forwarded) and response (answers read to seal a state, SSE events, answers kept to be recorded); their sum is bounded by --max-buffered-bytes.",
		}, []string{"kind"}),
		cut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sealer_proxy_write_timeouts_total",
			Help: "Clients cut off for reading an answer or an SSE event more slowly than --write-timeout allows.",
		}),
	}
	m.spec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sealer_proxy_spec_violations_total",
		Help: "Upstream answers that broke an MRTR server rule (input_required_method, nothing_asked, input_request_method, missing_capability), by action: refused (replaced by a JSON-RPC error) or reported (--spec-gate report: forwarded).",
	}, []string{"rule", "action"})
	m.registry.MustRegister(m.requests, m.calls, m.outcomes, m.latency, m.inflight, m.buffered, m.cut, m.spec,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// bufferGauges are the gauges of sealer_proxy_buffered_bytes, by kind.
func (m *metrics) bufferGauges() [kinds]prometheus.Gauge {
	var g [kinds]prometheus.Gauge
	for k := range kinds {
		g[k] = m.buffered.WithLabelValues(kindNames[k])
	}
	return g
}

func (m *metrics) request(method, outcome string) { m.requests.WithLabelValues(method, outcome).Inc() }

func (m *metrics) outcome(method, result string) { m.outcomes.WithLabelValues(method, result).Inc() }

func (m *metrics) sealerCall(op, reason string, took time.Duration) {
	m.calls.WithLabelValues(op, reason).Inc()
	m.latency.WithLabelValues(op).Observe(took.Seconds())
}

// Metrics serves the proxy's metrics in the Prometheus text format.
func (p *Proxy) Metrics() http.Handler {
	return promhttp.HandlerFor(p.metrics.registry, promhttp.HandlerOpts{})
}
