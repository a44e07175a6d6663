package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/internal/decide"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// Log is an open write-ahead log. It is safe for concurrent use: appends
// from many goroutines are serialised into one LSN order and frames never
// interleave.
type Log struct {
	// Fixed once Open returns.
	dir      string
	opts     Options
	fs       vfs.FS
	pol      policy.Policy
	lock     io.Closer
	q        *groupcommit.Queue
	opened   time.Time      // monotonic origin of the nanosecond clocks below
	info     RecoveryInfo   // what Open's recovery found and did
	method   vfs.SyncMethod // the sync method in use (after any fallback)
	fellBack bool           // method is a fallback from opts.SyncMethod
	opening  bool           // Open is running: a refused method may fall back
	readOnly bool           // opened by OpenReadOnly: nothing is written, removed or synced
	madeDir  bool           // Open created the log directory (and synced its parent)
	syncKick chan struct{}  // wakes the flusher for an incremental sync (Options.IncrementalSync); nil if off
	stop     chan struct{}  // closed by Close to stop the background flusher
	wg       sync.WaitGroup // background flusher, segment preparers, log-buffer handoff writers

	// rec is what recovery decided (plan.go); Open applies it, and nothing
	// reads it after.
	rec struct {
		plan recoveryPlan
		cut  LSN // a recorded cut recovery reads the log as finished at (noCutLSN: none)
	}

	// app is the append side: its lock (the append lock) is held to give a
	// record its LSN and copy it into the log buffer.
	app struct {
		sync.Mutex
		next          LSN        // where the next frame goes (the appended LSN)
		active        *logBuffer // frames appended but not yet taken by a flush
		seg           *segment   // segment that receives the frame at next
		epoch         epochRule  // the epoch new frames carry (epoch.go); changed only with appends held
		closed        bool
		postponeStart time.Time // first commit whose write was postponed (Redis everysec)
		delayedSeen   bool      // the current postponement was already counted as delayed
	}

	// prep makes the next segment ahead of the roll that needs it, from the
	// recycle pool when it can (prepare.go).
	prep preparer

	// leader is owned by the flush leader (groupcommit runs one FlushFunc at
	// a time).
	leader struct {
		spareBuf        *logBuffer
		groupsSinceSync atomic.Int64
		zeros           []byte       // zeroAhead's buffer, made on first use
		writeSize       atomic.Int64 // moving average of the frame bytes per write (largeWrites)
	}

	// flushing is held by the flush leader while it flushes, and by
	// TruncateFrom.
	flushing struct {
		sync.Mutex
		shut bool // Close is closing the files: no flush may start
	}

	// qbase maps LSNs to the group-commit queue's positions (LSN + qbase),
	// which only go up: TruncateFrom lowers the LSNs and raises qbase by
	// as much, so a stale watermark or waiter can never cover a new frame.
	// Written under flushing, app and syncMu together; read under any one.
	qbase uint64

	syncMu  sync.Mutex // serialises every sync of a segment file (no two ever run on one file at once)
	truncMu sync.Mutex // serialises TruncateFrom calls

	// write is the write side: its fields change under flushing and write's
	// own lock (the roll lock), and are read under either.
	write struct {
		sync.Mutex
		seg  *segment // segment that receives the write at the written LSN
		seal *seal    // the last roll's sealing of the segment it finished (nil before the first roll)
		dio  dioState // direct-I/O state of seg
	}

	// segs lists the installed segments; its lock is held only to read or
	// change the list.
	segs struct {
		sync.Mutex
		firsts []LSN   // first LSNs, ascending
		sizes  []int64 // file sizes in bytes, in the same order
	}

	// removal serializes RemoveBefore calls; held across their file removals
	// and syncs.
	removal struct {
		sync.Mutex
		leftover []LSN // segments below the recorded start that a failed RemoveBefore left
	}

	// reads is read-locked by ReadRecord's file reads and locked by
	// RemoveBefore, TruncateFrom and Close.
	reads struct {
		sync.RWMutex
		closed bool // Close closed the read handles: no read may open one
	}
	rfiles struct {
		sync.Mutex
		m map[LSN]*readHandle // read-only segment handles of ReadRecord, by first LSN
	}
	tail struct {
		sync.Mutex
		ch      chan struct{} // closed when the written or synced LSN moves (or the log closes); nil while no Reader waits
		waiting atomic.Bool   // ch is not nil
	}
	readers struct {
		sync.Mutex
		m map[*Reader]struct{} // open Readers, told of truncations
	}

	// Positions, clocks and counters, read without a lock.
	appended, written, synced atomic.Uint64
	lastSyncStart             atomic.Int64 // ns since opened
	lastWrite                 atomic.Int64 // ns since opened
	syncInProgress            atomic.Bool
	writing                   atomic.Bool // a flush swapped a half out and has not finished writing and syncing it
	poisonErr                 atomic.Pointer[error]
	tmpSeq                    atomic.Int64
	stats                     counters
}

