package wal_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal"
)

// TestRunbookErrors produces each error docs/damaged-log.md covers and
// checks the words the runbook quotes, and which tool it sends the reader
// to: Salvage reads, Repair mends (all but the foreign file, which is not
// damage).
func TestRunbookErrors(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string, segs []string)
		want    string // in Open's error (with VerifyOnOpen)
		repairs bool   // Repair makes a log Open accepts
	}{
		{"damaged sealed segment", func(t *testing.T, dir string, segs []string) {
			flipByte(t, segs[1], 64+24+30)
		}, "in a completed segment (the log continues at LSN", true},
		{"missing segment", func(t *testing.T, dir string, segs []string) {
			require.NoError(t, os.Remove(segs[2]))
		}, "missing: ", true},
		{"shortened file", func(t *testing.T, dir string, segs []string) {
			require.NoError(t, os.Truncate(segs[len(segs)-1], 64<<10-100))
		}, "bytes but was created with 65536: truncated or extended", true},
		{"extended file", func(t *testing.T, dir string, segs []string) {
			require.NoError(t, os.Truncate(segs[1], 64<<10+4096))
		}, "bytes but was created with 65536: truncated or extended", true},
		{"foreign file", func(t *testing.T, dir string, segs []string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "backup.tar"), []byte("x"), 0o644))
		}, "wal: foreign file in log directory: backup.tar", false},
		{"damaged first-lsn record", func(t *testing.T, dir string, segs []string) {
			flipByte(t, filepath.Join(dir, "first-lsn"), 2)
		}, "the LSN recorded in first-lsn is damaged", true},
		{"damaged truncate-lsn record", func(t *testing.T, dir string, segs []string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "truncate-lsn"), []byte("0123456789abcdef"), 0o644))
		}, "the LSN recorded in truncate-lsn is damaged", true},
		{"damaged epoch record", func(t *testing.T, dir string, segs []string) {
			flipByte(t, filepath.Join(dir, "epoch"), 2)
		}, "the epoch recorded in epoch is damaged", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, _, _, segs := salvageLog(t, 800)
			c.damage(t, dir, segs)
			_, err := wal.OpenReadOnly(dir, wal.Options{SegmentSize: 64 << 10, VerifyOnOpen: true})
			require.Error(t, err)
			t.Logf("Open: %v", err)
			require.Contains(t, err.Error(), c.want)
			_, serr := wal.Salvage(dir, wal.Options{}, func(wal.LSN, []byte) error { return nil })
			rep, rerr := wal.Repair(dir, wal.Options{SegmentSize: 64 << 10})
			t.Logf("Salvage: %v; Repair: %v (%d evidence files)", serr, rerr, len(rep.Evidence))
			if c.repairs {
				require.NoError(t, serr)
				require.NoError(t, rerr)
				l, err := wal.Open(dir, wal.Options{SegmentSize: 64 << 10})
				require.NoError(t, err)
				require.NoError(t, l.Close())
			} else {
				require.Error(t, rerr)
			}
		})
	}
}
