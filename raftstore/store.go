// Package raftstore is a [raft.LogStore] and a [raft.StableStore] for
// github.com/hashicorp/raft on a durawal write-ahead log ([wal.Log]) that
// syncs every commit: one Store is all the durable state a Raft node needs
// besides its snapshots, passed as both stores to raft.NewRaft.
//
// # Layout
//
// A Store lives in a directory holding the log (subdirectory "wal"), the
// file "first-index", a durable note of the first Raft index kept (8 bytes
// little endian and their xxhash64), and the file "stable", the
// StableStore's keys and values (current term, last vote) with their
// xxhash64. Both files are replaced whole, atomically: a temporary file,
// synced, renamed over the old one, and the directory synced. Each Raft
// entry is one log record, every field of [raft.Log] kept (little endian):
//
//	offset  size  field
//	0       8     index
//	8       8     term
//	16      1     type (raft.LogType)
//	17      1     flags (1: appended-at is set; a zero time.Time is kept as zero)
//	18      8     appended-at, Unix nanoseconds (monotonic reading and location dropped)
//	26      4     length of the extensions, e
//	30      e     extensions, then the data to the end of the record
//
// StoreLogs is one [wal.Log.AppendBatchLSNs] and one fdatasync; GetLog is
// one [wal.Log.ReadRecord] (two reads).
//
// # Index to LSN
//
// Raft indexes are dense and entries are stored in index order (the Store
// is a [raft.MonotonicLogStore]), so the Store keeps in memory the LSN of
// every index from the first kept: a slice, 8 bytes per entry, rebuilt at
// Open by reading the log once from its first LSN. Records whose index is
// below the noted first index are entries a prefix DeleteRange dropped
// that still share a segment with kept ones ([wal.Log.RemoveBefore] removes
// whole segments only): they are skipped.
//
// # Deletes
//
// DeleteRange of a prefix writes the new first index to "first-index"
// (temporary file, sync, rename, directory sync), then removes the
// segments below it; of a suffix it cuts the log ([wal.Log.TruncateFrom],
// crash-safe); of the whole log it cuts everything. A range in the middle
// is an error, as in hashicorp/raft-wal: Raft never asks for one.
package raftstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/hashicorp/raft"
)

// Errors returned by a Store; match them with errors.Is. Missing entries
// are [raft.ErrLogNotFound], as raft expects.
var (
	// ErrNotContiguous is returned by StoreLogs for entries that do not
	// follow the last stored index one by one (the Store is monotonic).
	ErrNotContiguous = errors.New("raftstore: entries not contiguous with the log")
	// ErrMiddleRange is returned by DeleteRange for a range that touches
	// neither end of the log.
	ErrMiddleRange = errors.New("raftstore: cannot delete a range in the middle of the log")
	// ErrCorruptEntry is returned when a record does not decode as a Raft
	// entry, or holds another index than the one it was stored for.
	ErrCorruptEntry = errors.New("raftstore: corrupt entry")
	// ErrInvalidEntry is returned by StoreLogs for a nil entry; nothing
	// is stored.
	ErrInvalidEntry = errors.New("raftstore: invalid entry")
)

const (
	walDir         = "wal"
	firstIndexFile = "first-index"
	headerSize     = 30 // index 8, term 8, type 1, flags 1, appended-at 8, extensions length 4
	flagAppendedAt = 1
)

// Store is a raft.LogStore and raft.MonotonicLogStore on a wal.Log under
// policy.SyncEveryCommit, and a raft.StableStore in a file beside it. It is
// safe for concurrent use: Raft reads entries (GetLog) from its replication
// goroutines while it stores and deletes.
type Store struct {
	log *wal.Log
	fs  vfs.FS
	dir string
	wmu sync.Mutex // serialises StoreLogs and DeleteRange
	// cut is held shared by GetLog from its lookup of an LSN to the end of
	// its read, and exclusively by a DeleteRange that cuts the log's end:
	// an LSN looked up is never read after a cut has made it the LSN of
	// another record, or of none (the middle of a newer one).
	cut  sync.RWMutex
	mu   sync.RWMutex
	base uint64    // index of lsns[0]; meaningful when len(lsns) > 0
	lsns []wal.LSN // LSN of each index from base on
	// noted is the first index recorded in "first-index": records below
	// it are dropped entries. Guarded by wmu.
	noted uint64

	// smu guards kv, the StableStore's keys and values as the stable file
	// holds them.
	smu sync.Mutex
	kv  map[string][]byte

	// Scratch for StoreLogs, guarded by wmu.
	recs  [][]byte
	out   []wal.LSN
	arena []byte
}

