package main

import (
	"context"
	"errors"
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
	region, creds, err := awsSettings(ctx, cfg)
	if err != nil {
		return nil, err
	}
	log.Info("EC2 settings", "region", region, "endpoint", cfg.ec2Endpoint)
	lim := ratelimit.New(ratelimit.Config{Share: cfg.bucketShare, TimeScale: cfg.timeScale})
	ec2c, err := ec2client.New(ctx, ec2client.Config{
		Region: region, Endpoint: cfg.ec2Endpoint, Credentials: creds, Limiter: lim,
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

// defaultSimRegion is the region used against an endpoint override such as
// awssim when --ec2-region is not given; awssim answers in any region.
const defaultSimRegion = "us-east-1"

// awsSettings returns the region and credentials. Against an endpoint
// override (awssim) they are --ec2-region (default us-east-1) and nil,
// ec2client's static test credentials. Against real EC2 they come from the
// SDK's default chain (AWS_REGION, IRSA's web identity, EKS Pod Identity,
// the instance role, shared files), with --ec2-region overriding only the
// region when set.
func awsSettings(ctx context.Context, cfg config) (string, aws.CredentialsProvider, error) {
	if cfg.ec2Endpoint != "" {
		if cfg.ec2Region != "" {
			return cfg.ec2Region, nil, nil
		}
		return defaultSimRegion, nil, nil
	}
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.ec2Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.ec2Region))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return "", nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if ac.Region == "" {
		return "", nil, errors.New("no AWS region: set --ec2-region, or AWS_REGION (IRSA and EKS Pod Identity set it)")
	}
	return ac.Region, ac.Credentials, nil
}
