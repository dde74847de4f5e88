package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// keyOrder returns s with its lists in key order, as Load returns them.
func keyOrder(s State) State {
	var out State
	copyInto(&out, s)
	return out
}

// mutate makes one random change of the kind the pool makes: assign or
// free an address, add or remove an ENI with its addresses, set a release
// or a cooldown, move the usage mark.
func mutate(r *rand.Rand, s State, step int) State {
	var n State
	copyInto(&n, s) // a fresh copy: the caller's state stays as it was
	switch r.IntN(6) {
	case 0: // an ADD: a free address assigned
		for i, a := range n.Addresses {
			if a.State == Free {
				n.Addresses[i].State = Assigned
				n.Allocations = append(n.Allocations, Allocation{Network: "allot", ContainerID: fmt.Sprintf("c%d", step),
					IfName: "eth0", Addr: a.Addr, ENIID: a.ENIID, HostVeth: "alt" + fmt.Sprint(step), Created: t0.Add(time.Duration(step))})
				break
			}
		}
	case 1: // a DEL: an allocation gone, its address cooling
		if len(n.Allocations) > 0 {
			al := n.Allocations[r.IntN(len(n.Allocations))]
			n.Allocations = deleteKey(n.Allocations, al.key())
			for i := range n.Addresses {
				if n.Addresses[i].Addr == al.Addr {
					n.Addresses[i].State, n.Addresses[i].CoolUntil = Cooling, t0.Add(time.Duration(step)*time.Second)
				}
			}
		}
	case 2: // a delivery: a new ENI with addresses
		id := fmt.Sprintf("eni-n%d", step)
		n.ENIs = append(n.ENIs, ENI{ID: id, MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", step/256, step%256), DeviceIndex: step})
		for k := range 1 + r.IntN(3) {
			a := netip.AddrFrom4([4]byte{10, byte(1 + k), byte(step / 256), byte(step % 256)})
			n.Addresses = append(n.Addresses, Address{Addr: a, ENIID: id, State: Free})
		}
	case 3: // a release completed: an ENI whose addresses are all free removed
		n = removeFreeENI(n)
	case 4: // a release proposed, or a cooldown ended
		for i, a := range n.Addresses {
			if a.State == Cooling {
				n.Addresses[i].State, n.Addresses[i].CoolUntil = Free, time.Time{}
			} else if a.State == Free && r.IntN(4) == 0 {
				n.Addresses[i].State, n.Addresses[i].ReleaseID = Releasing, fmt.Sprintf("rel-%d", step)
			}
		}
	default: // a usage report's block of sequence numbers
		n.UsageSeq += 1024
	}
	return n
}

func deleteKey(als []Allocation, k attachKey) []Allocation {
	out := als[:0]
	for _, al := range als {
		if al.key() != k {
			out = append(out, al)
		}
	}
	return out
}

// removeFreeENI removes the first non-primary ENI with no assigned address.
func removeFreeENI(s State) State {
	for _, e := range s.ENIs {
		if e.Primary {
			continue
		}
		busy := false
		for _, a := range s.Addresses {
			busy = busy || (a.ENIID == e.ID && a.State == Assigned)
		}
		if busy {
			continue
		}
		s.ENIs = deleteByID(s.ENIs, e.ID)
		out := s.Addresses[:0]
		for _, a := range s.Addresses {
			if a.ENIID != e.ID {
				out = append(out, a)
			}
		}
		s.Addresses = out
		return s
	}
	return s
}

func deleteByID(enis []ENI, id string) []ENI {
	out := enis[:0]
	for _, e := range enis {
		if e.ID != id {
			out = append(out, e)
		}
	}
	return out
}

// Every Save after the first appends only what changed, and a restarted
// agent's Load replays the changes to exactly the state last saved, through
// hundreds of random changes of every kind and the compactions among them.
func TestChangesReplayToTheSavedState(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	r := rand.New(rand.NewPCG(1, 2))
	s := bigState(1, 50)
	if err := f.Save(s); err != nil {
		t.Fatal(err)
	}
	for step := range compactRecords + 40 {
		s = mutate(r, s, step+1)
		if err := s.Validate(); err != nil {
			t.Fatalf("step %d made an invalid state (test bug): %v", step, err)
		}
		if err := f.Save(s); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		got, err := New(f.Path()).Load()
		if err != nil {
			t.Fatalf("step %d: load: %v", step, err)
		}
		if want := keyOrder(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: load returned\n%+v\nwant\n%+v", step, got, want)
		}
	}
	recs := records(t, f.Path())
	if !bytes.HasPrefix(recs[0], []byte(`{"version":1,`)) {
		t.Fatalf("the first record is not a whole state of version 1: %.40s", recs[0])
	}
	for i, rec := range recs[1:] {
		if !bytes.HasPrefix(rec, []byte(`{"version":2,`)) {
			t.Fatalf("record %d is not a change: %.40s", i+1, rec)
		}
	}
}

// A change record holds the records that changed, not the node: one
// address assigned on a node of 2,000 makes a record of a few hundred
// bytes, where the whole state is over a hundred kilobytes.
func TestChangeRecordHoldsOnlyWhatChanged(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	s := bigState(1, 2000)
	if err := f.Save(s); err != nil {
		t.Fatal(err)
	}
	whole := len(records(t, f.Path())[0])
	s = keyOrder(s)
	s.Addresses[10].State = Assigned
	s.Allocations = append(s.Allocations, Allocation{Network: "allot", ContainerID: "c2", IfName: "eth0",
		Addr: s.Addresses[10].Addr, ENIID: s.Addresses[10].ENIID, Created: t0})
	if err := f.Save(s); err != nil {
		t.Fatal(err)
	}
	recs := records(t, f.Path())
	if len(recs) != 2 {
		t.Fatalf("file holds %d records, want 2", len(recs))
	}
	if len(recs[1]) > 1024 || whole < 100_000 {
		t.Fatalf("the change record is %d bytes, the whole state %d: want under 1 KiB against over 100 KB", len(recs[1]), whole)
	}
	var env struct {
		Change change `json:"change"`
	}
	if err := json.Unmarshal(recs[1], &env); err != nil {
		t.Fatal(err)
	}
	c := env.Change
	if len(c.Addresses) != 1 || len(c.Allocations) != 1 || len(c.ENIs) != 0 ||
		len(c.GoneAddresses)+len(c.GoneAllocations)+len(c.GoneENIs) != 0 {
		t.Fatalf("change holds %+v, want the one address and the one allocation", c)
	}
}

// A crash while a change was appended leaves a prefix of its record:
// whatever the prefix, Load returns the state before it (or, when all of
// it but the newline made it to disk, the state it records), never an
// error, and never anything else.
func TestTornChangeAtEveryLength(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	before := saveSeqs(t, f, 3)
	after := before
	after.Addresses = append(append([]Address(nil), before.Addresses...), Address{Addr: netip.MustParseAddr("10.0.0.20"),
		ENIID: "eni-1", State: Free})
	if err := f.Save(after); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, f.Path())
	last := len(recs[len(recs)-1])
	for cut := len(full) - last; cut < len(full); cut++ {
		if err := os.WriteFile(f.Path(), full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := New(f.Path()).Load()
		want := keyOrder(before)
		if cut == len(full)-1 {
			want = keyOrder(after)
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d of %d: %+v, %v", cut, len(full), got, err)
		}
	}
}

// appendRaw appends a record of version v around body, with a correct
// checksum: damage only a replay can find.
func appendRaw(t *testing.T, path string, v int, body string) {
	t.Helper()
	var c bytes.Buffer
	if err := json.Compact(&c, []byte(body)); err != nil {
		t.Fatal(err)
	}
	rec, err := appendRecord(nil, v, c.Bytes(), t0)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write(append(rec, '\n')); err != nil {
		t.Fatal(err)
	}
}

// A whole change that contradicts the state before it, a replay that ends
// in an inconsistent state, and a journal that starts with a change are
// clear errors that leave the file as it is; none is taken for a torn
// write, whose record would be dropped.
func TestBadChangesAreErrors(t *testing.T) {
	cases := []struct {
		name   string
		first  bool // the change is the file's only record
		change string
		want   error
		says   string
	}{
		{"removes an unknown address", false, `{"instanceID":"i-0abc","usageSeq":9,"goneAddresses":["10.9.9.9"]}`,
			ErrCorrupt, "does not hold"},
		{"removes an unknown attachment", false,
			`{"instanceID":"i-0abc","usageSeq":9,"goneAllocations":[{"network":"n","containerID":"x","ifname":"eth0"}]}`,
			ErrCorrupt, "does not hold"},
		{"assigns without an allocation", false,
			`{"instanceID":"i-0abc","usageSeq":9,"addresses":[{"addr":"10.0.0.8","eniID":"eni-0","state":"assigned"}]}`,
			ErrInvalid, "no attachment holds it"},
		{"unknown field", false, `{"instanceID":"i-0abc","usageSeq":9,"bogus":1}`, ErrCorrupt, "unknown field"},
		{"a change first", true, `{"instanceID":"i-0abc","usageSeq":9}`, ErrCorrupt, "first record is a change"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New(filepath.Join(t.TempDir(), "state.json"))
			if tc.first {
				if err := os.WriteFile(f.Path(), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				saveSeqs(t, f, 2)
			}
			appendRaw(t, f.Path(), ChangeVersion, tc.change)
			if !tc.first {
				// A whole record after it: the bad one is not the last.
				appendRaw(t, f.Path(), ChangeVersion, `{"instanceID":"i-0abc","usageSeq":10}`)
			}
			content, _ := os.ReadFile(f.Path())
			_, err := New(f.Path()).Load()
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), f.Path()) {
				t.Fatalf("err = %v, want %v saying %q and naming the file", err, tc.want, tc.says)
			}
			if after, _ := os.ReadFile(f.Path()); !bytes.Equal(after, content) {
				t.Fatal("Load changed the file")
			}
		})
	}
}
