package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On-disk sizes the tests compute expectations from (the package doc).
const (
	segHeader   = 64
	frameHeader = 24
	// endFrame is what a version-2 segment keeps free at its end for the
	// end or link frame: records fill at most SegmentSize-segHeader-endFrame.
	endFrame = 24
)

func frameSize(n int) int { return (frameHeader + n + 7) &^ 7 }

// segFirst returns the first LSN a segment name encodes.
func segFirst(t testing.TB, name string) wal.LSN {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimSuffix(name, ".wal"), 10, 64)
	require.NoError(t, err, name)
	return wal.LSN(n)
}

// lastNonZero returns the index of the last non-zero byte of b at or after
// from, or -1.
func lastNonZero(b []byte, from int) int {
	for i := len(b) - 1; i >= from; i-- {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// written is a log the recovery tests damage: its records, their LSNs and
// its end, on a MemFS after a clean close.
type written struct {
	mem  *vfs.MemFS
	opts wal.Options
	recs [][]byte
	lsns []wal.LSN
	end  wal.LSN
}

func writeLog(t testing.TB, opts wal.Options, sizes []int) written {
	t.Helper()
	w := written{mem: vfs.NewMem(), opts: opts}
	l := openLog(t, w.mem, opts)
	for i, n := range sizes {
		rec := record(0, i, n)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		w.recs, w.lsns = append(w.recs, rec), append(w.lsns, lsn)
	}
	w.end = l.AppendedLSN()
	require.NoError(t, l.Close())
	return w
}

// TestTornTailEveryOffset cuts the last segment at every byte offset inside
// its last frames, three ways: the rest zeroed, the rest stale bytes, or the
// file itself cut short. Each cut must recover exactly the complete records
// before it, without error, put the next append at the first incomplete
// frame's LSN, report the torn bytes, and leave no trace for the next Open.
func TestTornTailEveryOffset(t *testing.T) {
	const segSize = 4 << 10
	opts := wal.Options{SegmentSize: segSize}
	var sizes []int
	for i := range 45 { // about 1.5 segments: the cuts hit the second one
		sizes = append(sizes, 1+(i*37)%170)
	}
	w := writeLog(t, opts, sizes)
	segs := segments(t, w.mem)
	require.Len(t, segs, 2)
	last := segs[1]
	first := segFirst(t, last)
	orig := fileBytes(t, w.mem, last)
	require.Len(t, orig, segSize)
	off := func(lsn wal.LSN) int { return segHeader + int(lsn-first) }

	// Cut everywhere from the last segment's first frame to just past its
	// last frame.
	k0 := 0
	for w.lsns[k0] < first {
		k0++
	}
	require.Greater(t, len(w.recs)-k0, 3)

	cases := 0
	for _, variant := range []string{"zeros", "stale", "truncated"} {
		for c := off(first); c <= off(w.end)+8; c++ {
			img := w.mem.ProcessCrash()
			var content []byte
			switch variant {
			case "zeros":
				content = make([]byte, segSize)
				copy(content, orig[:c])
			case "stale":
				content = make([]byte, segSize)
				copy(content, orig[:c])
				rng := rand.New(rand.NewPCG(uint64(c), 1))
				for i := c; i < min(c+300, segSize); i++ {
					content[i] = byte(rng.IntN(255) + 1)
				}
			case "truncated":
				content = bytes.Clone(orig[:c])
			}
			setFile(t, img, last, content)

			// The records expected back: those whose frame is complete.
			// Padding is never checked.
			n := 0
			for k, lsn := range w.lsns {
				need := off(lsn) + frameHeader + len(w.recs[k])
				if lsn >= first && need > c {
					break
				}
				n++
			}
			wantEnd := w.end
			if n < len(w.recs) {
				wantEnd = w.lsns[n]
			}
			wantTorn := int64(0)
			if i := lastNonZero(content, off(wantEnd)); i >= 0 {
				wantTorn = int64(i + 1 - off(wantEnd))
			}

			name := fmt.Sprintf("%s cut at offset %d", variant, c)
			l, err := wal.Open(logDir, wal.Options{FS: img, SegmentSize: segSize})
			if variant == "truncated" {
				// No crash shrinks a segment created and synced at full
				// size: a shorter file is damage, named with its size.
				var ce *wal.CorruptionError
				require.ErrorAs(t, err, &ce, name)
				require.Equal(t, last, ce.Segment, name)
				require.Contains(t, ce.Reason, "truncated or extended", name)
				cases++
				continue
			}
			require.NoError(t, err, name)
			info := l.Recovered()
			require.Equal(t, wantEnd, info.EndLSN, name)
			require.Equal(t, wantTorn, info.TornBytes, name)
			lsns, got := readAll(t, l, 0)
			require.Equal(t, w.recs[:n], got, name)
			require.Equal(t, w.lsns[:n], lsns, name)
			// The truncation is synced before any append: a power loss now
			// keeps no torn byte.
			durable := fileBytes(t, img.PowerLoss(vfs.DropAll()), last)
			require.Equal(t, -1, lastNonZero(durable, off(wantEnd)), "%s: truncation not synced", name)
			lsn, err := l.Append([]byte("after"))
			require.NoError(t, err, name)
			require.Equal(t, wantEnd, lsn, name)
			require.NoError(t, l.Close(), name)

			// Second reopen: no trace of the damaged bytes.
			l, err = wal.Open(logDir, wal.Options{FS: img, SegmentSize: segSize})
			require.NoError(t, err, name)
			require.Zero(t, l.Recovered().TornBytes, name)
			lsns, got = readAll(t, l, 0)
			require.Equal(t, append(w.recs[:n:n], []byte("after")), got, name)
			require.Equal(t, append(w.lsns[:n:n], wantEnd), lsns, name)
			require.NoError(t, l.Close(), name)
			damaged := fileBytes(t, img, last)
			clean := off(wantEnd)
			if segs := segments(t, img); segs[len(segs)-1] == last {
				clean += frameSize(len("after")) + 24 // and Close's end frame
			}
			require.Equal(t, -1, lastNonZero(damaged, clean), "%s: stale bytes left after the log's end", name)
			cases++
		}
	}
	t.Logf("%d cuts recovered", cases)
}

// TestHoleThenUnsyncedFrames: a crash kept frames written after a hole (an
// unsynced frame that did not reach the disk). Their watermarks are not
// above the hole, so it is a torn tail: truncated, no error.
func TestHoleThenUnsyncedFrames(t *testing.T) {
	for _, fill := range []string{"zeros", "stale"} {
		t.Run("hole="+fill, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := wal.Options{Policy: policy.SyncNever()}
			l := openLog(t, mem, opts)
			var recs [][]byte
			var lsns []wal.LSN
			for i := range 6 {
				rec := record(0, i, 40+i*10)
				lsn, err := l.Append(rec)
				require.NoError(t, err)
				recs, lsns = append(recs, rec), append(lsns, lsn)
				if i == 2 {
					require.NoError(t, l.Sync()) // 0..2 synced, 3..5 only written
				}
			}
			img := mem.ProcessCrash()
			require.NoError(t, l.Close())

			seg := segments(t, img)[0]
			b := fileBytes(t, img, seg)
			hole := b[segHeader+int(lsns[3]) : segHeader+int(lsns[4])]
			for i := range hole {
				hole[i] = 0
				if fill == "stale" {
					hole[i] = byte(i*7 + 3)
				}
			}
			setFile(t, img, seg, b)

			l = openLog(t, img, opts)
			info := l.Recovered()
			assert.Equal(t, lsns[3], info.EndLSN)
			assert.Equal(t, int64(l.AppendedLSN()), int64(lsns[3]))
			endOfLast := int64(lsns[5]) + int64(segHeader+frameHeader+len(recs[5]))
			assert.LessOrEqual(t, info.TornBytes, endOfLast-int64(segHeader)-int64(lsns[3]))
			assert.Greater(t, info.TornBytes, int64(lsns[5]-lsns[3]), "the unsynced frames after the hole are part of the torn tail")
			_, got := readAll(t, l, 0)
			require.Equal(t, recs[:3], got)
			lsn, err := l.Append([]byte("after"))
			require.NoError(t, err)
			require.Equal(t, lsns[3], lsn)
			require.NoError(t, l.Close())

			_, got, info = replay(t, img, opts)
			require.Equal(t, append(recs[:3:3], []byte("after")), got)
			require.Zero(t, info.TornBytes)
		})
	}
}

// corruptOpen opens the log on fsys and returns the *CorruptionError Open
// must fail with.
func corruptOpen(t *testing.T, fsys vfs.FS, opts wal.Options) *wal.CorruptionError {
	t.Helper()
	opts.FS = fsys
	if opts.SegmentSize == 0 {
		opts.SegmentSize = testSegmentSize
	}
	l, err := wal.Open(logDir, opts)
	require.Error(t, err)
	require.Nil(t, l)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	var ce *wal.CorruptionError
	require.True(t, errors.As(err, &ce), "%v is not a *CorruptionError", err)
	require.Contains(t, err.Error(), ce.Segment)
	// A failed Open releases the lock: the next attempt fails the same way.
	_, err2 := wal.Open(logDir, opts)
	require.ErrorIs(t, err2, wal.ErrCorrupt)
	return ce
}

// TestBitFlipInSyncedFrame flips one bit at a time in a synced frame that
// later frames' watermarks cover: Open must fail naming segment and offset.
func TestBitFlipInSyncedFrame(t *testing.T) {
	w := writeLog(t, wal.Options{}, []int{50, 60, 70, 80, 90}) // sync every commit
	seg := segments(t, w.mem)[0]
	orig := fileBytes(t, w.mem, seg)
	for _, k := range []int{0, 1, 3} { // the frame at LSN w.lsns[k]
		at := segHeader + int(w.lsns[k])
		for i := at; i < at+frameHeader+len(w.recs[k]); i += 3 {
			for _, bit := range []byte{0x01, 0x80} {
				img := w.mem.ProcessCrash()
				b := bytes.Clone(orig)
				b[i] ^= bit
				setFile(t, img, seg, b)
				ce := corruptOpen(t, img, w.opts)
				assert.Equal(t, seg, ce.Segment, "flip at %d", i)
				assert.Equal(t, int64(at), ce.Offset, "flip at %d", i)
				assert.NotEmpty(t, ce.Reason)
			}
		}
	}
}

// TestCleanCloseVerifiesTheLastGroup (issue 11.1): after a clean Close, a
// flipped bit in any record of the last group — which no later record's
// watermark vouches for — is ErrCorrupt, not a torn tail to erase: Close's
// end frame vouches for every byte before it. Every policy whose last group
// holds several records is covered, and nothing on disk is changed.
func TestCleanCloseVerifiesTheLastGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pol   policy.Policy
		batch bool
	}{
		{"sync-never", policy.SyncNever(), false},
		{"default/one-batch", policy.SyncEveryCommit(), true},
		{"interval", policy.SyncInterval(time.Hour), false},
		{"buffered", policy.BufferedInterval(time.Hour, time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			opts := wal.Options{FS: mem, SegmentSize: 64 << 10, Policy: tc.pol}
			l := openLog(t, mem, opts)
			var recs [][]byte
			for i := range 10 {
				recs = append(recs, record(0, i, 200))
			}
			if tc.batch {
				_, err := l.AppendBatchContext(context.Background(), recs)
				require.NoError(t, err)
			} else {
				for _, r := range recs {
					_, err := l.Append(r)
					require.NoError(t, err)
				}
			}
			require.NoError(t, l.Close())
			seg := segments(t, mem)[0]
			b := fileBytes(t, mem, seg)
			at := segHeader + 2*int(frameSize(200)) + frameHeader + 7 // record 3's payload
			b[at] ^= 0x04
			setFile(t, mem, seg, b)
			_, err := wal.Open(logDir, opts)
			var ce *wal.CorruptionError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, wal.ErrCorrupt)
			require.Equal(t, seg, ce.Segment)
			require.Equal(t, bytes.Clone(b), fileBytes(t, mem, seg), "a failed Open changes no byte")
		})
	}
}

