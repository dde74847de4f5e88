package cilium

import (
	"fmt"
	"strconv"
	"strings"
)

// Tuning is the part of the operator's configuration a cluster operator
// tunes for bursts, by the names of its flags and CiliumNode spec fields.
type Tuning struct {
	QPS               float64
	Burst             int
	PreAllocate       int
	MinAllocate       int
	MaxAboveWatermark int
}

// DefaultTuning is Cilium's: 4 QPS, a burst of 20, pre-allocate 8.
func DefaultTuning() Tuning {
	return Tuning{QPS: DefaultQPS, Burst: DefaultBurst, PreAllocate: DefaultPreAllocate}
}

// ParseTuning applies comma-separated settings (e.g.
// "limit-ipam-api-qps=20,limit-ipam-api-burst=100,max-above-watermark=8")
// to base.
func ParseTuning(base Tuning, settings string) (Tuning, error) {
	t := base
	for _, kv := range strings.Split(settings, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return t, fmt.Errorf("cilium setting %q: want name=value", kv)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return t, fmt.Errorf("cilium setting %s=%q: want a number, 0 or more", k, v)
		}
		switch k {
		case "limit-ipam-api-qps":
			t.QPS = f
		case "limit-ipam-api-burst":
			t.Burst = int(f)
		case "pre-allocate":
			t.PreAllocate = int(f)
		case "min-allocate":
			t.MinAllocate = int(f)
		case "max-above-watermark":
			t.MaxAboveWatermark = int(f)
		default:
			return t, fmt.Errorf("cilium setting %q: want one of limit-ipam-api-qps, limit-ipam-api-burst, pre-allocate, min-allocate, max-above-watermark", k)
		}
	}
	if t.QPS <= 0 || t.Burst < 1 {
		return t, fmt.Errorf("cilium settings %q: the limiter needs a positive rate and a burst of at least 1", settings)
	}
	return t, nil
}

// Apply sets the tuning's fields in cfg.
func (t Tuning) Apply(cfg *Config) {
	cfg.QPS, cfg.Burst = t.QPS, t.Burst
	cfg.PreAllocate, cfg.MinAllocate, cfg.MaxAboveWatermark = t.PreAllocate, t.MinAllocate, t.MaxAboveWatermark
}
