package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLab runs the real lab (QEMU, a kernel crash, a verify boot, ten
// power-loss states a trial): two trials of SyncEveryCommit (one amid
// commits, one in a lull), which must pass, and the same on both negative
// controls (-negative), which must be flagged, in the power-loss states too.
// Only with CRASHLAB=1: it needs the tools main prints and a few minutes
// under TCG.
func TestLab(t *testing.T) {
	if os.Getenv("CRASHLAB") != "1" {
		t.Skip("set CRASHLAB=1 to crash real kernels under QEMU")
	}
	work := t.TempDir()
	bin := filepath.Join(work, "crashlab")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	lab := func(extra ...string) (string, int) {
		args := append([]string{"-work", filepath.Join(work, "w"), "-trials", "2", "-policies", "SyncEveryCommit", "-power-loss", "10"}, extra...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, rc := lab()
	t.Logf("%s", out)
	if rc != 0 {
		t.Fatalf("the lab failed on the library as released (exit %d)", rc)
	}
	for _, neg := range []string{negBroken, negLate} {
		out, rc := lab("-negative", neg)
		t.Logf("%s", out)
		// Lost acks, or (when a skipped roll sync left a zeroed segment) a failed recovery.
		if rc != 1 || !strings.Contains(out, ": VIOLATION, crash") || !strings.Contains(out, "VIOLATION power loss") {
			t.Errorf("the negative control %s was not flagged by both the OS crash and the power-loss states: exit %d", neg, rc)
		}
	}
}
