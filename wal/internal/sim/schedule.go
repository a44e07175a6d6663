// Package sim is a deterministic, seeded explorer of crash and fault
// schedules for package wal, in the style of TigerBeetle's VOPR,
// FoundationDB's simulation and Pebble's metamorphic test.
//
// A Schedule is a list of runs on one in-memory filesystem (vfs.MemFS):
// each run opens the log with random options, performs appends, batches,
// syncs, cuts (TruncateFrom), removals (RemoveBefore), reads and
// read-only opens, with faults armed at any point (failed or short
// writes, failed syncs, held syncs, a frozen filesystem), and ends in a
// clean Close, a process crash or a power loss in one of the MemFS modes.
// Run checks every recovery against an oracle: acknowledged records are
// there at their LSN, byte-exact and in order; nothing cut, removed or
// never appended in the current lineage comes back; and OpenReadOnly's
// verdict on a crash image is Open's, with or without VerifyOnOpen. Half
// the schedules then flip a byte of the closed log (Rot) and check Open,
// Salvage and Repair on the damage.
//
// A Schedule is generated from a Source: a seeded PRNG (Generate with
// NewSeedSource) or the bytes of a fuzz input (NewByteSource), so the same
// seed or the same bytes always give the same schedule. The execution runs
// the log's own goroutines, so the interleaving of its background work
// (sealing, preparing, flushing) is not replayed exactly; most violations
// reproduce from their seed regardless.
//
// The package is test tooling: it is imported only by its own tests.
package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// A Source gives the generator its choices. Intn returns a value in
// [0, n) for 1 ≤ n ≤ 65536.
type Source interface {
	Intn(n int) int
}

// seedSource draws choices from a PCG seeded with one number.
type seedSource struct{ r *rand.Rand }

// NewSeedSource returns a Source drawing from a PCG seeded with seed.
func NewSeedSource(seed uint64) Source {
	return &seedSource{r: rand.New(rand.NewPCG(seed, 0x5157_0025))}
}

func (s *seedSource) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	return s.r.IntN(n)
}

// byteSource decodes choices from a byte string: one byte for n ≤ 256,
// two (little endian) above, reduced modulo n; 0 once the bytes run out.
type byteSource struct {
	b   []byte
	pos int
}

// NewByteSource returns a Source that decodes its choices from b (a fuzz
// input). Every byte string decodes to a valid schedule.
func NewByteSource(b []byte) Source { return &byteSource{b: b} }

func (s *byteSource) next() int {
	if s.pos >= len(s.b) {
		return 0
	}
	v := int(s.b[s.pos])
	s.pos++
	return v
}

func (s *byteSource) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := s.next()
	if n > 256 {
		v |= s.next() << 8
	}
	return v % n
}

// recorder wraps a Source and encodes each choice so that a byteSource
// replays it exactly: Generate(NewByteSource(rec.Bytes())) is the same
// schedule as the one the recorder saw generated.
type recorder struct {
	src Source
	out []byte
}

func (r *recorder) Intn(n int) int {
	v := r.src.Intn(n)
	if n <= 1 {
		return v
	}
	r.out = append(r.out, byte(v))
	if n > 256 {
		r.out = append(r.out, byte(v>>8))
	}
	return v
}

// EncodeSeed returns the fuzz input (the choice bytes) that decodes to
// the schedule of seed.
func EncodeSeed(seed uint64) []byte {
	r := &recorder{src: NewSeedSource(seed)}
	Generate(r)
	return r.out
}

// Schedule is what one simulation does: the log directory, the segment
// size, and the runs in order on one MemFS.
type Schedule struct {
	Dir         string
	SegmentSize int64
	Runs        []Run
	Rot         *Rot // damage done after the final clean Close (nil: none)
}

// Rot is damage done to the log once it was closed cleanly at the end of
// a schedule, as a failing disk or a stray write would: the bits Xor of
// one byte flipped in one of its files (segments and the first-lsn,
// truncate-lsn and epoch records).
type Rot struct {
	File int  // which file: an index into their sorted names, modulo their number
	At   int  // which byte: At/65536 of the way through the file's bytes up to its last non-zero one
	Xor  byte // never 0
	// Zero, instead of flipping bits, zeroes the 512-byte sector holding
	// that byte: a lost or misdirected write, which reads as zeros.
	Zero bool
}

// Run is one life of the log: Open with options, operations, an end.
type Run struct {
	Policy    policy.Policy
	Method    vfs.SyncMethod
	Recycle   int
	OpenFault *Fault // armed for Open itself (nil: none)
	Ops       []Op
	End       End
}

// OpKind names an operation of a run.
type OpKind uint8