// Open opens (creating if needed) the Store in dir. opts configures the log;
// its Policy is replaced by policy.SyncEveryCommit (Raft requires every
// stored entry to be durable when StoreLogs returns), and opts.FS (default
// the OS) also holds the first-index note and the stable file. Errors are
// those of wal.Open, ErrCorruptEntry for a record that is not an entry,
// wal.ErrCorrupt for a damaged note or stable file, and the filesystem's.
func Open(dir string, opts wal.Options) (*Store, error) {
	opts.Policy = policy.SyncEveryCommit()
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	s := &Store{fs: opts.FS, dir: dir}
	l, err := wal.Open(filepath.Join(dir, walDir), opts) // creates dir too, durably
	if err != nil {
		return nil, err
	}
	s.log = l
	if s.noted, err = s.readNote(); err != nil {
		l.Close()
		return nil, err
	}
	if err := s.readStable(); err != nil {
		l.Close()
		return nil, err
	}
	if err := s.rebuild(); err != nil {
		l.Close()
		return nil, err
	}
	return s, nil
}

// rebuild reads the log once and records the LSN of every kept index.
func (s *Store) rebuild() error {
	r, err := s.log.NewReader(s.log.FirstLSN())
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if len(rec) < headerSize {
			return fmt.Errorf("%w: record at LSN %d is %d bytes", ErrCorruptEntry, lsn, len(rec))
		}
		idx := binary.LittleEndian.Uint64(rec[0:8])
		if idx < s.noted {
			continue
		}
		if len(s.lsns) > 0 && idx != s.base+uint64(len(s.lsns)) {
			return fmt.Errorf("%w: index %d at LSN %d follows index %d", ErrCorruptEntry, idx, lsn, s.base+uint64(len(s.lsns))-1)
		}
		if len(s.lsns) == 0 {
			s.base = idx
		}
		s.lsns = append(s.lsns, lsn)
	}
}

// Close closes the log. Every stored entry is durable already.
func (s *Store) Close() error { return s.log.Close() }

// Log returns the underlying log, for its statistics and LSNs. Do not
// append to it, truncate it or remove from it: the Store's index map would
// no longer match.
func (s *Store) Log() *wal.Log { return s.log }

// IsMonotonic reports true: StoreLogs refuses gaps, so Raft removes every
// entry after restoring a snapshot instead of leaving a gap.
func (s *Store) IsMonotonic() bool { return true }

// FirstIndex returns the first index stored, 0 if none.
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.lsns) == 0 {
		return 0, nil
	}
	return s.base, nil
}

// LastIndex returns the last index stored, 0 if none.
func (s *Store) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.lsns) == 0 {
		return 0, nil
	}
	return s.base + uint64(len(s.lsns)) - 1, nil
}

// GetLog reads the entry at index into log, with one wal.Log.ReadRecord.
// log.Data and log.Extensions are fresh slices the caller may keep. A
// missing index is raft.ErrLogNotFound, also for one deleted while the call
// ran; an index deleted and stored again meanwhile reads as one of the two
// entries. ErrCorruptEntry (or wal.ErrCorrupt) means the log is damaged,
// never that it changed under the call: a GetLog holds off a suffix
// DeleteRange until its read is done.
func (s *Store) GetLog(index uint64, log *raft.Log) error {
	s.cut.RLock()
	defer s.cut.RUnlock()
	s.mu.RLock()
	if len(s.lsns) == 0 || index < s.base || index-s.base >= uint64(len(s.lsns)) {
		s.mu.RUnlock()
		return raft.ErrLogNotFound
	}
	lsn := s.lsns[index-s.base]
	s.mu.RUnlock()
	// No cut can run until the read is done, so lsn is the LSN of the
	// entry at index unless a prefix DeleteRange removes its segment
	// meanwhile: wal.ErrNotFound.
	rec, err := s.log.ReadRecord(lsn, nil)
	if err != nil {
		if errors.Is(err, wal.ErrNotFound) {
			return raft.ErrLogNotFound // deleted meanwhile
		}
		return err
	}
	if err := decode(rec, log); err != nil {
		return fmt.Errorf("%w: at LSN %d: %w", ErrCorruptEntry, lsn, err)
	}
	if log.Index != index {
		return fmt.Errorf("%w: LSN %d holds index %d, not %d", ErrCorruptEntry, lsn, log.Index, index)
	}
	return nil
}

