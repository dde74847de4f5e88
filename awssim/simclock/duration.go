package simclock

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that reads and writes JSON (and so YAML via
// sigs.k8s.io/yaml) as a Go duration string such as "1.5s", or as a number
// of seconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("parse duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration must be a string like \"1.5s\" or a number of seconds: %w", err)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}
