package etcdembed

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

func TestStartPutGetRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))

	srv, err := Start(ctx, Config{Dir: dir, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/k", "v1"); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	srv.Close()
	srv.Close() // idempotent

	// Same directory, new ports: the data survives.
	srv, err = Start(ctx, Config{Dir: dir, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err = srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart got %v, want v1", resp.Kvs)
	}
	if bytes.Contains(logs.Bytes(), []byte("level=INFO")) {
		t.Errorf("etcd info logs leaked through:\n%s", logs.String())
	}
}

func TestStartRequiresDir(t *testing.T) {
	if _, err := Start(context.Background(), Config{}); err == nil {
		t.Fatal("Start without Dir succeeded")
	}
}