// The operations of a run.
const (
	OpAppend   OpKind = iota // Append one record (Force: with ForceSync)
	OpBatch                  // AppendBatch of Count records
	OpSync                   // Log.Sync
	OpTruncate               // TruncateFrom the Back-th last record
	OpRemove                 // RemoveBefore the Back-th last record
	OpRead                   // a Reader from FirstLSN to the end, ReadRecord of one record
	OpReadOnly               // OpenReadOnly of the live directory, read to the end
	OpArm                    // arm Fault for the following operations
)

// Op is one operation of a run.
type Op struct {
	Kind  OpKind
	Size  int  // payload bytes (each record of a batch: Size, or sizes around it)
	Count int  // records in a batch
	Same  bool // sizes of the records last cut or lost, as a Raft follower re-receives them
	Force bool // ForceSync
	Back  int  // records back from the end (TruncateFrom, RemoveBefore)
	Fault Fault
}

// FaultKind says what an armed fault does.
type FaultKind uint8

// The kinds of faults.
const (
	FaultFail     FaultKind = iota // the operation fails with Errno, does nothing
	FaultShort                     // a write writes Keep bytes and fails with Errno
	FaultSyncLost                  // a sync fails as Linux's does: the bytes it covered are lost (MemFS.FailNextSync)
	FaultHold                      // the operation blocks until the run ends (a held sync)
	FaultFreeze                    // the crash happens before the operation: image taken, every later operation blocks
)

// Target limits a fault to operations on some files.
type Target uint8

// The targets of a fault.
const (
	TargetAny     Target = iota
	TargetSegment        // *.wal
	TargetRecord         // the small record files (first-lsn, truncate-lsn) and temporary files
	TargetDir            // directory operations (SyncDir, Rename, Remove, Create)
)

// Fault is armed at a point of a run: it fires on the N-th operation of
// kind On (any kind if 0) on Target counted from there.
type Fault struct {
	Kind   FaultKind
	On     faultfs.OpKind
	Target Target
	N      int
	Errno  syscall.Errno
	Keep   int
	Crash  End // for FaultFreeze: the crash imaged at the freeze
}

// EndKind says how a run ends.
type EndKind uint8

// How a run ends.
const (
	EndClose   EndKind = iota // Close, and the next run opens the same disk
	EndProcess                // process crash: MemFS.ProcessCrash
	EndPower                  // power loss: MemFS.PowerLoss(Mode)
)

// End is how a run ends.
type End struct {
	Kind  EndKind
	Mode  int // for EndPower: 0 DropAll, 1 KeepAll, 2 TearAtSector, 3 KeepRandomSubsetOfBlocks
	Seed  int64
	Block int // block size of KeepRandomSubsetOfBlocks
}

// CrashMode returns the vfs.CrashMode of a power loss.
func (e End) CrashMode() vfs.CrashMode {
	switch e.Mode {
	case 1:
		return vfs.KeepAll()
	case 2:
		return vfs.TearAtSector(e.Seed)
	case 3:
		return vfs.KeepRandomSubsetOfBlocks(e.Block, e.Seed)
	}
	return vfs.DropAll()
}

func (e End) String() string {
	switch e.Kind {
	case EndClose:
		return "Close"
	case EndProcess:
		return "process crash"
	}
	return "power loss " + e.CrashMode().String()
}

var segmentSizes = []int64{4 << 10, 4 << 10, 4 << 10, 8 << 10, 8 << 10, 16 << 10, 64 << 10}

var dirs = []string{"/wal", "/data/wal", "/var/lib/node1/raft/wal"}

func pickPolicy(s Source) policy.Policy {
	ms := func() time.Duration { return time.Duration(1+s.Intn(20)) * time.Millisecond }
	switch s.Intn(9) {
	case 0, 1:
		return policy.SyncEveryCommit()
	case 2:
		return policy.SyncEveryN(1 + s.Intn(4))
	case 3:
		return policy.SyncInterval(ms())
	case 4:
		d := ms()
		return policy.SyncIntervalPostponed(d, d*time.Duration(s.Intn(3)))
	case 5:
		d := ms()
		return policy.BufferedInterval(d, time.Duration(1+s.Intn(int(d/time.Millisecond)))*time.Millisecond)
	case 6:
		return policy.AsyncCommit(ms(), int64(s.Intn(3))*4096)
	default:
		return policy.SyncNever()
	}
}

var errnos = []syscall.Errno{syscall.EIO, syscall.EIO, syscall.ENOSPC}

var faultOps = []faultfs.OpKind{faultfs.OpWrite, faultfs.OpWrite, faultfs.OpSync, faultfs.OpSync, faultfs.OpSync, faultfs.OpSyncDir,
	faultfs.OpRename, faultfs.OpRemove, faultfs.OpCreate, faultfs.OpRead, faultfs.OpTruncate, 0}

