// Package identity reads a node's identity and its ENIs from the EC2 instance
// metadata service (IMDS) through the aws-sdk-go-v2 imds client.
package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// MetadataAPI is the part of the IMDS client this package uses.
type MetadataAPI interface {
	GetMetadata(ctx context.Context, in *imds.GetMetadataInput, optFns ...func(*imds.Options)) (*imds.GetMetadataOutput, error)
}

var _ MetadataAPI = (*imds.Client)(nil)

// ErrNotFound reports metadata IMDS doesn't show (HTTP 404), such as an ENI
// that is not, or not yet, attached.
var ErrNotFound = errors.New("not found in instance metadata")

// NewClient returns an IMDS client for endpoint (for example
// http://169.254.169.254 on EC2, or an awssim address). The endpoint is
// required: falling back to a default would let a test or a misconfigured
// agent read some other machine's identity.
func NewClient(endpoint string) (*imds.Client, error) {
	if endpoint == "" {
		return nil, errors.New("imds endpoint is required")
	}
	return imds.New(imds.Options{
		Endpoint: endpoint,
		// IMDSv2 only: a token failure must surface, not silently degrade.
		EnableFallback: aws.FalseTernary,
	}), nil
}

// getString fetches one metadata path and trims surrounding whitespace. A 404
// is reported as ErrNotFound so callers can tell "absent" from "failed".
func getString(ctx context.Context, c MetadataAPI, path string) (string, error) {
	out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		var se interface{ HTTPStatusCode() int }
		if errors.As(err, &se) && se.HTTPStatusCode() == http.StatusNotFound {
			return "", fmt.Errorf("imds %s: %w", path, ErrNotFound)
		}
		return "", fmt.Errorf("imds %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		return "", fmt.Errorf("imds %s: read: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// getList fetches a newline-separated list. IMDS answers 404 for an empty
// list, so a 404 here is an empty list, not an error.
func getList(ctx context.Context, c MetadataAPI, path string) ([]string, error) {
	s, err := getString(ctx, c, path)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

func getAddrs(ctx context.Context, c MetadataAPI, path string) ([]netip.Addr, error) {
	lines, err := getList(ctx, c, path)
	if err != nil || len(lines) == 0 {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(lines))
	for _, l := range lines {
		a, err := netip.ParseAddr(l)
		if err != nil {
			return nil, fmt.Errorf("imds %s: %w", path, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func getPrefixes(ctx context.Context, c MetadataAPI, path string) ([]netip.Prefix, error) {
	lines, err := getList(ctx, c, path)
	if err != nil || len(lines) == 0 {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(lines))
	for _, l := range lines {
		p, err := netip.ParsePrefix(l)
		if err != nil {
			return nil, fmt.Errorf("imds %s: %w", path, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func getInt(ctx context.Context, c MetadataAPI, path string) (int, error) {
	s, err := getString(ctx, c, path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("imds %s: %w", path, err)
	}
	return n, nil
}
