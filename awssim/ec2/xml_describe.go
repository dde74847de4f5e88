package ec2

import "github.com/allotnet/allot/awssim/ec2query"

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
}

type xmlInstanceENIAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlInstanceENI struct {
	NetworkInterfaceID string                    `xml:"networkInterfaceId"`
	SubnetID           string                    `xml:"subnetId"`
	VPCID              string                    `xml:"vpcId"`
	Description        string                    `xml:"description"`
	OwnerID            string                    `xml:"ownerId"`
	Status             string                    `xml:"status"`
	MACAddress         string                    `xml:"macAddress"`
	PrivateIPAddress   string                    `xml:"privateIpAddress"`
	PrivateDNSName     string                    `xml:"privateDnsName"`
	SourceDestCheck    bool                      `xml:"sourceDestCheck"`
	InterfaceType      string                    `xml:"interfaceType"`
	Groups             []xmlGroup                `xml:"groupSet>item"`
	Attachment         *xmlInstanceENIAttachment `xml:"attachment,omitempty"`
	PrivateIPs         []xmlPrivateIP            `xml:"privateIpAddressesSet>item"`
	Prefixes           []xmlPrefix               `xml:"ipv4PrefixSet>item"`
}

type xmlInstance struct {
	InstanceID         string           `xml:"instanceId"`
	ImageID            string           `xml:"imageId"`
	State              xmlInstanceState `xml:"instanceState"`
	PrivateDNSName     string           `xml:"privateDnsName"`
	AMILaunchIndex     int              `xml:"amiLaunchIndex"`
	InstanceType       string           `xml:"instanceType"`
	LaunchTime         string           `xml:"launchTime"`
	Placement          xmlPlacement     `xml:"placement"`
	SubnetID           string           `xml:"subnetId"`
	VPCID              string           `xml:"vpcId"`
	PrivateIPAddress   string           `xml:"privateIpAddress"`
	SourceDestCheck    bool             `xml:"sourceDestCheck"`
	Groups             []xmlGroup       `xml:"groupSet>item"`
	Architecture       string           `xml:"architecture"`
	RootDeviceType     string           `xml:"rootDeviceType"`
	VirtualizationType string           `xml:"virtualizationType"`
	Hypervisor         string           `xml:"hypervisor"`
	Tags               []xmlTag         `xml:"tagSet>item"`
	NetworkInterfaces  []xmlInstanceENI `xml:"networkInterfaceSet>item"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type describeInstancesBody struct {
	ec2query.Meta
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type xmlVCPUInfo struct {
	DefaultVCPUs          int `xml:"defaultVCpus"`
	DefaultCores          int `xml:"defaultCores"`
	DefaultThreadsPerCore int `xml:"defaultThreadsPerCore"`
}

type xmlMemoryInfo struct {
	SizeInMiB int `xml:"sizeInMiB"`
}

type xmlNetworkCard struct {
	NetworkCardIndex         int    `xml:"networkCardIndex"`
	NetworkPerformance       string `xml:"networkPerformance"`
	MaximumNetworkInterfaces int    `xml:"maximumNetworkInterfaces"`
}

type xmlNetworkInfo struct {
	NetworkPerformance        string           `xml:"networkPerformance"`
	MaximumNetworkInterfaces  int              `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards       int              `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex   int              `xml:"defaultNetworkCardIndex"`
	NetworkCards              []xmlNetworkCard `xml:"networkCards>item"`
	IPv4AddressesPerInterface int              `xml:"ipv4AddressesPerInterface"`
	IPv6AddressesPerInterface int              `xml:"ipv6AddressesPerInterface"`
	IPv6Supported             bool             `xml:"ipv6Supported"`
	ENASupport                string           `xml:"enaSupport"`
}

type xmlProcessorInfo struct {
	SupportedArchitectures []string `xml:"supportedArchitectures>item"`
}

type xmlInstanceType struct {
	InstanceType                  string           `xml:"instanceType"`
	CurrentGeneration             bool             `xml:"currentGeneration"`
	BareMetal                     bool             `xml:"bareMetal"`
	Hypervisor                    string           `xml:"hypervisor"`
	BurstablePerformanceSupported bool             `xml:"burstablePerformanceSupported"`
	ProcessorInfo                 xmlProcessorInfo `xml:"processorInfo"`
	VCPUInfo                      xmlVCPUInfo      `xml:"vCpuInfo"`
	MemoryInfo                    xmlMemoryInfo    `xml:"memoryInfo"`
	NetworkInfo                   xmlNetworkInfo   `xml:"networkInfo"`
}

type describeInstanceTypesBody struct {
	ec2query.Meta
	InstanceTypes []xmlInstanceType `xml:"instanceTypeSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetARN               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VPCID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CIDRBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	DefaultForAZ            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	Tags                    []xmlTag `xml:"tagSet>item"`
}

type describeSubnetsBody struct {
	ec2query.Meta
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}
