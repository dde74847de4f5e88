package burst

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// IMDS timing of the harness's agents. The SDK's IMDS client gives up a
// dial after 250 ms and a response after 500 ms, three attempts in all:
// right for a node's own link-local IMDS, which answers at once or is not
// there. Here thousands of agents share the harness's cores with awssim,
// which serves every instance's IMDS, and a request that waits a moment
// for a CPU is not an IMDS that is missing. So the harness's agents wait
// longer and try more often; what the agent does with an answer is
// unchanged.
const (
	imdsDialTimeout   = 5 * time.Second
	imdsHeaderTimeout = 10 * time.Second
	imdsAttempts      = 8
	imdsMaxBackoff    = 2 * time.Second
)

// imdsClients makes the harness's agents' IMDS clients. They share one
// HTTP transport: every instance's IMDS is its own host:port, so each agent
// keeps its own idle connection in it, one at most: thousands of agents
// and awssim's thousands of listeners share a process's file limit.
type imdsClients struct {
	http *http.Client
}

func newIMDSClients() *imdsClients {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: imdsDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: imdsHeaderTimeout,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       90 * time.Second,
	}
	return &imdsClients{http: &http.Client{Transport: tr}}
}

// client returns an IMDS client for one instance's endpoint, IMDSv2 only
// like the agent's own (identity.NewClient).
func (c *imdsClients) client(endpoint string) (*imds.Client, error) {
	if endpoint == "" {
		return nil, errors.New("imds endpoint is required")
	}
	return imds.New(imds.Options{
		Endpoint:       endpoint,
		EnableFallback: aws.FalseTernary,
		// A plain *http.Client: the SDK puts its short timeouts only on
		// the client it builds itself.
		HTTPClient: c.http,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = imdsAttempts
			o.MaxBackoff = imdsMaxBackoff
			// Every agent retries on its own; no shared retry budget
			// that one slow moment could drain.
			o.RateLimiter = ratelimit.None
		}),
		DisableDefaultMaxBackoff: true,
	}), nil
}

// closeIdle closes the transport's idle connections.
func (c *imdsClients) closeIdle() { c.http.CloseIdleConnections() }
