package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The power-loss mode (-power-loss N): the crash boot's disk sits behind
// QEMU's blklogwrites driver, which records every write the guest's kernel
// issued to it, with its data, and every cache flush, in the order they
// completed. A disk with a volatile write cache that loses power keeps
// everything written before its last completed flush and any subset of the
// writes issued since (a sector at a time: a write may be torn). From the
// recorded stream the lab builds such disk states, replays ext4's journal
// over each (e2fsck -fy, as a mount would), copies the log's directory out
// (debugfs rdump, no mount), and runs the verify boot's checks on the host.
//
// Which acknowledgements a state must keep: the guest writes an ack marker
// (startMarkers) beyond the filesystem whenever the published ack counts
// change. An ack was published after its commit's flush completed, and the
// marker counting it after that, so the commit's flush lies before the
// marker in the stream. A state that keeps everything up to flush F and a
// subset of the writes before the next flush F' must therefore keep every
// ack counted by the last marker before F' (before the end of the stream if
// there is no F'); it is judged as if the power failed at that marker's time.

const (
	plFsBytes   = 64 << 20                          // the filesystem in power-loss mode
	plDiskBytes = plFsBytes + markerSlots*markerLen // and the markers after it
)

// PowerLossOutcome is a trial's power-loss verdict in the -json output.
type PowerLossOutcome struct {
	Seed        uint64 // rebuilds every state of the trial (with its block log)
	Entries     int    // operations in the recorded stream
	Flushes     int    // cache flushes among them
	States      int    // disk states judged
	Lost        []uint64
	OldestLost  time.Duration // oldest lost ack's age at its state's power loss; -1 if none
	Violations  []string      // each names its state
	Seconds     float64       // building and judging the states
	MaxRequired uint64        // the largest ack count a state was judged against
	Kept        []string      // images kept (-power-loss-state)
	Boots       int           // states a verify boot also judged (-power-loss-boots)
	BootErrors  []string      // verify boots of states that hung or failed: the lab's failure
}

// plState names one disk state: the writes up to the flush that opens
// window Win, plus the subset Kind of the window's writes drawn from Seed.
type plState struct {
	Win  int
	Kind string // none, all, prefix, subset, torn
	Seed uint64
}

func (s plState) String() string { return fmt.Sprintf("%d:%s:%#x", s.Win, s.Kind, s.Seed) }

func parsePLState(s string) (plState, error) {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return plState{}, fmt.Errorf("state %q: want window:kind:seed", s)
	}
	w, err := strconv.Atoi(f[0])
	if err != nil {
		return plState{}, fmt.Errorf("state %q: %w", s, err)
	}
	seed, err := strconv.ParseUint(f[2], 0, 64)
	if err != nil {
		return plState{}, fmt.Errorf("state %q: %w", s, err)
	}
	return plState{Win: w, Kind: f[1], Seed: seed}, nil
}

// plWindow is the run of entries [Start, End) between two flushes; End is
// the closing flush's index, or len(entries) for the last window.
type plWindow struct {
	Start, End int
	Writes     []int  // indices of the filesystem's writes in the window
	Marker     []byte // the last ack marker before End, or nil
}

// plStream is a recorded stream cut into windows.
type plStream struct {
	ss      int
	entries []lwEntry
	wins    []plWindow
	flushes int
}

func loadStream(path string) (*plStream, error) {
	ss, es, err := readLogWrites(path)
	if err != nil {
		return nil, err
	}
	st := &plStream{ss: ss, entries: es}
	var marker []byte
	w := plWindow{}
	for i, e := range es {
		switch {
		case e.isFlush():
			st.flushes++
			w.End, w.Marker = i, marker
			st.wins = append(st.wins, w)
			w = plWindow{Start: i + 1}
			continue
		case e.Flags&lwDiscard != 0 && e.Sector*uint64(ss) < plFsBytes:
			w.Writes = append(w.Writes, i)
		case e.Data == nil:
		case e.Sector*uint64(ss) >= plFsBytes:
			for o := 0; o+markerLen <= len(e.Data); o += markerLen {
				if m := e.Data[o : o+markerLen]; binary.LittleEndian.Uint64(m) == markerMagic {
					if marker == nil || binary.LittleEndian.Uint64(m[8:]) > binary.LittleEndian.Uint64(marker[8:]) {
						marker = m
					}
				}
			}
		default:
			w.Writes = append(w.Writes, i)
		}
		if e.Flags&lwFUA != 0 { // durable when complete: a flush after it
			st.flushes++
			w.End, w.Marker = i+1, marker
			st.wins = append(st.wins, w)
			w = plWindow{Start: i + 1}
		}
	}
	w.End, w.Marker = len(es), marker
	st.wins = append(st.wins, w)
	return st, nil
}

