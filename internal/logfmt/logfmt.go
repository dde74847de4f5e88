// Package logfmt builds the slog logger every allot binary writes with,
// from the two flags they share: --log-level and --log-format (text for
// people, json for log collectors).
package logfmt

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Formats are the values --log-format takes.
const (
	Text = "text"
	JSON = "json"
)

// Options are the parsed logging flags.
type Options struct {
	Level  slog.Level
	Format string
}

// Flags holds the raw flag values until Parse checks them.
type Flags struct {
	level, format string
}

// Register adds --log-level (default defaultLevel) and --log-format to fs.
func Register(fs *flag.FlagSet, defaultLevel string) *Flags {
	f := &Flags{}
	fs.StringVar(&f.level, "log-level", defaultLevel, "debug, info, warn or error")
	fs.StringVar(&f.format, "log-format", Text, "text or json (one JSON object a line, for log collectors)")
	return f
}

// RegisterFormat adds only --log-format, for binaries whose level comes
// from flags of their own (awssim's -v, the demo's -v); Parse then returns
// Level as LevelInfo for the caller to change.
func RegisterFormat(fs *flag.FlagSet) *Flags {
	f := &Flags{level: "info"}
	fs.StringVar(&f.format, "log-format", Text, "text or json (one JSON object a line, for log collectors)")
	return f
}

// Parse checks the flag values after the flag set parsed them.
func (f *Flags) Parse() (Options, error) {
	var o Options
	if err := o.Level.UnmarshalText([]byte(f.level)); err != nil {
		return o, fmt.Errorf("--log-level %q: %w", f.level, err)
	}
	if f.format != Text && f.format != JSON {
		return o, fmt.Errorf("--log-format %q: want text or json", f.format)
	}
	o.Format = f.format
	return o, nil
}

// New returns a logger writing to w in o's format at o's level.
func New(w io.Writer, o Options) *slog.Logger {
	ho := &slog.HandlerOptions{Level: o.Level}
	if o.Format == JSON {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}
