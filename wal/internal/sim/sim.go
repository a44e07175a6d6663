package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// Result is what Execute found.
type Result struct {
	// Violations describes each broken promise, empty if none.
	Violations []string
	// Trace is what happened, step by step (operations and their results,
	// recoveries and what they read).
	Trace []string
	// Reached names the states the schedule reached (a roll into a kept
	// file, a failed cut, a torn tail recovered...), to pick a corpus.
	Reached map[string]bool
}

// Failed reports whether a violation was found.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// hangAfter is how long an operation may take, with no held or frozen
// operation, before it counts as a hang.
const hangAfter = 20 * time.Second

// heldGrace is how long an operation may go on once an operation is held
// or the filesystem frozen, before it is taken to wait for it.
const heldGrace = 60 * time.Millisecond

// entry is one record of the model's lineage.
type entry struct {
	lsn     wal.LSN
	data    []byte
	id      string
	durable bool // acknowledged durable (survives a power loss)
	written bool // acknowledged written (survives a process crash)
}

func (e *entry) end() wal.LSN { return e.lsn + wal.LSN(wal.FrameSize(len(e.data))) }

type record struct {
	lsn  wal.LSN
	data []byte
}

type runner struct {
	sch   *Schedule
	mem   *vfs.MemFS
	res   *Result
	quiet *slog.Logger

	lineage []entry // the current log, by LSN
	pending []entry // appended with unknown LSN, after the lineage (poisoned log)
	grave   map[string]string

	removeReq wal.LSN // highest LSN asked of RemoveBefore: records below may be gone
	removed   wal.LSN // highest first LSN a RemoveBefore returned: nothing below may come back
	cutMaybe  wal.LSN // a cut that may or may not have happened (math.MaxUint64: none)
	claimCap  wal.LSN // claims (SyncedLSN, WrittenLSN) apply only below this
	resend    []int   // sizes of the records last cut or lost
	seq       uint64
	runIdx    int
	opIdx     int
	stop      bool
}

// Execute runs sch and checks every recovery against the oracle.
func Execute(sch *Schedule) *Result {
	r := &runner{sch: sch, mem: vfs.NewMem(), res: &Result{Reached: map[string]bool{}}, grave: map[string]string{},
		cutMaybe: math.MaxUint64, claimCap: math.MaxUint64,
		quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	crash := EndClose
	closedClean := false
	for i, run := range sch.Runs {
		r.runIdx, r.opIdx = i, -1
		l, inj := r.open(run, crash, closedClean)
		if r.stop {
			break
		}
		crash, closedClean = r.execRun(run, l, inj)
		if r.stop {
			break
		}
	}
	if !r.stop {
		r.runIdx, r.opIdx = len(sch.Runs), -1
		r.final(crash, closedClean)
	}
	if !r.stop && sch.Rot != nil {
		r.rot(*sch.Rot)
	}
	return r.res
}

func (r *runner) reach(cond bool, what string) {
	if cond {
		r.res.Reached[what] = true
	}
}

func (r *runner) tracef(format string, args ...any) {
	r.res.Trace = append(r.res.Trace, fmt.Sprintf(format, args...))
}

func (r *runner) where() string {
	if r.opIdx < 0 {
		return fmt.Sprintf("run %d", r.runIdx)
	}
	return fmt.Sprintf("op %d.%d", r.runIdx, r.opIdx)
}

func (r *runner) violate(format string, args ...any) {
	msg := r.where() + ": " + fmt.Sprintf(format, args...)
	r.res.Violations = append(r.res.Violations, msg)
	r.tracef("VIOLATION %s", msg)
	r.stop = true
}

func (r *runner) options(run Run, fsys vfs.FS) wal.Options {
	return wal.Options{FS: fsys, SegmentSize: r.sch.SegmentSize, Policy: run.Policy, SyncMethod: run.Method,
		RecycleSegments: run.Recycle, NoSpaceTimeout: 20 * time.Millisecond, Logger: r.quiet}
}

// payload returns a new record of size bytes, unique (for 8 bytes and more)
// within the schedule.
func (r *runner) payload(size int) ([]byte, string) {
	r.seq++
	b := make([]byte, size)
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], r.seq*0x9E3779B97F4A7C15)
	n := copy(b, h[:])
	for i := n; i < size; i++ {
		b[i] = byte(r.seq*7 + uint64(i)*13)
	}
	return b, fmt.Sprintf("#%d (%s, %d bytes)", r.seq, r.where(), size)
}

// call runs f in a goroutine and waits for it: it reports false if f
// panicked (a violation), or did not return in time: within heldGrace of a
// hold or freeze (then f is taken to wait for it), or within hangAfter
// (a violation).
func (r *runner) call(what string, inj *injector, f func()) bool {
	done := make(chan struct{})
	var panicked any
	var stack []byte
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				panicked, stack = p, debug.Stack()
			}
		}()
		f()
	}()
	hang := time.NewTimer(hangAfter)
	defer hang.Stop()
	var blocked <-chan struct{}
	if inj != nil {
		blocked = inj.blocked
	}
	select {
	case <-done:
	case <-blocked:
		select {
		case <-done:
		case <-time.After(heldGrace):
			r.tracef("  %s waits for the held or frozen operation", what)
			return false
		}
	case <-hang.C:
		r.violate("%s hung for %v (no operation held)", what, hangAfter)
		return false
	}
	if panicked != nil {
		r.violate("%s panicked: %v\n%s", what, panicked, stack)
		return false
	}
	return true
}

// injector arms faults on the operations of one run.
type injector struct {
	r         *runner
	mem       *vfs.MemFS
	mu        sync.Mutex
	faults    []*armedFault
	fired     []Fault
	frozen    atomic.Bool
	release   chan struct{}
	blocked   chan struct{} // closed when an operation is held or frozen
	once      sync.Once
	blockOnce sync.Once
	log       atomic.Pointer[wal.Log]

	image  *vfs.MemFS // the crash image taken at a freeze
	claims claims     // read just before it
	crash  End

	// admitted counts the operations MaybeError let run that have not
	// returned yet (guarded by mu); a freeze waits on drained for them
	// before it images the filesystem, so that none lands after the image
	// and still reports success.
	admitted int
	drained  sync.Cond
}

type armedFault struct {
	f    Fault
	seen int
	done bool
}

