package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpreadAndRatios: figures print as median [min–max], and ratios pair
// runs of the same round only.
func TestSpreadAndRatios(t *testing.T) {
	if got := spread([]float64{3, 1, 2}, "%.0f"); got != "2 [1–3]" {
		t.Errorf("spread = %q", got)
	}
	if got := spread(nil, "%.0f"); got != "–" {
		t.Errorf("spread of none = %q", got)
	}
	num := []result{{Round: 1, Commits: 300, Seconds: 1}, {Round: 2, Commits: 200, Seconds: 1}}
	den := []result{{Round: 2, Commits: 100, Seconds: 1}, {Round: 1, Commits: 100, Seconds: 1}, {Round: 3, Commits: 50, Seconds: 1}}
	got := ratios(num, den, result.perSec)
	if len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Errorf("ratios = %v, want [3 2] (round 1, then round 2; round 3 has no numerator)", got)
	}
}

// TestQuickAB builds the cell program twice against the working tree (a
// and b the same) and runs a short comparison: both builds and pebble run
// in every round, in alternating order, and the table and the JSON come
// out with a ratio near 1 for the same code.
func TestQuickAB(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if _, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err != nil {
		t.Skip("not in a git work tree")
	}
	if err := os.Chdir(".."); err != nil { // ab runs from bench/peers
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir("ab") })
	jsonPath := filepath.Join(t.TempDir(), "ab.json")
	var out, errOut bytes.Buffer
	args := []string{"-a", ".", "-b", ".", "-quick", "-writers", "2", "-policies", "sync,buffered",
		"-duration", "100ms", "-dir", t.TempDir(), "-json", jsonPath}
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"# A/B: a = working tree", "## SyncEveryCommit", "## BufferedInterval", "| 2 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []result `json:"results"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	// 2 rounds × 2 policies × (a, b, pebble), the order reversed in round 2.
	if len(res.Results) != 12 {
		t.Fatalf("%d cell runs, want 12", len(res.Results))
	}
	if first, second := res.Results[0], res.Results[6]; first.Build != "a" || second.Build != "pebble" {
		t.Errorf("round 1 starts with %s, round 2 with %s; want a, then pebble (reversed)", first.Build, second.Build)
	}
	for _, r := range res.Results {
		if r.Commits == 0 || r.Seconds <= 0 {
			t.Errorf("no commits: %+v", r)
		}
		if r.Policy == "sync" && r.Syncs == 0 {
			t.Errorf("a durable cell counted no fsync: %+v", r)
		}
	}
}