func pickCrash(s Source) End {
	e := End{Kind: EndPower, Mode: s.Intn(4), Seed: int64(s.Intn(1 << 16)), Block: 512}
	if s.Intn(4) == 0 {
		e.Block = 4096
	}
	return e
}

func pickFault(s Source, inOpen bool) Fault {
	f := Fault{On: faultOps[s.Intn(len(faultOps))], Target: Target(s.Intn(4)), N: 1 + s.Intn(3), Errno: errnos[s.Intn(len(errnos))]}
	if s.Intn(3) == 0 {
		f.N = 1 + s.Intn(8)
	}
	if inOpen && s.Intn(2) == 0 {
		f.On = faultfs.OpRead
	}
	switch r := s.Intn(10); {
	case r < 4:
		f.Kind = FaultFail
	case r < 5:
		f.Kind = FaultShort
		f.On = faultfs.OpWrite
		f.Keep = s.Intn(600)
	case r < 7:
		f.Kind = FaultSyncLost
		f.On = faultfs.OpSync
	case r < 8 && !inOpen:
		f.Kind = FaultHold
		if s.Intn(3) > 0 {
			f.On = faultfs.OpSync
		}
	default:
		f.Kind = FaultFreeze
		f.Crash = pickCrash(s)
		if s.Intn(3) == 0 {
			f.Crash = End{Kind: EndProcess}
		}
	}
	if inOpen && s.Intn(2) == 0 {
		// Open's repairs (rewriting unvouched frames, zeroing a torn
		// tail, finishing a cut) end in a segment sync: lose it
		f = Fault{Kind: FaultSyncLost, On: faultfs.OpSync, Target: TargetSegment, N: 1 + s.Intn(2), Errno: f.Errno}
	}
	return f
}

// Generate returns the schedule that s's choices describe.
func Generate(s Source) *Schedule {
	sch := &Schedule{Dir: dirs[s.Intn(len(dirs))], SegmentSize: segmentSizes[s.Intn(len(segmentSizes))]}
	nruns := 2 + s.Intn(6)
	for range nruns {
		r := Run{Policy: pickPolicy(s), Method: vfs.SyncMethods()[s.Intn(len(vfs.SyncMethods()))], Recycle: s.Intn(4)}
		if s.Intn(4) == 0 {
			f := pickFault(s, true)
			r.OpenFault = &f
		}
		// record sizes of this run: small, around a few hundred bytes, or
		// large enough to roll every few records; sometimes one size only
		base := []int{1 + s.Intn(40), 100 + s.Intn(500), 300, int(sch.SegmentSize)/(3+s.Intn(6)) - 24}[s.Intn(4)]
		fixed := s.Intn(3) == 0
		size := func() int {
			if fixed {
				return base
			}
			return max(1, base/2+s.Intn(base+1))
		}
		// a follower's appends re-send the sizes of what was last cut or
		// lost first, so rolls land on the LSNs they landed on before
		follower := s.Intn(2) == 0
		// half the runs arm no fault: crashes alone, on a log that is not
		// poisoned, reach further (rolls into kept files, cuts, reuse)
		faulty := s.Intn(2) == 0
		nops := 3 + s.Intn(30)
		armed := 0
		if s.Intn(2) == 0 {
			// the crash comes at a random filesystem operation of the
			// run, in the middle of a roll, a cut or a sealing
			c := pickCrash(s)
			if s.Intn(3) == 0 {
				c = End{Kind: EndProcess}
			}
			r.Ops = append(r.Ops, Op{Kind: OpArm, Fault: Fault{Kind: FaultFreeze, N: 1 + s.Intn(400), Crash: c}})
		}
		for range nops {
			var op Op
			switch x := s.Intn(100); {
			case x < 40:
				op = Op{Kind: OpAppend, Size: size(), Same: follower || s.Intn(3) == 0, Force: s.Intn(8) == 0}
			case x < 58:
				op = Op{Kind: OpBatch, Size: size(), Count: 2 + s.Intn(14), Same: follower || s.Intn(3) == 0, Force: s.Intn(8) == 0}
			case x < 68:
				op = Op{Kind: OpSync}
			case x < 76:
				op = Op{Kind: OpTruncate, Back: s.Intn(12)}
			case x < 82:
				op = Op{Kind: OpRemove, Back: s.Intn(16)}
			case x < 87:
				op = Op{Kind: OpRead}
			case x < 90:
				op = Op{Kind: OpReadOnly}
			default:
				if armed >= 2 || !faulty {
					op = Op{Kind: OpSync}
					break
				}
				armed++
				op = Op{Kind: OpArm, Fault: pickFault(s, false)}
				// often aim the fault at the operation that follows
				switch s.Intn(6) {
				case 0:
					r.Ops = append(r.Ops, op)
					op = Op{Kind: OpTruncate, Back: s.Intn(12)}
				case 1:
					r.Ops = append(r.Ops, op)
					op = Op{Kind: OpRemove, Back: s.Intn(16)}
				case 2:
					r.Ops = append(r.Ops, op)
					op = Op{Kind: OpBatch, Size: size(), Count: 2 + s.Intn(14), Same: true}
				}
			}
			r.Ops = append(r.Ops, op)
		}
		switch e := s.Intn(10); {
		case e < 3:
			r.End = End{Kind: EndClose}
		case e < 5:
			r.End = End{Kind: EndProcess}
		default:
			r.End = pickCrash(s)
		}
		sch.Runs = append(sch.Runs, r)
	}
	// Drawn last, so that every earlier choice (and so a seed's or a
	// corpus input's runs) is what it was before rot existed; an input
	// that runs out of bytes draws none.
	if s.Intn(2) == 1 {
		sch.Rot = &Rot{File: s.Intn(256), At: s.Intn(65536), Xor: byte(1 + s.Intn(255)), Zero: s.Intn(2) == 1}
	}
	return sch
}