func newInjector(r *runner, mem *vfs.MemFS) *injector {
	in := &injector{r: r, mem: mem, release: make(chan struct{}), blocked: make(chan struct{})}
	in.drained.L = &in.mu
	return in
}

func (in *injector) arm(f Fault) {
	in.mu.Lock()
	in.faults = append(in.faults, &armedFault{f: f})
	in.mu.Unlock()
}

func (in *injector) disarm() {
	in.mu.Lock()
	for _, a := range in.faults {
		a.done = true
	}
	in.mu.Unlock()
}

func (in *injector) firedFaults() []Fault {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Fault(nil), in.fired...)
}

func (in *injector) firedAny() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.fired) > 0
}

func (in *injector) errnos() []syscall.Errno {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []syscall.Errno
	for _, f := range in.fired {
		if f.Kind != FaultHold && f.Kind != FaultFreeze {
			out = append(out, f.Errno)
		}
	}
	return out
}

func (in *injector) wasHeld() bool {
	select {
	case <-in.blocked:
		return true
	default:
		return false
	}
}

// unblock releases every held or frozen operation: each fails with EIO.
func (in *injector) unblock() {
	in.once.Do(func() { close(in.release) })
}

func isDirOp(k faultfs.OpKind) bool {
	switch k {
	case faultfs.OpSyncDir, faultfs.OpRename, faultfs.OpRemove, faultfs.OpCreate, faultfs.OpList, faultfs.OpMkdirAll:
		return true
	}
	return false
}

func (f *Fault) matches(op faultfs.Op) bool {
	if f.On != 0 && op.Kind != f.On {
		return false
	}
	base := filepath.Base(op.Path)
	switch f.Target {
	case TargetSegment:
		return strings.HasSuffix(base, ".wal") && !isDirOp(op.Kind) || op.Kind == faultfs.OpCreate
	case TargetRecord:
		return !strings.HasSuffix(base, ".wal") && op.Kind != faultfs.OpSyncDir && op.Kind != faultfs.OpList && op.Kind != faultfs.OpMkdirAll
	case TargetDir:
		return isDirOp(op.Kind)
	}
	return true
}

func (in *injector) MaybeError(op faultfs.Op) error {
	if in.frozen.Load() {
		<-in.release
		return syscall.EIO
	}
	in.mu.Lock()
	if in.frozen.Load() {
		in.mu.Unlock()
		<-in.release
		return syscall.EIO
	}
	for _, a := range in.faults {
		if a.done || !a.f.matches(op) {
			continue
		}
		a.seen++
		if a.seen < a.f.N {
			continue
		}
		a.done = true
		in.fired = append(in.fired, a.f)
		switch a.f.Kind {
		case FaultFail:
			in.mu.Unlock()
			return a.f.Errno
		case FaultShort:
			if op.Kind == faultfs.OpWrite || op.Kind == faultfs.OpRead {
				in.admitted++ // runs on part of its buffer
				in.mu.Unlock()
				return &faultfs.ShortOp{Keep: a.f.Keep, Err: a.f.Errno}
			}
			in.mu.Unlock()
			return a.f.Errno
		case FaultSyncLost:
			if op.Kind == faultfs.OpSync {
				in.mem.FailNextSync(a.f.Errno)
				in.admitted++
				in.mu.Unlock()
				return nil
			}
			in.mu.Unlock()
			return a.f.Errno
		case FaultHold:
			in.mu.Unlock()
			in.blockOnce.Do(func() { close(in.blocked) })
			<-in.release
			return syscall.EIO
		case FaultFreeze:
			in.frozen.Store(true)
			for in.admitted > 0 {
				in.drained.Wait() // the operations already under way land before the image
			}
			if l := in.log.Load(); l != nil {
				in.claims = readClaims(l)
			}
			in.crash = a.f.Crash
			if a.f.Crash.Kind == EndProcess {
				in.image = in.mem.ProcessCrash()
			} else {
				in.image = in.mem.PowerLoss(a.f.Crash.CrashMode())
			}
			in.mu.Unlock()
			in.blockOnce.Do(func() { close(in.blocked) })
			<-in.release
			return syscall.EIO
		}
	}
	in.admitted++
	in.mu.Unlock()
	if admitDelay > 0 && op.Kind == faultfs.OpWrite {
		time.Sleep(admitDelay)
	}
	return nil
}

// admitDelay, when a test sets it, holds every write the injector lets run
// this long between its admission and its run: it widens the window in
// which a freeze can come while the operation is under way.
var admitDelay time.Duration

// Finished counts an operation MaybeError let run as returned
// (faultfs.Tracker).
func (in *injector) Finished(faultfs.Op) {
	in.mu.Lock()
	if in.admitted--; in.admitted == 0 {
		in.drained.Broadcast()
	}
	in.mu.Unlock()
}

type claims struct {
	ok              bool
	synced, written wal.LSN
}

func readClaims(l *wal.Log) claims {
	return claims{ok: true, synced: l.SyncedLSN(), written: l.WrittenLSN()}
}

// applyClaims marks the entries the log said were synced or written.
func (r *runner) applyClaims(c claims) {
	if !c.ok {
		return
	}
	for i := range r.lineage {
		e := &r.lineage[i]
		if e.lsn >= r.claimCap {
			break
		}
		if e.end() <= c.synced {
			e.durable = true
		}
		if e.end() <= c.written {
			e.written = true
		}
	}
}

// readAll reads every record of l from its FirstLSN with a Reader.
func readAll(l *wal.Log) ([]record, error) {
	rd, err := l.NewReader(l.FirstLSN())
	if err != nil {
		return nil, fmt.Errorf("NewReader(%d): %w", l.FirstLSN(), err)
	}
	defer rd.Close()
	var out []record
	for {
		lsn, b, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, record{lsn, bytes.Clone(b)})
	}
}

func describe(recs []record) string {
	if len(recs) == 0 {
		return "no records"
	}
	return fmt.Sprintf("%d records, LSN %d..%d", len(recs), recs[0].lsn, recs[len(recs)-1].lsn)
}

func (r *runner) find(lsn wal.LSN) int {
	i := sort.Search(len(r.lineage), func(i int) bool { return r.lineage[i].lsn >= lsn })
	if i < len(r.lineage) && r.lineage[i].lsn == lsn {
		return i
	}
	return -1
}

