package cnispec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// CmdArgs are a command's arguments from the environment and stdin (the
// library's skel.CmdArgs).
type CmdArgs struct {
	ContainerID   string
	Netns         string
	IfName        string
	Args          string
	Path          string
	NetnsOverride string
	StdinData     []byte
}

// Funcs are the plugin's commands; VERSION is answered from the versions.
type Funcs struct {
	Add, Del, Check, GC, Status func(*CmdArgs) error
}

// Env is where Main reads the command: the variables, stdin for the
// config, stdout for VERSION's answer.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
}

// envVar is one CNI_* variable: the commands that require it and its
// validation when required and set.
type envVar struct {
	name     string
	val      *string
	required []string
	validate func(string) *Error
}

func (v envVar) requiredFor(cmd string) bool {
	for _, c := range v.required {
		if c == cmd {
			return true
		}
	}
	return false
}

// args reads the command and its arguments, in the library's order: each
// variable in turn (a set one that is invalid fails at once), then every
// missing one in one error, then stdin, then the config's name.
func (env Env) args() (string, *CmdArgs, *Error) {
	var cmd string
	a := &CmdArgs{}
	all := []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}
	attach := []string{"ADD", "CHECK", "DEL"}
	vars := []envVar{
		{"CNI_COMMAND", &cmd, all, nil},
		{"CNI_CONTAINERID", &a.ContainerID, attach, validateContainerID},
		{"CNI_NETNS", &a.Netns, []string{"ADD", "CHECK"}, nil},
		{"CNI_IFNAME", &a.IfName, attach, validateInterfaceName},
		{"CNI_ARGS", &a.Args, nil, nil},
		{"CNI_PATH", &a.Path, all, nil},
		{"CNI_NETNS_OVERRIDE", &a.NetnsOverride, nil, nil},
	}
	var missing []string
	for _, v := range vars {
		*v.val = env.Getenv(v.name)
		switch {
		case *v.val == "":
			if v.requiredFor(cmd) || v.name == "CNI_COMMAND" {
				missing = append(missing, v.name)
			}
		case v.validate != nil && v.requiredFor(cmd):
			if err := v.validate(*v.val); err != nil {
				return "", nil, err
			}
		}
	}
	if len(missing) > 0 {
		return "", nil, NewError(ErrInvalidEnvironmentVariables,
			fmt.Sprintf("required env variables [%s] missing", strings.Join(missing, ",")), "")
	}
	stdin := env.Stdin
	if cmd == "VERSION" {
		stdin = bytes.NewReader(nil)
	}
	var err error
	if a.StdinData, err = io.ReadAll(stdin); err != nil {
		return "", nil, NewError(ErrIOFailure, fmt.Sprintf("error reading from stdin: %v", err), "")
	}
	if cmd != "VERSION" {
		if err := validateConfig(a.StdinData); err != nil {
			return "", nil, err
		}
	}
	return cmd, a, nil
}

func validateConfig(stdin []byte) *Error {
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return NewError(ErrDecodingFailure, fmt.Sprintf("error unmarshall network config: %v", err), "")
	}
	if conf.Name == "" {
		return NewError(ErrInvalidNetworkConfig, "missing network name", "")
	}
	return validateNetworkName(conf.Name)
}

// Main runs the command the environment names, as the library's
// skel.PluginMainFuncsWithError does with an empty about string (a missing
// CNI_COMMAND is an error, not a banner). The caller prints the error.
func Main(env Env, funcs Funcs, versions Versions) *Error {
	cmd, a, err := env.args()
	if err != nil {
		return err
	}
	switch cmd {
	case "ADD":
		return callInNetNS(a, versions, funcs.Add)
	case "DEL":
		return callInNetNS(a, versions, funcs.Del)
	case "CHECK":
		return callFrom(a, versions, "0.4.0", "CHECK", funcs.Check)
	case "GC":
		return callFrom(a, versions, "1.1.0", "GC", funcs.GC)
	case "STATUS":
		return callFrom(a, versions, "1.1.0", "STATUS", funcs.Status)
	case "VERSION":
		if err := versions.Encode(env.Stdout); err != nil {
			return NewError(ErrIOFailure, err.Error(), "")
		}
		return nil
	}
	return NewError(ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}

// callInNetNS runs ADD or DEL, then (unless CNI_NETNS_OVERRIDE is set)
// fails it if CNI_NETNS is the plugin's own namespace; the library checks
// after the command has run, and so does this.
func callInNetNS(a *CmdArgs, versions Versions, f func(*CmdArgs) error) *Error {
	if err := call(a, versions, f); err != nil {
		return err
	}
	if strings.ToUpper(a.NetnsOverride) == "TRUE" || a.NetnsOverride == "1" {
		return nil
	}
	same, err := inPluginNetNS(a.Netns)
	if err != nil {
		return err
	}
	if same {
		return NewError(ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
	}
	return nil
}

// callFrom runs a command that exists from spec version since on.
func callFrom(a *CmdArgs, versions Versions, since, verb string, f func(*CmdArgs) error) *Error {
	config, err := decodeVersion(a.StdinData)
	if err != nil {
		return NewError(ErrDecodingFailure, err.Error(), "")
	}
	if ok, err := atLeast(config, since); err != nil {
		return NewError(ErrDecodingFailure, err.Error(), "")
	} else if !ok {
		return NewError(ErrIncompatibleCNIVersion, "config version does not allow "+verb, "")
	}
	for _, v := range versions {
		ok, err := atLeast(v, config)
		if err != nil {
			return NewError(ErrDecodingFailure, err.Error(), "")
		}
		if ok {
			return call(a, versions, f)
		}
	}
	return NewError(ErrIncompatibleCNIVersion, "plugin version does not allow "+verb, "")
}

// call checks the config's version and runs f; an error f returns that
// is not an *Error is an internal one.
func call(a *CmdArgs, versions Versions, f func(*CmdArgs) error) *Error {
	config, err := decodeVersion(a.StdinData)
	if err != nil {
		return NewError(ErrDecodingFailure, err.Error(), "")
	}
	if err := versions.check(config); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	if err := f(a); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return NewError(ErrInternal, err.Error(), "")
	}
	return nil
}
