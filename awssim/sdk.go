package awssim

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// SDKConfig returns an aws.Config for talking to an awssim endpoint with the
// real SDK: region us-east-1, static credentials, BaseEndpoint set, and no
// SDK retries, so throttles and faults surface to the caller (set Retryer
// or RetryMaxAttempts on the copy to change that).
func SDKConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDAWSSIMEXAMPLE", "awssim-secret", ""),
		BaseEndpoint: aws.String(endpoint),
		Retryer:      func() aws.Retryer { return aws.NopRetryer{} },
	}
}
