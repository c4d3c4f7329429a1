// Command cni-loopback is the local cluster's only CNI plugin: it brings up
// `lo` in the pod's network namespace and nothing else, so pods get
// loopback only (the `none` network of the Docker runtime). No bridge, veth
// or route is created on the host.
//
// containerd 1.6 runs it twice per pod: as the standard `loopback` plugin
// (installed under that name too), which its CRI plugin always sets up
// first, and as the configured pod network. containerd takes the pod IP
// from the interface it asked the pod network for (CNI_IFNAME, "eth0") and
// fails the sandbox with "failed to find network info for sandbox" when
// the result has none, so the plugin reports 127.0.0.1 under the name it
// is asked for; the namespace has no device but `lo`.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// supported lists the CNI spec versions this plugin answers in.
var supported = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0"}

// netConf is the part of the network configuration the plugin reads.
type netConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
}

type iface struct {
	Name    string `json:"name"`
	Sandbox string `json:"sandbox,omitempty"`
}

type ipConfig struct {
	Version   string `json:"version,omitempty"` // spec < 1.0.0 only
	Interface *int   `json:"interface,omitempty"`
	Address   string `json:"address"`
}

type result struct {
	CNIVersion string     `json:"cniVersion"`
	Interfaces []iface    `json:"interfaces"`
	IPs        []ipConfig `json:"ips"`
	DNS        struct{}   `json:"dns"`
}

// cniError is the error object the CNI spec asks plugins to print.
type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

// Error codes from the CNI spec.
const (
	codeIncompatibleVersion = 1
	codeInvalidEnv          = 4
	codeDecode              = 6
	codeInternal            = 999
)

type failure struct {
	code int
	msg  string
	err  error
}

func (f *failure) Error() string {
	if f.err != nil {
		return f.msg + ": " + f.err.Error()
	}
	return f.msg
}

func main() {
	version := "1.0.0"
	out, err := run(os.Getenv("CNI_COMMAND"), os.Stdin, &version)
	if err != nil {
		e := cniError{CNIVersion: version, Code: codeInternal, Msg: err.Error()}
		var f *failure
		if errors.As(err, &f) {
			e.Code, e.Msg = f.code, f.msg
			if f.err != nil {
				e.Details = f.err.Error()
			}
		}
		_ = json.NewEncoder(os.Stdout).Encode(e)
		os.Exit(1)
	}
	if out != nil {
		_ = json.NewEncoder(os.Stdout).Encode(out)
	}
}

// run executes one CNI command and returns what to print on success;
// version is set to the configuration's version once it is known, so
// errors are reported in it.
func run(cmd string, stdin io.Reader, version *string) (any, error) {
	if cmd == "VERSION" {
		return map[string]any{"cniVersion": "1.0.0", "supportedVersions": supported}, nil
	}
	var conf netConf
	if err := json.NewDecoder(stdin).Decode(&conf); err != nil {
		return nil, &failure{code: codeDecode, msg: "decode network configuration", err: err}
	}
	if conf.CNIVersion != "" {
		*version = conf.CNIVersion
	}
	if !isSupported(*version) {
		return nil, &failure{code: codeIncompatibleVersion, msg: fmt.Sprintf("CNI version %q not supported (supported: %v)", *version, supported)}
	}
	nsPath, ifName := os.Getenv("CNI_NETNS"), os.Getenv("CNI_IFNAME")
	switch cmd {
	case "ADD":
		if nsPath == "" || ifName == "" {
			return nil, &failure{code: codeInvalidEnv, msg: "CNI_NETNS and CNI_IFNAME are required for ADD"}
		}
		if err := inNetns(nsPath, setLoopbackUp); err != nil {
			return nil, err
		}
		return newResult(*version, nsPath, ifName), nil
	case "CHECK":
		if nsPath == "" {
			return nil, &failure{code: codeInvalidEnv, msg: "CNI_NETNS is required for CHECK"}
		}
		return nil, inNetns(nsPath, checkLoopbackUp)
	case "DEL", "GC", "STATUS":
		// Nothing outlives the namespace: no address, route or device was
		// made outside it.
		return nil, nil
	default:
		return nil, &failure{code: codeInvalidEnv, msg: fmt.Sprintf("unknown CNI_COMMAND %q", cmd)}
	}
}

func isSupported(v string) bool {
	for _, s := range supported {
		if s == v {
			return true
		}
	}
	return false
}

func newResult(version, nsPath, ifName string) result {
	zero := 0
	ip := ipConfig{Interface: &zero, Address: "127.0.0.1/8"}
	if version != "1.0.0" {
		ip.Version = "4"
	}
	return result{
		CNIVersion: version,
		Interfaces: []iface{{Name: ifName, Sandbox: nsPath}},
		IPs:        []ipConfig{ip},
	}
}

// inNetns runs fn with the calling OS thread switched into the network
// namespace at path. The thread is left locked if switching back fails, so
// the Go runtime retires it rather than reuse it in the wrong namespace.
func inNetns(path string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("current network namespace: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		return errors.Join(fnErr, fmt.Errorf("leave network namespace %s: %w", path, err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

func setLoopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

func checkLoopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if lo.Attrs().Flags&net.FlagUp == 0 {
		return errors.New("lo is down")
	}
	return nil
}
