package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal/vfs"
)

const dir = "/db"

func newMem(t *testing.T) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	require.NoError(t, m.MkdirAll(dir, 0o755))
	require.NoError(t, m.SyncDir("/")) // the new directory's entry is durable
	return m
}

// allModes returns DropAll, KeepAll and the random modes for seeds 0..n-1.
func allModes(n int) []vfs.CrashMode {
	modes := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll()}
	for seed := range int64(n) {
		modes = append(modes, vfs.TearAtSector(seed),
			vfs.KeepRandomSubsetOfBlocks(512, seed), vfs.KeepRandomSubsetOfBlocks(4096, seed))
	}
	return modes
}

// create makes a file at name, writes content unsynced and returns it open.
func create(t *testing.T, m vfs.FS, name string, content []byte) vfs.File {
	t.Helper()
	f, err := m.Create(name, vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt(bytes.Clone(content), 0)
	require.NoError(t, err)
	return f
}

// image returns the bytes of name in m, or nil and false if it is missing.
func image(t *testing.T, m vfs.FS, name string) ([]byte, bool) {
	t.Helper()
	s, err := tryReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	require.NoError(t, err)
	return []byte(s), true
}

func TestUnsyncedBytesDroppedByPowerLossKeptByProcessCrash(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", []byte("synced"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	_, err := f.WriteAt([]byte("+unsynced"), 6)
	require.NoError(t, err)

	assert.Equal(t, "synced+unsynced", readFile(t, m.ProcessCrash(), dir+"/a"))
	assert.Equal(t, "synced", readFile(t, m.PowerLoss(vfs.DropAll()), dir+"/a"))
	assert.Equal(t, "synced+unsynced", readFile(t, m.PowerLoss(vfs.KeepAll()), dir+"/a"))

	// The process-crash image still knows what is durable.
	pc := m.ProcessCrash()
	assert.Equal(t, "synced", readFile(t, pc.PowerLoss(vfs.DropAll()), dir+"/a"))
}

func TestSyncedBytesSurviveEveryMode(t *testing.T) {
	m := newMem(t)
	synced := bytes.Repeat([]byte("0123456789abcdef"), 700) // 11200 bytes, not sector aligned
	f := create(t, m, dir+"/a", synced)
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	// Unsynced: an extension, a new file, a remove and a rename.
	_, err := f.WriteAt(bytes.Repeat([]byte{0xee}, 9000), int64(len(synced)))
	require.NoError(t, err)
	create(t, m, dir+"/b", []byte("unsynced file"))
	require.NoError(t, m.Rename(dir+"/b", dir+"/c"))

	for _, mode := range allModes(50) {
		img := m.PowerLoss(mode)
		got, ok := image(t, img, dir+"/a")
		require.True(t, ok, mode.String())
		require.GreaterOrEqual(t, len(got), len(synced), mode.String())
		require.Equal(t, synced, got[:len(synced)], mode.String())
	}
}

func TestDirectoryEntriesNeedSyncDir(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", []byte("content"))
	require.NoError(t, f.Sync()) // content durable, entry not

	_, ok := image(t, m.PowerLoss(vfs.DropAll()), dir+"/a")
	assert.False(t, ok, "an unsynced create must vanish under DropAll")
	assert.Equal(t, "content", readFile(t, m.ProcessCrash(), dir+"/a"))

	require.NoError(t, m.SyncDir(dir))
	for _, mode := range allModes(20) {
		assert.Equal(t, "content", readFile(t, m.PowerLoss(mode), dir+"/a"), mode.String())
	}
}

func TestUnsyncedRemoveCanBeUndone(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", []byte("durable"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	require.NoError(t, m.Remove(dir+"/a"))
	_, err := f.WriteAt([]byte("DUR"), 0) // the open file still writes, unsynced
	require.NoError(t, err)

	assert.Equal(t, "durable", readFile(t, m.PowerLoss(vfs.DropAll()), dir+"/a"))
	_, ok := image(t, m.PowerLoss(vfs.KeepAll()), dir+"/a")
	assert.False(t, ok)
	back, gone := 0, 0
	for seed := range int64(64) {
		if _, ok := image(t, m.PowerLoss(vfs.TearAtSector(seed)), dir+"/a"); ok {
			back++
		} else {
			gone++
		}
	}
	assert.Positive(t, back)
	assert.Positive(t, gone)

	require.NoError(t, m.SyncDir(dir))
	for _, mode := range allModes(20) {
		_, ok := image(t, m.PowerLoss(mode), dir+"/a")
		assert.False(t, ok, mode.String())
	}
}

func TestUnsyncedRenameIsAtomic(t *testing.T) {
	m := newMem(t)
	tmp := create(t, m, dir+"/tmp", []byte("new"))
	require.NoError(t, tmp.Sync())
	old := create(t, m, dir+"/seg", []byte("old"))
	require.NoError(t, old.Sync())
	require.NoError(t, m.SyncDir(dir))
	require.NoError(t, m.Rename(dir+"/tmp", dir+"/seg"))

	img := m.PowerLoss(vfs.DropAll())
	assert.Equal(t, "new", readFile(t, img, dir+"/tmp"))
	assert.Equal(t, "old", readFile(t, img, dir+"/seg"))
	reverted, done := 0, 0
	for _, mode := range allModes(40) {
		img := m.PowerLoss(mode)
		names, err := img.List(dir)
		require.NoError(t, err)
		switch strings.Join(names, ",") {
		case "seg,tmp":
			reverted++
			assert.Equal(t, "old", readFile(t, img, dir+"/seg"))
		case "seg":
			done++
			assert.Equal(t, "new", readFile(t, img, dir+"/seg"))
		default:
			t.Fatalf("%v: impossible entries %v", mode, names)
		}
	}
	assert.Positive(t, reverted)
	assert.Positive(t, done)
}

func TestSyncDirCommitsWhatItsChangesDependOn(t *testing.T) {
	m := newMem(t)
	require.NoError(t, m.MkdirAll("/other", 0o755))
	require.NoError(t, m.SyncDir("/"))
	f := create(t, m, dir+"/tmp", []byte("x"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.Rename(dir+"/tmp", "/other/final"))
	create(t, m, dir+"/unrelated", nil)
	require.NoError(t, m.SyncDir("/other"))

	img := m.PowerLoss(vfs.DropAll())
	assert.Equal(t, "x", readFile(t, img, "/other/final"))
	names, err := img.List(dir)
	require.NoError(t, err)
	assert.Empty(t, names, "the unrelated create was not synced")
}

func TestTearAtSectorKeepsASectorAlignedPrefix(t *testing.T) {
	const sectors = 8
	m := newMem(t)
	f := create(t, m, dir+"/a", make([]byte, sectors*vfs.SectorSize))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	_, err := f.WriteAt(bytes.Repeat([]byte{0xff}, sectors*vfs.SectorSize-100), 50)
	require.NoError(t, err)

	seen := map[int]bool{}
	for seed := range int64(200) {
		got, ok := image(t, m.PowerLoss(vfs.TearAtSector(seed)), dir+"/a")
		require.True(t, ok)
		require.Len(t, got, sectors*vfs.SectorSize)
		// The first k sectors hold the new content, the rest the old.
		k := 0
		for k < sectors && got[k*vfs.SectorSize+100] == 0xff {
			k++
		}
		want := make([]byte, sectors*vfs.SectorSize)
		for i := 50; i < min(k*vfs.SectorSize, len(want)-50); i++ {
			want[i] = 0xff
		}
		require.Equal(t, want, got, "seed %d", seed)
		seen[k] = true
	}
	assert.True(t, seen[0], "nothing kept")
	assert.True(t, seen[sectors], "everything kept")
	assert.Greater(t, len(seen), 3, "torn in the middle")
}

func TestKeepRandomSubsetOfBlocksReordersBlocks(t *testing.T) {
	const blocks, size = 8, 4096
	m := newMem(t)
	f := create(t, m, dir+"/a", make([]byte, blocks*size))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	_, err := f.WriteAt(bytes.Repeat([]byte{0xff}, blocks*size), 0)
	require.NoError(t, err)

	holes := 0 // images where a reverted block precedes a kept one
	for seed := range int64(50) {
		got, ok := image(t, m.PowerLoss(vfs.KeepRandomSubsetOfBlocks(size, seed)), dir+"/a")
		require.True(t, ok)
		require.Len(t, got, blocks*size)
		var kept []bool
		for b := range blocks {
			blk := got[b*size : (b+1)*size]
			switch {
			case bytes.Equal(blk, bytes.Repeat([]byte{0xff}, size)):
				kept = append(kept, true)
			case bytes.Equal(blk, make([]byte, size)):
				kept = append(kept, false)
			default:
				t.Fatalf("seed %d: block %d is torn inside", seed, b)
			}
		}
		for b := 1; b < blocks; b++ {
			if kept[b] && !kept[b-1] {
				holes++
				break
			}
		}
	}
	assert.Positive(t, holes)
}

func TestSameSeedSameImage(t *testing.T) {
	m := newMem(t)
	for i := range 5 {
		f := create(t, m, fmt.Sprintf("%s/f%d", dir, i), bytes.Repeat([]byte{byte(i)}, 3000))
		if i%2 == 0 {
			require.NoError(t, f.Sync())
		}
		_, err := f.WriteAt(bytes.Repeat([]byte{0xaa}, 5000), 1000)
		require.NoError(t, err)
	}
	require.NoError(t, m.Remove(dir+"/f1"))
	require.NoError(t, m.Rename(dir+"/f2", dir+"/g"))

	snapshot := func(img vfs.FS) map[string]string {
		names, err := img.List(dir)
		require.NoError(t, err)
		out := map[string]string{}
		for _, n := range names {
			out[n] = readFile(t, img, dir+"/"+n)
		}
		return out
	}
	distinct := map[string]bool{}
	for seed := range int64(10) {
		for _, mode := range []vfs.CrashMode{vfs.TearAtSector(seed), vfs.KeepRandomSubsetOfBlocks(512, seed)} {
			a := snapshot(m.PowerLoss(mode))
			require.Equal(t, a, snapshot(m.PowerLoss(mode)), mode.String())
			distinct[fmt.Sprint(a)] = true
		}
	}
	assert.Greater(t, len(distinct), 5, "different seeds give different images")
}

func TestUnsyncedExtensionMayComeBackZeroFilled(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", []byte("abc"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	ext := bytes.Repeat([]byte{0x11}, 4*512)
	_, err := f.WriteAt(bytes.Clone(ext), 3)
	require.NoError(t, err)

	sizes := map[int]bool{}
	zeroFilled := false
	for seed := range int64(100) {
		got, ok := image(t, m.PowerLoss(vfs.KeepRandomSubsetOfBlocks(512, seed)), dir+"/a")
		require.True(t, ok)
		require.Equal(t, "abc", string(got[:3]))
		sizes[len(got)] = true
		if len(got) == 3+len(ext) {
			for i := 3; i < len(got); i++ {
				require.Contains(t, []byte{0, 0x11}, got[i])
			}
			zeroFilled = zeroFilled || bytes.Contains(got, make([]byte, 512))
		}
	}
	assert.Equal(t, map[int]bool{3: true, 3 + len(ext): true}, sizes)
	assert.True(t, zeroFilled)
}

func TestFailNextSyncLosesTheBytesItCovered(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", []byte("durable|"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	_, err := f.WriteAt([]byte("lost|"), 8)
	require.NoError(t, err)

	m.FailNextSync(syscall.EIO)
	err = f.Sync()
	require.ErrorIs(t, err, syscall.EIO)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.EqualValues(t, 1, m.SyncCount(), "a failed sync is not counted")

	_, err = f.WriteAt([]byte("after"), 13)
	require.NoError(t, err)
	require.NoError(t, f.Sync(), "later syncs succeed, as on Linux")
	assert.EqualValues(t, 2, m.SyncCount())

	// The page cache still has everything; the disk does not.
	assert.Equal(t, "durable|lost|after", readFile(t, m, dir+"/a"))
	assert.Equal(t, "durable|lost|after", readFile(t, m.ProcessCrash(), dir+"/a"))
	want := "durable|\x00\x00\x00\x00\x00after"
	for _, mode := range allModes(10) {
		assert.Equal(t, want, readFile(t, m.PowerLoss(mode), dir+"/a"), mode.String())
	}

	// Rewriting the lost bytes and syncing makes them durable again.
	_, err = f.WriteAt([]byte("LOST|"), 8)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	assert.Equal(t, "durable|LOST|after", readFile(t, m.PowerLoss(vfs.DropAll()), dir+"/a"))
}

func TestFailNextSyncKeepsOverwrittenDurableContent(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", []byte("old old"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	_, err := f.WriteAt([]byte("new"), 0)
	require.NoError(t, err)
	m.FailNextSync(syscall.ENOSPC)
	require.ErrorIs(t, f.Sync(), syscall.ENOSPC)
	require.NoError(t, f.Sync())
	assert.Equal(t, "old old", readFile(t, m.PowerLoss(vfs.KeepAll()), dir+"/a"))
}

func TestWriteAtScramblesTheCallersBuffer(t *testing.T) {
	m := newMem(t)
	f, err := m.Create(dir+"/a", vfs.Fdatasync)
	require.NoError(t, err)
	p := []byte("payload")
	_, err = f.WriteAt(p, 0)
	require.NoError(t, err)
	for i, c := range []byte("payload") {
		assert.NotEqual(t, c, p[i], "byte %d", i)
	}
	assert.Equal(t, "payload", readFile(t, m, dir+"/a"))
}

func TestCrashImagesAreIndependent(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", []byte("one"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir(dir))
	l, err := m.Lock(dir + "/LOCK")
	require.NoError(t, err)

	for _, img := range []*vfs.MemFS{m.ProcessCrash(), m.PowerLoss(vfs.KeepAll())} {
		l2, err := img.Lock(dir + "/LOCK") // locks are not carried over
		require.NoError(t, err)
		require.NoError(t, l2.Close())
		g, err := img.OpenReadWrite(dir+"/a", vfs.Fdatasync)
		require.NoError(t, err)
		_, err = g.WriteAt([]byte("TWO"), 0)
		require.NoError(t, err)
		require.NoError(t, g.Close())
		assert.Zero(t, img.SyncCount())
	}
	assert.Equal(t, "one", readFile(t, m, dir+"/a"))
	_, err = f.WriteAt([]byte("1"), 0) // the original's open file still works
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

func TestSyncCounts(t *testing.T) {
	m := newMem(t)
	f := create(t, m, dir+"/a", nil)
	for range 3 {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, m.SyncDir(dir))
	assert.EqualValues(t, 3, m.SyncCount())
	assert.EqualValues(t, 2, m.SyncDirCount(), "newMem's sync of / and this one")
}

func TestPowerLossPanicsOnBadBlockSize(t *testing.T) {
	assert.Panics(t, func() { newMem(t).PowerLoss(vfs.KeepRandomSubsetOfBlocks(0, 1)) })
}

func TestMemConcurrentUse(t *testing.T) {
	m := newMem(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("%s/g%d", dir, g)
			f, err := m.Create(name, vfs.Fdatasync)
			if !assert.NoError(t, err) {
				return
			}
			for i := range 100 {
				_, err := f.WriteAt([]byte{byte(i)}, int64(i))
				assert.NoError(t, err)
				if i%10 == 0 {
					assert.NoError(t, f.Sync())
					assert.NoError(t, m.SyncDir(dir))
					m.PowerLoss(vfs.TearAtSector(int64(i)))
				}
			}
			assert.NoError(t, f.Close())
		})
	}
	wg.Wait()
	names, err := m.List(dir)
	require.NoError(t, err)
	assert.Len(t, names, 8)
	assert.EqualValues(t, 80, m.SyncCount())
}

// TestUnsyncedMkdirLostAtPowerLoss: a directory made by MkdirAll survives a
// power loss only once its parent is synced; before that, DropAll loses it
// with everything under it (even synced files and a synced directory), the
// random modes may lose it, and KeepAll and ProcessCrash keep it.
func TestUnsyncedMkdirLostAtPowerLoss(t *testing.T) {
	m := vfs.NewMem()
	require.NoError(t, m.MkdirAll("/a/b", 0o755))
	f := create(t, m, "/a/b/f", []byte("data"))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir("/a/b")) // f's entry is durable, /a/b's is not

	_, err := m.PowerLoss(vfs.DropAll()).List("/a/b")
	require.ErrorIs(t, err, fs.ErrNotExist, "unsynced mkdir survived DropAll")
	_, err = m.PowerLoss(vfs.DropAll()).List("/a")
	require.ErrorIs(t, err, fs.ErrNotExist, "unsynced parent mkdir survived DropAll")
	assert.Equal(t, "data", readFile(t, m.PowerLoss(vfs.KeepAll()), "/a/b/f"))
	assert.Equal(t, "data", readFile(t, m.ProcessCrash(), "/a/b/f"))
	lost := 0
	for seed := range int64(16) {
		if _, err := m.PowerLoss(vfs.TearAtSector(seed)).List("/a/b"); err != nil {
			lost++
		}
	}
	assert.Positive(t, lost, "random modes never lost the unsynced mkdir")

	require.NoError(t, m.SyncDir("/a")) // /a/b's entry; /a's still not
	_, err = m.PowerLoss(vfs.DropAll()).List("/a")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, m.SyncDir("/"))
	assert.Equal(t, "data", readFile(t, m.PowerLoss(vfs.DropAll()), "/a/b/f"))
	// The crash image keeps the pending mkdir state.
	pc := vfs.NewMem()
	require.NoError(t, pc.MkdirAll("/c", 0o755))
	_, err = pc.ProcessCrash().PowerLoss(vfs.DropAll()).List("/c")
	require.ErrorIs(t, err, fs.ErrNotExist)
}
