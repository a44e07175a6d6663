package wal_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// memLog writes n 300-byte records to a log of 8 KiB segments on a new
// MemFS and returns it, the records, their LSNs and the segment names.
func memLog(t *testing.T, n int) (*vfs.MemFS, [][]byte, []wal.LSN, []string) {
	t.Helper()
	mem := vfs.NewMem()
	l, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 8 << 10})
	require.NoError(t, err)
	var recs [][]byte
	var lsns []wal.LSN
	for i := range n {
		rec := record(3, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		recs, lsns = append(recs, rec), append(lsns, lsn)
	}
	require.NoError(t, l.Close())
	return mem, recs, lsns, segmentNames(t, mem)
}

func segmentNames(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(logDir)
	require.NoError(t, err)
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".wal") {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs
}

// memFlip inverts the byte at off of the file name of the log on fsys.
func memFlip(t *testing.T, fsys vfs.FS, name string, off int64) {
	t.Helper()
	f, err := fsys.OpenReadWrite(filepath.Join(logDir, name), vfs.Fdatasync)
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// evidenceBytes sums the sizes of the quarantine-named files of the log.
func evidenceBytes(t *testing.T, fsys vfs.FS) (int64, []string) {
	t.Helper()
	d, err := wal.InspectDir(fsys, logDir)
	require.NoError(t, err)
	var n int64
	var names []string
	for _, q := range d.Quarantined {
		n += q.Bytes
		names = append(names, q.Name)
	}
	return n, names
}

// damages are the ways TestRepair damages a log of 8 KiB segments.
var damages = []struct {
	name   string
	damage func(t *testing.T, fsys vfs.FS, segs []string)
}{
	{"flipped byte in a sealed segment", func(t *testing.T, fsys vfs.FS, segs []string) { memFlip(t, fsys, segs[1], 64+24+320*3+40) }},
	{"missing middle segment", func(t *testing.T, fsys vfs.FS, segs []string) {
		require.NoError(t, fsys.Remove(filepath.Join(logDir, segs[2])))
	}},
	{"last segment shortened in its padding", func(t *testing.T, fsys vfs.FS, segs []string) {
		f, err := fsys.OpenReadWrite(filepath.Join(logDir, segs[len(segs)-1]), vfs.Fdatasync)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(8<<10-100))
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}},
	{"sealed segment extended", func(t *testing.T, fsys vfs.FS, segs []string) {
		f, err := fsys.OpenReadWrite(filepath.Join(logDir, segs[1]), vfs.Fdatasync)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("extension"), 8<<10+10)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}},
	{"sealed segment shortened into its frames", func(t *testing.T, fsys vfs.FS, segs []string) {
		f, err := fsys.OpenReadWrite(filepath.Join(logDir, segs[1]), vfs.Fdatasync)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(4000))
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}},
	{"bad header of a sealed segment", func(t *testing.T, fsys vfs.FS, segs []string) { memFlip(t, fsys, segs[2], 3) }},
	// 6 ^ 0xff = 249: a version no build wrote, which the header's
	// checksum shows to be a damaged 6, not a newer format.
	{"flipped version field of a sealed segment", func(t *testing.T, fsys vfs.FS, segs []string) { memFlip(t, fsys, segs[2], 8) }},
	{"flipped version field of the last segment", func(t *testing.T, fsys vfs.FS, segs []string) { memFlip(t, fsys, segs[len(segs)-1], 8) }},
	{"damaged first-lsn", func(t *testing.T, fsys vfs.FS, segs []string) { memFlip(t, fsys, "first-lsn", 2) }},
	{"damaged truncate-lsn", func(t *testing.T, fsys vfs.FS, segs []string) {
		memWrite(t, fsys, "truncate-lsn", []byte("0123456789abcdef"))
	}},
	{"damaged epoch", func(t *testing.T, fsys vfs.FS, segs []string) { memFlip(t, fsys, "epoch", 9) }},
	{"damaged epoch and a flipped byte", func(t *testing.T, fsys vfs.FS, segs []string) {
		memFlip(t, fsys, "epoch", 20)
		memFlip(t, fsys, segs[1], 64+24+320*3+40)
	}},
}

// recordDamages are the damages of damages that leave every frame intact.
var recordDamages = map[string]bool{"damaged first-lsn": true, "damaged truncate-lsn": true, "damaged epoch": true}

// memWrite makes the file name of the log on fsys hold b, durably.
func memWrite(t *testing.T, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.Create(filepath.Join(logDir, name), vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, fsys.SyncDir(logDir))
}

