//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRequestMaker: the same bytes as the fmt-based encoding it replaced,
// one random number per argument, twelve digits wide.
func TestRequestMaker(t *testing.T) {
	for _, args := range [][]string{
		{"sadd", "__rand_int__", "__rand_int__"},
		{"set", "k:__rand_int__:__rand_int__", "v"},
		{"ping"},
	} {
		m := requestMaker{args: args, keyspace: 1000}
		got := string(m.append(nil, rand.New(rand.NewPCG(1, 2))))
		rng := rand.New(rand.NewPCG(1, 2))
		want := fmt.Sprintf("*%d\r\n", len(args))
		for _, a := range args {
			if strings.Contains(a, "__rand_int__") {
				a = strings.ReplaceAll(a, "__rand_int__", fmt.Sprintf("%012d", rng.IntN(1000)))
			}
			want += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", args, got, want)
		}
	}
}

// TestReplyScanner: complete replies, incomplete ones, several in a row.
func TestReplyScanner(t *testing.T) {
	var s replyScanner
	for _, tc := range []struct {
		in    string
		size  int
		isErr bool
	}{
		{":1\r\n", 4, false},
		{":1\r", 0, false},
		{"-ERR x\r\n:2\r\n", 8, true},
		{"$3\r\nabc\r\n", 9, false},
		{"$3\r\nab", 0, false},
		{"*2\r\n$1\r\na\r\n:1\r\n+OK\r\n", 15, false},
		{"", 0, false},
	} {
		size, isErr, err := s.next([]byte(tc.in))
		if err != nil || size != tc.size || isErr != tc.isErr {
			t.Errorf("next(%q) = %d, %v, %v; want %d, %v", tc.in, size, isErr, err, tc.size, tc.isErr)
		}
	}
	if _, _, err := s.next([]byte("hello\r\n")); err == nil {
		t.Error("next accepted a reply that is not RESP")
	}
}
