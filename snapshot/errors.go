package snapshot

import (
	"errors"
	"fmt"
)

// ErrCorrupt is matched (errors.Is) by every error that reports a file which
// is not a well-formed RDB we can read: bad magic or version, a malformed
// length or string, an invalid intset or listpack, a duplicate key or member,
// truncation, a checksum mismatch. Use errors.As with *CorruptError for the
// offset.
var ErrCorrupt = errors.New("snapshot: corrupt RDB")

// ErrChecksum is matched, together with ErrCorrupt, when every record parsed
// but the CRC64 trailer does not match the file.
var ErrChecksum = errors.New("snapshot: RDB checksum mismatch")

// ErrNewerFormat is matched (errors.Is) by *NewerFormatError: a snapshot
// whose raftset-ver is a format newer than this build reads, written by a
// newer raftset. The reader reports it as the cause of a *CorruptError
// (ErrCorrupt too): it cannot tell a newer file from a damaged digit, but
// the message names the likelier cause.
var ErrNewerFormat = errors.New("snapshot: written by a newer raftset")

// NewerFormatError names the snapshot format a file needs.
type NewerFormatError struct {
	Format int // the file's raftset-ver
	Max    int // the newest this build reads
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("snapshot written by a newer raftset (snapshot format %d, this binary reads up to %d): upgrade this node", e.Format, e.Max)
}

// Unwrap makes errors.Is find ErrNewerFormat.
func (e *NewerFormatError) Unwrap() error { return ErrNewerFormat }

// ErrUnsupportedType is matched by *UnsupportedTypeError: a well-formed record
// of a type raftset does not hold (a list, hash, sorted set, stream or module
// value in a foreign dump).
var ErrUnsupportedType = errors.New("snapshot: RDB record of a type raftset does not hold")

// CorruptError says where a file stopped making sense.
type CorruptError struct {
	Offset int64  // byte offset in the file of the item that is wrong
	Reason string // what is wrong with it
	cause  error  // a lower-level error (io.ErrUnexpectedEOF, listpack.ErrCorrupt, ErrChecksum), or nil
}

func (e *CorruptError) Error() string {
	if nf := (*NewerFormatError)(nil); errors.As(e.cause, &nf) {
		return fmt.Sprintf("%v (%s at offset %d, unless the file is damaged)", nf, e.Reason, e.Offset)
	}
	if e.cause != nil && e.cause != ErrChecksum {
		return fmt.Sprintf("snapshot: corrupt RDB at offset %d: %s: %v", e.Offset, e.Reason, e.cause)
	}
	return fmt.Sprintf("snapshot: corrupt RDB at offset %d: %s", e.Offset, e.Reason)
}

// Unwrap makes errors.Is find ErrCorrupt and the cause.
func (e *CorruptError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.cause}
}

func corruptf(off int64, cause error, format string, args ...any) error {
	return &CorruptError{Offset: off, Reason: fmt.Sprintf(format, args...), cause: cause}
}

// UnsupportedTypeError names the record that stopped a read.
type UnsupportedTypeError struct {
	Offset int64 // of the record's type byte
	DB     int
	Key    []byte
	Type   byte // RDB object type; TypeName gives its name
	// Unskippable is set for types that SkipUnsupported cannot step over
	// (streams, pre-release modules, 7.4 hashes with field expiry): their
	// layouts need full parsers.
	Unskippable bool
}

func (e *UnsupportedTypeError) Error() string {
	s := fmt.Sprintf("snapshot: offset %d: key %q in db %d is a %s (RDB type %d), which raftset does not hold",
		e.Offset, e.Key, e.DB, TypeName(e.Type), e.Type)
	if e.Unskippable {
		s += "; records of this type cannot be skipped"
	}
	return s
}

// Is matches ErrUnsupportedType.
func (e *UnsupportedTypeError) Is(target error) bool { return target == ErrUnsupportedType }
