package setenc

// Encoding is how a set is stored; its String is the OBJECT ENCODING answer.
type Encoding uint8

// The three encodings of a Redis 7.2 set.
const (
	Intset Encoding = iota + 1
	Listpack
	Hashtable
)

func (e Encoding) String() string {
	switch e {
	case Intset:
		return "intset"
	case Listpack:
		return "listpack"
	case Hashtable:
		return "hashtable"
	}
	return "unknown"
}
