package vfs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// SectorSize is the unit, in bytes, at which [TearAtSector] tears a file.
const SectorSize = 512

// CrashMode says which unsynced state a [MemFS.PowerLoss] keeps. Build one
// with [DropAll], [KeepAll], [TearAtSector] or [KeepRandomSubsetOfBlocks];
// the zero value is DropAll. A CrashMode is a value: the random modes replay
// the same image for the same seed and the same MemFS history.
type CrashMode struct {
	kind      crashKind
	seed      int64
	blockSize int
}

type crashKind int

const (
	crashDropAll crashKind = iota
	crashKeepAll
	crashTear
	crashBlocks
)

// DropAll keeps only durable bytes and durable directory entries.
func DropAll() CrashMode { return CrashMode{kind: crashDropAll} }

// KeepAll keeps every write and directory change, as if the page cache had
// been written back just before the power went, except bytes lost to a
// failed sync ([MemFS.FailNextSync]), which the kernel never writes back.
func KeepAll() CrashMode { return CrashMode{kind: crashKeepAll} }

// TearAtSector keeps, for each file, its unsynced changes up to a random
// [SectorSize] boundary: the changed sectors in offset order are kept up to a
// random point (possibly none, possibly all) and the rest revert to their
// durable content. See [MemFS.PowerLoss] for what happens to sizes and
// directory entries. The seed makes the choice replayable.
func TearAtSector(seed int64) CrashMode { return CrashMode{kind: crashTear, seed: seed} }

// KeepRandomSubsetOfBlocks keeps, for each file, each changed block of
// blockSize bytes (block i covers [i*blockSize, (i+1)*blockSize)) with its
// new content or reverts it to its durable content, independently with
// probability 1/2: writes reach the media in any order. blockSize must be
// positive; PowerLoss panics otherwise. The seed makes the choice
// replayable.
func KeepRandomSubsetOfBlocks(blockSize int, seed int64) CrashMode {
	return CrashMode{kind: crashBlocks, blockSize: blockSize, seed: seed}
}

// String describes the mode with its seed, for test logs.
func (c CrashMode) String() string {
	switch c.kind {
	case crashKeepAll:
		return "KeepAll()"
	case crashTear:
		return fmt.Sprintf("TearAtSector(%d)", c.seed)
	case crashBlocks:
		return fmt.Sprintf("KeepRandomSubsetOfBlocks(%d, %d)", c.blockSize, c.seed)
	default:
		return "DropAll()"
	}
}

// ProcessCrash returns a new, independent MemFS holding what survives a
// crash of the process: everything written, synced or not, and every
// directory change, because the page cache survives. What was durable stays
// durable and what was not stays not, so a later PowerLoss of the image can
// still lose it. Files open in m are not open in the image, locks are
// released, a pending FailNextSync is not carried over, and the sync counters
// start at zero. The image keeps m's direct-I/O alignment. m is unchanged.
func (m *MemFS) ProcessCrash() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMem()
	out.dioAlign = m.dioAlign
	copies := map[*inode]*inode{}
	cp := func(ino *inode) *inode {
		if c, ok := copies[ino]; ok {
			return c
		}
		c := &inode{
			data:    slices.Clone(ino.data),
			durable: slices.Clone(ino.durable),
			lost:    slices.Clone(ino.lost),
		}
		copies[ino] = c
		return c
	}
	copyTree := func(dst, src map[string]map[string]*inode) {
		for d, ents := range src {
			c := make(map[string]*inode, len(ents))
			for name, ino := range ents {
				c[name] = cp(ino)
			}
			dst[d] = c
		}
	}
	copyTree(out.dirs, m.dirs)
	copyTree(out.durable, m.durable)
	for _, op := range m.pending {
		op.ino = cp(op.ino)
		out.pending = append(out.pending, op)
	}
	for d := range m.newDirs {
		out.newDirs[d] = true
	}
	return out
}