func (r *runner) fate(data []byte) string {
	if f, ok := r.grave[string(data)]; ok {
		return f
	}
	for _, e := range r.lineage {
		if bytes.Equal(e.data, data) {
			return fmt.Sprintf("record %s of the lineage, at LSN %d", e.id, e.lsn)
		}
	}
	return "a record never appended (or too short to tell)"
}

// consistent checks that recs, read from a live log or a recovered one,
// are records of the lineage (or pending ones) at their LSN, byte-exact,
// in order, with no record of the lineage skipped between the first and
// the last. It returns the pending entries recs adopt, by LSN.
func (r *runner) consistent(what string, recs []record) (map[wal.LSN]entry, bool) {
	adopt := map[wal.LSN]entry{}
	pend := 0
	var prev wal.LSN
	first, last := -1, -1
	for i, rc := range recs {
		if i > 0 && rc.lsn <= prev {
			r.violate("%s: record at LSN %d after LSN %d (out of order)", what, rc.lsn, prev)
			return nil, false
		}
		prev = rc.lsn
		if rc.lsn < r.removed && r.removed != 0 {
			r.violate("%s: record at LSN %d came back below the start %d a RemoveBefore returned: %s", what, rc.lsn, r.removed, r.fate(rc.data))
			return nil, false
		}
		if j := r.find(rc.lsn); j >= 0 {
			e := r.lineage[j]
			if !bytes.Equal(e.data, rc.data) {
				r.violate("%s: record at LSN %d is %d bytes, not record %s of %d bytes appended there; it is %s",
					what, rc.lsn, len(rc.data), e.id, len(e.data), r.fate(rc.data))
				return nil, false
			}
			if first < 0 {
				first = j
			}
			if last >= 0 && j != last+1 {
				r.violate("%s: records of the lineage between LSN %d and %d are missing (next read: %d)",
					what, r.lineage[last].lsn, e.lsn, rc.lsn)
				return nil, false
			}
			if pend > 0 {
				r.violate("%s: record at LSN %d after records of unknown LSN", what, rc.lsn)
				return nil, false
			}
			last = j
			continue
		}
		if (len(r.lineage) == 0 || rc.lsn > r.lineage[len(r.lineage)-1].lsn) && pend < len(r.pending) &&
			(last == len(r.lineage)-1 || len(r.lineage) == 0) && bytes.Equal(r.pending[pend].data, rc.data) {
			e := r.pending[pend]
			e.lsn = rc.lsn
			adopt[rc.lsn] = e
			pend++
			continue
		}
		r.violate("%s: record at LSN %d (%d bytes) was never appended at that LSN in the current lineage: it is %s",
			what, rc.lsn, len(rc.data), r.fate(rc.data))
		return nil, false
	}
	return adopt, true
}

// required reports whether e must be found after a crash of kind crash.
func (r *runner) required(e *entry, crash EndKind, reachesCut bool) bool {
	if e.lsn < r.removeReq {
		return false
	}
	if e.lsn >= r.cutMaybe && !reachesCut {
		return false
	}
	if crash == EndProcess {
		return e.durable || e.written
	}
	return e.durable
}

// verify checks a recovered log's records against the model after a
// crash of kind crash, then makes them the lineage: every record Open
// recovered is durable from now on, every other one is gone for good.
func (r *runner) verify(what string, recs []record, crash EndKind, adoptIt bool) bool {
	adopt, ok := r.consistent(what, recs)
	if !ok {
		return false
	}
	reachesCut := len(recs) > 0 && recs[len(recs)-1].lsn >= r.cutMaybe
	got := map[wal.LSN]bool{}
	for _, rc := range recs {
		got[rc.lsn] = true
	}
	for i := range r.lineage {
		e := &r.lineage[i]
		if r.required(e, crash, reachesCut) && !got[e.lsn] {
			kind := "durable"
			if !e.durable {
				kind = "written"
			}
			r.violate("%s: acknowledged (%s) record %s at LSN %d is missing; read %s", what, kind, e.id, e.lsn, describe(recs))
			return false
		}
	}
	if !adoptIt {
		return true
	}
	// the recovered records are the lineage now
	var nl []entry
	var lost []int
	for i := range r.lineage {
		e := r.lineage[i]
		if got[e.lsn] {
			e.durable, e.written = true, true
			nl = append(nl, e)
			continue
		}
		if len(recs) > 0 && e.lsn < recs[0].lsn {
			r.grave[string(e.data)] = fmt.Sprintf("record %s, LSN %d, removed (below the start) by %s", e.id, e.lsn, r.where())
			continue
		}
		r.grave[string(e.data)] = fmt.Sprintf("record %s, LSN %d, lost (not recovered) at %s", e.id, e.lsn, r.where())
		lost = append(lost, len(e.data))
	}
	for _, e := range r.pending {
		if a, ok := adopt[e.lsn]; ok && bytes.Equal(a.data, e.data) {
			continue
		}
		found := false
		for _, a := range adopt {
			if bytes.Equal(a.data, e.data) {
				found = true
			}
		}
		if !found {
			r.grave[string(e.data)] = fmt.Sprintf("record %s, never acknowledged, not recovered at %s", e.id, r.where())
			lost = append(lost, len(e.data))
		}
	}
	for _, a := range adopt {
		a.durable, a.written = true, true
		nl = append(nl, a)
	}
	sort.Slice(nl, func(i, j int) bool { return nl[i].lsn < nl[j].lsn })
	r.lineage, r.pending = nl, nil
	r.cutMaybe, r.claimCap = math.MaxUint64, math.MaxUint64
	if len(lost) > 0 {
		r.resend = lost
	}
	return true
}

func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, wal.ErrCorrupt):
		return "ErrCorrupt"
	case errors.Is(err, wal.ErrUnsupportedVersion):
		return "ErrUnsupportedVersion"
	case errors.Is(err, wal.ErrForeignFile):
		return "ErrForeignFile"
	case errors.Is(err, fs.ErrNotExist):
		return "ErrNotExist"
	}
	return "other"
}

// takeFrozen is what open does when a call did not return because the
// injector froze the disk before an operation (a crash inside Open or the
// read after it): it releases the held operations and makes the frozen
// image the disk the next attempt opens, returning the crash's kind. If
// nothing froze, the call waits for an operation held for another reason:
// a violation (hung), and ok is false. traced is a format with one %s for
// the crash.
func (r *runner) takeFrozen(inj *injector, hung, traced string) (EndKind, bool) {
	inj.mu.Lock()
	frozen, fcrash := inj.image, inj.crash
	inj.mu.Unlock()
	inj.unblock()
	if frozen == nil {
		r.violate("%s", hung)
		return 0, false
	}
	r.tracef(traced, fcrash)
	r.mem = frozen
	return fcrash.Kind, true
}

