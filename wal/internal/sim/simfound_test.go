package sim

import (
	"fmt"
	"testing"
	"time"
)

// foundSeeds are schedules that found violations on main as of issue 25
// (focused regressions of each are in package wal's tests of their topic:
// recover_test.go, remove_test.go, dir_entries_test.go). They pass
// since the fixes; they stay as part of the corpus. A change to the
// generator changes the schedule of every seed.
var foundSeeds = []struct {
	seed uint64
	what string
}{
	{20333, "EIO reading first-lsn at Open reported as ErrCorrupt"},
	{20009, "EIO reading truncate-lsn at Open reported as ErrCorrupt"},
	{21054, "RemoveBefore on a log poisoned by a cut that failed once recorded: Open refuses the directory"},
	{21363, "the same, after a power loss: first-lsn names a start no segment holds"},
	{20687, "a retried Open never syncs the ancestor directory the failed one created"},
	{4032, "a short write of first-lsn in RemoveBefore: Open refuses the damaged record (old generator seed; see TestShortWriteOfFirstLSNLeavesUnopenableLog)"},
	{24059, "a cut whose zeroing sync was lost comes back in place of newer records after a power loss"},
	{22889, "the same class: a cut frame vouches past a hole after a power loss, Open refuses the log"},
	// the same classes under the generator that opens a quarter of the runs with a fault
	{50006, "EIO reading first-lsn at Open reported as ErrCorrupt"},
	{5585, "a retried Open never syncs the ancestor directory the failed one created"},
	{3598, "a cut whose zeroing sync was lost comes back in place of newer records after a power loss"},
	{3416, "the same class: a cut frame vouches past a hole after a power loss, Open refuses the log"},
}

func TestSimFoundSeeds(t *testing.T) {
	for _, f := range foundSeeds {
		t.Run(fmt.Sprint(f.seed), func(t *testing.T) {
			// the log's goroutines are not replayed: a few tries
			sch := Generate(NewSeedSource(f.seed))
			for range 3 {
				if res := Execute(sch); res.Failed() {
					report(t, fmt.Sprintf("seed %d (%s)", f.seed, f.what), sch, res)
					return
				}
			}
		})
	}
}

// TestFreezeWaitsForOperationsUnderWay: a freeze images the filesystem
// only once the operations it had already let run have returned. Before,
// a write admitted just before the freeze could land after the image and
// still report success, and the oracle then counted a record as durable
// that the image lacked (seed 20333 in CI, a false violation). Holding each
// admitted write 200µs before it runs makes that window wide: without
// the wait, the first try of seed 20333 fails.
func TestFreezeWaitsForOperationsUnderWay(t *testing.T) {
	admitDelay = 200 * time.Microsecond
	defer func() { admitDelay = 0 }()
	for _, seed := range []uint64{20333, 3598} {
		sch := Generate(NewSeedSource(seed))
		for range 3 {
			if res := Execute(sch); res.Failed() {
				report(t, fmt.Sprintf("seed %d, writes held 200µs after their admission", seed), sch, res)
				return
			}
		}
	}
}
