//go:build jepsen

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"raftset/integration/check"
)

// restorePlan: take a backup of the running cluster with `raftset backup`
// (SYNC) at BackupAt of the traffic phase, let the workloads go on, and
// restore it with RAFT.RESTORE at RestoreAt, while the workloads and the
// nemesis run; then, from RestoreInFaultAt, restore it once more as soon
// as a node is down or paused (a kill or pause in force), so that a member
// catches up on the restored state after it. The checkers are told every
// point (check/restore.go): writes acknowledged between the backup and a
// restore may be gone afterwards, nothing else.
type restorePlan struct {
	BackupAt         float64 `json:"backup_at"`                     // fraction of the traffic phase
	RestoreAt        float64 `json:"restore_at"`                    // fraction of the traffic phase
	RestoreInFaultAt float64 `json:"restore_in_fault_at,omitempty"` // 0: no second restore
	// Prefixes: the keys whose backed-up content goes into the history
	// (the checked workloads' keys).
	Prefixes []string `json:"prefixes"`
}

func (p restorePlan) on() bool { return p.RestoreAt > 0 }

// restoreStats: what the backup and the restores did (result.json).
type restoreStats struct {
	BackupNode   string `json:"backup_node"`
	BackupAtMs   int64  `json:"backup_at_ms"` // since the start of the history
	BackupTookMs int64  `json:"backup_took_ms"`
	BackupKeys   int    `json:"backup_keys"`  // every key in the file
	BackupTries  int    `json:"backup_tries"` // failed attempts before it
	// Restores: every RAFT.RESTORE attempt: "<leader> <outcome> at <ms>
	// took <ms>: <error or keys>".
	Restores []string `json:"restore_attempts"`
	OK       int      `json:"restores_ok"` // attempts acknowledged
	// InFault: what was down or paused when the second restore was sent
	// ("" if no fault came in time).
	InFault string `json:"restored_during_fault,omitempty"`
}

// restorer takes the backup and restores it, recording both in the
// history; it returns when a restore was acknowledged or ctx ended.
type restorer struct {
	plan  restorePlan
	cl    Cluster
	rec   *recorder
	ids   *procIDs
	bin   string // the raftset binary (backup, rdb dump)
	dir   string // artifacts: backup.rdb, backup.jsonl
	total time.Duration
	logf  func(string, ...any)
}

func (rs *restorer) run(ctx context.Context, start time.Time) restoreStats {
	var st restoreStats
	wait := func(at float64) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(start.Add(time.Duration(at * float64(rs.total))))):
			return true
		}
	}
	if !wait(rs.plan.BackupAt) {
		return st
	}
	file := filepath.Join(rs.dir, "backup.rdb")
	for i := 0; ctx.Err() == nil; i++ {
		node := rs.cl.Nodes()[i%len(rs.cl.Nodes())]
		if !rs.cl.Running(node) || rs.cl.Paused(node) {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if err := rs.backup(ctx, node, file, &st); err != nil {
			st.BackupTries++
			rs.rec.nemesis("backup-failed", fmt.Sprintf("%s: %v", node, err))
			rs.logf("backup from %s: %v", node, err)
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		break
	}
	if st.BackupNode == "" || !wait(rs.plan.RestoreAt) {
		return st
	}
	data, err := os.ReadFile(file)
	if err != nil {
		rs.rec.nemesis("restore-failed", err.Error())
		return st
	}
	rs.restoreUntilOK(ctx, data, &st)
	if rs.plan.RestoreInFaultAt == 0 || !wait(rs.plan.RestoreInFaultAt) {
		return st
	}
	for ctx.Err() == nil && st.InFault == "" {
		st.InFault = rs.faultInForce()
		if st.InFault == "" {
			sleepCtx(ctx, 20*time.Millisecond)
		}
	}
	if st.InFault != "" {
		rs.logf("second restore while %s", st.InFault)
		rs.restoreUntilOK(ctx, data, &st)
	}
	return st
}

// faultInForce names the nodes down or paused now ("" if none).
func (rs *restorer) faultInForce() string {
	var out []string
	for _, id := range rs.cl.Nodes() {
		switch {
		case !rs.cl.Running(id):
			out = append(out, id+" down")
		case rs.cl.Paused(id):
			out = append(out, id+" paused")
		}
	}
	return strings.Join(out, ", ")
}

// restoreUntilOK sends the file to the leader until an attempt is
// acknowledged or ctx ends.
func (rs *restorer) restoreUntilOK(ctx context.Context, data []byte, st *restoreStats) {
	for ctx.Err() == nil {
		leader := rs.cl.Leader(3 * time.Second)
		if leader == "" {
			continue
		}
		o := rs.restore(leader, data)
		what := o.Err
		if o.Outcome == outOK {
			what = fmt.Sprintf("%d keys", o.N)
		}
		st.Restores = append(st.Restores, fmt.Sprintf("%s %s at %d ms took %d ms: %s", leader, o.Outcome, o.Call/1e6, (o.Ret-o.Call)/1e6, what))
		if o.Outcome == outOK {
			st.OK++
			return
		}
		sleepCtx(ctx, 300*time.Millisecond)
	}
}

// sleepCtx waits d or until ctx ends, and returns ctx's error.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return ctx.Err()
}

