package world

import "time"

// FragmentSubnet takes one address in every /28 block of the subnet that is
// wholly free, as another tenant's scattered addresses would, so the subnet
// keeps most of its free addresses but can give no /28 prefix:
// AssignPrivateIpAddresses and CreateNetworkInterface asking for prefixes
// then fail with InsufficientCidrBlocks, secondary addresses still work.
// The taken addresses belong to no ENI and count as in use in
// DescribeSubnets. It returns how many it took.
func (w *World) FragmentSubnet(id string) (int, error) {
	taken := 0
	err := w.do(func(_ time.Time) error {
		s, ok := w.subnets[id]
		if !ok {
			return errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
		p := s.pool
		for b := range p.blocks() {
			if !p.blockFree(b) {
				continue
			}
			p.set(b*16 + 8)
			p.free--
			taken++
		}
		return nil
	})
	return taken, err
}
