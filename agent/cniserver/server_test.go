package cniserver_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/cniserver/cniservertest"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

func client(t *testing.T, socket string) allotv1.CNIServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return allotv1.NewCNIServiceClient(conn)
}

func addReq(id string) *allotv1.CNIRequest {
	return &allotv1.CNIRequest{
		Attachment: &allotv1.Attachment{Network: "allot", ContainerId: id, Ifname: "eth0"},
		Netns:      "/run/netns/allot-t-" + id,
	}
}

// TestErrorTableOverTheWire: on gRPC and on the plugin's wire alike, every
// domain error, wrapped as a backend would, reaches the client as its table
// code with the full message; other errors, including a gRPC status from a
// call the backend made, are Internal.
func TestErrorTableOverTheWire(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			b := cniservertest.NewBackend()
			c := clientOn(t, wire, cniservertest.Serve(t, b).Socket)
			cases := []struct {
				err  error
				want codes.Code
			}{
				{errors.New("netlink: no such device"), codes.Internal},
				{status.Error(codes.Unavailable, "broker down"), codes.Internal},
			}
			for _, ec := range cniserver.ErrorCodes {
				cases = append(cases, struct {
					err  error
					want codes.Code
				}{fmt.Errorf("add allot/x/eth0: %w", ec.Err), ec.Code})
			}
			for _, tc := range cases {
				b.Fail("add", tc.err)
				_, err := c.Add(t.Context(), addReq("abc"))
				st, _ := status.FromError(err)
				if st.Code() != tc.want || !strings.Contains(st.Message(), tc.err.Error()) {
					t.Errorf("backend error %q: client got %s %q, want %s with the message", tc.err, st.Code(), st.Message(), tc.want)
				}
			}
		})
	}
}

// TestServerValidates: incomplete keys and a missing netns never reach the
// backend.
func TestServerValidates(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			b := cniservertest.NewBackend(addrs(1)...)
			c := clientOn(t, wire, cniservertest.Serve(t, b).Socket)
			bad := []*allotv1.CNIRequest{
				{Netns: "/n"},
				{Attachment: &allotv1.Attachment{ContainerId: "a", Ifname: "eth0"}, Netns: "/n"},
				{Attachment: &allotv1.Attachment{Network: "allot", Ifname: "eth0"}, Netns: "/n"},
				{Attachment: &allotv1.Attachment{Network: "allot", ContainerId: "a"}, Netns: "/n"},
				{Attachment: &allotv1.Attachment{Network: "allot", ContainerId: "a", Ifname: "eth0"}},
			}
			for _, r := range bad {
				if _, err := c.Add(t.Context(), r); status.Code(err) != codes.InvalidArgument {
					t.Errorf("Add(%v) = %v, want InvalidArgument", r, err)
				}
			}
			if _, err := c.Check(t.Context(), bad[4]); status.Code(err) != codes.InvalidArgument {
				t.Errorf("Check without netns = %v, want InvalidArgument", err)
			}
			// DEL may come without a netns: the runtime may have removed it.
			if _, err := c.Del(t.Context(), bad[4]); err != nil {
				t.Errorf("Del without netns: %v", err)
			}
			if _, err := c.GC(t.Context(), &allotv1.CNIGCRequest{}); status.Code(err) != codes.InvalidArgument {
				t.Errorf("GC without network = %v, want InvalidArgument", err)
			}
			wrongNet := &allotv1.CNIGCRequest{Network: "allot", Valid: []*allotv1.Attachment{{Network: "other", ContainerId: "a", Ifname: "eth0"}}}
			if _, err := c.GC(t.Context(), wrongNet); status.Code(err) != codes.InvalidArgument {
				t.Errorf("GC with another network's attachment = %v, want InvalidArgument", err)
			}
			if got := b.Calls("add") + b.Calls("check") + b.Calls("gc"); got != 0 {
				t.Errorf("invalid requests reached the backend %d times", got)
			}
		})
	}
}

// TestGCOverTheWire: valid attachments without a network take the GC's,
// and the removed list comes back.
func TestGCOverTheWire(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			b := cniservertest.NewBackend(addrs(3)...)
			c := clientOn(t, wire, cniservertest.Serve(t, b).Socket)
			for _, id := range []string{"a", "b", "c"} {
				if _, err := c.Add(t.Context(), addReq(id)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := c.GC(t.Context(), &allotv1.CNIGCRequest{Network: "allot", Valid: []*allotv1.Attachment{
				{ContainerId: "a", Ifname: "eth0"}, {Network: "allot", ContainerId: "b", Ifname: "eth0"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Removed) != 1 || res.Removed[0].ContainerId != "c" {
				t.Errorf("removed %v, want only c", res.Removed)
			}
			gc := b.GCRequests()[0]
			if len(gc.Valid) != 2 || gc.Valid[0] != (cniserver.Attachment{Network: "allot", ContainerID: "a", IfName: "eth0"}) {
				t.Errorf("backend got %+v", gc)
			}
		})
	}
}

// TestServerChecksKeysByCNIRules: the server checks every key by CNI's own
// rules, served on a bare grpc.Server as the agent's is (no interceptor):
// a key that would give a host veth alias or checkpoint record a '/', a
// ':' or an over-long interface name never reaches the backend, whichever
// verb carries it.
func TestServerChecksKeysByCNIRules(t *testing.T) {
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			b := cniservertest.NewBackend(addrs(1)...)
			c := clientOn(t, wire, cniservertest.Serve(t, b).Socket)
			keys := []*allotv1.Attachment{
				{Network: "allot", ContainerId: "../../etc", Ifname: "eth0"},
				{Network: "allot", ContainerId: "abc", Ifname: "eth0:1"},
				{Network: "allot", ContainerId: "abc", Ifname: "averyveryverylongname"},
				{Network: "allot/x", ContainerId: "abc", Ifname: "eth0"},
				{Network: "allot", ContainerId: "-abc", Ifname: "eth0"},
			}
			for _, k := range keys {
				r := &allotv1.CNIRequest{Attachment: k, Netns: "/run/netns/allot-t-x"}
				if _, err := c.Add(t.Context(), r); status.Code(err) != codes.InvalidArgument {
					t.Errorf("Add(%v) = %v, want InvalidArgument", k, err)
				}
				if _, err := c.Del(t.Context(), r); status.Code(err) != codes.InvalidArgument {
					t.Errorf("Del(%v) = %v, want InvalidArgument", k, err)
				}
				if _, err := c.Check(t.Context(), r); status.Code(err) != codes.InvalidArgument {
					t.Errorf("Check(%v) = %v, want InvalidArgument", k, err)
				}
				gc := &allotv1.CNIGCRequest{Network: "allot", Valid: []*allotv1.Attachment{{ContainerId: k.ContainerId, Ifname: k.Ifname}}}
				if k.Network != "allot" {
					gc.Network = k.Network
				}
				if _, err := c.GC(t.Context(), gc); status.Code(err) != codes.InvalidArgument {
					t.Errorf("GC(%v) = %v, want InvalidArgument", gc, err)
				}
			}
			if n := b.TotalCalls(); n != 0 {
				t.Errorf("keys CNI refuses reached the backend %d times", n)
			}
		})
	}
}