// Open opens the log in dir, creating dir (and any missing parents) and an
// empty log if needed, and recovers an existing one. A directory it creates
// is made durable: its parent directory is synced after the mkdir. In
// recovery a torn tail is truncated (synced) without error, while damage in
// the synced data of the last segment, a missing segment, or a bad segment
// header makes Open fail with a *CorruptionError (errors.Is(err,
// ErrCorrupt)) naming the segment and byte offset. Sealed segments are
// trusted by their header and link frame (damage inside them is reported by
// the Reader or ReadRecord that reaches it) unless Options.VerifyOnOpen is
// set, which makes Open check and fail on them too. The directory is locked against a second Log.
//
// Errors: ErrInvalidOptions for bad options (also a SegmentSize that is not
// a multiple of the direct-I/O alignment under O_DIRECT),
// ErrSyncMethodUnsupported if the filesystem or platform refuses
// Options.SyncMethod and no fallback was allowed, ErrForeignFile for a file
// the log did not create, ErrCorrupt, ErrUnsupportedVersion for a segment
// of another format version, vfs.ErrLocked, ErrNoSpace if the first
// segment cannot be created, or the filesystem's error with the path.
func Open(dir string, opts Options) (*Log, error) {
	l, err := newLog(dir, opts)
	if err != nil {
		return nil, err
	}
	q := l.q
	if err := l.makeDir(dir); err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	if err := l.refuseForeign(dir); err != nil {
		return nil, err
	}
	lock, err := l.fs.Lock(dir + "/" + lockName)
	if err != nil {
		return nil, lockError(dir, err)
	}
	l.lock = lock
	noteHeld(dir, true)
	l.opening = true
	recoverStart := time.Now()
	err = l.recover()
	l.info.Duration = time.Since(recoverStart)
	l.opening = false
	if err != nil {
		l.closeFiles()
		lock.Close()
		noteHeld(dir, false)
		return nil, err
	}
	l.segs.Lock()
	l.publishSegmentsLocked()
	l.segs.Unlock()
	// Both halves are allocated at full size now: growing them by append
	// under the append lock copied megabytes per step and stalled commits
	// for up to hundreds of milliseconds in a slow VM, long enough to break
	// a buffered policy's loss bound in the first second.
	n := bufferPrealloc(l.opts)
	l.app.active = &logBuffer{start: l.app.next, buf: make([]byte, 0, n), seg: l.app.seg}
	l.leader.spareBuf = &logBuffer{buf: make([]byte, 0, n)}
	l.appended.Store(uint64(l.app.next))
	l.written.Store(uint64(l.app.next))
	l.synced.Store(uint64(l.app.next))
	q.Advance(uint64(l.app.next), uint64(l.app.next))
	if decide.Tick(l.pol) > 0 {
		if l.opts.IncrementalSync > 0 {
			l.syncKick = make(chan struct{}, 1)
		}
		l.wg.Add(1)
		go l.runFlusher()
	}
	l.opts.Logger.Info("wal: opened", "dir", dir, "lsn", l.app.next, "policy", l.pol.String(),
		"sync_method", l.method.String(), "segments", l.info.Segments, "torn_bytes", l.info.TornBytes)
	return l, nil
}

// newLog checks opts and dir and returns a Log for Open or OpenReadOnly to
// recover, with its group-commit queue.
func newLog(dir string, opts Options) (*Log, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory name", ErrInvalidOptions)
	}
	l := &Log{
		dir:    dir,
		opts:   opts,
		fs:     opts.FS,
		pol:    opts.Policy,
		opened: time.Now(),
		stop:   make(chan struct{}),
		method: opts.SyncMethod,
	}
	l.write.dio = dioState{align: 1, source: "none"}
	q, err := groupcommit.New(l.flush, opts.GroupCommit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o := opts.Observer; o != nil {
		q.OnGroup(func(size uint64, level groupcommit.Level) {
			o.ObserveGroup(GroupEvent{Size: size, Synced: level == groupcommit.Synced})
		})
	}
	l.q = q
	return l, nil
}

