// Package etcdraft keeps the state of an etcd raft node (go.etcd.io/raft/v3)
// on a durawal log: the raft.Storage the library reads from, and the one
// durable save per Ready that it requires of the application before any
// message of that Ready is sent.
//
// etcd's raft leaves storage to the application. etcd itself pairs its wal
// package (the durable record) with a raft.MemoryStorage (what raft reads);
// a Storage here does the same with a wal.Log: every Save appends the
// Ready's snapshot metadata, entries and hard state as records of one
// batch, made durable by one fdatasync (wal.Log.AppendBatchLSNs with
// wal.ForceSync), then applies them to the MemoryStorage it embeds. As
// etcd's wal does, a Save that raft.MustSync says needs no sync (only the
// commit index moved) is appended without one and becomes durable with the
// next synced write. Open replays the records into a fresh MemoryStorage.
//
// # Records
//
// Each record is one byte of kind and a protobuf message: 'E' a
// raftpb.Entry, 'H' a raftpb.HardState, 'R' the raftpb.SnapshotMetadata of
// a snapshot raft handed over (Save, ApplySnapshot), which replaces the
// whole log as MemoryStorage.ApplySnapshot does, 'S' that of a snapshot
// the application made (CreateSnapshot) or of the current one appended
// again (Compact), which keeps the entries after its index; the kind of a
// save's last record carries a mark. The log is append-only, as
// etcd's wal is: an entry at an index already in the log replaces that
// index and every later one when the records are replayed (raft's
// conflicting suffix), so no save rewrites earlier bytes. A save is
// atomic: replay applies a batch only once it has read its marked last
// record, and Open cuts off the records of a batch a crash tore
// (wal.Log.TruncateFrom), so a crash leaves the state before the save or
// after it, never entries without the hard state saved with them.
//
// Snapshot data lives in files of a directory beside the log ("snap"),
// written under a temporary name, synced and renamed before the record
// that names them. Compact drops the records no replay needs any more
// (whole segments, wal.Log.RemoveBefore) after appending the current
// snapshot metadata and hard state again, so a replay always finds them.
package etcdraft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Record kinds: the first byte of every record.
const (
	kindEntry     = 'E'
	kindHardState = 'H'
	kindSnapshot  = 'S'
	kindRestore   = 'R'
	// endOfBatch is set in the kind of a batch's last record: a batch is
	// replayed only if its last record was read (a crash tears a batch only
	// at its end, and Open then cuts the torn records off).
	endOfBatch = 0x80
)

// ErrCorrupt is matched by the error Open returns for a record this package
// did not write (an unknown kind, a message that does not decode, entries
// with a gap): the log itself is intact (wal verified every frame), but its
// contents are not a raft log.
var ErrCorrupt = errors.New("etcdraft: log is not a raft log")

// ErrFailed is matched by the error of every write (Save, ApplySnapshot,
// Append, SetHardState, CreateSnapshot, Compact) after a save that stopped
// partway: some of its records are in the log without the mark of the
// batch's end (wal.ErrNoSpace in the middle of a batch leaves the log usable,
// see wal.BatchError). A later batch would end them, and a replay would
// apply the failed save with it; so the Storage takes no more writes. Close
// it and Open it again: Open drops the unfinished records.
var ErrFailed = errors.New("etcdraft: an earlier save stopped partway; reopen the storage")

// Storage is a raft.Storage whose state survives crashes. Its read methods
// (Term, LastIndex, FirstIndex, Snapshot: the embedded MemoryStorage's;
// InitialState and Entries: its own, which check what MemoryStorage does
// not) are safe for concurrent use with each other and with Save, as raft
// requires. Save, CreateSnapshot, Compact and Close
// are serialized by the Storage.
type Storage struct {
	*raft.MemoryStorage

	dir string
	fs  vfs.FS
	log *wal.Log

	mu    sync.Mutex
	hs    *pb.HardState // the hard state saved last (empty if none)
	lsns  []wal.LSN     // lsns[i]: the LSN of the record of entry first+i
	first uint64        // index of lsns[0]
	// failed is set once a batch stopped partway (see ErrFailed).
	failed error
}

