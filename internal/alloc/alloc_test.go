package alloc

import "testing"

func TestRoundUp(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{0, 0}, {1, 8}, {8, 8}, {9, 16}, {700, 704}, {707, 768}, {32768, 32768}, {32769, 40960},
	} {
		if got := RoundUp(tc.in); got != tc.want {
			t.Errorf("RoundUp(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestGrowKeepsContentsAndSizesToClass(t *testing.T) {
	b := []byte("hello")
	b = b[:5:5]
	g := Grow(b, 700)
	if string(g) != "hello" {
		t.Fatalf("Grow changed contents: %q", g)
	}
	if cap(g) != 768 {
		t.Errorf("cap(Grow(5 bytes, 700)) = %d, want 768", cap(g))
	}
	if g2 := Grow(g, 10); &g2[0] != &g[0] {
		t.Errorf("Grow reallocated although capacity sufficed")
	}
}
