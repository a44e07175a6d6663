package wal_test

// A real process crash: the test binary re-executes itself as a child
// (TestKillChild) that commits 100-byte records in a loop on a real
// directory and prints each acknowledgment; the parent SIGKILLs it at a
// random moment, reopens the log and checks what the child had
// acknowledged. SIGKILL loses the process's memory but not the page cache,
// so this is the "process crash" column of the policy table: policies whose
// commit waits for the write or the sync lose nothing acknowledged; the
// buffered ones lose at most their window. Recovery always yields a
// byte-identical prefix.

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/decide"
	"github.com/durawal/durawal/internal/longtest"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

const (
	killEnvDir    = "DURAWAL_KILL_DIR"
	killEnvPolicy = "DURAWAL_KILL_POLICY"
	killEnvMethod = "DURAWAL_KILL_METHOD"
	killSegSize   = 16 << 10 // rolls every 127 records
)

// killPolicies are the policies the kill test runs, with the P-crash window:
// how old an acknowledgment must be at the kill to be promised (0: all).
// eps is realEps: the child's timers and the parent's reads run on a noisy
// real clock.
func killPolicies() []crashCase {
	cases := crashCases()
	out := make([]crashCase, len(cases))
	for i, cc := range cases {
		switch cc.pol.Kind() {
		case policy.KindSyncInterval:
			cc.pol = policy.SyncInterval(20 * time.Millisecond)
		case policy.KindSyncIntervalPostponed:
			cc.pol = policy.SyncIntervalPostponed(20*time.Millisecond, 40*time.Millisecond)
		case policy.KindBufferedInterval:
			cc.pol = policy.BufferedInterval(20*time.Millisecond, 10*time.Millisecond)
		case policy.KindAsyncCommit:
			cc.pol = policy.AsyncCommit(10*time.Millisecond, 0)
		}
		pol := cc.pol
		cc.window = func(F, eps time.Duration) (time.Duration, time.Duration) {
			switch pol.Kind() {
			case policy.KindSyncIntervalPostponed:
				return pol.MaxPostpone() + decide.Tick(pol) + eps, never
			case policy.KindBufferedInterval:
				return pol.WriteDelay() + eps, never
			case policy.KindAsyncCommit:
				return 3*pol.Interval() + F + eps, never
			}
			return 0, never
		}
		out[i] = cc
	}
	return out
}

// killRecord is the child's record i: 100 bytes naming i.
func killRecord(i int) []byte { return payload(i, 100) }

// TestKillChild is the child: it runs only when the parent sets the
// environment, and commits until it is killed (or 20 s pass).
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killEnvDir)
	if dir == "" {
		t.Skip("the child of TestKillRecovery")
	}
	idx, err := strconv.Atoi(os.Getenv(killEnvPolicy))
	if err != nil {
		t.Fatal(err)
	}
	pol := killPolicies()[idx].pol
	method, err := vfs.ParseSyncMethod(os.Getenv(killEnvMethod))
	if err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(dir, wal.Options{Policy: pol, SegmentSize: killSegSize, SyncMethod: method})
	if err != nil {
		fmt.Printf("err open: %v\n", err)
		os.Exit(3)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		lsn, err := l.Append(killRecord(i))
		if err != nil {
			fmt.Printf("err append %d: %v\n", i, err)
			os.Exit(3)
		}
		// One write per line, unbuffered: what the parent reads was acked,
		// and every frame below the written LSN printed with it had been
		// handed to the OS.
		os.Stdout.WriteString(fmt.Sprintf("ack %d %d %d %d\n", i, lsn, time.Now().UnixNano(), l.WrittenLSN()))
		time.Sleep(50 * time.Microsecond)
	}
	os.Exit(4)
}

type killAck struct {
	i       int
	lsn     wal.LSN
	at      time.Time
	written wal.LSN // the child's WrittenLSN just after the ack
}

