package server

import "testing"

// TestTracingWanted: tracing is off unless the OTEL_* variables ask for it,
// and an exporter the sealer does not ship is refused, not ignored.
func TestTracingWanted(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		on, err bool
	}{
		{map[string]string{}, false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, true, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, false, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, false, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
	} {
		for _, name := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
			t.Setenv(name, tc.env[name])
		}
		on, err := tracingWanted()
		if on != tc.on || (err != nil) != tc.err {
			t.Errorf("%v: on %v, err %v; want on %v, error %v", tc.env, on, err, tc.on, tc.err)
		}
	}
}
