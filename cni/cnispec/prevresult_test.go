package cnispec

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// goTypes drops the Go type names encoding/json puts in a message about a
// value of the wrong type: the library's (types100.IPConfig) and this
// package's (cnispec.ipConfig) differ, and only there.
func goTypes(msg string) string {
	return typeName.ReplaceAllString(msg, "of type T")
}

var typeName = regexp.MustCompile(`of type \[\]\*(cnispec|types100|types040|types)\.\w+$`)

func rawMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// libraryPrevResult is what the plugin did with the library: parse the
// prevResult in the config's version, convert it to the current version
// and encode it.
func libraryPrevResult(raw map[string]any, confVersion string) ([]byte, error) {
	conf := types.PluginConf{CNIVersion: confVersion, RawPrevResult: raw}
	if err := version.ParsePrevResult(&conf); err != nil {
		return nil, err
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return nil, err
	}
	return json.Marshal(prev)
}

// TestPrevResultMatchesTheLibrary: a prevResult in each spec version the
// plugin speaks, well-formed or not, converts to the same current result
// as with the library, or fails with the same error.
func TestPrevResultMatchesTheLibrary(t *testing.T) {
	full := `"interfaces":[{"name":"alt1","mac":"02:00:00:00:00:01"},{"name":"eth0","mac":"02:00:00:00:00:02","sandbox":"/run/netns/p"}],
		"ips":[{"interface":1,"address":"10.0.1.20/32","gateway":"169.254.1.1"}],
		"routes":[{"dst":"0.0.0.0/0","gw":"169.254.1.1"}],"dns":{"nameservers":["10.100.0.10"],"search":["a"]}`
	results := []string{
		`{"cniVersion":"1.1.0",` + full + `}`,
		`{"cniVersion":"1.0.0",` + full + `}`,
		`{"cniVersion":"0.4.0",` + full + `}`,
		`{` + full + `}`,
		`{"cniVersion":"",` + full + `}`,
		`{"CNIVersion":"1.1.0","ips":[{"address":"10.0.0.1/24"}]}`,
		`{"CNIVersion":"","cniVersion":"1.1.0"}`,
		`{}`,
		`{"cniVersion":"0.4.0","ips":[{"version":"4","interface":0,"address":"10.0.0.1/24","gateway":"10.0.0.254"}],"dns":{}}`,
		`{"cniVersion":"0.4.0","interfaces":[{"name":"x","mtu":1500,"socketPath":"/s","pciID":"p"}]}`,
		`{"cniVersion":"1.1.0","interfaces":[{"name":"x","mtu":1500,"socketPath":"/s","pciID":"p"}]}`,
		`{"ips":[{"address":"not-an-ip"}]}`,
		`{"ips":[{"address":"10.0.0.1"}]}`,
		`{"ips":[{"address":"10.0.0.1/33"}]}`,
		`{"ips":[{"address":"10.0.0.1/032"}]}`,
		`{"ips":[{"address":"10.0.0.1/"}]}`,
		`{"ips":[{"address":"10.0.0.1/+8"}]}`,
		`{"ips":[{"address":"10.0.0.1/99999999999999999999"}]}`,
		`{"ips":[{"address":"010.0.0.1/8"}]}`,
		`{"ips":[{"address":"fe80::1%eth0/64"}]}`,
		`{"ips":[{"address":"fd00::5/128","gateway":"fd00::1"}]}`,
		`{"ips":[{"address":"::ffff:10.0.0.1/120","gateway":"::ffff:10.0.0.254"}]}`,
		`{"ips":[{"address":"::ffff:10.0.0.1/64"}]}`,
		`{"ips":[{"address":"10.0.0.1/8","gateway":"nope"}]}`,
		`{"ips":[{"address":"10.0.0.1/8","gateway":""}]}`,
		`{"ips":[{"address":"10.0.0.1/8","gateway":"fe80::1%eth0"}]}`,
		`{"ips":[{"address":5}]}`,
		`{"ips":[{"interface":1.5,"address":"10.0.0.1/8"}]}`,
		`{"ips":[{"interface":-1,"address":"10.0.0.1/8"}]}`,
		`{"ips":[{}]}`,
		`{"ips":"x"}`,
		`{"interfaces":{"name":"x"}}`,
		`{"dns":{"nameservers":"x"}}`,
		`{"routes":[{"dst":"10.0.0.0/8","gw":"10.0.0.1","mtu":1400,"advmss":1360,"priority":5,"table":100,"scope":0}]}`,
		`{"routes":[{"dst":"bad"}]}`,
		`{"routes":[{"gw":"10.0.0.1"}]}`,
		`{"routes":[{"dst":"10.0.0.0/8","table":"x"}]}`,
		`{"dns":{"domain":"d","options":["ndots:5"]}}`,
		`{"dns":null}`,
		`{"ips":null,"routes":null,"interfaces":null}`,
	}
	// The library panics converting a 0.4.0 result with a null entry, so
	// those are compared in 1.x only.
	nulls := []string{`{"ips":[null]}`, `{"interfaces":[null]}`, `{"routes":[null]}`}
	for _, confVersion := range []string{"1.1.0", "1.0.0", "0.4.0"} {
		cases := results
		if confVersion != "0.4.0" {
			cases = append(cases, nulls...)
		}
		for _, res := range cases {
			got, err := PrevResult(rawMap(t, res), confVersion)
			want, wantErr := libraryPrevResult(rawMap(t, res), confVersion)
			switch {
			case (err == nil) != (wantErr == nil):
				t.Errorf("%s at %s: error %v, the library's %v", res, confVersion, err, wantErr)
			case err != nil:
				if goTypes(err.Error()) != goTypes(wantErr.Error()) {
					t.Errorf("%s at %s: error\n %v\nthe library's\n %v", res, confVersion, err, wantErr)
				}
			default:
				var g, w any
				if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
					t.Errorf("%s at %s:\n %s\nthe library's\n %s", res, confVersion, got, want)
				}
			}
		}
	}
	if b, err := PrevResult(nil, "1.1.0"); b != nil || err != nil {
		t.Errorf("no prevResult: %s, %v", b, err)
	}
}
