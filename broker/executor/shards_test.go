package executor

import (
	"fmt"
	"maps"
	"reflect"
	"testing"
)

// TestLentShardsKeepTheirState checks that a snapshot's shards keep what
// they held when lent however the view changes afterwards, and that a
// change copies only the part of the map it falls in.
func TestLentShardsKeepTheirState(t *testing.T) {
	m := map[string]int{}
	for i := range 2000 {
		m[fmt.Sprintf("i-%05d", i)] = i
	}
	c := newCOWShards(m)
	lent := c.lend()
	if lent.len() != 2000 || lent.at("i-00042") != 42 {
		t.Fatalf("lent: %d records, i-00042 = %d", lent.len(), lent.at("i-00042"))
	}
	c.set("i-00042", -1)
	c.set("i-new", 7)
	c.del("i-00007")
	c.del("i-absent")
	if x, ok := lent.get("i-00042"); !ok || x != 42 {
		t.Errorf("lent i-00042 = %d, %v after the view changed it; want 42", x, ok)
	}
	if _, ok := lent.get("i-new"); ok {
		t.Error("lent map holds a record added after it was lent")
	}
	if _, ok := lent.get("i-00007"); !ok {
		t.Error("lent map lost a record deleted after it was lent")
	}
	if lent.len() != 2000 {
		t.Errorf("lent map has %d records, want 2000", lent.len())
	}
	now := c.lend()
	if now.at("i-00042") != -1 || now.at("i-new") != 7 || now.len() != 2000 {
		t.Errorf("view after changes: i-00042 = %d, i-new = %d, %d records", now.at("i-00042"), now.at("i-new"), now.len())
	}
	if _, ok := now.get("i-00007"); ok {
		t.Error("view still holds a deleted record")
	}
	got := maps.Collect(now.all())
	if len(got) != 2000 || got["i-new"] != 7 {
		t.Errorf("all: %d records, i-new = %d", len(got), got["i-new"])
	}
	// Three parts at most were copied; every other part is the lent map
	// itself.
	copied := 0
	for k := range shardCount {
		if reflect.ValueOf(lent.m[k]).UnsafePointer() != reflect.ValueOf(now.m[k]).UnsafePointer() {
			copied++
		}
	}
	if copied == 0 || copied > 3 {
		t.Errorf("%d parts copied for changes to 3 records (one a no-op delete); want 1 to 3", copied)
	}
}
