package enilinks

import (
	"fmt"
	"os"
	"testing"

	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/internal/netnstest"
)

func eni(id, mac string, device int) world.NetworkInterface {
	return world.NetworkInterface{ID: id, MAC: mac, Attachment: &world.Attachment{DeviceIndex: device}}
}

// TestLinksFollowAttachments: a link with the ENI's MAC appears on attach,
// goes on detach, and Close removes what is left; other instances' ENIs
// and unattached ones get none.
func TestLinksFollowAttachments(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	ns, err := netnstest.Create(fmt.Sprintf("enilinks-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Delete()
	l := New(map[string]string{"i-node": ns.Path}, nil)

	if err := l.Sync([]world.Instance{{ID: "i-node", NetworkInterfaces: []world.NetworkInterface{
		eni("eni-0", "02:00:00:00:00:10", 0)}}}); err != nil {
		t.Fatal(err)
	}
	l.OnAttach("i-node", eni("eni-1", "02:00:00:00:00:11", 1))
	l.OnAttach("i-other", eni("eni-9", "02:00:00:00:00:19", 1))                         // no namespace for it
	l.OnAttach("i-node", world.NetworkInterface{ID: "eni-x", MAC: "02:00:00:00:00:1f"}) // not attached
	l.OnAttach("i-node", eni("eni-1", "02:00:00:00:00:11", 1))                          // repeated: no error, one link

	want := func(name, mac string, present bool) {
		t.Helper()
		link, err := ns.NL.LinkByName(name)
		switch {
		case present && err != nil:
			t.Fatalf("%s: %v", name, err)
		case present && link.Attrs().HardwareAddr.String() != mac:
			t.Fatalf("%s has MAC %s, want %s", name, link.Attrs().HardwareAddr, mac)
		case !present && err == nil:
			t.Fatalf("%s is still there", name)
		}
	}
	want("eth0", "02:00:00:00:00:10", true)
	want("eth1", "02:00:00:00:00:11", true)
	if links, _ := ns.NL.LinkList(); len(links) != 5 { // lo, two ENIs, their peers
		t.Errorf("%d links in the namespace, want 5 (lo, eth0, eth1 and their peers)", len(links))
	}

	l.OnDetach("i-node", eni("eni-1", "02:00:00:00:00:11", 1))
	want("eth1", "", false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want("eth0", "", false)
	if links, _ := ns.NL.LinkList(); len(links) != 1 {
		t.Errorf("%d links left after Close, want only lo", len(links))
	}
}