// apply writes entry i into img (sectors beyond it are the markers' and
// skipped); keep, if not nil, says which of its sectors to write.
func (st *plStream) apply(img []byte, i int, keep func(sector int) bool) {
	e := st.entries[i]
	for k := range int(e.NrSectors) {
		off := (int(e.Sector) + k) * st.ss
		if off+st.ss > len(img) || keep != nil && !keep(k) {
			continue
		}
		if e.Flags&lwDiscard != 0 {
			clear(img[off : off+st.ss])
		} else {
			copy(img[off:off+st.ss], e.Data[k*st.ss:(k+1)*st.ss])
		}
	}
}

// build lays state s's writes of its window over img, which holds the disk
// as it was at the window's opening flush.
func (st *plStream) build(img []byte, s plState) {
	ws := st.wins[s.Win].Writes
	r := rand.New(rand.NewPCG(s.Seed, uint64(s.Win)))
	switch s.Kind {
	case "all":
		for _, i := range ws {
			st.apply(img, i, nil)
		}
	case "prefix":
		n := r.IntN(len(ws) + 1)
		for _, i := range ws[:n] {
			st.apply(img, i, nil)
		}
	case "subset", "torn":
		var torn []int
		for _, i := range ws {
			if r.IntN(2) == 0 {
				st.apply(img, i, nil)
			} else if st.entries[i].NrSectors > 1 {
				torn = append(torn, i)
			}
		}
		if s.Kind == "torn" && len(torn) > 0 {
			// One write that was not kept reaches the disk in part: a
			// random subset of its sectors.
			i := torn[r.IntN(len(torn))]
			st.apply(img, i, func(int) bool { return r.IntN(2) == 0 })
		}
	}
}

// pick chooses at most budget states: the last window whole and at its
// opening flush (the latter is what the OS crash left if nothing after the
// last flush was written back), then, shuffled by seed, each window's
// opening flush and its prefix, subset and torn states. "all" is kept for
// the last window only: elsewhere it is the next window's opening state,
// judged there against at least as many acks.
func (st *plStream) pick(budget int, seed uint64) []plState {
	sseed := func(w int, kind string) uint64 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/%s", seed, w, kind)
		return h.Sum64()
	}
	last := len(st.wins) - 1
	out := []plState{{last, "all", sseed(last, "all")}, {last, "none", sseed(last, "none")}}
	var cand []plState
	for w, win := range st.wins {
		if w != last {
			cand = append(cand, plState{w, "none", sseed(w, "none")})
		}
		if len(win.Writes) > 1 {
			for _, k := range []string{"prefix", "subset", "torn"} {
				cand = append(cand, plState{w, k, sseed(w, k)})
			}
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x706c))
	r.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
	out = append(out, cand[:max(0, min(len(cand), budget-len(out)))]...)
	if len(out) > budget {
		out = out[:budget]
	}
	slices.SortStableFunc(out, func(a, b plState) int { return a.Win - b.Win })
	return out
}