// open recovers the disk left by the previous run (crash says how it
// ended) and returns the log of the next run, or nil with r.stop set.
func (r *runner) open(run Run, crash EndKind, closedClean bool) (*wal.Log, *injector) {
	for attempt := 0; ; attempt++ {
		img := r.mem
		what := fmt.Sprintf("Open after %s", map[EndKind]string{EndClose: "Close", EndProcess: "a process crash", EndPower: "a power loss"}[crash])
		if attempt > 0 {
			what += fmt.Sprintf(" (attempt %d)", attempt+1)
		}
		// OpenReadOnly first, on the same image: Open must reach its verdict
		// and read the same records; so must a full verification (every
		// frame of every segment checked, as PlanRepair does before it
		// calls anything damage): a crash leaves no damage.
		var roRecs, vRecs []record
		var roErr, vErr error
		if !r.call("OpenReadOnly", nil, func() {
			roRecs, roErr = readOnly(r.sch.Dir, r.options(run, img))
			opts := r.options(run, img)
			opts.VerifyOnOpen = true
			vRecs, vErr = readOnly(r.sch.Dir, opts)
		}) {
			return nil, nil
		}
		inj := newInjector(r, img)
		if run.OpenFault != nil && attempt == 0 {
			inj.arm(*run.OpenFault)
		}
		var l *wal.Log
		var err error
		if !r.call("Open", inj, func() { l, err = wal.Open(r.sch.Dir, r.options(run, faultfs.Inject(img, inj))) }) {
			if r.stop {
				return nil, nil
			}
			fcrash, ok := r.takeFrozen(inj, what+" waits for a held operation", what+": crash (%s) during Open")
			if !ok {
				return nil, nil
			}
			crash = max(crash, fcrash)
			closedClean = false
			continue
		}
		if err != nil {
			if inj.firedAny() {
				r.tracef("%s (fault %s): %v", what, run.OpenFault, err)
				errnos := inj.errnos()
				if len(errnos) > 0 && errors.Is(err, wal.ErrCorrupt) && !errors.Is(err, errnos[0]) {
					r.violate("%s: injected %v reported as corruption: %v", what, errnos[0], err)
					return nil, nil
				}
				r.mem = img.ProcessCrash()
				crash = max(crash, EndProcess)
				closedClean = false
				continue
			}
			r.violate("%s failed: %v (OpenReadOnly: %v)", what, err, roErr)
			return nil, nil
		}
		inj.disarm() // an Open fault is for Open
		var recs []record
		var rerr error
		if !r.call("read after Open", inj, func() { recs, rerr = readAll(l) }) {
			if r.stop {
				return nil, nil
			}
			go l.Close()
			fcrash, ok := r.takeFrozen(inj, what+": the read waits for a held operation", what+": crash (%s) while reading after Open")
			if !ok {
				return nil, nil
			}
			crash = max(crash, fcrash)
			closedClean = false
			continue
		}
		info := l.Recovered()
		r.tracef("%s: %s, FirstLSN %d, recovered %+v", what, describe(recs), l.FirstLSN(), info)
		r.reach(info.TornBytes > 0, "torn tail")
		r.reach(info.Unvouched > 0, "unvouched frames")
		r.reach(info.DroppedSegment != "", "dropped segment")
		r.reach(len(info.Quarantined) > 0, "quarantine file")
		r.reach(info.RemovedTemp > 0, "removed temp or kept files")
		r.reach(info.Clean && crash != EndClose, "clean end frame after a crash")
		r.reach(attempt > 0, "Open retried after a fault or crash in Open")
		if rerr != nil {
			r.violate("%s: reading the recovered log: %v", what, rerr)
			return nil, nil
		}
		if closedClean && info.TornBytes != 0 {
			r.violate("%s: torn bytes after a clean Close: %+v", what, info)
			return nil, nil
		}
		// OpenReadOnly's verdict is Open's, with VerifyOnOpen too
		if !r.sameVerdict(what, "OpenReadOnly", roRecs, roErr, recs) ||
			!r.sameVerdict(what, "OpenReadOnly with VerifyOnOpen", vRecs, vErr, recs) {
			return nil, nil
		}
		if !r.verify(what, recs, crash, true) {
			return nil, nil
		}
		inj.log.Store(l)
		return l, inj
	}
}

// sameVerdict reports whether a read-only open (name) that read got, or
// failed with err, reached the verdict of the Open that read recs: no log
// where Open read none, or the same records. If not, it reports a
// violation.
func (r *runner) sameVerdict(what, name string, got []record, err error, recs []record) bool {
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		if len(recs) > 0 {
			r.violate("%s: %s found no log (%v) where Open read %s", what, name, err, describe(recs))
			return false
		}
	case err != nil:
		r.violate("%s: %s failed (%v) where Open succeeded", what, name, err)
		return false
	case !equalRecs(got, recs):
		r.violate("%s: %s read %s, Open %s", what, name, describe(got), describe(recs))
		return false
	}
	return true
}

// readOnly opens the log in dir with OpenReadOnly and reads every record.
func readOnly(dir string, opts wal.Options) ([]record, error) {
	ro, err := wal.OpenReadOnly(dir, opts)
	if err != nil {
		return nil, err
	}
	defer ro.Close()
	return readAll(ro)
}

// openAndRead opens the log in dir with Open, reads every record and
// closes it; info is what Open recovered.
func openAndRead(dir string, opts wal.Options) (recs []record, info wal.RecoveryInfo, err error) {
	l, err := wal.Open(dir, opts)
	if err != nil {
		return nil, info, err
	}
	defer l.Close()
	recs, err = readAll(l)
	return recs, l.Recovered(), err
}

func equalRecs(a, b []record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].lsn != b[i].lsn || !bytes.Equal(a[i].data, b[i].data) {
			return false
		}
	}
	return true
}

// waitsForWrite reports whether every commit p acknowledges was written
// (survives a process crash) when it returns. SyncIntervalPostponed's are
// not while a background sync runs: the write is postponed and the commit
// returns from the log buffer (Redis's everysec), so a process crash may
// take them (found by seed 212906532: a freeze of the background sync, and
// a commit acknowledged behind it). What such a log claims written at the
// crash (WrittenLSN) is still held to.
func waitsForWrite(p policy.Policy) bool {
	switch p.Kind() {
	case policy.KindBufferedInterval, policy.KindAsyncCommit, policy.KindSyncIntervalPostponed:
		return false
	}
	return true
}

