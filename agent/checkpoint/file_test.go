package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sample() State {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	return State{
		InstanceID: "i-0abc",
		UsageSeq:   42,
		ENIs: []ENI{
			{ID: "eni-0", MAC: "02:00:00:00:00:01", DeviceIndex: 0, Primary: true, SubnetID: "subnet-a",
				SubnetCIDR: p("10.0.0.0/20"), PrimaryIP: a("10.0.0.5")},
			{ID: "eni-1", MAC: "02:00:00:00:00:02", DeviceIndex: 1, SubnetID: "subnet-a",
				SubnetCIDR: p("10.0.0.0/20"), PrimaryIP: a("10.0.0.9")},
		},
		Addresses: []Address{
			{Addr: a("10.0.0.6"), ENIID: "eni-0", State: Assigned},
			{Addr: a("10.0.0.7"), ENIID: "eni-0", State: Cooling, CoolUntil: t0.Add(30 * time.Second)},
			{Addr: a("10.0.0.8"), ENIID: "eni-0", State: Free},
			{Addr: a("10.0.1.16"), ENIID: "eni-1", Prefix: p("10.0.1.16/28"), State: Releasing, ReleaseID: "rel-1"},
		},
		Allocations: []Allocation{
			{Network: "allot", ContainerID: "c1", IfName: "eth0", Addr: a("10.0.0.6"), ENIID: "eni-0",
				HostVeth: "alt1234abcd", Netns: "/var/run/netns/x", PodNamespace: "default", PodName: "web-0",
				Created: t0},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	want := sample()
	if err := f.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	// A second save replaces the first.
	want.UsageSeq = 43
	want.Addresses[2].State = Cooling
	want.Addresses[2].CoolUntil = t0.Add(time.Minute)
	if err := f.Save(want); err != nil {
		t.Fatal(err)
	}
	if got, err = f.Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after second save: %+v, %v", got, err)
	}
	fi, err := os.Stat(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	// No temp files remain after successful saves.
	if m, _ := filepath.Glob(f.Path() + tempInfix + "*"); len(m) != 0 {
		t.Fatalf("temp files left: %v", m)
	}
}

func TestEmptyStateRoundTrip(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	if err := f.Save(State{}); err != nil {
		t.Fatal(err)
	}
	got, err := f.Load()
	if err != nil || got.UsageSeq != 0 || len(got.Allocations) != 0 {
		t.Fatalf("%+v, %v", got, err)
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := New(filepath.Join(t.TempDir(), "nope.json")).Load()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// TestInterruptedSaveIsIgnored simulates a crash after the temp file was
// (partly) written but before the rename: the committed state stays, and
// the next Save removes the debris.
func TestInterruptedSaveIsIgnored(t *testing.T) {
	dir := t.TempDir()
	f := New(filepath.Join(dir, "state.json"))
	want := sample()
	if err := f.Save(want); err != nil {
		t.Fatal(err)
	}
	full, _ := os.ReadFile(f.Path())
	debris := []string{
		filepath.Join(dir, "state.json"+tempInfix+"123"),
		filepath.Join(dir, "state.json"+tempInfix+"456"),
	}
	_ = os.WriteFile(debris[0], full[:len(full)/2], 0o600)
	_ = os.WriteFile(debris[1], nil, 0o600)
	other := filepath.Join(dir, "unrelated.tmp-1")
	_ = os.WriteFile(other, []byte("keep me"), 0o600)

	f2 := New(f.Path()) // a restarted agent
	got, err := f2.Load()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load with debris: %+v, %v", got, err)
	}
	if err := f2.Save(got); err != nil {
		t.Fatal(err)
	}
	for _, d := range debris {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("debris %s not removed", d)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("unrelated file removed: %v", err)
	}
}

// rewrap builds a file with a correct checksum around arbitrary state JSON,
// to test what the checksum can't catch.
func rewrap(t *testing.T, version int, state string) []byte {
	t.Helper()
	var c bytes.Buffer
	if err := json.Compact(&c, []byte(state)); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(envelope{Version: version, SHA256: checksum(c.Bytes()), Written: t0, State: c.Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCorruptFiles(t *testing.T) {
	good := func(t *testing.T) []byte {
		f := New(filepath.Join(t.TempDir(), "s.json"))
		if err := f.Save(sample()); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(f.Path())
		return b
	}
	cases := []struct {
		name    string
		content func(t *testing.T) []byte
		want    error
	}{
		{"empty", func(*testing.T) []byte { return nil }, ErrCorrupt},
		{"whitespace", func(*testing.T) []byte { return []byte("\n  \n") }, ErrCorrupt},
		{"truncated", func(t *testing.T) []byte { b := good(t); return b[:len(b)*2/3] }, ErrCorrupt},
		{"truncated to one byte", func(t *testing.T) []byte { return good(t)[:1] }, ErrCorrupt},
		{"not json", func(*testing.T) []byte { return []byte("hello") }, ErrCorrupt},
		{"zeros", func(*testing.T) []byte { return make([]byte, 512) }, ErrCorrupt},
		{"no version", func(*testing.T) []byte { return []byte(`{"state":{}}`) }, ErrCorrupt},
		{"flipped digit", func(t *testing.T) []byte {
			return bytes.Replace(good(t), []byte(`"usageSeq":42`), []byte(`"usageSeq":43`), 1)
		}, ErrCorrupt},
		{"flipped address", func(t *testing.T) []byte {
			return bytes.Replace(good(t), []byte(`10.0.0.6`), []byte(`10.0.0.5`), 1)
		}, ErrCorrupt},
		{"future version", func(t *testing.T) []byte { return rewrap(t, ChangeVersion+1, `{}`) }, ErrUnsupportedVersion},
		{"version zero", func(*testing.T) []byte { return []byte(`{"version":0}`) }, ErrUnsupportedVersion},
		{"unknown field", func(t *testing.T) []byte { return rewrap(t, 1, `{"usageSeq":1,"bogus":true}`) }, ErrCorrupt},
		{"inconsistent but checksummed", func(t *testing.T) []byte {
			return rewrap(t, 1, `{"usageSeq":1,"enis":[{"id":"eni-0","mac":"m","deviceIndex":0}],
				"addresses":[{"addr":"10.0.0.6","eniID":"eni-0","state":"assigned"}],"allocations":[]}`)
		}, ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			content := tc.content(t)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(path).Load()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q doesn't name the file", err)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(after, content) {
				t.Fatalf("Load changed or removed the file (%v)", rerr)
			}
		})
	}
}

func TestSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	junk := []byte(`{"version":1,"sha256":"00","state":{}}`)
	_ = os.WriteFile(path, junk, 0o600)
	f := New(path)
	if _, err := f.Load(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v", err)
	}
	to, err := f.SetAside()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(to); err != nil || !bytes.Equal(b, junk) {
		t.Fatalf("set-aside copy: %q, %v", b, err)
	}
	if _, err := f.Load(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after set aside: %v, want ErrNotFound", err)
	}
	if err := f.Save(sample()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(to); err != nil {
		t.Fatalf("Save removed the set-aside file: %v", err)
	}
}

func TestSaveRefusesInvalidState(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	if err := f.Save(sample()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(f.Path())
	bad := sample()
	bad.Allocations = append(bad.Allocations, bad.Allocations[0]) // same key twice
	if err := f.Save(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	after, _ := os.ReadFile(f.Path())
	if !bytes.Equal(before, after) {
		t.Fatal("refused save still changed the file")
	}
}

func TestConcurrentSaves(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := sample()
			s.UsageSeq = uint64(i)
			if err := f.Save(s); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := f.Load()
	if err != nil || got.UsageSeq >= 20 {
		t.Fatalf("%v, %v", got.UsageSeq, err)
	}
	if m, _ := filepath.Glob(f.Path() + tempInfix + "*"); len(m) != 0 {
		t.Fatalf("temp files left: %v", m)
	}
}

func TestValidate(t *testing.T) {
	mod := func(fn func(*State)) State { s := sample(); fn(&s); return s }
	cases := []struct {
		name string
		s    State
		ok   bool
	}{
		{"sample", sample(), true},
		{"empty", State{}, true},
		{"duplicate eni", mod(func(s *State) { s.ENIs = append(s.ENIs, s.ENIs[0]) }), false},
		{"empty eni id", mod(func(s *State) { s.ENIs[1].ID = "" }), false},
		{"duplicate address", mod(func(s *State) { s.Addresses = append(s.Addresses, s.Addresses[2]) }), false},
		{"address on unknown eni", mod(func(s *State) { s.Addresses[2].ENIID = "eni-9" }), false},
		{"bad state", mod(func(s *State) { s.Addresses[2].State = "gone" }), false},
		{"address outside prefix", mod(func(s *State) { s.Addresses[3].Prefix = netip.MustParsePrefix("10.9.0.0/28") }), false},
		{"allocation of unknown address", mod(func(s *State) { s.Allocations[0].Addr = netip.MustParseAddr("10.0.0.99") }), false},
		{"allocation of free address", mod(func(s *State) { s.Allocations[0].Addr = netip.MustParseAddr("10.0.0.8") }), false},
		{"assigned without allocation", mod(func(s *State) { s.Allocations = nil }), false},
		{"two attachments one address", mod(func(s *State) {
			al := s.Allocations[0]
			al.ContainerID = "c2"
			s.Allocations = append(s.Allocations, al)
		}), false},
		{"empty container id", mod(func(s *State) { s.Allocations[0].ContainerID = "" }), false},
		{"same container other ifname", mod(func(s *State) {
			s.Addresses[2].State = Assigned
			al := s.Allocations[0]
			al.IfName, al.Addr = "net1", netip.MustParseAddr("10.0.0.8")
			s.Allocations = append(s.Allocations, al)
		}), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v doesn't wrap ErrInvalid", err)
			}
		})
	}
}

func ExampleFile() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	f := New(filepath.Join(dir, "state.json"))
	if _, err := f.Load(); errors.Is(err, ErrNotFound) {
		fmt.Println("first start")
	}
	_ = f.Save(State{UsageSeq: 1})
	s, _ := f.Load()
	fmt.Println(s.UsageSeq)
	// Output:
	// first start
	// 1
}

func TestSaveCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "var", "lib", "allot", "checkpoint.json")
	f := New(path)
	if err := f.Save(State{InstanceID: "i-0123456789abcdef0"}); err != nil {
		t.Fatalf("first save into a missing directory: %v", err)
	}
	got, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got.InstanceID != "i-0123456789abcdef0" {
		t.Fatalf("loaded instance %q", got.InstanceID)
	}
}

// TestEnvelopeMatchesJSONMarshal: the hand-built envelope is byte for byte
// what json.Marshal made of it before, so files written before and after
// read the same (HTML-sensitive characters included, which json.Marshal
// escapes in both the state and a RawMessage).
func TestEnvelopeMatchesJSONMarshal(t *testing.T) {
	odd := sample()
	odd.Allocations[0].PodName = `web-<0>&"x"`
	for _, s := range []State{sample(), {}, odd} {
		body, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		written := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
		want, err := json.Marshal(envelope{Version: Version, SHA256: checksum(body), Written: written, State: body})
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeEnvelope(body, written)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("envelope differs:\n got %s\nwant %s", got, want)
		}
		if back, err := decode(got); err != nil || !reflect.DeepEqual(*back.state, s) {
			t.Fatalf("decode: %+v, %v", back, err)
		}
	}
}