// TestCrashDamageInLastGroupIsQuarantined (issue 11.1): after a crash there
// is no end frame, so damage in the last group cannot be told from a torn
// tail (the documented bound). Open cuts the tail, but first copies the
// bytes it drops to a quarantine file that later Opens recognise and list.
func TestCrashDamageInLastGroupIsQuarantined(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 64 << 10, Policy: policy.SyncNever()}
	l := openLog(t, mem, opts)
	var lsns []wal.LSN
	var recs [][]byte
	for i := range 10 {
		rec := record(0, i, 200)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		lsns, recs = append(lsns, lsn), append(recs, rec)
	}
	require.NoError(t, l.Sync())
	img := mem.ProcessCrash() // no Close: no end frame
	require.NoError(t, l.Close())
	seg := segments(t, img)[0]
	b := fileBytes(t, img, seg)
	at := segHeader + int(lsns[2]) + frameHeader + 7
	b[at] ^= 0x04
	setFile(t, img, seg, b)
	tail := bytes.Clone(b[segHeader+int(lsns[2]) : segHeader+int(lsns[9])+int(frameSize(200))])

	l = openLog(t, img, opts)
	info := l.Recovered()
	require.Equal(t, lsns[2], info.EndLSN)
	require.Equal(t, int64(len(tail)), info.TornBytes)
	require.Len(t, info.Quarantined, 1)
	q := info.Quarantined[0]
	require.Equal(t, lsns[2], q.FromLSN)
	require.Equal(t, lsns[2]+wal.LSN(len(tail)), q.EndLSN)
	require.Equal(t, int64(len(tail)), q.Bytes)
	require.Equal(t, tail, fileBytes(t, img, q.Name), "the quarantine file holds the dropped bytes")
	durable := img.PowerLoss(vfs.DropAll())
	require.Equal(t, tail, fileBytes(t, durable, q.Name), "quarantine file durable before the tail was zeroed")
	require.NoError(t, l.Close())

	l = openLog(t, img, opts) // recognised, not a foreign file
	require.Equal(t, []wal.QuarantineFile{q}, l.Recovered().Quarantined)
	_, got := readAll(t, l, 0)
	require.Equal(t, recs[:2], got)
	require.NoError(t, l.Close())
}

