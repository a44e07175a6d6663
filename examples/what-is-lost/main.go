// What-is-lost measures the thing none of the four articles the lessons
// follow could: how many acknowledged commits each policy actually loses, in
// the two crashes that matter, set beside what the policy promises (the
// policy table in the top-level README.md, "Policies", and the doc of each
// constructor in package policy).
//
//   - Power loss. The log runs on vfs.NewMem(), an in-memory filesystem that
//     remembers which bytes were synced. While four committers are running,
//     PowerLoss(vfs.DropAll()) takes the image a power cut would leave: only
//     synced bytes and synced directory entries. The image is reopened and
//     read back.
//   - Process crash (kill -9). The program runs itself again as a child
//     process that commits to a real directory and prints each acknowledged
//     record; the parent SIGKILLs it mid-run, reopens the directory and reads
//     it back. The page cache survives, as it does on a real machine.
//
// A commit counts as acknowledged when Append returned nil before the crash.
// "lost" counts those that recovery did not find; "oldest" is how long before
// the crash the oldest lost one had been acknowledged: the loss window.
//
//   - A real kernel crash, only with -kernel=on (or -kernel=auto, which runs
//     it when QEMU and the crash lab's other tools are installed): a Linux
//     guest under QEMU crashed with sysrq-c amid commits, one trial per
//     policy, adding two "real kernel crash" columns (see kernel.go and
//     bench/cmd/crashlab). It takes about 2 minutes more.
//
// Run it:
//
//	go run ./examples/what-is-lost              # each crash after ~1.3 s of commits (about 16 s)
//	go run ./examples/what-is-lost -quick       # after ~0.3 s (a few seconds)
//	go run ./examples/what-is-lost -kernel=on   # and a real kernel crash per policy (about 2 min more)
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/durawal/durawal/examples/internal/lesson"
	"github.com/durawal/durawal/internal/measure"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// policies are the rows: each with what it promises to lose (README.md,
// "Policies").
var policies = []struct {
	name          string
	policy        func() policy.Policy
	onKill, onCut string // the promise: loss on a process crash, on power loss
}{
	{"innodb=1", func() policy.Policy { p, _ := policy.InnoDB(1); return p }, "nothing", "nothing"},
	{"innodb=2", func() policy.Policy { p, _ := policy.InnoDB(2); return p }, "nothing", "≤ 1 s + 2 fsyncs"},
	{"innodb=0", func() policy.Policy { p, _ := policy.InnoDB(0); return p }, "≤ 1 s", "≤ 1 s + 2 fsyncs"},
	{"everysec", func() policy.Policy { p, _ := policy.AppendFsync("everysec"); return p }, "≤ 2 s postponed", "≤ 1 s + 2 fsyncs"},
	{"no", func() policy.Policy { p, _ := policy.AppendFsync("no"); return p }, "nothing", "all unsynced"},
	{"async-commit", policy.PostgresAsync, "≤ 3 × 200 ms", "≤ 3 × 200 ms + fsync"},
}

const (
	committers = 4
	childEnv   = "DURAWAL_WHAT_IS_LOST_CHILD" // "policy-name directory" in the child
)

func main() {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	lesson.Main(run)
}

func run(ctx context.Context, dir string, quick bool, out io.Writer) error {
	runFor := lesson.Pick(quick, 1300*time.Millisecond, 300*time.Millisecond)

	cuts, kills := map[string]outcome{}, map[string]outcome{}
	kernel, kernelNote := realKernel(ctx, dir, quick)
	t := lesson.NewTable("policy", "power loss: lost / acked", "oldest lost",
		"kill -9: lost / acked", "oldest lost", "promise: kill -9", "promise: power loss",
		"real kernel crash: lost / acked", "oldest lost")
	for _, p := range policies {
		cut, err := powerLoss(ctx, p.policy(), runFor)
		if err != nil {
			return fmt.Errorf("%s, power loss: %w", p.name, err)
		}
		kill, err := processKill(ctx, p.name, filepath.Join(dir, p.name), runFor)
		if err != nil {
			return fmt.Errorf("%s, kill -9: %w", p.name, err)
		}
		cuts[p.name], kills[p.name] = cut, kill
		kl, kw := "—", "—"
		if k, ok := kernel[p.name]; ok {
			kl, kw = k.lostOf(), k.window()
		}
		t.Row(p.name, cut.lostOf(), cut.window(), kill.lostOf(), kill.window(), p.onKill, p.onCut, kl, kw)
	}
	t.Fprint(out)
	fmt.Fprintln(out)
	fmt.Fprintln(out, kernelNote)

	lesson.Explain(out, explain(runFor, cuts, kills))
	return nil
}

