package plugin

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDecodeMatchesTheLibrary: the netconf decoded member by member is the
// NetConf json.Unmarshal makes of the whole object, for every key allot
// has a field for, in every shape (values, nulls, wrong types, repeats),
// and a value of the wrong type is an error in both.
func TestDecodeMatchesTheLibrary(t *testing.T) {
	base := `"cniVersion":"1.1.0","name":"allot","type":"allot"`
	cases := []string{
		`{` + base + `}`,
		`{` + base + `,"agentSocket":"/run/allot/cni.sock","timeout":"105s","delQueueDir":"/var/lib/allot/q","logFormat":"json"}`,
		`{` + base + `,"delQueueDir":""}`,
		`{` + base + `,"delQueueDir":null}`,
		`{` + base + `,"timeout":null,"agentSocket":null}`,
		`{` + base + `,"dns":{"nameservers":["10.0.0.2"],"domain":"cluster.local","search":["a","b"],"options":["ndots:5"]}}`,
		`{` + base + `,"dns":{}}`,
		`{` + base + `,"dns":null}`,
		`{` + base + `,"ipam":{"type":"host-local"}}`,
		`{` + base + `,"capabilities":{"portMappings":true,"bandwidth":false}}`,
		`{` + base + `,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.5/32"}],"interfaces":[{"name":"eth0"}]}}`,
		`{` + base + `,"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`,
		`{` + base + `,"runtimeConfig":{"x":1},"args":{"cni":{}},"cniVersions":["1.1.0"],"disableCheck":true,"disableGC":false,"cni.dev/foo":1}`,
		`{` + base + `,"name":"second","timeout":"1s","timeout":"2s"}`,
		`{"cniVersion":"1.1.0","name":"allot"}`,
		`{}`,
		`null`,
		// Wrong types: errors either way.
		`{` + base + `,"agentSocket":5}`,
		`{` + base + `,"timeout":30}`,
		`{` + base + `,"delQueueDir":false}`,
		`{` + base + `,"logFormat":["json"]}`,
		`{"cniVersion":1,"name":"allot","type":"allot"}`,
		`{"cniVersion":"1.1.0","name":{},"type":"allot"}`,
		`{"cniVersion":"1.1.0","name":"allot","type":true}`,
		`{` + base + `,"dns":"8.8.8.8"}`,
		`{` + base + `,"dns":{"nameservers":"8.8.8.8"}}`,
		`{` + base + `,"ipam":"host-local"}`,
		`{` + base + `,"capabilities":{"portMappings":"yes"}}`,
		`{` + base + `,"prevResult":[1]}`,
		`{` + base + `,"cni.dev/valid-attachments":{"containerID":"c1"}}`,
		`["allot"]`,
		`"allot"`,
		`{` + base,
	}
	for _, in := range cases {
		var want NetConf
		wantErr := json.Unmarshal([]byte(in), &want)
		var got NetConf
		_, gotErr := decodeNetConf([]byte(in), &got)
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, json.Unmarshal's %v", in, gotErr, wantErr)
			continue
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n decoded  %+v\n json's   %+v", in, got, want)
		}
	}
}

// TestDecodeReportsUnknownKeys: every key neither allot nor the spec
// defines is reported, sorted, and no known key is.
func TestDecodeReportsUnknownKeys(t *testing.T) {
	in := `{"cniVersion":"1.1.0","name":"allot","type":"allot","agentsocket":"/x","Timeout":"1s","cni.dev/x":1,"runtimeConfig":{}}`
	var c NetConf
	unknown, err := decodeNetConf([]byte(in), &c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`"Timeout"`, `"agentsocket"`}; !reflect.DeepEqual(unknown, want) {
		t.Errorf("unknown keys %q, want %q", unknown, want)
	}
	if c.AgentSocket != "" || c.Timeout != "" {
		t.Errorf("a misspelled key was decoded: agentSocket %q, timeout %q", c.AgentSocket, c.Timeout)
	}
}