// TestOpenRewritesUnvouchedFramesAfterFailedSync (issue 11.2): a failed
// fsync marks the lost pages clean (Linux, modelled by MemFS.FailNextSync).
// Reopened after a process crash, the page cache still shows R3: Open must
// write the frames no watermark vouches for again before its sync, or R4,
// acknowledged with a watermark vouching for R3, is unreachable after a
// power loss.
func TestOpenRewritesUnvouchedFramesAfterFailedSync(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 64 << 10}
	l := openLog(t, mem, opts)
	for i := range 2 {
		_, err := l.Append(record(0, i, 100))
		require.NoError(t, err)
	}
	mem.FailNextSync(syscall.EIO)
	_, err := l.Append(record(0, 2, 100))
	require.ErrorIs(t, err, wal.ErrDurabilityUnknown)
	require.ErrorIs(t, l.Close(), wal.ErrPoisoned)

	img := mem.ProcessCrash()
	l = openLog(t, img, opts)
	require.Positive(t, l.Recovered().Unvouched)
	lsn4, err := l.Append(record(0, 3, 100))
	require.NoError(t, err)
	lost := img.PowerLoss(vfs.DropAll())
	require.NoError(t, l.Close())
	lsns, got, _ := replay(t, lost, opts)
	require.Len(t, got, 4, "R4 (LSN %d) was acknowledged: it and every record before it survive", lsn4)
	require.Equal(t, lsn4, lsns[3])
}

func TestDamageInNonLastSegment(t *testing.T) {
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()}
	sizes := make([]int, 60)
	for i := range sizes {
		sizes[i] = 100 + i
	}
	w := writeLog(t, opts, sizes)
	segs := segments(t, w.mem)
	require.GreaterOrEqual(t, len(segs), 3)

	for _, tc := range []struct {
		name   string
		damage func(b []byte) int // returns the expected offset
	}{
		{"first frame", func(b []byte) int { b[segHeader+frameHeader] ^= 1; return segHeader }},
		{"a middle frame", func(b []byte) int {
			// walk the frames to the third one
			off := segHeader
			for range 2 {
				n := int(b[off+8]) | int(b[off+9])<<8
				off += frameSize(n)
			}
			b[off+frameHeader+3] ^= 0x40
			return off
		}},
		{"zeroed frame", func(b []byte) int {
			off := segHeader
			n := int(b[off+8]) | int(b[off+9])<<8
			off += frameSize(n)
			clear(b[off : off+frameHeader])
			return off
		}},
		{"bad header", func(b []byte) int { b[3] ^= 1; return 0 }},
	} {
		for _, seg := range segs[:2] {
			t.Run(tc.name+"/"+seg, func(t *testing.T) {
				img := w.mem.ProcessCrash()
				b := fileBytes(t, img, seg)
				wantOff := tc.damage(b)
				setFile(t, img, seg, b)
				vopts := opts
				vopts.VerifyOnOpen = true
				ce := corruptOpen(t, img, vopts)
				assert.Equal(t, seg, ce.Segment)
				assert.Equal(t, int64(wantOff), ce.Offset)
				if wantOff == 0 {
					// A bad header fails Open whatever the option.
					ce = corruptOpen(t, img, opts)
					assert.Equal(t, seg, ce.Segment)
					return
				}
				// By default Open trusts the sealed segment by its link
				// frame; a Reader reports the damage where it lies, and
				// nothing after it is read past it.
				l := openLog(t, img, opts)
				defer l.Close()
				info := l.Recovered()
				assert.Equal(t, len(segs)-1, info.TrustedSegments)
				assert.Zero(t, info.VerifiedSegments)
				r, err := l.NewReader(0)
				require.NoError(t, err)
				defer r.Close()
				for err == nil {
					_, _, err = r.Next()
				}
				require.ErrorIs(t, err, wal.ErrCorrupt)
				require.True(t, errors.As(err, &ce), "%v is not a *CorruptionError", err)
				assert.Equal(t, seg, ce.Segment)
				assert.Equal(t, int64(wantOff), ce.Offset)
			})
		}
	}
	t.Run("non-last segment cut short", func(t *testing.T) {
		img := w.mem.ProcessCrash()
		b := fileBytes(t, img, segs[0])
		setFile(t, img, segs[0], b[:len(b)/2])
		ce := corruptOpen(t, img, opts)
		assert.Equal(t, segs[0], ce.Segment)
	})
	t.Run("last segment bad header", func(t *testing.T) {
		img := w.mem.ProcessCrash()
		last := segs[len(segs)-1]
		b := fileBytes(t, img, last)
		b[20] ^= 1 // the first LSN in the header
		setFile(t, img, last, b)
		ce := corruptOpen(t, img, opts)
		assert.Equal(t, last, ce.Segment)
		assert.Zero(t, ce.Offset)
	})
	t.Run("last segment shorter than its header", func(t *testing.T) {
		img := w.mem.ProcessCrash()
		last := segs[len(segs)-1]
		setFile(t, img, last, fileBytes(t, img, last)[:10])
		ce := corruptOpen(t, img, opts)
		assert.Equal(t, last, ce.Segment)
	})
}