// foreignIfNotRegular marks err, if it is the filesystem's refusal of an
// entry that is not a regular file (vfs.ErrNotRegular), as ErrForeignFile:
// the log did not create it. Other errors are returned as they are.
func foreignIfNotRegular(err error) error {
	if errors.Is(err, vfs.ErrNotRegular) {
		return fmt.Errorf("%w: %w", ErrForeignFile, err)
	}
	return err
}

// makeDir creates dir and any missing parents, and makes them durable: a
// new directory's entry survives a power loss only once its parent directory
// is synced (like a created file's), so the parent of every directory it
// created is synced, top-down. A dir that exists already costs no sync.
// An existing dir holding a link or a special file is refused
// (ErrForeignFile) before Open creates anything in it, the lock file
// included; links in its ancestors are none of the log's business.
func (l *Log) makeDir(dir string) error {
	var missing []string // the directories to create, deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		_, err := l.fs.List(d)
		if errors.Is(err, vfs.ErrNotRegular) && d == filepath.Clean(dir) {
			return foreignIfNotRegular(err)
		}
		if err == nil || errors.Is(err, vfs.ErrNotRegular) {
			break // exists
		}
		if !errors.Is(err, fs.ErrNotExist) {
			// Not known to be missing: taking it for present could leave a
			// created directory with its parent unsynced, and the whole
			// log would vanish at a power loss.
			return fmt.Errorf("checking whether %s exists: %w", d, err)
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		parent := filepath.Dir(missing[i])
		if err := l.syncDirAt(parent); err != nil {
			return fmt.Errorf("syncing directory %s after creating %s: %w", parent, missing[i], err)
		}
	}
	l.madeDir = len(missing) > 0
	return nil
}

// AppendOption modifies one Append.
type AppendOption uint8

const (
	// ForceSync makes this commit wait for the sync covering it (and every
	// earlier record) whatever the policy, like a DDL commit under InnoDB's
	// =0/=2 or PostgreSQL's forceSyncCommit.
	ForceSync AppendOption = 1 << iota
)

// Append copies rec into the log buffer, assigns it the next LSN, and returns
// that LSN once the policy is satisfied: at once (buffered policies), after
// the write, or after the fdatasync covering rec, which concurrent callers
// share (group commit). Append does not retain rec. It is AppendContext with
// a background context and no options.
func (l *Log) Append(rec []byte) (LSN, error) {
	return l.AppendContext(context.Background(), rec)
}

// AppendContext is Append with a context and options. If ctx ends while the
// commit waits (including during the group delay, Options.GroupCommit.Delay),
// it returns at once with rec's LSN and ctx.Err(): rec is in the log and may
// still become durable. If ctx is already done when AppendContext is called,
// or ends before rec got an LSN (waiting for log-buffer space or a new
// segment), nothing is appended and the error matches both ErrNotAppended
// and ctx.Err() (errors.Is). Errors: ErrReadOnly (OpenReadOnly; nothing
// appended), ErrEmptyRecord, ErrRecordTooLarge (nothing
// appended), ErrClosed, ErrNoSpace (no new segment could be created; nothing
// appended, the log is not poisoned), an error matching ErrPoisoned after a
// failed write or sync, and for the commits of the group whose write or sync
// failed one that also matches ErrDurabilityUnknown.
func (l *Log) AppendContext(ctx context.Context, rec []byte, opts ...AppendOption) (LSN, error) {
	if l.readOnly {
		return 0, ErrReadOnly
	}
	if err := l.checkRecord(rec); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotAppended, err)
	}
	start := l.lockTimed()
	lsn, err := l.reserveLocked(ctx, rec, &start)
	if err != nil {
		l.app.Unlock()
		return 0, err
	}
	end, qend := l.app.next, uint64(l.app.next)+l.qbase
	w := l.commitWaitLocked(opts)
	l.app.Unlock()
	return lsn, l.commit(ctx, end, qend, w, start, 1)
}

// AppendBatch is AppendBatchContext with context.Background(): it appends
// recs in order as one commit and returns the first record's LSN.
func (l *Log) AppendBatch(recs [][]byte, opts ...AppendOption) (LSN, error) {
	return l.appendBatch(context.Background(), recs, nil, opts)
}

