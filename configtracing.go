package main

// This file holds the settings of tracing (tracing.go): the top-level
// "tracing" object, where spans are exported, how many are sampled, and the
// bounds of the exporter's queue.

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// TracingConfig is where corral's spans go. Its zero value traces nothing:
// a request's trace context passes through corral as the client sent it.
type TracingConfig struct {
	// Endpoint is the OTLP/HTTP traces URL spans are posted to, JSON
	// encoded: an OpenTelemetry Collector's is
	// http://127.0.0.1:4318/v1/traces. If empty, tracing is off.
	Endpoint string `json:"endpoint,omitempty"`
	// SampleRatio is the share of traces corral starts that it records,
	// from 0 to 1, decided by the trace ID. A request whose client sent a
	// trace context is recorded if the client's was (parent-based). If
	// nil, 1: every trace.
	SampleRatio *float64 `json:"sampleRatio,omitempty"`
	// ServiceName is the service.name of corral's spans. If empty,
	// "corral".
	ServiceName string `json:"serviceName,omitempty"`
	// Headers are added to each export request (an API key of a hosted
	// backend); ${NAME} and ${file:PATH} are not expanded here. If nil,
	// none.
	Headers map[string]string `json:"headers,omitempty"`
	// MaxQueue bounds the spans waiting to be exported; a span that finds
	// the queue full is dropped and counted, never waited for. If zero,
	// 2048.
	MaxQueue int `json:"maxQueue,omitempty"`
	// MaxBatch is the most spans one export request carries. If zero, 512.
	MaxBatch int `json:"maxBatch,omitempty"`
	// Interval is how long a span waits, at most, for its batch to fill
	// before it is exported. If zero, 2s.
	Interval Duration `json:"interval,omitempty"`
	// Timeout bounds one export request. If zero, 10s.
	Timeout Duration `json:"timeout,omitempty"`
}

const (
	defaultTraceService  = "corral"
	defaultTraceQueue    = 2048
	defaultTraceBatch    = 512
	defaultTraceInterval = 2 * time.Second
	defaultTraceTimeout  = 10 * time.Second
)

// on reports whether t turns tracing on.
func (t TracingConfig) on() bool { return t.Endpoint != "" }

// resolved returns t with its defaults filled in; zero if tracing is off.
func (t TracingConfig) resolved() TracingConfig {
	if !t.on() {
		return TracingConfig{}
	}
	if t.SampleRatio == nil {
		one := 1.0
		t.SampleRatio = &one
	}
	t.ServiceName = firstSet(t.ServiceName, defaultTraceService)
	t.MaxQueue = firstSet(t.MaxQueue, defaultTraceQueue)
	t.MaxBatch = firstSet(t.MaxBatch, defaultTraceBatch)
	t.Interval = firstSet(t.Interval, Duration(defaultTraceInterval))
	t.Timeout = firstSet(t.Timeout, Duration(defaultTraceTimeout))
	return t
}

// validateTracing checks the "tracing" settings of c: an http or https
// URL, a ratio from 0 to 1, and bounds that are not negative.
func (p *parser) validateTracing(c *Config) {
	t := c.Tracing
	if !t.on() {
		if t.SampleRatio != nil || t.ServiceName != "" || t.Headers != nil || t.MaxQueue != 0 || t.MaxBatch != 0 || t.Interval != 0 || t.Timeout != 0 {
			p.errorf("", "tracing.endpoint", `is missing: the other tracing settings need somewhere to send spans; add "endpoint": "http://127.0.0.1:4318/v1/traces" (an OpenTelemetry Collector's OTLP/HTTP receiver), or remove the "tracing" object`)
		}
		return
	}
	if u, err := url.Parse(t.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.errorf("", "tracing.endpoint", "is %q, not an http or https URL; write the OTLP/HTTP traces URL, such as http://127.0.0.1:4318/v1/traces", t.Endpoint)
	}
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		p.errorf("", "tracing.sampleRatio", "is %v, outside 0 to 1; write the share of traces to record (1 records all, 0.1 one in ten), or remove the key for 1", *r)
	}
	for _, f := range []struct {
		key string
		n   int64
	}{{"maxQueue", int64(t.MaxQueue)}, {"maxBatch", int64(t.MaxBatch)}, {"interval", int64(t.Interval)}, {"timeout", int64(t.Timeout)}} {
		if f.n < 0 {
			p.errorf("", "tracing."+f.key, "must not be negative, got %s; remove the key for its default", tracingValue(f.key, f.n))
		}
	}
	for name := range t.Headers {
		if !validHeaderName(name) {
			p.errorf("", "tracing.headers", "has %q, not a valid HTTP header name; use letters, digits and hyphens", name)
		}
	}
}

// tracingValue shows a tracing setting's value as it was written.
func tracingValue(key string, n int64) string {
	if key == "interval" || key == "timeout" {
		return Duration(n).D().String()
	}
	return fmt.Sprint(n)
}

// UnmarshalJSON decodes the "tracing" object, refusing keys it does not
// know and values of the wrong type, with the key in the message.
func (t *TracingConfig) UnmarshalJSON(data []byte) error {
	return decodeStrict(data, `{"endpoint": "http://127.0.0.1:4318/v1/traces"}`, map[string]struct {
		ptr  any
		want string
	}{
		"endpoint":    {&t.Endpoint, "a string"},
		"sampleRatio": {&t.SampleRatio, "a number from 0 to 1"},
		"serviceName": {&t.ServiceName, "a string"},
		"headers":     {&t.Headers, "an object of strings"},
		"maxQueue":    {&t.MaxQueue, "an integer"},
		"maxBatch":    {&t.MaxBatch, "an integer"},
		"interval":    {&t.Interval, `a duration such as "2s"`},
		"timeout":     {&t.Timeout, `a duration such as "10s"`},
	})
}

// validHeaderName reports whether name is an HTTP header name: a token of
// RFC 9110's characters.
func validHeaderName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return name != ""
}
