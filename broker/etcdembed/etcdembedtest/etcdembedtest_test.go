package etcdembedtest

import (
	"context"
	"testing"
)

func TestStart(t *testing.T) {
	for i := 0; i < 3; i++ {
		cli := Start(t)
		if _, err := cli.Put(context.Background(), "/x", "y"); err != nil {
			t.Fatal(err)
		}
	}
}