// AppendBatchContext appends recs in order as one commit: it waits once, for
// the last record, as the policy says (like a pipelined batch of commands in
// one Redis event-loop turn). It returns the LSN of the first record. Errors
// are those of AppendContext; if the batch stops after some records were
// appended (a context ending during a log-buffer or segment wait, no space,
// Close), the error is a *BatchError saying how many are in the log. If ctx
// is already done when AppendBatchContext is called, nothing is appended and
// the error matches both ErrNotAppended and ctx.Err(). Safe for concurrent
// use.
func (l *Log) AppendBatchContext(ctx context.Context, recs [][]byte, opts ...AppendOption) (LSN, error) {
	return l.appendBatch(ctx, recs, nil, opts)
}

// AppendBatchLSNs is AppendBatchContext that also reports every record's
// LSN (a Raft log store needs each entry's); like WaitDurable it has only a
// context form, as its callers always hold one. It stores the LSN of recs[i]
// in lsns[i], allocating nothing. lsns must have at least len(recs)
// elements: with fewer, nothing is appended and the error matches
// ErrInvalidArgument. On a *BatchError the first Appended elements are
// filled; with any other error none is. It returns the first record's LSN,
// and the errors of AppendBatchContext. Safe for concurrent use.
func (l *Log) AppendBatchLSNs(ctx context.Context, recs [][]byte, lsns []LSN, opts ...AppendOption) (LSN, error) {
	if l.readOnly {
		return 0, ErrReadOnly
	}
	if len(lsns) < len(recs) {
		return 0, fmt.Errorf("%w: AppendBatchLSNs: %d LSN slots for %d records", ErrInvalidArgument, len(lsns), len(recs))
	}
	return l.appendBatch(ctx, recs, lsns, opts)
}

// checkRecord returns ErrEmptyRecord or ErrRecordTooLarge for a record no
// append may take.
func (l *Log) checkRecord(rec []byte) error {
	if len(rec) == 0 {
		return ErrEmptyRecord
	}
	if len(rec) > l.opts.MaxRecordSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, len(rec), l.opts.MaxRecordSize)
	}
	return nil
}

func (l *Log) appendBatch(ctx context.Context, recs [][]byte, lsns []LSN, opts []AppendOption) (LSN, error) {
	if l.readOnly {
		return 0, ErrReadOnly
	}
	if len(recs) == 0 {
		return 0, ErrEmptyRecord
	}
	for _, rec := range recs {
		if err := l.checkRecord(rec); err != nil {
			return 0, err
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotAppended, err)
	}
	start := l.lockTimed()
	var first LSN
	for i, rec := range recs {
		lsn, err := l.reserveLocked(ctx, rec, &start)
		if err != nil {
			l.app.Unlock()
			if i == 0 {
				return 0, err
			}
			if errors.Is(err, ErrNotAppended) {
				err = ctx.Err() // the first i records were appended: not "nothing"
			}
			return first, &BatchError{Appended: i, First: first, Err: err}
		}
		if i == 0 {
			first = lsn
		}
		if lsns != nil {
			lsns[i] = lsn
		}
	}
	end, qend := l.app.next, uint64(l.app.next)+l.qbase
	w := l.commitWaitLocked(opts)
	l.app.Unlock()
	return first, l.commit(ctx, end, qend, w, start, len(recs))
}

// commitWaitLocked asks the policy what the commit just reserved waits for,
// and keeps the Redis postponement bookkeeping.
func (l *Log) commitWaitLocked(opts []AppendOption) policy.Wait {
	for _, o := range opts {
		if o&ForceSync != 0 {
			return policy.WaitSync
		}
	}
	if l.pol.Kind() != policy.KindSyncIntervalPostponed {
		return decide.Commit(l.pol, decide.State{}) // only the Redis postponement depends on the state
	}
	now := time.Now()
	st := l.stateLocked(now)
	w := decide.Commit(l.pol, st)
	if st.SyncInProgress {
		if w == policy.WaitNone && l.app.postponeStart.IsZero() {
			l.app.postponeStart = now
			l.stats.postponedWrites.Add(1)
		}
		if w == policy.WaitWrite && !l.app.postponeStart.IsZero() && !l.app.delayedSeen {
			l.app.delayedSeen = true
			l.stats.delayedWrites.Add(1) // Redis aof_delayed_fsync
		}
	}
	return w
}

