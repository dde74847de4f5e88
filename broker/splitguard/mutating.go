package splitguard

import "context"

// The mutating calls besides CreateENI: each passes the gate first.
// TestEveryMethodIsClassified fails when ec2client grows a method that is
// neither gated here nor known to be a read.

// AttachENI is gated.
func (c *Client) AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error) {
	if err := c.allow(ctx); err != nil {
		return "", err
	}
	return c.Client.AttachENI(ctx, eniID, instanceID, deviceIndex)
}

// SetDeleteOnTermination is gated.
func (c *Client) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string, on bool) error {
	if err := c.allow(ctx); err != nil {
		return err
	}
	return c.Client.SetDeleteOnTermination(ctx, eniID, attachmentID, on)
}

// AssignAddresses is gated.
func (c *Client) AssignAddresses(ctx context.Context, eniID string, count int, prefixes bool) ([]string, error) {
	if err := c.allow(ctx); err != nil {
		return nil, err
	}
	return c.Client.AssignAddresses(ctx, eniID, count, prefixes)
}

// UnassignAddresses is gated.
func (c *Client) UnassignAddresses(ctx context.Context, eniID string, addrs, prefixes []string) error {
	if err := c.allow(ctx); err != nil {
		return err
	}
	return c.Client.UnassignAddresses(ctx, eniID, addrs, prefixes)
}

// DetachENI is gated.
func (c *Client) DetachENI(ctx context.Context, attachmentID string, force bool) error {
	if err := c.allow(ctx); err != nil {
		return err
	}
	return c.Client.DetachENI(ctx, attachmentID, force)
}

// DeleteENI is gated: a broker that sees another state's ENIs as leaks must
// not collect them.
func (c *Client) DeleteENI(ctx context.Context, eniID string) error {
	if err := c.allow(ctx); err != nil {
		return err
	}
	return c.Client.DeleteENI(ctx, eniID)
}
