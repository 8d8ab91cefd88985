package script

import "testing"

// BenchmarkLoop measures how long the default budget lasts: one op is one
// loop of four instructions.
func BenchmarkLoop(b *testing.B) {
	e := New("7.2.4")
	defer e.Close()
	sc, _ := Compile([]byte("local n = 0 for i = 1, 1000000 do n = n + i end return n"))
	b.ResetTimer()
	for range b.N {
		e.Run(sc, nil, nil, 0, DefaultBudget, &Host{})
	}
}

func BenchmarkSmall(b *testing.B) {
	e := New("7.2.4")
	defer e.Close()
	s := &store{m: map[string]string{}}
	h := s.host()
	sc, _ := Compile([]byte("redis.call('set', KEYS[1], ARGV[1]) redis.call('incr', KEYS[2]) return redis.call('get', KEYS[1])"))
	keys, argv := bs([]string{"a", "n"}), bs([]string{"v"})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e.Run(sc, keys, argv, 0, DefaultBudget, h)
	}
}

func BenchmarkNew(b *testing.B) {
	for range b.N {
		New("7.2.4").Close()
	}
}