// explain returns the lesson's paragraph, each claim chosen from the
// measured outcomes (by policy name) and the time each crash came.
func explain(runFor time.Duration, cuts, kills map[string]outcome) string {
	var b strings.Builder
	b.WriteString(`Every row kept its promise if its "lost" is 0 where the promise says nothing
		and its oldest loss lies inside the promised window elsewhere. `)
	if one := cuts["innodb=1"].lost + kills["innodb=1"].lost; one == 0 {
		b.WriteString(`innodb=1 fsyncs before it acknowledges, so neither crash loses anything. `)
	} else {
		fmt.Fprintf(&b, `innodb=1 fsyncs before it acknowledges, so neither crash should lose
			anything; here it lost %d, which is a bug. `, one)
	}
	var broke []string
	for _, name := range []string{"innodb=2", "everysec", "no"} {
		if n := kills[name].lost; n > 0 {
			broke = append(broke, fmt.Sprintf("%s lost %d", name, n))
		}
	}
	if len(broke) == 0 {
		b.WriteString(`The policies that write at commit (innodb=2, everysec, no) lose nothing
			to kill -9, because a write that returned is in the kernel's page cache, which
			outlives the process; `)
	} else {
		fmt.Fprintf(&b, `The policies that write at commit (innodb=2, everysec, no) should lose
			nothing to kill -9, because a write that returned is in the kernel's page cache,
			which outlives the process; here %s, which is a bug; `, strings.Join(broke, " and "))
	}
	oldest := max(cuts["innodb=2"].oldest, cuts["everysec"].oldest).Round(time.Millisecond)
	b.WriteString(`on power loss they lose what was written but not yet synced: up to a second
		for the interval policies `)
	if runFor < time.Second {
		fmt.Fprintf(&b, `(each crash here came %s in, before the first once-a-second sync, so
			nothing they had acknowledged was synced yet: the oldest loss was %s; a crash
			just before a later sync would lose nearly a second), `, runFor, oldest)
	} else {
		fmt.Fprintf(&b, `(each crash here came %s in, so they lost what followed the sync at the
			%d s mark, the oldest %s before the crash; a crash just before the next sync
			would lose nearly a second), `, runFor, int(runFor/time.Second), oldest)
	}
	no := cuts["no"]
	if no.lost == no.acked {
		b.WriteString(`and for no everything since the last sync, which here means everything
			(a real kernel writes back dirty pages within about 30 s, the simulated power cut
			keeps none of them). `)
	} else {
		fmt.Fprintf(&b, `and for no everything since the last sync, here %s of %s acknowledged
			commits (it syncs only at Sync, Close and segment rolls; a real kernel also writes
			back dirty pages within about 30 s, the simulated power cut keeps none of them). `,
			measure.Thousands(int64(no.lost)), measure.Thousands(int64(no.acked)))
	}
	zero, async := kills["innodb=0"], kills["async-commit"]
	fmt.Fprintf(&b, `The buffered policies (innodb=0, async-commit) acknowledge from the log
		buffer in memory, so even kill -9 can lose their last interval (here %s and %s
		commits). `, measure.Thousands(int64(zero.lost)), measure.Thousands(int64(async.lost)))
	zc, ac := cuts["innodb=0"], cuts["async-commit"]
	if ac.lost > 0 && (zc.lost == 0 || ac.oldest >= zc.oldest) {
		fmt.Fprintf(&b, `async-commit's writer wakes every 200 ms against innodb=0's once a
			second, so its window should be the shorter one; here it was not (oldest power-loss
			loss %s against %s). `, ac.window(), zc.window())
	} else {
		fmt.Fprintf(&b, `async-commit's window is shorter because its writer wakes every 200 ms
			against innodb=0's once a second (oldest power-loss loss %s against %s). `,
			ac.window(), zc.window())
	}
	b.WriteString(`Counts depend on the commit rate (four committers, each pausing a
		millisecond between commits); the window in time is what the policy bounds.`)
	return lesson.OneLine(b.String())
}

// outcome is what one crash did to the acknowledged commits.
type outcome struct {
	acked, lost int
	oldest      time.Duration // how long before the crash the oldest lost commit was acked
}

func (o outcome) lostOf() string {
	return fmt.Sprintf("%s / %s", measure.Thousands(int64(o.lost)), measure.Thousands(int64(o.acked)))
}

func (o outcome) window() string {
	if o.lost == 0 {
		return "—"
	}
	return o.oldest.Round(time.Millisecond).String()
}