func TestMissingSegment(t *testing.T) {
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()}
	sizes := make([]int, 100)
	for i := range sizes {
		sizes[i] = 100 + i%50
	}
	w := writeLog(t, opts, sizes)
	segs := segments(t, w.mem)
	require.GreaterOrEqual(t, len(segs), 4)
	for i := 1; i < len(segs)-1; i++ {
		img := w.mem.ProcessCrash()
		require.NoError(t, img.Remove(filepath.Join(logDir, segs[i])))
		ce := corruptOpen(t, img, opts)
		assert.Equal(t, segs[i], ce.Segment, "the error names the missing segment %s: %v", segs[i], ce)
	}
	// A missing oldest segment is damage too (issue 11.3): the log records
	// where it starts when created and before RemoveBefore removes anything.
	img := w.mem.ProcessCrash()
	require.NoError(t, img.Remove(filepath.Join(logDir, segs[0])))
	ce := corruptOpen(t, img, opts)
	assert.Equal(t, segs[0], ce.Segment, "the error names the missing first segment: %v", ce)

	// Segments removed by RemoveBefore are a checkpoint, not damage.
	img = w.mem.ProcessCrash()
	l := openLog(t, img, opts)
	first, err := l.RemoveBefore(segFirst(t, segs[2]))
	require.NoError(t, err)
	require.Equal(t, segFirst(t, segs[2]), first)
	require.NoError(t, l.Close())
	_, got, info := replay(t, img, opts)
	assert.Equal(t, segFirst(t, segs[2]), info.FirstLSN)
	assert.NotEmpty(t, got)
	assert.Equal(t, w.recs[len(w.recs)-len(got):], got)
}

func TestForeignFile(t *testing.T) {
	for _, name := range []string{"notes.txt", "0001.wal", "00000000000000000000.wal.bak", "123456789012345678901.wal"} {
		t.Run(name, func(t *testing.T) {
			w := writeLog(t, wal.Options{}, []int{10})
			f, err := w.mem.Create(filepath.Join(logDir, name), vfs.Fdatasync)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			_, err = wal.Open(logDir, wal.Options{FS: w.mem, SegmentSize: testSegmentSize})
			require.ErrorIs(t, err, wal.ErrForeignFile)
			require.Contains(t, err.Error(), name)
		})
	}
}

func TestLeftoverTempRemoved(t *testing.T) {
	w := writeLog(t, wal.Options{}, []int{10, 20})
	for _, name := range []string{"prepare-7.wal.tmp", "x.wal.tmp"} {
		f, err := w.mem.Create(filepath.Join(logDir, name), vfs.Fdatasync)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("junk"), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	_, got, info := replay(t, w.mem, w.opts)
	assert.Equal(t, w.recs, got)
	assert.Equal(t, 2, info.RemovedTemp)
	names, err := w.mem.PowerLoss(vfs.DropAll()).List(logDir)
	require.NoError(t, err)
	for _, n := range names {
		assert.False(t, strings.HasSuffix(n, ".tmp"), "%s survived (removal synced)", n)
	}
}

// FuzzRecover puts arbitrary bytes after a valid header in the only
// segment: Open either fails with ErrCorrupt or succeeds, and then reads
// back records a second Open sees identically, and the log takes appends.
func FuzzRecover(f *testing.F) {
	const segSize = 4 << 10
	opts := wal.Options{SegmentSize: segSize, Policy: policy.SyncNever()}
	seed := writeLog(f, opts, []int{1, 7, 30, 100})
	segb := fileBytes(f, seed.mem, segments(f, seed.mem)[0])
	header := bytes.Clone(segb[:segHeader])
	body := segb[segHeader : segHeader+int(seed.end)]
	f.Add(bytes.Clone(body))
	f.Add(bytes.Clone(body[:len(body)-9]))
	f.Add(append(bytes.Clone(body), 1, 2, 3))
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	hole := bytes.Clone(body)
	clear(hole[32:40])
	f.Add(hole)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 2*segSize {
			b = b[:2*segSize]
		}
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll(logDir, 0o755))
		name := filepath.Join(logDir, "00000000000000000000.wal")
		file, err := mem.Create(name, vfs.Fdatasync)
		require.NoError(t, err)
		_, err = file.WriteAt(append(bytes.Clone(header), b...), 0)
		require.NoError(t, err)
		require.NoError(t, file.Close())

		o := opts
		o.FS = mem
		l, err := wal.Open(logDir, o)
		if err != nil {
			require.ErrorIs(t, err, wal.ErrCorrupt)
			return
		}
		lsns, recs := readAll(t, l, 0)
		end := l.AppendedLSN()
		require.NoError(t, l.Close())

		l, err = wal.Open(logDir, o)
		require.NoError(t, err)
		require.Zero(t, l.Recovered().TornBytes)
		lsns2, recs2 := readAll(t, l, 0)
		require.Equal(t, lsns, lsns2)
		require.Equal(t, recs, recs2)
		require.Equal(t, end, l.AppendedLSN())
		lsn, err := l.Append([]byte("next"))
		require.NoError(t, err)
		require.Equal(t, end, lsn)
		require.NoError(t, l.Close())
		_, recs3, _ := replay(t, mem, opts)
		require.Equal(t, append(recs, []byte("next")), recs3)
	})
}

