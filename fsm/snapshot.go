package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"raftset/internal/setenc"
	"raftset/snapshot"
)

// Snapshots are RDB files (package snapshot) with AUX fields that carry the
// rest of the replicated state:
//
//	raftset-ver          written by snapshot.Writer: sets restore exactly
//	raftset-clock        the state machine's clock (ms)
//	raftset-limits       set-max-intset-entries, -listpack-entries, -listpack-value
//	raftset-last-delete  the index of the last deletion (WATCH stamp of missing keys)
//	raftset-index        index and term of the last applied entry
//	raftset-term
//	raftset-versions     one uvarint per key, in file order: each key's WATCH stamp
//
// followed by the fields of SetSnapshotAux, then AuxNodes (nodes.go) when
// any node published an address, and AuxACL (acl.go) when the users are not
// a new node's. ctime is the state machine's
// clock and used-mem 0, so two replicas at the same index write the same
// bytes. Keys are written in the keyspace's dense order, which Restore
// rebuilds by adding them in file order; logically expired keys are written
// too, since they are still state until the leader's expiry deletes them.

// AUX field names of the state machine's own metadata.
const (
	AuxClock      = "raftset-clock"
	AuxLimits     = "raftset-limits"
	AuxLastDelete = "raftset-last-delete"
	AuxIndex      = "raftset-index"
	AuxTerm       = "raftset-term"
	AuxVersions   = "raftset-versions"
	// AuxStringEncodings lists the strings whose OBJECT ENCODING is not the
	// one a load gives them (tryObjectEncoding's, by content): raw after
	// APPEND or SETRANGE, embstr from INCRBYFLOAT. Each is a uvarint gap from
	// the previous listed position (the first from -1) and a byte, 'r' or
	// 'e'. Redis ignores it and loads them by content, as it does itself.
	AuxStringEncodings = "raftset-string-encodings"
)

// standardAux are fields RestoredAux leaves out: Redis's own and ours.
var standardAux = []string{
	"redis-ver", "redis-bits", "ctime", "used-mem", "aof-base", snapshot.AuxRaftsetVer,
	AuxClock, AuxLimits, AuxLastDelete, AuxIndex, AuxTerm, AuxVersions, AuxScripts, AuxMaxmemory,
	AuxStringEncodings, AuxSlots,
}

// ErrSnapshot is wrapped by Restore and LoadRDB errors about the file's
// content (as opposed to I/O errors from the reader).
var ErrSnapshot = errors.New("fsm: bad snapshot")

// SetSnapshotAux registers fn, called by every Snapshot (outside the state
// lock) for extra AUX fields to store in the file, such as the Raft
// configuration. Their keys must not clash with the standard ones.
func (f *FSM) SetSnapshotAux(fn func() []snapshot.AuxField) {
	f.auxMu.Lock()
	f.auxFn = fn
	f.auxMu.Unlock()
}

// RestoredAux returns the AUX fields of the last snapshot Restore loaded,
// except Redis's standard fields and the state machine's own.
func (f *FSM) RestoredAux() []snapshot.AuxField {
	f.auxMu.Lock()
	defer f.auxMu.Unlock()
	return f.restoredAux
}

func (f *FSM) callerAux() []snapshot.AuxField {
	f.auxMu.Lock()
	fn := f.auxFn
	f.auxMu.Unlock()
	if fn == nil {
		return nil
	}
	return fn()
}

// fsmSnapshot is a point-in-time view of a keyspace: its chunks, shared
// with the live keyspace, which copies a chunk (and then a set) before it
// changes it, and the key bytes, copied. Persist reads exactly what was
// there at capture while Apply goes on.
type fsmSnapshot struct {
	f       *FSM
	ks      *keyspace // the keyspace whose chunks this snapshot shares
	gen     uint64
	chunks  []*chunk
	n       int
	keys    []byte // the keys in dense order, each as <uvarint length><bytes>
	now     int64
	lim     setenc.Limits
	evict   EvictConfig
	lastDel uint64
	index   uint64
	term    uint64
	nodes   map[string]string // never changed in place (nodes.go)
	scripts map[string][]byte // a copy of the script cache (bodies are never changed in place)
	users   []byte            // AuxACL's value, nil for a new node's users (acl.go)
	slots   string            // AuxSlots's value, empty while no slot entry was applied
	aux     []snapshot.AuxField
	release sync.Once
	// passed counts the chunks Persist has written and dropped: the
	// keyspace writes those in place again (see keyspace).
	passed atomic.Int64
}