// commit waits as w says for the frames ending at end (qend in the queue's
// positions). A commit that Close
// overtook (the queue then fails with ErrClosed) returns nil if Close's final
// flush covered it at the level it waits for: its record is durable (or
// written), so it must not be reported as failed. It records the commit's
// latency from start (when the call first had to wait, as time since
// l.opened; notTimed if it has not) to the return of the flush (or
// background sync) that covered it, read once by the queue for its whole
// group (groupcommit.Queue.WaitTimed), and reports it to the Observer with
// the number of records appended; a commit covered before it had to wait
// reads the clock itself. A commit that waits for nothing and never
// waited (policy.WaitNone, l.app free, no log-buffer or segment wait) reads
// no clock and counts as 0: it returns in the time of a copy, and two clock
// reads would cost a third of that.
func (l *Log) commit(ctx context.Context, end LSN, qend uint64, w policy.Wait, start time.Duration, records int) error {
	if start == notTimed && w != policy.WaitNone {
		start = time.Since(l.opened)
	}
	var err error
	var covered time.Time // when the flush that covered the commit returned; zero if none did
	switch w {
	case policy.WaitWrite:
		covered, err = l.q.WaitTimed(ctx, qend, groupcommit.Written)
		if errors.Is(err, ErrClosed) && LSN(l.written.Load()) >= end {
			err = nil
		}
	case policy.WaitSync:
		covered, err = l.q.WaitTimed(ctx, qend, groupcommit.Synced)
		if errors.Is(err, ErrClosed) && LSN(l.synced.Load()) >= end {
			err = nil
		}
	}
	var d time.Duration
	switch {
	case start == notTimed:
	case covered.IsZero():
		d = time.Since(l.opened) - start
	default:
		d = covered.Sub(l.opened) - start // monotonic readings both: no clock read
	}
	if err == nil { // counted in Commits by the histogram (Stats)
		l.stats.commitHist[min(w, policy.WaitSync)].record(d)
	}
	if o := l.opts.Observer; o != nil {
		o.ObserveCommit(CommitEvent{Wait: w, Records: records, Duration: d, Err: err})
	}
	return err
}

// notTimed is a commit's start before it had to wait for anything: its
// clock was not read (lockTimed).
const notTimed = time.Duration(-1 << 63)

// lockTimed locks l.app and returns notTimed, or, if l.app was held by
// another goroutine, the time (since l.opened) at which this one began to
// wait for it: a commit's latency runs from its first wait.
func (l *Log) lockTimed() time.Duration {
	if l.app.TryLock() {
		return notTimed
	}
	start := time.Since(l.opened)
	l.app.Lock()
	return start
}

// reserveLocked assigns rec the next LSN and copies its frame into the log
// buffer, rolling to a new segment or waiting for buffer space as needed.
// l.app is held on entry and on return, but may be released while waiting;
// before it waits, it sets *start (if still notTimed) to the time since
// l.opened.
func (l *Log) reserveLocked(ctx context.Context, rec []byte, start *time.Duration) (LSN, error) {
	fsz := frameSize(len(rec))
	w := appendWait{start: start}
	for {
		if err := l.usableLocked(); err != nil {
			return 0, err
		}
		if b := l.app.active; len(b.buf) > 0 && len(b.buf)+int(fsz) > l.opts.BufferSize {
			if err := l.awaitBufferLocked(ctx, &w); err != nil {
				return 0, err
			}
			continue
		}
		if l.segmentTakesLocked(fsz) {
			return l.copyFrameLocked(rec, fsz), nil
		}
		if err := l.nextSegmentLocked(ctx, fsz, &w); err != nil {
			return 0, err
		}
	}
}

// appendWait is what one append remembers across its waits: when it first
// waited (for the commit latency), whether its log-buffer wait was counted,
// and its deadline for a new segment on a full disk.
type appendWait struct {
	start    *time.Duration
	counted  bool
	deadline time.Time
}

// began records, once, that the append started waiting.
func (w *appendWait) began(l *Log) {
	if *w.start == notTimed {
		*w.start = time.Since(l.opened)
	}
}