// appendOutcome records the outcome of an append of datas with lsns
// (known ones; nil if none is known).
func (r *runner) appended(run Run, op Op, datas [][]byte, ids []string, lsns []wal.LSN, err error, inFlight bool) {
	acked := err == nil && !inFlight
	for i, d := range datas {
		e := entry{data: d, id: ids[i]}
		if lsns != nil && i < len(lsns) {
			e.lsn = lsns[i]
			if acked {
				e.durable = run.Policy.Kind() == policy.KindSyncEveryCommit || op.Force
				e.written = e.durable || waitsForWrite(run.Policy)
			}
			if len(r.pending) > 0 {
				r.violate("record %s got LSN %d after records of unknown LSN (model)", e.id, e.lsn)
				return
			}
			if n := len(r.lineage); n > 0 && r.lineage[n-1].lsn >= e.lsn {
				r.violate("record %s got LSN %d, not after the last record's %d", e.id, e.lsn, r.lineage[n-1].lsn)
				return
			}
			r.lineage = append(r.lineage, e)
			continue
		}
		r.pending = append(r.pending, e)
	}
}

func notAppended(err error) bool {
	return errors.Is(err, wal.ErrNoSpace) || errors.Is(err, wal.ErrNotAppended) || errors.Is(err, wal.ErrClosed) ||
		errors.Is(err, wal.ErrEmptyRecord) || errors.Is(err, wal.ErrRecordTooLarge)
}

func (r *runner) size(op Op, def int) int {
	if op.Same && len(r.resend) > 0 {
		s := r.resend[0]
		r.resend = r.resend[1:]
		return s
	}
	return def
}

