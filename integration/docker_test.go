//go:build jepsen

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"raftset/internal/testutil"
)

// dockerCluster runs the nodes as containers of the repository's
// FROM-scratch image (the Dockerfile `make image` uses, built here from a
// static binary under a per-run tag, nothing pulled) on a per-run docker
// network with fixed addresses, so that a restarted container keeps its
// address. Faults come from the host: docker kill / start, docker pause /
// unpause, and iptables inside a container's network namespace through
// nsenter -t <container pid> -n (the image has no shell and no tools).
//
// The compose file names its containers and volumes by service, so two runs
// (or a developer's compose cluster) would collide; the harness starts the
// same image with docker run under names that carry the test's pid instead.
type dockerCluster struct {
	t       *testing.T
	tag     string // rsj<pid>d
	image   string
	network string
	prefix  string
	logDir  string
	order   []string
	peers   string
	args    []string

	mu      sync.Mutex
	started map[string]bool // container exists
	running map[string]bool
	paused  map[string]bool
	active  *partition // re-applied after a container starts (new netns)
}

// requireDocker fails in CI and skips elsewhere when docker cannot run.
func requireDocker(t *testing.T) {
	t.Helper()
	testutil.RequireTool(t, "docker", "docker.io")
	testutil.RequireTool(t, "nsenter", "util-linux")
	testutil.RequireTool(t, "iptables", "iptables")
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("docker daemon not reachable in CI: %v %s", err, out)
		}
		t.Skipf("docker daemon not reachable: %v %s", err, out)
	}
}

func docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// buildImage builds the Dockerfile around a static binary in a temporary
// build context and returns the image tag; the image is removed at cleanup.
func buildImage(t *testing.T, tag string) string {
	t.Helper()
	ctx := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ctx, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(ctx, "bin", "raftset"), "raftset/cmd/raftset")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), df, 0o644); err != nil {
		t.Fatal(err)
	}
	image := "raftset-jepsen:" + tag
	t.Cleanup(func() {
		if _, err := docker("rmi", "-f", image); err != nil {
			t.Errorf("remove image: %v", err)
		}
	})
	if _, err := docker("build", "-q", "-t", image, ctx); err != nil {
		t.Fatal(err)
	}
	return image
}

