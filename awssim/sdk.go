package awssim

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/allotnet/allot/internal/sdkbody"
)

// SDKConfig returns an aws.Config for talking to an awssim endpoint with the
// real SDK: region us-east-1, static credentials, BaseEndpoint set, and no
// SDK retries, so throttles and faults surface to the caller (set Retryer
// or RetryMaxAttempts on the copy to change that). Each request goes with
// a body of its own (sdkbody): with no retries, the SDK closing the body
// net/http still reads would fail a call now and then.
func SDKConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDAWSSIMEXAMPLE", "awssim-secret", ""),
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   sdkbody.Client{Next: awshttp.NewBuildableClient()},
		Retryer:      func() aws.Retryer { return aws.NopRetryer{} },
	}
}