// execRun runs the operations of run on l and ends it; it returns how it
// ended.
func (r *runner) execRun(run Run, l *wal.Log, inj *injector) (EndKind, bool) {
	ctx := context.Background()
	maxRec := int(r.sch.SegmentSize) - 56
	inFlight := false
	poisoned := false
	for j, op := range run.Ops {
		r.opIdx = j
		if inj.wasHeld() {
			// after a hold or freeze: only operations that need no I/O
			// could go on; end the run
			break
		}
		switch op.Kind {
		case OpAppend:
			d, id := r.payload(min(r.size(op, op.Size), maxRec))
			var aopts []wal.AppendOption
			if op.Force {
				aopts = append(aopts, wal.ForceSync)
			}
			ap0 := l.AppendedLSN()
			var lsn wal.LSN
			var err error
			ok := r.call("Append", inj, func() { lsn, err = l.AppendContext(ctx, d, aopts...) })
			if r.stop {
				return 0, false
			}
			r.tracef("%d.%d Append %d bytes: LSN %v, err %v%s", r.runIdx, j, len(d), result(ok, &lsn), result(ok, &err), flight(ok))
			switch {
			case !ok:
				r.appended(run, op, [][]byte{d}, []string{id}, nil, nil, true)
				inFlight = true
			case err != nil && (notAppended(err) || l.AppendedLSN() == ap0):
				r.grave[string(d)] = "record " + id + " not appended: " + err.Error()
			default:
				r.appended(run, op, [][]byte{d}, []string{id}, []wal.LSN{lsn}, err, false)
			}
		case OpBatch:
			var datas [][]byte
			var ids []string
			for k := range op.Count {
				sz := op.Size
				if k%3 == 1 {
					sz = max(1, op.Size/2)
				}
				d, id := r.payload(min(r.size(op, sz), maxRec))
				datas, ids = append(datas, d), append(ids, id)
			}
			var aopts []wal.AppendOption
			if op.Force {
				aopts = append(aopts, wal.ForceSync)
			}
			lsns := make([]wal.LSN, len(datas))
			for k := range lsns {
				lsns[k] = math.MaxUint64
			}
			ap0 := l.AppendedLSN()
			var err error
			ok := r.call("AppendBatch", inj, func() { _, err = l.AppendBatchLSNs(ctx, datas, lsns, aopts...) })
			if r.stop {
				return 0, false
			}
			shown := "(in flight)"
			if ok { // a batch still in flight may be filling lsns
				shown = shortLSNs(lsns)
			}
			r.tracef("%d.%d AppendBatch %d records: LSNs %v, err %v%s", r.runIdx, j, len(datas), shown, result(ok, &err), flight(ok))
			var be *wal.BatchError
			switch {
			case !ok:
				r.appended(run, op, datas, ids, nil, nil, true)
				inFlight = true
			case errors.As(err, &be):
				r.appended(run, op, datas[:be.Appended], ids[:be.Appended], lsns[:be.Appended], err, false)
				for _, d := range datas[be.Appended:] {
					r.grave[string(d)] = "record of a batch not appended: " + err.Error()
				}
			case err != nil && (notAppended(err) || l.AppendedLSN() == ap0):
				for k, d := range datas {
					r.grave[string(d)] = "record " + ids[k] + " not appended: " + err.Error()
				}
			default:
				known := lsns
				for _, x := range lsns {
					if x == math.MaxUint64 {
						known = nil
					}
				}
				r.appended(run, op, datas, ids, known, err, false)
			}
		case OpSync:
			n := len(r.lineage)
			var err error
			ok := r.call("Sync", inj, func() { err = l.Sync() })
			if r.stop {
				return 0, false
			}
			r.tracef("%d.%d Sync: %v%s", r.runIdx, j, result(ok, &err), flight(ok))
			if ok && err == nil {
				for k := range r.lineage[:n] {
					if r.lineage[k].lsn < r.claimCap {
						r.lineage[k].durable, r.lineage[k].written = true, true
					}
				}
			}
			inFlight = !ok
		case OpTruncate:
			if len(r.pending) > 0 || len(r.lineage) == 0 {
				continue
			}
			k := max(0, len(r.lineage)-1-op.Back)
			cut := r.lineage[k].lsn
			if cut < l.FirstLSN() {
				continue
			}
			if poisoned {
				// a poisoned log refuses the cut before recording it
				var err error
				pok := r.call("TruncateFrom", inj, func() { err = l.TruncateFrom(cut) })
				if r.stop {
					return 0, false
				}
				r.tracef("%d.%d TruncateFrom(%d) on the poisoned log: %v", r.runIdx, j, cut, result(pok, &err))
				if pok && err == nil {
					r.violate("TruncateFrom(%d) on a poisoned log returned nil", cut)
					return 0, false
				}
				continue
			}
			oldMaybe, oldCap := r.cutMaybe, r.claimCap
			r.cutMaybe, r.claimCap = cut, cut
			var err error
			ok := r.call("TruncateFrom", inj, func() { err = l.TruncateFrom(cut) })
			if r.stop {
				return 0, false
			}
			r.tracef("%d.%d TruncateFrom(%d) (record %s; %d records dropped): %v%s", r.runIdx, j, cut, r.lineage[k].id, len(r.lineage)-k, result(ok, &err), flight(ok))
			r.reach(ok && err == nil, "cut")
			r.reach(ok && errors.Is(err, wal.ErrPoisoned), "cut failed once recorded")
			if ok && err == nil {
				r.resend = nil
				for _, e := range r.lineage[k:] {
					r.grave[string(e.data)] = fmt.Sprintf("record %s, LSN %d, cut by TruncateFrom(%d) at %s", e.id, e.lsn, cut, r.where())
					r.resend = append(r.resend, len(e.data))
				}
				r.lineage = r.lineage[:k:k]
				r.cutMaybe, r.claimCap = math.MaxUint64, math.MaxUint64
			} else if ok && !errors.Is(err, wal.ErrPoisoned) {
				// refused before the cut was recorded: the log is as it was
				r.cutMaybe, r.claimCap = oldMaybe, oldCap
			}
			inFlight = !ok
		case OpRemove:
			if len(r.lineage) == 0 {
				continue
			}
			k := max(0, len(r.lineage)-1-op.Back)
			at := r.lineage[k].lsn
			r.removeReq = max(r.removeReq, at)
			first0 := l.FirstLSN()
			var first wal.LSN
			var err error
			ok := r.call("RemoveBefore", inj, func() { first, err = l.RemoveBefore(at) })
			if r.stop {
				return 0, false
			}
			r.tracef("%d.%d RemoveBefore(%d): first %v, %v%s", r.runIdx, j, at, result(ok, &first), result(ok, &err), flight(ok))
			if ok && err == nil {
				if first > max(at, first0) {
					r.violate("RemoveBefore(%d) returned first LSN %d, past the LSN asked and the start %d", at, first, first0)
					return 0, false
				}
				r.removed = max(r.removed, first)
				k := 0
				for k < len(r.lineage) && r.lineage[k].lsn < first {
					e := r.lineage[k]
					r.grave[string(e.data)] = fmt.Sprintf("record %s, LSN %d, removed by RemoveBefore(%d) at %s", e.id, e.lsn, at, r.where())
					k++
				}
				r.lineage = r.lineage[k:]
			}
			inFlight = !ok
		case OpRead:
			w := l.WrittenLSN()
			var recs []record
			var err error
			var one []byte
			var oneErr error
			var oneAt = -1
			// What the read needs from the runner, taken before it starts:
			// a read held by a fault goes on running after the call gives
			// up on it, while the runner moves on.
			var oneLSN wal.LSN
			if len(r.lineage) > 0 {
				oneAt = int(r.seq % uint64(len(r.lineage)))
				oneLSN = r.lineage[oneAt].lsn
			}
			ok := r.call("read", inj, func() {
				recs, err = readAll(l)
				if oneAt >= 0 {
					if oneLSN >= l.FirstLSN() {
						one, oneErr = l.ReadRecord(oneLSN, nil)
					} else {
						oneAt = -1
					}
				}
			})
			if r.stop {
				return 0, false
			}
			if ok {
				r.tracef("%d.%d read: %s, %v", r.runIdx, j, describe(recs), err)
			} else {
				r.tracef("%d.%d read: (in flight at the crash)", r.runIdx, j)
			}
			if !ok {
				inFlight = true
				break
			}
			faulted := inj.firedAny()
			if err != nil && !faulted {
				r.violate("read all: %v", err)
				return 0, false
			}
			if _, good := r.consistent("live Reader", recs); !good {
				return 0, false
			}
			if err == nil && !faulted {
				for _, e := range r.lineage {
					if e.lsn >= l.FirstLSN() && e.end() <= w && (len(recs) == 0 || e.lsn > recs[len(recs)-1].lsn) {
						r.violate("live Reader stopped at %s, before record %s at LSN %d (written LSN %d)", describe(recs), e.id, e.lsn, w)
						return 0, false
					}
				}
			}
			if oneAt >= 0 {
				e := r.lineage[oneAt]
				if oneErr == nil && !bytes.Equal(one, e.data) {
					r.violate("ReadRecord(%d) returned %d bytes that are not record %s: %s", e.lsn, len(one), e.id, r.fate(one))
					return 0, false
				}
				if oneErr != nil && !faulted {
					r.violate("ReadRecord(%d) of record %s: %v", e.lsn, e.id, oneErr)
					return 0, false
				}
			}
		case OpReadOnly:
			var recs []record
			var err error
			ok := r.call("OpenReadOnly (live)", inj, func() {
				ro, oerr := wal.OpenReadOnly(r.sch.Dir, r.options(run, r.mem))
				if oerr != nil {
					err = oerr
					return
				}
				recs, err = readAll(ro)
				ro.Close()
			})
			if r.stop {
				return 0, false
			}
			if !ok {
				r.tracef("%d.%d OpenReadOnly (live): (in flight at the crash)", r.runIdx, j)
				inFlight = true
				break
			}
			r.tracef("%d.%d OpenReadOnly (live): %s, %v", r.runIdx, j, describe(recs), err)
			if err != nil && !inj.firedAny() && !errors.Is(err, fs.ErrNotExist) {
				r.violate("OpenReadOnly of the live log: %v", err)
				return 0, false
			}
			if _, good := r.consistent("live OpenReadOnly", recs); !good {
				return 0, false
			}
		case OpArm:
			inj.arm(op.Fault)
			r.tracef("%d.%d armed: %s", r.runIdx, j, op.Fault)
		}
		if inFlight {
			break
		}
		if !poisoned {
			// a Sync on a poisoned log fails at once with ErrPoisoned;
			// WaitDurable(AppendedLSN) would force a sync, so ask Stats
			poisoned = l.Stats().Poisoned
		}
		r.applyClaims(readClaims(l))
	}
	r.opIdx = len(run.Ops)
	st := l.Stats()
	r.reach(st.Prepare.Recycled > 0, "roll into a kept file")
	r.reach(st.Poisoned, "poisoned")
	r.reach(inFlight, "operation in flight at the crash")
	for _, f := range inj.firedFaults() {
		r.reach(true, fmt.Sprintf("fault %d on %v", f.Kind, f.On))
	}
	return r.end(run, l, inj, inFlight)
}

