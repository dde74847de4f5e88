// Package iam holds the broker's IAM policy; its test keeps the policy and
// the EC2 calls in broker/ec2client equal.
package iam

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/allotnet/allot/broker/ec2client"
)

const (
	repoRoot   = "../.."
	ec2Package = "github.com/aws/aws-sdk-go-v2/service/ec2"
)

// statement is one IAM policy statement; Action and Resource may be a
// string or a list.
type statement struct {
	Sid       string
	Effect    string
	Action    stringList
	Resource  stringList
	Condition map[string]map[string]string
}

type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(s))
}

func readPolicy(t *testing.T) []statement {
	t.Helper()
	b, err := os.ReadFile("broker-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Version   string
		Statement []statement
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return p.Statement
}

// calledActions parses broker/ec2client and returns every EC2 action it
// can send: each method called through a field of type *ec2.Client, each
// ec2.New<Action>Paginator, and CreateTags when a request carries
// TagSpecifications (EC2 authorizes tag-on-create as CreateTags).
func calledActions(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join(repoRoot, "broker/ec2client")
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	clientFields := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if fld, ok := n.(*ast.Field); ok && isEC2Client(fld.Type) {
				for _, name := range fld.Names {
					clientFields[name.Name] = true
				}
			}
			return true
		})
	}
	if len(clientFields) == 0 {
		t.Fatal("broker/ec2client has no field of type *ec2.Client: the test no longer reads the code right")
	}
	set := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if inner, ok := sel.X.(*ast.SelectorExpr); ok && clientFields[inner.Sel.Name] {
					set[sel.Sel.Name] = true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "ec2" && strings.HasSuffix(sel.Sel.Name, "Paginator") {
					set[strings.TrimSuffix(strings.TrimPrefix(sel.Sel.Name, "New"), "Paginator")] = true
				}
			case *ast.SelectorExpr:
				if n.Sel.Name == "TagSpecifications" {
					set["CreateTags"] = true
				}
			}
			return true
		})
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, "ec2:"+a)
	}
	slices.Sort(out)
	return out
}

func isEC2Client(e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "ec2" && sel.Sel.Name == "Client"
}

func TestPolicyGrantsExactlyWhatTheCodeCalls(t *testing.T) {
	called := calledActions(t)
	if len(called) < 5 {
		t.Fatalf("found only %v in broker/ec2client: the test no longer reads the code right", called)
	}
	granted := map[string]bool{}
	for _, s := range readPolicy(t) {
		if s.Effect != "Allow" {
			t.Errorf("statement %s: effect %q", s.Sid, s.Effect)
		}
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s grants %s: name every action", s.Sid, a)
			}
			granted[a] = true
		}
	}
	for _, a := range called {
		if !granted[a] {
			t.Errorf("broker/ec2client calls %s; broker-policy.json does not grant it", a)
		}
		delete(granted, a)
	}
	for a := range granted {
		t.Errorf("broker-policy.json grants %s; broker/ec2client never calls it", a)
	}
	t.Logf("actions: %v", called)
}

// TestMutatingActionsKeepTheirConditions: every grant of a call that
// changes EC2 is narrowed by a condition; the ENI-level ones by the
// cluster's tag.
func TestMutatingActionsKeepTheirConditions(t *testing.T) {
	tagKey := "aws:ResourceTag/" + ec2client.TagCluster
	mustTag := map[string]string{
		"ec2:AttachNetworkInterface": tagKey, "ec2:DetachNetworkInterface": tagKey,
		"ec2:DeleteNetworkInterface": tagKey, "ec2:ModifyNetworkInterfaceAttribute": tagKey,
		"ec2:CreateNetworkInterface": "aws:RequestTag/" + ec2client.TagCluster,
		"ec2:CreateTags":             "ec2:CreateAction",
	}
	for _, s := range readPolicy(t) {
		conds := map[string]bool{}
		for _, kv := range s.Condition {
			for k := range kv {
				conds[k] = true
			}
		}
		for _, a := range s.Action {
			if strings.HasPrefix(a, "ec2:Describe") {
				continue
			}
			if len(conds) == 0 {
				t.Errorf("statement %s grants %s with no condition", s.Sid, a)
			}
			onENI := slices.Contains(s.Resource, "arn:aws:ec2:*:*:network-interface/*")
			if key, ok := mustTag[a]; ok && onENI && !conds[key] {
				t.Errorf("statement %s grants %s on ENIs without the %s condition", s.Sid, a, key)
			}
		}
	}
}

// TestOnlyEC2ClientImportsTheEC2SDK makes the derived list the whole list:
// a package in a product binary calling EC2 around broker/ec2client would
// escape it.
func TestOnlyEC2ClientImportsTheEC2SDK(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`,
		"./broker/cmd/...", "./agent/cmd/...", "./cni/cmd/...")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	importers := 0
	for _, line := range strings.Split(string(out), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if !slices.Contains(strings.Fields(imports), ec2Package) {
			continue
		}
		importers++
		if pkg != "github.com/allotnet/allot/broker/ec2client" && !strings.HasPrefix(pkg, "github.com/aws/") {
			t.Errorf("%s, linked into a product binary, imports the EC2 SDK; only broker/ec2client may", pkg)
		}
	}
	if importers == 0 {
		t.Fatal("no package imports the EC2 SDK: the test no longer reads the build right")
	}
}