func TestKillRecovery(t *testing.T) {
	if os.Getenv(killEnvDir) != "" {
		t.Skip("in the child")
	}
	kills := longtest.Pick(3, 2) // kills per policy and method; 3 with DURAWAL_LONG=1
	if testing.Short() {
		kills = 1
	}
	// O_DIRECT needs a filesystem that takes it; TMPDIR on tmpfs (older
	// kernels), overlayfs or FUSE may refuse it.
	directErr := func() error {
		f, err := vfs.OS().Create(filepath.Join(t.TempDir(), "probe"), vfs.ODirect)
		if err == nil {
			f.Close()
		}
		return err
	}()
	for _, m := range vfs.SyncMethods() {
		for idx, kc := range killPolicies() {
			name := kc.pol.String()
			if m != vfs.Fdatasync {
				name = m.String() + "/" + name
			}
			t.Run(name, func(t *testing.T) {
				if m.Direct() && directErr != nil {
					t.Skipf("the test directory's filesystem refuses O_DIRECT: %v", directErr)
				}
				t.Parallel()
				n := kills
				if m != vfs.Fdatasync {
					n = 1 // every method × policy once; the default method gets the repeats
				}
				for k := range n {
					rng := rand.New(rand.NewPCG(uint64(idx), uint64(k)))
					killOnce(t, idx, kc, m, rng)
				}
			})
		}
	}
}

func killOnce(t *testing.T, idx int, kc crashCase, m vfs.SyncMethod, rng *rand.Rand) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), killEnvDir+"="+dir, killEnvPolicy+"="+strconv.Itoa(idx), killEnvMethod+"="+m.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	eps := realEps(kc.pol.Interval())
	// F, the longest sync, is unknown here: the child runs on the real disk.
	// Without write-through a kill loses nothing a sync was still covering;
	// under O_DSYNC every write is a sync, and this VM's disk has taken over
	// 100 ms for one (a newcomer's run failed by 6 ms with F = 0).
	var F time.Duration
	if m.WriteThrough() {
		F = 250 * time.Millisecond
	}
	pw, _ := kc.window(F, eps)
	minAcks := 20 + rng.IntN(200)
	runFor := 2*pw + time.Duration(rng.IntN(100))*time.Millisecond // long enough for the window to matter

	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var acks []killAck
	parse := func(line string) {
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "ack" {
			if strings.HasPrefix(line, "err") {
				t.Errorf("child: %s", line)
			}
			return
		}
		i, _ := strconv.Atoi(f[1])
		lsn, _ := strconv.ParseUint(f[2], 10, 64)
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		w, _ := strconv.ParseUint(f[4], 10, 64)
		acks = append(acks, killAck{i, wal.LSN(lsn), time.Unix(0, ns), wal.LSN(w)})
	}
	var start time.Time
	timeout := time.After(30 * time.Second)
	for len(acks) < minAcks || start.IsZero() || time.Since(start) < runFor {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("child exited before the kill, after %d acks", len(acks))
			}
			parse(line)
			if start.IsZero() && len(acks) > 0 {
				start = time.Now()
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("child too slow: %d acks", len(acks))
		}
	}
	time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
	killedAt := time.Now()
	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	for line := range lines {              // acks printed before the kill
		parse(line)
	}
	_ = cmd.Wait()

	got, err := recoverImage(t, vfs.OS(), dir, wal.Options{SegmentSize: killSegSize, SyncMethod: m})
	require.NoError(t, err, "reopen after SIGKILL")
	label := fmt.Sprintf("%s %v kill after %d acks", kc.pol, m, len(acks))
	for n := range got.lsns {
		require.Equal(t, killRecord(n), got.recs[n], "%s: I1/I2: recovered record %d", label, n)
	}
	// What must survive is judged by the child's own progress, not by the
	// clocks: a record acknowledged where commits wait for the write
	// (pw == 0), or below a WrittenLSN the child printed before the kill,
	// was in the page cache, which SIGKILL keeps. Whether the buffered
	// policies wrote within their window is a matter of time: the fake
	// clock checks that bound exactly (TestPolicyCrashBounds); here a
	// starved child (a busy machine) can miss it without a fault, so it is
	// only reported.
	var written wal.LSN
	for _, a := range acks {
		written = max(written, a.written)
	}
	lost, late := 0, 0
	for _, a := range acks {
		if a.i < len(got.lsns) {
			require.Equal(t, a.lsn, got.lsns[a.i], "%s: record %d at the LSN it was acked with", label, a.i)
			continue
		}
		lost++
		if pw == 0 || a.lsn < written {
			t.Fatalf("%s: record %d (LSN %d) acked %v before the kill is lost, though the child had written up to LSN %d (window %v); recovered %d",
				label, a.i, a.lsn, killedAt.Sub(a.at), written, pw, len(got.lsns))
		}
		if a.at.Before(killedAt.Add(-pw)) {
			late++
		}
	}
	t.Logf("%s: recovered %d records, %d acked ones lost (window %v, %d of them older than it: the child's flusher ran late; torn bytes %d)",
		label, len(got.lsns), lost, pw, late, got.info.TornBytes)
}
