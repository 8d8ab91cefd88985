//go:build jepsen

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"raftset/internal/testutil"
)

// netLab gives every node its own network namespace, so that partitions are
// packet drops in the kernel (iptables inside the node's namespace) while
// the test's clients, in the host namespace, keep reaching every node.
//
//	host netns:   rsj<pid>h  10.A.B.1/24 ─┐ veth
//	rsj<pid>-br:  br0 ── ph, p1..pN      ─┘ (bridge in its own namespace)
//	rsj<pid>-nX:  eth0 10.A.B.(10+X)/24 ── pX
//
// The bridge lives in a namespace of its own rather than in the host: the
// host's FORWARD policy is DROP (docker) and bridge-nf-call-iptables is 1, so
// a host bridge would need host firewall rules; a fresh namespace has an empty
// ACCEPT firewall. Names carry the test binary's pid, so parallel runs do not
// collide, and everything is deleted in t.Cleanup (deleting a namespace
// deletes its veth ends and so their peers).
type netLab struct {
	tag      string // rsj<pid>
	prefix   string // "10.A.B."
	bridgeNS string
	hostIf   string
	nodeNS   map[string]string
	nodeIP   map[string]string
	created  []string // namespaces, in creation order
}

var labSeq int

// newNetLab creates the namespaces for nodes, registers their removal with
// t.Cleanup and returns the lab. It needs root and iproute2/iptables: in CI
// a missing tool fails the test (.ci/run installs them).
func newNetLab(t *testing.T, nodes []string) *netLab {
	t.Helper()
	testutil.RequireTool(t, "ip", "iproute2")
	testutil.RequireTool(t, "iptables", "iptables")
	testutil.RequireTool(t, "ss", "iproute2")
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("network namespaces need root (CI runs as root)")
		}
		t.Skip("network namespaces need root")
	}
	removeStaleLabs(t)
	labSeq++
	pid := os.Getpid()
	l := &netLab{tag: fmt.Sprintf("rsj%d", pid), nodeNS: map[string]string{}, nodeIP: map[string]string{}}
	if labSeq > 1 {
		// One lab per scenario; a test binary runs scenarios one after
		// the other, each deleting its lab before the next starts.
		l.tag = fmt.Sprintf("rsj%dx%d", pid, labSeq)
	}
	l.bridgeNS, l.hostIf = l.tag+"-br", l.tag+"h"
	if len(l.hostIf) > 15 {
		t.Fatalf("interface name %q longer than 15 bytes", l.hostIf)
	}
	var err error
	if l.prefix, err = freeSubnet(pid + labSeq); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("network lab cleanup: %v", err)
		}
	})
	if err := l.setup(nodes); err != nil {
		t.Fatalf("network lab: %v", err)
	}
	return l
}

// freeSubnet picks a 10.A.B.0/24 derived from seed that no host route uses.
func freeSubnet(seed int) (string, error) {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip route: %v: %s", err, out)
	}
	routes := string(out)
	for i := 0; i < 64*256; i++ {
		v := (seed + i) % (64 * 256)
		prefix := fmt.Sprintf("10.%d.%d.", 64+v/256, v%256)
		if !strings.Contains(routes, prefix) {
			return prefix, nil
		}
	}
	return "", errors.New("no free 10.x.y.0/24 for the network lab")
}

// removeStaleLabs deletes namespaces left by a test binary that died before
// its cleanup ran (named rsj<pid>…, that pid no longer running). Only this
// suite's names are touched.
func removeStaleLabs(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, "rsj") {
			continue
		}
		digits := strings.TrimLeft(name[3:], "0123456789")
		pid, err := strconv.Atoi(name[3 : len(name)-len(digits)])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Logf("removing stale namespace %s: %v %s", name, err, out)
		}
	}
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (l *netLab) addNS(name string) error {
	if err := run("ip", "netns", "add", name); err != nil {
		return err
	}
	l.created = append(l.created, name)
	return run("ip", "-n", name, "link", "set", "lo", "up")
}

func (l *netLab) setup(nodes []string) error {
	if err := l.addNS(l.bridgeNS); err != nil {
		return err
	}
	br := l.bridgeNS
	steps := [][]string{
		{"ip", "-n", br, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", br, "link", "set", "br0", "up"},
		{"ip", "link", "add", l.hostIf, "type", "veth", "peer", "name", "ph", "netns", br},
		{"ip", "-n", br, "link", "set", "ph", "master", "br0", "up"},
		{"ip", "addr", "add", l.prefix + "1/24", "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "up"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
	}
	for i, id := range nodes {
		ns := l.tag + "-" + id
		ip := l.prefix + strconv.Itoa(10+i+1)
		port := "p" + strconv.Itoa(i+1)
		if err := l.addNS(ns); err != nil {
			return err
		}
		for _, s := range [][]string{
			{"ip", "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"ip", "-n", br, "link", "set", port, "master", "br0", "up"},
			{"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
			{"ip", "-n", ns, "link", "set", "eth0", "up"},
		} {
			if err := run(s...); err != nil {
				return err
			}
		}
		l.nodeNS[id], l.nodeIP[id] = ns, ip
	}
	return nil
}

// Close deletes every namespace the lab created (the host veth goes with
// its peer in the bridge namespace).
func (l *netLab) Close() error {
	var errs []error
	for i := len(l.created) - 1; i >= 0; i-- {
		errs = append(errs, run("ip", "netns", "del", l.created[i]))
	}
	l.created = nil
	if _, err := net.InterfaceByName(l.hostIf); err == nil {
		errs = append(errs, run("ip", "link", "del", l.hostIf))
	}
	return errors.Join(errs...)
}

// command wraps a node's command line so that it runs inside the node's
// namespace. ip netns exec execs the program, so the pid is the server's
// and signals reach it directly.
func (l *netLab) command(node, bin string, args []string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.nodeNS[node], bin}, args...)...)
}

// inNode runs a command inside node's namespace.
func (l *netLab) inNode(node string, args ...string) error {
	return run(append([]string{"ip", "netns", "exec", l.nodeNS[node]}, args...)...)
}

// apply installs p: the INPUT chain of each node's namespace is replaced by
// p's drops. Only peers' addresses are matched, so the clients (host
// address) are never cut off.
func (l *netLab) apply(p partition) error {
	return applyPartition(p, l.nodeIP, l.inNode)
}

func (l *netLab) heal() error {
	var errs []error
	for id := range l.nodeNS {
		errs = append(errs, l.inNode(id, "iptables", "-F", "INPUT"))
	}
	return errors.Join(errs...)
}
