package snapshot

import "strconv"

// Opcodes and object types are frozen: they are Redis's own numbers
// (redis/redis src/rdb.h), and a Redis that loads our files reads them with
// exactly these meanings. Never renumber or reuse one.

// Opcodes: top-level records that are not keys. They occupy the top of the
// byte range so that a loader can tell them from an object type with one
// comparison.
const (
	OpSlotInfo       = 0xF4 // 244, 7.4+ cluster mode: slot, size, expires_size (lengths); ignored
	OpFunction2      = 0xF5 // 245: one string, a function library's source; skipped
	OpFunctionPreGA  = 0xF6 // 246: 7.0 release candidates only; Redis 7.x refuses it, and so do we
	OpModuleAux      = 0xF7 // 247: module id, when_opcode, when, then a module opcode stream; skipped
	OpIdle           = 0xF8 // 248: LRU idle seconds (length) for the next key; ignored
	OpFreq           = 0xF9 // 249: LFU counter (1 byte) for the next key; ignored
	OpAux            = 0xFA // 250: two strings, key and value
	OpResizeDB       = 0xFB // 251: keys and keys-with-expiry in the db (lengths); a sizing hint only
	OpExpireTimeMs   = 0xFC // 252: int64 LE unix milliseconds for the next key
	OpExpireTime     = 0xFD // 253: int32 LE unix seconds for the next key (written before RDB 3; read only)
	OpSelectDB       = 0xFE // 254: database index (length)
	OpEOF            = 0xFF // 255: end of records; the CRC64 trailer follows from version 5 on
	moduleOpcodeEOF  = 0    // module opcode stream (src/rdb.h RDB_MODULE_OPCODE_*)
	moduleOpcodeSint = 1
	moduleOpcodeUint = 2
	moduleOpcodeFlt  = 3
	moduleOpcodeDbl  = 4
	moduleOpcodeStr  = 5
)

// Object types: the byte before each key. Only TypeString, TypeSetHashtable,
// TypeSetIntset and TypeSetListpack are values raftset holds; the others are
// named so that errors and `raftset rdb check` can say what a foreign dump
// contained.
const (
	TypeString           = 0  // string
	TypeList             = 1  // length n, n strings (legacy linked list)
	TypeSetHashtable     = 2  // length n, n strings: a set in any encoding can be written so
	TypeZset             = 3  // n × (member, score as 1-byte length + ASCII)
	TypeHash             = 4  // n × (field, value)
	TypeZset2            = 5  // n × (member, float64 LE)
	TypeModulePreGA      = 6  // unloadable
	TypeModule2          = 7  // module id + module opcode stream
	TypeHashZipmap       = 9  // string blob (legacy)
	TypeListZiplist      = 10 // string blob (legacy)
	TypeSetIntset        = 11 // string blob: the intset bytes
	TypeZsetZiplist      = 12 // string blob
	TypeHashZiplist      = 13 // string blob
	TypeListQuicklist    = 14 // n × ziplist string
	TypeStreamListpacks  = 15 // stream (not skippable without a stream parser)
	TypeHashListpack     = 16 // string blob
	TypeZsetListpack     = 17 // string blob
	TypeListQuicklist2   = 18 // n × (container length, string)
	TypeStreamListpacks2 = 19 // stream
	TypeSetListpack      = 20 // string blob: the listpack bytes (RDB 11+, Redis 7.2+)
	TypeStreamListpacks3 = 21 // stream
	TypeHashMetadataPre  = 22 // 7.4 hash with field expiry (pre-GA)
	TypeHashMetadata     = 24 // 7.4 hash with field expiry
	TypeHashListpackEx   = 25 // 7.4 listpack hash with field expiry
	TypeHashListpackExPr = 23 // 7.4 listpack hash with field expiry (pre-GA)
	maxType              = 25
)

// String encodings: the low six bits of a length byte whose top two bits are
// 11 (src/rdb.h RDB_ENC_*).
const (
	encInt8  = 0
	encInt16 = 1
	encInt32 = 2
	encLZF   = 3
)

// Versions. We write 11, the newest version Redis 7.2 accepts (it refuses
// 12); 7.4 and 8.x load 11 as well. 10 is the Redis 7.0 export, which has no
// listpack set type. We read everything up to 12, the 7.4/8.0 version, whose
// differences (hash field expiry, SLOT_INFO) do not touch strings and sets.
const (
	VersionRedis70  = 10
	VersionRedis72  = 11
	minReadVersion  = 1
	maxReadVersion  = 12
	firstCRCVersion = 5 // files before version 5 end right after OpEOF
)

// Type names as redis-check-rdb prints them (src/redis-check-rdb.c
// rdb_type_string), used in errors and by `raftset rdb check`.
var typeNames = map[byte]string{
	TypeString:           "string",
	TypeList:             "list-linked",
	TypeSetHashtable:     "set-hashtable",
	TypeZset:             "zset-v1",
	TypeHash:             "hash-hashtable",
	TypeZset2:            "zset-v2",
	TypeModulePreGA:      "module-pre-release",
	TypeModule2:          "module-value",
	TypeHashZipmap:       "hash-zipmap",
	TypeListZiplist:      "list-ziplist",
	TypeSetIntset:        "set-intset",
	TypeZsetZiplist:      "zset-ziplist",
	TypeHashZiplist:      "hash-ziplist",
	TypeListQuicklist:    "quicklist",
	TypeStreamListpacks:  "stream",
	TypeHashListpack:     "hash-listpack",
	TypeZsetListpack:     "zset-listpack",
	TypeListQuicklist2:   "quicklist-v2",
	TypeStreamListpacks2: "stream-v2",
	TypeSetListpack:      "set-listpack",
	TypeStreamListpacks3: "stream-v3",
	TypeHashMetadataPre:  "hash-hashtable-md-pre-release",
	TypeHashListpackExPr: "hash-listpack-md-pre-release",
	TypeHashMetadata:     "hash-hashtable-md",
	TypeHashListpackEx:   "hash-listpack-md",
}

// TypeName returns the redis-check-rdb name of an RDB object type, or
// "unknown-N".
func TypeName(t byte) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return "unknown-" + strconv.Itoa(int(t))
}
