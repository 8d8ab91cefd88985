package script

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The struct library Redis bundles (Roberto Ierusalimschy's lua_struct,
// deps/lua/src/lua_struct.c): struct.pack, struct.unpack and struct.size,
// with the sizes and the byte order of the x86-64 Linux Redis runs on
// (little endian; short 2, int 4, long and size_t 8 bytes; alignment off
// unless '!' asks for it, at most 8) and the library's error texts.

const (
	structMaxIntSize = 32
	structMaxAlign   = 8
)

type structHeader struct {
	big   bool
	align int
}

// structState walks a format string.
type structState struct {
	L    *lua.LState
	fn   string // the function's name, for argument errors
	fmt  string
	pos  int
	head structHeader
}

func (s *structState) argError(n int, msg string) {
	s.L.RaiseError("bad argument #%d to '%s' (%s)", n, s.fn, msg)
}

// getnum reads the number after an option, or returns df.
func (s *structState) getnum(df int) int {
	if s.pos >= len(s.fmt) || !isDigit(s.fmt[s.pos]) {
		return df
	}
	a := 0
	for s.pos < len(s.fmt) && isDigit(s.fmt[s.pos]) {
		d := int(s.fmt[s.pos] - '0')
		if a > math.MaxInt32/10 || a*10 > math.MaxInt32-d {
			s.L.RaiseError("integral size overflow")
		}
		a = a*10 + d
		s.pos++
	}
	return a
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// optsize is the size of option opt (reading its count), 0 for controls.
func (s *structState) optsize(opt byte) int {
	switch opt {
	case 'B', 'b':
		return 1
	case 'H', 'h':
		return 2
	case 'L', 'l', 'T', 'd':
		return 8
	case 'f':
		return 4
	case 'x':
		return 1
	case 'c':
		return s.getnum(1)
	case 'i', 'I':
		sz := s.getnum(4)
		if sz > structMaxIntSize {
			s.L.RaiseError("integral size %d is larger than limit of %d", sz, structMaxIntSize)
		}
		return sz
	}
	return 0
}

// toalign is the padding before an item of size at offset n.
func (s *structState) toalign(n, opt, size int) int {
	if size == 0 || opt == 'c' {
		return 0
	}
	size = min(size, s.head.align)
	return (size - (n & (size - 1))) & (size - 1)
}

// control handles the options that are not items.
func (s *structState) control(opt byte) {
	switch opt {
	case ' ':
	case '>':
		s.head.big = true
	case '<':
		s.head.big = false
	case '!':
		a := s.getnum(structMaxAlign)
		if a <= 0 || a&(a-1) != 0 {
			s.L.RaiseError("alignment %d is not a power of 2", a)
		}
		s.head.align = a
	default:
		s.argError(1, "invalid format option '"+string(opt)+"'")
	}
}

// number is luaL_checknumber: numbers, and strings that read as numbers.
func (s *structState) number(arg int) float64 {
	switch v := s.L.Get(arg).(type) {
	case lua.LNumber:
		return float64(v)
	case lua.LString:
		if f, ok := luaStringNumber(string(v)); ok {
			return f
		}
	}
	s.argError(arg, "number expected, got "+s.typeName(arg))
	return 0
}

// str is luaL_checklstring: strings, and numbers as Lua prints them.
func (s *structState) str(arg int) string {
	switch v := s.L.Get(arg).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return formatNumber(float64(v))
	}
	s.argError(arg, "string expected, got "+s.typeName(arg))
	return ""
}

// typeName is luaL_typename of an argument: "no value" past the last one,
// except in pack, which pushes a nil after its arguments before it reads
// them (lua_struct's separator from the string buffer).
func (s *structState) typeName(arg int) string {
	if arg > s.L.GetTop() && s.fn != "pack" {
		return "no value"
	}
	return s.L.Get(arg).Type().String()
}

// luaStringNumber converts a string as Lua 5.1's lua_Number coercion does
// (decimal or hexadecimal, surrounding spaces allowed).
func luaStringNumber(s string) (float64, bool) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, false
	}
	neg := false
	u := t
	if u[0] == '-' || u[0] == '+' {
		neg, u = u[0] == '-', u[1:]
	}
	if len(u) > 2 && (u[:2] == "0x" || u[:2] == "0X") {
		n, err := strconv.ParseUint(u[2:], 16, 64)
		if err != nil {
			return 0, false
		}
		if neg {
			return -float64(n), true
		}
		return float64(n), true
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	return f, true
}

