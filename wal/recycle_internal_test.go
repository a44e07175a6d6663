package wal

import (
	"bytes"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// TestAdoptedNamesNeverReused: after Open adopts kept files, the names this
// process gives new kept files and preparations never equal an adopted
// one's: a rename onto it would put one file in the pool twice, and two
// segments would share it.
func TestAdoptedNamesNeverReused(t *testing.T) {
	mem := vfs.NewMem()
	opts := Options{FS: mem, SegmentSize: 8 << 10, Policy: policy.SyncNever()}
	fill := func(l *Log, rolls uint64) {
		rec := bytes.Repeat([]byte{1}, 300)
		for start := l.Stats().Rolls; l.Stats().Rolls < start+rolls; {
			if _, err := l.Append(rec); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.RemoveBefore(l.AppendedLSN()); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		l, err := Open("/log", opts)
		if err != nil {
			t.Fatal(err)
		}
		var highest int64
		names, _ := mem.List("/log")
		for _, name := range names {
			if n, ok := parseRecycleName(name); ok {
				highest = max(highest, n)
			}
		}
		if round > 0 && len(l.prep.pool) == 0 {
			t.Fatalf("round %d: nothing adopted from %v", round, names)
		}
		if got := l.tmpSeq.Load(); got < highest {
			t.Fatalf("round %d: the next temporary name is numbered from %d, below the adopted recycle-%d", round, got, highest)
		}
		fill(l, 4)
		seen := map[string]bool{}
		for _, p := range l.prep.pool {
			if seen[p] {
				t.Fatalf("round %d: %s twice in the pool %v", round, p, l.prep.pool)
			}
			seen[p] = true
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
