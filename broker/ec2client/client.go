// Package ec2client is the broker's only way to EC2. It wraps the
// aws-sdk-go-v2 EC2 client behind allot's own types, sends every call through
// a client-side token bucket (ratelimit) so EC2 is never asked faster than its
// buckets refill, and turns every failure into an *APIError.
//
// The SDK's own retryer is off: its exponential backoff is what left pods
// waiting in the 500-node burst docs/benchmarks.md describes. A
// RequestLimitExceeded (someone else in the account used the tokens, or the
// account's limits are lower than the model) empties our bucket, teaches it
// EC2's real pace when the limiter adapts, and the call goes again on the
// next turn; every
// other error goes straight back to the caller, who knows whether the call is
// safe to repeat.
package ec2client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/internal/sdkbody"
)

// DefaultMaxThrottleRetries is how many times a throttled call is retried
// when Config leaves it zero.
const DefaultMaxThrottleRetries = 5

// maxIdleConns is the idle connections the default HTTP client keeps to the
// endpoint.
const maxIdleConns = 256

// Config configures a Client.
type Config struct {
	Region string
	// Endpoint overrides the EC2 endpoint (awssim's URL); empty means AWS's.
	Endpoint string
	// Credentials signs requests; nil means fixed test credentials, which
	// is what awssim expects.
	Credentials aws.CredentialsProvider
	// Limiter paces every call; nil means a limiter with the whole of each
	// bucket at real time.
	Limiter *ratelimit.Limiter
	// MaxThrottleRetries bounds retries after RequestLimitExceeded; 0 means
	// DefaultMaxThrottleRetries, negative means none.
	MaxThrottleRetries int
	// HTTPClient sends the requests; nil means the SDK's default client
	// with a larger idle connection pool.
	HTTPClient *http.Client
	// Logger receives throttling warnings; nil means slog.Default().
	Logger *slog.Logger
	// Meter receives the call counters and latencies (see instruments);
	// nil records nothing.
	Meter metric.Meter
	// Tracer makes a client span of every request, child of the caller's
	// span; nil is the process's global provider (a no-op unless main
	// installed one).
	Tracer trace.TracerProvider
}

// Client calls EC2. It is safe for concurrent use.
type Client struct {
	ec2     *ec2.Client
	limiter *ratelimit.Limiter
	retries int
	log     *slog.Logger
	ins     instruments

	mu        sync.Mutex
	calls     map[string]int64
	throttled map[string]int64
}

// New returns a Client. It reads no environment and no shared config files:
// everything comes from cfg.
func New(ctx context.Context, cfg Config) (*Client, error) {
	_ = ctx // kept for symmetry with SDK constructors that load config
	if cfg.Region == "" {
		return nil, errors.New("ec2client: region is required")
	}
	creds := cfg.Credentials
	if creds == nil {
		creds = credentials.NewStaticCredentialsProvider("AKIDALLOTTEST", "allot-test-secret", "")
	}
	awsCfg := aws.Config{
		Region:      cfg.Region,
		Credentials: aws.NewCredentialsCache(creds),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	if cfg.HTTPClient != nil {
		awsCfg.HTTPClient = cfg.HTTPClient
	} else {
		// The SDK keeps only 10 idle connections per host; a burst runs
		// many more calls than that in parallel to one endpoint, and would
		// otherwise open and close a connection per call.
		awsCfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns = maxIdleConns
			tr.MaxIdleConnsPerHost = maxIdleConns
		})
	}
	awsCfg.HTTPClient = sdkbody.Client{Next: awsCfg.HTTPClient}
	api := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	lim := cfg.Limiter
	if lim == nil {
		lim = ratelimit.New(ratelimit.Config{})
	}
	retries := cfg.MaxThrottleRetries
	switch {
	case retries == 0:
		retries = DefaultMaxThrottleRetries
	case retries < 0:
		retries = 0
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ins, err := newInstruments(cfg.Meter, cfg.Tracer)
	if err != nil {
		return nil, err
	}
	return &Client{
		ec2: api, limiter: lim, retries: retries, log: log, ins: ins,
		calls: map[string]int64{}, throttled: map[string]int64{},
	}, nil
}

// Limiter returns the limiter the client paces its calls with.
func (c *Client) Limiter() *ratelimit.Limiter { return c.limiter }

// Calls returns how many requests were sent, by EC2 action, throttled
// retries included (EC2 and awssim count those too).
func (c *Client) Calls() map[string]int64 { return c.snapshot(c.calls) }

// Throttled returns how many requests EC2 answered RequestLimitExceeded, by
// action.
func (c *Client) Throttled() map[string]int64 { return c.snapshot(c.throttled) }

func (c *Client) snapshot(m map[string]int64) map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *Client) count(m map[string]int64, action string) {
	c.mu.Lock()
	m[action]++
	c.mu.Unlock()
}

// call sends one EC2 request: it waits for a turn of the action's class,
// sends, tells the limiter how EC2 answered (with Config.Adapt it learns
// buckets tighter than its model), and on RequestLimitExceeded tries again
// on the next turn, up to the retry bound. filtered says whether a Describe
// carries a filter or pagination (it picks the bucket).
func call[T any](ctx context.Context, c *Client, action string, filtered bool, send func(context.Context) (T, error)) (T, error) {
	class := ratelimit.ClassOf(action, filtered)
	var zero T
	for attempt := 0; ; attempt++ {
		turn, err := c.limiter.Acquire(ctx, class)
		if err != nil {
			return zero, &APIError{Action: action, Err: fmt.Errorf("waiting for a %s token: %w", class, err)}
		}
		c.count(c.calls, action)
		start := time.Now()
		sctx, span := c.ins.start(ctx, action, class, attempt)
		out, err := send(sctx)
		c.ins.call(ctx, action, time.Since(start), err)
		endSpan(span, action, err)
		if err == nil {
			turn.Done(ratelimit.Accepted)
			return out, nil
		}
		apiErr := wrap(action, err)
		if !IsThrottle(apiErr) {
			if apiErr.Code != "" {
				// EC2 answered, so its bucket let the call through.
				turn.Done(ratelimit.Accepted)
			} else {
				turn.Done(ratelimit.Unknown)
			}
			return zero, apiErr
		}
		c.count(c.throttled, action)
		turn.Done(ratelimit.Throttled)
		if attempt >= c.retries {
			return zero, apiErr
		}
		// The bucket as the limiter now keeps it: size 1 and a slower
		// refill once it paces (EC2 throttles harder than the model).
		b := c.limiter.Bucket(class)
		c.log.Warn("ec2 throttled; retrying on the next turn",
			"action", action, "class", string(class), "attempt", attempt+1, "max_retries", c.retries,
			"bucket_size", b.Size, "bucket_refill", b.Refill)
	}
}

// wrap turns an SDK error into an *APIError carrying EC2's code and message
// when there is one.
func wrap(action string, err error) *APIError {
	e := &APIError{Action: action, Err: err}
	var api smithy.APIError
	if errors.As(err, &api) {
		e.Code, e.Message = api.ErrorCode(), api.ErrorMessage()
	}
	return e
}
