package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/pool"
)

func TestConfigDefaults(t *testing.T) {
	c, err := Config{CheckpointPath: "/x/ck.json", Warm: pool.Targets{MaxENIs: 2}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeSecondaryIP || c.Warm != (pool.Targets{WarmENIs: 1, MaxENIs: 2}) ||
		c.Cooldown != pool.DefaultCooldown || c.MaxAddWait != DefaultMaxAddWait {
		t.Fatalf("defaults: %+v", c)
	}
	p, err := Config{CheckpointPath: "/x/ck.json", Mode: ModePrefix}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if p.Warm != (pool.Targets{WarmPrefixes: 1, PrefixMode: true}) {
		t.Fatalf("prefix defaults: %+v", p.Warm)
	}
	w, err := Config{CheckpointPath: "/x/ck.json", Warm: pool.Targets{WarmIPs: 5}, Cooldown: -1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if w.Warm != (pool.Targets{WarmIPs: 5}) || w.Cooldown >= 0 {
		t.Fatalf("explicit targets and no cooldown: %+v", w)
	}
}

func TestConfigRejects(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "checkpoint path is required"},
		{Config{CheckpointPath: "ck.json"}, "must be absolute"},
		{Config{CheckpointPath: "/ck", SocketPath: "run/cni.sock"}, "must be absolute"},
		{Config{CheckpointPath: "/ck", Mode: "ipv6"}, "address mode"},
		{Config{CheckpointPath: "/ck", MaxAddWait: -time.Second}, "must not be negative"},
		{Config{CheckpointPath: "/ck", Warm: pool.Targets{WarmIPs: -1}}, "warm targets"},
		{Config{CheckpointPath: "/ck", Mode: ModePrefix, Warm: pool.Targets{WarmENIs: 2}}, "prefix mode needs"},
	} {
		_, err := tc.cfg.withDefaults()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error mentioning %q", tc.cfg, err, tc.want)
		}
	}
}
