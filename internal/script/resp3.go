package script

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// redis.setresp(3): Redis 7's RESP3 conversions (script_lua.c).
//
// After setresp(3), redis.call's replies arrive as a RESP3 client would get
// them: a null is nil (not false), a set reply is a table {set = {member =
// true, ...}}, a map reply {map = {key = value, ...}}. The host answers in
// RESP2, so the commands whose RESP3 reply is a set or a map are named here
// (those a script can call: the set algebra, SPOP with a count, LCS IDX).
//
// Whatever the script's protocol, a returned table with a double,
// big_number, verbatim_string, map or set field becomes that RESP3 type,
// and true and false become RESP3 booleans once the script called
// setresp(3). The reply is built in RESP3 types, as Redis builds it for the
// calling client; the front end turns those types into RESP2's for a RESP2
// client, as Redis's addReply* functions do (a map is a flat array, a set
// an array, a double, big number or verbatim string a bulk string, a
// boolean 1 or 0).

// resp3Shapes are the commands whose RESP2 array reply is a RESP3 set (~)
// or map (%).
var resp3Shapes = map[string]byte{
	"smembers": '~', "sinter": '~', "sunion": '~', "sdiff": '~', "spop": '~',
	"lcs": '%',
}

// fromRESP3 converts one RESP2 reply of the command named cmd to the value
// redis.call returns under setresp(3).
func fromRESP3(L *lua.LState, b []byte, cmd string) lua.LValue {
	if len(b) > 0 && b[0] == '*' {
		if kind := resp3Shapes[strings.ToLower(cmd)]; kind != 0 {
			arr, _ := fromRESP3Value(L, b)
			t, ok := arr.(*lua.LTable)
			if !ok {
				return arr
			}
			inner := L.CreateTable(0, t.Len())
			field := "set"
			if kind == '~' {
				for i := 1; i <= t.Len(); i++ {
					inner.RawSet(t.RawGetInt(i), lua.LTrue)
				}
			} else {
				field = "map"
				for i := 1; i+1 <= t.Len(); i += 2 {
					inner.RawSet(t.RawGetInt(i), t.RawGetInt(i+1))
				}
			}
			out := L.CreateTable(0, 1)
			out.RawSetString(field, inner)
			return out
		}
	}
	v, _ := fromRESP3Value(L, b)
	return v
}

// fromRESP3Value is fromRESP with RESP3's nulls: nil, at any depth.
func fromRESP3Value(L *lua.LState, b []byte) (lua.LValue, []byte) {
	if len(b) < 3 {
		return lua.LNil, nil
	}
	switch b[0] {
	case '$', '*':
		if b[1] == '-' {
			end := indexCRLF(b)
			if end < 0 {
				return lua.LNil, nil
			}
			return lua.LNil, b[end+2:]
		}
	}
	if b[0] != '*' {
		return fromRESP(L, b)
	}
	end := indexCRLF(b)
	if end < 0 {
		return lua.LNil, nil
	}
	n, _ := strconv.Atoi(string(b[1:end]))
	rest := b[end+2:]
	t := L.CreateTable(n, 0)
	for i := 1; i <= n; i++ {
		var v lua.LValue
		v, rest = fromRESP3Value(L, rest)
		t.RawSetInt(i, v)
	}
	return t, rest
}

// resp3Table appends the RESP3 reply of a table with one of Redis's RESP3
// fields, in Redis's order of checks (after err and ok), and reports
// whether it had one.
func (e *Engine) resp3Table(dst []byte, t *lua.LTable, depth int) ([]byte, bool) {
	if d, ok := t.RawGetString("double").(lua.LNumber); ok {
		dst = append(dst, ',')
		dst = append(dst, formatDouble(float64(d))...)
		return append(dst, "\r\n"...), true
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		dst = append(dst, '(')
		dst = append(dst, oneLine(string(s))...)
		return append(dst, "\r\n"...), true
	}
	if v, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		format, fok := v.RawGetString("format").(lua.LString)
		s, sok := v.RawGetString("string").(lua.LString)
		if fok && sok {
			// Redis takes the format's first three bytes, padding a shorter
			// one with what follows it in memory: give it three.
			f := (string(format) + "\x00\x00\x00")[:3]
			dst = appendInt(dst, '=', int64(len(s)+4))
			dst = append(dst, f...)
			dst = append(dst, ':')
			dst = append(dst, s...)
			return append(dst, "\r\n"...), true
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		n := 0
		var body []byte
		for k, v := m.Next(lua.LNil); k != lua.LNil; k, v = m.Next(k) {
			body = e.toReply(body, k, depth+1)
			body = e.toReply(body, v, depth+1)
			n++
		}
		return append(appendInt(dst, '%', int64(n)), body...), true
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		n := 0
		var body []byte
		for k, _ := s.Next(lua.LNil); k != lua.LNil; k, _ = s.Next(k) {
			body = e.toReply(body, k, depth+1)
			n++
		}
		return append(appendInt(dst, '~', int64(n)), body...), true
	}
	return dst, false
}

// formatDouble is a double reply's text as Redis 7.2 writes it: the
// shortest digits that read back as the same double (7.2's fpconv_dtoa;
// 7.0's "%.17g" wrote 3.14 as 3.1400000000000001), laid out as %g lays out
// %.17g (plain from 1e-4 up to 1e17, an exponent of at least two digits
// otherwise), inf, -inf and nan spelled as printf spells them.
func formatDouble(d float64) string {
	switch {
	case math.IsInf(d, 1):
		return "inf"
	case math.IsInf(d, -1):
		return "-inf"
	case math.IsNaN(d):
		return formatG(d, 17) // "-nan" for x86's 0/0, as printf writes it
	}
	s := strconv.FormatFloat(d, 'e', -1, 64)
	mant, exps, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(exps)
	if exp < -4 || exp >= 17 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		e := strconv.Itoa(exp)
		if len(e) < 2 {
			e = "0" + e
		}
		return mant + "e" + sign + e
	}
	return strconv.FormatFloat(d, 'f', -1, 64)
}