// stampRE matches the time in the names of repair files.
var stampRE = regexp.MustCompile(`repair-\d{8}T\d{6}Z`)

// unstamped returns steps with the times in repair file names replaced:
// a plan and the repair after it may straddle a second.
func unstamped(steps []string) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = stampRE.ReplaceAllString(s, "repair-STAMP")
	}
	return out
}

// repairFiles returns the log's repair reports and its other repair files
// (copies of damaged records).
func repairFiles(t *testing.T, fsys vfs.FS) (reports, copies []string) {
	t.Helper()
	d, err := wal.InspectDir(fsys, logDir)
	require.NoError(t, err)
	for _, n := range d.Repairs {
		if strings.HasSuffix(n, ".txt") {
			reports = append(reports, n)
		} else {
			copies = append(copies, n)
		}
	}
	return reports, copies
}

// readFile returns the content of the file name of the log on fsys.
func readFile(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(filepath.Join(logDir, name))
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	_, err = f.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}

// TestRepair: for each kind of damage, Open fails; Repair makes a log Open
// accepts, holding exactly what Salvage read before, and every byte it
// dropped is in the evidence files.
func TestRepair(t *testing.T) {
	for _, dm := range damages {
		t.Run(dm.name, func(t *testing.T) {
			mem, recs, _, segs := memLog(t, 120)
			require.Greater(t, len(segs), 4)
			dm.damage(t, mem, segs)
			opts := wal.Options{FS: mem, SegmentSize: 8 << 10, VerifyOnOpen: true}
			_, err := wal.OpenReadOnly(logDir, opts)
			require.ErrorIs(t, err, wal.ErrCorrupt)

			var salvaged [][]byte
			srep, err := wal.Salvage(logDir, opts, func(_ wal.LSN, rec []byte) error {
				salvaged = append(salvaged, slices.Clone(rec))
				return nil
			})
			require.NoError(t, err)
			require.True(t, slices.EqualFunc(recs[:len(salvaged)], salvaged, bytes.Equal))

			plan, err := wal.PlanRepair(logDir, opts)
			require.NoError(t, err)
			require.True(t, plan.Needed)
			require.NotEmpty(t, plan.Steps)
			before, _ := evidenceBytes(t, mem)
			require.Zero(t, before, "PlanRepair changed the directory")

			rep, err := wal.Repair(logDir, opts)
			require.NoError(t, err)
			require.True(t, rep.Needed)
			require.Equal(t, srep.Stop, rep.LostFrom)
			require.Equal(t, len(salvaged), rep.Kept.Records)
			require.Equal(t, unstamped(plan.Steps), unstamped(rep.Steps))
			n, names := evidenceBytes(t, mem)
			require.Equal(t, rep.LostBytes, n)
			require.ElementsMatch(t, rep.Evidence, names)
			switch dm.name {
			case "last segment shortened in its padding":
				require.Equal(t, len(recs), len(salvaged), "a harmless shortening loses no record")
				require.Zero(t, rep.LostBytes)
			case "sealed segment extended":
				require.Equal(t, len(recs), len(salvaged), "an extension loses no record")
				require.Equal(t, int64(10+len("extension")), rep.LostBytes) // from the created size to the last non-zero byte
			case "damaged first-lsn", "damaged truncate-lsn", "damaged epoch":
				require.Equal(t, len(recs), len(salvaged), "a damaged record loses no record")
				require.Zero(t, rep.LostBytes)
			default:
				require.Positive(t, rep.LostBytes)
				require.Less(t, len(salvaged), len(recs))
			}

			_, got, _ := replay(t, mem, opts)
			require.True(t, slices.EqualFunc(salvaged, got, bytes.Equal), "replayed %d records, salvaged %d", len(got), len(salvaged))

			// The report: in the directory, in words, the numbers above.
			reports, copies := repairFiles(t, mem)
			require.Equal(t, []string{rep.ReportFile}, reports)
			text := string(readFile(t, mem, rep.ReportFile))
			t.Logf("%s:\n%s", rep.ReportFile, text)
			require.Contains(t, text, "status: finished")
			require.Contains(t, text, "Open accepts the log")
			require.Contains(t, text, fmt.Sprintf("lost: LSN %d to %d: %d bytes; %d valid records", rep.LostFrom, rep.LostTo, rep.LostBytes, rep.LostRecords))
			require.Contains(t, text, fmt.Sprintf("kept: LSN %d to %d: %d records", rep.Kept.Start, rep.Kept.Stop, rep.Kept.Records))
			for _, e := range rep.Evidence {
				require.Contains(t, text, "evidence: "+e)
			}
			var wantCopies []string
			for _, r := range rep.Records {
				wantCopies = append(wantCopies, r.Copy)
				require.Contains(t, text, "record: "+r.Name+" was damaged")
				require.Contains(t, r.Copy, r.Name)
			}
			require.ElementsMatch(t, wantCopies, copies)
			if recordDamages[dm.name] {
				require.Len(t, rep.Records, 1, "the damaged record is copied and replaced")
			}

			// The repaired log is a log: it takes appends and opens again.
			l, err := wal.Open(logDir, opts)
			require.NoError(t, err)
			_, err = l.Append([]byte("after the repair"))
			require.NoError(t, err)
			require.NoError(t, l.Close())
			_, got, _ = replay(t, mem, opts)
			require.Len(t, got, len(salvaged)+1)

			again, err := wal.Repair(logDir, opts)
			require.NoError(t, err)
			require.False(t, again.Needed)
		})
	}
}