// StoreLog stores one entry (StoreLogs of one).
func (s *Store) StoreLog(log *raft.Log) error { return s.StoreLogs([]*raft.Log{log}) }

// StoreLogs appends logs as one batch, durable when it returns nil. The
// first must follow the last stored index (any index on an empty Store),
// the others follow one another; otherwise ErrNotContiguous and nothing is
// stored (also after index math.MaxUint64, which nothing follows). A nil
// entry is ErrInvalidEntry. On a wal error (poisoned, no space) some may
// have been stored: Raft treats the error as fatal for this store.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	n, next := len(s.lsns), s.base+uint64(len(s.lsns))
	s.mu.RUnlock()
	for i, lg := range logs {
		if lg == nil {
			return fmt.Errorf("%w: entry %d of %d is nil", ErrInvalidEntry, i, len(logs))
		}
		if n > 0 || i > 0 {
			if next == 0 { // wrapped: the entry before is math.MaxUint64
				return fmt.Errorf("%w: index %d after index %d, the last there is", ErrNotContiguous, lg.Index, uint64(math.MaxUint64))
			}
			if lg.Index != next {
				return fmt.Errorf("%w: index %d where %d is expected", ErrNotContiguous, lg.Index, next)
			}
		}
		next = lg.Index + 1
	}
	if n == 0 && logs[0].Index < s.noted {
		// Entries below the noted first index would be skipped at Open:
		// lower the note first.
		if err := s.writeNote(logs[0].Index); err != nil {
			return err
		}
	}
	size := 0
	for _, lg := range logs {
		size += headerSize + len(lg.Extensions) + len(lg.Data)
	}
	if cap(s.arena) < size {
		s.arena = make([]byte, size)
	}
	arena := s.arena[:size]
	s.recs = s.recs[:0]
	for _, lg := range logs {
		m := encode(arena, lg)
		s.recs = append(s.recs, arena[:m])
		arena = arena[m:]
	}
	if cap(s.out) < len(logs) {
		s.out = make([]wal.LSN, len(logs))
	}
	out := s.out[:len(logs)]
	_, err := s.log.AppendBatchLSNs(context.Background(), s.recs, out)
	var be *wal.BatchError
	stored := len(logs)
	if err != nil {
		stored = 0
		if errors.As(err, &be) {
			stored = be.Appended
		}
	}
	s.mu.Lock()
	if len(s.lsns) == 0 && stored > 0 {
		s.base = logs[0].Index
	}
	s.lsns = append(s.lsns, out[:stored]...)
	s.mu.Unlock()
	return err
}

// DeleteRange deletes the entries min to max, inclusive: a prefix (Raft
// compacting after a snapshot), a suffix (a follower's conflicting
// entries), or everything (after restoring a snapshot). A range in the
// middle is ErrMiddleRange; one outside the stored entries deletes
// nothing.
func (s *Store) DeleteRange(min, max uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.RLock()
	n := uint64(len(s.lsns))
	first, last := s.base, s.base+n-1
	s.mu.RUnlock()
	if n == 0 || min > max || max < first || min > last {
		return nil
	}
	switch {
	case min <= first && max >= last: // everything
		s.cut.Lock() // no GetLog reads an LSN the cut may reuse
		defer s.cut.Unlock()
		if err := s.log.TruncateFrom(s.log.FirstLSN()); err != nil {
			return err
		}
		s.mu.Lock()
		s.lsns = s.lsns[:0]
		s.mu.Unlock()
		return nil
	case min <= first: // a prefix
		if err := s.writeNote(max + 1); err != nil {
			return err
		}
		s.mu.Lock()
		keep := max + 1 - s.base
		s.lsns = append([]wal.LSN(nil), s.lsns[keep:]...) // release the dropped part
		s.base = max + 1
		at := s.lsns[0]
		s.mu.Unlock()
		_, err := s.log.RemoveBefore(at)
		return err
	case max >= last: // a suffix
		s.cut.Lock()
		defer s.cut.Unlock()
		s.mu.RLock()
		at := s.lsns[min-s.base]
		s.mu.RUnlock()
		if err := s.log.TruncateFrom(at); err != nil {
			return err
		}
		s.mu.Lock()
		s.lsns = s.lsns[:min-s.base]
		s.mu.Unlock()
		return nil
	}
	return fmt.Errorf("%w: %d to %d of %d to %d", ErrMiddleRange, min, max, first, last)
}

