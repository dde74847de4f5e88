package identity

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/imds"
)

// worldSource is a stateful imds.Source standing in for awssim's world:
// tests change it as EC2 (after IMDS's lag) would.
type worldSource struct {
	mu sync.Mutex
	md imds.Metadata
}

func (w *worldSource) Metadata(id string) (imds.Metadata, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id != w.md.InstanceID {
		return imds.Metadata{}, false
	}
	md := w.md
	md.Interfaces = append([]imds.Interface(nil), w.md.Interfaces...)
	return md, true
}

func (w *worldSource) edit(fn func(*imds.Metadata)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn(&w.md)
}

const (
	mac0 = "02:aa:00:00:00:01"
	mac1 = "02:aa:00:00:00:02"
)

func world() *worldSource {
	return &worldSource{md: imds.Metadata{
		InstanceID: "i-0abc", InstanceType: "c5.xlarge", AvailabilityZone: "eu-west-1b",
		MAC: mac0, LocalIPv4: "10.1.0.5",
		Interfaces: []imds.Interface{
			// Listed out of device order on purpose.
			{MAC: mac1, ENIID: "eni-1", DeviceNumber: 1, SubnetID: "subnet-b", SubnetCIDR: "10.1.16.0/20",
				VPCID: "vpc-1", VPCCIDRs: []string{"10.1.0.0/16"},
				LocalIPv4s: []string{"10.1.16.4"}, IPv4Prefixes: []string{"10.1.16.16/28"}},
			{MAC: mac0, ENIID: "eni-0", DeviceNumber: 0, SubnetID: "subnet-a", SubnetCIDR: "10.1.0.0/20",
				VPCID: "vpc-1", VPCCIDRs: []string{"10.1.0.0/16", "100.64.0.0/10"},
				SecurityGroupIDs: []string{"sg-1", "sg-2"},
				LocalIPv4s:       []string{"10.1.0.5", "10.1.0.6", "10.1.0.7"}},
		},
	}}
}

// serve runs the real awssim IMDS handler and returns a real SDK client for it.
func serve(t *testing.T, w *worldSource) MetadataAPI {
	t.Helper()
	srv := httptest.NewServer(imds.NewHandler(w.md.InstanceID, w, imds.Options{TokenRequired: true}))
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, x := range s {
		out[i] = netip.MustParseAddr(x)
	}
	return out
}

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, x := range s {
		out[i] = netip.MustParsePrefix(x)
	}
	return out
}