// Open opens or creates the storage in dir: the durawal log in dir/log
// (opts is passed to wal.Open; its Policy is always SyncNever, and every
// write raft needs durable before its messages go out asks for its sync
// with wal.ForceSync) and snapshot files
// in dir/snap. It replays the log into the MemoryStorage. Errors: those of
// wal.Open (wal.ErrCorrupt for a damaged log, see the wal package), ErrCorrupt
// for records that are not a raft log, and the filesystem's errors reading
// a snapshot file.
func Open(dir string, opts wal.Options) (*Storage, error) {
	opts.Policy = policy.SyncNever() // each append says whether it must be synced (wal.ForceSync)
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	l, err := wal.Open(filepath.Join(dir, "log"), opts) // creates dir, durably
	if err != nil {
		return nil, err
	}
	s := &Storage{MemoryStorage: raft.NewMemoryStorage(), dir: dir, fs: opts.FS, log: l}
	if err := s.fs.MkdirAll(filepath.Join(dir, "snap"), 0o755); err != nil {
		l.Close()
		return nil, fmt.Errorf("etcdraft: %w", err)
	}
	if err := s.fs.SyncDir(dir); err != nil {
		l.Close()
		return nil, fmt.Errorf("etcdraft: %w", err)
	}
	torn, err := s.replay()
	if err != nil {
		l.Close()
		return nil, err
	}
	if torn > 0 {
		// A save a crash cut short: never acknowledged. Drop its records,
		// so that none is replayed with a later batch's end.
		if err := l.TruncateFrom(torn); err != nil {
			l.Close()
			return nil, fmt.Errorf("etcdraft: dropping a torn save: %w", err)
		}
	}
	return s, nil
}

// replay rebuilds the MemoryStorage and the LSN index from the records, a
// batch at a time: the records of a batch are applied once its last one
// (kind with endOfBatch set) is read. It returns the LSN of the first
// record of a batch a crash tore (no last record), or 0.
func (s *Storage) replay() (torn wal.LSN, err error) {
	r, err := s.log.NewReader(s.log.FirstLSN())
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var (
		snap    *pb.SnapshotMetadata
		hs      *pb.HardState
		ents    []*pb.Entry
		lsns    []wal.LSN
		first   uint64 // index of ents[0]
		pending []decoded
	)
	apply := func(d decoded) error {
		switch {
		case d.entry != nil:
			e, lsn := d.entry, d.lsn
			i := e.GetIndex()
			if snap != nil && i <= snap.GetIndex() {
				return nil // covered by the snapshot
			}
			switch {
			case len(ents) == 0:
				first = i
			case i < first:
				ents, lsns, first = ents[:0], lsns[:0], i
			case i <= first+uint64(len(ents)):
				ents, lsns = ents[:i-first], lsns[:i-first] // a conflicting suffix is replaced
			default:
				return fmt.Errorf("%w: entry %d at LSN %d follows entry %d", ErrCorrupt, i, lsn, first+uint64(len(ents))-1)
			}
			ents, lsns = append(ents, e), append(lsns, lsn)
		case d.hs != nil:
			hs = d.hs
		case d.snap != nil:
			m := d.snap
			if snap != nil && m.GetIndex() < snap.GetIndex() {
				return nil // an older snapshot appended again
			}
			snap = m
			if d.restore {
				// raft replaced its log with the snapshot: entries saved
				// before it, even past its index, are gone (they may be of
				// an older term than the snapshot's).
				ents, lsns, first = ents[:0], lsns[:0], 0
				return nil
			}
			// Entries up to the snapshot are covered by it.
			if n := len(ents); n > 0 && first <= m.GetIndex() {
				k := min(uint64(n), m.GetIndex()-first+1)
				ents, lsns, first = ents[k:], lsns[k:], first+k
			}
		}
		return nil
	}
	for {
		lsn, rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		d, last, err := decode(lsn, rec)
		if err != nil {
			return 0, err
		}
		pending = append(pending, d)
		if !last {
			continue
		}
		for _, d := range pending {
			if err := apply(d); err != nil {
				return 0, err
			}
		}
		pending = pending[:0]
	}
	if len(pending) > 0 {
		torn = pending[0].lsn
	}
	if snap != nil {
		data, err := s.readSnapFile(snap)
		if err != nil {
			return 0, fmt.Errorf("etcdraft: reading the snapshot at index %d: %w", snap.GetIndex(), err)
		}
		if err := s.MemoryStorage.ApplySnapshot(&pb.Snapshot{Metadata: snap, Data: data}); err != nil {
			return 0, err
		}
		if len(ents) > 0 && first != snap.GetIndex()+1 {
			return 0, fmt.Errorf("%w: entries resume at %d after the snapshot at %d", ErrCorrupt, first, snap.GetIndex())
		}
	}
	if len(ents) > 0 {
		if snap == nil && first != 1 {
			return 0, fmt.Errorf("%w: entries start at index %d with no snapshot before them", ErrCorrupt, first)
		}
		if err := s.MemoryStorage.Append(ents); err != nil {
			return 0, err
		}
	}
	s.hs = &pb.HardState{}
	if hs != nil {
		if err := s.MemoryStorage.SetHardState(hs); err != nil {
			return 0, err
		}
		s.hs = hs
	}
	s.lsns, s.first = lsns, first
	return torn, nil
}

