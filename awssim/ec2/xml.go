package ec2

import (
	"strings"
	"time"

	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/world"
)

// The types below are EC2's response elements, named as the SDK's
// deserializers (service/ec2/deserializers.go) read them. List members are
// <item> elements inside a "...Set" element.

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName,omitempty"`
}

type xmlPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

type xmlPrefix struct {
	IPv4Prefix string `xml:"ipv4Prefix"`
}

type xmlAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId,omitempty"`
	InstanceOwnerID     string `xml:"instanceOwnerId,omitempty"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlENI struct {
	NetworkInterfaceID string         `xml:"networkInterfaceId"`
	SubnetID           string         `xml:"subnetId"`
	VPCID              string         `xml:"vpcId"`
	AvailabilityZone   string         `xml:"availabilityZone"`
	Description        string         `xml:"description"`
	OwnerID            string         `xml:"ownerId"`
	RequesterManaged   bool           `xml:"requesterManaged"`
	Status             string         `xml:"status"`
	MACAddress         string         `xml:"macAddress"`
	PrivateIPAddress   string         `xml:"privateIpAddress"`
	PrivateDNSName     string         `xml:"privateDnsName"`
	SourceDestCheck    bool           `xml:"sourceDestCheck"`
	InterfaceType      string         `xml:"interfaceType"`
	Groups             []xmlGroup     `xml:"groupSet>item"`
	Attachment         *xmlAttachment `xml:"attachment,omitempty"`
	PrivateIPs         []xmlPrivateIP `xml:"privateIpAddressesSet>item"`
	Prefixes           []xmlPrefix    `xml:"ipv4PrefixSet>item"`
	Tags               []xmlTag       `xml:"tagSet>item"`
}

// timeFormat is EC2's timestamp form, which the SDK parses.
const timeFormat = "2006-01-02T15:04:05.000Z"

func xmlTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// dnsName is EC2's private DNS name of an address in us-east-1.
func dnsName(ip, region string) string {
	name := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if region == "us-east-1" {
		return name + ".ec2.internal"
	}
	return name + "." + region + ".compute.internal"
}

func xmlTags(m map[string]string) []xmlTag {
	out := make([]xmlTag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, xmlTag{Key: k, Value: m[k]})
	}
	return out
}

func xmlGroups(ids []string) []xmlGroup {
	out := make([]xmlGroup, len(ids))
	for i, id := range ids {
		out[i] = xmlGroup{GroupID: id, GroupName: "default"}
	}
	return out
}

func (s *Server) xmlPrivateIPs(e *world.NetworkInterface) []xmlPrivateIP {
	region := s.world.Region()
	out := []xmlPrivateIP{{PrivateIPAddress: e.PrivateIP, PrivateDNSName: dnsName(e.PrivateIP, region), Primary: true}}
	for _, a := range e.SecondaryIPs {
		out = append(out, xmlPrivateIP{PrivateIPAddress: a, PrivateDNSName: dnsName(a, region)})
	}
	return out
}

func xmlPrefixes(ps []string) []xmlPrefix {
	out := make([]xmlPrefix, len(ps))
	for i, p := range ps {
		out[i] = xmlPrefix{IPv4Prefix: p}
	}
	return out
}

func (s *Server) xmlAttachment(a *world.Attachment) *xmlAttachment {
	if a == nil {
		return nil
	}
	return &xmlAttachment{
		AttachmentID: a.ID, InstanceID: a.InstanceID, InstanceOwnerID: s.world.AccountID(),
		DeviceIndex: a.DeviceIndex, Status: a.Status, AttachTime: xmlTime(a.AttachTime),
		DeleteOnTermination: a.DeleteOnTermination,
	}
}

func (s *Server) xmlENI(e *world.NetworkInterface) xmlENI {
	return xmlENI{
		NetworkInterfaceID: e.ID, SubnetID: e.SubnetID, VPCID: e.VPCID, AvailabilityZone: e.AvailabilityZone,
		Description: e.Description, OwnerID: s.world.AccountID(), RequesterManaged: e.RequesterManaged,
		Status: e.Status, MACAddress: e.MAC, PrivateIPAddress: e.PrivateIP,
		PrivateDNSName: dnsName(e.PrivateIP, s.world.Region()), SourceDestCheck: e.SourceDestCheck,
		InterfaceType: e.InterfaceType, Groups: xmlGroups(e.SecurityGroups), Attachment: s.xmlAttachment(e.Attachment),
		PrivateIPs: s.xmlPrivateIPs(e), Prefixes: xmlPrefixes(e.Prefixes), Tags: xmlTags(e.Tags),
	}
}

type returnBody struct {
	ec2query.Meta
	Return bool `xml:"return"`
}

type createNetworkInterfaceBody struct {
	ec2query.Meta
	NetworkInterface xmlENI `xml:"networkInterface"`
	ClientToken      string `xml:"clientToken,omitempty"`
}

type describeNetworkInterfacesBody struct {
	ec2query.Meta
	NetworkInterfaces []xmlENI `xml:"networkInterfaceSet>item"`
	NextToken         string   `xml:"nextToken,omitempty"`
}

type attachNetworkInterfaceBody struct {
	ec2query.Meta
	AttachmentID     string `xml:"attachmentId"`
	NetworkCardIndex int    `xml:"networkCardIndex"`
}

type xmlAssignedIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
}

type assignPrivateIPAddressesBody struct {
	ec2query.Meta
	NetworkInterfaceID string          `xml:"networkInterfaceId"`
	AssignedIPs        []xmlAssignedIP `xml:"assignedPrivateIpAddressesSet>item"`
	AssignedPrefixes   []xmlPrefix     `xml:"assignedIpv4PrefixSet>item"`
	Return             bool            `xml:"return"`
}