// backup runs `raftset backup` against node, reads the file back with
// `raftset rdb dump`, and records the backup: a marker op and one op per
// key of the plan's prefixes, all over the backup's call and return.
func (rs *restorer) backup(ctx context.Context, node, file string, st *restoreStats) error {
	// SYNC waits for the node's read barrier: a paused or cut-off node
	// never answers, so the attempt is bounded and the next node is asked.
	bctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	call := rs.rec.now()
	out, err := exec.CommandContext(bctx, rs.bin, "backup", "--addr", rs.cl.Addr(node), "--progress=false",
		"--timeout", "3s", file).CombinedOutput()
	ret := rs.rec.now()
	if err != nil {
		return fmt.Errorf("raftset backup: %v: %s", err, bytes.TrimSpace(out))
	}
	dump, err := exec.CommandContext(ctx, rs.bin, "rdb", "dump", file).Output()
	if err != nil {
		return fmt.Errorf("raftset rdb dump: %w", err)
	}
	if err := os.WriteFile(filepath.Join(rs.dir, "backup.jsonl"), dump, 0o644); err != nil {
		return err
	}
	var keyOps []op
	keys := 0
	sc := bufio.NewScanner(bytes.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var line struct {
			Key     string   `json:"key"`
			Type    string   `json:"type"`
			Members []string `json:"members"`
			Value   *string  `json:"value"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("rdb dump line %d: %w", keys+1, err)
		}
		keys++
		if !hasAnyPrefix(line.Key, rs.plan.Prefixes) {
			continue
		}
		o := op{Proc: check.BackupProc, F: "backup", Key: line.Key, Outcome: outOK, Call: call, Ret: ret, Node: node}
		switch {
		case line.Type == "set":
			o.Members = make([]int64, 0, len(line.Members))
			for _, m := range line.Members {
				v, err := strconv.ParseInt(m, 10, 64)
				if err != nil {
					return fmt.Errorf("backup: %s has member %q", line.Key, m)
				}
				o.Members = append(o.Members, v)
			}
		case line.Value != nil:
			o.Value = *line.Value
		default:
			return fmt.Errorf("backup: %s is a %s", line.Key, line.Type)
		}
		keyOps = append(keyOps, o)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("rdb dump: %w", err)
	}
	marker := op{Proc: check.BackupProc, F: "backup", Outcome: outOK, N: int64(keys), Call: call, Ret: ret, Node: node}
	for _, o := range append([]op{marker}, keyOps...) {
		rs.rec.write(o.InvokeEvent())
		rs.rec.complete(o)
	}
	st.BackupNode, st.BackupKeys = node, keys
	st.BackupAtMs, st.BackupTookMs = call/1e6, (ret-call)/1e6
	rs.logf("backup from %s: %d keys, %s", node, keys, strings.TrimSpace(string(out)))
	return nil
}

// restore sends RAFT.RESTORE with the file to leader, as `raftset restore`
// does, recorded as one op whose outcome the harness classifies like any
// write's (-TRYAGAIN: not done; another error or a timeout: unknown).
func (rs *restorer) restore(leader string, data []byte) op {
	o := op{Proc: rs.ids.next(), F: "restore", Node: leader}
	// The leader installs the file on every member before it answers.
	c, err := dialConn(rs.cl.Addr(leader), 30*time.Second)
	if err != nil {
		o.Call = rs.rec.invokeOp(o)
		o.Ret, o.Outcome, o.Err = rs.rec.now(), outFail, "dial: "+err.Error() // nothing was sent
		rs.rec.complete(o)
		return o
	}
	defer c.Close()
	o.Call = rs.rec.invokeOp(o)
	r, err := c.Do("RAFT.RESTORE", string(data))
	o.Ret = rs.rec.now()
	settle(&o, r, err, parseInt)
	rs.rec.complete(o)
	return o
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
