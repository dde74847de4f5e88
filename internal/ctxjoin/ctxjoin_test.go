package ctxjoin

import (
	"context"
	"testing"
	"time"
)

type key struct{}

// TestWhileAny: the joined context keeps the first context's values, lives
// while any caller waits, ends when the last gives up, and release ends it.
func TestWhileAny(t *testing.T) {
	a, cancelA := context.WithCancel(context.WithValue(context.Background(), key{}, "a"))
	b, cancelB := context.WithCancel(context.Background())
	ctx, release := WhileAny(a, []context.Context{a, b})
	defer release()
	if ctx.Value(key{}) != "a" {
		t.Fatal("the joined context lost the first context's values")
	}
	cancelA()
	select {
	case <-ctx.Done():
		t.Fatal("ended while b still waits")
	case <-time.After(20 * time.Millisecond):
	}
	cancelB()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("did not end once every caller gave up")
	}

	c := context.Background()
	ctx, release = WhileAny(c, []context.Context{c})
	release()
	if ctx.Err() == nil {
		t.Fatal("release did not end the joined context")
	}
}
