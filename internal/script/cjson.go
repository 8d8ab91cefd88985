package script

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// cjsonLib is the part of Lua CJSON that scripts use: encode, decode and
// null, with CJSON's output (numbers as %.14g, "/" escaped, empty tables as
// objects, sparse arrays refused). Object keys come out in the table's
// iteration order, which in gopher-lua is insertion order (CJSON's follows
// Lua's hash layout): deterministic, but not always Redis's order.
func (e *Engine) cjsonLib() *lua.LTable {
	L := e.L
	t := L.NewTable()
	e.null = L.NewUserData()
	t.RawSetString("null", e.null)
	t.RawSetString("encode", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.ArgError(1, "expected 1 argument")
		}
		var buf bytes.Buffer
		if msg := e.encodeJSON(&buf, L.Get(1), 0); msg != "" {
			L.RaiseError("%s", msg)
		}
		L.Push(lua.LString(buf.String()))
		return 1
	}))
	t.RawSetString("decode", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() != 1 {
			L.ArgError(1, "expected 1 argument")
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(L.CheckString(1))))
		dec.UseNumber()
		v, err := e.decodeJSON(dec)
		if err == nil {
			if _, err2 := dec.Token(); err2 != io.EOF {
				err = fmt.Errorf("Expected the end but found trailing data")
			}
		}
		if err != nil {
			L.RaiseError("%s", err.Error())
		}
		L.Push(v)
		return 1
	}))
	return t
}

const jsonMaxDepth = 1000

func (e *Engine) encodeJSON(buf *bytes.Buffer, v lua.LValue, depth int) string {
	switch x := v.(type) {
	case *lua.LNilType:
		buf.WriteString("null")
	case lua.LBool:
		buf.WriteString(strconv.FormatBool(bool(x)))
	case lua.LNumber:
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return "Cannot serialise number: must not be NaN or Inf"
		}
		buf.WriteString(formatNumber(f))
	case lua.LString:
		writeJSONString(buf, string(x))
	case *lua.LUserData:
		if x == e.null {
			buf.WriteString("null")
			return ""
		}
		return "Cannot serialise userdata: type not supported"
	case *lua.LTable:
		if depth >= jsonMaxDepth {
			return fmt.Sprintf("Cannot serialise, excessive nesting (%d)", depth+1)
		}
		x = e.shown(x)
		n, isArray := arrayLen(x)
		if isArray && n > 0 {
			buf.WriteByte('[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					buf.WriteByte(',')
				}
				if msg := e.encodeJSON(buf, x.RawGetInt(i), depth+1); msg != "" {
					return msg
				}
			}
			buf.WriteByte(']')
			return ""
		}
		buf.WriteByte('{')
		first := true
		var msg string
		each(x, func(k, val lua.LValue) {
			if msg != "" {
				return
			}
			var key string
			switch kk := k.(type) {
			case lua.LString:
				key = string(kk)
			case lua.LNumber:
				key = formatNumber(float64(kk))
			default:
				msg = "Cannot serialise table: table key must be a number or string"
				return
			}
			if !first {
				buf.WriteByte(',')
			}
			first = false
			writeJSONString(buf, key)
			buf.WriteByte(':')
			msg = e.encodeJSON(buf, val, depth+1)
		})
		if msg != "" {
			return msg
		}
		buf.WriteByte('}')
	default:
		return "Cannot serialise " + v.Type().String() + ": type not supported"
	}
	return ""
}

// each calls fn for every pair of t in pairs() order. LTable.ForEach walks
// Go maps, whose order differs between replicas.
func each(t *lua.LTable, fn func(k, v lua.LValue)) {
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		fn(k, v)
	}
}

// arrayLen reports whether every key of t is a positive integer and the
// largest; CJSON encodes such a table as an array (holes as null) unless
// it is excessively sparse, which the caller then encodes as an object.
func arrayLen(t *lua.LTable) (int, bool) {
	max, count := 0, 0
	array := true
	t.ForEach(func(k, _ lua.LValue) {
		n, ok := k.(lua.LNumber)
		if !ok || float64(n) != math.Floor(float64(n)) || n < 1 {
			array = false
			return
		}
		count++
		if int(n) > max {
			max = int(n)
		}
	})
	if !array || (max > 10 && max > 2*count) {
		return 0, false
	}
	return max, true
}

func writeJSONString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '/':
			buf.WriteString(`\/`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(buf, `\u%04x`, c)
			} else {
				buf.WriteByte(c)
			}
		}
	}
	buf.WriteByte('"')
}

