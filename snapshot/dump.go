package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"

	"raftset/internal/setenc"
)

// DUMP payloads (src/cluster.c createDumpPayload): one value as an RDB
// record without key or expiry — the type byte and the value — then the RDB
// version (2 bytes, little-endian) and the CRC64 of everything before it
// (8 bytes, little-endian). The value bytes are the Writer's, so a payload is
// exactly what Redis writes for the same value and encoding.

// DumpVersion is the RDB version written into payloads: Redis 7.0's, the
// newest every Redis 7 accepts (RESTORE refuses a version above its own), so
// a listpack set is written as a plain set record, as in a version-10 export.
const DumpVersion = VersionRedis70

// ErrDumpPayload is returned by Undump for a payload whose version is newer
// than the Reader reads or whose checksum does not match: Redis's "DUMP
// payload version or checksum are wrong".
var ErrDumpPayload = errors.New("snapshot: DUMP payload version or checksum are wrong")

// Dump returns the DUMP payload of a string (set nil) or a set.
func Dump(value []byte, set *setenc.Set) []byte {
	var out bytes.Buffer
	w := &Writer{w: &out, version: DumpVersion, compress: true}
	if set != nil {
		t := w.setType(set)
		w.buf = append(w.buf, t)
		w.writeSetValue(t, set)
	} else {
		w.buf = append(w.buf, TypeString)
		w.writeString(value)
	}
	w.buf = binary.LittleEndian.AppendUint16(w.buf, DumpVersion)
	w.flush()
	// Writing to a bytes.Buffer cannot fail.
	return binary.LittleEndian.AppendUint64(out.Bytes(), w.crc)
}

// Undump decodes a DUMP payload (from raftset or Redis) into a Record
// without key. Its errors: ErrDumpPayload (checked first, as Redis's
// verifyDumpPayload does), an *UnsupportedTypeError for a value raftset does
// not hold (a list, hash, sorted set, ...), or ErrCorrupt for bytes that do
// not decode, an empty set among them. Sets are built with lim, as Redis
// converts encodings on load.
func Undump(payload []byte, lim setenc.Limits) (*Record, error) {
	if len(payload) < 10 {
		return nil, ErrDumpPayload
	}
	footer := payload[len(payload)-10:]
	ver := int(binary.LittleEndian.Uint16(footer))
	if ver > maxReadVersion {
		return nil, ErrDumpPayload
	}
	if crc64Update(0, payload[:len(payload)-8]) != binary.LittleEndian.Uint64(footer[2:]) {
		return nil, ErrDumpPayload
	}
	if lim == (setenc.Limits{}) {
		lim = setenc.DefaultLimits()
	}
	in := newInput(bytes.NewReader(payload[:len(payload)-10]))
	r := &Reader{in: in, str: strDecoder{in: in}, opt: ReaderOptions{Limits: lim}, version: ver}
	t, err := in.readByte()
	if err != nil {
		return nil, corruptf(0, err, "empty payload")
	}
	if t > maxType || t == 8 {
		return nil, corruptf(0, nil, "invalid object type %d", t)
	}
	rec := &Record{ExpireAtMs: NoExpiry, RDBType: t}
	ok, err := r.readValue(rec, 0, t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, corruptf(1, nil, "empty set")
	}
	return rec, nil
}