// TestMissingSegmentIsCorrupt (issue 11.3): a roll links the finished
// segment to its successor once the successor is durable, so a log whose
// last segment (or one in the middle) disappeared fails Open naming the
// missing segment, instead of silently ending early and reusing the LSNs of
// fsynced records.
func TestMissingSegmentIsCorrupt(t *testing.T) {
	for _, which := range []string{"last", "middle"} {
		t.Run(which, func(t *testing.T) {
			var sizes []int
			for range 200 {
				sizes = append(sizes, 90)
			}
			w := writeLog(t, wal.Options{SegmentSize: 4 << 10}, sizes)
			segs := segments(t, w.mem)
			require.GreaterOrEqual(t, len(segs), 4)
			gone := segs[len(segs)-1]
			if which == "middle" {
				gone = segs[len(segs)/2]
			}
			require.NoError(t, w.mem.Remove(filepath.Join(logDir, gone)))
			opts := w.opts
			opts.FS = w.mem
			_, err := wal.Open(logDir, opts)
			var ce *wal.CorruptionError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, wal.ErrCorrupt)
			require.Equal(t, gone, ce.Segment, "the error names the missing segment: %v", err)
			require.Contains(t, err.Error(), "missing")
		})
	}
}

// TestFirstLSNRecordedAfterCrashAtCreation: a crash between creating a new
// log's first segment and recording its start leaves a log without the
// first-lsn record; the next Open writes it, so the loss of the oldest
// segment later is still reported as damage rather than taken for a
// checkpoint.
func TestFirstLSNRecordedAfterCrashAtCreation(t *testing.T) {
	mem := vfs.NewMem()
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpCreate && strings.Contains(op.Path, "first-lsn") {
			return faultfs.ErrInjected
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, FS: faultfs.Inject(mem, inj)}
	_, err := wal.Open(logDir, opts)
	require.ErrorIs(t, err, faultfs.ErrInjected)
	img := mem.PowerLoss(vfs.DropAll())
	require.Equal(t, []string{"00000000000000000000.wal"}, segments(t, img), "the crash left the first segment")

	opts.FS = img
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	for i := range 200 {
		_, err := l.Append(record(6, i, 90))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	segs := segments(t, img)
	require.Greater(t, len(segs), 2)
	require.NoError(t, img.Remove(filepath.Join(logDir, segs[0])))
	_, err = wal.Open(logDir, opts)
	var ce *wal.CorruptionError
	require.ErrorAs(t, err, &ce, "a lost oldest segment is damage")
	require.Equal(t, segs[0], ce.Segment)
}

// TestOpenReadsOnlyTheLastSegment: Open trusts each sealed segment by its
// header and link frame, reading a few dozen bytes of it, and checks only
// the last segment's frames; VerifyOnOpen reads and checks all of them.
// Both recover the same records.
func TestOpenReadsOnlyTheLastSegment(t *testing.T) {
	const segSize = 64 << 10
	opts := wal.Options{SegmentSize: segSize, Policy: policy.SyncNever()}
	sizes := make([]int, 600)
	for i := range sizes {
		sizes[i] = 500 + i%300
	}
	w := writeLog(t, opts, sizes)
	segs := segments(t, w.mem)
	require.GreaterOrEqual(t, len(segs), 6)

	lsns, recs, info := replay(t, w.mem, opts)
	require.Equal(t, len(segs)-1, info.TrustedSegments)
	require.Zero(t, info.VerifiedSegments)
	// Every segment's header (64 bytes) before the scan; the last one's
	// header, its predecessor's header and link frame (24) to see whether a
	// roll was cut short (recoverRoll); then each sealed segment's header
	// again and its link frame.
	require.LessOrEqual(t, info.BytesRead, int64(segSize+len(segs)*segHeader+(segHeader+segHeader+24)+(len(segs)-1)*(segHeader+24)))

	vopts := opts
	vopts.VerifyOnOpen = true
	vlsns, vrecs, vinfo := replay(t, w.mem, vopts)
	require.Equal(t, len(segs)-1, vinfo.VerifiedSegments)
	require.Zero(t, vinfo.TrustedSegments)
	require.GreaterOrEqual(t, vinfo.BytesRead, int64(len(segs))*segSize-int64(len(segs))*segSize/4)
	require.Equal(t, lsns, vlsns)
	require.Equal(t, recs, vrecs)
	require.Len(t, recs, len(sizes))
}

// TestEndFrameFollowedByVouchingFrameIsCorrupt: a clean Close's end frame
// at LSN E, then (after a reopen) record A written over it and synced, and
// record B whose watermark vouches for A. If A's first bytes come back as
// the old end frame (damage: they were synced), the end frame must not be
// taken for a clean end: B says the log was synced past E, so Open fails
// instead of silently dropping A and B.
func TestEndFrameFollowedByVouchingFrameIsCorrupt(t *testing.T) {
	opts := wal.Options{SegmentSize: 64 << 10, Policy: policy.SyncNever()}
	mem := vfs.NewMem()
	l := openLog(t, mem, opts)
	appendN(t, l, 0, 5, 100)
	end := l.AppendedLSN()
	require.NoError(t, l.Close())
	seg := segments(t, mem)[0]
	off := segHeader + int(end)
	endFrame := fileBytes(t, mem, seg)[off : off+frameHeader]

	l = openLog(t, mem, opts)
	appendN(t, l, 1, 1, 300) // A, at the end frame's LSN
	require.NoError(t, l.Sync())
	appendN(t, l, 2, 1, 300) // B: its watermark vouches for A
	require.NoError(t, l.Sync())
	img := mem.ProcessCrash()
	require.NoError(t, l.Close())
	b := fileBytes(t, img, seg)
	copy(b[off:], endFrame)
	setFile(t, img, seg, b)
	ce := corruptOpen(t, img, opts)
	require.Equal(t, seg, ce.Segment)
}

// TestRemoveBeforeFirstLSNSyncFails: on a full disk (no block for a new
// record file) RemoveBefore updates first-lsn in place, and its sync fails
// as Linux's does (the page stays in the cache,
// marked clean, and the disk keeps the old record). After a restart Open
// reads the new record from the cache and finishes the removal; a power
// loss after that must not bring back the old record with its oldest
// segment gone ("missing"): Open writes the record again before removing
// anything it says is gone.
func TestRemoveBeforeFirstLSNSyncFails(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpCreate && strings.HasPrefix(filepath.Base(op.Path), "first-lsn.") && armed.Load() {
			return syscall.ENOSPC
		}
		if op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, "first-lsn") && armed.CompareAndSwap(true, false) {
			mem.FailNextSync(syscall.EIO)
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit(), RecycleSegments: -1}
	l := openLog(t, faultfs.Inject(mem, inj), opts)
	for i := 0; len(segments(t, mem)) < 3; i++ {
		_, err := l.Append(record(0, i, 300))
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	segs := segments(t, mem)
	last := segFirst(t, segs[len(segs)-1])
	armed.Store(true)
	_, err := l.RemoveBefore(last)
	require.Error(t, err, "the sync of first-lsn failed")
	img := mem.ProcessCrash()
	l.Close()

	o := opts
	o.FS = img
	l2, err := wal.Open(logDir, o)
	require.NoError(t, err)
	start := l2.FirstLSN()
	require.Equal(t, last, start, "Open finished the removal")
	require.NoError(t, l2.Close())
	for _, m := range []vfs.CrashMode{vfs.KeepAll(), vfs.DropAll()} {
		o.FS = img.PowerLoss(m)
		l3, err := wal.Open(logDir, o)
		require.NoError(t, err, "%s", m)
		require.Equal(t, start, l3.FirstLSN())
		require.NoError(t, l3.Close())
	}
}

// TestCleanCloseNearlyFullSegmentVerifiesLastGroup: the package doc says
// a clean Close leaves every byte verifiable (end frame), and room() keeps
// the last endFrameSize bytes of a v2 segment free "so a clean Close and a
// roll can always write theirs". But writeEnd checks
// used+endFrameSize > room(), where room() already excludes those bytes: the
// reserve is counted twice. A segment filled to within 24 bytes of room()
// gets no end frame at Close, and damage in its last group is then taken for
// a torn tail and cut (issue 11.1 again, in this corner).
//
// Sequence: SegmentSize 4 KiB (room 4008), SyncNever, twenty 176-byte
// records (200-byte frames, 4000 bytes used), Close() returns nil (it synced
// all 20). Flip one payload bit of record 3. Expected: Open fails with
// ErrCorrupt. Happens: Open returns nil with records 1-2 only, 16 records
// that Close had made durable are quarantined and zeroed.
func TestCleanCloseNearlyFullSegmentVerifiesLastGroup(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10, Policy: policy.SyncNever()}
	l := openLog(t, mem, opts)
	appendN(t, l, 0, 20, 176)
	require.Equal(t, wal.LSN(20*frameSize(176)), l.AppendedLSN())
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	require.Len(t, segs, 1, "no roll: everything is in one segment")

	// Sanity: the clean close is recognised when nothing is damaged.
	l = openLog(t, mem.ProcessCrash(), opts)
	clean := l.Recovered().Clean
	require.NoError(t, l.Close())

	b := fileBytes(t, mem, segs[0])
	b[segHeader+2*frameSize(176)+frameHeader+7] ^= 0x04 // record 3's payload
	setFile(t, mem, segs[0], b)
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		info := l2.Recovered()
		_, got := readAll(t, l2, 0)
		l2.Close()
		t.Fatalf("Open after a clean Close (Clean=%v before the damage) returned nil with %d of 20 records, TornBytes %d, quarantined %v: damage in data Close synced was taken for a torn tail",
			clean, len(got), info.TornBytes, info.Quarantined)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestAllSegmentsMissingIsCorrupt: "A missing segment is damage wherever
// it was" (README, Recovery rule). But Open only consults first-lsn when at
// least one segment is present; with none it creates a fresh log at LSN 0
// and overwrites first-lsn with 0.
//
// Sequence (a): one segment holding 5 synced records, Close; the segment
// file vanishes. Expected: Open fails with ErrCorrupt (first-lsn says the
// log starts at 0 and a segment is missing). Happens: Open returns nil, an
// empty log, the records are gone without an error.
//
// Sequence (b): rolls, RemoveBefore (first-lsn now > 0), every segment
// vanishes. Happens: Open returns nil and the next append gets LSN 0, below
// LSNs already handed out and checkpointed.
func TestAllSegmentsMissingIsCorrupt(t *testing.T) {
	t.Run("single-segment", func(t *testing.T) {
		mem := vfs.NewMem()
		opts := wal.Options{FS: mem, SegmentSize: 64 << 10}
		l := openLog(t, mem, opts)
		appendN(t, l, 0, 5, 100)
		require.NoError(t, l.Close())
		segs := segments(t, mem)
		require.Len(t, segs, 1)
		require.NoError(t, mem.Remove(filepath.Join(logDir, segs[0])))

		l2, err := wal.Open(logDir, opts)
		if err == nil {
			_, got := readAll(t, l2, 0)
			l2.Close()
			t.Fatalf("Open with the only segment missing returned nil and %d records (5 were acknowledged durable)", len(got))
		}
		require.ErrorIs(t, err, wal.ErrCorrupt)
	})
	t.Run("after-RemoveBefore", func(t *testing.T) {
		mem := vfs.NewMem()
		opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
		l := openLog(t, mem, opts)
		last := appendN(t, l, 0, 60, 300)[59]
		kept, err := l.RemoveBefore(last)
		require.NoError(t, err)
		require.Positive(t, kept)
		require.NoError(t, l.Close())
		for _, s := range segments(t, mem) {
			require.NoError(t, mem.Remove(filepath.Join(logDir, s)))
		}
		l2, err := wal.Open(logDir, opts)
		if err == nil {
			lsn, aerr := l2.Append([]byte("new"))
			l2.Close()
			t.Fatalf("Open with every segment missing (log started at LSN %d, ended past %d) returned nil; next append got LSN %d (err %v)", kept, last, lsn, aerr)
		}
		require.ErrorIs(t, err, wal.ErrCorrupt)
	})
}

// TestOnlyEpochLeftIsCorrupt: a directory whose segments and first-lsn
// were deleted by hand, the epoch record left, held a log: Open and
// OpenReadOnly refuse it with ErrCorrupt naming the epoch record, instead
// of starting a new log at LSN 0 below LSNs already handed out. Nothing but
// the lock file is created, and Repair reports ErrNotRepaired: nothing can
// be kept.
func TestOnlyEpochLeftIsCorrupt(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	appendN(t, l, 0, 30, 300)
	require.NoError(t, l.Close())
	names, err := mem.List(logDir)
	require.NoError(t, err)
	for _, name := range names {
		if name != "epoch" {
			require.NoError(t, mem.Remove(filepath.Join(logDir, name)))
		}
	}
	_, err = wal.Open(logDir, opts)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	require.ErrorContains(t, err, "epoch")
	_, err = wal.OpenReadOnly(logDir, opts)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	left, err := mem.List(logDir)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"LOCK", "epoch"}, left, "a refused Open creates no segment and no first-lsn")
	// Nothing can be kept: Repair says so, as its contract has it.
	_, err = wal.Repair(logDir, opts)
	require.ErrorIs(t, err, wal.ErrNotRepaired)
	require.ErrorContains(t, err, "no segment of the log is left")
}