func newDockerCluster(t *testing.T, size int, logDir string, args []string) Cluster {
	t.Helper()
	requireDocker(t)
	c := &dockerCluster{t: t, tag: fmt.Sprintf("rsj%dd", os.Getpid()), logDir: logDir, args: args,
		started: map[string]bool{}, running: map[string]bool{}, paused: map[string]bool{}}
	c.image = buildImage(t, c.tag)
	prefix, err := freeSubnet(os.Getpid() + 4096)
	if err != nil {
		t.Fatal(err)
	}
	c.prefix, c.network = prefix, c.tag+"net"
	var peers []string
	for i := 1; i <= size; i++ {
		id := fmt.Sprintf("n%d", i)
		c.order = append(c.order, id)
		peers = append(peers, id+"="+net.JoinHostPort(c.ip(id), nsRaftPort))
	}
	c.peers = strings.Join(peers, ",")
	t.Cleanup(func() {
		if _, err := docker("network", "rm", c.network); err != nil {
			t.Errorf("remove network: %v", err)
		}
	})
	if _, err := docker("network", "create", "--subnet", prefix+"0/24", c.network); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (c *dockerCluster) ip(node string) string {
	var i int
	fmt.Sscanf(node, "n%d", &i)
	return fmt.Sprintf("%s%d", c.prefix, 10+i)
}

func (c *dockerCluster) container(node string) string { return c.tag + "-" + node }

func (c *dockerCluster) Nodes() []string         { return append([]string(nil), c.order...) }
func (c *dockerCluster) Addr(node string) string { return net.JoinHostPort(c.ip(node), nsClientPort) }

func (c *dockerCluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.order {
		ip := c.ip(id)
		args := append([]string{"run", "-d", "--name", c.container(id), "--hostname", id,
			"--network", c.network, "--ip", ip, "-e", "GOMAXPROCS=1", c.image,
			"--node-id", id, "--bind", "0.0.0.0", "--port", nsClientPort,
			"--raft-addr", "0.0.0.0:" + nsRaftPort, "--raft-advertise-addr", net.JoinHostPort(ip, nsRaftPort),
			"--advertise-addr", net.JoinHostPort(ip, nsClientPort), "--dir", "/data",
			"--peers", c.peers, "--loglevel", "info", "--cluster-secret", jepsenClusterSecret, "--protected-mode", "no"}, c.args...)
		if _, err := docker(args...); err != nil {
			return err
		}
		c.started[id], c.running[id] = true, true
	}
	return nil
}

func (c *dockerCluster) Kill9(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running[node] {
		return fmt.Errorf("%s not running", node)
	}
	if c.paused[node] {
		// A frozen container cannot be killed until it is thawed.
		if _, err := docker("unpause", c.container(node)); err != nil {
			return err
		}
		c.paused[node] = false
	}
	if _, err := docker("kill", "-s", "KILL", c.container(node)); err != nil {
		return err
	}
	c.running[node] = false
	return nil
}

// Restart starts a killed container again (same address, same volume), or
// kills and starts a running one.
func (c *dockerCluster) Restart(node string) error {
	if c.Running(node) {
		if err := c.Kill9(node); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := docker("start", c.container(node)); err != nil {
		return err
	}
	c.running[node] = true
	// A started container has a new network namespace: the rules of a
	// partition still in force must be installed again.
	if c.active != nil {
		return c.applyLocked(*c.active)
	}
	return nil
}

func (c *dockerCluster) Pause(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := docker("pause", c.container(node)); err != nil {
		return err
	}
	c.paused[node] = true
	return nil
}

func (c *dockerCluster) Resume(node string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := docker("unpause", c.container(node)); err != nil {
		return err
	}
	c.paused[node] = false
	return nil
}

func (c *dockerCluster) Running(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[node]
}

func (c *dockerCluster) Paused(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[node]
}

func (c *dockerCluster) Leader(within time.Duration) string { return leaderByRole(c, within) }

// nsExec runs a host tool inside a running container's network namespace.
func (c *dockerCluster) nsExec(node string, args ...string) error {
	pid, err := docker("inspect", "-f", "{{.State.Pid}}", c.container(node))
	if err != nil {
		return err
	}
	if pid == "0" {
		return nil // not running: its rules are installed when it starts
	}
	return run(append([]string{"nsenter", "-t", pid, "-n"}, args...)...)
}

func (c *dockerCluster) applyLocked(p partition) error {
	ips := map[string]string{}
	for _, id := range c.order {
		if c.running[id] {
			ips[id] = c.ip(id)
		}
	}
	// Rules name peers by address, also peers that are down.
	all := map[string]string{}
	for _, id := range c.order {
		all[id] = c.ip(id)
	}
	return applyPartition(p, all, func(node string, args ...string) error {
		if _, up := ips[node]; !up {
			return nil
		}
		return c.nsExec(node, args...)
	})
}

func (c *dockerCluster) Partition(p partition) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = &p
	return c.applyLocked(p)
}

func (c *dockerCluster) HealNetwork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active = nil
	var errs []error
	for _, id := range c.order {
		if c.running[id] {
			errs = append(errs, c.nsExec(id, "iptables", "-F", "INPUT"))
		}
	}
	return errors.Join(errs...)
}

func (c *dockerCluster) Log(node string) (string, error) {
	c.mu.Lock()
	started := c.started[node]
	c.mu.Unlock()
	if !started {
		return "", nil
	}
	return docker("logs", c.container(node))
}

// Stop stops every container (they stay, with their logs) and saves each
// node's log as <node>.log in the artifact directory.
func (c *dockerCluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, id := range c.order {
		if !c.started[id] {
			continue
		}
		if c.paused[id] {
			_, err := docker("unpause", c.container(id))
			errs = append(errs, err)
			c.paused[id] = false
		}
		if c.running[id] {
			_, err := docker("stop", "-t", "10", c.container(id))
			errs = append(errs, err)
			c.running[id] = false
		}
		out, err := exec.Command("docker", "logs", c.container(id)).CombinedOutput()
		errs = append(errs, err, os.WriteFile(filepath.Join(c.logDir, id+".log"), out, 0o644))
	}
	return errors.Join(errs...)
}

// Close stops and removes the containers (and their anonymous volumes).
func (c *dockerCluster) Close() {
	if err := c.Stop(); err != nil {
		c.t.Errorf("stopping containers: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.order {
		if c.started[id] {
			if _, err := docker("rm", "-f", "-v", c.container(id)); err != nil {
				c.t.Errorf("remove container: %v", err)
			}
			c.started[id] = false
		}
	}
}
