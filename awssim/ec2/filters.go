package ec2

import (
	"maps"
	"slices"
	"strings"

	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/internal/ec2filter"
)

// filter is one Filter.N of a Describe request: the item matches when any
// of its values for Name matches any of Values (EC2's OR within a filter,
// AND across filters). Values may use the * and ? wildcards.
type filter struct {
	name   string
	values []string
}

// fields extracts an item's values for each supported filter name; tags
// are handled separately (tag:KEY, tag-key, tag-value).
type fields[T any] map[string]func(T) []string

func readFilters(req *ec2query.Request) ([]filter, error) {
	var out []filter
	for _, n := range req.Params.List("Filter") {
		name, ok := n.String("Name")
		if !ok || name == "" {
			return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "The filter %s has no name", n.Key())
		}
		vals, err := n.StringList("Value")
		if err != nil {
			return nil, err
		}
		if len(vals) == 0 {
			return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "The filter '%s' requires at least one value", printable(name))
		}
		if len(vals) > 200 {
			return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "The filter '%s' has more than 200 values", printable(name))
		}
		out = append(out, filter{name: name, values: vals})
	}
	if len(out) > 50 {
		return nil, ec2query.Errorf(ec2query.CodeInvalidParameterValue, "A request may have at most 50 filters")
	}
	return out, nil
}

// checkFilters refuses filter names the action does not know.
func checkFilters[T any](fs []filter, known fields[T]) error {
	for _, f := range fs {
		if _, ok := known[f.name]; ok || strings.HasPrefix(f.name, "tag:") || f.name == "tag-key" || f.name == "tag-value" {
			continue
		}
		return ec2query.Errorf(ec2query.CodeInvalidParameterValue, "The filter '%s' is invalid", printable(f.name))
	}
	return nil
}

// matches reports whether item, with tags, passes every filter.
func matches[T any](item T, tags map[string]string, fs []filter, known fields[T]) bool {
	for _, f := range fs {
		var got []string
		switch {
		case strings.HasPrefix(f.name, "tag:"):
			v, ok := tags[strings.TrimPrefix(f.name, "tag:")]
			if !ok {
				return false
			}
			got = []string{v}
		case f.name == "tag-key":
			got = slices.Collect(maps.Keys(tags))
		case f.name == "tag-value":
			got = slices.Collect(maps.Values(tags))
		default:
			got = known[f.name](item)
		}
		if !anyMatch(got, f.values) {
			return false
		}
	}
	return true
}

func anyMatch(got, patterns []string) bool {
	for _, g := range got {
		for _, p := range patterns {
			if ec2filter.Match(p, g) {
				return true
			}
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func one(s string) []string { return []string{s} }

// readDescribe reads what every Describe action takes besides its own ID
// list — filters and a page of at most maxPage — then refuses parameters no
// one read and filter names the action doesn't know, in that order.
func readDescribe[T any](req *ec2query.Request, maxPage int, known fields[T]) ([]filter, page, error) {
	fs, err := readFilters(req)
	if err != nil {
		return nil, page{}, err
	}
	pg, err := readPage(req, 5, maxPage)
	if err != nil {
		return nil, page{}, err
	}
	if err := req.CheckUnused(); err != nil {
		return nil, page{}, err
	}
	if err := checkFilters(fs, known); err != nil {
		return nil, page{}, err
	}
	return fs, pg, nil
}
