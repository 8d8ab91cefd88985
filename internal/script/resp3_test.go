package script

import (
	"math"
	"testing"
)

// TestFormatDouble: Redis 7.2's double text (shortest round-trip digits),
// where 7.0's %.17g gives more digits for the same double.
func TestFormatDouble(t *testing.T) {
	for _, tc := range []struct {
		d    float64
		want string
	}{
		{3.14, "3.14"}, // 7.0: 3.1400000000000001
		{0.1, "0.1"},   // 7.0: 0.10000000000000001
		{3.5, "3.5"},
		{3, "3"},
		{-0.25, "-0.25"},
		{1e20, "1e+20"},
		{1.5e-7, "1.5e-07"},
		{0.0001, "0.0001"},
		{1e16, "10000000000000000"},
		{1e17, "1e+17"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
		{math.Copysign(math.NaN(), -1), "-nan"},
	} {
		if got := formatDouble(tc.d); got != tc.want {
			t.Errorf("formatDouble(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestSetRESP3Conversions: under setresp(3) a null is nil and the
// set-algebra replies are {set=...}; returned RESP3 tables are RESP3 types
// (the engine's reply is RESP3; the front end downgrades it for RESP2).
func TestSetRESP3Conversions(t *testing.T) {
	e := New("7.2.4")
	defer e.Close()
	s := &store{m: map[string]string{}}
	for _, tc := range []struct{ body, want string }{
		{"redis.setresp(3); return type(redis.call('get', 'nokey'))", "$3\r\nnil\r\n"},
		{"return type(redis.call('get', 'nokey'))", "$7\r\nboolean\r\n"},
		{"redis.setresp(3); return true", "#t\r\n"},
		{"redis.setresp(3); return {false}", "*1\r\n#f\r\n"},
		{"redis.setresp(3); redis.setresp(2); return true", ":1\r\n"},
		{"return {double=2.5}", ",2.5\r\n"},
		{"return {big_number='1 2\\n3'}", "(1 2 3\r\n"},
		{"return {verbatim_string={format='md', string='x'}}", "=5\r\nmd\x00:x\r\n"},
		{"return {map={a={set={b=true}}}}", "%1\r\n$1\r\na\r\n~1\r\n$1\r\nb\r\n"},
		{"return {map={a=1, b=2, c=3}}", "%3\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:2\r\n$1\r\nc\r\n:3\r\n"},
	} {
		if got := run(t, e, s, tc.body, nil, nil); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.body, got, tc.want)
		}
	}
}
