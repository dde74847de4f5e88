package world

import (
	"maps"
	"strings"
	"time"
)

// maxTags is EC2's limit of tags per resource.
const maxTags = 50

func validateTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return errorf(CodeTagLimitExceeded, "The maximum number of tags (%d) for a resource has been reached.", maxTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > 128 {
			return errorf(CodeInvalidParameterValue, "Tag keys must be 1 to 128 characters")
		}
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return errorf(CodeInvalidParameterValue, "Tag keys starting with 'aws:' are reserved for internal use")
		}
		if len(v) > 256 {
			return errorf(CodeInvalidParameterValue, "Tag values must be at most 256 characters")
		}
	}
	return nil
}

// tagsOfLocked returns the tag map of any taggable resource and a function
// that marks it changed.
func (w *World) tagsOfLocked(id string) (map[string]string, func(), error) {
	switch ResourcePrefix(id) {
	case PrefixENI:
		if e, ok := w.enis[id]; ok {
			return e.tags, e.touch, nil
		}
		return nil, nil, eniNotFound(id)
	case PrefixInstance:
		if i, ok := w.instances[id]; ok {
			return i.tags, func() {}, nil
		}
		return nil, nil, instanceNotFound(id)
	case PrefixSubnet:
		if s, ok := w.subnets[id]; ok {
			return s.tags, func() {}, nil
		}
		return nil, nil, subnetNotFound(id)
	case PrefixVPC:
		if v, ok := w.vpcs[id]; ok {
			return v.tags, func() {}, nil
		}
		return nil, nil, errorf("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", id)
	}
	return nil, nil, errorf(CodeInvalidID, "The ID '%s' is not valid", shorten(id))
}

// CreateTags adds or overwrites tags on every resource, or on none if one
// of them does not exist or would exceed the tag limit.
func (w *World) CreateTags(resourceIDs []string, tags map[string]string) error {
	if err := validateTags(tags); err != nil {
		return err
	}
	return w.do(func(time.Time) error {
		type target struct {
			tags  map[string]string
			touch func()
		}
		var ts []target
		for _, id := range resourceIDs {
			m, touch, err := w.tagsOfLocked(id)
			if err != nil {
				return err
			}
			merged := maps.Clone(m)
			maps.Copy(merged, tags)
			if len(merged) > maxTags {
				return errorf(CodeTagLimitExceeded, "The maximum number of tags (%d) for resource %s has been reached.", maxTags, id)
			}
			ts = append(ts, target{m, touch})
		}
		for _, t := range ts {
			maps.Copy(t.tags, tags)
			t.touch()
		}
		return nil
	})
}

// TagFilter names a tag to delete; with Value set, only a tag with that
// exact value is deleted.
type TagFilter struct {
	Key   string
	Value *string
}

// DeleteTags removes tags from every resource.
func (w *World) DeleteTags(resourceIDs []string, filters []TagFilter) error {
	return w.do(func(time.Time) error {
		for _, id := range resourceIDs {
			if _, _, err := w.tagsOfLocked(id); err != nil {
				return err
			}
		}
		for _, id := range resourceIDs {
			m, touch, _ := w.tagsOfLocked(id)
			if len(filters) == 0 {
				clear(m)
			}
			for _, f := range filters {
				if v, ok := m[f.Key]; ok && (f.Value == nil || *f.Value == v) {
					delete(m, f.Key)
				}
			}
			touch()
		}
		return nil
	})
}