func (e *Engine) structLib() *lua.LTable {
	L := e.L
	t := L.NewTable()
	newState := func(L *lua.LState, fn string) *structState {
		s := &structState{L: L, fn: fn, head: structHeader{align: 1}}
		s.fmt = s.str(1)
		return s
	}
	t.RawSetString("pack", L.NewFunction(func(L *lua.LState) int {
		s := newState(L, "pack")
		var out []byte
		arg := 2
		for s.pos < len(s.fmt) {
			opt := s.fmt[s.pos]
			s.pos++
			size := s.optsize(opt)
			pad := s.toalign(len(out), int(opt), size)
			out = append(out, make([]byte, pad)...)
			switch opt {
			case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
				n := s.number(arg)
				arg++
				var v uint64
				if n < 0 {
					v = uint64(int64(n))
				} else {
					v = uint64(n)
				}
				buf := make([]byte, size)
				for i := 0; i < size; i++ {
					j := i
					if s.head.big {
						j = size - 1 - i
					}
					buf[j] = byte(v)
					v >>= 8
				}
				out = append(out, buf...)
			case 'x':
				out = append(out, 0)
			case 'f':
				bits := math.Float32bits(float32(s.number(arg)))
				arg++
				out = s.order().AppendUint32(out, bits)
			case 'd':
				bits := math.Float64bits(s.number(arg))
				arg++
				out = s.order().AppendUint64(out, bits)
			case 'c', 's':
				str := s.str(arg)
				arg++
				if size == 0 {
					size = len(str)
				}
				if len(str) < size {
					s.argError(arg, "string too short")
				}
				out = append(out, str[:size]...)
				if opt == 's' {
					out = append(out, 0)
				}
			default:
				s.control(opt)
			}
		}
		L.Push(lua.LString(out))
		return 1
	}))
	t.RawSetString("unpack", L.NewFunction(func(L *lua.LState) int {
		s := newState(L, "unpack")
		data := s.str(2)
		pos := 1
		if L.GetTop() >= 3 && L.Get(3) != lua.LNil {
			pos = int(s.number(3))
		}
		if pos <= 0 {
			s.argError(3, "offset must be 1 or greater")
		}
		pos--
		n := 0
		ld := len(data)
		for s.pos < len(s.fmt) {
			opt := s.fmt[s.pos]
			s.pos++
			size := s.optsize(opt)
			pos += s.toalign(pos, int(opt), size)
			if !(size <= ld && pos <= ld-size) {
				s.argError(2, "data string too short")
			}
			switch opt {
			case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
				var l uint64
				for i := 0; i < size; i++ {
					j := size - 1 - i
					if s.head.big {
						j = i
					}
					l = l<<8 | uint64(data[pos+j])
				}
				if opt >= 'a' { // signed
					if shift := uint(size*8 - 1); shift < 64 {
						if mask := ^uint64(0) << shift; l&mask != 0 {
							l |= mask
						}
					}
					L.Push(lua.LNumber(float64(int64(l))))
				} else {
					L.Push(lua.LNumber(float64(l)))
				}
				n++
			case 'x':
			case 'f':
				L.Push(lua.LNumber(float64(math.Float32frombits(s.order().Uint32([]byte(data[pos : pos+4]))))))
				n++
			case 'd':
				L.Push(lua.LNumber(math.Float64frombits(s.order().Uint64([]byte(data[pos : pos+8])))))
				n++
			case 'c':
				if size == 0 {
					prev, ok := L.Get(-1).(lua.LNumber)
					if n == 0 || !ok {
						L.RaiseError("format 'c0' needs a previous size")
					}
					size = int(prev)
					L.Pop(1)
					n--
					if !(size <= ld && pos <= ld-size) {
						s.argError(2, "data string too short")
					}
				}
				L.Push(lua.LString(data[pos : pos+size]))
				n++
			case 's':
				end := bytes.IndexByte([]byte(data[pos:]), 0)
				if end < 0 {
					L.RaiseError("unfinished string in data")
				}
				size = end + 1
				L.Push(lua.LString(data[pos : pos+end]))
				n++
			default:
				s.control(opt)
			}
			pos += size
		}
		L.Push(lua.LNumber(pos + 1))
		return n + 1
	}))
	t.RawSetString("size", L.NewFunction(func(L *lua.LState) int {
		s := newState(L, "size")
		pos := 0
		for s.pos < len(s.fmt) {
			opt := s.fmt[s.pos]
			s.pos++
			size := s.optsize(opt)
			pos += s.toalign(pos, int(opt), size)
			switch {
			case opt == 's':
				s.argError(1, "option 's' has no fixed size")
			case opt == 'c' && size == 0:
				s.argError(1, "option 'c0' has no fixed size")
			}
			if !isAlnum(opt) {
				s.control(opt)
			}
			pos += size
		}
		L.Push(lua.LNumber(pos))
		return 1
	}))
	return t
}

func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

func (s *structState) order() byteOrder {
	if s.head.big {
		return binary.BigEndian
	}
	return binary.LittleEndian
}