// decoded is one record, decoded: exactly one of its pointers is set.
type decoded struct {
	lsn     wal.LSN
	restore bool // snap replaces the log (kind 'R')
	entry   *pb.Entry
	hs      *pb.HardState
	snap    *pb.SnapshotMetadata
}

// decode decodes the record at lsn and reports whether it is the last of
// its batch.
func decode(lsn wal.LSN, rec []byte) (d decoded, last bool, err error) {
	d.lsn = lsn
	if len(rec) == 0 {
		return d, false, fmt.Errorf("%w: empty record at LSN %d", ErrCorrupt, lsn)
	}
	var m proto.Message
	switch rec[0] &^ endOfBatch {
	case kindEntry:
		d.entry = new(pb.Entry)
		m = d.entry
	case kindHardState:
		d.hs = new(pb.HardState)
		m = d.hs
	case kindSnapshot, kindRestore:
		d.snap = new(pb.SnapshotMetadata)
		d.restore = rec[0]&^endOfBatch == kindRestore
		m = d.snap
	default:
		return d, false, fmt.Errorf("%w: record of kind %q at LSN %d", ErrCorrupt, rec[0], lsn)
	}
	if err := proto.Unmarshal(rec[1:], m); err != nil {
		return d, false, fmt.Errorf("%w: record of kind %q at LSN %d: %v", ErrCorrupt, rec[0]&^endOfBatch, lsn, err)
	}
	return d, rec[0]&endOfBatch != 0, nil
}

// appendBatch appends recs as one batch, the last marked as such, made
// durable by one sync if sync is set, and returns their LSNs.
// After a batch that stopped partway, it and every later call return an
// error matching ErrFailed. s.mu is held.
func (s *Storage) appendBatch(recs [][]byte, sync bool) ([]wal.LSN, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	recs[len(recs)-1][0] |= endOfBatch
	lsns := make([]wal.LSN, len(recs))
	var opts []wal.AppendOption
	if sync {
		opts = append(opts, wal.ForceSync)
	}
	_, err := s.log.AppendBatchLSNs(context.Background(), recs, lsns, opts...)
	if be := (*wal.BatchError)(nil); errors.As(err, &be) && be.Appended > 0 {
		s.failed = fmt.Errorf("%w: %d of %d records appended: %w", ErrFailed, be.Appended, len(recs), err)
		return nil, s.failed
	}
	return lsns, err
}

// InitialState returns the hard state saved last and the configuration of
// the current snapshot. Unlike MemoryStorage's (which reads without its
// lock), it is safe for concurrent use with Save and the other methods.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	hs := proto.CloneOf(s.hs)
	s.mu.Unlock()
	snap, err := s.MemoryStorage.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	cs := snap.GetMetadata().GetConfState()
	if cs == nil {
		cs = &pb.ConfState{}
	}
	return hs, proto.CloneOf(cs), nil
}