// TestMissingLastSegmentWithStrayByteAfterLink (double fault, low): a
// link frame in the last segment present proves the log continued in a
// segment that is missing, and Open reports it, but only if nothing but
// zeros follows the link. One non-zero byte anywhere after it (bit rot in
// the unused tail) turns the link into "a torn tail from the link on": the
// link is quarantined and zeroed, Open returns nil, the missing segment's
// records are gone and the next append reuses their LSNs. No crash can put
// bytes after a link (nothing is ever written there), so they are damage.
//
// Sequence: three 4 KiB segments, Close; remove the last segment; set the
// last byte of the (now last) second segment to 1. Expected: ErrCorrupt
// naming the missing segment. Happens: Open nil.
func TestMissingLastSegmentWithStrayByteAfterLink(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	appendUntilSegments(t, l, mem, 3, 0)
	end := l.AppendedLSN()
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	require.NoError(t, mem.Remove(filepath.Join(logDir, segs[2])))
	_, err := wal.Open(logDir, opts)
	require.ErrorIs(t, err, wal.ErrCorrupt, "the link alone is reported")

	b := fileBytes(t, mem, segs[1])
	b[len(b)-1] = 1
	setFile(t, mem, segs[1], b)
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		info := l2.Recovered()
		l2.Close()
		t.Fatalf("%s missing and one stray byte after the link in %s: Open nil, log ends at LSN %d (was %d), TornBytes %d",
			segs[2], segs[1], info.EndLSN, end, info.TornBytes)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestMissingFirstLSNAndOldestSegment (double fault, low): Open writes a
// missing first-lsn from the oldest segment present, assuming "only a crash
// between creating the log's first segment and recording its start" leaves
// a v2 log without it. That crash leaves only segment 0; a v2 log without
// first-lsn whose oldest segment starts above 0 has lost both, and the
// oldest segment's loss is then recorded as the log's start.
//
// Sequence: three 4 KiB segments, never RemoveBefore; first-lsn and
// segment 0 both vanish (a copy of *.wal that missed the oldest file).
// Expected: ErrCorrupt. Happens: Open nil, FirstLSN > 0, first-lsn rewritten.
func TestMissingFirstLSNAndOldestSegment(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	appendUntilSegments(t, l, mem, 3, 0)
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	require.NoError(t, mem.Remove(filepath.Join(logDir, "first-lsn")))
	require.NoError(t, mem.Remove(filepath.Join(logDir, segs[0])))
	l2, err := wal.Open(logDir, opts)
	if err == nil {
		info := l2.Recovered()
		l2.Close()
		t.Fatalf("first-lsn and %s missing, log never trimmed: Open nil, FirstLSN %d", segs[0], info.FirstLSN)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestFailedSyncOfZeroedTailDoesNotResurrectCutRecords (fsyncgate inside
// recovery): Open quarantines a torn tail, zeroes it and syncs. If that sync
// fails (EIO) Open fails, as it should — but Linux has now marked the zeroed
// pages clean while the disk still holds the old tail. The next Open, in a
// fresh process as the README advises, reads zeros from the page cache,
// sees no torn tail, rewrites only the unvouched frames (not the zeros) and
// its sync writes nothing there. New records go on at the cut LSN; after a
// power loss the old frames that Open #1 had cut reappear right after them,
// at their own LSNs, whenever a new frame ends where an old one began
// (always, with fixed-size records).
//
// Sequence (MemFS models the failed sync: FailNextSync): SyncNever; ten
// 100-byte records R0..R9, Sync after R4; crash image in which R7's header
// sector is lost while R8 and R9 reached the disk (as a power loss that
// writes sectors out of order leaves it): torn tail R7..R9. Open #1: the sync after zeroing the tail fails,
// Open returns the error. Process crash; Open #2 nil (R0..R6); Append N7
// (SyncEveryCommit) nil at R7's LSN; power loss. Expected: R0..R6, N7.
// Happens: R0..R6, N7, R8, R9 — records cut as torn and never acknowledged
// come back after an acknowledged one.
func TestFailedSyncOfZeroedTailDoesNotResurrectCutRecords(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 64 << 10, Policy: policy.SyncNever()}
	l := openLog(t, mem, opts)
	var recs [][]byte
	var lsns []wal.LSN
	for i := range 10 {
		rec := record(0, i, 100)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		recs, lsns = append(recs, rec), append(lsns, lsn)
		if i == 4 {
			require.NoError(t, l.Sync())
		}
	}
	img := mem.ProcessCrash()
	require.NoError(t, l.Close())
	seg := segments(t, img)[0]
	b := fileBytes(t, img, seg)
	xoff := int64(segHeader + int(lsns[7]))
	clear(b[xoff : xoff+frameHeader]) // R7's header never reached the disk
	setFile(t, img, seg, b)

	// Open #1: the sync that follows the zeroing of the torn tail fails.
	var zeroed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpWrite && strings.HasSuffix(op.Path, seg) && op.Offset == xoff {
			zeroed.Store(true)
		}
		if op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, seg) && zeroed.Load() {
			img.FailNextSync(syscall.EIO)
		}
		return nil
	})
	o1 := opts
	o1.FS = faultfs.Inject(img, inj)
	_, err := wal.Open(logDir, o1)
	require.ErrorIs(t, err, syscall.EIO, "Open #1 fails at the sync of the zeroed tail")

	// Open #2 in a fresh process: one acknowledged durable record at R7's LSN.
	img2 := img.ProcessCrash()
	o2 := wal.Options{FS: img2, SegmentSize: 64 << 10}
	l2, err := wal.Open(logDir, o2)
	require.NoError(t, err)
	_, got := readAll(t, l2, 0)
	require.Equal(t, recs[:7], got)
	n7 := record(1, 7, 100)
	lsn, err := l2.Append(n7)
	require.NoError(t, err)
	require.Equal(t, lsns[7], lsn)

	lost := img2.PowerLoss(vfs.DropAll())
	require.NoError(t, l2.Close())
	o3 := o2
	o3.FS = lost
	l3, err := wal.Open(logDir, o3)
	require.NoError(t, err)
	gotLSNs, got := readAll(t, l3, 0)
	require.NoError(t, l3.Close())
	require.Equal(t, append(append([][]byte{}, recs[:7]...), n7), got,
		"after the power loss: %d records at LSNs %v; records past N7 were cut as torn by Open #1 and never acknowledged", len(got), gotLSNs)
}