func flight(ok bool) string {
	if ok {
		return ""
	}
	return " (in flight at the crash)"
}

// result returns *p once the call that sets it returned (ok), and a
// placeholder otherwise: a call still in flight may be writing *p.
func result[T any](ok bool, p *T) any {
	if !ok {
		return "?"
	}
	return *p
}

func shortLSNs(l []wal.LSN) string {
	var s []string
	for _, x := range l {
		if x == math.MaxUint64 {
			s = append(s, "-")
		} else {
			s = append(s, fmt.Sprint(x))
		}
	}
	if len(s) > 6 {
		s = append(s[:3], "…", s[len(s)-1])
	}
	return "[" + strings.Join(s, " ") + "]"
}

// end ends the run as run.End says (or as a freeze did) and makes r.mem
// the disk the next run opens.
func (r *runner) end(run Run, l *wal.Log, inj *injector, inFlight bool) (EndKind, bool) {
	defer func() {
		// let the old log go: held operations fail, Close releases it
		inj.unblock()
		done := make(chan struct{})
		go func() { l.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(hangAfter):
			if !r.stop {
				r.violate("Close of the crashed log hung after its held operations were failed")
			}
		}
	}()
	inj.mu.Lock()
	frozen := inj.image
	fc, crash := inj.claims, inj.crash
	inj.mu.Unlock()
	if frozen != nil {
		r.applyClaims(fc)
		r.tracef("end: %s (frozen before an operation)", crash)
		r.mem = frozen
		return crash.Kind, false
	}
	e := run.End
	if e.Kind == EndClose && (inFlight || inj.wasHeld()) {
		e = End{Kind: EndPower, Mode: 3, Seed: int64(r.seq), Block: 512}
	}
	switch e.Kind {
	case EndClose:
		n := len(r.lineage)
		var err error
		ok := r.call("Close", inj, func() { err = l.Close() })
		if r.stop {
			return 0, false
		}
		inj.mu.Lock()
		frozen, fc, crash := inj.image, inj.claims, inj.crash
		inj.mu.Unlock()
		if frozen != nil {
			r.applyClaims(fc)
			r.tracef("end: Close, and %s before one of its operations", crash)
			r.mem = frozen
			return crash.Kind, false
		}
		if !ok {
			// Close waits for a held sync: the power goes
			e = End{Kind: EndPower, Mode: 3, Seed: int64(r.seq), Block: 512}
			r.applyClaims(readClaims(l))
			r.mem = r.mem.PowerLoss(e.CrashMode())
			r.tracef("end: Close held, %s", e)
			return EndPower, false
		}
		r.tracef("end: Close: %v", err)
		if err == nil {
			for k := range r.lineage[:n] {
				if r.lineage[k].lsn < r.claimCap {
					r.lineage[k].durable, r.lineage[k].written = true, true
				}
			}
			return EndClose, !inj.firedAny()
		}
		r.applyClaims(readClaims(l))
		// a failed Close: the next Open sees what a process crash leaves
		r.mem = r.mem.ProcessCrash()
		return EndProcess, false
	case EndProcess:
		r.applyClaims(readClaims(l))
		r.mem = r.mem.ProcessCrash()
	default:
		r.applyClaims(readClaims(l))
		r.mem = r.mem.PowerLoss(e.CrashMode())
	}
	r.tracef("end: %s", e)
	r.reach(true, fmt.Sprintf("end %d mode %d", e.Kind, e.Mode))
	return e.Kind, false
}

// final opens the log once more, checks it, appends, closes it cleanly
// and checks that a reopen reads everything back, with no torn bytes.
func (r *runner) final(crash EndKind, closedClean bool) {
	run := Run{Policy: policy.SyncEveryCommit(), Method: vfs.Fdatasync, Recycle: 2}
	l, inj := r.open(run, crash, closedClean)
	if r.stop {
		return
	}
	for i := range 3 {
		d, id := r.payload(100 + 50*i)
		var lsn wal.LSN
		var err error
		if !r.call("Append", inj, func() { lsn, err = l.Append(d) }) {
			return
		}
		if err != nil {
			r.violate("final Append: %v", err)
			l.Close()
			return
		}
		r.appended(run, Op{Kind: OpAppend}, [][]byte{d}, []string{id}, []wal.LSN{lsn}, nil, false)
	}
	var err error
	if !r.call("Close", inj, func() { err = l.Close() }) {
		return
	}
	if err != nil {
		r.violate("final Close: %v", err)
		return
	}
	for k := range r.lineage {
		r.lineage[k].durable = true
	}
	l2, _ := r.open(run, EndClose, true)
	if r.stop {
		return
	}
	if got, want := len(r.lineage), 0; got == want && len(r.res.Violations) == 0 {
		r.tracef("final: empty log")
	}
	l2.Close()
}