// Snapshot captures the state for Raft: it copies the key bytes and the
// chunk pointers; Persist does the writing while Apply continues.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.HaltErr(); err != nil {
		return nil, fmt.Errorf("fsm: snapshot refused: %w", err)
	}
	aux := f.callerAux()
	f.mu.Lock()
	s := f.capture()
	f.mu.Unlock()
	s.aux = aux
	return s, nil
}

// capture takes a snapshot; f.mu must be held for writing.
func (f *FSM) capture() *fsmSnapshot {
	ks := f.ks
	n := ks.Len()
	s := &fsmSnapshot{
		f: f, ks: ks, n: n,
		chunks: slices.Clone(ks.chunks),
		keys:   make([]byte, 0, n*16),
		now:    ks.now, lim: ks.lim, evict: ks.evict, lastDel: ks.lastDel, index: ks.index, term: ks.term,
		nodes: *f.nodes.Load(), scripts: maps.Clone(ks.scripts),
		users: f.usersAux(),
	}
	for i := range n {
		k := ks.keys.At(i)
		s.keys = binary.AppendUvarint(s.keys, uint64(len(k)))
		s.keys = append(s.keys, k...)
	}
	if ks.slots != nil {
		s.slots = formatSlots(ks.slots)
	}
	s.gen = ks.share(&s.passed)
	return s
}

// Persist writes the snapshot as an RDB file to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.writeOnce(sink); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// ExportRDB writes the captured state to w as an RDB version 10 file,
// which Redis 7.0 and later load (listpack sets become type-2 records, and
// without raftset-ver a reader applies Redis's load conversions; the other
// AUX fields are kept). It may be called more than once (SYNC sizes the file
// first, then sends it); every call writes the same bytes.
func (s *fsmSnapshot) ExportRDB(w io.Writer) error {
	return s.writeVersion(w, snapshot.VersionRedis70, false)
}

// IndexTerm returns the index and term of the last entry applied at capture
// (the file's raftset-index and raftset-term AUX fields).
func (s *fsmSnapshot) IndexTerm() (index, term uint64) { return s.index, s.term }

// Release ends the sharing: once no snapshot of the keyspace is live, its
// values are no longer copied before changes.
func (s *fsmSnapshot) Release() {
	s.release.Do(func() {
		f := s.f
		f.mu.Lock()
		defer f.mu.Unlock()
		s.ks.unshare(s.gen)
	})
}

// writeOnce writes the RDB file, letting go of each chunk once written: the
// snapshot cannot be written again.
func (s *fsmSnapshot) writeOnce(w io.Writer) error {
	if s.passed.Load() != 0 {
		return errors.New("fsm: snapshot already persisted")
	}
	return s.writeVersion(w, 0, true)
}