// TestOversizedSegmentRejectedBeforeRead (low): the header of every
// segment records the size it was created with, and a file of another size
// is damage. But Open reads the whole file into memory (readSegment) before
// it compares the sizes (checkSegmentHeader), so a segment file extended by
// something other than the log — a sparse truncate -s, a copy tool padding
// it — costs Open as much memory as the file claims. Here a 4 KiB segment
// extended (sparsely) to 256 MiB makes Open allocate and read 256 MiB before it
// returns the expected ErrCorrupt; a file extended to more than RAM (vm
// overcommit 0 refuses it) ends the process with "fatal error: out of
// memory" instead of an error.
//
// Expected: ErrCorrupt after reading the header (a few KiB). Happens:
// ErrCorrupt after allocating ≥ 256 MiB.
func TestOversizedSegmentRejectedBeforeRead(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 4 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	_, err = l.Append([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, os.Truncate(filepath.Join(dir, "00000000000000000000.wal"), 256<<20))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = wal.Open(dir, opts)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(64<<20), "Open allocated %d MiB to reject a segment whose header says 4 KiB", allocated>>20)
}

// Segments written before the header recorded the file size (field 0) still
// open: 0 means "not recorded", not "created empty".
func TestSegmentWithoutRecordedSize(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{})
	_, err := l.Append(record(1, 0, 100))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	seg := segments(t, mem)[0]
	b := fileBytes(t, mem, seg)
	binary.LittleEndian.PutUint32(b[12:16], 0)
	binary.LittleEndian.PutUint64(b[56:64], xxhash.Sum64(b[:56]))
	setFile(t, mem, seg, b)
	_, recs, _ := replay(t, mem, wal.Options{SegmentSize: testSegmentSize})
	require.Equal(t, [][]byte{record(1, 0, 100)}, recs)
}

