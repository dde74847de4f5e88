package ipamd

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// ownBody sends each request with a copy of its body that nothing else
// closes, as the broker's EC2 client does. smithy-go closes the body it
// handed to net/http as soon as the response headers are in, and its
// body's WriteTo then answers io.EOF; net/http, reading the body once more
// after sending it (to check it holds no more than Content-Length), takes
// that for a failed write and closes the connection under the response
// still being read. The call fails with "failed to decode response body …
// use of closed network connection" whenever the writing goroutine is held
// up past awssim's answer, as on a loaded machine, and with one SDK attempt
// (the model's tests use one, to count calls exactly) nothing retries it.
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