// Entries returns the entries in [lo, hi), at most maxSize bytes of them
// but at least one, as MemoryStorage.Entries does, except for hi beyond
// LastIndex()+1 or lo above hi: an error matching raft.ErrUnavailable
// where MemoryStorage panics (raft itself never asks for either). A Save that cuts a conflicting
// suffix while Entries runs can still shrink the log between the check and
// the read; raft never reads past a suffix it is replacing.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	if lo > hi {
		return nil, fmt.Errorf("etcdraft: entries [%d, %d): lo above hi: %w", lo, hi, raft.ErrUnavailable)
	}
	if last, _ := s.MemoryStorage.LastIndex(); hi > last+1 {
		return nil, fmt.Errorf("etcdraft: entries [%d, %d) past the last index %d: %w", lo, hi, last, raft.ErrUnavailable)
	}
	return s.MemoryStorage.Entries(lo, hi, maxSize)
}

// Save makes one Ready durable, as raft requires before any of the Ready's
// messages is sent: snap (if not empty; its data first, in a synced file),
// then entries (replacing any conflicting suffix), then hs (if not empty),
// appended as one batch of records and made durable by one fdatasync, and
// applied to the MemoryStorage only then. A save that raft.MustSync says
// needs no sync (no snapshot, no entries, the same term and vote: only the
// commit index moved) is appended without one, as etcd's wal does; it is
// durable once a later write is synced, and a crash before that restores
// the previous commit index, which raft accepts. Errors: those of
// wal.Log.AppendBatchContext (after a failed write or sync the log is
// poisoned: reopen the Storage), ErrFailed once a save stopped partway
// (wal.ErrNoSpace in the middle of its batch), the filesystem's writing a
// snapshot file, and raft.ErrSnapOutOfDate for a snapshot older than the
// one kept.
func (s *Storage) Save(hs *pb.HardState, entries []*pb.Entry, snap *pb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	withSnap := snap != nil && snap.GetMetadata() != nil && (snap.GetMetadata().GetIndex() > 0 || snap.GetMetadata().GetConfState() != nil)
	last, _ := s.MemoryStorage.LastIndex() // the last index once snap is applied
	if withSnap {
		last = snap.GetMetadata().GetIndex()
	}
	if err := checkEntries(entries, last); err != nil {
		return err
	}
	if len(entries) > 0 {
		last = entries[len(entries)-1].GetIndex() // a conflicting suffix may shorten the log
	}
	var recs [][]byte
	if withSnap {
		// As MemoryStorage: a snapshot of index 0 carries only a
		// configuration (a bootstrap), and is never out of date.
		if cur, _ := s.MemoryStorage.Snapshot(); cur.GetMetadata().GetIndex() != 0 && cur.GetMetadata().GetIndex() >= snap.GetMetadata().GetIndex() {
			return raft.ErrSnapOutOfDate
		}
		if err := s.writeSnapFile(snap); err != nil {
			return err
		}
		rec, err := record(kindRestore, snap.GetMetadata())
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	for _, e := range entries {
		rec, err := record(kindEntry, e)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	withHS := hs != nil && !raft.IsEmptyHardState(hs)
	if withHS {
		// raft refuses, at the next start, a commit index past the log's
		// end ("out of range"): refuse it now, before it is durable.
		if hs.GetCommit() > last {
			return fmt.Errorf("etcdraft: hard state commits index %d past the last index %d: %w", hs.GetCommit(), last, raft.ErrUnavailable)
		}
		rec, err := record(kindHardState, hs)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return nil
	}
	prev := s.hs
	if hs == nil {
		hs = prev
	}
	lsns, err := s.appendBatch(recs, withSnap || raft.MustSync(hs, prev, len(entries)))
	if err != nil {
		return fmt.Errorf("etcdraft: saving: %w", err)
	}
	// Durable: now raft may read it.
	k := 0
	if withSnap {
		if err := s.MemoryStorage.ApplySnapshot(snap); err != nil {
			return err
		}
		s.lsns, s.first = s.lsns[:0], snap.GetMetadata().GetIndex()+1
		k = 1
		s.removeOldSnaps(snap.GetMetadata())
	}
	if len(entries) > 0 {
		if err := s.MemoryStorage.Append(entries); err != nil {
			return err
		}
		fi, _ := s.MemoryStorage.FirstIndex()
		for j, e := range entries {
			i := e.GetIndex()
			if i < fi {
				continue // below the snapshot: MemoryStorage dropped it too
			}
			if len(s.lsns) == 0 || i < s.first || i-s.first > uint64(len(s.lsns)) {
				s.lsns, s.first = s.lsns[:0], i
			}
			s.lsns = append(s.lsns[:i-s.first], lsns[k+j])
		}
	}
	if withHS {
		if err := s.MemoryStorage.SetHardState(hs); err != nil {
			return err
		}
		s.hs = proto.CloneOf(hs)
	}
	return nil
}

// checkEntries refuses entries raft would never hand over, which
// MemoryStorage.Append would panic on: entries not at consecutive indexes,
// or starting past the entry after last (the last index once the save's
// snapshot, if any, is applied), or a nil entry or one at index 0. The
// error matches raft.ErrUnavailable.
func checkEntries(entries []*pb.Entry, last uint64) error {
	if len(entries) == 0 {
		return nil
	}
	for i, e := range entries {
		if e == nil || e.GetIndex() == 0 {
			return fmt.Errorf("etcdraft: entry %d of %d is nil or at index 0 (raft's indexes start at 1): %w", i, len(entries), raft.ErrUnavailable)
		}
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].GetIndex() != entries[i-1].GetIndex()+1 {
			return fmt.Errorf("etcdraft: entry %d follows entry %d: %w", entries[i].GetIndex(), entries[i-1].GetIndex(), raft.ErrUnavailable)
		}
	}
	if entries[0].GetIndex() > last+1 {
		return fmt.Errorf("etcdraft: entries start at %d after the last index %d: %w", entries[0].GetIndex(), last, raft.ErrUnavailable)
	}
	return nil
}

// ApplySnapshot saves snap durably and makes it the Storage's state (Save
// with only a snapshot). A snapshot of index 0 carries only a configuration
// (a bootstrap). Errors: raft.ErrSnapOutOfDate, and those of Save.
func (s *Storage) ApplySnapshot(snap *pb.Snapshot) error { return s.Save(nil, nil, snap) }

// Append saves entries durably, replacing any conflicting suffix (Save
// with only entries). Errors: those of Save.
func (s *Storage) Append(entries []*pb.Entry) error { return s.Save(nil, entries, nil) }

// SetHardState saves st durably (Save with only a hard state). Errors:
// those of Save.
func (s *Storage) SetHardState(st *pb.HardState) error { return s.Save(st, nil, nil) }

// CreateSnapshot makes a snapshot at index i (at most the last index) with
// the configuration cs and the application's state data, durably: data in a
// synced file, then a record of its metadata. raft then serves it to
// followers that need entries before the first index. Errors:
// raft.ErrSnapOutOfDate for i at or below the current snapshot's index,
// raft.ErrUnavailable for i beyond the last index, and those of Save.
func (s *Storage) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return nil, s.failed
	}
	if cur, _ := s.MemoryStorage.Snapshot(); i <= cur.GetMetadata().GetIndex() {
		return nil, raft.ErrSnapOutOfDate
	}
	if last, _ := s.MemoryStorage.LastIndex(); i > last {
		return nil, raft.ErrUnavailable
	}
	term, err := s.MemoryStorage.Term(i)
	if err != nil {
		return nil, err
	}
	snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: proto.Uint64(i), Term: proto.Uint64(term), ConfState: cs}}
	if err := s.writeSnapFile(snap); err != nil {
		return nil, err
	}
	rec, err := record(kindSnapshot, snap.GetMetadata())
	if err != nil {
		return nil, err
	}
	if _, err := s.appendBatch([][]byte{rec}, true); err != nil {
		return nil, fmt.Errorf("etcdraft: saving the snapshot: %w", err)
	}
	got, err := s.MemoryStorage.CreateSnapshot(i, cs, data)
	if err != nil {
		return nil, err
	}
	s.removeOldSnaps(snap.GetMetadata())
	return got, nil
}