// Sim seeds 65, 328, 550, 673 (and others): an EIO reading first-lsn at
// Open is reported as corruption, not as the filesystem's error.
func TestEIOReadingFirstLSNIsNotCorruption(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	appendN(t, l, 1, 3, 100)
	require.NoError(t, l.Close())

	opts.FS = faultfs.Inject(mem, failReadsOf("first-lsn"))
	l, err = wal.Open(logDir, opts)
	if err == nil {
		l.Close()
		t.Skip("Open did not read first-lsn")
	}
	require.ErrorIs(t, err, syscall.EIO, "the filesystem's error")
	require.NotErrorIs(t, err, wal.ErrCorrupt, "an I/O error is not damage")
}

// Sim seed 550: the same for truncate-lsn, left by a cut whose zeroing
// failed to sync.
func TestEIOReadingTruncateLSNIsNotCorruption(t *testing.T) {
	mem := vfs.NewMem()
	var failSync atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, ".wal") && failSync.Load() {
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 4 << 10}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	lsns := appendN(t, l, 1, 6, 100)
	failSync.Store(true)
	require.ErrorIs(t, l.TruncateFrom(lsns[3]), wal.ErrPoisoned)
	l.Close()
	img := mem.ProcessCrash()
	names, err := img.List(logDir)
	require.NoError(t, err)
	require.Contains(t, names, "truncate-lsn", "the cut is recorded")

	opts.FS = faultfs.Inject(img, failReadsOf("truncate-lsn"))
	l, err = wal.Open(logDir, opts)
	if err == nil {
		l.Close()
		t.Fatal("Open succeeded without reading truncate-lsn")
	}
	require.ErrorIs(t, err, syscall.EIO, "the filesystem's error")
	require.NotErrorIs(t, err, wal.ErrCorrupt, "an I/O error is not damage")
}