// judgeState checks one state's disk image: journal replay, the log's files
// copied out, the verify checks, and the acks its marker requires. It
// returns the verdict, or an error when the lab could not judge.
func judgeState(p labPolicy, slack time.Duration, img []byte, marker []byte, work []byte, scratch string) (Verdict, verified, error) {
	imgPath := filepath.Join(scratch, "state.img")
	if err := os.WriteFile(imgPath, img, 0o644); err != nil {
		return Verdict{}, verified{}, err
	}
	fsck := exec.Command("e2fsck", "-fy", imgPath)
	out, err := fsck.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() < 4) {
		return Verdict{Violations: []string{fmt.Sprintf("e2fsck could not repair the filesystem (%v): %s", err, lastLines(out, 3))}}, verified{}, nil
	}
	files := filepath.Join(scratch, "files")
	os.RemoveAll(files)
	if err := os.MkdirAll(files, 0o755); err != nil {
		return Verdict{}, verified{}, err
	}
	dump := exec.Command("debugfs", "-R", "rdump /wal "+files, imgPath)
	if out, err := dump.CombinedOutput(); err != nil {
		return Verdict{}, verified{}, fmt.Errorf("debugfs rdump: %v: %s", err, out)
	}
	dir := filepath.Join(files, "wal")
	if _, err := os.Stat(dir); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil { // before the log's directory was created
			return Verdict{}, verified{}, err
		}
	}
	v := verifyLog(dir, recMax)
	t := requiredTrial(p.Name, work, marker)
	t.OpenErr, t.ReopenErr, t.Recs = v.OpenErr, v.ReopenErr, v.Recs
	return Judge(t, p.Promise(slack)), v, nil
}

// bootState boots the guest's verify mode on a state's image (the kernel
// replays ext4's journal at mount) and reports any disagreement with what
// the host read from the same state after e2fsck: the reference for the
// host's journal replay.
func (l *lab) bootState(img []byte, host verified, scratch string) (string, error) {
	path := filepath.Join(scratch, "boot.img")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		return "", err
	}
	shmPath := filepath.Join(scratch, "boot.shm")
	if err := os.WriteFile(shmPath, make([]byte, shmSize), 0o600); err != nil {
		return "", err
	}
	defer os.Remove(shmPath)
	if _, err := l.boot(l.accel, path, "", shmPath, "cl.mode=verify", filepath.Join(scratch, "console-boot.log"), l.c.timeout); err != nil {
		return "", err
	}
	ver, err := os.ReadFile(shmPath)
	if err != nil {
		return "", err
	}
	guestOpen := u64(ver, hdrVerify)
	switch {
	case guestOpen == 0:
		return "", fmt.Errorf("the verify boot reported nothing: %s", msg(ver))
	case guestOpen == 2 && host.OpenErr == "":
		return fmt.Sprintf("the verify boot's Open failed (%s) where the host's succeeded", msg(ver)), nil
	case guestOpen == 1 && host.OpenErr != "":
		return fmt.Sprintf("the verify boot's Open succeeded where the host's failed (%s)", host.OpenErr), nil
	case guestOpen == 1 && int(u64(ver, hdrNRecs)) != host.N:
		return fmt.Sprintf("the verify boot read %d records, the host %d", u64(ver, hdrNRecs), host.N), nil
	}
	return "", nil
}

// requiredTrial is the crash boot's acks cut to those marker counts, timed
// at the marker (at the workload's start without one).
func requiredTrial(policy string, work, marker []byte) Trial {
	t := decode(policy, work, make([]byte, hdrMsg+hdrMsgMax)) // no verify results: only its header is read
	t.CrashNs = int64(u64(work, hdrStartNs))
	counts := make([]uint64, len(t.AckCounts))
	if marker != nil {
		t.CrashNs = int64(binary.LittleEndian.Uint64(marker[16:]))
		n := min(int(binary.LittleEndian.Uint64(marker[24:])), len(counts), (markerLen-32)/8)
		for g := range n {
			counts[g] = min(binary.LittleEndian.Uint64(marker[32+8*g:]), t.AckCounts[g])
		}
	}
	t.AckCounts = counts
	t.Acks = slices.DeleteFunc(t.Acks, func(a Ack) bool { return a.Gid >= uint64(len(counts)) || a.Seq >= counts[a.Gid] })
	return t
}

func lastLines(b []byte, n int) string {
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], " / ")
}

