// Package alloc sizes byte buffers to the Go allocator's size classes.
//
// Compact encodings (intset, listpack) grow one member at a time. Go's append
// grows large slices by 25% plus a constant, which would leave a 700-byte
// listpack with hundreds of unused bytes. Growing to exactly the allocator's
// size class instead costs nothing extra (the allocator rounds up anyway) and
// keeps the slack below one size-class step.
package alloc

// sizeClasses are the small-object size classes of the Go runtime
// (internal/runtime/gc/sizeclasses.go). If a future runtime changes them,
// RoundUp still returns a valid capacity; only the slack changes.
var sizeClasses = [...]int{
	8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528,
	6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072,
	20480, 21760, 24576, 27264, 28672, 32768,
}

const pageSize = 8192

// RoundUp returns the number of bytes the allocator really reserves for an
// object of n bytes.
func RoundUp(n int) int {
	if n <= 0 {
		return 0
	}
	if n <= sizeClasses[len(sizeClasses)-1] {
		lo, hi := 0, len(sizeClasses)-1
		for lo < hi {
			mid := (lo + hi) / 2
			if sizeClasses[mid] >= n {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return sizeClasses[lo]
	}
	return (n + pageSize - 1) / pageSize * pageSize
}

// Grow returns b with room for at least n more bytes. When b must move, the
// new capacity is the allocator's size class for len(b)+n, not append's
// geometric growth.
func Grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), RoundUp(len(b)+n))
	copy(nb, b)
	return nb
}