// Repair refuses while a Log has the directory open.
func TestRepairRefusesWhileLocked(t *testing.T) {
	mem, _, _, segs := memLog(t, 120)
	l, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 8 << 10})
	require.NoError(t, err)
	memFlip(t, mem, segs[1], 64+24+40)
	_, err = wal.Repair(logDir, wal.Options{FS: mem})
	require.ErrorIs(t, err, vfs.ErrLocked)
	require.NoError(t, l.Close())
	// A log on disk: another process's lock reads the same.
	dir := t.TempDir()
	l, err = wal.Open(dir, wal.Options{})
	require.NoError(t, err)
	_, err = wal.Repair(dir, wal.Options{})
	require.ErrorIs(t, err, vfs.ErrLocked)
	require.Contains(t, err.Error(), "held by this process")
	require.NoError(t, l.Close())
	_, err = os.Stat(dir)
	require.NoError(t, err)
}

// TestRepairCrashEveryOp crashes Repair (power loss in several modes)
// before every filesystem operation. Every image is either refused by Open
// or holds exactly the prefix the repair keeps; a second Repair of every
// image makes the log Open accepts with exactly that prefix, and no image
// loses a dropped byte: the evidence files then hold at least as many bytes
// as one uninterrupted repair drops.
func TestRepairCrashEveryOp(t *testing.T) {
	for _, dm := range damages {
		t.Run(dm.name, func(t *testing.T) {
			mem, recs, _, segs := memLog(t, 120)
			dm.damage(t, mem, segs)
			require.NoError(t, mem.SyncDir(logDir)) // the damage survives the power losses below
			var salvaged int
			_, err := wal.Salvage(logDir, wal.Options{FS: mem}, func(wal.LSN, []byte) error { salvaged++; return nil })
			require.NoError(t, err)
			want := recs[:salvaged]
			plan, err := wal.PlanRepair(logDir, wal.Options{FS: mem})
			require.NoError(t, err)

			var mu sync.Mutex
			type snap struct {
				img  vfs.FS
				what string
			}
			var snaps []snap
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range crashModesAt(op.Index) {
					snaps = append(snaps, snap{mem.PowerLoss(m), fmt.Sprintf("before op %d (%s %s), %s", op.Index, op.Kind, op.Path, m)})
				}
				return nil
			})
			_, err = wal.Repair(logDir, wal.Options{FS: faultfs.Inject(mem, inj)})
			require.NoError(t, err)
			snaps = append(snaps, snap{mem.PowerLoss(vfs.KeepAll()), "after"})
			require.Greater(t, len(snaps), 8)
			for _, s := range snaps {
				opts := wal.Options{FS: s.img, SegmentSize: 8 << 10, VerifyOnOpen: true}
				if l, err := wal.OpenReadOnly(logDir, opts); err == nil {
					_, got := readAll(t, l, l.Recovered().FirstLSN)
					require.NoError(t, l.Close())
					require.True(t, slices.EqualFunc(want, got, bytes.Equal), "%s: Open accepts a log that is neither the damaged one nor the repaired one: %d records, want %d", s.what, len(got), len(want))
				}
				// Once anything changed, the report is there, whole.
				reports, copies := repairFiles(t, s.img)
				if ev, _ := evidenceBytes(t, s.img); ev > 0 || len(copies) > 0 || openable(s.img) {
					require.NotEmpty(t, reports, "%s: the repair changed the log before its report was durable", s.what)
					text := string(readFile(t, s.img, reports[0]))
					require.Contains(t, text, fmt.Sprintf("lost: LSN %d to %d: %d bytes", plan.LostFrom, plan.LostTo, plan.LostBytes), s.what)
				}
				_, err := wal.Repair(logDir, opts)
				require.NoError(t, err, s.what)
				_, got, _ := replay(t, s.img, opts)
				require.True(t, slices.EqualFunc(want, got, bytes.Equal), "%s: %d records, want %d", s.what, len(got), len(want))
				n, _ := evidenceBytes(t, s.img)
				require.GreaterOrEqual(t, n, plan.LostBytes, "%s: dropped bytes lost", s.what)
			}
		})
	}
}

