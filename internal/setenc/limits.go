package setenc

// Limits are the thresholds that decide a set's encoding. They change results
// (OBJECT ENCODING, and which members random picks return), so a replicated
// store must change them through its log, never per node.
type Limits struct {
	// MaxIntsetEntries is set-max-intset-entries: an intset holding more
	// members becomes a hashtable. Default 512; values above 1<<30 act as 1<<30.
	MaxIntsetEntries int
	// MaxListpackEntries is set-max-listpack-entries: adding a member to a
	// listpack that already holds this many converts it. Default 128.
	MaxListpackEntries int
	// MaxListpackValue is set-max-listpack-value: a member longer than this
	// many bytes never goes into a listpack. Default 64.
	MaxListpackValue int
}

// DefaultLimits returns Redis's defaults (512, 128, 64).
func DefaultLimits() Limits {
	return Limits{MaxIntsetEntries: 512, MaxListpackEntries: 128, MaxListpackValue: 64}
}

func (l Limits) maxIntset() int {
	if l.MaxIntsetEntries > 1<<30 {
		return 1 << 30
	}
	return l.MaxIntsetEntries
}

// maxListpackBytes is Redis's lpSafeToAdd bound: a set listpack never grows
// past 1 GiB.
const maxListpackBytes = 1 << 30
