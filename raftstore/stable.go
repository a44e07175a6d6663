package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/hashicorp/raft"
)

// stableFile holds the StableStore's keys and values, rewritten whole by
// every Set:
//
//	for each key, in byte order:
//	  4  key length k (little endian)
//	  4  value length v
//	  k  key
//	  v  value
//	8  xxhash64 of everything before it
//
// It is replaced atomically (temporary file, sync, rename, directory sync),
// so a crash at any point leaves the old version or the new one whole.
const stableFile = "stable"

// Set stores val under key, durably when it returns nil (raft.StableStore).
// It rewrites the Store's stable file: one small write and three syncs (the
// file, then the directory after the rename), a cost Raft pays only when
// its term or vote changes. val is copied. A key or value longer than
// math.MaxUint32 bytes is ErrInvalidEntry; a filesystem error leaves the
// previous value in place (in memory and on disk) and is returned wrapped.
// Safe for concurrent use.
func (s *Store) Set(key, val []byte) error {
	if uint64(len(key)) > math.MaxUint32 || uint64(len(val)) > math.MaxUint32 {
		return fmt.Errorf("%w: key of %d bytes, value of %d", ErrInvalidEntry, len(key), len(val))
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	next := make(map[string][]byte, len(s.kv)+1)
	for k, v := range s.kv {
		next[k] = v
	}
	next[string(key)] = slices.Clone(val)
	if next[string(key)] == nil {
		next[string(key)] = []byte{}
	}
	if err := s.writeFile(stableFile, encodeStable(next)); err != nil {
		return err
	}
	s.kv = next
	return nil
}

// Get returns a copy of the value stored under key, or an empty (nil) slice
// and a nil error if key was never set, as raft.StableStore specifies. Safe
// for concurrent use.
func (s *Store) Get(key []byte) ([]byte, error) {
	s.smu.Lock()
	defer s.smu.Unlock()
	return slices.Clone(s.kv[string(key)]), nil
}

// SetUint64 stores val under key as 8 bytes little endian (Set).
func (s *Store) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], val)
	return s.Set(key, b[:])
}

// GetUint64 returns the value SetUint64 stored under key, 0 if key was never
// set. A value of another length than 8 bytes (one stored by Set) is
// ErrInvalidEntry. Safe for concurrent use.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	s.smu.Lock()
	defer s.smu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: key %q holds %d bytes, not a uint64", ErrInvalidEntry, key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

// encodeStable lays kv out as the stable file holds it.
func encodeStable(kv map[string][]byte) []byte {
	keys := make([]string, 0, len(kv))
	size := 8
	for k, v := range kv {
		keys = append(keys, k)
		size += 8 + len(k) + len(v)
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, k...)
		b = append(b, kv[k]...)
	}
	return binary.LittleEndian.AppendUint64(b, xxhash.Sum64(b))
}

// decodeStable parses a stable file; damage is wal.ErrCorrupt.
func decodeStable(b []byte) (map[string][]byte, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: raftstore %s file: %s", wal.ErrCorrupt, stableFile, why)
	}
	if len(b) < 8 {
		return nil, bad(fmt.Sprintf("%d bytes, shorter than its checksum", len(b)))
	}
	body := b[:len(b)-8]
	if xxhash.Sum64(body) != binary.LittleEndian.Uint64(b[len(b)-8:]) {
		return nil, bad("checksum mismatch")
	}
	kv := map[string][]byte{}
	for len(body) > 0 {
		if len(body) < 8 {
			return nil, bad("truncated entry header")
		}
		k, v := uint64(binary.LittleEndian.Uint32(body[0:4])), uint64(binary.LittleEndian.Uint32(body[4:8]))
		body = body[8:]
		if k+v > uint64(len(body)) {
			return nil, bad("entry longer than the file")
		}
		kv[string(body[:k])] = slices.Clone(body[k : k+v])
		body = body[k+v:]
	}
	return kv, nil
}

// readStable loads the stable file, empty if there is none.
func (s *Store) readStable() error {
	b, err := s.readFile(stableFile)
	if errors.Is(err, fs.ErrNotExist) {
		s.kv = map[string][]byte{}
		return nil
	}
	if err != nil {
		return err
	}
	s.kv, err = decodeStable(b)
	return err
}

// readFile returns the whole content of the file name in the Store's
// directory.
func (s *Store) readFile(name string) ([]byte, error) {
	f, err := s.fs.Open(filepath.Join(s.dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("raftstore: reading %s: %w", name, err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, fmt.Errorf("raftstore: reading %s: %d of %d bytes: %w", name, n, size, err)
	}
	return b, nil
}

// writeFile makes b the content of the file name in the Store's directory,
// atomically and durably: a temporary file, synced, renamed over name, and
// the directory synced. A crash leaves the old content or b, whole.
func (s *Store) writeFile(name string, b []byte) error {
	tmp := filepath.Join(s.dir, name+".tmp")
	s.fs.Remove(tmp) // a leftover of a crash
	f, err := s.fs.Create(tmp, vfs.Fdatasync)
	if err != nil {
		return fmt.Errorf("raftstore: writing %s: %w", name, err)
	}
	if _, err = f.WriteAt(b, 0); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, filepath.Join(s.dir, name))
	}
	if err == nil {
		err = s.fs.SyncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("raftstore: writing %s: %w", name, err)
	}
	return nil
}

var _ raft.StableStore = (*Store)(nil)