// Compact discards the entries before index i, which must be at most the
// index of the current snapshot (CreateSnapshot first): raft then sends the
// snapshot to a follower that needs them. The records no replay needs any
// more are removed with their segments (wal.Log.RemoveBefore), after the
// snapshot metadata and hard state are appended again so that the oldest
// record kept is never needed for them. Errors: raft.ErrCompacted for i at
// or below the first index minus one, raft.ErrUnavailable for i above the
// snapshot's index, and the log's.
func (s *Storage) Compact(i uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	snap, _ := s.MemoryStorage.Snapshot()
	if i > snap.GetMetadata().GetIndex() {
		return fmt.Errorf("etcdraft: compact to %d beyond the snapshot at %d: %w", i, snap.GetMetadata().GetIndex(), raft.ErrUnavailable)
	}
	if err := s.MemoryStorage.Compact(i); err != nil {
		return err
	}
	var recs [][]byte
	rec, err := record(kindSnapshot, snap.GetMetadata())
	if err != nil {
		return err
	}
	recs = append(recs, rec)
	hs := s.hs
	if !raft.IsEmptyHardState(hs) {
		rec, err := record(kindHardState, hs)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	lsns, err := s.appendBatch(recs, true)
	if err != nil {
		return fmt.Errorf("etcdraft: compacting: %w", err)
	}
	// Replay needs the entries after the snapshot and these records.
	keep := lsns[0]
	si := snap.GetMetadata().GetIndex()
	if si+1 >= s.first && si+1-s.first < uint64(len(s.lsns)) {
		keep = min(keep, s.lsns[si+1-s.first])
	}
	if si+1 > s.first {
		drop := min(si+1-s.first, uint64(len(s.lsns)))
		s.lsns, s.first = s.lsns[drop:], s.first+drop
	}
	if _, err := s.log.RemoveBefore(keep); err != nil {
		return fmt.Errorf("etcdraft: compacting: %w", err)
	}
	return nil
}

// Close closes the log. The Storage must not be used after.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Close()
}