func (f Fault) String() string {
	var b strings.Builder
	on := "filesystem operation"
	if f.On != 0 {
		on = f.On.String()
	}
	tg := [...]string{"", " of a segment", " of a record/temp file", " of the directory"}[f.Target]
	switch f.Kind {
	case FaultFail:
		fmt.Fprintf(&b, "fail the %s %s%s with %v", ordinal(f.N), on, tg, f.Errno)
	case FaultShort:
		fmt.Fprintf(&b, "short %s %s%s: %d bytes, then %v", ordinal(f.N), on, tg, f.Keep, f.Errno)
	case FaultSyncLost:
		fmt.Fprintf(&b, "lose the %s %s%s (Linux failed fsync: %v, pages dropped)", ordinal(f.N), on, tg, f.Errno)
	case FaultHold:
		fmt.Fprintf(&b, "hold the %s %s%s until the crash", ordinal(f.N), on, tg)
	case FaultFreeze:
		fmt.Fprintf(&b, "crash (%s) before the %s %s%s", f.Crash, ordinal(f.N), on, tg)
	}
	return b.String()
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

func (op Op) String() string {
	force := ""
	if op.Force {
		force = " ForceSync"
	}
	same := ""
	if op.Same {
		same = " (sizes of the records last cut or lost, if any)"
	}
	switch op.Kind {
	case OpAppend:
		return fmt.Sprintf("Append %d bytes%s%s", op.Size, force, same)
	case OpBatch:
		return fmt.Sprintf("AppendBatch %d records of ~%d bytes%s%s", op.Count, op.Size, force, same)
	case OpSync:
		return "Sync"
	case OpTruncate:
		return fmt.Sprintf("TruncateFrom the LSN of the record %d back from the end", op.Back)
	case OpRemove:
		return fmt.Sprintf("RemoveBefore the LSN of the record %d back from the end", op.Back)
	case OpRead:
		return "read all (Reader from FirstLSN) and ReadRecord"
	case OpReadOnly:
		return "OpenReadOnly of the live directory, read all"
	case OpArm:
		return "arm fault: " + op.Fault.String()
	}
	return fmt.Sprintf("op %d", op.Kind)
}

// String prints the schedule as readable steps.
func (s *Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "dir %s, segment size %d\n", s.Dir, s.SegmentSize)
	for i, r := range s.Runs {
		fmt.Fprintf(&b, "run %d: Open policy %s, sync method %v, RecycleSegments %d\n", i, r.Policy, r.Method, r.Recycle)
		if r.OpenFault != nil {
			fmt.Fprintf(&b, "  (Open with fault: %s)\n", r.OpenFault)
		}
		for j, op := range r.Ops {
			fmt.Fprintf(&b, "  %d.%d %s\n", i, j, op)
		}
		fmt.Fprintf(&b, "  end: %s\n", r.End)
	}
	b.WriteString("final: Open, verify, Close, reopen, verify\n")
	if rt := s.Rot; rt != nil && rt.Zero {
		fmt.Fprintf(&b, "rot: zero the sector of the byte %d/65536 of the way through file %d (sorted, modulo their number); Open, Salvage, Repair, Open, Repair\n", rt.At, rt.File)
	} else if rt != nil {
		fmt.Fprintf(&b, "rot: flip bits %#x of the byte %d/65536 of the way through file %d (sorted, modulo their number); Open, Salvage, Repair, Open, Repair\n", rt.Xor, rt.At, rt.File)
	}
	return b.String()
}
