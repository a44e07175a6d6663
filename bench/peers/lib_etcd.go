package main

import (
	"os"
	"sync"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

func etcdLib() *lib {
	return &lib{
		name:    "etcd",
		version: "go.etcd.io/etcd/server/v3 v3.6.5 storage/wal",
		concurrency: "no group commit in the WAL (etcd batches entries in its raft Ready loop, above the WAL); " +
			"outer mutex assigns the consecutive raft index and calls Save (one entry, one fdatasync)",
		relaxed: "SetUnsafeNoFsync() (write per Save, no fdatasync)",
		open: func(dir string, m mode) (peerLog, error) {
			w, last, err := etcdOpen(dir)
			if err != nil {
				return nil, err
			}
			if m == relaxed {
				w.SetUnsafeNoFsync()
			}
			return &etcdLog{w: w, next: last + 1}, nil
		},
		fill: func(dir string, n int, rec []byte) error {
			w, last, err := etcdOpen(dir)
			if err != nil {
				return err
			}
			ents := make([]raftpb.Entry, 0, 1000)
			idx := last
			for i := 0; i < n; i += len(ents) {
				ents = ents[:0]
				for j := i; j < n && len(ents) < cap(ents); j++ {
					idx++
					ents = append(ents, raftpb.Entry{Term: 1, Index: idx, Data: rec})
				}
				if err := w.Save(raftpb.HardState{Term: 1, Commit: idx}, ents); err != nil {
					w.Close()
					return err
				}
			}
			return w.Close()
		},
		replay: func(dir string, visit func([]byte)) (int, error) {
			w, err := wal.Open(zap.NewNop(), dir, walpb.Snapshot{})
			if err != nil {
				return 0, err
			}
			defer w.Close()
			_, _, ents, err := w.ReadAll()
			for _, e := range ents {
				visit(e.Data)
			}
			return len(ents), err
		},
	}
}

// etcdOpen creates the WAL in dir or opens it for appending, returning the
// last raft index in it.
func etcdOpen(dir string) (*wal.WAL, uint64, error) {
	lg := zap.NewNop()
	if !wal.Exist(dir) {
		os.RemoveAll(dir) // Create wants to make dir itself
		w, err := wal.Create(lg, dir, nil)
		return w, 0, err
	}
	w, err := wal.Open(lg, dir, walpb.Snapshot{})
	if err != nil {
		return nil, 0, err
	}
	_, _, ents, err := w.ReadAll()
	if err != nil {
		w.Close()
		return nil, 0, err
	}
	var last uint64
	if len(ents) > 0 {
		last = ents[len(ents)-1].Index
	}
	return w, last, nil
}

type etcdLog struct {
	mu   sync.Mutex // raft indexes must be consecutive
	w    *wal.WAL
	next uint64
	ent  [1]raftpb.Entry
}

func (e *etcdLog) Append(rec []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ent[0] = raftpb.Entry{Term: 1, Index: e.next, Data: rec}
	if err := e.w.Save(raftpb.HardState{Term: 1, Commit: e.next}, e.ent[:]); err != nil {
		return err
	}
	e.next++
	return nil
}

func (e *etcdLog) Syncs() int64 { return -1 }
func (e *etcdLog) Close() error { return e.w.Close() }
