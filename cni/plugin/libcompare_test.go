package plugin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// libNetConf is the netconf as the plugin declared it with the CNI
// library's types.
type libNetConf struct {
	types.PluginConf
	AgentSocket string  `json:"agentSocket,omitempty"`
	Timeout     string  `json:"timeout,omitempty"`
	DelQueueDir *string `json:"delQueueDir,omitempty"`
	LogFormat   string  `json:"logFormat,omitempty"`
}

// TestNetConfFieldsMatchTheLibrary: each member of the netconf decodes
// into the plugin's field as into the library's (PluginConf's), to the
// same value, or fails with the same message but for the name of the Go
// type (cnispec.IPAM for types.IPAM).
func TestNetConfFieldsMatchTheLibrary(t *testing.T) {
	values := []string{`"s"`, `""`, `null`, `5`, `true`, `[]`, `{}`, `["a"]`, `{"type":"host-local"}`, `{"type":5}`,
		`{"nameservers":["10.0.0.2"],"domain":"d","search":["a"],"options":["o"]}`, `{"nameservers":"x"}`,
		`{"portMappings":true}`, `{"portMappings":"yes"}`, `[{"containerID":"c","ifname":"eth0"}]`, `[{"containerID":5}]`,
		`{"cniVersion":"1.1.0","ips":[]}`, `[null]`}
	keys := []string{"cniVersion", "name", "type", "capabilities", "ipam", "dns", "prevResult", "cni.dev/valid-attachments",
		"agentSocket", "timeout", "delQueueDir", "logFormat"}
	for _, k := range keys {
		for _, v := range values {
			var ours NetConf
			var lib libNetConf
			errOurs := json.Unmarshal([]byte(v), ours.field(k))
			libField := reflect.ValueOf(&lib).Elem().FieldByNameFunc(func(n string) bool { return jsonName(&lib, n) == k })
			errLib := json.Unmarshal([]byte(v), libField.Addr().Interface())
			switch {
			case (errOurs == nil) != (errLib == nil):
				t.Errorf("%s: %s: error %v, the library's %v", k, v, errOurs, errLib)
			case errOurs != nil:
				if strings.ReplaceAll(errOurs.Error(), "cnispec.", "types.") != errLib.Error() {
					t.Errorf("%s: %s: error\n %v\nthe library's\n %v", k, v, errOurs, errLib)
				}
			default:
				a, _ := json.Marshal(reflect.ValueOf(ours.field(k)).Elem().Interface())
				b, _ := json.Marshal(libField.Interface())
				if string(a) != string(b) {
					t.Errorf("%s: %s: decoded %s, the library's %s", k, v, a, b)
				}
			}
		}
	}
}

// jsonName is the JSON key of c's field (or embedded PluginConf's) named n.
func jsonName(c *libNetConf, n string) string {
	f, ok := reflect.TypeOf(c).Elem().FieldByName(n)
	if !ok || f.Anonymous {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// k8sArgsLib are the CNI_ARGS as the plugin declared them for the
// library's types.LoadArgs.
type k8sArgsLib struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString
	K8S_POD_NAME               types.UnmarshallableString
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString
	K8S_POD_UID                types.UnmarshallableString
}

// TestArgsMatchTheLibrary: CNI_ARGS parse to the same values, or fail with
// the same message, as with the library's types.LoadArgs.
func TestArgsMatchTheLibrary(t *testing.T) {
	cases := []string{"", "K8S_POD_NAME=web-0", "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u",
		"K8S_POD_NAME=", "K8S_POD_NAME", "K8S_POD_NAME=a=b", ";", "K8S_POD_NAME=a;", "COLOUR=blue", "COLOUR=blue;SIZE=big",
		"IgnoreUnknown=1;COLOUR=blue", "IgnoreUnknown=TRUE;COLOUR=blue", "COLOUR=blue;IgnoreUnknown=true",
		"IgnoreUnknown=0;COLOUR=blue", "IgnoreUnknown=False", "IgnoreUnknown=yes", "ignoreunknown=1;COLOUR=blue",
		"k8s_pod_name=x", "CommonArgs=x", "K8S_POD_NAME=a;K8S_POD_NAME=b", "=x", "K8S_POD_NAME=é"}
	for _, s := range cases {
		lib := &k8sArgsLib{}
		errLib := types.LoadArgs(s, lib)
		ours := &k8sArgs{}
		errOurs := ours.load(s)
		switch {
		case (errOurs == nil) != (errLib == nil):
			t.Errorf("%q: error %v, the library's %v", s, errOurs, errLib)
		case errOurs != nil:
			if errOurs.Error() != errLib.Error() {
				t.Errorf("%q: error\n %v\nthe library's\n %v", s, errOurs, errLib)
			}
		default:
			want := k8sArgs{string(lib.K8S_POD_NAMESPACE), string(lib.K8S_POD_NAME), string(lib.K8S_POD_INFRA_CONTAINER_ID), string(lib.K8S_POD_UID)}
			if *ours != want {
				t.Errorf("%q: %+v, the library's %+v", s, *ours, want)
			}
		}
	}
}
