package clock

import (
	"testing"
	"time"
)

func TestWall(t *testing.T) {
	ten, err := Scaled(10)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Clock
		d    time.Duration
		want time.Duration
	}{
		{Real(), time.Minute, time.Minute},
		{Clock{}, 2 * time.Second, 2 * time.Second},
		{ten, time.Minute, 6 * time.Second},
		{ten, 0, 0},
	} {
		if got := tc.c.Wall(tc.d); got != tc.want {
			t.Errorf("%v.Wall(%v) = %v, want %v", tc.c.Scale(), tc.d, got, tc.want)
		}
	}
	if _, err := Scaled(0); err == nil {
		t.Error("Scaled(0) accepted")
	}
	if _, err := Scaled(-1); err == nil {
		t.Error("Scaled(-1) accepted")
	}
}