// openable reports whether OpenReadOnly (with VerifyOnOpen) accepts the
// log on fsys.
func openable(fsys vfs.FS) bool {
	l, err := wal.OpenReadOnly(logDir, wal.Options{FS: fsys, SegmentSize: 8 << 10, VerifyOnOpen: true})
	if err == nil {
		l.Close()
	}
	return err == nil
}

// With the epoch record damaged, frames a cut dropped and whose zeros never
// reached the disk still carry their older epoch: Salvage stops at them
// (epochs never go back along the log) and Repair keeps exactly the log,
// not the dropped records.
func TestRepairDamagedEpochKeepsDroppedFramesOut(t *testing.T) {
	mem, recs, lsns, segs := memLog(t, 120)
	last := segs[len(segs)-1]
	old := readFile(t, mem, last)
	l, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 8 << 10})
	require.NoError(t, err)
	require.NoError(t, l.TruncateFrom(lsns[110]))
	for i := 110; i < 112; i++ {
		recs[i] = record(4, i, 300) // same size: the same positions
		lsn, err := l.Append(recs[i])
		require.NoError(t, err)
		require.Equal(t, lsns[i], lsn)
	}
	require.NoError(t, l.Close())
	require.Equal(t, last, segmentNames(t, mem)[len(segs)-1])
	// The dropped frames from record 112 on come back, as if the cut's
	// zeros had never reached the disk.
	var first wal.LSN
	_, err = fmt.Sscanf(last, "%020d.wal", &first)
	require.NoError(t, err)
	off := int64(lsns[112]-first) + 64 // past the segment header
	f, err := mem.OpenReadWrite(filepath.Join(logDir, last), vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt(old[off:], off)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	memFlip(t, mem, "epoch", 3)

	opts := wal.Options{FS: mem, SegmentSize: 8 << 10, VerifyOnOpen: true}
	srep, err := wal.Salvage(logDir, opts, func(wal.LSN, []byte) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 112, srep.Records, "%+v", srep)
	rep, err := wal.Repair(logDir, opts)
	require.NoError(t, err)
	require.Len(t, rep.Records, 1)
	_, got, _ := replay(t, mem, opts)
	require.True(t, slices.EqualFunc(recs[:112], got, bytes.Equal), "%d records", len(got))
}

// A damaged first-lsn of a log whose start RemoveBefore moved: Repair
// records the lowest segment's first LSN again, and every record from there
// on is kept.
func TestRepairDamagedFirstLSNAfterRemoveBefore(t *testing.T) {
	mem, recs, lsns, _ := memLog(t, 120)
	l, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 8 << 10})
	require.NoError(t, err)
	_, err = l.RemoveBefore(lsns[60])
	require.NoError(t, err)
	start := l.FirstLSN()
	require.NoError(t, l.Close())
	require.NotZero(t, start)
	k := slices.Index(lsns, start)
	require.Positive(t, k)
	memFlip(t, mem, "first-lsn", 12)
	opts := wal.Options{FS: mem, SegmentSize: 8 << 10, VerifyOnOpen: true}
	_, err = wal.OpenReadOnly(logDir, opts)
	require.ErrorIs(t, err, wal.ErrCorrupt)

	rep, err := wal.Repair(logDir, opts)
	require.NoError(t, err)
	require.Len(t, rep.Records, 1)
	require.Equal(t, "first-lsn", rep.Records[0].Name)
	require.Zero(t, rep.LostBytes)
	_, got, info := replay(t, mem, opts)
	require.Equal(t, start, info.FirstLSN)
	require.True(t, slices.EqualFunc(recs[k:], got, bytes.Equal), "%d records, want %d", len(got), len(recs)-k)
	// The damaged bytes are kept.
	b := readFile(t, mem, rep.Records[0].Copy)
	require.Len(t, b, 16)
}
