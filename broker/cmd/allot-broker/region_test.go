package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isolateAWSEnv points the SDK's shared files at an empty directory and
// turns IMDS off, so the default chain sees only what the test sets.
func isolateAWSEnv(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
		"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestRegionFromTheSDKChain(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_REGION", "eu-west-3")
	region, creds, err := awsSettings(context.Background(), config{})
	if err != nil {
		t.Fatal(err)
	}
	if region != "eu-west-3" || creds == nil {
		t.Fatalf("region %q creds %v: want eu-west-3 from AWS_REGION and the SDK's chain", region, creds)
	}
}

func TestRegionFlagWinsOverEnvironment(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_REGION", "eu-west-3")
	region, _, err := awsSettings(context.Background(), config{ec2Region: "ap-south-1"})
	if err != nil || region != "ap-south-1" {
		t.Fatalf("region %q err %v: want the flag's ap-south-1", region, err)
	}
}

func TestNoRegionAnywhereIsAClearError(t *testing.T) {
	isolateAWSEnv(t)
	_, _, err := awsSettings(context.Background(), config{})
	if err == nil || !strings.Contains(err.Error(), "--ec2-region") {
		t.Fatalf("err = %v, want one saying to set --ec2-region or AWS_REGION", err)
	}
}

func TestEndpointOverrideKeepsTestCredentials(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_REGION", "eu-west-3")
	region, creds, err := awsSettings(context.Background(), config{ec2Endpoint: "http://127.0.0.1:4566"})
	if err != nil || region != defaultSimRegion || creds != nil {
		t.Fatalf("region %q creds %v err %v: want %s and ec2client's static test credentials", region, creds, err, defaultSimRegion)
	}
}
