// Package traceconf is allot's tracing configuration, read from the
// standard OpenTelemetry environment. It links nothing of OpenTelemetry, so
// the CNI plugin (one exec per pod) can read it without paying for the SDK
// when tracing is off; package tracing builds the SDK's exporter from it.
package traceconf

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TraceConfig is where and how spans are exported. main builds it from the
// standard OpenTelemetry environment (TraceConfigFromEnv) so allot is
// configured like any other instrumented program; nothing below main reads
// the environment. The zero value exports nothing.
type TraceConfig struct {
	// Endpoint is the OTLP/gRPC collector URL (http://host:4317 or
	// https://host:4317); empty turns tracing off.
	Endpoint string
	// Insecure sends spans without TLS (also implied by an http:// URL).
	Insecure bool
	// CAFile verifies the collector's certificate; empty means the
	// system's roots.
	CAFile string
	// Headers are sent with every export (often an API key: never logged).
	Headers map[string]string
	// Timeout bounds one export; zero means the exporter's 10 s.
	Timeout time.Duration
	// ServiceName is service.name; main defaults it to the binary's name.
	ServiceName string
	// Attributes are further resource attributes (OTEL_RESOURCE_ATTRIBUTES).
	Attributes map[string]string
	// Sampler is one of the OTEL_TRACES_SAMPLER names; empty means
	// parentbased_always_on, the SDK's default.
	Sampler string
	// SamplerArg is the ratio of the traceidratio samplers.
	SamplerArg float64
}

// Enabled reports whether spans are exported.
func (c TraceConfig) Enabled() bool { return c.Endpoint != "" }

var samplers = map[string]bool{
	"always_on": true, "always_off": true, "traceidratio": true,
	"parentbased_always_on": true, "parentbased_always_off": true, "parentbased_traceidratio": true,
}

// TraceConfigFromEnv reads the OpenTelemetry SDK environment through
// lookup (os.LookupEnv in main): OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_[TRACES_]{ENDPOINT,PROTOCOL,INSECURE,CERTIFICATE,
// HEADERS,TIMEOUT}, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER[_ARG]. With no endpoint set, tracing is off.
// service is service.name unless OTEL_SERVICE_NAME says otherwise.
func TraceConfigFromEnv(lookup func(string) (string, bool), service string) (TraceConfig, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	// The signal-specific variable wins over the general one.
	otlp := func(k string) string {
		if v := get("OTEL_EXPORTER_OTLP_TRACES_" + k); v != "" {
			return v
		}
		return get("OTEL_EXPORTER_OTLP_" + k)
	}
	c := TraceConfig{ServiceName: service}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return c, nil
	}
	switch exp := get("OTEL_TRACES_EXPORTER"); exp {
	case "", "otlp":
	case "none":
		return c, nil
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: allot exports traces with otlp (or none)", exp)
	}
	if p := otlp("PROTOCOL"); p != "" && p != "grpc" {
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: allot exports OTLP over grpc; set it to grpc (collectors listen on :4317)", p)
	}
	if err := c.setEndpoint(otlp("ENDPOINT")); err != nil {
		return c, err
	}
	if v := otlp("INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_INSECURE=%q: want true or false", v)
		}
		c.Insecure = c.Insecure || b
	}
	c.CAFile = otlp("CERTIFICATE")
	var err error
	if c.Headers, err = parsePairs("OTEL_EXPORTER_OTLP_HEADERS", otlp("HEADERS")); err != nil {
		return c, err
	}
	if v := otlp("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT=%q: want milliseconds", v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	if c.Attributes, err = parsePairs("OTEL_RESOURCE_ATTRIBUTES", get("OTEL_RESOURCE_ATTRIBUTES")); err != nil {
		return c, err
	}
	if v := get("OTEL_SERVICE_NAME"); v != "" {
		c.ServiceName = v
	} else if v := c.Attributes["service.name"]; v != "" {
		c.ServiceName = v
	}
	return c, c.setSampler(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
}

func (c *TraceConfig) setEndpoint(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT=%q: want a URL such as http://collector:4317", v)
	}
	c.Endpoint = v
	c.Insecure = u.Scheme == "http"
	return nil
}

func (c *TraceConfig) setSampler(name, arg string) error {
	if name == "" {
		return nil
	}
	if !samplers[name] {
		return fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want one of always_on, always_off, traceidratio, "+
			"parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
	}
	c.Sampler, c.SamplerArg = name, 1
	if arg == "" || !strings.HasSuffix(name, "traceidratio") {
		return nil
	}
	r, err := strconv.ParseFloat(arg, 64)
	if err != nil || r < 0 || r > 1 {
		return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio in [0, 1]", arg)
	}
	c.SamplerArg = r
	return nil
}

// parsePairs reads the W3C baggage-like list the OTel environment uses:
// key=value,key=value with URL-encoded values.
func parsePairs(name, s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for i, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			// Not quoted: a header may carry a credential.
			return nil, fmt.Errorf("%s: entry %d is not key=value", name, i+1)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: value of %q: %w", name, k, err)
		}
		out[k] = dec
	}
	if len(out) == 0 {
		return nil, errors.New(name + ": no key=value pairs")
	}
	return out, nil
}
