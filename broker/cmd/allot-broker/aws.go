package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

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
