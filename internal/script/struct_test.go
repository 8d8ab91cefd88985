package script

import "testing"

// TestStruct: the struct library's bytes, values and errors as Redis 7.0.15
// answers them (the whole set is compared live by cmd/raftset's
// TestScriptStructMatchesRedis).
func TestStruct(t *testing.T) {
	e := New("7.2.4")
	defer e.Close()
	s := &store{m: map[string]string{}}
	for _, tc := range []struct{ body, want string }{
		{"return struct.pack('>i', 1)", "$4\r\n\x00\x00\x00\x01\r\n"},
		{"return struct.pack('<h', -2)", "$2\r\n\xfe\xff\r\n"},
		{"return struct.pack('!4 b i', 1, 2)", "$8\r\n\x01\x00\x00\x00\x02\x00\x00\x00\r\n"},
		{"return struct.pack('s c2', 'ab', 'xyz')", "$5\r\nab\x00xy\r\n"},
		{"return {struct.unpack('>i', struct.pack('>i', -5))}", "*2\r\n:-5\r\n:5\r\n"},
		{"return {struct.unpack('b c0', '\\3abcd')}", "*2\r\n$3\r\nabc\r\n:5\r\n"},
		{"return {struct.unpack('bb', 'xyz', 2)}", "*3\r\n:121\r\n:122\r\n:4\r\n"},
		{"return struct.size('>i3 h c5')", ":10\r\n"},
		{"return struct.pack('q', 1)", "-ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'q') script: " +
			sha("return struct.pack('q', 1)") + ", on @user_script:1.\r\n"},
		{"return struct.pack('i')", "-ERR user_script:1: bad argument #2 to 'pack' (number expected, got nil) script: " +
			sha("return struct.pack('i')") + ", on @user_script:1.\r\n"},
		{"return struct.unpack('b')", "-ERR user_script:1: bad argument #2 to 'unpack' (string expected, got no value) script: " +
			sha("return struct.unpack('b')") + ", on @user_script:1.\r\n"},
	} {
		if got := run(t, e, s, tc.body, nil, nil); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.body, got, tc.want)
		}
	}
}