func (e *Engine) decodeJSON(dec *json.Decoder) (lua.LValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return lua.LNil, fmt.Errorf("Expected value but found invalid token: %v", err)
	}
	return e.decodeValue(dec, tok, 0)
}

func (e *Engine) decodeValue(dec *json.Decoder, tok json.Token, depth int) (lua.LValue, error) {
	if depth >= jsonMaxDepth {
		return lua.LNil, fmt.Errorf("Found too many nested data structures (%d)", depth+1)
	}
	L := e.L
	switch x := tok.(type) {
	case nil:
		return e.null, nil
	case bool:
		return lua.LBool(x), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !math.IsInf(f, 0) {
			return lua.LNil, fmt.Errorf("Expected value but found invalid number: %s", x)
		}
		return lua.LNumber(f), nil
	case string:
		if !utf8.ValidString(x) {
			return lua.LString(x), nil
		}
		return lua.LString(x), nil
	case json.Delim:
		switch x {
		case '[':
			t := L.NewTable()
			for i := 1; dec.More(); i++ {
				tok, err := dec.Token()
				if err != nil {
					return lua.LNil, fmt.Errorf("Expected value but found invalid token: %v", err)
				}
				v, err := e.decodeValue(dec, tok, depth+1)
				if err != nil {
					return lua.LNil, err
				}
				t.RawSetInt(i, v)
			}
			if _, err := dec.Token(); err != nil {
				return lua.LNil, fmt.Errorf("Expected comma or array end: %v", err)
			}
			return t, nil
		case '{':
			t := L.NewTable()
			for dec.More() {
				ktok, err := dec.Token()
				if err != nil {
					return lua.LNil, fmt.Errorf("Expected object key string: %v", err)
				}
				k, _ := ktok.(string)
				tok, err := dec.Token()
				if err != nil {
					return lua.LNil, fmt.Errorf("Expected value but found invalid token: %v", err)
				}
				v, err := e.decodeValue(dec, tok, depth+1)
				if err != nil {
					return lua.LNil, err
				}
				t.RawSetString(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return lua.LNil, fmt.Errorf("Expected comma or object end: %v", err)
			}
			return t, nil
		}
	}
	return lua.LNil, fmt.Errorf("Expected value but found invalid token")
}

// bitLib is LuaBitOp (bit.*), as Redis loads it: 32-bit operations on
// numbers, results as signed 32-bit integers.
func bitLib(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	tobit := func(L *lua.LState, i int) uint32 {
		return uint32(int64(math.RoundToEven(float64(L.CheckNumber(i)))))
	}
	ret := func(L *lua.LState, v uint32) int {
		L.Push(lua.LNumber(int32(v)))
		return 1
	}
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			v := tobit(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				v = op(v, tobit(L, i))
			}
			return ret(L, v)
		}
	}
	shift := func(op func(a uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int { return ret(L, op(tobit(L, 1), uint(tobit(L, 2)&31))) }
	}
	fns := map[string]lua.LGFunction{
		"tobit":   func(L *lua.LState) int { return ret(L, tobit(L, 1)) },
		"bnot":    func(L *lua.LState) int { return ret(L, ^tobit(L, 1)) },
		"band":    fold(func(a, b uint32) uint32 { return a & b }),
		"bor":     fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":    fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift":  shift(func(a uint32, n uint) uint32 { return a << n }),
		"rshift":  shift(func(a uint32, n uint) uint32 { return a >> n }),
		"arshift": shift(func(a uint32, n uint) uint32 { return uint32(int32(a) >> n) }),
		"rol":     shift(func(a uint32, n uint) uint32 { return a<<n | a>>(32-n) }),
		"ror":     shift(func(a uint32, n uint) uint32 { return a>>n | a<<(32-n) }),
		"bswap": func(L *lua.LState) int {
			v := tobit(L, 1)
			return ret(L, v>>24|v>>8&0xff00|v<<8&0xff0000|v<<24)
		},
		"tohex": func(L *lua.LState) int {
			v := tobit(L, 1)
			n := 8
			if L.GetTop() >= 2 {
				n = int(int32(tobit(L, 2)))
			}
			digits := "0123456789abcdef"
			if n < 0 {
				n, digits = -n, "0123456789ABCDEF"
			}
			n = min(n, 8)
			out := make([]byte, n)
			for i := n - 1; i >= 0; i-- {
				out[i] = digits[v&15]
				v >>= 4
			}
			L.Push(lua.LString(out))
			return 1
		},
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}