// PowerLoss returns a new, independent MemFS holding what a disk might
// contain after the power went: every durable byte and durable directory
// entry, plus the unsynced state that mode keeps. In the image everything is
// durable, no file is open and no lock is held; it keeps m's direct-I/O
// alignment. m is unchanged.
//
// [DropAll] and [KeepAll] are deterministic. In the random modes
// ([TearAtSector], [KeepRandomSubsetOfBlocks]), in addition to the per-file
// content choice:
//
//   - a file whose unsynced size differs from its durable size comes back at
//     either size, chosen at random; grown bytes that were not kept read as
//     zeros (an extension whose data did not reach the media);
//   - each pending directory change (create, rename, remove) is
//     independently kept or undone, and the kept ones are replayed in order
//     onto the durable entries, skipping any that no longer apply: a created
//     file may vanish, a removed file may come back with its own crash
//     content, a rename may be reverted, but a renamed file is never lost
//     from both names nor found under both;
//   - each directory made by MkdirAll whose parent was not synced since is
//     independently kept or lost, with everything under it.
//
// DropAll loses every such directory; KeepAll keeps them.
//
// Bytes lost to a failed sync ([MemFS.FailNextSync]) keep their durable
// content in every mode. PowerLoss panics if mode is
// KeepRandomSubsetOfBlocks with a non-positive block size.
func (m *MemFS) PowerLoss(mode CrashMode) *MemFS {
	if mode.kind == crashBlocks && mode.blockSize <= 0 {
		panic(fmt.Sprintf("vfs: %v: block size must be positive", mode))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := rand.New(rand.NewPCG(uint64(mode.seed), 0x6475726177616c)) // "durawal"

	// Directory entries: durable entries plus the kept pending changes.
	tree := make(map[string]map[string]*inode, len(m.durable))
	for d, ents := range m.durable {
		tree[d] = make(map[string]*inode, len(ents))
		for name, ino := range ents {
			tree[d][name] = ino
		}
	}
	for _, op := range m.pending {
		if mode.keeps(rng) {
			op.apply(tree)
		}
	}
	// Directories whose entry in the parent was never synced. A separate
	// generator, so that the content choices of a seed stay as they were.
	dirRng := rand.New(rand.NewPCG(uint64(mode.seed), 0x6d6b646972)) // "mkdir"
	newDirs := make([]string, 0, len(m.newDirs))
	for d := range m.newDirs {
		newDirs = append(newDirs, d)
	}
	slices.Sort(newDirs)
	for _, d := range newDirs {
		if mode.keeps(dirRng) {
			continue
		}
		for t := range tree {
			if t == d || strings.HasPrefix(t, d+"/") {
				delete(tree, t)
			}
		}
	}

	// File content, in sorted path order so that a seed replays.
	out := NewMem()
	out.dioAlign = m.dioAlign
	images := map[*inode]*inode{}
	dirs := make([]string, 0, len(tree))
	for d := range tree {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		ents := tree[d]
		names := make([]string, 0, len(ents))
		for name := range ents {
			names = append(names, name)
		}
		slices.Sort(names)
		dst := map[string]*inode{}
		dur := map[string]*inode{}
		for _, name := range names {
			ino := ents[name]
			img, ok := images[ino]
			if !ok {
				b := ino.crashContent(mode, rng)
				img = &inode{data: b, durable: slices.Clone(b)}
				images[ino] = img
			}
			dst[name] = img
			dur[name] = img
		}
		out.dirs[d] = dst
		out.durable[d] = dur
	}
	return out
}

// crashContent returns the inode's content after a power loss in mode.
func (ino *inode) crashContent(mode CrashMode, rng *rand.Rand) []byte {
	durable, target := ino.durable, ino.flushTarget()
	switch mode.kind {
	case crashDropAll:
		return slices.Clone(durable)
	case crashKeepAll:
		return target
	}
	n := max(len(durable), len(target))
	d, t := make([]byte, n), make([]byte, n) // both zero-extended to n
	copy(d, durable)
	copy(t, target)

	unit := SectorSize
	if mode.kind == crashBlocks {
		unit = mode.blockSize
	}
	var changed []int // start offsets of the units that differ
	for lo := 0; lo < n; lo += unit {
		hi := min(lo+unit, n)
		if !bytes.Equal(d[lo:hi], t[lo:hi]) {
			changed = append(changed, lo)
		}
	}
	var keep []int
	if mode.kind == crashTear {
		keep = changed[:rng.IntN(len(changed)+1)]
	} else {
		for _, lo := range changed {
			if rng.IntN(2) == 1 {
				keep = append(keep, lo)
			}
		}
	}
	for _, lo := range keep {
		hi := min(lo+unit, n)
		copy(d[lo:hi], t[lo:hi])
	}
	size := len(target)
	if len(durable) != len(target) && rng.IntN(2) == 0 {
		size = len(durable)
	}
	return d[:size:size]
}

// keeps decides whether an unsynced directory change survives the crash:
// always under KeepAll, never under DropAll, by a coin of rng under the
// random modes.
func (mode CrashMode) keeps(rng *rand.Rand) bool {
	switch mode.kind {
	case crashKeepAll:
		return true
	case crashTear, crashBlocks:
		return rng.IntN(2) == 1
	}
	return false
}