// rot damages the cleanly closed log as rt says, then checks what a user
// of a damaged log meets: Open either reads every record (the byte was
// one the log does not read) or reports ErrCorrupt, at Open or at the
// read, and never returns fewer or other records; Salvage reads a prefix
// of the log; Repair leaves a log that Open accepts and that holds
// exactly what Salvage read (or refuses with ErrNotRepaired when nothing
// before the damage can be kept), and a second Repair finds nothing to do.
func (r *runner) rot(rt Rot) {
	dir := r.sch.Dir
	names, err := r.mem.List(dir)
	if err != nil {
		r.violate("rot: listing %s: %v", dir, err)
		return
	}
	var files []string
	for _, n := range names {
		if strings.HasSuffix(n, ".wal") || n == "first-lsn" || n == "truncate-lsn" || n == "epoch" {
			files = append(files, n)
		}
	}
	if len(files) == 0 {
		return
	}
	sort.Strings(files)
	name := files[rt.File%len(files)]
	path := filepath.Join(dir, name)
	f, err := r.mem.OpenReadWrite(path, vfs.Fdatasync)
	if err != nil {
		r.violate("rot: opening %s: %v", path, err)
		return
	}
	size, err := f.Size()
	buf := make([]byte, size)
	if err == nil {
		_, err = f.ReadAt(buf, 0)
	}
	used := len(buf)
	for used > 0 && buf[used-1] == 0 {
		used--
	}
	if err != nil || used == 0 {
		f.Close()
		if err != nil && err != io.EOF {
			r.violate("rot: reading %s: %v", path, err)
		}
		return
	}
	at := int64(rt.At) * int64(used) / 65536
	b := []byte{buf[at] ^ rt.Xor}
	what := fmt.Sprintf("after rot (%s byte %d ^ %#x)", name, at, rt.Xor)
	// A sector zeroed along with the end frame of a clean Close cannot be
	// told from a crash that lost the last writes (docs/failure-model.md):
	// Open may then cut the records whose frames it touched (keeping their
	// bytes in a quarantine file), and keep every one before them.
	keepBefore := wal.LSN(math.MaxUint64)
	if rt.Zero {
		at &^= 511
		b = make([]byte, min(512, size-at))
		what = fmt.Sprintf("after rot (%s bytes %d to %d zeroed)", name, at, at+int64(len(b)))
		zeroEnd := at + int64(len(b))
		firstHit := wal.LSN(math.MaxUint64) // the first record frame the zeros touch; none: every record stays
		endHit := false
		if strings.HasSuffix(name, ".wal") {
			wal.InspectSegment(r.mem, path, func(fi wal.FrameInfo) error {
				touched := !fi.Stray && fi.Offset < zeroEnd && fi.Offset+fi.Size > at
				if touched && fi.Kind == wal.FrameRecord {
					firstHit = min(firstHit, fi.LSN)
				}
				if touched && fi.Kind == wal.FrameEnd {
					endHit = true
				}
				return nil
			})
		}
		if endHit {
			keepBefore = firstHit
		}
	}
	if _, err := f.WriteAt(b, at); err != nil {
		r.violate("rot: writing %s: %v", path, err)
	}
	f.Close()
	r.tracef("%s", what)
	want := make([]record, len(r.lineage))
	for i, e := range r.lineage {
		want[i] = record{e.lsn, e.data}
	}
	opts := r.options(Run{Policy: policy.SyncEveryCommit(), Method: vfs.Fdatasync, Recycle: 2}, r.mem)

	// Open: every record, or ErrCorrupt; never fewer or other records.
	var recs []record
	var rerr error
	var info wal.RecoveryInfo
	if !r.call("Open "+what, nil, func() { recs, info, rerr = openAndRead(dir, opts) }) {
		return
	}
	cut := rerr == nil && len(recs) < len(want) && isPrefix(recs, want) && want[len(recs)].lsn >= keepBefore
	r.reach(cut, "rot of the end frame's sector cut as a torn tail")
	switch {
	case cut && len(info.Quarantined) == 0:
		r.violate("Open %s cut %d records (the documented lost-sector limit) but kept no quarantine file: %+v", what, len(want)-len(recs), info)
		return
	case cut:
		want = recs // what the log holds now
	case rerr != nil && !errors.Is(rerr, wal.ErrCorrupt):
		r.violate("Open %s: %v, not ErrCorrupt", what, rerr)
		return
	case rerr == nil && !equalRecs(recs, want):
		r.violate("Open %s read %s, the log held %s, and reported no damage", what, describe(recs), describe(want))
		return
	case rerr != nil && !isPrefix(recs, want):
		r.violate("Open %s read %s before reporting damage, not a prefix of the log's %s", what, describe(recs), describe(want))
		return
	}
	r.tracef("Open %s: %s, %v", what, describe(recs), rerr)
	r.reach(rerr != nil, "rot reported as damage")

	// Salvage: a prefix of the log.
	var salvaged []record
	var rep wal.SalvageReport
	var serr error
	if !r.call("Salvage "+what, nil, func() {
		rep, serr = wal.Salvage(dir, opts, func(lsn wal.LSN, rec []byte) error {
			salvaged = append(salvaged, record{lsn, bytes.Clone(rec)})
			return nil
		})
	}) {
		return
	}
	if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
		r.violate("Salvage %s: %v", what, serr)
		return
	}
	r.tracef("Salvage %s: %s, clean %v, damage %v", what, describe(salvaged), rep.Clean, rep.Damage)
	if !isPrefix(salvaged, want) {
		r.violate("Salvage %s read %s, not a prefix of the log's %s (report %+v)", what, describe(salvaged), describe(want), rep)
		return
	}

	// Repair: the salvaged prefix, in a log Open accepts.
	var rr wal.RepairReport
	var perr error
	if !r.call("Repair "+what, nil, func() { rr, perr = wal.Repair(dir, opts) }) {
		return
	}
	if perr != nil {
		if !errors.Is(perr, wal.ErrNotRepaired) {
			r.violate("Repair %s: %v", what, perr)
		} else if len(salvaged) > 0 && rerr != nil {
			r.tracef("Repair %s: %v with %s salvageable", what, perr, describe(salvaged))
		}
		return
	}
	r.tracef("Repair %s: needed %v, evidence %v, %d records lost", what, rr.Needed, rr.Evidence, rr.LostRecords)
	r.reach(rr.Needed, "rot repaired")
	if rr.Needed {
		want = salvaged
	}
	var after []record
	var aerr error
	if !r.call("Open after Repair "+what, nil, func() { after, _, aerr = openAndRead(dir, opts) }) {
		return
	}
	switch {
	case aerr != nil && errors.Is(aerr, fs.ErrNotExist) && len(want) == 0:
	case aerr != nil:
		r.violate("Open after Repair %s (needed %v): %v", what, rr.Needed, aerr)
		return
	case !equalRecs(after, want):
		r.violate("Open after Repair %s (needed %v) read %s, want %s", what, rr.Needed, describe(after), describe(want))
		return
	}
	if !r.call("second Repair "+what, nil, func() { rr, perr = wal.Repair(dir, opts) }) {
		return
	}
	if perr != nil || rr.Needed {
		r.violate("a second Repair %s: needed %v, %v", what, rr.Needed, perr)
	}
}

// isPrefix reports whether got is want's first len(got) records.
func isPrefix(got, want []record) bool {
	return len(got) <= len(want) && equalRecs(got, want[:len(got)])
}
