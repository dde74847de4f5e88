package sdkbody

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// closingBody is the SDK's request body as far as this matters: once
// closed, it has nothing more to give.
type closingBody struct {
	r      *strings.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *closingBody) Close() error { b.closed = true; return nil }

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// TestBodyOutlivesTheSDKsClose checks that the body net/http gets is
// not the SDK's: closing the SDK's (which smithy-go does once the response
// headers are in) leaves the one being sent whole.
func TestBodyOutlivesTheSDKsClose(t *testing.T) {
	const form = "Action=DescribeInstances&Version=2016-11-15&InstanceId.1=i-0123456789abcdef0"
	sdk := &closingBody{r: strings.NewReader(form)}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", sdk)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(form))
	var sent []byte
	next := doFunc(func(r *http.Request) (*http.Response, error) {
		_ = sdk.Close() // the SDK, as the headers arrive
		var err error
		sent, err = io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body sent: %v", err)
		}
		if r.ContentLength != int64(len(form)) {
			t.Errorf("content length %d, want %d", r.ContentLength, len(form))
		}
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})
	if _, err := (Client{Next: next}).Do(req); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sent, []byte(form)) {
		t.Fatalf("sent %q, want %q", sent, form)
	}
}
