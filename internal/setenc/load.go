package setenc

import (
	"errors"
	"fmt"

	"raftset/internal/setenc/hashtable"
	"raftset/internal/setenc/intset"
	"raftset/internal/setenc/listpack"
	"raftset/internal/strictint"
)

// ErrEmpty is returned for a loaded set with no members: Redis skips such a
// key (an empty listpack) rather than failing the load.
var ErrEmpty = errors.New("setenc: empty set")

// ErrDuplicate is returned when a loaded set holds the same member twice.
var ErrDuplicate = errors.New("setenc: duplicate member")

// LoadMode says how much a loaded set may be re-encoded.
type LoadMode uint8

const (
	// AsRedis re-encodes as a loading Redis 7.2 does (src/rdb.c): an intset or
	// listpack over its limit becomes a hashtable, and a hashtable record small
	// enough is rebuilt as an intset or listpack. Use it for foreign dumps.
	AsRedis LoadMode = iota
	// Exact keeps every set in the encoding and order it was written in. A
	// replica restoring its own cluster's snapshot must use it: the state
	// after a restore has to equal the state after replaying the log, even for
	// sets that a limit change or deletions left in a larger encoding.
	Exact
)

func parseInt(m []byte) (int64, bool) { return strictint.Parse(m) }

// FromIntset adopts an intset blob after deep validation. The set owns blob
// afterwards.
func FromIntset(blob []byte, lim Limits, mode LoadMode) (*Set, error) {
	if err := intset.Validate(blob, true); err != nil {
		return nil, err
	}
	if len(blob) > maxCompactBytes {
		return tableFromBlob(Intset, blob), nil
	}
	s := blobSet(Intset, blob)
	if mode == AsRedis && intset.Len(blob) > lim.maxIntset() {
		s.toHashtable(intset.Len(blob))
	}
	return s, nil
}

// FromListpack adopts a set listpack blob after deep validation (including
// duplicate members). An empty listpack gives ErrEmpty. The set owns blob
// afterwards.
func FromListpack(blob []byte, lim Limits, mode LoadMode) (*Set, error) {
	if err := listpack.ValidateSet(blob); err != nil {
		return nil, err
	}
	n := listpack.Len(blob)
	if n == 0 {
		return nil, ErrEmpty
	}
	if len(blob) > maxCompactBytes {
		return tableFromBlob(Listpack, blob), nil
	}
	s := blobSet(Listpack, blob)
	if mode == AsRedis && n > lim.MaxListpackEntries {
		s.toHashtable(n)
	}
	return s, nil
}

// Loader rebuilds a set from a member-by-member record (RDB type 2).
type Loader struct {
	set              *Set
	lim              Limits
	mode             LoadMode
	maxEle, totalEle int
}

// NewLoader starts a set that will receive count members.
func NewLoader(count int, lim Limits, mode LoadMode) *Loader {
	l := &Loader{lim: lim, mode: mode}
	if mode == Exact || count > lim.maxIntset() {
		// count comes from an untrusted file: size for it only up to a bound,
		// and let a real set of that size grow as its members arrive.
		l.set = tableSet(hashtable.New(min(count, 1<<16)))
	} else {
		l.set = newIntset()
	}
	return l
}

// Add appends the next member; a member seen before gives ErrDuplicate.
func (l *Loader) Add(m []byte) error {
	s := l.set
	l.maxEle = max(l.maxEle, len(m))
	l.totalEle += len(m)
	if s.kind() == Intset {
		if v, ok := strictint.Parse(m); ok && len(s.blob())+8 <= maxCompactBytes {
			b, added := intset.Add(s.blob(), v)
			s.setBlob(s.kind(), b)
			if !added {
				return fmt.Errorf("member %q: %w", m, ErrDuplicate)
			}
			return nil
		}
		if s.Len() < l.lim.MaxListpackEntries && l.maxEle <= l.lim.MaxListpackValue &&
			l.totalEle <= maxListpackBytes {
			s.intsetToListpack(1)
		} else {
			s.toHashtable(s.Len() + 1)
		}
	}
	if s.kind() == Listpack {
		if s.listpackCanTake(len(m), l.lim) {
			if listpack.Find(s.blob(), m) >= 0 {
				return fmt.Errorf("member %q: %w", m, ErrDuplicate)
			}
			s.setBlob(s.kind(), listpack.Append(s.blob(), m))
			return nil
		}
		s.toHashtable(s.Len() + 1)
	}
	if !s.ht().Add(m) {
		return fmt.Errorf("member %q: %w", m, ErrDuplicate)
	}
	return nil
}

// Set returns the loaded set, or ErrEmpty if no member was added.
func (l *Loader) Set() (*Set, error) {
	if l.set.Len() == 0 {
		return nil, ErrEmpty
	}
	return l.set, nil
}

// tableFromBlob turns a compact blob too large for a Set's compact form into a
// hashtable, keeping its order.
func tableFromBlob(e Encoding, blob []byte) *Set {
	t := hashtable.New(0)
	iterateBlob(e, blob, func(m []byte) bool { t.Add(m); return true })
	return tableSet(t)
}
