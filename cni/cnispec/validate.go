package cnispec

import (
	"fmt"
	"unicode"

	"golang.org/x/sys/unix"
)

// validName reports whether s is a valid container ID or network name: a
// letter or digit, then letters, digits, '_', '.' and '-' (the library
// matches ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$).
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

func validateContainerID(id string) *Error {
	if id == "" {
		return NewError(ErrUnknownContainer, "missing containerID", "")
	}
	if !validName(id) {
		return NewError(ErrInvalidEnvironmentVariables, "invalid characters in containerID", id)
	}
	return nil
}

func validateNetworkName(name string) *Error {
	if name == "" {
		return NewError(ErrInvalidNetworkConfig, "missing network name:", "")
	}
	if !validName(name) {
		return NewError(ErrInvalidNetworkConfig, "invalid characters found in network name", name)
	}
	return nil
}

// maxIfNameLen is the kernel's limit on an interface name.
const maxIfNameLen = 15

func validateInterfaceName(name string) *Error {
	if len(name) == 0 {
		return NewError(ErrInvalidEnvironmentVariables, "interface name is empty", "")
	}
	if len(name) > maxIfNameLen {
		return NewError(ErrInvalidEnvironmentVariables, "interface name is too long",
			fmt.Sprintf("interface name should be less than %d characters", maxIfNameLen+1))
	}
	if name == "." || name == ".." {
		return NewError(ErrInvalidEnvironmentVariables, "interface name is . or ..", "")
	}
	for _, r := range name {
		if r == '/' || r == ':' || unicode.IsSpace(r) {
			return NewError(ErrInvalidEnvironmentVariables, "interface name contains / or : or whitespace characters", "")
		}
	}
	return nil
}

// inPluginNetNS reports whether path is the network namespace the plugin
// runs in. A path that can't be opened is not (the runtime's namespace
// may be gone by a DEL).
func inPluginNetNS(path string) (bool, *Error) {
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer unix.Close(target)
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, NewError(ErrInvalidNetNS, "get plugin's netns failed", "")
	}
	defer unix.Close(self)
	var s1, s2 unix.Stat_t
	if unix.Fstat(self, &s1) != nil || unix.Fstat(target, &s2) != nil {
		return false, nil
	}
	return s1.Dev == s2.Dev && s1.Ino == s2.Ino, nil
}