// awaitBufferLocked waits while the log buffer is full: it hands the full
// half to a writer and returns once the other half is free to copy into.
// The append waits only while the previous half is still being written
// (Innodb_log_waits); the write of this one runs on, as InnoDB's log writer
// thread writes while transactions fill the log buffer. l.app is released
// while waiting.
func (l *Log) awaitBufferLocked(ctx context.Context, w *appendWait) error {
	b := l.app.active
	if !w.counted && l.writing.Load() { // every append that waits for it, not only the one handing b off
		w.counted = true
		l.stats.bufferFullWaits.Add(1)
	}
	if b.swapped == nil {
		b.swapped, b.flushed = make(chan struct{}), make(chan struct{})
		target, flushed := uint64(l.app.next)+l.qbase, b.flushed
		// In l.wg: the write may still run after the append returned, and
		// Close must not close the files under it (a log poisoned meanwhile
		// skips Close's final flush). Added under l.app with l.app.closed
		// false, before Close waits.
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// Errors reach the appends through usableLocked; a closed
			// log's last flush is Close's.
			l.q.Wait(context.Background(), target, groupcommit.Written)
			close(flushed)
		}()
	}
	swapped, flushed := b.swapped, b.flushed
	w.began(l)
	l.app.Unlock()
	select {
	case <-swapped:
	case <-flushed:
	case <-ctx.Done():
	}
	l.app.Lock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotAppended, err)
	}
	return nil
}

// segmentTakesLocked reports whether the segment appends go to has room for
// a frame of fsz bytes, and starts preparing the next segment once it is
// past 1/prepareAt full. A segment older than format 6 takes no new frame:
// its frames carry no epoch (a writable Open rolls away from it on the first
// append).
func (l *Log) segmentTakesLocked(fsz int64) bool {
	used := int64(l.app.next - l.app.seg.first)
	if l.app.seg.version < 6 || used+fsz > l.app.seg.room() { // room: an older unaligned tail stays unused under O_DIRECT
		return false
	}
	if l.prep.spare == nil && !l.prep.busy && l.prep.err == nil && used+fsz > l.app.seg.room()/prepareAt {
		l.startPrepareLocked()
	}
	return true
}

// nextSegmentLocked rolls appends to the prepared spare, or waits for the
// preparer to make one (up to Options.NoSpaceTimeout while the disk is
// full). l.app is released while waiting.
func (l *Log) nextSegmentLocked(ctx context.Context, fsz int64, w *appendWait) error {
	if fresh := (&segment{version: recycledVersion, size: l.opts.SegmentSize}).room(); fsz > fresh {
		// No new segment can take it: rolling would never end.
		// Options.validate bounds MaxRecordSize so this cannot happen;
		// refuse rather than trust that bound. (An older, smaller segment
		// that cannot take it is simply rolled away from.)
		return fmt.Errorf("%w: a %d-byte frame does not fit a new %d-byte segment (%d bytes of room)",
			ErrRecordTooLarge, fsz, l.opts.SegmentSize, fresh)
	}
	if s := l.prep.spare; s != nil { // roll: frames from here on go to the spare
		l.prep.spare = nil
		s.first = l.app.next
		l.app.active.rolls = append(l.app.active.rolls, roll{lsn: l.app.next, seg: s})
		l.app.seg = s
		return nil
	}
	w.began(l)
	if w.deadline.IsZero() {
		w.deadline = time.Now().Add(l.opts.NoSpaceTimeout)
		l.stats.segmentCreateStalls.Add(1) // once per append, however often it waits
	}
	waitStart := time.Now()
	err := l.awaitSpareLocked(ctx, w.deadline)
	l.stats.seg.addWait(time.Since(waitStart))
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w: %w", ErrNotAppended, err)
	}
	return err
}

// copyFrameLocked gives rec the next LSN and encodes its frame into the
// active half of the log buffer.
func (l *Log) copyFrameLocked(rec []byte, fsz int64) LSN {
	lsn := l.app.next
	b := l.app.active
	n := len(b.buf)
	b.buf = slices.Grow(b.buf, int(fsz))[:n+int(fsz)]
	encodeFrame(b.buf[n:], l.app.seg.format(), l.app.epoch.N, lsn, LSN(l.synced.Load()), rec)
	l.app.next += LSN(fsz)
	l.appended.Store(uint64(l.app.next))
	l.stats.appendRequests.Add(1)
	l.stats.bytesAppended.Add(uint64(len(rec)))
	return lsn
}

// usableLocked returns why the log takes no more appends, or nil.
func (l *Log) usableLocked() error {
	if l.app.closed {
		return ErrClosed
	}
	return l.poisoned()
}

// poisoned returns an error matching ErrPoisoned if a write or sync failed.
func (l *Log) poisoned() error {
	if p := l.poisonErr.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrPoisoned, *p)
	}
	return nil
}

// poison makes the log fail closed after a write or sync failure: every
// later call returns ErrPoisoned; the queue hands groupErr to every waiter.
func (l *Log) poison(cause error) {
	if l.poisonErr.CompareAndSwap(nil, &cause) {
		l.notifyTail() // waiting Readers see ErrPoisoned
		l.opts.Logger.Error("wal: poisoned: the log fails closed", "dir", l.dir, "err", cause)
		if o := l.opts.Observer; o != nil {
			o.ObservePoison(cause)
		}
	}
}

