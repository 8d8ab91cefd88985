package main

import (
	"testing"

	"raftset/internal/testutil"
)

// TestScriptStructMatchesRedis compares the struct library (pack, unpack,
// size: integer sizes and signs, byte orders, alignment, floats, strings,
// offsets, and the errors) with redis-server 7.0's, byte for byte.
func TestScriptStructMatchesRedis(t *testing.T) {
	redis := testutil.StartRedis(t)
	addr, _ := startNode(t, "")
	ours, theirs := dial(t, addr), dial(t, redis.Addr)
	for _, body := range []string{
		`return struct.pack('q', 1)`,
		`return struct.pack('>i', 1)`,
		`return struct.pack('<i', -2)`,
		`return struct.pack('i', 'x')`,
		`return struct.pack('i', '12')`,
		`return struct.pack('i')`,
		`return struct.pack('b', 200)`,
		`return struct.pack('B', -1)`,
		`return struct.pack('>h', 258)`,
		`return struct.pack('l', -1)`,
		`return struct.pack('>I3', 65536+2)`,
		`return struct.pack('i40', 1)`,
		`return struct.pack('!4 b i', 1, 2)`,
		`return struct.pack('!3i', 1)`,
		`return struct.pack('!b d', 1, 2.5)`,
		`return struct.pack('<d', 0.1)`,
		`return struct.pack('>f', 1.5)`,
		`return struct.pack('s', 'ab')`,
		`return struct.pack('c3', 'ab')`,
		`return struct.pack('c3', 'abcd')`,
		`return struct.pack('c0', 'xyz')`,
		`return struct.pack('c', 12)`,
		`return struct.pack('xxb', 1)`,
		`return struct.pack('T', 7)`,
		`return {struct.unpack('>i', struct.pack('>i', -5))}`,
		`return {struct.unpack('>I', struct.pack('>i', -5))}`,
		`return {struct.unpack('<h', 'ab')}`,
		`return {struct.unpack('b', '\255')}`,
		`return {struct.unpack('>i', 'ab')}`,
		`return {struct.unpack('s', 'ab')}`,
		`return {struct.unpack('s', 'ab\0cd')}`,
		`return {struct.unpack('sc2', 'ab\0cd')}`,
		`return {struct.unpack('b c0', '\3abcd')}`,
		`return {struct.unpack('c0', 'x')}`,
		`return {struct.unpack('bb', 'xyz', 2)}`,
		`return {struct.unpack('b', 'xyz', 0)}`,
		`return {struct.unpack('b', 'xyz', 4)}`,
		`return {struct.unpack('!4 b i', struct.pack('!4 b i', 7, 9))}`,
		`return {struct.unpack('>d', struct.pack('>d', 2.25))}`,
		`return tostring(struct.unpack('<f', struct.pack('<f', 0.1)))`,
		`return {struct.unpack('i8', struct.pack('i8', -3))}`,
		`return {struct.unpack('>l', struct.pack('>l', 123456789012))}`,
		`return {struct.unpack('z', 'x')}`,
		`return struct.size('s')`,
		`return struct.size('c0')`,
		`return struct.size('!8 b d')`,
		`return struct.size('>i3 h c5')`,
		`return struct.size('b')`,
		`return struct.size('q')`,
		`return struct.size(5)`,
		`return struct.size()`,
		`return type(struct)`,
		`return struct.unpack('b')`,
		`return struct.pack('bb', 1)`,
		`return struct.pack('bbbb', 1)`,
		`return struct.pack('s')`,
		`return struct.unpack('b', 'x', 'y')`,
		`return struct.unpack('b', nil)`,
		`return struct.pack(nil)`,
		`return {struct.unpack('>I2', '\1\2', '1')}`,
	} {
		if a, b := do(t, ours, "EVAL", body, "0"), do(t, theirs, "EVAL", body, "0"); a != b {
			t.Errorf("%s:\n raftset %q\n redis   %q", body, a, b)
		}
	}
}
