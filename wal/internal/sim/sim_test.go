package sim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/longtest"

	"github.com/stretchr/testify/require"
)

var (
	flagSeed     = flag.Int64("sim.seed", -1, "replay the schedule of this seed only")
	flagDuration = flag.Duration("sim.duration", 0, "how long TestSim explores (default 3s, 60s with DURAWAL_LONG=1)")
	flagStart    = flag.Int64("sim.start", -1, "first seed TestSim tries (default: from the clock)")
	flagAll      = flag.Bool("sim.keepgoing", false, "go on after a failing seed and report every one")
	flagTrace    = flag.Bool("sim.trace", false, "log the trace of every schedule, not only failing ones")
	flagCorpus   = flag.Int("sim.writecorpus", 0, "TestWriteCorpus: scan this many seeds and write a covering corpus to testdata/fuzz/FuzzSim")
	flagIgnore   = flag.String("sim.ignore", "", "a regular expression: schedules whose every violation matches it count as passing (known bugs)")
)

// ignored reports whether every violation of res matches -sim.ignore.
func ignored(t *testing.T, res *Result) bool {
	if *flagIgnore == "" {
		return false
	}
	re, err := regexp.Compile(*flagIgnore)
	if err != nil {
		t.Fatalf("-sim.ignore: %v", err)
	}
	for _, v := range res.Violations {
		if !re.MatchString(v) {
			return false
		}
	}
	return true
}

func report(t *testing.T, label string, sch *Schedule, res *Result) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nschedule:\n%s\ntrace:\n", label, sch)
	for _, s := range res.Trace {
		b.WriteString("  " + s + "\n")
	}
	b.WriteString("\nviolations:\n")
	for _, v := range res.Violations {
		b.WriteString("  " + v + "\n")
	}
	t.Error(b.String())
}

// TestSim explores random schedules for -sim.duration (3 s by default, a
// minute with DURAWAL_LONG=1), or replays one with -sim.seed=N. The first
// seed is -sim.start, else $DURAWAL_SIM_START (CI derives it from the
// commit: a commit's run explores the same seeds wherever it runs, and each
// commit new ones), else the clock's.
func TestSim(t *testing.T) {
	if *flagSeed >= 0 {
		sch := Generate(NewSeedSource(uint64(*flagSeed)))
		res := Execute(sch)
		if res.Failed() && ignored(t, res) {
			t.Logf("seed %d: ignored (-sim.ignore): %s", *flagSeed, res.Violations[0])
		} else if res.Failed() {
			report(t, fmt.Sprintf("seed %d: replay with go test ./wal/internal/sim -run TestSim -sim.seed=%d", *flagSeed, *flagSeed), sch, res)
		} else if *flagTrace || testing.Verbose() {
			t.Logf("schedule:\n%s\ntrace:\n  %s", sch, strings.Join(res.Trace, "\n  "))
		}
		return
	}
	d := *flagDuration
	if d == 0 {
		d = longtest.Pick(time.Minute, 3*time.Second)
	}
	start := *flagStart
	if v := os.Getenv("DURAWAL_SIM_START"); start < 0 && v != "" {
		var err error
		if start, err = strconv.ParseInt(v, 10, 64); err != nil || start < 0 {
			t.Fatalf("DURAWAL_SIM_START=%q: want a seed, a non-negative integer", v)
		}
	}
	if start < 0 {
		start = time.Now().UnixNano() % 1_000_000_000
	}
	deadline := time.Now().Add(d)
	n, failed := 0, 0
	for seed := start; time.Now().Before(deadline); seed++ {
		sch := Generate(NewSeedSource(uint64(seed)))
		res := Execute(sch)
		n++
		if res.Failed() && ignored(t, res) {
			t.Logf("seed %d: ignored (-sim.ignore): %s", seed, res.Violations[0])
			continue
		}
		if res.Failed() {
			failed++
			t.Logf("seed %d failed after %v and %d schedules", seed, time.Since(deadline.Add(-d)).Round(time.Millisecond), n)
			report(t, fmt.Sprintf("seed %d: replay with go test ./wal/internal/sim -run TestSim -sim.seed=%d", seed, seed), sch, res)
			if !*flagAll {
				break
			}
		}
	}
	t.Logf("%d schedules from seed %d in %v, %d failed", n, start, d, failed)
}

// FuzzSim decodes its input as a schedule's choices (NewByteSource): every
// byte string is a valid schedule. The corpus under testdata/fuzz/FuzzSim
// holds schedules that reach rolls into recycled files, cuts, failed syncs,
// held syncs and crashes in every mode.
func FuzzSim(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3} {
		f.Add(EncodeSeed(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sch := Generate(NewByteSource(b))
		res := Execute(sch)
		if res.Failed() {
			report(t, fmt.Sprintf("fuzz input of %d bytes", len(b)), sch, res)
		}
	})
}

// TestEncodeSeed: the choice bytes of a seed decode to the same schedule.
func TestEncodeSeed(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		a := Generate(NewSeedSource(seed)).String()
		b := Generate(NewByteSource(EncodeSeed(seed))).String()
		if a != b {
			t.Fatalf("seed %d: decoded schedule differs:\n%s\n---\n%s", seed, a, b)
		}
	}
}

// TestWriteCorpus (only with -sim.writecorpus=N) scans seeds 0..N-1 and
// writes to testdata/fuzz/FuzzSim the passing ones that reach a state no
// earlier pick reached, as fuzz inputs (EncodeSeed).
func TestWriteCorpus(t *testing.T) {
	if *flagCorpus == 0 {
		t.Skip("set -sim.writecorpus=N")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSim")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	seen := map[string]bool{}
	for seed := range uint64(*flagCorpus) {
		res := Execute(Generate(NewSeedSource(seed)))
		if res.Failed() {
			continue
		}
		var fresh []string
		for k := range res.Reached {
			if !seen[k] {
				fresh = append(fresh, k)
			}
		}
		if len(fresh) == 0 {
			continue
		}
		for _, k := range fresh {
			seen[k] = true
		}
		sort.Strings(fresh)
		b := EncodeSeed(seed)
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", seed)), []byte(body), 0o644))
		t.Logf("seed %d: %s", seed, strings.Join(fresh, ", "))
	}
}
