// Package pebblewal drives pebble's record.LogWriter the way pebble's DB
// drives it, for the peers comparison and the A/B tool's control: one
// preallocated WAL file, commits serialised by an outer mutex (pebble's
// commitPipeline.mu), a durable commit waiting on the WaitGroup the
// LogWriter's flush goroutine completes once its sync returns, and,
// optionally, the WAL rotated when a memtable's worth of bytes fills.
package pebblewal

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/record"
	"github.com/cockroachdb/pebble/vfs"
)

// FirstName is the name of the first WAL file a Log writes (pebble names
// its WALs by file number).
const FirstName = "000001.log"

// Log is one LogWriter on a WAL file in a directory. Append is safe for
// concurrent use.
type Log struct {
	dir      string
	durable  bool  // Append waits for the sync covering its record
	rotateAt int64 // 0: never rotate
	n        uint64
	syncs    int64 // syncs of closed WAL files and of the directory; guarded by mu
	mu       sync.Mutex
	w        *record.LogWriter
	f        *countingFile
	sem      chan struct{}
}

type countingFile struct {
	vfs.File
	syncs atomic.Int64
}

func (f *countingFile) Sync() error {
	f.syncs.Add(1)
	return f.File.Sync()
}

// Create creates the WAL file FirstName in dir, which must exist, and
// starts a LogWriter on it. durable makes Append wait for the fsync
// covering its record (pebble's Sync=true); otherwise Append returns once
// the record is in the LogWriter's buffer (Sync=false). rotateAt > 0
// rotates the WAL, as pebble's DB.rotateWAL does when a memtable fills:
// the LogWriter is closed (its EOF trailer written, the file synced), the
// next file created, the directory synced and a new LogWriter started,
// under the commit mutex, before the append that found the WAL full.
func Create(dir string, durable bool, rotateAt int64) (*Log, error) {
	f, err := vfs.Default.Create(filepath.Join(dir, FirstName))
	if err != nil {
		return nil, err
	}
	p := &Log{dir: dir, durable: durable, rotateAt: rotateAt, n: 1,
		sem: make(chan struct{}, record.SyncConcurrency-1)}
	p.start(f)
	return p, nil
}

// start makes f, a new file, the WAL p writes, as pebble's DB opens a WAL:
// a syncing file with preallocation (MemTableSize*1.1 for the 4 MiB
// default), no BytesPerSync, under a LogWriter (its log number only tags
// chunks for recycled files, never read back here).
func (p *Log) start(f vfs.File) {
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{PreallocateSize: 4 << 20 * 11 / 10})
	p.f = &countingFile{File: f}
	p.w = record.NewLogWriter(p.f, 1, record.LogWriterConfig{QueueSemChan: p.sem})
}

// Append commits rec: durable, it returns once the sync covering rec
// returned; otherwise once rec is in the LogWriter's buffer.
func (p *Log) Append(rec []byte) error {
	if !p.durable {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.rotateAt > 0 && p.w.Size() >= p.rotateAt {
			if err := p.rotateLocked(); err != nil {
				return err
			}
		}
		_, err := p.w.SyncRecord(rec, nil, nil)
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

func (p *Log) rotateLocked() error {
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
	p.start(f)
	return nil
}

// Syncs returns the fsyncs of WAL files (counted on the file under the
// LogWriter) and of the directory (one per rotation) so far.
func (p *Log) Syncs() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncs + p.f.syncs.Load()
}

// Close closes the LogWriter: its buffer written, the file synced and
// closed.
func (p *Log) Close() error { return p.w.Close() }