// acks records acknowledged commits: record id → when Append returned.
type acks struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (a *acks) add(id string, t time.Time) {
	a.mu.Lock()
	a.at[id] = t
	a.mu.Unlock()
}

// snapshot returns a copy of the acks recorded up to now.
func (a *acks) snapshot() map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := make(map[string]time.Time, len(a.at))
	for id, t := range a.at {
		m[id] = t
	}
	return m
}

// commitLoop appends records "c<client>-<seq>" about once a millisecond per
// committer until ctx ends, calling ack after each Append that returned nil.
func commitLoop(ctx context.Context, l *wal.Log, ack func(id string)) error {
	var wg sync.WaitGroup
	errs := make(chan error, committers)
	for c := range committers {
		wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				id := fmt.Sprintf("c%d-%d", c, seq)
				if _, err := l.Append([]byte(id + " " + strings.Repeat(".", 80))); err != nil {
					errs <- err
					return
				}
				ack(id)
				time.Sleep(time.Millisecond) // a client's think time
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// powerLoss runs the committers on a MemFS and takes a power-loss image while
// they run, then counts the commits acknowledged before it that the image lost.
func powerLoss(ctx context.Context, p policy.Policy, runFor time.Duration) (outcome, error) {
	mem := vfs.NewMem()
	const dir = "/lesson"
	// Small segments: a MemFS sync copies the whole file.
	l, err := wal.Open(dir, wal.Options{Policy: p, FS: mem, SegmentSize: 2 << 20})
	if err != nil {
		return outcome{}, err
	}
	a := &acks{at: map[string]time.Time{}}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- commitLoop(runCtx, l, func(id string) { a.add(id, time.Now()) }) }()

	time.Sleep(runFor)
	acked := a.snapshot() // acknowledged before the power went
	crashed := time.Now()
	image := mem.PowerLoss(vfs.DropAll())
	stop()
	if err := <-done; err != nil {
		return outcome{}, err
	}
	l.Close() // the log on mem lives on; only the image matters

	return recoverAndCount(dir, wal.Options{Policy: p, FS: image}, acked, crashed)
}

// processKill runs the committers in a child process on a real directory,
// SIGKILLs it, and counts the commits it had acknowledged that reopening lost.
func processKill(ctx context.Context, name, dir string, runFor time.Duration) (outcome, error) {
	exe, err := os.Executable()
	if err != nil {
		return outcome{}, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+name+" "+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return outcome{}, err
	}
	if err := cmd.Start(); err != nil {
		return outcome{}, err
	}

	// Every line the child prints is a commit it acknowledged.
	a := &acks{at: map[string]time.Time{}}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			a.add(sc.Text(), time.Now())
		}
	}()
	time.Sleep(runFor)
	crashed := time.Now()
	cmd.Process.Signal(syscall.SIGKILL) // kill -9: no deferred Close, no final flush
	<-lines                             // what it printed before dying: all acknowledged
	cmd.Wait()

	p := policies[0].policy()
	for _, q := range policies {
		if q.name == name {
			p = q.policy()
		}
	}
	return recoverAndCount(dir, wal.Options{Policy: p}, a.snapshot(), crashed)
}

// child is the process that processKill kills: it commits until killed,
// printing the id of each acknowledged record on its own line.
func child() int {
	name, dir, _ := strings.Cut(os.Getenv(childEnv), " ")
	var p policy.Policy
	for _, q := range policies {
		if q.name == name {
			p = q.policy()
		}
	}
	l, err := wal.Open(dir, wal.Options{Policy: p, SegmentSize: 16 << 20})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // if nobody kills it
	defer cancel()
	err = commitLoop(ctx, l, func(id string) {
		mu.Lock()
		os.Stdout.WriteString(id + "\n") // unbuffered: printed means acknowledged
		mu.Unlock()
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// recoverAndCount reopens the log (recovery runs), reads every record back and
// counts the acknowledged ids it did not find.
func recoverAndCount(dir string, opts wal.Options, acked map[string]time.Time, crashed time.Time) (outcome, error) {
	l, err := wal.Open(dir, opts)
	if err != nil {
		return outcome{}, err
	}
	defer l.Close()
	r, err := l.NewReader(0)
	if err != nil {
		return outcome{}, err
	}
	defer r.Close()
	found := map[string]bool{}
	for {
		_, rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return outcome{}, err
		}
		id, _, _ := strings.Cut(string(rec), " ")
		found[id] = true
	}
	o := outcome{acked: len(acked)}
	for id, at := range acked {
		if !found[id] {
			o.lost++
			o.oldest = max(o.oldest, crashed.Sub(at))
		}
	}
	return o, nil
}
