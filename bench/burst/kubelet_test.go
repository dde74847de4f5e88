package burst

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/cni/plugin"
)

// TestKubeletBounds: the kubelet model uses kubelet's own bounds — its
// default runtime request timeout, twice that for RunPodSandbox, a 10 to
// 15 s requeue — scaled to wall time like everything simulated.
func TestKubeletBounds(t *testing.T) {
	k := defaultKubelet(5)
	if k.RuntimeRequestTimeout != 2*time.Minute {
		t.Errorf("runtime request timeout %v, want kubelet's default 2m", k.RuntimeRequestTimeout)
	}
	if got := k.sandboxTimeout(); got != 48*time.Second {
		t.Errorf("sandbox timeout at time scale 5: %v, want 4m/5 = 48s", got)
	}
	for range 100 {
		if d := k.retryDelay(); d < 2*time.Second || d > 3*time.Second {
			t.Fatalf("retry delay at time scale 5: %v, want 10-15 s / 5", d)
		}
	}
	if plugin.DefaultTimeout+plugin.DelTimeout > k.RuntimeRequestTimeout {
		t.Errorf("the plugin's ADD timeout %v and DEL %v outlast the runtime request timeout %v",
			plugin.DefaultTimeout, plugin.DelTimeout, k.RuntimeRequestTimeout)
	}
}

// stuckCNI never answers an ADD before its context ends.
type stuckCNI struct{}

func (stuckCNI) Add(ctx context.Context, _ cniserver.Request) (cniserver.AddResult, error) {
	<-ctx.Done()
	return cniserver.AddResult{}, ctx.Err()
}

func (stuckCNI) Del(context.Context, cniserver.Request) error { return nil }

// TestPluginBound: an allot node's ADD gives up at the plugin's timeout,
// not at kubelet's longer one.
func TestPluginBound(t *testing.T) {
	f := &allotFleet{cfg: Config{TimeScale: 1000}}
	f.nodes = []*allotNode{{}}
	b, ok := f.backends()[0].(pluginBound)
	if !ok || b.timeout != time.Duration(float64(plugin.DefaultTimeout)/1000) {
		t.Fatalf("allot backend %#v, want the plugin's default ADD timeout at time scale 1000", f.backends()[0])
	}
	b.cni = stuckCNI{}
	start := time.Now()
	_, err := b.Add(context.Background(), cniserver.Request{})
	if d := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || d < b.timeout || d > b.timeout+2*time.Second {
		t.Errorf("stuck ADD: %v after %v, want a deadline after %v", err, d, b.timeout)
	}
}