// prepareAt says when the next segment's preparation starts: once the
// segment receiving appends is more than 1/prepareAt full, so that a log
// writing at page-cache speed does not fill the segment before the next one
// is zero-filled and synced (docs/design.md, Measurements behind the
// defaults).
const prepareAt = 8

// Sync makes every record appended before the call durable, under any
// policy (like FLUSH LOGS or a forced sync commit). It returns nil once the
// sync covering them returned. Errors: ErrClosed, ErrPoisoned, ErrReadOnly
// (OpenReadOnly); SyncContext adds ctx's error.
func (l *Log) Sync() error { return l.SyncContext(context.Background()) }

// SyncContext is Sync with a context: if ctx ends first it returns ctx.Err()
// and the sync may still happen.
func (l *Log) SyncContext(ctx context.Context) error {
	if l.readOnly {
		return ErrReadOnly
	}
	l.app.Lock()
	err := l.usableLocked()
	qend := uint64(l.app.next) + l.qbase
	l.app.Unlock()
	if err != nil {
		return err
	}
	return l.q.Wait(ctx, qend, groupcommit.Synced)
}

// WaitDurable returns once the record at lsn is durable, forcing a sync if
// needed (the analogue of Redis WAITAOF). Errors: ErrReadOnly on a Log
// opened with OpenReadOnly (whatever lsn), ErrClosed once Close has
// been called (whatever lsn), ErrPoisoned, ErrNotFound if no record at or
// after lsn was appended, ctx's error.
func (l *Log) WaitDurable(ctx context.Context, lsn LSN) error {
	if l.readOnly {
		return ErrReadOnly // it may have to sync
	}
	l.app.Lock()
	err := l.usableLocked()
	qbase := l.qbase
	l.app.Unlock()
	if err != nil {
		return err
	}
	if LSN(l.synced.Load()) > lsn {
		return nil
	}
	if LSN(l.appended.Load()) <= lsn {
		return fmt.Errorf("%w: LSN %d not appended yet (appended %d)", ErrNotFound, lsn, l.appended.Load())
	}
	return l.q.Wait(ctx, uint64(lsn)+1+qbase, groupcommit.Synced)
}

// AppendedLSN returns the end of the last appended frame: where the next
// frame will go. Safe at any time.
func (l *Log) AppendedLSN() LSN { return LSN(l.appended.Load()) }

// WrittenLSN returns how far the log has been written to the OS: every frame
// ending at or before it survives a process crash. Safe at any time.
func (l *Log) WrittenLSN() LSN { return LSN(l.written.Load()) }

// SyncedLSN returns how far the log is durable: every frame ending at or
// before it survives a power loss. Safe at any time. On a Log opened with
// OpenReadOnly it is the recovered end, which makes no such claim (see
// OpenReadOnly).
func (l *Log) SyncedLSN() LSN { return LSN(l.synced.Load()) }

// Recovered returns what Open found and repaired. On a Log opened with
// OpenReadOnly nothing was repaired: it returns what Open would find and
// repair (see OpenReadOnly).
func (l *Log) Recovered() RecoveryInfo { return l.info }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }

// Close makes every appended record durable, stops the background flusher,
// releases the files and the directory lock, and fails every later call with
// ErrClosed. It ends at once any group delay (Options.GroupCommit.Delay) a
// commit is in. Commits still waiting when Close runs return nil if the final
// flush made their records durable (written, for a write-only wait), and
// ErrClosed otherwise; none is left waiting. A write or sync in flight,
// whoever started it, finishes before the files close, even on a poisoned
// log. Close returns the final flush's error (ErrPoisoned if the log
// was poisoned: then records after the synced LSN may be lost), or ErrClosed
// if already closed. On a Log opened with OpenReadOnly, Close only closes
// its files (no flush, no end frame, no sync: it writes nothing) and
// returns nil, or ErrClosed if already closed.
func (l *Log) Close() error {
	l.app.Lock()
	if l.app.closed {
		l.app.Unlock()
		return ErrClosed
	}
	l.app.closed = true
	qend := uint64(l.app.next) + l.qbase
	l.app.Unlock()
	close(l.stop)
	l.notifyTail() // waiting Readers see ErrClosed
	if l.readOnly {
		return l.closeReadOnly()
	}
	err := l.finalFlush(qend)
	// A RemoveBefore that passed its closed check finishes its removals
	// before the directory lock is released: another Log may open the
	// directory as soon as it is.
	l.removal.Lock()
	defer l.removal.Unlock()
	l.dropSpare()
	if err == nil {
		err = l.writeEnd()
	}
	if cerr := l.closeAll(); err == nil && cerr != nil {
		err = cerr
	}
	l.opts.Logger.Info("wal: closed", "dir", l.dir, "lsn", l.appended.Load(), "err", err)
	return err
}