// Log returns the durawal log under the Storage, for its Stats.
func (s *Storage) Log() *wal.Log { return s.log }

func record(kind byte, m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("etcdraft: encoding: %w", err)
	}
	return append([]byte{kind}, b...), nil
}

func (s *Storage) snapPath(term, index uint64) string {
	return filepath.Join(s.dir, "snap", fmt.Sprintf("%016x-%016x.snap", term, index))
}

// writeSnapFile writes snap's data under its name: a temporary file,
// synced, renamed, the directory synced.
func (s *Storage) writeSnapFile(snap *pb.Snapshot) error {
	m := snap.GetMetadata()
	path := s.snapPath(m.GetTerm(), m.GetIndex())
	tmp := path + ".tmp"
	s.fs.Remove(tmp) // a leftover of a crash
	f, err := s.fs.Create(tmp, vfs.Fdatasync)
	if err != nil {
		return fmt.Errorf("etcdraft: snapshot file: %w", err)
	}
	if _, err := f.WriteAt(bytes.Clone(snap.GetData()), 0); err != nil { // a file may keep or scramble what it is given
		f.Close()
		return fmt.Errorf("etcdraft: snapshot file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("etcdraft: snapshot file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("etcdraft: snapshot file: %w", err)
	}
	if err := s.fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("etcdraft: snapshot file: %w", err)
	}
	if err := s.fs.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("etcdraft: snapshot directory: %w", err)
	}
	return nil
}

// readSnapFile reads the data of the snapshot m names.
func (s *Storage) readSnapFile(m *pb.SnapshotMetadata) ([]byte, error) {
	f, err := s.fs.Open(s.snapPath(m.GetTerm(), m.GetIndex()))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// removeOldSnaps removes the snapshot files other than m's, once m's record
// is durable. A failure leaves a file behind; nothing reads it.
func (s *Storage) removeOldSnaps(m *pb.SnapshotMetadata) {
	dir := filepath.Join(s.dir, "snap")
	names, _ := s.fs.List(dir)
	keep := filepath.Base(s.snapPath(m.GetTerm(), m.GetIndex()))
	for _, n := range names {
		if n != keep {
			s.fs.Remove(filepath.Join(dir, n))
		}
	}
}
