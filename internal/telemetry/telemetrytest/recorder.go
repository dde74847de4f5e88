// Package telemetrytest tells which Prometheus series a piece of code
// exports without driving it: a Recorder stands in for the meter, notes
// every instrument created on it, and Exported replays them through the
// same exporter the binaries use, so documentation, dashboards and alert
// rules can be checked against the names the code really registers.
package telemetrytest

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/allotnet/allot/internal/telemetry"
)

// Kind is how an instrument aggregates, which decides its Prometheus type.
type Kind int

// Instrument kinds.
const (
	Counter Kind = iota
	UpDownCounter
	Histogram
	Gauge
)

// Instrument is one instrument created on a Recorder.
type Instrument struct {
	Kind        Kind
	Name        string
	Unit        string
	Description string
}

// Recorder is a metric.Meter and metric.MeterProvider that records the
// instruments created on it; they record nothing and callbacks never run.
type Recorder struct {
	metric.Meter
	mu   sync.Mutex
	seen []Instrument
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{Meter: noop.NewMeterProvider().Meter("recorder")} }

var _ metric.Meter = (*Recorder)(nil)

// MeterProvider returns a provider whose every meter is r.
func (r *Recorder) MeterProvider() metric.MeterProvider { return provider{r: r} }

type provider struct {
	noop.MeterProvider
	r *Recorder
}

func (p provider) Meter(string, ...metric.MeterOption) metric.Meter { return p.r }

// Instruments returns what was created so far.
func (r *Recorder) Instruments() []Instrument {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Instrument(nil), r.seen...)
}

func (r *Recorder) note(k Kind, name, unit, desc string) {
	r.mu.Lock()
	r.seen = append(r.seen, Instrument{Kind: k, Name: name, Unit: unit, Description: desc})
	r.mu.Unlock()
}

func (r *Recorder) Int64Counter(n string, o ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c := metric.NewInt64CounterConfig(o...)
	r.note(Counter, n, c.Unit(), c.Description())
	return r.Meter.Int64Counter(n, o...)
}

func (r *Recorder) Int64UpDownCounter(n string, o ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	c := metric.NewInt64UpDownCounterConfig(o...)
	r.note(UpDownCounter, n, c.Unit(), c.Description())
	return r.Meter.Int64UpDownCounter(n, o...)
}

func (r *Recorder) Int64Histogram(n string, o ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	c := metric.NewInt64HistogramConfig(o...)
	r.note(Histogram, n, c.Unit(), c.Description())
	return r.Meter.Int64Histogram(n, o...)
}

func (r *Recorder) Int64Gauge(n string, o ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	c := metric.NewInt64GaugeConfig(o...)
	r.note(Gauge, n, c.Unit(), c.Description())
	return r.Meter.Int64Gauge(n, o...)
}

func (r *Recorder) Int64ObservableCounter(n string, o ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	c := metric.NewInt64ObservableCounterConfig(o...)
	r.note(Counter, n, c.Unit(), c.Description())
	return r.Meter.Int64ObservableCounter(n, o...)
}

func (r *Recorder) Int64ObservableUpDownCounter(n string, o ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	c := metric.NewInt64ObservableUpDownCounterConfig(o...)
	r.note(UpDownCounter, n, c.Unit(), c.Description())
	return r.Meter.Int64ObservableUpDownCounter(n, o...)
}

func (r *Recorder) Int64ObservableGauge(n string, o ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	c := metric.NewInt64ObservableGaugeConfig(o...)
	r.note(Gauge, n, c.Unit(), c.Description())
	return r.Meter.Int64ObservableGauge(n, o...)
}

func (r *Recorder) Float64Counter(n string, o ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	c := metric.NewFloat64CounterConfig(o...)
	r.note(Counter, n, c.Unit(), c.Description())
	return r.Meter.Float64Counter(n, o...)
}

