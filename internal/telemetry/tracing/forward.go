package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// forwardQueue bounds the exports waiting in a Forwarder: a plugin's two
// spans take about a kilobyte, so a full queue is about a megabyte.
const forwardQueue = 1024

// ErrForwardQueueFull: the collector is not keeping up (or not there), and
// the spans were dropped rather than held without bound.
var ErrForwardQueueFull = errors.New("the queue of spans to forward is full")

// errForwarderStopped: the process is stopping.
var errForwarderStopped = errors.New("the span forwarder is stopped")

// Forwarder exports spans another process recorded, already in OTLP form
// (the CNI plugin's, which it hands to the agent), on the exporter's
// connection to the collector: the same endpoint, TLS and headers as this
// process's own spans. Forward never blocks; what is queued goes out in
// the background, what is queued together in one export.
type Forwarder struct {
	client otlptrace.Client
	queue  chan []*tracepb.ResourceSpans
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newForwarder(client otlptrace.Client) *Forwarder {
	f := &Forwarder{client: client, queue: make(chan []*tracepb.ResourceSpans, forwardQueue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f
}

// Forward queues spans for export, or returns an error when they were
// dropped.
func (f *Forwarder) Forward(spans []*tracepb.ResourceSpans) error {
	select {
	case <-f.stop:
		return errForwarderStopped
	default:
	}
	select {
	case f.queue <- spans:
		return nil
	default:
		return ErrForwardQueueFull
	}
}

// run exports what is queued until close; an export's failure is reported
// where the SDK reports its own (otel.Handle) and costs those spans.
func (f *Forwarder) run() {
	defer close(f.done)
	for {
		select {
		case spans := <-f.queue:
			f.upload(context.Background(), f.take(spans))
		case <-f.stop:
			return
		}
	}
}

// take adds what else is queued to first, without waiting.
func (f *Forwarder) take(first []*tracepb.ResourceSpans) []*tracepb.ResourceSpans {
	batch := first
	for range forwardQueue {
		select {
		case more := <-f.queue:
			batch = append(batch, more...)
		default:
			return batch
		}
	}
	return batch
}

func (f *Forwarder) upload(ctx context.Context, batch []*tracepb.ResourceSpans) {
	// The client bounds the export (and its retries) by the config's
	// timeout.
	if err := f.client.UploadTraces(ctx, batch); err != nil {
		otel.Handle(fmt.Errorf("forward the CNI plugin's spans (%d resources): %w", len(batch), err))
	}
}

// close stops taking spans and exports what is queued, within ctx.
func (f *Forwarder) close(ctx context.Context) error {
	f.once.Do(func() { close(f.stop) })
	select {
	case <-f.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case spans := <-f.queue:
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := f.client.UploadTraces(ctx, f.take(spans)); err != nil {
			return fmt.Errorf("forward the CNI plugin's spans: %w", err)
		}
	default:
	}
	return nil
}
