package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	pebblerecord "github.com/cockroachdb/pebble/record"
	"github.com/cockroachdb/pebble/vfs"
)

// pebbleWALName is the one WAL file the adapter writes (pebble names its
// WALs by file number).
const pebbleWALName = "000001.log"

func pebbleLib() *lib {
	return &lib{
		name:    "pebble",
		version: "github.com/cockroachdb/pebble v1.1.5 record.LogWriter",
		concurrency: "own group commit: SyncRecord under an outer mutex (pebble's commitPipeline.mu), " +
			"then wait on the WaitGroup its flush goroutine completes, as pebble's commit pipeline does",
		relaxed: "SyncRecord(p, nil, nil) (buffered in the LogWriter, no fsync; pebble's Sync=false)",
		counter: "Sync calls on the vfs.File under the LogWriter (a counting wrapper)",
		open: func(dir string, m mode) (peerLog, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			f, err := vfs.Default.Create(filepath.Join(dir, pebbleWALName))
			if err != nil {
				return nil, err
			}
			p := &pebbleLog{m: m, sem: make(chan struct{}, pebblerecord.SyncConcurrency-1)}
			p.startWAL(f)
			return p, nil
		},
		fill: func(dir string, n int, rec []byte) error {
			l, err := pebbleLib().open(dir, relaxed)
			if err != nil {
				return err
			}
			for range n {
				if err := l.Append(rec); err != nil {
					l.Close()
					return err
				}
			}
			return l.Close()
		},
		replay: func(dir string, visit func([]byte)) (int, error) {
			f, err := vfs.Default.Open(filepath.Join(dir, pebbleWALName))
			if err != nil {
				return 0, err
			}
			defer f.Close()
			// pebble's replayWAL: an invalid record at the tail (zeroed or
			// torn chunk, unexpected EOF) ends the log; it is not an error.
			r := pebblerecord.NewReader(f, 1)
			n := 0
			for {
				rr, err := r.Next()
				if err == nil {
					var b []byte
					b, err = io.ReadAll(rr)
					if err == nil {
						visit(b)
						n++
						continue
					}
				}
				if errors.Is(err, io.EOF) || pebblerecord.IsInvalidRecord(err) {
					return n, nil
				}
				return n, err
			}
		},
	}
}

type countingPebbleFile struct {
	vfs.File
	syncs atomic.Int64
}

func (f *countingPebbleFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

type pebbleLog struct {
	m   mode
	mu  sync.Mutex // pebble's commitPipeline.mu: SyncRecord needs external synchronisation
	w   *pebblerecord.LogWriter
	f   *countingPebbleFile
	sem chan struct{}
}

func (p *pebbleLog) Append(rec []byte) error {
	if p.m == relaxed {
		p.mu.Lock()
		_, err := p.w.SyncRecord(rec, nil, nil)
		p.mu.Unlock()
		return err
	}
	var wg sync.WaitGroup
	var syncErr error
	wg.Add(1)
	p.sem <- struct{}{} // released by the flush goroutine when the sync is done
	p.mu.Lock()
	_, err := p.w.SyncRecord(rec, &wg, &syncErr)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	wg.Wait()
	return syncErr
}

// rotatingPebbleLog is pebbleLog in relaxed mode rotating its WAL as
// pebble's DB does when a memtable of rotateAt bytes fills (DB.rotateWAL,
// called from makeRoomForWrite on the commit path under the commit
// mutex): the LogWriter is closed (its EOF trailer written and the file
// synced), a new file created, the directory synced, and a new LogWriter
// started, all before the append that found the WAL full goes on. It is
// what a durawal roll does (seal the finished segment, start the next) with
// pebble's timing: durawal seals in the background and makes only the next
// roll wait for it.
type rotatingPebbleLog struct {
	dir      string
	rotateAt int64
	n        uint64 // file number of the current WAL
	syncs    int64  // syncs of closed WALs
	*pebbleLog
}

func openRotatingPebble(dir string, rotateAt int64) (*rotatingPebbleLog, error) {
	l, err := pebbleLib().open(dir, relaxed)
	if err != nil {
		return nil, err
	}
	return &rotatingPebbleLog{dir: dir, rotateAt: rotateAt, n: 1, pebbleLog: l.(*pebbleLog)}, nil
}

func (p *rotatingPebbleLog) Append(rec []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w.Size() >= p.rotateAt {
		if err := p.rotateLocked(); err != nil {
			return err
		}
	}
	_, err := p.w.SyncRecord(rec, nil, nil)
	return err
}

func (p *rotatingPebbleLog) rotateLocked() error {
	if err := p.w.Close(); err != nil { // flushes, syncs and closes the file
		return err
	}
	p.syncs += p.f.syncs.Load()
	p.n++
	f, err := vfs.Default.Create(filepath.Join(p.dir, fmt.Sprintf("%06d.log", p.n)))
	if err != nil {
		return err
	}
	d, err := vfs.Default.OpenDir(p.dir)
	if err != nil {
		f.Close()
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	p.syncs++
	if err != nil {
		f.Close()
		return err
	}
	p.startWAL(f)
	return nil
}

func (p *rotatingPebbleLog) Syncs() int64 { return p.syncs + p.f.syncs.Load() }

// startWAL makes f, a new file, the WAL p writes, as pebble's DB opens a
// WAL: a syncing file with preallocation (MemTableSize*1.1 for the 4 MiB
// default), no BytesPerSync, under a LogWriter (its log number only tags
// chunks for recycled files, never read back here).
func (p *pebbleLog) startWAL(f vfs.File) {
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{PreallocateSize: 4 << 20 * 11 / 10})
	p.f = &countingPebbleFile{File: f}
	p.w = pebblerecord.NewLogWriter(p.f, 1, pebblerecord.LogWriterConfig{QueueSemChan: p.sem})
}

func (p *pebbleLog) Syncs() int64 { return p.f.syncs.Load() }
func (p *pebbleLog) Close() error { return p.w.Close() }
