package wal_test

// Helpers shared by the policy, fault, kill, count and group-commit tests:
// a journal of what each Append returned, recovery of a crash image, the
// prefix/integrity check (docs/semantics.md, Policies: invariants 1 and
// 2), and an FS wrapper with hooks around Sync and WriteAt.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// jrec is one Append as the caller saw it.
type jrec struct {
	lsn      wal.LSN
	data     []byte
	err      error
	reserved bool      // the record is in the log (err nil, or an error after the LSN was assigned)
	ack      time.Time // when Append returned nil; zero otherwise
	forced   bool      // appended with wal.ForceSync
}

// journal collects jrecs from many goroutines.
type journal struct {
	mu   sync.Mutex
	recs []jrec
	// syncs holds, for each Sync() that returned nil, the appended LSN
	// sampled before the call and the time it returned.
	syncs []syncPoint
}

type syncPoint struct {
	upTo wal.LSN
	at   time.Time
}

// reservedAfter reports whether an Append that returned err had its record
// reserved in the log (an LSN assigned) before failing.
func reservedAfter(err error) bool {
	if errors.Is(err, wal.ErrNotAppended) {
		return false
	}
	return err == nil || errors.Is(err, wal.ErrDurabilityUnknown) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// appendRec appends data to l, with ForceSync if forced, and records the
// outcome.
func (j *journal) appendRec(l *wal.Log, data []byte, forced bool) jrec {
	var opts []wal.AppendOption
	if forced {
		opts = append(opts, wal.ForceSync)
	}
	keep := slices.Clone(data) // MemFS may scramble buffers; Append does not retain data anyway
	lsn, err := l.AppendContext(context.Background(), data, opts...)
	r := jrec{lsn: lsn, data: keep, err: err, reserved: reservedAfter(err), forced: forced}
	if err == nil {
		r.ack = time.Now()
	}
	j.mu.Lock()
	j.recs = append(j.recs, r)
	j.mu.Unlock()
	return r
}

// syncNow calls l.Sync and records the sync point if it returned nil.
func (j *journal) syncNow(l *wal.Log) error {
	upTo := l.AppendedLSN()
	err := l.Sync()
	if err == nil {
		j.mu.Lock()
		j.syncs = append(j.syncs, syncPoint{upTo: upTo, at: time.Now()})
		j.mu.Unlock()
	}
	return err
}

// inLog returns the reserved records in LSN order: the order the log must
// recover them in.
func (j *journal) inLog() []jrec {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []jrec
	for _, r := range j.recs {
		if r.reserved {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b jrec) int {
		switch {
		case a.lsn < b.lsn:
			return -1
		case a.lsn > b.lsn:
			return 1
		}
		return 0
	})
	return out
}

// recovered is what a reopened log holds.
type recovered struct {
	lsns []wal.LSN
	recs [][]byte
	info wal.RecoveryInfo
}

// recoverImage opens the log in dir on fsys, reads every record and closes
// it. A failed Open is returned as the error (e.g. a CorruptionError).
func recoverImage(t testing.TB, fsys vfs.FS, dir string, opts wal.Options) (recovered, error) {
	t.Helper()
	opts.FS = fsys
	opts.Policy = policy.SyncEveryCommit() // recovery does not depend on the policy
	l, err := wal.Open(dir, opts)
	if err != nil {
		return recovered{}, err
	}
	defer l.Close()
	var out recovered
	out.info = l.Recovered()
	r, err := l.NewReader(0)
	if err != nil {
		return out, err
	}
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out.lsns = append(out.lsns, lsn)
		out.recs = append(out.recs, slices.Clone(rec))
	}
}

// checkPrefix checks I1 and I2: the recovered records are exactly the first
// k records of want (LSN order), byte for byte. It returns k.
func checkPrefix(t testing.TB, label string, got recovered, want []jrec) int {
	t.Helper()
	if len(got.lsns) > len(want) {
		t.Fatalf("%s: recovered %d records, only %d were appended", label, len(got.lsns), len(want))
	}
	for i := range got.lsns {
		if got.lsns[i] != want[i].lsn {
			t.Fatalf("%s: I1 prefix: recovered record %d at LSN %d, want LSN %d", label, i, got.lsns[i], want[i].lsn)
		}
		if !bytes.Equal(got.recs[i], want[i].data) {
			t.Fatalf("%s: I2 integrity: record %d at LSN %d differs (%d bytes recovered, %d appended)",
				label, i, got.lsns[i], len(got.recs[i]), len(want[i].data))
		}
	}
	return len(got.lsns)
}

// requireSurvivors fails if a record of want that must survive (must says
// so) is not among the first k recovered.
func requireSurvivors(t testing.TB, label string, want []jrec, k int, must func(jrec) bool, why string) {
	t.Helper()
	for i := k; i < len(want); i++ {
		if must(want[i]) {
			t.Fatalf("%s: record %d at LSN %d (acked %v) lost, but it must survive: %s; recovered %d of %d",
				label, i, want[i].lsn, want[i].ack, why, k, len(want))
		}
	}
}

// hookFS wraps an FS and calls hooks around file Syncs and WriteAts. The
// hooks get the wrapped file, whose identity is stable across renames.
type hookFS struct {
	vfs.FS
	beforeSync func(f *hookFile)            // may block
	afterSync  func(f *hookFile, err error) // may block
	afterWrite func(f *hookFile, off int64, n int)
}

type hookFile struct {
	vfs.File
	fs   *hookFS
	name string // name at open
}

func (h *hookFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &hookFile{File: f, fs: h, name: name}, nil
}

func (h *hookFS) Create(name string, m vfs.SyncMethod) (vfs.File, error) {
	f, err := h.FS.Create(name, m)
	return h.wrap(f, name, err)
}

func (h *hookFS) Open(name string) (vfs.File, error) {
	f, err := h.FS.Open(name)
	return h.wrap(f, name, err)
}

func (h *hookFS) OpenReadWrite(name string, m vfs.SyncMethod) (vfs.File, error) {
	f, err := h.FS.OpenReadWrite(name, m)
	return h.wrap(f, name, err)
}

func (f *hookFile) Sync() error {
	if f.fs.beforeSync != nil {
		f.fs.beforeSync(f)
	}
	err := f.File.Sync()
	if f.fs.afterSync != nil {
		f.fs.afterSync(f, err)
	}
	return err
}

func (f *hookFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if f.fs.afterWrite != nil {
		f.fs.afterWrite(f, off, n)
	}
	return n, err
}

// syncGate blocks every file Sync while armed, until released one at a
// time (faultfs.Inject(fsys, gate)). entered receives once per blocked Sync.
type syncGate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func newSyncGate() *syncGate {
	return &syncGate{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (g *syncGate) arm(on bool) {
	g.mu.Lock()
	g.armed = on
	g.mu.Unlock()
}

// MaybeError makes g a faultfs.Injector: every file Sync (OpSync) is held
// at the gate; nothing fails.
func (g *syncGate) MaybeError(op faultfs.Op) error {
	if op.Kind == faultfs.OpSync {
		g.hold()
	}
	return nil
}

func (g *syncGate) hold() {
	g.mu.Lock()
	armed := g.armed
	g.mu.Unlock()
	if !armed {
		return
	}
	g.entered <- struct{}{}
	<-g.release
}

// waitEntered waits until a Sync is blocked at the gate.
func (g *syncGate) waitEntered(t testing.TB) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no sync reached the gate")
	}
}

// waitFor polls cond every 100µs for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
