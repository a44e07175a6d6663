package main

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

func raftwalLib() *lib {
	return &lib{
		name:    "raft-wal",
		version: "github.com/hashicorp/raft-wal v0.4.0",
		concurrency: "no group commit in the log store (hashicorp/raft batches in its leader loop); " +
			"outer mutex assigns the consecutive index and calls StoreLogs (one log, one fsync); its bolt meta store is closed by the adapter (WAL.Close leaves it open)",
		relaxed: "", // StoreLogs always fsyncs
		counter: "Sync calls on the segment files through its types.VFS seam (a counting wrapper; bolt meta fsyncs not seen)",
		open: func(dir string, m mode) (peerLog, error) {
			if m == relaxed {
				return nil, errNoMode
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			v := &countingVFS{VFS: fs.New()}
			w, err := openRaftWAL(dir, v)
			if err != nil {
				return nil, err
			}
			last, err := w.LastIndex()
			if err != nil {
				w.Close()
				return nil, err
			}
			return &raftwalLog{w: w, v: v, next: last + 1}, nil
		},
		fill: func(dir string, n int, rec []byte) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			w, err := openRaftWAL(dir, fs.New())
			if err != nil {
				return err
			}
			logs := make([]*raft.Log, 0, 1000)
			idx := uint64(0)
			for i := 0; i < n; i += len(logs) {
				logs = logs[:0]
				for j := i; j < n && len(logs) < cap(logs); j++ {
					idx++
					logs = append(logs, &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: rec})
				}
				if err := w.StoreLogs(logs); err != nil {
					w.Close()
					return err
				}
			}
			return w.Close()
		},
		replay: func(dir string, visit func([]byte)) (int, error) {
			w, err := openRaftWAL(dir, fs.New())
			if err != nil {
				return 0, err
			}
			defer w.Close()
			first, err := w.FirstIndex()
			if err != nil {
				return 0, err
			}
			last, err := w.LastIndex()
			if err != nil {
				return 0, err
			}
			n := 0
			var l raft.Log
			for i := first; i <= last && first > 0; i++ {
				if err := w.GetLog(i, &l); err != nil {
					return n, err
				}
				visit(l.Data)
				n++
			}
			return n, nil
		},
	}
}

// raftWAL is a raft-wal log with the meta store it was opened with.
// raft-wal v0.4.0's WAL.Close does not close its default BoltMetaDB, whose
// flock then makes the next Open in the same process wait forever, so the
// adapter passes the default store explicitly and closes it after the WAL.
type raftWAL struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

func openRaftWAL(dir string, v types.VFS) (*raftWAL, error) {
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithSegmentFiler(segment.NewFiler(dir, v)))
	if err != nil {
		meta.Close()
		return nil, err
	}
	return &raftWAL{WAL: w, meta: meta}, nil
}

func (w *raftWAL) Close() error {
	err := w.WAL.Close()
	if merr := w.meta.Close(); err == nil {
		err = merr
	}
	return err
}

// countingVFS counts Sync calls on the files raft-wal creates or opens.
type countingVFS struct {
	types.VFS
	syncs atomic.Int64
}

func (v *countingVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &countingWF{WritableFile: f, n: &v.syncs}, nil
}

func (v *countingVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &countingWF{WritableFile: f, n: &v.syncs}, nil
}

type countingWF struct {
	types.WritableFile
	n *atomic.Int64
}

func (f *countingWF) Sync() error {
	f.n.Add(1)
	return f.WritableFile.Sync()
}

type raftwalLog struct {
	mu   sync.Mutex // indexes must be consecutive
	w    *raftWAL
	v    *countingVFS
	next uint64
	log  raft.Log
	logs [1]*raft.Log
}

func (r *raftwalLog) Append(rec []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = raft.Log{Index: r.next, Term: 1, Type: raft.LogCommand, Data: rec}
	r.logs[0] = &r.log
	if err := r.w.StoreLogs(r.logs[:]); err != nil {
		return err
	}
	r.next++
	return nil
}

func (r *raftwalLog) Syncs() int64 { return r.v.syncs.Load() }
func (r *raftwalLog) Close() error { return r.w.Close() }
