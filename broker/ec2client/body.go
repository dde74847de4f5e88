package ec2client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// ownBody sends each request with a copy of its body that nothing else
// closes. The SDK closes the body it handed to net/http as soon as the
// response headers arrive, while net/http's writer may still be making its
// last read of it (checking the body holds no more than Content-Length);
// that read then fails, net/http closes the connection, and a response
// still being read fails with "use of closed network connection". A server
// that answers within microseconds (awssim on loopback) hits this several
// times in a hundred calls; EC2 across a network rarely does. EC2 Query
// requests are small form bodies, so the copy costs nothing.
type ownBody struct{ next aws.HTTPClient }

// maxRequestBody bounds the copy; EC2 Query requests are far smaller.
const maxRequestBody = 8 << 20

func (c ownBody) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return c.next.Do(req)
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
	return c.next.Do(r)
}
