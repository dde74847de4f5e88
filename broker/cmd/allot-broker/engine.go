package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/sync/errgroup"
)

// leaderWork builds the EC2 client once and returns what the elected
// replica runs each term: a fresh engine and reconciler (their in-memory
// state is a cache of etcd and EC2, rebuilt every term), stopped when the
// term ends. If either stops on its own, the other is stopped too and the
// replica resigns (broker/leader), so a standby takes over.
func leaderWork(ctx context.Context, cfg config, st *store.Store, log *slog.Logger) (func(context.Context) error, error) {
	creds, err := ec2Credentials(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lim := ratelimit.New(ratelimit.Config{Share: cfg.bucketShare, TimeScale: cfg.timeScale})
	ec2c, err := ec2client.New(ctx, ec2client.Config{
		Region: cfg.ec2Region, Endpoint: cfg.ec2Endpoint, Credentials: creds, Limiter: lim,
		Logger: log.With("component", "ec2client"),
	})
	if err != nil {
		return nil, err
	}
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) / cfg.timeScale) }
	return func(ctx context.Context) error {
		eng := executor.New(executor.Config{
			Cluster:   cfg.cluster,
			Store:     st,
			EC2:       ec2c,
			Logger:    log,
			Gather:    scaled(cfg.gather),
			GatherMax: scaled(cfg.gatherMax),
		}.WithTimeScale(cfg.timeScale))
		rec := reconciler.New(reconciler.Config{
			Cluster:  cfg.cluster,
			Store:    st,
			EC2:      ec2c,
			Logger:   log,
			Interval: scaled(time.Minute),
			Grace:    scaled(time.Minute),
		})
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return eng.Run(gctx) })
		g.Go(func() error { return rec.Run(gctx) })
		return g.Wait()
	}, nil
}

// ec2Credentials is nil (ec2client's static test credentials) against an
// endpoint override such as awssim, and the SDK's default chain (instance
// role, environment, shared files) against real EC2.
func ec2Credentials(ctx context.Context, cfg config) (aws.CredentialsProvider, error) {
	if cfg.ec2Endpoint != "" {
		return nil, nil
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.ec2Region))
	if err != nil {
		return nil, fmt.Errorf("load AWS credentials: %w", err)
	}
	return ac.Credentials, nil
}