// encode writes the entry lg into dst and returns its size:
//
//	[0:8)   index
//	[8:16)  term
//	[16]    type
//	[17]    flags (1: appended-at is set)
//	[18:26) appended-at, Unix nanoseconds
//	[26:30) length of the extensions
//	[30:..) extensions, then data
func encode(dst []byte, lg *raft.Log) int {
	binary.LittleEndian.PutUint64(dst[0:8], lg.Index)
	binary.LittleEndian.PutUint64(dst[8:16], lg.Term)
	dst[16] = byte(lg.Type)
	dst[17] = 0
	var ns int64
	if !lg.AppendedAt.IsZero() {
		dst[17] = flagAppendedAt
		ns = lg.AppendedAt.UnixNano()
	}
	binary.LittleEndian.PutUint64(dst[18:26], uint64(ns))
	binary.LittleEndian.PutUint32(dst[26:30], uint32(len(lg.Extensions)))
	n := headerSize
	n += copy(dst[n:], lg.Extensions)
	n += copy(dst[n:], lg.Data)
	return n
}

// decode fills lg from rec (Data and Extensions alias rec).
func decode(rec []byte, lg *raft.Log) error {
	if len(rec) < headerSize {
		return fmt.Errorf("%d bytes, shorter than the %d-byte header", len(rec), headerSize)
	}
	ext := int(binary.LittleEndian.Uint32(rec[26:30]))
	if ext > len(rec)-headerSize {
		return fmt.Errorf("extensions of %d bytes in a %d-byte record", ext, len(rec))
	}
	lg.Index = binary.LittleEndian.Uint64(rec[0:8])
	lg.Term = binary.LittleEndian.Uint64(rec[8:16])
	lg.Type = raft.LogType(rec[16])
	lg.AppendedAt = time.Time{}
	if rec[17]&flagAppendedAt != 0 {
		lg.AppendedAt = time.Unix(0, int64(binary.LittleEndian.Uint64(rec[18:26])))
	}
	lg.Extensions = nil
	if ext > 0 {
		lg.Extensions = rec[headerSize : headerSize+ext : headerSize+ext]
	}
	lg.Data = nil
	if len(rec) > headerSize+ext {
		lg.Data = rec[headerSize+ext:]
	}
	return nil
}

// readNote returns the first index recorded in "first-index", 0 if none.
func (s *Store) readNote() (uint64, error) {
	f, err := s.fs.Open(filepath.Join(s.dir, firstIndexFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	defer f.Close()
	b := make([]byte, 16)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return 0, fmt.Errorf("raftstore: reading %s: %d of 16 bytes: %v", firstIndexFile, n, err)
	}
	if xxhash.Sum64(b[:8]) != binary.LittleEndian.Uint64(b[8:]) {
		return 0, fmt.Errorf("%w: %s checksum mismatch", wal.ErrCorrupt, firstIndexFile)
	}
	return binary.LittleEndian.Uint64(b[:8]), nil
}

// writeNote makes index the recorded first index (writeFile).
func (s *Store) writeNote(index uint64) error {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b[:8], index)
	binary.LittleEndian.PutUint64(b[8:], xxhash.Sum64(b[:8]))
	if err := s.writeFile(firstIndexFile, b); err != nil {
		return err
	}
	s.noted = index
	return nil
}

var (
	_ raft.LogStore          = (*Store)(nil)
	_ raft.MonotonicLogStore = (*Store)(nil)
)
