package ec2

import (
	"strconv"
	"strings"

	"github.com/allotnet/allot/awssim/ec2query"
)

// page is the pagination a Describe request asked for.
type page struct {
	max   int    // 0: no MaxResults, everything in one answer
	after uint64 // items with a sequence number above this
}

const tokenPrefix = "awssim1."

// readPage reads MaxResults and NextToken; lo and hi bound MaxResults as
// EC2 does for the action.
func readPage(req *ec2query.Request, lo, hi int) (page, error) {
	var p page
	m, ok, err := req.Params.Int("MaxResults")
	if err != nil {
		return p, err
	}
	if ok {
		if m < lo || m > hi {
			return p, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "Value (%d) for parameter maxResults is invalid. Expecting a value between %d and %d.", m, lo, hi)
		}
		p.max = m
	}
	if tok, ok := req.Params.String("NextToken"); ok && tok != "" {
		seq, err := strconv.ParseUint(strings.TrimPrefix(tok, tokenPrefix), 36, 64)
		if !strings.HasPrefix(tok, tokenPrefix) || err != nil {
			return p, ec2query.Errorf(ec2query.CodeInvalidPaginationToken, "Invalid pagination token %q", printable(tok))
		}
		p.after = seq
		if p.max == 0 {
			p.max = hi
		}
	}
	return p, nil
}

// paginate returns the page of items (in sequence order) and the token for
// the next one, or "" when this is the last page.
func paginate[T any](items []T, seq func(T) uint64, p page) ([]T, string) {
	start := 0
	for start < len(items) && seq(items[start]) <= p.after {
		start++
	}
	items = items[start:]
	if p.max == 0 || len(items) <= p.max {
		return items, ""
	}
	items = items[:p.max]
	return items, tokenPrefix + strconv.FormatUint(seq(items[len(items)-1]), 36)
}
