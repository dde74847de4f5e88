package burst

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// threadNice reads a thread's nice value from /proc (stat field 19);
// false if the thread has ended.
func threadNice(t *testing.T, tid string) (int, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + tid + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, nice field 19.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		t.Fatalf("thread %s nice %q: %v", tid, f[19-3], err)
	}
	return n, true
}

// TestSetNice runs in a child process of its own so that the test
// binary's other tests keep their priority: it raises the nice value
// (which needs no privilege), starts more threads, and checks that every
// thread, old and new, has it.
func TestSetNice(t *testing.T) {
	if os.Getenv("ALLOT_TEST_SETNICE") != "1" {
		runSelf(t, "TestSetNice", "ALLOT_TEST_SETNICE=1")
		return
	}
	if err := setNice(7); err != nil {
		t.Fatal(err)
	}
	// New threads, started by threads already set.
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			<-hold
		}()
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n, ok := threadNice(t, e.Name()); ok && n != 7 {
			t.Errorf("thread %s: nice %d, want 7", e.Name(), n)
		}
	}
	close(hold)
	wg.Wait()
	if err := setNice(25); err == nil {
		t.Error("nice 25 accepted")
	}
}

// runSelf runs one test of this binary in a child process with env added,
// and fails if it fails.
func runSelf(t *testing.T, name string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a child: %v\n%s", name, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s in a child did not pass:\n%s", name, out)
	}
}