func (r *Recorder) Float64UpDownCounter(n string, o ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	c := metric.NewFloat64UpDownCounterConfig(o...)
	r.note(UpDownCounter, n, c.Unit(), c.Description())
	return r.Meter.Float64UpDownCounter(n, o...)
}

func (r *Recorder) Float64Histogram(n string, o ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	c := metric.NewFloat64HistogramConfig(o...)
	r.note(Histogram, n, c.Unit(), c.Description())
	return r.Meter.Float64Histogram(n, o...)
}

func (r *Recorder) Float64Gauge(n string, o ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	c := metric.NewFloat64GaugeConfig(o...)
	r.note(Gauge, n, c.Unit(), c.Description())
	return r.Meter.Float64Gauge(n, o...)
}

func (r *Recorder) Float64ObservableCounter(n string, o ...metric.Float64ObservableCounterOption) (metric.Float64ObservableCounter, error) {
	c := metric.NewFloat64ObservableCounterConfig(o...)
	r.note(Counter, n, c.Unit(), c.Description())
	return r.Meter.Float64ObservableCounter(n, o...)
}

func (r *Recorder) Float64ObservableUpDownCounter(n string, o ...metric.Float64ObservableUpDownCounterOption) (metric.Float64ObservableUpDownCounter, error) {
	c := metric.NewFloat64ObservableUpDownCounterConfig(o...)
	r.note(UpDownCounter, n, c.Unit(), c.Description())
	return r.Meter.Float64ObservableUpDownCounter(n, o...)
}

func (r *Recorder) Float64ObservableGauge(n string, o ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	c := metric.NewFloat64ObservableGaugeConfig(o...)
	r.note(Gauge, n, c.Unit(), c.Description())
	return r.Meter.Float64ObservableGauge(n, o...)
}

// Family is one exported Prometheus metric family.
type Family struct {
	// Name is the family's name (counters end in _total).
	Name string
	// Type is counter, gauge or histogram.
	Type string
	Help string
	// Series are the sample names (a histogram's _bucket, _sum, _count).
	Series []string
}

// Exported replays instruments through a fresh Prometheus exporter (one
// sample each) and returns the families it serves, by name.
func Exported(ins []Instrument) (map[string]Family, error) {
	m, err := telemetry.NewMetrics()
	if err != nil {
		return nil, err
	}
	defer func() { _ = m.Shutdown(context.Background()) }()
	meter := m.Meter("replay")
	ctx := context.Background()
	for _, in := range ins {
		var err error
		switch in.Kind {
		case Counter:
			var c metric.Float64Counter
			if c, err = meter.Float64Counter(in.Name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description)); err == nil {
				c.Add(ctx, 1)
			}
		case UpDownCounter:
			var c metric.Float64UpDownCounter
			if c, err = meter.Float64UpDownCounter(in.Name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description)); err == nil {
				c.Add(ctx, 1)
			}
		case Histogram:
			var h metric.Float64Histogram
			if h, err = meter.Float64Histogram(in.Name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description)); err == nil {
				h.Record(ctx, 1)
			}
		case Gauge:
			var g metric.Float64Gauge
			if g, err = meter.Float64Gauge(in.Name, metric.WithUnit(in.Unit), metric.WithDescription(in.Description)); err == nil {
				g.Record(ctx, 1)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", in.Name, err)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return ParseText(rec.Body.String()), nil
}

// ParseText reads the Prometheus text format's families: names, types,
// help and the sample names under each.
func ParseText(text string) map[string]Family {
	out := map[string]Family{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			f := out[name]
			f.Name, f.Help = name, help
			out[name], cur = f, name
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			f := out[name]
			f.Name, f.Type = name, typ
			out[name], cur = f, name
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			series := line
			if i := strings.IndexAny(line, "{ "); i >= 0 {
				series = line[:i]
			}
			f := out[cur]
			if !contains(f.Series, series) {
				f.Series = append(f.Series, series)
			}
			out[cur] = f
		}
	}
	for k, f := range out {
		sort.Strings(f.Series)
		out[k] = f
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
