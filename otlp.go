package main

// This file holds the exporter of corral's spans: OTLP over HTTP, JSON
// encoded (the protobuf JSON mapping: IDs in hex, times as strings of
// nanoseconds), posted in batches to the configured endpoint. A span is
// queued without waiting; when the queue is full, or an export fails, spans
// are dropped and counted (corral_trace_spans_dropped_total), so that a
// slow, down or failing endpoint never slows a call.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// spanExporter batches spans and posts them to an OTLP/HTTP endpoint. Its
// methods are safe for concurrent use.
type spanExporter struct {
	cfg    TracingConfig // resolved
	log    *slog.Logger
	client *http.Client
	queue  chan *span // bounded by cfg.MaxQueue; never waited on by add

	exported    atomic.Int64 // spans the endpoint took
	dropped     atomic.Int64 // spans that found the queue full
	failed      atomic.Int64 // spans of exports that failed
	lastWarning atomic.Int64 // when a failure was last logged (Unix nanoseconds)

	stop     chan struct{} // closed by close
	stopOnce sync.Once
	done     chan struct{} // closed when run returns
	// ctx is every export's: close ends it finalExportBound after it is
	// called, so that an export under way to a slow endpoint does not hold
	// corral's shutdown for the whole timeout.
	ctx    context.Context
	cancel context.CancelFunc

	buf []byte // the last export's body, reused by the next; run's alone
}

// finalExportBound bounds the last export, at close: a down endpoint does
// not hold corral's shutdown for the whole export timeout.
const finalExportBound = time.Second

// newSpanExporter returns the exporter of cfg, a resolved config with an
// endpoint, running until close.
func newSpanExporter(cfg TracingConfig, log *slog.Logger) *spanExporter {
	e := &spanExporter{cfg: cfg, log: log, queue: make(chan *span, cfg.MaxQueue),
		client: &http.Client{Timeout: cfg.Timeout.D()},
		stop:   make(chan struct{}), done: make(chan struct{})}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.run()
	return e
}

// add queues sp to be exported, or drops and counts it if the queue is
// full. It never blocks.
func (e *spanExporter) add(sp *span) {
	select {
	case e.queue <- sp:
	default:
		e.dropped.Add(1)
	}
}

// close stops the exporter once the spans queued now are exported (within
// finalExportBound). It may be called more than once; it blocks until the
// exporter has stopped.
func (e *spanExporter) close() {
	e.stopOnce.Do(func() {
		close(e.stop)
		cut := time.AfterFunc(finalExportBound, e.cancel)
		<-e.done
		cut.Stop()
		e.cancel()
	})
	<-e.done
}

// run collects batches from the queue and exports each when it holds
// MaxBatch spans or its first span has waited Interval, until close.
func (e *spanExporter) run() {
	defer close(e.done)
	batch := make([]*span, 0, e.cfg.MaxBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case sp := <-e.queue:
			if len(batch) == 0 {
				timer.Reset(e.cfg.Interval.D())
			}
			batch = append(batch, sp)
			if len(batch) < e.cfg.MaxBatch {
				continue
			}
		case <-timer.C:
		case <-e.stop:
			timer.Stop()
			for len(e.queue) > 0 && len(batch) < e.cfg.MaxBatch {
				batch = append(batch, <-e.queue)
			}
			e.dropped.Add(int64(len(e.queue))) // past one batch: not waited for
			e.export(e.ctx, batch)
			return
		}
		timer.Stop()
		if len(batch) > 0 {
			e.export(e.ctx, batch)
			clear(batch)
			batch = batch[:0]
		}
	}
}

// export posts batch and counts its spans as exported or failed. A failure
// is logged at most once a minute, with the count so far.
func (e *spanExporter) export(ctx context.Context, batch []*span) {
	if len(batch) == 0 {
		return
	}
	e.buf = appendOTLP(e.buf[:0], e.cfg.ServiceName, batch)
	err := e.post(ctx, e.buf)
	if err == nil {
		e.exported.Add(int64(len(batch)))
		return
	}
	n := e.failed.Add(int64(len(batch)))
	now := time.Now().UnixNano()
	if last := e.lastWarning.Load(); now-last > int64(time.Minute) && e.lastWarning.CompareAndSwap(last, now) {
		e.log.Warn("cannot export spans; they are dropped (corral_trace_spans_dropped_total counts them), and calls go on", "endpoint", maskURL(e.cfg.Endpoint), "err", err, "spansDropped", n,
			"fix", "check that an OTLP/HTTP receiver listens at tracing.endpoint; corral says so again at most once a minute")
	}
}

// post sends one export request and returns why it failed, if it did.
func (e *spanExporter) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "corral/"+version)
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return bareError(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection is reused
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %s", statusText(resp.StatusCode))
	}
	return nil
}

// counts returns the spans exported so far, and those dropped: that found
// the queue full, and of exports that failed.
func (e *spanExporter) counts() (exported, queueFull, exportFailed int64) {
	return e.exported.Load(), e.dropped.Load(), e.failed.Load()
}

// appendOTLP appends the ExportTraceServiceRequest that carries batch, in
// OTLP's JSON encoding, for service.
func appendOTLP(b []byte, service string, batch []*span) []byte {
	b = append(b, `{"resourceSpans":[{"resource":{"attributes":[`...)
	b = appendOTLPAttr(b, spanAttr{key: "service.name", str: service})
	b = append(b, ',')
	b = appendOTLPAttr(b, spanAttr{key: "service.version", str: version})
	b = append(b, `]},"scopeSpans":[{"scope":{"name":"corral","version":`...)
	b = appendJSONString(b, version)
	b = append(b, `},"spans":[`...)
	for i, sp := range batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = sp.appendOTLP(b)
	}
	return append(b, `]}]}]}`...)
}

// appendEvent appends the members of ev, an event.
func appendEvent(b []byte, ev spanEvent) []byte {
	b = append(b, `"timeUnixNano":"`...)
	b = strconv.AppendInt(b, ev.at.UnixNano(), 10)
	b = append(b, `","name":`...)
	b = appendJSONString(b, ev.name)
	b = append(b, `,"attributes":[`...)
	for i, a := range ev.attrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendOTLPAttr(b, a)
	}
	return append(b, ']')
}

// appendUnixNano appends ,"key":"NANOS": OTLP's JSON encodes its 64-bit
// integers as strings.
func appendUnixNano(b []byte, key string, t time.Time) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":"`...)
	b = strconv.AppendInt(b, t.UnixNano(), 10)
	return append(b, '"')
}

// appendOTLPAttr appends a KeyValue.
func appendOTLPAttr(b []byte, a spanAttr) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, a.key)
	if a.isN {
		b = append(b, `,"value":{"intValue":"`...)
		b = strconv.AppendInt(b, a.num, 10)
		return append(b, `"}}`...)
	}
	b = append(b, `,"value":{"stringValue":`...)
	b = appendJSONString(b, a.str)
	return append(b, "}}"...)
}
