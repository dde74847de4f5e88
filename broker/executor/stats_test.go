package executor

import (
	"reflect"
	"runtime"
	"testing"
	"time"
)

func TestRoundQuantile(t *testing.T) {
	s := newStats()
	// 98 fast rounds, two slow ones: the p99 is the slow ones' bucket.
	for range 98 {
		s.observeRoundTime(3 * time.Millisecond)
	}
	s.observeRoundTime(80 * time.Millisecond)
	s.observeRoundTime(90 * time.Millisecond)
	if s.Rounds != 100 || s.RoundTime != 98*3*time.Millisecond+170*time.Millisecond {
		t.Fatalf("rounds %d time %s", s.Rounds, s.RoundTime)
	}
	p50, p99 := RoundQuantile(s.RoundHist, 0.5), RoundQuantile(s.RoundHist, 0.99)
	if p50 < 3*time.Millisecond || p50 > 4*time.Millisecond {
		t.Errorf("p50 %s, want the bucket holding 3ms", p50)
	}
	if p99 < 90*time.Millisecond || p99 > 114*time.Millisecond {
		t.Errorf("p99 %s, want the bucket holding 90ms", p99)
	}
	if q := RoundQuantile(make([]int64, len(RoundBounds)+1), 0.99); q != 0 {
		t.Errorf("no rounds: %s, want 0", q)
	}
	s.observeRoundTime(time.Minute)
	if q := RoundQuantile(s.RoundHist, 1); q != -1 {
		t.Errorf("max beyond the bounds: %s, want -1", q)
	}
	// The clone's histogram is its own.
	c := s.clone()
	s.observeRoundTime(time.Millisecond)
	if sum(c.RoundHist) != 101 {
		t.Errorf("clone counts %d rounds, want 101", sum(c.RoundHist))
	}
}

func sum(h []int64) (n int64) {
	for _, x := range h {
		n += x
	}
	return n
}

// TestSlowRoundPhases: a round's phases add up to its time, and only a
// round over SlowRound counts in the slow rounds' phases.
func TestSlowRoundPhases(t *testing.T) {
	s := newStats()
	at := time.Now()
	fast := &roundPhases{began: at, last: at.Add(30 * time.Millisecond)}
	fast.took[phaseRead], fast.took[phasePlan] = 20*time.Millisecond, 10*time.Millisecond
	slow := &roundPhases{began: at, last: at.Add(120 * time.Millisecond)}
	slow.took[phaseCatchUp], slow.took[phaseRead] = 100*time.Millisecond, 20*time.Millisecond
	s.observeRound(fast)
	s.observeRound(slow)
	if s.Rounds != 2 || s.SlowRounds != 1 {
		t.Fatalf("rounds %d, slow %d; want 2 and 1", s.Rounds, s.SlowRounds)
	}
	if got := s.RoundPhases["read"]; got != 40*time.Millisecond {
		t.Errorf("read over all rounds %v, want 40ms", got)
	}
	if got := s.SlowRoundPhases["catch-up"]; got != 100*time.Millisecond || s.SlowRoundPhases["plan"] != 0 {
		t.Errorf("slow rounds' phases %v, want catch-up 100ms and no plan", s.SlowRoundPhases)
	}
	c := s.clone()
	c.SlowRoundPhases["plan"] = time.Second
	if s.SlowRoundPhases["plan"] != 0 {
		t.Error("a clone shares its phases with the stats")
	}
}

// TestRoundCPU checks that a round's CPU time is what it ran, not what it
// waited: a round that sleeps 50 ms counts almost none, one that works
// 30 ms counts no more than its wall time, and both count in the CPU
// histogram; the slow one's CPU in SlowRoundCPU.
func TestRoundCPU(t *testing.T) {
	if _, ok := threadCPU(); !ok {
		t.Skip("no thread CPU clock on this system")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := newStats()
	waited := newRoundPhases(true)
	time.Sleep(50 * time.Millisecond)
	waited.mark(phaseRead)
	waited.end()
	s.observeRound(waited)
	worked := newRoundPhases(true)
	x := 0
	for time.Since(worked.began) < 30*time.Millisecond {
		x++
	}
	worked.mark(phasePlan)
	worked.end()
	s.observeRound(worked)
	if !waited.cpuKnown || waited.cpu > 10*time.Millisecond {
		t.Errorf("a round asleep for 50ms ran %v of CPU (known %v), want almost none", waited.cpu, waited.cpuKnown)
	}
	if wall := worked.last.Sub(worked.began); !worked.cpuKnown || worked.cpu <= 0 || worked.cpu > wall+time.Millisecond {
		t.Errorf("a round working for %v ran %v of CPU (known %v, %d loops)", wall, worked.cpu, worked.cpuKnown, x)
	}
	if s.RoundCPU != waited.cpu+worked.cpu || s.SlowRoundCPU != waited.cpu {
		t.Errorf("RoundCPU %v, SlowRoundCPU %v; want %v and %v", s.RoundCPU, s.SlowRoundCPU, waited.cpu+worked.cpu, waited.cpu)
	}
	var n int64
	for _, c := range s.RoundCPUHist {
		n += c
	}
	if n != 2 {
		t.Errorf("CPU histogram counts %d rounds, want 2", n)
	}
}

// TestStatsPlus fills every counter of Stats with a distinct value (by
// reflection, so a counter added later is covered too) and checks that a
// sum counts each field of both sides, and that neither side changes.
func TestStatsPlus(t *testing.T) {
	next := int64(1)
	fill := func() Stats {
		var s Stats
		v := reflect.ValueOf(&s).Elem()
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.Int64:
				f.SetInt(next)
				next++
			case reflect.Slice:
				f.Set(reflect.MakeSlice(f.Type(), 3, 3))
				for j := range 3 {
					f.Index(j).SetInt(next)
					next++
				}
			case reflect.Map:
				f.Set(reflect.MakeMap(f.Type()))
				for _, k := range []string{"a", v.Type().Field(i).Name} {
					f.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(next).Convert(f.Type().Elem()))
					next++
				}
			default:
				t.Fatalf("Stats.%s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
			}
		}
		return s
	}
	a, b := fill(), fill()
	a0, b0 := a.clone(), b.clone()
	sum := a.Plus(b)
	va, vb, vs := reflect.ValueOf(a), reflect.ValueOf(b), reflect.ValueOf(sum)
	for i := range vs.NumField() {
		name := vs.Type().Field(i).Name
		fa, fb, fs := va.Field(i), vb.Field(i), vs.Field(i)
		switch fs.Kind() {
		case reflect.Int64:
			if fs.Int() != fa.Int()+fb.Int() {
				t.Errorf("%s: %d + %d = %d", name, fa.Int(), fb.Int(), fs.Int())
			}
		case reflect.Slice:
			for j := range fs.Len() {
				if fs.Index(j).Int() != fa.Index(j).Int()+fb.Index(j).Int() {
					t.Errorf("%s[%d]: %d + %d = %d", name, j, fa.Index(j).Int(), fb.Index(j).Int(), fs.Index(j).Int())
				}
			}
		case reflect.Map:
			for _, k := range []string{"a", name} {
				key := reflect.ValueOf(k)
				if fs.MapIndex(key).Int() != fa.MapIndex(key).Int()+fb.MapIndex(key).Int() {
					t.Errorf("%s[%s]: %d + %d = %d", name, k, fa.MapIndex(key).Int(), fb.MapIndex(key).Int(), fs.MapIndex(key).Int())
				}
			}
		}
	}
	if !reflect.DeepEqual(a, a0) || !reflect.DeepEqual(b, b0) {
		t.Errorf("Plus changed its operands")
	}
}