// writeVersion writes the RDB file in the given version (0: the default).
// With release, each chunk is dropped and reported passed (to the
// keyspace, which stops copying it) once its keys are written.
func (s *fsmSnapshot) writeVersion(w io.Writer, version int, release bool) error {
	n := s.n
	vers := make([]byte, 0, n*3)
	var encs []byte
	expires, lastEnc := 0, -1
	for i := range n {
		c, j := s.chunks[i>>chunkShift], i&chunkMask
		vers = binary.AppendUvarint(vers, c.vers[j])
		if c.exps[j] != noExpiry {
			expires++
		}
		if code := unloadedEncoding(c, j); code != 0 {
			encs = append(binary.AppendUvarint(encs, uint64(i-lastEnc)), code)
			lastEnc = i
		}
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	aux := []snapshot.AuxField{
		{Key: AuxClock, Value: strconv.FormatInt(s.now, 10)},
		{Key: AuxLimits, Value: fmt.Sprintf("%d %d %d", s.lim.MaxIntsetEntries, s.lim.MaxListpackEntries, s.lim.MaxListpackValue)},
		{Key: AuxLastDelete, Value: u(s.lastDel)},
		{Key: AuxIndex, Value: u(s.index)},
		{Key: AuxTerm, Value: u(s.term)},
		{Key: AuxVersions, Value: string(vers)},
	}
	if s.evict != DefaultEvictConfig() {
		// Written only when set, so that the files of a cluster that never
		// set it stay byte for byte what they were.
		aux = append(aux, snapshot.AuxField{Key: AuxMaxmemory, Value: s.evict.aux()})
	}
	if len(encs) > 0 {
		aux = append(aux, snapshot.AuxField{Key: AuxStringEncodings, Value: string(encs)})
	}
	if s.slots != "" {
		aux = append(aux, snapshot.AuxField{Key: AuxSlots, Value: s.slots})
	}
	aux = append(aux, s.aux...)
	if len(s.nodes) > 0 {
		aux = append(aux, snapshot.AuxField{Key: AuxNodes, Value: formatNodes(s.nodes)})
	}
	if len(s.scripts) > 0 {
		aux = append(aux, snapshot.AuxField{Key: AuxScripts, Value: formatScripts(s.scripts)})
	}
	if s.users != nil {
		aux = append(aux, snapshot.AuxField{Key: AuxACL, Value: string(s.users)})
	}
	redisVer := ""
	if version == snapshot.VersionRedis70 {
		redisVer = "7.0.0"
	}
	format := 1
	if s.slots != "" {
		format = 2 // a format-1 reader would ignore the slot states
	}
	wr, err := snapshot.NewWriter(w, snapshot.WriterOptions{
		Format:   format,
		Version:  version,
		RedisVer: redisVer,
		Compress: true,
		Ctime:    time.UnixMilli(s.now), // deterministic: the FSM clock, not the wall clock
		Aux:      aux,
	})
	if err != nil {
		return err
	}
	if n > 0 {
		if err := wr.SelectDB(0, n, expires); err != nil {
			return err
		}
	}
	keys := s.keys
	for i := range n {
		l, w := binary.Uvarint(keys)
		key := keys[w : w+int(l)]
		keys = keys[w+int(l):]
		c, j := s.chunks[i>>chunkShift], i&chunkMask
		exp := c.exps[j]
		if exp == noExpiry {
			exp = snapshot.NoExpiry
		}
		if c.kinds[j]&kindMask == kindSet {
			err = wr.WriteSet(key, &c.vals[j], exp)
		} else {
			err = wr.WriteString(key, cellString(c, j), exp)
		}
		if err != nil {
			return err
		}
		if release && (j == chunkMask || i == n-1) {
			// The writer has copied the chunk's values into its buffer.
			s.chunks[i>>chunkShift] = nil
			s.passed.Store(int64(i>>chunkShift) + 1)
		}
	}
	return wr.Close()
}

// WriteRDB writes the current state as an RDB file (SAVE, DEBUG RELOAD),
// with the same content and AUX fields as a snapshot.
func (f *FSM) WriteRDB(w io.Writer) error {
	aux := f.callerAux()
	f.mu.Lock()
	s := f.capture()
	f.mu.Unlock()
	defer s.Release()
	s.aux = aux
	return s.writeOnce(w)
}

// Restore replaces the whole state with a snapshot. The file is read into a
// new keyspace, which replaces the current one only once the file has been
// read to the end and its checksum verified; on any error the current state
// is kept and the error returned.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if err := f.HaltErr(); err != nil {
		return fmt.Errorf("fsm: restore refused: %w", err)
	}
	f.mu.RLock()
	lim, indexed := f.ks.lim, f.ks.slotIdx != nil
	f.mu.RUnlock()
	ks, aux, err := readKeyspace(rc, lim, 0, false, 0, false)
	if err != nil {
		if errors.Is(err, snapshot.ErrNewerFormat) {
			f.haltRestore(err)
			return err
		}
		f.log.Error("restore failed; state unchanged", "error", err)
		return err
	}
	if indexed {
		ks.buildSlotIndex() // before taking the lock: O(keys)
	}
	nodes := map[string]string{}
	var extra []snapshot.AuxField
	var users []byte
	for _, a := range aux {
		switch a.Key {
		case AuxNodes:
			nodes = parseNodes(a.Value)
		case AuxACL:
			users = []byte(a.Value)
		default:
			extra = append(extra, a)
		}
	}
	f.mu.Lock()
	if err := f.restoreUsers(users); err != nil {
		f.mu.Unlock()
		f.log.Error("restore failed; state unchanged", "error", err)
		return err
	}
	f.ks = ks
	f.publishMemory()
	f.nodes.Store(&nodes)
	f.mu.Unlock()
	f.auxMu.Lock()
	f.restoredAux = extra
	f.auxMu.Unlock()
	f.storeApplied(ks.index, true)
	f.notifyFlush()
	f.log.Info("restored snapshot", "keys", ks.Len(), "index", ks.index, "term", ks.term)
	return nil
}

