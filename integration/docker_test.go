//go:build jepsen

package integration

import "testing"

func newDockerCluster(t *testing.T, size int, logDir string, args []string) Cluster {
	t.Fatal("docker backend: not yet")
	return nil
}
