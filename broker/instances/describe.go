package instances

import (
	"context"
	"errors"
	"slices"

	"github.com/allotnet/allot/broker/ec2client"
)

// maxFilterValues is the most values EC2 accepts in one Describe filter.
const maxFilterValues = 200

// describeEach describes ids in calls of at most maxFilterValues; when EC2
// refuses a batch because one ID does not exist, it describes that batch
// one by one so the others are still found.
func describeEach[T any](ctx context.Context, ids []string, describe func(context.Context, []string) ([]T, error)) ([]T, error) {
	var out []T
	var errs []error
	for chunk := range slices.Chunk(ids, maxFilterValues) {
		got, err := describeBatch(ctx, chunk, describe)
		out = append(out, got...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

func describeBatch[T any](ctx context.Context, ids []string, describe func(context.Context, []string) ([]T, error)) ([]T, error) {
	out, err := describe(ctx, ids)
	if err == nil || !ec2client.IsNotFound(err) || len(ids) == 1 {
		return out, err
	}
	out = nil
	var errs []error
	for _, id := range ids {
		one, err := describe(ctx, []string{id})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, one...)
	}
	return out, errors.Join(errs...)
}