// LoadOptions configure LoadRDB.
type LoadOptions struct {
	// DB is the database of the file to load; keys of other databases are
	// skipped.
	DB int
	// NowMs is the time against which deadlines are checked: keys whose
	// deadline is at or before max(NowMs, the state machine's clock) are
	// dropped, as a loading Redis primary drops them.
	NowMs int64
	// SkipUnsupported steps over records of types raftset does not hold
	// (lists, hashes, sorted sets...) instead of failing.
	SkipUnsupported bool
}

// LoadRDB replaces the state's keys with those of an RDB file, such as a
// Redis dump.rdb (sets get the encodings a loading Redis 7.2 gives them with
// the current limits; a raftset file keeps its own), and returns the number
// of keys loaded. Like Restore it builds the keyspace aside and swaps it in
// only on success. The clock, limits and applied index are kept; every key
// counts as changed (WATCH aborts). LoadRDB is not replicated by itself: a
// cluster must run it at the same point on every replica.
func (f *FSM) LoadRDB(r io.Reader, opts LoadOptions) (int, error) {
	f.mu.RLock()
	lim, now := f.ks.lim, max(opts.NowMs, f.ks.now)
	f.mu.RUnlock()
	ks, _, err := readKeyspace(r, lim, opts.DB, true, now, opts.SkipUnsupported)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.ks
	ks.now, ks.lim, ks.index, ks.term = old.now, old.lim, old.index, old.term
	ks.evict = old.evict
	ks.scripts = old.scripts
	ks.slots = old.slots
	if old.slotIdx != nil {
		ks.buildSlotIndex()
	}
	ks.lastDel = old.index
	for i := range ks.Len() {
		ks.setVer(i, old.index)
	}
	ks.acct.flush(ks)
	ks.acct.resetAccess(ks.now, ks.evict.Policy.lfu())
	f.ks = ks
	f.publishMemory()
	f.notifyFlush()
	return ks.Len(), nil
}

// readKeyspace reads an RDB file into a new keyspace. For a Restore (load
// false) it also takes the state machine's metadata from the AUX fields and
// requires a single database 0; for LoadRDB it keeps database db and drops
// keys expired at now. It returns the AUX fields that are not standard.
func readKeyspace(r io.Reader, lim setenc.Limits, db int, load bool, now int64, skip bool) (*keyspace, []snapshot.AuxField, error) {
	rd, err := snapshot.NewReader(r, snapshot.ReaderOptions{
		Limits:              lim,
		SkipUnsupported:     skip,
		NoDuplicateKeyCheck: true, // the keyspace's own Table detects them
	})
	if err != nil {
		return nil, nil, err
	}
	ks := newKeyspace(lim)
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if rec.DB != db {
			if !load {
				return nil, nil, fmt.Errorf("%w: key %q in database %d", ErrSnapshot, rec.Key, rec.DB)
			}
			continue
		}
		exp := rec.ExpireAtMs
		if exp < 0 {
			exp = noExpiry
		}
		if load && exp != noExpiry && exp <= now {
			continue
		}
		if ks.find(rec.Key) >= 0 {
			return nil, nil, fmt.Errorf("%w: duplicate key %q in database %d", ErrSnapshot, rec.Key, rec.DB)
		}
		switch rec.Kind {
		case snapshot.KindString:
			if len(rec.Value) > maxStringBytes {
				return nil, nil, fmt.Errorf("%w: string %q of %d bytes", ErrSnapshot, rec.Key, len(rec.Value))
			}
			ks.addString(rec.Key, rec.Value, exp)
		case snapshot.KindSet:
			ks.addSet(rec.Key, rec.Set, exp)
		default:
			return nil, nil, fmt.Errorf("%w: key %q of kind %v", ErrSnapshot, rec.Key, rec.Kind)
		}
	}
	var extra []snapshot.AuxField
	for _, a := range rd.Aux() {
		if !load {
			if err := ks.applyAux(a); err != nil {
				return nil, nil, err
			}
		}
		if !isStandardAux(a.Key) {
			extra = append(extra, a)
		}
	}
	ks.acct.flush(ks)
	ks.acct.resetAccess(ks.now, ks.evict.Policy.lfu())
	return ks, extra, nil
}

