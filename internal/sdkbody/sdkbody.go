// Package sdkbody keeps the AWS SDK from closing the request body net/http
// is still reading.
package sdkbody

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Client sends each request with a copy of its body that nothing else
// closes; the broker's EC2 client, awssim.SDKConfig and the ipamd and
// Cilium models use it. smithy-go closes the body it handed to net/http
// as soon as the response headers are in, and its body's WriteTo then
// answers io.EOF; net/http, reading the body once more after sending it (to check it
// holds no more than Content-Length), takes that for a failed write and
// closes the connection under the response still being read. The call
// fails with "failed to decode response body … use of closed network
// connection" whenever the writing goroutine is held up past the server's
// answer: awssim on loopback answers within microseconds, so a loaded
// machine sees it, and a client without SDK retries (the broker's, tests
// that count calls, awssim.SDKConfig) fails. EC2 Query requests are small
// form bodies, so the copy costs nothing.
type Client struct{ Next aws.HTTPClient }

// maxRequestBody bounds the copy; EC2 Query requests are far smaller.
const maxRequestBody = 8 << 20

// Do sends req through c.Next with a body of its own.
func (c Client) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return c.Next.Do(req)
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxRequestBody+1))
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if len(b) > maxRequestBody {
		return nil, fmt.Errorf("request body over %d bytes", maxRequestBody)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r.ContentLength = int64(len(b))
	return c.Next.Do(r)
}