// powerLoss builds and judges the trial's power-loss states from the block
// log in dir (wlog.bin over disk0.img); only, if not empty, the states named.
func (l *lab) powerLoss(dir string, p labPolicy, work []byte, seed uint64, only []plState) (o PowerLossOutcome) {
	o = PowerLossOutcome{Seed: seed, OldestLost: -1}
	start := time.Now()
	defer func() { o.Seconds = time.Since(start).Seconds() }()
	fail := func(format string, a ...any) PowerLossOutcome {
		o.Violations = append(o.Violations, fmt.Sprintf(format, a...))
		return o
	}
	st, err := loadStream(filepath.Join(dir, "wlog.bin"))
	if err != nil {
		return fail("reading the block log: %v", err)
	}
	o.Entries, o.Flushes = len(st.entries), st.flushes
	base, err := os.ReadFile(filepath.Join(dir, "disk0.img"))
	if err != nil {
		return fail("%v", err)
	}
	states := only
	if states == nil {
		states = st.pick(l.c.powerLoss, seed)
	}
	// The states' images and files are scratch: in memory where there is
	// a tmpfs (the verify checks sync, and nothing here needs to survive).
	scratch, err := os.MkdirTemp("/dev/shm", "crashlab-pl-")
	if err != nil {
		scratch, err = os.MkdirTemp(dir, "pl-")
	}
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(scratch)
	cur := slices.Clone(base)
	img := make([]byte, len(base))
	at := 0 // cur holds the disk at window at's opening flush
	for k, s := range states {
		if s.Win < 0 || s.Win >= len(st.wins) {
			return fail("state %s: the stream has %d windows", s, len(st.wins))
		}
		if s.Win < at {
			copy(cur, base)
			at = 0
		}
		for ; at < s.Win; at++ {
			for _, i := range st.wins[at].Writes {
				st.apply(cur, i, nil)
			}
		}
		copy(img, cur)
		st.build(img, s)
		v, host, err := judgeState(p, l.c.slack, img, st.wins[s.Win].Marker, work, scratch)
		if err != nil {
			return fail("state %s: the lab could not judge it: %v", s, err)
		}
		if boots := l.c.powerLossBoots; boots > 0 && only == nil && (k*boots/len(states) != (k+1)*boots/len(states)) {
			why, err := l.bootState(img, host, scratch)
			switch {
			case err != nil:
				o.BootErrors = append(o.BootErrors, fmt.Sprintf("state %s: %v", s, err))
			case why != "":
				v.Violations = append(v.Violations, why)
				o.Boots++
			default:
				o.Boots++
			}
		}
		o.States++
		o.Lost = append(o.Lost, v.Lost)
		o.OldestLost = max(o.OldestLost, v.OldestLostAge)
		if m := st.wins[s.Win].Marker; m != nil {
			var n uint64
			for g := range min(int(binary.LittleEndian.Uint64(m[24:])), (markerLen-32)/8) {
				n += binary.LittleEndian.Uint64(m[32+8*g:])
			}
			o.MaxRequired = max(o.MaxRequired, n)
		}
		if only != nil { // a rebuilt state: keep its image (after e2fsck) to look at
			name := filepath.Join(dir, "state-"+strings.ReplaceAll(s.String(), ":", "-")+".img")
			if err := copyFile(filepath.Join(scratch, "state.img"), name, 0o644); err == nil {
				o.Kept = append(o.Kept, name)
			}
		}
		for _, msg := range v.Violations {
			o.Violations = append(o.Violations, fmt.Sprintf("state %s (rebuild: -power-loss-state %s:%s): %s", s, dir, s, msg))
		}
	}
	return o
}

// plSummary is the power-loss part of a trial's line.
func (o *PowerLossOutcome) summary() string {
	lost := slices.Clone(o.Lost)
	slices.Sort(lost)
	lm := "—"
	if len(lost) > 0 {
		lm = fmt.Sprintf("%d / %d / %d", lost[0], lost[len(lost)/2], lost[len(lost)-1])
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "power loss: %d states of %d flushes, %d entries (seed %#x), up to %d acks required, lost %s, %d violations, %d verify boots agreed, %.0f s", o.States, o.Flushes, o.Entries, o.Seed, o.MaxRequired, lm, len(o.Violations), o.Boots, o.Seconds)
	for _, e := range o.BootErrors {
		fmt.Fprintf(&b, "\n      lab failure (no verdict): %s", e)
	}
	return b.String()
}
