// Package cluster is raftset's Raft node: hashicorp/raft with raft-boltdb/v2
// as log and stable store (DataDir/raft.db, behind a byte-bounded log cache) and a
// raft.FileSnapshotStore (DataDir/snapshots, two kept) whose snapshots are the
// state machine's RDB files. *Node implements the front end's Store
// interface (WriteIndexed, ReadBatch, Wait, Watch, Admin, Internal, Info)
// without importing it. DESIGN.md explains the internal protocol, the reply
// families and the pacing of the write path.
//
// # Writes (propose.go)
//
// One proposer goroutine is the only caller of raft.Apply. It takes the
// writes of every connection queued at that moment, prepares them on the
// leader's clock (fsm.Prepare: syntax check, EXPIRE → PEXPIREAT), packs them
// into one log entry (group commit, capped by MaxEntryBytes and MaxEntryOps)
// and hands it to Raft without waiting for the commit; it only waits for
// Raft's leader loop to have stored the previous entry (and, for a bounded
// moment, for that entry's writers to come back), so each fsync carries
// everything that arrived meanwhile. A completer goroutine gives
// every op its reply from the entry's fsm.ApplyResult. Errors say whether
// the write may have happened: -TRYAGAIN only when it certainly was not
// appended, -CLUSTERDOWN when its outcome is unknown.
//
// # Reads (read.go)
//
// Linearizable by default, with rqlite's recipe on hashicorp/raft: a leader
// first commits a barrier of its own term, then per group of concurrent
// readers: read index = commit index, one VerifyLeader, term unchanged; each
// reader then waits until the state machine applied the read index and
// reads. Stale reads skip all of it.
//
// # Followers (rpc*.go, meta.go, membership.go)
//
// Any node serves any command. A follower forwards a Write (the whole op
// batch, MULTI/EXEC ops intact, encoded as a command.Entry) to the leader's
// client address over RESP on a small connection pool (raftset.forward) and
// relays the replies; a linearizable read on a follower asks the leader for
// a read index (raftset.readindex: the leader's batched barrier above; one
// call at a time serves every read waiting on the follower), waits
// until it applied that index and reads locally. A forward that fails before
// it was sent is -TRYAGAIN, after it was sent -CLUSTERDOWN (outcome unknown).
// Client addresses travel through the log (each node asks the leader with
// "raftset.node id addr", which proposes a node-metadata entry; the state
// machine keeps the map and writes it to snapshots as the AUX field
// raftset-nodes; meta.go). RAFT.JOIN adds a node as a non-voter; it asks for
// promotion (raftset.promote id applied-index) every membership tick and the
// leader makes it a voter once that index is within Config.PromoteLag of
// its own applied index. RAFT.REMOVE, RAFT.TRANSFER run on the leader
// (relayed by followers); RAFT.INFO, RAFT.SNAPSHOT are local; ROLE, INFO
// replication and SENTINEL name the leader's client address.
//
// # Internal commands (rpc*.go, auth.go)
//
// The raftset.* commands are one protocol (rpc.go): each call has a typed
// request and ends in a typed outcome its sender switches on; only the edge
// facing a client turns an outcome into -TRYAGAIN or -CLUSTERDOWN. They
// arrive through Node.Internal, not Admin. They are hidden from COMMAND,
// and the front end answers them as unknown commands unless the connection
// proved the node secret with RAFTSET.AUTH's challenge-response:
// Config.ClusterSecret, else derived from the password, else empty (a key
// anyone can use: hidden, not protected). Every pooled connection a node
// opens sends AUTH (with a password) and runs RAFTSET.AUTH, over TLS when
// Config.ClientTLS is set.
//
// # WAIT (wait.go)
//
// The front end writes through WriteIndexed, which returns a log index
// covering the writes (the leader's applied index once they were answered;
// a forwarded write brings the leader's back in the raftset.forward reply),
// and keeps the largest per connection. WAIT asks every other member for
// its applied index (raftset.applied, over the same pool) and counts those
// at or past it, polling until numreplicas have or the timeout passes.
//
// # +switch-master (switch.go)
//
// A Raft leader observer: when the leader changes (not when a node first
// learns of one), the node publishes "+switch-master <name> <old-ip>
// <old-port> <new-ip> <new-port>" through the front end's PUBLISH
// (resp.Server.Publish), for every master name Sentinel queries used on it
// and Config.MasterName.
//
// # Expiry (expire.go)
//
// Only the leader deletes expired keys, by proposing "raftset.expire k..."
// for keys the state machine samples, ten times a second, in batches that
// grow while samples come back full (up to 8192 keys an op, 1024 while
// clients are queued) and keep their size into the next cycle, within a
// quarter of each period while client writes wait, else until a sample is
// mostly live.
//
// # Memory and log size (defrag.go, retention.go)
//
// Every node runs the state machine's defragmenter (fsm/defrag.go) in short
// steps and hands the spans it empties back to the OS; while the node takes
// no writes it also collects after every 16 MB packed, so that the spans
// the packing empties serve its next slabs instead of new pages. The log is bounded by
// bytes as well as entries: a snapshot once snapshot-log-size bytes of
// entries were stored since the last one, and TrailingLogs lowered to about
// trailing-log-size bytes of recent entries, because group commit makes
// entry sizes vary by orders of magnitude and raft.db never shrinks.
// The log cache (logcache.go) holds at most 4 MB of recent entries and
// none once the log has been idle for 2 s; then the node collects at once
// (the dropped entries were live at the last collection, so nothing else
// would count them as garbage), asks the
// kernel to reclaim raft.db's mapped pages (logpages_linux.go), and, when
// the state machine has been idle for a defragmenter cycle, collects and
// returns its free heap once (defrag.go).
//
// # Stale snapshots (stalesnap.go)
//
// Raft installs any InstallSnapshot of the current term; one older than the
// applied state (a stale replication goroutine after remove and re-add) is
// refused, since restoring it rolls the state back behind a compacted log.
//
// # Start and restart (node.go)
//
// A node with Bootstrap set and an empty store bootstraps itself with Peers
// (every node of a static cluster bootstraps the same configuration).
// On start the node restores the newest snapshot itself and refuses to start
// (leaving the files alone) if it is damaged, instead of letting Raft fall
// back to an older snapshot whose following log entries may be compacted;
// Raft then replays the log after it.
//
// # Offline tools (recover.go, replay.go)
//
// Both open a stopped node's stores (raft.db's lock refuses a running
// node) and feed a fresh state machine what Raft would: its snapshot, then
// commands and configurations. Recover writes the result back with a new
// membership (RecoverCluster); Replay writes nothing and stops at a chosen
// index, so that a backup's digest can be checked against the state at
// exactly the index it reports (raftset digest).
//
// # Redis Cluster protocol (clusterproto.go)
//
// With cluster-enabled, the front end passes CLUSTER MYID, INFO, SLOTS,
// SHARDS, NODES, COUNTKEYSINSLOT and GETKEYSINSLOT here, and asks RouteSlot
// where a keyed command must go: the group is one shard owning all 16384
// slots, its leader the master, its other voters the replicas
// (docs/sharding.md). COUNTKEYSINSLOT and GETKEYSINSLOT read the state
// machine's per-slot index. ProposeSlot proposes a slot migration step
// (log format 2, held back until every member reads it; an abort's
// SlotAbort format 3, written as SlotUnfreeze while a member reads only 2:
// formats.go).
//
// # Shards (host.go, shardmap.go, transport.go)
//
// Every Raft group of a process shares one Raft port (RaftPort:
// internal/raftmux over the peerauth layer, or a plain TCP layer on an
// unauthenticated loopback port); a single-group node is group 0, which
// sends no mux header. With a shard map (ShardMap), a Host
// runs one Node per shard the process holds, shard 0 in DataDir as before
// and shard N in DataDir/shards/N, and routes the front end's calls by the
// slot of their keys; keyless ones go to the home shard (the lowest id
// held), except DBSIZE and FLUSHALL/FLUSHDB, which cover every shard held.
// A shard's internal calls to other processes are wrapped as
// raftset.shard <id> <call>, which the receiving Host unwraps for its
// replica of that shard. The leaders of shards a process does not hold come
// from their members (raftset.leader, every remoteRefresh). CLUSTER replies
// show one Redis node id per process (docs/sharding.md).
//
// # Nodes added later (addnode.go, nodes.go, noreplica.go)
//
// RAFT.SHARD ADDNODE writes a node record (id, client and Raft address)
// into the map; every Host looks a node's Raft address up in peers, then
// in the records. A process the shard map names in no shard starts holding
// no replica: it learns the map from the metadata voters, redirects by it,
// refuses keyless commands until its first replica (ADDREPLICA), which
// becomes its home shard; its internal calls authenticate with the
// process's configuration.
//
// # The metadata group and slot moves (metagroup.go, moveslots.go)
//
// The map is replicated by the metadata group (group MetaGroup on the same
// port, in DataDir/meta; its voters are the members of the shard-map's
// first shard until RAFT.SHARD ADDMETA / REMOVEMETA change them, after
// which the map's meta line names them and each process's map refresh
// starts or closes its replica: metavoters.go): a state machine of the usual kind storing the encoded map,
// changed only by compare-and-set from the map a change was computed from.
// The directive only bootstraps it (epoch 1). Every Host refreshes its map
// every remoteRefresh (voters from their own replica, others from a voter
// after a barrier) and routes by the newest epoch. RAFT.SHARD MOVESLOTS
// runs on the metadata leader's process: plan (map), drop in the target and
// freeze in the source, export/import batches, flip (map), own in the
// target, drop in the source, stable (map); each step keyed by the map
// epoch that planned or flipped it, so running the command again after a
// failure completes the move. Moves of disjoint ranges run at once, each
// its own entry in the map's list (slotmoves.go) with its own epochs. A
// refusal of a slot the map has given to another shard becomes -MOVED.
//
// # Leader spreading (leaders.go, autobalance.go)
//
// RAFT.SHARD BALANCE-LEADERS, on the metadata leader's process, moves
// leaderships towards AssignLeaders' plan, one confirmed Raft transfer at a
// time. With Config.LeaderBalanceInterval set, that process also runs the
// same driver by itself, one transfer per interval, once every shard's
// leader and term, and the map's epoch, have read the same for a whole
// interval with no slot move in the map; a failed transfer backs off.
//
// # Test-only switches (clock.go, ackearly.go)
//
// Config.ClockOffset shifts the node's wall clock, which the cluster clock
// (clock.go: entry time, read expiry, active expiry) slews towards while
// the node leads; Config.AckBeforeCommit makes the leader answer
// writes before they commit. Both exist for the Jepsen suite; cmd/raftset
// refuses them without enable-debug-flags.
package cluster