func isStandardAux(k string) bool {
	for _, s := range standardAux {
		if k == s {
			return true
		}
	}
	return false
}

// applyAux takes one of the state machine's AUX fields into ks, whose keys
// have all been read.
func (ks *keyspace) applyAux(a snapshot.AuxField) error {
	bad := func() error { return fmt.Errorf("%w: AUX %s = %.40q", ErrSnapshot, a.Key, a.Value) }
	num := func(dst *uint64) error {
		v, err := strconv.ParseUint(a.Value, 10, 64)
		if err != nil {
			return bad()
		}
		*dst = v
		return nil
	}
	switch a.Key {
	case AuxClock:
		v, err := strconv.ParseInt(a.Value, 10, 64)
		if err != nil {
			return bad()
		}
		ks.now = v
	case AuxLimits:
		f := strings.Fields(a.Value)
		if len(f) != 3 {
			return bad()
		}
		var v [3]int
		for i, s := range f {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return bad()
			}
			v[i] = n
		}
		ks.lim = setenc.Limits{MaxIntsetEntries: v[0], MaxListpackEntries: v[1], MaxListpackValue: v[2]}
	case AuxMaxmemory:
		e, ok := parseEvictAux(a.Value)
		if !ok {
			return bad()
		}
		ks.evict = e
	case AuxLastDelete:
		return num(&ks.lastDel)
	case AuxIndex:
		return num(&ks.index)
	case AuxTerm:
		return num(&ks.term)
	case AuxScripts:
		scripts, ok := parseScripts(a.Value)
		if !ok {
			return bad()
		}
		ks.scripts = scripts
	case AuxStringEncodings:
		return ks.applyStringEncodings([]byte(a.Value))
	case AuxSlots:
		x, err := parseSlots(a.Value)
		if err != nil {
			return fmt.Errorf("%w: AUX %s: %w", ErrSnapshot, a.Key, err)
		}
		ks.slots = x
	case AuxVersions:
		b := []byte(a.Value)
		for i := range ks.Len() {
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return fmt.Errorf("%w: AUX %s holds fewer versions than the %d keys", ErrSnapshot, a.Key, ks.Len())
			}
			ks.setVer(i, v)
			b = b[n:]
		}
		if len(b) != 0 {
			return fmt.Errorf("%w: AUX %s holds more versions than the %d keys", ErrSnapshot, a.Key, ks.Len())
		}
	}
	return nil
}

// unloadedEncoding is the AuxStringEncodings code of cell j of c: 'r' or
// 'e' for a string a load would encode otherwise, 0 for any other value.
func unloadedEncoding(c *chunk, j int) byte {
	k := c.kinds[j]
	if k&kindMask != kindString || k&strInt != 0 {
		return 0
	}
	b := stringCell(&c.vals[j])
	_, isInt := contentInt(b)
	switch {
	case k&strRaw != 0 && (len(b) <= embstrMax || isInt):
		return 'r'
	case k&strRaw == 0 && isInt:
		return 'e'
	}
	return 0
}

// applyStringEncodings re-encodes the strings AuxStringEncodings lists,
// which the load stored by content.
func (ks *keyspace) applyStringEncodings(b []byte) error {
	pos := -1
	for len(b) > 0 {
		gap, n := binary.Uvarint(b)
		if n <= 0 || n >= len(b) || gap == 0 || gap > uint64(ks.Len()) || pos+int(gap) >= ks.Len() {
			return fmt.Errorf("%w: AUX %s: bad entry at byte %d", ErrSnapshot, AuxStringEncodings, n)
		}
		pos += int(gap)
		code := b[n]
		b = b[n+1:]
		if ks.kind(pos) != kindString {
			return fmt.Errorf("%w: AUX %s lists key %d, not a string", ErrSnapshot, AuxStringEncodings, pos)
		}
		v := ks.str(pos)
		switch code {
		case 'r':
			ks.putStringEnc(pos, v, encRaw)
		case 'e':
			ks.putStringEnc(pos, v, encBytes)
		default:
			return fmt.Errorf("%w: AUX %s: unknown code %q", ErrSnapshot, AuxStringEncodings, code)
		}
	}
	return nil
}