// finalFlush makes every append up to the queue position qend durable
// (unless the log is poisoned), fails every later wait with ErrClosed, and
// returns once no goroutine of the log writes any more: the flusher,
// preparers, handoff writers, a flush led by an application goroutine, and
// the last roll's sealing. It returns the first error among them.
func (l *Log) finalFlush(qend uint64) error {
	l.q.Drain() // end any group delay at once: the final flush must not wait it out
	err := l.poisoned()
	if err == nil {
		err = l.q.Wait(context.Background(), qend, groupcommit.Synced)
	}
	l.q.Fail(ErrClosed)
	l.wg.Wait() // the flusher, any preparer and any handoff writer have stopped
	// A flush led by an application goroutine (an Append or Sync that
	// became the group's leader) may still be writing, on a poisoned log
	// above all, which Close did not wait on: let it finish, and let none
	// start, before the files close under it.
	l.flushing.Lock()
	l.flushing.shut = true
	l.flushing.Unlock()
	// On a poisoned log the log buffer was never written: close the files
	// of the segments its appends rolled to (nothing else holds them).
	l.app.Lock()
	discardRolls(l.app.active.rolls)
	l.app.Unlock()
	// The last roll's sealing (settled by the final flush's sync, unless
	// poisoned) finishes writing its link: nothing writes after Close.
	if serr := l.awaitSeal(false); err == nil && serr != nil {
		err = serr
	}
	return err
}

// closeAll closes the read handles, the segment files and the directory
// lock, and returns the first error.
func (l *Log) closeAll() error {
	l.reads.Lock()
	l.reads.closed = true
	l.closeReadHandles(1, 0) // every one
	l.reads.Unlock()
	err := l.closeFiles()
	if cerr := l.lock.Close(); err == nil && cerr != nil {
		err = cerr
	}
	noteHeld(l.dir, false)
	return err
}

// closeFiles closes the active segment's write handle.
// writeEnd ends a cleanly closed log with an end frame and syncs it. The
// end frame takes no LSN space: Open ends the log at its LSN, and the first
// append after Open overwrites it (a torn overwrite is a torn tail). Close
// calls it after its final sync, with the flusher stopped: every byte before
// l.app.next is durable, so the end frame's watermark (its own LSN) is true, and
// damage anywhere in the log is reported as ErrCorrupt rather than taken for
// a torn tail: by the next Open in the last segment (in every segment with
// VerifyOnOpen), by the Reader or ReadRecord that reaches it in a sealed one. A segment of format version 1 (opened
// from an older log) gets none, so older builds can still read it: the next
// Open verifies its tail by the watermark rule alone.
func (l *Log) writeEnd() error {
	s := l.write.seg
	// room() already keeps the end frame's bytes out of what appends fill,
	// so a version-2 segment always has them.
	if s == nil || s.version < 2 || LSN(l.written.Load()) != l.app.next ||
		int64(l.app.next-s.first) > s.room() {
		return nil
	}
	var b [endFrameSize]byte
	encodeEndFrame(b[:], s.format(), l.app.epoch.N, l.app.next, flagEnd)
	if err := l.writeAt(b[:], l.app.next); err != nil {
		return fmt.Errorf("wal: close: writing the end frame: %w", err)
	}
	if err := l.syncSegment(s.f); err != nil {
		return fmt.Errorf("wal: close: syncing the end frame: %w", err)
	}
	// The end frame is no record: the log ends before it. (Under a
	// write-through method writeAt advanced the synced LSN over it too.)
	l.written.Store(uint64(l.app.next))
	if l.synced.Load() > uint64(l.app.next) {
		l.synced.Store(uint64(l.app.next))
	}
	return nil
}

func (l *Log) closeFiles() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.write.seg == nil || l.write.seg.f == nil {
		return nil
	}
	err := l.write.seg.f.Close()
	l.write.seg.f = nil
	return err
}
