// Package ec2query speaks the EC2 Query protocol: it decodes the form bodies
// the aws-sdk-go-v2 ec2 client sends (Action, Version and flattened lists
// such as Filter.1.Value.2 or TagSpecification.1.Tag.1.Key) and encodes XML
// responses and EC2 error bodies the SDK parses.
package ec2query

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Limits on what a request may contain; beyond them the request is refused
// rather than decoded, so a hostile body cannot make the server allocate much.
const (
	MaxBodyBytes = 1 << 20
	maxParams    = 4096
	maxKeyLen    = 256
	maxSegments  = 8
)

// Request is a decoded EC2 Query request.
type Request struct {
	Action  string
	Version string
	// Params holds every parameter except Action and Version.
	Params *Node
}

// ReadRequest decodes an HTTP request: a POST with a form body, or a GET with
// the parameters in the query string (EC2 accepts both).
func ReadRequest(r *http.Request) (*Request, error) {
	switch r.Method {
	case http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		if err != nil {
			return nil, Errorf(CodeMalformedQueryString, "reading the request body: %v", err)
		}
		if len(body) > MaxBodyBytes {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeRequestEntityTooLarge, Message: "The request body is too large"}
		}
		if len(body) == 0 && r.URL.RawQuery != "" {
			return DecodeRequest([]byte(r.URL.RawQuery))
		}
		return DecodeRequest(body)
	case http.MethodGet:
		return DecodeRequest([]byte(r.URL.RawQuery))
	}
	return nil, &Error{Status: http.StatusMethodNotAllowed, Code: CodeUnsupportedHTTPMethod, Message: "The HTTP method " + r.Method + " is not supported"}
}

// DecodeRequest decodes a form-encoded query body.
func DecodeRequest(body []byte) (*Request, error) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, Errorf(CodeMalformedQueryString, "The query string is malformed: %v", err)
	}
	if len(vals) > maxParams {
		return nil, Errorf(CodeMalformedQueryString, "The request has more than %d parameters", maxParams)
	}
	req := &Request{Params: &Node{}}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic errors
	for _, k := range keys {
		vs := vals[k]
		if len(vs) > 1 {
			return nil, Errorf(CodeMalformedQueryString, "The parameter %s is given more than once", printable(k))
		}
		v := vs[0]
		switch k {
		case "Action":
			req.Action = v
			continue
		case "Version":
			req.Version = v
			continue
		}
		if err := checkKey(k); err != nil {
			return nil, err
		}
		n := req.Params
		for seg := range strings.SplitSeq(k, ".") {
			n = n.child(seg, true)
		}
		n.value, n.hasValue = v, true
	}
	if req.Action == "" {
		return nil, Errorf(CodeMissingAction, "The request must contain the parameter Action")
	}
	return req, nil
}

func checkKey(k string) error {
	if len(k) > maxKeyLen || strings.Count(k, ".") >= maxSegments {
		return Errorf(CodeMalformedQueryString, "The parameter name '%s' is too long", printable(k))
	}
	for seg := range strings.SplitSeq(k, ".") {
		if seg == "" {
			return Errorf(CodeMalformedQueryString, "The parameter name '%s' has an empty component", printable(k))
		}
	}
	return nil
}

// printable shortens and sanitises a client-supplied name for an error message.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// Unused returns, sorted, the parameters no handler read. A handler calls it
// after reading everything it understands and refuses the request with
// UnknownParameter when it is not empty.
func (r *Request) Unused() []string {
	out := r.Params.unused(nil)
	slices.Sort(out)
	return out
}

// CheckUnused returns an UnknownParameter error naming the first parameter
// no handler read, or nil.
func (r *Request) CheckUnused() error {
	if u := r.Unused(); len(u) > 0 {
		return Errorf(CodeUnknownParameter, "The parameter %s is not recognized", printable(u[0]))
	}
	return nil
}