func TestFetch(t *testing.T) {
	c := serve(t, world())
	id, err := Fetch(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{
		InstanceID: "i-0abc", InstanceType: "c5.xlarge", AvailabilityZone: "eu-west-1b",
		PrimaryMAC: mac0, PrimaryIPv4: netip.MustParseAddr("10.1.0.5"),
		ENIs: []ENIMeta{
			{MAC: mac0, ENIID: "eni-0", DeviceNumber: 0, SubnetID: "subnet-a",
				SubnetCIDR: netip.MustParsePrefix("10.1.0.0/20"), VPCID: "vpc-1",
				VPCCIDRs:         prefixes("10.1.0.0/16", "100.64.0.0/10"),
				SecurityGroupIDs: []string{"sg-1", "sg-2"},
				IPv4s:            addrs("10.1.0.5", "10.1.0.6", "10.1.0.7")},
			{MAC: mac1, ENIID: "eni-1", DeviceNumber: 1, SubnetID: "subnet-b",
				SubnetCIDR: netip.MustParsePrefix("10.1.16.0/20"), VPCID: "vpc-1",
				VPCCIDRs: prefixes("10.1.0.0/16"),
				IPv4s:    addrs("10.1.16.4"), Prefixes: prefixes("10.1.16.16/28")},
		},
	}
	if !reflect.DeepEqual(id, want) {
		t.Fatalf("Fetch:\n got %+v\nwant %+v", id, want)
	}
	p, ok := id.Primary()
	if !ok || p.ENIID != "eni-0" {
		t.Fatalf("Primary = %+v, %v", p, ok)
	}
	if a, ok := p.PrimaryIPv4(); !ok || a != netip.MustParseAddr("10.1.0.5") {
		t.Fatalf("PrimaryIPv4 = %v, %v", a, ok)
	}
}

func TestFetchErrors(t *testing.T) {
	t.Run("primary mac not attached", func(t *testing.T) {
		w := world()
		w.edit(func(md *imds.Metadata) { md.MAC = "02:ff:ff:ff:ff:ff" })
		if _, err := Fetch(context.Background(), serve(t, w)); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("eni half visible", func(t *testing.T) {
		w := world()
		w.edit(func(md *imds.Metadata) { md.Interfaces[0].ENIID = "" })
		_, err := ENIs(context.Background(), serve(t, w))
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("unknown instance", func(t *testing.T) {
		w := world()
		srv := httptest.NewServer(imds.NewHandler("i-other", w, imds.Options{}))
		defer srv.Close()
		c, _ := NewClient(srv.URL)
		if _, err := Fetch(context.Background(), c); !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("no endpoint", func(t *testing.T) {
		if _, err := NewClient(""); err == nil {
			t.Fatal("NewClient(\"\") must refuse: no default endpoint")
		}
	})
	t.Run("unknown mac", func(t *testing.T) {
		_, err := ENI(context.Background(), serve(t, world()), "02:00:00:00:00:99")
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestMissing(t *testing.T) {
	e := ENIMeta{IPv4s: addrs("10.0.0.1", "10.0.0.2"), Prefixes: prefixes("10.0.1.16/28")}
	cases := []struct {
		name     string
		ips      []netip.Addr
		pfx      []netip.Prefix
		wantIPs  []netip.Addr
		wantPfxs []netip.Prefix
	}{
		{"all visible", addrs("10.0.0.2"), prefixes("10.0.1.16/28"), nil, nil},
		{"address missing", addrs("10.0.0.2", "10.0.0.3"), nil, addrs("10.0.0.3"), nil},
		{"address inside visible prefix", addrs("10.0.1.31"), nil, nil, nil},
		{"address just outside prefix", addrs("10.0.1.32"), nil, addrs("10.0.1.32"), nil},
		{"prefix missing", nil, prefixes("10.0.1.16/28", "10.0.1.32/28"), nil, prefixes("10.0.1.32/28")},
		{"unmasked prefix matches", nil, prefixes("10.0.1.17/28"), nil, nil},
		{"nothing asked", nil, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gi, gp := e.Missing(tc.ips, tc.pfx)
			if !reflect.DeepEqual(gi, tc.wantIPs) || !reflect.DeepEqual(gp, tc.wantPfxs) {
				t.Fatalf("Missing = %v %v, want %v %v", gi, gp, tc.wantIPs, tc.wantPfxs)
			}
		})
	}
}

// TestUnconfirmedFollowsLag: addresses the broker delivered are unconfirmed
// until the (lagging) IMDS shows them.
func TestUnconfirmedFollowsLag(t *testing.T) {
	w := world()
	c := serve(t, w)
	ctx := context.Background()
	want := addrs("10.1.0.8", "10.1.0.9")
	ma, mp, err := Unconfirmed(ctx, c, mac0, want, prefixes("10.1.0.32/28"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ma, want) || len(mp) != 1 {
		t.Fatalf("before: missing %v %v", ma, mp)
	}
	w.edit(func(md *imds.Metadata) {
		md.Interfaces[1].LocalIPv4s = append(md.Interfaces[1].LocalIPv4s, "10.1.0.8", "10.1.0.9")
		md.Interfaces[1].IPv4Prefixes = []string{"10.1.0.32/28"}
	})
	ma, mp, err = Unconfirmed(ctx, c, mac0, want, prefixes("10.1.0.32/28"))
	if err != nil || len(ma) != 0 || len(mp) != 0 {
		t.Fatalf("after: missing %v %v, err %v", ma, mp, err)
	}
	// An ENI IMDS doesn't show yet: everything unconfirmed, no error.
	ma, _, err = Unconfirmed(ctx, c, "02:00:00:00:00:77", want, nil)
	if err != nil || len(ma) != 2 {
		t.Fatalf("unattached eni: missing %v, err %v", ma, err)
	}
}

func TestWaitVisible(t *testing.T) {
	w := world()
	c := serve(t, w)
	want := addrs("10.1.16.5")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := WaitVisible(ctx, c, mac1, want, nil, 10*time.Millisecond)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("never visible: err = %v, want DeadlineExceeded", err)
	}

	go func() {
		time.Sleep(30 * time.Millisecond)
		w.edit(func(md *imds.Metadata) {
			md.Interfaces[0].LocalIPv4s = append(md.Interfaces[0].LocalIPv4s, "10.1.16.5")
		})
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := WaitVisible(ctx, c, mac1, want, nil, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
